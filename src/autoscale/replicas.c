/* replicas.c — the replica autoscaler's decisions (see replicas.h for the
 * rules): its config, the load history, the memories and drv_ras_decide,
 * and the victim order; the SLO model it sizes on is replicas_slo.c's.
 * Pure: every input is an argument, the only state is the caller's
 * drv_ras_state_t; no clock, no I/O, no allocation, no locks (the caller
 * owns the state and serialises calls on it). */
#include "autoscale/replicas.h"
#include "autoscale/replicas_int.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t width_for(const drv_ras_config_t *cfg)
{
    int64_t w = (int64_t)cfg->traffic_history_seconds * 1000 / DRV_RAS_BUCKETS;
    return w > 0 ? w : 1;
}


static void reset_ring(drv_ras_state_t *s)
{
    for (size_t i = 0; i < DRV_RAS_BUCKETS; i++) {
        s->ring[i].epoch = INT64_MIN;
        s->ring[i].sum = 0;
        s->ring[i].n = 0;
        s->arr_epoch[i] = INT64_MIN;
        s->arr_n[i] = 0;
        s->arr_prompt[i] = 0;
    }
    for (size_t i = 0; i < DRV_RAS_SLO_TREND_SUBS; i++) {
        s->trend_epoch[i] = INT64_MIN;
        s->trend_n[i] = 0;
    }
    for (size_t i = 0; i < DRV_RAS_SLO_HOLD_BUCKETS; i++) {
        s->rate_epoch[i] = s->need_epoch[i] = s->seen_epoch[i] = INT64_MIN;
        s->rate_max[i] = s->need_max[i] = s->seen_max[i] = 0;
        s->load_epoch[i] = INT64_MIN;
        s->load_max[i] = 0;
        s->base_epoch[i] = s->ratio_epoch[i] = s->surge_epoch[i] = INT64_MIN;
        s->base_n[i] = s->ratio_max[i] = s->surge_max[i] = 0;
        s->recent_epoch[i] = INT64_MIN;
        s->recent_max[i] = 0;
        s->floor_epoch[i] = INT64_MIN;
        s->floor_max[i] = 0;
    }
}

static int64_t iget_or(const json_t *o, const char *k, int64_t dflt)
{
    const json_t *v = o ? json_object_get(o, k) : NULL;
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static int clamp_int(int64_t v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : (int)v;
}

/* ceil(load / target) as an int, saturating. */
static int64_t need_for(double load, int target)
{
    if (!(load > 0))
        return 0;
    double r = ceil(load / target - 1e-9);   /* 8.0000000001 / 4 is still 2 */
    return r > 1e6 ? 1000000 : (int64_t)r;
}

void drv_ras_config_from_json(const json_t *as, drv_ras_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->min_replicas = clamp_int(iget_or(as, "min_replicas", 1), 0, 1000000);
    cfg->max_replicas = clamp_int(iget_or(as, "max_replicas", cfg->min_replicas > 1 ? cfg->min_replicas : 1), 0, 1000000);
    cfg->target_concurrency = clamp_int(iget_or(as, "target_concurrency", 4), 0, 100000000);
    cfg->traffic_history_seconds = clamp_int(iget_or(as, "traffic_history_seconds", 60), 0, 86400 * 7);
    cfg->scale_up_delay_seconds = clamp_int(iget_or(as, "scale_up_delay_seconds", 0), -1, 86400 * 30);
    cfg->scale_down_delay_seconds = clamp_int(iget_or(as, "scale_down_delay_seconds", 300), -1, 86400 * 30);
    cfg->scale_to_zero_delay_seconds =
        clamp_int(iget_or(as, "scale_to_zero_delay_seconds", 900), -1, 86400 * 30);
    cfg->panic_factor = 0;
    cfg->max_scale_up_rate = clamp_int(iget_or(as, "max_scale_up_rate", 0), -1, 1000000);
    cfg->ttft_slo_ms = clamp_int(iget_or(as, "ttft_slo_ms", 0), -1, DRV_RAS_TTFT_SLO_MAX_MS + 1);
    cfg->e2e_slo_ms = clamp_int(iget_or(as, "e2e_slo_ms", 0), -1, DRV_RAS_E2E_SLO_MAX_MS + 1);
    const char *metric = json_string_value(json_object_get(as, "metric"));
    cfg->metric = metric && strcmp(metric, "queue") == 0      ? DRV_RAS_METRIC_QUEUE
                  : metric && strcmp(metric, "kv_cache") == 0 ? DRV_RAS_METRIC_KV_CACHE
                                                              : DRV_RAS_METRIC_CONCURRENCY;
    const json_t *kv = json_object_get(as, "target_kv_cache");
    cfg->target_kv_cache = json_is_number(kv) && json_number_value(kv) > 0 &&
                                   json_number_value(kv) <= 1
                               ? json_number_value(kv)
                               : DRV_RAS_TARGET_KV_CACHE;
}

double drv_ras_llm_load(const drv_ras_config_t *cfg, const drv_ras_llm_sample_t *s, size_t n,
                        double gateway_load)
{
    double sum = 0;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (cfg->metric == DRV_RAS_METRIC_QUEUE) {
            sum += (s[i].running > 0 ? s[i].running : 0) + (s[i].waiting > 0 ? s[i].waiting : 0);
            used++;
        } else if (cfg->metric == DRV_RAS_METRIC_KV_CACHE && s[i].kv_cache >= 0) {
            sum += s[i].kv_cache > 1 ? 1 : s[i].kv_cache;
            used++;
        }
    }
    if (cfg->metric == DRV_RAS_METRIC_CONCURRENCY || used == 0)
        return gateway_load;
    if (cfg->metric == DRV_RAS_METRIC_QUEUE)
        return sum;
    double target = cfg->target_kv_cache > 0 ? cfg->target_kv_cache : DRV_RAS_TARGET_KV_CACHE;
    return sum / target * (cfg->target_concurrency > 0 ? cfg->target_concurrency : 1);
}

