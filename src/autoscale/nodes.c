/* nodes.c — the node autoscaler's decisions (see nodes.h for the steps).
 *
 * Pure: every input is an argument, the only state is the caller's
 * drv_nas_state_t (backoffs); no clock, no I/O, no locks. The simulation
 * places requests with the real placement policy (sched/place.c) on
 * hypothetical empty nodes built from catalog instance types, one node at a
 * time: a node is filled with what fits, in the caller's order, and then
 * closed (its free capacity only shrinks, so later requests that did not
 * fit never would). One scratch allocation per call (flags per pending
 * replica and per node), made before anything changes.
 */
#include "autoscale/nodes.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

/* --- small helpers --------------------------------------------------------- */

static const char *const policy_names[] = {"on_demand", "spot", "spot_with_fallback"};

int drv_capacity_policy_parse(const char *s, drv_capacity_policy_t *out)
{
    for (int i = 0; s && i < 3; i++)
        if (strcmp(s, policy_names[i]) == 0) {
            *out = (drv_capacity_policy_t)i;
            return 0;
        }
    return -1;
}

const char *drv_capacity_name(drv_capacity_t c)
{
    return c == DRV_CAPACITY_SPOT ? "spot" : "on_demand";
}

static double price_of(const drv_instance_type_t *t, drv_capacity_t c)
{
    if (c == DRV_CAPACITY_SPOT && t->spot_price_per_hour >= 0)
        return t->spot_price_per_hour;
    return t->price_per_hour;
}

static int64_t backoff_base(const drv_nas_config_t *cfg)
{
    return cfg && cfg->backoff_ms > 0 ? cfg->backoff_ms : DRV_NAS_DEFAULT_BACKOFF_MS;
}

static int64_t backoff_max(const drv_nas_config_t *cfg)
{
    int64_t m = cfg && cfg->backoff_max_ms > 0 ? cfg->backoff_max_ms : DRV_NAS_DEFAULT_BACKOFF_MAX_MS;
    return m < backoff_base(cfg) ? backoff_base(cfg) : m;
}

static int64_t provision_timeout(const drv_nas_config_t *cfg)
{
    return cfg->provision_timeout_ms > 0 ? cfg->provision_timeout_ms
                                         : DRV_NAS_DEFAULT_PROVISION_TIMEOUT_MS;
}

static bool is_live(const drv_nas_node_t *n)
{
    return n->state == DRV_NAS_NODE_PROVISIONING || n->state == DRV_NAS_NODE_READY ||
           n->state == DRV_NAS_NODE_NOT_READY;
}

static void event(drv_nas_decision_t *out, const char *kind, const drv_instance_type_t *t,
                  drv_capacity_t cap, const char *node, int nodes, int replicas,
                  const char *fmt, ...) __attribute__((format(printf, 8, 9)));

static void event(drv_nas_decision_t *out, const char *kind, const drv_instance_type_t *t,
                  drv_capacity_t cap, const char *node, int nodes, int replicas,
                  const char *fmt, ...)
{
    if (out->n_events == DRV_NAS_MAX_EVENTS)
        return;   /* the counts in the decision still tell */
    drv_nas_event_t *e = &out->events[out->n_events++];
    memset(e, 0, sizeof *e);
    snprintf(e->kind, sizeof e->kind, "%s", kind);
    snprintf(e->instance_type, sizeof e->instance_type, "%s", t ? t->id : "");
    e->capacity = cap;
    snprintf(e->node, sizeof e->node, "%s", node ? node : "");
    e->nodes = nodes;
    e->replicas = replicas;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->reason, sizeof e->reason, fmt, ap);
    va_end(ap);
}

/* --- config and state ------------------------------------------------------ */

