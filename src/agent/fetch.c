/* fetch.c — see fetch.h: a ranged GET streamed to a callback (plain http
 * over a socket here, https through http_tls.c). */
#include "agent/fetch.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/http_client.h"
#include "common/http1.h"
#include "common/util.h"

#define STEP_MS 200

char *drv_fetch_url_join(const char *base, const char *rel)
{
    size_t bl = strlen(base);
    while (bl && base[bl - 1] == '/')
        bl--;
    char *s = drv_xmalloc(bl + 1 + 3 * strlen(rel) + 1), *o = s;
    memcpy(o, base, bl);
    o += bl;
    *o++ = '/';
    static const char hx[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)rel; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~/", *p))
            *o++ = (char)*p;
        else
            *o++ = '%', *o++ = hx[*p >> 4], *o++ = hx[*p & 15];
    }
    *o = 0;
    return s;
}

typedef struct url {
    char host[256], port[8];
    const char *path;
} url_t;

static int parse_url(const char *u, url_t *out, drv_error_t *err)
{
    if (strncmp(u, "http://", 7) != 0)
        return drv_err_invalid(err, "origin", "%.*s: not an http:// or https:// URL",
                               (int)strcspn(u, "?"), u);
    const char *h = u + 7, *slash = strchr(h, '/');
    out->path = slash ? slash : "/";
    size_t hl = slash ? (size_t)(slash - h) : strlen(h);
    const char *hp = h, *port = NULL;
    size_t nl = hl;
    if (hl && h[0] == '[') {
        const char *rb = memchr(h, ']', hl);
        if (!rb)
            return drv_err_invalid(err, "origin", "%.*s: bad IPv6 host", (int)strcspn(u, "?"), u);
        hp = h + 1, nl = (size_t)(rb - h - 1);
        if ((size_t)(rb + 1 - h) < hl && rb[1] == ':')
            port = rb + 2;
    } else {
        const char *c = memchr(h, ':', hl);
        if (c)
            nl = (size_t)(c - h), port = c + 1;
    }
    size_t pl = port ? (size_t)(h + hl - port) : 0;
    if (nl == 0 || nl >= sizeof out->host || pl >= sizeof out->port || (port && pl == 0))
        return drv_err_invalid(err, "origin", "%.*s: bad host or port", (int)strcspn(u, "?"), u);
    memcpy(out->host, hp, nl);
    out->host[nl] = 0;
    if (port) {
        memcpy(out->port, port, pl);
        out->port[pl] = 0;
    } else {
        strcpy(out->port, "80");
    }
    for (const unsigned char *p = (const unsigned char *)out->path; *p; p++)
        if (*p <= 0x20 || *p == 0x7f)
            return drv_err_invalid(err, "origin", "%.*s: the path holds a space or control byte",
                                   (int)strcspn(u, "?"), u);
    return 0;
}

/* Wait for events; 1 ready, 0 silence for timeout_ms, -1 stopped or error. */
static int wait_fd(int fd, short ev, long timeout_ms, const atomic_bool *stop)
{
    for (long waited = 0; waited < timeout_ms; waited += STEP_MS) {
        if (stop && atomic_load(stop))
            return -1;
        struct pollfd pf = {.fd = fd, .events = ev};
        int rc = poll(&pf, 1, STEP_MS);
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

static int dial(const url_t *u, long timeout_ms, const atomic_bool *stop, drv_error_t *err)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(u->host, u->port, &hints, &res);
    if (rc != 0)
        return drv_err(err, 0, "unavailable", "origin", "cannot resolve %s: %s", u->host,
                       gai_strerror(rc));
    int fd = -1;
    const char *why = "no address";
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        int e = errno;
        if (e == EINPROGRESS && wait_fd(fd, POLLOUT, timeout_ms, stop) == 1) {
            socklen_t sl = sizeof e;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) < 0)
                e = errno;
        } else if (e == EINPROGRESS) {
            e = ETIMEDOUT;
        }
        if (e) {
            why = strerror(e);
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        drv_err(err, 0, "unavailable", "origin", "cannot connect to %s:%s: %s", u->host, u->port,
                why);
    return fd;
}

typedef struct st {
    const drv_fetch_req_t *rq;
    const char *what;
    uint64_t got;
    char msg[300];
    int status;
    char *location;              /* a redirect's target (malloc'd) */
} st_t;

