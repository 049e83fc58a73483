/* stats.c — a deployment's request metrics over time, for
 * GET /v1/deployments/{id}/metrics (docs/api.md) and `drover describe`:
 * the last 60 seconds (requests by status, rate, latency and time to first
 * byte percentiles, per replica too) and 15 minutes of history in 10 s
 * steps.
 *
 * The request path only bumps the relaxed atomic counters of gw_stats_t (as
 * for GET /metrics); nothing here runs per request. Every GW_SAMPLE_MS the
 * gateway thread copies the cumulative counters into a small ring per
 * deployment and per replica (gw_window_t) and appends one history point
 * computed from the step that just ended; it does so under reg_mu, so a
 * reader (any thread, under reg_mu) sees whole rings. A window is "now"
 * minus the oldest snapshot in the ring (at most 60 s back; less while the
 * gateway is young).
 */
#include <jansson.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "gateway/gw_impl.h"

static uint64_t ld(_Atomic uint64_t *v) { return atomic_load_explicit(v, memory_order_relaxed); }

static void snap_of(const gw_stats_t *cst, _Atomic uint64_t *failures, int64_t now_ms,
                    gw_snap_t *s)
{
    gw_stats_t *st = (gw_stats_t *)cst;
    s->t_ms = now_ms;
    for (int i = 0; i < 5; i++)
        s->cls[i] = ld(&st->by_class[i]);
    s->c429 = ld(&st->c429);
    s->c503 = ld(&st->c503);
    s->errors = s->cls[4] + (failures ? ld(failures) : 0);
    for (int i = 0; i <= GW_NBUCKETS; i++) {
        s->lat[i] = ld(&st->latency.b[i]);
        s->ttfb[i] = ld(&st->ttfb.b[i]);
    }
}

static uint64_t total_of(const gw_snap_t *s)
{
    return s->cls[0] + s->cls[1] + s->cls[2] + s->cls[3] + s->cls[4];
}

static const gw_snap_t *newest(const gw_window_t *w)
{
    return w->n ? &w->snap[(w->next + GW_WINDOW_SNAPS - 1) % GW_WINDOW_SNAPS] : NULL;
}

static const gw_snap_t *oldest(const gw_window_t *w)
{
    return w->n ? &w->snap[(w->next + GW_WINDOW_SNAPS - w->n) % GW_WINDOW_SNAPS] : NULL;
}

static void push(gw_window_t *w, const gw_snap_t *s)
{
    w->snap[w->next] = *s;
    w->next = (w->next + 1) % GW_WINDOW_SNAPS;
    if (w->n < GW_WINDOW_SNAPS)
        w->n++;
}

/* b - a, bucket by bucket (a NULL: b itself). */
static void diff(const gw_snap_t *b, const gw_snap_t *a, gw_snap_t *out)
{
    *out = *b;
    if (!a)
        return;
    for (int i = 0; i < 5; i++)
        out->cls[i] -= a->cls[i];
    out->c429 -= a->c429;
    out->c503 -= a->c503;
    out->errors -= a->errors;
    for (int i = 0; i <= GW_NBUCKETS; i++) {
        out->lat[i] -= a->lat[i];
        out->ttfb[i] -= a->ttfb[i];
    }
}

static double q_ms(const uint64_t *b, double q)
{
    return drv_gw_quantile_ms(b, drv_gw_buckets, GW_NBUCKETS, q);
}

void drv_gw_sample(drv_gateway_t *g, int64_t now_ms)
{
    if (now_ms < g->next_sample_ms)
        return;
    g->next_sample_ms = now_ms + GW_SAMPLE_MS;
    int64_t unix_s = (int64_t)time(NULL);
    pthread_mutex_lock(&g->reg_mu);
    for (size_t i = 0; i < g->n_deps; i++) {
        gw_dep_t *d = g->deps[i];
        gw_snap_t s, step;
        snap_of(&d->st, NULL, now_ms, &s);
        const gw_snap_t *prev = newest(&d->win);
        if (prev) {   /* the step that just ended: one history point */
            diff(&s, prev, &step);
            double dt = (double)(now_ms - prev->t_ms) / 1000;
            gw_point_t *p = &d->hist_pts[d->hist_next];
            p->t = unix_s;
            p->rps = dt > 0 ? (float)((double)total_of(&step) / dt) : 0;
            p->p50_ms = (float)q_ms(step.lat, 0.5);
            p->p99_ms = (float)q_ms(step.lat, 0.99);
            p->desired = d->desired;
            p->ready = d->ready;
            d->hist_next = (d->hist_next + 1) % GW_HISTORY;
            if (d->hist_n < GW_HISTORY)
                d->hist_n++;
        }
        push(&d->win, &s);
        for (size_t k = 0; k < d->n_reps; k++) {
            gw_rep_t *r = d->reps[k];
            snap_of(&r->st, &r->failures, now_ms, &s);
            push(&r->win, &s);
        }
    }
    pthread_mutex_unlock(&g->reg_mu);
}

/* --- the JSON answer -------------------------------------------------------------- */

static json_t *ms_or_null(double ms)
{
    return ms < 0 ? json_null() : json_real(round(ms * 1000) / 1000);
}

