/* serve.h — drover-gateway's HTTP/1.1 server (serve.c, serve_request.c):
 * the inference routes, authenticated with the head's tokens (follow.h),
 * served on the gateway thread's own event loop (gateway.h, drv_gw_io_t)
 * so that a request goes client -> replica -> client without changing
 * threads.
 */
#ifndef DRV_GW_SERVE_H
#define DRV_GW_SERVE_H

#include <jansson.h>

#include "common/error.h"
#include "gateway/creds.h"
#include "gateway/gateway.h"

typedef struct drv_gw_serve drv_gw_serve_t;

/* What the server checks requests against, and says about itself. */
typedef struct drv_gw_front {
    drv_gw_creds_t *creds;           /* tokens and deployments (kept by pointer) */
    json_t *(*health)(void *ctx);    /* GET /healthz (no token) */
    void *ctx;
    double fail_rate;                /* failed authentications per address a second
                                      * (common/ratelimit.h; <= 0: no limit) */
    int fail_burst, fail_table;      /* ... at once, addresses tracked (<= 0: defaults) */
} drv_gw_front_t;

/* Listen on "HOST:PORT" (IPv4 or [IPv6]; port 0: any) and serve from g's
 * loop. NULL with err when listen is malformed or taken. */
drv_gw_serve_t *drv_gw_serve_create(drv_gateway_t *g, const drv_gw_front_t *front,
                                    const char *addr, drv_error_t *err);
int drv_gw_serve_port(const drv_gw_serve_t *sv);
/* The same speaking TLS (1.2 or later, no plaintext) on every connection,
 * with this certificate (chain, PEM) and key; both NULL: plain HTTP. */
drv_gw_serve_t *drv_gw_serve_create_tls(drv_gateway_t *g, const drv_gw_front_t *front,
                                        const char *addr, const char *cert_pem,
                                        const char *key_pem, drv_error_t *err);
/* Serve this certificate (chain, PEM) and key to connections accepted from
 * now on; open ones finish with theirs. Any thread. -1 with err when the
 * server speaks plain HTTP or they are not a usable pair (the old stays). */
int drv_gw_serve_set_cert(drv_gw_serve_t *sv, const char *cert_pem, const char *key_pem,
                          drv_error_t *err);
/* Free the server after drv_gateway_join (which closed its connections).
 * Accepts NULL. */
void drv_gw_serve_destroy(drv_gw_serve_t *sv);

#endif
