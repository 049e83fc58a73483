/* vultr_api.h — a small client of the Vultr API v2 (instances create,
 * delete, list by tag with cursor paging; a region's plan availability),
 * bearer API key, over libcurl (the HTTP exchange of gce.h).
 *
 * Blocking and slow: called from the vultr provider's worker thread only.
 * Failures are classified for the node autoscaler (provider.h): 429 and
 * 5xx retry (429 is retried here first, with backoff: the request did not
 * run), a plan the region does not have now falls back, 401/403 and other
 * refusals give up. The API key never appears in a message or a log line. */
#ifndef DRV_VULTR_API_H
#define DRV_VULTR_API_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "provider/ec2.h"
#include "provider/provider.h"

#define DRV_VULTR_ENDPOINT "https://api.vultr.com/v2"

typedef struct drv_vultr_account {
    const char *endpoint;            /* ".../v2" */
    const char *api_key;
    int per_page;                    /* list page size (1..500); 0: 100 */
} drv_vultr_account_t;

typedef struct drv_vultr_create {
    const char *region, *plan, *image, *label;
    const char *vpc, *firewall_group;   /* NULL or "": none */
    const char *user_data;              /* the script; sent base64-encoded */
    const char *tags[8];
    size_t n_tags;
} drv_vultr_create_t;

/* Is plan offered in region now (GET /regions/{region}/availability)? */
int drv_vultr_available(const drv_vultr_account_t *a, const char *region, const char *plan,
                        bool *yes, drv_prov_class_t *cls, unsigned *calls, drv_error_t *err);

/* POST /instances; out gets its id and state. 0, or -1 with *cls and err. */
int drv_vultr_create(const drv_vultr_account_t *a, const drv_vultr_create_t *c,
                     drv_ec2_instance_t *out, drv_prov_class_t *cls, unsigned *calls,
                     drv_error_t *err);

/* DELETE /instances/{id}; 404 is not an error. */
int drv_vultr_delete(const drv_vultr_account_t *a, const char *id, drv_prov_class_t *cls,
                     unsigned *calls, drv_error_t *err);

/* GET /instances?tag=TAG, every page (meta.links.next), instances of region
 * only; *out malloc'd. Drover's tags ("drover-node=ID") fill the fields. */
int drv_vultr_list(const drv_vultr_account_t *a, const char *region, const char *tag,
                   drv_ec2_instance_t **out, size_t *n, drv_prov_class_t *cls,
                   unsigned *calls, drv_error_t *err);

/* --- pure parts (exposed for tests) --- */
drv_prov_class_t drv_vultr_classify(long status, const char *message);
int drv_vultr_parse_list(const char *body, const char *region, drv_ec2_instance_t **out,
                         size_t *n, size_t *cap, char *next, size_t next_len, drv_error_t *err);

#endif
