/* job.c — the connection side of a gateway job (see gateway.h): making a
 * job, handing it to the gateway thread, queueing its answer on the
 * connection, the streaming reader, and letting go of it.
 *
 * Runs on HTTP pool threads, except drv_gw_wake_conn_locked() and the
 * inbox's consumer (gateway thread). Fields shared with the gateway
 * thread are read and written under the job's mutex; a job lives as long
 * as anyone holds a reference (the connection, the gateway, an inbox
 * entry, a streamed response).
 */
#define _GNU_SOURCE
#include <math.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "gateway/gw_impl.h"

int64_t drv_gw_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int drv_gw_parse_timeout(const char *h, int *ms, drv_error_t *err)
{
    *ms = 0;
    if (!h)
        return 0;
    char *end;
    double s = strtod(h, &end);
    while (*end == ' ' || *end == 's')
        end++;
    if (end == h || *end || !isfinite(s) || s <= 0 || s > DRV_GW_MAX_TIMEOUT_S)
        return drv_err_invalid(err, "X-Drover-Timeout",
                               "X-Drover-Timeout must be a number of seconds from 0.001 to %d, "
                               "not '%.40s'", DRV_GW_MAX_TIMEOUT_S, h);
    *ms = (int)(s * 1000) > 0 ? (int)(s * 1000) : 1;
    return 0;
}

drv_gw_job_t *drv_gw_job_new(drv_gateway_t *g, const char *key, enum drv_gw_kind kind,
                             const char *suffix, const char *content_type, const char *accept,
                             int timeout_ms, drv_error_t *err)
{
    if (!g || atomic_load(&g->stopping)) {
        drv_err(err, 503, "unavailable", "", "droverd is shutting down; try again shortly");
        return NULL;
    }
    drv_gw_job_t *j = calloc(1, sizeof *j);   /* the one allocation of a request */
    if (!j) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    j->gw = g;
    snprintf(j->key, sizeof j->key, "%s", key);
    j->kind = kind;
    snprintf(j->suffix, sizeof j->suffix, "%s", suffix ? suffix : "");
    snprintf(j->ctype, sizeof j->ctype, "%s", content_type ? content_type : "");
    snprintf(j->accept, sizeof j->accept, "%s", accept ? accept : "");
    j->t0_us = drv_gw_now_us();
    j->timeout_ms = timeout_ms > 0 ? timeout_ms : DRV_GW_DEFAULT_TIMEOUT_MS;
    j->deadline_ms = j->t0_us / 1000 + j->timeout_ms;
    j->client_fd = -1;
    j->content_length = -1;
    atomic_init(&j->refs, 1);
    atomic_init(&j->msgs, 0);
    atomic_init(&j->suspended, false);
    pthread_mutex_init(&j->mu, NULL);
    return j;
}

static void job_free(drv_gw_job_t *j)
{
    free(j->body);
    free(j->buf);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

void drv_gw_job_unref(drv_gw_job_t *j)
{
    if (j && atomic_fetch_sub_explicit(&j->refs, 1, memory_order_acq_rel) == 1)
        job_free(j);
}

void drv_gw_job_discard(drv_gw_job_t *j)
{
    drv_gw_job_unref(j);
}

void drv_gw_post(drv_gw_job_t *j, unsigned bits)
{
    unsigned old = atomic_fetch_or(&j->msgs, bits | MSG_QUEUED);
    if (old & MSG_QUEUED)
        return;   /* already in the inbox: the gateway sees the new bits too */
    drv_gw_job_ref(j);
    drv_gateway_t *g = j->gw;
    drv_gw_job_t *head = atomic_load(&g->inbox);
    do {
        j->mnext = head;
    } while (!atomic_compare_exchange_weak(&g->inbox, &head, j));
    if (!head)
        drv_gw_wake(g);   /* the first since the gateway last looked */
}

void drv_gw_job_start(drv_gw_job_t *j, struct MHD_Connection *c, char *body, size_t len)
{
    j->body = body;
    j->body_len = len;
    j->conn = c;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->client_fd = ci ? ci->connect_fd : -1;
    atomic_store(&j->suspended, true);   /* http.c suspended it */
    drv_gw_post(j, MSG_SUBMIT);
}

void drv_gw_job_start_local(drv_gw_job_t *j, char *body, size_t len,
                            void (*wake)(drv_gw_job_t *j, void *ctx), void *ctx)
{
    j->body = body;
    j->body_len = len;
    j->wake = wake;
    j->wake_ctx = ctx;
    j->client_fd = -1;   /* the server notices a client that leaves itself */
    atomic_store(&j->suspended, true);
    drv_gw_post(j, MSG_SUBMIT);   /* on the gateway thread: taken at the next turn, no wake-up */
}

void drv_gw_wake_conn_locked(drv_gw_job_t *j)
{
    if (!j->conn_gone && atomic_load(&j->suspended)) {
        atomic_store(&j->suspended, false);
        j->reader_waiting = false;
        if (j->wake)
            j->wake(j, j->wake_ctx);
        else
            MHD_resume_connection(j->conn);
    }
}

/* --- streamed answers ------------------------------------------------------------ */

static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max)
{
    drv_gw_job_t *j = cls;
    pthread_mutex_lock(&j->mu);
    if (j->len > j->off) {
        size_t n = j->len - j->off < max ? j->len - j->off : max;
        memcpy(out, j->buf + j->off, n);
        j->off += n;
        bool unpause = false;
        if (j->off == j->len) {
            j->off = j->len = 0;
            unpause = j->paused;
            j->paused = false;
        }
        pthread_mutex_unlock(&j->mu);
        if (unpause)
            drv_gw_post(j, MSG_UNPAUSE);
        return (ssize_t)n;
    }
    if (j->eof) {
        bool failed = j->failed;
        pthread_mutex_unlock(&j->mu);
        return failed ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    }
    /* nothing yet: wait without a thread; the gateway resumes on data */
    j->reader_waiting = true;
    atomic_store(&j->suspended, true);
    MHD_suspend_connection(j->conn);
    pthread_mutex_unlock(&j->mu);
    return 0;
}

