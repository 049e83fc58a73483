/* serve.c — drover-gateway's HTTP/1.1 server, run on the gateway thread's
 * own epoll loop (gateway.h, drv_gw_io_t) beside the replica connections:
 * a request is read, authenticated with the head's tokens (creds.h) and
 * routed (route.c) on the thread that proxies it, and its answer is
 * written there too. No thread hop, no libmicrohttpd: the hop costs what a
 * proxy's hop costs (docs/architecture.md "drover-gateway's server").
 *
 *   POST /v1/deployments/{d}/predict
 *   POST /openai/v1/chat/completions, /openai/v1/completions
 *   GET  /openai/v1/models, /openai/v1/models/{d}
 *   GET  /metrics      this gateway's counters for the caller's deployments,
 *                      its process_* series and drover_build_info
 *   GET  /healthz      no token: whether the head answers, the routes version
 *
 * HTTP: keep-alive and pipelining (one request at a time per connection:
 * the next is read once the answer is queued), request heads parsed by
 * common/http1.c (16 KiB at most), bodies by Content-Length up to
 * DRV_MAX_BODY (413 beyond, unread; 411 for a chunked upload),
 * "Expect: 100-continue" honoured. Answers: buffered ones with their
 * Content-Length; streamed ones (the job's M_STREAM) with the replica's
 * Content-Length or chunked (close-delimited for HTTP/1.0), pulled from
 * the job's buffer only while the client takes them (the replica is
 * paused meanwhile, upstream.c). A client that closes (EPOLLRDHUP) while
 * its request runs cancels it. Connections idle for SV_IDLE_MS are closed.
 * With drv_gw_serve_create_tls every connection speaks TLS (gateway/tls.c).
 *
 * Threads: everything here runs on the gateway thread (io callbacks), but
 * create (main, before the listener is watched), and destroy (main, after
 * drv_gateway_join called close). Per-connection state is the
 * connection's; a job's shared fields are read under its mutex.
 *
 * This file: the connections, their output and the streamed answers, the
 * loop's callbacks, create/destroy. The request path (head, body, routes,
 * authentication, the job's start) is serve_request.c; what the two share
 * is serve_int.h.
 */
#define _GNU_SOURCE
#include "gateway/serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/http1.h"
#include "common/json.h"
#include "common/listen.h"
#include "common/log.h"
#include "common/openai.h"
#include "common/ratelimit.h"
#include "common/util.h"
#include "gateway/gw_impl.h"
#include "gateway/serve_int.h"
#include "gateway/table.h"
#include "gateway/tls.h"

static ssize_t conn_recv(sconn_t *c, void *p, size_t n)
{
    return c->ssl ? drv_gw_tls_recv(c->ssl, p, n) : recv(c->fd, p, n, 0);
}

static ssize_t conn_send(sconn_t *c, const void *p, size_t n)
{
    return c->ssl ? drv_gw_tls_send(c->ssl, p, n) : send(c->fd, p, n, MSG_NOSIGNAL);
}

/* --- output ------------------------------------------------------------------------ */

