/* gateway.c — the gateway thread (see gateway.h for the whole picture):
 * routing-table adoption, per-deployment queues, the power-of-two-choices
 * pick, upstream transfers with libcurl's multi interface, retries,
 * ejection of failing replicas and their health probes, cold starts,
 * deadlines, and noticing clients that left.
 *
 * Everything here runs on the gateway thread except drv_gateway_publish
 * (the controller thread, under the state lock: it only builds a table and
 * swaps one pointer), drv_gateway_stop/destroy (main) and
 * drv_gateway_demand (any thread, under reg_mu).
 *
 * Invariants:
 *   - a job the gateway holds is on the active list and holds a reference;
 *     it is in at most one of: a deployment's queue (J_QUEUED), the parked
 *     list (J_PARKED), the curl multi handle (J_RUNNING);
 *   - rep->outstanding counts the jobs running on it; a replica or
 *     deployment object is freed (under reg_mu) only when no job points to
 *     it and the routing table no longer lists it;
 *   - dep->rt holds exactly the replicas listed, (ready or promoted) and
 *     not ejected.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/util.h"
#include "gateway/gw_impl.h"
#include "head/state.h"

#define WATCH_AFTER_US 50000     /* watch the client socket of jobs older than this */
#define PARK_MAX 1024
#define PARK_WAIT_MS 3000
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

#define JOB_OF(l, member) ((drv_gw_job_t *)((char *)(l) - offsetof(drv_gw_job_t, member)))

static int64_t now_ms(void) { return drv_gw_now_us() / 1000; }

/* --- easy handles ----------------------------------------------------------------- */

