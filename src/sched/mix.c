/* mix.c — what drover's placement policy takes from the workload mix as a
 * whole rather than from one node: which GPU models are scarce for the
 * type-constrained part of the demand, and how CPU-heavy the mix is
 * (sched_mix_t, sched_int.h). Pure functions of (nodes, typical shapes);
 * the placement context computes the mix whenever its shapes are set.
 */
#include "sched/sched_int.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

/* --- the workload mix (sched_mix_t) ---------------------------------------------------
 * Two things drover's measure does not see by itself, computed from the
 * typical shapes (the workload mix observed: in the daemon, the replicas
 * drover runs, rebuilt each pass; in drover-sim, the trace's pods) and the
 * nodes, whenever the context's shapes are set:
 *
 * Scarce GPU models. A type-constrained shape can only use the GPUs of its
 * models; when the constrained demand for a model is a larger share of the
 * workload's GPU demand than the model is of the cluster's GPUs, capacity
 * of that model taken by a request that could run elsewhere is capacity a
 * constrained one will miss later, and the fragmentation measure does not
 * see it (it weighs each shape by its frequency, not by how few nodes can
 * serve it). Per model t:
 *   share_t  = (GPU demand of the constrained shapes that t can serve) /
 *              (GPU demand of all GPU shapes); a shape's demand = weight x
 *              GPUs x milli-GPU per GPU, a multi-model shape's split over
 *              its models in proportion to their GPUs;
 *   excess_t = max(0, share_t / (t's GPUs / all GPUs) - Q), Q = the
 *              constrained fraction of the demand: 0 for every model when
 *              constraints follow capacity (or there are none), > 0 for a
 *              model in short supply.
 * eval_drover adds DROVER_SCARCITY x excess_t x the milli-GPU a placement
 * takes on t's GPUs to the fragmentation growth.
 *
 * CPU intensity. rho = the workload's CPU per milli-GPU (weighted over the
 * shapes, CPU-only ones included) / the cluster's; the weight of the
 * measure's stranding term is beta = SCHED_DROVER_BETA0 x rho^3 (rho clamped to
 * [0, 1.5]): CPU-heavy mixes, where CPU runs out before GPUs, need it;
 * GPU-heavy ones (many multi-GPU tasks) lose by it. */
void sched_mix_compute(const drv_sched_node_t *nodes, size_t n, const drv_sched_shapes_t *m,
                       sched_mix_t *out)
{
    double cap[SCHED_MAX_MODELS] = {0}, q[SCHED_MAX_MODELS] = {0}, gpus = 0, cpus = 0;
    out->n = 0;
    out->beta = SCHED_DROVER_BETA0;
    for (size_t i = 0; i < n; i++) {
        cpus += (double)nodes[i].cpu_millis;
        for (int g = 0; g < nodes[i].n_gpus; g++) {
            const drv_sched_gpu_t *gp = &nodes[i].gpus[g];
            gpus += 1;
            if (!gp->type)
                continue;
            int k = 0;
            while (k < out->n && out->type[k] != gp->type && strcasecmp(out->type[k], gp->type))
                k++;
            if (k == out->n) {
                if (out->n == SCHED_MAX_MODELS)
                    continue;
                out->type[out->n++] = gp->type;
            }
            cap[k] += 1;
        }
    }
    if (!m || !m->n || gpus <= 0) {
        out->n = 0;
        return;
    }
    double all = 0, constrained = 0, wcpu = 0;
    for (size_t s = 0; s < m->n; s++) {
        const drv_sched_request_t *r = &m->v[s].req;
        wcpu += m->v[s].weight * (double)r->cpu_millis;
        if (r->gpu_count <= 0)
            continue;
        bool whole = r->gpu_count > 1 || r->disable_packing || r->gpu_memory_mib <= 0 ||
                     r->compute_percent <= 0 || r->compute_percent >= 100;
        double d = m->v[s].weight * r->gpu_count * (whole ? 1000.0 : 10.0 * r->compute_percent);
        all += d;
        if (!r->n_gpu_types)
            continue;
        double c = 0;
        int ks[SCHED_MAX_MODELS], nk = 0;
        for (int k = 0; k < out->n; k++)
            for (size_t t = 0; t < r->n_gpu_types; t++)
                if (r->gpu_types[t] == out->type[k] || !strcasecmp(r->gpu_types[t], out->type[k])) {
                    ks[nk++] = k;
                    c += cap[k];
                    break;
                }
        if (c <= 0)
            continue;   /* fits no GPU here: takes nothing from anyone */
        constrained += d;
        for (int j = 0; j < nk; j++)
            q[ks[j]] += d * cap[ks[j]] / c;
    }
    if (all <= 0) {
        out->n = 0;
        return;
    }
    double Q = constrained / all;
    for (int k = 0; k < out->n; k++) {
        double e = cap[k] > 0 ? (q[k] / all) / (cap[k] / gpus) - Q : 0;
        out->excess[k] = e > 0 ? e : 0;
    }
    double rho = cpus > 0 ? (wcpu / all) / (cpus / (gpus * 1000.0)) : 1;
    rho = rho < 0 ? 0 : rho > 1.5 ? 1.5 : rho;
    out->rho = rho;
    out->beta = SCHED_DROVER_BETA0 * rho * rho * rho;
}

double sched_mix_excess(const sched_mix_t *mix, const drv_sched_gpu_t *g)
{
    if (!mix || !g->type)
        return 0;
    for (int k = 0; k < mix->n; k++)
        if (mix->type[k] == g->type)
            return mix->excess[k];
    for (int k = 0; k < mix->n; k++)
        if (!strcasecmp(mix->type[k], g->type))
            return mix->excess[k];
    return 0;
}

double sched_mix_beta(const sched_mix_t *mix)
{
    return mix ? mix->beta : SCHED_DROVER_BETA0;
}
