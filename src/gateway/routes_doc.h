/* routes_doc.h — the routing table as a document, for standalone gateways
 * (drover-gateway): what GET /v1/gateway/routes answers (docs/api.md,
 * "Standalone gateways") and how a gateway reads it back.
 *
 * The document carries the routing table (every deployment, its paths,
 * limits and routable replicas) and the tokens: for each live token of an
 * existing user, the SHA-256 of its secret, its user, expiry and whether
 * its scope allows inference (so a gateway answers 401 and 403 as the head
 * does). A gateway checks a
 * presented token by hashing it and looking the hash up (constant-time
 * compare), exactly as the head does; secrets are 256-bit random, so the
 * hashes do not reveal them. The version is a hash of the content (the
 * compact, sorted-key dump without the version, which is then spliced in
 * last: one serialization): equal documents have equal versions, across
 * head restarts too.
 *
 * Pure functions (droverd builds the table and the tokens from its state
 * in api/gateway_state.c).
 */
#ifndef DRV_GW_ROUTES_DOC_H
#define DRV_GW_ROUTES_DOC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "gateway/table.h"

#define DRV_GW_VERSION_LEN 17   /* 16 hex digits and a NUL */
#define DRV_GW_ROUTES_HOLD_S 25  /* longest (and default) hold of ?wait=VERSION; then 204 */

typedef struct drv_gw_tok {
    char hash[65];           /* sha256 hex of the secret */
    char user[64];
    int64_t expires_at;      /* unix seconds; 0 = never */
    bool predict;            /* scope predict or all */
} drv_gw_tok_t;

typedef struct drv_gw_tokens {
    drv_gw_tok_t *v;         /* sorted by hash */
    size_t n;
} drv_gw_tokens_t;

/* Head: the document of table t and tokens (a JSON array of {hash, user,
 * predict, expires_at}, listed as given; taken). malloc'd compact JSON;
 * version filled. NULL only on OOM. */
char *drv_gw_routes_doc(const drv_gw_table_t *t, json_t *tokens, size_t *len,
                        char version[DRV_GW_VERSION_LEN]);

/* Gateway: parse a document. On success *t and *toks are new (the caller
 * frees them) and version is filled; -1 with err on anything malformed
 * (nothing allocated then). */
int drv_gw_routes_parse(const char *body, size_t len, drv_gw_table_t **t,
                        drv_gw_tokens_t **toks, char version[DRV_GW_VERSION_LEN],
                        drv_error_t *err);

/* A token set from a document's "tokens" array; -1 with err (nothing
 * allocated) when an entry is malformed. */
int drv_gw_tokens_parse(const json_t *tokens, drv_gw_tokens_t **out, drv_error_t *err);

/* The entry of hash, NULL when none (binary search; the final compare is
 * constant-time). */
const drv_gw_tok_t *drv_gw_tokens_find(const drv_gw_tokens_t *ts, const char *hash);
void drv_gw_tokens_free(drv_gw_tokens_t *ts);

#endif
