/* yaml.c — YAML <-> JSON conversion (see yaml.h).
 *
 * Loading walks libyaml's event stream with a small recursive descent
 * (depth-limited) and builds jansson values; every error is reported with
 * the 1-based line and column of the offending input. Dumping feeds
 * libyaml's emitter one event per JSON value, quoting strings that would
 * otherwise read back as numbers, booleans or null.
 */
#include "common/yaml.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define TAG_PREFIX "tag:yaml.org,2002:"

typedef struct loader {
    yaml_parser_t parser;
    const char *name;
    const char *text;
    size_t len;
    drv_error_t *err;
} loader_t;

/* ---- scalar typing --------------------------------------------------- */

static bool all_in(const char *s, size_t n, const char *set)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!s[i] || !strchr(set, s[i]))
            return false;
    return true;
}

static bool is_one_of(const char *s, size_t n, const char *const *words)
{
    for (; *words; words++)
        if (strlen(*words) == n && memcmp(*words, s, n) == 0)
            return true;
    return false;
}

/* Integer (decimal with optional sign, 0o octal, 0x hex) -> JSON integer,
 * or a real when it does not fit in 64 bits. NULL when s is no integer. */
static json_t *parse_int(const char *s, size_t n)
{
    const char *digits = s;
    size_t nd = n;
    int base = 10;
    if (n > 2 && s[0] == '0' && s[1] == 'o') {
        base = 8, digits = s + 2, nd = n - 2;
        if (!all_in(digits, nd, "01234567"))
            return NULL;
    } else if (n > 2 && s[0] == '0' && s[1] == 'x') {
        base = 16, digits = s + 2, nd = n - 2;
        if (!all_in(digits, nd, "0123456789abcdefABCDEF"))
            return NULL;
    } else {
        size_t off = (s[0] == '-' || s[0] == '+') ? 1 : 0;
        if (!all_in(s + off, n - off, "0123456789"))
            return NULL;
    }
    char buf[128];
    if (nd >= sizeof buf)
        return base == 10 && n < 400 ? json_real(strtod(s, NULL)) : NULL;
    memcpy(buf, digits, nd);
    buf[nd] = '\0';
    errno = 0;
    long long v = strtoll(buf, NULL, base);
    if (errno == ERANGE)
        return base == 10 ? json_real(strtod(buf, NULL)) : NULL;
    return json_integer(v);
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool looks_float(const char *s, size_t n)
{
    size_t i = 0, intd = 0, fracd = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        i++;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++, intd++;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, fracd++;
    }
    if (intd == 0 && fracd == 0)
        return false;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '-' || s[i] == '+'))
            i++;
        size_t expd = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, expd++;
        if (expd == 0)
            return false;
    }
    return i == n;
}

json_t *drv_yaml_plain_scalar(const char *s, size_t n)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL};
    static const char *const falses[] = {"false", "False", "FALSE", NULL};
    static const char *const specials[] = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF",
                                           "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN",
                                           NULL};
    if (is_one_of(s, n, nulls))
        return json_null();
    if (is_one_of(s, n, trues))
        return json_true();
    if (is_one_of(s, n, falses))
        return json_false();
    if (is_one_of(s, n, specials))
        return NULL;                 /* JSON has no infinity or NaN */
    json_t *v = parse_int(s, n);
    if (v)
        return v;
    if (looks_float(s, n) && n < 400) {
        char buf[400];
        memcpy(buf, s, n);
        buf[n] = '\0';
        double d = strtod(buf, NULL);
        if (isfinite(d))
            return json_real(d);
        return NULL;
    }
    return json_stringn(s, n);
}

/* ---- loading ---------------------------------------------------------- */

