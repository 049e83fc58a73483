/* kinds.c — the user resource kinds (nodepools, models, artifacts, deployments): their
 * schemas (tables), derived defaults, cross-object checks, delete rules and initial status.
 * Clusters and credentials are kinds_cloud.c, stores kinds_store.c, runtime.image
 * kinds_image.c. Every function here runs under the state write lock and does no I/O. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api/resource.h"
#include "catalog/catalog.h"
#include "catalog/presets.h"
#include "common/util.h"
#include "provider/slurm.h"
#include "state/head.h"
#include "common/json.h"

#define END {NULL, 0, false, 0, 0, NULL, NULL, NULL}
#define DAY 86400.0

static const char *const capacity_types[] = {"on_demand", "spot", "spot_with_fallback", NULL};
static const char *const dtypes[] = {"fp32", "bf16", "fp16", "fp8", "int8", "int4", NULL};

/* --- schemas ---------------------------------------------------------------- */

/* a nodepool's Slurm job options (slurm clusters) */
static const drv_field_t slurm_np_fields[] = {
    {"partition", DRV_F_STRING, false, 1, 63, NULL, NULL, NULL},
    {"account", DRV_F_STRING, false, 1, 63, NULL, NULL, NULL},
    {"time_limit", DRV_F_STRING, false, 1, 31, NULL, NULL, NULL},
    {"price_per_hour", DRV_F_NUMBER, false, 0, 100000, NULL, NULL, NULL},   /* USD, per node */
    END,
};

static const drv_field_t nodepool_fields[] = {
    {"id", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"cluster", DRV_F_ID, false, 0, 0, NULL, NULL, NULL},
    {"instance_types", DRV_F_STRLIST, true, 1, 16, NULL, NULL, NULL},
    {"capacity_type", DRV_F_ENUM, false, 0, 0, capacity_types, NULL, "\"on_demand\""},
    {"min_nodes", DRV_F_INT, false, 0, 10000, NULL, NULL, "0"},
    {"max_nodes", DRV_F_INT, false, 0, 10000, NULL, NULL, "1"},
    {"node_scale_down_delay_seconds", DRV_F_INT, false, 0, 7 * DAY, NULL, NULL, "300"},
    {"consolidation", DRV_F_BOOL, false, 0, 0, NULL, NULL, "false"},
    {"description", DRV_F_STRING, false, 0, 1024, NULL, NULL, "\"\""},
    {"image", DRV_F_STRING, false, 1, 127, NULL, NULL, NULL},   /* overrides the cluster's */
    {"provision_timeout_seconds", DRV_F_INT, false, 1, DAY, NULL, NULL, NULL},
    {"prefetch", DRV_F_BOOL, false, 0, 0, NULL, NULL, "false"},   /* artifacts, at join */
    {"slurm", DRV_F_OBJECT, false, 0, 0, NULL, slurm_np_fields, NULL},
    END,
};

static const drv_field_t runtime_fields[] = {
    {"command", DRV_F_STRLIST, false, 1, 64, NULL, NULL, NULL},   /* required without image */
    /* containers (issue 16): an OCI image run by the node's podman or docker */
    DRV_RUNTIME_IMAGE_FIELDS,
    /* a standard model server (catalog/presets.h): its image, command line and paths */
    {"preset", DRV_F_ENUM, false, 0, 0, drv_preset_names, NULL, NULL},
    {"env", DRV_F_STRMAP, false, 0, 256, NULL, NULL, "{}"},
    {"health_path", DRV_F_STRING, false, 1, 1024, NULL, NULL, "\"/health\""},
    {"predict_path", DRV_F_STRING, false, 1, 1024, NULL, NULL, "\"/predict\""},
    {"metrics_path", DRV_F_STRING, false, 1, 1024, NULL, NULL, NULL},   /* Prometheus text */
    /* metrics_path on a second port the agent allocates (METRICS_PORT, $(METRICS_PORT)) */
    {"metrics_port", DRV_F_BOOL, false, 0, 0, NULL, NULL, NULL},
    {"startup_timeout_seconds", DRV_F_INT, false, 1, DAY, NULL, NULL, "600"},
    {"max_concurrency", DRV_F_INT, false, 0, 100000, NULL, NULL, "64"},   /* gateway; 0 = no limit */
    END,
};

static const drv_field_t gpu_fields[] = {
    {"count", DRV_F_INT, false, 0, 16, NULL, NULL, "0"},
    {"memory_mib", DRV_F_INT, false, 0, 4194304, NULL, NULL, "0"},
    {"compute_percent", DRV_F_INT, false, 1, 100, NULL, NULL, "100"},
    {"types", DRV_F_STRLIST, false, 1, 32, NULL, NULL, NULL},
    END,
};