int drv_nas_config_check(const drv_nas_config_t *cfg, drv_error_t *err)
{
    if (cfg->min_nodes < 0)
        return drv_err_invalid(err, "min_nodes", "min_nodes must be >= 0");
    if (cfg->max_nodes < cfg->min_nodes)
        return drv_err_invalid(err, "max_nodes", "max_nodes (%d) must be >= min_nodes (%d)",
                               cfg->max_nodes, cfg->min_nodes);
    if (cfg->n_types < 1 || cfg->n_types > DRV_NAS_MAX_TYPES || !cfg->types)
        return drv_err_invalid(err, "instance_types", "a nodepool has 1 to %d instance types",
                               DRV_NAS_MAX_TYPES);
    for (size_t i = 0; i < cfg->n_types; i++)
        if (!cfg->types[i] || !cfg->types[i]->id)
            return drv_err_invalid(err, "instance_types", "instance type %zu is missing", i);
    if ((unsigned)cfg->capacity > DRV_CAPACITY_POLICY_SPOT_WITH_FALLBACK)
        return drv_err_invalid(err, "capacity_type", "unknown capacity type");
    if (cfg->scale_down_delay_ms < 0 || cfg->provision_timeout_ms < 0 || cfg->backoff_ms < 0 ||
        cfg->backoff_max_ms < 0)
        return drv_err_invalid(err, "node_scale_down_delay_seconds",
                               "delays and timeouts must be >= 0");
    return 0;
}

int drv_nas_config_from_json(const json_t *spec, const drv_catalog_t *cat,
                             const drv_instance_type_t **types_buf, size_t max_types,
                             drv_nas_config_t *cfg, drv_error_t *err)
{
    memset(cfg, 0, sizeof *cfg);
    const json_t *its = json_object_get(spec, "instance_types");
    size_t n = json_array_size(its);
    if (n == 0 || n > max_types || n > DRV_NAS_MAX_TYPES)
        return drv_err_invalid(err, "instance_types", "a nodepool has 1 to %d instance types",
                               DRV_NAS_MAX_TYPES);
    for (size_t i = 0; i < n; i++) {
        const char *id = json_string_value(json_array_get(its, i));
        const drv_instance_type_t *t = id ? drv_catalog_instance_type(cat, id) : NULL;
        if (!t)
            return drv_err(err, 422, "unprocessable", "instance_types",
                           "unknown instance type '%s'", id ? id : "(not a string)");
        types_buf[i] = t;
    }
    const json_t *ct = json_object_get(spec, "capacity_type");
    drv_capacity_policy_t pol = DRV_CAPACITY_POLICY_ON_DEMAND;
    if (ct && drv_capacity_policy_parse(json_string_value(ct), &pol) < 0)
        return drv_err_invalid(err, "capacity_type", "unknown capacity_type");
    const json_t *mn = json_object_get(spec, "min_nodes"), *mx = json_object_get(spec, "max_nodes");
    const json_t *dl = json_object_get(spec, "node_scale_down_delay_seconds");
    int64_t min = json_is_integer(mn) ? json_integer_value(mn) : 0;
    int64_t max = json_is_integer(mx) ? json_integer_value(mx) : (min > 1 ? min : 1);
    int64_t delay = json_is_integer(dl) ? json_integer_value(dl) : 300;
    if (min < 0 || min > 1000000 || max < 0 || max > 1000000 || delay < 0 || delay > 86400 * 365)
        return drv_err_invalid(err, "max_nodes", "node counts or delay out of range");
    cfg->min_nodes = (int)min;
    cfg->max_nodes = (int)max;
    cfg->types = types_buf;
    cfg->n_types = n;
    cfg->capacity = pol;
    cfg->scale_down_delay_ms = delay * 1000;
    const json_t *pt = json_object_get(spec, "provision_timeout_seconds");
    if (json_is_integer(pt))   /* the nodepool's own (cloud machines boot for minutes) */
        cfg->provision_timeout_ms = json_integer_value(pt) * 1000;
    return drv_nas_config_check(cfg, err);
}

void drv_nas_state_init(drv_nas_state_t *s)
{
    memset(s, 0, sizeof *s);
}

static drv_nas_backoff_t *find_backoff(const drv_nas_state_t *s, const char *type_id,
                                       drv_capacity_t cap)
{
    for (size_t i = 0; i < s->n_backoff; i++)
        if (s->backoff[i].capacity == cap && strcmp(s->backoff[i].type, type_id) == 0)
            return (drv_nas_backoff_t *)&s->backoff[i];
    return NULL;
}

