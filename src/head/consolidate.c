/* consolidate.c — see consolidate.h. Builds the inputs of drv_cons_pick()
 * and drv_cons_progress() from the state, keeps the one move in progress,
 * and carries its steps out (replica deletions, the node's terminating
 * flag, events). Controller thread, under the state write lock. */
#include "head/consolidate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoscale/consolidate.h"
#include "common/log.h"
#include "provider/provider.h"
#include "state/events.h"
#include "state/nodes.h"
#include "common/json.h"

#define MAX_TYPES 8
#define MAX_PRIO 16   /* nodepools per deployment (API limit) */

struct drv_consolidation {
    bool active;
    char node_key[192], node_id[128], owner[64];
    char pool[160];                          /* CLUSTER/NODEPOOL, for events */
    int64_t started_ms, last_pick_ms;
    int64_t pick_every_ms;                   /* DRV_CONSOLIDATION_PICK_EVERY_MS, or tests' */
    bool picked_once;
    size_t n_reps;
    char reps[DRV_CONS_MAX_REPLICAS][256];   /* retiring replica keys */
    size_t n_deps;
    char deps[DRV_CONS_MAX_REPLICAS][256];   /* deployment keys */
    int ready_before[DRV_CONS_MAX_REPLICAS];
};

drv_consolidation_t *drv_consolidation_create(void)
{
    drv_consolidation_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    /* tests: look more often (100..60000 ms), so that their waits for
     * "nothing moved for more than one look" stay short */
    const char *t = getenv("DROVER_TEST_CONSOLIDATION_PICK_MS");
    int ms = t ? atoi(t) : 0;
    c->pick_every_ms = ms >= 100 && ms <= 60000 ? ms : DRV_CONSOLIDATION_PICK_EVERY_MS;
    return c;
}

void drv_consolidation_destroy(drv_consolidation_t *c)
{
    free(c);
}

bool drv_consolidation_holds_node(const drv_consolidation_t *c, const drv_obj_t *node)
{
    return c && c->active && strcmp(c->node_key, node->key) == 0;
}

bool drv_consolidation_retiring(const drv_consolidation_t *c, const drv_obj_t *replica)
{
    for (size_t i = 0; c && c->active && i < c->n_reps; i++)
        if (strcmp(c->reps[i], replica->key) == 0)
            return true;
    return false;
}

bool drv_consolidation_moves(const drv_consolidation_t *c, const drv_obj_t *dep)
{
    for (size_t i = 0; c && c->active && i < c->n_deps; i++)
        if (strcmp(c->deps[i], dep->key) == 0)
            return true;
    return false;
}

/* Index of an object of kind by key, or -1. */
static long index_of(drv_state_t *st, drv_kind_t kind, const char *key)
{
    size_t i = drv_state_lower_bound(st, kind, key);
    if (i < drv_state_count(st, kind) && strcmp(drv_state_at(st, kind, i)->key, key) == 0)
        return (long)i;
    return -1;
}

/* The nodepool index of node n, or -1. */
static long pool_of(drv_state_t *st, const drv_obj_t *n)
{
    char key[256];
    snprintf(key, sizeof key, "%s/%s/%s", n->owner, drv_json_str(n->spec, "cluster"),
             drv_json_str(n->spec, "nodepool"));
    return index_of(st, DRV_K_NODEPOOL, key);
}

static bool live(const drv_obj_t *n)
{
    return n->soft.node_state != DRV_NODE_LOST &&
           !json_is_true(json_object_get(n->spec, "terminating")) &&
           !json_is_true(json_object_get(n->spec, "draining"));
}

/* Whether nodepool np has consolidation on and a provider that removes nodes. */
static bool enabled(drv_state_t *st, const drv_obj_t *np)
{
    if (!json_is_true(json_object_get(np->spec, "consolidation")))
        return false;
    char ckey[192];
    snprintf(ckey, sizeof ckey, "%s/%s", np->owner, drv_json_str(np->spec, "cluster"));
    const drv_obj_t *cl = drv_state_get(st, DRV_K_CLUSTER, ckey);
    return cl && drv_provider_ops(drv_json_str(cl->spec, "provider"))->provisions;
}

