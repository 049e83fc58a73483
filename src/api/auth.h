/* auth.h — turning an Authorization header into a principal: the token
 * is looked up in the head state (the secrets' shape is
 * common/secret.h). */
#ifndef DRV_AUTH_H
#define DRV_AUTH_H

#include "api/api.h"
#include "common/secret.h"
#include "state/head.h"
#include "state/state.h"

/* Authorization header -> principal. 401 errors say what is wrong. */
int drv_authenticate(drv_head_t *head, const char *authorization, drv_principal_t *who,
                     drv_error_t *err);

/* A node credential (drvn_...) -> its node's owner and id (NULL-able
 * buffers of 64 bytes). 401 when it is not one the head issued. */
int drv_auth_node(drv_head_t *head, const char *authorization, char owner[64], char node[64],
                  drv_error_t *err);

/* The 401 for a node credential whose hash (of 64 hex digits) is not in
 * the index: a revoked node's (named, with when) or an unknown one. Call
 * under the state lock. Returns -1. */
int drv_auth_node_refused(drv_state_t *st, const char *hash, drv_error_t *err);

#endif
