/* serve_model.c — one discrete-event run of `drover-sim serve`.
 *
 * The virtual clock jumps from event to event (seconds, double): the next
 * arrival, the next first token or completion on a replica, a replica
 * ready after its model load, a node ready after provisioning, the queue
 * head's timeout, the controller's pass. Nothing reads the wall clock.
 *
 * The gateway (as src/gateway does): a request goes to the ready replica
 * with the fewest requests in flight (ties: drawn from the seed's stream)
 * while it has fewer than max_concurrency; otherwise it waits in one FIFO
 * queue, is dropped when the queue is full, and times out after
 * request_timeout_seconds in the queue. A replica being scaled down drains:
 * no new requests, removed once empty. Its grant is released at once (droverd
 * deletes the victim in the pass that picks it), and a replica placed on a
 * GPU it still holds loads its model once it has left (the agent's
 * `waiting`: `blocked`), a victim before ready ones.
 *
 * A replica serves its requests as processor sharing (serve.h): it keeps a
 * virtual time V advancing at 1 / (1 + batch_slowdown x (n - 1)) per
 * second; a request admitted at V0 has its first token at V0 + prefill +
 * one decode step and is done at V0 + prefill + gen / decode_tps.
 *
 * The controller's pass, every control_interval_seconds and at once when
 * a request finds the deployment at zero replicas: one load sample
 * (in-flight + queued, the gateway's signal) into drv_ras_observe (at the
 * scenario's sample interval), drv_ras_decide, new replicas pending,
 * victims by drv_ras_pick_victims; placement of pending replicas on ready
 * nodes with the default placement policy; drv_nas_decide for the replicas
 * that fit nowhere, whose nodes come after the instance type's
 * provisioning delay. Replicas and nodes are billed from the decision that
 * created them (nodes: from creation to deletion, GPU-hours = hours x
 * GPUs). Fixed scenarios skip the replica autoscaler; their replicas and
 * nodes, like an autoscaled scenario's initial replicas (sim.initial_replicas,
 * default min_replicas), are ready at t = 0: the service was already up.
 *
 * Gone replicas leave the array at each control pass (their cold starts
 * are counted when they become ready), so an event costs what the live
 * replicas cost however long the run. Gone nodes stay (they are billed at
 * the end), but events look at nodes only while some are provisioning.
 *
 * With the scenario's `series` (--series), each control pass also notes
 * its minute (replicas ready, on their way, queue, the decision), and the
 * run ends with one CSV row per minute, the requests counted by the minute
 * they arrived and how they missed.
 *
 * All state is this run's (struct run), freed before returning.
 */
#include "sim/serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/rng.h"

#define INF HUGE_VAL
#define KNATIVE_SCALE_DOWN_RATE 2.0   /* max-scale-down-rate default */

typedef enum { R_PENDING, R_STARTING, R_READY, R_DRAINING, R_GONE } rstate_t;

typedef struct slot {
    size_t req;
    double v_first, v_done;
    bool first;
    double admitted, first_at;    /* clock: admitted to the replica, its first token */
    double busy_at;               /* the replica's `busy` when it was admitted */
} slot_t;

typedef struct replica {
    rstate_t st;
    size_t node;                  /* when placed */
    drv_sched_choice_t choice;    /* its grant, to rebuild the node's snapshot */
    double created, ready_at;
    const sim_serve_gpu_model_t *m;
    slot_t *slots;                /* m->max_concurrency */
    int n;
    double v, last;               /* virtual time and when it was advanced */
    double busy;                  /* integral of n over the clock (a request's mean batch) */
    bool cold;                    /* started after t = 0 */
    bool blocked;                 /* STARTING, its GPU still held by a draining
                                     replica: the model load starts when it leaves */
} replica_t;

typedef struct node {
    size_t type;                  /* index into cfg->types */
    drv_capacity_t cap;
    drv_nas_node_state_t st;      /* PROVISIONING, READY or GONE */
    double created, ready_at, gone_at;
    drv_sched_node_t snap;
    int replicas;                 /* placed, not gone */
    double empty_since;
    char id[24];
} node_t;

/* --series: what one minute of the clock saw (control passes sample it). */
typedef struct minute {
    int ready_lo, ready_hi, on_way_hi, desired, ups, downs;
    size_t queue_hi;
    int need_hi;                  /* SLO mode: the model's largest need in the minute */
    double lambda, es, first_p99; /* ... its last rate, E[S] and first-token p99 */
    double cold_start;            /* the autoscaler's learned cold start (0: none yet) */
    int held_hi;                  /* SLO mode: the scale-down memory's largest (slo.held) */
    double dispersion;            /* SLO mode: the last pass's learned dispersion (0: not SLO) */
    char kind[16];                /* the last change's kind ("" none) */
} minute_t;

