/* gang.h — gang placement: all W workers of a training job placed on a
 * snapshot at once, or none. Pure functions of the snapshot (place.h):
 * nothing here locks, does I/O or reads a clock.
 *
 * A gang is W identical workers (per-worker resources as a replica's
 * request: whole GPUs, a share of one, CPU, memory, GPU types). The answer
 * says which node each rank goes to, ranks packed so that the workers of
 * one node are consecutive (rank 0 on the node holding the most of them),
 * or why the gang cannot fit ("needs 4×1 GPU, at most 3 free on nodes of
 * nodepool gpu"). drv_gang_place never changes the snapshot; the caller
 * commits the whole placement with drv_gang_commit, so a partial gang can
 * never hold capacity.
 *
 * Preferences, in this order:
 *   1. one nodepool: the highest-priority nodepool that can hold the whole
 *      gang; only when none can alone, nodes of all its nodepools together
 *      (higher priority first on ties);
 *   2. fewer nodes: the nodes that can take the most workers first (the
 *      fewest nodes that hold W), the last node the tightest one that
 *      holds the rest (big free nodes stay free for big gangs);
 *   3. the placement policy's score (drover's fragmentation-aware default)
 *      of one worker on the node, then node order, between nodes that
 *      tie on 1 and 2.
 *
 * Nodepools: a node's `pool` is an id; a gang request maps it to the
 * job's rank for that nodepool (pool_rank[id], 0 = the job's first, < 0 =
 * not allowed), or, without a map, `pool` already is the rank (place.h).
 */
#ifndef DRV_GANG_H
#define DRV_GANG_H

#include <stdbool.h>
#include <stddef.h>

#include "sched/place.h"

#define DRV_GANG_MAX_WORKERS 4096

typedef struct drv_gang_request {
    int workers;                    /* W, 1..DRV_GANG_MAX_WORKERS */
    drv_sched_request_t worker;     /* each worker's resources */
    const int *pool_rank;           /* by node pool id; NULL: the id is the rank */
    size_t n_pool_rank;             /* ids >= this are not allowed */
    const char *const *pool_names;  /* by node pool id, for messages; NULL: "#ID" */
    size_t n_pool_names;
} drv_gang_request_t;

typedef struct drv_gang_placement {
    drv_sched_choice_t *ranks;      /* the caller's array of `workers` entries;
                                       ranks[r].node is rank r's node index */
    int n_nodes;                    /* distinct nodes used */
    int pool_rank;                  /* the job's nodepool rank used; -1: several */
} drv_gang_placement_t;

/* Place the whole gang. 0 and out->ranks[0..W) filled, or -1 with why (a
 * sentence) and out->ranks untouched beyond scratch use. policy NULL = the
 * default. The snapshot is not changed. */
int drv_gang_place(const drv_sched_node_t *nodes, size_t n, const drv_gang_request_t *req,
                   const drv_place_policy_t *policy, drv_gang_placement_t *out, char *why,
                   size_t why_len);

/* Record (or remove) a whole placement in the snapshot. Release is the
 * inverse of commit except for drv_sched_node_t.kinds (left as is). */
void drv_gang_commit(drv_sched_node_t *nodes, const drv_gang_request_t *req,
                     const drv_sched_choice_t *ranks);
void drv_gang_release(drv_sched_node_t *nodes, const drv_gang_request_t *req,
                      const drv_sched_choice_t *ranks);

/* The job's rank for node nd's nodepool (-1: not allowed or not schedulable). */
int drv_gang_node_rank(const drv_gang_request_t *req, const drv_sched_node_t *nd);

/* How many workers of this shape the node could take now, at most cap. */
int drv_gang_node_capacity(const drv_sched_node_t *nd, const drv_sched_request_t *w, int cap);

/* GPUs one worker takes, as a number (a share: its compute fraction). */
double drv_gang_worker_gpus(const drv_sched_request_t *w);

/* "4×1 GPU", "2×8 GPUs", "3×a 50% share of a GPU", "2×CPU-only" into buf. */
void drv_gang_describe(const drv_gang_request_t *req, char *buf, size_t len);

#endif
