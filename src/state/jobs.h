/* jobs.h — training jobs' run facts, shared by the API (api/h_jobs.c,
 * api/h_agent.c), the nodes' desired sets (state/nodes.c) and the job
 * controller (head/jobs_ctl.c). Every function runs under the state lock
 * (the write lock for the mutators) and does no I/O.
 *
 * A job object's spec is what the user gave (with defaults); its durable
 * run state is internal.run:
 *   {state, reason, attempt, restarts, preemptions, master_addr,
 *    master_port, placement: [{rank, node, gpus: [{index, uuid,
 *    memory_mib, compute_percent}], whole}], port_try (starts of this
 *    attempt again with another MASTER_PORT), last_workers: {attempt,
 *    port_try, nodes: [node by rank]} (where the last gang that left its nodes ran:
 *    its logs), rate: {gpus, usd_per_hour} (the current placement's,
 *    drv_job_rate), used: {gpu_seconds, cost_usd} (the ended placements'), submit_seq (the store seq of its creation: submission
 *    order within a second), admitted_at, started_at, finished_at,
 *    wait: {fifo_start, bound} or {none: why} (its wait bound, epoch
 *    seconds, written once: head/jobs_ctl.c), enqueued_at (when it last
 *    queued again; absent: created_at), queued_s (seconds queued before
 *    its current admission, all attempts)}
 * (absent: queued, attempt 1). Its soft status is the run state rendered,
 * plus what the agents report of the current attempt's workers
 * (status.workers, by rank) and the queue facts of the last admission pass
 * (status.queue_position, status.waiting). Workers of attempt A have the
 * id JOB-aA-rRANK on their nodes (JOB-aA-pT-rRANK after T port retries).
 */
#ifndef DRV_STATE_JOBS_H
#define DRV_STATE_JOBS_H

#include <jansson.h>
#include <stdbool.h>

#include "sched/place.h"
#include "state/head.h"
#include "state/state.h"

/* The node lease (agent/node_lease.h): an agent whose syncs went unanswered
 * for node_timeout_ms stops its job workers, SIGKILL after this grace (sent
 * in each sync answer); the job controller places the gang of a silent
 * node again once node_timeout_ms + this + DRV_JOB_LEASE_MARGIN_MS passed
 * since the node's last sync arrived. */
#define DRV_JOB_LEASE_GRACE_MS 2000
#define DRV_JOB_LEASE_MARGIN_MS 1000

/* The worker of rank `rank` of the job's attempt: "JOB-aA-rR", or
 * "JOB-aA-pT-rR" for the attempt's T-th start with another MASTER_PORT
 * (run.port_try: rank 0's node had the port in use). */
void drv_job_worker_id(const char *job_id, int attempt, int port_try, int rank, char *buf,
                       size_t len);
/* What a placement holds, for the job's GPU-hours and cost: {gpus (a
 * share counts its compute fraction), usd_per_hour (each worker's share
 * of its node's catalog price, status.cost.price_per_hour, by its GPUs
 * over the node's)}. Stored as run.rate at admission. */
json_t *drv_job_rate(drv_state_t *st, const char *owner, const json_t *placement);
/* run.port_try (0 when absent). */
int drv_job_port_try(const drv_obj_t *job);
/* The worker id of rank `rank` of the job's current attempt and port try. */
void drv_job_current_worker(const drv_obj_t *job, int rank, char *buf, size_t len);

/* Run state of a job (internal.run) or NULL (queued, never admitted). */
const json_t *drv_job_run(const drv_obj_t *job);
/* "queued" when it has no run state. */
const char *drv_job_state(const drv_obj_t *job);
int drv_job_attempt(const drv_obj_t *job);
/* The state holds a placement (admitted, starting, running). */
bool drv_job_state_active(const char *state);
/* A final state (succeeded, failed, cancelled). */
bool drv_job_state_final(const char *state);

/* Write a new run state (run is stolen): a durable put of the job, its
 * status rendered again, the nodes of the old and the new placement told
 * (their desired sets change), and, when the state changes or `type` is
 * given, an event "job/ID type: reason" (type NULL: the new state's name);
 * the controller is kicked for another pass.
 * Returns the job object now in the state (job is freed). */
drv_obj_t *drv_job_put_run(drv_head_t *head, drv_obj_t *job, json_t *run, const char *type);

/* Render the status again (run state, reported workers of the current
 * attempt, queue facts) without a store write. */
void drv_job_render(drv_state_t *st, drv_obj_t *job);
/* The queue facts of an admission pass: position (-1: none) and why it
 * waits (NULL: it does not). Re-renders only on a change. */
void drv_job_set_queue(drv_state_t *st, drv_obj_t *job, int position, const char *waiting);
/* Whether the last admission pass found the queued job due by its wait
 * bound (status.wait_bound.due). Re-renders only on a change. */
void drv_job_set_wait_due(drv_state_t *st, drv_obj_t *job, bool due);
/* Why the node autoscaler provisions nothing for the waiting gang
 * (status.provisioning; NULL: it does, or it is not asked). Re-renders only
 * on a change. */
void drv_job_set_provisioning(drv_state_t *st, drv_obj_t *job, const char *why);

/* A worker's request: per-worker resources and acceptable GPU types
 * (pointers into the job's spec, at most max_types, in types[]). */
void drv_job_request(const drv_obj_t *job, drv_sched_request_t *rq, const char **types,
                     size_t max_types);

/* Count the placements of active jobs into a snapshot whose nodes are
 * parallel to the node collection (controller's build_snapshot). */
void drv_jobs_snapshot(drv_state_t *st, drv_sched_node_t *nodes, size_t n);
/* A preempted gang's workers are stopping (SIGTERM, the agent's grace,
 * SIGKILL) after it left its placement: run.stopping keeps that placement
 * (each entry with its attempt, port_try and rank), and drv_jobs_snapshot
 * counts it as held until the node's agent reports the worker gone, so the
 * next pass places nothing on GPUs a victim still uses. Call with the job's
 * old run state still in place and the new run (before drv_job_put_run). */
void drv_job_stop_placement(const drv_obj_t *job, json_t *run);
/* Take the stopping placements back out of a snapshot: what the nodes will
 * hold once every stopping worker is gone (so that a pass does not choose
 * more victims for room that is already being freed). */
void drv_jobs_release_stopping(drv_state_t *st, drv_sched_node_t *nodes, size_t n);
/* A node's sync listed these workers (its report's `workers`): the stopping
 * workers of that node not listed, or listed as ended, are gone, and leave
 * run.stopping (a durable put). Returns whether a job changed. */
bool drv_jobs_stopping_report(drv_head_t *head, const drv_obj_t *node, const json_t *workers);

/* Append the workers placed on node to its desired set `out` (nodes.c). */
void drv_jobs_desired(drv_head_t *head, const drv_obj_t *node, json_t *out);

/* Fold one worker reported by node's agent ({id, job, state, ...}) into
 * the job's status; true when it changed. Stale reports are ignored. */
bool drv_job_absorb_worker(drv_head_t *head, const drv_obj_t *node, const json_t *rep);

#endif
