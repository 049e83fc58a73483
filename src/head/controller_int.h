/* controller_int.h — what the files of the head's control loop share:
 * controller.c (the pass, node lifecycle and providers, roll-ups, the
 * thread) and controller_place.c (replicas and their placement, node
 * consolidation's turn). The controller's context, a pass's placement
 * snapshot, and the functions one file calls in the other. Not for other
 * code: controller.h is the controller's interface.
 */
#ifndef DRV_HEAD_CONTROLLER_INT_H
#define DRV_HEAD_CONTROLLER_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "head/consolidate.h"
#include "head/controller.h"
#include "head/scaling.h"
#include "provider/provider.h"
#include "sched/place.h"
#include "state/head.h"

#define MAX_ACTIONS 256

typedef struct action {
    enum { ACT_CREATE, ACT_DELETE } kind;
    const drv_provider_ops_t *ops;
    drv_node_launch_t launch;
} action_t;

struct drv_controller {
    drv_head_t *head;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, kicked, started;
    bool first_pass;
    bool dirty;                  /* a kick or a node change since the last full pass */
    uint64_t seen_seq;           /* state seq at the last full pass */
    int64_t last_full_ms;
    int64_t boot_ms;
    const drv_place_policy_t *policy;
    action_t actions[MAX_ACTIONS];
    size_t n_actions;
    drv_scaling_t *scaling;
    drv_consolidation_t *cons;   /* the node consolidation move in progress */
    drv_pending_t *pending;      /* replicas that found no room this pass */
    size_t n_pending, cap_pending;
};

typedef struct snapshot {
    drv_sched_node_t *nodes;     /* parallel to the node collection */
    size_t n;
    bool built;
    drv_sched_shapes_t *shapes;  /* typical request shapes of the running replicas */
    drv_sched_ctx_t *ctx;        /* the policy bound to nodes (incremental scores) */
} snapshot_t;

static inline const char *sget(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static inline int64_t iget(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* controller_place.c: 3. replicas and placement */
void drv_controller__free_snapshot(snapshot_t *s);
void drv_controller__build_snapshot(drv_controller_t *c, snapshot_t *s);
/* A replica found no room: the node autoscaler is asked to make some. */
void drv_controller__add_pending(drv_controller_t *c, const drv_pending_t *want);
void drv_controller__replicas(drv_controller_t *c, snapshot_t *snap);
void drv_controller__consolidate(drv_controller_t *c, snapshot_t *snap);

#endif