static int fail_at(loader_t *l, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail_at(loader_t *l, yaml_mark_t mark, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return drv_err_invalid(l->err, "", "%s:%zu:%zu: %s", l->name, mark.line + 1,
                           mark.column + 1, msg);
}

/* Line and column (0-based) of a byte offset, for reader errors. */
static yaml_mark_t mark_of_offset(const loader_t *l, size_t off)
{
    yaml_mark_t m = {.index = off, .line = 0, .column = 0};
    for (size_t i = 0; i < off && i < l->len; i++) {
        if (l->text[i] == '\n')
            m.line++, m.column = 0;
        else if (((unsigned char)l->text[i] & 0xC0) != 0x80)
            m.column++;
    }
    return m;
}

static int parser_error(loader_t *l)
{
    yaml_parser_t *p = &l->parser;
    const char *problem = p->problem ? p->problem : "malformed YAML";
    switch (p->error) {
    case YAML_MEMORY_ERROR:
        return drv_err_internal(l->err, "%s: out of memory while parsing YAML", l->name);
    case YAML_READER_ERROR:
        if (p->problem_value != -1)
            return fail_at(l, mark_of_offset(l, p->problem_offset), "%s (byte 0x%02X)",
                           problem, (unsigned)p->problem_value & 0xFF);
        return fail_at(l, mark_of_offset(l, p->problem_offset), "%s", problem);
    default:
        if (p->context)
            return fail_at(l, p->problem_mark, "%s (%s at line %zu, column %zu)", problem,
                           p->context, p->context_mark.line + 1, p->context_mark.column + 1);
        return fail_at(l, p->problem_mark, "%s", problem);
    }
}

static int next_event(loader_t *l, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&l->parser, ev))
        return parser_error(l);
    return 0;
}

static bool tag_is(const yaml_char_t *tag, const char *name)
{
    return tag && strncmp((const char *)tag, TAG_PREFIX, strlen(TAG_PREFIX)) == 0 &&
           strcmp((const char *)tag + strlen(TAG_PREFIX), name) == 0;
}

static int scalar_to_json(loader_t *l, const yaml_event_t *ev, json_t **out)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    const yaml_char_t *tag = ev->data.scalar.tag;
    bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;

    if (tag && (strcmp((const char *)tag, "!") == 0 || tag_is(tag, "str"))) {
        *out = json_stringn(s, n);
    } else if (tag && !tag_is(tag, "int") && !tag_is(tag, "float") && !tag_is(tag, "bool") &&
               !tag_is(tag, "null")) {
        return fail_at(l, ev->start_mark, "unsupported tag %s", (const char *)tag);
    } else if (plain || tag) {
        *out = drv_yaml_plain_scalar(s, n);
        if (!*out)
            return fail_at(l, ev->start_mark, "\"%.*s\" cannot be represented in JSON",
                           (int)(n > 40 ? 40 : n), s);
        if (tag) {
            bool ok = tag_is(tag, "int")     ? json_is_integer(*out)
                      : tag_is(tag, "float") ? json_is_number(*out)
                      : tag_is(tag, "bool")  ? json_is_boolean(*out)
                                             : json_is_null(*out);
            if (!ok) {
                json_decref(*out);
                *out = NULL;
                return fail_at(l, ev->start_mark, "\"%.*s\" is not a valid %s",
                               (int)(n > 40 ? 40 : n), s, (const char *)tag);
            }
        }
    } else {
        *out = json_stringn(s, n);
    }
    if (!*out)
        return fail_at(l, ev->start_mark, "scalar is not valid UTF-8 text");
    return 0;
}

static int load_node(loader_t *l, yaml_event_t *ev, int depth, json_t **out);

static int load_sequence(loader_t *l, int depth, json_t **out)
{
    json_t *arr = json_array();
    yaml_event_t ev;
    for (;;) {
        if (next_event(l, &ev) < 0)
            goto error;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        json_t *item = NULL;
        int rc = load_node(l, &ev, depth + 1, &item);
        yaml_event_delete(&ev);
        if (rc < 0)
            goto error;
        json_array_append_new(arr, item);
    }
    *out = arr;
    return 0;
error:
    json_decref(arr);
    return -1;
}

