/* gce.h — a small client of the Compute Engine v1 REST API (instances
 * insert, delete, aggregatedList; zone operations waited for to DONE) over
 * libcurl, with OAuth2 access tokens from a service-account key: an
 * RS256-signed JWT (RFC 7523: iss, scope, aud = the key's token_uri, iat,
 * exp = iat + 1 h) exchanged at token_uri, cached and refreshed before it
 * expires (gce_auth.c).
 *
 * Every call is blocking and slow (a cloud round trip): call it from the
 * gcp provider's worker thread (gcp.c), never under the state lock. A
 * drv_gce_t (the token cache) has one owner thread.
 *
 * Failures are classified for the node autoscaler (provider.h); a zone out
 * of capacity is told apart (*next_zone) so the caller tries the region's
 * next zone before falling back. The private key and the access tokens
 * never appear in an error message or a log line. */
#ifndef DRV_GCE_H
#define DRV_GCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "provider/ec2.h"
#include "provider/provider.h"

#define DRV_GCE_SCOPE "https://www.googleapis.com/auth/compute"
#define DRV_GCE_ENDPOINT "https://compute.googleapis.com/compute/v1"

/* The parts of a service-account JSON key drover uses. */
typedef struct drv_gce_key {
    char client_email[256];
    char private_key_id[128];
    char private_key[6144];          /* PEM (PKCS#8) */
    char token_uri[256];
    char project_id[128];
} drv_gce_key_t;

/* Parse a service-account key ({"type": "service_account", ...}); -1 with
 * err naming the missing or wrong field (never the key's value). */
int drv_gce_parse_key(const char *json, drv_gce_key_t *k, drv_error_t *err);

/* The signed JWT grant for key k at time now (epoch s): malloc'd, caller
 * frees; NULL with err (a private key OpenSSL cannot read). */
char *drv_gce_jwt(const drv_gce_key_t *k, const char *scope, int64_t now, drv_error_t *err);

/* base64url without padding of data into out (4 * ceil(n / 3) + 1 bytes). */
void drv_gce_b64url(const unsigned char *data, size_t n, char *out);

/* How to react to an error: HTTP status, the error's reason or code
 * ("rateLimitExceeded", "ZONE_RESOURCE_POOL_EXHAUSTED", "invalid_grant"),
 * and its message. *next_zone: the zone is out of capacity (try another). */
drv_prov_class_t drv_gce_classify(long status, const char *reason, const char *message,
                                  bool *next_zone);

typedef struct drv_gce drv_gce_t;     /* token cache */

drv_gce_t *drv_gce_create(void);
void drv_gce_destroy(drv_gce_t *g);

/* An access token for key k into tok (cached; fetched from the key's
 * token_uri when there is none, when it is past three quarters of its
 * life, or when drop says the API refused it). */
int drv_gce_token(drv_gce_t *g, const drv_gce_key_t *k, bool drop, char *tok, size_t len,
                  drv_prov_class_t *cls, unsigned *calls, drv_error_t *err);
/* Tokens fetched so far (tests). */
unsigned long long drv_gce_tokens_fetched(const drv_gce_t *g);

/* One HTTP exchange: method url, headers (NULL-terminated), body (NULL:
 * none); the answer (malloc'd, NUL-terminated) and its status. -1 with err
 * on a transport failure (and *cls RETRY). Shared by gce_auth.c. */
int drv_gce_http(const char *method, const char *url, const char *const *headers,
                 const char *body, char **answer, long *status, drv_error_t *err);

/* Where calls go. */
typedef struct drv_gce_account {
    const char *endpoint;            /* ".../compute/v1" (no trailing slash) */
    const char *project;
    const drv_gce_key_t *key;
    int page_size;                   /* aggregatedList maxResults (1..500); 0: 500 */
} drv_gce_account_t;

typedef struct drv_gce_insert {
    const char *zone, *name, *machine_type, *image;
    const char *subnet;              /* NULL or "": the default network */
    const char *region;              /* expands a bare subnet name */
    const char *network_tag;         /* NULL or "": none */
    bool spot;                       /* provisioningModel SPOT, terminated by deletion */
    const char *startup_script;
    const char *labels[8][2];
    size_t n_labels;
} drv_gce_insert_t;

/* instances.insert (with a fresh requestId, reused by the retries of this
 * call), then the zone operation waited for (zoneOperations.wait) to DONE. An instance of that name
 * already there (an earlier attempt made it) is success. 0, or -1 with
 * *cls, *next_zone and err. */
int drv_gce_insert(drv_gce_t *g, const drv_gce_account_t *a, const drv_gce_insert_t *in,
                   drv_prov_class_t *cls, bool *next_zone, unsigned *calls, drv_error_t *err);

/* instances.delete of zone/name (not waited for). A name the API does not
 * know is not an error. */
int drv_gce_delete(drv_gce_t *g, const drv_gce_account_t *a, const char *zone,
                   const char *name, drv_prov_class_t *cls, unsigned *calls, drv_error_t *err);

/* instances.aggregatedList filtered by label drover-head=head (every page,
 * pageToken), of the zones of region (REGION-*); *out is malloc'd. */
int drv_gce_list(drv_gce_t *g, const drv_gce_account_t *a, const char *region,
                 const char *head, drv_ec2_instance_t **out, size_t *n, drv_prov_class_t *cls,
                 unsigned *calls, drv_error_t *err);

/* --- pure parts (exposed for tests) --- */

/* Append the instances of one aggregatedList page (zones of region only)
 * to *out (grown); next gets nextPageToken ("" on the last page). */
int drv_gce_parse_list(const char *body, const char *region, drv_ec2_instance_t **out,
                       size_t *n, size_t *cap, char *next, size_t next_len, drv_error_t *err);

#endif
