/* aws.h — the `aws` provider: the cloud worker (cloudw.h) over EC2
 * (ec2.h). The worker makes every EC2 call on its own thread, so a slow
 * cloud never stalls the controller: it lists this head's instances (tag
 * drover:head) every few seconds per account, terminates orphans (an
 * instance whose node does not exist) after the cluster's grace period, and
 * hands finished calls back (ops->results). */
#ifndef DRV_AWS_H
#define DRV_AWS_H

#include "common/error.h"
#include "provider/provider.h"

typedef struct drv_cloudw drv_aws_t;   /* provider/cloudw.h */

/* Start the worker (droverd's main, before the controller; destroyed after
 * the HTTP threads stop); the ops find it in drv_prov_env_t.aws. The head id
 * (tag drover:head) is kept in data_dir/head-id, so a restarted head
 * recognizes its instances. */
drv_aws_t *drv_aws_create(const char *data_dir, drv_error_t *err);
void drv_aws_destroy(drv_aws_t *a);

extern const drv_provider_ops_t drv_aws_ops;

/* The boot script a new instance runs (user-data): starts drover-agent
 * with the head URL and the node's join token; installs nothing. Caller
 * frees. Exposed for tests. */
char *drv_aws_user_data(const drv_node_launch_t *l);

/* EC2 calls made so far (for /metrics and tests). */
unsigned long long drv_aws_calls(drv_aws_t *a);

#endif
