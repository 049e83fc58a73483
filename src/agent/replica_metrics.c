/* replica_metrics.c — LLM-aware load (issue 16): the supervisor thread
 * scrapes each ready replica's metrics_path (a model server's Prometheus
 * text, e.g. a preset's /metrics, on PORT or with runtime.metrics_port on
 * METRICS_PORT) with a probe of its own next to the
 * health check's, and keeps what llm_metrics.h reads from it in r->load
 * for the replica's report. A failed or unreadable scrape forgets the load
 * (the head then falls back to the gateway's), never the replica's health. */
#include <stdlib.h>
#include <string.h>

#include "agent/supervisor_int.h"

void drv_sup_metrics_init(struct replica *r)
{
    drv_probe_init(&r->mprobe);
    r->mprobe.keep_body = DRV_SUP_METRICS_MAX_BODY;
}

void drv_sup_metrics_cancel(struct replica *r)
{
    drv_probe_cancel(&r->mprobe);
    r->mchecking = false;
}

static bool scraped(const struct replica *r)
{
    return r->sp.metrics_path && r->pid > 0 && r->state == DRV_RS_READY && r->desired &&
           r->kill_why == KILL_NONE;
}

void drv_sup_metrics_service(drv_supervisor_t *s, struct replica *r, int64_t now)
{
    if (!scraped(r)) {
        if (r->mchecking)
            drv_sup_metrics_cancel(r);
        r->load_known = false;
        r->next_metrics = 0;
        return;
    }
    char why[300];
    long code;
    if (r->mchecking) {
        if (drv_probe_step(&r->mprobe, now, &code, why, sizeof why) != 1)
            return;
        r->mchecking = false;
        size_t len;
        char *body = drv_probe_take_body(&r->mprobe, &len);
        drv_llm_load_t l;
        r->load_known = body && drv_llm_metrics_parse(body, len, &l);
        if (r->load_known)
            r->load = l;
        free(body);
        r->next_metrics = now + DRV_SUP_METRICS_MS;
        return;
    }
    if (now < r->next_metrics)
        return;
    int port = r->sp.mport > 0 ? r->sp.mport : r->port;   /* runtime.metrics_port: its own */
    if (drv_probe_start(&r->mprobe, port, r->sp.metrics_path, s->o.health_timeout_ms, now, why,
                        sizeof why) == 0) {
        r->mchecking = true;
    } else {
        r->load_known = false;
        r->next_metrics = now + DRV_SUP_METRICS_MS;
    }
}

int64_t drv_sup_metrics_due(const struct replica *r, int64_t next)
{
    if (r->mchecking)
        return drv_probe_deadline(&r->mprobe) < next ? drv_probe_deadline(&r->mprobe) : next;
    if (scraped(r))
        return r->next_metrics < next ? r->next_metrics : next;
    return next;
}
