/* health.h — one replica health check: GET http://127.0.0.1:PORT/PATH
 * over a non-blocking socket, for the supervisor's poll loop (it replaces
 * a curl multi handle there). A probe is connected, sends its request,
 * reads the whole answer (http1.h; at most DRV_PROBE_MAX_BODY bytes of
 * body: a longer one, DRV_H1_E_TOO_LARGE, is not kept and its status
 * counts) and reports the status, or why there was none (refused, timed
 * out, malformed). The owner (the supervisor thread) polls drv_probe_fd()
 * for drv_probe_events() and calls drv_probe_step() after each wake-up and
 * at drv_probe_deadline(). Never through a proxy: loopback only.
 */
#ifndef DRV_HEALTH_H
#define DRV_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/http1.h"

#define DRV_PROBE_MAX_BODY (64 * 1024)

typedef struct drv_probe {
    int fd;                      /* -1: no check in flight */
    int phase;                   /* connecting, sending, reading */
    char req[1280];
    size_t nreq, sent;
    int64_t deadline;            /* monotonic ms */
    int port;
    drv_h1_response_t *resp;     /* while reading */
    size_t keep_body;            /* > 0: keep a 2xx body up to this many bytes (metrics) */
    char *body;                  /* the kept body, NUL-terminated (drv_probe_take_body) */
    size_t body_len;
} drv_probe_t;

void drv_probe_init(drv_probe_t *p);
/* Start a check (p idle). 0, or -1 when it failed at once (why filled:
 * a result like any other failed check). */
int drv_probe_start(drv_probe_t *p, int port, const char *path, int timeout_ms, int64_t now,
                    char *why, size_t wl);
bool drv_probe_active(const drv_probe_t *p);
int drv_probe_fd(const drv_probe_t *p);
short drv_probe_events(const drv_probe_t *p);   /* POLLOUT or POLLIN */
int64_t drv_probe_deadline(const drv_probe_t *p);
/* Make progress (non-blocking). 0: still running; 1: finished, the probe
 * is idle again and *status is the HTTP status (0 when there was no
 * answer; why says what happened). */
int drv_probe_step(drv_probe_t *p, int64_t now, long *status, char *why, size_t wl);
/* Abandon a check in flight (idle probes too); a kept body is freed. */
void drv_probe_cancel(drv_probe_t *p);
/* After a finished probe started with p->keep_body set: its 2xx body
 * (malloc'd, the caller frees; *len its length) or NULL. */
char *drv_probe_take_body(drv_probe_t *p, size_t *len);

#endif
