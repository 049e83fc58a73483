/* policies.c — the placement heuristics that do not need the workload's
 * typical shapes: drover's best-fit and spread, the random policy, and
 * the reference policies of the FGD paper's simulator (Weng et al., ATC'23;
 * hkust-adsl/kubernetes-scheduler-simulator): packing, dotprod,
 * clustering and paper-bestfit.
 *
 * The reference policies reproduce that simulator's integer scores
 * (0..100, as kube-scheduler score plugins return them) because the
 * rounding decides which nodes tie, and ties are broken at random there
 * (kube-scheduler's selectHost); their GPU choice for a share is the
 * tightest GPU (its "best" GPU selection), the random policy's a random
 * one. Constants are the simulator's: a node's CPU and GPU are normalised
 * by the largest node spec (128 CPUs, 8 GPUs).
 *
 * Every scorer is a pure function of (node, request) except random's,
 * which is flagged SCHED_NOCACHE. Scores: higher is better (sched_int.h).
 */
#include "sched/sched_int.h"

#include <math.h>
#include <stdint.h>

#define MAX_SPEC_CPU 128000.0   /* milli-CPU */
#define MAX_SPEC_GPU 8000.0     /* milli-GPU */

static double node_free_milli(const drv_sched_node_t *nd)
{
    double f = 0;
    for (int g = 0; g < nd->n_gpus; g++)
        f += sched_gpu_free_milli(&nd->gpus[g]);
    return f;
}

double drv_sched_node_free_milli(const drv_sched_node_t *nd)
{
    return node_free_milli(nd);
}

/* What a request takes of GPU g, in milli-GPU. */
static double req_milli(const drv_sched_request_t *req, const drv_sched_gpu_t *g, bool whole)
{
    if (whole || g->memory_mib <= 0)
        return 1000.0;
    double m = 1000.0 * (double)req->gpu_memory_mib / (double)g->memory_mib;
    double c = 10.0 * req->compute_percent;
    return m > c ? m : c;
}

/* The request's total milli-GPU if placed as in ev. */
static double ev_milli(const drv_sched_node_t *nd, const drv_sched_request_t *req,
                       const sched_eval_t *ev)
{
    double t = 0;
    for (int k = 0; k < ev->n_gpus; k++)
        t += req_milli(req, &nd->gpus[ev->gpus[k]], ev->whole);
    return t;
}

static int64_t cpu_left(const drv_sched_node_t *nd)
{
    return nd->cpu_millis - nd->used_cpu_millis;
}

/* The tightest GPU for a share, the first free ones for whole GPUs. */
static void pick_tightest(const drv_sched_node_t *nd, const drv_sched_request_t *req,
                          const sched_cands_t *c, sched_eval_t *ev)
{
    if (c->need == 1 && !c->multi) {
        int k = sched_tightest(nd, req, c);
        ev->n_gpus = 1;
        ev->gpus[0] = c->idx[k];
        ev->whole = c->whole[k];
    } else {
        sched_take_first(c, ev);
    }
}

/* --- best-fit (drover's first policy) -------------------------------------
 * The GPU and node that leave the least free GPU memory, then compute, then
 * CPU, so shares pack tightly and large free GPUs stay free; whole GPUs go
 * to the node left with the fewest free GPUs. */
static bool eval_best_fit(const sched_env_t *env, const drv_sched_node_t *nd,
                          const drv_sched_request_t *req, sched_eval_t *ev)
{
    sched_cands_t c;
    if (!sched_candidates(nd, req, &c))
        return false;
    double cpu_after = (double)(cpu_left(nd) - req->cpu_millis);
    if (c.need == 0) {
        ev->n_gpus = 0;
        ev->whole = false;
        ev->s[0] = 0;
        ev->s[1] = 0;
    } else if (!c.multi) {
        int k = sched_tightest(nd, req, &c);
        const drv_sched_gpu_t *g = &nd->gpus[c.idx[k]];
        ev->n_gpus = 1;
        ev->gpus[0] = c.idx[k];
        ev->whole = c.whole[k];
        ev->s[0] = ev->whole ? 0 : -(double)(g->memory_mib - g->used_memory_mib - req->gpu_memory_mib);
        ev->s[1] = ev->whole ? 0 : -(double)(100 - g->used_compute - req->compute_percent);
    } else {
        sched_take_first(&c, ev);
        int free_left = 0;
        for (int g = 0; g < nd->n_gpus; g++)
            free_left += nd->gpus[g].shares == 0 && nd->gpus[g].healthy;
        ev->s[0] = -(double)(free_left - c.need);
        ev->s[1] = 0;
    }
    ev->s[2] = -cpu_after;
    return true;
}