void drv_nas_report_failure(drv_nas_state_t *s, const drv_nas_config_t *cfg, const char *type_id,
                            drv_capacity_t cap, int64_t now_ms, const char *why)
{
    assert(s && type_id);
    drv_nas_backoff_t *b = find_backoff(s, type_id, cap);
    if (!b) {
        if (s->n_backoff == DRV_NAS_MAX_BACKOFF) {   /* evict the one ending first */
            size_t v = 0;
            for (size_t i = 1; i < s->n_backoff; i++)
                if (s->backoff[i].until_ms < s->backoff[v].until_ms)
                    v = i;
            s->backoff[v] = s->backoff[--s->n_backoff];
        }
        b = &s->backoff[s->n_backoff++];
        memset(b, 0, sizeof *b);
        snprintf(b->type, sizeof b->type, "%s", type_id);
        b->capacity = cap;
    }
    if (b->failures < 30)
        b->failures++;
    int64_t d = backoff_base(cfg), max = backoff_max(cfg);
    for (int i = 1; i < b->failures && d < max; i++)
        d *= 2;
    if (d > max)
        d = max;
    b->failed_ms = now_ms;
    b->until_ms = now_ms + d;
    snprintf(b->why, sizeof b->why, "%s", why ? why : "");
}

bool drv_nas_backing_off(const drv_nas_state_t *s, const char *type_id, drv_capacity_t cap,
                         int64_t now_ms, int64_t *until_ms)
{
    const drv_nas_backoff_t *b = find_backoff(s, type_id, cap);
    if (!b || now_ms >= b->until_ms)
        return false;
    if (until_ms)
        *until_ms = b->until_ms;
    return true;
}

/* Forget the backoff of (type, capacity) pairs a ready node created after
 * the failure proves working again. */
static void forget_recovered(drv_nas_state_t *s, const drv_nas_node_t *nodes, size_t n)
{
    size_t i = 0;
    while (i < s->n_backoff) {
        const drv_nas_backoff_t *b = &s->backoff[i];
        bool ok = false;
        for (size_t k = 0; k < n && !ok; k++)
            ok = nodes[k].state == DRV_NAS_NODE_READY && nodes[k].type &&
                 nodes[k].capacity == b->capacity && nodes[k].created_ms >= b->failed_ms &&
                 strcmp(nodes[k].type->id, b->type) == 0;
        if (ok)
            s->backoff[i] = s->backoff[--s->n_backoff];
        else
            i++;
    }
}

/* The capacity to buy type t with now; -1 when every allowed one backs off. */
static int option_for(const drv_nas_config_t *cfg, const drv_nas_state_t *s,
                      const drv_instance_type_t *t, int64_t now, drv_capacity_t *cap,
                      bool *fallback)
{
    *fallback = false;
    bool spot_off = drv_nas_backing_off(s, t->id, DRV_CAPACITY_SPOT, now, NULL);
    bool od_off = drv_nas_backing_off(s, t->id, DRV_CAPACITY_ON_DEMAND, now, NULL);
    switch (cfg->capacity) {
    case DRV_CAPACITY_POLICY_ON_DEMAND:
        *cap = DRV_CAPACITY_ON_DEMAND;
        return od_off ? -1 : 0;
    case DRV_CAPACITY_POLICY_SPOT:
        *cap = DRV_CAPACITY_SPOT;
        return spot_off ? -1 : 0;
    case DRV_CAPACITY_POLICY_SPOT_WITH_FALLBACK:
        if (!spot_off) {
            *cap = DRV_CAPACITY_SPOT;
            return 0;
        }
        *cap = DRV_CAPACITY_ON_DEMAND;
        *fallback = true;
        return od_off ? -1 : 0;
    }
    return -1;
}

/* --- simulation ------------------------------------------------------------ */

static void node_from_type(const drv_instance_type_t *t, drv_sched_node_t *sn)
{
    memset(sn, 0, sizeof *sn);
    sn->id = t->id;
    sn->pool = 0;
    sn->schedulable = true;
    sn->cpu_millis = (int64_t)t->vcpus * 1000;
    sn->memory_mib = t->memory_mib;
    int g = t->gpu_count < DRV_SCHED_MAX_GPUS ? t->gpu_count : DRV_SCHED_MAX_GPUS;
    for (int i = 0; i < g; i++) {
        sn->gpus[i].index = i;
        sn->gpus[i].type = t->gpu_type;
        sn->gpus[i].memory_mib = t->gpu_memory_mib;
        sn->gpus[i].healthy = true;
    }
    sn->n_gpus = g < 0 ? 0 : g;
}