static int load_mapping(loader_t *l, int depth, json_t **out)
{
    json_t *obj = json_object();
    yaml_event_t ev;
    for (;;) {
        if (next_event(l, &ev) < 0)
            goto error;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (ev.type != YAML_SCALAR_EVENT) {
            fail_at(l, ev.start_mark, ev.type == YAML_ALIAS_EVENT
                                          ? "aliases are not supported"
                                          : "mapping keys must be scalars");
            yaml_event_delete(&ev);
            goto error;
        }
        const char *key = (const char *)ev.data.scalar.value;
        yaml_mark_t key_mark = ev.start_mark;
        if (ev.data.scalar.anchor) {
            fail_at(l, key_mark, "anchors and aliases are not supported");
            yaml_event_delete(&ev);
            goto error;
        }
        if (strlen(key) != ev.data.scalar.length) {
            fail_at(l, key_mark, "mapping key contains a NUL character");
            yaml_event_delete(&ev);
            goto error;
        }
        if (json_object_get(obj, key)) {
            fail_at(l, key_mark, "duplicate key \"%s\"", key);
            yaml_event_delete(&ev);
            goto error;
        }
        char *k = strdup(key);
        yaml_event_delete(&ev);
        if (!k) {
            drv_err_internal(l->err, "out of memory");
            goto error;
        }
        json_t *val = NULL;
        if (next_event(l, &ev) < 0) {
            free(k);
            goto error;
        }
        int rc = load_node(l, &ev, depth + 1, &val);
        yaml_event_delete(&ev);
        if (rc < 0) {
            free(k);
            goto error;
        }
        json_object_set_new(obj, k, val);
        free(k);
    }
    *out = obj;
    return 0;
error:
    json_decref(obj);
    return -1;
}

/* Build the value that starts with event ev (which the caller deletes). */
static int load_node(loader_t *l, yaml_event_t *ev, int depth, json_t **out)
{
    *out = NULL;
    if (depth > DRV_YAML_MAX_DEPTH)
        return fail_at(l, ev->start_mark, "nesting deeper than %d levels", DRV_YAML_MAX_DEPTH);
    switch (ev->type) {
    case YAML_ALIAS_EVENT:
        return fail_at(l, ev->start_mark, "aliases (*%s) are not supported",
                       (const char *)ev->data.alias.anchor);
    case YAML_SCALAR_EVENT:
        if (ev->data.scalar.anchor)
            return fail_at(l, ev->start_mark, "anchors (&%s) are not supported",
                           (const char *)ev->data.scalar.anchor);
        return scalar_to_json(l, ev, out);
    case YAML_SEQUENCE_START_EVENT:
        if (ev->data.sequence_start.anchor)
            return fail_at(l, ev->start_mark, "anchors (&%s) are not supported",
                           (const char *)ev->data.sequence_start.anchor);
        if (ev->data.sequence_start.tag && !tag_is(ev->data.sequence_start.tag, "seq"))
            return fail_at(l, ev->start_mark, "unsupported tag %s",
                           (const char *)ev->data.sequence_start.tag);
        return load_sequence(l, depth, out);
    case YAML_MAPPING_START_EVENT:
        if (ev->data.mapping_start.anchor)
            return fail_at(l, ev->start_mark, "anchors (&%s) are not supported",
                           (const char *)ev->data.mapping_start.anchor);
        if (ev->data.mapping_start.tag && !tag_is(ev->data.mapping_start.tag, "map"))
            return fail_at(l, ev->start_mark, "unsupported tag %s",
                           (const char *)ev->data.mapping_start.tag);
        return load_mapping(l, depth, out);
    default:
        return fail_at(l, ev->start_mark, "unexpected YAML event %d", (int)ev->type);
    }
}

