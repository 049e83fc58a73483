/* health.c — see health.h. State: fd < 0 idle; otherwise phase says what
 * the socket waits for. The owner thread alone touches a probe. */
#define _GNU_SOURCE
#include "agent/health.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { CONNECTING, SENDING, READING };

void drv_probe_init(drv_probe_t *p)
{
    memset(p, 0, sizeof *p);
    p->fd = -1;
}

bool drv_probe_active(const drv_probe_t *p) { return p->fd >= 0; }
int drv_probe_fd(const drv_probe_t *p) { return p->fd; }
int64_t drv_probe_deadline(const drv_probe_t *p) { return p->deadline; }

short drv_probe_events(const drv_probe_t *p)
{
    return p->phase == READING ? POLLIN : POLLOUT;
}

char *drv_probe_take_body(drv_probe_t *p, size_t *len)
{
    char *b = p->body;
    *len = p->body_len;
    p->body = NULL;
    p->body_len = 0;
    return b;
}

void drv_probe_cancel(drv_probe_t *p)
{
    free(p->body);
    p->body = NULL;
    p->body_len = 0;
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    if (p->resp) {
        drv_h1_response_free(p->resp);
        free(p->resp);
        p->resp = NULL;
    }
}

int drv_probe_start(drv_probe_t *p, int port, const char *path, int timeout_ms, int64_t now,
                    char *why, size_t wl)
{
    drv_probe_cancel(p);
    int n = snprintf(p->req, sizeof p->req,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: drover-agent\r\n"
                     "Accept: */*\r\nConnection: close\r\n\r\n",
                     path, port);
    if (n < 0 || (size_t)n >= sizeof p->req || strpbrk(path, " \r\n")) {
        snprintf(why, wl, "health path invalid or too long");
        return -1;
    }
    p->nreq = (size_t)n;
    p->sent = 0;
    p->port = port;
    p->deadline = now + timeout_ms;
    p->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->fd < 0) {
        snprintf(why, wl, "socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(p->fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) {
        snprintf(why, wl, "cannot connect to 127.0.0.1:%d: %s", port, strerror(errno));
        drv_probe_cancel(p);
        return -1;
    }
    p->phase = CONNECTING;
    return 0;
}

static int finish(drv_probe_t *p, long st, long *status)
{
    *status = st;
    char *body = NULL;
    size_t blen = 0;
    if (p->keep_body && st >= 200 && st < 300 && p->resp && p->resp->body) {
        body = p->resp->body;   /* taken before the response is freed */
        blen = p->resp->len;
        p->resp->body = NULL;
    }
    drv_probe_cancel(p);
    p->body = body;
    p->body_len = blen;
    return 1;
}

int drv_probe_step(drv_probe_t *p, int64_t now, long *status, char *why, size_t wl)
{
    *status = 0;
    if (p->fd < 0) {
        snprintf(why, wl, "no check in flight");
        return 1;
    }
    for (;;) {
        if (now >= p->deadline) {
            snprintf(why, wl, "no answer from 127.0.0.1:%d within the timeout", p->port);
            return finish(p, 0, status);
        }
        struct pollfd pf = {.fd = p->fd, .events = drv_probe_events(p)};
        if (poll(&pf, 1, 0) <= 0 || !(pf.revents & (pf.events | POLLERR | POLLHUP)))
            return 0;
        if (p->phase == CONNECTING) {
            int e = 0;
            socklen_t sl = sizeof e;
            if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &e, &sl) < 0)
                e = errno;
            if (e) {
                snprintf(why, wl, "cannot connect to 127.0.0.1:%d: %s", p->port, strerror(e));
                return finish(p, 0, status);
            }
            p->phase = SENDING;
        } else if (p->phase == SENDING) {
            ssize_t w = send(p->fd, p->req + p->sent, p->nreq - p->sent, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EINTR) {
                snprintf(why, wl, "sending to 127.0.0.1:%d: %s", p->port, strerror(errno));
                return finish(p, 0, status);
            }
            if (w > 0 && (p->sent += (size_t)w) == p->nreq) {
                p->resp = calloc(1, sizeof *p->resp);
                if (!p->resp) {
                    snprintf(why, wl, "out of memory");
                    return finish(p, 0, status);
                }
                drv_h1_response_init(p->resp, p->keep_body ? p->keep_body : DRV_PROBE_MAX_BODY,
                                     false);
                p->phase = READING;
            }
        } else {
            char buf[4096];
            ssize_t got = recv(p->fd, buf, sizeof buf, 0);
            const char *w = NULL;
            int rc;
            if (got > 0)
                rc = drv_h1_response_feed(p->resp, buf, (size_t)got, NULL, &w);
            else if (got == 0)
                rc = drv_h1_response_eof(p->resp, &w);
            else if (errno == EAGAIN || errno == EINTR)
                continue;
            else
                rc = -1, w = strerror(errno);
            if (rc == 1) {
                snprintf(why, wl, "HTTP %d", p->resp->status);
                return finish(p, p->resp->status, status);
            }
            if (rc < 0 && p->resp->status >= 200 && p->resp->err == DRV_H1_E_TOO_LARGE) {
                /* a big /health body (a JSON status page): its status line is
                 * what the check needs, the rest is not kept */
                snprintf(why, wl, "HTTP %d", p->resp->status);
                return finish(p, p->resp->status, status);
            }
            if (rc < 0) {
                snprintf(why, wl, "bad answer from 127.0.0.1:%d: %s", p->port, w);
                return finish(p, 0, status);
            }
        }
    }
}
