/* gateway_link.h — droverd's embedded inference gateway (gateway_link.c):
 * the gateway thread (gateway/gateway.h) fed from the head's state, the
 * head side of standalone gateways (api/gateway_peers.h), and optionally
 * the inference listener (--gateway-listen: gateway/serve.h on the
 * gateway's own loop, with the state's tokens).
 */
#ifndef DRV_GATEWAY_LINK_H
#define DRV_GATEWAY_LINK_H

#include "common/error.h"
#include "state/head.h"

typedef struct drv_gateway_link drv_gateway_link_t;

/* Start the gateway thread inside droverd: sets head->gateway,
 * head->gw_peers, and the controller's hooks head->publish (a routing
 * table from the state at the end of each full pass) and head->load (the
 * replica autoscaler's input); a cold start kicks the controller. Call
 * before requests can come. NULL with err. */
drv_gateway_link_t *drv_gateway_link_create(drv_head_t *head, drv_error_t *err);
/* Also serve inference on addr ("HOST:PORT", port 0: any) from the
 * gateway thread's own loop, with the head's tokens (refreshed at each
 * publish, and at once through head->gw_creds when one changes). The
 * bound port, or -1 with err. Call once, before requests come. */
int drv_gateway_link_listen(drv_gateway_link_t *l, const char *addr, drv_error_t *err);
/* The same over TLS with this certificate (chain, PEM) and key (NULL: plain). */
int drv_gateway_link_listen_tls(drv_gateway_link_t *l, const char *addr, const char *cert_pem,
                                const char *key_pem, drv_error_t *err);
/* A renewed certificate for the inference listener (new connections; 0
 * when there is none). Any thread. */
int drv_gateway_link_set_cert(drv_gateway_link_t *l, const char *cert_pem, const char *key_pem,
                              drv_error_t *err);
/* Answer every waiting and running request with 503 and refuse new ones
 * (drv_gateway_stop). Call before the HTTP server stops. Accepts NULL. */
void drv_gateway_link_stop(drv_gateway_link_t *l);
/* After the HTTP server and the controller stopped: unhook from head, end
 * the gateway thread and free everything. Accepts NULL. */
void drv_gateway_link_destroy(drv_gateway_link_t *l);

#endif
