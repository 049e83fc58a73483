/* ctx.c — a placement context: a policy bound to a snapshot it updates,
 * with incremental state so that a decision does not re-score the whole
 * cluster (place.h).
 *
 * State, all owned by the context and touched only by the thread that owns
 * the snapshot:
 *   - per node: a version (bumped by commit/touch), its effective pool
 *     (-1 when not schedulable or not eligible), and, with typical shapes,
 *     its fragmentation state (sched_nfrag_t: per shape a GPU mask and the
 *     unusable free capacity) plus the sum of all nodes' fragmentation;
 *   - per request shape seen (up to max_slots, least recently used evicted):
 *     one cache entry per node {score tuple, feasible, version}. An entry is
 *     valid while its version equals the node's.
 * A decision scans the compact arrays (pool, entry) in node order,
 * re-scoring only nodes whose version moved since this request shape was
 * last placed; commit bumps one node and recomputes its fragmentation in
 * O(shapes x GPUs). Scorers that use the generator (random) are never
 * cached.
 *
 * Invariant: for cacheable policies the choice equals the stateless
 * place()'s on the same snapshot, except for random tie-breaks.
 */
#include "sched/sched_int.h"

#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_BUDGET (64u << 20)   /* bytes of score cache, all slots together */
#define MAX_SLOTS 512
#define MIN_SLOTS 8

typedef struct entry {
    double s[3];
    uint32_t ver;
    uint32_t ok;
} entry_t;

typedef struct slot {
    bool used;
    uint64_t hash, last_use;
    drv_sched_request_t req;    /* key; gpu_types point into types/strings */
    const char **types;
    char *strings;
    entry_t *e;                 /* n entries */
} slot_t;

struct drv_sched_ctx {
    const drv_place_policy_t *policy;
    drv_sched_node_t *nodes;
    size_t n;
    drv_rng_t rng;
    uint32_t *ver;
    int *pool;                  /* effective pool, -1 = never */
    /* fragmentation state */
    const drv_sched_shapes_t *shapes;
    size_t m;
    uint64_t *fit;              /* n x m */
    double *unfit, *use;        /* n x m */
    int32_t *cnt;               /* n x m */
    double *total, *frag, *dfrag; /* n */
    double frag_sum;
    sched_mix_t mix;            /* from the shapes and the nodes (fgd.c) */
    /* score cache */
    slot_t *slots;
    size_t n_slots, max_slots;
    int *table;                 /* hash -> slot + 1, open addressing */
    size_t table_size;
    uint64_t clock;
};

static int eff_pool(const drv_sched_node_t *nd)
{
    return nd->schedulable && nd->pool >= 0 ? nd->pool : -1;
}

static void nfrag_node(drv_sched_ctx_t *ctx, size_t i)
{
    sched_nfrag_t nf;
    size_t o = i * ctx->m;
    sched_nfrag_compute(&ctx->nodes[i], ctx->shapes, ctx->mix.beta, &ctx->fit[o], &ctx->unfit[o],
                        &ctx->cnt[o], &ctx->use[o], &nf);
    ctx->total[i] = nf.total;
    ctx->frag[i] = nf.frag;
    ctx->dfrag[i] = nf.dfrag;
}

static void free_frag(drv_sched_ctx_t *ctx)
{
    free(ctx->fit);
    free(ctx->unfit);
    free(ctx->use);
    free(ctx->cnt);
    free(ctx->total);
    free(ctx->frag);
    free(ctx->dfrag);
    ctx->fit = NULL;
    ctx->cnt = NULL;
    ctx->unfit = ctx->use = NULL;
    ctx->total = ctx->frag = ctx->dfrag = NULL;
}