bool drv_consolidation_due(const drv_consolidation_t *c, drv_head_t *head, int64_t now_ms)
{
    if (c->active || (c->picked_once && now_ms - c->last_pick_ms < c->pick_every_ms))
        return false;
    drv_state_t *st = head->state;
    for (size_t p = 0; p < drv_state_count(st, DRV_K_NODEPOOL); p++)
        if (enabled(st, drv_state_at(st, DRV_K_NODEPOOL, p)))
            return true;
    return false;
}

/* rank[p]: the rank of nodepool p in dep's list (0 = highest priority;
 * ties: the list's order), -1 when not listed. */
static void ranks_of(drv_state_t *st, const drv_obj_t *dep, size_t n_np, int *rank)
{
    for (size_t p = 0; p < n_np; p++)
        rank[p] = -1;
    const json_t *pls = json_object_get(dep->spec, "nodepools");
    int r[MAX_PRIO];
    size_t npl = drv_deployment_ranks(dep, r, MAX_PRIO);
    for (size_t a = 0; a < npl; a++) {
        const json_t *pa = json_array_get(pls, a);
        char key[256];
        snprintf(key, sizeof key, "%s/%s/%s", dep->owner, drv_json_str(pa, "cluster"),
                 drv_json_str(pa, "nodepool"));
        long p = index_of(st, DRV_K_NODEPOOL, key);
        if (p >= 0)
            rank[p] = r[a];
    }
}

static bool replica_ready(const drv_obj_t *r)
{
    const char *s = drv_json_str(r->status, "state");
    return s && strcmp(s, "ready") == 0;
}

static void event2(drv_head_t *head, const drv_consolidation_t *c, const char *type,
                   const char *reason)
{
    drv_info("nodepool %s/%s: %s: node %s: %s", c->owner, c->pool, type, c->node_id, reason);
    drv_events_add(head->events, c->owner, "nodepool", c->pool, type, "node %s: %s",
                   c->node_id, reason);
    drv_events_add(head->events, c->owner, "node", c->node_id, type, "%s", reason);
}

