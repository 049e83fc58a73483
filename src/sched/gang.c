/* gang.c — gang placement (gang.h): every worker of a job on the snapshot
 * at once, or none; commit and release of a whole placement.
 *
 * One pass over the nodes computes, per node, the job's nodepool rank and
 * how many workers it could take (exact: whole GPUs, shares per GPU, CPU
 * and memory); the nodepool is the first by priority whose nodes hold W
 * in total (else all of them together). Within it, the fewest nodes: the
 * nodes that take the most workers, the last one the tightest that holds
 * the rest. The policy's score (one worker on the node) is computed only
 * for the nodes of the groups where that choice ties, so a gang on an
 * empty 10,000-node cluster scores the tie group once, not per worker.
 * Each chosen node's workers are then placed one after another on a copy
 * of the node with the policy's own GPU choice (sched_int.h), so a share
 * lands on the GPU the policy prefers, exactly as a replica would.
 * Nothing is written to the snapshot here; drv_gang_commit does it all at
 * once.
 */
#include "sched/gang.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched_int.h"

int drv_gang_node_rank(const drv_gang_request_t *req, const drv_sched_node_t *nd)
{
    if (!nd->schedulable || nd->pool < 0)
        return -1;
    if (!req->pool_rank)
        return nd->pool;
    if ((size_t)nd->pool >= req->n_pool_rank)
        return -1;
    return req->pool_rank[nd->pool] < 0 ? -1 : req->pool_rank[nd->pool];
}

/* floor(free / need), at most cap; cap when nothing is needed. */
static int div_cap(int64_t free, int64_t need, int cap)
{
    if (need <= 0)
        return cap;
    if (free < need)
        return 0;
    int64_t q = free / need;
    return q < cap ? (int)q : cap;
}

static int imin(int a, int b)
{
    return a < b ? a : b;
}

int drv_gang_node_capacity(const drv_sched_node_t *nd, const drv_sched_request_t *w, int cap)
{
    if (cap <= 0)
        return 0;
    int k = imin(div_cap(nd->cpu_millis - nd->used_cpu_millis, w->cpu_millis, cap),
                 div_cap(nd->memory_mib - nd->used_memory_mib, w->memory_mib, cap));
    if (k == 0 || w->gpu_count <= 0)
        return k;
    int g_cap = 0;
    if (w->gpu_count == 1 && !w->disable_packing) {
        for (int g = 0; g < nd->n_gpus && g_cap < k; g++) {
            const drv_sched_gpu_t *gp = &nd->gpus[g];
            bool whole = drv_sched_wants_whole(w, gp->memory_mib);
            if (!sched_gpu_fits(w, gp, whole))
                continue;
            if (whole)
                g_cap++;
            else
                g_cap += imin(div_cap(gp->memory_mib - gp->used_memory_mib, w->gpu_memory_mib, k),
                              div_cap(100 - gp->used_compute, w->compute_percent, k));
        }
    } else if (w->gpu_count <= nd->n_gpus) {
        int free = 0;
        for (int g = 0; g < nd->n_gpus; g++)
            free += sched_gpu_fits(w, &nd->gpus[g], true);
        g_cap = free / w->gpu_count;
    }
    return imin(k, g_cap);
}

static bool is_share(const drv_sched_request_t *w)
{
    return w->gpu_count == 1 && !w->disable_packing && w->gpu_memory_mib > 0 &&
           w->compute_percent < 100;
}

double drv_gang_worker_gpus(const drv_sched_request_t *w)
{
    if (w->gpu_count <= 0)
        return 0;
    if (is_share(w))
        return (w->compute_percent > 0 ? w->compute_percent : 1) / 100.0;
    return w->gpu_count;
}

void drv_gang_describe(const drv_gang_request_t *req, char *buf, size_t len)
{
    const drv_sched_request_t *w = &req->worker;
    if (w->gpu_count <= 0)
        snprintf(buf, len, "%d×CPU-only", req->workers);
    else if (is_share(w))
        snprintf(buf, len, "%d×a %d%% share of a GPU", req->workers, w->compute_percent);
    else
        snprintf(buf, len, "%d×%d GPU%s", req->workers, w->gpu_count, w->gpu_count > 1 ? "s" : "");
}

/* --- choosing the nodes --------------------------------------------------------- */

typedef struct cand {
    int node, k, rank;
    double s[3];
} cand_t;

/* k desc, rank asc, node asc. */
static int by_k(const void *x, const void *y)
{
    const cand_t *a = x, *b = y;
    if (a->k != b->k)
        return a->k > b->k ? -1 : 1;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return (a->node > b->node) - (a->node < b->node);
}

/* score desc, node asc (within a tie group). */
static int by_score(const void *x, const void *y)
{
    const cand_t *a = x, *b = y;
    int c = sched_cmp(a->s, b->s);
    if (c)
        return -c;
    return (a->node > b->node) - (a->node < b->node);
}

