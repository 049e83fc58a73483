/* upstream.c — the gateway thread's side of talking to replicas: the pool
 * of libcurl easy handles, starting and ending a transfer, the header and
 * body callbacks that fill a job's answer (buffered or streamed), what a
 * finished transfer means (success, retry elsewhere, 502/504), and the
 * health probes that take failing replicas out of rotation and back, or
 * let a starting replica serve a cold start early.
 *
 * Everything here runs on the gateway thread (curl calls the callbacks
 * from curl_multi_perform); the few job fields the connection's thread
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
#define PROBE_TIMEOUT_MS 1000
#define BUFFER_MAX (1024 * 1024) /* larger answers (or unknown length) stream */

typedef struct gw_probe {
    int tag;                     /* GW_TAG_PROBE */
    CURL *e;
    gw_rep_t *r;
    char url[768];
} gw_probe_t;

/* --- easy handles ----------------------------------------------------------------- */

static CURL *easy_get(drv_gateway_t *g)
{
    if (g->n_easy)
        return g->easy_pool[--g->n_easy];
    CURL *e = curl_easy_init();
    if (e)
        drv_gw_easy_setup(g, e);
    return e;
}

/* Back to the pool. Every job sets the same options on its handle, so no
 * reset is needed between jobs (probes use handles of their own). */
static void easy_put(drv_gateway_t *g, CURL *e)
{
    if (!e)
        return;
    if (g->n_easy == g->cap_easy) {
        size_t ncap = g->cap_easy ? g->cap_easy * 2 : 64;
        CURL **np = ncap <= 4096 ? realloc(g->easy_pool, ncap * sizeof *np) : NULL;
        if (!np) {
            curl_easy_cleanup(e);
            return;
        }
        g->easy_pool = np;
        g->cap_easy = ncap;
    }
    g->easy_pool[g->n_easy++] = e;
}

void drv_gw_probe_cancel(drv_gateway_t *g, gw_rep_t *r)
{
    if (!r->probe)
        return;
    curl_multi_remove_handle(g->multi, r->probe->e);
    curl_easy_cleanup(r->probe->e);
    free(r->probe);
    r->probe = NULL;
}

/* --- upstream callbacks ---------------------------------------------------------------- */

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

static void headers_complete(drv_gw_job_t *j)
{
    j->headers_done = true;
    bool stream = j->up_sse || j->content_length < 0 || j->content_length > BUFFER_MAX;
    pthread_mutex_lock(&j->mu);
    j->status = j->up_status ? j->up_status : 502;
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

static size_t on_header(char *b, size_t size, size_t nitems, void *ud)
{
    drv_gw_job_t *j = ud;
    size_t len = size * nitems;
    if (j->headers_done)
        return len;   /* trailers */
    if (len >= 5 && memcmp(b, "HTTP/", 5) == 0) {
        const char *sp = memchr(b, ' ', len);
        j->up_status = sp ? atoi(sp + 1) : 0;
        j->hdr_len = 0;
        j->up_sse = false;
        j->content_length = -1;
        return len;
    }
    if (len <= 2) {   /* the blank line */
        if (j->up_status >= 100 && j->up_status < 200)
            return len;   /* an interim answer: the real one follows */
        headers_complete(j);
        return len;
    }
    const char *colon = memchr(b, ':', len);
    if (!colon)
        return len;
    size_t nlen = (size_t)(colon - b);
    const char *v = colon + 1, *end = b + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    size_t vlen = (size_t)(end - v);
    if (nlen == 14 && strncasecmp(b, "content-length", 14) == 0) {
        char tmp[32];
        snprintf(tmp, sizeof tmp, "%.*s", (int)(vlen < 31 ? vlen : 31), v);
        j->content_length = strtoll(tmp, NULL, 10);
    }
    if (nlen == 12 && strncasecmp(b, "content-type", 12) == 0 && vlen >= 17 &&
        strncasecmp(v, "text/event-stream", 17) == 0)
        j->up_sse = true;
    if (hop_by_hop(b, nlen))
        return len;
    if (j->hdr_len + nlen + vlen + 2 <= sizeof j->hdr) {   /* else dropped */
        memcpy(j->hdr + j->hdr_len, b, nlen);
        j->hdr[j->hdr_len + nlen] = '\0';
        memcpy(j->hdr + j->hdr_len + nlen + 1, v, vlen);
        j->hdr[j->hdr_len + nlen + 1 + vlen] = '\0';
        j->hdr_len += nlen + vlen + 2;
    }
    return len;
}

static size_t on_write(char *p, size_t size, size_t nitems, void *ud)
{
    drv_gw_job_t *j = ud;
    size_t n = size * nitems;
    if (!j->headers_done)
        headers_complete(j);
    if (!j->body_started) {
        j->body_started = true;
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
                return 0;
            j->buf = nb;
            j->cap = ncap;
        }
        memcpy(j->buf + j->len, p, n);
        j->len += n;
        return n;
    }
    pthread_mutex_lock(&j->mu);
    if (j->conn_gone) {
        pthread_mutex_unlock(&j->mu);
        return 0;   /* abort: nobody reads */
    }
    if (j->off && j->off == j->len)
        j->off = j->len = 0;
    if (j->len - j->off > 0 && j->len - j->off + n > GW_STREAM_MAX) {
        j->paused = true;   /* the reader unpauses when it has drained the buffer */
        pthread_mutex_unlock(&j->mu);
        return CURL_WRITEFUNC_PAUSE;
    }
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
            return 0;
        }
        j->buf = nb;
        j->cap = ncap;
    }
    memcpy(j->buf + j->len, p, n);
    j->len += n;
    if (j->reader_waiting)
        drv_gw_wake_conn_locked(j);
    pthread_mutex_unlock(&j->mu);
    return n;
}

