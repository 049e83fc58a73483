/* schema.h — declarative validation of request objects.
 *
 * A resource's fields are a table of drv_field_t (terminated by a {NULL}
 * entry). drv_schema_validate() checks an object against it in place:
 * unknown fields, wrong types, missing required fields, ranges, enums, ids
 * and nested objects, each failure a 400 naming the field's full path; and
 * fills defaults for absent fields. Pure: touches nothing but the object.
 */
#ifndef DRV_SCHEMA_H
#define DRV_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"

typedef enum drv_ftype {
    DRV_F_STRING,    /* max = max length (0: 1024) */
    DRV_F_ID,        /* resource id syntax */
    DRV_F_INT,       /* integer in [min, max] */
    DRV_F_NUMBER,    /* integer or real in [min, max] */
    DRV_F_BOOL,
    DRV_F_ENUM,      /* string in values */
    DRV_F_OBJECT,    /* nested object described by sub */
    DRV_F_STRLIST,   /* array of non-empty strings, count in [min, max]; values: enum */
    DRV_F_IDLIST,    /* array of ids, count in [min, max], no duplicates */
    DRV_F_OBJLIST,   /* array of objects described by sub, count in [min, max] */
    DRV_F_STRMAP,    /* object of string values, at most max keys */
    DRV_F_ARRAY,     /* array of anything, count in [min, max]: the handler checks items */
} drv_ftype_t;

typedef struct drv_field {
    const char *name;
    drv_ftype_t type;
    bool required;
    double min, max;
    const char *const *values;      /* NULL-terminated */
    const struct drv_field *sub;    /* for OBJECT / OBJLIST */
    const char *def;                /* default as JSON text, NULL: none */
} drv_field_t;

/* Validate obj against fields (path prefix for messages, "" at top level). */
int drv_schema_validate(json_t *obj, const drv_field_t *fields, const char *prefix,
                        drv_error_t *err);

#endif
