/* replicas_slo.c — the replica autoscaler's SLO model (replicas.h, "SLO-aware
 * sizing" to "Peaked queues"): what it learns from arrivals, completions
 * and the gateway's totals, and what it predicts from that (the M/M/c need,
 * peaked for clustered arrivals, the scale-ahead and trend rates, the
 * surprise's baseline and step, the tail's need, the estimate
 * drv_ras_decide sizes on). Pure, as replicas.c: every input is an
 * argument, the only state is the caller's drv_ras_state_t. */
#include "autoscale/replicas.h"
#include "autoscale/replicas_int.h"

#include "common/promptlen.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double nonneg(double v)
{
    return v > 0 && isfinite(v) ? v : 0;
}

/* n arrivals with `prompt` tokens in all, at now_ms; their prompt lengths
 * per tail bin in hist (NULL: all n of the mean, prompt / n). */
static void arrive(drv_ras_state_t *s, int64_t now_ms, double n, double prompt,
                   const double *hist)
{
    int64_t e = ras_floor_div(now_ms, s->width_ms);
    size_t i = ras_slot_of(e);
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
    int64_t me = ras_floor_div(now_ms, DRV_RAS_SLO_HOLD_WIDTH_MS);   /* surprise's minutes */
    size_t mi = ras_ring_slot(me, DRV_RAS_SLO_HOLD_BUCKETS);
    if (s->base_epoch[mi] <= me) {
        if (s->base_epoch[mi] != me) {
            s->base_epoch[mi] = me;
            s->base_n[mi] = 0;
        }
        s->base_n[mi] += n;
    }
    int64_t te = ras_floor_div(now_ms, DRV_RAS_SLO_SUB_MS);
    size_t ti = ras_ring_slot(te, DRV_RAS_SLO_TREND_SUBS);
    if (s->trend_epoch[ti] > te)
        return;
    if (s->trend_epoch[ti] != te) {
        s->trend_epoch[ti] = te;
        s->trend_n[ti] = 0;
    }
    s->trend_n[ti] += n;
    if (n > 0 && s->first_arrival_ms < 0)
        s->first_arrival_ms = now_ms;
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

/* n arrivals (prompt tokens, per-bin hist or NULL) that came during
 * (from_ms, now_ms], spread evenly over the buckets of that time (at most
 * the history's span before now_ms), oldest first, each its share. */
static void spread(drv_ras_state_t *s, int64_t from_ms, int64_t now_ms, double n, double prompt,
                   const double *hist)
{
    const int64_t w = s->width_ms;
    if (from_ms < now_ms - (int64_t)DRV_RAS_BUCKETS * w)
        from_ms = now_ms - (int64_t)DRV_RAS_BUCKETS * w;
    if (from_ms >= now_ms) {
        arrive(s, now_ms, n, prompt, hist);
        return;
    }
    double span = (double)(now_ms - from_ms), h[DRV_RAS_SLO_TAIL_BINS];
    for (int64_t e = ras_floor_div(from_ms, w); e <= ras_floor_div(now_ms, w); e++) {
        int64_t lo = e * w > from_ms ? e * w : from_ms;
        int64_t hi = (e + 1) * w < now_ms ? (e + 1) * w : now_ms;
        if (hi <= lo)
            continue;
        double f = (double)(hi - lo) / span;
        for (size_t b = 0; hist && b < DRV_RAS_SLO_TAIL_BINS; b++)
            h[b] = hist[b] * f;
        arrive(s, hi - 1, n * f, prompt * f, hist ? h : NULL);   /* (lo, hi]: in lo's bucket */
    }
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
        bool first = s->first_arrival_ms < 0;
        if (na > 0)   /* (arrivals without an estimate stay out of the histogram) */
            spread(s, s->last_counters_ms, now_ms, na, prompt,
                   hist || c->prompted > 0 ? dh : NULL);
        if (na > 0 && first)   /* the first: not before now (spread, it may reach back
                                  into a minute the traffic had not begun in) */
            s->first_arrival_ms = now_ms;
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
    s->last_counters_ms = now_ms;
    s->have_counters = true;
}

/* Arrivals over the last `buckets` buckets up to now_ms: rate (per s) and mean prompt. */
static void arrivals(const drv_ras_state_t *s, int64_t now_ms, int buckets, double *rate,
                     double *prompt)
{
    int64_t cur = ras_floor_div(now_ms, s->width_ms);
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

/* Erlang B at a real number of servers (Hayward's peaked traffic: c / z
 * servers), by the recursion over whole servers, B(0) = 1, interpolated
 * between the whole counts around it; the recursion state in *r. */
typedef struct ras_erlang {
    double a;                 /* offered load */
    int64_t k;                /* servers the recursion reached */
    double b, b_next;         /* B(k), B(k + 1) */
} ras_erlang_t;

static void erlang_init(ras_erlang_t *r, double a)
{
    r->a = a;
    r->k = 0;
    r->b = 1;
    r->b_next = a / (1 + a);
}

static double erlang_b(ras_erlang_t *r, double c)
{
    int64_t k = (int64_t)floor(c);
    while (r->k < k) {
        r->k++;
        r->b = r->b_next;
        r->b_next = r->a * r->b / ((double)(r->k + 1) + r->a * r->b);
    }
    double f = c - (double)k;
    return f > 0 ? r->b + f * (r->b_next - r->b) : r->b;
}

/* drv_ras_slo_need for arrivals of peakedness z >= 1 (replicas.h, "Peaked
 * queues"): the M/M/c wait of c / z servers offered a / z, its decay
 * (c / E[S] - lambda) / z; z = 1: the M/M/c queue itself. */
static int need_z(double lambda, double es, double first_p99, int slots, double slo_s,
                  int max_n, double z, double *pred_s)
{
    if (max_n < 1)
        max_n = 1;
    if (slots < 1)
        slots = 1;
    if (!(z >= 1))
        z = 1;
    if (!(lambda > 0) || !(es > 0)) {
        if (pred_s)
            *pred_s = first_p99;
        return 1;
    }
    const double a = lambda * es;         /* offered load, in busy slots */
    const double tail = 1 - DRV_RAS_SLO_QUANTILE;
    ras_erlang_t r;
    erlang_init(&r, a / z);
    double pred = INFINITY;
    /* the gateway wait's budget; none left (the first token alone takes
     * the SLO): no waiting at the quantile, all more replicas can give */
    const double budget = slo_s - first_p99;
    for (int n = 1; n <= max_n; n++) {
        double c = (double)n * slots;
        double b = erlang_b(&r, c / z);
        bool ok = false;
        if (c <= a) {
            pred = INFINITY;              /* unstable: the queue grows without bound */
        } else {
            double cz = c / z, az = a / z;
            double erlang_c = cz * b / (cz - az * (1 - b));
            double w99 = erlang_c <= tail ? 0 : log(erlang_c / tail) * z / (c / es - lambda);
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

int drv_ras_slo_need(double lambda, double es, double first_p99, int slots, double slo_s,
                     int max_n, double *pred_s)
{
    return need_z(lambda, es, first_p99, slots, slo_s, max_n, 1, pred_s);
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

/* The arrivals of the trend memory's 10 s buckets [from, to) (at most
 * DRV_RAS_SLO_TREND_BUCKETS + 1 of them: its 1 s sub-buckets). */
static double subs_sum(const drv_ras_state_t *s, int64_t from, int64_t to)
{
    const int64_t per = DRV_RAS_SLO_TREND_WIDTH_MS / DRV_RAS_SLO_SUB_MS;
    double n = 0;
    int64_t e = from * per;
    for (size_t i = ras_ring_slot(e, DRV_RAS_SLO_TREND_SUBS); e < to * per;
         e++, i = i + 1 < DRV_RAS_SLO_TREND_SUBS ? i + 1 : 0)
        if (s->trend_epoch[i] == e)
            n += s->trend_n[i];
    return n;
}

/* The median of v[0..n) (n > 0; v is reordered): Hoare's selection of
 * the upper middle, and for even n the largest below it (a pass a second
 * over ~600 spans: no sort). */
static double median(double *v, size_t n)
{
    size_t k = n / 2, lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = v[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        for (;;) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i >= j)
                break;
            double t = v[i];
            v[i] = v[j];
            v[j] = t;
            i++;
            j--;
        }
        /* v[lo..j] <= pivot <= v[j+1..hi] (Hoare's partition, j < hi) */
        if (k <= j)
            hi = j;
        else
            lo = j + 1;
    }
    if (n % 2)
        return v[k];
    double below = v[0];
    for (size_t i = 1; i < k; i++)
        below = v[i] > below ? v[i] : below;
    return (below + v[k]) / 2;
}

/* Dispersion (replicas.h, "Clustered arrivals"): for every minute-long
 * span of the trend memory that starts on a sub-bucket at or after the
 * first arrival (and the memory's start), the variance over the mean of
 * the arrival counts of the 10 s windows that start in it, one per
 * sub-bucket (60: the last ends 9 s into the next minute); their median
 * (a step or a burst's edge is a few of those spans, not the median), at
 * least Poisson's 1; 1 until spans over DRV_RAS_SLO_DISP_MINUTES minutes
 * with DRV_RAS_SLO_DISP_MIN_N arrivals each are seen. Spans and windows
 * on every sub-bucket: where 10 s buckets or minutes fall does not change
 * it (issue 20's phase). */
double drv_ras_slo_dispersion(const drv_ras_state_t *s, int64_t now_ms)
{
    enum {
        WIN = DRV_RAS_SLO_TREND_WIDTH_MS / DRV_RAS_SLO_SUB_MS,   /* sub-buckets per window */
        PER = DRV_RAS_SLO_HOLD_WIDTH_MS / DRV_RAS_SLO_SUB_MS,    /* windows per span */
        N = DRV_RAS_SLO_TREND_SUBS,
    };
    if (s->first_arrival_ms < 0)
        return 1;
    int64_t cur = ras_floor_div(now_ms, DRV_RAS_SLO_SUB_MS);   /* not complete */
    int64_t lo = cur - N + 1;                                    /* the ring's oldest */
    /* (spans that began before the memory, or before the first arrival: not seen) */
    int64_t start = s->first_arrival_ms > s->init_ms ? s->first_arrival_ms : s->init_ms;
    int64_t first = -ras_floor_div(-start, DRV_RAS_SLO_SUB_MS);  /* ceil */
    if (lo < first)
        lo = first;
    if (cur - lo < PER + WIN - 1)
        return 1;                                                /* no complete span */
    /* c: the complete sub-buckets from lo; w[k]: the window c[k .. k + WIN - 1] */
    double c[N], w[N], v[N], run = 0;
    int n = (int)(cur - lo), nw = 0;
    for (int k = 0, i = (int)ras_ring_slot(lo, N); k < n; k++, i = i + 1 < N ? i + 1 : 0) {
        c[k] = s->trend_epoch[i] == lo + k ? s->trend_n[i] : 0;
        run += c[k];
        if (k >= WIN)
            run -= c[k - WIN];
        if (k >= WIN - 1)
            w[nw++] = run > 0 ? run : 0;   /* (no rounding below 0) */
    }
    /* each span: PER consecutive windows */
    size_t nv = 0;
    double sum = 0, sq = 0;
    for (int j = 0; j < nw; j++) {
        sum += w[j];
        sq += w[j] * w[j];
        if (j >= PER) {
            sum -= w[j - PER];
            sq -= w[j - PER] * w[j - PER];
        }
        if (j < PER - 1)
            continue;
        double mean = sum / PER;
        if (!(mean * (PER / WIN) >= DRV_RAS_SLO_DISP_MIN_N))   /* the span's arrivals */
            continue;
        double var = sq / PER - mean * mean;
        v[nv++] = (var > 0 ? var : 0) / mean;
    }
    if (nv < (size_t)(DRV_RAS_SLO_DISP_MINUTES - 1) * PER + 1)
        return 1;
    double med = median(v, nv);
    return med > 1 ? med : 1;
}

double drv_ras_slo_peakedness(const drv_ras_state_t *s, int64_t now_ms, double dispersion)
{
    if (s->first_arrival_ms < 0 || !(dispersion > 1))
        return 1;
    int64_t start = s->first_arrival_ms > s->init_ms ? s->first_arrival_ms : s->init_ms;
    if (now_ms - start < (int64_t)DRV_RAS_SLO_TREND_BUCKETS * DRV_RAS_SLO_TREND_WIDTH_MS)
        return 1;                     /* a few minutes' spans: perhaps a step's edge */
    return dispersion;
}

/* Trend (replicas.h): the rate one cold start ahead along the rise of the
 * last cold start, when that rise is beyond noise (Poisson's x the dispersion) and not over
 * (the rate now, lambda_now, is still at least the last cold start's);
 * 0 when none. Complete 10 s buckets only: the newest k before now_ms's
 * against the k before them, k = the cold start in buckets. */
static double trend_at(const drv_ras_state_t *s, int64_t now_ms, double cold_s,
                       double lambda_now, double disp)
{
    if (!(cold_s > 0))
        return 0;
    const int64_t w = DRV_RAS_SLO_TREND_WIDTH_MS;
    int k = (int)llround(cold_s * 1000 / (double)w);
    if (k < 1)
        k = 1;
    if (2 * k + 1 > DRV_RAS_SLO_TREND_BUCKETS)
        k = (DRV_RAS_SLO_TREND_BUCKETS - 1) / 2;
    int64_t cur = ras_floor_div(now_ms, w);
    if ((cur - 2 * k) * w < s->init_ms)
        return 0;                     /* the memory is younger than both windows */
    double n1 = subs_sum(s, cur - k, cur), n0 = subs_sum(s, cur - 2 * k, cur - k);
    double span = (double)k * (double)w / 1000;
    double r1 = n1 / span, r0 = n0 / span;
    double noise = DRV_RAS_SLO_BURST_SD * sqrt(disp * (r1 + r0) / span);
    if (!(r1 - r0 > noise))
        return 0;
    if (!(lambda_now >= r1))
        return 0;                     /* the rise is over: the rate now is below it */
    return r1 + DRV_RAS_SLO_AHEAD_MAX * (r1 - r0);
}

double drv_ras_slo_trend(const drv_ras_state_t *s, int64_t now_ms, double cold_s,
                         double lambda_now)
{
    return trend_at(s, now_ms, cold_s, lambda_now, drv_ras_slo_dispersion(s, now_ms));
}

double drv_ras_slo_baseline(const drv_ras_state_t *s, int64_t now_ms)
{
    const int64_t w = DRV_RAS_SLO_HOLD_WIDTH_MS;
    int64_t cur = ras_floor_div(now_ms, w);
    double v[DRV_RAS_SLO_HOLD_BUCKETS];
    size_t n = 0;
    for (int64_t e = cur - DRV_RAS_SLO_HOLD_BUCKETS + 1; e < cur; e++) {
        if (e * w < s->init_ms)
            continue;                 /* before the memory started: not a minute seen */
        size_t i = ras_ring_slot(e, DRV_RAS_SLO_HOLD_BUCKETS);
        v[n++] = s->base_epoch[i] == e ? s->base_n[i] : 0;
    }
    if (n < DRV_RAS_SLO_BASE_MINUTES)
        return 0;
    return median(v, n) / ((double)w / 1000);
}

static double step_at(const drv_ras_state_t *s, int64_t now_ms, double b, double disp)
{
    if (!(b > 0))
        return 0;
    const int64_t w = DRV_RAS_SLO_TREND_WIDTH_MS;
    int64_t cur = ras_floor_div(now_ms, w);
    double n = subs_sum(s, cur - DRV_RAS_SLO_STEP_BUCKETS, cur);
    double r = (n - DRV_RAS_SLO_BURST_SD * sqrt(disp * n)) /
               ((double)DRV_RAS_SLO_STEP_BUCKETS * (double)w / 1000);
    return r > 0 ? r / b : 0;
}

double drv_ras_slo_step(const drv_ras_state_t *s, int64_t now_ms, double b)
{
    return step_at(s, now_ms, b, drv_ras_slo_dispersion(s, now_ms));
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

static int tail_need_z(const double *hist, size_t bins, double lambda, double es, double c0,
                       double c1, double beta, int slots, double slo_s, double tail, int max_n,
                       double z, double *floor_out)
{
    if (floor_out)
        *floor_out = 0;
    if (max_n < 1)
        max_n = 1;
    if (slots < 1)
        slots = 1;
    if (!(beta > 0))
        beta = 0;
    if (!(z >= 1))
        z = 1;
    double total = 0;
    for (size_t b = 0; b < bins; b++)
        total += hist[b] > 0 ? hist[b] : 0;
    if (!(total > 0) || !(c1 > 0) || !(lambda > 0) || !(es > 0))
        return 0;
    const double a = lambda * es;
    /* two passes of the Erlang B recursion (as in drv_ras_slo_need): the
     * floor is the share at max_n (all more replicas can give), then the
     * smallest n within `tail` of it. Once B is negligible the wait is
     * (ErlangC 0) */
    double floor = 0;
    for (int pass = 0; pass < 2; pass++) {
        ras_erlang_t r;
        erlang_init(&r, a / z);
        for (int n = pass == 0 ? max_n : 1; n <= max_n; n++) {
            double c = (double)n * slots;
            if (c <= a)
                continue;                 /* unstable: every request waits */
            double eb = erlang_b(&r, c / z);
            double cz = c / z, az = a / z;
            double erlang_c = eb > 1e-30 ? cz * eb / (cz - az * (1 - eb)) : 0;
            double share = tail_share(hist, bins, total, a, c0, c1, beta, slots, slo_s, n,
                                      erlang_c, (c / es - lambda) / z);
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

int drv_ras_slo_tail_need(const double *hist, size_t bins, double lambda, double es, double c0,
                          double c1, double beta, int slots, double slo_s, double tail,
                          int max_n, double *floor_out)
{
    return tail_need_z(hist, bins, lambda, es, c0, c1, beta, slots, slo_s, tail, max_n, 1,
                       floor_out);
}

int ras_both_need(const drv_ras_config_t *cfg, const ras_tail_model_t *tm, double lambda,
                  double es, double first_p99, double svc_p99, int slots, double full,
                  double *pred_ttft, double *pred_e2e)
{
    int n = 1;
    double pt = first_p99, pe = svc_p99;
    double z = tm ? tm->peak : 1;
    if (cfg->ttft_slo_ms > 0) {
        n = need_z(lambda, es, first_p99, slots, cfg->ttft_slo_ms / 1000.0, cfg->max_replicas,
                   z, &pt);
        int nt = tm ? tail_need_z(tm->hist, DRV_RAS_SLO_TAIL_BINS, lambda, es, tm->c0, tm->c1,
                                  tm->beta, slots, cfg->ttft_slo_ms / 1000.0,
                                  DRV_RAS_SLO_TAIL_EXTRA, cfg->max_replicas, z, NULL)
                    : 0;
        if (nt > n)
            n = nt;
    }
    if (cfg->e2e_slo_ms > 0) {
        int ne = need_z(lambda, es * full, svc_p99 + es * (full - 1), slots,
                        cfg->e2e_slo_ms / 1000.0, cfg->max_replicas, z, &pe);
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
    /* the burst window's rate counts when it is beyond noise: Poisson's,
     * times the dispersion learned (clustered arrivals are noisier) */
    out->dispersion = drv_ras_slo_dispersion(s, now_ms);
    double lb_lo = lb - DRV_RAS_SLO_BURST_SD *
                            sqrt(out->dispersion * lb /
                                 ((double)DRV_RAS_BURST_BUCKETS * (double)s->width_ms / 1000));
    bool burst = lb_lo > lh;
    if (burst)
        lb = lb_lo;
    out->lambda = burst ? lb : lh;   /* also before the model is ready: the memory keeps it */
    out->baseline = drv_ras_slo_baseline(s, now_ms);
    out->step = step_at(s, now_ms, out->baseline, out->dispersion);
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
    out->lambda_trend = trend_at(s, now_ms, cold_trend, lh, out->dispersion);
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
    /* clustered arrivals queue as peaked traffic of z = the dispersion
     * (replicas.h, "Peaked queues"), once the spans fill its memory */
    out->peakedness = drv_ras_slo_peakedness(s, now_ms, out->dispersion);
    ras_tail_model_t tm_ = {s->tail_hist, out->tail_c0, out->tail_c1, out->batch_slowdown,
                            out->peakedness};
    const ras_tail_model_t *tm = &tm_;
    out->mean_service_s = m->service_s + extra > 1e-6 ? m->service_s + extra : 1e-6;
    out->replica_rps = slots / out->mean_service_s;
    out->replica_tps = out->replica_rps * ((prompt_now > 0 ? prompt_now : m->prompt) + m->gen);
    /* the time a request holds its slot, p99: the learned spread, or (none
     * learned: counters without squares) a standard deviation of the mean */
    double svar = m->n_sq > 0 ? m->service_sq - m->service_s * m->service_s
                              : m->service_s * m->service_s;
    out->service_p99_s = out->mean_service_s + 2.33 * sqrt(svar > 0 ? svar : 0);
    out->need = ras_both_need(cfg, tm, out->lambda_ahead, out->mean_service_s, out->first_p99_s,
                          out->service_p99_s, slots, out->full_batch_factor, &out->predicted_p99_s,
                          &out->predicted_e2e_p99_s);
    if (cfg->ttft_slo_ms > 0)
        out->need_tail = tail_need_z(
            s->tail_hist, DRV_RAS_SLO_TAIL_BINS, out->lambda_ahead, out->mean_service_s,
            out->tail_c0, out->tail_c1, out->batch_slowdown, slots, cfg->ttft_slo_ms / 1000.0,
            DRV_RAS_SLO_TAIL_EXTRA, cfg->max_replicas, out->peakedness, &out->tail_floor);
    out->need_no_trend = out->lambda_ahead > lambda_no_trend
                             ? ras_both_need(cfg, tm, lambda_no_trend, out->mean_service_s,
                                         out->first_p99_s, out->service_p99_s, slots,
                                         out->full_batch_factor, NULL, NULL)
                             : out->need;
    double es_h = m->service_s + (ph > 0 && out->prefill_tps > 0 ? (ph - m->prompt) /
                                                                       out->prefill_tps
                                                                 : 0);
    /* the rate seen now (the burst window's beyond noise), without scaling ahead */
    out->need_seen = out->lambda_ahead > out->lambda
                         ? ras_both_need(cfg, tm, out->lambda, out->mean_service_s, out->first_p99_s,
                                     out->service_p99_s, slots, out->full_batch_factor, NULL, NULL)
                         : out->need;
    out->need_history = burst ? ras_both_need(cfg, tm, lh, es_h, out->first_p99_s,
                                          out->service_p99_s - out->mean_service_s + es_h, slots,
                                          out->full_batch_factor, NULL, NULL)
                              : out->need;
}