/* a model's (and a job worker's, h_jobs.c) resources */
const drv_field_t drv_resources_fields[] = {
    {"gpu", DRV_F_OBJECT, false, 0, 0, NULL, gpu_fields, NULL},
    {"cpu_millis", DRV_F_INT, false, 1, 1024000, NULL, NULL, "1000"},
    {"memory_mib", DRV_F_INT, false, 1, 16777216, NULL, NULL, "1024"},
    END,
};

/* a model's artifact: files already on the nodes (path), or an artifact
 * object (id) */
static const drv_field_t artifact_fields[] = {
    {"path", DRV_F_STRING, false, 1, 4096, NULL, NULL, NULL},
    {"sha256", DRV_F_STRING, false, 64, 64, NULL, NULL, NULL},
    {"id", DRV_F_ID, false, 0, 0, NULL, NULL, NULL},
    END,
};

static const drv_field_t model_fields[] = {
    {"id", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"description", DRV_F_STRING, false, 0, 1024, NULL, NULL, "\"\""},
    {"runtime", DRV_F_OBJECT, true, 0, 0, NULL, runtime_fields, NULL},
    {"resources", DRV_F_OBJECT, false, 0, 0, NULL, drv_resources_fields, NULL},
    {"params_b", DRV_F_NUMBER, false, 0.000001, 100000, NULL, NULL, NULL},
    {"dtype", DRV_F_ENUM, false, 0, 0, dtypes, NULL, NULL},
    {"artifact", DRV_F_OBJECT, false, 0, 0, NULL, artifact_fields, NULL},
    END,
};

/* one entry of a deployment's (and a job's, h_jobs.c) nodepools */
const drv_field_t drv_placement_fields[] = {
    {"cluster", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"nodepool", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"priority", DRV_F_INT, false, -1000, 1000, NULL, NULL, "0"},
    END,
};

static const char *const autoscale_metrics[] = {"concurrency", "queue", "kv_cache", NULL};

static const drv_field_t autoscale_fields[] = {
    {"min_replicas", DRV_F_INT, false, 0, 1000, NULL, NULL, "1"},
    {"max_replicas", DRV_F_INT, false, 0, 1000, NULL, NULL, "1"},
    {"target_concurrency", DRV_F_INT, false, 1, 100000, NULL, NULL, "4"},
    {"traffic_history_seconds", DRV_F_INT, false, 1, 3600, NULL, NULL, "60"},
    {"scale_up_delay_seconds", DRV_F_INT, false, 0, DAY, NULL, NULL, "0"},
    {"scale_down_delay_seconds", DRV_F_INT, false, 0, 7 * DAY, NULL, NULL, "300"},
    {"scale_to_zero_delay_seconds", DRV_F_INT, false, 0, 7 * DAY, NULL, NULL, "900"},
    {"max_scale_up_rate", DRV_F_INT, false, 2, 1000, NULL, NULL, "20"},   /* replicas.h rule 0a */
    {"cold_start_timeout_seconds", DRV_F_INT, false, 1, DAY, NULL, NULL, "300"},   /* gateway */
    /* replicas.h "SLO-aware sizing"; absent: off (target_concurrency) */
    {"ttft_slo_ms", DRV_F_INT, false, 1, 600000, NULL, NULL, NULL},   /* = DRV_RAS_TTFT_SLO_MAX_MS */
    {"e2e_slo_ms", DRV_F_INT, false, 1, 3600000, NULL, NULL, NULL},   /* = DRV_RAS_E2E_SLO_MAX_MS */
    /* LLM-aware load (issue 16): the replicas' own counts from the model's metrics_path */
    {"metric", DRV_F_ENUM, false, 0, 0, autoscale_metrics, NULL, NULL},   /* absent: concurrency */
    {"target_kv_cache", DRV_F_NUMBER, false, 0.01, 1, NULL, NULL, NULL},  /* kv_cache: [0.8] */
    END,
};

/* checkpoints (issue 14 item 7): DROVER_CHECKPOINT_DIR, kept at the head */
static const drv_field_t checkpoint_fields[] = {
    {"keep", DRV_F_INT, true, 1, 100, NULL, NULL, NULL},
    END,
};

