/* fgd.c — fragmentation: the workload's typical shapes, the FGD measure of
 * a node's fragmented free GPU capacity, and the two policies built on it:
 *
 *   fgd     Fragmentation Gradient Descent as in Weng et al., "Beware of
 *           Fragmentation: Scheduling GPU-Sharing Workloads with
 *           Fragmentation Gradient Descent" (USENIX ATC'23) and its public
 *           simulator: place where the node's fragmentation grows least,
 *           scored int(sigmoid(-growth / 1000) * 100) (a kube-scheduler
 *           score); for a share, the first GPU with the best score; ties
 *           between nodes to the first in node order.
 *   drover  drover's default, which goes beyond the paper (eval_drover):
 *           the same gradient on a CPU- and memory-aware measure that also
 *           counts what a stream of typical tasks could not use.
 *
 * The measure (place.h, drv_sched_node_frag): for each typical shape m
 * with weight f, the free capacity m could not use on the node — all of
 * it if m fits nowhere there, else the free capacity of the GPUs too small
 * for m — weighted by f and summed. To make a decision cheap, a node's
 * state with respect to the shapes (sched_nfrag_t: per shape, the mask of
 * GPUs that fit it, the free capacity of those that do not, the copies of
 * it they could take) is computed once per change of the node (ctx.c keeps
 * it per node and updates it on commit); the measure after a placement
 * then costs O(shapes x GPUs touched) instead of O(shapes x GPUs).
 * Pure functions; no state of their own.
 */
#include "sched/sched_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --- typical shapes ----------------------------------------------------------- */

static size_t types_len(const drv_sched_request_t *r)
{
    size_t l = 0;
    for (size_t i = 0; i < r->n_gpu_types; i++)
        l += strlen(r->gpu_types[i]) + 1;
    return l;
}

/* Compare the '|'-joined type lists as strings (the reference simulator's
 * GpuType). */
static int types_cmp(const drv_sched_request_t *a, const drv_sched_request_t *b)
{
    size_t ia = 0, ib = 0;
    const char *pa = a->n_gpu_types ? a->gpu_types[0] : NULL;
    const char *pb = b->n_gpu_types ? b->gpu_types[0] : NULL;
    for (;;) {
        int ca, cb;
        if (!pa)
            ca = -1;
        else if (*pa)
            ca = (unsigned char)*pa;
        else
            ca = ia + 1 < a->n_gpu_types ? '|' : -1;
        if (!pb)
            cb = -1;
        else if (*pb)
            cb = (unsigned char)*pb;
        else
            cb = ib + 1 < b->n_gpu_types ? '|' : -1;
        if (ca != cb)
            return ca < cb ? -1 : 1;
        if (ca == -1)
            return 0;
        if (*pa)
            pa++;
        else
            pa = a->gpu_types[++ia];
        if (*pb)
            pb++;
        else
            pb = b->gpu_types[++ib];
    }
}

#define CMP(x, y)                  \
    do {                           \
        if ((x) != (y))            \
            return (x) < (y) ? -1 : 1; \
    } while (0)

/* The grouping key; memory is not part of it (as in the paper). */
static int key_cmp(const drv_sched_request_t *a, const drv_sched_request_t *b)
{
    CMP(a->cpu_millis, b->cpu_millis);
    CMP(a->gpu_memory_mib, b->gpu_memory_mib);
    CMP(a->gpu_count, b->gpu_count);
    int t = types_cmp(a, b);
    if (t)
        return t;
    CMP(a->compute_percent, b->compute_percent);
    CMP(a->disable_packing, b->disable_packing);
    return 0;
}

static const drv_sched_request_t *sort_reqs;

static int by_key(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    int c = key_cmp(&sort_reqs[a], &sort_reqs[b]);
    return c ? c : (a < b ? -1 : a > b);
}

typedef struct group {
    size_t first, count;
    double mem_sum;
} group_t;

/* Most frequent first; ties by key, descending. */
static int by_count(const void *x, const void *y)
{
    const group_t *a = x, *b = y;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return -key_cmp(&sort_reqs[a->first], &sort_reqs[b->first]);
}

