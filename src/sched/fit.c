/* fit.c — the generic checks every placement policy shares (see
 * sched_int.h): nodepool-independent fits of a request on a GPU and a node
 * (GPU type, health, whole vs share, CPU and memory room), the candidate
 * GPUs of a node, the tightest of them, a choice filled from a score, the
 * why sentence when nothing fits, and commit.
 *
 * The bottom of src/sched: the scorers (policies.c, fgd.c), the stateless
 * arg-max and policy table (place.c) and the incremental context (ctx.c)
 * call these; nothing here calls them back. Pure functions; no state.
 */
#include "sched/sched_int.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

bool drv_sched_wants_whole(const drv_sched_request_t *req, int64_t gpu_memory_mib)
{
    return sched_wants_whole(req, gpu_memory_mib);
}

bool sched_type_listed(const drv_sched_request_t *req, const drv_sched_gpu_t *g)
{
    if (!req->n_gpu_types)
        return true;
    if (!g->type)
        return false;
    for (size_t i = 0; i < req->n_gpu_types; i++)
        if (req->gpu_types[i] == g->type || strcasecmp(req->gpu_types[i], g->type) == 0)
            return true;
    return false;
}

bool sched_node_room(const drv_sched_node_t *nd, const drv_sched_request_t *req)
{
    return nd->cpu_millis - nd->used_cpu_millis >= req->cpu_millis &&
           nd->memory_mib - nd->used_memory_mib >= req->memory_mib;
}

double sched_gpu_free_milli(const drv_sched_gpu_t *g)
{
    if (!g->healthy || g->exclusive || g->memory_mib <= 0)
        return 0;
    double m = 1000.0 * (double)(g->memory_mib - g->used_memory_mib) / (double)g->memory_mib;
    double c = 10.0 * (100 - g->used_compute);
    double f = m < c ? m : c;
    return f > 0 ? f : 0;
}

void sched_gpu_after(drv_sched_gpu_t *g, const drv_sched_request_t *req, bool whole)
{
    g->shares++;
    if (whole) {
        g->used_memory_mib += g->memory_mib;
        g->used_compute += 100;
        g->exclusive = true;
    } else {
        g->used_memory_mib += req->gpu_memory_mib;
        g->used_compute += req->compute_percent;
    }
}

bool sched_candidates(const drv_sched_node_t *nd, const drv_sched_request_t *req,
                      sched_cands_t *c)
{
    c->n = 0;
    c->multi = false;
    if (req->gpu_count <= 0) {
        c->need = 0;
        return true;
    }
    if (req->gpu_count == 1 && !req->disable_packing) {
        c->need = 1;
        for (int g = 0; g < nd->n_gpus; g++) {
            const drv_sched_gpu_t *gp = &nd->gpus[g];
            bool whole = sched_wants_whole(req, gp->memory_mib);
            if (sched_gpu_fits(req, gp, whole)) {
                c->idx[c->n] = g;
                c->whole[c->n++] = whole;
            }
        }
        return c->n >= 1;
    }
    c->need = req->gpu_count;
    c->multi = true;
    if (req->gpu_count > nd->n_gpus)
        return false;
    for (int g = 0; g < nd->n_gpus; g++)
        if (sched_gpu_fits(req, &nd->gpus[g], true)) {
            c->idx[c->n] = g;
            c->whole[c->n++] = true;
        }
    return c->n >= c->need;
}

void sched_take_first(const sched_cands_t *c, sched_eval_t *ev)
{
    assert(c->n >= c->need);
    ev->n_gpus = c->need;
    ev->whole = c->need > 0 && (c->multi || c->whole[0]);
    for (int k = 0; k < c->need; k++)
        ev->gpus[k] = c->idx[k];
}

int sched_tightest(const drv_sched_node_t *nd, const drv_sched_request_t *req,
                   const sched_cands_t *c)
{
    int best = -1;
    int64_t bmem = INT64_MAX, bcomp = INT64_MAX;
    for (int k = 0; k < c->n; k++) {
        const drv_sched_gpu_t *g = &nd->gpus[c->idx[k]];
        int64_t left = c->whole[k] ? 0 : g->memory_mib - g->used_memory_mib - req->gpu_memory_mib;
        int64_t lc = c->whole[k] ? 0 : 100 - g->used_compute - req->compute_percent;
        if (left < bmem || (left == bmem && lc < bcomp)) {
            best = k;
            bmem = left;
            bcomp = lc;
        }
    }
    return best;
}

void sched_fill_choice(const drv_sched_node_t *nodes, int i, const drv_sched_request_t *req,
                       const sched_eval_t *ev, drv_sched_choice_t *out)
{
    const drv_sched_node_t *nd = &nodes[i];
    memset(out, 0, sizeof *out);
    out->node = i;
    out->n_gpus = ev->n_gpus;
    memcpy(out->gpus, ev->gpus, sizeof(int) * (size_t)ev->n_gpus);
    out->whole = ev->n_gpus > 0 && ev->whole;
    if (ev->n_gpus > 0) {
        const drv_sched_gpu_t *g0 = &nd->gpus[ev->gpus[0]];
        out->gpu_memory_mib = out->whole ? g0->memory_mib : req->gpu_memory_mib;
        out->compute_percent = out->whole ? 100 : req->compute_percent;
    }
}

void sched_why(const drv_sched_node_t *nodes, size_t n, const drv_sched_request_t *req,
               char *why, size_t why_len)
{
    if (!why || !why_len)
        return;
    size_t schedulable = 0, cpu_short = 0;
    for (size_t i = 0; i < n; i++) {
        if (!nodes[i].schedulable || nodes[i].pool < 0)
            continue;
        schedulable++;
        if (!sched_node_room(&nodes[i], req))
            cpu_short++;
    }
    if (schedulable == 0)
        snprintf(why, why_len, "no ready, schedulable node in the deployment's nodepools");
    else if (cpu_short == schedulable)
        snprintf(why, why_len, "no ready node has %lld CPU millicores and %lld MiB of "
                 "memory free", (long long)req->cpu_millis, (long long)req->memory_mib);
    else if (req->gpu_count <= 0)
        snprintf(why, why_len, "no ready node has room");
    else if (req->gpu_count == 1 && !req->disable_packing && req->gpu_memory_mib > 0)
        snprintf(why, why_len, "no ready node has a GPU with %lld MiB and %d%% compute free%s",
                 (long long)req->gpu_memory_mib, req->compute_percent,
                 req->n_gpu_types ? " of an accepted type" : "");
    else
        snprintf(why, why_len, "no ready node has %d whole free GPU(s)%s", req->gpu_count,
                 req->gpu_memory_mib ? " of that memory" : "");
}

void drv_sched_commit(drv_sched_node_t *nodes, const drv_sched_request_t *req,
                      const drv_sched_choice_t *c)
{
    drv_sched_node_t *nd = &nodes[c->node];
    nd->used_cpu_millis += req->cpu_millis;
    nd->used_memory_mib += req->memory_mib;
    for (int i = 0; i < c->n_gpus; i++) {
        drv_sched_gpu_t *g = &nd->gpus[c->gpus[i]];
        g->shares++;
        g->used_memory_mib += c->gpu_memory_mib;
        g->used_compute += c->compute_percent;
        if (c->whole)
            g->exclusive = true;
    }
    if (c->n_gpus > 0)
        nd->kinds |= (uint16_t)(c->whole ? 1u << (c->n_gpus < 15 ? c->n_gpus : 15) : 1u);
}