static bool same_request(const drv_sched_request_t *a, const drv_sched_request_t *b)
{
    return a->gpu_count == b->gpu_count && a->gpu_memory_mib == b->gpu_memory_mib &&
           a->compute_percent == b->compute_percent && a->cpu_millis == b->cpu_millis &&
           a->memory_mib == b->memory_mib && a->disable_packing == b->disable_packing &&
           a->n_gpu_types == b->n_gpu_types && a->gpu_types == b->gpu_types;
}

/* Fill one new node of type t with the requests not yet done[], in order;
 * mark[] (optional) gets the ones it holds. Returns how many it holds. */
static int fill(const drv_place_policy_t *pol, const drv_instance_type_t *t,
                const drv_sched_request_t *reqs, size_t n, const bool *done, bool *mark)
{
    drv_sched_node_t sn;
    node_from_type(t, &sn);
    const drv_sched_request_t *miss[4] = {NULL};   /* requests that no longer fit */
    size_t n_miss = 0, next_miss = 0;
    int held = 0;
    for (size_t i = 0; i < n; i++) {
        if (done && done[i])
            continue;
        bool known_miss = false;
        for (size_t k = 0; k < n_miss && !known_miss; k++)
            known_miss = same_request(miss[k], &reqs[i]);
        if (known_miss)
            continue;   /* the node only fills up: an identical request fails again */
        drv_sched_choice_t c;
        char why[8];
        if (pol->place(&sn, 1, &reqs[i], &c, why, sizeof why) == 0) {
            drv_sched_commit(&sn, &reqs[i], &c);
            held++;
            if (mark)
                mark[i] = true;
        } else {
            miss[next_miss++ % 4] = &reqs[i];
            if (n_miss < 4)
                n_miss++;
        }
    }
    return held;
}

int drv_nas_node_holds(const drv_instance_type_t *t, const drv_sched_request_t *reqs, size_t n,
                       const bool *skip)
{
    assert(t && (reqs || n == 0));
    return fill(drv_place_policy(NULL), t, reqs, n, skip, NULL);
}

int drv_nas_node_fill(const drv_instance_type_t *t, const drv_sched_request_t *reqs, size_t n,
                      bool *done)
{
    assert(t && done && (reqs || n == 0));
    return fill(drv_place_policy(NULL), t, reqs, n, done, done);
}

drv_nas_uncovered_t drv_nas_why_uncovered(const drv_nas_config_t *cfg, int live,
                                          const drv_sched_request_t *r)
{
    const drv_place_policy_t *pol = cfg->policy ? cfg->policy : drv_place_policy(NULL);
    for (size_t t = 0; t < cfg->n_types; t++)
        if (fill(pol, cfg->types[t], r, 1, NULL, NULL) > 0)
            return live >= cfg->max_nodes ? DRV_NAS_UNCOVERED_AT_MAX : DRV_NAS_UNCOVERED_BACKOFF;
    return DRV_NAS_UNCOVERED_NO_FIT;
}

/* --- the decision ---------------------------------------------------------- */

static drv_nas_create_t *group(drv_nas_decision_t *out, const drv_instance_type_t *t,
                               drv_capacity_t cap, bool fallback)
{
    for (size_t i = 0; i < out->n_create; i++)
        if (out->create[i].type == t && out->create[i].capacity == cap)
            return &out->create[i];
    assert(out->n_create < DRV_NAS_MAX_CREATE);
    drv_nas_create_t *g = &out->create[out->n_create++];
    memset(g, 0, sizeof *g);
    g->type = t;
    g->capacity = cap;
    g->fallback = fallback;
    return g;
}

/* The earliest end of a backoff on a type of this nodepool, 0 when none. */
static int64_t earliest_retry(const drv_nas_config_t *cfg, const drv_nas_state_t *s, int64_t now)
{
    int64_t best = 0;
    for (size_t i = 0; i < cfg->n_types; i++)
        for (int c = 0; c < 2; c++) {
            int64_t u;
            if (drv_nas_backing_off(s, cfg->types[i]->id, (drv_capacity_t)c, now, &u) &&
                (best == 0 || u < best))
                best = u;
        }
    return best;
}

