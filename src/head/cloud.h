/* cloud.h — what the controller hands a cloud provider (aws) with each
 * launch: the cluster's settings resolved with its credential, and a
 * single-use join token bound to the new node. Runs under the state write
 * lock, without I/O. */
#ifndef DRV_CLOUD_H
#define DRV_CLOUD_H

#include "common/error.h"
#include "provider/provider.h"
#include "state/head.h"
#include "state/state.h"

#define DRV_CLOUD_ORPHAN_GRACE_S 300     /* default orphan_grace_seconds */
#define DRV_CLOUD_JOIN_TTL_S 900         /* a node's join token lives this long */

/* Settings for nodes of nodepool np (NULL: the cluster's alone) of cluster
 * cl: endpoint (default https://ec2.REGION.amazonaws.com), region, the
 * credential's keys or profile, image (nodepool's, else cluster's),
 * subnet, security group, head URL (cluster's head_url, else the head's
 * server URL), orphan grace. 0, or -1 with err (no such credential). */
int drv_cloud_settings_of(drv_head_t *head, const drv_obj_t *cl, const drv_obj_t *np,
                          drv_cloud_settings_t *out, drv_error_t *err);

/* Mint a join token for node n (its nodepool; single-use; bound to n, so
 * the agent that presents it becomes n instead of a new node; expires in
 * ttl_s). secret gets the token (DRV_SECRET_MAX + 1 bytes). */
int drv_cloud_join_token(drv_head_t *head, const drv_obj_t *n, int ttl_s, char *secret,
                         drv_error_t *err);

struct drv_scaling;

/* Fill the cloud part of a launch for node l->owner/l->node_id (settings,
 * cluster, nodepool, type, capacity, a fresh join token). -1 with err when
 * the node or its cluster's credential is gone: the node is then marked
 * terminating, its (type, capacity) backs off in the node autoscaler and
 * its nodepool shows the error. */
int drv_cloud_prepare_launch(drv_head_t *head, struct drv_scaling *scaling,
                             drv_node_launch_t *l, drv_error_t *err);

/* Fold one finished provider call into the state: a launched node gets its
 * instance_id; a failed launch terminates its node record, backs the
 * (type, capacity) off in the node autoscaler (fallback or wait) and shows
 * the error on the nodepool (status.provider_error) with an event. */
void drv_cloud_absorb(drv_head_t *head, struct drv_scaling *scaling, const drv_prov_result_t *r,
                      int64_t now_ms);

/* The nodes of provider ops and the accounts of its clusters, for
 * ops->known_nodes (arrays malloc'd; caller frees). */
void drv_cloud_known(drv_head_t *head, const drv_provider_ops_t *ops, drv_node_ref_t **nodes,
                     size_t *n, drv_cloud_settings_t **accounts, size_t *n_accounts);

#endif
