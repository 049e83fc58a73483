/* gang.c — gang placement (gang.h): every worker of a job on the snapshot
 * at once, or none; commit and release of a whole placement.
 *
 * One pass over the nodes computes, per node, the job's nodepool rank and
 * how many workers it could take, k (exact: whole GPUs, shares per GPU,
 * CPU and memory); the nodepool is the first by priority whose nodes hold
 * W in total (else all of them together). Within it, the fewest nodes: the
 * nodes that take the most workers (order: k desc, rank, node), the last
 * one the tightest that holds the rest. Counts per k find the cut (the
 * m-th node, at k = kj) without sorting: only the nodes at or above kj are
 * put in order (a counting sort), and the last node's group is gathered
 * from its k alone. The policy's score (one worker on the node) is
 * computed only for the nodes of the groups where that choice ties; a heap
 * keeps the few best of a big group, and a score is reused between nodes
 * in the same state, so a gang on an empty 10,000-node cluster costs one
 * eval per distinct free node. Each chosen node's workers are then placed
 * one after another on a copy of the node with the policy's own GPU choice
 * (sched_int.h), so a share lands on the GPU the policy prefers, exactly
 * as a replica would. Nothing is written to the snapshot here;
 * drv_gang_commit does it all at once. t/unit/test_gang_same.c checks that
 * this chooses exactly what sorting every candidate and scoring every tie
 * group node by node (the first version, kept there) does.
 */
#include "sched/gang.h"

#include <assert.h>
#include <limits.h>
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

/* floor(free / need), at most cap; cap when nothing is needed. Divides
 * only when the answer is below cap: a 64-bit division costs more than the
 * rest of a node's check, and on most nodes CPU and memory are not what
 * limits a gang. */
static int div_cap(int64_t free, int64_t need, int cap)
{
    if (need <= 0)
        return cap;
    if (free < need)
        return 0;
    int64_t all;
    if (!__builtin_mul_overflow(need, (int64_t)cap, &all) && free >= all)
        return cap;
    int64_t q = free / need;
    return q < cap ? (int)q : cap;
}

static int imin(int a, int b)
{
    return a < b ? a : b;
}

/* The GPUs first (no division for whole GPUs), then CPU and memory with
 * that as the cap: min(GPUs, CPU, memory, cap) either way. */
int drv_gang_node_capacity(const drv_sched_node_t *nd, const drv_sched_request_t *w, int cap)
{
    if (cap <= 0)
        return 0;
    int k = cap;
    if (w->gpu_count > 0) {
        int g_cap = 0;
        if (w->gpu_count == 1 && !w->disable_packing) {
            for (int g = 0; g < nd->n_gpus && g_cap < cap; g++) {
                const drv_sched_gpu_t *gp = &nd->gpus[g];
                bool whole = sched_wants_whole(w, gp->memory_mib);
                if (!sched_gpu_fits(w, gp, whole))
                    continue;
                if (whole)
                    g_cap++;
                else
                    g_cap += imin(div_cap(gp->memory_mib - gp->used_memory_mib, w->gpu_memory_mib,
                                          cap),
                                  div_cap(100 - gp->used_compute, w->compute_percent, cap));
            }
        } else if (w->gpu_count <= nd->n_gpus) {
            int free = 0;
            for (int g = 0; g < nd->n_gpus; g++)
                free += sched_gpu_fits(w, &nd->gpus[g], true);
            g_cap = free / w->gpu_count;
        }
        k = imin(k, g_cap);
        if (k == 0)
            return 0;
    }
    k = div_cap(nd->cpu_millis - nd->used_cpu_millis, w->cpu_millis, k);
    return k == 0 ? 0 : div_cap(nd->memory_mib - nd->used_memory_mib, w->memory_mib, k);
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

/* The passes over the nodes are bound by memory: a node is ~3 KiB, of
 * which the header and the GPUs in use are read (7 cache lines for 8
 * GPUs), and nothing predicts the jumps between nodes. So a pass asks for
 * the header of the node 2 × AHEAD on (n_gpus), then for the GPUs of the
 * node AHEAD on. */
enum { AHEAD = 4 };

static void prefetch_head(const drv_sched_node_t *nd)
{
    __builtin_prefetch(nd);
    __builtin_prefetch(&nd->used_memory_mib);
}

static void prefetch_gpus(const drv_sched_node_t *nd)
{
    int ng = nd->n_gpus < 0 ? 0 : nd->n_gpus > DRV_SCHED_MAX_GPUS ? DRV_SCHED_MAX_GPUS : nd->n_gpus;
    const char *p = (const char *)nd->gpus, *end = (const char *)(nd->gpus + ng);
    for (; p < end; p += 64)
        __builtin_prefetch(p);
    if (ng)
        __builtin_prefetch(end - 1);
}

/* Scores by node state: a scorer is a pure function of the node's
 * allocations (sched_int.h), so two nodes in the same state score the same
 * and a tie group of identical nodes (an empty cluster's free nodes) costs
 * one eval. Open addressing in a fixed table; once half full, the nodes of
 * further states are simply scored. */
#define MEMO_SLOTS 256

typedef struct memo {
    int rep[MEMO_SLOTS];        /* a node in the slot's state, -1: empty */
    uint64_t hash[MEMO_SLOTS];
    double s[MEMO_SLOTS][3];
    int used;
    int prev;                   /* the last node scored or looked up, -1: none */
    double prev_s[3];
    bool off;                   /* the scorer asks not to be cached */
} memo_t;

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x9e3779b97f4a7c15ULL;
}