static int out_add(sconn_t *c, const void *p, size_t n)
{
    if (c->out_off && c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    if (c->out_len + n > c->out_cap) {
        size_t ncap = c->out_cap ? c->out_cap : 4096;
        while (ncap < c->out_len + n)
            ncap *= 2;
        char *nb = realloc(c->out, ncap);
        if (!nb)
            return -1;
        c->out = nb;
        c->out_cap = ncap;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
    return 0;
}

int drv_gw_serve__out_str(sconn_t *c, const char *str)
{
    return out_add(c, str, strlen(str));
}

static int out_fmt(sconn_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int out_fmt(sconn_t *c, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    if ((size_t)n < sizeof tmp)
        return out_add(c, tmp, (size_t)n);
    char *big = malloc((size_t)n + 1);   /* a long header: rare */
    if (!big)
        return -1;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = out_add(c, big, (size_t)n);
    free(big);
    return rc;
}

static const char *reason(int status)
{
    static const struct {
        int s;
        const char *r;
    } t[] = {{100, "Continue"}, {200, "OK"}, {201, "Created"}, {202, "Accepted"},
             {204, "No Content"}, {400, "Bad Request"}, {401, "Unauthorized"},
             {403, "Forbidden"}, {404, "Not Found"}, {405, "Method Not Allowed"},
             {408, "Request Timeout"}, {411, "Length Required"}, {413, "Content Too Large"},
             {414, "URI Too Long"}, {422, "Unprocessable Content"}, {429, "Too Many Requests"},
             {431, "Request Header Fields Too Large"}, {499, "Client Closed Request"},
             {500, "Internal Server Error"}, {501, "Not Implemented"}, {502, "Bad Gateway"},
             {503, "Service Unavailable"}, {504, "Gateway Timeout"},
             {505, "HTTP Version Not Supported"}, {0, NULL}};
    for (int i = 0; t[i].r; i++)
        if (t[i].s == status)
            return t[i].r;
    return "Status";
}

static void status_line(sconn_t *c, int status)
{
    out_fmt(c, "HTTP/1.1 %d %s\r\n%s", status, reason(status),
            !c->keep_alive ? "Connection: close\r\n"
            : c->http10    ? "Connection: keep-alive\r\n"   /* 1.0 asked for it: granted */
                           : "");
}

/* A whole answer of the server's own (errors, /metrics, /healthz). */
void drv_gw_serve__answer(sconn_t *c, int status, const char *ctype, const char *body,
                          size_t len, int retry_after, const char *hname, const char *hvalue)
{
    status_line(c, status);
    out_fmt(c, "Content-Type: %s\r\nContent-Length: %zu\r\n", ctype, len);
    if (retry_after > 0)
        out_fmt(c, "Retry-After: %d\r\n", retry_after);
    if (hname)
        out_fmt(c, "%s: %s\r\n", hname, hvalue);
    drv_gw_serve__out_str(c, "\r\n");
    out_add(c, body, len);
}


static void resp_json(sresp_t *r, int status, json_t *doc)
{
    free(r->body);
    r->status = status;
    r->content_type = "application/json";
    r->body = drv_json_dump(doc, &r->len);
    json_decref(doc);
}

void drv_gw_serve__resp_error(sresp_t *r, const drv_error_t *err)
{
    resp_json(r, err->status ? err->status : 500,
              r->openai ? drv_openai_error(err) : drv_error_json(err));
}

static void resp_free(sresp_t *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

void drv_gw_serve__answer_resp(sconn_t *c, sresp_t *r)
{
    drv_gw_serve__answer(c, r->status, r->content_type ? r->content_type : "application/json",
                         r->body, r->len, r->retry_after, r->header_name, r->header_value);
    resp_free(r);
}

void drv_gw_serve__answer_err(sconn_t *c, const drv_error_t *err, int retry_after)
{
    sresp_t r;
    memset(&r, 0, sizeof r);
    r.openai = drv_openai_path(c->path);
    drv_gw_serve__resp_error(&r, err);
    r.retry_after = retry_after;
    drv_gw_serve__answer_resp(c, &r);
}

/* A failed authentication (401) spends one of the address's tokens; with
 * none left it is answered 429 with Retry-After (common/ratelimit.h). */
void drv_gw_serve__answer_unauth(sconn_t *c, const drv_error_t *err)
{
    int retry = 0;
    if (err->status != 401 || !c->sv->rl ||
        drv_ratelimit_fail(c->sv->rl, c->remote, drv_mono_ms(), &retry) == 0) {
        drv_gw_serve__answer_err(c, err, 0);
        return;
    }
    drv_error_t e;
    drv_err(&e, 429, "resource_exhausted", "", "too many failed authentications from %s: "
            "retry in %d s (a valid credential is not limited)",
            c->remote[0] ? c->remote : "this address", retry);
    drv_gw_serve__answer_err(c, &e, retry);
}

void drv_gw_serve__answer_json(sconn_t *c, int status, json_t *doc)
{
    sresp_t r;
    memset(&r, 0, sizeof r);
    resp_json(&r, status, doc);
    drv_gw_serve__answer_resp(c, &r);
}

/* --- connections --------------------------------------------------------------------- */

static void watch(drv_gw_serve_t *sv, sconn_t *c, uint32_t events)
{
    if (c->events == events)
        return;
    c->events = events;
    drv_gateway_io_watch(sv->g, EPOLL_CTL_MOD, c->fd, c, events);
}

static void conn_close(drv_gw_serve_t *sv, sconn_t *c)
{
    if (c->job) {
        drv_gw_job_release(c->job);   /* cancels a request still running */
        c->job = NULL;
    }
    if (c->in_ready) {   /* off the ready list */
        for (sconn_t **p = &sv->ready; *p; p = &(*p)->rnext)
            if (*p == c) {
                *p = c->rnext;
                break;
            }
    }
    drv_gateway_io_watch(sv->g, EPOLL_CTL_DEL, c->fd, c, 0);
    SSL_free(c->ssl);
    close(c->fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        sv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    sv->n_conns--;
    free(c->body);
    free(c->out);
    free(c);
}

/* Write what is queued. -1: the connection is gone (closed here). */
int drv_gw_serve__flush(drv_gw_serve_t *sv, sconn_t *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = conn_send(c, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            conn_close(sv, c);
            return -1;
        }
        c->out_off += (size_t)n;
    }
    bool pending = c->out_off < c->out_len;
    if (!pending) {
        c->out_off = c->out_len = 0;
        if (c->out_cap > SV_OUT_KEEP) {
            free(c->out);
            c->out = NULL;
            c->out_cap = 0;
        }
        if (c->st == C_CLOSING) {
            c->st = C_LINGER;
            if (c->ssl)
                SSL_shutdown(c->ssl);   /* close_notify: the end of a close-delimited body */
            if (shutdown(c->fd, SHUT_WR) < 0) {
                conn_close(sv, c);
                return -1;
            }
        }
    }
    /* reading goes on while a request runs (what is pipelined waits in
     * c->in), so that the registration rarely changes; a full c->in stops
     * it, and so does output backed up for a client that does not read
     * (else pipelined requests would queue answers without bound) */
    bool backed = c->out_len - c->out_off >= SV_OUT_HIGH;
    uint32_t ev = c->st == C_CLOSING ? 0u
                  : backed || (c->st == C_JOB && c->in_len >= DRV_H1_MAX_HEAD) ? EPOLLRDHUP
                                                                             : EPOLLIN | EPOLLRDHUP;
    watch(sv, c, ev | (pending ? EPOLLOUT : 0u));
    return 0;
}


/* The job has news (gateway thread, under the job's mutex): answer it at
 * this turn's tick, not from inside the gateway's callbacks. */
void drv_gw_serve__on_job_news(drv_gw_job_t *j, void *ctx)
{
    (void)j;
    sconn_t *c = ctx;
    if (!c->in_ready) {
        c->in_ready = true;
        c->rnext = c->sv->ready;
        c->sv->ready = c;
    }
}

/* The answer is queued in full: the job goes, the next request may come. */
static void job_finished(drv_gw_serve_t *sv, sconn_t *c)
{
    drv_gw_job_release(c->job);
    c->job = NULL;
    c->headers_sent = c->chunked = false;
    c->st = c->keep_alive ? C_HEAD : C_CLOSING;
    if (drv_gw_serve__flush(sv, c) == 0 && c->st == C_HEAD && c->in_len)
        drv_gw_serve__process(sv, c);   /* a pipelined request */
}

/* Move what the job has for the client into the output (under j->mu).
 * Returns 1 when the answer is complete, 0 when more will come, -1 when
 * the stream broke (the connection must close without ending it). */
static int pull_locked(sconn_t *c, drv_gw_job_t *j)
{
    if (!c->headers_sent) {
        c->headers_sent = true;
        if (j->err.status) {
            sresp_t r;
            memset(&r, 0, sizeof r);
            r.openai = drv_openai_path(c->path);
            snprintf(j->err.code, sizeof j->err.code, "%s", drv_gw_error_code(j->err.status));
            drv_gw_serve__resp_error(&r, &j->err);
            drv_gw_serve__answer(c, j->err.status, "application/json", r.body, r.len,
                                 j->retry_after, j->replica[0] ? "X-Drover-Replica" : NULL,
                                 j->replica);
            resp_free(&r);
            return 1;
        }
        status_line(c, j->status);
        for (size_t off = 0; off < j->hdr_len;) {
            const char *name = j->hdr + off;
            const char *value = name + strlen(name) + 1;
            out_fmt(c, "%s: %s\r\n", name, value);
            off = (size_t)(value - j->hdr) + strlen(value) + 1;
        }
        if (j->replica[0])
            out_fmt(c, "X-Drover-Replica: %s\r\n", j->replica);
        if (j->mode == M_BUFFER) {
            out_fmt(c, "Content-Length: %zu\r\n\r\n", j->len);
            out_add(c, j->buf, j->len);
            return 1;
        }
        if (j->content_length >= 0) {
            out_fmt(c, "Content-Length: %lld\r\n\r\n", (long long)j->content_length);
        } else if (!c->http10) {
            c->chunked = true;
            drv_gw_serve__out_str(c, "Transfer-Encoding: chunked\r\n\r\n");
        } else {   /* HTTP/1.0: the end of the body is the end of the connection */
            if (c->keep_alive) {
                c->keep_alive = false;
                drv_gw_serve__out_str(c, "Connection: close\r\n");
            }
            drv_gw_serve__out_str(c, "\r\n");
        }
    }
    /* a stream: take what the job has while the client keeps up */
    while (j->len > j->off && c->out_len - c->out_off < SV_OUT_HIGH) {
        size_t n = j->len - j->off;
        if (n > SV_OUT_HIGH)
            n = SV_OUT_HIGH;
        if (c->chunked)
            out_fmt(c, "%zx\r\n", n);
        out_add(c, j->buf + j->off, n);
        if (c->chunked)
            drv_gw_serve__out_str(c, "\r\n");
        j->off += n;
        if (j->off == j->len) {
            j->off = j->len = 0;
            if (j->paused) {
                j->paused = false;
                drv_gw_post(j, MSG_UNPAUSE);   /* taken at the next turn */
            }
        }
    }
    if (j->len > j->off)
        return 0;   /* the client is slow: EPOLLOUT brings us back */
    if (j->eof) {
        if (j->failed)
            return -1;
        if (c->chunked)
            drv_gw_serve__out_str(c, "0\r\n\r\n");
        return 1;
    }
    j->reader_waiting = true;   /* the gateway wakes us with more */
    atomic_store(&j->suspended, true);
    return 0;
}

static void respond(drv_gw_serve_t *sv, sconn_t *c)
{
    drv_gw_job_t *j = c->job;
    if (!j)
        return;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        if (!j->ready) {   /* nothing for the client yet */
            atomic_store(&j->suspended, true);
            pthread_mutex_unlock(&j->mu);
            return;
        }
        int r = pull_locked(c, j);
        bool more = j->len > j->off;   /* the output filled up before the job emptied */
        pthread_mutex_unlock(&j->mu);
        if (r > 0) {
            job_finished(sv, c);
            return;
        }
        if (r < 0) {
            c->keep_alive = false;
            c->st = C_CLOSING;   /* what was sent goes out, then the close tells the client */
            drv_gw_serve__flush(sv, c);
            return;
        }
        if (drv_gw_serve__flush(sv, c) < 0 || !more || c->out_off < c->out_len)
            return;   /* more comes with a wake-up, or EPOLLOUT when the client takes it */
        /* the client took all of it at once: no EPOLLOUT will come; pull again */
    }
}

/* Readable: take what came (into the body directly when that is what is
 * read), then process it. */
static void on_readable(drv_gw_serve_t *sv, sconn_t *c)
{
    for (;;) {
        char *dst;
        size_t room;
        /* over TLS everything goes through c->in: a record may hold the end
         * of a body and the next (pipelined) request, which must not stay
         * in the SSL buffer where epoll cannot see it */
        if (c->st == C_BODY && c->in_len == 0 && !c->ssl) {
            dst = c->body + c->body_len;
            room = c->body_want - c->body_len;
        } else {
            dst = c->in + c->in_len;
            room = DRV_H1_MAX_HEAD - c->in_len;
        }
        if (room == 0)
            break;
        ssize_t n = conn_recv(c, dst, room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {   /* the client left (or broke the connection) */
            conn_close(sv, c);
            return;
        }
        if (dst == c->in + c->in_len)
            c->in_len += (size_t)n;
        else
            c->body_len += (size_t)n;
        if ((size_t)n < room && !c->ssl)   /* SSL_read gives one record at a time */
            break;
    }
    drv_gw_serve__process(sv, c);
}

static void on_accept(drv_gw_serve_t *sv)
{
    for (;;) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        int fd = accept4(sv->lfd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* the listener stays readable: pause it, or the loop spins */
                drv_warn("gateway: accept: %s; not accepting for 100 ms", strerror(errno));
                drv_gateway_io_watch(sv->g, EPOLL_CTL_MOD, sv->lfd, sv, 0);
                sv->accept_again_ms = drv_gw_now_ms() + 100;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
                drv_warn("gateway: accept: %s", strerror(errno));
            }
            return;
        }
        sconn_t *c = sv->n_conns < SV_MAX_CONNS ? calloc(1, sizeof *c) : NULL;
        if (!c) {
            close(fd);   /* over the limit: the client sees a reset, tries later */
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->sv = sv;
        c->fd = fd;
        if (peer.ss_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)&peer)->sin_addr, c->remote,
                      sizeof c->remote);
        else if (peer.ss_family == AF_INET6)
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&peer)->sin6_addr, c->remote,
                      sizeof c->remote);
        c->st = C_HEAD;
        c->keep_alive = true;
        c->last_ms = drv_gw_now_ms();
        c->events = EPOLLIN | EPOLLRDHUP;
        bool tls = sv->tls_on;   /* not sv->tls: another thread may be replacing it */
        if (tls) {
            pthread_mutex_lock(&sv->tls_mu);
            c->ssl = SSL_new(sv->tls);
            pthread_mutex_unlock(&sv->tls_mu);
        }
        if (tls && (!c->ssl || SSL_set_fd(c->ssl, fd) != 1)) {
            SSL_free(c->ssl);
            close(fd);
            free(c);
            continue;
        }
        if (c->ssl)
            SSL_set_accept_state(c->ssl);
        if (drv_gateway_io_watch(sv->g, EPOLL_CTL_ADD, fd, c, c->events) < 0) {
            SSL_free(c->ssl);
            close(fd);
            free(c);
            continue;
        }
        c->next = sv->conns;
        if (sv->conns)
            sv->conns->prev = c;
        sv->conns = c;
        sv->n_conns++;
    }
}

