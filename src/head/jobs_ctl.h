/* jobs_ctl.h — the controller's pass over training jobs (issue 15), run
 * under the state write lock after the deployments' replicas are placed:
 *   1. each running gang is followed: all ranks reported starting or
 *      running -> running; every rank exited 0 -> succeeded; a rank that
 *      failed, or a node of its placement lost, gone or terminating -> the
 *      whole gang restarts (attempt + 1, back through the queue) while
 *      restarts < max_restarts, else failed; past timeout_seconds -> failed;
 *   2. a queued job with timeout_seconds (its run-time estimate) and no
 *      wait bound yet gets one, once: submit + 2 x max(its FIFO wait,
 *      600 s), its FIFO start from a fresh FIFO shadow of its owner's jobs
 *      (drv_fifo_shadow_bounds: the recorded ones replayed from their
 *      recorded starts, the new ones in submit order), recorded in
 *      run.wait (state/jobs.h); the queue then carries each job's deadline
 *      (drv_wait_requeued) and cfg.job_wait_margin_s, and running jobs
 *      near their bound are no victims (drv_admit_victim_priority), as in
 *      drover-sim jobs;
 *   3. the queue (queued, restarting, unschedulable jobs) goes through
 *      drv_admit (sched/admit.h) on a copy of the pass's snapshot, the
 *      deployments' replicas that found no room placed first (one that
 *      still does not fit preempts preemptible jobs); an
 *      admitted gang's placement is committed whole (admitted, then
 *      starting: its workers are in their nodes' desired sets, with
 *      MASTER_ADDR = rank 0's node address and a MASTER_PORT from
 *      the job_port_min..max range (29500..29999) that no other gang with
 *      rank 0 on that node uses; rank 0's agent checks it is free before
 *      it starts: a port in use starts the gang again with another one,
 *      not as a restart);
 *   4. when the queue's head does not fit, the preemptible running jobs of
 *      lower priority (any, when the head is due by its wait bound) that lose the least work (drv_admit_victims) are
 *      preempted: off their nodes, queued again as attempt + 1; and the
 *      head's workers are handed to the node autoscaler as wants.
 * Every state change is a durable write and an event (state/jobs.c).
 */
#ifndef DRV_JOBS_CTL_H
#define DRV_JOBS_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "head/scaling.h"
#include "sched/place.h"
#include "state/head.h"

/* The default MASTER_PORT range (head config job_port_min/max) */
#define DRV_JOBS_PORT_BASE 29500
#define DRV_JOBS_PORT_COUNT 500
/* Starts of one attempt with another MASTER_PORT (rank 0's in use) before
 * that counts as a failure */
#define DRV_JOBS_PORT_RETRIES 8

/* nodes: the pass's snapshot, parallel to the node collection, with the
 * replicas and the active jobs' placements counted (not changed here). */
/* *wants (malloc'd, NULL when none; the caller frees) gets one entry per
 * worker of the queue's head when it waits for room, keyed by the job's key
 * in deployment_key: the node autoscaler treats them as pending replicas
 * of the job's nodepools (head/scaling.c). */
void drv_jobs_pass(drv_head_t *head, const drv_place_policy_t *policy,
                   const drv_sched_node_t *nodes, size_t n, const drv_pending_t *pending,
                   size_t n_pending, int64_t now_ms, drv_pending_t **wants, size_t *n_wants);

/* A node silent past its job lease and the lease's grace (its job workers
 * are gone) that a gang still waiting to run again had run on: the node
 * autoscaler counts it as gone (head/scaling.c), so its replacement starts
 * then rather than once the node is lost (node_lost_ms). Nodes that ran no
 * such gang (inference only) keep node_lost_ms. */
bool drv_jobs_node_replaceable(drv_head_t *head, const drv_obj_t *node);

#endif