static int on_head(void *ud, int status, const drv_h1_header_t *h, size_t nh)
{
    st_t *s = ud;
    const drv_fetch_req_t *rq = s->rq;
    s->status = status;
    if (status == 200 && rq->off == 0 && rq->len == rq->total)
        return 0;
    if (status == 301 || status == 302 || status == 303 || status == 307 || status == 308) {
        const char *loc = drv_h1_header(h, nh, "Location");
        if (loc && (strncmp(loc, "http://", 7) == 0 || strncmp(loc, "https://", 8) == 0)) {
            s->location = drv_strdup(loc);
            return -1;
        }
        snprintf(s->msg, sizeof s->msg, "the %s answered %d without an absolute Location",
                 s->what, status);
        return -1;
    }
    if (status != 206) {
        snprintf(s->msg, sizeof s->msg, "the %s answered %d to a range request%s", s->what,
                 status, status == 200 ? " (it ignores Range)" : "");
        return -1;
    }
    const char *cr = drv_h1_header(h, nh, "Content-Range");
    char want[96];
    snprintf(want, sizeof want, "bytes %" PRIu64 "-%" PRIu64 "/", rq->off, rq->off + rq->len - 1);
    if (!cr || strncmp(cr, want, strlen(want)) != 0) {
        snprintf(s->msg, sizeof s->msg, "the %s sent Content-Range '%s', not '%s%" PRIu64 "'",
                 s->what, cr ? cr : "(none)", want, rq->total);
        return -1;
    }
    return 0;
}

static int on_body(void *ud, const char *p, size_t n)
{
    st_t *s = ud;
    if (s->got + n > s->rq->len) {
        snprintf(s->msg, sizeof s->msg, "the %s sent more than the %" PRIu64 " bytes asked",
                 s->what, s->rq->len);
        return -1;
    }
    s->got += n;
    if (s->rq->on_data(s->rq->ud, p, n) < 0) {
        snprintf(s->msg, sizeof s->msg, "the receiver stopped");
        return -1;
    }
    return 0;
}

static bool has_ctl(const char *v)
{
    for (; v && *v; v++)
        if ((unsigned char)*v < 0x20 || *v == 0x7f)
            return true;
    return false;
}

/* The same over https, through http_tls.c's libcurl: trust is the head's
 * CA for the first URL (the head's blob route), the origin CA for a
 * redirect's target. */
static int fetch_tls(const drv_fetch_req_t *rq, const char *url, const char *shown,
                     const char *bearer, bool origin, char **location, drv_error_t *err)
{
    const char *h = url + 8;
    if (!*h || *h == '/' || *h == '?' || *h == '#')
        return drv_err_invalid(err, "origin", "%s: no host", shown);
    for (const unsigned char *p = (const unsigned char *)url; *p; p++)
        if (*p <= 0x20 || *p == 0x7f)
            return drv_err_invalid(err, "origin", "%s: the URL holds a space or control byte",
                                   shown);
    char range[80];
    snprintf(range, sizeof range, "bytes=%" PRIu64 "-%" PRIu64, rq->off, rq->off + rq->len - 1);
    st_t s = {.rq = rq, .what = rq->what ? rq->what : "origin"};
    drv_hc_get_t g = {.url = url, .range = range, .bearer = bearer, .origin = origin,
                      .stall_ms = rq->timeout_ms, .deadline_ms = rq->deadline_ms,
                      .stop = rq->stop, .on_head = on_head, .on_body = on_body, .ud = &s};
    char msg[300];
    int rc = drv_hc_tls_get(&g, msg, sizeof msg);
    if (rc < 0 && s.location) {
        *location = s.location;
        return -1;
    }
    free(s.location);
    if (rc < 0)
        return drv_err(err, s.status, "unavailable", "origin", "%s: %s", shown,
                       s.msg[0] ? s.msg : msg[0] ? msg : "bad answer");
    if (s.got != rq->len)
        return drv_err(err, s.status, "unavailable", "origin", "%s: %" PRIu64 " bytes came, %"
                       PRIu64 " were asked", shown, s.got, rq->len);
    return 0;
}

