/* json.h — jansson helpers shared by the head and the CLI. */
#ifndef DRV_JSON_H
#define DRV_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "common/error.h"

/* Compact dump, malloc'd; *len gets strlen. Aborts on out-of-memory. */
char *drv_json_dump(const json_t *j, size_t *len);
/* RFC 7386 JSON merge patch: a new value (target is not changed). */
json_t *drv_json_merge_patch(const json_t *target, const json_t *patch);
/* o[k] when it is a string, else NULL (o may be NULL or not an object). */
static inline const char *drv_json_str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}
/* jansson type name for messages: "string", "integer", "object", ... */
const char *drv_json_type_name(const json_t *j);

/* The error body every drover server answers with:
 * {"error": {"code", "message", "field" (when set)}} (500 "internal" for
 * an unset err). A new reference. */
json_t *drv_error_json(const drv_error_t *err);

#endif