int drv_ras_config_check(const drv_ras_config_t *cfg, drv_error_t *err)
{
    if (cfg->min_replicas < 0)
        return drv_err_invalid(err, "autoscale.min_replicas", "min_replicas must be >= 0");
    if (cfg->max_replicas < 1)
        return drv_err_invalid(err, "autoscale.max_replicas", "max_replicas must be >= 1");
    if (cfg->max_replicas < cfg->min_replicas)
        return drv_err_invalid(err, "autoscale.max_replicas",
                               "max_replicas (%d) must be >= min_replicas (%d)",
                               cfg->max_replicas, cfg->min_replicas);
    if (cfg->target_concurrency < 1)
        return drv_err_invalid(err, "autoscale.target_concurrency",
                               "target_concurrency must be >= 1");
    if (cfg->traffic_history_seconds < 1)
        return drv_err_invalid(err, "autoscale.traffic_history_seconds",
                               "traffic_history_seconds must be >= 1");
    if (cfg->scale_up_delay_seconds < 0)
        return drv_err_invalid(err, "autoscale.scale_up_delay_seconds",
                               "scale_up_delay_seconds must be >= 0");
    if (cfg->scale_down_delay_seconds < 0)
        return drv_err_invalid(err, "autoscale.scale_down_delay_seconds",
                               "scale_down_delay_seconds must be >= 0");
    if (cfg->scale_to_zero_delay_seconds < 0)
        return drv_err_invalid(err, "autoscale.scale_to_zero_delay_seconds",
                               "scale_to_zero_delay_seconds must be >= 0");
    if (cfg->max_scale_up_rate == 1)
        return drv_err_invalid(err, "autoscale.max_scale_up_rate",
                               "max_scale_up_rate must be >= 2 (1 would never grow)");
    if (cfg->ttft_slo_ms < 0 || cfg->ttft_slo_ms > DRV_RAS_TTFT_SLO_MAX_MS)
        return drv_err_invalid(err, "autoscale.ttft_slo_ms",
                               "ttft_slo_ms must be from 1 to %d (0 or absent: off)",
                               DRV_RAS_TTFT_SLO_MAX_MS);
    if (cfg->e2e_slo_ms < 0 || cfg->e2e_slo_ms > DRV_RAS_E2E_SLO_MAX_MS)
        return drv_err_invalid(err, "autoscale.e2e_slo_ms",
                               "e2e_slo_ms must be from 1 to %d (0 or absent: off)",
                               DRV_RAS_E2E_SLO_MAX_MS);
    if (isnan(cfg->panic_factor))
        return drv_err_invalid(err, "autoscale.panic_factor", "panic_factor is not a number");
    return 0;
}

void drv_ras_state_init(drv_ras_state_t *s, const drv_ras_config_t *cfg, int64_t now_ms)
{
    assert(s);
    memset(s, 0, sizeof *s);
    s->initialised = true;
    s->width_ms = cfg ? width_for(cfg) : 1000;
    reset_ring(s);
    s->init_ms = now_ms;
    s->first_arrival_ms = -1;
    s->last_traffic_ms = now_ms;
    s->up_since_ms = -1;
    s->down_since_ms = -1;
    s->last_change_ms = -1;
    s->last_desired = -1;
    s->wave_since_ms = -1;
    s->slo_since_ms = -1;
}