/* The window: the counters now minus the oldest snapshot (secs: its span). */
static void window_of(const gw_window_t *w, const gw_stats_t *st, _Atomic uint64_t *failures,
                         int64_t now_ms, gw_snap_t *out, double *secs)
{
    gw_snap_t now;
    snap_of(st, failures, now_ms, &now);
    const gw_snap_t *o = oldest(w);
    diff(&now, o, out);
    *secs = o ? (double)(now_ms - o->t_ms) / 1000 : 0;
}

void drv_gw_window_init(gw_window_t *w, int64_t now_ms)
{
    memset(w, 0, sizeof *w);
    w->snap[0].t_ms = now_ms;   /* all zero: counting starts now */
    w->next = w->n = 1;
}

static json_t *empty_doc(const char *id)
{
    return json_pack("{s:s, s:i, s:{s:i, s:{s:i, s:i, s:i, s:i, s:i}}, s:f, s:i, s:i, "
                     "s:{s:n, s:n, s:n}, s:{s:n, s:n}, s:{s:i, s:n, s:n}, s:[], s:[]}",
                     "deployment", id, "window_seconds", 60, "requests", "total", 0, "by_status",
                     "2xx", 0, "4xx", 0, "5xx", 0, "429", 0, "503", 0, "requests_per_second", 0.0,
                     "in_flight", 0, "queued", 0, "latency_ms", "p50", "p90", "p99", "ttfb_ms",
                     "p50", "p99", "cold_starts", "count", 0, "mean_duration_ms",
                     "last_duration_ms", "replicas", "history");
}

json_t *drv_gateway_dep_metrics(drv_gateway_t *g, const char *key, const char *id)
{
    if (!g)
        return empty_doc(id);
    int64_t now = drv_gw_now_ms();
    pthread_mutex_lock(&g->reg_mu);
    gw_dep_t *d = drv_gw_dep_find(g, key);
    if (!d) {
        pthread_mutex_unlock(&g->reg_mu);
        return empty_doc(id);
    }
    gw_snap_t w;
    double secs;
    window_of(&d->win, &d->st, NULL, now, &w, &secs);
    uint64_t total = total_of(&w);
    uint64_t cold_n = ld(&d->cold_starts), cold_done = ld(&d->cold_hist.count);
    int64_t cold_last = atomic_load_explicit(&d->cold_last_us, memory_order_relaxed);
    json_t *reps = json_array();
    for (size_t k = 0; k < d->n_reps; k++) {
        gw_rep_t *r = d->reps[k];
        if (!r->in_table)
            continue;
        gw_snap_t rw;
        double rs;
        window_of(&r->win, &r->st, &r->failures, now, &rw, &rs);
        json_array_append_new(
            reps, json_pack("{s:s, s:i, s:I, s:I, s:{s:o, s:o}}", "id", r->id, "in_flight",
                            (int)atomic_load_explicit(&r->st.in_flight, memory_order_relaxed),
                            "requests", (json_int_t)total_of(&rw), "errors",
                            (json_int_t)rw.errors, "latency_ms", "p50",
                            ms_or_null(q_ms(rw.lat, 0.5)), "p99",
                            ms_or_null(q_ms(rw.lat, 0.99))));
    }
    json_t *hist = json_array();
    for (unsigned i = 0; i < d->hist_n; i++) {
        const gw_point_t *p =
            &d->hist_pts[(d->hist_next + GW_HISTORY - d->hist_n + i) % GW_HISTORY];
        json_array_append_new(
            hist, json_pack("{s:I, s:f, s:o, s:o, s:i, s:i}", "t", (json_int_t)p->t, "rps",
                            round(p->rps * 1000) / 1000, "p50_ms", ms_or_null(p->p50_ms),
                            "p99_ms", ms_or_null(p->p99_ms), "desired_replicas", p->desired,
                            "ready_replicas", p->ready));
    }
    json_t *doc = json_pack(
        "{s:s, s:i, s:{s:I, s:{s:I, s:I, s:I, s:I, s:I}}, s:f, s:i, s:i, s:{s:o, s:o, s:o}, "
        "s:{s:o, s:o}, s:{s:I, s:o, s:o}, s:o, s:o}",
        "deployment", id, "window_seconds", 60, "requests", "total", (json_int_t)total,
        "by_status", "2xx", (json_int_t)w.cls[1], "4xx", (json_int_t)w.cls[3], "5xx",
        (json_int_t)w.cls[4], "429", (json_int_t)w.c429, "503", (json_int_t)w.c503,
        "requests_per_second", secs > 0 ? round((double)total / secs * 1000) / 1000 : 0.0,
        "in_flight", (int)atomic_load_explicit(&d->st.in_flight, memory_order_relaxed), "queued",
        (int)atomic_load_explicit(&d->queued, memory_order_relaxed), "latency_ms", "p50",
        ms_or_null(q_ms(w.lat, 0.5)), "p90", ms_or_null(q_ms(w.lat, 0.9)), "p99",
        ms_or_null(q_ms(w.lat, 0.99)), "ttfb_ms", "p50", ms_or_null(q_ms(w.ttfb, 0.5)), "p99",
        ms_or_null(q_ms(w.ttfb, 0.99)), "cold_starts", "count", (json_int_t)cold_n,
        "mean_duration_ms",
        ms_or_null(cold_done ? (double)ld(&d->cold_hist.sum_us) / (double)cold_done / 1000 : -1),
        "last_duration_ms", ms_or_null(cold_done ? (double)cold_last / 1000 : -1), "replicas",
        reps, "history", hist);
    pthread_mutex_unlock(&g->reg_mu);
    return doc;
}
