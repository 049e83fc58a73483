/* http.c — libmicrohttpd glue: reads requests (bounded to 1 MiB bodies;
 * blob chunks stream to a file instead: api/upload.h),
 * authenticates, dispatches to the route table, and sends the answer.
 *
 * Threads: MHD's epoll thread pool runs handlers. A handler whose answer
 * depends on a write not yet durable sets resp.wait_seq; the connection is
 * then suspended (no thread blocks) and the store's commit callback, on the
 * writer thread, resumes it. The waiter list is owned by this module and
 * guarded by its own mutex.
 *
 * Inference (gateway/gateway.h): a handler that returns resp.job has the
 * connection suspended and the job (with the request body) handed to the
 * gateway thread, which resumes the connection when the answer or its
 * headers are ready; drv_gw_job_respond() then queues it, and the
 * request-completed callback releases the job.
 */
#include "api/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "api/api.h"
#include "api/cors.h"
#include "api/audit.h"
#include "api/auth.h"
#include "api/http_cert.h"
#include "api/http_gateway.h"
#include "common/ratelimit.h"
#include "api/upload.h"
#include "common/listen.h"
#include "common/log.h"
#include "common/openai.h"
#include "common/util.h"
#include "gateway/gateway.h"
#include "store/store.h"

typedef struct waiter {
    uint64_t seq;
    struct MHD_Connection *conn;
} waiter_t;

struct conn_ctx;

/* Append an uploaded chunk to a request body, NUL-terminated. Beyond
 * max *too_large is set and nothing more is kept. -1 on OOM. */
static int body_add(char **body, size_t *len, size_t *cap, size_t max, bool *too_large,
                    const char *data, size_t n);

/* A long poll: held until woken on its key or its deadline passes. */
typedef struct poller {
    uint64_t key;
    int64_t deadline_ms;
    struct MHD_Connection *conn;
    struct conn_ctx *x;
} poller_t;

struct drv_http {
    struct MHD_Daemon *d;
    drv_head_t *head;
    drv_audit_t *audit;          /* made here when the head had none (head->audit) */
    drv_ratelimit_t *rl;         /* failed authentications per address; NULL: unlimited */
    bool tls;                    /* its certificate: api/http_cert.h */
    pthread_mutex_t mu;
    waiter_t *w;
    size_t nw, capw;
    poller_t *p;                 /* guarded by mu too */
    size_t np, capp;
    pthread_t timer;
    pthread_cond_t timer_cv;
    bool stop;
    atomic_int suspended;        /* connections suspended and not yet re-entered */
};

typedef struct conn_ctx {
    char *body;
    size_t len, cap;
    size_t max_body;     /* DRV_MAX_BODY, or more for a manifest (api/upload.h) */
    bool too_large;
    bool answered;       /* resp is ready (waiting for durability) */
    bool rerun;          /* a hold ended: run the handler again */
    bool suspended;      /* counted in h->suspended */
    drv_resp_t resp;
    drv_req_t *req;      /* the request being parsed (collect_query) */
    char qbuf[2048];     /* decoded query values */
    size_t qlen;
    drv_gw_job_t *job;   /* inference: the gateway's job for this request */
    drv_upload_t *up;    /* a body streamed to a file (api/upload.h), or NULL */
} conn_ctx_t;

static void on_commit(void *cls, uint64_t committed)
{
    drv_http_t *h = cls;
    pthread_mutex_lock(&h->mu);
    size_t j = 0;
    for (size_t i = 0; i < h->nw; i++) {
        if (h->w[i].seq <= committed)
            MHD_resume_connection(h->w[i].conn);
        else
            h->w[j++] = h->w[i];
    }
    h->nw = j;
    pthread_mutex_unlock(&h->mu);
}

