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

/* The EDF guard (edf.c; drv_admit_input_t.edf_guard). A context per pass
 * (its scratch: two snapshots, the queue's placements). */
typedef struct sched_edf sched_edf_t;
sched_edf_t *sched_edf_create(size_t n, const drv_admit_input_t *in);
void sched_edf_destroy(sched_edf_t *e);

/* Would job j, started now, be work no due job could take back: not
 * preemptible, or protected (drv_admit_victim_priority) by its bound? */
bool sched_edf_pinned(const drv_admit_job_t *j, double now, double wait_margin);

/* 1 when starting queue job qi at ranks on nodes (the pass's snapshot, out
 * its verdicts so far) makes more queued jobs with earlier bounds miss
 * them than without it (*missed: the first that would, a queue index);
 * 0 when it does not or qi is not pinned; -1 never (no allocation). */
int sched_edf_holds(sched_edf_t *e, const drv_sched_node_t *nodes, const drv_admit_input_t *in,
                    const drv_admit_result_t *out, size_t qi, const drv_sched_choice_t *ranks,
                    size_t *missed);

#endif
