/* nodes.h — node and replica facts shared by the API handlers (api/h_agent.c,
 * h_nodes.c, ...) and the head (the controller, the gateway's tables). All
 * functions run under the state lock (write lock for the mutators). */
#ifndef DRV_NODES_H
#define DRV_NODES_H

#include <jansson.h>
#include <stdbool.h>

#include "catalog/presets.h"
#include "sched/place.h"
#include "state/head.h"
#include "state/state.h"

enum {
    DRV_NODE_PROVISIONING = 0,   /* created, agent not yet synced */
    DRV_NODE_READY,
    DRV_NODE_NOT_READY,
    DRV_NODE_LOST,
};

/* The state a node shows: lifecycle state, or draining / terminating. */
const char *drv_node_state_name(const drv_obj_t *node);
bool drv_node_schedulable(const drv_obj_t *node);

/* Create a node record for nodepool np (under the write lock): id is
 * generated, the credential is minted; secret receives it. instance_type
 * NULL: the nodepool's first; capacity "on_demand" | "spot" (NULL: on_demand). */
drv_obj_t *drv_node_create(drv_head_t *head, const drv_obj_t *np, const char *provider,
                           const char *instance_type, const char *capacity, char *secret,
                           uint64_t *seq, drv_error_t *err);

/* Set boolean spec fields of a node (a durable write, only when one
 * changes): names[i] = values[i]. Returns the node object now in the state
 * (n itself when nothing changed; n is freed otherwise) and *seq the write's
 * seq (n->seq when nothing changed). */
drv_obj_t *drv_node_set_flags(drv_state_t *st, drv_obj_t *n, const char *const *names,
                              const bool *values, size_t count, uint64_t *seq);

/* Bump a node's desired-set version and wake its long poll. */
void drv_node_touch(drv_head_t *head, drv_obj_t *node);
/* Node object of a replica's spec.node (owner-scoped); NULL if none. */
drv_obj_t *drv_replica_node(drv_state_t *st, const drv_obj_t *replica);
/* Delete a replica and tell its node. Returns the write's seq. */
uint64_t drv_replica_delete(drv_head_t *head, drv_obj_t *replica);
/* Desired replica set of a node, as sent to its agent. */
json_t *drv_node_desired(drv_head_t *head, const drv_obj_t *node);
/* containers: put a runtime's image (runtime.image, else its preset's), args,
 * pull_policy and the login of its image_credential (owner's) into desired
 * entry d; with runtime.preset the server's command line rendered for in
 * (catalog/presets.h); nothing without an image.
 * For replicas and job workers (state/jobs.c). */
void drv_node_desired_image(drv_state_t *st, const char *owner, const json_t *rt,
                            const drv_preset_in_t *in, json_t *d);
/* The placement request of a replica of deployment dep of model: its
 * resources, acceptable GPU types (pointers into the model's spec, at most
 * max_types, put in types[], which rq->gpu_types points at) and
 * disable_packing. */
void drv_replica_request(const drv_obj_t *model, const drv_obj_t *dep, drv_sched_request_t *rq,
                         const char **types, size_t max_types);
/* The rank of each entry of dep's `nodepools` list by priority: 0 for the
 * highest, ties in the list's order; rank[k] for entry k (at most max
 * entries). Returns how many entries it ranked. */
size_t drv_deployment_ranks(const drv_obj_t *dep, int *rank, size_t max);
/* Re-render a node's status from its soft facts and last report. */
void drv_node_render_status(drv_state_t *st, drv_obj_t *node);

#endif