static const drv_field_t deployment_fields[] = {
    {"id", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"description", DRV_F_STRING, false, 0, 1024, NULL, NULL, "\"\""},
    {"model", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"nodepools", DRV_F_OBJLIST, true, 1, 16, NULL, drv_placement_fields, NULL},
    {"autoscale", DRV_F_OBJECT, false, 0, 0, NULL, autoscale_fields, NULL},
    {"disable_packing", DRV_F_BOOL, false, 0, 0, NULL, NULL, "false"},
    /* GPU shares: refuse replicas whose share the node cannot enforce */
    {"strict_isolation", DRV_F_BOOL, false, 0, 0, NULL, NULL, "false"},
    {"enabled", DRV_F_BOOL, false, 0, 0, NULL, NULL, "true"},
    {"checkpoint", DRV_F_OBJECT, false, 0, 0, NULL, checkpoint_fields, NULL},
    END,
};

/* --- helpers -------------------------------------------------------------- */

static int64_t iget(const json_t *o, const char *path)
{
    /* "a.b" */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    char *save, *tok = strtok_r(buf, ".", &save);
    const json_t *v = o;
    while (tok && v) {
        v = json_object_get(v, tok);
        tok = strtok_r(NULL, ".", &save);
    }
    return json_integer_value(v);
}

bool drv_model_fits(const json_t *res, const drv_instance_type_t *t, char *why, size_t len)
{
    const json_t *gpu = json_object_get(res, "gpu");
    int64_t count = json_integer_value(json_object_get(gpu, "count"));
    int64_t mem = json_integer_value(json_object_get(gpu, "memory_mib"));
    int64_t cpu = json_integer_value(json_object_get(res, "cpu_millis"));
    int64_t ram = json_integer_value(json_object_get(res, "memory_mib"));
    const json_t *types = json_object_get(gpu, "types");
    if (count > t->gpu_count) {
        snprintf(why, len, "%s has %d GPU(s), the model needs %lld", t->id, t->gpu_count,
                 (long long)count);
        return false;
    }
    if (count > 0 && mem > t->gpu_memory_mib) {
        snprintf(why, len, "%s has %lld MiB per GPU, the model needs %lld", t->id,
                 (long long)t->gpu_memory_mib, (long long)mem);
        return false;
    }
    if (count > 0 && json_array_size(types) > 0) {
        bool ok = false;
        size_t i;
        json_t *v;
        json_array_foreach(types, i, v) if (strcasecmp(json_string_value(v), t->gpu_type) == 0)
            ok = true;
        if (!ok) {
            snprintf(why, len, "%s has %s GPUs, not one of the model's gpu.types", t->id,
                     t->gpu_type[0] ? t->gpu_type : "no");
            return false;
        }
    }
    if (cpu > (int64_t)t->vcpus * 1000) {
        snprintf(why, len, "%s has %d vCPUs, the model needs %lld millicores", t->id, t->vcpus,
                 (long long)cpu);
        return false;
    }
    if (ram > t->memory_mib) {
        snprintf(why, len, "%s has %lld MiB of memory, the model needs %lld", t->id,
                 (long long)t->memory_mib, (long long)ram);
        return false;
    }
    return true;
}

static drv_head_t *head_of(drv_req_t *req) { return req->head; }

/* Does `model` fit at least one instance type of `np`? 422 naming field if not. */
static int check_fit(drv_req_t *req, const drv_obj_t *model_obj, const json_t *np,
                     const char *np_name, const char *field, drv_error_t *err)
{
    const json_t *res = json_object_get(model_obj->spec, "resources");
    char why[256] = "", first[256] = "";
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(np, "instance_types"), i, t) {
        const drv_instance_type_t *it =
            drv_catalog_instance_type(head_of(req)->catalog, json_string_value(t));
        if (it && drv_model_fits(res, it, why, sizeof why))
            return 0;
        if (!first[0])
            snprintf(first, sizeof first, "%s", why);
    }
    return drv_err_unprocessable(err, field,
                                 "model '%s' fits none of nodepool '%s''s instance types (%s)",
                                 model_obj->id, np_name, first);
}

/* --- nodepool ------------------------------------------------------------- */

static void nodepool_normalize(json_t *spec)
{
    json_t *mn = json_object_get(spec, "min_nodes");
    if (json_is_integer(mn) && !json_object_get(spec, "max_nodes"))
        json_object_set_new(spec, "max_nodes",
                            json_integer(json_integer_value(mn) > 1 ? json_integer_value(mn) : 1));
}

/* Each deployment of owner that places on nodepool (cluster, id). */
typedef int (*dep_visit_fn)(drv_obj_t *dep, size_t idx, void *ctx);

