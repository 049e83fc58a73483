/* nodes.c — see nodes.h. */
#include "state/nodes.h"

#include <stdio.h>
#include <string.h>

#include "common/secret.h"
#include "common/util.h"
#include "state/jobs.h"
#include "common/json.h"

static int64_t iget(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

const char *drv_node_state_name(const drv_obj_t *n)
{
    if (json_is_true(json_object_get(n->spec, "terminating")))
        return "terminating";
    switch (n->soft.node_state) {
    case DRV_NODE_READY:
        return json_is_true(json_object_get(n->spec, "draining")) ? "draining" : "ready";
    case DRV_NODE_NOT_READY: return "not_ready";
    case DRV_NODE_LOST: return "lost";
    default:
        return json_is_true(json_object_get(n->spec, "registered")) ? "joining" : "provisioning";
    }
}

bool drv_node_schedulable(const drv_obj_t *n)
{
    return n->soft.node_state == DRV_NODE_READY &&
           !json_is_true(json_object_get(n->spec, "cordoned")) &&
           !json_is_true(json_object_get(n->spec, "draining")) &&
           !json_is_true(json_object_get(n->spec, "terminating"));
}

drv_obj_t *drv_node_create(drv_head_t *head, const drv_obj_t *np, const char *provider,
                           const char *instance_type, const char *capacity, char *secret,
                           uint64_t *seq, drv_error_t *err)
{
    char hash[65], hex[9], id[64], key[160];
    if (drv_secret_mint(DRV_NODE_PREFIX, secret, hash, err) < 0)
        return NULL;
    for (int tries = 0;; tries++) {
        if (drv_random_hex(3, hex) < 0 || tries > 20) {
            drv_err_internal(err, "cannot pick a node id");
            return NULL;
        }
        snprintf(id, sizeof id, "%.50s-%s", np->id, hex);
        snprintf(key, sizeof key, "%s/%s", np->owner, id);
        if (!drv_state_get(head->state, DRV_K_NODE, key))
            break;
    }
    const json_t *ts = json_object_get(np->spec, "instance_types");
    json_t *spec = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:b, s:b, s:b}", "id", id,
                             "cluster", drv_json_str(np->spec, "cluster"), "nodepool", np->id,
                             "instance_type",
                             instance_type ? instance_type : json_string_value(json_array_get(ts, 0)),
                             "capacity_type", capacity ? capacity : "on_demand", "provider",
                             provider, "registered", 0, "cordoned", 0, "draining", 0,
                             "terminating", 0);
    drv_obj_t *n = drv_obj_new(DRV_K_NODE, key, np->owner, id, spec,
                               json_pack("{s:s}", "hash", hash));
    n->created_at = n->updated_at = drv_now_ms() / 1000;
    n->rv = 1;
    n->soft.version = head->version_base;
    n->soft.node_state = DRV_NODE_PROVISIONING;
    *seq = drv_state_put(head->state, n);
    drv_node_render_status(head->state, n);
    return n;
}

drv_obj_t *drv_node_set_flags(drv_state_t *st, drv_obj_t *n, const char *const *names,
                              const bool *values, size_t count, uint64_t *seq)
{
    json_t *spec = json_deep_copy(n->spec);
    for (size_t i = 0; i < count; i++)
        json_object_set_new(spec, names[i], json_boolean(values[i]));
    if (json_equal(spec, n->spec)) {
        json_decref(spec);
        if (seq)
            *seq = n->seq;
        return n;
    }
    drv_obj_t *o = drv_obj_new(DRV_K_NODE, n->key, n->owner, n->id, spec,
                               n->internal ? json_incref(n->internal) : NULL);
    o->created_at = n->created_at;
    o->updated_at = drv_now_ms() / 1000;
    o->rv = n->rv + 1;
    uint64_t s = drv_state_put(st, o);
    if (seq)
        *seq = s;
    drv_node_render_status(st, o);
    return o;
}

