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
 *
 * This file: the pass, steps 1, 2 and 4, the thread, create/destroy; step
 * 3 (replicas and placement, consolidation's turn) is controller_place.c;
 * what the two share is controller_int.h.
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
#include "head/controller_int.h"
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
     * state), while an SLO-mode deployment has traffic (its model counts
     * arrivals per second: drv_scaling_busy), or as a safety net every
     * few seconds: an idle head with thousands of deployments should not
     * take the write lock for them */
    pthread_mutex_lock(&c->mu);
    bool dirty = c->dirty;
    c->dirty = false;
    pthread_mutex_unlock(&c->mu);
    drv_node_ref_t *known[N_CLOUDS] = {NULL};
    drv_cloud_settings_t *accounts[N_CLOUDS] = {NULL};
    size_t n_known[N_CLOUDS] = {0}, n_accounts[N_CLOUDS] = {0};
    bool full = false;
    if (dirty || c->first_pass || drv_state_last_seq(head->state) != c->seen_seq ||
        now - c->last_full_ms > 5000 || drv_scaling_busy(c->scaling)) {   /* SLO traffic */
        if (c->first_pass)
            adopt(c);
        c->n_pending = 0;
        drv_controller__replicas(c, &snap);
        if (drv_state_count(head->state, DRV_K_JOB) > 0) {   /* jobs_ctl.h */
            if (!snap.built)
                drv_controller__build_snapshot(c, &snap);
            drv_pending_t *wants;
            size_t n_wants;
            drv_jobs_pass(head, c->policy, snap.nodes, snap.n, c->pending, c->n_pending,
                          drv_now_ms(), &wants, &n_wants);
            for (size_t i = 0; i < n_wants; i++)   /* a waiting gang's nodes */
                drv_controller__add_pending(c, &wants[i]);
            free(wants);
        }
        drv_controller__consolidate(c, &snap);
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
    drv_controller__free_snapshot(&snap);
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
    /* tests: hold the first pass (the window in which the agents of nodes
     * known before this boot sync before it: api/h_agent.c's version 0) */
    const char *hold = getenv("DROVER_TEST_FIRST_PASS_DELAY_MS");
    if (hold && atoi(hold) > 0) {
        struct timespec ts;
        drv_deadline_in(atoi(hold), &ts);
        while (!c->stop && pthread_cond_timedwait(&c->cv, &c->mu, &ts) == 0)
            ;
    }
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
