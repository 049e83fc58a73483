/* scaling.c — see scaling.h. The autoscalers' memory lives in two sorted
 * arrays keyed by object key; an entry not used in a full pass (its
 * deployment or nodepool is gone, or not scaled) is dropped at the end of
 * that pass, so a re-created object starts with fresh memory. */
#include "head/scaling.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoscale/nodes.h"
#include "autoscale/overflow.h"
#include "autoscale/replicas.h"
#include "common/log.h"
#include "common/util.h"
#include "head/jobs_ctl.h"
#include "state/events.h"
#include "state/jobs.h"
#include "state/nodes.h"
#include "common/json.h"

typedef struct ras_entry {
    char key[256];
    drv_ras_state_t st;
    bool seen;
    bool slo_on;                  /* the last decision was in SLO mode ... */
    drv_ras_slo_estimate_t slo;   /* ... and its model (status.autoscaler) */
    double arrivals;              /* the gateway's arrivals total at the last decision ... */
    int64_t arrival_ms;           /* ... and when it last grew (drv_scaling_busy) */
} ras_entry_t;

typedef struct nas_entry {
    char key[256];
    drv_nas_state_t st;
    bool seen;
    uint64_t last_hold[4];        /* per hold kind (holds[]): the last recorded, hashed */
} nas_entry_t;

/* Events that repeat on every pass while their condition lasts (replicas
 * waiting): recorded when they change, not on every pass. */
static const char *const holds[] = {"overflow", "at_max_nodes", "no_fit", "backoff"};

struct drv_scaling {
    ras_entry_t *ras;
    size_t n_ras, cap_ras;
    nas_entry_t *nas;
    size_t n_nas, cap_nas;
    drv_nas_decision_t *ds;       /* one per provisioning nodepool (~40 KiB each), kept */
    size_t cap_ds;
    bool busy, busy_next;         /* an SLO-mode deployment had arrivals in the last full
                                     pass / in this one (drv_scaling_busy) */
};

drv_scaling_t *drv_scaling_create(void)
{
    return calloc(1, sizeof(drv_scaling_t));
}

void drv_scaling_destroy(drv_scaling_t *s)
{
    if (!s)
        return;
    free(s->ras);
    free(s->nas);
    free(s->ds);
    free(s);
}

/* Find or add the entry for key in a sorted array of elements of `size`
 * bytes whose first member is the key. */
static void *entry(void **arr, size_t *n, size_t *cap, size_t size, const char *key)
{
    size_t lo = 0, hi = *n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp((char *)*arr + mid * size, key);
        if (c == 0)
            return (char *)*arr + mid * size;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        void *na = realloc(*arr, ncap * size);
        if (!na)
            abort();
        *arr = na;
        *cap = ncap;
    }
    char *at = (char *)*arr + lo * size;
    memmove(at + size, at, (*n - lo) * size);
    memset(at, 0, size);
    snprintf(at, 256, "%s", key);
    (*n)++;
    return at;
}

/* Drop the entries not marked seen since the last call, unmark the rest. */
static void prune(void *arr, size_t *n, size_t size, size_t seen_off)
{
    size_t j = 0;
    for (size_t i = 0; i < *n; i++) {
        char *e = (char *)arr + i * size;
        bool *seen = (bool *)(e + seen_off);
        if (!*seen)
            continue;
        *seen = false;
        if (j != i)
            memcpy((char *)arr + j * size, e, size);
        j++;
    }
    *n = j;
}