/* Look for a node to empty; start a move when one is found. */
static bool pick(drv_consolidation_t *c, drv_head_t *head, const drv_place_policy_t *policy,
                 const drv_sched_node_t *nodes, size_t n_nodes, const drv_pending_t *pending,
                 size_t n_pending)
{
    drv_state_t *st = head->state;
    size_t n_np = drv_state_count(st, DRV_K_NODEPOOL), n_rep = drv_state_count(st, DRV_K_REPLICA);
    if (n_nodes != drv_state_count(st, DRV_K_NODE))
        return false;   /* not this pass's snapshot */
    drv_cons_pool_t *pools = calloc(n_np + 1, sizeof *pools);
    drv_cons_node_t *info = calloc(n_nodes + 1, sizeof *info);
    drv_cons_replica_t *reps = calloc(n_rep + 1, sizeof *reps);
    const drv_obj_t **objs = calloc(n_rep + 1, sizeof *objs);
    const char **types = calloc((n_rep + 1) * MAX_TYPES, sizeof *types);
    int *ranks = calloc((n_rep + 1) * (n_np + 1), sizeof *ranks);
    drv_cons_pick_t *out = calloc(1, sizeof *out);
    bool started = false;
    if (!pools || !info || !reps || !objs || !types || !ranks || !out)
        goto done;
    for (size_t p = 0; p < n_np; p++) {
        const drv_obj_t *np = drv_state_at(st, DRV_K_NODEPOOL, p);
        pools[p].enabled = enabled(st, np);
        pools[p].min_nodes = (int)json_integer_value(json_object_get(np->spec, "min_nodes"));
    }
    for (size_t i = 0; i < n_nodes; i++) {
        const drv_obj_t *n = drv_state_at(st, DRV_K_NODE, i);
        info[i].pool = (int)pool_of(st, n);
        if (info[i].pool >= 0 && live(n))
            pools[info[i].pool].live++;
    }
    /* the replicas on nodes of nodepools with consolidation on */
    size_t k = 0;
    const drv_obj_t *last_dep = NULL;
    for (size_t i = 0; i < n_rep; i++) {
        const drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
        const char *node = drv_json_str(r->spec, "node");
        if (!node)
            continue;
        char key[256];
        snprintf(key, sizeof key, "%s/%s", r->owner, node);
        long ni = index_of(st, DRV_K_NODE, key);
        if (ni < 0 || info[ni].pool < 0 || !pools[info[ni].pool].enabled)
            continue;
        snprintf(key, sizeof key, "%s/%s", r->owner, drv_json_str(r->spec, "deployment"));
        const drv_obj_t *dep = drv_state_get(st, DRV_K_DEPLOYMENT, key);
        snprintf(key, sizeof key, "%s/%s", r->owner, drv_json_str(r->spec, "model"));
        const drv_obj_t *model = drv_state_get(st, DRV_K_MODEL, key);
        if (!dep || !model) {
            /* unknown needs: its node cannot be emptied safely */
            reps[k] = (drv_cons_replica_t){.node = (int)ni, .ready = false, .rank = ranks};
            objs[k++] = r;
            last_dep = NULL;   /* reps[k - 1].rank is not a deployment's row now */
            continue;
        }
        drv_replica_request(model, dep, &reps[k].req, types + k * MAX_TYPES, MAX_TYPES);
        reps[k].node = (int)ni;
        reps[k].ready = replica_ready(r);
        int *rk = ranks + k * (n_np + 1);
        if (dep == last_dep && k > 0)
            memcpy(rk, reps[k - 1].rank, n_np * sizeof *rk);
        else
            ranks_of(st, dep, n_np, rk);
        reps[k].rank = rk;
        last_dep = dep;
        objs[k++] = r;
    }
    drv_error_t err;
    /* the pending replicas that could use a nodepool with consolidation on */
    size_t short_of_room = 0;
    for (size_t i = 0; i < n_pending; i++) {
        const drv_obj_t *dep = drv_state_get(st, DRV_K_DEPLOYMENT, pending[i].deployment_key);
        int *rk = ranks + k * (n_np + 1);   /* scratch past the replicas' ranks */
        if (!dep)
            continue;
        ranks_of(st, dep, n_np, rk);
        for (size_t p = 0; p < n_np; p++)
            if (rk[p] >= 0 && pools[p].enabled) {
                short_of_room++;
                break;
            }
    }
    if (drv_cons_pick(policy, nodes, info, n_nodes, pools, n_np, reps, k, short_of_room, out,
                      &err) < 0) {
        drv_warn("consolidation: %s", err.message);
        goto done;
    }
    if (out->node < 0)
        goto done;
    /* start the move */
    const drv_obj_t *node = drv_state_at(st, DRV_K_NODE, (size_t)out->node);
    const drv_obj_t *np = drv_state_at(st, DRV_K_NODEPOOL, (size_t)info[out->node].pool);
    c->active = true;
    snprintf(c->node_key, sizeof c->node_key, "%s", node->key);
    snprintf(c->node_id, sizeof c->node_id, "%s", node->id);
    snprintf(c->owner, sizeof c->owner, "%s", node->owner);
    snprintf(c->pool, sizeof c->pool, "%s/%s", drv_json_str(np->spec, "cluster"), np->id);
    c->n_reps = c->n_deps = 0;
    for (size_t m = 0; m < out->n_moves; m++) {
        const drv_obj_t *r = objs[out->replica[m]];
        snprintf(c->reps[c->n_reps++], sizeof c->reps[0], "%s", r->key);
        char dkey[256];
        snprintf(dkey, sizeof dkey, "%s/%s", r->owner, drv_json_str(r->spec, "deployment"));
        size_t d = 0;
        while (d < c->n_deps && strcmp(c->deps[d], dkey) != 0)
            d++;
        if (d < c->n_deps)
            continue;
        snprintf(c->deps[c->n_deps], sizeof c->deps[0], "%s", dkey);
        int ready = 0;
        char prefix[260];
        snprintf(prefix, sizeof prefix, "%s/", dkey);
        for (size_t i = drv_state_lower_bound(st, DRV_K_REPLICA, prefix);
             i < n_rep && strncmp(drv_state_at(st, DRV_K_REPLICA, i)->key, prefix,
                                  strlen(prefix)) == 0;
             i++)
            ready += replica_ready(drv_state_at(st, DRV_K_REPLICA, i));
        c->ready_before[c->n_deps++] = ready;
    }
    event2(head, c, "consolidate", out->reason);
    started = true;
done:
    free(pools);
    free(info);
    free(reps);
    free(objs);
    free(types);
    free(ranks);
    free(out);
    return started;
}

