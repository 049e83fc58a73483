/* controller_place.c — the control loop's third step (controller.c runs
 * the pass): every deployment holds min_replicas replicas (disabled: 0),
 * replicas whose deployment is gone are deleted, pending ones are placed
 * by the placement policy (sched/place.c) on a snapshot of the nodes built
 * once a pass, those that find no room are handed to the node autoscaler
 * (head/scaling.c), and node consolidation (head/consolidate.c) takes its
 * turn on the same snapshot. Runs under the state write lock, no I/O.
 * Shared with controller.c: controller_int.h.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/agent_peers.h"
#include "api/resource.h"
#include "catalog/presets.h"
#include "common/log.h"
#include "common/util.h"
#include "head/consolidate.h"
#include "head/controller_int.h"
#include "head/jobs_ctl.h"
#include "head/scaling.h"
#include "sched/place.h"
#include "state/events.h"
#include "state/jobs.h"
#include "state/nodes.h"
#include "state/state.h"
#include "state/timeline.h"

/* 3. replicas and placement ------------------------------------------------- */

void drv_controller__free_snapshot(snapshot_t *s)
{
    drv_sched_ctx_destroy(s->ctx);
    drv_sched_shapes_destroy(s->shapes);
    free(s->nodes);
}

void drv_controller__build_snapshot(drv_controller_t *c, snapshot_t *s)
{
    drv_head_t *head = c->head;
    drv_state_t *st = head->state;
    s->n = drv_state_count(st, DRV_K_NODE);
    s->nodes = calloc(s->n ? s->n : 1, sizeof *s->nodes);
    s->built = true;
    for (size_t i = 0; i < s->n; i++) {
        drv_obj_t *n = drv_state_at(st, DRV_K_NODE, i);
        drv_sched_node_t *sn = &s->nodes[i];
        sn->id = n->id;
        sn->pool = -1;
        sn->schedulable = drv_node_schedulable(n) && !drv_consolidation_holds_node(c->cons, n);
        sn->cpu_millis = iget(n->status, "cpus") * 1000;
        sn->memory_mib = iget(n->status, "memory_mib");
        const drv_instance_type_t *it =
            drv_catalog_instance_type(head->catalog, sget(n->spec, "instance_type"));
        size_t k;
        json_t *g;
        json_array_foreach(json_object_get(n->status, "gpus"), k, g) {
            if (sn->n_gpus == DRV_SCHED_MAX_GPUS)
                break;
            drv_sched_gpu_t *sg = &sn->gpus[sn->n_gpus++];
            sg->index = (int)iget(g, "index");
            sg->uuid = sget(g, "uuid");
            sg->type = it && it->gpu_type[0] ? it->gpu_type : sget(g, "name");
            sg->memory_mib = iget(g, "memory_mib");
            sg->healthy = json_is_true(json_object_get(g, "healthy"));
        }
    }
    /* what is already allocated */
    for (size_t i = 0; i < drv_state_count(st, DRV_K_REPLICA); i++) {
        drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
        const char *node = sget(r->spec, "node");
        if (!node)
            continue;
        char key[160];
        snprintf(key, sizeof key, "%s/%s", r->owner, node);
        size_t ni = drv_state_lower_bound(st, DRV_K_NODE, key);
        if (ni >= s->n || strcmp(drv_state_at(st, DRV_K_NODE, ni)->key, key) != 0)
            continue;
        drv_sched_node_t *sn = &s->nodes[ni];
        sn->used_cpu_millis += iget(r->spec, "cpu_millis");
        sn->used_memory_mib += iget(r->spec, "memory_mib");
        bool whole = json_is_true(json_object_get(r->spec, "whole_gpu"));
        size_t k;
        json_t *g;
        json_array_foreach(json_object_get(r->spec, "gpus"), k, g) {
            for (int j = 0; j < sn->n_gpus; j++) {
                if (sn->gpus[j].uuid && sget(g, "uuid") &&
                    strcmp(sn->gpus[j].uuid, sget(g, "uuid")) == 0) {
                    sn->gpus[j].shares++;
                    sn->gpus[j].used_memory_mib += iget(g, "memory_mib");
                    sn->gpus[j].used_compute += (int)iget(g, "compute_percent");
                    if (whole)
                        sn->gpus[j].exclusive = true;
                }
            }
        }
    }
    drv_jobs_snapshot(st, s->nodes, s->n);   /* training jobs' workers (state/jobs.c) */
    /* the typical request shapes come from the replicas drover runs */
    size_t nr = drv_state_count(st, DRV_K_REPLICA), k = 0;
    drv_sched_request_t *reqs = calloc(nr ? nr : 1, sizeof *reqs);
    static const char *no_types[1];
    for (size_t i = 0; i < nr; i++) {
        drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
        char dkey[256], mkey[256];
        snprintf(dkey, sizeof dkey, "%s/%s", r->owner, sget(r->spec, "deployment"));
        snprintf(mkey, sizeof mkey, "%s/%s", r->owner, sget(r->spec, "model"));
        const drv_obj_t *dep = drv_state_get(st, DRV_K_DEPLOYMENT, dkey);
        const drv_obj_t *model = drv_state_get(st, DRV_K_MODEL, mkey);
        if (dep && model)
            drv_replica_request(model, dep, &reqs[k++], no_types, 0);
    }
    s->shapes = k ? drv_sched_shapes_create(reqs, k, 0.95) : NULL;
    free(reqs);
    drv_sched_ctx_opts_t opts = {.shapes = s->shapes, .seed = 42};
    s->ctx = drv_sched_ctx_create(c->policy, s->nodes, s->n, &opts);
}