drv_sched_shapes_t *drv_sched_shapes_create(const drv_sched_request_t *reqs, size_t n,
                                            double coverage)
{
    drv_sched_shapes_t *s = calloc(1, sizeof *s);
    size_t *idx = NULL;
    group_t *groups = NULL;
    if (!s)
        return NULL;
    if (n == 0)
        return s;
    if (!(coverage > 0) || coverage > 1)
        coverage = 1;
    idx = malloc(n * sizeof *idx);
    groups = malloc(n * sizeof *groups);
    if (!idx || !groups)
        goto error;
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    sort_reqs = reqs;   /* qsort has no context argument; single-threaded by contract */
    qsort(idx, n, sizeof *idx, by_key);
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        const drv_sched_request_t *r = &reqs[idx[i]];
        if (ng && key_cmp(&reqs[groups[ng - 1].first], r) == 0) {
            groups[ng - 1].count++;
            groups[ng - 1].mem_sum += (double)r->memory_mib;
        } else {
            groups[ng++] = (group_t){idx[i], 1, (double)r->memory_mib};
        }
    }
    qsort(groups, ng, sizeof *groups, by_count);
    size_t keep = 0;
    double cum = 0;
    while (keep < ng && keep < DRV_SCHED_MAX_SHAPES && cum < coverage * (double)n)
        cum += (double)groups[keep++].count;
    size_t tlen = 0, ntypes = 0;
    for (size_t k = 0; k < keep; k++) {
        tlen += types_len(&reqs[groups[k].first]);
        ntypes += reqs[groups[k].first].n_gpu_types;
    }
    s->v = calloc(keep, sizeof *s->v);
    s->strings = malloc(tlen + 1);
    s->types = calloc(ntypes + 1, sizeof *s->types);
    if (!s->v || !s->strings || !s->types)
        goto error;
    char *p = s->strings;
    const char **tp = s->types;
    for (size_t k = 0; k < keep; k++) {
        drv_sched_shape_t *sh = &s->v[k];
        const drv_sched_request_t *r = &reqs[groups[k].first];
        sh->req = *r;
        sh->req.memory_mib = llround(groups[k].mem_sum / (double)groups[k].count);
        sh->req.gpu_types = r->n_gpu_types ? tp : NULL;
        for (size_t t = 0; t < r->n_gpu_types; t++) {
            size_t l = strlen(r->gpu_types[t]) + 1;
            memcpy(p, r->gpu_types[t], l);
            *tp++ = p;
            p += l;
        }
        sh->count = groups[k].count;
        sh->weight = (double)groups[k].count / cum;
    }
    s->n = keep;
    free(idx);
    free(groups);
    return s;
error:
    free(idx);
    free(groups);
    drv_sched_shapes_destroy(s);
    return NULL;
}

void drv_sched_shapes_destroy(drv_sched_shapes_t *s)
{
    if (!s)
        return;
    free(s->v);
    free(s->strings);
    free(s->types);
    free(s);
}

size_t drv_sched_shapes_count(const drv_sched_shapes_t *s)
{
    return s ? s->n : 0;
}

const drv_sched_shape_t *drv_sched_shapes_at(const drv_sched_shapes_t *s, size_t i)
{
    return s && i < s->n ? &s->v[i] : NULL;
}

void sched_shapes_single(drv_sched_shapes_t *set, drv_sched_shape_t *one,
                         const drv_sched_request_t *req)
{
    one->req = *req;
    one->weight = 1;
    one->count = 1;
    set->n = 1;
    set->v = one;
    set->strings = NULL;
    set->types = NULL;
}


/* --- the measure ----------------------------------------------------------------------
 * Two flavours, computed from the same per-node state:
 *   paper   the FGD paper's, as its simulator computes it: a GPU shape is
 *           hostable when the node has the CPU and enough GPUs that fit it;
 *           CPU-only shapes count all free GPU capacity (constant noise, but
 *           it moves the paper's rounded score, so it is kept for fidelity).
 *   drover  a shape is hostable only if the node also has its memory;
 *           CPU-only shapes count nothing (they never use a GPU); plus
 *           beta (mix.c: from the workload's CPU intensity) x the capacity
 *           a stream of copies of the shape could
 *           not use — GPU slices too small for one more copy (for shares),
 *           and the copies the node's free CPU or memory cannot feed — so a
 *           node whose CPU runs out before its GPUs (common on the Alibaba
 *           cluster: 12 CPUs per GPU on its 8-GPU nodes) counts as
 *           fragmented before it is too late.
 */


