/* upstream.c — the gateway thread's side of talking to replicas: starting
 * and ending a transfer, the head and body callbacks that fill a job's
 * answer (buffered or streamed), what a finished transfer means (success,
 * retry elsewhere, 502/504), and the health probes that take failing
 * replicas out of rotation and back, or let a starting replica serve a
 * cold start early. The connections themselves are upconn.c's.
 *
 * Everything here runs on the gateway thread (upconn.c calls the callbacks
 * as the answer is read); the few job fields the connection's thread
 * reads are written under the job's mutex.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "gateway/gw_impl.h"

#define PROBE_COLD_MS 50         /* probe starting replicas this often during a cold start */
#define PROBE_EJECTED_MS 1000    /* probe ejected replicas this often */
#define BUFFER_MAX (1024 * 1024) /* larger answers (or unknown length) stream */

typedef struct gw_probe {
    gw_uc_t *u;
    gw_rep_t *r;
} gw_probe_t;

void drv_gw_probe_cancel(drv_gateway_t *g, gw_rep_t *r)
{
    if (!r->probe)
        return;
    drv_gw_uc_abort(g, r->probe->u);
    free(r->probe);
    r->probe = NULL;
}

/* --- the answer ------------------------------------------------------------------------ */

static bool hop_by_hop(const char *name, size_t n)
{
    static const char *const skip[] = {"connection", "keep-alive", "transfer-encoding",
                                       "content-length", "date", "server", "proxy-authenticate",
                                       "proxy-connection", "te", "trailer", "upgrade", NULL};
    for (size_t i = 0; skip[i]; i++)
        if (strlen(skip[i]) == n && strncasecmp(name, skip[i], n) == 0)
            return true;
    return false;
}

static void headers_complete(drv_gw_job_t *j, int status, bool sse)
{
    j->headers_done = true;
    drv_gw_gen_init(&j->gen, sse);
    bool stream = sse || j->content_length < 0 || j->content_length > BUFFER_MAX;
    pthread_mutex_lock(&j->mu);
    j->status = status;
    snprintf(j->replica, sizeof j->replica, "%s", j->rep ? j->rep->id : "");
    if (stream) {
        j->mode = M_STREAM;
        j->ready = true;   /* status and headers go out now */
        drv_gw_wake_conn_locked(j);
    } else {
        j->mode = M_BUFFER;
        size_t cap = j->content_length > 0 ? (size_t)j->content_length : 0;
        if (cap) {
            j->buf = malloc(cap);
            j->cap = j->buf ? cap : 0;
        }
    }
    pthread_mutex_unlock(&j->mu);
}

int drv_gw_up_head(drv_gw_job_t *j, int status, const drv_h1_header_t *h, size_t nh,
                   int64_t content_length, const char **why)
{
    bool sse = false;
    j->hdr_len = 0;
    j->content_length = content_length;
    for (size_t i = 0; i < nh; i++) {
        const char *name = h[i].name, *v = h[i].value;
        size_t nlen = strlen(name), vlen = strlen(v);
        if (nlen == 12 && strcasecmp(name, "content-type") == 0 && vlen >= 17 &&
            strncasecmp(v, "text/event-stream", 17) == 0)
            sse = true;
        if (hop_by_hop(name, nlen))
            continue;
        if (j->hdr_len + nlen + vlen + 2 > sizeof j->hdr) {
            *why = "the answer's headers are larger than the gateway passes on (8 KiB)";
            return -1;
        }
        memcpy(j->hdr + j->hdr_len, name, nlen + 1);
        memcpy(j->hdr + j->hdr_len + nlen + 1, v, vlen + 1);
        j->hdr_len += nlen + vlen + 2;
    }
    headers_complete(j, status, sse);
    return 0;
}

