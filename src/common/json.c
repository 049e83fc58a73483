/* json.c — see json.h. */
#include "common/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *drv_json_dump(const json_t *j, size_t *len)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(12));
    if (!s) {
        fprintf(stderr, "drover: out of memory in json_dumps\n");
        abort();
    }
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