static int alloc_frag(drv_sched_ctx_t *ctx, const drv_sched_shapes_t *shapes)
{
    free_frag(ctx);
    ctx->shapes = shapes && shapes->n ? shapes : NULL;
    ctx->m = ctx->shapes ? shapes->n : 0;
    ctx->frag_sum = 0;
    sched_mix_compute(ctx->nodes, ctx->n, ctx->shapes, &ctx->mix);
    if (!ctx->m)
        return 0;
    size_t n = ctx->n ? ctx->n : 1;
    ctx->fit = malloc(n * ctx->m * sizeof *ctx->fit);
    ctx->unfit = malloc(n * ctx->m * sizeof *ctx->unfit);
    ctx->use = malloc(n * ctx->m * sizeof *ctx->use);
    ctx->cnt = malloc(n * ctx->m * sizeof *ctx->cnt);
    ctx->total = malloc(n * sizeof *ctx->total);
    ctx->frag = malloc(n * sizeof *ctx->frag);
    ctx->dfrag = malloc(n * sizeof *ctx->dfrag);
    if (!ctx->fit || !ctx->unfit || !ctx->use || !ctx->cnt || !ctx->total || !ctx->frag ||
        !ctx->dfrag)
        return -1;
    for (size_t i = 0; i < ctx->n; i++) {
        nfrag_node(ctx, i);
        ctx->frag_sum += ctx->frag[i];
    }
    return 0;
}

drv_sched_ctx_t *drv_sched_ctx_create(const drv_place_policy_t *policy, drv_sched_node_t *nodes,
                                      size_t n, const drv_sched_ctx_opts_t *opts)
{
    assert(policy && (nodes || n == 0));
    drv_sched_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->policy = policy;
    ctx->nodes = nodes;
    ctx->n = n;
    drv_rng_seed(&ctx->rng, opts ? opts->seed : 0);
    size_t nn = n ? n : 1;
    ctx->ver = malloc(nn * sizeof *ctx->ver);
    ctx->pool = malloc(nn * sizeof *ctx->pool);
    if (!ctx->ver || !ctx->pool)
        goto error;
    for (size_t i = 0; i < n; i++) {
        ctx->ver[i] = 1;
        ctx->pool[i] = eff_pool(&nodes[i]);
    }
    if (alloc_frag(ctx, opts ? opts->shapes : NULL) < 0)
        goto error;
    size_t per = nn * sizeof(entry_t);
    size_t ms = CACHE_BUDGET / per;
    ctx->max_slots = ms < MIN_SLOTS ? MIN_SLOTS : ms > MAX_SLOTS ? MAX_SLOTS : ms;
    ctx->slots = calloc(ctx->max_slots, sizeof *ctx->slots);
    ctx->table_size = 1;
    while (ctx->table_size < 2 * ctx->max_slots)
        ctx->table_size <<= 1;
    ctx->table = calloc(ctx->table_size, sizeof *ctx->table);
    if (!ctx->slots || !ctx->table)
        goto error;
    return ctx;
error:
    drv_sched_ctx_destroy(ctx);
    return NULL;
}

static void slot_clear_key(slot_t *s)
{
    free(s->types);
    free(s->strings);
    s->types = NULL;
    s->strings = NULL;
}

void drv_sched_ctx_destroy(drv_sched_ctx_t *ctx)
{
    if (!ctx)
        return;
    for (size_t i = 0; i < ctx->n_slots; i++) {
        slot_clear_key(&ctx->slots[i]);
        free(ctx->slots[i].e);
    }
    free(ctx->slots);
    free(ctx->table);
    free(ctx->ver);
    free(ctx->pool);
    free_frag(ctx);
    free(ctx);
}

/* --- request shapes -> slots ------------------------------------------------------ */

static uint64_t req_hash(const drv_sched_request_t *r)
{
    uint64_t h = 1469598103934665603ULL;
    const int64_t v[] = {r->gpu_count, r->gpu_memory_mib, r->compute_percent, r->cpu_millis,
                         r->memory_mib, r->disable_packing, (int64_t)r->n_gpu_types};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        h ^= (uint64_t)v[i];
        h *= 1099511628211ULL;
        h ^= h >> 29;
    }
    for (size_t t = 0; t < r->n_gpu_types; t++) {
        for (const char *p = r->gpu_types[t]; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        h = (h ^ '|') * 1099511628211ULL;
    }
    return h ? h : 1;
}

