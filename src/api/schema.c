/* schema.c — see schema.h. */
#include "api/schema.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/suggest.h"
#include "common/util.h"

/* "prefix.name" or "name", cut to len - 1 bytes as snprintf would (made
 * for every field of every validation: no printf here) */
static void path_of(char *buf, size_t len, const char *prefix, const char *name)
{
    size_t n = 0;
    for (const char *s = prefix && *prefix ? prefix : ""; *s && n + 1 < len; s++)
        buf[n++] = *s;
    if (prefix && *prefix && n + 1 < len)
        buf[n++] = '.';
    for (const char *s = name; *s && n + 1 < len; s++)
        buf[n++] = *s;
    buf[n] = '\0';
}

static int in_values(const char *s, const char *const *values)
{
    for (size_t i = 0; values && values[i]; i++)
        if (strcmp(s, values[i]) == 0)
            return 1;
    return 0;
}

static void values_list(char *buf, size_t len, const char *const *values)
{
    buf[0] = '\0';
    for (size_t i = 0; values && values[i]; i++) {
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, "%s%s", i ? ", " : "", values[i]);
    }
}

static int check_string(const json_t *v, const drv_field_t *f, const char *path,
                        drv_error_t *err)
{
    if (!json_is_string(v))
        return drv_err_invalid(err, path, "%s must be a string, not %s", path,
                               drv_json_type_name(v));
    size_t max = f->max > 0 ? (size_t)f->max : 1024;
    if (json_string_length(v) > max)
        return drv_err_invalid(err, path, "%s is too long (%zu characters, at most %zu)", path,
                               json_string_length(v), max);
    if (f->min > 0 && json_string_length(v) < (size_t)f->min)
        return drv_err_invalid(err, path, "%s must not be empty", path);
    return 0;
}

static int check_id(const json_t *v, const char *path, drv_error_t *err)
{
    if (!json_is_string(v))
        return drv_err_invalid(err, path, "%s must be a string, not %s", path,
                               drv_json_type_name(v));
    if (!drv_id_valid(json_string_value(v)))
        return drv_err_invalid(err, path,
                               "%s '%.70s' is not a valid id: use 1-63 lowercase letters, "
                               "digits and '-', starting and ending with a letter or digit",
                               path, json_string_value(v));
    return 0;
}

static int check_value(json_t *v, const drv_field_t *f, const char *path, drv_error_t *err);

static int check_list(json_t *v, const drv_field_t *f, const char *path, drv_error_t *err)
{
    if (!json_is_array(v))
        return drv_err_invalid(err, path, "%s must be an array, not %s", path,
                               drv_json_type_name(v));
    size_t n = json_array_size(v);
    if (n < (size_t)f->min || n > (size_t)f->max)
        return drv_err_invalid(err, path, "%s must have %g to %g entries (has %zu)", path,
                               f->min, f->max, n);
    for (size_t i = 0; i < n; i++) {
        char ep[160];
        snprintf(ep, sizeof ep, "%s[%zu]", path, i);
        json_t *e = json_array_get(v, i);
        if (f->type == DRV_F_OBJLIST) {
            if (!json_is_object(e))
                return drv_err_invalid(err, ep, "%s must be an object, not %s", ep,
                                       drv_json_type_name(e));
            if (drv_schema_validate(e, f->sub, ep, err) < 0)
                return -1;
            continue;
        }
        if (f->type == DRV_F_IDLIST) {
            if (check_id(e, ep, err) < 0)
                return -1;
            for (size_t j = 0; j < i; j++)
                if (json_equal(e, json_array_get(v, j)))
                    return drv_err_invalid(err, ep, "%s repeats '%s'", ep, json_string_value(e));
            continue;
        }
        if (!json_is_string(e))
            return drv_err_invalid(err, ep, "%s must be a string, not %s", ep,
                                   drv_json_type_name(e));
        if (json_string_length(e) == 0 || json_string_length(e) > 4096)
            return drv_err_invalid(err, ep, "%s must be 1 to 4096 characters", ep);
        if (f->values && !in_values(json_string_value(e), f->values)) {
            char vl[256];
            values_list(vl, sizeof vl, f->values);
            return drv_err_invalid(err, ep, "%s must be one of: %s", ep, vl);
        }
    }
    return 0;
}

