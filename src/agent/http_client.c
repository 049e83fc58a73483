/* http_client.c — see http_client.h. Plain HTTP/1.1 over a non-blocking
 * socket: every wait is a poll() of at most STEP_MS, so a request notices
 * its deadline and the caller's stop flag promptly; the head's name is
 * looked up by resolver.c, which the same deadline and flag bound. */
#define _GNU_SOURCE
#include "agent/http_client.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/resolver.h"
#include "common/http1.h"
#include "common/util.h"

#define STEP_MS 200

struct drv_hc {
    char base[512];
    char host[256];              /* for Host: and the resolver (no brackets) */
    char hostport[300];          /* Host: value */
    char port[8];
    char prefix[256];            /* the URL's path, prepended to every request path ("" = none) */
    bool tls;
    drv_hc_tls_t *t;             /* loaded at the first https request */
    drv_resolver_t *res;         /* the host's addresses (plain http only) */
};

drv_hc_t *drv_hc_create(const char *base_url, drv_error_t *err)
{
    drv_hc_t *c = calloc(1, sizeof *c);
    if (!c) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
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

void drv_hc_destroy(drv_hc_t *c)
{
    if (!c)
        return;
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
 * 0 timed out, -1 stopped (msg set either way when not ready). */
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

/* A connected non-blocking socket, or -1 with msg. */
static int dial(drv_hc_t *c, const drv_hc_req_t *rq, int64_t deadline, char *msg, size_t ml)
{
    drv_addr_t addrs[DRV_RESOLVER_MAX_ADDRS];
    size_t na;
    if (drv_resolver_get(c->res, deadline, rq->stop, addrs, &na, msg, ml) < 0)
        return -1;
    int fd = -1;
    bool stopped = false;
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
    else
        return 0;
    return -1;
}

int drv_hc_request(drv_hc_t *c, const drv_hc_req_t *rq, drv_hc_resp_t *resp, drv_error_t *err)
{
    memset(resp, 0, sizeof *resp);
    char msg[400];
    const char *why = NULL;
    drv_h1_response_t *r = NULL;
    char *req = NULL;
    int fd = -1;
    if (check_request(rq, msg, sizeof msg) < 0) {
        drv_err_invalid(err, "request", "%s", msg);
        return -1;
    }
    if (c->tls) {
        if (!c->t && !(c->t = drv_hc_tls_create(err)))
            return -1;
        return drv_hc_tls_request(c->t, c->base, rq, resp, err);
    }
    int64_t deadline = drv_mono_ms() + (rq->timeout_ms > 0 ? rq->timeout_ms : 300000);
    /* the request: head and body in one buffer, built before connecting */
    char head[1024];
    int hl = snprintf(head, sizeof head,
                      "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: drover-agent\r\n"
                      "Accept: application/json\r\nConnection: close\r\n",
                      rq->method, c->prefix, rq->path, c->hostport);
    size_t extra = (rq->bearer ? strlen(rq->bearer) + 32 : 0) +
                   (rq->content_type ? strlen(rq->content_type) + 20 : 0) + 64;
    if (hl < 0 || (size_t)hl >= sizeof head) {
        drv_err_invalid(err, "request", "request refused before sending: the request line is "
                        "too long");
        return -1;
    }
    size_t cap = (size_t)hl + extra + rq->body_len;
    req = malloc(cap);
    r = calloc(1, sizeof *r);
    if (!req || !r) {
        snprintf(msg, sizeof msg, "out of memory");
        goto error;
    }
    memcpy(req, head, (size_t)hl);
    size_t n = (size_t)hl;
    if (rq->bearer)
        n += (size_t)snprintf(req + n, cap - n, "Authorization: Bearer %s\r\n", rq->bearer);
    if (rq->content_type)
        n += (size_t)snprintf(req + n, cap - n, "Content-Type: %s\r\n", rq->content_type);
    if (rq->body || strcmp(rq->method, "POST") == 0 || strcmp(rq->method, "PUT") == 0)
        n += (size_t)snprintf(req + n, cap - n, "Content-Length: %zu\r\n", rq->body_len);
    n += (size_t)snprintf(req + n, cap - n, "\r\n");
    if (rq->body_len)
        memcpy(req + n, rq->body, rq->body_len);
    n += rq->body_len;
    if ((fd = dial(c, rq, deadline, msg, sizeof msg)) < 0)
        goto error;
    for (size_t off = 0; off < n;) {
        ssize_t w = send(fd, req + off, n - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(fd, POLLOUT, deadline, rq, &why) != 1) {
                snprintf(msg, sizeof msg, "sending to %s: %s", c->hostport, why);
                goto error;
            }
        } else {
            snprintf(msg, sizeof msg, "sending to %s: %s", c->hostport, strerror(errno));
            goto error;
        }
    }
    /* the answer */
    drv_h1_response_init(r, DRV_HC_MAX_BODY, strcmp(rq->method, "HEAD") == 0);
    char buf[16384];
    for (;;) {
        ssize_t got = recv(fd, buf, sizeof buf, 0);
        int rc;
        if (got > 0) {
            rc = drv_h1_response_feed(r, buf, (size_t)got, NULL, &why);
        } else if (got == 0) {
            rc = drv_h1_response_eof(r, &why);
        } else if (errno == EAGAIN || errno == EINTR) {
            if (wait_fd(fd, POLLIN, deadline, rq, &why) != 1) {
                snprintf(msg, sizeof msg, "waiting for %s: %s", c->hostport, why);
                goto error;
            }
            continue;
        } else {
            snprintf(msg, sizeof msg, "reading from %s: %s", c->hostport, strerror(errno));
            goto error;
        }
        if (rc == 1)
            break;
        if (rc < 0) {
            snprintf(msg, sizeof msg, "bad answer from %s: %s", c->hostport, why);
            goto error;
        }
    }
    close(fd);
    resp->status = r->status;
    resp->body = r->body;
    resp->len = r->len;
    free(r);
    free(req);
    return 0;
error:
    if (fd >= 0)
        close(fd);
    if (r)
        drv_h1_response_free(r);
    free(r);
    free(req);
    drv_err(err, 0, "unavailable", "", "%s", msg);
    return -1;
}