typedef struct run {
    const sim_serve_config_t *c;
    const sim_serve_trace_t *tr;
    const sim_serve_scenario_t *s;
    sim_serve_result_t *res;
    drv_rng_t rng;
    const drv_place_policy_t *policy;
    replica_t *rep;
    size_t n_rep, cap_rep;
    node_t *nodes;
    size_t n_nodes, cap_nodes;
    size_t n_provisioning;        /* nodes PROVISIONING: next_event scans nodes only then */
    size_t *queue;                /* FIFO of request indices: [qh, qt) */
    size_t qh, qt;
    double *ttft, *e2e;           /* per request; < 0: not (yet) */
    size_t next_arrival, resolved;
    drv_ras_state_t ras;
    drv_nas_state_t nas;
    drv_nas_decision_t *nas_dec;  /* the node pass's decision (~45 KB), one per run */
    double next_tick, next_sample, panic_until, replica_area, last_area_t;
    double replica_area_warm;     /* the same from sim.warmup_seconds on */
    int last_live;
    bool wake;                    /* a request found zero replicas: pass now */
    minute_t *min;                /* --series: per minute of the clock */
    size_t n_min, cap_min;
} run_t;

static double jittered(run_t *r, double base)
{
    if (r->c->jitter <= 0)
        return base;
    return base * (1 + r->c->jitter * (2 * drv_rng_double(&r->rng) - 1));
}

static double slowdown(const replica_t *p)
{
    return p->n > 1 ? 1 + p->m->batch_slowdown * (p->n - 1) : 1;
}

static void advance(replica_t *p, double t)
{
    if (p->n > 0 && t > p->last) {
        p->v += (t - p->last) / slowdown(p);
        p->busy += p->n * (t - p->last);
    }
    if (t > p->last)
        p->last = t;
}

static bool reached(double v_mark, double v)
{
    return v_mark <= v + 1e-9 * (1 + fabs(v));
}

/* When the replica's next first token or completion happens. */
static double next_milestone(const replica_t *p)
{
    if (p->n == 0)
        return INF;
    double m = INF;
    for (int i = 0; i < p->n; i++) {
        double v = p->slots[i].first ? p->slots[i].v_done : p->slots[i].v_first;
        if (v < m)
            m = v;
    }
    double t = p->last + (m - p->v) * slowdown(p);
    return t > p->last ? t : p->last;
}

static int live_count(const run_t *r, int *starting, int *on_way, int *ready)
{
    int live = 0, st = 0, ow = 0, rd = 0;
    for (size_t i = 0; i < r->n_rep; i++) {
        rstate_t s = r->rep[i].st;
        live += s == R_PENDING || s == R_STARTING || s == R_READY;
        st += s == R_STARTING && !r->rep[i].blocked;   /* waiting for a GPU: not loading yet */
        ow += s == R_PENDING || s == R_STARTING;   /* on their way: not placed, or starting */
        rd += s == R_READY;
    }
    if (starting)
        *starting = st;
    if (on_way)
        *on_way = ow;
    if (ready)
        *ready = rd;
    return live;
}

/* Double an array's capacity (16 at first); -1 when out of memory (unchanged). */
static int grow(void **arr, size_t *cap, size_t size)
{
    size_t nc = *cap ? *cap * 2 : 16;
    void *v = realloc(*arr, nc * size);
    if (!v)
        return -1;
    *arr = v;
    *cap = nc;
    return 0;
}

/* --- nodes ------------------------------------------------------------------------------ */

static void snap_reset(node_t *nd, const drv_instance_type_t *t)
{
    drv_nas_node_from_type(t, &nd->snap);
    nd->snap.id = nd->id;
    nd->snap.schedulable = nd->st == DRV_NAS_NODE_READY;
}

static node_t *node_add(run_t *r, size_t type, drv_capacity_t cap, double t, double ready_at)
{
    if (r->n_nodes == r->cap_nodes) {
        if (grow((void **)&r->nodes, &r->cap_nodes, sizeof *r->nodes) < 0)
            return NULL;
        for (size_t i = 0; i < r->n_nodes; i++)   /* the snapshots point at their ids */
            r->nodes[i].snap.id = r->nodes[i].id;
    }
    node_t *nd = &r->nodes[r->n_nodes];
    memset(nd, 0, sizeof *nd);
    snprintf(nd->id, sizeof nd->id, "node-%zu", r->n_nodes);
    r->n_nodes++;
    nd->type = type;
    nd->cap = cap;
    nd->created = t;
    nd->ready_at = ready_at;
    nd->st = ready_at <= t ? DRV_NAS_NODE_READY : DRV_NAS_NODE_PROVISIONING;
    r->n_provisioning += nd->st == DRV_NAS_NODE_PROVISIONING;
    nd->empty_since = ready_at;
    snap_reset(nd, r->c->types[type]);
    r->res->nodes_created++;
    return nd;
}

/* The node's allocations again from the replicas on it (after one left). */
static void node_rebuild(run_t *r, size_t ni)
{
    node_t *nd = &r->nodes[ni];
    snap_reset(nd, r->c->types[nd->type]);
    for (size_t i = 0; i < r->n_rep; i++) {
        replica_t *p = &r->rep[i];
        if (p->st != R_PENDING && p->st != R_GONE && p->st != R_DRAINING && p->node == ni) {
            drv_sched_choice_t ch = p->choice;
            ch.node = 0;
            drv_sched_commit(&nd->snap, &r->c->replica, &ch);
        }
    }
}