/* Resume every poller matching (key, or deadline passed when key == 0). */
static void resume_pollers(drv_http_t *h, uint64_t key, int64_t now)
{
    pthread_mutex_lock(&h->mu);
    size_t j = 0;
    for (size_t i = 0; i < h->np; i++) {
        poller_t *p = &h->p[i];
        if ((key && p->key == key) || (!key && p->deadline_ms <= now)) {
            p->x->rerun = true;
            MHD_resume_connection(p->conn);
        } else {
            h->p[j++] = *p;
        }
    }
    h->np = j;
    pthread_mutex_unlock(&h->mu);
}

static void on_wake(void *ctx, uint64_t key)
{
    resume_pollers(ctx, key, 0);
}

static void *timer_main(void *arg)
{
    drv_http_t *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        struct timespec ts;
        drv_deadline_in(50, &ts);
        pthread_cond_timedwait(&h->timer_cv, &h->mu, &ts);
        if (h->stop || h->np == 0)
            continue;
        pthread_mutex_unlock(&h->mu);
        resume_pollers(h, 0, drv_mono_ms());
        pthread_mutex_lock(&h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void suspend(drv_http_t *h, struct MHD_Connection *c, conn_ctx_t *x)
{
    x->suspended = true;
    atomic_fetch_add(&h->suspended, 1);
    MHD_suspend_connection(c);
}

static void hold(drv_http_t *h, struct MHD_Connection *c, conn_ctx_t *x, uint64_t key, int ms)
{
    suspend(h, c, x);
    pthread_mutex_lock(&h->mu);
    if (h->stop) {
        /* shutting down: no new suspended connections (MHD_stop_daemon
         * refuses them); end the hold at once */
        pthread_mutex_unlock(&h->mu);
        x->rerun = true;
        MHD_resume_connection(c);
        return;
    }
    if (h->np == h->capp) {
        size_t ncap = h->capp ? h->capp * 2 : 64;
        poller_t *np = realloc(h->p, ncap * sizeof *np);
        if (!np)
            abort();
        h->p = np;
        h->capp = ncap;
    }
    h->p[h->np++] = (poller_t){key, drv_mono_ms() + ms, c, x};
    pthread_mutex_unlock(&h->mu);
}

static void wait_durable(drv_http_t *h, struct MHD_Connection *c, conn_ctx_t *x, uint64_t seq)
{
    suspend(h, c, x);
    pthread_mutex_lock(&h->mu);
    if (h->stop) {
        /* shutting down: wait for the commit here, then answer */
        pthread_mutex_unlock(&h->mu);
        drv_store_wait(h->head->store, seq);
        MHD_resume_connection(c);
        return;
    }
    if (drv_store_committed(h->head->store) >= seq) {
        pthread_mutex_unlock(&h->mu);
        MHD_resume_connection(c);
        return;
    }
    if (h->nw == h->capw) {
        size_t ncap = h->capw ? h->capw * 2 : 64;
        waiter_t *nw = realloc(h->w, ncap * sizeof *nw);
        if (!nw)
            abort();
        h->w = nw;
        h->capw = ncap;
    }
    h->w[h->nw++] = (waiter_t){seq, c};
    pthread_mutex_unlock(&h->mu);
}

/* Several heads: the request's Origin when it is a head's (the console of
 * another head's origin may read the answer; its token travels in
 * Authorization, never in a cookie), else NULL. */
static const char *cors_origin(drv_http_t *h, struct MHD_Connection *c)
{
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    return origin && drv_cors_origin_ok(h->head, origin) ? origin : NULL;
}

void drv_http_cors(struct MHD_Response *mr, const char *origin)
{
    if (!origin)
        return;
    MHD_add_response_header(mr, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(mr, "Access-Control-Expose-Headers", DRV_CORS_EXPOSE);
    MHD_add_response_header(mr, "Vary", "Origin");
}

static enum MHD_Result send_resp(drv_http_t *h, struct MHD_Connection *c, drv_resp_t *r)
{
    struct MHD_Response *mr;
    if (r->has_file) {   /* MHD owns the fd from here on */
        mr = MHD_create_response_from_fd_at_offset64(r->file_len, r->file_fd, r->file_off);
        r->has_file = false;
    } else {
        mr = MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
        r->body = NULL;
    }
    if (!mr)
        return MHD_NO;
    MHD_add_response_header(mr, "Content-Type",
                            r->content_type ? r->content_type : "application/json");
    if (r->etag > 0) {
        char e[32];
        snprintf(e, sizeof e, "\"%lld\"", (long long)r->etag);
        MHD_add_response_header(mr, "ETag", e);
    }
    if (r->location[0])
        MHD_add_response_header(mr, "Location", r->location);
    if (r->header_name)
        MHD_add_response_header(mr, r->header_name, r->header_value);
    for (const drv_kv_t *hv = r->headers; hv && hv->key; hv++)
        MHD_add_response_header(mr, hv->key, hv->value);
    if (r->csp[0])
        MHD_add_response_header(mr, "Content-Security-Policy", r->csp);
    drv_http_cors(mr, cors_origin(h, c));
    if (r->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", r->retry_after);
        MHD_add_response_header(mr, "Retry-After", ra);
    }
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, mr);
    MHD_destroy_response(mr);
    return ret;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decoding of the path and query arguments, except %00 (a NUL
 * would cut the string short: "c1%00.bak" must not name c1) and %2F (an
 * encoded '/' must not split a path segment): both stay as they are, so
 * such a path names nothing. Query values get their %2F decoded by
 * collect_query (page tokens hold '/'). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
    char *w = s;
    for (const char *r = s; *r; r++) {
        int hi, lo;
        if (r[0] == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0 &&
            (hi || lo) && !(hi == 2 && lo == 15)) {
            *w++ = (char)(hi * 16 + lo);
            r += 2;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    conn_ctx_t *x = cls;
    drv_req_t *req = x->req;
    if (req->n_query >= DRV_MAX_QUERY)
        return MHD_NO;
    if (value && (strstr(value, "%2F") || strstr(value, "%2f"))) {
        /* decode the %2F that unescape() kept, into the connection's arena */
        size_t need = strlen(value) + 1;
        if (x->qlen + need <= sizeof x->qbuf) {
            char *w = x->qbuf + x->qlen, *start = w;
            for (const char *r = value; *r; r++) {
                if (r[0] == '%' && r[1] == '2' && (r[2] == 'F' || r[2] == 'f')) {
                    *w++ = '/';
                    r += 2;
                } else {
                    *w++ = *r;
                }
            }
            *w++ = '\0';
            x->qlen += (size_t)(w - start);
            value = start;
        }
    }
    req->query[req->n_query].key = key;
    req->query[req->n_query].value = value ? value : "";
    req->n_query++;
    return MHD_YES;
}

/* A failed authentication (any 401: a user token, a join token, a node
 * credential) spends one of its address's tokens; with none left the
 * answer becomes a 429 with Retry-After (common/ratelimit.h). */
static void limit_failure(drv_http_t *h, drv_resp_t *resp, const char *remote)
{
    int retry = 0;
    if (resp->status != 401 || !h->rl ||
        drv_ratelimit_fail(h->rl, remote, drv_mono_ms(), &retry) == 0)
        return;
    bool openai = resp->openai;
    drv_resp_free(resp);
    memset(resp, 0, sizeof *resp);
    resp->openai = openai;
    drv_error_t err;
    drv_err(&err, 429, "resource_exhausted", "", "too many failed authentications from %s: "
            "retry in %d s (a valid credential is not limited)",
            remote[0] ? remote : "this address", retry);
    drv_resp_error(resp, &err);
    resp->retry_after = retry;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls)
{
    drv_http_t *h = cls;
    conn_ctx_t *x = *con_cls;
    if (!x) {
        x = calloc(1, sizeof *x);
        if (!x)
            return MHD_NO;
        *con_cls = x;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (drv_upload_wanted(method, url)) {
            x->up = drv_upload_begin(
                h->head, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"), cl);
            return x->up ? MHD_YES : MHD_NO;
        }
        x->max_body = drv_upload_body_limit(
            h->head, method, url, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"));
        unsigned long long claimed = cl ? strtoull(cl, NULL, 10) : 0;
        if (claimed > x->max_body)
            x->too_large = true;   /* read (and dropped), then 413 */
        if (claimed > DRV_MANIFEST_BODY_MAX) {
            /* an absurd size: 413 at once, before any byte of the body (the
             * connection closes after the answer) */
            drv_error_t err;
            drv_err(&err, 413, "payload_too_large", "",
                    "request body of %llu bytes is larger than %zu bytes", claimed, x->max_body);
            drv_resp_error(&x->resp, &err);
            x->answered = true;
            return send_resp(h, c, &x->resp);
        }
        return MHD_YES;
    }
    if (x->suspended) {   /* re-entered after a resume */
        x->suspended = false;
        atomic_fetch_sub(&h->suspended, 1);
    }
    if (x->job)        /* resumed by the gateway: its answer is ready */
        return drv_gw_job_respond(x->job, c, cors_origin(h, c));
    if (x->answered)   /* resumed: the write is durable now */
        return send_resp(h, c, &x->resp);
    if (*upload_size && x->up) {
        drv_upload_add(x->up, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size && !x->rerun) {
        if (body_add(&x->body, &x->len, &x->cap, x->max_body, &x->too_large, upload,
                     *upload_size) < 0)
            return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }

    bool resumed = x->rerun;
    x->rerun = false;
    drv_error_t err;
    drv_req_t req;
    memset(&req, 0, sizeof req);
    drv_resp_free(&x->resp);
    memset(&x->resp, 0, sizeof x->resp);
    x->resp.openai = drv_openai_path(url);
    req.method = method;
    req.path = url;
    req.head = h->head;
    req.conn = c;
    req.resumed = resumed;
    char remote[64] = "";
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, remote, sizeof remote);
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, remote,
                      sizeof remote);
    }
    req.remote = remote;
    if (x->too_large) {
        drv_err(&err, 413, "payload_too_large", "", "request body is larger than %zu bytes%s",
                x->max_body, x->max_body > DRV_MAX_BODY ? " (the bound of a manifest)" : "");
        drv_resp_error(&x->resp, &err);
        return send_resp(h, c, &x->resp);
    }
    x->req = &req;
    x->qlen = 0;
    if (MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_query, x) >
        DRV_MAX_QUERY) {
        drv_err_invalid(&err, "", "too many query arguments (at most %d)", DRV_MAX_QUERY);
        drv_resp_error(&x->resp, &err);
        return send_resp(h, c, &x->resp);
    }
    if (x->len && memchr(x->body, '\0', x->len)) {
        drv_err_invalid(&err, "", "the body contains a NUL byte");
        drv_resp_error(&x->resp, &err);
        return send_resp(h, c, &x->resp);
    }
    req.body = x->body;
    req.body_len = x->len;
    if (x->up) {
        drv_upload_finish(x->up);
        req.upload = x->up;
    }
    req.if_match = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "If-Match");
    req.authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");

    drv_principal_t who;
    drv_error_t auth_err;
    int auth = drv_authenticate(h->head, req.authorization, &who, &auth_err);
    drv_api_dispatch(&req, &x->resp, &who, auth, &auth_err);
    limit_failure(h, &x->resp, remote);

    if (x->resp.job) {   /* inference: the gateway answers later */
        x->job = x->resp.job;
        x->resp.job = NULL;
        suspend(h, c, x);
        drv_gw_job_start(x->job, c, x->body, x->len);
        x->body = NULL;   /* the job owns it now */
        x->len = x->cap = 0;
        return MHD_YES;
    }

    if (x->resp.hold_ms > 0 && !resumed) {
        hold(h, c, x, x->resp.hold_key, x->resp.hold_ms);
        return MHD_YES;
    }
    if (x->resp.wait_seq && drv_store_committed(h->head->store) < x->resp.wait_seq) {
        x->answered = true;
        wait_durable(h, c, x, x->resp.wait_seq);
        return MHD_YES;
    }
    return send_resp(h, c, &x->resp);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    conn_ctx_t *x = *con_cls;
    if (!x)
        return;
    if (x->suspended)
        atomic_fetch_sub(&((drv_http_t *)cls)->suspended, 1);
    if (x->job)
        drv_gw_job_release(x->job);
    free(x->body);
    drv_upload_free(x->up);
    drv_resp_free(&x->resp);
    free(x);
    *con_cls = NULL;
}

const char *drv_req_header(const drv_req_t *req, const char *name)
{
    return req->conn ? MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name) : NULL;
}

/* The accept queue: as deep as the kernel allows (net.core.somaxconn, at
 * most 65535). Thousands of nodes joining at once over TLS arrive faster
 * than the handshakes are served; a full queue drops their SYNs, each one a
 * connect that stalls a second or more (issue 18: 1,024 overflowed at
 * 5,000 nodes joining at 500 a second). */
static unsigned listen_backlog(void)
{
    unsigned n = 4096;
    FILE *f = fopen("/proc/sys/net/core/somaxconn", "re");
    if (f) {
        if (fscanf(f, "%u", &n) != 1 || n < 1024)
            n = 1024;
        fclose(f);
    }
    return n > 65535 ? 65535 : n;
}

/* TLS 1.2 and 1.3 only (GnuTLS priorities), 1.3 preferred */
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

static struct MHD_Daemon *http_start(const char *listen, int threads,
                                     MHD_AccessHandlerCallback on_req, void *cls,
                                     MHD_RequestCompletedCallback on_done, const char *cert,
                                     const char *key, drv_error_t *err)
{
    if (cert && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        drv_err(err, 500, "internal", "tls", "this libmicrohttpd was built without TLS");
        return NULL;
    }
    struct sockaddr_storage ss;
    if (drv_listen_parse(listen, &ss, err) < 0)
        return NULL;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG | MHD_USE_TURBO;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (cert)
        flags |= MHD_USE_TLS;
    /* the certificate comes from api/http_cert.h at each handshake, so that
     * a renewed one is served without a restart */
    if (cert && drv_http_cert_set(cert, key, err) < 0)
        return NULL;
    struct MHD_OptionItem tls_opts[] = {
        {MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)drv_http_cert_retrieve},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)TLS_PRIORITIES},
        {MHD_OPTION_END, 0, NULL},
    };
    struct MHD_Daemon *d =
        MHD_start_daemon(flags, 0, NULL, NULL, on_req, cls,
                         MHD_OPTION_ARRAY, cert ? tls_opts : tls_opts + 2,
                         MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                         MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(threads > 0 ? threads : 2),
                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)10000,
                         /* MHD zeroes this per request: keep it small (headers only;
                          * bodies stream through on_request) */
                         MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(16 * 1024),
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
                         MHD_OPTION_LISTEN_BACKLOG_SIZE, listen_backlog(),
                         MHD_OPTION_NOTIFY_COMPLETED, on_done, cls,
                         MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
                         MHD_OPTION_END);
    if (!d && cert)
        drv_http_cert_clear();
    if (!d)
        drv_err(err, 500, "internal", "listen",
                "cannot listen on %s (address in use, or not an address of this machine%s?)",
                listen, cert ? ", or a certificate and key that do not match" : "");
    return d;
}

