/* job.c — the connection side of a gateway job (see gateway.h): making a
 * job, handing it to the gateway thread, waking its connection, and
 * letting go of it. The libmicrohttpd side (starting a job from a
 * suspended connection, queueing its answer, the streaming reader) is
 * api/http_gateway.c; drover-gateway's server is serve.c.
 *
 * Runs on the connections' threads, except drv_gw_wake_conn_locked() and
 * the inbox's consumer (gateway thread). Fields shared with the gateway
 * thread are read and written under the job's mutex; a job lives as long
 * as anyone holds a reference (the connection, the gateway, an inbox
 * entry, a streamed response).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    j->prompt_est = -1;
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
        j->wake(j, j->wake_ctx);
    }
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
