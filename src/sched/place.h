/* place.h — replica placement: pure functions over a cluster snapshot.
 *
 * The controller builds a snapshot of the schedulable nodes of a
 * deployment's nodepools (capacity and what is already allocated), and a
 * policy from the table picks a node and GPU(s) for one replica. Nothing
 * here locks or does I/O, so the daemon, the simulator and the tests run
 * the same code.
 *
 * GPU requests (design §3): gpu_count 0 = CPU only; 1 with a memory below
 * the device's = a share (memory + compute percent) of one GPU; whole = the
 * GPU(s) to itself (gpu_count >= 2, disable_packing, or no memory given).
 *
 * Two ways to call a policy:
 *   - stateless: policy->place(nodes, n, req, ...) looks at every node each
 *     time (what the controller does on each pass);
 *   - with a context (drv_sched_ctx_*): the context keeps, per node, its
 *     fragmentation state and a cache of policy scores per request shape,
 *     updated incrementally on commit, so a decision costs a scan of a
 *     compact array plus the re-scoring of nodes that changed (the
 *     simulator and any long-lived caller). Both paths choose the same
 *     node for the same snapshot, except where a policy breaks ties at
 *     random (the paper's reference policies), which needs the context's
 *     seeded generator.
 *
 * Units: GPU capacity is in "memory_mib" per GPU and 100 compute percent.
 * Fragmentation (fgd.c) is measured in milli-GPU: a GPU's free capacity is
 * min(1000 * free memory / memory, 10 * free compute percent). drover-sim
 * models the Alibaba trace's milli-GPU as memory_mib = 1000 per GPU and a
 * share of m milli as gpu_memory_mib = m, compute floor(m / 10) (floor, so
 * shares whose milli fit a GPU never run out of compute first).
 *
 * Not thread-safe by design: a snapshot and its context belong to one
 * thread (the controller's, or the simulator's).
 */
#ifndef DRV_PLACE_H
#define DRV_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DRV_SCHED_MAX_GPUS 64
#define DRV_SCHED_MAX_SHAPES 256   /* typical shapes kept by drv_sched_shapes_create */

/* Field order: what the scans over every GPU of every node read first and
 * packed (48 bytes a GPU, n_gpus in the node's first cache line), as a
 * 10,000-node snapshot is read whole on each gang placement (gang.c). */
typedef struct drv_sched_gpu {
    int index;
    bool healthy;
    /* allocated so far */
    bool exclusive;             /* held whole by one replica */
    int used_compute;           /* percent */
    int shares;                 /* replicas on it */
    int64_t used_memory_mib;
    /* the device */
    int64_t memory_mib;         /* capacity */
    const char *type;           /* "L4", "H100", ... */
    const char *uuid;
} drv_sched_gpu_t;

typedef struct drv_sched_node {
    const char *id;
    int pool;                   /* rank of the node's nodepool in the request's order
                                   (0 = highest priority); < 0 = not eligible */
    bool schedulable;           /* ready, not cordoned, not draining */
    bool warm;                  /* holds the request's artifact: preferred among equal
                                   scores (warm.c); set by the caller per request */
    /* Kinds of GPU replicas on the node, maintained by drv_sched_commit (0
     * when the snapshot was built otherwise): bit 0 = a share of a GPU,
     * bit k (1..15) = a replica holding k whole GPUs. Only the "clustering"
     * reference policy reads it. */
    uint16_t kinds;
    int n_gpus;
    int64_t cpu_millis, used_cpu_millis;
    int64_t memory_mib, used_memory_mib;
    drv_sched_gpu_t gpus[DRV_SCHED_MAX_GPUS];
} drv_sched_node_t;

typedef struct drv_sched_request {
    int gpu_count;
    int64_t gpu_memory_mib;     /* per GPU; 0 = any (whole GPU) */
    int compute_percent;        /* 1..100 */
    int64_t cpu_millis, memory_mib;
    const char *const *gpu_types; /* acceptable types; NULL/0 = any */
    size_t n_gpu_types;
    bool disable_packing;
} drv_sched_request_t;

typedef struct drv_sched_choice {
    int node;                   /* index into the nodes array */
    int gpus[DRV_SCHED_MAX_GPUS]; /* indices into node->gpus */
    int n_gpus;
    bool whole;                 /* whole GPU(s) */
    int64_t gpu_memory_mib;     /* granted per GPU */
    int compute_percent;        /* granted per GPU */
} drv_sched_choice_t;

/* Returns 0 and fills out, or -1 with why (a sentence for the replica's
 * status) when nothing fits. Nodes are considered pool by pool (pool 0
 * first: the highest priority; a lower-priority pool only when no node of
 * a higher one fits). why may be NULL / why_len 0. */
typedef int (*drv_place_fn)(const drv_sched_node_t *nodes, size_t n,
                            const drv_sched_request_t *req, drv_sched_choice_t *out,
                            char *why, size_t why_len);

struct drv_sched_scorer;        /* internal (sched_int.h) */