/* Follow the move in progress. */
static bool follow(drv_consolidation_t *c, drv_head_t *head, int64_t now_ms)
{
    drv_state_t *st = head->state;
    drv_obj_t *node = drv_state_get(st, DRV_K_NODE, c->node_key);
    drv_cons_dep_t deps[DRV_CONS_MAX_REPLICAS];
    memset(deps, 0, sizeof deps);
    for (size_t d = 0; d < c->n_deps; d++) {
        deps[d].ready_before = c->ready_before[d];
        const drv_obj_t *dep = drv_state_get(st, DRV_K_DEPLOYMENT, c->deps[d]);
        deps[d].desired = !dep ? 0
                          : json_object_get(dep->status, "desired_replicas")
                              ? (int)json_integer_value(json_object_get(dep->status, "desired_replicas"))
                              : c->ready_before[d];
        char prefix[260];
        snprintf(prefix, sizeof prefix, "%s/", c->deps[d]);
        for (size_t i = drv_state_lower_bound(st, DRV_K_REPLICA, prefix);
             i < drv_state_count(st, DRV_K_REPLICA); i++) {
            const drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
            if (strncmp(r->key, prefix, strlen(prefix)) != 0)
                break;
            if (drv_consolidation_retiring(c, r))
                continue;
            deps[d].ready_new += replica_ready(r);
            deps[d].unplaced += drv_json_str(r->spec, "node") == NULL;
        }
    }
    drv_cons_watch_t w = {.node_ok = node && drv_node_schedulable(node),
                          .elapsed_ms = now_ms - c->started_ms, .deps = deps,
                          .n_deps = c->n_deps,
                          .place_timeout_ms = DRV_CONSOLIDATION_PLACE_TIMEOUT_MS};
    char why[256];
    drv_cons_step_t step = drv_cons_progress(&w, why, sizeof why);
    if (step == DRV_CONS_WAIT)
        return false;
    if (step == DRV_CONS_ABORT) {
        event2(head, c, "consolidation_aborted", why);
        c->active = false;
        return true;
    }
    /* done: stop the old replicas, then the node goes (never below min_nodes) */
    for (size_t i = 0; i < c->n_reps; i++) {
        drv_obj_t *r = drv_state_get(st, DRV_K_REPLICA, c->reps[i]);
        if (r)
            drv_replica_delete(head, r);
    }
    long p = node ? pool_of(st, node) : -1;
    int n_live = 0;
    for (size_t i = 0; p >= 0 && i < drv_state_count(st, DRV_K_NODE); i++) {
        const drv_obj_t *n = drv_state_at(st, DRV_K_NODE, i);
        n_live += live(n) && pool_of(st, n) == p;
    }
    const drv_obj_t *np = p >= 0 ? drv_state_at(st, DRV_K_NODEPOOL, (size_t)p) : NULL;
    int min = np ? (int)json_integer_value(json_object_get(np->spec, "min_nodes")) : 0;
    char msg[400];
    if (node && n_live > min) {
        static const char *const term[] = {"terminating"};
        static const bool yes[] = {true};
        drv_node_set_flags(st, node, term, yes, 1, NULL);
        snprintf(msg, sizeof msg, "%s", why);
    } else {
        snprintf(msg, sizeof msg, "the new replicas are ready; the old ones stop; the node "
                                  "stays (min_nodes %d)", min);
    }
    event2(head, c, "consolidated", msg);
    c->active = false;
    return true;
}

bool drv_consolidation_pass(drv_consolidation_t *c, drv_head_t *head,
                            const drv_place_policy_t *policy, const drv_sched_node_t *nodes,
                            size_t n_nodes, const drv_pending_t *pending, size_t n_pending,
                            int64_t now_ms)
{
    if (c->active)
        return follow(c, head, now_ms);
    if (!nodes)
        return false;
    c->picked_once = true;
    c->last_pick_ms = now_ms;
    if (!pick(c, head, policy, nodes, n_nodes, pending, n_pending))
        return false;
    c->started_ms = now_ms;
    return true;
}
