/* httpd.c — see httpd.h.
 *
 * Threads: drv_httpd_create starts serve(), which alone owns the listening
 * socket and the connection table; destroy() wakes it through an eventfd
 * and joins it. Each connection is either reading a request (in[], at most
 * DRV_H1_MAX_HEAD bytes, bytes after the head kept for the next pipelined
 * request) or writing one answer (out[], head and body in one buffer, then
 * the file range of a file reply: ffd, foff, fleft);
 * close_after marks the last answer of a connection. Out of descriptors
 * (EMFILE, ENFILE), accept fails while the listener stays readable: the
 * listener is left out of poll() for ACCEPT_PAUSE_MS, or the loop would
 * spin; waiting connections stay queued in the backlog meanwhile. */
#define _GNU_SOURCE
#include "agent/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#define ACCEPT_PAUSE_MS 100

struct conn {
    int fd;
    char in[DRV_H1_MAX_HEAD];
    size_t nin;
    char *out;                   /* NULL while reading */
    size_t nout, off;
    int ffd;                     /* a file reply's descriptor, -1 = none */
    uint64_t foff, fleft;
    bool close_after;
    int64_t idle_since;          /* monotonic ms of the last progress */
};

struct drv_httpd {
    int lfd, wakefd, port;
    pthread_t thread;
    drv_httpd_handler_fn fn;
    void *ud;
    struct conn *c[DRV_HTTPD_MAX_CONNS];
    size_t n;
    int64_t accept_again;        /* monotonic ms: not accepting until then (0: accepting) */
    bool starved;                /* the last accept ran out of something (warned once) */
    atomic_ulong wakes;          /* poll() returns, for drv_httpd_wakes */
};

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 206: return "Partial Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 416: return "Range Not Satisfiable";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
    }
}

void drv_httpd_text(drv_httpd_reply_t *out, int status, const char *text)
{
    out->status = status;
    free(out->body);
    out->len = strlen(text);
    out->body = drv_xmalloc(out->len + 1);
    memcpy(out->body, text, out->len + 1);
}

/* Turn a reply into c->out (head, and body unless HEAD). */
static void queue(struct conn *c, drv_httpd_reply_t *rp, bool head_only)
{
    char head[1024];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s\r\n",
                      rp->status, reason(rp->status),
                      rp->content_type ? rp->content_type : "text/plain; charset=utf-8", rp->len,
                      rp->headers, c->close_after ? "Connection: close\r\n" : "");
    if (hl < 0 || (size_t)hl >= sizeof head)
        hl = snprintf(head, sizeof head, "HTTP/1.1 500 %s\r\nContent-Length: 0\r\n"
                      "Connection: close\r\n\r\n", reason(500)), c->close_after = true,
        head_only = true;
    size_t blen = head_only || rp->body_fd >= 0 ? 0 : rp->len;
    c->out = drv_xmalloc((size_t)hl + blen);
    memcpy(c->out, head, (size_t)hl);
    if (blen)
        memcpy(c->out + hl, rp->body, blen);
    c->nout = (size_t)hl + blen;
    c->off = 0;
    free(rp->body);
    rp->body = NULL;
    if (rp->body_fd >= 0 && !head_only && rp->len > 0)
        c->ffd = rp->body_fd, c->foff = rp->body_off, c->fleft = rp->len;
    else if (rp->body_fd >= 0)
        close(rp->body_fd);
    rp->body_fd = -1;
}

/* A request head may be complete in c->in: parse it and queue the answer.
 * Returns true when an answer was queued. */
static bool handle(drv_httpd_t *d, struct conn *c)
{
    drv_h1_request_t rq;
    int status;
    const char *why;
    int hl = drv_h1_parse_request(c->in, c->nin, &rq, &status, &why);
    if (hl == 0)
        return false;
    drv_httpd_reply_t rp = {.status = 200, .body_fd = -1};
    if (hl < 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s\n", why);
        drv_httpd_text(&rp, status, msg);
        c->close_after = true;
        queue(c, &rp, false);
        return true;
    }
    c->close_after = !rq.keep_alive;
    if (rq.chunked || rq.content_length > 0) {
        drv_httpd_text(&rp, 413, "request bodies are not accepted here\n");
        c->close_after = true;   /* the body is not read: the stream is lost */
    } else {
        d->fn(d->ud, &rq, &rp);
        if (!rp.status)
            rp.status = 200;
    }
    bool head_only = strcmp(rq.method, "HEAD") == 0;
    queue(c, &rp, head_only);
    /* keep bytes after the head (a pipelined request) */
    memmove(c->in, c->in + hl, c->nin - (size_t)hl);
    c->nin -= (size_t)hl;
    return true;
}

