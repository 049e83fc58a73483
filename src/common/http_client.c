/* http_client.c — see http_client.h. Plain HTTP/1.1 over a non-blocking
 * socket: every wait is a poll() of at most STEP_MS, so a request notices
 * its deadline and the caller's stop flag promptly; the server's name is
 * looked up by resolver.c, which the same deadline and flag bound. */
#define _GNU_SOURCE
#include "common/http_client.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/http1.h"
#include "common/resolver.h"
#include "common/util.h"

#define STEP_MS 200
#define SEND_PIECE 65536         /* a streamed body is read and sent in pieces of this */

static const char default_hint[] =
    " (the head's certificate is not signed by the trusted CA: check --ca-hash/--ca-file)";

struct drv_hc {
    char base[512];
    char host[256];              /* for Host: and the resolver (no brackets) */
    char hostport[300];          /* Host: value */
    char port[8];
    char prefix[256];            /* the URL's path, prepended to every request path ("" = none) */
    bool tls;
    drv_hc_tls_t *t;             /* loaded at the first https request */
    drv_resolver_t *res;         /* the host's addresses (plain http only) */
    drv_hc_opts_t o;
    int fd;                      /* the kept connection (keep-alive), -1: none */
};

drv_hc_t *drv_hc_create(const char *base_url, drv_error_t *err)
{
    drv_hc_t *c = calloc(1, sizeof *c);
    if (!c) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    c->fd = -1;
    c->o = (drv_hc_opts_t){.user_agent = "drover-agent", .untrusted_hint = default_hint};
    const char *p;
    if (strncasecmp(base_url, "http://", 7) == 0) {
        p = base_url + 7;
    } else if (strncasecmp(base_url, "https://", 8) == 0) {
        p = base_url + 8;
        c->tls = true;
    } else {
        drv_err_invalid(err, "server", "server URL %s: must start with http:// or https://",
                        base_url);
        goto error;
    }
    size_t bl = strlen(base_url);
    while (bl && base_url[bl - 1] == '/')
        bl--;
    const char *end = p + strcspn(p, "/?#");
    const char *pend = base_url + bl;   /* the path prefix is [end, pend) */
    if (bl >= sizeof c->base || (size_t)(end - p) >= sizeof c->hostport || end == p ||
        (end < pend && (*end != '/' || strpbrk(end, "?# \r\n"))) ||
        (end < pend && (size_t)(pend - end) >= sizeof c->prefix)) {
        drv_err_invalid(err, "server", "server URL %s: want scheme://host[:port][/path]",
                        base_url);
        goto error;
    }
    if (end < pend)
        memcpy(c->prefix, end, (size_t)(pend - end));
    memcpy(c->base, base_url, bl);
    memcpy(c->hostport, p, (size_t)(end - p));
    const char *hs = p, *he, *colon;
    if (*p == '[') {   /* [v6]:port */
        he = memchr(p, ']', (size_t)(end - p));
        if (!he)
            goto bad;
        hs = p + 1;
        colon = he + 1 < end && he[1] == ':' ? he + 1 : NULL;
        if (!colon && he + 1 != end)
            goto bad;
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        he = colon ? colon : end;
    }
    if (he == hs || (size_t)(he - hs) >= sizeof c->host)
        goto bad;
    memcpy(c->host, hs, (size_t)(he - hs));
    if (colon) {
        size_t pl = (size_t)(end - colon - 1);
        if (pl < 1 || pl > 5 || strspn(colon + 1, "0123456789") < pl || atoi(colon + 1) < 1 ||
            atoi(colon + 1) > 65535)
            goto bad;
        memcpy(c->port, colon + 1, pl);
    } else {
        snprintf(c->port, sizeof c->port, "%s", c->tls ? "443" : "80");
    }
    if (!c->tls && !(c->res = drv_resolver_create(c->host, c->port, err)))
        goto error;
    return c;
bad:
    drv_err_invalid(err, "server", "server URL %s: malformed host or port", base_url);
error:
    free(c);
    return NULL;
}