int64_t drv_scaling_replicas(drv_scaling_t *s, drv_head_t *head, const drv_obj_t *dep,
                             int64_t now_ms,
                             double load, const drv_ras_llm_sample_t *llm, size_t n_llm,
                             const drv_head_service_t *svc, bool demand,
                             int current, int starting,
                             int on_way, int ready, char *event, size_t event_len)
{
    ras_entry_t *e = entry((void **)&s->ras, &s->n_ras, &s->cap_ras, sizeof *e, dep->key);
    e->seen = true;
    drv_ras_config_t cfg;
    drv_ras_config_from_json(json_object_get(dep->spec, "autoscale"), &cfg);
    drv_ras_observe(&e->st, now_ms, drv_ras_llm_load(&cfg, llm, n_llm, load));
    if (svc) {   /* the SLO model's measurements (used with ttft_slo_ms / e2e_slo_ms only) */
        drv_ras_counters_t c = {.arrivals = svc->arrivals, .completed = svc->served,
                                .first_s = svc->first_s, .first_sq_s2 = svc->first_sq_s2,
                                .service_s = svc->service_s, .slots = svc->slots,
                                /* the gateway's prompt estimates: the prompt shift, the tail */
                                .prompt_tokens = svc->prompt_tokens, .prompted = svc->prompted,
                                .tail_n = svc->tail_n, .tail_p = svc->tail_p,
                                .tail_f_s = svc->tail_f_s, .tail_pp = svc->tail_pp,
                                .tail_pf = svc->tail_pf, .service_sq_s2 = svc->service_sq_s2,
                                /* generated tokens and the batch: decode rate, beta */
                                .gen_n = svc->gen_n, .gen_tokens = svc->gen_tokens,
                                .batch_n = svc->batch_n, .batch_x = svc->batch_x,
                                .batch_y = svc->batch_y, .batch_xx = svc->batch_xx,
                                .batch_xy = svc->batch_xy};
        _Static_assert(DRV_RAS_SLO_TAIL_BINS == DRV_PROMPTLEN_BINS, "one binning");
        memcpy(c.prompt_hist, svc->prompt_hist, sizeof c.prompt_hist);
        drv_ras_observe_counters(&e->st, now_ms, &c);
    }
    drv_ras_decision_t d;
    drv_error_t err;
    event[0] = '\0';
    if (drv_ras_decide(&cfg, &e->st, now_ms, current, starting, on_way, ready, demand, &d,
                       &err) < 0) {
        drv_warn("deployment %s: autoscaler: %s", dep->key, err.message);
        return cfg.min_replicas;
    }
    e->slo_on = cfg.ttft_slo_ms > 0 || cfg.e2e_slo_ms > 0;   /* status.autoscaler */
    e->slo = d.slo;
    if (svc && (double)svc->arrivals != e->arrivals) {
        e->arrivals = (double)svc->arrivals;
        e->arrival_ms = now_ms;
    }
    if (e->slo_on && svc && e->arrivals > 0 && now_ms >= e->arrival_ms &&   /* (clock set back) */
        now_ms - e->arrival_ms < DRV_SCALING_BUSY_MS)
        s->busy_next = true;   /* traffic: the next pass in a tick, not 5 s (scaling.h) */
    if (d.changed && d.desired != current) {
        char from[160] = "";   /* LLM-aware load: where the load came from */
        if (cfg.metric != DRV_RAS_METRIC_CONCURRENCY && n_llm > 0)
            snprintf(from, sizeof from, " (autoscale.metric %s: the load is the replicas' own, "
                     "from their metrics)", cfg.metric == DRV_RAS_METRIC_QUEUE
                                                ? "queue: running + waiting requests"
                                                : "kv_cache: KV-cache usage over target_kv_cache");
        snprintf(event, event_len, "%s: %s%s", d.kind, d.reason, from);
        drv_info("deployment %s: %d -> %d replicas (%s)", dep->key, current, d.desired,
                 event);
        drv_events_add(head->events, dep->owner, "deployment", dep->id, d.kind,
                       "%d -> %d replicas: %s%s", current, d.desired, d.reason, from);
    }
    return d.desired;
}

bool drv_scaling_busy(const drv_scaling_t *s)
{
    return s->busy;
}

/* A number for the status: 4 significant digits (the status is rendered
 * again only when it changes), null when not finite. */
static json_t *num4(double v)
{
    if (!isfinite(v))
        return json_null();
    char b[32];
    snprintf(b, sizeof b, "%.4g", v);
    return json_real(strtod(b, NULL));
}