/* Mark the nodes of a deployment's nodepools with their priority rank. */
static void eligible(drv_controller_t *c, snapshot_t *s, const drv_obj_t *dep)
{
    drv_state_t *st = c->head->state;
    const json_t *pls = json_object_get(dep->spec, "nodepools");
    int rank[16];
    size_t npl = drv_deployment_ranks(dep, rank, 16);
    for (size_t i = 0; i < s->n; i++) {
        drv_obj_t *n = drv_state_at(st, DRV_K_NODE, i);
        int was = s->nodes[i].pool;
        s->nodes[i].pool = -1;
        for (size_t a = 0; a < npl && a < 16 && strcmp(n->owner, dep->owner) == 0; a++) {
            const json_t *pl = json_array_get(pls, a);
            if (strcmp(sget(pl, "cluster"), sget(n->spec, "cluster")) == 0 &&
                strcmp(sget(pl, "nodepool"), sget(n->spec, "nodepool")) == 0)
                s->nodes[i].pool = rank[a];
        }
        if (s->nodes[i].pool != was && s->ctx)   /* the context's scores depend on it */
            drv_sched_ctx_touch(s->ctx, i);
    }
}

/* containers: a model that runs an image goes only to nodes whose agent
 * reported a container engine; the others of dep's nodepools are made
 * ineligible (eligible() marks them again for the next deployment). Returns
 * how many were left out. */
static size_t image_nodes_only(drv_controller_t *c, snapshot_t *s, const drv_obj_t *model)
{
    if (!drv_runtime_image(json_object_get(model->spec, "runtime")))   /* image or preset */
        return 0;
    drv_state_t *st = c->head->state;
    size_t out = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->nodes[i].pool < 0)
            continue;
        drv_obj_t *n = drv_state_at(st, DRV_K_NODE, i);
        const char *eng = sget(json_object_get(n->status, "container_runtime"), "engine");
        if (eng && strcmp(eng, "none") != 0)
            continue;
        s->nodes[i].pool = -1;
        if (s->ctx)
            drv_sched_ctx_touch(s->ctx, i);
        out++;
    }
    return out;
}

/* Storage layer: mark the eligible nodes whose cache holds the model's
 * artifact (placement prefers them among equal scores, sched/warm.c). */
static void mark_warm(drv_controller_t *c, snapshot_t *s, const drv_obj_t *model)
{
    drv_state_t *st = c->head->state;
    const char *dg = drv_peer_model_digest(st, model);
    for (size_t i = 0; i < s->n; i++)
        s->nodes[i].warm = dg && s->nodes[i].pool >= 0 &&
                           drv_peer_node_holds(drv_state_at(st, DRV_K_NODE, i), dg);
}

