/* upconn.c — the gateway thread's HTTP/1.1 connections to replicas: a pool
 * of kept-alive connections per replica, non-blocking connects, writing a
 * request (head and body in one sendmsg), reading the answer through
 * common/http1.c's streaming parser into upstream.c's callbacks, pausing
 * while a stream's buffer is full, deadlines, and health probes.
 *
 * Why not libcurl: a proxied request here costs one sendmsg and one recv
 * on a connection that stays in the epoll between requests; libcurl added
 * a liveness poll() per reuse, per-transfer allocations and formatting,
 * about a sixth of the gateway's CPU under load (docs/benchmarks.md).
 *
 * Everything here runs on the gateway thread. A connection is in exactly
 * one place: g->uc_busy (carrying a job or a probe), its replica's idle
 * list (kept alive, still in the epoll so that a close by the replica is
 * seen), or g->uc_dead (closed this turn: freed by drv_gw_uc_reap once the
 * turn's epoll events, which may still name it, are handled). How a busy
 * connection ends is reported to upstream.c from the event loop only
 * (never from inside drv_gw_uc_send_*), so that its callers need not
 * expect re-entry.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/log.h"
#include "gateway/gw_impl.h"

#define UC_RBUF (64 * 1024)          /* one read at most */
#define UC_IDLE_MAX 1024             /* kept-alive connections per replica */
#define UC_CONNECT_MS 3000           /* a connect takes at most (or the deadline) */
#define UC_PROBE_MS 1000             /* a probe's whole time */
#define UC_RACE_MS 1000              /* a kept-alive connection closed this soon after the
                                        request went out, without a byte: the idle-close race */

enum { ST_CONNECT, ST_SEND, ST_RECV, ST_IDLE, ST_DEAD };

struct gw_uc {
    gw_uc_t *prev, *next;            /* busy list, a replica's idle list or the dead list */
    int fd;
    int st;
    uint32_t ev;                     /* epoll events it is registered for */
    bool in_epoll;
    bool reused;                     /* it carried an answer before this request */
    bool got;                        /* a byte of this answer came */
    bool paused;                     /* up_body asked to stop reading */
    bool reusable;                   /* the answer ended cleanly where the stream did */
    bool refused;                    /* up_head refused the answer: err says why */
    gw_rep_t *rep;                   /* whose pool it goes back to */
    unsigned ep_gen;                 /* rep->ep_gen when it connected: the same endpoint */
    drv_gw_job_t *job;               /* what it carries: a job ... */
    struct gw_probe *probe;          /* ... or a probe */
    int how;                         /* ST_DEAD before reporting: UC_* to report */
    const char *why;
    int64_t deadline_ms, connect_deadline_ms;
    int64_t sent_ms;                 /* when the whole request had gone out */
    const char *body;                /* the job's (the job outlives the transfer) */
    size_t body_len;
    size_t sent;                     /* of head and body */
    size_t req_len;
    char req[1536];                  /* the request head */
    char err[128];
    drv_h1_response_t resp;
};

/* --- lists ------------------------------------------------------------------------------ */

static void list_push(gw_uc_t **head, gw_uc_t *u)
{
    u->prev = NULL;
    u->next = *head;
    if (*head)
        (*head)->prev = u;
    *head = u;
}

static void list_remove(gw_uc_t **head, gw_uc_t *u)
{
    if (u->prev)
        u->prev->next = u->next;
    else
        *head = u->next;
    if (u->next)
        u->next->prev = u->prev;
    u->prev = u->next = NULL;
}

static void watch(drv_gateway_t *g, gw_uc_t *u, uint32_t want)
{
    if (u->in_epoll && u->ev == want)
        return;
    struct epoll_event ev = {.events = want, .data.u64 = (uint64_t)(uintptr_t)u | GW_UC_TAG};
    if (epoll_ctl(g->epfd, u->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, u->fd, &ev) < 0) {
        drv_warn("gateway: epoll_ctl on a replica connection: %s", strerror(errno));
        return;
    }
    u->in_epoll = true;
    u->ev = want;
}