void drv_ras_observe(drv_ras_state_t *s, int64_t now_ms, double v)
{
    assert(s);
    if (!s->initialised)              /* zeroed: 1 s buckets until a decide */
        drv_ras_state_init(s, NULL, now_ms);
    if (!(v > 0))
        v = 0;                        /* negative and NaN count as no load */
    int64_t e = ras_floor_div(now_ms, s->width_ms);
    drv_ras_bucket_t *b = &s->ring[ras_slot_of(e)];
    if (b->n > 0 && e < b->epoch)
        return;                       /* older than what the slot holds */
    if (b->epoch != e || b->n == 0) {
        b->epoch = e;
        b->sum = 0;
        b->n = 0;
    }
    b->sum += v;
    if (b->n < UINT32_MAX)
        b->n++;
    if (now_ms >= s->last_sample_ms) {
        s->last_sample_ms = now_ms;
        s->last_sample = v;
    }
    if (v > 0) {
        s->traffic_since_zero = true;
        if (now_ms > s->last_traffic_ms)
            s->last_traffic_ms = now_ms;
    }
}

double drv_ras_load(const drv_ras_state_t *s, int64_t now_ms, int buckets)
{
    assert(s);
    if (s->width_ms <= 0 || buckets <= 0)
        return 0;
    if (buckets > DRV_RAS_BUCKETS)
        buckets = DRV_RAS_BUCKETS;
    int64_t cur = ras_floor_div(now_ms, s->width_ms);
    double total = 0;
    int used = 0;
    for (size_t i = 0; i < DRV_RAS_BUCKETS; i++) {
        const drv_ras_bucket_t *b = &s->ring[i];
        if (b->n == 0 || b->epoch > cur || b->epoch <= cur - buckets)
            continue;
        total += b->sum / b->n;
        used++;
    }
    return used ? total / used : 0;
}

/* Record v in its minute of a memory (epoch, max per minute). */
static void record(int64_t *epoch, double *max, int64_t now_ms, double v)
{
    int64_t e = ras_floor_div(now_ms, DRV_RAS_SLO_HOLD_WIDTH_MS);
    size_t i = ras_ring_slot(e, DRV_RAS_SLO_HOLD_BUCKETS);
    if (epoch[i] < e) {
        epoch[i] = e;
        max[i] = 0;
    }
    if (epoch[i] == e && v > max[i])
        max[i] = v;
}

/* A memory's value for minute m (0: none recorded). */
static double minute_of(const int64_t *epoch, const double *max, int64_t m)
{
    size_t i = ras_ring_slot(m, DRV_RAS_SLO_HOLD_BUCKETS);
    return epoch[i] == m ? max[i] : 0;
}

/* The DRV_RAS_SLO_HOLD_RANK-th largest of a memory's last
 * DRV_RAS_SLO_HOLD_BUCKETS minutes up to minute e; with es > 0, each
 * minute's value at most that minute's in the cap memory over es (the
 * rate memory, capped at the offered load seen: replicas.h). */
static double ranked(const int64_t *epoch, const double *max, const int64_t *cap_epoch,
                     const double *cap_max, double es, int64_t e)
{
    double top[DRV_RAS_SLO_HOLD_RANK] = {0};   /* descending */
    for (size_t k = 0; k < DRV_RAS_SLO_HOLD_BUCKETS; k++) {
        if (epoch[k] > e || epoch[k] <= e - DRV_RAS_SLO_HOLD_BUCKETS)
            continue;
        double x = max[k];
        double cap = es > 0 ? minute_of(cap_epoch, cap_max, epoch[k]) : 0;
        if (cap > 0 && cap / es < x)
            x = cap / es;
        for (int j = 0; j < DRV_RAS_SLO_HOLD_RANK; j++)
            if (x > top[j]) {
                double t = top[j];
                top[j] = x;
                x = t;
            }
    }
    return top[DRV_RAS_SLO_HOLD_RANK - 1];
}

/* Record v in its minute of a memory (epoch, max per minute); the
 * DRV_RAS_SLO_HOLD_RANK-th largest of the last DRV_RAS_SLO_HOLD_BUCKETS
 * minutes. */
static double hold(int64_t *epoch, double *max, int64_t now_ms, double v)
{
    record(epoch, max, now_ms, v);
    return ranked(epoch, max, NULL, NULL, 0, ras_floor_div(now_ms, DRV_RAS_SLO_HOLD_WIDTH_MS));
}