/* Whether a replica draining on node ni holds one of the GPUs of `ch` (a
 * grant on that node). */
static bool gpu_held(const run_t *r, size_t ni, const drv_sched_choice_t *ch)
{
    for (size_t i = 0; i < r->n_rep; i++) {
        const replica_t *q = &r->rep[i];
        if (q->st != R_DRAINING || q->node != ni)
            continue;
        for (int a = 0; a < q->choice.n_gpus; a++)
            for (int b = 0; b < ch->n_gpus; b++)
                if (q->choice.gpus[a] == ch->gpus[b])
                    return true;
    }
    return false;
}

static void replica_gone(run_t *r, replica_t *p, double t)
{
    bool placed = p->st != R_PENDING, drained = p->st == R_DRAINING;
    if (p->st == R_STARTING)
        p->ready_at = 0;   /* never became ready: not a cold start */
    p->st = R_GONE;
    free(p->slots);
    p->slots = NULL;
    if (placed) {
        node_t *nd = &r->nodes[p->node];
        if (--nd->replicas == 0)
            nd->empty_since = t;
        if (!drained)   /* a draining one's grant was released when it began to drain */
            node_rebuild(r, p->node);
    }
    if (drained)   /* the replicas placed on its GPUs load their model now */
        for (size_t i = 0; i < r->n_rep; i++) {
            replica_t *q = &r->rep[i];
            if (q->st == R_STARTING && q->blocked && q->node == p->node &&
                !gpu_held(r, q->node, &q->choice)) {
                q->blocked = false;
                q->ready_at = t + jittered(r, q->m->model_load_s);
            }
        }
}

/* Drop the gone replicas, keeping the others' order (ties and victims
 * depend on it): each control pass, so that a long run's events cost what
 * its live replicas cost, not what every replica it ever had costs. Gone
 * replicas hold nothing: their cold start was counted when they became
 * ready (replica_ready), their slots are freed. */
static void compact_replicas(run_t *r)
{
    size_t j = 0;
    for (size_t i = 0; i < r->n_rep; i++)
        if (r->rep[i].st != R_GONE)
            r->rep[j++] = r->rep[i];
    r->n_rep = j;
}

/* A cold replica's model is loaded: one cold start, decision -> ready. */
static void count_cold_start(run_t *r, const replica_t *p)
{
    if (p->cold && p->ready_at > 0) {   /* placed, loaded */
        r->res->cold_starts++;
        r->res->cold_start_delay_s += p->ready_at - p->created;
    }
}

/* --- the gateway -------------------------------------------------------------------------- */

/* The ready replica with the fewest in flight and a free slot; NULL when none. */
static replica_t *pick_replica(run_t *r)
{
    replica_t *best = NULL;
    uint64_t ties = 0;
    for (size_t i = 0; i < r->n_rep; i++) {
        replica_t *p = &r->rep[i];
        if (p->st != R_READY || p->n >= p->m->max_concurrency)
            continue;
        if (!best || p->n < best->n) {
            best = p;
            ties = 1;
        } else if (p->n == best->n && drv_rng_below(&r->rng, ++ties) == 0) {
            best = p;   /* reservoir: each tied replica equally likely */
        }
    }
    return best;
}

static void admit(run_t *r, replica_t *p, size_t req, double t)
{
    advance(p, t);
    const sim_serve_req_t *q = &r->tr->r[req];
    double prefill = q->prompt / p->m->prefill_tps;
    double step = 1 / p->m->decode_tps;
    slot_t *sl = &p->slots[p->n++];
    sl->req = req;
    sl->v_done = p->v + prefill + q->gen * step;
    sl->v_first = q->gen > 0 ? p->v + prefill + step : sl->v_done;
    sl->first = false;
    sl->admitted = t;
    sl->first_at = t;
    sl->busy_at = p->busy;
}

static void dispatch_queue(run_t *r, double t)
{
    while (r->qh < r->qt) {
        replica_t *p = pick_replica(r);
        if (!p)
            return;
        admit(r, p, r->queue[r->qh++], t);
    }
}

static void arrival(run_t *r, double t)
{
    size_t i = r->next_arrival++;
    int ready = 0;
    int live = live_count(r, NULL, NULL, &ready);
    if (ready == 0)
        r->res->requests_waited_cold++;
    if (live == 0)
        r->wake = true;   /* the gateway wakes the controller for a deployment at zero */
    if (!r->s->fixed)     /* the gateway counts the arrival and its prompt */
        drv_ras_observe_arrival(&r->ras, llround(t * 1000), r->tr->r[i].prompt);
    replica_t *p = r->qh == r->qt ? pick_replica(r) : NULL;
    if (p) {
        admit(r, p, i, t);
    } else if (r->qt - r->qh >= (size_t)r->c->max_queue) {
        r->res->dropped++;
        r->resolved++;
    } else {
        r->queue[r->qt++] = i;
    }
}