/* What a busy connection waits for: writing while the request goes out,
 * reading unless the stream's buffer is full (then only ERR/HUP come). */
static void watch_busy(drv_gateway_t *g, gw_uc_t *u)
{
    watch(g, u, (u->st == ST_SEND ? EPOLLOUT : 0u) | (u->paused ? 0u : EPOLLIN | EPOLLRDHUP));
}

/* Closed now, freed at reap. Taken out of the epoll first: a child forked
 * meanwhile (the local provider starts agents) may still hold the file,
 * which would keep it registered past close(). */
static void uc_close(drv_gateway_t *g, gw_uc_t *u)
{
    if (u->fd >= 0) {
        if (u->in_epoll)
            epoll_ctl(g->epfd, EPOLL_CTL_DEL, u->fd, NULL);
        close(u->fd);
    }
    u->fd = -1;
    u->st = ST_DEAD;
    u->job = NULL;
    u->probe = NULL;
    list_push(&g->uc_dead, u);
}

void drv_gw_uc_reap(drv_gateway_t *g)
{
    while (g->uc_dead) {
        gw_uc_t *u = g->uc_dead;
        g->uc_dead = u->next;
        free(u);
    }
}

/* --- the endpoint ------------------------------------------------------------------------ */

/* "http://HOST:PORT" or "http://[V6]:PORT" (a path after it is ignored)
 * into r->addr and r->host. Numeric hosts need no lookup; a name is
 * looked up once per endpoint (agents report addresses, so that is rare). */
static int resolve(gw_rep_t *r, char *err, size_t errn)
{
    const char *e = r->endpoint;
    if (!e || strncmp(e, "http://", 7) != 0) {
        snprintf(err, errn, "endpoint '%s' is not http://HOST:PORT", e ? e : "");
        return -1;
    }
    e += 7;
    size_t hl = strcspn(e, "/?#");
    if (hl == 0 || hl >= sizeof r->host) {
        snprintf(err, errn, "endpoint '%s' has no usable host", r->endpoint);
        return -1;
    }
    memcpy(r->host, e, hl);
    r->host[hl] = '\0';
    char host[128], port[16];
    const char *colon;
    if (r->host[0] == '[') {
        const char *rb = strchr(r->host, ']');
        if (!rb || rb[1] != ':') {
            snprintf(err, errn, "endpoint '%s' has no port", r->endpoint);
            return -1;
        }
        snprintf(host, sizeof host, "%.*s", (int)(rb - r->host - 1), r->host + 1);
        colon = rb + 1;
    } else {
        colon = strrchr(r->host, ':');
        if (!colon) {
            snprintf(err, errn, "endpoint '%s' has no port", r->endpoint);
            return -1;
        }
        snprintf(host, sizeof host, "%.*s", (int)(colon - r->host), r->host);
    }
    snprintf(port, sizeof port, "%s", colon + 1);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc == EAI_NONAME) {
        hints.ai_flags = AI_NUMERICSERV;
        rc = getaddrinfo(host, port, &hints, &ai);
    }
    if (rc != 0 || !ai) {
        snprintf(err, errn, "cannot resolve '%s': %s", r->host, gai_strerror(rc));
        return -1;
    }
    memcpy(&r->addr, ai->ai_addr, ai->ai_addrlen);
    r->addr_len = ai->ai_addrlen;
    freeaddrinfo(ai);
    r->addr_ok = true;
    return 0;
}

void drv_gw_uc_forget(drv_gateway_t *g, gw_rep_t *r)
{
    while (r->idle) {
        gw_uc_t *u = r->idle;
        list_remove(&r->idle, u);
        uc_close(g, u);
    }
    r->n_idle = 0;
    r->addr_ok = false;
    r->ep_gen++;   /* busy connections to the old endpoint are not pooled */
}

/* --- ending -------------------------------------------------------------------------------- */

