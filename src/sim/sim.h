/* sim.h — drover-sim's shared pieces: the "world" of a trace (nodes and
 * pods turned into scheduler snapshots and requests) and the seeded
 * workload of the FGD paper's benchmark (../shared/data/fgd-benchmark.md),
 * plus the subcommands' entry points.
 *
 * The trace's milli-GPU is modelled with the scheduler's own structs: a
 * GPU has memory_mib = 1000 and a pod of gpu_milli m on one GPU asks for
 * gpu_memory_mib = m, compute floor(m / 10) (floor: shares whose milli fit
 * a GPU never run out of compute first); whole-GPU pods ask for 1000 and
 * 100 %. CPU-only nodes (gpu = 0) are left out, as in the paper.
 *
 * Randomness (src/sched/rng.h, xoshiro256** seeded by splitmix64): per
 * seed s, one stream xoshiro(s) draws, in order, the pod shuffle, the
 * inflation and the node order — so every policy sees the same workload
 * and node order for a seed — and a second stream xoshiro(s ^ SCHED_SALT)
 * breaks the policies' random ties. The Go simulator's math/rand stream
 * cannot be matched bit for bit; the distributions are the same.
 */
#ifndef DRV_SIM_H
#define DRV_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "sched/place.h"
#include "sim/trace.h"

#define SIM_SCHED_SALT 0x5851f42d4c957f2dULL
#define SIM_GPU_MILLI 1000

typedef struct sim_world {
    drv_trace_t nodes_csv, pods_csv;
    drv_sched_node_t *nodes;    /* GPU nodes, empty, sorted by name */
    size_t n_nodes;
    int64_t gpus;               /* GPUs in the cluster */
    drv_sched_request_t *reqs;  /* pods sorted by name */
    int64_t *milli;             /* each pod's total GPU request, milli-GPU */
    size_t n_pods;
    const char **types;         /* request type lists (node model pointers) */
    drv_sched_shapes_t *shapes; /* typical shapes of the pod list (95 %) */
} sim_world_t;

int sim_world_load(sim_world_t *w, const char *nodes_path, const char *pods_path,
                   drv_error_t *err);
void sim_world_free(sim_world_t *w);

/* The seed's workload: *order = indices into w->reqs (shuffled, then
 * inflated or trimmed to `inflate` x the cluster's GPU capacity), and
 * *node_order = a permutation of w->nodes. Both malloc'd; -1 when out of
 * memory. */
int sim_workload(const sim_world_t *w, uint64_t seed, double inflate, size_t **order,
                 size_t *n_order, size_t **node_order);

/* "42-51", "42,43,50" or "42" -> seeds; -1 on bad syntax or > max. */
int sim_parse_seeds(const char *s, uint64_t *out, size_t max, size_t *n);

int64_t sim_now_ns(void);

int sim_placement_main(int argc, char **argv);
int sim_speed_main(int argc, char **argv);
int sim_serve_main(int argc, char **argv);   /* serve.c */
int sim_jobs_main(int argc, char **argv);    /* jobs.c */

#endif
