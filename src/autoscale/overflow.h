/* overflow.h — nodepool priority with overflow: the node autoscaler over
 * every provisioning nodepool at once.
 *
 * A deployment lists its nodepools with priorities; placement already
 * prefers the nodes of the highest one. When a replica finds no room, the
 * node autoscaler of its highest-priority nodepool should make some; when
 * that nodepool cannot (at max_nodes, every instance type that would hold
 * the replica backing off after capacity errors or provisioning timeouts,
 * or no instance type of it holds the request at all), the next nodepool
 * by priority gets the replica, and so on down the list.
 *
 * Pure (design §9): one drv_nas_decide_gangs() per nodepool, no clock, no
 * I/O. A gang held back by max_nodes in a nodepool is uncovered there as a
 * whole, so all its workers move on to the next nodepool together.
 * Algorithm: every pending replica starts at the first nodepool of its
 * list; every nodepool is decided with the replicas at it (in the caller's
 * order). A replica its nodepool leaves uncovered moves to its next
 * nodepool, and the nodepools it left and joined are decided again, from
 * the memory (drv_nas_state_t) they had before this call, until no replica
 * moves. A replica only moves down its list, so this ends after at most
 * (sum of list lengths) rounds. The replicas at the end of their list stay
 * there, uncovered, and show in that nodepool's at_max/no_fit/backoff
 * counts and events.
 *
 * Nodes on their way count first: a replica that a node still provisioning
 * in a lower nodepool of its list would hold (it overflowed there on an
 * earlier pass), and that no node on its way in its first nodepool would,
 * is tried there before the top of its list, so its first nodepool does
 * not provision a second node for it once it can again (a backoff ran
 * out). Never over-provision while nodes are coming, across nodepools too.
 *
 * Every move is told twice, as an "overflow" event of the nodepool left
 * (where the replicas go, and why) and of the nodepool joined (where they
 * come from, and why), one per (from, to, why).
 */
#ifndef DRV_AUTOSCALE_OVERFLOW_H
#define DRV_AUTOSCALE_OVERFLOW_H

#include "autoscale/nodes.h"

#define DRV_NAS_MAX_PRIO 16           /* nodepools per deployment (API limit) */

/* One provisioning nodepool. */
typedef struct drv_nas_pool {
    const char *name;                 /* "CLUSTER/NODEPOOL", for events */
    const drv_nas_config_t *cfg;
    drv_nas_state_t *state;           /* its memory: updated by the final decision */
    const drv_nas_node_t *nodes;
    size_t n_nodes;
} drv_nas_pool_t;

/* One pending replica and where it may go. */
typedef struct drv_nas_want {
    drv_sched_request_t req;
    int pools[DRV_NAS_MAX_PRIO];      /* indices into pools[], highest priority first */
    size_t n_pools;                   /* 0: nowhere to provision (it is ignored) */
    int gang;                         /* 0: a lone replica; else the id its gang's workers
                                         share (drv_nas_decide_gangs: all or none) */
} drv_nas_want_t;

/* Decide every nodepool. out[] has n_pools entries (one decision each, in
 * the order of pools[]); at[] (optional, n_wants entries) gets the index
 * of the nodepool each replica ended at, -1 for those with no nodepool;
 * covered[] (optional) whether that nodepool's decision holds it.
 * 0, or -1 with err (an invalid config or pool index, out of memory); on
 * failure no pool's state changed. */
int drv_nas_decide_pools(const drv_nas_pool_t *pools, size_t n_pools, int64_t now_ms,
                         const drv_nas_want_t *wants, size_t n_wants, drv_nas_decision_t *out,
                         int *at, bool *covered, drv_error_t *err);

#endif
