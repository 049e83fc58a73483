/* scaling.h — the controller's autoscaling glue: the replica and node
 * autoscalers' memory between passes (per deployment, per nodepool) and the
 * calls into their pure decisions (src/autoscale/). Everything here runs on
 * the controller thread under the state write lock, without I/O. */
#ifndef DRV_SCALING_H
#define DRV_SCALING_H

#include <stdbool.h>
#include <stdint.h>

#include "autoscale/replicas.h"
#include "provider/provider.h"
#include "sched/place.h"
#include "state/head.h"
#include "state/state.h"

typedef struct drv_scaling drv_scaling_t;

drv_scaling_t *drv_scaling_create(void);
void drv_scaling_destroy(drv_scaling_t *s);

/* Desired replica count of a deployment now. load: in-flight + queued
 * requests (0 without a gateway); svc: the gateway's service totals for the
 * SLO model (NULL: none); demand: a request waits while it has no
 * replica. current: its replicas, starting: those placed and not yet ready,
 * on_way: those on their way to ready (starting, or not placed yet; not a
 * failed one), ready: those that serve (drv_ras_decide, replicas.h).
 * A change is logged and described in the deployment's last_scale_event.
 * llm: the ready replicas' own counts (n_llm of them; autoscale.metric
 * queue | kv_cache sizes on them instead of load, drv_ras_llm_load). */
int64_t drv_scaling_replicas(drv_scaling_t *s, drv_head_t *head, const drv_obj_t *dep,
                             int64_t now_ms,
                             double load, const drv_ras_llm_sample_t *llm, size_t n_llm,
                             const drv_head_service_t *svc, bool demand,
                             int current, int starting,
                             int on_way, int ready, char *event, size_t event_len);

/* Whether an SLO-mode deployment (ttft_slo_ms / e2e_slo_ms) saw arrivals
 * in the last DRV_SCALING_BUSY_MS (at the last full pass): the controller
 * then runs the next full pass on its next tick (250 ms), as drover-sim
 * serve's controller does, instead of waiting for a write or the 5 s
 * safety net. (Until issue 20's loop study it asked for arrivals since
 * the pass before: at 6.5 requests/s one 250 ms tick in five has none,
 * so passes fell back to seconds apart, and the model, which then put a
 * pass's arrivals into one 1 s bucket, read bursts that were not there;
 * drv_ras_observe_counters now spreads them over the gap as well.) The
 * gateway kicks the controller at the first arrival after
 * DRV_GW_QUIET_KICK_MS without one (gateway/gateway.h), so a pass follows
 * every arrival within a tick, as in drover-sim serve. */
#define DRV_SCALING_BUSY_MS 5000
bool drv_scaling_busy(const drv_scaling_t *s);

/* The SLO model of deployment dep_key's last decision (status.autoscaler,
 * docs/api.md): a new object, or NULL when it has no ttft_slo_ms /
 * e2e_slo_ms or was not decided on. */
json_t *drv_scaling_autoscaler_status(const drv_scaling_t *s, const char *dep_key);

/* A replica that found no room, and its deployment ("owner/id"): the node
 * autoscaler of the deployment's first nodepool by priority should make
 * some, or the next one when it cannot (overflow, autoscale/overflow.h). */
typedef struct drv_pending {
    char deployment_key[256];
    drv_sched_request_t req;     /* req.gpu_types is set from types by drv_scaling_nodes */
    const char *types[8];        /* acceptable GPU types (point into the model's spec) */
    int gang;                    /* 0: a replica; else a job's workers' shared id: the
                                    node autoscaler provisions for all of them or none */
} drv_pending_t;

typedef void (*drv_launch_fn)(void *ctx, const drv_provider_ops_t *ops,
                              const drv_node_launch_t *launch);

/* Node autoscaler pass over every nodepool of a provisioning provider
 * (call once per full pass, after drv_scaling_replicas for every
 * deployment: it also forgets objects the pass did not touch):
 * creates node records (and asks launch() to start their machines) for
 * pending replicas (in the deployment's nodepools by priority, overflowing
 * to the next when one cannot get capacity) and min_nodes, marks empty nodes past their delay and
 * nodes that never joined as terminating. */
void drv_scaling_nodes(drv_scaling_t *s, drv_head_t *head, int64_t now_ms,
                       const drv_pending_t *pending, size_t n_pending, drv_launch_fn launch,
                       void *ctx);

/* A provider could not make a node of nodepool np (instance type, capacity
 * "on_demand" | "spot"): that option backs off in the node autoscaler, which
 * then falls back (spot_with_fallback) or waits (no retry storm). */
void drv_scaling_report_failure(drv_scaling_t *s, drv_head_t *head, const drv_obj_t *np,
                                const char *type, const char *capacity, int64_t now_ms,
                                const char *why);

#endif
