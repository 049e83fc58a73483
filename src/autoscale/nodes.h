/* nodes.h — the node autoscaler: which nodes a nodepool creates and deletes.
 *
 * Pure decisions over explicit inputs (design §9): no globals, no clock
 * reads (`now_ms` is an argument), no I/O. The caller keeps one
 * drv_nas_state_t per nodepool (recent capacity errors and provisioning
 * timeouts, with their backoff), owns its locking, and carries the
 * decision out (provider calls after the state lock is released).
 *
 * One drv_nas_decide() call, in this order:
 *   1. provisioning timeout: a node still provisioning (created, not yet
 *      joined) provision_timeout_ms after its creation is deleted
 *      ("provision_timeout") and its (instance type, capacity) backs off, so
 *      step 4 tries another capacity or type.
 *   2. nodes on their way: the pending replicas are placed, in the caller's
 *      order, on hypothetical empty nodes built from the instance types of
 *      the nodes still provisioning (the real placement policy, cfg->policy
 *      or drv_place_policy(NULL), and drv_sched_commit, one node at a time);
 *      then on empty ready nodes (they are kept, not scaled down, while they
 *      would hold one). What they hold needs no new node: never
 *      over-provision while nodes are coming.
 *   3. scale down: ready nodes empty for node_scale_down_delay_seconds are
 *      deleted, longest empty first, never below min_nodes ("scale_down").
 *   4. scale up for the replicas still uncovered, one node at a time: for
 *      each instance type of the nodepool (with the capacity the policy
 *      allows now, see below) simulate one new node filled from those
 *      replicas; take the type with the lowest price per placed replica
 *      (ties: more replicas, then the nodepool's order); repeat while
 *      replicas remain and live nodes < max_nodes ("scale_up"; when stopped
 *      by max_nodes: "at_max_nodes"; replicas no type of the nodepool can
 *      hold: "no_fit"; all options backing off: "backoff").
 *   5. min_nodes: while live nodes < min_nodes, the cheapest type per hour
 *      ("scale_up").
 * Live nodes = provisioning + ready + not_ready ones (lost, draining and
 * terminating ones do not count, as in the controller's min_nodes rule),
 * minus the deletions, plus the creations of this decision.
 *
 * Capacity: `on_demand` and `spot` use that capacity only. For
 * `spot_with_fallback` a type is bought as spot unless spot for it is
 * backing off after a capacity error or timeout, then on-demand (a
 * "fallback" event); spot again once the backoff expires. Backoff per
 * (type, capacity): backoff_ms doubled per consecutive failure up to
 * backoff_max_ms; forgotten once a ready node of that type and capacity
 * created after the failure exists. Spot prices that the catalog does not
 * know are taken as the on-demand price when comparing.
 *
 * Every action comes with an event {kind, reason, type, capacity, counts};
 * holds that block replicas (at_max_nodes, no_fit, backoff) too. Events
 * repeat on every call while the condition lasts: the caller records
 * changes, not every repetition.
 */
#ifndef DRV_AUTOSCALE_NODES_H
#define DRV_AUTOSCALE_NODES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "catalog/catalog.h"
#include "common/error.h"
#include "sched/place.h"

#define DRV_NAS_MAX_TYPES 16          /* instance types per nodepool (API limit) */
#define DRV_NAS_MAX_CREATE (2 * DRV_NAS_MAX_TYPES)
#define DRV_NAS_MAX_DELETE 64         /* per decision; the rest go next call */
#define DRV_NAS_MAX_EVENTS 96
#define DRV_NAS_MAX_BACKOFF (2 * DRV_NAS_MAX_TYPES)

#define DRV_NAS_DEFAULT_PROVISION_TIMEOUT_MS (10 * 60 * 1000)
#define DRV_NAS_DEFAULT_BACKOFF_MS (60 * 1000)
#define DRV_NAS_DEFAULT_BACKOFF_MAX_MS (15 * 60 * 1000)

typedef enum drv_capacity {
    DRV_CAPACITY_ON_DEMAND = 0,
    DRV_CAPACITY_SPOT = 1,
} drv_capacity_t;

typedef enum drv_capacity_policy {
    DRV_CAPACITY_POLICY_ON_DEMAND = 0,
    DRV_CAPACITY_POLICY_SPOT,
    DRV_CAPACITY_POLICY_SPOT_WITH_FALLBACK,
} drv_capacity_policy_t;

