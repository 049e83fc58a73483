/* cli_describe.c — the multi-line key/value view of `drover describe`:
 * scalars aligned under their keys, nested objects indented, arrays of
 * objects as dashed items, multi-line strings as indented blocks. Values
 * are rendered and sanitized as table cells are (cli_output.c). */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static bool is_scalarish(const json_t *v)
{
    if (json_is_object(v))
        return json_object_size(v) == 0;
    if (json_is_array(v)) {
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) if (json_is_object(e) || json_is_array(e)) return false;
    }
    return true;
}

static void describe_value(const json_t *v, char *out, size_t n)
{
    if (json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0) ||
        (json_is_array(v) && json_array_size(v) == 0) ||
        (json_is_object(v) && json_object_size(v) == 0)) {
        snprintf(out, n, "<none>");
        return;
    }
    if (json_is_array(v)) {
        size_t i, len = 0;
        const json_t *e;
        out[0] = '\0';
        json_array_foreach(v, i, e) {
            char one[DRV_CLI_CELL_MAX];
            drv_cli_render(e, one, sizeof one);
            len += (size_t)snprintf(out + len, len < n ? n - len : 0, "%s%s", i ? ", " : "", one);
            if (len >= n)
                break;
        }
        return;
    }
    drv_cli_render(v, out, n);
}

/* Multi-line text (a log tail) as lines at `indent`; a final newline
 * ends the last line rather than adding an empty one. */
static void print_block(const char *s, int indent)
{
    while (*s) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        printf("%*s", indent, "");
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c == '\r' && i + 1 == len)
                continue;
            fputc((c < 0x20 && c != '\t') || c == 0x7f ? ' ' : c, stdout);
        }
        fputc('\n', stdout);
        s += len + (nl ? 1 : 0);
    }
}

/* Print obj's keys at `indent`; with dash, the first line starts "- ". */
static void describe_obj(const json_t *obj, int indent, bool dash)
{
    const char *k;
    const json_t *v;
    int width = 0;
    json_object_foreach((json_t *)obj, k, v) if (is_scalarish(v) && drv_cli_width(k) > width) width =
        drv_cli_width(k);
    bool first = true;
    json_object_foreach((json_t *)obj, k, v) {
        if (first && dash)
            printf("%*s- ", indent - 2, "");
        else
            printf("%*s", indent, "");
        first = false;
        if (json_is_string(v) && strchr(json_string_value(v), '\n')) {
            printf("%s: |\n", k);
            print_block(json_string_value(v), indent + 2);
        } else if (is_scalarish(v)) {
            char buf[4 * DRV_CLI_CELL_MAX];
            describe_value(v, buf, sizeof buf);
            drv_cli_sanitize(buf);
            printf("%s:%*s %s\n", k, width - drv_cli_width(k), "", buf);
        } else if (json_is_object(v)) {
            printf("%s:\n", k);
            describe_obj(v, indent + 2, false);
        } else {
            size_t i;
            const json_t *e;
            printf("%s:\n", k);
            json_array_foreach(v, i, e) {
                if (json_is_object(e) && json_object_size(e) > 0) {
                    describe_obj(e, indent + 4, true);
                } else {
                    char buf[4 * DRV_CLI_CELL_MAX];
                    describe_value(e, buf, sizeof buf);
                    drv_cli_sanitize(buf);
                    printf("%*s- %s\n", indent + 2, "", buf);
                }
            }
        }
    }
}

void drv_cli_describe(const json_t *obj)
{
    if (json_is_object(obj))
        describe_obj(obj, 0, false);
}
