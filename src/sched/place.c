/* place.c — placement policies (see place.h). This first version has one
 * policy, best-fit: the node and GPU that leave the least free GPU memory
 * (then compute, then CPU) after the placement, so shares pack tightly and
 * large free GPUs stay free for large requests. */
#include "sched/place.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

bool drv_sched_wants_whole(const drv_sched_request_t *req, int64_t gpu_memory_mib)
{
    return req->gpu_count >= 2 || req->disable_packing || req->gpu_memory_mib == 0 ||
           (req->gpu_memory_mib >= gpu_memory_mib && req->compute_percent >= 100);
}

static bool type_ok(const drv_sched_request_t *req, const drv_sched_gpu_t *g)
{
    if (!req->n_gpu_types)
        return true;
    for (size_t i = 0; i < req->n_gpu_types; i++)
        if (g->type && strcasecmp(req->gpu_types[i], g->type) == 0)
            return true;
    return false;
}

/* Can GPU g take (a share of) this request? */
static bool gpu_fits(const drv_sched_request_t *req, const drv_sched_gpu_t *g, bool whole)
{
    if (!g->healthy || g->exclusive || !type_ok(req, g))
        return false;
    if (req->gpu_memory_mib > g->memory_mib)
        return false;
    if (whole)
        return g->shares == 0;
    return g->memory_mib - g->used_memory_mib >= req->gpu_memory_mib &&
           100 - g->used_compute >= req->compute_percent;
}

static int best_fit(const drv_sched_node_t *nodes, size_t n, const drv_sched_request_t *req,
                    drv_sched_choice_t *out, char *why, size_t why_len)
{
    int best_pool = INT_MAX;
    int64_t best_score[3] = {INT64_MAX, INT64_MAX, INT64_MAX};
    bool found = false;
    size_t schedulable = 0, cpu_short = 0;
    for (size_t i = 0; i < n; i++) {
        const drv_sched_node_t *nd = &nodes[i];
        if (!nd->schedulable)
            continue;
        schedulable++;
        if (nd->pool > best_pool)
            continue;
        if (nd->cpu_millis - nd->used_cpu_millis < req->cpu_millis ||
            nd->memory_mib - nd->used_memory_mib < req->memory_mib) {
            cpu_short++;
            continue;
        }
        drv_sched_choice_t c;
        memset(&c, 0, sizeof c);
        c.node = (int)i;
        int64_t score[3];
        if (req->gpu_count == 0) {
            score[0] = 0;
            score[1] = 0;
            score[2] = nd->cpu_millis - nd->used_cpu_millis - req->cpu_millis;
        } else if (req->gpu_count == 1 && !req->disable_packing) {
            int bg = -1;
            int64_t bmem = INT64_MAX, bcomp = INT64_MAX;
            bool bwhole = false;
            for (int g = 0; g < nd->n_gpus; g++) {
                const drv_sched_gpu_t *gp = &nd->gpus[g];
                bool whole = drv_sched_wants_whole(req, gp->memory_mib);
                if (!gpu_fits(req, gp, whole))
                    continue;
                int64_t left = whole ? 0 : gp->memory_mib - gp->used_memory_mib - req->gpu_memory_mib;
                int64_t lc = whole ? 0 : 100 - gp->used_compute - req->compute_percent;
                if (left < bmem || (left == bmem && lc < bcomp)) {
                    bg = g;
                    bmem = left;
                    bcomp = lc;
                    bwhole = whole;
                }
            }
            if (bg < 0)
                continue;
            c.gpus[0] = bg;
            c.n_gpus = 1;
            c.whole = bwhole;
            score[0] = bmem;
            score[1] = bcomp;
            score[2] = nd->cpu_millis - nd->used_cpu_millis - req->cpu_millis;
        } else {
            /* whole GPUs: the first free ones, lowest index first */
            int got = 0;
            for (int g = 0; g < nd->n_gpus && got < req->gpu_count; g++)
                if (gpu_fits(req, &nd->gpus[g], true))
                    c.gpus[got++] = g;
            if (got < req->gpu_count)
                continue;
            c.n_gpus = got;
            c.whole = true;
            int free_left = 0;
            for (int g = 0; g < nd->n_gpus; g++)
                free_left += nd->gpus[g].shares == 0 && nd->gpus[g].healthy;
            score[0] = free_left - got;   /* fewest free GPUs left: pack nodes */
            score[1] = 0;
            score[2] = nd->cpu_millis - nd->used_cpu_millis - req->cpu_millis;
        }
        bool better = !found || nd->pool < best_pool ||
                      score[0] < best_score[0] ||
                      (score[0] == best_score[0] && score[1] < best_score[1]) ||
                      (score[0] == best_score[0] && score[1] == best_score[1] &&
                       score[2] < best_score[2]);
        if (better) {
            found = true;
            best_pool = nd->pool;
            memcpy(best_score, score, sizeof score);
            *out = c;
        }
    }
    if (!found) {
        if (schedulable == 0)
            snprintf(why, why_len, "no ready, schedulable node in the deployment's nodepools");
        else if (cpu_short == schedulable)
            snprintf(why, why_len, "no ready node has %lld CPU millicores and %lld MiB of "
                     "memory free", (long long)req->cpu_millis, (long long)req->memory_mib);
        else if (req->gpu_count == 0)
            snprintf(why, why_len, "no ready node has room");
        else if (req->gpu_count == 1 && !req->disable_packing && req->gpu_memory_mib > 0)
            snprintf(why, why_len, "no ready node has a GPU with %lld MiB and %d%% compute free",
                     (long long)req->gpu_memory_mib, req->compute_percent);
        else
            snprintf(why, why_len, "no ready node has %d whole free GPU(s)%s", req->gpu_count,
                     req->gpu_memory_mib ? " of that memory" : "");
        return -1;
    }
    const drv_sched_node_t *nd = &nodes[out->node];
    if (req->gpu_count > 0) {
        const drv_sched_gpu_t *g0 = &nd->gpus[out->gpus[0]];
        out->gpu_memory_mib = out->whole ? g0->memory_mib : req->gpu_memory_mib;
        out->compute_percent = out->whole ? 100 : req->compute_percent;
    }
    return 0;
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
}

static const drv_place_policy_t policies[] = {
    {"best-fit", best_fit},
};

const drv_place_policy_t *drv_place_policy(const char *name)
{
    if (!name)
        return &policies[0];
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++)
        if (strcmp(policies[i].name, name) == 0)
            return &policies[i];
    return NULL;
}