/* Reached (replicas.h): the largest need scaled ahead of the last
 * DRV_RAS_SLO_HOLD_BUCKETS minutes (s->need_max), each minute's at most the
 * largest need at the rate seen (s->seen_max) from it to `window` minutes
 * after it, once those have passed (until then, as it was sized). */
static double reached(const drv_ras_state_t *s, int64_t now_ms, int64_t window)
{
    int64_t cur = ras_floor_div(now_ms, DRV_RAS_SLO_HOLD_WIDTH_MS);
    double best = 0;
    for (int64_t m = cur - DRV_RAS_SLO_HOLD_BUCKETS + 1; m <= cur; m++) {
        double v = minute_of(s->need_epoch, s->need_max, m);
        if (m + window < cur) {
            double seen = 0;
            for (int64_t j = m; j <= m + window; j++) {
                double x = minute_of(s->seen_epoch, s->seen_max, j);
                if (x > seen)
                    seen = x;
            }
            if (seen < v)
                v = seen;
        }
        if (v > best)
            best = v;
    }
    return best;
}

/* The SLO mode's scale-down target (replicas.h, "Floor without a second
 * delay"): the largest need of the minutes the scale-down delay covers
 * (s->recent_max) and the largest floor (slo.held) of this minute and the
 * DRV_RAS_SLO_FLOOR_MINUTES before it; -1 while the model has not sized
 * every pass of that window, or the delay is longer than the memory. */
static int slo_down_target(const drv_ras_state_t *s, int64_t now_ms, int64_t down_ms)
{
    const int64_t w = DRV_RAS_SLO_HOLD_WIDTH_MS;
    int64_t cur = ras_floor_div(now_ms, w), from = ras_floor_div(now_ms - down_ms, w);
    if (s->slo_since_ms < 0 || from <= ras_floor_div(s->slo_since_ms, w) ||
        cur - from >= DRV_RAS_SLO_HOLD_BUCKETS)
        return -1;
    double best = 0;
    for (int64_t m = from; m <= cur; m++) {
        double x = minute_of(s->recent_epoch, s->recent_max, m);
        if (x > best)
            best = x;
    }
    for (int64_t m = cur - DRV_RAS_SLO_FLOOR_MINUTES; m <= cur; m++) {
        double x = minute_of(s->floor_epoch, s->floor_max, m);
        if (x > best)
            best = x;
    }
    return best > 1e6 ? 1000000 : (int)best;
}

static void set(drv_ras_decision_t *out, int desired, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void set(drv_ras_decision_t *out, int desired, const char *kind, const char *fmt, ...)
{
    out->desired = desired;
    out->kind = kind;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof out->reason, fmt, ap);
    va_end(ap);
}