/* A busy connection is done: back to its replica's pool when the answer
 * ended cleanly, else closed; then what it carried hears how it went. */
static void finish(drv_gateway_t *g, gw_uc_t *u, int how, const char *why)
{
    drv_gw_job_t *j = u->job;
    struct gw_probe *p = u->probe;
    int status = u->resp.status;
    list_remove(&g->uc_busy, u);
    u->job = NULL;
    u->probe = NULL;
    if (how == UC_OK && u->reusable && !p && u->rep->n_idle < UC_IDLE_MAX &&
        u->ep_gen == u->rep->ep_gen) {
        u->st = ST_IDLE;
        u->reused = true;
        u->paused = false;
        watch(g, u, EPOLLIN | EPOLLRDHUP);   /* a close while idle is seen */
        list_push(&u->rep->idle, u);
        u->rep->n_idle++;
    } else {
        if (why && why != u->err) {   /* keep the message: the connection's memory goes */
            snprintf(u->err, sizeof u->err, "%s", why);
            why = u->err;
        }
        uc_close(g, u);
    }
    if (j) {
        j->uc = NULL;
        drv_gw_on_done(g, j, how, why);
    } else if (p) {
        drv_gw_probe_done(g, p, how == UC_OK ? status : 0);
    }
}

/* Report from the loop, not from the caller: due at once. */
static void fail_later(drv_gateway_t *g, gw_uc_t *u, int how, const char *fmt, const char *arg)
    __attribute__((format(printf, 4, 0)));
static void fail_later(drv_gateway_t *g, gw_uc_t *u, int how, const char *fmt, const char *arg)
{
    if (arg != u->err)   /* else the message is there already */
        snprintf(u->err, sizeof u->err, fmt, arg);
    u->st = ST_DEAD;
    u->how = how;
    u->why = u->err;
    u->deadline_ms = 0;
    g->uc_due_ms = 0;
}

/* --- the answer ------------------------------------------------------------------------------ */

static int on_head(void *ud, int status, const drv_h1_header_t *h, size_t nh)
{
    gw_uc_t *u = ud;
    const char *why = NULL;
    if (!u->job || drv_gw_up_head(u->job, status, h, nh, u->resp.content_length, &why) == 0)
        return 0;
    snprintf(u->err, sizeof u->err, "%s", why ? why : "the answer was refused");
    u->refused = true;
    return -1;
}

static int on_body(void *ud, const char *p, size_t n)
{
    gw_uc_t *u = ud;
    if (!u->job)
        return 0;   /* a probe: the status is all it wants */
    int rc = drv_gw_up_body(u->job, p, n);
    if (rc > 0)
        u->paused = true;
    return rc < 0 ? -1 : 0;
}

/* How a connection that closed or broke before the answer was complete
 * ends: the keep-alive race (retried: the request never ran) only for a
 * reused connection, not a byte back, and soon after the request went
 * out; anything else may have reached the model, so it is not re-run. */
static int broke_how(const gw_uc_t *u)
{
    return u->reused && !u->got && drv_gw_now_ms() - u->sent_ms < UC_RACE_MS ? UC_NOTHING
                                                                              : UC_FAILED;
}

/* A reset (RST) before a byte of the answer, soon after the request went
 * out, new connection or reused: the replica closed its listener with the
 * connection still in its accept queue (a replica stopping on a scale-down:
 * t/scale_down_drain) or closed it unread, so the request never ran, and it
 * is retried as the keep-alive race is. A clean close (FIN) of a new
 * connection may follow a request that ran (a crash after reading it), so
 * that one is not. */
static int broke_reset(const gw_uc_t *u)
{
    return !u->got && drv_gw_now_ms() - u->sent_ms < UC_RACE_MS ? UC_NOTHING : UC_FAILED;
}

static const char *closed_why(const gw_uc_t *u)
{
    return u->got ? "the replica closed the connection in the middle of its answer"
                  : "the replica closed the connection without answering";
}