static void replica_event(run_t *r, replica_t *p, double t)
{
    advance(p, t);
    const sim_serve_req_t *reqs = r->tr->r;
    for (int k = 0; k < p->n;) {
        slot_t *sl = &p->slots[k];
        if (!sl->first && reached(sl->v_first, p->v)) {
            sl->first = true;
            sl->first_at = t;
            r->ttft[sl->req] = t - reqs[sl->req].t;
        }
        if (sl->first && reached(sl->v_done, p->v)) {
            r->e2e[sl->req] = t - reqs[sl->req].t;
            if (!r->s->fixed)   /* the gateway's measurement of the replica's service */
                drv_ras_observe_done_batch(
                    &r->ras, llround(t * 1000), reqs[sl->req].prompt, reqs[sl->req].gen,
                    sl->first_at - sl->admitted, t - sl->admitted, p->m->max_concurrency,
                    t > sl->admitted ? (p->busy - sl->busy_at) / (t - sl->admitted) : 0);
            r->res->completed++;
            r->resolved++;
            p->slots[k] = p->slots[--p->n];
            continue;
        }
        k++;
    }
    if (p->st == R_DRAINING && p->n == 0)
        replica_gone(r, p, t);
    else
        dispatch_queue(r, t);
}

/* --- the controller ---------------------------------------------------------------------- */

static replica_t *replica_add(run_t *r, double t, bool cold)
{
    if (r->n_rep == r->cap_rep && grow((void **)&r->rep, &r->cap_rep, sizeof *r->rep) < 0)
        return NULL;
    replica_t *p = &r->rep[r->n_rep++];
    memset(p, 0, sizeof *p);
    p->st = R_PENDING;
    p->created = t;
    p->cold = cold;
    return p;
}

/* Place pending replicas on ready nodes (oldest first). `warm`: ready at
 * once (the replicas provisioned before the trace starts). */
static int place_pending(run_t *r, double t, bool warm, drv_error_t *err)
{
    drv_sched_node_t *snap = NULL;
    size_t *map = NULL;
    int rc = 0;
    for (size_t i = 0; i < r->n_rep; i++) {
        replica_t *p = &r->rep[i];
        if (p->st != R_PENDING)
            continue;
        if (!snap) {   /* the ready nodes' snapshots, built on first need */
            snap = malloc((r->n_nodes ? r->n_nodes : 1) * sizeof *snap);
            map = malloc((r->n_nodes ? r->n_nodes : 1) * sizeof *map);
            if (!snap || !map) {
                rc = drv_err_internal(err, "out of memory");
                break;
            }
        }
        size_t n = 0;
        for (size_t k = 0; k < r->n_nodes; k++)
            if (r->nodes[k].st == DRV_NAS_NODE_READY) {
                snap[n] = r->nodes[k].snap;
                map[n++] = k;
            }
        drv_sched_choice_t ch;
        if (n == 0 || r->policy->place(snap, n, &r->c->replica, &ch, NULL, 0) < 0)
            break;   /* identical requests: the next ones do not fit either */
        node_t *nd = &r->nodes[map[ch.node]];
        p->node = map[ch.node];
        p->choice = ch;
        drv_sched_choice_t local = ch;
        local.node = 0;
        drv_sched_commit(&nd->snap, &r->c->replica, &local);
        nd->replicas++;
        p->m = sim_serve_gpu_model(r->c, r->c->types[nd->type]->gpu_type);
        p->slots = malloc((size_t)p->m->max_concurrency * sizeof *p->slots);
        if (!p->slots) {
            rc = drv_err_internal(err, "out of memory");
            break;
        }
        p->last = t;
        if (warm) {
            p->st = R_READY;
            p->ready_at = t;
        } else {
            p->st = R_STARTING;
            p->blocked = gpu_held(r, p->node, &ch);
            p->ready_at = p->blocked ? INF : t + jittered(r, p->m->model_load_s);
        }
    }
    free(snap);
    free(map);
    return rc;
}

