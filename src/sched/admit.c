/* admit.c — job admission: one pass over the queue (priority with aging,
 * dominant-resource fair share, quotas, wait bounds, EASY backfill behind
 * a reserved head). The choice of preemption victims is in victims.c. See
 * admit.h.
 *
 * Costs: a pass sorts the queue once, picks each next job in O(users at
 * its priority), and places each job it considers with drv_gang_place
 * (O(nodes)). The reservation is counted in GPUs of the head's nodepools
 * (free now plus what running jobs free at their expected ends), not by
 * re-placing the head at each end: it can be early when fragmentation
 * keeps a counted GPU from the gang, and the next pass computes it again.
 */
#include "sched/admit.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/admit_int.h"
#include "sched/sched_int.h"

#define EPS ADMIT_EPS

const char *drv_admit_state_name(drv_admit_state_t s)
{
    static const char *const names[] = {"waiting", "admitted", "backfilled", "head",
                                        "blocked", "no_fit", "over_quota", "unschedulable"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

double sched_gang_gpus(const drv_gang_request_t *g)
{
    return g->workers * drv_gang_worker_gpus(&g->worker);
}

/* --- users and their shares ---------------------------------------------------- */

typedef struct uacc {
    const char *name;
    double gpu, cpu, mem, quota;
} uacc_t;

typedef struct users {
    uacc_t *v;           /* in the order first seen: every loop over users keeps it */
    size_t n, cap;
    uint32_t *slot;      /* open addressing on the name's hash: index into v + 1, 0 empty */
    size_t nslot;        /* a power of two, 4 * cap */
    double tot_gpu, tot_cpu, tot_mem;
} users_t;

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int users_rehash(users_t *u, size_t nslot)
{
    uint32_t *slot = calloc(nslot, sizeof *slot);
    if (!slot)
        return -1;
    for (size_t i = 0; i < u->n; i++) {
        size_t k = name_hash(u->v[i].name) & (nslot - 1);
        while (slot[k])
            k = (k + 1) & (nslot - 1);
        slot[k] = (uint32_t)(i + 1);
    }
    free(u->slot);
    u->slot = slot;
    u->nslot = nslot;
    return 0;
}

static uacc_t *user_get(users_t *u, const char *name)
{
    uint64_t h = name_hash(name);
    if (u->nslot) {
        for (size_t k = h & (u->nslot - 1); u->slot[k]; k = (k + 1) & (u->nslot - 1))
            if (strcmp(u->v[u->slot[k] - 1].name, name) == 0)
                return &u->v[u->slot[k] - 1];
    }
    if (u->n == u->cap) {
        size_t cap = u->cap ? 2 * u->cap : 16;
        if (cap > UINT32_MAX / 4)
            return NULL;
        uacc_t *v = realloc(u->v, cap * sizeof *v);
        if (!v)
            return NULL;
        u->v = v;
        u->cap = cap;
        if (users_rehash(u, 4 * cap) < 0)
            return NULL;
    }
    u->v[u->n] = (uacc_t){.name = name, .quota = -1};
    size_t k = h & (u->nslot - 1);
    while (u->slot[k])
        k = (k + 1) & (u->nslot - 1);
    u->slot[k] = (uint32_t)(u->n + 1);
    return &u->v[u->n++];
}

static void user_add(users_t *u, uacc_t *a, const drv_gang_request_t *g, double sign)
{
    (void)u;
    a->gpu += sign * sched_gang_gpus(g);
    a->cpu += sign * (double)g->workers * (double)g->worker.cpu_millis;
    a->mem += sign * (double)g->workers * (double)g->worker.memory_mib;
}

static double share(double used, double tot)
{
    return tot > 0 ? used / tot : 0;
}

static double dominant(const users_t *u, const uacc_t *a)
{
    double d = share(a->gpu, u->tot_gpu), c = share(a->cpu, u->tot_cpu), m = share(a->mem, u->tot_mem);
    if (c > d)
        d = c;
    return m > d ? m : d;
}

int drv_admit_effective_priority(const drv_admit_job_t *j, double now, double aging_seconds)
{
    if (!(aging_seconds > 0) || !(now > j->submit_time))
        return j->priority;
    double lv = floor((now - j->submit_time) / aging_seconds);
    double cap = (double)INT_MAX - (double)j->priority;
    return lv >= cap ? INT_MAX : j->priority + (int)lv;
}

/* --- the order ------------------------------------------------------------------ */

static const drv_admit_job_t *sort_q;
static const int *sort_prio;    /* effective priorities, by queue index */

static int by_fifo(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    if (sort_q[a].submit_time != sort_q[b].submit_time)
        return sort_q[a].submit_time < sort_q[b].submit_time ? -1 : 1;
    return (a > b) - (a < b);
}

/* priority desc, user, submit asc, index */
static int by_level_user(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    if (sort_prio[a] != sort_prio[b])
        return sort_prio[a] > sort_prio[b] ? -1 : 1;
    int c = strcmp(sort_q[a].user, sort_q[b].user);
    if (c)
        return c;
    return by_fifo(x, y);
}

/* --- GPUs of the head's nodepools --------------------------------------------------- */

static double gpu_units(const drv_sched_request_t *w, const drv_sched_gpu_t *g, bool whole_free)
{
    if (!g->healthy || !sched_type_ok(w, g) || w->gpu_memory_mib > g->memory_mib)
        return 0;
    if (whole_free)
        return g->shares == 0 ? 1 : 0;
    return g->exclusive ? 0 : (100 - g->used_compute) / 100.0;
}

double sched_free_gpus(const drv_sched_node_t *nodes, size_t n, const drv_gang_request_t *g)
{
    bool whole = drv_gang_worker_gpus(&g->worker) >= 1;
    double f = 0;
    for (size_t i = 0; i < n; i++)
        if (drv_gang_node_rank(g, &nodes[i]) >= 0)
            for (int k = 0; k < nodes[i].n_gpus; k++)
                f += gpu_units(&g->worker, &nodes[i].gpus[k], whole);
    return f;
}

/* GPUs a placement holds on nodes (and of types) that gang g could use. */
double sched_held_for(const drv_sched_node_t *nodes, const drv_gang_request_t *job,
                      const drv_sched_choice_t *ranks, const drv_gang_request_t *g)
{
    double h = 0;
    for (int r = 0; r < job->workers; r++) {
        const drv_sched_node_t *nd = &nodes[ranks[r].node];
        if (drv_gang_node_rank(g, nd) < 0)
            continue;
        for (int k = 0; k < ranks[r].n_gpus; k++) {
            const drv_sched_gpu_t *gp = &nd->gpus[ranks[r].gpus[k]];
            if (gp->healthy && sched_type_ok(&g->worker, gp))
                h += ranks[r].whole ? 1 : ranks[r].compute_percent / 100.0;
        }
    }
    return h;
}

typedef struct ending {
    double at, gpus;
} ending_t;

static int by_end(const void *x, const void *y)
{
    const ending_t *a = x, *b = y;
    return (a->at > b->at) - (a->at < b->at);
}

static double known_end(double t)
{
    return t > 0 && isfinite(t) ? t : INFINITY;
}

/* The head's reservation and the GPUs it leaves spare then (*extra). */
static int reservation(const drv_sched_node_t *nodes, size_t n, const drv_admit_input_t *in,
                       const drv_admit_result_t *out, const drv_admit_job_t *head, double *at,
                       double *extra)
{
    size_t ne = in->n_running + out->n_admitted, k = 0;
    ending_t *e = malloc(sizeof *e * (ne ? ne : 1));
    if (!e)
        return -1;
    for (size_t i = 0; i < in->n_running; i++) {
        const drv_admit_running_t *r = &in->running[i];
        e[k++] = (ending_t){known_end(r->expected_end),
                            sched_held_for(nodes, &r->gang, r->ranks, &head->gang)};
    }
    for (size_t i = 0; i < in->n_queue; i++) {
        const drv_admit_verdict_t *v = &out->jobs[i];
        if (v->ranks)
            e[k++] = (ending_t){known_end(in->queue[i].duration > 0 ? in->now + in->queue[i].duration : 0),
                                sched_held_for(nodes, &in->queue[i].gang, v->ranks,
                                               &head->gang)};
    }
    qsort(e, k, sizeof *e, by_end);
    double need = sched_gang_gpus(&head->gang), have = sched_free_gpus(nodes, n, &head->gang);
    *at = have + EPS >= need ? in->now : INFINITY;
    for (size_t i = 0; i < k && *at == INFINITY && isfinite(e[i].at); i++) {
        have += e[i].gpus;
        if (have + EPS >= need)
            *at = e[i].at;
    }
    *extra = isfinite(*at) ? have - need : 0;
    free(e);
    return 0;
}

/* A queued job's earliest start if it were reserved now: its GPUs free on
 * the snapshot plus what running jobs free at their expected ends
 * (INFINITY when that needs a job with no expected end). */
static int earliest_start(const drv_sched_node_t *nodes, size_t n, const drv_admit_input_t *in,
                          const drv_admit_job_t *j, ending_t *e, double *at)
{
    double need = sched_gang_gpus(&j->gang), have = sched_free_gpus(nodes, n, &j->gang);
    *at = in->now;
    if (have + EPS >= need)
        return 0;
    size_t k = 0;
    for (size_t i = 0; i < in->n_running; i++) {
        const drv_admit_running_t *r = &in->running[i];
        e[k++] = (ending_t){known_end(r->expected_end),
                            sched_held_for(nodes, &r->gang, r->ranks, &j->gang)};
    }
    qsort(e, k, sizeof *e, by_end);
    *at = INFINITY;
    for (size_t i = 0; i < k && isfinite(e[i].at); i++) {
        have += e[i].gpus;
        if (have + EPS >= need) {
            *at = e[i].at > in->now ? e[i].at : in->now;
            break;
        }
    }
    return 0;
}

/* Due jobs: earliest deadline, then submit time, then queue index. */
static int by_deadline(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    if (sort_q[a].wait_deadline != sort_q[b].wait_deadline)
        return sort_q[a].wait_deadline < sort_q[b].wait_deadline ? -1 : 1;
    return by_fifo(x, y);
}

static bool has_deadline(const drv_admit_job_t *j)
{
    return j->wait_deadline > 0 && isfinite(j->wait_deadline);
}

/* A due head's reservation by placement, not by count: on a copy of the
 * snapshot (work), release the running and just admitted jobs in order of
 * expected end and place the whole gang after each (from the first end at
 * which the count suffices; at most SHAPED_TRIES placements). *at = the
 * first end at which it places (INFINITY: none within the tries) and
 * ranks = where, on work then (which keeps that state). A 2 x 8-GPU gang
 * needs two whole nodes, which a count of free GPUs does not see. */
#define SHAPED_TRIES 64

typedef struct rel {
    double at;
    const drv_gang_request_t *gang;
    const drv_sched_choice_t *ranks;
} rel_t;

static int by_rel(const void *x, const void *y)
{
    const rel_t *a = x, *b = y;
    return (a->at > b->at) - (a->at < b->at);
}

static int shaped_reservation(const drv_sched_node_t *nodes, size_t n, const drv_admit_input_t *in,
                              const drv_admit_result_t *out, const drv_admit_job_t *head,
                              drv_sched_node_t *work, drv_sched_choice_t *ranks, double *at)
{
    size_t ne = in->n_running + out->n_admitted, k = 0;
    rel_t *e = malloc(sizeof *e * (ne ? ne : 1));
    if (!e)
        return -1;
    for (size_t i = 0; i < in->n_running; i++)
        e[k++] = (rel_t){known_end(in->running[i].expected_end), &in->running[i].gang,
                         in->running[i].ranks};
    for (size_t i = 0; i < in->n_queue; i++)
        if (out->jobs[i].ranks)
            e[k++] = (rel_t){known_end(in->queue[i].duration > 0 ? in->now + in->queue[i].duration : 0),
                             &in->queue[i].gang, out->jobs[i].ranks};
    qsort(e, k, sizeof *e, by_rel);
    memcpy(work, nodes, sizeof *work * n);
    drv_gang_placement_t p = {.ranks = ranks};
    double need = sched_gang_gpus(&head->gang), have = sched_free_gpus(work, n, &head->gang);
    int tries = 0;
    *at = INFINITY;
    for (size_t i = 0; i < k && isfinite(e[i].at) && tries < SHAPED_TRIES; i++) {
        have += sched_held_for(nodes, e[i].gang, e[i].ranks, &head->gang);
        drv_gang_release(work, e[i].gang, e[i].ranks);
        if (i + 1 < k && e[i + 1].at == e[i].at)
            continue;           /* everything that ends then first */
        if (have + EPS < need)
            continue;
        tries++;
        if (drv_gang_place(work, n, &head->gang, in->policy, &p, NULL, 0) == 0) {
            *at = e[i].at > in->now ? e[i].at : in->now;
            break;
        }
    }
    free(e);
    return 0;
}

/* Would the gang fit on its nodepools' nodes if they were empty? */
static bool ever_fits(const drv_sched_node_t *nodes, size_t n, const drv_gang_request_t *g)
{
    int64_t sum = 0;
    for (size_t i = 0; i < n && sum < g->workers; i++) {
        if (drv_gang_node_rank(g, &nodes[i]) < 0)
            continue;
        drv_sched_node_t e = nodes[i];
        e.used_cpu_millis = e.used_memory_mib = 0;
        for (int k = 0; k < e.n_gpus; k++) {
            e.gpus[k].used_memory_mib = e.gpus[k].used_compute = e.gpus[k].shares = 0;
            e.gpus[k].exclusive = false;
        }
        sum += drv_gang_node_capacity(&e, &g->worker, g->workers);
    }
    return sum >= g->workers;
}

/* --- a cheap bound: could the gang fit at all on what is free? ------------------ */

/* Per node: GPUs a worker could use at all (healthy, not held whole) and
 * of those the ones wholly free; hist[k] = nodes with k wholly free. A gang
 * of W workers of g >= 2 GPUs needs sum floor(free_k / g) >= W; one of
 * 1-GPU workers needs at least one usable GPU (shares may stack). A
 * necessary condition only: drv_gang_place decides, this skips the jobs
 * that cannot fit (most of a long queue on a full cluster) in O(64). */
typedef struct freecnt {
    unsigned char *whole, *usable; /* per node */
    int64_t hist[DRV_SCHED_MAX_GPUS + 1];
    int64_t usable_total;
} freecnt_t;

static void fc_node(freecnt_t *fc, const drv_sched_node_t *nd, size_t i, int sign)
{
    if (sign < 0) {
        fc->hist[fc->whole[i]]--;
        fc->usable_total -= fc->usable[i];
        return;
    }
    int w = 0, u = 0;
    if (nd->schedulable && nd->pool >= 0)
        for (int k = 0; k < nd->n_gpus; k++)
            if (nd->gpus[k].healthy && !nd->gpus[k].exclusive) {
                u++;
                w += nd->gpus[k].shares == 0;
            }
    fc->whole[i] = (unsigned char)w;
    fc->usable[i] = (unsigned char)u;
    fc->hist[w]++;
    fc->usable_total += u;
}

static bool fc_may_fit(const freecnt_t *fc, const drv_gang_request_t *g)
{
    int need = g->worker.gpu_count;
    if (need <= 0)
        return true;
    if (need == 1)
        return fc->usable_total >= 1;
    int64_t slots = 0;
    for (int k = need; k <= DRV_SCHED_MAX_GPUS && slots < g->workers; k++)
        slots += fc->hist[k] * (k / need);
    return slots >= g->workers;
}

static void fc_update(freecnt_t *fc, const drv_sched_node_t *nodes, const drv_gang_request_t *g,
                      const drv_sched_choice_t *ranks)
{
    for (int r = 0; r < g->workers; r++) {
        size_t i = ranks[r].node;
        bool seen = false;
        for (int q = 0; q < r && !seen; q++)
            seen = ranks[q].node == ranks[r].node;
        if (!seen) {
            fc_node(fc, &nodes[i], i, -1);
            fc_node(fc, &nodes[i], i, 1);
        }
    }
}

/* Behind the head, is a job blocked wherever it would be placed? When it
 * would not end by the reservation and either there is no reservation or
 * the head can use every node and GPU type (then it would take exactly
 * its own GPUs from what the head needs) and that is more than the head
 * leaves spare. Saves placing, on every pass, the many jobs a reservation
 * holds back. Such a job may also not fit now; it is reported blocked. */
static bool blocked_unplaced(const drv_admit_input_t *in, const drv_admit_job_t *j,
                             const drv_admit_job_t *head, double reservation, double extra)
{
    double end = j->duration > 0 ? in->now + j->duration : INFINITY;
    if (isfinite(reservation) && end <= reservation + EPS)
        return false;
    if (!isfinite(reservation))
        return true;
    bool any = !head->gang.pool_rank && head->gang.worker.n_gpu_types == 0;
    return any && sched_gang_gpus(&j->gang) > extra + EPS;
}

/* Run r's cursor past the jobs already taken as due; its new value. */
static size_t skip_taken(size_t *cur, const size_t *lvl_end, const size_t *idx, const bool *taken,
                         size_t r)
{
    while (cur[r] < lvl_end[r] && taken[idx[cur[r]]])
        cur[r]++;
    return cur[r];
}

/* reserve_due: job j, due, behind the head, does not start now: find its
 * reservation by placement on blk (the snapshot that holds the head's and
 * the earlier ones) and hold it there, so backfill goes around it too. tmp
 * and rk are scratch (n nodes, j's workers). *resv_min: the earliest. */
static int reserve_behind(drv_sched_node_t *blk, size_t n, const drv_admit_input_t *in,
                          const drv_admit_result_t *out, const drv_admit_job_t *j,
                          drv_sched_node_t *tmp, drv_sched_choice_t *rk, double *resv_min,
                          drv_admit_verdict_t *v)
{
    double at;
    if (shaped_reservation(blk, n, in, out, j, tmp, rk, &at) < 0)
        return -1;
    if (!isfinite(at))
        return 0;
    drv_gang_commit(blk, &j->gang, rk);
    if (at < *resv_min)
        *resv_min = at;
    size_t l = strlen(v->why);
    snprintf(v->why + l, sizeof v->why - l, "%sdue, reserved from t=%.0f", l ? "; " : "", at);
    return 0;
}

/* --- the pass ----------------------------------------------------------------------- */

static int place_reserves(drv_sched_node_t *nodes, size_t n, const drv_admit_input_t *in,
                          drv_admit_result_t *out)
{
    for (size_t i = 0; i < in->n_reserve; i++) {
        drv_gang_request_t one = in->reserve[i].replicas;
        int owed = one.workers;
        one.workers = 1;
        for (int k = 0; k < owed; k++) {
            drv_sched_choice_t c;
            drv_gang_placement_t p = {.ranks = &c};
            if (drv_gang_place(nodes, n, &one, in->policy, &p, NULL, 0) == 0)
                drv_gang_commit(nodes, &one, &c);
            else
                out->reserve_unplaced++;
        }
    }
    return 0;
}

static int check_input(const drv_admit_input_t *in, drv_error_t *err)
{
    for (size_t i = 0; i < in->n_queue; i++) {
        const drv_admit_job_t *j = &in->queue[i];
        if (!j->user)
            return drv_err_invalid(err, "user", "job %s: no user", j->id ? j->id : "?");
        if (j->gang.workers < 1 || j->gang.workers > DRV_GANG_MAX_WORKERS)
            return drv_err_invalid(err, "workers", "job %s: workers must be 1 to %d, not %d",
                                   j->id ? j->id : "?", DRV_GANG_MAX_WORKERS, j->gang.workers);
    }
    for (size_t i = 0; i < in->n_running; i++)
        if (!in->running[i].user || !in->running[i].ranks)
            return drv_err_invalid(err, "running", "running job %s: no user or placement",
                                   in->running[i].id ? in->running[i].id : "?");
    return 0;
}

int drv_admit(drv_sched_node_t *nodes, size_t n, const drv_admit_input_t *in,
              drv_admit_result_t *out, drv_error_t *err)
{
    memset(out, 0, sizeof *out);
    out->head = -1;
    out->reservation = INFINITY;
    if (check_input(in, err) < 0)
        return -1;
    int rc = -1;
    users_t u = {0};
    size_t *idx = NULL, *lvl_end = NULL, *cur = NULL;
    int *eprio = NULL;
    bool *taken = NULL;
    size_t *dueq = NULL, n_due = 0;
    ending_t *ends = NULL;
    drv_sched_node_t *blk = NULL;   /* a due head's reservation: nodes + its GPUs then */
    drv_sched_choice_t *hranks = NULL;
    freecnt_t fc = {0};
    drv_sched_choice_t *scratch = NULL;
    drv_sched_node_t *rtmp = NULL;  /* reserve_due: scratch snapshot */
    drv_sched_choice_t *rrk = NULL; /* and ranks */
    double resv_min = INFINITY;     /* the earliest reservation held on blk */
    sched_edf_t *edf = NULL;
    out->jobs = calloc(in->n_queue ? in->n_queue : 1, sizeof *out->jobs);
    idx = malloc(sizeof *idx * (in->n_queue ? in->n_queue : 1));
    eprio = malloc(sizeof *eprio * (in->n_queue ? in->n_queue : 1));
    int maxw = 1;
    for (size_t i = 0; i < in->n_queue; i++)
        if (in->queue[i].gang.workers > maxw)
            maxw = in->queue[i].gang.workers;
    scratch = malloc(sizeof *scratch * (size_t)maxw);
    if (!out->jobs || !idx || !eprio || !scratch)
        goto oom;
    if (in->edf_guard && !(edf = sched_edf_create(n, in)))
        goto oom;
    if (in->reserve_due && (!(rtmp = malloc(sizeof *rtmp * (n ? n : 1))) ||
                            !(rrk = malloc(sizeof *rrk * (size_t)maxw))))
        goto oom;
    out->n_jobs = in->n_queue;
    for (size_t i = 0; i < n; i++) {
        if (!nodes[i].schedulable)
            continue;
        for (int k = 0; k < nodes[i].n_gpus; k++)
            u.tot_gpu += nodes[i].gpus[k].healthy;
        u.tot_cpu += (double)nodes[i].cpu_millis;
        u.tot_mem += (double)nodes[i].memory_mib;
    }
    for (size_t i = 0; i < in->n_users; i++) {
        uacc_t *a = user_get(&u, in->users[i].name);
        if (!a)
            goto oom;
        a->quota = in->users[i].gpu_quota;
    }
    for (size_t i = 0; i < in->n_running; i++) {
        uacc_t *a = user_get(&u, in->running[i].user);
        if (!a)
            goto oom;
        user_add(&u, a, &in->running[i].gang, 1);
    }
    for (size_t i = 0; i < in->n_queue; i++) {
        if (!user_get(&u, in->queue[i].user))
            goto oom;
        out->jobs[i].position = -1;
    }
    place_reserves(nodes, n, in, out);
    fc.whole = malloc(n ? n : 1);
    fc.usable = malloc(n ? n : 1);
    if (!fc.whole || !fc.usable)
        goto oom;
    for (size_t i = 0; i < n; i++)
        fc_node(&fc, &nodes[i], i, 1);

    /* due jobs (near their wait bound) first, earliest deadline first */
    taken = calloc(in->n_queue ? in->n_queue : 1, sizeof *taken);
    dueq = malloc(sizeof *dueq * (in->n_queue ? in->n_queue : 1));
    ends = malloc(sizeof *ends * (in->n_running ? in->n_running : 1));
    if (!taken || !dueq || !ends)
        goto oom;
    for (size_t i = 0; i < in->n_queue; i++) {
        const drv_admit_job_t *j = &in->queue[i];
        if (!has_deadline(j))
            continue;
        double at = in->now;
        if (in->sticky_due && j->was_due)
            at = j->wait_deadline;
        else if (in->now < j->wait_deadline - in->wait_margin)
            earliest_start(nodes, n, in, j, ends, &at);
        if (at < j->wait_deadline - in->wait_margin &&
            (j->gang.workers > 1 || j->gang.worker.gpu_count > 1)) {
            /* the count can be early for a gang that needs whole nodes */
            if (!blk && !(blk = malloc(sizeof *blk * (n ? n : 1))))
                goto oom;
            drv_sched_choice_t *rk = malloc(sizeof *rk * (size_t)j->gang.workers);
            if (!rk || shaped_reservation(nodes, n, in, out, j, blk, rk, &at) < 0) {
                free(rk);
                goto oom;
            }
            free(rk);
        }
        if (at >= j->wait_deadline - in->wait_margin) {
            taken[i] = true;
            out->jobs[i].due = true;
            dueq[n_due++] = i;
        }
    }
    sort_q = in->queue;
    qsort(dueq, n_due, sizeof *dueq, by_deadline);
    free(blk);
    blk = NULL;

    /* the order: FIFO, or levels of priority, users within a level */
    for (size_t i = 0; i < in->n_queue; i++) {
        idx[i] = i;
        eprio[i] = in->order == DRV_ADMIT_FIFO ? in->queue[i].priority
                   : drv_admit_effective_priority(&in->queue[i], in->now, in->aging_seconds);
    }
    sort_q = in->queue;
    sort_prio = eprio;
    qsort(idx, in->n_queue, sizeof *idx, in->order == DRV_ADMIT_FIFO ? by_fifo : by_level_user);
    /* per user run within a level: [start, end) and a cursor */
    lvl_end = malloc(sizeof *lvl_end * (in->n_queue ? in->n_queue : 1));
    cur = malloc(sizeof *cur * (in->n_queue ? in->n_queue : 1));
    if (!lvl_end || !cur)
        goto oom;
    size_t runs = 0;            /* run r: cur[r] .. lvl_end[r] */
    for (size_t i = 0; i < in->n_queue; i++)
        if (i == 0 || in->order == DRV_ADMIT_FIFO ||
            eprio[idx[i]] != eprio[idx[i - 1]] ||
            strcmp(in->queue[idx[i]].user, in->queue[idx[i - 1]].user) != 0) {
            if (runs)
                lvl_end[runs - 1] = i;
            cur[runs++] = i;
        }
    if (runs)
        lvl_end[runs - 1] = in->n_queue;

    double extra = 0;
    const drv_admit_job_t *head = NULL;
    size_t r0 = 0;              /* first run with jobs left */
    for (int pos = 0; pos < (int)in->n_queue; pos++) {
        size_t qi;
        if ((size_t)pos < n_due) {
            qi = dueq[pos];
            goto picked;
        }
        while (r0 < runs && skip_taken(cur, lvl_end, idx, taken, r0) == lvl_end[r0])
            r0++;
        /* the run to take from: within r0's priority level, the smallest share */
        size_t best = r0;
        if (in->order != DRV_ADMIT_FIFO) {
            int prio = eprio[idx[cur[r0]]];
            double bd = INFINITY, bg = INFINITY, bt = INFINITY;
            for (size_t r = r0; r < runs; r++) {
                if (skip_taken(cur, lvl_end, idx, taken, r) == lvl_end[r])
                    continue;
                const drv_admit_job_t *j = &in->queue[idx[cur[r]]];
                if (eprio[idx[cur[r]]] != prio)
                    break;
                const uacc_t *a = user_get(&u, j->user);
                double d = dominant(&u, a), g = share(a->gpu, u.tot_gpu);
                if (d < bd - EPS || (fabs(d - bd) <= EPS && (g < bg - EPS ||
                                     (fabs(g - bg) <= EPS && j->submit_time < bt)))) {
                    best = r;
                    bd = d;
                    bg = g;
                    bt = j->submit_time;
                }
            }
        }
        qi = idx[cur[best]++];
    picked:;
        const drv_admit_job_t *j = &in->queue[qi];
        drv_admit_verdict_t *v = &out->jobs[qi];
        v->position = pos;
        uacc_t *a = user_get(&u, j->user);
        double gpus = sched_gang_gpus(&j->gang);
        if (a->quota >= 0 && a->gpu + gpus > a->quota + EPS) {
            v->state = DRV_JOB_OVER_QUOTA;
            snprintf(v->why, sizeof v->why, "user %s holds %g GPUs; %g more would pass the quota of %g",
                     j->user, a->gpu, gpus, a->quota);
            continue;
        }
        if (head && !in->backfill) {
            v->state = DRV_JOB_WAITING;
            snprintf(v->why, sizeof v->why, "waits behind job %s", head->id ? head->id : "?");
            continue;
        }
        drv_gang_placement_t p = {.ranks = scratch};
        bool may = !head || fc_may_fit(&fc, &j->gang); /* the head: its reason */
        if (!may) {
            char what[96];
            drv_gang_describe(&j->gang, what, sizeof what);
            snprintf(v->why, sizeof v->why, "needs %s; not enough free GPUs now", what);
        }
        if (may && head && !blk && blocked_unplaced(in, j, head, out->reservation, extra)) {
            /* it would delay the head wherever it went: not worth placing */
            v->state = DRV_JOB_BLOCKED;
            snprintf(v->why, sizeof v->why, "would delay job %s past its reservation",
                     head->id ? head->id : "?");
            continue;
        }
        bool around = blk && !(j->duration > 0 && in->now + j->duration <= resv_min + EPS);
        if (around && may &&
            drv_gang_place(blk, n, &j->gang, in->policy, &p, v->why, sizeof v->why) < 0) {
            /* fits only on GPUs the due head holds from its reservation */
            if (drv_gang_place(nodes, n, &j->gang, in->policy, &p, NULL, 0) == 0) {
                v->state = DRV_JOB_BLOCKED;
                snprintf(v->why, sizeof v->why, "would delay job %s past its reservation",
                         head->id ? head->id : "?");
                if (in->reserve_due && v->due &&
                    reserve_behind(blk, n, in, out, j, rtmp, rrk, &resv_min, v) < 0)
                    goto oom;
                continue;
            }
            may = false;
        }
        if (!may || (!around && drv_gang_place(nodes, n, &j->gang, in->policy, &p, v->why,
                                               sizeof v->why) < 0)) {
            if (!ever_fits(nodes, n, &j->gang)) {
                v->state = DRV_JOB_UNSCHEDULABLE;
                continue;
            }
            if (head) {
                v->state = DRV_JOB_NO_FIT;
                if (in->reserve_due && v->due && blk &&
                    reserve_behind(blk, n, in, out, j, rtmp, rrk, &resv_min, v) < 0)
                    goto oom;
                continue;
            }
            head = j;
            out->head = (int)qi;
            v->state = DRV_JOB_HEAD;
            if (reservation(nodes, n, in, out, j, &out->reservation, &extra) < 0)
                goto oom;
            if ((v->due || (in->shape_bounded && has_deadline(j))) && isfinite(out->reservation)) {
                /* reserved by placement: backfill places around its GPUs then.
                 * A due head with no placement within the tries gets no
                 * reservation (nothing backfills); a head not yet due keeps
                 * the count's */
                double counted = out->reservation;
                if (!blk)
                    blk = malloc(sizeof *blk * (n ? n : 1));
                hranks = malloc(sizeof *hranks * (size_t)j->gang.workers);
                if (!blk || !hranks ||
                    shaped_reservation(nodes, n, in, out, j, blk, hranks, &out->reservation) < 0)
                    goto oom;
                memcpy(blk, nodes, sizeof *blk * n);
                if (isfinite(out->reservation)) {
                    drv_gang_commit(blk, &j->gang, hranks);
                    resv_min = out->reservation;
                }
                else {
                    free(blk);
                    blk = NULL;
                    if (!v->due)
                        out->reservation = counted;
                }
            }
            size_t l = strlen(v->why);
            if (isfinite(out->reservation))
                snprintf(v->why + l, sizeof v->why - l, "; reserved from t=%.0f", out->reservation);
            else
                snprintf(v->why + l, sizeof v->why - l, "; no reservation (a running job has no "
                         "expected end)");
            l = strlen(v->why);
            if (v->due)
                snprintf(v->why + l, sizeof v->why - l, "; due by its wait bound t=%.0f",
                         j->wait_deadline);
            continue;
        }
        bool backfill = head != NULL;
        double took = 0;            /* of extra, given back when the guard holds it */
        if (backfill && !blk) {
            double end = j->duration > 0 ? in->now + j->duration : INFINITY;
            double take = sched_held_for(nodes, &j->gang, scratch, &head->gang);
            if (!(isfinite(out->reservation) && end <= out->reservation + EPS)) {
                if (!isfinite(out->reservation) || take > extra + EPS) {
                    v->state = DRV_JOB_BLOCKED;
                    snprintf(v->why, sizeof v->why, "would delay job %s past its reservation",
                             head->id ? head->id : "?");
                    continue;
                }
                extra -= take;
                took = take;
            }
        }
        size_t missed;
        if (edf && sched_edf_holds(edf, nodes, in, out, qi, scratch, &missed) == 1) {
            /* it could not be taken back, and a bound that comes first needs its room */
            v->state = DRV_JOB_BLOCKED;
            extra += took;
            const drv_admit_job_t *m = &in->queue[missed];
            snprintf(v->why, sizeof v->why, "held: would make job %s miss its wait bound t=%.0f",
                     m->id ? m->id : "?", m->wait_deadline);
            continue;
        }
        v->ranks = malloc(sizeof *v->ranks * (size_t)j->gang.workers);
        if (!v->ranks)
            goto oom;
        memcpy(v->ranks, scratch, sizeof *v->ranks * (size_t)j->gang.workers);
        drv_gang_commit(nodes, &j->gang, v->ranks);
        if (blk)
            drv_gang_commit(blk, &j->gang, v->ranks);
        fc_update(&fc, nodes, &j->gang, v->ranks);
        user_add(&u, a, &j->gang, 1);
        v->state = backfill ? DRV_JOB_BACKFILLED : DRV_JOB_ADMITTED;
        v->why[0] = '\0';
        out->n_admitted++;
    }
    rc = 0;
    goto done;
oom:
    drv_err_internal(err, "out of memory in admission");
done:
    if (rc < 0)
        drv_admit_result_free(out);
    free(u.v);
    free(u.slot);
    free(idx);
    free(eprio);
    free(taken);
    free(dueq);
    free(blk);
    free(hranks);
    free(ends);
    free(fc.whole);
    free(fc.usable);
    free(lvl_end);
    free(cur);
    free(scratch);
    free(rtmp);
    free(rrk);
    sched_edf_destroy(edf);
    return rc;
}

void drv_admit_result_free(drv_admit_result_t *r)
{
    for (size_t i = 0; r->jobs && i < r->n_jobs; i++)
        free(r->jobs[i].ranks);
    free(r->jobs);
    memset(r, 0, sizeof *r);
}
