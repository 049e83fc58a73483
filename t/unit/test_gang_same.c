/* test_gang_same.c — drv_gang_place (src/sched/gang.c, which counts the
 * candidates per k, orders only the nodes above the cut, keeps the best
 * of a tie group in a heap and reuses a score between nodes in the same
 * state) against the straightforward reference below — the first version
 * of it and of drv_gang_node_capacity, kept verbatim: every candidate
 * sorted, every tie group scored node by node — on seeded random
 * snapshots: every policy of the table, whole GPUs, several GPUs, shares,
 * CPU-only workers, GPU types, nodepools with and without the job's map,
 * unhealthy and shared GPUs, big groups of identical nodes, of nodes that
 * differ in one thing a score may read, and of more distinct states than
 * the score cache holds, snapshots that drift as placements are committed.
 * The placement (every rank's node, GPUs and grant), n_nodes, pool_rank,
 * the reason of a miss and every node's capacity must be identical.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/gang.h"
#include "sched/rng.h"
#include "sched/sched_int.h"

/* --- the reference ----------------------------------------------------------------- */

static const char *pool_name(const drv_gang_request_t *req, int id, char *tmp, size_t len)
{
    if (req->pool_names && id >= 0 && (size_t)id < req->n_pool_names && req->pool_names[id])
        return req->pool_names[id];
    snprintf(tmp, len, "#%d", id);
    return tmp;
}

/* drv_gang_node_capacity as first written (CPU and memory first, then the
 * GPUs with that as the cap). */
static int ref_div_cap(int64_t free, int64_t need, int cap)
{
    if (need <= 0)
        return cap;
    if (free < need)
        return 0;
    int64_t q = free / need;
    return q < cap ? (int)q : cap;
}

static int ref_imin(int a, int b)
{
    return a < b ? a : b;
}

static int ref_capacity(const drv_sched_node_t *nd, const drv_sched_request_t *w, int cap)
{
    if (cap <= 0)
        return 0;
    int k = ref_imin(ref_div_cap(nd->cpu_millis - nd->used_cpu_millis, w->cpu_millis, cap),
                     ref_div_cap(nd->memory_mib - nd->used_memory_mib, w->memory_mib, cap));
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
                g_cap += ref_imin(ref_div_cap(gp->memory_mib - gp->used_memory_mib,
                                              w->gpu_memory_mib, k),
                                  ref_div_cap(100 - gp->used_compute, w->compute_percent, k));
        }
    } else if (w->gpu_count <= nd->n_gpus) {
        int free = 0;
        for (int g = 0; g < nd->n_gpus; g++)
            free += sched_gpu_fits(w, &nd->gpus[g], true);
        g_cap = free / w->gpu_count;
    }
    return ref_imin(k, g_cap);
}

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