static int nodes_decide(run_t *r, double t, bool warm, drv_error_t *err)
{
    int64_t now_ms = llround(t * 1000);
    size_t n_pending = 0, n_live = 0;
    for (size_t i = 0; i < r->n_rep; i++)
        n_pending += r->rep[i].st == R_PENDING;
    drv_nas_node_t *nn = malloc((r->n_nodes ? r->n_nodes : 1) * sizeof *nn);
    size_t *map = malloc((r->n_nodes ? r->n_nodes : 1) * sizeof *map);
    drv_sched_request_t *pend = malloc((n_pending ? n_pending : 1) * sizeof *pend);
    drv_nas_decision_t *d = r->nas_dec;
    int rc = -1;
    if (!nn || !map || !pend) {
        drv_err_internal(err, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n_pending; i++)
        pend[i] = r->c->replica;
    for (size_t i = 0; i < r->n_nodes; i++) {
        node_t *nd = &r->nodes[i];
        if (nd->st == DRV_NAS_NODE_GONE)
            continue;
        nn[n_live] = (drv_nas_node_t){.id = nd->id, .type = r->c->types[nd->type],
                                      .capacity = nd->cap, .state = nd->st,
                                      .created_ms = llround(nd->created * 1000),
                                      .empty = nd->st == DRV_NAS_NODE_READY && nd->replicas == 0,
                                      .empty_since_ms = llround(nd->empty_since * 1000)};
        map[n_live++] = i;
    }
    if (drv_nas_decide(&r->c->nodepool, &r->nas, now_ms, nn, n_live, pend, n_pending, NULL, d,
                       err) < 0)
        goto out;
    for (size_t i = 0; i < d->n_delete; i++) {
        node_t *nd = &r->nodes[map[d->del[i].node]];
        r->n_provisioning -= nd->st == DRV_NAS_NODE_PROVISIONING;
        nd->st = DRV_NAS_NODE_GONE;
        nd->gone_at = t;
    }
    for (size_t i = 0; i < d->n_create; i++) {
        size_t ti = 0;
        while (ti < r->c->nodepool.n_types && r->c->types[ti] != d->create[i].type)
            ti++;
        if (ti == r->c->nodepool.n_types) {
            drv_err_internal(err, "node autoscaler chose a type outside the nodepool");
            goto out;
        }
        for (int k = 0; k < d->create[i].count; k++) {
            double ready = warm ? t : t + jittered(r, r->c->provision_s[ti]);
            if (!node_add(r, ti, d->create[i].capacity, t, ready)) {
                drv_err_internal(err, "out of memory");
                goto out;
            }
        }
    }
    rc = 0;
out:
    free(nn);
    free(map);
    free(pend);
    return rc;
}

static int scale_replicas(run_t *r, double t, int live, int desired, drv_error_t *err)
{
    if (desired > live) {
        for (int k = live; k < desired; k++)
            if (!replica_add(r, t, true))
                return drv_err_internal(err, "out of memory");
        return 0;
    }
    size_t n = 0, count = (size_t)(live - desired);
    drv_ras_replica_t *v = malloc((r->n_rep ? r->n_rep : 1) * sizeof *v);
    size_t *idx = malloc((r->n_rep ? r->n_rep : 1) * sizeof *idx);
    size_t *out = malloc((r->n_rep ? r->n_rep : 1) * sizeof *out);
    if (!v || !idx || !out) {
        free(v);
        free(idx);
        free(out);
        return drv_err_internal(err, "out of memory");
    }
    for (size_t i = 0; i < r->n_rep; i++) {
        rstate_t s = r->rep[i].st;
        if (s != R_PENDING && s != R_STARTING && s != R_READY)
            continue;
        /* one waiting for its GPU (blocked) goes as the agent's "waiting" in
         * droverd's controller: with the failed ones, before ready ones */
        v[n] = (drv_ras_replica_t){.state = s == R_PENDING    ? DRV_RAS_REPLICA_PENDING
                                            : r->rep[i].blocked ? DRV_RAS_REPLICA_FAILED
                                            : s == R_STARTING ? DRV_RAS_REPLICA_STARTING
                                                              : DRV_RAS_REPLICA_READY,
                                   .created_ms = llround(r->rep[i].created * 1000)};
        idx[n++] = i;
    }
    size_t got = drv_ras_pick_victims(v, n, count, out);
    for (size_t k = 0; k < got; k++) {
        replica_t *p = &r->rep[idx[out[k]]];
        if (p->st == R_READY && p->n > 0) {
            p->st = R_DRAINING;   /* its grant is released (droverd deletes it) */
            node_rebuild(r, p->node);
        } else
            replica_gone(r, p, t);
    }
    free(v);
    free(idx);
    free(out);
    return 0;
}

/* The live replicas' time-weighted area from the last pass to t (and the
 * part of it after sim.warmup_seconds). */
static void add_area(run_t *r, double t)
{
    r->replica_area += r->last_live * (t - r->last_area_t);
    double from = r->last_area_t > r->c->warmup_s ? r->last_area_t : r->c->warmup_s;
    if (t > from)
        r->replica_area_warm += r->last_live * (t - from);
}

/* --series: this pass in its minute's row. */
static int series_note(run_t *r, double t, int ready, int on_way, const drv_ras_decision_t *d,
                       int desired, int live)
{
    size_t m = (size_t)(t / 60);
    while (r->n_min <= m) {
        if (r->n_min == r->cap_min && grow((void **)&r->min, &r->cap_min, sizeof *r->min) < 0)
            return -1;
        r->min[r->n_min++] = (minute_t){.ready_lo = -1};
    }
    minute_t *x = &r->min[m];
    if (x->ready_lo < 0 || ready < x->ready_lo)
        x->ready_lo = ready;
    if (ready > x->ready_hi)
        x->ready_hi = ready;
    if (on_way > x->on_way_hi)
        x->on_way_hi = on_way;
    if (r->qt - r->qh > x->queue_hi)
        x->queue_hi = r->qt - r->qh;
    x->desired = desired;
    if (desired > live)
        x->ups++;
    if (desired < live)
        x->downs++;
    if (desired != live)
        snprintf(x->kind, sizeof x->kind, "%s", d->kind);
    x->cold_start = r->ras.cold_start_s;
    if (d->slo.ready) {
        if (d->slo.need > x->need_hi)
            x->need_hi = d->slo.need;
        if (d->slo.held > x->held_hi)
            x->held_hi = d->slo.held;
        x->lambda = d->slo.lambda_ahead;
        x->es = d->slo.mean_service_s;
        x->first_p99 = d->slo.first_p99_s;
    }
    x->dispersion = d->slo.dispersion;   /* (SLO mode, also before the model is ready) */
    return 0;
}

/* --series: one CSV row per minute, the requests by the minute they arrived. */
static void series_write(const run_t *r)
{
    FILE *f = r->s->series;
    size_t nm = r->n_min;
    size_t *cnt = calloc(nm ? nm * 5 : 1, sizeof *cnt);   /* arrivals, ok, ttft, e2e, lost */
    if (!cnt)
        return;
    const sim_serve_config_t *c = r->c;
    for (size_t i = 0; i < r->tr->n; i++) {
        size_t m = (size_t)(r->tr->r[i].t / 60);
        if (m >= nm)
            continue;
        size_t *k = &cnt[m * 5];
        k[0]++;
        if (r->e2e[i] < 0)
            k[4]++;
        else if (c->slo_ttft_s > 0 && r->ttft[i] > c->slo_ttft_s)
            k[2]++;
        else if (c->slo_e2e_s > 0 && r->e2e[i] > c->slo_e2e_s)
            k[3]++;
        else
            k[1]++;
    }
    for (size_t m = 0; m < nm; m++) {
        const minute_t *x = &r->min[m];
        const size_t *k = &cnt[m * 5];
        fprintf(f, "%s,%zu,%d,%d,%d,%zu,%d,%d,%d,%s,%zu,%zu,%zu,%zu,%d,%.3f,%.2f,%.2f,%.1f,%d,%.2f\n",
                r->s->name, m, x->ready_lo < 0 ? 0 : x->ready_lo, x->ready_hi, x->on_way_hi,
                x->queue_hi, x->desired, x->ups, x->downs, x->kind[0] ? x->kind : "-", k[0],
                k[2], k[3], k[4], x->need_hi, x->lambda, x->es, x->first_p99, x->cold_start,
                x->held_hi, x->dispersion);
    }
    free(cnt);
}

static int control_pass(run_t *r, double t, drv_error_t *err)
{
    compact_replicas(r);
    int starting, on_way, ready;
    int live = live_count(r, &starting, &on_way, &ready);
    if (t > r->last_area_t) {
        add_area(r, t);
        r->last_area_t = t;
    }
    if (!r->s->fixed) {
        int64_t now_ms = llround(t * 1000);
        size_t inflight = 0;
        for (size_t i = 0; i < r->n_rep; i++)
            inflight += (size_t)r->rep[i].n;
        if (t >= r->next_sample) {
            drv_ras_observe(&r->ras, now_ms, (double)(inflight + (r->qt - r->qh)));
            double iv = r->s->sample_interval_s > 0 ? r->s->sample_interval_s
                                                    : r->c->control_interval_s;
            while (r->next_sample <= t)
                r->next_sample += iv;
        }
        drv_ras_decision_t d;
        bool demand = live == 0 && r->qt > r->qh;
        if (drv_ras_decide(&r->s->ras, &r->ras, now_ms, live, starting, on_way, ready, demand,
                           &d, err) < 0)
            return -1;
        int desired = d.desired;
        if (r->s->knative_panic && live > 0) {
            /* Knative KPA: panic when the panic window's demand is >= 2x
             * the capacity; no scale-down while panicking (it lasts until a
             * stable window passes without the condition); scale-down at most
             * by max-scale-down-rate per decision (floor(ready / 2)). */
            double panic = r->s->ras.panic_factor > 0 ? r->s->ras.panic_factor
                                                      : DRV_RAS_PANIC_FACTOR;
            if (d.burst_load >= panic * live * r->s->ras.target_concurrency)
                r->panic_until = t + r->s->ras.traffic_history_seconds;
            if (desired < live && t < r->panic_until)
                desired = live;
            int floor_down = (int)floor(live / KNATIVE_SCALE_DOWN_RATE);
            if (desired < live && desired < floor_down)
                desired = floor_down;
        }
        if (r->s->series && series_note(r, t, ready, on_way, &d, desired, live) < 0)
            return drv_err_internal(err, "out of memory");
        if (desired != live) {
            r->res->scale_events++;
            if (scale_replicas(r, t, live, desired, err) < 0)
                return -1;
        }
    }
    if (r->s->fixed && r->s->series) {
        drv_ras_decision_t none = {.kind = "hold"};
        if (series_note(r, t, ready, on_way, &none, live, live) < 0)
            return drv_err_internal(err, "out of memory");
    }
    if (place_pending(r, t, false, err) < 0 || nodes_decide(r, t, false, err) < 0)
        return -1;
    live = live_count(r, NULL, NULL, NULL);
    if (live > r->res->peak_replicas)
        r->res->peak_replicas = live;
    r->last_live = live;
    return 0;
}

/* --- the run ----------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank p50 and p99 of the values >= 0 (NAN when none); one sort. */
static void percentiles(const double *v, size_t n, double *scratch, double *p50, double *p99)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] >= 0)
            scratch[k++] = v[i];
    if (k == 0) {
        *p50 = *p99 = NAN;
        return;
    }
    qsort(scratch, k, sizeof *scratch, cmp_double);
    size_t r50 = (size_t)ceil(0.50 * (double)k), r99 = (size_t)ceil(0.99 * (double)k);
    *p50 = scratch[r50 ? r50 - 1 : 0];
    *p99 = scratch[r99 ? r99 - 1 : 0];
}

