/* h_jobs.c — the `job` kind (training jobs, issue 15): its schema, its
 * checks (nodepools exist, a worker fits their instance types, the whole
 * gang fits what they could ever hold), its initial status, and
 * DELETE /v1/jobs/{id}, which cancels a job that has not ended (its
 * workers are stopped, the record stays, state cancelled) and removes one
 * that has. Create, get, list and patch are the generic handlers
 * (h_objects.c); a PATCH may change only priority and description. The run state and the
 * controller are state/jobs.c and head/jobs_ctl.c. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api/handlers.h"
#include "api/resource.h"
#include "catalog/catalog.h"
#include "common/util.h"
#include "sched/gang.h"
#include "state/events.h"
#include "state/head.h"
#include "state/jobs.h"
#include "store/store.h"
#include "common/json.h"

#define END {NULL, 0, false, 0, 0, NULL, NULL, NULL}
#define DAY 86400.0

static const drv_field_t runtime_fields[] = {
    {"command", DRV_F_STRLIST, false, 1, 64, NULL, NULL, NULL},   /* required without image */
    DRV_RUNTIME_IMAGE_FIELDS,   /* containers (issue 16): the workers in an OCI image */
    {"env", DRV_F_STRMAP, false, 0, 256, NULL, NULL, "{}"},
    END,
};

static const drv_field_t checkpoint_fields[] = {
    {"keep", DRV_F_INT, false, 1, 100, NULL, NULL, "3"},
    END,
};

static const drv_field_t job_fields[] = {
    {"id", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"description", DRV_F_STRING, false, 0, 1024, NULL, NULL, "\"\""},
    {"runtime", DRV_F_OBJECT, true, 0, 0, NULL, runtime_fields, NULL},
    {"workers", DRV_F_INT, false, 1, DRV_GANG_MAX_WORKERS, NULL, NULL, "1"},
    {"resources", DRV_F_OBJECT, false, 0, 0, NULL, drv_resources_fields, NULL},
    {"nodepools", DRV_F_OBJLIST, true, 1, 16, NULL, drv_placement_fields, NULL},
    {"priority", DRV_F_INT, false, -1000, 1000, NULL, NULL, "0"},
    {"queue", DRV_F_ID, false, 0, 0, NULL, NULL, NULL},   /* default: the owner */
    {"max_restarts", DRV_F_INT, false, 0, 1000, NULL, NULL, "3"},
    {"checkpoint", DRV_F_OBJECT, false, 0, 0, NULL, checkpoint_fields, NULL},
    {"timeout_seconds", DRV_F_INT, false, 1, 30 * DAY, NULL, NULL, NULL},
    {"preemptible", DRV_F_BOOL, false, 0, 0, NULL, NULL, "false"},
    END,
};