void drv_node_touch(drv_head_t *head, drv_obj_t *node)
{
    node->soft.version++;
    drv_head_wake(head, drv_key_hash(node->key));
}

drv_obj_t *drv_replica_node(drv_state_t *st, const drv_obj_t *r)
{
    const char *node = drv_json_str(r->spec, "node");
    if (!node)
        return NULL;
    char key[160];
    snprintf(key, sizeof key, "%s/%s", r->owner, node);
    return drv_state_get(st, DRV_K_NODE, key);
}

uint64_t drv_replica_delete(drv_head_t *head, drv_obj_t *r)
{
    drv_obj_t *n = drv_replica_node(head->state, r);
    if (n)
        drv_node_touch(head, n);
    char key[256];
    snprintf(key, sizeof key, "%s", r->key);
    return drv_state_del(head->state, DRV_K_REPLICA, key);
}

/* A model's artifact as its agent gets it: {path, sha256} as the model
 * says; {id, source} of an artifact with its manifest (shared, not
 * copied) and the path of the head's blobs, which the agent reads with its
 * node credential (for an s3:// or https:// artifact the head answers each
 * read with a redirect to a presigned or https URL: api/sources.c). */
static json_t *artifact_for_agent(drv_state_t *st, const char *owner, const json_t *art)
{
    const char *id = drv_json_str(art, "id");
    if (!id)
        return json_deep_copy(art);
    char key[160];
    snprintf(key, sizeof key, "%s/%s", owner, id);
    const drv_obj_t *a = drv_state_get(st, DRV_K_ARTIFACT, key);
    const char *src = a ? drv_json_str(a->spec, "source") : NULL;
    json_t *out = json_pack("{s:s}", "id", id);
    if (src)
        json_object_set_new(out, "source", json_string(src));
    if (src && json_object_get(a->spec, "manifest")) {
        json_object_set(out, "manifest", json_object_get(a->spec, "manifest"));
        json_object_set_new(out, "blobs", json_string("/v1/blobs/sha256"));
    }
    return out;
}

/* A preset's command line (catalog/presets.h) in d: its entrypoint unless
 * the model gives a command, its arguments then the model's args, its
 * environment under the model's env. */
static void desired_preset(const drv_preset_t *p, const drv_preset_in_t *in, const json_t *rt,
                           json_t *d)
{
    json_t *r = drv_preset_render(p, in);
    if (!json_object_get(rt, "command") && json_object_get(r, "command"))
        json_object_set(d, "command", json_object_get(r, "command"));
    json_t *args = json_object_get(r, "args");
    if (json_object_get(rt, "args"))   /* extra flags after the preset's */
        json_array_extend(args, json_object_get(rt, "args"));
    json_object_set(d, "args", args);
    json_t *env = json_object_get(r, "env");
    json_object_update(env, json_object_get(rt, "env"));   /* the model's win */
    json_object_set(d, "env", env);
    if (p->ipc_host)
        json_object_set_new(d, "ipc_host", json_true());
    if (p->shm_mib > 0)
        json_object_set_new(d, "shm_mib", json_integer(p->shm_mib));
    json_decref(r);
}

void drv_node_desired_image(drv_state_t *st, const char *owner, const json_t *rt,
                            const drv_preset_in_t *in, json_t *d)
{
    const char *image = drv_runtime_image(rt);
    if (!image)
        return;
    json_object_set_new(d, "image", json_string(image));
    const drv_preset_t *p = drv_preset_find(drv_json_str(rt, "preset"));
    if (p)
        desired_preset(p, in, rt, d);
    else if (json_object_get(rt, "args"))
        json_object_set(d, "args", json_object_get(rt, "args"));
    if (json_object_get(rt, "pull_policy"))
        json_object_set(d, "pull_policy", json_object_get(rt, "pull_policy"));
    const char *cred = drv_json_str(rt, "image_credential");
    char ckey[192];
    snprintf(ckey, sizeof ckey, "%s/%s", owner, cred ? cred : "");
    const drv_obj_t *c = cred ? drv_state_get(st, DRV_K_CREDENTIAL, ckey) : NULL;
    if (c)   /* the login the node's engine pulls with (never rendered) */
        json_object_set_new(d, "registry_auth",
                            json_pack("{s:s, s:s, s:s}", "registry", drv_json_str(c->spec, "registry"),
                                      "username", drv_json_str(c->spec, "username"), "password",
                                      drv_json_str(c->spec, "password")));
}