static void finish(run_t *r, double end)
{
    sim_serve_result_t *res = r->res;
    const sim_serve_config_t *c = r->c;
    res->end_s = end;
    const double last_arrival = r->tr->n > 0 ? r->tr->r[r->tr->n - 1].t : 0;
    for (size_t i = 0; i < r->n_nodes; i++) {
        const node_t *nd = &r->nodes[i];
        double until = nd->st == DRV_NAS_NODE_GONE && nd->gone_at < end ? nd->gone_at : end;
        double h = (until - nd->created) / 3600;
        if (h < 0)
            h = 0;
        const drv_instance_type_t *t = c->types[nd->type];
        double price = c->price[nd->type];
        if (nd->cap == DRV_CAPACITY_SPOT && t->spot_price_per_hour >= 0)
            price = t->spot_price_per_hour;
        res->node_hours += h;
        res->gpu_hours += h * t->gpu_count;
        /* the same from sim.warmup_seconds to the last arrival, for every
         * scenario alike: each run ends at its own last completion, and
         * two at the same count drained seconds apart (conv-burst4.4: 40
         * replicas in both, 1 s, 0.01 GPU-hours) */
        double from = nd->created > c->warmup_s ? nd->created : c->warmup_s;
        double to = until < last_arrival ? until : last_arrival;
        if (to > from)
            res->gpu_hours_warm += (to - from) / 3600 * t->gpu_count;
        res->cost += h * price;
    }
    for (size_t i = 0; i < r->n_rep; i++)   /* loaded at the last event's instant */
        if (r->rep[i].st == R_STARTING && r->rep[i].ready_at <= end)
            count_cold_start(r, &r->rep[i]);
    if (end > r->last_area_t)
        add_area(r, end);
    res->mean_replicas = end > 0 ? r->replica_area / end : r->last_live;
    res->mean_replicas_warm = end > c->warmup_s ? r->replica_area_warm / (end - c->warmup_s)
                                                : res->mean_replicas;
    size_t ok = 0, warm = 0, warm_ok = 0;
    for (size_t i = 0; i < r->tr->n; i++) {
        bool met = r->e2e[i] >= 0 && (c->slo_ttft_s <= 0 || r->ttft[i] <= c->slo_ttft_s) &&
                   (c->slo_e2e_s <= 0 || r->e2e[i] <= c->slo_e2e_s);
        ok += met;
        if (r->tr->r[i].t >= c->warmup_s) {
            warm++;
            warm_ok += met;
        }
    }
    res->slo_attainment = r->tr->n ? (double)ok / (double)r->tr->n : 0;
    res->slo_attainment_warm = warm ? (double)warm_ok / (double)warm : NAN;
}

