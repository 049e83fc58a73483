/* place.h — replica placement: pure functions over a cluster snapshot.
 *
 * The controller builds a snapshot of the schedulable nodes of a
 * deployment's nodepools (capacity and what is already allocated), and a
 * policy from the table picks a node and GPU(s) for one replica. Nothing
 * here locks, allocates or does I/O, so the daemon, the simulator and the
 * tests run the same code.
 *
 * GPU requests (design §3): gpu_count 0 = CPU only; 1 with a memory below
 * the device's = a share (memory + compute percent) of one GPU; whole = the
 * GPU(s) to itself (gpu_count >= 2, disable_packing, or no memory given).
 */
#ifndef DRV_PLACE_H
#define DRV_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DRV_SCHED_MAX_GPUS 64

typedef struct drv_sched_gpu {
    int index;
    const char *uuid;
    const char *type;           /* "L4", "H100", ... */
    int64_t memory_mib;         /* capacity */
    bool healthy;
    /* allocated so far */
    int64_t used_memory_mib;
    int used_compute;           /* percent */
    int shares;                 /* replicas on it */
    bool exclusive;             /* held whole by one replica */
} drv_sched_gpu_t;

typedef struct drv_sched_node {
    const char *id;
    int pool;                   /* index of the nodepool in the request's order */
    bool schedulable;           /* ready, not cordoned, not draining */
    int64_t cpu_millis, used_cpu_millis;
    int64_t memory_mib, used_memory_mib;
    drv_sched_gpu_t gpus[DRV_SCHED_MAX_GPUS];
    int n_gpus;
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
 * first: the highest priority). */
typedef int (*drv_place_fn)(const drv_sched_node_t *nodes, size_t n,
                            const drv_sched_request_t *req, drv_sched_choice_t *out,
                            char *why, size_t why_len);

typedef struct drv_place_policy {
    const char *name;
    drv_place_fn place;
} drv_place_policy_t;

/* Policy by name; NULL name = the default. NULL when unknown. */
const drv_place_policy_t *drv_place_policy(const char *name);

/* Record a choice in the snapshot so later placements see it. */
void drv_sched_commit(drv_sched_node_t *nodes, const drv_sched_request_t *req,
                      const drv_sched_choice_t *c);

/* Whether a request takes whole GPUs on a GPU of this size. */
bool drv_sched_wants_whole(const drv_sched_request_t *req, int64_t gpu_memory_mib);

#endif