typedef struct scorer_env {
    const drv_place_policy_t *policy;
    sched_env_t env;
    const drv_sched_node_t *nodes;
    const drv_sched_request_t *w;
} scorer_env_t;

static void score(const scorer_env_t *se, cand_t *c)
{
    sched_eval_t ev;
    if (se->policy->scorer->eval(&se->env, &se->nodes[c->node], se->w, &ev))
        memcpy(c->s, ev.s, sizeof c->s);
    else
        c->s[0] = c->s[1] = c->s[2] = -1e300;
}

/* Score and order v[lo..hi) (one tie group). */
static void order_group(const scorer_env_t *se, cand_t *v, size_t lo, size_t hi)
{
    if (hi - lo < 2)
        return;
    for (size_t i = lo; i < hi; i++)
        score(se, &v[i]);
    qsort(v + lo, hi - lo, sizeof *v, by_score);
}

static const char *pool_name(const drv_gang_request_t *req, int id, char *tmp, size_t len)
{
    if (req->pool_names && id >= 0 && (size_t)id < req->n_pool_names && req->pool_names[id])
        return req->pool_names[id];
    snprintf(tmp, len, "#%d", id);
    return tmp;
}

static void why_not(const drv_sched_node_t *nodes, size_t n, const drv_gang_request_t *req,
                    const int *rk, const int *cap, int max_rank, char *why, size_t why_len)
{
    if (!why || !why_len)
        return;
    int64_t all = 0, best = -1;
    int best_rank = -1, eligible = 0;
    for (int r = 0; r <= max_rank; r++) {
        int64_t t = 0;
        int here = 0;
        for (size_t i = 0; i < n; i++)
            if (rk[i] == r) {
                t += cap[i];
                here = 1;
            }
        eligible += here;
        all += t;
        if (here && t > best) {
            best = t;
            best_rank = r;
        }
    }
    char what[96];
    drv_gang_describe(req, what, sizeof what);
    if (best_rank < 0) {
        snprintf(why, why_len, "needs %s, and no ready, schedulable node is in the job's nodepools",
                 what);
        return;
    }
    int id = -1;
    for (size_t i = 0; i < n && id < 0; i++)
        if (rk[i] == best_rank)
            id = nodes[i].pool;
    char tmp[24];
    int len = snprintf(why, why_len, "needs %s, at most %lld free on nodes of nodepool %s", what,
                       (long long)best, pool_name(req, id, tmp, sizeof tmp));
    if (eligible > 1 && len > 0 && (size_t)len < why_len)
        snprintf(why + len, why_len - (size_t)len, ", %lld on all its nodepools together",
                 (long long)all);
}

typedef struct pick {
    int node, take, rank, order;
} pick_t;