json_t *drv_yaml_load(const char *text, size_t len, const char *name, drv_error_t *err)
{
    loader_t l = {.name = name ? name : "<yaml>", .text = text, .len = len, .err = err};
    if (!yaml_parser_initialize(&l.parser)) {
        drv_err_internal(err, "cannot initialize the YAML parser");
        return NULL;
    }
    yaml_parser_set_input_string(&l.parser, (const unsigned char *)text, len);
    json_t *docs = json_array();
    yaml_event_t ev;
    bool done = false;
    while (!done) {
        if (next_event(&l, &ev) < 0)
            goto error;
        switch (ev.type) {
        case YAML_STREAM_START_EVENT:
        case YAML_DOCUMENT_END_EVENT:
            break;
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT: {
            yaml_event_t node;
            yaml_event_delete(&ev);
            if (next_event(&l, &node) < 0)
                goto error;
            json_t *doc = NULL;
            int rc = load_node(&l, &node, 1, &doc);
            yaml_event_delete(&node);
            if (rc < 0)
                goto error;
            json_array_append_new(docs, doc);
            continue;
        }
        default:
            fail_at(&l, ev.start_mark, "unexpected YAML event %d", (int)ev.type);
            yaml_event_delete(&ev);
            goto error;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&l.parser);
    return docs;
error:
    yaml_parser_delete(&l.parser);
    json_decref(docs);
    return NULL;
}

json_t *drv_yaml_load_file(const char *path, drv_error_t *err)
{
    bool is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "<stdin>" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        drv_err_invalid(err, "", "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 64 * 1024, len = 0;
    char *buf = malloc(cap);
    json_t *docs = NULL;
    if (!buf) {
        drv_err_internal(err, "out of memory");
        goto out;
    }
    for (;;) {
        if (len == cap) {
            if (cap > DRV_YAML_MAX_FILE) {
                drv_err_invalid(err, "", "%s: larger than %d MiB", name,
                                DRV_YAML_MAX_FILE / (1024 * 1024));
                goto out;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                drv_err_internal(err, "out of memory");
                goto out;
            }
            buf = nb, cap *= 2;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f)) {
                drv_err_invalid(err, "", "%s: read error: %s", name, strerror(errno));
                goto out;
            }
            break;
        }
    }
    if (len > DRV_YAML_MAX_FILE) {
        drv_err_invalid(err, "", "%s: larger than %d MiB", name, DRV_YAML_MAX_FILE / (1024 * 1024));
        goto out;
    }
    docs = drv_yaml_load(buf, len, name, err);
out:
    free(buf);
    if (!is_stdin)
        fclose(f);
    return docs;
}

/* ---- dumping ---------------------------------------------------------- */

typedef struct outbuf {
    char *data;
    size_t len, cap;
    bool oom;
} outbuf_t;

static int write_handler(void *data, unsigned char *buffer, size_t size)
{
    outbuf_t *o = data;
    if (o->len + size + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 1024;
        while (cap < o->len + size + 1)
            cap *= 2;
        char *nd = realloc(o->data, cap);
        if (!nd) {
            o->oom = true;
            return 0;
        }
        o->data = nd, o->cap = cap;
    }
    memcpy(o->data + o->len, buffer, size);
    o->len += size;
    o->data[o->len] = '\0';
    return 1;
}

static int emit_scalar(yaml_emitter_t *em, const char *s, size_t n, yaml_scalar_style_t style)
{
    yaml_event_t ev;
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)n, 1, 1, style))
        return -1;
    return yaml_emitter_emit(em, &ev) ? 0 : -1;
}

/* Plain text that YAML 1.1 readers (PyYAML, older tools) would take for a
 * boolean, a timestamp or a number: quoted too, for their sake. */
static bool yaml11_special(const char *s, size_t n)
{
    static const char *const words[] = {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No",
                                        "NO", "on", "On", "ON", "off", "Off", "OFF", NULL};
    if (is_one_of(s, n, words))
        return true;
    size_t i = (n > 0 && (s[0] == '-' || s[0] == '+' || s[0] == '.')) ? 1 : 0;
    return i < n && s[i] >= '0' && s[i] <= '9' && (memchr(s + 1, ':', n - 1) ||
                                                   memchr(s + 1, '-', n - 1) ||
                                                   memchr(s + 1, '_', n - 1));
}