static int for_each_deployment_on(drv_state_t *st, const char *owner, const char *cluster,
                                  const char *np, dep_visit_fn fn, void *ctx)
{
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", owner);
    size_t plen = strlen(prefix);
    for (size_t i = drv_state_lower_bound(st, DRV_K_DEPLOYMENT, prefix);
         i < drv_state_count(st, DRV_K_DEPLOYMENT); i++) {
        drv_obj_t *d = drv_state_at(st, DRV_K_DEPLOYMENT, i);
        if (strncmp(d->key, prefix, plen) != 0)
            break;
        size_t k;
        json_t *pl;
        json_array_foreach(json_object_get(d->spec, "nodepools"), k, pl) {
            if (strcmp(drv_json_str(pl, "cluster"), cluster) == 0 && strcmp(drv_json_str(pl, "nodepool"), np) == 0)
                if (fn(d, k, ctx) < 0)
                    return -1;
        }
    }
    return 0;
}

struct np_fit_ctx {
    drv_req_t *req;
    const json_t *np_spec;
    const char *np_name;
    drv_error_t *err;
};

static int np_refit(drv_obj_t *dep, size_t idx, void *vctx)
{
    struct np_fit_ctx *c = vctx;
    char key[192];
    snprintf(key, sizeof key, "%s/%s", dep->owner, drv_json_str(dep->spec, "model"));
    drv_obj_t *m = drv_state_get(c->req->head->state, DRV_K_MODEL, key);
    if (m && check_fit(c->req, m, c->np_spec, c->np_name, "instance_types", c->err) < 0) {
        drv_err_prefix(c->err, "deployment '%s' uses this nodepool", dep->id);
        return -1;
    }
    return 0;
}

static int nodepool_check(drv_req_t *req, const char *owner, json_t *spec, const drv_obj_t *old,
                          drv_error_t *err)
{
    drv_state_t *st = head_of(req)->state;
    const char *cid = req->params[0];
    char key[192];
    snprintf(key, sizeof key, "%s/%s", owner, cid);
    drv_obj_t *cl = drv_state_get(st, DRV_K_CLUSTER, key);
    if (!cl)
        return drv_err_not_found(err, "cluster '%s' not found", cid);
    const char *prov = drv_json_str(cl->spec, "provider"), *region = drv_json_str(cl->spec, "region");
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(spec, "instance_types"), i, t) {
        char field[64];
        snprintf(field, sizeof field, "instance_types[%zu]", i);
        const char *tid = json_string_value(t);
        const drv_instance_type_t *it = drv_catalog_instance_type(head_of(req)->catalog, tid);
        if (!it)
            return drv_err_unprocessable(err, field, "unknown instance type '%s' (see drover "
                                         "instance-types --provider %s)", tid, prov);
        if (!drv_catalog_type_offered(head_of(req)->catalog, tid, prov,
                                      strcmp(prov, "slurm") == 0 ? "any" : region))
            return drv_err_unprocessable(err, field, "instance type '%s' is not offered by "
                                         "provider '%s' in region '%s'", tid, prov, region);
        for (size_t j = 0; j < i; j++)
            if (json_equal(t, json_array_get(json_object_get(spec, "instance_types"), j)))
                return drv_err_invalid(err, field, "%s repeats '%s'", field, tid);
    }
    const json_t *sl = json_object_get(spec, "slurm");
    if (sl && json_object_size(sl) == 0 && strcmp(prov, "slurm") != 0) {
        json_object_del(spec, "slurm");   /* the schema's empty default: not shown elsewhere */
        sl = NULL;
    }
    if (sl && strcmp(prov, "slurm") != 0)
        return drv_err_invalid(err, "slurm", "slurm is for nodepools of slurm clusters, not %s",
                               prov);
    static const char *const sl_names[] = {"partition", "account", NULL};
    for (size_t k = 0; sl && sl_names[k]; k++) {
        const char *v = drv_json_str(sl, sl_names[k]);
        char field[32];
        snprintf(field, sizeof field, "slurm.%s", sl_names[k]);
        if (v && !drv_slurm_name_ok(v))
            return drv_err_invalid(err, field, "%s '%s' is not a Slurm %s name (letters, digits, "
                                   "'_', '-', '.')", field, v, sl_names[k]);
    }
    const char *tl = sl ? drv_json_str(sl, "time_limit") : NULL;
    if (tl && !drv_slurm_time_ok(tl))
        return drv_err_invalid(err, "slurm.time_limit", "slurm.time_limit '%s' is not a Slurm "
                               "time (MINUTES, HH:MM:SS, D-HH:MM:SS or UNLIMITED)", tl);
    const char *cap = drv_json_str(spec, "capacity_type");
    const drv_provider_t *p = drv_catalog_provider(head_of(req)->catalog, prov);
    if (strcmp(cap, "on_demand") != 0 && p && !p->supports_spot)
        return drv_err_unprocessable(err, "capacity_type", "provider '%s' has no spot capacity; "
                                     "use capacity_type on_demand", prov);
    if (iget(spec, "min_nodes") > iget(spec, "max_nodes"))
        return drv_err_invalid(err, "max_nodes", "max_nodes (%lld) must be >= min_nodes (%lld)",
                               (long long)iget(spec, "max_nodes"),
                               (long long)iget(spec, "min_nodes"));
    if (old) {
        struct np_fit_ctx c = {req, spec, old->id, err};
        if (for_each_deployment_on(st, owner, cid, old->id, np_refit, &c) < 0)
            return -1;
    }
    return 0;
}