/* One request to url; *location gets a redirect's target (rc -1, err unset). */
static int fetch_one(const drv_fetch_req_t *rq, const char *url, const char *bearer,
                     bool origin, char **location, drv_error_t *err)
{
    url_t u;
    long to = rq->timeout_ms > 0 ? rq->timeout_ms : 30000;
    /* messages show the URL without its query: a presigned URL's signature
     * is a bearer secret while it lasts */
    char shown[512];
    snprintf(shown, sizeof shown, "%.*s%s", (int)strcspn(url, "?"), url,
             strchr(url, '?') ? "?..." : "");
    if (has_ctl(bearer))
        return drv_err_invalid(err, "origin", "the bearer credential holds a control character");
    if (strncmp(url, "https://", 8) == 0)
        return fetch_tls(rq, url, shown, bearer, origin, location, err);
    if (parse_url(url, &u, err) < 0)
        return -1;
    char req[2048 + 512];
    int rl = snprintf(req, sizeof req,
                      "GET %s HTTP/1.1\r\nHost: %s%s%s\r\nRange: bytes=%" PRIu64 "-%" PRIu64
                      "\r\nUser-Agent: drover-agent\r\nConnection: close\r\n%s%s%s\r\n",
                      u.path, u.host, strcmp(u.port, "80") ? ":" : "",
                      strcmp(u.port, "80") ? u.port : "", rq->off, rq->off + rq->len - 1,
                      bearer ? "Authorization: Bearer " : "", bearer ? bearer : "",
                      bearer ? "\r\n" : "");
    if (rl < 0 || rl >= (int)sizeof req)
        return drv_err_invalid(err, "origin", "%s: the URL is too long", shown);
    int fd = dial(&u, to, rq->stop, err);
    if (fd < 0)
        return -1;
    st_t s = {.rq = rq, .what = rq->what ? rq->what : "origin"};
    drv_h1_response_t *r = drv_xmalloc(sizeof *r);
    drv_h1_response_init(r, 0, false);
    r->on_head = on_head;
    r->on_body = on_body;
    r->ud = &s;
    int rc = -1;
    for (int sent = 0; sent < rl;) {
        if (wait_fd(fd, POLLOUT, to, rq->stop) != 1) {
            drv_err(err, 0, "unavailable", "origin", "%s: sending the request timed out or "
                    "stopped", shown);
            goto out;
        }
        ssize_t n = send(fd, req + sent, (size_t)(rl - sent), MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            drv_err(err, 0, "unavailable", "origin", "%s: %s", shown, strerror(errno));
            goto out;
        }
        sent += n > 0 ? (int)n : 0;
    }
    char buf[65536];
    for (;;) {
        int w = wait_fd(fd, POLLIN, to, rq->stop);
        if (w == 1 && rq->deadline_ms && drv_mono_ms() > rq->deadline_ms) {
            drv_err(err, 0, "unavailable", "origin", "%s: too slow: %" PRIu64 " of %" PRIu64
                    " bytes by the deadline", shown, s.got, rq->len);
            goto out;
        }
        if (w != 1) {
            drv_err(err, 0, "unavailable", "origin", "%s: %s after %" PRIu64 " of %" PRIu64
                    " bytes", shown, w == 0 ? "no data for too long" : "stopped", s.got,
                    rq->len);
            goto out;
        }
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        const char *why = NULL;
        size_t used;
        int f = n > 0 ? drv_h1_response_feed(r, buf, (size_t)n, &used, &why)
                      : drv_h1_response_eof(r, &why);
        if (n < 0)
            why = strerror(errno), f = -1;
        if (f < 0 && s.location) {
            *location = s.location;
            s.location = NULL;
            goto out;
        }
        if (f < 0) {
            drv_err(err, s.status, "unavailable", "origin", "%s: %s", shown,
                    s.msg[0] ? s.msg : why ? why : "bad answer");
            goto out;
        }
        if (f == 1)
            break;
    }
    if (s.got != rq->len) {
        drv_err(err, s.status, "unavailable", "origin", "%s: %" PRIu64 " bytes came, %" PRIu64
                " were asked", shown, s.got, rq->len);
        goto out;
    }
    rc = 0;
out:
    free(s.location);
    drv_h1_response_free(r);
    free(r);
    close(fd);
    return rc;
}

int drv_fetch_range(const drv_fetch_req_t *rq, drv_error_t *err)
{
    char *url = NULL;
    const char *cur = rq->url, *bearer = rq->bearer;
    for (int hop = 0;; hop++) {
        char *next = NULL;
        int rc = fetch_one(rq, cur, bearer, hop > 0, &next, err);
        free(url);
        url = NULL;
        if (!next)
            return rc;
        if (hop == DRV_FETCH_MAX_REDIRECTS) {
            free(next);
            return drv_err(err, 0, "unavailable", "origin", "%s: more than %d redirects",
                           rq->url, DRV_FETCH_MAX_REDIRECTS);
        }
        /* the target carries its own authorization (a presigned URL): the
         * node credential is never sent on */
        cur = url = next;
        bearer = NULL;
    }
}