static void do_read(drv_gateway_t *g, gw_uc_t *u)
{
    ssize_t n = recv(u->fd, g->rbuf, UC_RBUF, 0);
    if (n > 0) {
        u->got = true;
        size_t used = 0;
        const char *why = NULL;
        int rc = drv_h1_response_feed(&u->resp, g->rbuf, (size_t)n, &used, &why);
        if (rc < 0) {
            finish(g, u, UC_FAILED, u->refused ? u->err : why);
        } else if (rc == 1) {
            /* reusable: both sides finished, nothing extra came */
            u->reusable = u->resp.keep_alive && used == (size_t)n && u->st == ST_RECV;
            finish(g, u, UC_OK, NULL);
        } else if (u->paused) {
            watch_busy(g, u);   /* no reading until drv_gw_uc_resume */
        }
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n == 0) {
        const char *why = NULL;
        if (drv_h1_response_eof(&u->resp, &why) == 1) {   /* a body delimited by the close */
            u->reusable = false;
            finish(g, u, UC_OK, NULL);
            return;
        }
        finish(g, u, broke_how(u), closed_why(u));
        return;
    }
    int e = errno;
    snprintf(u->err, sizeof u->err, "reading the answer: %s", strerror(e));
    finish(g, u, e == ECONNRESET ? broke_reset(u) : broke_how(u), u->err);
}

/* --- the request -------------------------------------------------------------------------- */

/* Send what is left: 0 when all went or the rest waits for EPOLLOUT, -1
 * when the connection broke (u->err says why, *how how to report it; the
 * caller reports: finish() from the loop, fail_later() from send_*). */
static int do_send(drv_gateway_t *g, gw_uc_t *u, int *how)
{
    struct iovec iov[2];
    int n = 0;
    if (u->sent < u->req_len)
        iov[n++] = (struct iovec){u->req + u->sent, u->req_len - u->sent};
    size_t boff = u->sent > u->req_len ? u->sent - u->req_len : 0;
    if (boff < u->body_len)
        iov[n++] = (struct iovec){(char *)u->body + boff, u->body_len - boff};
    if (n) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(u->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                watch_busy(g, u);
                return 0;
            }
            int e = errno;
            snprintf(u->err, sizeof u->err, "sending the request: %s", strerror(e));
            /* the request did not all go out: the replica cannot have run it */
            *how = (u->reused || e == ECONNRESET || e == EPIPE) && !u->got ? UC_NOTHING : UC_FAILED;
            return -1;
        }
        u->sent += (size_t)w;
        if (u->sent < u->req_len + u->body_len) {
            watch_busy(g, u);
            return 0;
        }
    }
    u->st = ST_RECV;
    u->sent_ms = drv_gw_now_ms();
    watch_busy(g, u);
    return 0;
}

/* do_send from send_* (not the loop): a failure is reported later. */
static void send_now(drv_gateway_t *g, gw_uc_t *u)
{
    int how;
    if (do_send(g, u, &how) < 0)
        fail_later(g, u, how, "%s", u->err);
}

static gw_uc_t *uc_new(drv_gateway_t *g, gw_rep_t *r, int64_t deadline_ms)
{
    gw_uc_t *u = malloc(sizeof *u);
    if (!u)
        return NULL;
    memset(u, 0, offsetof(gw_uc_t, resp));
    u->fd = -1;
    u->rep = r;
    u->deadline_ms = deadline_ms;
    list_push(&g->uc_busy, u);
    if (deadline_ms < g->uc_due_ms)
        g->uc_due_ms = deadline_ms;
    return u;
}

/* A new connection to r (its address resolved, u's request formatted):
 * connecting, sending, or ST_DEAD with the reason to report. */
