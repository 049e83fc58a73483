/* metrics.c — the gateway's counters in Prometheus text format (the
 * gateway part of GET /metrics; api/h_predict.c adds the state's gauges).
 *
 * Reads the per-deployment and per-replica objects under the registry
 * mutex (the gateway thread frees them only under it); the counters are
 * relaxed atomics written by the gateway thread, so a scrape never stops
 * the request path.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "gateway/gw_impl.h"

const double drv_gw_buckets[GW_NBUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                            0.05,   0.1,   0.25,   0.5,   1,    2.5,
                                            5,      10,    30,     60,    120,  300};

const char *const drv_gw_reason_names[GW_R__COUNT] = {
    "queue_full", "no_capacity", "cold_start_timeout", "disabled",  "connect_failed",
    "upstream_failed", "timeout", "client_closed", "not_found", "shutting_down",
};

void drv_gw_hist_observe(gw_hist_t *h, int64_t us)
{
    if (us < 0)
        us = 0;
    double s = (double)us / 1e6;
    int i = 0;
    while (i < GW_NBUCKETS && s > drv_gw_buckets[i])
        i++;
    gw_add(&h->b[i], 1);
    gw_add(&h->sum_us, (uint64_t)us);
    gw_add(&h->count, 1);
}

typedef struct out {
    char **buf;
    size_t *len, *cap;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...)
{
    for (;;) {
        size_t room = *o->cap - *o->len;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(*o->buf ? *o->buf + *o->len : NULL, *o->buf ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (*o->buf && (size_t)n < room) {
            *o->len += (size_t)n;
            return;
        }
        size_t ncap = *o->cap ? *o->cap * 2 : 16384;
        while (ncap < *o->len + (size_t)n + 1)
            ncap *= 2;
        char *nb = realloc(*o->buf, ncap);
        if (!nb)
            abort();
        *o->buf = nb;
        *o->cap = ncap;
    }
}

static uint64_t ld(_Atomic uint64_t *v) { return atomic_load_explicit(v, memory_order_relaxed); }

static void hist(out_t *o, const char *name, const char *labels, gw_hist_t *h)
{
    uint64_t cum = 0;
    for (int i = 0; i < GW_NBUCKETS; i++) {
        cum += ld(&h->b[i]);
        put(o, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels, drv_gw_buckets[i],
            (unsigned long long)cum);
    }
    cum += ld(&h->b[GW_NBUCKETS]);
    put(o, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, (unsigned long long)cum);
    put(o, "%s_sum{%s} %.6f\n", name, labels, (double)ld(&h->sum_us) / 1e6);
    put(o, "%s_count{%s} %llu\n", name, labels, (unsigned long long)ld(&h->count));
}

static const char *const classes[5] = {"1xx", "2xx", "3xx", "4xx", "5xx"};

typedef enum { F_REQ, F_INFLIGHT, F_QUEUED, F_LAT, F_TTFB, F_COLD, F_COLD_DUR, F_REJ, F_ROUTED,
               F_SERVICE, F_PROMPT, F_GEN,
               F_R_REQ, F_R_INFLIGHT, F_R_LAT, F_R_TTFB, F_R_FAIL, F_R_EJECTED, F__N } fam_t;

static const struct {
    const char *name, *type, *help;
} fams[F__N] = {
    {"drover_gateway_requests_total", "counter",
     "Inference requests answered, by deployment and status class (gateway errors included)."},
    {"drover_gateway_in_flight", "gauge", "Requests running on replicas."},
    {"drover_gateway_queued", "gauge", "Requests waiting for capacity or a cold start."},
    {"drover_gateway_request_duration_seconds", "histogram",
     "Arrival to the replica's last byte, answered by a replica."},
    {"drover_gateway_time_to_first_byte_seconds", "histogram",
     "Streamed answers: arrival to the replica's first body byte."},
    {"drover_gateway_cold_starts_total", "counter",
     "Requests found the deployment with no ready replica (one per cold start)."},
    {"drover_gateway_cold_start_duration_seconds", "histogram",
     "Cold start: first held request to the first routable replica."},
    {"drover_gateway_rejected_total", "counter", "Requests the gateway answered itself, by reason."},
    {"drover_gateway_routed_total", "counter",
     "Requests routed to the deployment (the replica autoscaler's arrival rate)."},
    {"drover_gateway_service_seconds", "summary",
     "Answered by a replica: the answering attempt's send to its last byte (the autoscaler's "
     "service time)."},
    {"drover_gateway_prompt_tokens_estimate_total", "counter",
     "Routed requests' prompt tokens, estimated from the body's length (bytes / 4; requests "
     "without a body add nothing)."},
    {"drover_gateway_generated_tokens_total", "counter",
     "OpenAI answers' generated tokens: the usage's completion_tokens, else a stream's chunks "
     "(answers with neither add nothing)."},
    {"drover_gateway_replica_requests_total", "counter",
     "Requests answered by a replica, by status class."},
    {"drover_gateway_replica_in_flight", "gauge", "Requests running on a replica."},
    {"drover_gateway_replica_request_duration_seconds", "histogram",
     "Arrival to the replica's last byte, per replica."},
    {"drover_gateway_replica_time_to_first_byte_seconds", "histogram",
     "Streamed answers: arrival to the first body byte, per replica."},
    {"drover_gateway_replica_failures_total", "counter",
     "Transport failures (connect, reset, broken answers) per replica."},
    {"drover_gateway_replica_ejected", "gauge",
     "1 while a replica is out of rotation after repeated failures."},
};

void drv_gateway_metrics(drv_gateway_t *g, const char *owner, char **buf, size_t *len,
                         size_t *cap)
{
    out_t o = {buf, len, cap};
    if (!g)
        return;
    pthread_mutex_lock(&g->reg_mu);
    for (int f = 0; f < F__N; f++) {
        put(&o, "# HELP %s %s\n# TYPE %s %s\n", fams[f].name, fams[f].help, fams[f].name,
            fams[f].type);
        for (size_t i = 0; i < g->n_deps; i++) {
            gw_dep_t *d = g->deps[i];
            if (owner && strcmp(d->owner, owner) != 0)
                continue;
            char lb[256];
            snprintf(lb, sizeof lb, "owner=\"%s\",deployment=\"%s\"", d->owner, d->id);
            switch (f) {
            case F_REQ:
                for (int c = 0; c < 5; c++)
                    if (ld(&d->st.by_class[c]) || c == 1)
                        put(&o, "%s{%s,code=\"%s\"} %llu\n", fams[f].name, lb, classes[c],
                            (unsigned long long)ld(&d->st.by_class[c]));
                break;
            case F_INFLIGHT:
                put(&o, "%s{%s} %u\n", fams[f].name, lb,
                    atomic_load_explicit(&d->st.in_flight, memory_order_relaxed));
                break;
            case F_QUEUED:
                put(&o, "%s{%s} %u\n", fams[f].name, lb,
                    atomic_load_explicit(&d->queued, memory_order_relaxed));
                break;
            case F_LAT: hist(&o, fams[f].name, lb, &d->st.latency); break;
            case F_TTFB: hist(&o, fams[f].name, lb, &d->st.ttfb); break;
            case F_COLD:
                put(&o, "%s{%s} %llu\n", fams[f].name, lb, (unsigned long long)ld(&d->cold_starts));
                break;
            case F_COLD_DUR: hist(&o, fams[f].name, lb, &d->cold_hist); break;
            case F_ROUTED:
                put(&o, "%s{%s} %llu\n", fams[f].name, lb, (unsigned long long)ld(&d->arrivals));
                break;
            case F_SERVICE:
                put(&o, "%s_sum{%s} %.6f\n%s_count{%s} %llu\n", fams[f].name, lb,
                    (double)ld(&d->served_us) / 1e6, fams[f].name, lb,
                    (unsigned long long)ld(&d->served));
                break;
            case F_PROMPT:
                put(&o, "%s{%s} %llu\n", fams[f].name, lb,
                    (unsigned long long)ld(&d->prompt.tokens));
                break;
            case F_GEN:
                put(&o, "%s{%s} %llu\n", fams[f].name, lb,
                    (unsigned long long)ld(&d->gen.tokens));
                break;
            case F_REJ:
                for (int r = 0; r < GW_R__COUNT; r++)
                    if (ld(&d->rejected[r]))
                        put(&o, "%s{%s,reason=\"%s\"} %llu\n", fams[f].name, lb,
                            drv_gw_reason_names[r], (unsigned long long)ld(&d->rejected[r]));
                break;
            default:
                for (size_t k = 0; k < d->n_reps; k++) {
                    gw_rep_t *r = d->reps[k];
                    char rl[400];
                    snprintf(rl, sizeof rl, "%s,replica=\"%s\"", lb, r->id);
                    switch (f) {
                    case F_R_REQ:
                        for (int c = 0; c < 5; c++)
                            if (ld(&r->st.by_class[c]) || c == 1)
                                put(&o, "%s{%s,code=\"%s\"} %llu\n", fams[f].name, rl,
                                    classes[c], (unsigned long long)ld(&r->st.by_class[c]));
                        break;
                    case F_R_INFLIGHT:
                        put(&o, "%s{%s} %u\n", fams[f].name, rl,
                            atomic_load_explicit(&r->st.in_flight, memory_order_relaxed));
                        break;
                    case F_R_LAT: hist(&o, fams[f].name, rl, &r->st.latency); break;
                    case F_R_TTFB: hist(&o, fams[f].name, rl, &r->st.ttfb); break;
                    case F_R_FAIL:
                        put(&o, "%s{%s} %llu\n", fams[f].name, rl,
                            (unsigned long long)ld(&r->failures));
                        break;
                    case F_R_EJECTED:
                        put(&o, "%s{%s} %d\n", fams[f].name, rl, atomic_load(&r->ejected) ? 1 : 0);
                        break;
                    default: break;
                    }
                }
                break;
            }
        }
    }
    pthread_mutex_unlock(&g->reg_mu);
}