static CURL *easy_get(drv_gateway_t *g)
{
    if (g->n_easy)
        return g->easy_pool[--g->n_easy];
    return curl_easy_init();
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

/* --- registry ------------------------------------------------------------------------- */

static gw_dep_t *dep_find(drv_gateway_t *g, const char *key)
{
    size_t lo = 0, hi = g->n_deps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->deps[mid]->key, key);
        if (c == 0)
            return g->deps[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void rebuild_rt(gw_dep_t *d)
{
    if (d->cap_rt < d->n_reps) {
        size_t ncap = d->n_reps + 4;
        gw_rep_t **nr = realloc(d->rt, ncap * sizeof *nr);
        uint32_t *no = realloc(d->rt_out, ncap * sizeof *no);
        if (!nr || !no)
            abort();
        d->rt = nr;
        d->rt_out = no;
        d->cap_rt = ncap;
    }
    d->n_rt = 0;
    for (size_t i = 0; i < d->n_reps; i++) {
        gw_rep_t *r = d->reps[i];
        if (d->in_table && r->in_table && (r->ready || r->promoted) && !atomic_load(&r->ejected))
            d->rt[d->n_rt++] = r;
    }
}

static void probe_cancel(drv_gateway_t *g, gw_rep_t *r)
{
    if (!r->probe)
        return;
    curl_multi_remove_handle(g->multi, r->probe->e);
    curl_easy_cleanup(r->probe->e);
    free(r->probe);
    r->probe = NULL;
}

static void rep_free(drv_gateway_t *g, gw_rep_t *r)
{
    probe_cancel(g, r);
    free(r->key);
    free(r->id);
    free(r->endpoint);
    free(r);
}

static void dep_free(drv_gateway_t *g, gw_dep_t *d)
{
    for (size_t i = 0; i < d->n_reps; i++)
        rep_free(g, d->reps[i]);
    free(d->reps);
    free(d->rt);
    free(d->rt_out);
    free(d->key);
    free(d->owner);
    free(d->id);
    free(d->predict_path);
    free(d->health_path);
    free(d);
}

static void set_str(char **dst, const char *s)
{
    if (*dst && strcmp(*dst, s) == 0)
        return;
    free(*dst);
    *dst = drv_strdup(s);
}

static bool dep_busy(const gw_dep_t *d)
{
    return d->queue.n > 0 || atomic_load(&d->st.in_flight) > 0;
}

/* Merge the table's replicas of one deployment into d->reps (under reg_mu). */
static void merge_reps(drv_gateway_t *g, gw_dep_t *d, const drv_gw_table_t *t,
                       const drv_gw_tdep_t *td)
{
    size_t n_new = td ? td->n : 0;
    gw_rep_t **out = malloc((d->n_reps + n_new + 1) * sizeof *out);
    if (!out)
        abort();
    size_t i = 0, k = 0, n = 0;
    while (i < d->n_reps || k < n_new) {
        gw_rep_t *r = i < d->n_reps ? d->reps[i] : NULL;
        const drv_gw_trep_t *tr = k < n_new ? &t->reps[td->first + k] : NULL;
        int c = !r ? 1 : !tr ? -1 : strcmp(r->key, tr->key);
        if (c < 0) {   /* no longer listed */
            i++;
            r->in_table = false;
            r->ready = r->promoted = false;
            if (r->outstanding == 0)
                rep_free(g, r);
            else
                out[n++] = r;
            continue;
        }
        if (c > 0) {   /* new */
            r = calloc(1, sizeof *r);
            if (!r)
                abort();
            r->dep = d;
            r->key = drv_strdup(tr->key);
            r->id = drv_strdup(tr->id);
            k++;
        } else {
            i++;
            k++;
        }
        set_str(&r->endpoint, tr->endpoint);
        r->in_table = true;
        r->ready = tr->ready;
        if (r->ready)
            r->promoted = false;
        out[n++] = r;
    }
    free(d->reps);
    d->reps = out;
    d->n_reps = d->cap_reps = n;
}

static gw_dep_t *dep_new(drv_gateway_t *g, const drv_gw_tdep_t *td)
{
    gw_dep_t *d = calloc(1, sizeof *d);
    if (!d)
        abort();
    d->key = drv_strdup(td->key);
    d->owner = drv_strdup(td->owner);
    d->id = drv_strdup(td->id);
    d->queue.cap = g->queue_max;
    return d;
}

/* --- answering ---------------------------------------------------------------------- */

static void count_answer(gw_dep_t *d, gw_rep_t *r, int status)
{
    int cls = status / 100 - 1;
    if (cls < 0 || cls > 4)
        cls = 4;
    if (d)
        gw_add(&d->st.by_class[cls], 1);
    if (r)
        gw_add(&r->st.by_class[cls], 1);
}

/* The gateway is done with j: off the active list, its reference dropped. */
static void job_done(drv_gateway_t *g, drv_gw_job_t *j)
{
    j->state = J_DONE;
    drv_gw_fifo_remove(&g->active, &j->alink);
    curl_slist_free_all(j->hdrs);
    j->hdrs = NULL;
    drv_gw_job_unref(j);
}

/* Answer j with a gateway error (or cut its stream when headers went out). */
static void job_fail(drv_gateway_t *g, drv_gw_job_t *j, int status, int reason, int retry_after,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void job_fail(drv_gateway_t *g, drv_gw_job_t *j, int status, int reason, int retry_after,
                     const char *fmt, ...)
{
    gw_dep_t *d = j->dep;
    if (d)
        gw_add(&d->rejected[reason], 1);
    count_answer(d, NULL, status);
    pthread_mutex_lock(&j->mu);
    if (j->ready && j->mode == M_STREAM) {
        j->failed = true;   /* headers are out: end the stream with an error */
        j->eof = true;
    } else {
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        drv_err(&j->err, status, "unavailable", "", "%s", msg);
        j->retry_after = retry_after;
        free(j->buf);
        j->buf = NULL;
        j->len = j->cap = j->off = 0;
        j->ready = true;
    }
    j->finished = true;
    drv_gw_wake_conn_locked(j);
    pthread_mutex_unlock(&j->mu);
    job_done(g, j);
}

static void job_ok(drv_gateway_t *g, drv_gw_job_t *j)
{
    int64_t us = drv_gw_now_us() - j->t0_us;
    gw_dep_t *d = j->dep;
    gw_rep_t *r = j->rep;
    drv_gw_hist_observe(&d->st.latency, us);
    drv_gw_hist_observe(&r->st.latency, us);
    count_answer(d, r, j->status);
    pthread_mutex_lock(&j->mu);
    if (j->mode == M_STREAM)
        j->eof = true;
    else
        j->ready = true;
    j->finished = true;
    drv_gw_wake_conn_locked(j);
    pthread_mutex_unlock(&j->mu);
    job_done(g, j);
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

/* --- dispatch ---------------------------------------------------------------------------- */

static void update_expiry(drv_gateway_t *g, int64_t at)
{
    if (at < g->next_expiry_ms)
        g->next_expiry_ms = at;
}

static gw_rep_t *pick(drv_gateway_t *g, gw_dep_t *d, const gw_rep_t *avoid)
{
    int skip = -1;
    for (size_t i = 0; i < d->n_rt; i++) {
        d->rt_out[i] = d->rt[i]->outstanding;
        if (d->rt[i] == avoid)
            skip = (int)i;
    }
    int i = drv_gw_p2c(d->rt_out, d->n_rt, (uint32_t)(d->max_conc > 0 ? d->max_conc : 0), skip,
                       &g->rng);
    return i < 0 ? NULL : d->rt[i];
}

static void start_transfer(drv_gateway_t *g, drv_gw_job_t *j, gw_rep_t *r)
{
    gw_dep_t *d = r->dep;
    CURL *e = easy_get(g);
    if (!e) {
        job_fail(g, j, 503, GW_R_UPSTREAM, 1, "out of HTTP client handles");
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
    int64_t left = j->deadline_ms - now_ms();
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
        job_fail(g, j, 503, GW_R_UPSTREAM, 1, "cannot start the upstream request");
    }
}

/* Leave the running state: handle back, counts down. */
static void stop_transfer(drv_gateway_t *g, drv_gw_job_t *j)
{
    curl_multi_remove_handle(g->multi, j->easy);
    easy_put(g, j->easy);
    j->easy = NULL;
    j->rep->outstanding--;
    atomic_fetch_sub_explicit(&j->rep->st.in_flight, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&j->dep->st.in_flight, 1, memory_order_relaxed);
}

static void set_waiting_since(gw_dep_t *d)
{
    drv_gw_link_t *h = d->queue.head;
    atomic_store_explicit(&d->waiting_since_ms, h ? JOB_OF(h, qlink)->t0_us / 1000 : 0,
                          memory_order_relaxed);
    atomic_store_explicit(&d->queued, (uint32_t)d->queue.n, memory_order_relaxed);
}

static void kick(drv_gateway_t *g, int64_t now)
{
    if (now - g->last_kick_ms >= 100) {
        g->last_kick_ms = now;
        drv_head_kick(g->head);
    }
}

static void enqueue(drv_gateway_t *g, gw_dep_t *d, drv_gw_job_t *j)
{
    int64_t now = now_ms();
    bool cold = d->n_rt == 0;
    if (drv_gw_fifo_push(&d->queue, &j->qlink) < 0) {
        job_fail(g, j, 429, GW_R_QUEUE_FULL, 1,
                 "deployment '%s' has %zu requests waiting already; try again shortly", d->id,
                 d->queue.cap);
        return;
    }
    j->state = J_QUEUED;
    j->cold = cold;
    int64_t wait = cold ? d->cold_start_ms : DRV_GW_QUEUE_WAIT_MS;
    j->wait_deadline_ms = now + wait < j->deadline_ms ? now + wait : j->deadline_ms;
    update_expiry(g, j->wait_deadline_ms);
    set_waiting_since(d);
    if (cold && !d->cold_since_ms) {
        d->cold_since_ms = now;
        gw_add(&d->cold_starts, 1);
        atomic_store(&d->cold, true);
        g->next_probe_ms = 0;   /* probe starting replicas now */
        kick(g, now);           /* let the controller (autoscaler) see the demand */
    }
}

static void drain_queue(drv_gateway_t *g, gw_dep_t *d)
{
    bool took = false;
    while (d->queue.n) {
        gw_rep_t *r = pick(g, d, NULL);
        if (!r)
            break;
        drv_gw_job_t *j = JOB_OF(drv_gw_fifo_pop(&d->queue), qlink);
        took = true;
        start_transfer(g, j, r);
    }
    if (took)
        set_waiting_since(d);
}

static void cold_start_over(gw_dep_t *d)
{
    if (d->n_rt > 0 && d->cold_since_ms) {
        drv_gw_hist_observe(&d->cold_hist, (now_ms() - d->cold_since_ms) * 1000);
        d->cold_since_ms = 0;
        atomic_store(&d->cold, false);
    }
}

static void route(drv_gateway_t *g, drv_gw_job_t *j)
{
    if (atomic_load(&g->stopping)) {
        job_fail(g, j, 503, GW_R_SHUTDOWN, 5, "droverd is shutting down; try again shortly");
        return;
    }
    gw_dep_t *d = dep_find(g, j->key);
    if (!d || !d->in_table) {
        const char *id = strchr(j->key, '/');
        if (g->table_built_us > j->t0_us || g->parked.n >= PARK_MAX) {
            job_fail(g, j, 404, GW_R_NOT_FOUND, 0, "deployment '%s' not found",
                     id ? id + 1 : j->key);
            return;
        }
        /* maybe created a moment ago: wait for a table built after it came */
        drv_gw_fifo_push(&g->parked, &j->qlink);
        j->state = J_PARKED;
        int64_t now = now_ms();
        j->wait_deadline_ms = now + PARK_WAIT_MS;
        update_expiry(g, j->wait_deadline_ms);
        kick(g, now);
        return;
    }
    j->dep = d;
    if (!d->enabled) {
        job_fail(g, j, 503, GW_R_DISABLED, 60, "deployment '%s' is disabled (enabled: false)",
                 d->id);
        return;
    }
    if (d->queue.n == 0) {   /* FIFO: nobody may overtake a waiting request */
        gw_rep_t *r = pick(g, d, NULL);
        if (r) {
            start_transfer(g, j, r);
            return;
        }
    }
    enqueue(g, d, j);
}

/* --- failures, ejection, probes --------------------------------------------------------- */

static void rep_failure(drv_gateway_t *g, gw_rep_t *r)
{
    gw_add(&r->failures, 1);
    if (++r->consecutive_failures >= DRV_GW_EJECT_FAILURES && !atomic_load(&r->ejected)) {
        atomic_store(&r->ejected, true);
        r->next_probe_ms = now_ms() + PROBE_EJECTED_MS;
        rebuild_rt(r->dep);
        drv_warn("gateway: replica %s of %s is out of rotation after %d failures in a row; "
                 "back once its health check passes", r->id, r->dep->key,
                 r->consecutive_failures);
    }
}

static void on_done(drv_gateway_t *g, drv_gw_job_t *j, CURLcode rc)
{
    gw_rep_t *r = j->rep;
    gw_dep_t *d = j->dep;
    stop_transfer(g, j);
    bool conn_gone;
    pthread_mutex_lock(&j->mu);
    conn_gone = j->conn_gone;
    pthread_mutex_unlock(&j->mu);
    if (rc == CURLE_OK) {
        r->consecutive_failures = 0;
        if (!j->headers_done)
            headers_complete(j);
        job_ok(g, j);
    } else if (conn_gone) {
        job_fail(g, j, 499, GW_R_CLIENT_GONE, 0, "the client closed the connection");
    } else if ((rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST) &&
               !j->headers_done) {
        rep_failure(g, r);
        gw_rep_t *o = j->attempts < 2 ? pick(g, d, r) : NULL;
        if (o)
            start_transfer(g, j, o);   /* nothing was sent: once more, elsewhere */
        else
            job_fail(g, j, 502, GW_R_CONNECT, 1,
                     "could not connect to a replica of deployment '%s' (%s: %s)", d->id, r->id,
                     curl_easy_strerror(rc));
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        job_fail(g, j, 504, GW_R_TIMEOUT, 0,
                 "replica %s of deployment '%s' did not answer within the request's "
                 "%d ms (X-Drover-Timeout)", r->id, d->id, j->timeout_ms);
    } else {
        rep_failure(g, r);
        job_fail(g, j, 502, GW_R_UPSTREAM, 1, "replica %s of deployment '%s' failed: %s",
                 r->id, d->id, curl_easy_strerror(rc));
    }
    drain_queue(g, d);
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
    p->tag = GW_TAG_PROBE;
    p->e = e;
    p->r = r;
    snprintf(p->url, sizeof p->url, "%s%s", r->endpoint, r->dep->health_path);
    curl_easy_setopt(e, CURLOPT_URL, p->url);
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(e, CURLOPT_PRIVATE, p);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)PROBE_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    if (curl_multi_add_handle(g->multi, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        free(p);
        return;
    }
    r->probe = p;
}

static void probe_done(drv_gateway_t *g, gw_probe_t *p, CURLcode rc)
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
        rebuild_rt(d);
        cold_start_over(d);
        drain_queue(g, d);
    }
}

/* Start the probes that are due; note when the next one is. */
static void probes(drv_gateway_t *g, int64_t now)
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

/* --- table adoption ------------------------------------------------------------------ */

static void adopt(drv_gateway_t *g, drv_gw_table_t *t)
{
    g->table_gen++;
    g->table_built_us = t->built_us;
    pthread_mutex_lock(&g->reg_mu);
    gw_dep_t **out = malloc((g->n_deps + t->n_deps + 1) * sizeof *out);
    if (!out)
        abort();
    size_t i = 0, k = 0, n = 0;
    while (i < g->n_deps || k < t->n_deps) {
        gw_dep_t *d = i < g->n_deps ? g->deps[i] : NULL;
        const drv_gw_tdep_t *td = k < t->n_deps ? &t->deps[k] : NULL;
        int c = !d ? 1 : !td ? -1 : strcmp(d->key, td->key);
        if (c < 0) {   /* deleted */
            i++;
            d->in_table = false;
            merge_reps(g, d, t, NULL);
            rebuild_rt(d);
            if (!dep_busy(d) && d->n_reps == 0)
                dep_free(g, d);
            else
                out[n++] = d;
            continue;
        }
        if (c > 0)
            d = dep_new(g, td);
        else
            i++;
        k++;
        set_str(&d->predict_path, td->predict_path);
        set_str(&d->health_path, td->health_path);
        d->max_conc = td->max_concurrency;
        d->cold_start_ms = td->cold_start_ms;
        d->enabled = td->enabled;
        d->in_table = true;
        merge_reps(g, d, t, td);
        rebuild_rt(d);
        out[n++] = d;
    }
    free(g->deps);
    g->deps = out;
    g->n_deps = g->cap_deps = n;
    pthread_mutex_unlock(&g->reg_mu);
    drv_gw_table_free(t);

    /* what the new table changes for waiting requests */
    for (i = 0; i < g->n_deps; i++) {
        gw_dep_t *d = g->deps[i];
        if (!d->in_table || !d->enabled) {
            while (d->queue.n) {
                drv_gw_job_t *j = JOB_OF(drv_gw_fifo_pop(&d->queue), qlink);
                if (d->in_table)
                    job_fail(g, j, 503, GW_R_DISABLED, 60, "deployment '%s' is disabled", d->id);
                else
                    job_fail(g, j, 404, GW_R_NOT_FOUND, 0, "deployment '%s' was deleted", d->id);
            }
            set_waiting_since(d);
            continue;
        }
        cold_start_over(d);
        drain_queue(g, d);
    }
    drv_gw_fifo_t parked = g->parked;
    memset(&g->parked, 0, sizeof g->parked);
    while (parked.n) {
        drv_gw_job_t *j = JOB_OF(drv_gw_fifo_pop(&parked), qlink);
        j->state = J_NEW;
        route(g, j);
    }
    g->next_probe_ms = 0;
}

/* --- cancel, unpause, expiry, stop ------------------------------------------------------ */

static void cancel(drv_gateway_t *g, drv_gw_job_t *j)
{
    gw_dep_t *d = j->dep;
    switch (j->state) {
    case J_RUNNING:
        stop_transfer(g, j);
        break;
    case J_QUEUED:
        drv_gw_fifo_remove(&d->queue, &j->qlink);
        set_waiting_since(d);
        break;
    case J_PARKED:
        drv_gw_fifo_remove(&g->parked, &j->qlink);
        break;
    default:
        return;
    }
    job_fail(g, j, 499, GW_R_CLIENT_GONE, 0, "the client closed the connection");
    if (d && d->queue.n)
        drain_queue(g, d);
}

static void expire(drv_gateway_t *g, int64_t now)
{
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < g->n_deps; i++) {
        gw_dep_t *d = g->deps[i];
        drv_gw_link_t *l = d->queue.head;
        bool changed = false;
        while (l) {
            drv_gw_link_t *nx = l->next;
            drv_gw_job_t *j = JOB_OF(l, qlink);
            if (j->wait_deadline_ms <= now) {
                drv_gw_fifo_remove(&d->queue, l);
                changed = true;
                if (d->n_rt == 0)
                    job_fail(g, j, 503, GW_R_COLD_TIMEOUT, 5,
                             "deployment '%s' is starting: no replica is ready yet; "
                             "try again shortly", d->id);
                else
                    job_fail(g, j, 503, GW_R_NO_CAPACITY, 1,
                             "deployment '%s' has no free replica capacity; waited %lld ms",
                             d->id, (long long)(now - j->t0_us / 1000));
            } else if (j->wait_deadline_ms < next) {
                next = j->wait_deadline_ms;
            }
            l = nx;
        }
        if (changed)
            set_waiting_since(d);
    }
    for (drv_gw_link_t *l = g->parked.head; l;) {
        drv_gw_link_t *nx = l->next;
        drv_gw_job_t *j = JOB_OF(l, qlink);
        if (j->wait_deadline_ms <= now) {
            drv_gw_fifo_remove(&g->parked, l);
            const char *id = strchr(j->key, '/');
            job_fail(g, j, 404, GW_R_NOT_FOUND, 0, "deployment '%s' not found",
                     id ? id + 1 : j->key);
        } else if (j->wait_deadline_ms < next) {
            next = j->wait_deadline_ms;
        }
        l = nx;
    }
    g->next_expiry_ms = next;
}

static void fail_everything(drv_gateway_t *g)
{
    while (g->active.n) {
        drv_gw_job_t *j = JOB_OF(g->active.head, alink);
        switch (j->state) {
        case J_RUNNING: stop_transfer(g, j); break;
        case J_QUEUED: drv_gw_fifo_remove(&j->dep->queue, &j->qlink); break;
        case J_PARKED: drv_gw_fifo_remove(&g->parked, &j->qlink); break;
        default: break;
        }
        job_fail(g, j, 503, GW_R_SHUTDOWN, 5, "droverd is shutting down; try again shortly");
    }
    for (size_t i = 0; i < g->n_deps; i++)
        set_waiting_since(g->deps[i]);
}

static void drain_inbox(drv_gateway_t *g)
{
    drv_gw_job_t *j = atomic_exchange(&g->inbox, NULL), *fifo = NULL;
    while (j) {   /* LIFO -> FIFO */
        drv_gw_job_t *nx = j->mnext;
        j->mnext = fifo;
        fifo = j;
        j = nx;
    }
    while (fifo) {
        j = fifo;
        fifo = j->mnext;
        unsigned bits = atomic_exchange(&j->msgs, 0);
        if (bits & MSG_SUBMIT) {
            drv_gw_job_ref(j);   /* the gateway's, until job_done */
            drv_gw_fifo_push(&g->active, &j->alink);
            j->state = J_NEW;
            route(g, j);
        }
        if (bits & MSG_CANCEL)
            cancel(g, j);
        if ((bits & MSG_UNPAUSE) && j->state == J_RUNNING && j->easy)
            curl_easy_pause(j->easy, CURLPAUSE_CONT);
        drv_gw_job_unref(j);   /* the inbox's */
    }
}

/* Client sockets of jobs that have waited a while: EOF means the client left. */
static size_t build_watch(drv_gateway_t *g, int64_t now_us)
{
    size_t n = 0;
    for (drv_gw_link_t *l = g->active.head; l; l = l->next) {
        drv_gw_job_t *j = JOB_OF(l, alink);
        if (j->client_fd < 0 || j->nowatch || !atomic_load(&j->suspended) ||
            now_us - j->t0_us < WATCH_AFTER_US)
            continue;
        if (n == g->cap_wfd) {
            size_t ncap = g->cap_wfd ? g->cap_wfd * 2 : 64;
            struct curl_waitfd *nw = realloc(g->wfd, ncap * sizeof *nw);
            if (!nw)
                break;
            g->wfd = nw;
            drv_gw_job_t **nj = realloc(g->wjob, ncap * sizeof *nj);
            if (!nj)
                break;
            g->wjob = nj;
            g->cap_wfd = ncap;
        }
        g->wfd[n] = (struct curl_waitfd){.fd = j->client_fd, .events = CURL_WAIT_POLLIN};
        g->wjob[n] = j;
        n++;
    }
    return n;
}

static void check_watch(drv_gateway_t *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!(g->wfd[i].revents & CURL_WAIT_POLLIN))
            continue;
        drv_gw_job_t *j = g->wjob[i];
        if (j->state == J_DONE)
            continue;
        char c;
        ssize_t r = recv(g->wfd[i].fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            cancel(g, j);
        else if (r > 0)
            j->nowatch = true;   /* the client sent more (pipelining): cannot tell */
    }
}