static void scale_down(const drv_nas_config_t *cfg, int64_t now, const drv_nas_node_t *nodes,
                       size_t n_nodes, const bool *keep, bool *taken, int *live,
                       drv_nas_decision_t *out)
{
    /* longest empty first: repeatedly take the earliest empty_since left;
     * taken[] (deleted ones) is marked as we go */
    while (*live > cfg->min_nodes && out->n_delete < DRV_NAS_MAX_DELETE) {
        size_t best = n_nodes;
        for (size_t i = 0; i < n_nodes; i++) {
            const drv_nas_node_t *nd = &nodes[i];
            if (taken[i] || keep[i] || nd->state != DRV_NAS_NODE_READY || !nd->empty ||
                now - nd->empty_since_ms < cfg->scale_down_delay_ms)
                continue;
            if (best == n_nodes || nd->empty_since_ms < nodes[best].empty_since_ms)
                best = i;
        }
        if (best == n_nodes)
            break;
        taken[best] = true;
        out->del[out->n_delete].node = best;
        out->del[out->n_delete].why = DRV_NAS_DELETE_EMPTY;
        out->n_delete++;
        (*live)--;
        const drv_nas_node_t *nd = &nodes[best];
        event(out, "scale_down", nd->type, nd->capacity, nd->id, 1, 0,
              "node %s was empty for %llds (node_scale_down_delay_seconds %lld); "
              "%d live node(s) left (min_nodes %d)",
              nd->id ? nd->id : "?", (long long)((now - nd->empty_since_ms) / 1000),
              (long long)(cfg->scale_down_delay_ms / 1000), *live, cfg->min_nodes);
    }
}