static inline bool shape_fits(const drv_sched_request_t *m, const drv_sched_gpu_t *g)
{
    return sched_gpu_fits(m, g, sched_wants_whole(m, g->memory_mib));
}

/* Shapes of one GPU that are placed as shares (possibly whole on a GPU no
 * bigger than the share). */
static inline bool shares_kind(const drv_sched_request_t *m)
{
    return m->gpu_count == 1 && !m->disable_packing;
}

/* Copies of a share shape GPU g could take, given that it fits one, and the
 * milli-GPU each copy takes. */
static int copies_fit(const drv_sched_request_t *m, const drv_sched_gpu_t *g, double *per)
{
    if (sched_wants_whole(m, g->memory_mib)) {
        *per = 1000;
        return 1;
    }
    int64_t c = (g->memory_mib - g->used_memory_mib) / m->gpu_memory_mib;
    if (m->compute_percent > 0) {
        int64_t c2 = (100 - g->used_compute) / m->compute_percent;
        if (c2 < c)
            c = c2;
    }
    double pm = 1000.0 * (double)m->gpu_memory_mib / (double)g->memory_mib;
    double pc = 10.0 * m->compute_percent;
    *per = pm > pc ? pm : pc;
    return (int)(c < 0 ? 0 : c > INT32_MAX ? INT32_MAX : c);
}

/* One shape's contribution, from the node's counts for it. */
static inline double paper_term(const drv_sched_request_t *r, int fitcount, double unf,
                                double total, int64_t cpu)
{
    if (r->gpu_count <= 0)
        return total;
    bool host = cpu >= r->cpu_millis && fitcount >= r->gpu_count;
    return host ? unf : total;
}

static inline double drover_term(const drv_sched_request_t *r, int fitcount, double unf,
                                 int64_t copies_sum, double use_sum, double total, int64_t cpu,
                                 int64_t mem, double beta)
{
    if (r->gpu_count <= 0)
        return 0;
    bool host = cpu >= r->cpu_millis && mem >= r->memory_mib && fitcount >= r->gpu_count;
    int64_t copies;
    double usable;
    if (shares_kind(r)) {
        copies = copies_sum;
        usable = use_sum;
    } else {
        copies = fitcount / r->gpu_count;
        usable = (double)copies * 1000.0 * r->gpu_count;
    }
    int64_t lim = copies;
    if (r->cpu_millis > 0) {
        int64_t l = cpu > 0 ? cpu / r->cpu_millis : 0;
        lim = l < lim ? l : lim;
    }
    if (r->memory_mib > 0) {
        int64_t l = mem > 0 ? mem / r->memory_mib : 0;
        lim = l < lim ? l : lim;
    }
    if (lim < copies)
        usable = copies > 0 ? usable * (double)lim / (double)copies : 0;
    if (usable > total)
        usable = total;
    return (host ? unf : total) + beta * (total - usable);
}