/* The nodepool's autoscaling fields (design §3) with catalog data. */
typedef struct drv_nas_config {
    int min_nodes, max_nodes;              /* 0 <= min <= max */
    const drv_instance_type_t *const *types; /* the nodepool's instance_types, in order */
    size_t n_types;                        /* 1..DRV_NAS_MAX_TYPES */
    drv_capacity_policy_t capacity;
    int64_t scale_down_delay_ms;           /* node_scale_down_delay_seconds x 1000 */
    int64_t provision_timeout_ms;          /* 0: the default */
    int64_t backoff_ms, backoff_max_ms;    /* 0: the defaults */
    const drv_place_policy_t *policy;      /* the simulation's; NULL: the default.
                                              Use the scheduler's (a deterministic one) */
} drv_nas_config_t;

typedef enum drv_nas_node_state {
    DRV_NAS_NODE_PROVISIONING = 0,         /* created, not joined yet (provisioning, joining) */
    DRV_NAS_NODE_READY,
    DRV_NAS_NODE_NOT_READY,
    DRV_NAS_NODE_GONE,                     /* lost, draining, terminating: not counted */
} drv_nas_node_state_t;

/* One node of the nodepool, as the caller sees it now. */
typedef struct drv_nas_node {
    const char *id;
    const drv_instance_type_t *type;       /* NULL: unknown (counted, never simulated) */
    drv_capacity_t capacity;
    drv_nas_node_state_t state;
    int64_t created_ms;                    /* when it was asked for */
    bool empty;                            /* ready and holds no replica */
    int64_t empty_since_ms;                /* meaningful when empty */
} drv_nas_node_t;

/* A failure remembered per (type, capacity). */
typedef struct drv_nas_backoff {
    char type[64];
    drv_capacity_t capacity;
    int failures;                          /* consecutive */
    int64_t failed_ms;                     /* the last failure */
    int64_t until_ms;                      /* not tried before this */
    char why[96];
} drv_nas_backoff_t;

/* Per-nodepool memory kept by the caller. Plain data: zero it to start
 * (or drv_nas_state_init), copy it, no destroy. */
typedef struct drv_nas_state {
    drv_nas_backoff_t backoff[DRV_NAS_MAX_BACKOFF];
    size_t n_backoff;
} drv_nas_state_t;

/* Create `count` nodes of this type and capacity. */
typedef struct drv_nas_create {
    const drv_instance_type_t *type;
    drv_capacity_t capacity;
    int count;                             /* nodes */
    int replicas;                          /* pending replicas they are for */
    int for_min_nodes;                     /* of count, created to reach min_nodes */
    bool fallback;                         /* on-demand because spot is backing off */
} drv_nas_create_t;

typedef enum drv_nas_delete_why {
    DRV_NAS_DELETE_EMPTY = 0,              /* empty past the scale-down delay */
    DRV_NAS_DELETE_PROVISION_TIMEOUT,      /* did not join in time */
} drv_nas_delete_why_t;

typedef struct drv_nas_delete {
    size_t node;                           /* index into the caller's nodes[] */
    drv_nas_delete_why_t why;
} drv_nas_delete_t;

typedef struct drv_nas_event {
    char kind[24];       /* "scale_up" | "scale_down" | "provision_timeout" | "fallback" |
                            "at_max_nodes" | "no_fit" | "backoff" */
    char instance_type[64];                /* "" when not about one type */
    drv_capacity_t capacity;
    char node[64];                         /* the node, for deletions */
    int nodes;                             /* nodes created / deleted */
    int replicas;                          /* pending replicas concerned */
    char reason[256];                      /* one readable sentence */
} drv_nas_event_t;

typedef struct drv_nas_decision {
    drv_nas_create_t create[DRV_NAS_MAX_CREATE];
    size_t n_create;
    drv_nas_delete_t del[DRV_NAS_MAX_DELETE];
    size_t n_delete;
    drv_nas_event_t events[DRV_NAS_MAX_EVENTS];
    size_t n_events;
    /* drv_nas_decide zeroes the counts above and every field from here on
     * (not the arrays: an entry is zeroed when it is taken) */
    int live_before, live_after;           /* live nodes before / after this decision */
    int covered_on_the_way;                /* pending replicas held by provisioning nodes */
    int covered_existing;                  /* ... by empty ready nodes */
    int covered_new;                       /* ... by the nodes created now */
    int at_max;                            /* uncovered: max_nodes reached */
    int no_fit;                            /* uncovered: no instance type holds them */
    int waiting_backoff;                   /* uncovered: every fitting option backs off */
    int64_t retry_at_ms;                   /* earliest backoff expiry blocking something; 0 none */
    int gang_held;                         /* uncovered: workers of gangs that cannot fit
                                              whole within max_nodes (in at_max too) */
    char gang_why[256];                    /* the first such gang's reason; "" none */
} drv_nas_decision_t;

/* "on_demand" | "spot" | "spot_with_fallback" -> policy; -1 when unknown. */
int drv_capacity_policy_parse(const char *s, drv_capacity_policy_t *out);
/* "on_demand" | "spot" */
const char *drv_capacity_name(drv_capacity_t c);