static int decide(const drv_nas_config_t *cfg, drv_nas_state_t *s, int64_t now,
                  const drv_nas_node_t *nodes, size_t n_nodes,
                  const drv_sched_request_t *pending, size_t n_pending, bool *covered,
                  drv_nas_decision_t *out, drv_error_t *err)
{
    assert(cfg && s && out && (nodes || n_nodes == 0) && (pending || n_pending == 0));
    if (drv_nas_config_check(cfg, err) < 0)
        return -1;
    /* scratch: done[] per pending replica, keep[] and deleted[] per node */
    bool *scratch = calloc(n_pending + 2 * n_nodes + 1, sizeof *scratch);
    if (!scratch)
        return drv_err_internal(err, "out of memory");
    bool *done = scratch, *keep = scratch + n_pending, *deleted = keep + n_nodes;
    const drv_place_policy_t *pol = cfg->policy ? cfg->policy : drv_place_policy(NULL);
    /* the counts and everything after the arrays; an array entry is zeroed
     * when it is taken (group, event, the deletions' two fields): the whole
     * decision is ~45 KB, and zeroing it was a third of a simulated serving
     * run's time (a node pass every control pass) */
    out->n_create = out->n_delete = out->n_events = 0;
    memset(&out->live_before, 0, sizeof *out - offsetof(drv_nas_decision_t, live_before));

    forget_recovered(s, nodes, n_nodes);
    int live = 0;
    for (size_t i = 0; i < n_nodes; i++)
        live += is_live(&nodes[i]);
    out->live_before = live;

    /* 1. provisioning timeouts */
    const int64_t timeout = provision_timeout(cfg);
    for (size_t i = 0; i < n_nodes && out->n_delete < DRV_NAS_MAX_DELETE; i++) {
        const drv_nas_node_t *nd = &nodes[i];
        if (nd->state != DRV_NAS_NODE_PROVISIONING || now - nd->created_ms < timeout)
            continue;
        deleted[i] = true;
        live--;
        out->del[out->n_delete].node = i;
        out->del[out->n_delete].why = DRV_NAS_DELETE_PROVISION_TIMEOUT;
        out->n_delete++;
        char retry[128] = "";
        if (nd->type) {
            char why[96];
            int64_t until = now;
            snprintf(why, sizeof why, "node %s did not join within %llds", nd->id ? nd->id : "?",
                     (long long)(timeout / 1000));
            drv_nas_report_failure(s, cfg, nd->type->id, nd->capacity, now, why);
            drv_nas_backing_off(s, nd->type->id, nd->capacity, now, &until);
            snprintf(retry, sizeof retry, "; %s %s backs off for %llds", nd->type->id,
                     drv_capacity_name(nd->capacity), (long long)((until - now) / 1000));
        }
        event(out, "provision_timeout", nd->type, nd->capacity, nd->id, 1, 0,
              "node %s (%s, %s) did not join within %llds; deleting it%s", nd->id ? nd->id : "?",
              nd->type ? nd->type->id : "unknown type", drv_capacity_name(nd->capacity),
              (long long)(timeout / 1000), retry);
    }

    /* 2. what nodes on their way, then empty ready nodes, would hold */
    int remaining = (int)n_pending;
    for (size_t i = 0; i < n_nodes && remaining > 0; i++) {
        const drv_nas_node_t *nd = &nodes[i];
        if (deleted[i] || nd->state != DRV_NAS_NODE_PROVISIONING || !nd->type)
            continue;
        int h = fill(pol, nd->type, pending, n_pending, done, done);
        out->covered_on_the_way += h;
        remaining -= h;
    }
    for (size_t i = 0; i < n_nodes && remaining > 0; i++) {
        const drv_nas_node_t *nd = &nodes[i];
        if (nd->state != DRV_NAS_NODE_READY || !nd->empty || !nd->type)
            continue;
        int h = fill(pol, nd->type, pending, n_pending, done, done);
        if (h > 0)
            keep[i] = true;
        out->covered_existing += h;
        remaining -= h;
    }

    /* 3. empty nodes past the delay go, never below min_nodes */
    scale_down(cfg, now, nodes, n_nodes, keep, deleted, &live, out);

    /* 4. new nodes for the rest, cheapest per placed replica first */
    int waiting_on_the_way = out->covered_on_the_way;
    while (remaining > 0 && live < cfg->max_nodes) {
        const drv_instance_type_t *best = NULL;
        drv_capacity_t best_cap = DRV_CAPACITY_ON_DEMAND;
        bool best_fb = false;
        int best_k = 0;
        double best_per = 0;
        for (size_t i = 0; i < cfg->n_types; i++) {
            const drv_instance_type_t *t = cfg->types[i];
            drv_capacity_t cap;
            bool fb;
            if (option_for(cfg, s, t, now, &cap, &fb) < 0)
                continue;
            int k = fill(pol, t, pending, n_pending, done, NULL);
            if (k == 0)
                continue;
            double per = price_of(t, cap) / k;
            if (!best || per < best_per || (per == best_per && k > best_k)) {
                best = t;
                best_cap = cap;
                best_fb = fb;
                best_k = k;
                best_per = per;
            }
        }
        if (!best)
            break;
        int k = fill(pol, best, pending, n_pending, done, done);
        drv_nas_create_t *g = group(out, best, best_cap, best_fb);
        g->count++;
        g->replicas += k;
        out->covered_new += k;
        remaining -= k;
        live++;
    }

    /* what stays uncovered, and why */
    if (remaining > 0) {
        for (size_t i = 0; i < n_pending; i++) {
            if (done[i])
                continue;
            drv_nas_uncovered_t why = drv_nas_why_uncovered(cfg, live, &pending[i]);
            if (why == DRV_NAS_UNCOVERED_NO_FIT)
                out->no_fit++;
            else if (why == DRV_NAS_UNCOVERED_AT_MAX)
                out->at_max++;
            else
                out->waiting_backoff++;
        }
    }

    /* 5. min_nodes: the cheapest type per hour */
    while (live < cfg->min_nodes) {
        const drv_instance_type_t *best = NULL;
        drv_capacity_t best_cap = DRV_CAPACITY_ON_DEMAND;
        bool best_fb = false;
        for (size_t i = 0; i < cfg->n_types; i++) {
            drv_capacity_t cap;
            bool fb;
            if (option_for(cfg, s, cfg->types[i], now, &cap, &fb) < 0)
                continue;
            if (!best || price_of(cfg->types[i], cap) < price_of(best, best_cap)) {
                best = cfg->types[i];
                best_cap = cap;
                best_fb = fb;
            }
        }
        if (!best)
            break;
        drv_nas_create_t *g = group(out, best, best_cap, best_fb);
        g->count++;
        g->for_min_nodes++;
        live++;
    }
    out->live_after = live;

    /* events for the creations */
    for (size_t i = 0; i < out->n_create; i++) {
        const drv_nas_create_t *g = &out->create[i];
        const char *cap = drv_capacity_name(g->capacity);
        double price = price_of(g->type, g->capacity);
        int for_pending = g->count - g->for_min_nodes;
        if (g->fallback) {
            const drv_nas_backoff_t *b = find_backoff(s, g->type->id, DRV_CAPACITY_SPOT);
            event(out, "fallback", g->type, g->capacity, NULL, g->count, g->replicas,
                  "spot capacity for %s is backing off for %llds more (%s); using on-demand",
                  g->type->id, b ? (long long)((b->until_ms - now + 999) / 1000) : 0LL,
                  b && b->why[0] ? b->why : "a recent failure");
        }
        if (for_pending > 0)
            event(out, "scale_up", g->type, g->capacity, NULL, for_pending, g->replicas,
                  "%zu replica(s) pending with no room (%d held by nodes on their way): "
                  "%d x %s (%s) at $%.4f/h for %d of them, $%.4f/h per replica",
                  n_pending, waiting_on_the_way, for_pending, g->type->id, cap, price,
                  g->replicas, g->replicas ? price * for_pending / g->replicas : 0.0);
        if (g->for_min_nodes > 0)
            event(out, "scale_up", g->type, g->capacity, NULL, g->for_min_nodes, 0,
                  "below min_nodes (%d live, min_nodes %d): %d x %s (%s) at $%.4f/h, the "
                  "cheapest per hour", out->live_before, cfg->min_nodes, g->for_min_nodes,
                  g->type->id, cap, price);
    }
    if (out->at_max > 0)
        event(out, "at_max_nodes", NULL, DRV_CAPACITY_ON_DEMAND, NULL, 0, out->at_max,
              "%d replica(s) pending but the nodepool is at max_nodes (%d)", out->at_max,
              cfg->max_nodes);
    if (out->no_fit > 0)
        event(out, "no_fit", NULL, DRV_CAPACITY_ON_DEMAND, NULL, 0, out->no_fit,
              "%d replica(s) pending fit on no instance type of the nodepool (even empty)",
              out->no_fit);
    bool any_fallback = false;
    for (size_t i = 0; i < out->n_create; i++)
        any_fallback |= out->create[i].fallback;
    if (out->waiting_backoff > 0 || live < cfg->min_nodes || any_fallback)
        out->retry_at_ms = earliest_retry(cfg, s, now);
    if (out->waiting_backoff > 0 || live < cfg->min_nodes)
        event(out, "backoff", NULL, DRV_CAPACITY_ON_DEMAND, NULL, 0, out->waiting_backoff,
              "%d replica(s) pending%s; every instance type that would do is backing off "
              "after a failure (next try in %llds)", out->waiting_backoff,
              live < cfg->min_nodes ? " and below min_nodes" : "",
              out->retry_at_ms ? (long long)((out->retry_at_ms - now + 999) / 1000) : 0LL);

    if (covered)
        for (size_t i = 0; i < n_pending; i++)
            covered[i] = done[i];
    free(scratch);
    return 0;
}