void sched_nfrag_compute(const drv_sched_node_t *nd, const drv_sched_shapes_t *m, double beta,
                         uint64_t *fit, double *unfit, int32_t *cnt, double *use,
                         sched_nfrag_t *out)
{
    double free_[DRV_SCHED_MAX_GPUS], total = 0;
    for (int j = 0; j < nd->n_gpus; j++)
        total += (free_[j] = sched_gpu_free_milli(&nd->gpus[j]));
    int64_t cpu = nd->cpu_millis - nd->used_cpu_millis;
    int64_t mem = nd->memory_mib - nd->used_memory_mib;
    double frag = 0, dfrag = 0;
    for (size_t k = 0; k < m->n; k++) {
        const drv_sched_request_t *r = &m->v[k].req;
        uint64_t mask = 0;
        double unf = 0, u = 0;
        int64_t c = 0;
        if (r->gpu_count > 0) {
            bool sh = shares_kind(r);
            for (int j = 0; j < nd->n_gpus; j++) {
                if (shape_fits(r, &nd->gpus[j])) {
                    mask |= 1ULL << j;
                    if (sh) {
                        double per;
                        int cj = copies_fit(r, &nd->gpus[j], &per);
                        c += cj;
                        u += cj * per;
                    }
                } else {
                    unf += free_[j];
                }
            }
        }
        fit[k] = mask;
        unfit[k] = unf;
        cnt[k] = (int32_t)(c > INT32_MAX ? INT32_MAX : c);
        use[k] = u;
        int fc = __builtin_popcountll(mask);
        frag += m->v[k].weight * paper_term(r, fc, unf, total, cpu);
        dfrag += m->v[k].weight * drover_term(r, fc, unf, cnt[k], u, total, cpu, mem, beta);
    }
    out->total = total;
    out->frag = frag;
    out->dfrag = dfrag;
    out->fit = fit;
    out->unfit = unfit;
    out->cnt = cnt;
    out->use = use;
}

double drv_sched_node_frag(const drv_sched_node_t *nd, const drv_sched_shapes_t *m)
{
    if (!m || !m->n)
        return 0;
    uint64_t *fit = malloc(m->n * sizeof *fit);
    double *unfit = malloc(m->n * sizeof *unfit), *use = malloc(m->n * sizeof *use);
    int32_t *cnt = malloc(m->n * sizeof *cnt);
    sched_nfrag_t nf = {0};
    if (fit && unfit && use && cnt)
        sched_nfrag_compute(nd, m, SCHED_DROVER_BETA0, fit, unfit, cnt, use, &nf);
    free(fit);
    free(unfit);
    free(use);
    free(cnt);
    return nf.frag;
}

/* Scratch for a node's state when the caller has none (stateless calls). */
typedef struct nfrag_tmp {
    sched_nfrag_t nf;
    uint64_t fit[DRV_SCHED_MAX_SHAPES];
    double unfit[DRV_SCHED_MAX_SHAPES], use[DRV_SCHED_MAX_SHAPES];
    int32_t cnt[DRV_SCHED_MAX_SHAPES];
} nfrag_tmp_t;

static const sched_nfrag_t *nfrag_of(const sched_env_t *env, const drv_sched_node_t *nd,
                                     nfrag_tmp_t *t)
{
    if (env->nf)
        return env->nf;
    sched_nfrag_compute(nd, env->shapes, sched_mix_beta(env->mix), t->fit, t->unfit, t->cnt,
                        t->use, &t->nf);
    return &t->nf;
}

enum { FLAVOUR_PAPER, FLAVOUR_DROVER };

/* The measure of the node if the request took GPUs gpus[0..ng) (whole or a
 * share) and left it cpu / mem: O(shapes x ng) from the node's state. */
static double measure_after(int flavour, const drv_sched_shapes_t *M, const sched_nfrag_t *nf,
                            const drv_sched_node_t *nd, const drv_sched_request_t *req,
                            const int *gpus, int ng, bool whole, int64_t cpu, int64_t mem,
                            double beta)
{
    drv_sched_gpu_t after[DRV_SCHED_MAX_GPUS];
    double fb[DRV_SCHED_MAX_GPUS], fa[DRV_SCHED_MAX_GPUS], total = nf->total;
    for (int k = 0; k < ng; k++) {
        after[k] = nd->gpus[gpus[k]];
        fb[k] = sched_gpu_free_milli(&after[k]);
        sched_gpu_after(&after[k], req, whole);
        fa[k] = sched_gpu_free_milli(&after[k]);
        total -= fb[k] - fa[k];
    }
    double sum = 0;
    for (size_t m = 0; m < M->n; m++) {
        const drv_sched_request_t *r = &M->v[m].req;
        double w = M->v[m].weight;
        if (r->gpu_count <= 0) {
            if (flavour == FLAVOUR_PAPER)
                sum += w * total;
            continue;
        }
        uint64_t mask = nf->fit[m];
        int cnt = __builtin_popcountll(mask);
        double unf = nf->unfit[m], use = nf->use[m];
        int64_t copies = nf->cnt[m];
        bool copy_terms = flavour == FLAVOUR_DROVER && shares_kind(r);
        for (int k = 0; k < ng; k++) {
            const drv_sched_gpu_t *g = &nd->gpus[gpus[k]];
            bool b = (mask >> gpus[k]) & 1, a = shape_fits(r, &after[k]);
            cnt += (int)a - (int)b;
            if (!b)
                unf -= fb[k];
            if (!a)
                unf += fa[k];
            if (copy_terms) {
                double pb = 0, pa = 0;
                int cb = b ? copies_fit(r, g, &pb) : 0, ca = a ? copies_fit(r, &after[k], &pa) : 0;
                copies += ca - cb;
                use += ca * pa - cb * pb;
            }
        }
        sum += w * (flavour == FLAVOUR_PAPER
                        ? paper_term(r, cnt, unf, total, cpu)
                        : drover_term(r, cnt, unf, copies, use, total, cpu, mem, beta));
    }
    return sum;
}

