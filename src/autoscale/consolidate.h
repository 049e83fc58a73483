/* consolidate.h — node consolidation decisions: which under-used node to
 * empty, and when a move in progress is done or must be given up.
 *
 * Consolidation is optional per nodepool (`consolidation: true`). A node
 * whose replicas all fit on the other nodes is worth removing: its
 * replicas are started again there, the old ones are stopped once the new
 * ones are ready, and the empty node goes. Both decisions are pure (design
 * §9): explicit inputs, the clock as an argument, no I/O; the caller
 * (head/consolidate.c) keeps the move in progress and carries it out.
 *
 * drv_cons_pick(): at most one node per call (one move at a time is the
 * caller's rule). A candidate:
 *   - is in a nodepool with consolidation on, whose live nodes stay >=
 *     min_nodes without it;
 *   - is ready and schedulable (a cordoned or draining node is the
 *     operator's: never touched), and holds at least one replica (empty
 *     nodes are the scale-down path's);
 *   - holds only ready replicas (never moves one that is still starting);
 *   - every one of its replicas fits, together, on the other schedulable
 *     nodes of its deployment's nodepools (simulated with the placement
 *     policy, in order, each committed before the next; cordoned nodes are
 *     not schedulable, so never targets; disable_packing and GPU types are
 *     the policy's, as for any placement).
 * Nothing is picked while any replica is pending: room is scarce then.
 * Order: fewest replicas, then least GPU memory allocated, then the
 * snapshot's order; at most DRV_CONS_MAX_TRIES candidates are simulated.
 *
 * drv_cons_progress(): a move is done when every deployment concerned has
 * at least as many ready replicas besides the old ones as it had ready
 * replicas in all when the move began (never fewer ready replicas than
 * before), or as it wants now if that is fewer (it was scaled down or
 * deleted meanwhile); given up when the node is no longer ready and schedulable, when
 * a new replica is still unplaced after place_timeout_ms, or when the move
 * takes longer than ready_timeout_ms.
 */
#ifndef DRV_AUTOSCALE_CONSOLIDATE_H
#define DRV_AUTOSCALE_CONSOLIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "sched/place.h"

#define DRV_CONS_MAX_REPLICAS 64      /* a node with more is not a candidate */
#define DRV_CONS_MAX_TRIES 16
#define DRV_CONS_DEFAULT_PLACE_TIMEOUT_MS (60 * 1000)
#define DRV_CONS_DEFAULT_READY_TIMEOUT_MS (15 * 60 * 1000)

typedef struct drv_cons_pool {
    bool enabled;                     /* consolidation: true (and nodes it can remove) */
    int min_nodes;
    int live;                         /* live nodes now (as the node autoscaler counts) */
} drv_cons_pool_t;

/* Per node of the snapshot (parallel to the drv_sched_node_t array). */
typedef struct drv_cons_node {
    int pool;                         /* index into pools[]; < 0: none */
} drv_cons_node_t;

/* A replica placed on a node of an enabled nodepool (the others may be
 * left out: only these nodes can be candidates). */
typedef struct drv_cons_replica {
    int node;                         /* index into the snapshot */
    drv_sched_request_t req;
    bool ready;
    const int *rank;                  /* per pool index: the pool's rank in the replica's
                                         deployment (0 = highest priority), < 0 not listed */
} drv_cons_replica_t;

typedef struct drv_cons_pick {
    int node;                         /* the candidate, -1: none */
    size_t n_moves;
    int replica[DRV_CONS_MAX_REPLICAS]; /* indices into reps[] */
    int target[DRV_CONS_MAX_REPLICAS];  /* where the simulation put each */
    char reason[256];                 /* why this node, or why none */
} drv_cons_pick_t;

/* Pick a node to empty (see above). policy: the placement policy (NULL:
 * the default). The snapshot is read only. 0 (out->node may be -1), or -1
 * with err on bad input or out of memory. */
int drv_cons_pick(const drv_place_policy_t *policy, const drv_sched_node_t *nodes,
                  const drv_cons_node_t *info, size_t n_nodes, const drv_cons_pool_t *pools,
                  size_t n_pools, const drv_cons_replica_t *reps, size_t n_reps,
                  size_t n_pending, drv_cons_pick_t *out, drv_error_t *err);

/* One deployment concerned by a move, as it stands now. */
typedef struct drv_cons_dep {
    int ready_before;                 /* its ready replicas when the move began */
    int desired;                      /* the replicas it wants now (0: deleted) */
    int ready_new;                    /* ready replicas now, the old ones not counted */
    int unplaced;                     /* replicas waiting for a node */
} drv_cons_dep_t;

typedef struct drv_cons_watch {
    bool node_ok;                     /* still ready, not cordoned/draining/terminating */
    int64_t elapsed_ms;               /* since the move began */
    const drv_cons_dep_t *deps;
    size_t n_deps;
    int64_t place_timeout_ms, ready_timeout_ms;   /* 0: the defaults */
} drv_cons_watch_t;

typedef enum drv_cons_step {
    DRV_CONS_WAIT = 0,
    DRV_CONS_DONE,                    /* stop the old replicas, remove the node */
    DRV_CONS_ABORT,                   /* give up: the old replicas stay */
} drv_cons_step_t;

/* What to do with a move now; why gets a readable sentence for DONE and
 * ABORT. */
drv_cons_step_t drv_cons_progress(const drv_cons_watch_t *w, char *why, size_t why_len);

#endif