json_t *drv_scaling_autoscaler_status(const drv_scaling_t *s, const char *dep_key)
{
    size_t lo = 0, hi = s->n_ras;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(s->ras[mid].key, dep_key);
        if (c == 0) {
            lo = mid;
            break;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo >= s->n_ras || strcmp(s->ras[lo].key, dep_key) != 0 || !s->ras[lo].slo_on)
        return NULL;
    const drv_ras_slo_estimate_t *e = &s->ras[lo].slo;
    json_t *o = json_object();
    json_object_set_new(o, "ready", json_boolean(e->ready));
    json_object_set_new(o, "lambda", num4(e->lambda));
    json_object_set_new(o, "dispersion", num4(e->dispersion));
    if (!e->ready)   /* the rest is the model's, once it has seen enough */
        return o;
    json_object_set_new(o, "lambda_ahead", num4(e->lambda_ahead));
    json_object_set_new(o, "mean_service_s", num4(e->mean_service_s));
    json_object_set_new(o, "service_p99_s", num4(e->service_p99_s));
    json_object_set_new(o, "first_p99_s", num4(e->first_p99_s));
    json_object_set_new(o, "prefill_tps", num4(e->prefill_tps));
    json_object_set_new(o, "decode_tps", num4(e->decode_tps));
    json_object_set_new(o, "batch_slowdown", num4(e->batch_slowdown));
    json_object_set_new(o, "full_batch_factor", num4(e->full_batch_factor));
    json_object_set_new(o, "cold_start_s", num4(e->cold_start_s));
    json_object_set_new(o, "held_rate", num4(e->held_rate));
    json_object_set_new(o, "predicted_ttft_p99_s", num4(e->predicted_p99_s));
    json_object_set_new(o, "predicted_e2e_p99_s", num4(e->predicted_e2e_p99_s));
    json_object_set_new(o, "tail", json_pack("{s:o, s:o, s:o}", "c0_s", num4(e->tail_c0),
                                             "c1_s_per_token", num4(e->tail_c1), "floor",
                                             num4(e->tail_floor)));
    json_object_set_new(o, "needs",
                        json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "need", e->need,
                                  "history", e->need_history, "seen", e->need_seen, "no_trend",
                                  e->need_no_trend, "tail", e->need_tail, "held", e->held,
                                  "surge", e->surge_need));
    json_object_set_new(o, "baseline", num4(e->baseline));
    json_object_set_new(o, "surge", num4(e->surge));
    return o;
}

void drv_scaling_report_failure(drv_scaling_t *s, drv_head_t *head, const drv_obj_t *np,
                                const char *type, const char *capacity, int64_t now_ms,
                                const char *why)
{
    const drv_instance_type_t *types[DRV_NAS_MAX_TYPES];
    drv_nas_config_t cfg;
    drv_error_t err;
    if (drv_nas_config_from_json(np->spec, head->catalog, types, DRV_NAS_MAX_TYPES, &cfg,
                                 &err) < 0)
        return;
    nas_entry_t *e = entry((void **)&s->nas, &s->n_nas, &s->cap_nas, sizeof *e, np->key);
    e->seen = true;
    drv_nas_report_failure(&e->st, &cfg, type,
                           capacity && strcmp(capacity, "spot") == 0 ? DRV_CAPACITY_SPOT
                                                                     : DRV_CAPACITY_ON_DEMAND,
                           now_ms, why);
}

