/* cli_output.c — how the CLI prints: tables (-o table, -o wide) laid out
 * from per-kind column tables, pretty JSON, YAML, one-time secrets, and
 * errors (drv_cli_fail). It calls no other file of the CLI but its column
 * tables (cli_columns.c), so every command file may call it (describe's
 * view is cli_describe.c).
 *
 * Tables are kubectl-like: uppercase headers, columns aligned with three
 * spaces, "-" for an absent value, control characters from the server
 * replaced so a value cannot break the layout or the terminal. Column
 * layouts are data (a table per kind, in cli_columns.c); a cell is a
 * dotted JSON path plus an optional formatter.
 */
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli_output_int.h"
#include "common/yaml.h"

/* ---- values ------------------------------------------------------------------ */

static const json_t *get_path(const json_t *item, const char *path)
{
    char key[128];
    const json_t *v = item;
    while (path && *path && v) {
        const char *dot = strchr(path, '.');
        size_t len = dot ? (size_t)(dot - path) : strlen(path);
        snprintf(key, sizeof key, "%.*s", (int)len, path);
        v = json_object_get(v, key);
        path = dot ? dot + 1 : NULL;
    }
    return v;
}

static void fmt_real(double d, char *out, size_t n)
{
    snprintf(out, n, "%.15g", d);
}

/* Plain rendering: strings as they are, scalar arrays comma-joined. */
void drv_cli_render(const json_t *v, char *out, size_t n)
{
    out[0] = '\0';
    if (!v)
        return;
    switch (json_typeof(v)) {
    case JSON_STRING:
        snprintf(out, n, "%s", json_string_value(v));
        break;
    case JSON_INTEGER:
        snprintf(out, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL:
        fmt_real(json_real_value(v), out, n);
        break;
    case JSON_TRUE:
        snprintf(out, n, "true");
        break;
    case JSON_FALSE:
        snprintf(out, n, "false");
        break;
    case JSON_ARRAY: {
        size_t i, len = 0;
        const json_t *e;
        json_array_foreach(v, i, e) {
            char one[DRV_CLI_CELL_MAX];
            if (json_is_object(e) && json_object_get(e, "id"))
                drv_cli_render(json_object_get(e, "id"), one, sizeof one);
            else
                drv_cli_render(e, one, sizeof one);
            len += (size_t)snprintf(out + len, len < n ? n - len : 0, "%s%s", i ? "," : "", one);
            if (len >= n)
                break;
        }
        break;
    }
    case JSON_OBJECT: {
        char *s = json_dumps(v, JSON_COMPACT);
        snprintf(out, n, "%s", s ? s : "");
        free(s);
        break;
    }
    default:
        break;
    }
}

/* RFC 3339 -> epoch seconds; -1 when unparsable. */
long long drv_cli__parse_time(const char *s)
{
    struct tm tm = {0};
    int y, mo, d, h, mi, sec, used = 0;
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &used) != 6)
        return -1;
    tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d;
    tm.tm_hour = h, tm.tm_min = mi, tm.tm_sec = sec;
    long long t = (long long)timegm(&tm);
    const char *p = s + used;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
    int oh, om;
    if ((*p == '+' || *p == '-') && sscanf(p + 1, "%2d:%2d", &oh, &om) == 2)
        t -= (*p == '+' ? 1 : -1) * (oh * 3600LL + om * 60LL);
    return t;
}

static void fmt_duration(long long s, char *out, size_t n)
{
    if (s < 0)
        s = 0;
    if (s < 120)
        snprintf(out, n, "%llds", s);
    else if (s < 2 * 3600)
        snprintf(out, n, "%lldm", s / 60);
    else if (s < 48 * 3600)
        snprintf(out, n, "%lldh", s / 3600);
    else
        snprintf(out, n, "%lldd", s / 86400);
}

void drv_cli_age(const char *rfc3339, char *out, size_t n)
{
    long long t = drv_cli__parse_time(rfc3339);
    if (t < 0)
        out[0] = '\0';
    else
        fmt_duration((long long)time(NULL) - t, out, n);
}

/* ---- tables ------------------------------------------------------------------------- */

/* Replace control characters so a cell stays on one line. */
void drv_cli_sanitize(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = ' ';
}