/* The scarcity term of taking GPUs gpus[0..ng) for req: DROVER_SCARCITY x,
 * per GPU, the milli-GPU taken x its model's excess. Chosen on the tuning
 * half of the trace variants (bench/sim/split.txt), as SCHED_DROVER_BETA0 and the
 * exponent of rho were. */
#define DROVER_SCARCITY 0.5

static double scarcity_cost(const sched_env_t *env, const drv_sched_node_t *nd,
                            const drv_sched_request_t *req, const int *gpus, int ng, bool whole)
{
    if (!env->mix || !env->mix->n)
        return 0;
    double c = 0;
    for (int k = 0; k < ng; k++) {
        const drv_sched_gpu_t *g = &nd->gpus[gpus[k]];
        double e = sched_mix_excess(env->mix, g);
        if (e > 0) {
            drv_sched_gpu_t a = *g;
            sched_gpu_after(&a, req, whole);
            c += e * (sched_gpu_free_milli(g) - sched_gpu_free_milli(&a));
        }
    }
    return DROVER_SCARCITY * c;
}

/* Two GPUs in the same state score the same: skip repeats. */
static bool same_gpu_state(const drv_sched_gpu_t *a, const drv_sched_gpu_t *b)
{
    return a->memory_mib == b->memory_mib && a->used_memory_mib == b->used_memory_mib &&
           a->used_compute == b->used_compute && (a->shares == 0) == (b->shares == 0) &&
           a->type == b->type && a->healthy == b->healthy && a->exclusive == b->exclusive;
}

/* The paper's score: fragmentation growth in milli-GPU -> 0..100. */
static double fgd_score(double before, double after)
{
    return (double)(int64_t)(100.0 / (1.0 + exp(-(before - after) / 1000)));
}

/* --- fgd (the paper's) -------------------------------------------------------------
 * Score int(sigmoid(-growth / 1000) * 100) of the paper flavour; a share
 * goes to the first GPU with the best score; ties between nodes go to the
 * first in node order (the reference simulator breaks them by node name,
 * which it has shuffled with the seed). */
static bool eval_fgd(const sched_env_t *env, const drv_sched_node_t *nd,
                     const drv_sched_request_t *req, sched_eval_t *ev)
{
    sched_cands_t c;
    if (!sched_candidates(nd, req, &c))
        return false;
    nfrag_tmp_t tmp;
    const sched_nfrag_t *nf = nfrag_of(env, nd, &tmp);
    const drv_sched_shapes_t *M = env->shapes;
    int64_t cpu = nd->cpu_millis - nd->used_cpu_millis - req->cpu_millis;
    int64_t mem = nd->memory_mib - nd->used_memory_mib - req->memory_mib;
    ev->s[1] = ev->s[2] = 0;
    if (c.need == 1 && !c.multi) {
        double best = -1;
        int bk = 0;
        for (int k = 0; k < c.n; k++) {
            if (k > 0 && c.whole[k] == c.whole[k - 1] &&
                same_gpu_state(&nd->gpus[c.idx[k]], &nd->gpus[c.idx[k - 1]]))
                continue;   /* same score as the previous; the first wins ties */
            double s = fgd_score(nf->frag, measure_after(FLAVOUR_PAPER, M, nf, nd, req,
                                                         &c.idx[k], 1, c.whole[k], cpu, mem, 0));
            if (s > best) {
                best = s;
                bk = k;
            }
        }
        ev->n_gpus = 1;
        ev->gpus[0] = c.idx[bk];
        ev->whole = c.whole[bk];
        ev->s[0] = best;
        return true;
    }
    sched_take_first(&c, ev);
    ev->s[0] = fgd_score(nf->frag, measure_after(FLAVOUR_PAPER, M, nf, nd, req, ev->gpus,
                                                 ev->n_gpus, ev->whole, cpu, mem, 0));
    return true;
}