/* A fractional replica's GPU memory over its GPU's (the node's report); 0:
 * whole GPUs, or the GPU's size unknown. */
static double share_fraction(const drv_obj_t *node, const json_t *rspec)
{
    if (json_is_true(json_object_get(rspec, "whole_gpu")))
        return 0;
    const json_t *g0 = json_array_get(json_object_get(rspec, "gpus"), 0);
    json_int_t want = json_integer_value(json_object_get(g0, "memory_mib"));
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(node->status, "gpus"), i, g) {
        json_int_t total = json_integer_value(json_object_get(g, "memory_mib"));
        if (want > 0 && total > want && json_equal(json_object_get(g, "uuid"),
                                                   json_object_get(g0, "uuid")))
            return (double)want / (double)total;
    }
    return 0;
}

json_t *drv_node_desired(drv_head_t *head, const drv_obj_t *node)
{
    drv_state_t *st = head->state;
    json_t *out = json_array();
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", node->owner);
    size_t plen = strlen(prefix);
    for (size_t i = drv_state_lower_bound(st, DRV_K_REPLICA, prefix);
         i < drv_state_count(st, DRV_K_REPLICA); i++) {
        drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
        if (strncmp(r->key, prefix, plen) != 0)
            break;
        const char *rn = drv_json_str(r->spec, "node");
        if (!rn || strcmp(rn, node->id) != 0)
            continue;
        char mkey[160];
        snprintf(mkey, sizeof mkey, "%s/%s", r->owner, drv_json_str(r->spec, "model"));
        drv_obj_t *m = drv_state_get(st, DRV_K_MODEL, mkey);
        if (!m)
            continue;
        const json_t *rt = json_object_get(m->spec, "runtime");
        json_t *uuids = json_array();
        size_t k;
        json_t *g;
        json_array_foreach(json_object_get(r->spec, "gpus"), k, g)
            json_array_append(uuids, json_object_get(g, "uuid"));
        const json_t *g0 = json_array_get(json_object_get(r->spec, "gpus"), 0);
        json_t *d = json_pack(
            "{s:s, s:s, s:s, s:o, s:O, s:O, s:O, s:O, s:o, s:I, s:I, s:b, s:O, s:O}", "id", r->id,
            "deployment", drv_json_str(r->spec, "deployment"), "model", m->id, "command",
            json_object_get(rt, "command") ? json_incref(json_object_get(rt, "command"))
                                           : json_array(),   /* absent: an image's own */ "env", json_object_get(rt, "env"), "health_path",
            json_object_get(rt, "health_path"), "predict_path", json_object_get(rt, "predict_path"),
            "startup_timeout_seconds", json_object_get(rt, "startup_timeout_seconds"), "gpus", uuids,
            "gpu_memory_limit_mib", (json_int_t)json_integer_value(json_object_get(g0, "memory_mib")),
            "gpu_compute_percent",
            (json_int_t)json_integer_value(json_object_get(g0, "compute_percent")), "whole_gpu",
            json_is_true(json_object_get(r->spec, "whole_gpu")), "cpu_millis",
            json_object_get(r->spec, "cpu_millis"), "memory_mib",
            json_object_get(r->spec, "memory_mib"));
        const json_t *art = json_object_get(m->spec, "artifact");
        if (art)
            json_object_set_new(d, "artifact", artifact_for_agent(st, r->owner, art));
        if (json_object_get(rt, "metrics_path"))   /* LLM-aware load: the agent scrapes it */
            json_object_set(d, "metrics_path", json_object_get(rt, "metrics_path"));
        if (json_is_true(json_object_get(rt, "metrics_port")))   /* ... on METRICS_PORT */
            json_object_set_new(d, "metrics_port", json_true());
        drv_preset_in_t pin = {.gpu_count = (int)json_integer_value(json_object_get(
                                   json_object_get(json_object_get(m->spec, "resources"), "gpu"),
                                   "count")),
                               .memory_fraction = share_fraction(node, r->spec)};
        drv_node_desired_image(st, r->owner, rt, &pin, d);
        /* checkpoints: the deployment's keep, the scope of the replica's slot */
        char dkey[160];
        snprintf(dkey, sizeof dkey, "%s/%s", r->owner, drv_json_str(r->spec, "deployment"));
        const drv_obj_t *dep = drv_state_get(st, DRV_K_DEPLOYMENT, dkey);
        const json_t *ck = dep ? json_object_get(dep->spec, "checkpoint") : NULL;
        if (ck && json_is_integer(json_object_get(r->spec, "slot"))) {
            char scope[160];
            snprintf(scope, sizeof scope, "deployment:%s:%lld", dep->id,
                     (long long)json_integer_value(json_object_get(r->spec, "slot")));
            json_object_set_new(d, "checkpoint",
                                json_pack("{s:s, s:O}", "scope", scope, "keep",
                                          json_object_get(ck, "keep")));
        }
        json_array_append_new(out, d);
    }
    drv_jobs_desired(head, node, out);   /* training jobs' workers (state/jobs.c) */
    return out;
}