static int np_in_use(drv_obj_t *dep, size_t idx, void *vctx)
{
    *(drv_obj_t **)vctx = dep;
    return -1;
}

static int nodepool_before_delete(drv_state_t *st, const drv_obj_t *obj, bool cascade,
                                  uint64_t *seq, drv_error_t *err)
{
    const char *cluster = drv_json_str(obj->spec, "cluster");
    drv_obj_t *user = NULL;
    if (for_each_deployment_on(st, obj->owner, cluster, obj->id, np_in_use, &user) < 0)
        return drv_err_conflict(err, "nodepool '%s/%s' is used by deployment '%s'; delete "
                                "the deployment or remove the nodepool from it first",
                                cluster, obj->id, user->id);
    return 0;
}

static json_t *nodepool_status(const drv_obj_t *obj)
{
    return json_pack("{s:i, s:{}}", "node_count", 0, "nodes");
}

static const char *const nodepool_immutable[] = {"cluster", NULL};

const drv_kind_desc_t drv_kind_nodepool = {
    .kind = DRV_K_NODEPOOL,
    .name = "nodepool",
    .path = "/v1/clusters/%s/nodepools",
    .nested = true,
    .schema = nodepool_fields,
    .immutable = nodepool_immutable,
    .normalize = nodepool_normalize,
    .check = nodepool_check,
    .before_delete = nodepool_before_delete,
    .initial_status = nodepool_status,
};

/* --- model ---------------------------------------------------------------- */

/* A request target's path goes into the gateway's request line as it is:
 * no space, no control character (CR/LF would end the line). */
static bool path_chars_ok(const char *p)
{
    for (; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p == 0x7f)
            return false;
    return true;
}