/* Everything of a node a scorer may read (not its id, nodepool, or a GPU's
 * index or uuid), folded a word per GPU: collisions only cost a
 * same_state that says no. */
static uint64_t state_hash(const drv_sched_node_t *nd)
{
    uint64_t h = mix(0, (uint64_t)nd->used_cpu_millis ^ (uint64_t)nd->cpu_millis << 24);
    h = mix(h, (uint64_t)nd->used_memory_mib ^ (uint64_t)nd->memory_mib << 24);
    h = mix(h, (uint64_t)nd->n_gpus | (uint64_t)nd->kinds << 32 | (uint64_t)nd->warm << 48);
    for (int g = 0; g < nd->n_gpus; g++) {
        const drv_sched_gpu_t *gp = &nd->gpus[g];
        h = mix(h, (uint64_t)gp->used_memory_mib ^ (uint64_t)gp->memory_mib << 20 ^
                       (uint64_t)(uintptr_t)gp->type << 8 ^ (uint64_t)gp->used_compute << 40 ^
                       (uint64_t)gp->shares << 48 ^ (uint64_t)gp->healthy << 62 ^
                       (uint64_t)gp->exclusive << 63);
    }
    return h ^ (h >> 29);
}

static bool same_state(const drv_sched_node_t *a, const drv_sched_node_t *b)
{
    if (a->cpu_millis != b->cpu_millis || a->used_cpu_millis != b->used_cpu_millis ||
        a->memory_mib != b->memory_mib || a->used_memory_mib != b->used_memory_mib ||
        a->n_gpus != b->n_gpus || a->kinds != b->kinds || a->warm != b->warm)
        return false;
    for (int g = 0; g < a->n_gpus; g++) {
        const drv_sched_gpu_t *x = &a->gpus[g], *y = &b->gpus[g];
        if (x->type != y->type || x->memory_mib != y->memory_mib ||
            x->used_memory_mib != y->used_memory_mib || x->used_compute != y->used_compute ||
            x->shares != y->shares || x->healthy != y->healthy || x->exclusive != y->exclusive)
            return false;
    }
    return true;
}