static void *gateway_main(void *arg)
{
    drv_gateway_t *g = arg;
    bool stopped = false;
    while (!atomic_load(&g->quit)) {
        drv_gw_table_t *t = atomic_exchange(&g->pending, NULL);
        if (t)
            adopt(g, t);
        drain_inbox(g);
        if (atomic_load(&g->stopping) && !stopped) {
            fail_everything(g);
            stopped = true;
            pthread_mutex_lock(&g->stop_mu);
            g->stop_done = true;
            pthread_cond_broadcast(&g->stop_cv);
            pthread_mutex_unlock(&g->stop_mu);
        }
        int running;
        curl_multi_perform(g->multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(g->multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            void *p = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&p);
            CURLcode rc = m->data.result;
            if (p && *(int *)p == GW_TAG_JOB)
                on_done(g, p, rc);
            else if (p)
                probe_done(g, p, rc);
        }
        int64_t now = now_ms();
        if (now >= g->next_expiry_ms)
            expire(g, now);
        probes(g, now);
        int timeout = g->active.n ? 100 : 1000;
        if (g->next_expiry_ms - now < timeout)
            timeout = (int)(g->next_expiry_ms - now > 0 ? g->next_expiry_ms - now : 0);
        if (g->probe_wanted && g->next_probe_ms - now < timeout)
            timeout = (int)(g->next_probe_ms - now > 0 ? g->next_probe_ms - now : 0);
        size_t nw = build_watch(g, now * 1000);
        curl_multi_poll(g->multi, g->wfd, (unsigned)nw, timeout, NULL);
        if (nw)
            check_watch(g, nw);
    }
    return NULL;
}