/* --- spread ----------------------------------------------------------------
 * The opposite: the node with the most free GPU capacity left, then CPU,
 * then memory; the emptiest GPU for a share (worst fit). For latency-
 * sensitive replicas that should not share a node's GPUs or PCIe. */
static bool eval_spread(const sched_env_t *env, const drv_sched_node_t *nd,
                        const drv_sched_request_t *req, sched_eval_t *ev)
{
    sched_cands_t c;
    if (!sched_candidates(nd, req, &c))
        return false;
    if (c.need == 1 && !c.multi) {
        int best = 0;
        double bf = -1;
        for (int k = 0; k < c.n; k++) {
            double f = c.whole[k] ? 0 : sched_gpu_free_milli(&nd->gpus[c.idx[k]]);
            if (f > bf) {
                bf = f;
                best = k;
            }
        }
        ev->n_gpus = 1;
        ev->gpus[0] = c.idx[best];
        ev->whole = c.whole[best];
    } else {
        sched_take_first(&c, ev);
    }
    ev->s[0] = node_free_milli(nd) - ev_milli(nd, req, ev);
    ev->s[1] = (double)(cpu_left(nd) - req->cpu_millis);
    ev->s[2] = (double)(nd->memory_mib - nd->used_memory_mib - req->memory_mib);
    return true;
}

/* --- random -----------------------------------------------------------------
 * All fitting nodes score the same and ties are random: a uniformly random
 * node; a share goes to a uniformly random GPU with room (the reference
 * simulator's Random policy). */
static bool eval_random(const sched_env_t *env, const drv_sched_node_t *nd,
                        const drv_sched_request_t *req, sched_eval_t *ev)
{
    sched_cands_t c;
    if (!sched_candidates(nd, req, &c))
        return false;
    if (c.need == 1 && !c.multi) {
        int k = env->rng ? (int)drv_rng_below(env->rng, (uint64_t)c.n) : 0;
        ev->n_gpus = 1;
        ev->gpus[0] = c.idx[k];
        ev->whole = c.whole[k];
    } else {
        sched_take_first(&c, ev);
    }
    ev->s[0] = ev->s[1] = ev->s[2] = 0;
    return true;
}

/* --- packing (reference GpuPacking) ----------------------------------------
 * From high to low: use GPUs already shared (100 - free % of them / 10,
 * at least 50); use free GPUs of a used node (50 - GPUs taken, at least
 * 33); use an empty node (33 - its GPUs). CPU-only requests score 0. */
