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

/* One job of drv_fifo_shadow_bounds, in submit order. */
typedef struct drv_wait_job {
    double submit;              /* seconds, the caller's clock */
    double est;                 /* run-time estimate, seconds (> 0) */
    drv_gang_request_t gang;
    /* in: its FIFO start recorded earlier (known), or NAN: to compute.
     * out (computed ones): its FIFO start, INFINITY when none */
    double fifo_start;
    double deadline;            /* out (computed ones): drv_wait_deadline, INFINITY: none */
} drv_wait_job_t;

/* The bounds of the jobs whose fifo_start is NAN, on a fresh shadow over
 * nodes: for a head that does not keep a shadow across restarts and node
 * changes. Known jobs are replayed (submitted at their recorded start, so
 * the shadow holds them where it held them then, as far as these nodes
 * allow); known ones with no start, or whose estimated end is at or before
 * the first unknown job's submit (they cannot delay it), are left out.
 * Each unknown job is then submitted at its own submit time, in order:
 * deadline = drv_wait_deadline(submit, fifo_start, factor, floor_s).
 * Pure: no clock, locks or I/O. 0, or -1 with err (as
 * drv_fifo_shadow_submit). */
int drv_fifo_shadow_bounds(const drv_sched_node_t *nodes, size_t n,
                           const drv_place_policy_t *policy, drv_wait_job_t *jobs, size_t n_jobs,
                           double factor, double floor_s, drv_error_t *err);

/* A requeued job's bound (a restart or preemption queues it again): its
 * budget of queueing (bound - submit) less the seconds it queued before
 * (queued_s), counted from when it queued again (enqueued_at) — the
 * deadline drover-sim gives a requeued job. The first time: the bound. */
double drv_wait_requeued(double bound, double submit, double enqueued_at, double queued_s);

#endif
