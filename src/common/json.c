/* json.c — see json.h. */
#include "common/json.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the compact dump ----------------------------------------------------
 * The same bytes as json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY |
 * JSON_REAL_PRECISION(12)) (jansson 2.14: members in insertion order, '"',
 * '\\' and control characters escaped, "\u%04X" for those without a short
 * form, UTF-8 as is), written straight into one growing buffer. jansson's
 * own dump checks every object and array against a table of its parents
 * (one snprintf of "%p" and a hash insert each) and copies its result
 * once more: under a create load that was a fifth of droverd's CPU. What
 * this writer does not take on (deeper than MAX_DEPTH, a real it cannot
 * format) goes to jansson, so the result never differs. */

#define MAX_DEPTH 512

typedef drv_jbuf_t buf_t;

static void buf_reserve(buf_t *b, size_t more)
{
    if (b->n + more <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        fprintf(stderr, "drover: out of memory in json dump\n");
        abort();
    }
    b->p = p;
    b->cap = cap;
}

static void buf_add(buf_t *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void put_string(buf_t *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    buf_reserve(b, len + 2);
    b->p[b->n++] = '"';
    size_t run = 0;   /* start of the bytes not yet copied */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        buf_add(b, s + run, i - run);
        run = i + 1;
        char e[6] = {'\\', 0};
        size_t el = 2;
        switch (c) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        default:
            e[1] = 'u', e[2] = '0', e[3] = '0', e[4] = hex[c >> 4], e[5] = hex[c & 15];
            el = 6;
        }
        buf_add(b, e, el);
    }
    buf_add(b, s + run, len - run);
    buf_add(b, "\"", 1);
}

static void put_integer(buf_t *b, json_int_t v)
{
    char t[24], *w = t + sizeof t;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do
        *--w = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        *--w = '-';
    buf_add(b, w, (size_t)(t + sizeof t - w));
}

/* jansson's jsonp_dtostr with precision 12; -1 where it would fail */
static int put_real(buf_t *b, double v)
{
    char t[100];
    int ret = snprintf(t, sizeof t, "%.12g", v);
    if (ret < 0 || (size_t)ret >= sizeof t - 3 || strchr(t, ','))
        return -1;   /* a locale's decimal comma: jansson's own path */
    size_t len = (size_t)ret;
    if (!strchr(t, '.') && !strchr(t, 'e')) {
        memcpy(t + len, ".0", 3);
        len += 2;
    }
    char *start = strchr(t, 'e');
    if (start) {   /* no '+' and no leading zeros in the exponent */
        start++;
        char *end = start + 1;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, len - (size_t)(end - t));
            len -= (size_t)(end - start);
        }
    }
    buf_add(b, t, len);
    return 0;
}

static int put_value(buf_t *b, const json_t *j, int depth)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        if (depth >= MAX_DEPTH)
            return -1;
        buf_add(b, "{", 1);
        bool first = true;
        for (void *it = json_object_iter((json_t *)j); it;
             it = json_object_iter_next((json_t *)j, it)) {
            if (!first)
                buf_add(b, ",", 1);
            first = false;
            put_string(b, json_object_iter_key(it), json_object_iter_key_len(it));
            buf_add(b, ":", 1);
            if (put_value(b, json_object_iter_value(it), depth + 1) < 0)
                return -1;
        }
        buf_add(b, "}", 1);
        return 0;
    }
    case JSON_ARRAY: {
        if (depth >= MAX_DEPTH)
            return -1;
        buf_add(b, "[", 1);
        for (size_t i = 0, n = json_array_size(j); i < n; i++) {
            if (i)
                buf_add(b, ",", 1);
            if (put_value(b, json_array_get(j, i), depth + 1) < 0)
                return -1;
        }
        buf_add(b, "]", 1);
        return 0;
    }
    case JSON_STRING:
        put_string(b, json_string_value(j), json_string_length(j));
        return 0;
    case JSON_INTEGER:
        put_integer(b, json_integer_value(j));
        return 0;
    case JSON_REAL:
        return put_real(b, json_real_value(j));
    case JSON_TRUE:
        buf_add(b, "true", 4);
        return 0;
    case JSON_FALSE:
        buf_add(b, "false", 5);
        return 0;
    case JSON_NULL:
        buf_add(b, "null", 4);
        return 0;
    }
    return -1;
}

/* jansson's own dump of what put_value does not take on */
static char *jansson_dump(const json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(12));
    if (!s) {
        fprintf(stderr, "drover: out of memory in json_dumps\n");
        abort();
    }
    return s;
}

void drv_jbuf_raw(drv_jbuf_t *b, const char *s, size_t n) { buf_add(b, s, n); }

void drv_jbuf_str(drv_jbuf_t *b, const char *s) { put_string(b, s, strlen(s)); }

void drv_jbuf_int(drv_jbuf_t *b, json_int_t v) { put_integer(b, v); }

void drv_jbuf_value(drv_jbuf_t *b, const json_t *j)
{
    size_t mark = b->n;
    if (put_value(b, j, 0) == 0)
        return;
    b->n = mark;
    char *s = jansson_dump(j);
    buf_add(b, s, strlen(s));
    free(s);
}

char *drv_jbuf_finish(drv_jbuf_t *b, size_t *len)
{
    buf_add(b, "", 1);   /* the NUL */
    if (len)
        *len = b->n - 1;
    char *p = b->p;
    *b = (drv_jbuf_t){0};
    return p;
}

char *drv_json_dump(const json_t *j, size_t *len)
{
    buf_t b = {0};
    if (j && put_value(&b, j, 0) == 0) {
        buf_add(&b, "", 1);   /* the NUL */
        if (len)
            *len = b.n - 1;
        return b.p;
    }
    free(b.p);
    char *s = jansson_dump(j);
    if (len)
        *len = strlen(s);
    return s;
}

json_t *drv_json_merge_patch(const json_t *target, const json_t *patch)
{
    if (!json_is_object(patch))
        return json_deep_copy(patch);
    json_t *out = json_is_object(target) ? json_deep_copy(target) : json_object();
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)patch, key, val) {
        if (json_is_null(val)) {
            json_object_del(out, key);
        } else {
            json_t *merged = drv_json_merge_patch(json_object_get(out, key), val);
            json_object_set_new(out, key, merged);
        }
    }
    return out;
}

const char *drv_json_type_name(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "value";
}

json_t *drv_error_json(const drv_error_t *err)
{
    json_t *e = json_pack("{s:s, s:s}", "code", err->code[0] ? err->code : "internal", "message",
                          err->message[0] ? err->message : "internal error");
    if (err->field[0])
        json_object_set_new(e, "field", json_string(err->field));
    return json_pack("{s:o}", "error", e);
}