static void http_stop(struct MHD_Daemon *d, atomic_int *suspended)
{
    /* MHD_stop_daemon aborts while a connection is suspended: wait until
     * every resumed one has been re-entered (bounded) */
    for (int i = 0; i < 500 && atomic_load(suspended) > 0; i++)
        usleep(10 * 1000);
    MHD_quiesce_daemon(d);
    MHD_stop_daemon(d);
}

int drv_http_set_cert(drv_http_t *h, const char *cert_pem, const char *key_pem,
                      drv_error_t *err)
{
    if (!h->tls)
        return drv_err_invalid(err, "tls", "the API listener speaks plain HTTP");
    return drv_http_cert_set(cert_pem, key_pem, err);
}

static int body_add(char **body, size_t *len, size_t *cap, size_t max, bool *too_large,
                    const char *data, size_t n)
{
    if (*too_large || *len + n > max) {
        *too_large = true;
        return 0;
    }
    if (*len + n + 1 > *cap) {
        size_t ncap = *cap ? *cap : 1024;
        while (ncap < *len + n + 1)
            ncap *= 2;
        char *nb = realloc(*body, ncap);
        if (!nb)
            return -1;
        *body = nb;
        *cap = ncap;
    }
    memcpy(*body + *len, data, n);
    *len += n;
    (*body)[*len] = '\0';
    return 0;
}

