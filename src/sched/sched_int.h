/* sched_int.h — what the files of src/sched share and nobody else sees:
 * the scorer interface every policy implements, the per-node
 * fragmentation state, and helpers for fits and GPU candidates.
 *
 * A policy is a scorer: eval() looks at one node that has passed the
 * generic checks (schedulable, eligible pool, CPU and memory room), picks
 * the GPU(s) the request would take there and returns a score tuple s[0..2]
 * (higher is better, compared lexicographically) — or false when no GPU
 * arrangement fits. The core (place.c, ctx.c) does the rest: pools in
 * priority order, the arg-max, ties (first in node order, or uniformly at
 * random for the policies that say so), the why message, caching.
 * eval() must be a pure function of (node, request, shapes) unless the
 * scorer is flagged SCHED_NOCACHE, and must not read the node's id, pool,
 * schedulable flag or a GPU's index or uuid: gang.c reuses a score between
 * nodes whose allocations, capacities, GPU types, kinds and warm flag are
 * the same.
 */
#ifndef DRV_SCHED_INT_H
#define DRV_SCHED_INT_H

#include "sched/place.h"
#include "sched/rng.h"

enum {
    SCHED_RANDOM_TIES = 1 << 0,  /* break score ties uniformly at random (with the
                                    context's generator; first-in-order without one) */
    SCHED_NOCACHE = 1 << 1,      /* eval uses the generator: never cache its scores */
};

/* A node's state with respect to a set of typical shapes (fgd.c): enough to
 * get its fragmentation before and after a placement in O(shapes). */
typedef struct sched_nfrag {
    double total;               /* free milli-GPU on the node */
    double frag;                /* drv_sched_node_frag (the paper's measure) */
    double dfrag;               /* drover's measure (fgd.c) */
    const uint64_t *fit;        /* per shape: bit j = GPU j fits the shape */
    const double *unfit;        /* per shape: free milli-GPU of GPUs that do not */
    const int32_t *cnt;         /* per share shape: copies the GPUs could take */
    const double *use;          /* per share shape: milli-GPU of those copies */
} sched_nfrag_t;

/* What drover's policy takes from the workload mix (mix.c, sched_mix_compute):
 * per GPU model of the cluster, how much the type-constrained demand exceeds
 * the model's share of the GPUs (excess > 0: a scarce model), and the weight
 * of the measure's stranding term from the mix's CPU intensity. Types are
 * compared by pointer, then case-insensitively, as sched_type_ok does. */
#define SCHED_MAX_MODELS 32
/* The stranding term's weight is SCHED_DROVER_BETA0 x rho^3 (rho clamped to
 * [0, 1.5]); SCHED_DROVER_BETA0 without a mix. Chosen on the tuning half of
 * the trace variants (bench/sim/split.txt). */
#define SCHED_DROVER_BETA0 0.25
typedef struct sched_mix {
    int n;
    const char *type[SCHED_MAX_MODELS];
    double excess[SCHED_MAX_MODELS];
    double rho;                 /* workload CPU per milli-GPU / the cluster's */
    double beta;                /* the stranding term's weight */
} sched_mix_t;

typedef struct sched_env {
    const drv_sched_shapes_t *shapes; /* never NULL when a scorer runs */
    drv_rng_t *rng;                   /* NULL: no randomness (stateless call) */
    const sched_nfrag_t *nf;          /* the node's state, or NULL: compute it */
    const sched_mix_t *mix;           /* NULL: no mix known (defaults; nothing scarce) */
} sched_env_t;

typedef struct sched_eval {
    double s[3];
    int gpus[DRV_SCHED_MAX_GPUS];
    int n_gpus;
    bool whole;
} sched_eval_t;

typedef bool (*sched_eval_fn)(const sched_env_t *env, const drv_sched_node_t *nd,
                              const drv_sched_request_t *req, sched_eval_t *ev);

struct drv_sched_scorer {
    sched_eval_fn eval;
    unsigned flags;
};

struct drv_sched_shapes {
    size_t n;
    drv_sched_shape_t *v;
    char *strings;              /* owned copies of the type names (one block) */
    const char **types;         /* pointers into strings, per shape */
};

/* --- fit.c ---------------------------------------------------------------- */

/* These three are inline: the scans over every GPU of every node (gang.c's
 * capacity pass, the policies' candidates) call them per GPU. */