int drv_ras_decide(const drv_ras_config_t *cfg, drv_ras_state_t *s, int64_t now_ms, int current,
                   int starting, int on_way, int ready, bool demand_at_zero,
                   drv_ras_decision_t *out, drv_error_t *err)
{
    assert(cfg && s && out);
    if (drv_ras_config_check(cfg, err) < 0)
        return -1;
    if (current < 0 || starting < 0 || ready < 0 || on_way < starting ||
        on_way + ready > current)
        return drv_err_invalid(err, "",
                               "replica counts out of range (current %d, starting %d, on their "
                               "way %d, ready %d)", current, starting, on_way, ready);
    memset(out, 0, sizeof *out);
    if (!s->initialised)
        drv_ras_state_init(s, cfg, now_ms);
    if (s->width_ms != width_for(cfg)) {   /* a new history length: it restarts */
        s->width_ms = width_for(cfg);
        reset_ring(s);
    }
    if (demand_at_zero && now_ms > s->last_traffic_ms)
        s->last_traffic_ms = now_ms;

    const int target = cfg->target_concurrency;
    const double panic = cfg->panic_factor > 0 ? cfg->panic_factor : DRV_RAS_PANIC_FACTOR;
    const int64_t up_ms = (int64_t)cfg->scale_up_delay_seconds * 1000;
    const int64_t down_ms = (int64_t)cfg->scale_down_delay_seconds * 1000;
    const int64_t zero_ms = (int64_t)cfg->scale_to_zero_delay_seconds * 1000;
    double load = drv_ras_load(s, now_ms, DRV_RAS_BUCKETS);
    double burst = drv_ras_load(s, now_ms, DRV_RAS_BURST_BUCKETS);
    int rec = clamp_int(need_for(load, target), cfg->min_replicas, cfg->max_replicas);
    /* what the burst window needs, and the larger of it and the history's */
    int64_t burst_need = need_for(burst, target);
    int64_t peak_need = need_for(load > burst ? load : burst, target);
    bool burst_now = burst >= panic * current * target;
    /* SLO mode (replicas.h): the same rules on the predicted TTFT */
    drv_ras_slo_estimate(cfg, s, now_ms, &out->slo);
    const bool slo = out->slo.ready;
    if (cfg->ttft_slo_ms > 0 || cfg->e2e_slo_ms > 0) {   /* from the first pass: before the model */
        /* the rate memory, each minute's rate at most the offered load
         * seen then (rate x E[S], once the model is ready) over E[S] now:
         * a rate seen while requests were short is no reason to hold
         * replicas for it once they are long, where the load it brought
         * never came (without it, conv seeds 3 and 4 held 11 replicas
         * for the 6.55 requests/s of minute 4 at E[S] 17 s once E[S] was
         * 22 s, where 9 served that load; replicas.h) */
        record(s->rate_epoch, s->rate_max, now_ms, out->slo.lambda);
        double es_now = out->slo.ready ? out->slo.mean_service_s : 0;
        if (es_now > 0)
            record(s->load_epoch, s->load_max, now_ms, out->slo.lambda * es_now);
        out->slo.held_rate = ranked(s->rate_epoch, s->rate_max, s->load_epoch, s->load_max,
                                    es_now, ras_floor_div(now_ms, DRV_RAS_SLO_HOLD_WIDTH_MS));
    }
    char targets[80];   /* for the reasons: "TTFT p99 <= 2000ms and e2e p99 <= 60000ms" */
    int tl = cfg->ttft_slo_ms > 0
                 ? snprintf(targets, sizeof targets, "TTFT p99 <= %dms", cfg->ttft_slo_ms)
                 : 0;
    targets[tl] = '\0';
    if (cfg->e2e_slo_ms > 0)
        snprintf(targets + tl, sizeof targets - (size_t)tl, "%se2e p99 <= %dms",
                 tl ? " and " : "", cfg->e2e_slo_ms);
    if (slo) {
        rec = clamp_int(out->slo.need, cfg->min_replicas, cfg->max_replicas);
        peak_need = out->slo.need;
        const drv_ras_slo_estimate_t *e = &out->slo;
        ras_tail_model_t tm = {s->tail_hist, e->tail_c0, e->tail_c1, e->batch_slowdown,
                               e->peakedness};
        int slots = s->svc.slots > 0 ? (int)s->svc.slots : cfg->target_concurrency;
        int held = e->held_rate > e->lambda
                       ? ras_both_need(cfg, &tm, e->held_rate, e->mean_service_s, e->first_p99_s,
                                   e->service_p99_s, slots, e->full_batch_factor, NULL, NULL)
                       : e->need_seen;
        /* and the largest need the model gave (at that minute's sizes),
         * scaled ahead as it was sized then: a burst's rate grows during
         * the cold start its replicas take, and the next burst will too
         * (without it, conv-mix2 held 13 replicas between bursts where
         * its first burst had needed 16) */
        record(s->need_epoch, s->need_max, now_ms, e->need_no_trend);
        record(s->seen_epoch, s->seen_max, now_ms, e->need_seen);
        record(s->recent_epoch, s->recent_max, now_ms, e->need);
        if (s->slo_since_ms < 0)
            s->slo_since_ms = now_ms;
        /* ... as far as the rate reached it: a scale-ahead the rate did not
         * live up to within the scale-down delay and a cold start after it
         * (when its replicas would have gone anyway) is not kept for the
         * hour (without it, conv held the 10 its minute 3 was scaled ahead
         * to for the rest of the trace, where 9 were ever seen) */
        double cold = e->cold_start_s > 0 ? e->cold_start_s : DRV_RAS_SLO_COLD_PRIOR_S;
        int64_t window = (int64_t)ceil((cfg->scale_down_delay_seconds + cold) * 1000 /
                                       DRV_RAS_SLO_HOLD_WIDTH_MS);
        int held_need = (int)reached(s, now_ms, window);
        out->slo.held = held > held_need ? held : held_need;
        out->slo.held_memory = out->slo.held;
        /* surprise (replicas.h): a step's need at the rate seen (not
         * scaled ahead: that guesses its growth, and conv-burst4's first
         * step, scaled ahead to max_replicas, stood max_replicas for the
         * hour) over the need at the baseline, learned; the standing need
         * it gives now, with a margin for a larger step (replicas.h) */
        int need_base = e->baseline > 0
                            ? ras_both_need(cfg, &tm, e->baseline, e->mean_service_s, e->first_p99_s,
                                        e->service_p99_s, slots, e->full_batch_factor, NULL, NULL)
                            : 0;
        double ratio = e->step >= DRV_RAS_SLO_STEP_MIN && need_base > 0
                           ? (double)e->need_seen / need_base
                           : 0;
        out->slo.surge = hold(s->ratio_epoch, s->ratio_max, now_ms, ratio);
        double standing = out->slo.surge > 1 && need_base > 0
                              ? ceil(need_base * out->slo.surge * DRV_RAS_SLO_STEP_MARGIN)
                              : 0;
        if (standing > cfg->max_replicas)
            standing = cfg->max_replicas;
        int kept = (int)hold(s->surge_epoch, s->surge_max, now_ms, standing);
        out->slo.surge_need = out->slo.surge > 1 ? kept : 0;   /* not past the steps' hour */
        if (out->slo.surge_need > out->slo.held)
            out->slo.held = out->slo.surge_need;
        if (out->slo.surge_need > rec)
            rec = clamp_int(out->slo.surge_need, cfg->min_replicas, cfg->max_replicas);
        record(s->floor_epoch, s->floor_max, now_ms, out->slo.held);
        burst_need = out->slo.held > out->slo.need ? out->slo.held : out->slo.need;
        burst_now = out->slo.need >= panic * current;
    }
    int down_target = -1;
    int64_t idle_ms = now_ms - s->last_traffic_ms;
    /* rule 0 (replicas.h): a backlog built up during a cold start */
    const bool aware = cfg->max_scale_up_rate >= 0;
    const int rate = cfg->max_scale_up_rate > 0 ? cfg->max_scale_up_rate : DRV_RAS_SCALE_UP_RATE;
    const double capacity = (double)current * target;
    if (on_way == 0) {                   /* nothing on its way (any more) */
        if (s->wave_since_ms >= 0 && s->on_way && now_ms > s->wave_since_ms)
            drv_ras_learn_cold_start(s, (double)(now_ms - s->wave_since_ms) / 1000);
        s->wave_since_ms = -1;
        double peak = load > burst ? load : burst;
        if (aware && !slo && s->on_way && peak > capacity) {
            s->drain_load = peak;        /* 0b: the backlog they found */
            s->drain_since_ms = now_ms;
        }
        s->settled = current;
        s->on_way = false;
    } else {
        s->on_way = true;
    }
    if (s->drain_load > 0 &&
        (slo || load <= capacity || burst >= panic * s->drain_load ||
         (now_ms - s->drain_since_ms >= (int64_t)cfg->traffic_history_seconds * 1000 &&
          burst >= s->drain_load)))
        s->drain_load = 0;               /* drained, a burst, or they do not drain it */
    const bool draining = s->drain_load > 0;
    const int base = s->settled > 1 ? s->settled : 1;
    int up_cap = cfg->max_replicas;      /* 0a */
    if (aware && on_way > 0)
        up_cap = clamp_int((int64_t)rate * base,
                           current < cfg->max_replicas ? current : cfg->max_replicas,
                           cfg->max_replicas);
    out->load = load;
    out->burst_load = burst;
    out->recommended = rec;
    out->desired = current;
    out->kind = "hold";

    if (current > cfg->max_replicas) {
        set(out, cfg->max_replicas, "clamp", "%d replicas is above max_replicas (%d)", current,
            cfg->max_replicas);
    } else if (current < cfg->min_replicas) {
        set(out, cfg->min_replicas, "clamp", "%d replicas is below min_replicas (%d)", current,
            cfg->min_replicas);
    } else if (current == 0) {
        /* only traffic seen since the deployment went to zero counts, not
         * what is left of older traffic in the history */
        if (demand_at_zero || s->traffic_since_zero) {
            int want = clamp_int(need_for(s->last_sample, target), 1, cfg->max_replicas);
            set(out, want, "scale_from_zero",
                "%s at zero replicas; starting %d at once",
                demand_at_zero ? "a request arrived" : "requests are waiting", want);
        } else {
            set(out, 0, "hold", "no traffic; at zero replicas");
        }
    } else if (burst_now && !draining &&
               clamp_int(peak_need, cfg->min_replicas, up_cap) > current) {
        int want = clamp_int(peak_need, cfg->min_replicas, up_cap);
        if (slo)
            set(out, want, "scale_up",
                "burst: %.2f requests/s needs %d replica(s) for %s (%.2f "
                "requests/s each); scaling to %d at once", out->slo.lambda_ahead, out->slo.need,
                targets, out->slo.replica_rps, want);
        else
            set(out, want, "scale_up",
                "burst: %.1f requests in flight or queued is %.1fx the capacity of %d replica(s) "
                "(target_concurrency %d); scaling to %d at once", burst,
                burst / ((double)current * target), current, target, want);
    } else if (cfg->min_replicas == 0 && idle_ms >= zero_ms && idle_ms > 0) {
        if (starting > 0 && starting < current)
            set(out, starting, "scale_down",
                "no traffic for %llds; scaling down to the %d starting replica(s), which are kept",
                (long long)(idle_ms / 1000), starting);
        else if (starting > 0)
            set(out, current, "hold",
                "no traffic for %llds; waiting for %d starting replica(s) before scaling to zero",
                (long long)(idle_ms / 1000), starting);
        else
            set(out, 0, "scale_to_zero", "no traffic for %llds (scale_to_zero_delay_seconds %d)",
                (long long)(idle_ms / 1000), cfg->scale_to_zero_delay_seconds);
    } else if (rec > current) {
        s->down_since_ms = -1;
        if (s->up_since_ms < 0 || s->up_since_ms > now_ms) {
            s->up_since_ms = now_ms;
            s->up_min = rec;
        } else if (rec < s->up_min) {
            s->up_min = rec;
        }
        int64_t held = now_ms - s->up_since_ms;
        int want = s->up_min < up_cap ? s->up_min : up_cap;
        if (draining)   /* the replicas there drain the backlog: it is no new demand */
            set(out, current, "hold",
                "load %.1f needs %d replica(s), but it is the backlog of a cold start (%.1f "
                "when the replicas became ready), draining", load, rec, s->drain_load);
        else if (want <= current)
            set(out, current, "hold",
                "load %.1f needs %d replica(s); %d of %d are not ready yet: at most %d x %d "
                "ready until they are", load, rec, on_way, current, rate,
                base);
        else if (held >= up_ms && slo && out->slo.surge_need > out->slo.need)
            set(out, want, "scale_up",
                "standing for steps: the last hour's steps needed %.1fx the need at its typical "
                "%.2f requests/s; %d replica(s) for %s, held for %llds%s", out->slo.surge,
                out->slo.baseline, s->up_min, targets, (long long)(held / 1000),
                want < s->up_min ? "; capped while replicas are on their way" : "");
        else if (held >= up_ms && slo)
            set(out, want, "scale_up",
                "%.2f requests/s needs %d replica(s) for %s (predicted TTFT %.2fs; "
                "%.2f requests/s, %.0f tokens/s each), held for %llds%s", out->slo.lambda_ahead,
                s->up_min, targets, out->slo.predicted_p99_s, out->slo.replica_rps,
                out->slo.replica_tps, (long long)(held / 1000),
                want < s->up_min ? "; capped while replicas are on their way" : "");
        else if (held >= up_ms)
            set(out, want, "scale_up",
                "load %.1f over %ds needs %d replica(s) at target_concurrency %d, held for "
                "%llds%s", load, cfg->traffic_history_seconds, s->up_min, target,
                (long long)(held / 1000),
                want < s->up_min ? "; capped while replicas are on their way" : "");
        else
            set(out, current, "hold",
                "load %.1f needs %d replica(s); scaling up if it holds for %llds more", load, rec,
                (long long)((up_ms - held + 999) / 1000));
    } else if (slo && rec < current && burst_need < current &&
               (down_target = slo_down_target(s, now_ms, down_ms)) >= 0) {
        /* SLO mode, the delay's window all sized by the model (replicas.h,
         * "Floor without a second delay") */
        s->up_since_ms = -1;
        s->down_since_ms = -1;
        int want = clamp_int(down_target, rec, cfg->max_replicas);
        if (out->slo.held > want)
            want = out->slo.held;
        if (want < starting)
            want = starting;
        if (want < 1)
            want = 1;
        if (want < current)
            set(out, want, "scale_down",
                "%.2f requests/s needs %d replica(s) for %s (%.2f requests/s each); no pass "
                "of the last %ds needed more than %d, nor the last hour's memory", out->slo.lambda,
                out->slo.need, targets, out->slo.replica_rps, cfg->scale_down_delay_seconds,
                want);
        else
            set(out, current, "hold",
                "%.2f requests/s needs %d replica(s), but a pass of the last %ds or the last "
                "hour's memory needs %d", out->slo.lambda, out->slo.need,
                cfg->scale_down_delay_seconds, want);
    } else if (rec < current && burst_need < current) {
        s->up_since_ms = -1;
        /* not below what the burst window needs, nor to zero (rule 5's) */
        int need_down = clamp_int(burst_need, rec, cfg->max_replicas);
        if (need_down < 1)
            need_down = 1;
        if (need_down >= current) {
            s->down_since_ms = -1;
            set(out, current, "hold", "idle; scaling to zero after %llds more without traffic",
                (long long)((zero_ms - idle_ms + 999) / 1000));
        } else {
            if (s->down_since_ms < 0 || s->down_since_ms > now_ms) {
                s->down_since_ms = now_ms;
                s->down_max = need_down;
            } else if (need_down > s->down_max) {
                s->down_max = need_down;
            }
            int64_t held = now_ms - s->down_since_ms;
            int want = s->down_max > starting ? s->down_max : starting;
            if (held < down_ms)
                set(out, current, "hold",
                    "load %.1f needs %d replica(s); scaling down if it holds for %llds more",
                    load, need_down, (long long)((down_ms - held + 999) / 1000));
            else if (want >= current)
                set(out, current, "hold",
                    "load %.1f needs %d replica(s), but %d are still starting and are kept",
                    load, s->down_max, starting);
            else if (slo)
                set(out, want, "scale_down",
                    "%.2f requests/s needs %d replica(s) for %s (%.2f requests/s "
                    "each), for %llds%s", out->slo.lambda, s->down_max, targets,
                    out->slo.replica_rps, (long long)(held / 1000),
                    want > s->down_max ? " (starting replicas kept)" : "");
            else
                set(out, want, "scale_down",
                    "load %.1f over %ds needs %d replica(s) at target_concurrency %d, for %llds%s",
                    load, cfg->traffic_history_seconds, s->down_max, target,
                    (long long)(held / 1000),
                    want > s->down_max ? " (starting replicas kept)" : "");
        }
    } else {
        s->up_since_ms = -1;
        s->down_since_ms = -1;
        if (rec < current)   /* the burst window still needs them */
            set(out, current, "hold",
                "load %.1f needs %d replica(s), but the recent burst of %.1f needs %d", load,
                rec, burst, clamp_int(burst_need, 0, cfg->max_replicas));
        else
            set(out, current, "hold", "load %.1f needs %d replica(s)", load, rec);
    }

    out->changed = out->desired != current;
    if (out->desired > current && on_way == 0)
        s->wave_since_ms = now_ms;       /* a scale-up wave starts: its cold start is timed */
    else if (out->desired < current && (on_way == 0 ||
                                        (starting == 0 && current - out->desired >= on_way)))
        s->wave_since_ms = -1;   /* none, or its replicas are the victims (the unplaced go
                                    first): their end is no cold start */
    if (out->changed) {
        s->up_since_ms = -1;
        s->down_since_ms = -1;
        s->last_change_ms = now_ms;
    }
    if (out->desired == 0)
        s->traffic_since_zero = false;   /* from now on, new traffic wakes it */
    s->last_desired = out->desired;
    return 0;
}

