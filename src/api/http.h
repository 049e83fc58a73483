/* http.h — the HTTP server (libmicrohttpd) in front of the API dispatcher. */
#ifndef DRV_HTTP_H
#define DRV_HTTP_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "head/head.h"

typedef struct drv_http drv_http_t;

/* listen: "HOST:PORT" (IPv4 or [IPv6]; port 0 picks a free one). */
drv_http_t *drv_http_create(drv_head_t *head, const char *listen, int threads, drv_error_t *err);
int drv_http_port(const drv_http_t *h);
/* Is listen a HOST:PORT drv_http_create accepts? (no socket is opened) */
int drv_http_check_listen(const char *listen, drv_error_t *err);
/* Parse listen into *ss (no socket is opened); -1 with a 400 when malformed. */
struct sockaddr_storage;
int drv_http_parse_listen(const char *listen, struct sockaddr_storage *ss, drv_error_t *err);
void drv_http_destroy(drv_http_t *h);

/* --- shared with drover-gateway's server (gateway/front.c) ----------------- */

/* Start libmicrohttpd on listen with the API's settings (thread pool,
 * epoll, suspend/resume, connection limits, the path unescaping of
 * http.c). NULL with err when listen is malformed or taken. */
struct MHD_Daemon *drv_http_start(const char *listen, int threads,
                                  MHD_AccessHandlerCallback on_req, void *cls,
                                  MHD_RequestCompletedCallback on_done, drv_error_t *err);
/* Stop d once the connections counted in suspended were re-entered
 * (bounded wait: MHD aborts on a suspended connection). */
void drv_http_stop(struct MHD_Daemon *d, atomic_int *suspended);
/* Append an uploaded chunk to a request body, NUL-terminated. Beyond
 * DRV_MAX_BODY *too_large is set and nothing more is kept. -1 on OOM. */
int drv_http_body_add(char **body, size_t *len, size_t *cap, bool *too_large, const char *data,
                      size_t n);

#endif