static int model_check(drv_req_t *req, const char *owner, json_t *spec, const drv_obj_t *old,
                       drv_error_t *err)
{
    const json_t *gpu = json_object_get(json_object_get(spec, "resources"), "gpu");
    int64_t count = iget(gpu, "count"), mem = iget(gpu, "memory_mib");
    if (count == 0 && mem > 0)
        return drv_err_invalid(err, "resources.gpu.memory_mib",
                               "resources.gpu.memory_mib is set but resources.gpu.count is 0; "
                               "set count: 1 for a GPU share");
    if (count == 0 && json_object_get(gpu, "types"))
        return drv_err_invalid(err, "resources.gpu.types",
                               "resources.gpu.types needs resources.gpu.count >= 1");
    if (count >= 2 && iget(gpu, "compute_percent") != 100)
        return drv_err_invalid(err, "resources.gpu.compute_percent",
                               "multi-GPU models take whole GPUs: compute_percent must be 100");
    if (drv_runtime_image_check(req, owner, json_object_get(spec, "runtime"), err) < 0)
        return -1;
    const char *path = drv_json_str(json_object_get(spec, "runtime"), "health_path");
    const char *ppath = drv_json_str(json_object_get(spec, "runtime"), "predict_path");
    if (path[0] != '/' || !path_chars_ok(path))
        return drv_err_invalid(err, "runtime.health_path", "runtime.health_path must start with "
                               "'/' and hold no spaces or control characters");
    if (ppath[0] != '/' || !path_chars_ok(ppath))
        return drv_err_invalid(err, "runtime.predict_path", "runtime.predict_path must start with "
                               "'/' and hold no spaces or control characters");
    const json_t *rt = json_object_get(spec, "runtime");
    if (json_is_true(json_object_get(rt, "metrics_port")) && !drv_json_str(rt, "metrics_path"))
        return drv_err_invalid(err, "runtime.metrics_port", "runtime.metrics_port serves "
                               "runtime.metrics_path on a second port: set runtime.metrics_path");
    const drv_preset_t *pre = drv_preset_find(drv_json_str(rt, "preset"));
    if (pre && pre->metrics_port && !json_is_true(json_object_get(rt, "metrics_port")))
        return drv_err_invalid(err, "runtime.metrics_port", "runtime.preset %s serves its metrics "
                               "on a port of its own ($(METRICS_PORT) in its command line): "
                               "runtime.metrics_port must stay true", pre->name);
    const json_t *art = json_object_get(spec, "artifact");
    /* (the schema fills an absent artifact as {}: no artifact) */
    if (json_object_get(art, "path") && json_object_get(art, "id"))
        return drv_err_invalid(err, "artifact", "artifact takes one of id (an artifact of "
                               "yours) and path (files already on the nodes), not both");
    if (json_object_get(art, "sha256") && !json_object_get(art, "path"))
        return drv_err_invalid(err, "artifact.path", "artifact.sha256 needs artifact.path "
                               "(an artifact id's manifest has its own digests)");
    if (drv_json_str(art, "id")) {
        char akey[192];
        snprintf(akey, sizeof akey, "%s/%s", owner, drv_json_str(art, "id"));
        if (!drv_state_get(head_of(req)->state, DRV_K_ARTIFACT, akey))
            return drv_err_invalid(err, "artifact.id", "artifact '%s' not found (push it with "
                                   "drover artifact push PATH --id %s)", drv_json_str(art, "id"),
                                   drv_json_str(art, "id"));
    }
    const char *sha = drv_json_str(art, "sha256");
    for (size_t i = 0; sha && sha[i]; i++)
        if (!((sha[i] >= '0' && sha[i] <= '9') || (sha[i] >= 'a' && sha[i] <= 'f')))
            return drv_err_invalid(err, "artifact.sha256",
                                   "artifact.sha256 must be 64 lowercase hex digits");
    if (!old)
        return 0;
    /* every deployment of this model must still fit its nodepools */
    drv_state_t *st = head_of(req)->state;
    drv_obj_t tmp = *old;
    tmp.spec = spec;
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", owner);
    for (size_t i = drv_state_lower_bound(st, DRV_K_DEPLOYMENT, prefix);
         i < drv_state_count(st, DRV_K_DEPLOYMENT); i++) {
        drv_obj_t *d = drv_state_at(st, DRV_K_DEPLOYMENT, i);
        if (strncmp(d->key, prefix, strlen(prefix)) != 0)
            break;
        if (strcmp(drv_json_str(d->spec, "model"), old->id) != 0)
            continue;
        size_t k;
        json_t *pl;
        json_array_foreach(json_object_get(d->spec, "nodepools"), k, pl) {
            char key[256], name[160];
            snprintf(key, sizeof key, "%s/%s/%s", owner, drv_json_str(pl, "cluster"), drv_json_str(pl, "nodepool"));
            snprintf(name, sizeof name, "%s/%s", drv_json_str(pl, "cluster"), drv_json_str(pl, "nodepool"));
            drv_obj_t *np = drv_state_get(st, DRV_K_NODEPOOL, key);
            if (np && check_fit(req, &tmp, np->spec, name, "resources", err) < 0) {
                drv_err_prefix(err, "deployment '%s'", d->id);
                return -1;
            }
        }
    }
    return 0;
}

static int model_before_delete(drv_state_t *st, const drv_obj_t *obj, bool cascade,
                               uint64_t *seq, drv_error_t *err)
{
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", obj->owner);
    size_t plen = strlen(prefix);
    size_t i = drv_state_lower_bound(st, DRV_K_DEPLOYMENT, prefix);
    while (i < drv_state_count(st, DRV_K_DEPLOYMENT)) {
        drv_obj_t *d = drv_state_at(st, DRV_K_DEPLOYMENT, i);
        if (strncmp(d->key, prefix, plen) != 0)
            break;
        if (strcmp(drv_json_str(d->spec, "model"), obj->id) != 0) {
            i++;
            continue;
        }
        if (!cascade)
            return drv_err_conflict(err, "model '%s' is used by deployment '%s'; delete it "
                                    "first or use ?cascade=true", obj->id, d->id);
        *seq = drv_state_del(st, DRV_K_DEPLOYMENT, d->key);
    }
    return 0;
}

/* A preset fills the paths its server documents where the model gives none. */
static void model_normalize(json_t *spec)
{
    json_t *rt = json_object_get(spec, "runtime");
    const drv_preset_t *p = drv_preset_find(drv_json_str(rt, "preset"));
    if (!p || !json_is_object(rt))
        return;
    const char *const fill[][2] = {{"health_path", p->health_path},
                                   {"predict_path", p->predict_path},
                                   {"metrics_path", p->metrics_path}};
    for (size_t i = 0; i < 3; i++)
        if (fill[i][1] && !json_object_get(rt, fill[i][0]))
            json_object_set_new(rt, fill[i][0], json_string(fill[i][1]));
    if (p->metrics_port && !json_object_get(rt, "metrics_port"))
        json_object_set_new(rt, "metrics_port", json_true());
}

