/* json.h — jansson helpers shared by the head and the CLI. */
#ifndef DRV_JSON_H
#define DRV_JSON_H

#include <jansson.h>
#include <stddef.h>

/* Compact dump, malloc'd; *len gets strlen. Aborts on out-of-memory. */
char *drv_json_dump(const json_t *j, size_t *len);
/* RFC 7386 JSON merge patch: a new value (target is not changed). */
json_t *drv_json_merge_patch(const json_t *target, const json_t *patch);
/* jansson type name for messages: "string", "integer", "object", ... */
const char *drv_json_type_name(const json_t *j);

#endif