/* --- life ------------------------------------------------------------------------------ */

void drv_gateway_publish(void *ctx)
{
    drv_gateway_t *g = ctx;
    drv_gw_table_t *t = drv_gw_table_build(g->head->state);
    if (!t)
        return;
    t->built_us = drv_gw_now_us();
    drv_gw_table_free(atomic_exchange(&g->pending, t));   /* one not adopted yet: replaced */
    curl_multi_wakeup(g->multi);
}

/* The replica autoscaler's input: requests in flight and queued; a cold
 * start (requests waiting with no ready replica) asks for one at once. */
static void gw_load(void *ctx, const char *key, double *load, bool *waiting)
{
    drv_gw_demand_t d;
    *load = 0;
    *waiting = false;
    if (!drv_gateway_demand(ctx, key, &d))
        return;
    *load = (double)d.in_flight + (double)d.queued;
    *waiting = d.cold && d.queued > 0;
}

drv_gateway_t *drv_gateway_create(drv_head_t *head, drv_error_t *err)
{
    drv_gateway_t *g = calloc(1, sizeof *g);
    if (!g) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    g->head = head;
    curl_global_init(CURL_GLOBAL_DEFAULT);   /* reference counted */
    g->multi = curl_multi_init();
    if (!g->multi) {
        curl_global_cleanup();
        free(g);
        drv_err_internal(err, "cannot create the gateway's HTTP client");
        return NULL;
    }
    curl_multi_setopt(g->multi, CURLMOPT_MAXCONNECTS, 4096L);
    g->hdr_json = curl_slist_append(NULL, "Content-Type: application/json");
    g->hdr_json = curl_slist_append(g->hdr_json, "Expect:");
    g->rng = (uint64_t)drv_gw_now_us() * 0x9e3779b97f4a7c15ULL | 1;
    g->next_expiry_ms = INT64_MAX;
    const char *qm = getenv("DROVER_GATEWAY_QUEUE_MAX");   /* tuning and tests */
    g->queue_max = qm && atoi(qm) > 0 && atoi(qm) <= 1000000 ? (size_t)atoi(qm) : DRV_GW_QUEUE_MAX;
    pthread_mutex_init(&g->reg_mu, NULL);
    pthread_mutex_init(&g->stop_mu, NULL);
    pthread_cond_init(&g->stop_cv, NULL);
    if (pthread_create(&g->thread, NULL, gateway_main, g) != 0) {
        drv_err_internal(err, "cannot start the gateway thread");
        drv_gateway_destroy(g);
        return NULL;
    }
    g->started = true;
    head->gateway = g;
    head->publish = drv_gateway_publish;
    head->publish_ctx = g;
    head->load = gw_load;
    head->load_ctx = g;
    return g;
}