int drv_gw_up_body(drv_gw_job_t *j, const char *p, size_t n)
{
    if (!n)
        return 0;
    if (j->kind == DRV_GW_OPENAI)   /* its generated tokens (gentok.h) */
        drv_gw_gen_feed(&j->gen, p, n);
    if (!j->body_started) {
        j->body_started = true;
        j->first_us = drv_gw_now_us();
        if (j->mode == M_STREAM) {
            int64_t us = drv_gw_now_us() - j->t0_us;
            drv_gw_hist_observe(&j->dep->st.ttfb, us);
            drv_gw_hist_observe(&j->rep->st.ttfb, us);
        }
    }
    if (j->mode == M_BUFFER) {   /* the connection reads buf only once ready */
        if (j->len + n > j->cap) {
            size_t ncap = j->cap ? j->cap * 2 : 4096;
            while (ncap < j->len + n)
                ncap *= 2;
            char *nb = realloc(j->buf, ncap);
            if (!nb)
                return -1;
            j->buf = nb;
            j->cap = ncap;
        }
        memcpy(j->buf + j->len, p, n);
        j->len += n;
        return 0;
    }
    pthread_mutex_lock(&j->mu);
    if (j->conn_gone) {
        pthread_mutex_unlock(&j->mu);
        return -1;   /* abort: nobody reads */
    }
    if (j->off && j->off == j->len)
        j->off = j->len = 0;
    if (j->off) {
        memmove(j->buf, j->buf + j->off, j->len - j->off);
        j->len -= j->off;
        j->off = 0;
    }
    if (j->len + n > j->cap) {
        size_t ncap = j->cap ? j->cap * 2 : 16384;
        while (ncap < j->len + n)
            ncap *= 2;
        char *nb = realloc(j->buf, ncap);
        if (!nb) {
            pthread_mutex_unlock(&j->mu);
            return -1;
        }
        j->buf = nb;
        j->cap = ncap;
    }
    memcpy(j->buf + j->len, p, n);
    j->len += n;
    int rc = 0;
    if (j->len > GW_STREAM_MAX) {
        j->paused = true;   /* the reader unpauses when it has drained the buffer */
        rc = 1;
    }
    if (j->reader_waiting)
        drv_gw_wake_conn_locked(j);
    pthread_mutex_unlock(&j->mu);
    return rc;
}

/* The batch: r's in-flight count integrated over time up to now, before
 * each change of the count (only here, on the gateway thread). A job's
 * mean batch is the area it saw over its time on the replica. */
static void rep_area(gw_rep_t *r, int64_t now)
{
    if (now > r->area_us) {
        r->area += (uint64_t)r->outstanding * (uint64_t)(now - r->area_us);
        r->area_us = now;
    }
}

void drv_gw_start_transfer(drv_gateway_t *g, drv_gw_job_t *j, gw_rep_t *r)
{
    gw_dep_t *d = r->dep;
    j->rep = r;
    j->dep = d;
    j->attempts++;
    j->headers_done = j->body_started = false;
    j->start_us = drv_gw_now_us();
    j->first_us = 0;
    j->hdr_len = 0;
    j->content_length = -1;
    j->state = J_RUNNING;
    drv_gw_gen_init(&j->gen, false);
    rep_area(r, j->start_us);
    j->area0 = r->area;
    j->stop_us = 0;
    r->outstanding++;
    atomic_fetch_add_explicit(&r->st.in_flight, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->st.in_flight, 1, memory_order_relaxed);
    if (drv_gw_uc_send_job(g, j, r) < 0) {
        rep_area(r, drv_gw_now_us());
        r->outstanding--;
        atomic_fetch_sub_explicit(&r->st.in_flight, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&d->st.in_flight, 1, memory_order_relaxed);
        drv_gw_fail(g, j, 503, GW_R_UPSTREAM, 1, "the gateway is out of memory");
    }
}

/* Leave the running state: the connection dropped if still attached
 * (the answer is unfinished), counts down. */
void drv_gw_stop_transfer(drv_gateway_t *g, drv_gw_job_t *j)
{
    drv_gw_uc_abort(g, j->uc);
    j->uc = NULL;
    j->stop_us = drv_gw_now_us();
    rep_area(j->rep, j->stop_us);
    j->area1 = j->rep->area;
    j->rep->outstanding--;
    atomic_fetch_sub_explicit(&j->rep->st.in_flight, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&j->dep->st.in_flight, 1, memory_order_relaxed);
}

/* --- failures, ejection, probes --------------------------------------------------------- */

static void rep_failure(drv_gateway_t *g, gw_rep_t *r)
{
    gw_add(&r->failures, 1);
    if (++r->consecutive_failures >= DRV_GW_EJECT_FAILURES && !atomic_load(&r->ejected)) {
        atomic_store(&r->ejected, true);
        r->next_probe_ms = drv_gw_now_ms() + PROBE_EJECTED_MS;
        drv_gw_rebuild_rt(r->dep);
        drv_warn("gateway: replica %s of %s is out of rotation after %d failures in a row; "
                 "back once its health check passes", r->id, r->dep->key,
                 r->consecutive_failures);
    }
}

