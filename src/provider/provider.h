/* provider.h — where nodes come from (design §2). A provider turns a node
 * record into a machine running drover-agent and releases it again.
 *
 * Calls happen on the controller thread, never under the state lock
 * (starting a process or calling a cloud API is slow). */
#ifndef DRV_PROVIDER_H
#define DRV_PROVIDER_H

#include <stdbool.h>

#include "common/error.h"
#include "head/head.h"

typedef struct drv_node_launch {
    char node_id[64];
    char owner[64];
    char secret[80];          /* the node credential, handed to the agent */
    char gpus[128];           /* --gpus spec from the instance type ("none", "2xL4:24576") */
    int cpus;
    long long memory_mib;
} drv_node_launch_t;

typedef struct drv_provider_ops {
    const char *name;
    bool provisions;          /* false: self-managed, the operator starts agents */
    int (*create_node)(drv_head_t *head, const drv_node_launch_t *l, drv_error_t *err);
    /* Ask the machine to go away (gracefully). */
    int (*delete_node)(drv_head_t *head, const char *owner, const char *node_id,
                       drv_error_t *err);
    /* Is the machine still there (a local agent process alive)? */
    bool (*alive)(drv_head_t *head, const char *owner, const char *node_id);
} drv_provider_ops_t;

/* Ops for a provider id ("local", "self-managed", "aws", ...). Providers
 * without an implementation yet get the self-managed ops (nothing is
 * provisioned; agents join with join tokens). */
const drv_provider_ops_t *drv_provider_ops(const char *provider);

#endif