/* --- the loop's callbacks ---------------------------------------------------------------- */

static void io_event(void *ctx, void *obj, uint32_t events)
{
    drv_gw_serve_t *sv = ctx;
    if (obj == sv) {
        on_accept(sv);
        return;
    }
    sconn_t *c = obj;
    c->last_ms = drv_gw_now_ms();
    if (events & EPOLLERR) {
        conn_close(sv, c);
        return;
    }
    if (events & EPOLLOUT) {
        if (c->job && c->headers_sent) {
            respond(sv, c);   /* a stream: pull more now that the client took some */
            return;
        }
        if (drv_gw_serve__flush(sv, c) < 0)
            return;
        if (c->st == C_HEAD && c->in_len && c->out_len - c->out_off < SV_OUT_HIGH) {
            /* pipelined requests held while the output was backed up */
            drv_gw_serve__process(sv, c);
            return;
        }
    }
    if (c->st == C_JOB && (events & (EPOLLRDHUP | EPOLLHUP))) {
        conn_close(sv, c);   /* the client left while its request runs: cancel */
        return;
    }
    if (c->st == C_LINGER) {
        char sink[4096];
        ssize_t n;
        while ((n = conn_recv(c, sink, sizeof sink)) > 0)
            ;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            conn_close(sv, c);
        return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP))
        on_readable(sv, c);
}