static void score_memo(const scorer_env_t *se, memo_t *mo, cand_t *c)
{
    if (mo->off) {
        score(se, c);
        return;
    }
    const drv_sched_node_t *nd = &se->nodes[c->node];
    if (mo->prev >= 0 && same_state(&se->nodes[mo->prev], nd)) {
        memcpy(c->s, mo->prev_s, sizeof c->s);
        return;
    }
    uint64_t h = state_hash(nd);
    for (size_t i = h % MEMO_SLOTS;; i = (i + 1) % MEMO_SLOTS) {
        if (mo->rep[i] < 0) {
            score(se, c);
            mo->prev = c->node;
            memcpy(mo->prev_s, c->s, sizeof c->s);
            if (mo->used < MEMO_SLOTS / 2) {
                mo->rep[i] = c->node;
                mo->hash[i] = h;
                memcpy(mo->s[i], c->s, sizeof c->s);
                mo->used++;
            }
            return;
        }
        if (mo->hash[i] == h && same_state(&se->nodes[mo->rep[i]], nd)) {
            memcpy(c->s, mo->s[i], sizeof c->s);
            mo->prev = c->node;
            memcpy(mo->prev_s, c->s, sizeof c->s);
            return;
        }
    }
}

static void heap_down(cand_t *v, size_t n, size_t i)
{
    for (;;) {
        size_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && by_score(&v[l], &v[w]) > 0)
            w = l;
        if (r < n && by_score(&v[r], &v[w]) > 0)
            w = r;
        if (w == i)
            return;
        cand_t t = v[i];
        v[i] = v[w];
        v[w] = t;
        i = w;
    }
}

/* Score v[0..cnt) (one tie group) and put its `top` best first, in order
 * (by_score: a total order, so the same as sorting it all); the rest
 * follow in no particular order. A heap of the best seen keeps it
 * O(cnt log top) for a few nodes out of a big group. */
