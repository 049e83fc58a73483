/* httpd.h — a small HTTP/1.1 server over plain sockets, for drover-agent's
 * log endpoint (logserver.c) and its peer cache server (cacheserve.c); it
 * replaces libmicrohttpd in the agent.
 *
 * One thread of its own polls the listening socket and at most
 * DRV_HTTPD_MAX_CONNS connections. Requests are GET-style: a head of at
 * most DRV_H1_MAX_HEAD bytes (http1.h) and no body (a request with one is
 * answered 413 and its connection closed). Keep-alive and pipelining are
 * honoured; a connection idle for DRV_HTTPD_IDLE_MS is closed. The handler
 * runs on the server's thread, one request at a time, and fills a reply
 * whose body the server frees, or names a file range (body_fd) that the
 * server sends with sendfile, at most DRV_HTTPD_FILE_STEP bytes per turn of
 * its loop, and then closes (no copy in memory, other connections served
 * between pieces). HEAD gets the headers of the GET answer.
 * Out of descriptors, it stops accepting for 100 ms at a time (no spin).
 */
#ifndef DRV_HTTPD_H
#define DRV_HTTPD_H

#include <stddef.h>

#include "common/http1.h"
#include "common/error.h"

#define DRV_HTTPD_MAX_CONNS 64
#define DRV_HTTPD_IDLE_MS 30000
#define DRV_HTTPD_FILE_STEP (4u << 20)

typedef struct drv_httpd drv_httpd_t;

typedef struct drv_httpd_reply {
    int status;                  /* default 200 */
    const char *content_type;    /* default "text/plain; charset=utf-8" */
    char headers[512];           /* extra "Name: value\r\n" lines, "" = none */
    char *body;                  /* malloc'd (the server frees it) or NULL */
    size_t len;                  /* of body, or of the file range */
    int body_fd;                 /* -1 (preset), or a file the server sends len bytes of from
                                  * body_off and closes; body stays NULL */
    uint64_t body_off;
} drv_httpd_reply_t;

typedef void (*drv_httpd_handler_fn)(void *ud, const drv_h1_request_t *rq,
                                     drv_httpd_reply_t *out);

/* Listen on host:port (port 0: an ephemeral one; a host that is not an IPv4
 * address: every address) and serve on a new thread. */
drv_httpd_t *drv_httpd_create(const char *host, int port, drv_httpd_handler_fn fn, void *ud,
                              drv_error_t *err);
/* Stop the thread and close every connection. NULL is fine. */
void drv_httpd_destroy(drv_httpd_t *d);
int drv_httpd_port(const drv_httpd_t *d);
/* How many times the server's poll() has returned (any thread may ask): a
 * measure of its wake-ups, for tests and diagnostics. */
unsigned long drv_httpd_wakes(const drv_httpd_t *d);
/* Fill a reply with a copy of text (and the status). For handlers. */
void drv_httpd_text(drv_httpd_reply_t *out, int status, const char *text);

#endif