static int emit_string(yaml_emitter_t *em, const char *s, size_t n)
{
    json_t *as_plain = drv_yaml_plain_scalar(s, n);
    bool quote = !json_is_string(as_plain) || yaml11_special(s, n);
    json_decref(as_plain);
    return emit_scalar(em, s, n, quote ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE);
}

static int emit_value(yaml_emitter_t *em, const json_t *v, int depth)
{
    char num[64];
    yaml_event_t ev;
    if (depth > DRV_YAML_MAX_DEPTH)
        return -1;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) ||
            !yaml_emitter_emit(em, &ev))
            return -1;
        const char *key;
        const json_t *val;
        json_object_foreach((json_t *)v, key, val) {
            if (emit_string(em, key, strlen(key)) < 0 || emit_value(em, val, depth + 1) < 0)
                return -1;
        }
        if (!yaml_mapping_end_event_initialize(&ev) || !yaml_emitter_emit(em, &ev))
            return -1;
        return 0;
    }
    case JSON_ARRAY: {
        if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE) ||
            !yaml_emitter_emit(em, &ev))
            return -1;
        size_t i;
        const json_t *val;
        json_array_foreach(v, i, val) {
            if (emit_value(em, val, depth + 1) < 0)
                return -1;
        }
        if (!yaml_sequence_end_event_initialize(&ev) || !yaml_emitter_emit(em, &ev))
            return -1;
        return 0;
    }
    case JSON_STRING:
        return emit_string(em, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return emit_scalar(em, num, strlen(num), YAML_PLAIN_SCALAR_STYLE);
    case JSON_REAL: {
        double d = json_real_value(v);
        snprintf(num, sizeof num, "%.15g", d);
        if (strtod(num, NULL) != d)
            snprintf(num, sizeof num, "%.17g", d);
        if (!strpbrk(num, ".eEn"))   /* keep it a float when read back */
            strcat(num, ".0");
        return emit_scalar(em, num, strlen(num), YAML_PLAIN_SCALAR_STYLE);
    }
    case JSON_TRUE:
        return emit_scalar(em, "true", 4, YAML_PLAIN_SCALAR_STYLE);
    case JSON_FALSE:
        return emit_scalar(em, "false", 5, YAML_PLAIN_SCALAR_STYLE);
    case JSON_NULL:
    default:
        return emit_scalar(em, "null", 4, YAML_PLAIN_SCALAR_STYLE);
    }
}

char *drv_yaml_dump(const json_t *value, drv_error_t *err)
{
    yaml_emitter_t em;
    yaml_event_t ev;
    outbuf_t out = {0};
    if (!value) {
        drv_err_internal(err, "nothing to dump");
        return NULL;
    }
    if (!yaml_emitter_initialize(&em)) {
        drv_err_internal(err, "cannot initialize the YAML emitter");
        return NULL;
    }
    yaml_emitter_set_output(&em, write_handler, &out);
    yaml_emitter_set_unicode(&em, 1);
    yaml_emitter_set_width(&em, -1);
    yaml_emitter_set_indent(&em, 2);
    int ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) &&
             yaml_emitter_emit(&em, &ev) &&
             yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) &&
             yaml_emitter_emit(&em, &ev) && emit_value(&em, value, 0) == 0 &&
             yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&em, &ev) &&
             yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&em, &ev) &&
             yaml_emitter_flush(&em);
    if (!ok || out.oom) {
        drv_err_internal(err, "cannot emit YAML: %s",
                         out.oom ? "out of memory"
                         : em.problem ? em.problem
                                      : "value too deeply nested");
        yaml_emitter_delete(&em);
        free(out.data);
        return NULL;
    }
    yaml_emitter_delete(&em);
    if (!out.data)
        out.data = strdup("");
    return out.data;
}