static void set_replica_status(drv_state_t *st, drv_obj_t *r, const char *state,
                               const char *reason)
{
    json_t *s = json_pack("{s:s}", "state", state);
    if (reason)
        json_object_set_new(s, "reason", json_string(reason));
    if (sget(r->spec, "node"))
        json_object_set(s, "node", json_object_get(r->spec, "node"));
    drv_timeline_carry(r->status, s);
    if (json_equal(s, r->status)) {
        json_decref(s);
        return;
    }
    drv_state_set_status(st, r, s);
}

/* A model whose artifact is not ready yet (importing) or never will be (its
 * import failed): its replicas wait unplaced, pending with why. */
static bool artifact_waits(drv_state_t *st, const drv_obj_t *model, char *why, size_t n)
{
    const drv_obj_t *a = drv_peer_model_artifact(st, model);
    if (!a || !strcmp(drv_artifact_state(a), "ready"))
        return false;
    const char *id = a->id;
    if (drv_artifact_import_failed(a)) {
        snprintf(why, n, "artifact '%s' failed to import: %s (import it again: drover artifact "
                 "import --id %s ...)", id, sget(a->status, "reason"), id);
    } else {
        const json_t *p = json_object_get(a->status, "progress");
        snprintf(why, n, "waiting for artifact '%s' to be imported (%lld of %lld file(s), %lld "
                 "bytes hashed)", id, (long long)iget(p, "files_done"),
                 (long long)iget(p, "files"), (long long)iget(p, "bytes"));
    }
    return true;
}

static void place(drv_controller_t *c, snapshot_t *s, drv_obj_t *dep, const drv_obj_t *model,
                  drv_obj_t *r)
{
    drv_head_t *head = c->head;
    drv_state_t *st = head->state;
    if (!s->built)
        drv_controller__build_snapshot(c, s);
    eligible(c, s, dep);
    size_t no_engine = image_nodes_only(c, s, model);
    mark_warm(c, s, model);
    drv_sched_request_t rq;
    const char *types[32];
    drv_replica_request(model, dep, &rq, types, 32);
    drv_sched_choice_t ch;
    char why[256];
    int rc = s->ctx ? drv_sched_ctx_place(s->ctx, &rq, &ch, why, sizeof why)
                    : c->policy->place(s->nodes, s->n, &rq, &ch, why, sizeof why);
    if (rc < 0) {
        if (no_engine) {
            size_t l = strlen(why);
            snprintf(why + l, sizeof why - l, "%s%zu node(s) of its nodepools were left out: its "
                     "model runs image %s and they have no container engine (podman or docker)",
                     l ? "; " : "", no_engine, drv_runtime_image(json_object_get(model->spec, "runtime")));
        }
        set_replica_status(st, r, "pending", why);
        return;
    }
    if (s->ctx)
        drv_sched_ctx_commit(s->ctx, &rq, &ch);
    else
        drv_sched_commit(s->nodes, &rq, &ch);
    drv_sched_node_t *sn = &s->nodes[ch.node];
    json_t *gpus = json_array();
    for (int k = 0; k < ch.n_gpus; k++) {
        drv_sched_gpu_t *g = &sn->gpus[ch.gpus[k]];
        json_array_append_new(gpus, json_pack("{s:i, s:s, s:I, s:i}", "index", g->index, "uuid",
                                              g->uuid ? g->uuid : "", "memory_mib",
                                              (json_int_t)ch.gpu_memory_mib, "compute_percent",
                                              ch.compute_percent));
    }
    json_t *spec = json_deep_copy(r->spec);
    json_object_set_new(spec, "node", json_string(sn->id));
    json_object_set_new(spec, "gpus", gpus);
    json_object_set_new(spec, "whole_gpu", json_boolean(ch.whole && rq.gpu_count > 0));
    drv_obj_t *o = drv_obj_new(DRV_K_REPLICA, r->key, r->owner, r->id, spec, NULL);
    o->created_at = r->created_at;
    o->updated_at = drv_now_ms() / 1000;
    o->rv = r->rv + 1;
    o->status = json_pack("{s:s, s:s, s:s}", "state", "starting", "node", sn->id, "reason",
                          "placed; waiting for the node's agent");
    drv_timeline_carry(r->status, o->status);
    drv_timeline_stamp(o->status, "placed_ms", drv_now_ms());
    drv_state_put(st, o);
    drv_obj_t *node = drv_replica_node(st, o);
    if (node)
        drv_node_touch(head, node);
}

