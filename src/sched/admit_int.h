/* admit_int.h — what admission's files share and nobody else sees
 * (admit.c: the pass; victims.c: preemption victims; edf.c: the guard on
 * work that cannot be preempted): GPU counts of gangs and placements on a
 * snapshot, as drv_gang_worker_gpus counts them (a share: its compute
 * fraction).
 */
#ifndef DRV_ADMIT_INT_H
#define DRV_ADMIT_INT_H

#include "sched/admit.h"

/* Slack when comparing GPU counts (shares are fractions). */
#define ADMIT_EPS 1e-9

/* GPUs a gang holds in all. */
double sched_gang_gpus(const drv_gang_request_t *g);

/* GPUs free on the snapshot that gang g could use (its nodepools; a whole
 * GPU per worker for workers of >= 1 GPU, else the compute left). */
double sched_free_gpus(const drv_sched_node_t *nodes, size_t n, const drv_gang_request_t *g);

/* GPUs a placement (job at ranks) holds on nodes, and of types, that gang
 * g could use. */
double sched_held_for(const drv_sched_node_t *nodes, const drv_gang_request_t *job,
                      const drv_sched_choice_t *ranks, const drv_gang_request_t *g);

#endif