/* The earliest event; *what: 0 replica, 1 replica ready, 2 node ready,
 * 3 timeout, 4 arrival, 5 pass. */
static double next_event(const run_t *r, int *what, size_t *which)
{
    double best = INF;
    *what = -1;
    for (size_t i = 0; i < r->n_rep; i++) {
        const replica_t *p = &r->rep[i];
        double e = (p->st == R_READY || p->st == R_DRAINING) ? next_milestone(p) : INF;
        if (e < best) {
            best = e;
            *what = 0;
            *which = i;
        }
        if (p->st == R_STARTING && p->ready_at < best) {
            best = p->ready_at;
            *what = 1;
            *which = i;
        }
    }
    for (size_t i = 0; r->n_provisioning && i < r->n_nodes; i++)
        if (r->nodes[i].st == DRV_NAS_NODE_PROVISIONING && r->nodes[i].ready_at < best) {
            best = r->nodes[i].ready_at;
            *what = 2;
            *which = i;
        }
    if (r->qh < r->qt && r->tr->r[r->queue[r->qh]].t + r->c->timeout_s < best) {
        best = r->tr->r[r->queue[r->qh]].t + r->c->timeout_s;
        *what = 3;
    }
    if (r->next_arrival < r->tr->n && r->tr->r[r->next_arrival].t < best) {
        best = r->tr->r[r->next_arrival].t;
        *what = 4;
    }
    if (r->next_tick <= best) {
        best = r->next_tick;
        *what = 5;
    }
    return best;
}

