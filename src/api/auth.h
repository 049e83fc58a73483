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

#define DRV_TOKEN_PREFIX "drv_"
#define DRV_TOKEN_LEN (4 + 64)

/* New secret (buf >= DRV_TOKEN_LEN + 1) and its hash (hex, 65 bytes). */
int drv_token_mint(char *secret, char hash[65], drv_error_t *err);
/* Hash of a presented secret; -1 (401) when it is not shaped like one. */
int drv_token_hash(const char *secret, char hash[65], drv_error_t *err);
/* Scopes bitset from a token's "scopes" JSON array. */
unsigned drv_scopes_from_json(const json_t *scopes);

/* Authorization header -> principal. 401 errors say what is wrong. */
int drv_authenticate(drv_head_t *head, const char *authorization, drv_principal_t *who,
                     drv_error_t *err);

#endif
