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

/* listen: "HOST:PORT" (IPv4 or [IPv6]; port 0 picks a free one; common/listen.h). */
drv_http_t *drv_http_create(drv_head_t *head, const char *listen, int threads, drv_error_t *err);
int drv_http_port(const drv_http_t *h);
void drv_http_destroy(drv_http_t *h);


#endif