/* Replicas whose deployment is gone (deleted directly, by a model or user
 * cascade) go too. */
static void reap_orphans(drv_controller_t *c)
{
    drv_head_t *head = c->head;
    drv_state_t *st = head->state;
    size_t i = 0;
    while (i < drv_state_count(st, DRV_K_REPLICA)) {
        drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
        char key[256];
        snprintf(key, sizeof key, "%s/%s", r->owner, sget(r->spec, "deployment"));
        if (drv_state_get(st, DRV_K_DEPLOYMENT, key))
            i++;
        else
            drv_replica_delete(head, r);
    }
}

/* The next slot of c->pending (grown as needed; out of memory aborts). */
static drv_pending_t *next_pending(drv_controller_t *c)
{
    if (c->n_pending == c->cap_pending) {
        size_t ncap = c->cap_pending ? c->cap_pending * 2 : 64;
        drv_pending_t *np = realloc(c->pending, ncap * sizeof *np);
        if (!np)
            abort();
        c->pending = np;
        c->cap_pending = ncap;
    }
    return &c->pending[c->n_pending++];
}

/* A replica of dep found no room: the node autoscaler is asked to make
 * some (in dep's nodepools by priority, head/scaling.c). */
void drv_controller__add_pending(drv_controller_t *c, const drv_pending_t *want)
{
    *next_pending(c) = *want;
}

static void note_pending(drv_controller_t *c, const drv_obj_t *dep, const drv_obj_t *model)
{
    drv_pending_t *p = next_pending(c);
    memset(p, 0, sizeof *p);
    snprintf(p->deployment_key, sizeof p->deployment_key, "%s", dep->key);
    drv_replica_request(model, dep, &p->req, p->types, sizeof p->types / sizeof p->types[0]);
}

/* The lowest slot no live (not failed) replica under prefix holds: a
 * replacement takes the slot of the one it replaces, so its checkpoint
 * scope (deployment:ID:SLOT, state/nodes.c) follows it to any node. */
static int64_t free_slot(drv_state_t *st, const char *prefix)
{
    size_t plen = strlen(prefix);
    uint64_t used = 0;   /* slots 0..63; beyond, the count */
    int64_t n = 0;
    for (size_t i = drv_state_lower_bound(st, DRV_K_REPLICA, prefix);
         i < drv_state_count(st, DRV_K_REPLICA); i++) {
        const drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
        if (strncmp(r->key, prefix, plen) != 0)
            break;
        const char *rs = sget(r->status, "state");
        const json_t *sl = json_object_get(r->spec, "slot");
        if ((rs && strcmp(rs, "failed") == 0) || !json_is_integer(sl))
            continue;
        json_int_t v = json_integer_value(sl);
        if (v >= 0 && v < 64)
            used |= 1ull << v;
        n++;
    }
    for (int64_t k = 0; k < 64; k++)
        if (!(used & (1ull << k)))
            return k;
    return n;
}

