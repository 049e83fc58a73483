/* controller.c — the head's control loop (one thread).
 *
 * Each pass, under the state write lock and without I/O:
 *   1. node lifecycle: ready / not_ready / lost from the time of the last
 *      sync; a lost node's replicas are deleted (and so placed again);
 *      draining nodes give their replicas up; terminating nodes go once
 *      their machine is released;
 *   2. providers: nodepools on a provisioning provider hold min_nodes
 *      nodes; lost nodes whose machine is gone are released;
 *   3. replicas: each deployment has min_replicas of them (disabled: 0);
 *      pending ones are placed by the placement policy (sched/place.c);
 *      then training jobs: running gangs followed, queued ones admitted
 *      whole (head/jobs_ctl.c), after the replicas still owed;
 *   4. status roll-ups: nodepool node counts, deployment replica counts,
 *      running costs of nodes, nodepools and clusters (head/cost.c).
 * Provider calls gathered in the pass (start an agent, stop one) run after
 * the lock is released. Writes go through the state (durable, in order).
 * Cloud providers (aws, gcp, vultr, oracle, slurm) answer later: their finished calls are folded in at
 * the start of the next pass (head/cloud.c), a node whose machine the
 * provider no longer lists is released (and so replaced), and after each
 * full pass the provider learns which nodes exist (orphan machines go).
 */
#define _GNU_SOURCE
#include "head/controller.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/agent_peers.h"
#include "catalog/presets.h"
#include "api/resource.h"
#include "common/log.h"
#include "common/util.h"
#include "head/cloud.h"
#include "head/consolidate.h"
#include "head/cost.h"
#include "head/jobs_ctl.h"
#include "head/scaling.h"
#include "provider/aws.h"
#include "provider/gcp.h"
#include "provider/oci.h"
#include "provider/slurm.h"
#include "provider/vultr.h"
#include "provider/provider.h"
#include "sched/place.h"
#include "state/events.h"
#include "state/jobs.h"
#include "state/nodes.h"
#include "state/state.h"
#include "state/timeline.h"

#define TICK_MS 250
#define MIN_GAP_MS 100
#define MAX_ACTIONS 256

typedef struct action {
    enum { ACT_CREATE, ACT_DELETE } kind;
    const drv_provider_ops_t *ops;
    drv_node_launch_t launch;
} action_t;

struct drv_controller {
    drv_head_t *head;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, kicked, started;
    bool first_pass;
    bool dirty;                  /* a kick or a node change since the last full pass */
    uint64_t seen_seq;           /* state seq at the last full pass */
    int64_t last_full_ms;
    int64_t boot_ms;
    const drv_place_policy_t *policy;
    action_t actions[MAX_ACTIONS];
    size_t n_actions;
    drv_scaling_t *scaling;
    drv_consolidation_t *cons;   /* the node consolidation move in progress */
    drv_pending_t *pending;      /* replicas that found no room this pass */
    size_t n_pending, cap_pending;
};