static void reader_free(void *cls)
{
    drv_gw_job_unref(cls);
}

const char *drv_gw_error_code(int status)
{
    switch (status) {
    case 404: return "not_found";
    case 429: return "resource_exhausted";
    case 502: return "bad_gateway";
    case 504: return "gateway_timeout";
    case 499: return "cancelled";
    case 500: return "internal";
    default: return "unavailable";
    }
}

int drv_gw_job_respond(drv_gw_job_t *j, struct MHD_Connection *c)
{
    pthread_mutex_lock(&j->mu);
    if (!j->ready) {   /* not for us yet (a stray resume): wait again */
        atomic_store(&j->suspended, true);
        MHD_suspend_connection(c);
        pthread_mutex_unlock(&j->mu);
        return MHD_YES;
    }
    struct MHD_Response *r;
    unsigned status;
    bool passthrough = false;
    int retry_after = 0;
    if (j->err.status) {
        drv_resp_t tmp;
        memset(&tmp, 0, sizeof tmp);
        tmp.openai = j->kind == DRV_GW_OPENAI;
        snprintf(j->err.code, sizeof j->err.code, "%s", drv_gw_error_code(j->err.status));
        drv_resp_error(&tmp, &j->err);
        r = MHD_create_response_from_buffer(tmp.len, tmp.body, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(r, "Content-Type", "application/json");
        status = (unsigned)j->err.status;
        retry_after = j->retry_after;
    } else if (j->mode == M_STREAM) {
        drv_gw_job_ref(j);   /* the response's */
        r = MHD_create_response_from_callback(
            j->content_length >= 0 ? (uint64_t)j->content_length : MHD_SIZE_UNKNOWN, 16 * 1024,
            reader, j, reader_free);
        status = (unsigned)j->status;
        passthrough = true;
    } else {
        char *b = j->buf;
        size_t n = j->len;
        j->buf = NULL;
        j->len = j->cap = j->off = 0;
        r = b ? MHD_create_response_from_buffer(n, b, MHD_RESPMEM_MUST_FREE)
              : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        status = (unsigned)j->status;
        passthrough = true;
    }
    if (passthrough) {
        for (size_t off = 0; off < j->hdr_len;) {
            const char *name = j->hdr + off;
            const char *value = name + strlen(name) + 1;
            MHD_add_response_header(r, name, value);
            off = (size_t)(value - j->hdr) + strlen(value) + 1;
        }
    }
    if (j->replica[0])
        MHD_add_response_header(r, "X-Drover-Replica", j->replica);
    pthread_mutex_unlock(&j->mu);
    if (retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", retry_after);
        MHD_add_response_header(r, "Retry-After", ra);
    }
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

void drv_gw_job_release(drv_gw_job_t *j)
{
    pthread_mutex_lock(&j->mu);
    j->conn_gone = true;
    bool running = !j->finished;
    pthread_mutex_unlock(&j->mu);
    if (running)
        drv_gw_post(j, MSG_CANCEL);
    drv_gw_job_unref(j);
}