/* The nodes of nodepool np, as the node autoscaler sees them. */
static size_t collect_nodes(drv_head_t *head, const drv_obj_t *np, drv_nas_node_t *out,
                            size_t max, drv_obj_t **objs)
{
    drv_state_t *st = head->state;
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", np->owner);
    size_t n = 0;
    for (size_t i = drv_state_lower_bound(st, DRV_K_NODE, prefix);
         i < drv_state_count(st, DRV_K_NODE) && n < max; i++) {
        drv_obj_t *nd = drv_state_at(st, DRV_K_NODE, i);
        if (strncmp(nd->key, prefix, strlen(prefix)) != 0)
            break;
        if (strcmp(drv_json_str(nd->spec, "cluster"), drv_json_str(np->spec, "cluster")) != 0 ||
            strcmp(drv_json_str(nd->spec, "nodepool"), np->id) != 0)
            continue;
        drv_nas_node_t *x = &out[n];
        memset(x, 0, sizeof *x);
        x->id = nd->id;
        x->type = drv_catalog_instance_type(head->catalog, drv_json_str(nd->spec, "instance_type"));
        x->capacity = drv_json_str(nd->spec, "capacity_type") &&
                              strcmp(drv_json_str(nd->spec, "capacity_type"), "spot") == 0
                          ? DRV_CAPACITY_SPOT
                          : DRV_CAPACITY_ON_DEMAND;
        x->created_ms = nd->created_at * 1000;
        bool gone = json_is_true(json_object_get(nd->spec, "terminating")) ||
                    json_is_true(json_object_get(nd->spec, "draining")) ||
                    nd->soft.node_state == DRV_NODE_LOST ||
                    (nd->soft.node_state == DRV_NODE_NOT_READY &&
                     drv_jobs_node_replaceable(head, nd));   /* its gang left it */
        x->state = gone ? DRV_NAS_NODE_GONE
                   : nd->soft.node_state == DRV_NODE_READY ? DRV_NAS_NODE_READY
                   : nd->soft.node_state == DRV_NODE_NOT_READY ? DRV_NAS_NODE_NOT_READY
                                                             : DRV_NAS_NODE_PROVISIONING;
        x->empty = nd->soft.empty_since_ms > 0 && x->state == DRV_NAS_NODE_READY;
        x->empty_since_ms = nd->soft.empty_since_ms;
        objs[n++] = nd;
    }
    return n;
}

static void mark_busy(drv_state_t *st, bool *busy, size_t nn, const char *owner,
                      const char *node)
{
    if (!node)
        return;
    char key[160];
    snprintf(key, sizeof key, "%s/%s", owner, node);
    size_t ni = drv_state_lower_bound(st, DRV_K_NODE, key);
    if (ni < nn && strcmp(drv_state_at(st, DRV_K_NODE, ni)->key, key) == 0)
        busy[ni] = true;
}

/* Which nodes hold no replica and no job worker (an active gang's
 * placement): keep each node's empty_since up to date. */
static void track_empty(drv_head_t *head, int64_t now_ms)
{
    drv_state_t *st = head->state;
    size_t nn = drv_state_count(st, DRV_K_NODE);
    bool *busy = calloc(nn ? nn : 1, sizeof *busy);
    for (size_t i = 0; i < drv_state_count(st, DRV_K_REPLICA); i++) {
        drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
        mark_busy(st, busy, nn, r->owner, drv_json_str(r->spec, "node"));
    }
    for (size_t j = 0; j < drv_state_count(st, DRV_K_JOB); j++) {
        drv_obj_t *job = drv_state_at(st, DRV_K_JOB, j);
        if (!drv_job_state_active(drv_job_state(job)))
            continue;
        size_t r;
        const json_t *p;
        json_array_foreach(json_object_get(drv_job_run(job), "placement"), r, p)
            mark_busy(st, busy, nn, job->owner, drv_json_str(p, "node"));
    }
    for (size_t i = 0; i < nn; i++) {
        drv_obj_t *nd = drv_state_at(st, DRV_K_NODE, i);
        if (busy[i] || nd->soft.node_state != DRV_NODE_READY)
            nd->soft.empty_since_ms = 0;
        else if (!nd->soft.empty_since_ms)
            nd->soft.empty_since_ms = now_ms;
    }
    free(busy);
}

/* One provisioning nodepool in this pass. */
typedef struct pool {
    drv_obj_t *np;
    const drv_provider_ops_t *ops;
    const drv_instance_type_t *types[DRV_NAS_MAX_TYPES];
    drv_nas_config_t cfg;
    char name[160];              /* CLUSTER/NODEPOOL */
    nas_entry_t *e;
    size_t first, n;             /* its nodes in the pass's nodes[] and objs[] */
} pool_t;