static const char *sget(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static int64_t iget(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

static bool flag(const drv_obj_t *o, const char *k)
{
    return json_is_true(json_object_get(o->spec, k));
}

static void kick(void *ctx)
{
    drv_controller_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    c->kicked = true;
    c->dirty = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static const drv_obj_t *cluster_of(drv_state_t *st, const char *owner, const char *cluster)
{
    char key[192];
    snprintf(key, sizeof key, "%s/%s", owner, cluster);
    return drv_state_get(st, DRV_K_CLUSTER, key);
}

static const drv_provider_ops_t *ops_of_node(drv_state_t *st, const drv_obj_t *n)
{
    const drv_obj_t *cl = cluster_of(st, n->owner, sget(n->spec, "cluster"));
    return drv_provider_ops(cl ? sget(cl->spec, "provider") : sget(n->spec, "provider"));
}

static void add_action(drv_controller_t *c, int kind, const drv_provider_ops_t *ops,
                       const drv_node_launch_t *l)
{
    if (c->n_actions == MAX_ACTIONS)
        return;   /* the rest waits for the next pass */
    c->actions[c->n_actions].kind = kind;
    c->actions[c->n_actions].ops = ops;
    c->actions[c->n_actions].launch = *l;
    c->n_actions++;
}

/* Delete every replica placed on node n. */
static void release_replicas(drv_head_t *head, const drv_obj_t *n)
{
    drv_state_t *st = head->state;
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", n->owner);
    size_t plen = strlen(prefix);
    size_t i = drv_state_lower_bound(st, DRV_K_REPLICA, prefix);
    while (i < drv_state_count(st, DRV_K_REPLICA)) {
        drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
        if (strncmp(r->key, prefix, plen) != 0)
            break;
        const char *rn = sget(r->spec, "node");
        if (rn && strcmp(rn, n->id) == 0)
            drv_replica_delete(head, r);   /* removes index i */
        else
            i++;
    }
}

/* A node stopped syncing: what its replicas do is unknown until it reports
 * again (its agent may be gone, and its replicas with it). */
static void unknown_replicas(drv_head_t *head, const drv_obj_t *n)
{
    drv_state_t *st = head->state;
    char prefix[96], reason[160];
    snprintf(prefix, sizeof prefix, "%s/", n->owner);
    snprintf(reason, sizeof reason, "node %s stopped reporting", n->id);
    for (size_t i = drv_state_lower_bound(st, DRV_K_REPLICA, prefix);
         i < drv_state_count(st, DRV_K_REPLICA); i++) {
        drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
        if (strncmp(r->key, prefix, strlen(prefix)) != 0)
            break;
        const char *rn = sget(r->spec, "node");
        if (!rn || strcmp(rn, n->id) != 0)
            continue;
        json_t *s = r->status ? json_deep_copy(r->status) : json_object();
        json_object_set_new(s, "state", json_string("unknown"));
        json_object_set_new(s, "reason", json_string(reason));
        drv_state_set_status(st, r, s);
    }
}

/* Launch parameters for a node of nodepool np (instance type's resources). */
static void fill_launch(drv_head_t *head, const drv_obj_t *np, const drv_obj_t *n,
                        const char *secret, drv_node_launch_t *l)
{
    memset(l, 0, sizeof *l);
    snprintf(l->node_id, sizeof l->node_id, "%s", n->id);
    snprintf(l->owner, sizeof l->owner, "%s", n->owner);
    snprintf(l->secret, sizeof l->secret, "%s", secret ? secret : "");
    const char *it_id = sget(n->spec, "instance_type");
    const drv_instance_type_t *it = it_id ? drv_catalog_instance_type(head->catalog, it_id) : NULL;
    if (it && it->gpu_count > 0)
        snprintf(l->gpus, sizeof l->gpus, "%dx%s:%lld", it->gpu_count, it->gpu_type,
                 (long long)it->gpu_memory_mib);
    else
        snprintf(l->gpus, sizeof l->gpus, "none");
    l->cpus = it ? it->vcpus : 1;
    l->memory_mib = it ? (long long)it->memory_mib : 1024;
    (void)np;
}

static bool nodepool_exists(drv_state_t *st, const drv_obj_t *n)
{
    char key[256];
    snprintf(key, sizeof key, "%s/%s/%s", n->owner, sget(n->spec, "cluster"),
             sget(n->spec, "nodepool"));
    return drv_state_get(st, DRV_K_NODEPOOL, key) != NULL;
}

/* 1. lifecycle ------------------------------------------------------------- */

static void lifecycle(drv_controller_t *c, int64_t now)
{
    drv_head_t *head = c->head;
    drv_state_t *st = head->state;
    size_t i = 0;
    while (i < drv_state_count(st, DRV_K_NODE)) {
        drv_obj_t *n = drv_state_at(st, DRV_K_NODE, i);
        const drv_provider_ops_t *ops = ops_of_node(st, n);
        if (flag(n, "terminating")) {
            release_replicas(head, n);
            if (ops->provisions && ops->alive(head->prov, n->owner, n->id)) {
                if (now - n->soft.stop_sent_ms > 5000) {   /* ask again now and then */
                    drv_node_launch_t l;
                    fill_launch(head, NULL, n, NULL, &l);
                    add_action(c, ACT_DELETE, ops, &l);
                    n->soft.stop_sent_ms = now;
                }
                drv_node_render_status(st, n);
                i++;
                continue;
            }
            drv_info("node %s/%s deleted", n->owner, n->id);
            drv_events_add(head->events, n->owner, "node", n->id, "deleted",
                           "released by its provider and removed");
            char key[160];
            snprintf(key, sizeof key, "%s", n->key);
            drv_head_wake(head, drv_key_hash(key));
            drv_state_del(st, DRV_K_NODE, key);
            continue;   /* same index: the next node moved here */
        }
        int state = n->soft.node_state;
        if (n->soft.seen_ms > 0) {
            int64_t age = now - n->soft.seen_ms;
            state = age > head->cfg.node_lost_ms      ? DRV_NODE_LOST
                    : age > head->cfg.node_timeout_ms ? DRV_NODE_NOT_READY
                                                      : DRV_NODE_READY;
        } else if (now - c->boot_ms > head->cfg.node_lost_ms &&
                   n->created_at * 1000 < drv_now_ms() - head->cfg.node_lost_ms && !ops->gone) {
            /* never synced in time (a cloud machine boots for minutes: it
             * stays provisioning until the autoscaler's provision timeout) */
            state = DRV_NODE_LOST;
        }
        if (state != n->soft.node_state) {
            static const char *names[] = {"provisioning", "ready", "not_ready", "lost"};
            drv_info("node %s/%s: %s -> %s", n->owner, n->id, names[n->soft.node_state],
                     names[state]);
            drv_events_add(head->events, n->owner, "node", n->id, names[state],
                           "%s -> %s%s", names[n->soft.node_state], names[state],
                           state == DRV_NODE_LOST ? ": its replicas are placed again" : "");
            if (state == DRV_NODE_NOT_READY)
                unknown_replicas(head, n);
            n->soft.node_state = state;
            pthread_mutex_lock(&c->mu);   /* lock order: state, then mu */
            c->dirty = true;
            pthread_mutex_unlock(&c->mu);
            if (state == DRV_NODE_LOST)
                release_replicas(head, n);
        }
        if (flag(n, "draining"))
            release_replicas(head, n);
        const char *jt = sget(n->spec, "join_token");   /* not one an operator joined */
        if (ops->gone && (!jt || strcmp(jt, n->id) == 0) &&
            ops->gone(head->prov, n->owner, n->id)) {
            /* its machine is no longer listed (spot interruption, someone
             * terminated it): a lost node, replaced */
            drv_info("node %s/%s: its machine is gone; releasing it", n->owner, n->id);
            drv_events_add(head->events, n->owner, "node", n->id, "machine_gone",
                           "the provider no longer lists its machine; the node is released "
                           "and replaced");
            release_replicas(head, n);
            static const char *const f[] = {"terminating"};
            static const bool v[] = {true};
            n = drv_node_set_flags(st, n, f, v, 1, NULL);
            drv_node_render_status(st, n);
            i++;
            continue;
        }
        /* a provisioned node lost for another node_lost period is released
         * (its machine stopped, if it still runs but cannot reach us); its
         * replacement is already coming, as lost nodes do not count towards
         * min_nodes */
        bool orphan = !nodepool_exists(st, n);
        if (orphan ||
            (state == DRV_NODE_LOST && ops->provisions && n->soft.seen_ms > 0 &&
             now - n->soft.seen_ms > 2 * (int64_t)head->cfg.node_lost_ms)) {
            if (orphan)
                drv_info("node %s/%s: its nodepool is gone; terminating it", n->owner, n->id);
            static const char *const f[] = {"terminating"};
            static const bool v[] = {true};
            n = drv_node_set_flags(st, n, f, v, 1, NULL);
        }
        drv_node_render_status(st, n);
        i++;
    }
}

/* 2. provisioning providers -------------------------------------------------- */

static void launch_cb(void *ctx, const drv_provider_ops_t *ops, const drv_node_launch_t *l)
{
    drv_controller_t *c = ctx;
    if (ops->results) {   /* a cloud provider: settings and a boot join token */
        drv_node_launch_t cl = *l;
        drv_error_t err;
        if (drv_cloud_prepare_launch(c->head, c->scaling, &cl, &err) < 0) {
            drv_warn("node %s/%s: %s", l->owner, l->node_id, err.message);
            return;
        }
        add_action(c, ACT_CREATE, ops, &cl);
        explicit_bzero(&cl, sizeof cl);
        return;
    }
    add_action(c, ACT_CREATE, ops, l);
}

/* Finished calls of cloud providers (under the write lock). */
static const drv_provider_ops_t *const cloud_ops[] = {&drv_aws_ops, &drv_gcp_ops,
                                                       &drv_vultr_ops, &drv_oci_ops,
                                                       &drv_slurm_ops};
#define N_CLOUDS (sizeof cloud_ops / sizeof *cloud_ops)

static void absorb_results(drv_controller_t *c)
{
    drv_prov_result_t r[32];
    size_t n;
    int64_t now = drv_now_ms();
    for (size_t k = 0; k < N_CLOUDS; k++)
        while ((n = cloud_ops[k]->results(c->head->prov, r, 32)) > 0) {
            for (size_t i = 0; i < n; i++)
                drv_cloud_absorb(c->head, c->scaling, &r[i], now);
            pthread_mutex_lock(&c->mu);
            c->dirty = true;
            pthread_mutex_unlock(&c->mu);
        }
}

/* After a head restart: adopt live agents of provisioned nodes, restart the
 * dead ones (their credentials are on disk). How many nodes a nodepool
 * holds is the node autoscaler's (head/scaling.c). */
static void adopt(drv_controller_t *c)
{
    drv_head_t *head = c->head;
    drv_state_t *st = head->state;
    for (size_t i = 0; i < drv_state_count(st, DRV_K_NODE); i++) {
        drv_obj_t *n = drv_state_at(st, DRV_K_NODE, i);
        const drv_provider_ops_t *ops = ops_of_node(st, n);
        if (!ops->provisions || flag(n, "terminating") || ops->alive(head->prov, n->owner, n->id))
            continue;
        drv_node_launch_t l;
        fill_launch(head, NULL, n, "", &l);
        add_action(c, ACT_CREATE, ops, &l);
    }
}

/* 3. replicas and placement ------------------------------------------------- */

typedef struct snapshot {
    drv_sched_node_t *nodes;     /* parallel to the node collection */
    size_t n;
    bool built;
    drv_sched_shapes_t *shapes;  /* typical request shapes of the running replicas */
    drv_sched_ctx_t *ctx;        /* the policy bound to nodes (incremental scores) */
} snapshot_t;

static void free_snapshot(snapshot_t *s)
{
    drv_sched_ctx_destroy(s->ctx);
    drv_sched_shapes_destroy(s->shapes);
    free(s->nodes);
}

static void build_snapshot(drv_controller_t *c, snapshot_t *s)
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
        build_snapshot(c, s);
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

/* A replica of dep found no room: the node autoscaler is asked to make
 * some (in dep's nodepools by priority, head/scaling.c). */
static void add_pending(drv_controller_t *c, const drv_pending_t *want)
{
    if (c->n_pending == c->cap_pending) {
        size_t ncap = c->cap_pending ? c->cap_pending * 2 : 64;
        drv_pending_t *np = realloc(c->pending, ncap * sizeof *np);
        if (!np)
            abort();
        c->pending = np;
        c->cap_pending = ncap;
    }
    c->pending[c->n_pending++] = *want;
}

static void note_pending(drv_controller_t *c, const drv_obj_t *dep, const drv_obj_t *model)
{
    if (c->n_pending == c->cap_pending) {
        size_t ncap = c->cap_pending ? c->cap_pending * 2 : 64;
        drv_pending_t *np = realloc(c->pending, ncap * sizeof *np);
        if (!np)
            abort();
        c->pending = np;
        c->cap_pending = ncap;
    }
    drv_pending_t *p = &c->pending[c->n_pending++];
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

static void replicas(drv_controller_t *c, snapshot_t *snap)
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
            /* on their way: starting, or not placed yet (a failed one is not) */
            on_way += !placed || coming;
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
        /* too many: drop pending ones first, then failed ones, then ready
         * ones (the last first); never one that is still starting */
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
static void consolidate(drv_controller_t *c, snapshot_t *snap)
{
    int64_t now = drv_mono_ms();
    bool due = drv_consolidation_due(c->cons, c->head, now);
    if (due && !snap->built)
        build_snapshot(c, snap);
    if (drv_consolidation_pass(c->cons, c->head, c->policy, due ? snap->nodes : NULL,
                               due ? snap->n : 0, c->pending, c->n_pending, now)) {
        pthread_mutex_lock(&c->mu);   /* lock order: state, then mu */
        c->dirty = true;
        pthread_mutex_unlock(&c->mu);
    }
}

/* 4. nodepool roll-up --------------------------------------------------------- */

static void nodepool_status(drv_controller_t *c)
{
    drv_state_t *st = c->head->state;
    for (size_t p = 0; p < drv_state_count(st, DRV_K_NODEPOOL); p++) {
        drv_obj_t *np = drv_state_at(st, DRV_K_NODEPOOL, p);
        json_t *by = json_object();
        int total = 0;
        char prefix[96];
        snprintf(prefix, sizeof prefix, "%s/", np->owner);
        for (size_t i = drv_state_lower_bound(st, DRV_K_NODE, prefix);
             i < drv_state_count(st, DRV_K_NODE); i++) {
            drv_obj_t *n = drv_state_at(st, DRV_K_NODE, i);
            if (strncmp(n->key, prefix, strlen(prefix)) != 0)
                break;
            if (strcmp(sget(n->spec, "cluster"), sget(np->spec, "cluster")) != 0 ||
                strcmp(sget(n->spec, "nodepool"), np->id) != 0)
                continue;
            const char *sn = drv_node_state_name(n);
            json_object_set_new(by, sn, json_integer(iget(by, sn) + 1));
            total++;
        }
        json_t *s = json_pack("{s:i, s:o}", "node_count", total, "nodes", by);
        const json_t *last = json_object_get(np->status, "last_scale_event");
        if (last)
            json_object_set(s, "last_scale_event", (json_t *)last);
        static const char *const kept[] = {"provider_error", "cost"};   /* cloud.c, cost.c */
        for (size_t k = 0; k < 2; k++)
            if (json_object_get(np->status, kept[k]))
                json_object_set(s, kept[k], json_object_get(np->status, kept[k]));
        if (json_equal(s, np->status))
            json_decref(s);
        else
            drv_state_set_status(st, np, s);
    }
}

void drv_controller_tick(drv_controller_t *c)
{
    drv_head_t *head = c->head;
    snapshot_t snap = {0};
    c->n_actions = 0;
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;   /* reap local agents that exited */
    drv_state_wrlock(head->state);
    int64_t now = drv_mono_ms();
    if (c->first_pass) {
        /* nodes known before this boot: give them node_lost time to sync */
        for (size_t i = 0; i < drv_state_count(head->state, DRV_K_NODE); i++) {
            drv_obj_t *n = drv_state_at(head->state, DRV_K_NODE, i);
            /* (a cloud machine still booting stays provisioning: the
             * provisioning timeout, not node_lost, decides about it) */
            if (n->soft.seen_ms == 0 &&
                (flag(n, "registered") || !ops_of_node(head->state, n)->gone)) {
                n->soft.seen_ms = now - head->cfg.node_timeout_ms - 1;
                n->soft.node_state = DRV_NODE_NOT_READY;
                n->soft.version = head->version_base;
            }
        }
    }
    absorb_results(c);
    lifecycle(c, now);
    /* the rest only when something changed (a write, a kick, a node's
     * state) or as a safety net every few seconds: an idle head with
     * thousands of deployments should not take the write lock for them */
    pthread_mutex_lock(&c->mu);
    bool dirty = c->dirty;
    c->dirty = false;
    pthread_mutex_unlock(&c->mu);
    drv_node_ref_t *known[N_CLOUDS] = {NULL};
    drv_cloud_settings_t *accounts[N_CLOUDS] = {NULL};
    size_t n_known[N_CLOUDS] = {0}, n_accounts[N_CLOUDS] = {0};
    bool full = false;
    if (dirty || c->first_pass || drv_state_last_seq(head->state) != c->seen_seq ||
        now - c->last_full_ms > 5000) {
        if (c->first_pass)
            adopt(c);
        c->n_pending = 0;
        replicas(c, &snap);
        if (drv_state_count(head->state, DRV_K_JOB) > 0) {   /* jobs_ctl.h */
            if (!snap.built)
                build_snapshot(c, &snap);
            drv_pending_t *wants;
            size_t n_wants;
            drv_jobs_pass(head, c->policy, snap.nodes, snap.n, c->pending, c->n_pending,
                          drv_now_ms(), &wants, &n_wants);
            for (size_t i = 0; i < n_wants; i++)   /* a waiting gang's nodes */
                add_pending(c, &wants[i]);
            free(wants);
        }
        consolidate(c, &snap);
        drv_scaling_nodes(c->scaling, head, drv_now_ms(), c->pending, c->n_pending, launch_cb,
                          c);
        nodepool_status(c);
        drv_cost_update(head, drv_now_ms() / 1000);
        drv_head_publish(head);   /* the gateway's routing table */
        c->seen_seq = drv_state_last_seq(head->state);
        c->last_full_ms = now;
        for (size_t k = 0; k < N_CLOUDS; k++)
            drv_cloud_known(head, cloud_ops[k], &known[k], &n_known[k], &accounts[k],
                            &n_accounts[k]);
        full = true;
    }
    drv_state_unlock(head->state);
    for (size_t k = 0; k < N_CLOUDS; k++) {
        if (full)
            cloud_ops[k]->known_nodes(head->prov, known[k], n_known[k], accounts[k],
                                      n_accounts[k]);
        if (accounts[k])
            explicit_bzero(accounts[k], n_accounts[k] * sizeof *accounts[k]);
        free(known[k]);
        free(accounts[k]);
    }
    free_snapshot(&snap);
    c->first_pass = false;

    for (size_t i = 0; i < c->n_actions; i++) {
        action_t *a = &c->actions[i];
        drv_error_t err;
        int rc = 0;
        if (a->kind == ACT_CREATE && a->ops->create_node) {
            if (!a->launch.secret[0]) {
                /* restarting an agent whose credential is already on disk */
            }
            rc = a->ops->create_node(head->prov, &a->launch, &err);
            explicit_bzero(&a->launch.cloud, sizeof a->launch.cloud);
        } else if (a->kind == ACT_DELETE) {
            rc = a->ops->delete_node(head->prov, a->launch.owner, a->launch.node_id, &err);
        }
        if (rc < 0)
            drv_warn("provider %s: node %s/%s: %s", a->ops->name, a->launch.owner,
                     a->launch.node_id, err.message);
    }
}

static void *loop(void *arg)
{
    drv_controller_t *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        pthread_mutex_unlock(&c->mu);
        drv_controller_tick(c);
        pthread_mutex_lock(&c->mu);
        /* a kick brings the next pass forward, but passes stay MIN_GAP_MS
         * apart: hundreds of nodes joining at once must not keep the state
         * write lock taken back to back */
        struct timespec ts;
        drv_deadline_in(MIN_GAP_MS, &ts);
        while (!c->stop && pthread_cond_timedwait(&c->cv, &c->mu, &ts) == 0)
            ;
        if (!c->kicked && !c->stop) {
            drv_deadline_in(TICK_MS - MIN_GAP_MS, &ts);
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        }
        c->kicked = false;
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

drv_controller_t *drv_controller_create(drv_head_t *head, drv_error_t *err)
{
    if (!head->prov) {
        drv_err_internal(err, "the controller needs the providers' context (head->prov)");
        return NULL;
    }
    drv_controller_t *c = calloc(1, sizeof *c);
    if (!c) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    c->head = head;
    c->first_pass = true;
    c->boot_ms = drv_mono_ms();
    c->policy = drv_place_policy(head->cfg.placement_policy[0] ? head->cfg.placement_policy
                                                                : NULL);
    if (!c->policy) {
        free(c);
        drv_err_invalid(err, "placement_policy", "unknown placement policy '%s'",
                        head->cfg.placement_policy);
        return NULL;
    }
    c->scaling = drv_scaling_create();
    c->cons = drv_consolidation_create();
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    head->kick = kick;
    head->kick_ctx = c;
    if (pthread_create(&c->thread, NULL, loop, c) != 0) {
        head->kick = NULL;
        free(c);
        drv_err_internal(err, "cannot start the controller thread");
        return NULL;
    }
    c->started = true;
    return c;
}

void drv_controller_stop_local_agents(drv_controller_t *c, int wait_ms)
{
    drv_head_t *head = c->head;
    char (*ids)[2][64] = NULL;
    size_t n = 0;
    drv_state_rdlock(head->state);
    size_t total = drv_state_count(head->state, DRV_K_NODE);
    ids = calloc(total ? total : 1, sizeof *ids);
    for (size_t i = 0; i < total; i++) {
        drv_obj_t *nd = drv_state_at(head->state, DRV_K_NODE, i);
        if (ops_of_node(head->state, nd) == drv_provider_ops("local")) {
            snprintf(ids[n][0], 64, "%s", nd->owner);
            snprintf(ids[n][1], 64, "%s", nd->id);
            n++;
        }
    }
    drv_state_unlock(head->state);
    const drv_provider_ops_t *ops = drv_provider_ops("local");
    for (size_t i = 0; i < n; i++)
        ops->delete_node(head->prov, ids[i][0], ids[i][1], NULL);
    for (int waited = 0; waited < wait_ms; waited += 100) {
        size_t alive = 0;
        for (size_t i = 0; i < n; i++)
            alive += ops->alive(head->prov, ids[i][0], ids[i][1]);
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        if (!alive)
            break;
        usleep(100 * 1000);
    }
    if (n)
        drv_info("stopped %zu local agent(s)", n);
    free(ids);
}

void drv_controller_destroy(drv_controller_t *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (c->started)
        pthread_join(c->thread, NULL);
    c->head->kick = NULL;
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    drv_scaling_destroy(c->scaling);
    drv_consolidation_destroy(c->cons);
    free(c->pending);
    free(c);
}