typedef struct drv_place_policy {
    const char *name;
    drv_place_fn place;         /* stateless entry point */
    const char *summary;        /* one line, for --help and the docs */
    const struct drv_sched_scorer *scorer;
} drv_place_policy_t;

/* Policy by name; NULL name = the default ("drover"). NULL when unknown. */
const drv_place_policy_t *drv_place_policy(const char *name);

/* The table, in a stable order (for listings); *n receives its length. */
const drv_place_policy_t *drv_place_policies(size_t *n);

/* Record a choice in the snapshot so later placements see it. */
void drv_sched_commit(drv_sched_node_t *nodes, const drv_sched_request_t *req,
                      const drv_sched_choice_t *c);

/* Whether a request takes whole GPUs on a GPU of this size. */
bool drv_sched_wants_whole(const drv_sched_request_t *req, int64_t gpu_memory_mib);

/* --- typical task shapes (fgd.c) ------------------------------------------
 * The workload's typical request shapes M, as in the FGD paper: requests
 * grouped by (CPU, per-GPU memory, GPU count, GPU types, disable_packing),
 * most frequent first, kept until they cover >= `coverage` of the requests
 * (0.95 in the paper), frequencies renormalised to sum to 1. Ties in
 * frequency are ordered by CPU, per-GPU memory, count, then types, all
 * descending (the reference simulator's order). A shape's memory_mib is the
 * mean over its requests. In the daemon the requests are the replicas
 * drover runs; in drover-sim, the trace's pods. */
typedef struct drv_sched_shape {
    drv_sched_request_t req;    /* representative; gpu_types owned by the set */
    double weight;              /* renormalised frequency */
    size_t count;               /* requests of this shape in the input */
} drv_sched_shape_t;

typedef struct drv_sched_shapes drv_sched_shapes_t;

/* NULL on allocation failure; n == 0 gives an empty set. coverage in
 * (0, 1]; at most DRV_SCHED_MAX_SHAPES shapes are kept. */
drv_sched_shapes_t *drv_sched_shapes_create(const drv_sched_request_t *reqs, size_t n,
                                            double coverage);
void drv_sched_shapes_destroy(drv_sched_shapes_t *s);
size_t drv_sched_shapes_count(const drv_sched_shapes_t *s);
const drv_sched_shape_t *drv_sched_shapes_at(const drv_sched_shapes_t *s, size_t i);

/* The node's fragmented free GPU capacity in milli-GPU with respect to the
 * shapes (the FGD paper's measure): for each shape m with weight f, the free
 * capacity m could not use — all of it when m fits nowhere on the node
 * (CPU, GPU type, or too few GPUs with room), else the free capacity of the
 * GPUs too small for m's per-GPU request — summed with weights f. CPU-only
 * shapes count the node's whole free GPU capacity, as in the reference
 * simulator. Unhealthy and exclusively held GPUs have no free capacity. */
double drv_sched_node_frag(const drv_sched_node_t *nd, const drv_sched_shapes_t *m);

/* Free GPU capacity of a node in milli-GPU (what frag is a part of). */
double drv_sched_node_free_milli(const drv_sched_node_t *nd);

/* --- placement context (ctx.c) --------------------------------------------
 * A policy bound to a snapshot it may update: per-node fragmentation kept
 * up to date on commit, scores cached per (node, request shape) and
 * re-computed only for nodes that changed. The nodes array stays the
 * caller's; change it only through drv_sched_ctx_commit, or call
 * drv_sched_ctx_touch(i) after changing node i (schedulable, pool, health,
 * allocations). */
typedef struct drv_sched_ctx drv_sched_ctx_t;

typedef struct drv_sched_ctx_opts {
    const drv_sched_shapes_t *shapes; /* typical shapes, borrowed; NULL = each
                                         request is its own typical shape */
    uint64_t seed;                   /* random ties and the random policy */
} drv_sched_ctx_opts_t;

/* NULL on allocation failure. opts may be NULL. */
drv_sched_ctx_t *drv_sched_ctx_create(const drv_place_policy_t *policy, drv_sched_node_t *nodes,
                                      size_t n, const drv_sched_ctx_opts_t *opts);
void drv_sched_ctx_destroy(drv_sched_ctx_t *ctx);
int drv_sched_ctx_place(drv_sched_ctx_t *ctx, const drv_sched_request_t *req,
                        drv_sched_choice_t *out, char *why, size_t why_len);
void drv_sched_ctx_commit(drv_sched_ctx_t *ctx, const drv_sched_request_t *req,
                          const drv_sched_choice_t *c);
void drv_sched_ctx_touch(drv_sched_ctx_t *ctx, size_t node);
/* Replace the typical shapes (borrowed); recomputes every node's state and
 * the workload mix drover's policy reads (scarce GPU models, CPU intensity:
 * src/sched/mix.c), which is computed only here and at create. */
void drv_sched_ctx_set_shapes(drv_sched_ctx_t *ctx, const drv_sched_shapes_t *shapes);
/* Sum of drv_sched_node_frag over the nodes, kept incrementally (0 without
 * shapes). */
double drv_sched_ctx_frag(const drv_sched_ctx_t *ctx);

#endif
