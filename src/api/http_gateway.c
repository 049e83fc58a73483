/* http_gateway.c — libmicrohttpd glue for gateway jobs (gateway/gateway.h):
 * a handler's job starts from the suspended connection, the gateway
 * thread resumes it when the answer (or its headers) is ready, and the
 * answer is queued here: the gateway's own error as the API's error body,
 * a buffered answer whole, a streamed one through a reader that suspends
 * the connection while the job's buffer is empty.
 *
 * Runs on MHD's threads, except mhd_wake (the gateway thread, under the
 * job's mutex). Fields shared with the gateway thread are read and written
 * under the job's mutex (gateway/gw_impl.h).
 */
#define _GNU_SOURCE
#include "api/http_gateway.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "gateway/gw_impl.h"

/* The gateway has news for a suspended connection. */
static void mhd_wake(drv_gw_job_t *j, void *ctx)
{
    (void)ctx;
    MHD_resume_connection(j->conn);
}

void drv_gw_job_start(drv_gw_job_t *j, struct MHD_Connection *c, char *body, size_t len)
{
    j->body = body;
    j->body_len = len;
    j->conn = c;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->client_fd = ci ? ci->connect_fd : -1;
    j->wake = mhd_wake;
    j->wake_ctx = NULL;
    atomic_store(&j->suspended, true);   /* http.c suspended it */
    drv_gw_post(j, MSG_SUBMIT);
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

int drv_gw_job_respond(drv_gw_job_t *j, struct MHD_Connection *c, const char *origin)
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
    drv_http_cors(r, origin);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}