/* drv_sched_wants_whole (place.h). */
static inline bool sched_wants_whole(const drv_sched_request_t *req, int64_t gpu_memory_mib)
{
    return req->gpu_count >= 2 || req->disable_packing || req->gpu_memory_mib == 0 ||
           (req->gpu_memory_mib >= gpu_memory_mib && req->compute_percent >= 100);
}
/* Is g's type in the request's list (by pointer, then case-insensitively)? */
bool sched_type_listed(const drv_sched_request_t *req, const drv_sched_gpu_t *g);
static inline bool sched_type_ok(const drv_sched_request_t *req, const drv_sched_gpu_t *g)
{
    return !req->n_gpu_types || sched_type_listed(req, g);
}
/* Can GPU g take (a share of) this request? */
static inline bool sched_gpu_fits(const drv_sched_request_t *req, const drv_sched_gpu_t *g,
                                  bool whole)
{
    if (!g->healthy || g->exclusive)
        return false;
    if (req->gpu_memory_mib > g->memory_mib)
        return false;
    if (whole) {
        if (g->shares != 0)
            return false;
    } else if (g->memory_mib - g->used_memory_mib < req->gpu_memory_mib ||
               100 - g->used_compute < req->compute_percent) {
        return false;
    }
    return sched_type_ok(req, g);
}
bool sched_node_room(const drv_sched_node_t *nd, const drv_sched_request_t *req);
/* Free capacity of one GPU in milli-GPU (0 if unhealthy or held whole). */
double sched_gpu_free_milli(const drv_sched_gpu_t *g);
/* A GPU as it would be after taking this request (whole or a share). */
void sched_gpu_after(drv_sched_gpu_t *g, const drv_sched_request_t *req, bool whole);

/* The GPUs of a node that could take the request. need = GPUs to take
 * (0 for CPU only); multi = take `need` whole GPUs together, else exactly
 * one of the candidates (whole[i] says if that one would be whole). */
typedef struct sched_cands {
    int n, need;
    bool multi;
    int idx[DRV_SCHED_MAX_GPUS];
    bool whole[DRV_SCHED_MAX_GPUS];
} sched_cands_t;
/* False when fewer than `need` GPUs qualify. */
bool sched_candidates(const drv_sched_node_t *nd, const drv_sched_request_t *req,
                      sched_cands_t *c);
/* ev = the first `need` candidates (the usual choice for whole GPUs). */
void sched_take_first(const sched_cands_t *c, sched_eval_t *ev);
/* Index (into c) of the tightest candidate for a share: least free memory,
 * then compute, left after; the first on ties. */
int sched_tightest(const drv_sched_node_t *nd, const drv_sched_request_t *req,
                   const sched_cands_t *c);

/* Fill out from an eval of node i. */
void sched_fill_choice(const drv_sched_node_t *nodes, int i, const drv_sched_request_t *req,
                       const sched_eval_t *ev, drv_sched_choice_t *out);
/* The why sentence when nothing fits (diagnostic pass over the nodes). */
void sched_why(const drv_sched_node_t *nodes, size_t n, const drv_sched_request_t *req,
               char *why, size_t why_len);
/* --- warm.c --------------------------------------------------------------- */
/* The tie-break among equal scores: > 0 when a holds the request's
 * artifact and b does not, < 0 for the reverse, else 0. */
int sched_warm_cmp(const drv_sched_node_t *a, const drv_sched_node_t *b);

/* Lexicographic comparison of score tuples: <0, 0, >0. */
static inline int sched_cmp(const double *a, const double *b)
{
    for (int k = 0; k < 3; k++) {
        if (a[k] < b[k])
            return -1;
        if (a[k] > b[k])
            return 1;
    }
    return 0;
}

/* --- fgd.c ---------------------------------------------------------------- */

/* A one-shape set in caller storage: the request is its own typical shape. */
void sched_shapes_single(drv_sched_shapes_t *set, drv_sched_shape_t *one,
                         const drv_sched_request_t *req);
/* Compute a node's state into the arrays (shapes->n entries each). */
void sched_nfrag_compute(const drv_sched_node_t *nd, const drv_sched_shapes_t *m, double beta,
                         uint64_t *fit, double *unfit, int32_t *cnt, double *use,
                         sched_nfrag_t *out);

/* --- mix.c ---------------------------------------------------------------- */

/* The mix of shapes m on nodes[0..n) (m NULL or empty: no scarce model,
 * the default weight). */
void sched_mix_compute(const drv_sched_node_t *nodes, size_t n, const drv_sched_shapes_t *m,
                       sched_mix_t *out);
/* The excess of GPU g's model (0 when unknown or not scarce). */
double sched_mix_excess(const sched_mix_t *mix, const drv_sched_gpu_t *g);
/* The stranding term's weight (the default without a mix). */
double sched_mix_beta(const sched_mix_t *mix);

/* --- the scorers (policies.c, fgd.c) -------------------------------------- */

extern const struct drv_sched_scorer sched_best_fit, sched_spread, sched_packing,
    sched_random, sched_dotprod, sched_clustering, sched_paper_bestfit, sched_fgd,
    sched_drover;

#endif