void drv_gateway_stop(drv_gateway_t *g)
{
    if (!g || !g->started)
        return;
    atomic_store(&g->stopping, true);
    curl_multi_wakeup(g->multi);
    pthread_mutex_lock(&g->stop_mu);
    for (int i = 0; i < 50 && !g->stop_done; i++) {
        struct timespec ts;
        drv_deadline_in(100, &ts);
        pthread_cond_timedwait(&g->stop_cv, &g->stop_mu, &ts);
    }
    pthread_mutex_unlock(&g->stop_mu);
}

void drv_gateway_destroy(drv_gateway_t *g)
{
    if (!g)
        return;
    if (g->started) {
        drv_gateway_stop(g);
        g->head->publish = NULL;
        g->head->load = NULL;
        atomic_store(&g->quit, true);
        curl_multi_wakeup(g->multi);
        pthread_join(g->thread, NULL);
        drain_inbox(g);   /* late messages: answered (stopping) and released */
        fail_everything(g);
        if (g->head->gateway == g)
            g->head->gateway = NULL;
    }
    drv_gw_table_free(atomic_exchange(&g->pending, NULL));
    for (size_t i = 0; i < g->n_deps; i++)
        dep_free(g, g->deps[i]);
    free(g->deps);
    for (size_t i = 0; i < g->n_easy; i++)
        curl_easy_cleanup(g->easy_pool[i]);
    free(g->easy_pool);
    free(g->wfd);
    free(g->wjob);
    curl_slist_free_all(g->hdr_json);
    curl_slist_free_all(g->hdr_plain);
    curl_multi_cleanup(g->multi);
    curl_global_cleanup();
    pthread_mutex_destroy(&g->reg_mu);
    pthread_mutex_destroy(&g->stop_mu);
    pthread_cond_destroy(&g->stop_cv);
    free(g);
}

bool drv_gateway_demand(drv_gateway_t *g, const char *key, drv_gw_demand_t *out)
{
    memset(out, 0, sizeof *out);
    if (!g)
        return false;
    pthread_mutex_lock(&g->reg_mu);
    gw_dep_t *d = dep_find(g, key);
    if (d) {
        out->in_flight = atomic_load_explicit(&d->st.in_flight, memory_order_relaxed);
        out->queued = atomic_load_explicit(&d->queued, memory_order_relaxed);
        out->waiting_since_ms = atomic_load_explicit(&d->waiting_since_ms, memory_order_relaxed);
        out->cold = atomic_load(&d->cold);
    }
    pthread_mutex_unlock(&g->reg_mu);
    return d != NULL;
}