const drv_kind_desc_t drv_kind_model = {
    .kind = DRV_K_MODEL,
    .name = "model",
    .path = "/v1/models",
    .schema = model_fields,
    .normalize = model_normalize,
    .check = model_check,
    .before_delete = model_before_delete,
};

/* --- artifact --------------------------------------------------------------- */

/* POST /v1/artifacts is h_artifacts.c's (it checks the blob store before
 * taking the lock); "manifest" and "upload" are taken out of the body
 * before this schema applies. */
static const char *const artifact_layouts[] = {"blobs", "files", NULL};

static const drv_field_t artifact_kind_fields[] = {
    {"id", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"source", DRV_F_STRING, true, 1, 1024, NULL, NULL, NULL},
    {"store", DRV_F_ID, false, 0, 0, NULL, NULL, NULL},
    {"layout", DRV_F_ENUM, false, 0, 0, artifact_layouts, NULL, NULL},   /* set by sources.c */
    {"description", DRV_F_STRING, false, 0, 1024, NULL, NULL, "\"\""},
    END,
};

static int artifact_before_delete(drv_state_t *st, const drv_obj_t *obj, bool cascade,
                                  uint64_t *seq, drv_error_t *err)
{
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", obj->owner);
    size_t plen = strlen(prefix);
    for (size_t i = drv_state_lower_bound(st, DRV_K_MODEL, prefix);
         i < drv_state_count(st, DRV_K_MODEL); i++) {
        drv_obj_t *m = drv_state_at(st, DRV_K_MODEL, i);
        if (strncmp(m->key, prefix, plen) != 0)
            break;
        const char *a = drv_json_str(json_object_get(m->spec, "artifact"), "id");
        if (a && strcmp(a, obj->id) == 0)
            return drv_err_conflict(err, "artifact '%s' is used by model '%s'; delete the "
                                    "model or change its artifact first", obj->id, m->id);
    }
    return 0;
}

const char *drv_artifact_state(const drv_obj_t *a)
{
    if (json_object_get(a->spec, "manifest"))
        return "ready";
    return drv_json_str(a->internal, "import_error") ? "failed" : "importing";
}

bool drv_artifact_import_failed(const drv_obj_t *a)
{
    return strcmp(drv_artifact_state(a), "failed") == 0;
}

/* state, and for a failed import its reason; the manifest's facts (0 and
 * "" until an import has one). An import's progress is head/imports.c's. */
static json_t *artifact_status(const drv_obj_t *obj)
{
    const json_t *m = json_object_get(obj->spec, "manifest");
    json_t *s = json_pack("{s:s, s:I, s:I, s:s}", "state", drv_artifact_state(obj), "total_size",
                          (json_int_t)json_integer_value(json_object_get(m, "total_size")),
                          "file_count", (json_int_t)json_array_size(json_object_get(m, "files")),
                          "digest", drv_json_str(m, "digest") ? drv_json_str(m, "digest") : "");
    if (drv_json_str(obj->internal, "import_error"))
        json_object_set_new(s, "reason", json_string(drv_json_str(obj->internal, "import_error")));
    return s;
}

const drv_kind_desc_t drv_kind_artifact = {
    .kind = DRV_K_ARTIFACT,
    .name = "artifact",
    .path = "/v1/artifacts",
    .schema = artifact_kind_fields,
    .before_delete = artifact_before_delete,
    .initial_status = artifact_status,
};

/* --- deployment ------------------------------------------------------------ */

static void deployment_normalize(json_t *spec)
{
    json_t *as = json_object_get(spec, "autoscale");
    if (!json_is_object(as))
        return;
    json_t *mn = json_object_get(as, "min_replicas");
    if (json_is_integer(mn) && !json_object_get(as, "max_replicas"))
        json_object_set_new(as, "max_replicas",
                            json_integer(json_integer_value(mn) > 1 ? json_integer_value(mn) : 1));
    json_t *sd = json_object_get(as, "scale_down_delay_seconds");
    if (json_is_integer(sd) && !json_object_get(as, "scale_to_zero_delay_seconds"))
        json_object_set_new(as, "scale_to_zero_delay_seconds",
                            json_integer(json_integer_value(sd) > 900 ? json_integer_value(sd)
                                                                       : 900));
}

