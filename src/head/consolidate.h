/* consolidate.h — node consolidation in the daemon: the move in progress
 * (one node at a time) and the controller's calls into the pure decisions
 * of autoscale/consolidate.h.
 *
 * A move: the node is held (not schedulable for new replicas) and its
 * replicas are "retiring": the controller does not count them towards their
 * deployment's replicas, so it starts as many new ones, placed as usual on
 * the other nodes. Once the new ones are ready (every deployment concerned
 * has as many ready replicas besides the retiring ones as it had ready in
 * all before), the retiring replicas are stopped and the node is marked
 * terminating (the scale-down path) unless that would take its nodepool
 * below min_nodes. A move given up (the node stops being ready or is
 * cordoned, a new replica finds no room, the new ones are not ready in
 * time) releases the hold and the retiring replicas count again (the
 * controller then drops the extra new ones). Each step is an event of the
 * nodepool and of the node.
 *
 * Everything here runs on the controller thread under the state write
 * lock, without I/O. The move is soft state: a head restart forgets it
 * (the same as a move given up).
 */
#ifndef DRV_HEAD_CONSOLIDATE_H
#define DRV_HEAD_CONSOLIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "head/scaling.h"
#include "sched/place.h"
#include "state/head.h"
#include "state/state.h"

#define DRV_CONSOLIDATION_PICK_EVERY_MS 5000     /* look for a candidate this often
                                                  * ($DROVER_TEST_CONSOLIDATION_PICK_MS
                                                  * in tests) */
#define DRV_CONSOLIDATION_PLACE_TIMEOUT_MS 3000  /* new replicas must be placed by then */

typedef struct drv_consolidation drv_consolidation_t;

drv_consolidation_t *drv_consolidation_create(void);
void drv_consolidation_destroy(drv_consolidation_t *c);

/* Whether node (a node object) is held by the move in progress. */
bool drv_consolidation_holds_node(const drv_consolidation_t *c, const drv_obj_t *node);
/* Whether replica is retiring (its replacement is being started). */
bool drv_consolidation_retiring(const drv_consolidation_t *c, const drv_obj_t *replica);
/* Whether a move in progress concerns deployment dep. */
bool drv_consolidation_moves(const drv_consolidation_t *c, const drv_obj_t *dep);

/* Whether the next pass would look for a node to empty (no move in
 * progress, some nodepool has consolidation on, the last look was long
 * enough ago): the caller then provides the placement snapshot. */
bool drv_consolidation_due(const drv_consolidation_t *c, drv_head_t *head, int64_t now_ms);

/* One pass: follow the move in progress, or (with a snapshot: nodes[],
 * parallel to the state's node collection, with what is allocated) look
 * for a node to empty with the placement policy. pending: the replicas
 * that found no room this pass; those whose deployment lists a nodepool
 * with consolidation on hold consolidation back (room is short there).
 * now_ms: a monotonic clock. true when it changed something (another pass
 * should follow soon). */
bool drv_consolidation_pass(drv_consolidation_t *c, drv_head_t *head,
                            const drv_place_policy_t *policy, const drv_sched_node_t *nodes,
                            size_t n_nodes, const drv_pending_t *pending, size_t n_pending,
                            int64_t now_ms);

#endif
