/* replicas.c — the replica autoscaler's decisions (see replicas.h for the
 * rules). Pure: every input is an argument, the only state is the caller's
 * drv_ras_state_t; no clock, no I/O, no allocation, no locks (the caller
 * owns the state and serialises calls on it). */
#include "autoscale/replicas.h"

#include "common/promptlen.h"

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

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static size_t slot_of(int64_t epoch)
{
    int64_t m = epoch % DRV_RAS_BUCKETS;
    return (size_t)(m < 0 ? m + DRV_RAS_BUCKETS : m);
}

/* The slot of epoch e in a ring of n buckets (e may be negative). */
static size_t ring_slot(int64_t e, int64_t n)
{
    return (size_t)(((e % n) + n) % n);
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
    for (size_t i = 0; i < DRV_RAS_SLO_TREND_BUCKETS; i++) {
        s->trend_epoch[i] = INT64_MIN;
        s->trend_n[i] = 0;
    }
    for (size_t i = 0; i < DRV_RAS_SLO_HOLD_BUCKETS; i++) {
        s->rate_epoch[i] = s->need_epoch[i] = INT64_MIN;
        s->rate_max[i] = s->need_max[i] = 0;
        s->base_epoch[i] = s->ratio_epoch[i] = s->surge_epoch[i] = INT64_MIN;
        s->base_n[i] = s->ratio_max[i] = s->surge_max[i] = 0;
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
    s->last_traffic_ms = now_ms;
    s->up_since_ms = -1;
    s->down_since_ms = -1;
    s->last_change_ms = -1;
    s->last_desired = -1;
    s->wave_since_ms = -1;
}

void drv_ras_observe(drv_ras_state_t *s, int64_t now_ms, double v)
{
    assert(s);
    if (!s->initialised)              /* zeroed: 1 s buckets until a decide */
        drv_ras_state_init(s, NULL, now_ms);
    if (!(v > 0))
        v = 0;                        /* negative and NaN count as no load */
    int64_t e = floor_div(now_ms, s->width_ms);
    drv_ras_bucket_t *b = &s->ring[slot_of(e)];
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
    int64_t cur = floor_div(now_ms, s->width_ms);
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

/* --- SLO mode: measurements, the model, the estimator ---------------------------------- */

static double nonneg(double v)
{
    return v > 0 && isfinite(v) ? v : 0;
}

/* n arrivals with `prompt` tokens in all, at now_ms; their prompt lengths
 * per tail bin in hist (NULL: all n of the mean, prompt / n). */
static void arrive(drv_ras_state_t *s, int64_t now_ms, double n, double prompt,
                   const double *hist)
{
    int64_t e = floor_div(now_ms, s->width_ms);
    size_t i = slot_of(e);
    if (s->arr_epoch[i] > e)
        return;                       /* older than what the slot holds */
    if (s->arr_epoch[i] != e) {
        s->arr_epoch[i] = e;
        s->arr_n[i] = 0;
        s->arr_prompt[i] = 0;
    }
    s->arr_n[i] += n;
    s->arr_prompt[i] += prompt;
    /* tail: the prompt lengths, older arrivals decaying by 1 - 1/N each
     * (the weights grow instead; rescaled before they overflow) */
    if (!(s->tail_w > 0))
        s->tail_w = 1;
    if (hist) {   /* counters: each bin's arrivals, the same weights */
        double nh = 0;
        for (size_t b = 0; b < DRV_RAS_SLO_TAIL_BINS; b++)
            if (hist[b] > 0) {
                s->tail_hist[b] += hist[b] * s->tail_w;
                nh += hist[b];
            }
        s->tail_w *= pow(1 / (1 - 1 / DRV_RAS_SLO_TAIL_N), nh);
    } else {
        s->tail_hist[drv_ras_slo_tail_bin(prompt / n)] += n * s->tail_w;
        s->tail_w *= pow(1 / (1 - 1 / DRV_RAS_SLO_TAIL_N), n);
    }
    if (s->tail_w > 1e200) {
        for (size_t b = 0; b < DRV_RAS_SLO_TAIL_BINS; b++)
            s->tail_hist[b] /= s->tail_w;
        s->tail_w = 1;
    }
    int64_t me = floor_div(now_ms, DRV_RAS_SLO_HOLD_WIDTH_MS);   /* surprise's minutes */
    size_t mi = ring_slot(me, DRV_RAS_SLO_HOLD_BUCKETS);
    if (s->base_epoch[mi] <= me) {
        if (s->base_epoch[mi] != me) {
            s->base_epoch[mi] = me;
            s->base_n[mi] = 0;
        }
        s->base_n[mi] += n;
    }
    int64_t te = floor_div(now_ms, DRV_RAS_SLO_TREND_WIDTH_MS);
    size_t ti = ring_slot(te, DRV_RAS_SLO_TREND_BUCKETS);
    if (s->trend_epoch[ti] > te)
        return;
    if (s->trend_epoch[ti] != te) {
        s->trend_epoch[ti] = te;
        s->trend_n[ti] = 0;
    }
    s->trend_n[ti] += n;
}

void drv_ras_observe_arrival(drv_ras_state_t *s, int64_t now_ms, double prompt_tokens)
{
    assert(s);
    if (!s->initialised)
        drv_ras_state_init(s, NULL, now_ms);
    arrive(s, now_ms, 1, nonneg(prompt_tokens), NULL);
}

static double full_batch(const drv_ras_service_t *m, int slots, double *slowdown);

/* n completions whose means are p, g, f (first token), fsq (its square)
 * and svc (service): the first ones weigh 1/count (a plain mean), then
 * DRV_RAS_SLO_ALPHA each. */
static void learn(drv_ras_state_t *s, int64_t now_ms, double n, double p, double g, double f,
                  double fsq, double svc, double svc_sq, int slots)
{
    drv_ras_service_t *m = &s->svc;
    double w = m->n < 1 / DRV_RAS_SLO_ALPHA ? n / (m->n + n)
               : n == 1                     ? DRV_RAS_SLO_ALPHA
                                            : 1 - pow(1 - DRV_RAS_SLO_ALPHA, n);
    m->prompt += w * (p - m->prompt);
    m->gen += w * (g - m->gen);
    m->first_s += w * (f - m->first_s);
    m->first_sq += w * (fsq - m->first_sq);
    m->service_s += w * (svc - m->service_s);
    /* the spread only from measurements that carry it (svc_sq > 0) */
    if (svc_sq > 0) {
        double ws = m->n_sq < 1 / DRV_RAS_SLO_ALPHA ? n / (m->n_sq + n) : w;
        m->service_sq += ws * (svc_sq - m->service_sq);
        m->n_sq = m->n_sq + n < 1e9 ? m->n_sq + n : 1e9;
    }
    if (slots > 0)
        m->slots = slots;
    if (m->n == 0)
        m->first_ms = now_ms;
    m->n = m->n + n < 1e9 ? m->n + n : 1e9;
}

void drv_ras_observe_done(drv_ras_state_t *s, int64_t now_ms, double prompt_tokens,
                          double gen_tokens, double first_token_s, double service_s, int slots)
{
    drv_ras_observe_done_batch(s, now_ms, prompt_tokens, gen_tokens, first_token_s, service_s,
                               slots, 0);
}

void drv_ras_observe_done_batch(drv_ras_state_t *s, int64_t now_ms, double prompt_tokens,
                                double gen_tokens, double first_token_s, double service_s,
                                int slots, double batch)
{
    assert(s);
    if (!s->initialised)
        drv_ras_state_init(s, NULL, now_ms);
    service_s = nonneg(service_s);
    if (service_s <= 0)
        return;
    double f = nonneg(first_token_s);
    if (f > service_s)
        f = service_s;
    double g = nonneg(gen_tokens);
    learn(s, now_ms, 1, nonneg(prompt_tokens), g, f, f * f, service_s, service_s * service_s,
          slots);
    batch = nonneg(batch);
    if (batch >= 1) {   /* tail: the first token at a batch of one, against the prompt */
        drv_ras_service_t *m = &s->svc;
        double beta;
        full_batch(m, slots > 0 ? slots : 1, &beta);
        double p = nonneg(prompt_tokens), f0 = f / (1 + beta * (batch - 1));
        double w = m->nt < DRV_RAS_SLO_TAIL_N ? 1 / (m->nt + 1) : 1 / DRV_RAS_SLO_TAIL_N;
        m->tp += w * (p - m->tp);
        m->tf += w * (f0 - m->tf);
        m->tpp += w * (p * p - m->tpp);
        m->tpf += w * (p * f0 - m->tpf);
        m->nt = m->nt + 1 < 1e9 ? m->nt + 1 : 1e9;
    }
    if (batch >= 1 && g >= 2 && service_s > f) {   /* full batches: one more point */
        drv_ras_service_t *m = &s->svc;
        double x = batch - 1, y = (service_s - f) / g;
        double w = m->nb < 1 / DRV_RAS_SLO_ALPHA ? 1 / (m->nb + 1) : DRV_RAS_SLO_ALPHA;
        m->bx += w * (x - m->bx);
        m->by += w * (y - m->by);
        m->bxx += w * (x * x - m->bxx);
        m->bxy += w * (x * y - m->bxy);
        m->nb = m->nb + 1 < 1e9 ? m->nb + 1 : 1e9;
    }
}

/* Full batches: how much longer a request holds its slot when every slot
 * of its replica is busy than at the batching the completions saw (1 when
 * not learned). */
static double full_batch(const drv_ras_service_t *m, int slots, double *slowdown)
{
    *slowdown = 0;
    double var = m->bxx - m->bx * m->bx;
    if (m->nb < DRV_RAS_SLO_MIN_SAMPLES || !(var >= DRV_RAS_SLO_BATCH_MIN_VAR))
        return 1;
    double k = (m->bxy - m->bx * m->by) / var;
    double y0 = m->by - k * m->bx;
    if (!(k > 0) || !(y0 > 0))
        return 1;
    double b = k / y0;
    if (b > 1)
        b = 1;
    *slowdown = b;
    double f = (1 + b * (slots - 1)) / (1 + b * m->bx);
    return f > 1 ? f : 1;
}

void drv_ras_observe_counters(drv_ras_state_t *s, int64_t now_ms, const drv_ras_counters_t *c)
{
    assert(s && c);
    if (!s->initialised)
        drv_ras_state_init(s, NULL, now_ms);
    const drv_ras_counters_t *o = &s->last_counters;
    bool base = !s->have_counters || c->arrivals < o->arrivals || c->completed < o->completed ||
                c->prompted < o->prompted || c->tail_n < o->tail_n || c->gen_n < o->gen_n ||
                c->batch_n < o->batch_n ||
                !(c->service_s >= o->service_s) || !(c->first_s >= o->first_s);
    if (!base) {
        double na = (double)(c->arrivals - o->arrivals);
        /* the prompts: the mean of those estimated stands for all (none
         * estimated since the last call: the mean of all so far) */
        double np = (double)(c->prompted - o->prompted);
        double dp = nonneg(c->prompt_tokens - o->prompt_tokens);
        double prompt = np > 0           ? dp / np * na
                        : c->prompted > 0 ? nonneg(c->prompt_tokens) / (double)c->prompted * na
                                          : dp;
        double dh[DRV_RAS_SLO_TAIL_BINS];
        bool hist = false;
        for (size_t b = 0; b < DRV_RAS_SLO_TAIL_BINS; b++) {
            dh[b] = nonneg(c->prompt_hist[b] - o->prompt_hist[b]);
            hist = hist || dh[b] > 0;
        }
        if (na > 0)   /* (arrivals without an estimate stay out of the histogram) */
            arrive(s, now_ms, na, prompt, hist || c->prompted > 0 ? dh : NULL);
        drv_ras_service_t *m = &s->svc;
        double nbk = (double)(c->batch_n - o->batch_n);
        double bx = nbk > 0 ? nonneg(c->batch_x - o->batch_x) / nbk : 0;
        double nk = (double)(c->tail_n - o->tail_n);
        if (nk > 0) {   /* tail: k completions' means at once */
            /* the first token at a batch of one, f / (1 + beta x): the
             * totals pair no prompt with its batch, so x is the mean of
             * this difference's batch points (none: the learned mean);
             * beta as learned before them, as for single completions */
            double beta;
            full_batch(m, m->slots > 0 ? (int)m->slots : 1, &beta);
            double one = 1 + beta * (nbk > 0 ? bx : m->bx);
            double w = m->nt < DRV_RAS_SLO_TAIL_N ? nk / (m->nt + nk)
                                                  : 1 - pow(1 - 1 / DRV_RAS_SLO_TAIL_N, nk);
            m->tp += w * (nonneg(c->tail_p - o->tail_p) / nk - m->tp);
            m->tf += w * (nonneg(c->tail_f_s - o->tail_f_s) / nk / one - m->tf);
            m->tpp += w * (nonneg(c->tail_pp - o->tail_pp) / nk - m->tpp);
            m->tpf += w * (nonneg(c->tail_pf - o->tail_pf) / nk / one - m->tpf);
            m->nt = m->nt + nk < 1e9 ? m->nt + nk : 1e9;
            m->ntc = m->ntc + nk < 1e9 ? m->ntc + nk : 1e9;
        }
        double nc = (double)(c->completed - o->completed);
        double svc = nonneg(c->service_s - o->service_s) / (nc > 0 ? nc : 1);
        if (nc > 0 && svc > 0) {
            double f = nonneg(c->first_s - o->first_s) / nc;
            double fsq = nonneg(c->first_sq_s2 - o->first_sq_s2) / nc;
            if (f > svc)
                f = svc;
            if (fsq < f * f)
                fsq = f * f;
            /* prompt tokens are counted on arrival: the completions get their mean */
            double p = na > 0 ? prompt / na : s->svc.prompt;
            double ssq = c->service_sq_s2 > 0 ? nonneg(c->service_sq_s2 - o->service_sq_s2) / nc
                                              : 0;
            if (ssq > 0 && ssq < svc * svc)
                ssq = svc * svc;
            /* generated tokens: the mean of those counted stands for all
             * (none counted since the last call: the mean learned so far) */
            double ng = (double)(c->gen_n - o->gen_n);
            double dg = nonneg(c->gen_tokens - o->gen_tokens);
            double g = c->gen_n == 0 ? dg / nc : ng > 0 ? dg / ng : m->gen;
            learn(s, now_ms, nc, p, g, f, fsq, svc, ssq, c->slots);
        }
        if (nbk > 0) {   /* full batches: k points at their means at once */
            double w = m->nb < 1 / DRV_RAS_SLO_ALPHA ? nbk / (m->nb + nbk)
                                                     : 1 - pow(1 - DRV_RAS_SLO_ALPHA, nbk);
            m->bx += w * (bx - m->bx);
            m->by += w * (nonneg(c->batch_y - o->batch_y) / nbk - m->by);
            m->bxx += w * (nonneg(c->batch_xx - o->batch_xx) / nbk - m->bxx);
            m->bxy += w * (nonneg(c->batch_xy - o->batch_xy) / nbk - m->bxy);
            m->nb = m->nb + nbk < 1e9 ? m->nb + nbk : 1e9;
        }
    }
    s->last_counters = *c;
    s->have_counters = true;
}

/* Arrivals over the last `buckets` buckets up to now_ms: rate (per s) and mean prompt. */
static void arrivals(const drv_ras_state_t *s, int64_t now_ms, int buckets, double *rate,
                     double *prompt)
{
    int64_t cur = floor_div(now_ms, s->width_ms);
    double n = 0, p = 0;
    for (size_t i = 0; i < DRV_RAS_BUCKETS; i++) {
        if (s->arr_epoch[i] > cur || s->arr_epoch[i] <= cur - buckets)
            continue;
        n += s->arr_n[i];
        p += s->arr_prompt[i];
    }
    /* the window, but not before the memory started (nor under one bucket) */
    double span_ms = (double)buckets * (double)s->width_ms;
    double since = (double)(now_ms - s->init_ms);
    if (since < span_ms)
        span_ms = since;
    if (span_ms < (double)s->width_ms)
        span_ms = (double)s->width_ms;
    *rate = n / (span_ms / 1000);
    *prompt = n > 0 ? p / n : 0;
}

int drv_ras_slo_need(double lambda, double es, double first_p99, int slots, double slo_s,
                     int max_n, double *pred_s)
{
    if (max_n < 1)
        max_n = 1;
    if (slots < 1)
        slots = 1;
    if (!(lambda > 0) || !(es > 0)) {
        if (pred_s)
            *pred_s = first_p99;
        return 1;
    }
    const double a = lambda * es;         /* offered load, in busy slots */
    const double tail = 1 - DRV_RAS_SLO_QUANTILE;
    /* Erlang B by its recursion over the servers, B(0) = 1; evaluated at
     * every multiple of `slots` (one pass for all replica counts) */
    double b = 1;
    double pred = INFINITY;
    /* the gateway wait's budget; none left (the first token alone takes
     * the SLO): no waiting at the quantile, all more replicas can give */
    const double budget = slo_s - first_p99;
    for (int64_t k = 1; k <= (int64_t)max_n * slots; k++) {
        b = a * b / ((double)k + a * b);
        if (k % slots != 0)
            continue;
        int n = (int)(k / slots);
        double c = (double)k;
        bool ok = false;
        if (c <= a) {
            pred = INFINITY;              /* unstable: the queue grows without bound */
        } else {
            double erlang_c = c * b / (c - a * (1 - b));
            double w99 = erlang_c <= tail ? 0 : log(erlang_c / tail) / (c / es - lambda);
            pred = w99 + first_p99;
            ok = budget > 0 ? w99 <= budget : w99 <= 0;
        }
        if (ok) {
            if (pred_s)
                *pred_s = pred;
            return n;
        }
    }
    if (pred_s)
        *pred_s = pred;
    return max_n;
}

double drv_ras_slo_ahead(double lh, double lb, double lag_s, double cold_s)
{
    if (!(lb > lh) || !(lag_s > 0) || !(cold_s > 0))
        return lb;
    double excess = lb - lh;
    double ahead = excess / lag_s * cold_s;   /* the line's growth over one cold start */
    if (ahead > DRV_RAS_SLO_AHEAD_MAX * excess)
        ahead = DRV_RAS_SLO_AHEAD_MAX * excess;
    return lb + ahead;
}

/* Trend (replicas.h): the rate one cold start ahead along the rise of the
 * last cold start, when that rise is beyond Poisson noise and not over
 * (the rate now, lambda_now, is still at least the last cold start's);
 * 0 when none. Complete 10 s buckets only: the newest k before now_ms's
 * against the k before them, k = the cold start in buckets. */
double drv_ras_slo_trend(const drv_ras_state_t *s, int64_t now_ms, double cold_s,
                         double lambda_now)
{
    if (!(cold_s > 0))
        return 0;
    const int64_t w = DRV_RAS_SLO_TREND_WIDTH_MS;
    int k = (int)llround(cold_s * 1000 / (double)w);
    if (k < 1)
        k = 1;
    if (2 * k + 1 > DRV_RAS_SLO_TREND_BUCKETS)
        k = (DRV_RAS_SLO_TREND_BUCKETS - 1) / 2;
    int64_t cur = floor_div(now_ms, w);
    if ((cur - 2 * k) * w < s->init_ms)
        return 0;                     /* the memory is younger than both windows */
    double n1 = 0, n0 = 0;
    for (size_t i = 0; i < DRV_RAS_SLO_TREND_BUCKETS; i++) {
        int64_t e = s->trend_epoch[i];
        if (e >= cur || e < cur - 2 * k)
            continue;
        if (e >= cur - k)
            n1 += s->trend_n[i];
        else
            n0 += s->trend_n[i];
    }
    double span = (double)k * (double)w / 1000;
    double r1 = n1 / span, r0 = n0 / span;
    double noise = DRV_RAS_SLO_BURST_SD * sqrt((r1 + r0) / span);
    if (!(r1 - r0 > noise))
        return 0;
    if (!(lambda_now >= r1))
        return 0;                     /* the rise is over: the rate now is below it */
    return r1 + DRV_RAS_SLO_AHEAD_MAX * (r1 - r0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double drv_ras_slo_baseline(const drv_ras_state_t *s, int64_t now_ms)
{
    const int64_t w = DRV_RAS_SLO_HOLD_WIDTH_MS;
    int64_t cur = floor_div(now_ms, w);
    double v[DRV_RAS_SLO_HOLD_BUCKETS];
    size_t n = 0;
    for (int64_t e = cur - DRV_RAS_SLO_HOLD_BUCKETS + 1; e < cur; e++) {
        if (e * w < s->init_ms)
            continue;                 /* before the memory started: not a minute seen */
        size_t i = ring_slot(e, DRV_RAS_SLO_HOLD_BUCKETS);
        v[n++] = s->base_epoch[i] == e ? s->base_n[i] : 0;
    }
    if (n < DRV_RAS_SLO_BASE_MINUTES)
        return 0;
    qsort(v, n, sizeof v[0], cmp_double);
    double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return med / ((double)w / 1000);
}

double drv_ras_slo_step(const drv_ras_state_t *s, int64_t now_ms, double b)
{
    if (!(b > 0))
        return 0;
    const int64_t w = DRV_RAS_SLO_TREND_WIDTH_MS;
    int64_t cur = floor_div(now_ms, w);
    double n = 0;
    for (size_t i = 0; i < DRV_RAS_SLO_TREND_BUCKETS; i++)
        if (s->trend_epoch[i] < cur && s->trend_epoch[i] >= cur - DRV_RAS_SLO_STEP_BUCKETS)
            n += s->trend_n[i];
    double r = (n - DRV_RAS_SLO_BURST_SD * sqrt(n)) /
               ((double)DRV_RAS_SLO_STEP_BUCKETS * (double)w / 1000);
    return r > 0 ? r / b : 0;
}

void drv_ras_learn_cold_start(drv_ras_state_t *s, double seconds)
{
    if (!(seconds > 0) || !isfinite(seconds))
        return;
    double w = s->cold_starts < 1 / DRV_RAS_COLD_ALPHA ? 1.0 / (s->cold_starts + 1)
                                                       : DRV_RAS_COLD_ALPHA;
    s->cold_start_s += w * (seconds - s->cold_start_s);
    if (s->cold_starts < 1000)
        s->cold_starts++;
}

/* The smallest count within every target set: TTFT (wait + first token)
 * and end to end (wait + the slot's hold time), each at its p99. */
size_t drv_ras_slo_tail_bin(double tokens)
{
    return drv_promptlen_bin(tokens);
}

double drv_ras_slo_tail_tokens(size_t bin)
{
    return drv_promptlen_tokens(bin);
}

/* Tail: the share of `hist` (weights summing to total) over slo_s at n
 * replicas whose M/M/c wait has P(W > t) = erlang_c exp(-theta t). */
static double tail_share(const double *hist, size_t bins, double total, double a, double c0,
                         double c1, double beta, int slots, double slo_s, int n, double erlang_c,
                         double theta)
{
    double x = a / n < slots - 1 ? a / n : slots - 1;   /* the others in its batch */
    double slow = 1 + beta * x, miss = 0;
    for (size_t b = 0; b < bins; b++) {
        if (!(hist[b] > 0))
            continue;
        double left = slo_s - (c0 + c1 * drv_ras_slo_tail_tokens(b)) * slow;
        double pw = left <= 0 ? 1 : erlang_c * exp(-theta * left);
        miss += hist[b] * (pw < 1 ? pw : 1);
    }
    return miss / total;
}

int drv_ras_slo_tail_need(const double *hist, size_t bins, double lambda, double es, double c0,
                          double c1, double beta, int slots, double slo_s, double tail,
                          int max_n, double *floor_out)
{
    if (floor_out)
        *floor_out = 0;
    if (max_n < 1)
        max_n = 1;
    if (slots < 1)
        slots = 1;
    if (!(beta > 0))
        beta = 0;
    double total = 0;
    for (size_t b = 0; b < bins; b++)
        total += hist[b] > 0 ? hist[b] : 0;
    if (!(total > 0) || !(c1 > 0) || !(lambda > 0) || !(es > 0))
        return 0;
    const double a = lambda * es;
    /* two passes of the Erlang B recursion (as in drv_ras_slo_need): the
     * floor is the share at max_n (all more replicas can give), then the
     * smallest n within `tail` of it. Once B is negligible the wait is
     * (ErlangC 0): the rest of the recursion is skipped */
    double floor = 0;
    for (int pass = 0; pass < 2; pass++) {
        double eb = 1;
        for (int64_t k = 1; k <= (int64_t)max_n * slots; k++) {
            if (eb > 1e-30)
                eb = a * eb / ((double)k + a * eb);
            else
                eb = 0;
            int n = (int)(k / slots);
            if (k % slots != 0 || (pass == 0 && n < max_n && eb > 0))
                continue;
            double c = (double)k;
            if (c <= a)
                continue;                 /* unstable: every request waits */
            double erlang_c = eb > 0 ? c * eb / (c - a * (1 - eb)) : 0;
            double share = tail_share(hist, bins, total, a, c0, c1, beta, slots, slo_s,
                                      pass == 0 ? max_n : n, erlang_c, c / es - lambda);
            if (pass == 0) {
                floor = share;
                break;
            }
            if (share <= floor + tail) {
                if (floor_out)
                    *floor_out = floor;
                return n;
            }
        }
        if (pass == 0 && floor == 0 && (double)max_n * slots <= a)
            floor = 1;                    /* unstable even at max_n */
    }
    if (floor_out)
        *floor_out = floor;
    return max_n;
}

/* The tail model of an estimate (see "Tail"): the state's histogram with
 * the estimate's line and batch slowdown. */
typedef struct tail_model {
    const double *hist;
    double c0, c1, beta;
} tail_model_t;

static int both_need(const drv_ras_config_t *cfg, const tail_model_t *tm, double lambda,
                     double es, double first_p99, double svc_p99, int slots, double full,
                     double *pred_ttft, double *pred_e2e)
{
    int n = 1;
    double pt = first_p99, pe = svc_p99;
    if (cfg->ttft_slo_ms > 0) {
        n = drv_ras_slo_need(lambda, es, first_p99, slots, cfg->ttft_slo_ms / 1000.0,
                             cfg->max_replicas, &pt);
        int nt = tm ? drv_ras_slo_tail_need(tm->hist, DRV_RAS_SLO_TAIL_BINS, lambda, es, tm->c0,
                                            tm->c1, tm->beta, slots, cfg->ttft_slo_ms / 1000.0,
                                            DRV_RAS_SLO_TAIL_EXTRA, cfg->max_replicas, NULL)
                    : 0;
        if (nt > n)
            n = nt;
    }
    if (cfg->e2e_slo_ms > 0) {
        int ne = drv_ras_slo_need(lambda, es * full, svc_p99 + es * (full - 1), slots,
                                  cfg->e2e_slo_ms / 1000.0,
                                  cfg->max_replicas, &pe);
        if (ne > n)
            n = ne;
    }
    if (pred_ttft)
        *pred_ttft = pt;
    if (pred_e2e)
        *pred_e2e = pe;
    return n;
}

void drv_ras_slo_estimate(const drv_ras_config_t *cfg, const drv_ras_state_t *s, int64_t now_ms,
                          drv_ras_slo_estimate_t *out)
{
    memset(out, 0, sizeof *out);
    const drv_ras_service_t *m = &s->svc;
    out->ready = (cfg->ttft_slo_ms > 0 || cfg->e2e_slo_ms > 0) &&
                 m->n >= DRV_RAS_SLO_MIN_SAMPLES && m->service_s > 0 &&
                 now_ms - m->first_ms >= DRV_RAS_SLO_WARMUP_MS;
    if (!(cfg->ttft_slo_ms > 0 || cfg->e2e_slo_ms > 0))
        return;
    double lh, ph, lb, pb;
    arrivals(s, now_ms, DRV_RAS_BUCKETS, &lh, &ph);
    arrivals(s, now_ms, DRV_RAS_BURST_BUCKETS, &lb, &pb);
    /* the burst window's rate counts when it is beyond Poisson noise */
    double lb_lo = lb - DRV_RAS_SLO_BURST_SD *
                            sqrt(lb / ((double)DRV_RAS_BURST_BUCKETS * (double)s->width_ms / 1000));
    bool burst = lb_lo > lh;
    if (burst)
        lb = lb_lo;
    out->lambda = burst ? lb : lh;   /* also before the model is ready: the memory keeps it */
    out->baseline = drv_ras_slo_baseline(s, now_ms);
    out->step = drv_ras_slo_step(s, now_ms, out->baseline);
    if (!out->ready)
        return;
    /* scale ahead by one learned cold start (replicas.h): the history's
     * rate is centred half a history back, the burst window's half a
     * burst window */
    double lag_s = (double)(DRV_RAS_BUCKETS - DRV_RAS_BURST_BUCKETS) / 2 * (double)s->width_ms /
                   1000;
    out->cold_start_s = s->cold_start_s;
    out->lambda_ahead = burst ? drv_ras_slo_ahead(lh, lb, lag_s, s->cold_start_s) : out->lambda;
    double cold_trend = s->cold_start_s > 0 ? s->cold_start_s : DRV_RAS_SLO_COLD_PRIOR_S;
    out->lambda_trend = drv_ras_slo_trend(s, now_ms, cold_trend, lh);
    double lambda_no_trend = out->lambda_ahead;
    if (out->lambda_trend > out->lambda_ahead)
        out->lambda_ahead = out->lambda_trend;
    double prompt_now = burst ? pb : ph;
    /* learned rates: prompt tokens per second of first-token time, and
     * generated tokens per second of the rest (per sequence, at the
     * batching the replicas saw) */
    double decode_s = m->service_s - m->first_s;
    out->prefill_tps = m->first_s > 0 ? m->prompt / m->first_s : 0;
    out->decode_tps = decode_s > 0 ? m->gen / decode_s : 0;
    /* the prompts now arriving cost more (or less) first-token time */
    double extra = out->prefill_tps > 0 && prompt_now > 0 ? (prompt_now - m->prompt) /
                                                                out->prefill_tps
                                                          : 0;
    double first = m->first_s + extra;
    if (first < 0)
        first = 0;
    double var = m->first_sq - m->first_s * m->first_s;
    out->first_p99_s = first + 2.33 * sqrt(var > 0 ? var : 0);
    int slots = m->slots > 0 ? (int)m->slots : cfg->target_concurrency;
    /* full batches: the e2e target's hold time is what a full batch gives */
    out->full_batch_factor = full_batch(m, slots, &out->batch_slowdown);
    /* tail: the first token at a batch of one against the prompt */
    double tvar = m->tpp - m->tp * m->tp;
    /* (from completions that carried their batch; from counters, which
     * carry none, with beta 0) */
    if (m->nt >= 1 / DRV_RAS_SLO_ALPHA &&
        (m->nb >= 1 / DRV_RAS_SLO_ALPHA || m->ntc >= 1 / DRV_RAS_SLO_ALPHA) && tvar > 0) {
        out->tail_c1 = (m->tpf - m->tp * m->tf) / tvar;
        out->tail_c0 = m->tf - out->tail_c1 * m->tp;
        if (out->tail_c0 < 0)
            out->tail_c0 = 0;
    }
    tail_model_t tm_ = {s->tail_hist, out->tail_c0, out->tail_c1, out->batch_slowdown};
    const tail_model_t *tm = &tm_;
    out->mean_service_s = m->service_s + extra > 1e-6 ? m->service_s + extra : 1e-6;
    out->replica_rps = slots / out->mean_service_s;
    out->replica_tps = out->replica_rps * ((prompt_now > 0 ? prompt_now : m->prompt) + m->gen);
    /* the time a request holds its slot, p99: the learned spread, or (none
     * learned: counters without squares) a standard deviation of the mean */
    double svar = m->n_sq > 0 ? m->service_sq - m->service_s * m->service_s
                              : m->service_s * m->service_s;
    out->service_p99_s = out->mean_service_s + 2.33 * sqrt(svar > 0 ? svar : 0);
    out->need = both_need(cfg, tm, out->lambda_ahead, out->mean_service_s, out->first_p99_s,
                          out->service_p99_s, slots, out->full_batch_factor, &out->predicted_p99_s,
                          &out->predicted_e2e_p99_s);
    if (cfg->ttft_slo_ms > 0)
        out->need_tail = drv_ras_slo_tail_need(
            s->tail_hist, DRV_RAS_SLO_TAIL_BINS, out->lambda_ahead, out->mean_service_s,
            out->tail_c0, out->tail_c1, out->batch_slowdown, slots, cfg->ttft_slo_ms / 1000.0,
            DRV_RAS_SLO_TAIL_EXTRA, cfg->max_replicas, &out->tail_floor);
    out->need_no_trend = out->lambda_ahead > lambda_no_trend
                             ? both_need(cfg, tm, lambda_no_trend, out->mean_service_s,
                                         out->first_p99_s, out->service_p99_s, slots,
                                         out->full_batch_factor, NULL, NULL)
                             : out->need;
    double es_h = m->service_s + (ph > 0 && out->prefill_tps > 0 ? (ph - m->prompt) /
                                                                       out->prefill_tps
                                                                 : 0);
    /* the rate seen now (the burst window's beyond noise), without scaling ahead */
    out->need_seen = out->lambda_ahead > out->lambda
                         ? both_need(cfg, tm, out->lambda, out->mean_service_s, out->first_p99_s,
                                     out->service_p99_s, slots, out->full_batch_factor, NULL, NULL)
                         : out->need;
    out->need_history = burst ? both_need(cfg, tm, lh, es_h, out->first_p99_s,
                                          out->service_p99_s - out->mean_service_s + es_h, slots,
                                          out->full_batch_factor, NULL, NULL)
                              : out->need;
}

/* Record v in its minute of a memory (epoch, max per minute); the
 * DRV_RAS_SLO_HOLD_RANK-th largest of the last DRV_RAS_SLO_HOLD_BUCKETS
 * minutes. */
static double hold(int64_t *epoch, double *max, int64_t now_ms, double v)
{
    int64_t e = floor_div(now_ms, DRV_RAS_SLO_HOLD_WIDTH_MS);
    size_t i = ring_slot(e, DRV_RAS_SLO_HOLD_BUCKETS);
    if (epoch[i] != e && epoch[i] < e) {
        epoch[i] = e;
        max[i] = 0;
    }
    if (epoch[i] == e && v > max[i])
        max[i] = v;
    double top[DRV_RAS_SLO_HOLD_RANK] = {0};   /* descending */
    for (size_t k = 0; k < DRV_RAS_SLO_HOLD_BUCKETS; k++) {
        if (epoch[k] > e || epoch[k] <= e - DRV_RAS_SLO_HOLD_BUCKETS)
            continue;
        double x = max[k];
        for (int j = 0; j < DRV_RAS_SLO_HOLD_RANK; j++)
            if (x > top[j]) {
                double t = top[j];
                top[j] = x;
                x = t;
            }
    }
    return top[DRV_RAS_SLO_HOLD_RANK - 1];
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
    if (cfg->ttft_slo_ms > 0 || cfg->e2e_slo_ms > 0)   /* from the first pass: before the model */
        out->slo.held_rate = hold(s->rate_epoch, s->rate_max, now_ms, out->slo.lambda);
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
        tail_model_t tm = {s->tail_hist, e->tail_c0, e->tail_c1, e->batch_slowdown};
        int slots = s->svc.slots > 0 ? (int)s->svc.slots : cfg->target_concurrency;
        int held = e->held_rate > e->lambda
                       ? both_need(cfg, &tm, e->held_rate, e->mean_service_s, e->first_p99_s,
                                   e->service_p99_s, slots, e->full_batch_factor, NULL, NULL)
                       : e->need_seen;
        /* and the largest need the model gave (at that minute's sizes),
         * scaled ahead as it was sized then: a burst's rate grows during
         * the cold start its replicas take, and the next burst will too
         * (without it, conv-mix2 held 13 replicas between bursts where
         * its first burst had needed 16) */
        int held_need = (int)hold(s->need_epoch, s->need_max, now_ms, e->need_no_trend);
        out->slo.held = held > held_need ? held : held_need;
        /* surprise (replicas.h): a step's need over the need at the
         * baseline, learned; the standing need it gives now */
        int need_base = e->baseline > 0
                            ? both_need(cfg, &tm, e->baseline, e->mean_service_s, e->first_p99_s,
                                        e->service_p99_s, slots, e->full_batch_factor, NULL, NULL)
                            : 0;
        double ratio = e->step >= DRV_RAS_SLO_STEP_MIN && need_base > 0
                           ? (double)e->need_no_trend / need_base
                           : 0;
        out->slo.surge = hold(s->ratio_epoch, s->ratio_max, now_ms, ratio);
        double standing = out->slo.surge > 1 && need_base > 0 ? ceil(need_base * out->slo.surge) : 0;
        if (standing > cfg->max_replicas)
            standing = cfg->max_replicas;
        int kept = (int)hold(s->surge_epoch, s->surge_max, now_ms, standing);
        out->slo.surge_need = out->slo.surge > 1 ? kept : 0;   /* not past the steps' hour */
        if (out->slo.surge_need > out->slo.held)
            out->slo.held = out->slo.surge_need;
        if (out->slo.surge_need > rec)
            rec = clamp_int(out->slo.surge_need, cfg->min_replicas, cfg->max_replicas);
        burst_need = out->slo.held > out->slo.need ? out->slo.held : out->slo.need;
        burst_now = out->slo.need >= panic * current;
    }
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
    else if (out->desired < current && on_way == 0)
        s->wave_since_ms = -1;
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