void drv_hc_set_opts(drv_hc_t *c, const drv_hc_opts_t *o)
{
    c->o.keep_alive = o->keep_alive;
    if (o->user_agent)
        c->o.user_agent = o->user_agent;
    if (o->untrusted_hint)
        c->o.untrusted_hint = o->untrusted_hint;
    if (!o->keep_alive && c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
}

int drv_hc_split_url(const char *url, char *base, size_t n, const char **path)
{
    size_t skip = strncasecmp(url, "http://", 7) == 0    ? 7
                  : strncasecmp(url, "https://", 8) == 0 ? 8
                                                          : 0;
    if (!skip)
        return -1;
    size_t bl = skip + strcspn(url + skip, "/?#");
    if (bl == skip || bl >= n)
        return -1;
    memcpy(base, url, bl);
    base[bl] = '\0';
    *path = url[bl] == '/' ? url + bl : "/";
    return url[bl] && url[bl] != '/' ? -1 : 0;   /* "http://h?q": no path to put it after */
}

void drv_hc_destroy(drv_hc_t *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    drv_hc_tls_destroy(c->t);
    drv_resolver_destroy(c->res);
    free(c);
}

void drv_hc_resp_free(drv_hc_resp_t *resp)
{
    if (!resp)
        return;
    free(resp->body);
    resp->body = NULL;
    resp->len = 0;
}


/* Wait for events on fd until deadline (monotonic ms) or stop. 1 ready,
 * 0 timed out, -1 stopped (*why set either way when not ready). */
static int wait_fd(int fd, short events, int64_t deadline, const drv_hc_req_t *rq,
                   const char **why)
{
    for (;;) {
        if (rq->stop && atomic_load(rq->stop))
            return *why = "stopped", -1;
        int64_t left = deadline - drv_mono_ms();
        if (left <= 0)
            return *why = "timed out", 0;
        struct pollfd pf = {.fd = fd, .events = events};
        int rc = poll(&pf, 1, left < STEP_MS ? (int)left : STEP_MS);
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return *why = strerror(errno), 0;
    }
}

/* A connected non-blocking socket, or -1 with msg and *refused (no address
 * would take the connection, or the name is unknown: not a timeout, not
 * stopped). */
static int dial(drv_hc_t *c, const drv_hc_req_t *rq, int64_t deadline, char *msg, size_t ml,
                bool *refused)
{
    drv_addr_t addrs[DRV_RESOLVER_MAX_ADDRS];
    size_t na;
    if (drv_resolver_get(c->res, deadline, rq->stop, addrs, &na, msg, ml) < 0) {
        *refused = !(rq->stop && atomic_load(rq->stop)) && drv_mono_ms() < deadline;
        return -1;
    }
    int fd = -1;
    bool stopped = false, timed_out = false;
    snprintf(msg, ml, "cannot connect to %s", c->hostport);
    for (size_t i = 0; i < na && fd < 0 && !stopped; i++) {
        const drv_addr_t *a = &addrs[i];
        fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        int e = 0;
        if (connect(fd, (const struct sockaddr *)&a->sa, a->len) < 0) {
            e = errno;
            if (e == EINPROGRESS) {
                const char *why = NULL;
                int64_t cd = rq->connect_timeout_ms > 0 ? drv_mono_ms() + rq->connect_timeout_ms
                                          : deadline;   /* 0: the request's deadline */
                int w = wait_fd(fd, POLLOUT, cd < deadline ? cd : deadline, rq, &why);
                socklen_t sl = sizeof e;
                if (w == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) < 0)
                    e = errno;
                if (w != 1) {
                    snprintf(msg, ml, "cannot connect to %s: %s", c->hostport, why);
                    close(fd);
                    fd = -1;
                    stopped = w < 0;
                    timed_out = true;
                    continue;
                }
            }
        }
        if (e) {
            snprintf(msg, ml, "cannot connect to %s: %s", c->hostport, strerror(e));
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0 && !stopped)
        drv_resolver_stale(c->res);   /* the name may point elsewhere now */
    *refused = fd < 0 && !stopped && !timed_out;
    return fd;
}

/* A header value or path byte that could end a line or split a request. */
static bool has_ctl(const char *v, bool space_too)
{
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if ((*p < 32 && *p != '\t') || *p == 127 || (space_too && (*p == ' ' || *p == '\t')))
            return true;
    return false;
}

/* Refuse a request that would not be one well-formed HTTP/1.1 message
 * (CR or LF in a value would let it smuggle headers or a second request):
 * checked before any socket is opened. 0, or -1 with msg. */
static int check_request(const drv_hc_req_t *rq, char *msg, size_t ml)
{
    const char *m = rq->method ? rq->method : "";
    size_t tok = strspn(m, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                             "!#$%&'*+-.^_`|~");
    bool bad_header = false;
    for (size_t i = 0; rq->headers && rq->headers[i] && !bad_header; i++) {
        const char *h = rq->headers[i];
        size_t name = strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                "0123456789!#$%&'*+-.^_`|~");
        bad_header = name == 0 || h[name] != ':' || has_ctl(h, false);
    }
    if (!*m || m[tok] || tok > 16)
        snprintf(msg, ml, "request refused before sending: the method is not an HTTP token");
    else if (!rq->path || rq->path[0] != '/' || has_ctl(rq->path, true))
        snprintf(msg, ml, "request refused before sending: the path must start with / and "
                 "hold no space or control character");
    else if (rq->bearer && has_ctl(rq->bearer, false))
        snprintf(msg, ml, "request refused before sending: the bearer token holds a control "
                 "character");
    else if (rq->content_type && has_ctl(rq->content_type, false))
        snprintf(msg, ml, "request refused before sending: the content type holds a control "
                 "character");
    else if (bad_header)
        snprintf(msg, ml, "request refused before sending: a header is not one \"Name: "
                 "value\" line");
    else
        return 0;
    return -1;
}