/* Rank of a victim class; -1 = never. */
static int victim_class(drv_ras_replica_state_t st)
{
    switch (st) {
    case DRV_RAS_REPLICA_PENDING: return 0;
    case DRV_RAS_REPLICA_FAILED: return 1;
    case DRV_RAS_REPLICA_READY: return 2;
    case DRV_RAS_REPLICA_STARTING: return -1;
    }
    return -1;
}

/* Victim order: class ascending, then newest first, then higher index. */
static bool before(const drv_ras_replica_t *r, size_t a, size_t b)
{
    int ca = victim_class(r[a].state), cb = victim_class(r[b].state);
    if (ca != cb)
        return ca < cb;
    if (r[a].created_ms != r[b].created_ms)
        return r[a].created_ms > r[b].created_ms;
    return a > b;
}

size_t drv_ras_pick_victims(const drv_ras_replica_t *r, size_t n, size_t count, size_t *out)
{
    assert(r || n == 0);
    size_t got = 0;
    /* each round picks the first candidate in victim order after the last
     * one picked: O(n) per victim, no scratch memory */
    while (got < count) {
        size_t best = n;
        for (size_t i = 0; i < n; i++) {
            if (victim_class(r[i].state) < 0)
                continue;
            if (got > 0 && !before(r, out[got - 1], i))
                continue;
            if (best == n || before(r, i, best))
                best = i;
        }
        if (best == n)
            break;
        out[got++] = best;
    }
    return got;
}