static bool req_equal(const drv_sched_request_t *a, const drv_sched_request_t *b)
{
    if (a->gpu_count != b->gpu_count || a->gpu_memory_mib != b->gpu_memory_mib ||
        a->compute_percent != b->compute_percent || a->cpu_millis != b->cpu_millis ||
        a->memory_mib != b->memory_mib || a->disable_packing != b->disable_packing ||
        a->n_gpu_types != b->n_gpu_types)
        return false;
    for (size_t t = 0; t < a->n_gpu_types; t++)
        if (strcmp(a->gpu_types[t], b->gpu_types[t]) != 0)
            return false;
    return true;
}

static void table_insert(drv_sched_ctx_t *ctx, size_t si)
{
    size_t mask = ctx->table_size - 1, h = (size_t)ctx->slots[si].hash & mask;
    while (ctx->table[h])
        h = (h + 1) & mask;
    ctx->table[h] = (int)si + 1;
}

static int slot_set_key(slot_t *s, const drv_sched_request_t *req, uint64_t hash)
{
    size_t len = 0;
    for (size_t t = 0; t < req->n_gpu_types; t++)
        len += strlen(req->gpu_types[t]) + 1;
    s->types = req->n_gpu_types ? malloc(req->n_gpu_types * sizeof *s->types) : NULL;
    s->strings = len ? malloc(len) : NULL;
    if ((req->n_gpu_types && !s->types) || (len && !s->strings))
        return -1;
    char *p = s->strings;
    for (size_t t = 0; t < req->n_gpu_types; t++) {
        size_t l = strlen(req->gpu_types[t]) + 1;
        memcpy(p, req->gpu_types[t], l);
        s->types[t] = p;
        p += l;
    }
    s->req = *req;
    s->req.gpu_types = s->types;
    s->hash = hash;
    return 0;
}

/* The cache slot of this request shape; NULL when out of memory (the caller
 * then scores without the cache). */
static slot_t *slot_for(drv_sched_ctx_t *ctx, const drv_sched_request_t *req)
{
    uint64_t h = req_hash(req);
    size_t mask = ctx->table_size - 1;
    for (size_t p = (size_t)h & mask; ctx->table[p]; p = (p + 1) & mask) {
        slot_t *s = &ctx->slots[ctx->table[p] - 1];
        if (s->hash == h && req_equal(&s->req, req)) {
            s->last_use = ++ctx->clock;
            return s;
        }
    }
    size_t si;
    if (ctx->n_slots < ctx->max_slots) {
        si = ctx->n_slots;
        slot_t *s = &ctx->slots[si];
        s->e = calloc(ctx->n ? ctx->n : 1, sizeof *s->e);
        if (!s->e)
            return NULL;
        ctx->n_slots++;
    } else {
        si = 0;   /* evict the least recently used */
        for (size_t i = 1; i < ctx->n_slots; i++)
            if (ctx->slots[i].last_use < ctx->slots[si].last_use)
                si = i;
        slot_clear_key(&ctx->slots[si]);
        memset(ctx->slots[si].e, 0, (ctx->n ? ctx->n : 1) * sizeof(entry_t));
        memset(ctx->table, 0, ctx->table_size * sizeof *ctx->table);
        for (size_t i = 0; i < ctx->n_slots; i++)
            if (i != si)
                table_insert(ctx, i);
    }
    slot_t *s = &ctx->slots[si];
    if (slot_set_key(s, req, h) < 0) {
        slot_clear_key(s);
        s->hash = 0;   /* unusable until rekeyed; never matches (hashes are non-zero) */
        return NULL;
    }
    s->used = true;
    s->last_use = ++ctx->clock;
    table_insert(ctx, si);
    return s;
}

/* --- placing -------------------------------------------------------------------------- */

static bool eval_node(drv_sched_ctx_t *ctx, const sched_env_t *env0, size_t i,
                      const drv_sched_request_t *req, sched_eval_t *ev)
{
    const drv_sched_node_t *nd = &ctx->nodes[i];
    if (!sched_node_room(nd, req))
        return false;
    sched_env_t env = *env0;
    sched_nfrag_t nf;
    if (ctx->shapes) {
        size_t o = i * ctx->m;
        nf.total = ctx->total[i];
        nf.frag = ctx->frag[i];
        nf.dfrag = ctx->dfrag[i];
        nf.fit = &ctx->fit[o];
        nf.unfit = &ctx->unfit[o];
        nf.cnt = &ctx->cnt[o];
        nf.use = &ctx->use[o];
        env.nf = &nf;
    }
    return ctx->policy->scorer->eval(&env, nd, req, ev);
}

