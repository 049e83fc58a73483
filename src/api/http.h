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
/* The same over TLS 1.2/1.3 only (no plaintext on that port) with the PEM
 * certificate chain and key given; both NULL: plain HTTP. */
drv_http_t *drv_http_create_tls(drv_head_t *head, const char *listen, int threads,
                                const char *cert_pem, const char *key_pem, drv_error_t *err);
int drv_http_port(const drv_http_t *h);
/* Serve this certificate chain and key (PEM) from the next TLS handshake
 * on; connections already open keep the one they began with. -1 with err
 * when h speaks plain HTTP or they do not parse (the old one stays). */
int drv_http_set_cert(drv_http_t *h, const char *cert_pem, const char *key_pem,
                      drv_error_t *err);
void drv_http_destroy(drv_http_t *h);


#endif