static int init_replicas(run_t *r, drv_error_t *err)
{
    int n = r->s->fixed_replicas;
    if (!r->s->fixed) {   /* initial_replicas, within the scenario's bounds */
        const drv_ras_config_t *a = &r->s->ras;
        n = r->c->initial_replicas < 0 ? a->min_replicas : r->c->initial_replicas;
        n = n < a->min_replicas ? a->min_replicas : n > a->max_replicas ? a->max_replicas : n;
    }
    for (int k = 0; k < n; k++)
        if (!replica_add(r, 0, false))
            return drv_err_internal(err, "out of memory");
    /* nodes for them, chosen by the node autoscaler, up and warm at t = 0 */
    if (nodes_decide(r, 0, true, err) < 0 || place_pending(r, 0, true, err) < 0)
        return -1;
    if (!r->s->fixed) {
        drv_ras_state_init(&r->ras, &r->s->ras, 0);
        /* sim.initial_wave_timed: they were a scale-up wave one model load
         * before the trace, as a deployment created on standing nodes is in
         * droverd, and the autoscaler timed it (bench/serve/loop) */
        double load = 0;
        int placed = 0;
        for (size_t i = 0; r->c->initial_wave_timed && i < r->n_rep; i++)
            if (r->rep[i].m) {
                load += r->rep[i].m->model_load_s;
                placed++;
            }
        if (placed > 0)
            drv_ras_learn_cold_start(&r->ras, load / placed);
    }
    r->last_live = live_count(r, NULL, NULL, NULL);
    r->res->peak_replicas = r->last_live;
    return 0;
}

int sim_serve_run(const sim_serve_config_t *c, const sim_serve_trace_t *tr,
                  const sim_serve_scenario_t *s, sim_serve_result_t *res, drv_error_t *err)
{
    run_t r = {.c = c, .tr = tr, .s = s, .res = res};
    memset(res, 0, sizeof *res);
    res->requests = tr->n;
    drv_rng_seed(&r.rng, c->seed);
    r.policy = drv_place_policy(NULL);
    drv_nas_state_init(&r.nas);
    r.queue = malloc((tr->n ? tr->n : 1) * sizeof *r.queue);
    r.ttft = malloc((tr->n ? tr->n : 1) * sizeof *r.ttft);
    r.e2e = malloc((tr->n ? tr->n : 1) * sizeof *r.e2e);
    r.nas_dec = malloc(sizeof *r.nas_dec);
    int rc = -1;
    if (!r.queue || !r.ttft || !r.e2e || !r.nas_dec) {
        drv_err_internal(err, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < tr->n; i++)
        r.ttft[i] = r.e2e[i] = -1;
    if (init_replicas(&r, err) < 0)
        goto out;
    double t = 0;
    while (r.resolved < tr->n) {
        int what;
        size_t which = 0;
        if (r.wake) {
            r.wake = false;
            r.next_tick = t;
        }
        t = next_event(&r, &what, &which);
        switch (what) {
        case 0:
            replica_event(&r, &r.rep[which], t);
            break;
        case 1:
            count_cold_start(&r, &r.rep[which]);
            r.rep[which].st = R_READY;
            r.rep[which].last = t;
            dispatch_queue(&r, t);
            break;
        case 2:
            r.nodes[which].st = DRV_NAS_NODE_READY;
            r.n_provisioning--;
            r.nodes[which].snap.schedulable = true;
            r.nodes[which].empty_since = t;
            if (place_pending(&r, t, false, err) < 0)
                goto out;
            break;
        case 3:
            r.ttft[r.queue[r.qh]] = -1;
            r.qh++;
            res->timeouts++;
            r.resolved++;
            break;
        case 4:
            arrival(&r, t);
            break;
        default:
            if (control_pass(&r, t, err) < 0)
                goto out;
            r.next_tick = t + c->control_interval_s;
            break;
        }
    }
    for (size_t i = 0; i < r.n_rep; i++)   /* requests done: nothing is in flight */
        if (r.rep[i].st == R_DRAINING)
            replica_gone(&r, &r.rep[i], t);
    finish(&r, t);
    double *scratch = malloc((tr->n ? tr->n : 1) * sizeof *scratch);
    if (!scratch) {
        drv_err_internal(err, "out of memory");
        goto out;
    }
    percentiles(r.ttft, tr->n, scratch, &res->ttft_p50, &res->ttft_p99);
    percentiles(r.e2e, tr->n, scratch, &res->e2e_p50, &res->e2e_p99);
    free(scratch);
    if (s->series)
        series_write(&r);
    rc = 0;
out:
    for (size_t i = 0; i < r.n_rep; i++)
        free(r.rep[i].slots);
    free(r.rep);
    free(r.nodes);
    free(r.queue);
    free(r.ttft);
    free(r.e2e);
    free(r.nas_dec);
    free(r.min);
    return rc;
}
