/* resource.h — kind descriptors for the generic CRUD handlers (h_objects.c).
 * A descriptor says how one kind is validated and related to others; the
 * descriptors themselves are in kinds.c (clusters and credentials in
 * kinds_cloud.c, stores in kinds_store.c). */
#ifndef DRV_RESOURCE_H
#define DRV_RESOURCE_H

#include "api/api.h"
#include "api/schema.h"
#include "state/state.h"

typedef struct drv_kind_desc {
    drv_kind_t kind;
    const char *name;                 /* "nodepool" */
    const char *path;                 /* "/v1/clusters/%s/nodepools" style for Location */
    bool nested;                      /* nodepools live under a cluster (params[0]) */
    bool global;                      /* keyed by id alone, one namespace for all users (stores) */
    const drv_field_t *schema;
    const char *const *immutable;     /* fields a PATCH may not change */
    /* Fill derived defaults before schema validation (may be NULL). */
    void (*normalize)(json_t *spec);
    /* Cross-object checks under the state write lock; old is NULL on create. */
    int (*check)(drv_req_t *req, const char *owner, json_t *spec, const drv_obj_t *old,
                 drv_error_t *err);
    /* Delete: fill a 409 if obj may not go (cascade: whether children go too);
     * else delete its children (cascade) and return 0. Under the write lock. */
    int (*before_delete)(drv_state_t *st, const drv_obj_t *obj, bool cascade,
                         uint64_t *seq, drv_error_t *err);
    /* Initial soft status (may be NULL). */
    json_t *(*initial_status)(const drv_obj_t *obj);
} drv_kind_desc_t;

extern const drv_kind_desc_t drv_kind_cluster;
extern const drv_kind_desc_t drv_kind_nodepool;
extern const drv_kind_desc_t drv_kind_model;
extern const drv_kind_desc_t drv_kind_deployment;
extern const drv_kind_desc_t drv_kind_credential;
extern const drv_kind_desc_t drv_kind_artifact;

/* An artifact's state (kinds.c): "ready" (it has its manifest), "importing"
 * (head/imports.c reads its source: internal.import is the import's
 * token) or "failed" (internal.import_error says why). */
const char *drv_artifact_state(const drv_obj_t *a);
bool drv_artifact_import_failed(const drv_obj_t *a);
extern const drv_kind_desc_t drv_kind_store;
extern const drv_kind_desc_t drv_kind_job;   /* h_jobs.c */

/* Field tables shared by kinds (kinds.c): resources (gpu, cpu_millis,
 * memory_mib) and one nodepools entry (cluster, nodepool, priority). */
extern const drv_field_t drv_resources_fields[];
extern const drv_field_t drv_placement_fields[];

/* runtime.image (containers, issue 16; kinds_image.c): the fields a
 * runtime object of a model or a job takes for an OCI image run by the
 * node's podman or docker, and their check (a command or an image; args,
 * pull_policy, image_credential only with an image; the credential a
 * registry's; a plain image reference). 0/-1 with the field in err. */
extern const char *const drv_pull_policies[];
#define DRV_RUNTIME_IMAGE_FIELDS                                                              \
    {"image", DRV_F_STRING, false, 1, 512, NULL, NULL, NULL},                                 \
    {"args", DRV_F_STRLIST, false, 1, 256, NULL, NULL, NULL},                                 \
    {"pull_policy", DRV_F_ENUM, false, 0, 0, drv_pull_policies, NULL, NULL},                  \
    {"image_credential", DRV_F_ID, false, 0, 0, NULL, NULL, NULL} /* a registry credential */
int drv_runtime_image_check(drv_req_t *req, const char *owner, const json_t *rt,
                            drv_error_t *err);

/* Give every loaded object its initial status (after drv_state_load). */
void drv_resources_init_status(drv_state_t *st);

/* Does a model's resources object fit an instance type? why gets the reason. */
struct drv_instance_type;
bool drv_model_fits(const json_t *resources, const struct drv_instance_type *t, char *why,
                    size_t why_len);

#endif
