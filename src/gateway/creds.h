/* creds.h — what a gateway serving its own HTTP (serve.c) checks requests
 * against: the inference tokens (hashes, owners, scope, expiry) and the
 * deployments each user may name, replaced whole whenever the routing
 * table changes. drover-gateway fills it from the head's routes document
 * (follow.c); droverd's inference listener from its own state at each
 * controller pass (head/gateway_link.c, its publish hook).
 *
 * Threads: set by one thread at a time (the follower, or the controller);
 * read by the gateway thread. The sets are swapped under a rwlock held only
 * to look up or copy, never across I/O.
 */
#ifndef DRV_GW_CREDS_H
#define DRV_GW_CREDS_H

#include <jansson.h>

#include "common/error.h"
#include "gateway/routes_doc.h"
#include "gateway/table.h"

typedef struct drv_gw_creds drv_gw_creds_t;

drv_gw_creds_t *drv_gw_creds_create(void);
void drv_gw_creds_destroy(drv_gw_creds_t *c);   /* accepts NULL */
/* Take toks (owned from now on, may be NULL: none) and the deployment list of t. */
void drv_gw_creds_set(drv_gw_creds_t *c, drv_gw_tokens_t *toks, const drv_gw_table_t *t);
/* Take toks (owned from now on) and keep the deployment list. */
void drv_gw_creds_set_tokens(drv_gw_creds_t *c, drv_gw_tokens_t *toks);
/* The user of an Authorization header's token with scope predict or all;
 * -1 with a 401 (missing, malformed, unknown, expired) or a 403 (another
 * scope) otherwise. */
int drv_gw_creds_auth(drv_gw_creds_t *c, const char *authz, char user[64], drv_error_t *err);
/* GET /openai/v1/models for user, OpenAI-shaped. */
json_t *drv_gw_creds_models(drv_gw_creds_t *c, const char *user);
/* GET /openai/v1/models/{id}: user's model id, NULL when user has none. */
json_t *drv_gw_creds_model(drv_gw_creds_t *c, const char *user, const char *id);

#endif
