/* http.h — the HTTP server (libmicrohttpd) in front of the API dispatcher. */
#ifndef DRV_HTTP_H
#define DRV_HTTP_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "state/head.h"

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


#endif