/* Fill a config from a nodepool spec and the catalog: the instance types
 * are looked up into types_buf (max_types entries), which the config then
 * points at. Timeouts and backoff take their defaults. 0, or -1 with err
 * (an unknown type or capacity_type, min > max). */
int drv_nas_config_from_json(const json_t *nodepool_spec, const drv_catalog_t *cat,
                             const drv_instance_type_t **types_buf, size_t max_types,
                             drv_nas_config_t *cfg, drv_error_t *err);

int drv_nas_config_check(const drv_nas_config_t *cfg, drv_error_t *err);

void drv_nas_state_init(drv_nas_state_t *s);

/* A provider refused to create a node of this type and capacity (a
 * capacity error, say): back it off from now_ms. */
void drv_nas_report_failure(drv_nas_state_t *s, const drv_nas_config_t *cfg, const char *type_id,
                            drv_capacity_t capacity, int64_t now_ms, const char *why);

/* Whether (type, capacity) is backing off at now_ms; *until_ms (optional)
 * gets when it ends. */
bool drv_nas_backing_off(const drv_nas_state_t *s, const char *type_id, drv_capacity_t capacity,
                         int64_t now_ms, int64_t *until_ms);

/* How many of these requests one new, empty node of type t holds (placed in
 * order with the default policy; `skip[i]` true = already covered, may be
 * NULL). Pure; exposed for capacity planning and tests. */
int drv_nas_node_holds(const drv_instance_type_t *t, const drv_sched_request_t *reqs, size_t n,
                       const bool *skip);

/* Why a pending replica stays uncovered by a nodepool whose decision left
 * `live` live nodes (drv_nas_decision_t.live_after): no instance type of it
 * holds the request even empty; else it is at max_nodes; else every type
 * that would hold it is backing off. */
typedef enum drv_nas_uncovered {
    DRV_NAS_UNCOVERED_NO_FIT = 0,
    DRV_NAS_UNCOVERED_AT_MAX,
    DRV_NAS_UNCOVERED_BACKOFF,
} drv_nas_uncovered_t;

drv_nas_uncovered_t drv_nas_why_uncovered(const drv_nas_config_t *cfg, int live,
                                          const drv_sched_request_t *r);

/* The same, marking done[] (n entries) the requests the node holds, so
 * that calls for several nodes fill them one after another. */
int drv_nas_node_fill(const drv_instance_type_t *t, const drv_sched_request_t *reqs, size_t n,
                      bool *done);

/* The snapshot of a new, empty, schedulable node of type t (id = the type's
 * id), as the simulation above builds it; for drover-sim. */
void drv_nas_node_from_type(const drv_instance_type_t *t, drv_sched_node_t *sn);

/* Decide (see the steps above). nodes[]: the nodepool's nodes; pending[]:
 * the requests of the replicas waiting because nothing fits (those this
 * nodepool should make room for). covered (optional, n_pending entries) is
 * set true for each replica that a node on its way, an empty ready node or
 * a node created now will hold; the caller may offer the others to the
 * next nodepool by priority. Updates s (timeouts become backoffs; backoffs
 * of types that joined since are forgotten). 0, or -1 with err on an
 * invalid config or out of memory (s unchanged). */
int drv_nas_decide(const drv_nas_config_t *cfg, drv_nas_state_t *s, int64_t now_ms,
                   const drv_nas_node_t *nodes, size_t n_nodes,
                   const drv_sched_request_t *pending, size_t n_pending,
                   bool *covered, drv_nas_decision_t *out, drv_error_t *err);

/* The same with gangs: gang[i] (n_pending entries; NULL: none) is 0 for a
 * lone replica, else an id shared by the workers of one gang, which start
 * together or not at all. A gang is provisioned for only when all of its
 * workers are covered (nodes on their way, empty ready nodes, new nodes)
 * within max_nodes: when max_nodes leaves any of them out, the decision is
 * made again without that gang's workers (they then hold no node on its way
 * and keep no empty node), until every gang left fits whole. Each gang held
 * back is uncovered (counted in at_max and gang_held) with an
 * "at_max_nodes" event saying how many nodes it needs; gang_why has the
 * first one's. A gang left out by backoff alone is not held back (those
 * nodes come once the backoff ends). */
int drv_nas_decide_gangs(const drv_nas_config_t *cfg, drv_nas_state_t *s, int64_t now_ms,
                         const drv_nas_node_t *nodes, size_t n_nodes,
                         const drv_sched_request_t *pending, const int *gang, size_t n_pending,
                         bool *covered, drv_nas_decision_t *out, drv_error_t *err);

#endif