static void drop(drv_httpd_t *d, size_t i)
{
    struct conn *c = d->c[i];
    close(c->fd);
    if (c->ffd >= 0)
        close(c->ffd);
    free(c->out);
    free(c);
    d->c[i] = d->c[--d->n];
}

static bool on_conn(drv_httpd_t *d, size_t i, short rev, int64_t now);

/* The table is full: serve, now, the connections that have something to
 * say, so that those whose peers have gone are dropped before a new peer is
 * turned away (their end of file may have come since the last poll()). */
static void serve_ready(drv_httpd_t *d)
{
    struct pollfd pf[DRV_HTTPD_MAX_CONNS];
    size_t n = d->n;
    for (size_t i = 0; i < n; i++)
        pf[i] = (struct pollfd){.fd = d->c[i]->fd, .events = d->c[i]->out ? POLLOUT : POLLIN};
    if (poll(pf, n, 0) <= 0)
        return;
    int64_t now = drv_mono_ms();
    for (size_t i = n; i-- > 0;)   /* from the end: drop() moves the last one */
        if (i < d->n && pf[i].revents)
            on_conn(d, i, pf[i].revents, now);
}

static void on_accept(drv_httpd_t *d)
{
    for (int k = 0; k < 16; k++) {
        int fd = accept4(d->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                if (!d->starved)
                    drv_warn("log server: accept: %s; pausing accepts %d ms at a time until "
                             "it works", strerror(errno), ACCEPT_PAUSE_MS);
                d->starved = true;
                d->accept_again = drv_mono_ms() + ACCEPT_PAUSE_MS;
            }
            return;
        }
        d->starved = false;
        if (d->n == DRV_HTTPD_MAX_CONNS)
            serve_ready(d);
        struct conn *c = d->n < DRV_HTTPD_MAX_CONNS ? calloc(1, sizeof *c) : NULL;
        if (!c) {
            close(fd);   /* full: the client retries or gives up */
            continue;
        }
        c->fd = fd;
        c->ffd = -1;
        c->idle_since = drv_mono_ms();
        d->c[d->n++] = c;
    }
}

/* Does the tail from `from` on hold the end of a head ("\n\n", "\n\r\n")? */
static bool maybe_complete(const struct conn *c, size_t from)
{
    size_t i = from > 3 ? from - 3 : 0;
    for (; i + 1 < c->nin; i++)
        if (c->in[i] == '\n' &&
            (c->in[i + 1] == '\n' || (c->in[i + 1] == '\r' && i + 2 < c->nin && c->in[i + 2] == '\n')))
            return true;
    /* a line that is obviously not HTTP fails without waiting for more */
    return c->nin >= sizeof c->in || (from == 0 && c->nin > 0);
}

/* Service connection i; false when it was closed. */
static bool on_conn(drv_httpd_t *d, size_t i, short rev, int64_t now)
{
    struct conn *c = d->c[i];
    if (rev & (POLLERR | POLLNVAL)) {
        drop(d, i);
        return false;
    }
    if (!c->out && (rev & (POLLIN | POLLHUP))) {
        ssize_t n = recv(c->fd, c->in + c->nin, sizeof c->in - c->nin, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            drop(d, i);
            return false;
        }
        if (n > 0) {
            size_t from = c->nin;
            c->nin += (size_t)n;
            c->idle_since = now;
            if (maybe_complete(c, from))
                handle(d, c);
        }
    }
    uint64_t this_turn = 0;   /* file bytes sent now: others get their turn too */
    while (c->out) {
        ssize_t n;
        if (c->off < c->nout) {
            n = send(c->fd, c->out + c->off, c->nout - c->off, MSG_NOSIGNAL);
        } else if (c->fleft > 0) {
            if (this_turn >= DRV_HTTPD_FILE_STEP)
                break;
            off_t fo = (off_t)c->foff;
            size_t step = c->fleft < DRV_HTTPD_FILE_STEP ? (size_t)c->fleft : DRV_HTTPD_FILE_STEP;
            n = sendfile(c->fd, c->ffd, &fo, step);
            if (n == 0) {   /* the file shrank under us: the answer cannot be finished */
                drop(d, i);
                return false;
            }
            if (n > 0)
                c->foff = (uint64_t)fo, c->fleft -= (uint64_t)n, this_turn += (uint64_t)n;
        } else {
            n = 0;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            drop(d, i);
            return false;
        }
        if (c->off < c->nout)
            c->off += (size_t)n;
        c->idle_since = now;
        if (c->off < c->nout || c->fleft > 0)
            continue;
        if (c->ffd >= 0)
            close(c->ffd), c->ffd = -1;
        free(c->out);
        c->out = NULL;
        if (c->close_after) {
            shutdown(c->fd, SHUT_WR);
            drop(d, i);
            return false;
        }
        if (c->nin && maybe_complete(c, 0))
            handle(d, c);   /* the next pipelined request */
    }
    return true;
}