static int pool_cmp(const void *key, const void *elem)
{
    return strcmp(key, ((const pool_t *)elem)->np->key);
}

/* Where a pending replica may go: its deployment's nodepools that provision,
 * highest priority first (ties: the order of the list). */
static void want_of(drv_head_t *head, const pool_t *pools, size_t n_pools,
                    const drv_pending_t *p, drv_nas_want_t *w)
{
    memset(w, 0, sizeof *w);
    w->req = p->req;
    w->req.gpu_types = p->types;
    w->gang = p->gang;
    const drv_obj_t *dep = drv_state_get(head->state, DRV_K_DEPLOYMENT, p->deployment_key);
    if (!dep)   /* a waiting job's worker (head/jobs_ctl.c): its nodepools alike */
        dep = drv_state_get(head->state, DRV_K_JOB, p->deployment_key);
    if (!dep)
        return;
    const json_t *pls = json_object_get(dep->spec, "nodepools");
    int rank[DRV_NAS_MAX_PRIO];
    size_t npl = drv_deployment_ranks(dep, rank, DRV_NAS_MAX_PRIO);
    for (int r = 0; r < (int)npl; r++) {
        size_t a = 0;
        while (rank[a] != r)
            a++;   /* ranks are a permutation of 0..npl-1 */
        const json_t *pl = json_array_get(pls, a);
        char key[256];
        snprintf(key, sizeof key, "%s/%s/%s", dep->owner, drv_json_str(pl, "cluster"),
                 drv_json_str(pl, "nodepool"));
        const pool_t *hit = bsearch(key, pools, n_pools, sizeof *pools, pool_cmp);
        if (hit)
            w->pools[w->n_pools++] = (int)(hit - pools);
    }
}

/* Carry out one nodepool's decision: events, deletions, creations, status. */
static void apply(drv_head_t *head, pool_t *pl, const drv_nas_decision_t *d, drv_obj_t **objs,
                  drv_launch_fn launch, void *ctx)
{
    drv_state_t *st = head->state;
    drv_obj_t *np = pl->np;
    drv_error_t err;
    /* a hold's signature: its events' reasons (overflow) or replica counts
     * (the others, whose reasons count down to the next try) */
    uint64_t sig[4] = {0};
    for (size_t i = 0; i < d->n_events; i++)
        for (size_t h = 0; h < 4; h++)
            if (strcmp(d->events[i].kind, holds[h]) == 0) {
                char buf[300];
                if (h == 0)
                    snprintf(buf, sizeof buf, "%s", d->events[i].reason);
                else
                    snprintf(buf, sizeof buf, "%d", d->events[i].replicas);
                sig[h] = (sig[h] ^ drv_key_hash(buf)) * 1099511628211ULL + 1;
            }
    for (size_t i = 0; i < d->n_events; i++) {
        const drv_nas_event_t *ev = &d->events[i];
        size_t h = 0;
        while (h < 4 && strcmp(ev->kind, holds[h]) != 0)
            h++;
        if (h < 4 && sig[h] == pl->e->last_hold[h])
            continue;
        if (h == 4 && strcmp(ev->kind, "scale_up") != 0 && strcmp(ev->kind, "scale_down") != 0 &&
            strcmp(ev->kind, "provision_timeout") != 0 && strcmp(ev->kind, "fallback") != 0)
            continue;
        drv_info("nodepool %s: %s: %s", np->key, ev->kind, ev->reason);
        drv_events_add(head->events, np->owner, "nodepool", pl->name, ev->kind, "%s",
                       ev->reason);
    }
    memcpy(pl->e->last_hold, sig, sizeof sig);
    /* deletions first: they name indices into the pool's nodes */
    static const char *const term[] = {"terminating"};
    static const bool yes[] = {true};
    for (size_t i = 0; i < d->n_delete; i++)
        drv_node_set_flags(st, objs[pl->first + d->del[i].node], term, yes, 1, NULL);
    for (size_t i = 0; i < d->n_create; i++) {
        for (int k = 0; k < d->create[i].count; k++) {
            char secret[96];
            uint64_t seq;
            drv_obj_t *n = drv_node_create(head, np, pl->ops->name, d->create[i].type->id,
                                           drv_capacity_name(d->create[i].capacity), secret,
                                           &seq, &err);
            if (!n) {
                drv_warn("nodepool %s: %s", np->key, err.message);
                break;
            }
            drv_node_launch_t l;
            memset(&l, 0, sizeof l);
            snprintf(l.node_id, sizeof l.node_id, "%s", n->id);
            snprintf(l.owner, sizeof l.owner, "%s", n->owner);
            snprintf(l.secret, sizeof l.secret, "%s", secret);
            const drv_instance_type_t *it = d->create[i].type;
            if (it->gpu_count > 0)
                snprintf(l.gpus, sizeof l.gpus, "%dx%s:%lld", it->gpu_count, it->gpu_type,
                         (long long)it->gpu_memory_mib);
            else
                snprintf(l.gpus, sizeof l.gpus, "none");
            l.cpus = it->vcpus;
            l.memory_mib = (long long)it->memory_mib;
            launch(ctx, pl->ops, &l);
        }
    }
    if (d->n_events) {
        const drv_nas_event_t *ev = &d->events[d->n_events - 1];
        json_t *status = np->status ? json_deep_copy(np->status) : json_object();
        json_object_set_new(status, "last_scale_event",
                            json_pack("{s:s, s:s}", "kind", ev->kind, "reason", ev->reason));
        if (json_equal(status, np->status))
            json_decref(status);
        else
            drv_state_set_status(st, np, status);
    }
}