drv_http_t *drv_http_create(drv_head_t *head, const char *listen, int threads, drv_error_t *err)
{
    return drv_http_create_tls(head, listen, threads, NULL, NULL, err);
}

drv_http_t *drv_http_create_tls(drv_head_t *head, const char *listen, int threads,
                                const char *cert_pem, const char *key_pem, drv_error_t *err)
{
    struct sockaddr_storage ss;
    if (drv_listen_parse(listen, &ss, err) < 0)
        return NULL;
    drv_http_t *h = calloc(1, sizeof *h);
    if (!h) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    h->head = head;
    if (!head->audit && !(head->audit = h->audit = drv_audit_create(head->state,
                                                (size_t)head->cfg.audit_max_entries,
                                                head->cfg.audit_max_age_s))) {
        free(h);
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    if (head->cfg.auth_fail_rate > 0 &&
        !(h->rl = drv_ratelimit_create(head->cfg.auth_fail_rate,
                                       head->cfg.auth_fail_burst > 0 ? head->cfg.auth_fail_burst
                                                                     : DRV_RL_BURST,
                                       head->cfg.auth_fail_table > 0 ? head->cfg.auth_fail_table
                                                                     : DRV_RL_CAP))) {
        if (h->audit)
            head->audit = NULL;
        drv_audit_destroy(h->audit);
        free(h);
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->timer_cv, NULL);
    drv_store_on_commit(head->store, on_commit, h);
    h->d = http_start(listen, threads, on_request, h, on_completed, cert_pem, key_pem, err);
    if (!h->d) {
        drv_store_on_commit(head->store, NULL, NULL);
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->timer_cv);
        if (h->audit)
            head->audit = NULL;
        drv_audit_destroy(h->audit);
        drv_ratelimit_destroy(h->rl);
        free(h);
        return NULL;
    }
    h->tls = cert_pem != NULL;
    pthread_create(&h->timer, NULL, timer_main, h);
    head->wake = on_wake;
    head->wake_ctx = h;
    return h;
}

int drv_http_port(const drv_http_t *h)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : -1;
}

void drv_http_destroy(drv_http_t *h)
{
    if (!h)
        return;
    /* From here on nothing is suspended anew (hold and wait_durable see
     * stop). Suspended answers wait for their writes: let the store commit
     * them (the commit callback resumes them); held long polls end now. */
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_signal(&h->timer_cv);
    uint64_t maxseq = 0;
    for (size_t i = 0; i < h->nw; i++)
        if (h->w[i].seq > maxseq)
            maxseq = h->w[i].seq;
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->timer, NULL);
    h->head->wake = NULL;
    if (maxseq)
        drv_store_wait(h->head->store, maxseq);
    resume_pollers(h, 0, INT64_MAX);
    http_stop(h->d, &h->suspended);
    if (h->tls)
        drv_http_cert_clear();
    drv_store_on_commit(h->head->store, NULL, NULL);
    free(h->w);
    free(h->p);
    if (h->audit)
        h->head->audit = NULL;
    drv_audit_destroy(h->audit);
    drv_ratelimit_destroy(h->rl);
    pthread_cond_destroy(&h->timer_cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