static void connect_new(drv_gateway_t *g, gw_uc_t *u, gw_rep_t *r, int64_t now)
{
    u->fd = socket(r->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (u->fd < 0) {
        fail_later(g, u, UC_LOCAL, "cannot make a connection: %s", strerror(errno));
        return;
    }
    int one = 1;
    setsockopt(u->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    u->connect_deadline_ms = now + UC_CONNECT_MS < u->deadline_ms ? now + UC_CONNECT_MS
                                                                  : u->deadline_ms;
    if (u->connect_deadline_ms < g->uc_due_ms)
        g->uc_due_ms = u->connect_deadline_ms;
    u->ep_gen = r->ep_gen;
    if (connect(u->fd, (struct sockaddr *)&r->addr, r->addr_len) == 0) {
        u->st = ST_SEND;
        send_now(g, u);
        return;
    }
    if (errno == EADDRNOTAVAIL || errno == EAGAIN)   /* our side: out of local ports */
        fail_later(g, u, UC_LOCAL, "cannot make a connection: %s", strerror(errno));
    else if (errno != EINPROGRESS)
        fail_later(g, u, UC_CONNECT, "%s", strerror(errno));
    else {
        u->st = ST_CONNECT;
        watch(g, u, EPOLLOUT);
    }
}

static void resp_init(gw_uc_t *u)
{
    drv_h1_response_init(&u->resp, 0, false);
    u->resp.on_head = on_head;
    u->resp.on_body = on_body;
    u->resp.ud = u;
}

int drv_gw_uc_send_job(drv_gateway_t *g, drv_gw_job_t *j, gw_rep_t *r)
{
    int64_t now = drv_gw_now_ms();
    gw_uc_t *u = j->fresh_conn ? NULL : r->idle;
    j->fresh_conn = false;
    if (u) {   /* the most recently used: still in the epoll, for reading */
        list_remove(&r->idle, u);
        r->n_idle--;
        list_push(&g->uc_busy, u);
        u->deadline_ms = j->deadline_ms;
        if (u->deadline_ms < g->uc_due_ms)
            g->uc_due_ms = u->deadline_ms;
        u->got = u->paused = u->reusable = u->refused = false;
        u->sent = 0;
    } else {
        u = uc_new(g, r, j->deadline_ms);
        if (!u)
            return -1;
    }
    u->job = j;
    j->uc = u;
    resp_init(u);
    u->body = j->body ? j->body : "";
    u->body_len = j->body_len;
    if (!r->addr_ok && resolve(r, u->err, sizeof u->err) < 0) {
        fail_later(g, u, UC_CONNECT, "%s", u->err);
        return 0;
    }
    const char *path = j->kind == DRV_GW_OPENAI ? "/v1" : r->dep->predict_path;
    const char *suffix = j->kind == DRV_GW_OPENAI ? j->suffix : "";
    int len = snprintf(u->req, sizeof u->req,
                       "POST %s%s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\n%s%s%s"
                       "Content-Length: %zu\r\n\r\n",
                       path, suffix, r->host, j->ctype[0] ? j->ctype : "application/json",
                       j->accept[0] ? "Accept: " : "", j->accept, j->accept[0] ? "\r\n" : "",
                       j->body_len);
    if (len < 0 || (size_t)len >= sizeof u->req) {   /* the gateway's limit, not the replica's */
        fail_later(g, u, UC_LOCAL, "%s", "the request head is too long for the gateway");
        return 0;
    }
    u->req_len = (size_t)len;
    if (u->fd >= 0) {
        u->st = ST_SEND;
        send_now(g, u);
    } else {
        connect_new(g, u, r, now);
    }
    return 0;
}

gw_uc_t *drv_gw_uc_send_probe(drv_gateway_t *g, struct gw_probe *p, gw_rep_t *r)
{
    int64_t now = drv_gw_now_ms();
    gw_uc_t *u = uc_new(g, r, now + UC_PROBE_MS);
    if (!u)
        return NULL;
    u->probe = p;
    resp_init(u);
    u->body = "";
    if (!r->addr_ok && resolve(r, u->err, sizeof u->err) < 0) {
        fail_later(g, u, UC_CONNECT, "%s", u->err);
        return u;
    }
    int len = snprintf(u->req, sizeof u->req,
                       "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                       r->dep->health_path, r->host);
    if (len < 0 || (size_t)len >= sizeof u->req) {
        fail_later(g, u, UC_LOCAL, "%s", "the request head is too long for the gateway");
        return u;
    }
    u->req_len = (size_t)len;
    connect_new(g, u, r, now);
    return u;
}

void drv_gw_uc_abort(drv_gateway_t *g, gw_uc_t *u)
{
    if (!u)
        return;
    list_remove(&g->uc_busy, u);
    uc_close(g, u);
}

void drv_gw_uc_resume(drv_gateway_t *g, gw_uc_t *u)
{
    if (!u || !u->paused || (u->st != ST_RECV && u->st != ST_SEND))
        return;
    u->paused = false;
    watch_busy(g, u);   /* level-triggered: what waits is read at once */
}

/* --- events and deadlines ------------------------------------------------------------------ */

void drv_gw_uc_event(drv_gateway_t *g, gw_uc_t *u, uint32_t events)
{
    switch (u->st) {
    case ST_DEAD:
        return;   /* closed earlier this turn */
    case ST_IDLE:   /* the replica closed it (or said something unasked): gone */
        list_remove(&u->rep->idle, u);
        u->rep->n_idle--;
        uc_close(g, u);
        return;
    case ST_CONNECT: {
        int err = 0;
        socklen_t l = sizeof err;
        if (getsockopt(u->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
            err = errno;
        if (err) {
            snprintf(u->err, sizeof u->err, "%s", strerror(err));
            finish(g, u, UC_CONNECT, u->err);
            return;
        }
        if (!(events & EPOLLOUT)) {
            if (events & (EPOLLERR | EPOLLHUP))   /* level-triggered: do not spin on it */
                finish(g, u, UC_CONNECT, "the connection failed");
            return;
        }
        u->st = ST_SEND;
        int how;
        if (do_send(g, u, &how) < 0)
            finish(g, u, how, u->err);
        return;
    }
    case ST_SEND: {
        if (u->paused) {   /* an early stream filled its buffer while the body still goes out */
            if (events & (EPOLLERR | EPOLLHUP)) {
                finish(g, u, UC_FAILED, "the replica's connection broke during the answer");
                return;
            }
        } else if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) {
            drv_gw_job_t *j0 = u->job;
            do_read(g, u);   /* an early answer (or the close) */
            if (u->st != ST_SEND || u->job != j0)
                return;   /* it ended (and may carry something else now) */
        }
        int how;
        if ((events & EPOLLOUT) && do_send(g, u, &how) < 0)
            finish(g, u, how, u->err);
        return;
    }
    case ST_RECV:
        if (u->paused) {
            if (events & (EPOLLERR | EPOLLHUP))
                finish(g, u, UC_FAILED, "the replica's connection broke during the answer");
            return;
        }
        do_read(g, u);
        return;
    }
}

void drv_gw_uc_sweep(drv_gateway_t *g, int64_t now)
{
    if (now < g->uc_due_ms)
        return;
    /* what finish() starts meanwhile (a retry, the queue's next) lowers
     * uc_due_ms itself, a connection that failed at once to 0 */
    g->uc_due_ms = INT64_MAX;
    int64_t next = INT64_MAX;
    gw_uc_t *u = g->uc_busy;
    while (u) {
        gw_uc_t *nx = u->next;
        if (u->st == ST_DEAD) {   /* failed before it started: report now */
            finish(g, u, u->how, u->why);
        } else if (u->st == ST_CONNECT && now >= u->connect_deadline_ms &&
                   u->connect_deadline_ms < u->deadline_ms) {
            finish(g, u, UC_CONNECT, "no connection within 3 s");
        } else if (now >= u->deadline_ms) {
            finish(g, u, UC_TIMEOUT, "the deadline passed");
        } else {
            int64_t due = u->st == ST_CONNECT ? u->connect_deadline_ms : u->deadline_ms;
            if (due < next)
                next = due;
        }
        u = nx;
    }
    if (next < g->uc_due_ms)
        g->uc_due_ms = next;
}