static int io_tick(void *ctx)
{
    drv_gw_serve_t *sv = ctx;
    while (sv->ready) {
        sconn_t *c = sv->ready;
        sv->ready = c->rnext;
        c->in_ready = false;
        c->last_ms = drv_gw_now_ms();
        respond(sv, c);
    }
    int64_t now = drv_gw_now_ms();
    if (sv->accept_again_ms && now >= sv->accept_again_ms) {
        sv->accept_again_ms = 0;
        drv_gateway_io_watch(sv->g, EPOLL_CTL_MOD, sv->lfd, sv, EPOLLIN);
    }
    if (now >= sv->next_sweep_ms) {   /* idle connections */
        sv->next_sweep_ms = now + 1000;
        for (sconn_t *c = sv->conns, *nx; c; c = nx) {
            nx = c->next;
            if ((c->st != C_JOB && now - c->last_ms > SV_IDLE_MS) ||
                (c->st == C_LINGER && now - c->last_ms > SV_LINGER_MS))
                conn_close(sv, c);
        }
    }
    int64_t next = sv->next_sweep_ms;
    if (sv->accept_again_ms && sv->accept_again_ms < next)
        next = sv->accept_again_ms;
    return (int)(next - now);
}

static void io_close(void *ctx)
{
    drv_gw_serve_t *sv = ctx;
    while (sv->conns)
        conn_close(sv, sv->conns);
    if (sv->lfd >= 0) {
        close(sv->lfd);
        sv->lfd = -1;
    }
}

