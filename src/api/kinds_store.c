/* kinds_store.c — the store kind: an operator's S3-compatible object store
 * (endpoint, region, bucket, path style and the credential that signs for
 * it). One namespace for all users (keyed by id); only admins write them,
 * every user may read them (the secret is stored and never rendered, like a
 * cloud credential's: state.c hides it). Checks run under the state write
 * lock and do no I/O: the endpoint, region, bucket and key are checked by
 * drv_s3_create, which is pure. */
#include <stdio.h>
#include <string.h>

#include "api/resource.h"
#include "objstore/s3.h"
#include "common/json.h"

#define END {NULL, 0, false, 0, 0, NULL, NULL, NULL}

static const drv_field_t store_fields[] = {
    {"id", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"endpoint", DRV_F_STRING, true, 8, 255, NULL, NULL, NULL},
    {"region", DRV_F_STRING, false, 1, 63, NULL, NULL, "\"us-east-1\""},
    {"bucket", DRV_F_STRING, true, 3, 63, NULL, NULL, NULL},
    {"path_style", DRV_F_BOOL, false, 0, 0, NULL, NULL, "false"},
    {"access_key_id", DRV_F_STRING, true, 1, 127, NULL, NULL, NULL},
    {"secret_access_key", DRV_F_STRING, true, 1, 255, NULL, NULL, NULL},
    {"description", DRV_F_STRING, false, 0, 1024, NULL, NULL, "\"\""},
    END,
};

static int store_check(drv_req_t *req, const char *owner, json_t *spec, const drv_obj_t *old,
                       drv_error_t *err)
{
    (void)req, (void)owner, (void)old;
    drv_s3_t *s = drv_s3_create(drv_json_str(spec, "endpoint"), drv_json_str(spec, "region"),
                                drv_json_str(spec, "bucket"), drv_json_str(spec, "access_key_id"),
                                drv_json_str(spec, "secret_access_key"),
                                json_is_true(json_object_get(spec, "path_style")), err);
    if (!s) {
        if (strcmp(err->field, "credential") == 0)
            snprintf(err->field, sizeof err->field, "access_key_id");
        return -1;
    }
    drv_s3_destroy(s);
    return 0;
}

/* 409 while an artifact of any user names the store. */
static int store_before_delete(drv_state_t *st, const drv_obj_t *obj, bool cascade,
                               uint64_t *seq, drv_error_t *err)
{
    (void)cascade, (void)seq;
    for (size_t i = 0; i < drv_state_count(st, DRV_K_ARTIFACT); i++) {
        const drv_obj_t *a = drv_state_at(st, DRV_K_ARTIFACT, i);
        const char *s = drv_json_str(a->spec, "store");
        if (s && strcmp(s, obj->id) == 0)
            return drv_err_conflict(err, "store '%s' is used by artifact '%s' of user '%s'; "
                                    "delete the artifact first", obj->id, a->id, a->owner);
    }
    return 0;
}

static const char *const store_immutable[] = {"bucket", "endpoint", NULL};

const drv_kind_desc_t drv_kind_store = {
    .kind = DRV_K_STORE,
    .name = "store",
    .path = "/v1/stores",
    .global = true,
    .schema = store_fields,
    .immutable = store_immutable,
    .check = store_check,
    .before_delete = store_before_delete,
};