static void best_first(const scorer_env_t *se, memo_t *mo, cand_t *v, size_t cnt, size_t top)
{
    if (cnt < 2 || top == 0)
        return;
    for (size_t i = 0; i < cnt; i++) {
        if (i + 2 * AHEAD < cnt)
            prefetch_head(&se->nodes[v[i + 2 * AHEAD].node]);
        if (i + AHEAD < cnt)
            prefetch_gpus(&se->nodes[v[i + AHEAD].node]);
        score_memo(se, mo, &v[i]);
    }
    if (top * 4 >= cnt) {
        qsort(v, cnt, sizeof *v, by_score);
        return;
    }
    for (size_t i = top / 2; i-- > 0;)
        heap_down(v, top, i);   /* the worst of the best at the root */
    for (size_t i = top; i < cnt; i++)
        if (by_score(&v[i], &v[0]) < 0) {
            cand_t t = v[0];
            v[0] = v[i];
            v[i] = t;
            heap_down(v, top, 0);
        }
    qsort(v, top, sizeof *v, by_score);
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

static bool eligible(int rank, int target)
{
    return rank >= 0 && (target < 0 || rank == target);
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
    size_t *hist = NULL;
    cand_t *v = NULL, *lv = NULL;
    pick_t *picks = NULL;
    memo_t *mo = NULL;
    if (!rk || !cap)
        goto oom;
    int max_rank = -1;
    for (size_t i = 0; i < n; i++) {
        if (i + 2 * AHEAD < n)
            prefetch_head(&nodes[i + 2 * AHEAD]);
        if (i + AHEAD < n)
            prefetch_gpus(&nodes[i + AHEAD]);
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

    /* The candidates (cap > 0, of the nodepool) in the order (k desc, rank,
     * node): only their counts per k are needed to find the cut, and only
     * the nodes at or above the cut's k are put in order. */
    int kmax = 0;
    for (size_t i = 0; i < n; i++)
        if (cap[i] > kmax && eligible(rk[i], target))
            kmax = cap[i];
    hist = calloc((size_t)kmax + 1, sizeof *hist);
    if (!hist)
        goto oom;
    for (size_t i = 0; i < n; i++)
        if (cap[i] > 0 && eligible(rk[i], target))
            hist[cap[i]]++;
    /* m = the fewest nodes: the shortest prefix that holds W; the m-th is at k = kj */
    size_t above = 0, m = 0;
    int64_t sum = 0;
    int kj = 0;
    for (int k = kmax; k >= 1 && !kj; k--) {
        if (!hist[k])
            continue;
        if (sum + (int64_t)hist[k] * k >= W) {
            kj = k;
            m = above + (size_t)((W - sum + k - 1) / k);
        } else {
            sum += (int64_t)hist[k] * k;
            above += hist[k];
        }
    }
    assert(kj > 0 && m >= 1);
    size_t nv = above + hist[kj];
    v = malloc(sizeof *v * nv);
    picks = malloc(sizeof *picks * m);
    if (!v || !picks)
        goto oom;
    size_t off = 0;             /* hist[kmax..kj] become where each k starts in v */
    for (int k = kmax; k >= kj; k--) {
        size_t c = hist[k];
        hist[k] = off;
        off += c;
    }
    for (size_t i = 0; i < n; i++)
        if (cap[i] >= kj && eligible(rk[i], target))
            v[hist[cap[i]]++] = (cand_t){.node = (int)i, .k = cap[i], .rank = rk[i]};
    if (target < 0)
        qsort(v, nv, sizeof *v, by_k);   /* several nodepools: rank before node */

    drv_sched_shapes_t one_set;
    drv_sched_shape_t one;
    sched_shapes_single(&one_set, &one, &req->worker);
    scorer_env_t se = {.policy = policy, .env = {.shapes = &one_set, .rng = NULL, .nf = NULL},
                       .nodes = nodes, .w = &req->worker};
    mo = malloc(sizeof *mo);
    if (!mo)
        goto oom;
    memset(mo->rep, 0xff, sizeof mo->rep);
    mo->used = 0;
    mo->prev = -1;
    mo->off = (policy->scorer->flags & SCHED_NOCACHE) != 0;

    /* the first m - 1 take all they can; the tie group at the cut is v[lo..hi) */
    size_t full = m - 1, lo = full, hi = full;
    if (full > 0) {
        lo = full - 1;
        while (lo > 0 && v[lo - 1].k == v[full - 1].k && v[lo - 1].rank == v[full - 1].rank)
            lo--;
        while (hi < nv && v[hi].k == v[full - 1].k && v[hi].rank == v[full - 1].rank)
            hi++;
    }
    int rem = W;
    for (size_t i = 0; i < full; i++)
        rem -= v[i].k;
    /* the last: the tightest remaining node that holds rem (then rank, score):
     * a k in [rem, kj) if any node has one, else v[full]'s class */
    int kl = 0;
    for (int k = rem; k < kj && !kl; k++)
        if (hist[k])
            kl = k;
    cand_t *last;
    size_t nl = 0;
    bool rest_of_cut = false;   /* the last is the cut group's next best */
    if (kl) {
        int rmin = INT_MAX;
        for (size_t i = 0; i < n; i++)
            if (cap[i] == kl && eligible(rk[i], target) && rk[i] <= rmin) {
                nl = rk[i] < rmin ? 1 : nl + 1;
                rmin = rk[i];
            }
        lv = malloc(sizeof *lv * nl);
        if (!lv)
            goto oom;
        nl = 0;
        for (size_t i = 0; i < n; i++)
            if (cap[i] == kl && rk[i] == rmin)
                lv[nl++] = (cand_t){.node = (int)i, .k = kl, .rank = rmin};
        last = lv;
    } else {
        last = v + full;
        nl = 1;
        while (full + nl < nv && v[full + nl].rank == v[full].rank)
            nl++;
        rest_of_cut = hi > full;
    }
    if (hi > full)
        best_first(&se, mo, v + lo, hi - lo, full - lo + rest_of_cut);
    if (!rest_of_cut)
        best_first(&se, mo, last, nl, 1);

    size_t np = 0;
    for (size_t i = 0; i < full; i++) {
        picks[np] = (pick_t){.node = v[i].node, .take = v[i].k, .rank = v[i].rank, .order = (int)np};
        np++;
    }
    picks[np] = (pick_t){.node = last->node, .take = rem, .rank = last->rank, .order = (int)np};
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
    free(hist);
    free(v);
    free(lv);
    free(picks);
    free(mo);
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
