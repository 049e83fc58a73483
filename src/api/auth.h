/* auth.h — personal access tokens: minting secrets, hashing them, and
 * turning an Authorization header into a principal.
 *
 * A secret is "drv_" + 64 hex digits (256 random bits). Only its SHA-256
 * is stored; lookups go by hash and the final comparison is constant-time.
 */
#ifndef DRV_AUTH_H
#define DRV_AUTH_H

#include "api/api.h"
#include "head/head.h"

#define DRV_TOKEN_PREFIX "drv_"      /* personal access tokens */
#define DRV_NODE_PREFIX "drvn_"      /* node credentials */
#define DRV_JOIN_PREFIX "drvj_"      /* join tokens */
#define DRV_TOKEN_LEN (4 + 64)
#define DRV_SECRET_MAX (5 + 64)

/* New secret "PREFIX<64 hex>" (buf >= DRV_SECRET_MAX + 1) and its hash. */
int drv_secret_mint(const char *prefix, char *secret, char hash[65], drv_error_t *err);
/* Hash of a presented secret of that prefix; -1 (401) when not shaped like one. */
int drv_secret_hash(const char *prefix, const char *secret, char hash[65], drv_error_t *err);
#define drv_token_mint(s, h, e) drv_secret_mint(DRV_TOKEN_PREFIX, (s), (h), (e))
#define drv_token_hash(s, h, e) drv_secret_hash(DRV_TOKEN_PREFIX, (s), (h), (e))
/* The secret in an Authorization header ("Bearer X" / "Key X"); NULL + 401. */
const char *drv_auth_secret(const char *authorization, drv_error_t *err);
/* Scopes bitset from a token's "scopes" JSON array. */
unsigned drv_scopes_from_json(const json_t *scopes);

/* Authorization header -> principal. 401 errors say what is wrong. */
int drv_authenticate(drv_head_t *head, const char *authorization, drv_principal_t *who,
                     drv_error_t *err);

#endif
