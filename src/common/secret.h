/* secret.h — the shape of drover's secrets and token scopes: minting a
 * secret, hashing a presented one, reading it from an Authorization header,
 * and scope names. Pure (no head state): the API's authentication, the
 * head's join and node credentials and the gateway's token set all use it.
 *
 * A secret is PREFIX + 64 hex digits (256 random bits). Only its SHA-256
 * is stored; lookups go by hash and the final comparison is constant-time.
 */
#ifndef DRV_SECRET_H
#define DRV_SECRET_H

#include <jansson.h>

#include "common/error.h"

#define DRV_TOKEN_PREFIX "drv_"      /* personal access tokens */
#define DRV_NODE_PREFIX "drvn_"      /* node credentials */
#define DRV_JOIN_PREFIX "drvj_"      /* join tokens */
#define DRV_JOIN_USES_MAX 10000      /* the most joins one join token allows */
#define DRV_TOKEN_LEN (4 + 64)
#define DRV_SECRET_MAX (5 + 64)

/* Token scopes (bit set). */
enum {
    DRV_SCOPE_READ = 1,      /* GET on management paths */
    DRV_SCOPE_WRITE = 2,     /* POST/PATCH/DELETE on management paths */
    DRV_SCOPE_PREDICT = 4,   /* inference paths */
    DRV_SCOPE_GATEWAY = 8,   /* standalone gateways: routes and load (admins' tokens only) */
    DRV_SCOPE_ALL = 15,
};

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

#endif