int drv_sched_ctx_place(drv_sched_ctx_t *ctx, const drv_sched_request_t *req,
                        drv_sched_choice_t *out, char *why, size_t why_len)
{
    assert(ctx && req && out);
    const struct drv_sched_scorer *sc = ctx->policy->scorer;
    drv_sched_shapes_t one_set;
    drv_sched_shape_t one;
    sched_env_t env = {.shapes = ctx->shapes, .rng = &ctx->rng, .nf = NULL,
                       .mix = ctx->shapes ? &ctx->mix : NULL};
    if (!ctx->shapes) {
        sched_shapes_single(&one_set, &one, req);
        env.shapes = &one_set;
    }
    slot_t *slot = sc->flags & SCHED_NOCACHE ? NULL : slot_for(ctx, req);
    bool random_ties = sc->flags & SCHED_RANDOM_TIES;
    int best = -1, best_pool = INT_MAX;
    uint64_t ties = 0;
    double bs[3] = {0, 0, 0};
    sched_eval_t ev, bev;
    for (size_t i = 0; i < ctx->n; i++) {
        int pool = ctx->pool[i];
        if (pool < 0 || pool > best_pool)
            continue;
        const double *s;
        if (slot) {
            entry_t *e = &slot->e[i];
            if (e->ver != ctx->ver[i]) {
                e->ok = eval_node(ctx, &env, i, req, &ev);
                if (e->ok)
                    memcpy(e->s, ev.s, sizeof e->s);
                e->ver = ctx->ver[i];
            }
            if (!e->ok)
                continue;
            s = e->s;
        } else {
            if (!eval_node(ctx, &env, i, req, &ev))
                continue;
            s = ev.s;
        }
        int c = best < 0 || pool < best_pool ? 1 : sched_cmp(s, bs);
        if (c == 0)
            c = sched_warm_cmp(&ctx->nodes[i], &ctx->nodes[best]);
        if (c > 0) {
            best = (int)i;
            best_pool = pool;
            memcpy(bs, s, sizeof bs);
            ties = 1;
            if (!slot)
                bev = ev;
        } else if (c == 0 && random_ties && drv_rng_below(&ctx->rng, ++ties) == 0) {
            best = (int)i;
            if (!slot)
                bev = ev;
        }
    }
    if (best < 0) {
        sched_why(ctx->nodes, ctx->n, req, why, why_len);
        return -1;
    }
    if (slot) {
        bool ok = eval_node(ctx, &env, (size_t)best, req, &bev);
        assert(ok);
        (void)ok;
    }
    sched_fill_choice(ctx->nodes, best, req, &bev, out);
    return 0;
}

void drv_sched_ctx_touch(drv_sched_ctx_t *ctx, size_t i)
{
    assert(ctx && i < ctx->n);
    if (++ctx->ver[i] == 0)
        ctx->ver[i] = 1;
    ctx->pool[i] = eff_pool(&ctx->nodes[i]);
    if (ctx->shapes) {
        ctx->frag_sum -= ctx->frag[i];
        nfrag_node(ctx, i);
        ctx->frag_sum += ctx->frag[i];
    }
}

void drv_sched_ctx_commit(drv_sched_ctx_t *ctx, const drv_sched_request_t *req,
                          const drv_sched_choice_t *c)
{
    assert(ctx && c->node >= 0 && (size_t)c->node < ctx->n);
    drv_sched_commit(ctx->nodes, req, c);
    drv_sched_ctx_touch(ctx, (size_t)c->node);
}

void drv_sched_ctx_set_shapes(drv_sched_ctx_t *ctx, const drv_sched_shapes_t *shapes)
{
    if (alloc_frag(ctx, shapes) < 0)
        alloc_frag(ctx, NULL);   /* out of memory: carry on without shapes */
    for (size_t i = 0; i < ctx->n; i++)
        if (++ctx->ver[i] == 0)
            ctx->ver[i] = 1;
}

double drv_sched_ctx_frag(const drv_sched_ctx_t *ctx)
{
    return ctx->frag_sum;
}
