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
 * Threads: one follows routes, one reports load; request threads call
 * drv_gw_follow_auth/models (the token set and model list are swapped
 * whole under a rwlock held only to look up or copy).
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
/* Stop both threads and free. Accepts NULL. */
void drv_gw_follow_destroy(drv_gw_follow_t *f);
/* Report the load now (the gateway's kick hook: gateway thread, no I/O). */
void drv_gw_follow_kick(void *f);

/* The user of an Authorization header's token with scope predict or all;
 * -1 with a 401 (missing, malformed, unknown, expired) or a 403 (another
 * scope) otherwise. */
int drv_gw_follow_auth(drv_gw_follow_t *f, const char *authz, char user[64], drv_error_t *err);
/* GET /openai/v1/models for user, OpenAI-shaped. */
json_t *drv_gw_follow_models(drv_gw_follow_t *f, const char *user);
/* GET /healthz: {routes_version, head_reachable, seconds_since_contact}. */
json_t *drv_gw_follow_health(drv_gw_follow_t *f);

#endif