void drv_nas_node_from_type(const drv_instance_type_t *t, drv_sched_node_t *sn)
{
    node_from_type(t, sn);
}

/* --- gangs: provision for a whole gang or not at all ----------------------- */

/* Why a gang held back gets nothing: how many new nodes its workers would
 * take alone (the type that needs fewest), next to max_nodes. */
static void gang_event(const drv_nas_config_t *cfg, const drv_sched_request_t *pending,
                       const int *gang, size_t n_pending, int id, drv_nas_decision_t *out)
{
    const drv_place_policy_t *pol = cfg->policy ? cfg->policy : drv_place_policy(NULL);
    size_t first = n_pending;
    int w = 0;
    for (size_t i = 0; i < n_pending; i++)
        if (gang[i] == id) {
            first = i < first ? i : first;
            w++;
        }
    if (first == n_pending)
        return;
    const drv_instance_type_t *best = NULL;
    int best_k = 0;
    for (size_t t = 0; t < cfg->n_types; t++) {
        /* workers of one node, up to the gang's size (its workers are alike) */
        drv_sched_request_t reqs[DRV_SCHED_MAX_GPUS * 8];
        int n = w < (int)(sizeof reqs / sizeof reqs[0]) ? w : (int)(sizeof reqs / sizeof reqs[0]);
        for (int k = 0; k < n; k++)
            reqs[k] = pending[first];
        int k = fill(pol, cfg->types[t], reqs, (size_t)n, NULL, NULL);
        if (k > best_k) {
            best = cfg->types[t];
            best_k = k;
        }
    }
    out->gang_held += w;
    if (!best)
        return;   /* no type holds one worker: counted as no_fit already */
    int need = (w + best_k - 1) / best_k;
    char why[256];
    snprintf(why, sizeof why,
             "a gang of %d worker(s) needs %d node(s) of %s (%d worker(s) per node) and "
             "cannot fit whole within max_nodes %d (%d live node(s), counting those on their "
             "way): no node is provisioned for it",
             w, need, best->id, best_k, cfg->max_nodes, out->live_after);
    if (!out->gang_why[0])
        snprintf(out->gang_why, sizeof out->gang_why, "%s", why);
    event(out, "at_max_nodes", best, DRV_CAPACITY_ON_DEMAND, NULL, 0, w, "%s", why);
}

