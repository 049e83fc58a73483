/* node_lease.h — the node's lease on its job workers (issue 15): a node cut
 * off from the head stops its training workers once the lease runs out, so
 * that a gang the head restarts elsewhere never runs twice at once (two
 * copies writing checkpoints); inference replicas keep serving.
 *
 * The sync thread renews the lease after each sync the head answered,
 * from the time that sync was sent (the head saw the node no earlier), for
 * the head's node_timeout_ms (each sync answer carries it; 10 s by
 * default). The lease's own thread looks every LEASE_TICK_MS; once the
 * lease has run out it calls drv_supervisor_fail_jobs once (SIGTERM, then
 * SIGKILL after the head's job_lease_grace_ms, 2 s; the workers report
 * failed with the reason when the head is back, and the head restarts the
 * gang). The head places the gang of a node that went silent again once
 * node_timeout_ms + job_lease_grace_ms + 1 s have passed since the node's
 * last sync arrived (head/jobs_ctl.c): by then its workers are gone, as
 * the lease counts from that sync's send, which was earlier.
 * Before the first answered sync there is no lease (nothing to stop).
 *
 * Thread ownership: renew() from the sync thread, the check on the
 * lease's thread; the shared fields are atomics.
 */
#ifndef DRV_NODE_LEASE_H
#define DRV_NODE_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/supervisor.h"
#include "common/error.h"

typedef struct drv_nlease drv_nlease_t;

/* Starts the lease's thread; sup is not owned. NULL with err on failure. */
drv_nlease_t *drv_nlease_create(drv_supervisor_t *sup, drv_error_t *err);
/* Stops the thread and frees l (NULL-able). */
void drv_nlease_destroy(drv_nlease_t *l);
/* A sync sent at sent_mono_ms (drv_mono_ms) was answered; the lease lasts
 * lease_ms from then (values outside 200 ms .. 1 h keep the last one), and
 * a lapse gives the workers grace_ms from SIGTERM to SIGKILL (the head's
 * job_lease_grace_ms; outside 0 .. 600 s: kept, at first the stop grace). */
void drv_nlease_renew(drv_nlease_t *l, int64_t sent_mono_ms, int64_t lease_ms,
                      int64_t grace_ms);

/* The decision, pure: the lease has run out at `now` (false when never
 * renewed). */
bool drv_nlease_expired(int64_t renewed_mono_ms, int64_t lease_ms, int64_t now_mono_ms);

#endif