void drv_node_render_status(drv_state_t *st, drv_obj_t *n)
{
    const char *want = drv_node_state_name(n);
    const char *shown = json_string_value(json_object_get(n->status, "state"));
    if (shown && strcmp(shown, want) == 0)
        return;   /* the common case, every pass for every node: no copy */
    json_t *s = n->status ? json_deep_copy(n->status) : json_object();
    json_object_set_new(s, "state", json_string(want));
    drv_state_set_status(st, n, s);
}

void drv_replica_request(const drv_obj_t *model, const drv_obj_t *dep, drv_sched_request_t *rq,
                         const char **types, size_t max_types)
{
    const json_t *res = json_object_get(model->spec, "resources");
    const json_t *gpu = json_object_get(res, "gpu");
    memset(rq, 0, sizeof *rq);
    rq->gpu_count = (int)iget(gpu, "count");
    rq->gpu_memory_mib = iget(gpu, "memory_mib");
    rq->compute_percent = (int)iget(gpu, "compute_percent");
    rq->cpu_millis = iget(res, "cpu_millis");
    rq->memory_mib = iget(res, "memory_mib");
    rq->disable_packing = json_is_true(json_object_get(dep->spec, "disable_packing"));
    size_t k;
    json_t *t;
    json_array_foreach(json_object_get(gpu, "types"), k, t) if (rq->n_gpu_types < max_types)
        types[rq->n_gpu_types++] = json_string_value(t);
    rq->gpu_types = types;
}

size_t drv_deployment_ranks(const drv_obj_t *dep, int *rank, size_t max)
{
    const json_t *pls = json_object_get(dep->spec, "nodepools");
    size_t n = json_array_size(pls) < max ? json_array_size(pls) : max;
    for (size_t a = 0; a < n; a++) {
        int64_t pa = iget(json_array_get(pls, a), "priority");
        rank[a] = 0;
        for (size_t b = 0; b < n; b++) {
            int64_t pb = iget(json_array_get(pls, b), "priority");
            rank[a] += pb > pa || (pb == pa && b < a);
        }
    }
    return n;
}