static int by_take(const void *x, const void *y)
{
    const pick_t *a = x, *b = y;
    if (a->take != b->take)
        return a->take > b->take ? -1 : 1;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

/* The workers of one node, one after another, on a copy of it. */
static int fill_node(const scorer_env_t *se, const pick_t *p, drv_sched_choice_t *out)
{
    drv_sched_node_t copy = se->nodes[p->node];
    for (int j = 0; j < p->take; j++) {
        sched_eval_t ev;
        if (!sched_node_room(&copy, se->w) || !se->policy->scorer->eval(&se->env, &copy, se->w, &ev))
            return -1;
        sched_fill_choice(&copy, 0, se->w, &ev, &out[j]);
        drv_sched_commit(&copy, se->w, &out[j]);
        out[j].node = p->node;
    }
    return 0;
}

int drv_gang_place(const drv_sched_node_t *nodes, size_t n, const drv_gang_request_t *req,
                   const drv_place_policy_t *policy, drv_gang_placement_t *out, char *why,
                   size_t why_len)
{
    assert(req && out && out->ranks);
    const int W = req->workers;
    if (W < 1 || W > DRV_GANG_MAX_WORKERS) {
        if (why && why_len)
            snprintf(why, why_len, "a gang has 1 to %d workers, not %d", DRV_GANG_MAX_WORKERS, W);
        return -1;
    }
    if (!policy)
        policy = drv_place_policy(NULL);
    int rc = -1;
    int *rk = malloc(sizeof *rk * (n ? n : 1)), *cap = malloc(sizeof *cap * (n ? n : 1));
    int64_t *total = NULL;
    cand_t *v = NULL;
    pick_t *picks = NULL;
    if (!rk || !cap)
        goto oom;
    int max_rank = -1;
    for (size_t i = 0; i < n; i++) {
        rk[i] = drv_gang_node_rank(req, &nodes[i]);
        cap[i] = rk[i] < 0 ? 0 : drv_gang_node_capacity(&nodes[i], &req->worker, DRV_GANG_MAX_WORKERS);
        if (rk[i] > max_rank)
            max_rank = rk[i];
    }
    total = calloc((size_t)max_rank + 2, sizeof *total);
    if (!total)
        goto oom;
    int64_t all = 0;
    for (size_t i = 0; i < n; i++)
        if (rk[i] >= 0) {
            total[rk[i]] += cap[i];
            all += cap[i];
        }
    int target = -1;            /* the nodepool rank, or -1: all together */
    for (int r = 0; r <= max_rank && target < 0; r++)
        if (total[r] >= W)
            target = r;
    if (target < 0 && all < W) {
        why_not(nodes, n, req, rk, cap, max_rank, why, why_len);
        goto done;
    }
    size_t nc = 0;
    for (size_t i = 0; i < n; i++)
        nc += cap[i] > 0 && (target < 0 || rk[i] == target);
    v = malloc(sizeof *v * nc);
    picks = malloc(sizeof *picks * (size_t)(W < (int)nc ? W : (int)nc));
    if (!v || !picks)
        goto oom;
    nc = 0;
    for (size_t i = 0; i < n; i++)
        if (cap[i] > 0 && (target < 0 || rk[i] == target))
            v[nc++] = (cand_t){.node = (int)i, .k = cap[i], .rank = rk[i]};
    qsort(v, nc, sizeof *v, by_k);

    drv_sched_shapes_t one_set;
    drv_sched_shape_t one;
    sched_shapes_single(&one_set, &one, &req->worker);
    scorer_env_t se = {.policy = policy, .env = {.shapes = &one_set, .rng = NULL, .nf = NULL},
                       .nodes = nodes, .w = &req->worker};

    /* m = the fewest nodes: the shortest prefix (by k) that holds W */
    size_t m = 0;
    int64_t sum = 0;
    while (sum < W)
        sum += v[m++].k;
    /* the first m - 1 take all they can; order the tie group at the cut */
    size_t full = m - 1;
    if (full > 0) {
        size_t lo = full - 1, hi = full;
        while (lo > 0 && v[lo - 1].k == v[full - 1].k && v[lo - 1].rank == v[full - 1].rank)
            lo--;
        while (hi < nc && v[hi].k == v[full - 1].k && v[hi].rank == v[full - 1].rank)
            hi++;
        if (hi > full)
            order_group(&se, v, lo, hi);
    }
    int rem = W;
    size_t np = 0;
    for (size_t i = 0; i < full; i++) {
        picks[np] = (pick_t){.node = v[i].node, .take = v[i].k, .rank = v[i].rank, .order = (int)np};
        rem -= v[i].k;
        np++;
    }
    /* the last: the tightest remaining node that holds rem (then rank, score) */
    size_t lo = nc, hi = nc;
    for (size_t i = nc; i-- > full;) {
        if (v[i].k < rem)
            continue;
        if (lo == nc || v[i].k < v[lo].k || (v[i].k == v[lo].k && v[i].rank < v[lo].rank)) {
            lo = i;
            hi = i + 1;
        } else if (v[i].k == v[lo].k && v[i].rank == v[lo].rank) {
            lo = i;
        }
    }
    assert(lo < nc);
    order_group(&se, v, lo, hi);
    picks[np] = (pick_t){.node = v[lo].node, .take = rem, .rank = v[lo].rank, .order = (int)np};
    np++;

    qsort(picks, np, sizeof *picks, by_take);
    int r = 0;
    for (size_t p = 0; p < np; p++) {
        if (fill_node(&se, &picks[p], out->ranks + r) < 0) {
            if (why && why_len)
                snprintf(why, why_len, "internal: node %s took fewer workers than counted",
                         nodes[picks[p].node].id ? nodes[picks[p].node].id : "?");
            goto done;
        }
        r += picks[p].take;
    }
    assert(r == W);
    out->n_nodes = (int)np;
    out->pool_rank = picks[0].rank;
    for (size_t p = 1; p < np; p++)
        if (picks[p].rank != picks[0].rank)
            out->pool_rank = -1;
    rc = 0;
    goto done;
oom:
    if (why && why_len)
        snprintf(why, why_len, "out of memory placing a gang of %d", W);
done:
    free(rk);
    free(cap);
    free(total);
    free(v);
    free(picks);
    return rc;
}

void drv_gang_commit(drv_sched_node_t *nodes, const drv_gang_request_t *req,
                     const drv_sched_choice_t *ranks)
{
    for (int r = 0; r < req->workers; r++)
        drv_sched_commit(nodes, &req->worker, &ranks[r]);
}

void drv_gang_release(drv_sched_node_t *nodes, const drv_gang_request_t *req,
                      const drv_sched_choice_t *ranks)
{
    for (int r = 0; r < req->workers; r++) {
        const drv_sched_choice_t *c = &ranks[r];
        drv_sched_node_t *nd = &nodes[c->node];
        nd->used_cpu_millis -= req->worker.cpu_millis;
        nd->used_memory_mib -= req->worker.memory_mib;
        for (int i = 0; i < c->n_gpus; i++) {
            drv_sched_gpu_t *g = &nd->gpus[c->gpus[i]];
            g->shares--;
            g->used_memory_mib -= c->gpu_memory_mib;
            g->used_compute -= c->compute_percent;
            if (c->whole)
                g->exclusive = false;
        }
    }
}