static int deployment_check(drv_req_t *req, const char *owner, json_t *spec,
                            const drv_obj_t *old, drv_error_t *err)
{
    drv_state_t *st = head_of(req)->state;
    const json_t *as = json_object_get(spec, "autoscale");
    if (iget(as, "min_replicas") > iget(as, "max_replicas"))
        return drv_err_invalid(err, "autoscale.max_replicas",
                               "autoscale.max_replicas (%lld) must be >= min_replicas (%lld)",
                               (long long)iget(as, "max_replicas"),
                               (long long)iget(as, "min_replicas"));
    if (iget(as, "max_replicas") == 0)
        return drv_err_invalid(err, "autoscale.max_replicas",
                               "autoscale.max_replicas must be at least 1");
    if (iget(as, "scale_to_zero_delay_seconds") < iget(as, "scale_down_delay_seconds"))
        return drv_err_invalid(err, "autoscale.scale_to_zero_delay_seconds",
                               "autoscale.scale_to_zero_delay_seconds (%lld) must be >= "
                               "scale_down_delay_seconds (%lld)",
                               (long long)iget(as, "scale_to_zero_delay_seconds"),
                               (long long)iget(as, "scale_down_delay_seconds"));
    char key[256];
    snprintf(key, sizeof key, "%s/%s", owner, drv_json_str(spec, "model"));
    drv_obj_t *m = drv_state_get(st, DRV_K_MODEL, key);
    if (!m)
        return drv_err_unprocessable(err, "model", "model '%s' not found", drv_json_str(spec, "model"));
    const char *metric = drv_json_str(as, "metric");
    if (metric && strcmp(metric, "concurrency") != 0 &&
        !drv_json_str(json_object_get(m->spec, "runtime"), "metrics_path"))
        return drv_err_unprocessable(err, "autoscale.metric", "autoscale.metric %s reads the "
                                     "replicas' metrics: model '%s' has no runtime.metrics_path "
                                     "(a runtime.preset such as vllm gives one)", metric, m->id);
    if (json_object_get(as, "target_kv_cache") && (!metric || strcmp(metric, "kv_cache") != 0))
        return drv_err_invalid(err, "autoscale.target_kv_cache", "autoscale.target_kv_cache "
                               "needs autoscale.metric: kv_cache");
    size_t i;
    json_t *pl;
    const json_t *list = json_object_get(spec, "nodepools");
    json_array_foreach(list, i, pl) {
        char field[64], name[160];
        snprintf(field, sizeof field, "nodepools[%zu]", i);
        snprintf(name, sizeof name, "%s/%s", drv_json_str(pl, "cluster"), drv_json_str(pl, "nodepool"));
        for (size_t j = 0; j < i; j++) {
            const json_t *o = json_array_get(list, j);
            if (strcmp(drv_json_str(o, "cluster"), drv_json_str(pl, "cluster")) == 0 &&
                strcmp(drv_json_str(o, "nodepool"), drv_json_str(pl, "nodepool")) == 0)
                return drv_err_invalid(err, field, "%s repeats nodepool '%s'", field, name);
        }
        snprintf(key, sizeof key, "%s/%s/%s", owner, drv_json_str(pl, "cluster"), drv_json_str(pl, "nodepool"));
        drv_obj_t *np = drv_state_get(st, DRV_K_NODEPOOL, key);
        if (!np)
            return drv_err_unprocessable(err, field, "nodepool '%s' not found", name);
        if (check_fit(req, m, np->spec, name, field, err) < 0)
            return -1;
    }
    return 0;
}

static json_t *deployment_status(const drv_obj_t *obj)
{
    return json_pack("{s:i, s:i}", "desired_replicas", 0, "ready_replicas", 0);
}

const drv_kind_desc_t drv_kind_deployment = {
    .kind = DRV_K_DEPLOYMENT,
    .name = "deployment",
    .path = "/v1/deployments",
    .schema = deployment_fields,
    .normalize = deployment_normalize,
    .check = deployment_check,
    .initial_status = deployment_status,
};

void drv_resources_init_status(drv_state_t *st)
{
    const drv_kind_desc_t *kinds[] = {&drv_kind_nodepool, &drv_kind_deployment,
                                      &drv_kind_artifact, &drv_kind_job};
    for (size_t k = 0; k < 4; k++)
        for (size_t i = 0; i < drv_state_count(st, kinds[k]->kind); i++) {
            drv_obj_t *o = drv_state_at(st, kinds[k]->kind, i);
            drv_state_set_status(st, o, kinds[k]->initial_status(o));
        }
}
