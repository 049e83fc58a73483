/* gcp.h — the `gcp` provider: the cloud worker (cloudw.h) over Compute
 * Engine (gce.h). Instances carry labels drover-head, -owner, -cluster,
 * -nodepool and -node, are named drover-<16 hex of the node's hash> (so a
 * repeated insert finds its own instance), boot drover-agent from the
 * startup-script metadata, and on spot are SPOT with instanceTermination-
 * Action DELETE. A zone out of capacity sends the launch to the region's
 * next zone; when every zone is out it falls back (another capacity or
 * type). */
#ifndef DRV_GCP_H
#define DRV_GCP_H

#include "common/error.h"
#include "provider/provider.h"

struct drv_cloudw;

/* Start the gcp worker (droverd's main, next to aws's). */
struct drv_cloudw *drv_gcp_create(const char *data_dir, drv_error_t *err);
/* Stop it (after the HTTP threads); frees the token cache. */
void drv_gcp_destroy(struct drv_cloudw *w);

extern const drv_provider_ops_t drv_gcp_ops;

/* The instance name of node (owner, node) of head head_id (32 bytes). */
void drv_gcp_instance_name(const char *head_id, const char *owner, const char *node,
                           char out[32]);

/* Compute Engine calls so far (for /metrics and tests). */
unsigned long long drv_gcp_calls(struct drv_cloudw *w);

#endif