int drv_nas_decide_gangs(const drv_nas_config_t *cfg, drv_nas_state_t *s, int64_t now,
                         const drv_nas_node_t *nodes, size_t n_nodes,
                         const drv_sched_request_t *pending, const int *gang, size_t n_pending,
                         bool *covered, drv_nas_decision_t *out, drv_error_t *err)
{
    assert(cfg && s && out && (pending || n_pending == 0));
    bool any_gang = false;
    for (size_t i = 0; gang && i < n_pending && !any_gang; i++)
        any_gang = gang[i] != 0;
    if (!any_gang)
        return decide(cfg, s, now, nodes, n_nodes, pending, n_pending, covered, out, err);
    const drv_nas_state_t saved = *s;
    /* held[i]: i's gang cannot fit whole; the others are decided alone */
    bool *held = calloc(3 * n_pending + 1, sizeof *held), *pcov = held + n_pending,
         *cov = pcov + n_pending;
    drv_sched_request_t *reqs = calloc(n_pending + 1, sizeof *reqs);
    size_t *idx = calloc(n_pending + 1, sizeof *idx);
    int rc = -1;
    if (!held || !reqs || !idx) {
        drv_err_internal(err, "out of memory");
        goto out;
    }
    /* each round holds back at least one more gang, so it ends */
    for (;;) {
        size_t nr = 0;
        for (size_t i = 0; i < n_pending; i++)
            if (!held[i]) {
                idx[nr] = i;
                reqs[nr++] = pending[i];
            }
        *s = saved;
        if (decide(cfg, s, now, nodes, n_nodes, reqs, nr, pcov, out, err) < 0) {
            *s = saved;
            goto out;
        }
        memset(cov, 0, n_pending * sizeof *cov);
        for (size_t j = 0; j < nr; j++)
            cov[idx[j]] = pcov[j];
        /* a gang with a worker left out by max_nodes gets nothing: the
         * nodes it would have started could not run it */
        int hold = 0;
        for (size_t j = 0; j < nr && !hold; j++)
            if (!pcov[j] && gang[idx[j]] != 0 &&
                drv_nas_why_uncovered(cfg, out->live_after, &reqs[j]) == DRV_NAS_UNCOVERED_AT_MAX)
                hold = gang[idx[j]];
        if (!hold)
            break;
        for (size_t i = 0; i < n_pending; i++)
            held[i] |= gang[i] == hold;
    }
    /* the gangs held back: uncovered at max_nodes, each with its reason */
    for (size_t i = 0; i < n_pending; i++) {
        if (!held[i])
            continue;
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = held[k] && gang[k] == gang[i];
        if (!seen)
            gang_event(cfg, pending, gang, n_pending, gang[i], out);
    }
    out->at_max += out->gang_held;
    if (covered)
        memcpy(covered, cov, n_pending * sizeof *covered);
    rc = 0;
out:
    free(held);
    free(reqs);
    free(idx);
    return rc;
}

int drv_nas_decide(const drv_nas_config_t *cfg, drv_nas_state_t *s, int64_t now,
                   const drv_nas_node_t *nodes, size_t n_nodes,
                   const drv_sched_request_t *pending, size_t n_pending, bool *covered,
                   drv_nas_decision_t *out, drv_error_t *err)
{
    return decide(cfg, s, now, nodes, n_nodes, pending, n_pending, covered, out, err);
}