/* --- drover ----------------------------------------------------------------------------
 * drover's default. Same skeleton as fgd (growth of a fragmentation measure,
 * rounded the same way, ties to the first node in order — a first-fit
 * tie-break, which keeps filling the same nodes and beats both exact
 * scores and best-fit tie-breaks on the trace), with:
 *   - the drover flavour of the measure (memory-aware, CPU-only shapes
 *     ignored, plus the copies a node's slices, CPU and memory could not
 *     feed): the largest gain, on every trace variant, and most on the
 *     CPU-heavy ones;
 *   - a share goes to the GPU with the best score, then the tightest one
 *     (least free capacity left), not simply the first;
 *   - from the workload mix (mix.c): the stranding term's weight follows
 *     the mix's CPU intensity, and capacity taken on a scarce GPU model
 *     (one that type-constrained demand needs more than its share of the
 *     GPUs) counts as growth, so requests that could run anywhere leave it
 *     to the requests that cannot.
 * docs/benchmarks.md has the numbers.
 */
static bool eval_drover(const sched_env_t *env, const drv_sched_node_t *nd,
                        const drv_sched_request_t *req, sched_eval_t *ev)
{
    sched_cands_t c;
    if (!sched_candidates(nd, req, &c))
        return false;
    nfrag_tmp_t tmp;
    const sched_nfrag_t *nf = nfrag_of(env, nd, &tmp);
    const drv_sched_shapes_t *M = env->shapes;
    double beta = sched_mix_beta(env->mix);
    int64_t cpu = nd->cpu_millis - nd->used_cpu_millis - req->cpu_millis;
    int64_t mem = nd->memory_mib - nd->used_memory_mib - req->memory_mib;
    ev->s[1] = ev->s[2] = 0;
    if (c.need == 1 && !c.multi) {
        double best = -1, bleft = INFINITY;
        int bk = 0;
        for (int k = 0; k < c.n; k++) {
            if (k > 0 && c.whole[k] == c.whole[k - 1] &&
                same_gpu_state(&nd->gpus[c.idx[k]], &nd->gpus[c.idx[k - 1]]))
                continue;
            double s = fgd_score(nf->dfrag, measure_after(FLAVOUR_DROVER, M, nf, nd, req,
                                                          &c.idx[k], 1, c.whole[k], cpu, mem,
                                                          beta) +
                                                 scarcity_cost(env, nd, req, &c.idx[k], 1,
                                                               c.whole[k]));
            drv_sched_gpu_t a = nd->gpus[c.idx[k]];
            sched_gpu_after(&a, req, c.whole[k]);
            double left = sched_gpu_free_milli(&a);
            if (s > best || (s == best && left < bleft)) {
                best = s;
                bleft = left;
                bk = k;
            }
        }
        ev->n_gpus = 1;
        ev->gpus[0] = c.idx[bk];
        ev->whole = c.whole[bk];
        ev->s[0] = best;
        return true;
    }
    sched_take_first(&c, ev);
    ev->s[0] = fgd_score(nf->dfrag, measure_after(FLAVOUR_DROVER, M, nf, nd, req, ev->gpus,
                                                  ev->n_gpus, ev->whole, cpu, mem, beta) +
                                     scarcity_cost(env, nd, req, ev->gpus, ev->n_gpus, ev->whole));
    return true;
}

const struct drv_sched_scorer sched_fgd = {eval_fgd, 0};
const struct drv_sched_scorer sched_drover = {eval_drover, 0};
