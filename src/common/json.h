/* json.h — jansson helpers shared by the head and the CLI. */
#ifndef DRV_JSON_H
#define DRV_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "common/error.h"

/* Compact dump, malloc'd; *len gets strlen. Aborts on out-of-memory. */
char *drv_json_dump(const json_t *j, size_t *len);
/* The same writer piece by piece, for texts made of parts (state.c's
 * renderings): a growing buffer, {0} to start. drv_jbuf_value writes what
 * drv_json_dump would; drv_jbuf_str a JSON string of s (NUL-terminated);
 * drv_jbuf_raw bytes as they are (drv_jbuf_lit a literal's). drv_jbuf_finish
 * adds the NUL, hands the text over (malloc'd; *len gets strlen) and empties
 * the buffer. Aborts on out-of-memory. */
typedef struct drv_jbuf {
    char *p;
    size_t n, cap;
} drv_jbuf_t;
void drv_jbuf_raw(drv_jbuf_t *b, const char *s, size_t n);
/* drv_jbuf_raw of a string literal, its length counted by the compiler (the
 * "" around s refuse anything but a literal). */
#define drv_jbuf_lit(b, s) drv_jbuf_raw((b), "" s "", sizeof(s) - 1)
void drv_jbuf_str(drv_jbuf_t *b, const char *s);
void drv_jbuf_int(drv_jbuf_t *b, json_int_t v);
void drv_jbuf_value(drv_jbuf_t *b, const json_t *j);
char *drv_jbuf_finish(drv_jbuf_t *b, size_t *len);
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