/* Display width: code points, not bytes. */
int drv_cli_width(const char *s)
{
    int w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

static bool col_shown(const column_t *c, bool wide, bool show_owner)
{
    if ((c->flags & COL_WIDE) && !wide)
        return false;
    if ((c->flags & COL_NARROW) && wide)
        return false;
    if ((c->flags & COL_OWNER) && !wide && !show_owner)
        return false;
    return true;
}

void drv_cli_print_table(const char *kind, const json_t *items, bool wide, bool show_owner)
{
    drv_cli_print_table_at(kind, items, wide, show_owner, 0);
}

void drv_cli_print_table_at(const char *kind, const json_t *items, bool wide, bool show_owner,
                            int indent)
{
    const column_t *cols = drv_cli__columns_of(kind);
    size_t ncols = 0, nrows = json_array_size(items);
    while (cols[ncols].header)
        ncols++;
    char **cells = calloc((nrows + 1) * ncols, sizeof *cells);
    int *widths = calloc(ncols, sizeof *widths);
    if (!cells || !widths) {
        free(cells);
        free(widths);
        fprintf(stderr, "error: out of memory\n");
        return;
    }
    for (size_t c = 0; c < ncols; c++) {
        cells[c] = strdup(cols[c].header);
        widths[c] = drv_cli_width(cols[c].header);
    }
    for (size_t r = 0; r < nrows; r++) {
        const json_t *item = json_array_get(items, r);
        for (size_t c = 0; c < ncols; c++) {
            char buf[DRV_CLI_CELL_MAX];
            const json_t *v = get_path(item, cols[c].path);
            buf[0] = '\0';
            if (cols[c].fmt)
                cols[c].fmt(item, v, buf, sizeof buf);
            else
                drv_cli_render(v, buf, sizeof buf);
            if (!buf[0])
                snprintf(buf, sizeof buf, "-");
            drv_cli_sanitize(buf);
            char *cell = strdup(buf);
            cells[(r + 1) * ncols + c] = cell;
            if (cell && drv_cli_width(cell) > widths[c])
                widths[c] = drv_cli_width(cell);
        }
    }
    size_t last = 0;
    for (size_t c = 0; c < ncols; c++)
        if (col_shown(&cols[c], wide, show_owner))
            last = c;
    for (size_t r = 0; r <= nrows; r++) {
        bool first = true;
        printf("%*s", indent, "");
        for (size_t c = 0; c < ncols; c++) {
            if (!col_shown(&cols[c], wide, show_owner))
                continue;
            const char *cell = cells[r * ncols + c] ? cells[r * ncols + c] : "";
            fputs(first ? "" : "   ", stdout);
            fputs(cell, stdout);
            if (c != last)
                printf("%*s", widths[c] - drv_cli_width(cell), "");
            first = false;
        }
        fputc('\n', stdout);
    }
    for (size_t i = 0; i < (nrows + 1) * ncols; i++)
        free(cells[i]);
    free(cells);
    free(widths);
}

/* ---- JSON / YAML ------------------------------------------------------------------ */

/* True when every real in v survives 15 significant digits, so the
 * output shows 0.1 rather than 0.10000000000000001. */
static bool reals_short(const json_t *v)
{
    const char *k;
    size_t i;
    const json_t *e;
    char buf[64];
    switch (json_typeof(v)) {
    case JSON_REAL:
        snprintf(buf, sizeof buf, "%.15g", json_real_value(v));
        return strtod(buf, NULL) == json_real_value(v);
    case JSON_ARRAY:
        json_array_foreach(v, i, e) if (!reals_short(e)) return false;
        return true;
    case JSON_OBJECT:
        json_object_foreach((json_t *)v, k, e) if (!reals_short(e)) return false;
        return true;
    default:
        return true;
    }
}

int drv_cli_fail(drv_cli_t *cli, const drv_error_t *err)
{
    fprintf(stderr, "error: %s", err->message[0] ? err->message : "unknown error");
    if (err->field[0])
        fprintf(stderr, " (field: %s)", err->field);
    if (err->status == 401 && cli && cli->token_missing)
        fprintf(stderr, " (no token configured: run 'drover login --server URL --token TOKEN' "
                        "or set DROVER_TOKEN)");
    fputc('\n', stderr);
    return DRV_CLI_FAIL;
}

int drv_cli_print_doc(const drv_cli_t *cli, const json_t *doc)
{
    if (cli->format == DRV_OUT_YAML) {
        drv_error_t err = {0};
        char *s = drv_yaml_dump(doc, &err);
        if (!s)
            return drv_cli_fail(NULL, &err);
        fputs(s, stdout);
        free(s);
        return DRV_CLI_OK;
    }
    size_t flags = JSON_INDENT(2) | JSON_ENCODE_ANY;
    if (reals_short(doc))
        flags |= JSON_REAL_PRECISION(15);
    json_dumpf(doc, stdout, flags);
    fputc('\n', stdout);
    return DRV_CLI_OK;
}

int drv_cli_print(const drv_cli_t *cli, const char *kind, const json_t *doc, bool is_list,
                  bool show_owner)
{
    if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML)
        return drv_cli_print_doc(cli, doc);
    if (!is_list) {
        json_t *one = json_array();
        json_array_append(one, (json_t *)doc);
        drv_cli_print_table(kind, one, cli->format == DRV_OUT_WIDE, show_owner);
        json_decref(one);
        return DRV_CLI_OK;
    }
    if (json_array_size(doc) == 0) {
        fprintf(stderr, "No %s found.\n", kind);
        return DRV_CLI_OK;
    }
    drv_cli_print_table(kind, doc, cli->format == DRV_OUT_WIDE, show_owner);
    return DRV_CLI_OK;
}

/* ---- secrets ----------------------------------------------------------------------- */

void drv_cli_print_secret(const char *what, const char *id, const char *secret)
{
    printf("%s:  %s\nsecret: %s\nThe secret is shown only once: store it now.\n", what,
           id ? id : "?", secret ? secret : "?");
}