/* The request's head and (buffered) body in one malloc'd buffer, *n bytes. */
static char *build(const drv_hc_t *c, const drv_hc_req_t *rq, size_t *n)
{
    size_t cap = strlen(rq->method) + strlen(c->prefix) + strlen(rq->path) +
                 strlen(c->hostport) + strlen(c->o.user_agent) + 160 +
                 (rq->bearer ? strlen(rq->bearer) + 32 : 0) +
                 (rq->content_type ? strlen(rq->content_type) + 20 : 0) +
                 (rq->body ? rq->body_len : 0);
    for (size_t i = 0; rq->headers && rq->headers[i]; i++)
        cap += strlen(rq->headers[i]) + 2;
    char *req = malloc(cap);
    if (!req)
        return NULL;
    size_t k = (size_t)snprintf(req, cap,
                                "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n"
                                "Accept: application/json\r\n%s",
                                rq->method, c->prefix, rq->path, c->hostport, c->o.user_agent,
                                c->o.keep_alive ? "" : "Connection: close\r\n");
    if (rq->bearer)
        k += (size_t)snprintf(req + k, cap - k, "Authorization: Bearer %s\r\n", rq->bearer);
    if (rq->content_type)
        k += (size_t)snprintf(req + k, cap - k, "Content-Type: %s\r\n", rq->content_type);
    for (size_t i = 0; rq->headers && rq->headers[i]; i++)
        k += (size_t)snprintf(req + k, cap - k, "%s\r\n", rq->headers[i]);
    if (rq->body || rq->read_body || strcmp(rq->method, "POST") == 0 ||
        strcmp(rq->method, "PUT") == 0)
        k += (size_t)snprintf(req + k, cap - k, "Content-Length: %zu\r\n", rq->body_len);
    k += (size_t)snprintf(req + k, cap - k, "\r\n");
    if (rq->body && rq->body_len) {
        memcpy(req + k, rq->body, rq->body_len);
        k += rq->body_len;
    }
    *n = k;
    return req;
}

/* Send p[0..n) on fd; 0, or -1 with msg (*peer_gone: the peer reset or
 * closed the connection, as a kept one it timed out does). */