void drv_controller__replicas(drv_controller_t *c, snapshot_t *snap)
{
    drv_head_t *head = c->head;
    drv_state_t *st = head->state;
    reap_orphans(c);
    for (size_t d = 0; d < drv_state_count(st, DRV_K_DEPLOYMENT); d++) {
        drv_obj_t *dep = drv_state_at(st, DRV_K_DEPLOYMENT, d);
        char key[256], prefix[256];
        snprintf(key, sizeof key, "%s/%s", dep->owner, sget(dep->spec, "model"));
        const drv_obj_t *model = drv_state_get(st, DRV_K_MODEL, key);
        snprintf(prefix, sizeof prefix, "%s/%s/", dep->owner, dep->id);
        size_t plen = strlen(prefix);
        /* total: its replicas; have: those not retiring (a consolidation
         * move starts their replacements: head/consolidate.h) */
        size_t first = drv_state_lower_bound(st, DRV_K_REPLICA, prefix), have = 0, total = 0;
        int starting = 0, on_way = 0, retiring = 0, n_ready = 0;
        drv_ras_llm_sample_t llm[64];   /* LLM-aware load: the ready replicas' own counts */
        size_t n_llm = 0;
        while (first + total < drv_state_count(st, DRV_K_REPLICA) &&
               strncmp(drv_state_at(st, DRV_K_REPLICA, first + total)->key, prefix, plen) == 0) {
            const drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, first + total);
            const char *rs = sget(r->status, "state");
            total++;
            n_ready += sget(r->spec, "node") && rs && strcmp(rs, "ready") == 0;   /* serving */
            const json_t *rl = json_object_get(r->status, "load");
            if (rs && strcmp(rs, "ready") == 0 && json_is_object(rl) && n_llm < 64)
                llm[n_llm++] = (drv_ras_llm_sample_t){
                    .running = json_number_value(json_object_get(rl, "running")),
                    .waiting = json_number_value(json_object_get(rl, "waiting")),
                    .kv_cache = json_is_number(json_object_get(rl, "kv_cache"))
                                    ? json_number_value(json_object_get(rl, "kv_cache"))
                                    : -1};
            if (drv_consolidation_retiring(c->cons, r)) {
                retiring++;
                continue;
            }
            bool placed = sget(r->spec, "node") != NULL;
            /* fetching its artifact counts as starting (issue 14) */
            bool coming = rs && (strcmp(rs, "starting") == 0 || strcmp(rs, "fetching") == 0 ||
                                 strcmp(rs, "pulling") == 0);   /* its image (issue 16) */
            starting += placed && coming;
            /* on their way: starting, or not placed yet (a failed one is not),
             * or waiting for its GPU (agent: a terminating replica still
             * holds it; not starting: its load has not begun) */
            on_way += !placed || coming || (rs && strcmp(rs, "waiting") == 0);
            have++;
        }
        /* how many it wants: the replica autoscaler, on the gateway's load */
        double load = 0;
        bool waiting = false;
        drv_head_service_t svc;
        bool have_svc = false;
        if (head->load)
            head->load(head->load_ctx, dep->key, &load, &waiting);
        if (head->service)
            have_svc = head->service(head->load_ctx, dep->key, &svc);
        char event[256] = "";
        int64_t want = 0;
        if (model && json_is_true(json_object_get(dep->spec, "enabled")))
            want = drv_scaling_replicas(c->scaling, head, dep, drv_now_ms(), load, llm, n_llm,
                                        have_svc ? &svc : NULL, waiting,
                                        (int)have + retiring, starting, on_way, n_ready,
                                        event, sizeof event);
        /* too many: drop pending ones first, then failed ones (and ones
         * waiting for their GPU: nothing loaded yet), then ready ones (the
         * last first); never one that is still starting */
        for (int pass = 0; pass < 3 && (int64_t)have > want; pass++) {
            for (size_t i = first + total; i-- > first && (int64_t)have > want;) {
                drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
                if (drv_consolidation_retiring(c->cons, r))
                    continue;
                const char *rs = sget(r->status, "state");
                bool pending = !sget(r->spec, "node");
                bool ready = rs && strcmp(rs, "ready") == 0;
                bool is_starting = !pending && rs && (strcmp(rs, "starting") == 0 ||
                                                      strcmp(rs, "fetching") == 0 ||
                                                      strcmp(rs, "pulling") == 0);
                if ((pass == 0 && pending) || (pass == 1 && !ready && !is_starting) ||
                    (pass == 2 && !is_starting)) {
                    drv_replica_delete(head, r);
                    have--;
                    total--;
                }
            }
        }
        for (; (int64_t)have < want; have++) {
            char hex[9], id[80], rkey[256];
            drv_random_hex(3, hex);
            snprintf(id, sizeof id, "%.56s-%s", dep->id, hex);
            snprintf(rkey, sizeof rkey, "%s%s", prefix, id);
            if (drv_state_get(st, DRV_K_REPLICA, rkey))
                break;   /* id clash: try again next pass */
            const json_t *res = json_object_get(model->spec, "resources");
            json_t *spec = json_pack("{s:s, s:s, s:s, s:n, s:[], s:b, s:O, s:O, s:I}", "id", id,
                                     "deployment", dep->id, "model", model->id, "node", "gpus",
                                     "whole_gpu", 0, "cpu_millis",
                                     json_object_get(res, "cpu_millis"), "memory_mib",
                                     json_object_get(res, "memory_mib"), "slot",
                                     (json_int_t)free_slot(st, prefix));
            drv_obj_t *r = drv_obj_new(DRV_K_REPLICA, rkey, dep->owner, id, spec, NULL);
            r->created_at = r->updated_at = drv_now_ms() / 1000;
            r->rv = 1;
            r->status = json_pack("{s:s}", "state", "pending");
            drv_timeline_stamp(r->status, "created_ms", drv_now_ms());
            drv_state_put(st, r);
        }
        /* place pending replicas; count ready ones; their cold starts */
        int64_t ready = 0;
        json_t *colds = json_array();
        first = drv_state_lower_bound(st, DRV_K_REPLICA, prefix);
        for (size_t i = first; i < drv_state_count(st, DRV_K_REPLICA); i++) {
            drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
            if (strncmp(r->key, prefix, plen) != 0)
                break;
            char why[512];
            if (!sget(r->spec, "node") && model && artifact_waits(st, model, why, sizeof why)) {
                set_replica_status(st, r, "pending", why);
            } else if (!sget(r->spec, "node") && model) {
                place(c, snap, dep, model, r);
                r = drv_state_at(st, DRV_K_REPLICA, i);
                if (!sget(r->spec, "node") && !drv_consolidation_moves(c->cons, dep))
                    note_pending(c, dep, model);   /* a move's replacement: no new node */
            }
            const json_t *rst = drv_state_at(st, DRV_K_REPLICA, i)->status;
            const char *rs = sget(rst, "state");
            if (rs && strcmp(rs, "ready") == 0)
                ready++;
            const json_t *cs = json_object_get(rst, "cold_start");
            if (json_is_object(cs) && json_array_size(colds) < 16) {
                json_t *one = json_pack("{s:s}", "replica", drv_state_at(st, DRV_K_REPLICA, i)->id);
                json_object_update(one, (json_t *)cs);
                json_array_append_new(colds, one);
            }
        }
        json_t *s = json_pack("{s:I, s:I, s:o}", "desired_replicas", (json_int_t)want,
                              "ready_replicas", (json_int_t)ready, "cold_starts", colds);
        const json_t *last = json_object_get(dep->status, "last_scale_event");
        if (event[0])
            json_object_set_new(s, "last_scale_event", json_string(event));
        else if (last)
            json_object_set(s, "last_scale_event", (json_t *)last);
        json_t *as = model && json_is_true(json_object_get(dep->spec, "enabled"))
                         ? drv_scaling_autoscaler_status(c->scaling, dep->key)
                         : NULL;
        if (as)   /* the SLO model, as the last decision saw it */
            json_object_set_new(s, "autoscaler", as);
        if (json_equal(s, dep->status))
            json_decref(s);
        else
            drv_state_set_status(st, dep, s);
    }
}

/* Node consolidation (head/consolidate.c): follow the move in progress, or
 * look for a node to empty on this pass's snapshot, before the node
 * autoscaler adds or removes nodes (the snapshot's indices are the node
 * collection's). */
void drv_controller__consolidate(drv_controller_t *c, snapshot_t *snap)
{
    int64_t now = drv_mono_ms();
    bool due = drv_consolidation_due(c->cons, c->head, now);
    if (due && !snap->built)
        drv_controller__build_snapshot(c, snap);
    if (drv_consolidation_pass(c->cons, c->head, c->policy, due ? snap->nodes : NULL,
                               due ? snap->n : 0, c->pending, c->n_pending, now)) {
        pthread_mutex_lock(&c->mu);   /* lock order: state, then mu */
        c->dirty = true;
        pthread_mutex_unlock(&c->mu);
    }
}