static bool eval_packing(const sched_env_t *env, const drv_sched_node_t *nd,
                         const drv_sched_request_t *req, sched_eval_t *ev)
{
    sched_cands_t c;
    if (!sched_candidates(nd, req, &c))
        return false;
    pick_tightest(nd, req, &c, ev);
    ev->s[1] = ev->s[2] = 0;
    if (c.need == 0) {
        ev->s[0] = 0;
        return true;
    }
    int64_t left[DRV_SCHED_MAX_GPUS];
    int fully_free = 0;
    for (int g = 0; g < nd->n_gpus; g++) {
        left[g] = llround(sched_gpu_free_milli(&nd->gpus[g]));
        fully_free += left[g] == 1000;
    }
    if (fully_free == nd->n_gpus) {
        int64_t s = 100 / 3 - fully_free;
        ev->s[0] = (double)(s > fully_free ? s : fully_free);
        return true;
    }
    /* GPUs in increasing free capacity (stable), taking those with room */
    int order[DRV_SCHED_MAX_GPUS];
    for (int g = 0; g < nd->n_gpus; g++) {
        int k = g;
        while (k > 0 && left[order[k - 1]] > left[g]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = g;
    }
    int64_t milli = llround(req_milli(req, &nd->gpus[c.idx[0]], c.multi || c.whole[0]));
    int want = c.need, fully_used = 0;
    int64_t free_pct = 0;
    for (int k = 0; k < nd->n_gpus && want > 0; k++) {
        int g = order[k];
        if (milli <= left[g]) {
            want--;
            fully_used += left[g] == 1000;
            free_pct += left[g] * 100 / 1000;
        }
    }
    if (fully_used > 0) {
        int64_t s = 100 / 2 - fully_used;
        ev->s[0] = (double)(s > 100 / 3 ? s : 100 / 3);
    } else {
        int64_t s = 100 - free_pct / 10;
        ev->s[0] = (double)(s > 100 / 2 ? s : 100 / 2);
    }
    return true;
}

/* --- dotprod (reference DotProd, "merge" dimensions, "max" norm) ------------
 * 100 * (1 - (free CPU . requested CPU + free GPU . requested GPU) / 2) with
 * both normalised by the largest node spec: the smaller the product, the
 * higher the score. */
static bool eval_dotprod(const sched_env_t *env, const drv_sched_node_t *nd,
                         const drv_sched_request_t *req, sched_eval_t *ev)
{
    sched_cands_t c;
    if (!sched_candidates(nd, req, &c))
        return false;
    pick_tightest(nd, req, &c, ev);
    double dot = (double)cpu_left(nd) / MAX_SPEC_CPU * ((double)req->cpu_millis / MAX_SPEC_CPU) +
                 node_free_milli(nd) / MAX_SPEC_GPU * (ev_milli(nd, req, ev) / MAX_SPEC_GPU);
    ev->s[0] = (double)(int64_t)(100.0 * (1.0 - dot / 2));
    ev->s[1] = ev->s[2] = 0;
    return true;
}

/* --- clustering (reference GpuClustering) ------------------------------------
 * Nodes already running only this kind of request (share, 1-GPU, 2-GPU,
 * ...) score 75..100, nodes running it among others 50..75, empty nodes
 * 25..50, others 0..25; within a band, the fuller the node the higher.
 * CPU-only requests score 0. Kinds come from drv_sched_node_t.kinds. */
static bool eval_clustering(const sched_env_t *env, const drv_sched_node_t *nd,
                            const drv_sched_request_t *req, sched_eval_t *ev)
{
    sched_cands_t c;
    if (!sched_candidates(nd, req, &c))
        return false;
    pick_tightest(nd, req, &c, ev);
    ev->s[1] = ev->s[2] = 0;
    if (c.need == 0) {
        ev->s[0] = 0;
        return true;
    }
    int k = ev->whole ? (ev->n_gpus < 15 ? ev->n_gpus : 15) : 0;
    unsigned tag = 1u << k, kinds = nd->kinds;
    int64_t base = 100 / 4 * ((int64_t)MAX_SPEC_GPU - llround(node_free_milli(nd))) /
                   (int64_t)MAX_SPEC_GPU;
    if (kinds & tag)
        base += __builtin_popcount(kinds) == 1 ? 100 * 3 / 4 : 100 * 2 / 4;
    else if (kinds == 0)
        base += 100 / 4;
    ev->s[0] = (double)base;
    return true;
}

/* --- paper-bestfit (reference BestFit) -------------------------------------
 * 100 * (1 - (free CPU after / 128 CPUs + free GPU after / 8 GPUs) / 2). */
static bool eval_paper_bestfit(const sched_env_t *env, const drv_sched_node_t *nd,
                               const drv_sched_request_t *req, sched_eval_t *ev)
{
    sched_cands_t c;
    if (!sched_candidates(nd, req, &c))
        return false;
    pick_tightest(nd, req, &c, ev);
    double s = (double)(cpu_left(nd) - req->cpu_millis) / MAX_SPEC_CPU * 0.5 +
               (node_free_milli(nd) - ev_milli(nd, req, ev)) / MAX_SPEC_GPU * 0.5;
    ev->s[0] = (double)(int64_t)((1.0 - s) * 100);
    ev->s[1] = ev->s[2] = 0;
    return true;
}

const struct drv_sched_scorer sched_best_fit = {eval_best_fit, 0};
const struct drv_sched_scorer sched_spread = {eval_spread, 0};
const struct drv_sched_scorer sched_random = {eval_random, SCHED_RANDOM_TIES | SCHED_NOCACHE};
const struct drv_sched_scorer sched_packing = {eval_packing, 0};
const struct drv_sched_scorer sched_dotprod = {eval_dotprod, 0};
const struct drv_sched_scorer sched_clustering = {eval_clustering, 0};
const struct drv_sched_scorer sched_paper_bestfit = {eval_paper_bestfit, 0};
