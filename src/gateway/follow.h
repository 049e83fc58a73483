/* follow.h — a standalone gateway's link to the head (drover-gateway):
 * follows the routing table and the inference tokens with long polls of
 * GET /v1/gateway/routes, and reports the gateway's load with
 * POST /v1/gateway/load every second and at once when a cold start begins.
 *
 * While the head cannot be reached the gateway keeps the last document it
 * got: it keeps routing to the replicas it knew and accepting the tokens it
 * knew (a token revoked meanwhile works on this gateway until it reaches
 * the head again; docs/api.md "Standalone gateways").
 *
 * Threads: one follows routes, one reports load; the gateway thread checks
 * requests against drv_gw_follow_creds (creds.h).
 */
#ifndef DRV_GW_FOLLOW_H
#define DRV_GW_FOLLOW_H

#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"
#include "gateway/gateway.h"

typedef struct drv_gw_follow drv_gw_follow_t;

/* Start following server (e.g. "http://10.0.0.1:8080") with an admin token
 * of scope gateway; name: this gateway's name in load reports. Waits up to
 * first_wait_ms for the first routes document (-1 with a clear error when
 * it did not come: head down, bad token). poll_s (1..DRV_GW_ROUTES_HOLD_S):
 * how long the head may hold a long poll before answering 204 (unchanged). */
drv_gw_follow_t *drv_gw_follow_create(drv_gateway_t *g, const char *server, const char *token,
                                      const char *name, int first_wait_ms, int poll_s,
                                      drv_error_t *err);
/* The CA (PEM file) an https:// head must chain to, for every follower
 * made after (NULL: the system's store). Call before creating one. */
void drv_gw_follow_set_ca_file(const char *path);
/* Stop both threads and free. Accepts NULL. */
void drv_gw_follow_destroy(drv_gw_follow_t *f);
/* Report the load now (the gateway's kick hook: gateway thread, no I/O). */
void drv_gw_follow_kick(void *f);

/* The tokens and deployments of the last document (creds.h), for serve.c. */
struct drv_gw_creds *drv_gw_follow_creds(drv_gw_follow_t *f);
/* GET /healthz: {routes_version, head_reachable, seconds_since_contact}. */
json_t *drv_gw_follow_health(drv_gw_follow_t *f);

#endif