static int ref_place(const drv_sched_node_t *nodes, size_t n, const drv_gang_request_t *req,
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
        cap[i] = rk[i] < 0 ? 0 : ref_capacity(&nodes[i], &req->worker, DRV_GANG_MAX_WORKERS);
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

/* --- random snapshots ---------------------------------------------------------------- */

#define NMAX 2500
#define WMAX 300
#define GMAX 16

static drv_sched_node_t nodes[NMAX];
static drv_sched_choice_t got[WMAX], want[WMAX];
static char ids[NMAX][12];
static char uuids[NMAX][GMAX][12];
static char h100_lower[] = "h100";  /* the same type by name, another pointer */
static const char *const one_type[] = {"H100"};
static const char *const two_types[] = {"a100", "H100"};

typedef struct tmpl {
    int n_gpus;
    const char *type;
    int64_t gpu_mib, cpu, mem;
} tmpl_t;

typedef struct stats {
    int placed, missed, multi_node, spanning, wide;
} stats_t;

static uint64_t below(drv_rng_t *r, uint64_t n)
{
    return drv_rng_below(r, n);
}

static void random_tmpl(drv_rng_t *r, tmpl_t *t)
{
    static const char *const types[] = {"H100", "A100", "L4", h100_lower};
    static const int gpus[] = {0, 1, 2, 4, 8, 8, 8, 16};
    t->n_gpus = gpus[below(r, 8)];
    t->type = types[below(r, 4)];
    t->gpu_mib = below(r, 2) ? 80000 : 24000;
    t->cpu = 16000 + 16000 * (int64_t)below(r, 12);
    t->mem = 128000 + 128000 * (int64_t)below(r, 8);
}

/* Node i from a template: GPUs held whole or shared with probability
 * busy %, a few unhealthy, some CPU and memory in use. */
static void make_node(drv_rng_t *r, int i, const tmpl_t *t, int busy, int n_pools)
{
    drv_sched_node_t *nd = &nodes[i];
    memset(nd, 0, sizeof *nd);
    snprintf(ids[i], sizeof ids[i], "n%d", i);
    nd->id = ids[i];
    nd->pool = below(r, 20) == 0 ? -1 : (int)below(r, (uint64_t)n_pools);
    nd->schedulable = below(r, 20) != 0;
    nd->cpu_millis = t->cpu;
    nd->memory_mib = t->mem;
    if (busy && below(r, 2)) {
        nd->used_cpu_millis = (int64_t)below(r, (uint64_t)t->cpu / 2000) * 1000;
        nd->used_memory_mib = (int64_t)below(r, (uint64_t)t->mem / 2000) * 1000;
    }
    nd->kinds = below(r, 8) == 0 ? (uint16_t)below(r, 1u << 9) : 0;
    nd->warm = below(r, 10) == 0;
    nd->n_gpus = t->n_gpus;
    for (int g = 0; g < t->n_gpus; g++) {
        drv_sched_gpu_t *gp = &nd->gpus[g];
        snprintf(uuids[i][g], sizeof uuids[i][g], "GPU-%d-%d", i, g);
        *gp = (drv_sched_gpu_t){.index = g, .uuid = uuids[i][g], .type = t->type,
                                .memory_mib = t->gpu_mib, .healthy = below(r, 40) != 0};
        if ((int)below(r, 100) >= busy)
            continue;
        if (below(r, 2)) {
            gp->shares = 1;
            gp->exclusive = true;
            gp->used_memory_mib = gp->memory_mib;
            gp->used_compute = 100;
        } else {
            gp->shares = 1 + (int)below(r, 3);
            gp->used_memory_mib = (int64_t)below(r, 4) * gp->memory_mib / 4;
            gp->used_compute = 10 * (int)below(r, 8);
        }
    }
}

static drv_gang_request_t random_gang(drv_rng_t *r, int wmax)
{
    drv_gang_request_t g = {.workers = 1 + (int)below(r, (uint64_t)wmax)};
    drv_sched_request_t *w = &g.worker;
    w->compute_percent = 100;
    w->cpu_millis = (int64_t)below(r, 9) * 1000;
    w->memory_mib = (int64_t)below(r, 5) * 16000;
    switch (below(r, 7)) {
    case 0:                     /* CPU only */
        w->cpu_millis += 500;
        break;
    case 1:
    case 2:
        w->gpu_count = 1;
        break;
    case 3:                     /* a share */
        w->gpu_count = 1;
        w->gpu_memory_mib = 5000 + 5000 * (int64_t)below(r, 8);
        w->compute_percent = 10 + 10 * (int)below(r, 6);
        w->disable_packing = below(r, 10) == 0;
        break;
    default:
        w->gpu_count = 1 << below(r, 4);
    }
    switch (below(r, 10)) {
    case 0:
    case 1:
        w->gpu_types = one_type;
        w->n_gpu_types = 1;
        break;
    case 2:
        w->gpu_types = two_types;
        w->n_gpu_types = 2;
        break;
    }
    return g;
}

/* Both implementations on the snapshot as it is: the same answer. */
static void same(size_t n, const drv_gang_request_t *g, const drv_place_policy_t *pol,
                 uint64_t seed, stats_t *st)
{
    for (size_t i = 0; i < n; i++)
        for (int cap = 0; cap <= 9; cap += 3) {
            int c = cap == 9 ? DRV_GANG_MAX_WORKERS : cap;
            int ka = drv_gang_node_capacity(&nodes[i], &g->worker, c);
            int kb = ref_capacity(&nodes[i], &g->worker, c);
            if (ka != kb)
                fail_msg("seed %llu, node %zu, cap %d: capacity %d, reference %d",
                         (unsigned long long)seed, i, c, ka, kb);
        }
    drv_gang_placement_t a = {.ranks = got}, b = {.ranks = want};
    char wa[256] = "", wb[256] = "";
    int ra = drv_gang_place(nodes, n, g, pol, &a, wa, sizeof wa);
    int rb = ref_place(nodes, n, g, pol, &b, wb, sizeof wb);
    if (ra != rb || (ra == 0 && (a.n_nodes != b.n_nodes || a.pool_rank != b.pool_rank ||
                                 memcmp(got, want, sizeof *got * (size_t)g->workers) != 0)) ||
        (ra != 0 && strcmp(wa, wb) != 0)) {
        int r = 0;
        while (ra == 0 && rb == 0 && r < g->workers && memcmp(&got[r], &want[r], sizeof *got) == 0)
            r++;
        fail_msg("seed %llu, %zu nodes, %d workers x %d GPU(s) (mem %lld, types %zu), policy %s: "
                 "rc %d / ref %d, n_nodes %d / %d, first different rank %d (node %d / %d), "
                 "why '%s' / '%s'",
                 (unsigned long long)seed, n, g->workers, g->worker.gpu_count,
                 (long long)g->worker.gpu_memory_mib, g->worker.n_gpu_types, pol->name, ra, rb,
                 a.n_nodes, b.n_nodes, r, r < g->workers ? got[r].node : -1,
                 r < g->workers ? want[r].node : -1, wa, wb);
    }
    if (ra == 0) {
        st->placed++;
        st->multi_node += a.n_nodes > 1;
        st->spanning += a.pool_rank < 0;
        st->wide += a.n_nodes > 4;
    } else {
        st->missed++;
    }
}

enum { MIXED, IDENTICAL, DISTINCT, NEAR };

/* NEAR: node i empty, or as empty but for one thing a score may read (so
 * the score cache must tell them apart): CPU or memory in use or in all,
 * the kinds of replicas, warm, a GPU fewer, one GPU with a share but
 * nothing used, its memory or compute or both half used, unhealthy, held
 * whole, smaller, or of the same type by another pointer. */
static void near_node(drv_rng_t *r, int i, int n_pools)
{
    static const tmpl_t t = {.n_gpus = 8, .type = "H100", .gpu_mib = 80000, .cpu = 96000,
                             .mem = 768000};
    make_node(r, i, &t, 0, n_pools);
    drv_sched_node_t *nd = &nodes[i];
    nd->kinds = 0;
    nd->warm = false;
    drv_sched_gpu_t *gp = &nd->gpus[below(r, 8)];
    switch (below(r, 18)) {
    case 0:
        nd->used_cpu_millis = 8000 * (int64_t)(1 + below(r, 8));
        break;
    case 1:
        nd->used_memory_mib = 64000 * (int64_t)(1 + below(r, 8));
        break;
    case 2:
        nd->kinds = (uint16_t)(1u << below(r, 9));
        break;
    case 3:
        nd->warm = true;
        break;
    case 4:
        gp->shares = 1;
        break;
    case 5:
        gp->shares = 1;
        gp->used_memory_mib = 40000;
        gp->used_compute = 50;
        break;
    case 6:
        gp->healthy = false;
        break;
    case 7:
        gp->shares = 1;
        gp->exclusive = true;
        gp->used_memory_mib = 80000;
        gp->used_compute = 100;
        break;
    case 8:
        gp->memory_mib = 40000;
        break;
    case 9:
        gp->type = h100_lower;
        break;
    case 10:
        gp->shares = 1;
        gp->used_memory_mib = 40000;
        break;
    case 11:
        gp->shares = 1;
        gp->used_compute = 50;
        break;
    case 12:
        nd->cpu_millis = 64000;
        break;
    case 13:
        nd->memory_mib = 512000;
        break;
    case 14:
        nd->n_gpus = 7;
        break;
    }
}

/* One snapshot of the given kind, then a few gangs on it, committed one
 * after another (so the snapshot drifts). */
static void trial(uint64_t seed, int kind, stats_t *st)
{
    drv_rng_t r;
    drv_rng_seed(&r, seed);
    size_t np;
    const drv_place_policy_t *table = drv_place_policies(&np);
    int n_pools = 1 + (int)below(&r, 4);
    size_t n;
    tmpl_t t[3];
    int nt = 1 + (int)below(&r, 3);
    for (int k = 0; k < nt; k++)
        random_tmpl(&r, &t[k]);
    if (kind == NEAR) {
        n = 200 + below(&r, 800);
        for (size_t i = 0; i < n; i++)
            near_node(&r, (int)i, n_pools);
    } else if (kind == MIXED) {
        n = 1 + below(&r, 200);
        int busy = (int)below(&r, 90);
        for (size_t i = 0; i < n; i++)
            make_node(&r, (int)i, &t[below(&r, (uint64_t)nt)], busy, n_pools);
    } else {
        /* big groups: one 8-GPU model, most nodes empty; DISTINCT: each
         * node with its own CPU in use (more states than the score cache) */
        n = 500 + below(&r, NMAX - 500);
        tmpl_t big = {.n_gpus = 8, .type = "H100", .gpu_mib = 80000, .cpu = 1000000,
                      .mem = 4000000};
        for (size_t i = 0; i < n; i++) {
            make_node(&r, (int)i, &big, below(&r, 10) == 0 ? 60 : 0, n_pools);
            if (kind == DISTINCT)
                nodes[i].used_cpu_millis = 10 * (int64_t)below(&r, 5000);
        }
    }
    int map[4];
    drv_gang_request_t base = random_gang(&r, kind == MIXED ? (below(&r, 2) ? 8 : 64) : WMAX);
    if (below(&r, 2)) {         /* the job's own nodepool map */
        for (int k = 0; k < 4; k++)
            map[k] = below(&r, 5) == 0 ? -1 : (int)below(&r, 4);
        base.pool_rank = map;
        base.n_pool_rank = 1 + below(&r, 4);
    }
    for (int step = 0; step < 4; step++) {
        drv_gang_request_t g = base;
        if (step > 0)
            g.workers = 1 + (int)below(&r, (uint64_t)(kind == MIXED ? 64 : WMAX));
        const drv_place_policy_t *pol = below(&r, 2) ? drv_place_policy(NULL)
                                                     : &table[below(&r, (uint64_t)np)];
        same(n, &g, pol, seed, st);
        drv_gang_placement_t p = {.ranks = want};
        if (ref_place(nodes, n, &g, pol, &p, NULL, 0) == 0)
            drv_gang_commit(nodes, &g, want);
    }
}

static void test_same_as_reference_mixed(void **state)
{
    (void)state;
    stats_t st = {0};
    for (uint64_t s = 1; s <= 2000; s++)
        trial(s, MIXED, &st);
    print_message("mixed: %d placed (%d on several nodes, %d across nodepools), %d missed\n",
                  st.placed, st.multi_node, st.spanning, st.missed);
    /* the trials cover what they are meant to */
    assert_true(st.placed > 3000);
    assert_true(st.missed > 1000);
    assert_true(st.multi_node > 1000);
    assert_true(st.spanning > 50);
}

static void test_same_as_reference_near(void **state)
{
    (void)state;
    stats_t st = {0};
    for (uint64_t s = 1; s <= 200; s++)
        trial(200000 + s, NEAR, &st);
    print_message("nearly the same nodes: %d placed, %d missed\n", st.placed, st.missed);
    assert_true(st.placed > 300);
}

static void test_same_as_reference_big_groups(void **state)
{
    (void)state;
    stats_t st = {0};
    for (uint64_t s = 1; s <= 40; s++)
        trial(100000 + s, s % 2 ? IDENTICAL : DISTINCT, &st);
    print_message("big groups: %d placed (%d on more than 4 nodes), %d missed\n", st.placed,
                  st.wide, st.missed);
    assert_true(st.placed > 60);
    assert_true(st.wide > 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_reference_mixed),
        cmocka_unit_test(test_same_as_reference_near),
        cmocka_unit_test(test_same_as_reference_big_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
