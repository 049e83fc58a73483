/* vultr.h — the `vultr` provider: the cloud worker (cloudw.h) over the
 * Vultr API v2 (vultr_api.h). A launch first checks that the region offers
 * the plan now (else it falls back), then creates the instance with the
 * boot script as base64 user_data and tags drover-head=ID, drover-owner=,
 * drover-cluster=, drover-nodepool=, drover-node=; listings are by the
 * head's tag, cursor-paged. Vultr has no spot capacity (nodepools asking
 * for it are refused by the API, from the catalog's supports_spot). */
#ifndef DRV_VULTR_H
#define DRV_VULTR_H

#include "common/error.h"
#include "provider/provider.h"

struct drv_cloudw;

struct drv_cloudw *drv_vultr_create_worker(const char *data_dir, drv_error_t *err);
void drv_vultr_destroy(struct drv_cloudw *w);

extern const drv_provider_ops_t drv_vultr_ops;

/* Vultr API calls so far (for /metrics and tests). */
unsigned long long drv_vultr_calls(struct drv_cloudw *w);

#endif