/* A waiting gang's workers that a nodepool holds back (it cannot fit whole
 * within max_nodes) give the job its reason (status.provisioning); every
 * other job's goes. */
static void gang_reasons(drv_head_t *head, const pool_t *pools, const drv_nas_decision_t *ds,
                         const drv_pending_t *pending, size_t n_pending, const int *at,
                         const bool *covered)
{
    drv_state_t *st = head->state;
    const char *gang_key = NULL;
    char why[512] = "";
    for (size_t i = 0; i < n_pending; i++) {
        if (!pending[i].gang)
            continue;
        gang_key = pending[i].deployment_key;
        if (!covered[i] && at[i] >= 0 && ds[at[i]].gang_why[0] && !why[0])
            snprintf(why, sizeof why, "nodepool %s: %s", pools[at[i]].name, ds[at[i]].gang_why);
    }
    for (size_t j = 0; j < drv_state_count(st, DRV_K_JOB); j++) {
        drv_obj_t *job = drv_state_at(st, DRV_K_JOB, j);
        bool mine = gang_key && strcmp(job->key, gang_key) == 0;
        if (mine || json_object_get(job->status, "provisioning"))
            drv_job_set_provisioning(st, job, mine && why[0] ? why : NULL);
    }
}

void drv_scaling_nodes(drv_scaling_t *s, drv_head_t *head, int64_t now_ms,
                       const drv_pending_t *pending, size_t n_pending, drv_launch_fn launch,
                       void *ctx)
{
    drv_state_t *st = head->state;
    track_empty(head, now_ms);
    size_t n_np = drv_state_count(st, DRV_K_NODEPOOL), n_all = drv_state_count(st, DRV_K_NODE);
    pool_t *pools = calloc(n_np + 1, sizeof *pools);
    drv_nas_pool_t *npools = calloc(n_np + 1, sizeof *npools);
    if (s->cap_ds < n_np + 1) {   /* grown, never shrunk: no 40 KiB calloc per pool per pass */
        drv_nas_decision_t *nd = realloc(s->ds, (n_np + 1) * sizeof *nd);
        if (nd) {
            s->ds = nd;
            s->cap_ds = n_np + 1;
        }
    }
    drv_nas_decision_t *ds = s->cap_ds >= n_np + 1 ? s->ds : NULL;
    drv_nas_node_t *nodes = calloc(n_all + 1, sizeof *nodes);
    drv_obj_t **objs = calloc(n_all + 1, sizeof *objs);
    drv_nas_want_t *wants = calloc(n_pending + 1, sizeof *wants);
    int *at = calloc(n_pending + 1, sizeof *at);
    bool *covered = calloc(n_pending + 1, sizeof *covered);
    size_t n_pools = 0, n_nodes = 0;
    drv_error_t err;
    if (!pools || !npools || !ds || !nodes || !objs || !wants || !at || !covered) {
        drv_warn("node autoscaler: out of memory");
        goto done;
    }
    /* the provisioning nodepools, in key order; their memory entries are
     * all added before any pointer to one is kept (entry() may move them) */
    for (size_t p = 0; p < n_np; p++) {
        drv_obj_t *np = drv_state_at(st, DRV_K_NODEPOOL, p);
        char ckey[192];
        snprintf(ckey, sizeof ckey, "%s/%s", np->owner, drv_json_str(np->spec, "cluster"));
        const drv_obj_t *cl = drv_state_get(st, DRV_K_CLUSTER, ckey);
        if (!cl)
            continue;
        pool_t *pl = &pools[n_pools];
        pl->ops = drv_provider_ops(drv_json_str(cl->spec, "provider"));
        if (!pl->ops->provisions)
            continue;
        /* seen even when its config does not load now (a type left the
         * catalog): its backoffs and timers must outlive that */
        nas_entry_t *e = entry((void **)&s->nas, &s->n_nas, &s->cap_nas, sizeof *e, np->key);
        e->seen = true;
        if (drv_nas_config_from_json(np->spec, head->catalog, pl->types, DRV_NAS_MAX_TYPES,
                                     &pl->cfg, &err) < 0) {
            drv_warn("nodepool %s: %s", np->key, err.message);
            continue;
        }
        pl->np = np;
        snprintf(pl->name, sizeof pl->name, "%s/%s", drv_json_str(np->spec, "cluster"), np->id);
        pl->first = n_nodes;
        pl->n = collect_nodes(head, np, nodes + n_nodes, n_all - n_nodes, objs + n_nodes);
        n_nodes += pl->n;
        n_pools++;
    }
    for (size_t p = 0; p < n_pools; p++) {
        pool_t *pl = &pools[p];
        pl->cfg.types = pl->types;   /* pools[] is final: point at its own buffer */
        pl->e = entry((void **)&s->nas, &s->n_nas, &s->cap_nas, sizeof(nas_entry_t),
                      pl->np->key);
        npools[p] = (drv_nas_pool_t){.name = pl->name, .cfg = &pl->cfg, .state = &pl->e->st,
                                     .nodes = nodes + pl->first, .n_nodes = pl->n};
    }
    for (size_t i = 0; i < n_pending; i++)
        want_of(head, pools, n_pools, &pending[i], &wants[i]);
    if (drv_nas_decide_pools(npools, n_pools, now_ms, wants, n_pending, ds, at, covered,
                             &err) < 0) {
        drv_warn("node autoscaler: %s", err.message);
        goto done;
    }
    for (size_t p = 0; p < n_pools; p++)
        apply(head, &pools[p], &ds[p], objs, launch, ctx);
    gang_reasons(head, pools, ds, pending, n_pending, at, covered);
done:
    free(pools);
    free(npools);
    free(nodes);
    free(objs);
    free(wants);
    free(at);
    free(covered);
    /* the end of a full pass: forget deployments and nodepools it did not use */
    prune(s->ras, &s->n_ras, sizeof *s->ras, offsetof(ras_entry_t, seen));
    s->busy = s->busy_next;
    s->busy_next = false;
    prune(s->nas, &s->n_nas, sizeof *s->nas, offsetof(nas_entry_t, seen));
}