/* --- life ------------------------------------------------------------------------------- */

drv_gw_serve_t *drv_gw_serve_create(drv_gateway_t *g, const drv_gw_front_t *front,
                                    const char *addr, drv_error_t *err)
{
    return drv_gw_serve_create_tls(g, front, addr, NULL, NULL, err);
}

drv_gw_serve_t *drv_gw_serve_create_tls(drv_gateway_t *g, const drv_gw_front_t *front,
                                        const char *addr, const char *cert_pem,
                                        const char *key_pem, drv_error_t *err)
{
    struct sockaddr_storage ss;
    if (drv_listen_parse(addr, &ss, err) < 0)
        return NULL;
    drv_gw_serve_t *sv = calloc(1, sizeof *sv);
    if (!sv) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    sv->g = g;
    sv->front = *front;
    if (cert_pem && !(sv->tls = drv_gw_tls_ctx(cert_pem, key_pem, err))) {
        free(sv);
        return NULL;
    }
    pthread_mutex_init(&sv->tls_mu, NULL);
    sv->tls_on = sv->tls != NULL;
    sv->lfd = -1;
    if (front->fail_rate > 0 &&
        !(sv->rl = drv_ratelimit_create(front->fail_rate,
                                        front->fail_burst > 0 ? front->fail_burst : DRV_RL_BURST,
                                        front->fail_table > 0 ? (size_t)front->fail_table
                                                              : DRV_RL_CAP))) {
        drv_err_internal(err, "out of memory");
        goto error;
    }
    sv->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t sl = ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                            : sizeof(struct sockaddr_in);
    if (sv->lfd < 0 || setsockopt(sv->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(sv->lfd, (struct sockaddr *)&ss, sl) < 0 || listen(sv->lfd, 1024) < 0) {
        drv_err(err, 400, "invalid", "listen", "cannot listen on %s: %s", addr,
                strerror(errno));
        goto error;
    }
    sl = sizeof ss;
    if (getsockname(sv->lfd, (struct sockaddr *)&ss, &sl) < 0) {
        drv_err_internal(err, "getsockname: %s", strerror(errno));
        goto error;
    }
    sv->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
    sv->io = (drv_gw_io_t){io_event, io_tick, io_close, sv};
    drv_gateway_set_io(g, &sv->io);
    if (drv_gateway_io_watch(g, EPOLL_CTL_ADD, sv->lfd, sv, EPOLLIN) < 0) {
        drv_gateway_set_io(g, NULL);
        drv_err_internal(err, "cannot watch the listening socket: %s", strerror(errno));
        goto error;
    }
    return sv;
error:
    if (sv->lfd >= 0)
        close(sv->lfd);
    SSL_CTX_free(sv->tls);
    pthread_mutex_destroy(&sv->tls_mu);
    drv_ratelimit_destroy(sv->rl);
    free(sv);
    return NULL;
}

int drv_gw_serve_port(const drv_gw_serve_t *sv)
{
    return sv->port;
}

int drv_gw_serve_set_cert(drv_gw_serve_t *sv, const char *cert_pem, const char *key_pem,
                          drv_error_t *err)
{
    if (!sv->tls_on)
        return drv_err_invalid(err, "tls", "this listener speaks plain HTTP");
    SSL_CTX *ctx = drv_gw_tls_ctx(cert_pem, key_pem, err);   /* off the lock */
    if (!ctx)
        return -1;
    pthread_mutex_lock(&sv->tls_mu);
    SSL_CTX *old = sv->tls;
    sv->tls = ctx;
    pthread_mutex_unlock(&sv->tls_mu);
    SSL_CTX_free(old);   /* its open connections hold their own references */
    return 0;
}

void drv_gw_serve_destroy(drv_gw_serve_t *sv)
{
    if (!sv)
        return;
    SSL_CTX_free(sv->tls);
    pthread_mutex_destroy(&sv->tls_mu);
    drv_ratelimit_destroy(sv->rl);
    if (sv->lfd >= 0)   /* drv_gateway_join did not run io_close (never started) */
        close(sv->lfd);
    free(sv);
}