void drv_gw_on_done(drv_gateway_t *g, drv_gw_job_t *j, int how, const char *why)
{
    gw_rep_t *r = j->rep;
    gw_dep_t *d = j->dep;
    drv_gw_stop_transfer(g, j);
    bool conn_gone;
    pthread_mutex_lock(&j->mu);
    conn_gone = j->conn_gone;
    pthread_mutex_unlock(&j->mu);
    if (how == UC_OK) {
        r->consecutive_failures = 0;
        if (!j->headers_done)
            headers_complete(j, 502, false);
        drv_gw_ok(g, j);
    } else if (conn_gone) {
        drv_gw_fail(g, j, 499, GW_R_CLIENT_GONE, 0, "the client closed the connection");
    } else if (how == UC_CONNECT) {
        rep_failure(g, r);
        gw_rep_t *o = j->attempts < 2 ? drv_gw_pick(g, d, r) : NULL;
        if (o)
            drv_gw_start_transfer(g, j, o);   /* nothing was sent: once more, elsewhere */
        else
            drv_gw_fail(g, j, 502, GW_R_CONNECT, 1,
                     "could not connect to a replica of deployment '%s' (%s: %s)", d->id, r->id,
                     why);
    } else if (how == UC_NOTHING && j->attempts < 2) {
        /* the keep-alive race: the replica closed an idle connection as the
         * request went out on it, and not a byte came back; or it reset a
         * new one it had not read (its listener closed: a replica stopping):
         * once more, on a new connection (its other idle ones may be as
         * stale), on another replica when there is one */
        gw_rep_t *o = drv_gw_pick(g, d, r);   /* elsewhere first: a reset of a new
                                                 connection means its listener is gone */
        if (!o)
            o = drv_gw_pick(g, d, NULL);
        j->fresh_conn = true;
        if (o)
            drv_gw_start_transfer(g, j, o);
        else
            drv_gw_fail(g, j, 502, GW_R_UPSTREAM, 1, "replica %s of deployment '%s' failed: %s",
                        r->id, d->id, why);
    } else if (how == UC_TIMEOUT) {
        drv_gw_fail(g, j, 504, GW_R_TIMEOUT, 0,
                 "replica %s of deployment '%s' did not answer within the request's "
                 "%d ms (X-Drover-Timeout)", r->id, d->id, j->timeout_ms);
    } else if (how == UC_LOCAL) {
        drv_gw_fail(g, j, 503, GW_R_UPSTREAM, 1, "the gateway cannot reach replicas now: %s",
                    why);
    } else {
        rep_failure(g, r);
        drv_gw_fail(g, j, 502, GW_R_UPSTREAM, 1, "replica %s of deployment '%s' failed: %s",
                 r->id, d->id, why);
    }
    drv_gw_drain(g, d);
}

static void probe_start(drv_gateway_t *g, gw_rep_t *r)
{
    gw_probe_t *p = calloc(1, sizeof *p);
    if (!p)
        return;
    p->r = r;
    p->u = drv_gw_uc_send_probe(g, p, r);
    if (!p->u) {
        free(p);
        return;
    }
    r->probe = p;
}

void drv_gw_probe_done(drv_gateway_t *g, gw_probe_t *p, int code)
{
    gw_rep_t *r = p->r;
    free(p);
    r->probe = NULL;
    if (code < 200 || code > 299 || !r->in_table)
        return;
    gw_dep_t *d = r->dep;
    bool changed = false;
    if (atomic_load(&r->ejected)) {
        atomic_store(&r->ejected, false);
        r->consecutive_failures = 0;
        drv_info("gateway: replica %s of %s passed its health check; back in rotation", r->id,
                 d->key);
        changed = true;
    }
    if (!r->ready && !r->promoted) {
        r->promoted = true;   /* healthy before its agent said so: serve now */
        changed = true;
    }
    if (changed) {
        drv_gw_rebuild_rt(d);
        drv_gw_cold_over(d);
        drv_gw_drain(g, d);
    }
}

/* Start the probes that are due; note when the next one is. */
void drv_gw_probes(drv_gateway_t *g, int64_t now)
{
    if (now < g->next_probe_ms)
        return;
    int64_t next = now + 1000;
    g->probe_wanted = false;
    for (size_t i = 0; i < g->n_deps; i++) {
        gw_dep_t *d = g->deps[i];
        bool cold = d->in_table && d->n_rt == 0 && d->queue.n > 0;
        for (size_t k = 0; k < d->n_reps; k++) {
            gw_rep_t *r = d->reps[k];
            int every;
            if (!r->in_table)
                continue;
            if (atomic_load(&r->ejected) && (r->ready || r->promoted))
                every = PROBE_EJECTED_MS;
            else if (cold && !r->ready && !r->promoted)
                every = PROBE_COLD_MS;
            else
                continue;
            g->probe_wanted = true;
            if (!r->probe && now >= r->next_probe_ms) {
                r->next_probe_ms = now + every;
                probe_start(g, r);
            }
            if (r->next_probe_ms < next)
                next = r->next_probe_ms;
        }
    }
    g->next_probe_ms = next;
}

