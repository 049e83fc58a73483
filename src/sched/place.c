/* place.c — the placement core (see place.h): the stateless arg-max over
 * a snapshot (schedulable nodes, nodepool priority with overflow, the
 * policy's score, ties) and the policy table.
 *
 * Policies are scorers (sched_int.h) in policies.c (simple heuristics and
 * the paper's reference policies) and fgd.c (fragmentation-based: fgd and
 * drover's default); the generic checks they share (CPU and memory room,
 * GPU type, health, whole vs share), commit and the why sentence are in
 * fit.c, below them all. ctx.c is the same arg-max with incremental state.
 *
 * Invariants: a choice returned here always passes sched_gpu_fits for each
 * of its GPUs and the node's CPU/memory room; nodes with pool < 0 or not
 * schedulable are never chosen; a lower-priority pool (higher rank) is
 * used only when no node of a higher one fits.
 */
#include "sched/sched_int.h"

#include <assert.h>
#include <limits.h>
#include <string.h>

/* A seed that depends only on what is asked (stateless random policy:
 * deterministic for a given snapshot and request). */
static uint64_t content_seed(const drv_sched_node_t *nodes, size_t n,
                             const drv_sched_request_t *req)
{
    uint64_t h = 1469598103934665603ULL;
    const int64_t v[] = {req->gpu_count, req->gpu_memory_mib, req->compute_percent,
                         req->cpu_millis, req->memory_mib, (int64_t)n};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        h = (h ^ (uint64_t)v[i]) * 1099511628211ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint64_t)nodes[i].used_cpu_millis) * 1099511628211ULL;
    return h;
}

static int place_stateless(const drv_place_policy_t *p, const drv_sched_node_t *nodes, size_t n,
                           const drv_sched_request_t *req, drv_sched_choice_t *out, char *why,
                           size_t why_len)
{
    assert(p && req && out);
    drv_sched_shapes_t one_set;
    drv_sched_shape_t one;
    sched_shapes_single(&one_set, &one, req);
    drv_rng_t rng;
    sched_env_t env = {.shapes = &one_set, .rng = NULL, .nf = NULL};
    if (p->scorer->flags & SCHED_NOCACHE) {
        drv_rng_seed(&rng, content_seed(nodes, n, req));
        env.rng = &rng;
    }
    bool random_ties = (p->scorer->flags & SCHED_RANDOM_TIES) && env.rng;
    int best = -1, best_pool = INT_MAX;
    uint64_t ties = 0;
    sched_eval_t bev, ev;
    for (size_t i = 0; i < n; i++) {
        const drv_sched_node_t *nd = &nodes[i];
        if (!nd->schedulable || nd->pool < 0 || nd->pool > best_pool)
            continue;
        if (!sched_node_room(nd, req) || !p->scorer->eval(&env, nd, req, &ev))
            continue;
        int c = best < 0 || nd->pool < best_pool ? 1 : sched_cmp(ev.s, bev.s);
        if (c == 0)
            c = sched_warm_cmp(nd, &nodes[best]);
        if (c > 0) {
            best = (int)i;
            best_pool = nd->pool;
            bev = ev;
            ties = 1;
        } else if (c == 0 && random_ties && drv_rng_below(env.rng, ++ties) == 0) {
            best = (int)i;
            bev = ev;
        }
    }
    if (best < 0) {
        sched_why(nodes, n, req, why, why_len);
        return -1;
    }
    sched_fill_choice(nodes, best, req, &bev, out);
    return 0;
}

/* --- the policy table ------------------------------------------------------ */

#define N_POLICIES 9
static const drv_place_policy_t policies[N_POLICIES];

#define STATELESS(fn, i)                                                                   \
    static int fn(const drv_sched_node_t *nodes, size_t n, const drv_sched_request_t *req, \
                  drv_sched_choice_t *out, char *why, size_t why_len)                      \
    {                                                                                      \
        return place_stateless(&policies[i], nodes, n, req, out, why, why_len);            \
    }
STATELESS(place_drover, 0)
STATELESS(place_fgd, 1)
STATELESS(place_best_fit, 2)
STATELESS(place_packing, 3)
STATELESS(place_spread, 4)
STATELESS(place_random, 5)
STATELESS(place_dotprod, 6)
STATELESS(place_clustering, 7)
STATELESS(place_paper_bestfit, 8)

static const drv_place_policy_t policies[N_POLICIES] = {
    {"drover", place_drover,
     "drover's default: FGD's gradient on a CPU- and memory-aware measure that also counts "
     "what copies of typical tasks could not use; first-fit ties, tightest GPU",
     &sched_drover},
    {"fgd", place_fgd,
     "fragmentation gradient descent as in Weng et al., ATC'23 (score rounded to 0..100, "
     "random ties)", &sched_fgd},
    {"best-fit", place_best_fit,
     "the GPU and node that leave the least free GPU memory, then compute, then CPU",
     &sched_best_fit},
    {"packing", place_packing,
     "GPU packing (ATC'23 reference): shared GPUs first, then free GPUs of used nodes, then "
     "empty nodes", &sched_packing},
    {"spread", place_spread,
     "the node with the most free GPU capacity, then CPU; the emptiest GPU (worst fit)",
     &sched_spread},
    {"random", place_random, "a uniformly random node and GPU that fit (seeded)",
     &sched_random},
    {"dotprod", place_dotprod,
     "dot product of free and requested CPU/GPU (ATC'23 reference, Tetris-style)",
     &sched_dotprod},
    {"clustering", place_clustering,
     "GPU clustering (ATC'23 reference): nodes already running the same kind of request",
     &sched_clustering},
    {"paper-bestfit", place_paper_bestfit,
     "best fit on weighted free CPU and GPU (ATC'23 reference BestFit)", &sched_paper_bestfit},
};

const drv_place_policy_t *drv_place_policies(size_t *n)
{
    *n = sizeof policies / sizeof policies[0];
    return policies;
}

const drv_place_policy_t *drv_place_policy(const char *name)
{
    if (!name)
        return &policies[0];
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++)
        if (strcmp(policies[i].name, name) == 0)
            return &policies[i];
    return NULL;
}
