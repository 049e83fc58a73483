/* gateway_state.h — droverd's state as the gateway's plain inputs
 * (gateway_state.c): the routing table (gateway/table.h) and the inference
 * tokens (gateway/routes_doc.h) built from the objects, for the embedded
 * gateway (head/gateway_link.c) and the routes document that standalone
 * gateways follow (gateway_peers.c). The gateway itself never sees the
 * state.
 */
#ifndef DRV_API_GATEWAY_STATE_H
#define DRV_API_GATEWAY_STATE_H

#include <jansson.h>
#include <stdint.h>

#include "gateway/creds.h"
#include "gateway/routes_doc.h"
#include "gateway/table.h"
#include "state/head.h"

struct drv_state;

/* Build from the state; the caller holds the state lock (read or write).
 * Every deployment is listed (also those with no replica), so the gateway
 * tells "unknown" (404) from "starting" (hold). NULL only on OOM. */
drv_gw_table_t *drv_gw_table_build(struct drv_state *st);
/* The state's live tokens (of an existing user, not revoked, not expired
 * at now_s) as the routes document's "tokens" array: [{hash, user,
 * predict, expires_at}] (caller holds the state lock). A new reference. */
json_t *drv_gw_tokens_json(struct drv_state *st, int64_t now_s);
/* The same tokens as a set (droverd's own inference listener; caller holds
 * the state lock). NULL only on OOM. */
drv_gw_tokens_t *drv_gw_tokens_build(struct drv_state *st, int64_t now_s);
/* A token or user was created, revoked or deleted (caller holds the state
 * write lock, before the answer goes out): the inference listener's token
 * set (head->gw_creds) is rebuilt now, so that a revoke that answered 200
 * is in force there. Nothing without a listener. */
void drv_gw_tokens_changed(drv_head_t *head);

#endif