static int64_t iget(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* How many workers of these resources one node of type t holds. */
static int64_t per_node(const json_t *res, const drv_instance_type_t *t)
{
    const json_t *gpu = json_object_get(res, "gpu");
    int64_t count = iget(gpu, "count"), mem = iget(gpu, "memory_mib");
    int64_t pct = iget(gpu, "compute_percent"), cpu = iget(res, "cpu_millis");
    int64_t ram = iget(res, "memory_mib");
    int64_t n = cpu > 0 ? (int64_t)t->vcpus * 1000 / cpu : 1 << 20;
    if (ram > 0 && t->memory_mib / ram < n)
        n = t->memory_mib / ram;
    if (count == 1 && (pct < 100 || (mem > 0 && mem < t->gpu_memory_mib))) {
        int64_t per_gpu = pct > 0 ? 100 / pct : 1;
        if (mem > 0 && t->gpu_memory_mib / mem < per_gpu)
            per_gpu = t->gpu_memory_mib / mem;
        if (t->gpu_count * per_gpu < n)
            n = t->gpu_count * per_gpu;
    } else if (count > 0 && t->gpu_count / count < n) {
        n = t->gpu_count / count;
    }
    return n;
}

static int job_check(drv_req_t *req, const char *owner, json_t *spec, const drv_obj_t *old,
                     drv_error_t *err)
{
    drv_state_t *st = req->head->state;
    const json_t *res = json_object_get(spec, "resources");
    const json_t *gpu = json_object_get(res, "gpu");
    int64_t count = iget(gpu, "count"), workers = iget(spec, "workers");
    if (count == 0 && iget(gpu, "memory_mib") > 0)
        return drv_err_invalid(err, "resources.gpu.memory_mib",
                               "resources.gpu.memory_mib is set but resources.gpu.count is 0; "
                               "set count: 1 for a GPU share");
    if (count == 0 && json_object_get(gpu, "types"))
        return drv_err_invalid(err, "resources.gpu.types",
                               "resources.gpu.types needs resources.gpu.count >= 1");
    if (count >= 2 && iget(gpu, "compute_percent") != 100)
        return drv_err_invalid(err, "resources.gpu.compute_percent",
                               "workers with several GPUs take whole GPUs: compute_percent must "
                               "be 100");
    if (drv_runtime_image_check(req, owner, json_object_get(spec, "runtime"), err) < 0)
        return -1;
    if (!json_object_get(spec, "queue"))
        json_object_set_new(spec, "queue", json_string(owner));
    static const char *const also_fixed[] = {"queue", "timeout_seconds", NULL};
    for (size_t f = 0; old && also_fixed[f]; f++) {
        const json_t *a = json_object_get(spec, also_fixed[f]);
        const json_t *b = json_object_get(old->spec, also_fixed[f]);
        if ((a || b) && !(a && b && json_equal(a, b)))
            return drv_err_unprocessable(err, also_fixed[f], "%s cannot be changed after "
                                         "creation", also_fixed[f]);
    }
    const json_t *list = json_object_get(spec, "nodepools");
    int64_t could_hold = 0;
    char holds[512] = "";
    size_t i;
    json_t *pl;
    json_array_foreach(list, i, pl) {
        char field[64], name[160], key[256];
        snprintf(field, sizeof field, "nodepools[%zu]", i);
        snprintf(name, sizeof name, "%s/%s", drv_json_str(pl, "cluster"), drv_json_str(pl, "nodepool"));
        for (size_t j = 0; j < i; j++) {
            const json_t *o = json_array_get(list, j);
            if (strcmp(drv_json_str(o, "cluster"), drv_json_str(pl, "cluster")) == 0 &&
                strcmp(drv_json_str(o, "nodepool"), drv_json_str(pl, "nodepool")) == 0)
                return drv_err_invalid(err, field, "%s repeats nodepool '%s'", field, name);
        }
        snprintf(key, sizeof key, "%s/%s/%s", owner, drv_json_str(pl, "cluster"), drv_json_str(pl, "nodepool"));
        const drv_obj_t *np = drv_state_get(st, DRV_K_NODEPOOL, key);
        if (!np)
            return drv_err_unprocessable(err, field, "nodepool '%s' not found", name);
        /* the best instance type of the nodepool, and how many nodes it may have */
        int64_t best = 0;
        char why[256] = "", first[256] = "";
        size_t k;
        json_t *t;
        json_array_foreach(json_object_get(np->spec, "instance_types"), k, t) {
            const drv_instance_type_t *it =
                drv_catalog_instance_type(req->head->catalog, json_string_value(t));
            if (!it)
                continue;
            if (!drv_model_fits(res, it, why, sizeof why)) {
                if (!first[0])
                    snprintf(first, sizeof first, "%s", why);
                continue;
            }
            int64_t pn = per_node(res, it);
            if (pn > best)
                best = pn;
        }
        if (best == 0) {
            /* drv_model_fits speaks of "the model": say worker */
            char *m = strstr(first, "the model");
            if (m) {
                memmove(m + 8, m + 9, strlen(m + 9) + 1);
                memcpy(m, "a worker", 8);
            }
            return drv_err_unprocessable(err, field, "a worker fits none of nodepool '%s''s "
                                         "instance types (%s)", name, first);
        }
        int64_t nodes = iget(np->spec, "max_nodes");
        char prefix[96];
        snprintf(prefix, sizeof prefix, "%s/", owner);
        int64_t have = 0;   /* joined nodes count too (self-managed pools) */
        for (size_t n = drv_state_lower_bound(st, DRV_K_NODE, prefix);
             n < drv_state_count(st, DRV_K_NODE); n++) {
            const drv_obj_t *node = drv_state_at(st, DRV_K_NODE, n);
            if (strncmp(node->key, prefix, strlen(prefix)) != 0)
                break;
            have += strcmp(drv_json_str(node->spec, "cluster"), drv_json_str(pl, "cluster")) == 0 &&
                    strcmp(drv_json_str(node->spec, "nodepool"), drv_json_str(pl, "nodepool")) == 0;
        }
        if (have > nodes)
            nodes = have;
        could_hold += nodes * best;
        size_t hl = strlen(holds);
        snprintf(holds + hl, sizeof holds - hl, "%s%s: %lld node(s) x %lld", hl ? "; " : "",
                 name, (long long)nodes, (long long)best);
    }
    if (could_hold < workers) {
        drv_gang_request_t g = {.workers = (int)workers};
        const char *types[32];
        drv_obj_t tmp = {.spec = spec};
        drv_job_request(&tmp, &g.worker, types, 32);
        char shape[96];
        drv_gang_describe(&g, shape, sizeof shape);
        return drv_err_unprocessable(err, "workers", "the gang (%s) can never fit: its "
                                     "nodepools hold at most %lld worker(s) at once (%s); "
                                     "lower workers or raise a nodepool's max_nodes",
                                     shape, (long long)could_hold, holds);
    }
    return 0;
}

static json_t *job_status(const drv_obj_t *obj)
{
    /* from the run state (a loaded job) or queued (a new one); the
     * controller's next pass adds the rest */
    const json_t *run = drv_job_run(obj);
    json_t *s = json_pack("{s:s, s:i, s:I, s:I, s:I, s:I, s:{}}", "state", drv_job_state(obj),
                          "attempt", drv_job_attempt(obj), "restarts",
                          (json_int_t)iget(run, "restarts"), "preemptions",
                          (json_int_t)iget(run, "preemptions"), "workers_total",
                          (json_int_t)iget(obj->spec, "workers"), "workers_ready",
                          (json_int_t)0, "workers");
    if (drv_json_str(run, "reason"))
        json_object_set(s, "reason", json_object_get(run, "reason"));
    return s;
}

/* what a PATCH may change: priority (the queue's order) and description
 * (queue, defaulted by job_check, and timeout_seconds, which may be
 * absent, are checked there) */
static const char *const job_immutable[] = {"runtime", "workers", "resources", "nodepools",
                                            "max_restarts", "checkpoint", "preemptible",
                                            NULL};

const drv_kind_desc_t drv_kind_job = {
    .kind = DRV_K_JOB,
    .name = "job",
    .path = "/v1/jobs",
    .schema = job_fields,
    .immutable = job_immutable,
    .check = job_check,
    .initial_status = job_status,
};

/* DELETE /v1/jobs/{id}: cancel (not ended yet) or remove (ended). */
int drv_h_job_delete(drv_req_t *req, drv_resp_t *resp)
{
    drv_head_t *head = req->head;
    drv_state_t *st = head->state;
    drv_error_t err;
    static const char *const allowed[] = {NULL};
    if (drv_req_check_query(req, allowed, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    char key[256];
    snprintf(key, sizeof key, "%s/%s", req->who->user, req->params[0]);
    drv_state_wrlock(st);
    drv_obj_t *job = drv_state_get(st, DRV_K_JOB, key);
    if (!job) {
        drv_state_unlock(st);
        drv_err_not_found(&err, "job '%s' not found", req->params[0]);
        drv_resp_error(resp, &err);
        return 0;
    }
    uint64_t seq;
    char *body;
    bool removed = drv_job_state_final(drv_job_state(job));
    if (removed) {
        body = drv_strdup(job->rendered);
        drv_events_add(head->events, job->owner, "job", job->id, "deleted",
                       "%s job removed", drv_job_state(job));
        seq = drv_state_del(st, DRV_K_JOB, key);
    } else {
        const json_t *old = drv_job_run(job);
        json_t *run = old ? json_deep_copy(old) : json_pack("{s:i}", "attempt", 1);
        json_object_set_new(run, "state", json_string("cancelled"));
        json_object_set_new(run, "reason", json_sprintf("cancelled by %s", req->who->user));
        json_object_set_new(run, "finished_at", json_integer(drv_now_ms() / 1000));
        json_object_set_new(run, "placement", json_array());   /* its workers stop */
        job = drv_job_put_run(head, job, run, NULL);
        seq = job->seq;
        body = drv_strdup(job->rendered);
    }
    drv_state_unlock(st);
    drv_head_kick(head);
    /* 202: a cancel (its workers are being stopped); 200: removed */
    drv_resp_raw(resp, removed ? 200 : 202, "application/json", body, strlen(body));
    resp->wait_seq = seq > drv_store_committed(head->store) ? seq : 0;
    return 0;
}