static void *serve(void *arg)
{
    drv_httpd_t *d = arg;
    struct pollfd pf[DRV_HTTPD_MAX_CONNS + 2];
    for (;;) {
        int64_t now = drv_mono_ms();
        if (d->accept_again && now >= d->accept_again)
            d->accept_again = 0;
        pf[0] = (struct pollfd){.fd = d->wakefd, .events = POLLIN};
        /* a negative fd is skipped by poll(): the listener while paused */
        pf[1] = (struct pollfd){.fd = d->accept_again ? -1 : d->lfd, .events = POLLIN};
        for (size_t i = 0; i < d->n; i++)
            pf[i + 2] = (struct pollfd){.fd = d->c[i]->fd,
                                        .events = d->c[i]->out ? POLLOUT : POLLIN};
        size_t n = d->n;
        /* with connections open, wake once a second to close idle ones */
        int timeout = n ? 1000 : -1;
        if (d->accept_again && (timeout < 0 || d->accept_again - now < timeout))
            timeout = (int)(d->accept_again - now);
        int rc = poll(pf, n + 2, timeout);
        atomic_fetch_add(&d->wakes, 1);
        if (rc < 0 && errno != EINTR)
            break;
        if (pf[0].revents)
            break;
        now = drv_mono_ms();
        /* connections first (their indexes are pf's), from the end, since
         * drop() moves the last one into a freed slot */
        for (size_t i = n; i-- > 0;) {
            if (i >= d->n)
                continue;
            if (pf[i + 2].revents)
                on_conn(d, i, pf[i + 2].revents, now);
            else if (now - d->c[i]->idle_since > DRV_HTTPD_IDLE_MS)
                drop(d, i);
        }
        if (pf[1].revents & POLLIN)
            on_accept(d);
    }
    while (d->n)
        drop(d, d->n - 1);
    return NULL;
}

drv_httpd_t *drv_httpd_create(const char *host, int port, drv_httpd_handler_fn fn, void *ud,
                              drv_error_t *err)
{
    drv_httpd_t *d = calloc(1, sizeof *d);
    if (!d) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    d->fn = fn;
    d->ud = ud;
    d->wakefd = -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (!host || inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t sl = sizeof sa;
    int one = 1;
    d->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (d->lfd < 0 || setsockopt(d->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(d->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(d->lfd, 64) < 0 ||
        getsockname(d->lfd, (struct sockaddr *)&sa, &sl) < 0) {
        drv_err_internal(err, "cannot listen on %s:%d: %s", host ? host : "*", port,
                         strerror(errno));
        goto error;
    }
    d->port = ntohs(sa.sin_port);
    d->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (d->wakefd < 0) {
        drv_err_internal(err, "eventfd: %s", strerror(errno));
        goto error;
    }
    /* the thread blocks every signal: they are for the program's own threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&d->thread, NULL, serve, d);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        drv_err_internal(err, "cannot start the HTTP thread: %s", strerror(rc));
        goto error;
    }
    return d;
error:
    if (d->lfd >= 0)
        close(d->lfd);
    if (d->wakefd >= 0)
        close(d->wakefd);
    free(d);
    return NULL;
}

void drv_httpd_destroy(drv_httpd_t *d)
{
    if (!d)
        return;
    uint64_t one = 1;
    while (write(d->wakefd, &one, sizeof one) < 0 && errno == EINTR)
        ;
    pthread_join(d->thread, NULL);
    close(d->lfd);
    close(d->wakefd);
    free(d);
}

int drv_httpd_port(const drv_httpd_t *d) { return d->port; }

unsigned long drv_httpd_wakes(const drv_httpd_t *d) { return atomic_load(&d->wakes); }
