/* oci.h — the `oracle` provider: the cloud worker (cloudw.h) over the OCI
 * Core Services API 20160918 (oci_api.h), requests signed with the
 * credential's API key (oci_sign.h). A launch tries the cluster's
 * availability domains in order ("Out of host capacity" moves to the
 * next) with LaunchInstance: the node's shape (shapeConfig from the
 * catalog's vCPUs and memory for .Flex shapes), the image, the subnet, the
 * boot script as base64 metadata.user_data, freeformTags drover-head=ID,
 * drover-owner, drover-cluster, drover-nodepool, drover-node, and for spot
 * a preemptibleInstanceConfig (TERMINATE; bare-metal shapes have no
 * preemptible capacity, so spot there is *fallback* without a call).
 * Listings are the compartment's ListInstances, every page, filtered on
 * our side by the head's tag. */
#ifndef DRV_OCI_H
#define DRV_OCI_H

#include "common/error.h"
#include "provider/provider.h"

struct drv_cloudw;

struct drv_cloudw *drv_oci_create_worker(const char *data_dir, drv_error_t *err);
void drv_oci_destroy(struct drv_cloudw *w);

extern const drv_provider_ops_t drv_oci_ops;

/* OCI API calls so far (for /metrics and tests). */
unsigned long long drv_oci_calls(struct drv_cloudw *w);

#endif
