/* shadow.h — the online FIFO shadow: for each job, at its submission, the
 * time plain FIFO would start it, and from that the job's wait bound
 * (drv_admit_job_t.wait_deadline). A context that replays strict submit
 * order on its own copy of a snapshot with the jobs' run-time estimates:
 * job k starts at the earliest t >= max(its submit, job k-1's start) at
 * which, with the earlier shadow jobs ending at their estimated ends, the
 * whole gang places (drv_gang_place, the same placement as admission), so
 * it is shape-aware (a 2 × 8-GPU gang waits for two whole nodes). Strict
 * order makes the answer final at submission: no later job can change an
 * earlier one's FIFO start. Deterministic; no clock, locks or I/O.
 *
 * With exact estimates (drover-sim's default) the shadow start equals the
 * FIFO scenario's own start; with estimates that are too long it is late
 * (a looser bound), too short, early. A job with no estimate (<= 0) holds
 * its GPUs for ever in the shadow: later jobs that need them get no bound.
 */
#ifndef DRV_SHADOW_H
#define DRV_SHADOW_H

#include <stddef.h>

#include "common/error.h"
#include "sched/gang.h"

typedef struct drv_fifo_shadow drv_fifo_shadow_t;

/* A shadow over a copy of nodes (their capacity as given, normally empty
 * or holding what FIFO cannot use, such as reserved replicas). NULL with
 * err on out of memory. */
drv_fifo_shadow_t *drv_fifo_shadow_create(const drv_sched_node_t *nodes, size_t n,
                                          const drv_place_policy_t *policy, drv_error_t *err);
void drv_fifo_shadow_destroy(drv_fifo_shadow_t *sh);

/* Submit the next job in submit order: *start = its FIFO start (INFINITY
 * when it would never fit, or waits behind a job with no estimate; such a
 * job is left out of the shadow). The gang's pointers need only be valid
 * during the call. 0, or -1 with err (out of memory, bad gang). */
int drv_fifo_shadow_submit(drv_fifo_shadow_t *sh, double submit, const drv_gang_request_t *gang,
                           double est_duration, double *start, drv_error_t *err);

/* The wait bound of issue 15: submit + factor x max(FIFO wait, floor_s)
 * (INFINITY when fifo_start is). */
double drv_wait_deadline(double submit, double fifo_start, double factor, double floor_s);

#endif