void drv_gw_start_transfer(drv_gateway_t *g, drv_gw_job_t *j, gw_rep_t *r)
{
    gw_dep_t *d = r->dep;
    CURL *e = easy_get(g);
    if (!e) {
        drv_gw_fail(g, j, 503, GW_R_UPSTREAM, 1, "out of HTTP client handles");
        return;
    }
    if (j->kind == DRV_GW_OPENAI)
        snprintf(j->url, sizeof j->url, "%s/v1%s", r->endpoint, j->suffix);
    else
        snprintf(j->url, sizeof j->url, "%s%s", r->endpoint, d->predict_path);
    if (!j->hdrs && ((j->ctype[0] && strcasecmp(j->ctype, "application/json") != 0) ||
                     (j->accept[0] && strcmp(j->accept, "*/*") != 0))) {
        char h[200];
        snprintf(h, sizeof h, "Content-Type: %s", j->ctype[0] ? j->ctype : "application/json");
        j->hdrs = curl_slist_append(NULL, h);
        if (j->accept[0]) {
            snprintf(h, sizeof h, "Accept: %s", j->accept);
            j->hdrs = curl_slist_append(j->hdrs, h);
        }
        j->hdrs = curl_slist_append(j->hdrs, "Expect:");
    }
    int64_t left = j->deadline_ms - drv_gw_now_ms();
    if (left < 1)
        left = 1;
    curl_easy_setopt(e, CURLOPT_URL, j->url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, j->body ? j->body : "");
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->body_len);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, j->hdrs ? j->hdrs : g->hdr_json);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, j);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, j);
    curl_easy_setopt(e, CURLOPT_PRIVATE, j);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROXY, "");   /* replicas directly, never $http_proxy */
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)left);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(left < 3000 ? left : 3000));
    j->easy = e;
    j->rep = r;
    j->dep = d;
    j->attempts++;
    j->headers_done = j->body_started = false;
    j->up_status = 0;
    j->hdr_len = 0;
    j->content_length = -1;
    j->state = J_RUNNING;
    r->outstanding++;
    atomic_fetch_add_explicit(&r->st.in_flight, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->st.in_flight, 1, memory_order_relaxed);
    if (curl_multi_add_handle(g->multi, e) != CURLM_OK) {
        j->easy = NULL;
        easy_put(g, e);
        r->outstanding--;
        atomic_fetch_sub_explicit(&r->st.in_flight, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&d->st.in_flight, 1, memory_order_relaxed);
        drv_gw_fail(g, j, 503, GW_R_UPSTREAM, 1, "cannot start the upstream request");
    }
}