static int send_all(const drv_hc_t *c, int fd, const char *p, size_t n, int64_t deadline,
                    const drv_hc_req_t *rq, bool *peer_gone, char *msg, size_t ml)
{
    const char *why = NULL;
    for (size_t off = 0; off < n;) {
        ssize_t w = send(fd, p + off, n - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(fd, POLLOUT, deadline, rq, &why) != 1) {
                snprintf(msg, ml, "sending to %s: %s", c->hostport, why);
                return -1;
            }
        } else {
            *peer_gone = errno == EPIPE || errno == ECONNRESET;
            snprintf(msg, ml, "sending to %s: %s", c->hostport, strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* One request on fd and its answer into r. 0, or -1 with msg; *stale when
 * the connection was found closed before any byte of the answer came (a
 * kept connection the server let go: the request may go again on a fresh
 * one); *reusable when the connection may carry another request. */
static int exchange(drv_hc_t *c, const drv_hc_req_t *rq, int fd, const char *req, size_t n,
                    int64_t deadline, drv_h1_response_t *r, bool *stale, bool *reusable,
                    char *msg, size_t ml)
{
    bool gone = false;
    const char *why = NULL;
    char buf[SEND_PIECE];
    *stale = *reusable = false;
    if (send_all(c, fd, req, n, deadline, rq, &gone, msg, ml) < 0) {
        *stale = gone;
        return -1;
    }
    for (uint64_t off = 0; rq->read_body && off < rq->body_len;) {
        size_t want = rq->body_len - off < sizeof buf ? (size_t)(rq->body_len - off) : sizeof buf;
        long got = rq->read_body(rq->ud, off, buf, want);
        if (got <= 0 || (size_t)got > want) {
            snprintf(msg, ml, "cannot read the request body at byte %llu",
                     (unsigned long long)off);
            return -1;
        }
        if (send_all(c, fd, buf, (size_t)got, deadline, rq, &gone, msg, ml) < 0) {
            *stale = gone && off == 0;
            return -1;
        }
        off += (uint64_t)got;
    }
    size_t received = 0;
    for (;;) {
        ssize_t got = recv(fd, buf, sizeof buf, 0);
        size_t used = 0;
        int rc;
        if (got > 0) {
            received += (size_t)got;
            rc = drv_h1_response_feed(r, buf, (size_t)got, &used, &why);
        } else if (got == 0) {
            if (received == 0)
                *stale = true;
            rc = drv_h1_response_eof(r, &why);
        } else if (errno == EAGAIN || errno == EINTR) {
            if (wait_fd(fd, POLLIN, deadline, rq, &why) != 1) {
                snprintf(msg, ml, "waiting for %s: %s", c->hostport, why);
                return -1;
            }
            continue;
        } else {
            *stale = received == 0 && errno == ECONNRESET;
            snprintf(msg, ml, "reading from %s: %s", c->hostport, strerror(errno));
            return -1;
        }
        if (rc == 1) {
            *reusable = got > 0 && used == (size_t)got && r->keep_alive;
            return 0;
        }
        if (rc < 0) {
            snprintf(msg, ml, "%s from %s: %s",
                     r->err == DRV_H1_E_ABORTED ? "stopped reading the answer" : "bad answer",
                     c->hostport, why);
            return -1;
        }
    }
}

/* The kept connection when it is still open and quiet, else -1 (closed). */
static int take_kept(drv_hc_t *c)
{
    int fd = c->fd;
    c->fd = -1;
    if (fd < 0)
        return -1;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    if (poll(&pf, 1, 0) != 0) {   /* readable: closed, or bytes no request asked for */
        close(fd);
        return -1;
    }
    return fd;
}

int drv_hc_request(drv_hc_t *c, const drv_hc_req_t *rq, drv_hc_resp_t *resp, drv_error_t *err)
{
    memset(resp, 0, sizeof *resp);
    char msg[400];
    if (check_request(rq, msg, sizeof msg) < 0) {
        drv_err_invalid(err, "request", "%s", msg);
        return -1;
    }
    if (c->tls) {
        if (!c->t && !(c->t = drv_hc_tls_create(err)))
            return -1;
        return drv_hc_tls_request(c->t, c->base, &c->o, rq, resp, err);
    }
    int64_t deadline = drv_mono_ms() + (rq->timeout_ms > 0 ? rq->timeout_ms : 300000);
    size_t n = 0;
    char *req = build(c, rq, &n);
    drv_h1_response_t *r = calloc(1, sizeof *r);
    int rc = -1;
    if (!req || !r) {
        snprintf(msg, sizeof msg, "out of memory");
        goto out;
    }
    for (int attempt = 0; attempt < 2 && rc < 0; attempt++) {
        int fd = take_kept(c);
        bool reused = fd >= 0, stale = false, reusable = false;
        if (!reused && (fd = dial(c, rq, deadline, msg, sizeof msg, &resp->refused)) < 0)
            break;
        drv_h1_response_free(r);
        drv_h1_response_init(r, rq->max_body ? rq->max_body : DRV_HC_MAX_BODY,
                             strcmp(rq->method, "HEAD") == 0);
        r->on_head = rq->on_head;
        r->on_body = rq->on_body;
        r->ud = rq->ud;
        rc = exchange(c, rq, fd, req, n, deadline, r, &stale, &reusable, msg, sizeof msg);
        if (rc == 0 && reusable && c->o.keep_alive)
            c->fd = fd;
        else
            close(fd);
        resp->too_big = rc < 0 && r->err == DRV_H1_E_TOO_LARGE;
        if (rc < 0 && !(reused && stale))
            break;   /* a fresh connection failed, or the request may have been acted on */
    }
    if (rc == 0) {
        resp->status = r->status;
        resp->body = r->body;
        resp->len = r->len;
        r->body = NULL;
    }
out:
    if (r)
        drv_h1_response_free(r);
    free(r);
    free(req);
    if (rc < 0)
        drv_err(err, 0, "unavailable", "", "%s", msg);
    return rc;
}