static int check_value(json_t *v, const drv_field_t *f, const char *path, drv_error_t *err)
{
    switch (f->type) {
    case DRV_F_STRING:
        return check_string(v, f, path, err);
    case DRV_F_ID:
        return check_id(v, path, err);
    case DRV_F_INT:
        if (!json_is_integer(v))
            return drv_err_invalid(err, path, "%s must be an integer, not %s", path,
                                   drv_json_type_name(v));
        if ((double)json_integer_value(v) < f->min || (double)json_integer_value(v) > f->max)
            return drv_err_invalid(err, path, "%s must be between %.0f and %.0f (got %lld)",
                                   path, f->min, f->max, (long long)json_integer_value(v));
        return 0;
    case DRV_F_NUMBER:
        if (!json_is_number(v))
            return drv_err_invalid(err, path, "%s must be a number, not %s", path,
                                   drv_json_type_name(v));
        if (!isfinite(json_number_value(v)) || json_number_value(v) < f->min ||
            json_number_value(v) > f->max)
            return drv_err_invalid(err, path, "%s must be between %g and %g", path, f->min,
                                   f->max);
        return 0;
    case DRV_F_BOOL:
        if (!json_is_boolean(v))
            return drv_err_invalid(err, path, "%s must be true or false, not %s", path,
                                   drv_json_type_name(v));
        return 0;
    case DRV_F_ENUM:
        if (!json_is_string(v) || !in_values(json_string_value(v), f->values)) {
            char vl[256];
            values_list(vl, sizeof vl, f->values);
            return drv_err_invalid(err, path, "%s must be one of: %s", path, vl);
        }
        return 0;
    case DRV_F_OBJECT:
        if (!json_is_object(v))
            return drv_err_invalid(err, path, "%s must be an object, not %s", path,
                                   drv_json_type_name(v));
        return drv_schema_validate(v, f->sub, path, err);
    case DRV_F_STRLIST:
    case DRV_F_IDLIST:
    case DRV_F_OBJLIST:
        return check_list(v, f, path, err);
    case DRV_F_ARRAY:
        if (!json_is_array(v))
            return drv_err_invalid(err, path, "%s must be an array, not %s", path,
                                   drv_json_type_name(v));
        if (json_array_size(v) < (size_t)f->min || json_array_size(v) > (size_t)f->max)
            return drv_err_invalid(err, path, "%s must have %g to %g entries", path, f->min,
                                   f->max);
        return 0;
    case DRV_F_STRMAP: {
        if (!json_is_object(v))
            return drv_err_invalid(err, path, "%s must be an object of strings, not %s", path,
                                   drv_json_type_name(v));
        if (json_object_size(v) > (size_t)f->max)
            return drv_err_invalid(err, path, "%s has too many entries (at most %g)", path,
                                   f->max);
        const char *k;
        json_t *e;
        json_object_foreach(v, k, e) {
            char ep[200];
            path_of(ep, sizeof ep, path, k);
            if (!*k || strlen(k) > 256)
                return drv_err_invalid(err, path, "%s has an empty or over-long key", path);
            if (!json_is_string(e))
                return drv_err_invalid(err, ep, "%s must be a string, not %s", ep,
                                       drv_json_type_name(e));
            if (json_string_length(e) > 65536)
                return drv_err_invalid(err, ep, "%s is too long", ep);
        }
        return 0;
    }
    }
    return drv_err_internal(err, "bad schema type");
}

static bool has_required(const drv_field_t *fields)
{
    for (const drv_field_t *f = fields; f->name; f++)
        if (f->required)
            return true;
    return false;
}

/* A field's default as a value: what json_loads(def, JSON_DECODE_ANY)
 * gives, without its parser for the plain ones every create fills in
 * (integers, booleans, ASCII strings without escapes). */
static json_t *default_value(const char *def)
{
    size_t n = strlen(def);
    if (strcmp(def, "true") == 0)
        return json_true();
    if (strcmp(def, "false") == 0)
        return json_false();
    if (n >= 2 && def[0] == '"' && def[n - 1] == '"') {
        size_t i = 1;
        while (i < n - 1 && def[i] >= 0x20 && def[i] < 0x7f && def[i] != '"' && def[i] != '\\')
            i++;
        if (i == n - 1)
            return json_stringn(def + 1, n - 2);
    } else if (n >= 1 && n <= 15) {
        size_t i = def[0] == '-';
        bool digits = i < n && (def[i] != '0' || i + 1 == n);
        for (; digits && i < n; i++)
            digits = def[i] >= '0' && def[i] <= '9';
        if (digits && strcmp(def, "-0") != 0)
            return json_integer(strtoll(def, NULL, 10));
    }
    return json_loads(def, JSON_DECODE_ANY, NULL);
}

int drv_schema_validate(json_t *obj, const drv_field_t *fields, const char *prefix,
                        drv_error_t *err)
{
    char path[160];
    /* unknown fields first: a typo is the likeliest mistake */
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val) {
        const drv_field_t *f = fields;
        while (f->name && strcmp(f->name, key) != 0)
            f++;
        if (!f->name) {
            drv_suggest_t near;
            drv_suggest_init(&near, key);
            for (f = fields; f->name; f++)
                drv_suggest_add(&near, f->name);
            path_of(path, sizeof path, prefix, key);
            if (!drv_suggest_best(&near))
                return drv_err_invalid(err, path, "unknown field '%s'", path);
            char hint[160];
            path_of(hint, sizeof hint, prefix, drv_suggest_best(&near));
            return drv_err_invalid(err, path, "unknown field '%s' (did you mean '%s'?)", path,
                                   hint);
        }
    }
    for (const drv_field_t *f = fields; f->name; f++) {
        path_of(path, sizeof path, prefix, f->name);
        json_t *v = json_object_get(obj, f->name);
        if (!v) {
            if (f->required)
                return drv_err_invalid(err, path, "%s is required", path);
            if (f->def) {
                v = default_value(f->def);
                json_object_set_new(obj, f->name, v);
            } else if (f->type == DRV_F_OBJECT && !has_required(f->sub)) {
                v = json_object();
                json_object_set_new(obj, f->name, v);
            } else {
                continue;
            }
        }
        if (check_value(v, f, path, err) < 0)
            return -1;
    }
    /* canonical field order: the schema's. The members already in it at
     * the front stay where they are; the rest move behind them in order */
    const drv_field_t *from = fields;
    void *it = json_object_iter(obj);
    for (; it && from->name; from++) {
        if (!json_object_get(obj, from->name))
            continue;
        if (strcmp(json_object_iter_key(it), from->name) != 0)
            break;
        it = json_object_iter_next(obj, it);
    }
    if (!it)
        return 0;   /* all in order */
    for (const drv_field_t *f = from; f->name; f++) {
        json_t *v = json_object_get(obj, f->name);
        if (v) {
            json_incref(v);
            json_object_del(obj, f->name);
            json_object_set_new(obj, f->name, v);
        }
    }
    return 0;
}