/* Leave the running state: handle back, counts down. */
void drv_gw_stop_transfer(drv_gateway_t *g, drv_gw_job_t *j)
{
    curl_multi_remove_handle(g->multi, j->easy);
    easy_put(g, j->easy);
    j->easy = NULL;
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

void drv_gw_on_done(drv_gateway_t *g, drv_gw_job_t *j, CURLcode rc)
{
    gw_rep_t *r = j->rep;
    gw_dep_t *d = j->dep;
    long fresh = 1;   /* connections this transfer opened: 0 = it reused a kept-alive one */
    curl_easy_getinfo(j->easy, CURLINFO_NUM_CONNECTS, &fresh);
    drv_gw_stop_transfer(g, j);
    bool conn_gone;
    pthread_mutex_lock(&j->mu);
    conn_gone = j->conn_gone;
    pthread_mutex_unlock(&j->mu);
    if (rc == CURLE_OK) {
        r->consecutive_failures = 0;
        if (!j->headers_done)
            headers_complete(j);
        drv_gw_ok(g, j);
    } else if (conn_gone) {
        drv_gw_fail(g, j, 499, GW_R_CLIENT_GONE, 0, "the client closed the connection");
    } else if ((rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST) &&
               !j->headers_done) {
        rep_failure(g, r);
        gw_rep_t *o = j->attempts < 2 ? drv_gw_pick(g, d, r) : NULL;
        if (o)
            drv_gw_start_transfer(g, j, o);   /* nothing was sent: once more, elsewhere */
        else
            drv_gw_fail(g, j, 502, GW_R_CONNECT, 1,
                     "could not connect to a replica of deployment '%s' (%s: %s)", d->id, r->id,
                     curl_easy_strerror(rc));
    } else if (rc == CURLE_GOT_NOTHING && fresh == 0 && !j->headers_done && j->attempts < 2) {
        /* the keep-alive race: the replica closed an idle connection as the
         * request went out on it, and not a byte came back: once more */
        gw_rep_t *o = drv_gw_pick(g, d, NULL);
        if (o)
            drv_gw_start_transfer(g, j, o);
        else
            drv_gw_fail(g, j, 502, GW_R_UPSTREAM, 1, "replica %s of deployment '%s' failed: %s",
                        r->id, d->id, curl_easy_strerror(rc));
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        drv_gw_fail(g, j, 504, GW_R_TIMEOUT, 0,
                 "replica %s of deployment '%s' did not answer within the request's "
                 "%d ms (X-Drover-Timeout)", r->id, d->id, j->timeout_ms);
    } else {
        rep_failure(g, r);
        drv_gw_fail(g, j, 502, GW_R_UPSTREAM, 1, "replica %s of deployment '%s' failed: %s",
                 r->id, d->id, curl_easy_strerror(rc));
    }
    drv_gw_drain(g, d);
}

static size_t discard(char *p, size_t s, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return s * n;
}

static void probe_start(drv_gateway_t *g, gw_rep_t *r)
{
    gw_probe_t *p = calloc(1, sizeof *p);
    CURL *e = p ? curl_easy_init() : NULL;   /* not pooled: other options than jobs' */
    if (!e) {
        free(p);
        return;
    }
    drv_gw_easy_setup(g, e);
    p->tag = GW_TAG_PROBE;
    p->e = e;
    p->r = r;
    snprintf(p->url, sizeof p->url, "%s%s", r->endpoint, r->dep->health_path);
    curl_easy_setopt(e, CURLOPT_URL, p->url);
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(e, CURLOPT_PRIVATE, p);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROXY, "");   /* replicas directly, never $http_proxy */
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)PROBE_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    if (curl_multi_add_handle(g->multi, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        free(p);
        return;
    }
    r->probe = p;
}

void drv_gw_probe_done(drv_gateway_t *g, gw_probe_t *p, CURLcode rc)
{
    gw_rep_t *r = p->r;
    long code = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(p->e, CURLINFO_RESPONSE_CODE, &code);
    curl_multi_remove_handle(g->multi, p->e);
    curl_easy_cleanup(p->e);
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

