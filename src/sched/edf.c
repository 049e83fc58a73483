/* edf.c — the EDF guard of admission (drv_admit_input_t.edf_guard): before
 * a pass starts work that no due job could preempt (a job that is not
 * preemptible, or one that starts so near its wait bound that it is never
 * a victim, drv_admit_victim_priority), an earliest-deadline-first
 * feasibility test over the queued jobs with wait bounds says whether
 * starting it makes some earlier bound impossible to meet. See admit.h.
 *
 * The test, for a candidate X placed at ranks: the "pinned" snapshot keeps
 * only what a due job could not take back (deployments' capacity, running
 * and just admitted jobs that are not preemptible or are protected); the
 * queued jobs with a bound earlier than X's (and than X's expected end)
 * are placed on it one by one in deadline order, each at its bound: the
 * pinned work that has ended by then released, the jobs placed before it
 * held until their own ends (they start protected). A job that does not
 * place misses. X is held when more jobs miss with X than without it.
 *
 * Costs: nothing for a preemptible X that starts far from its bound, or
 * when no queued bound is earlier than X's end; else three copies of the
 * snapshot and one or two placements per job tested (with X, and without
 * it). On in droverd and drover-sim (docs/benchmarks.md, "The EDF guard,
 * tried, then adopted").
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/admit_int.h"

typedef struct pinned {
    double end;
    const drv_gang_request_t *gang;
    const drv_sched_choice_t *ranks;
} pinned_t;

struct sched_edf {
    size_t n;
    drv_sched_node_t *base, *work; /* n nodes each */
    pinned_t *pin;              /* running + queue + 1 (X) */
    size_t *cand;               /* queue indices, in deadline order */
    drv_sched_choice_t *ranks;  /* the candidates' placements: ranks + roff[c]; */
    size_t *roff;               /* ranks[roff[c]].node < 0: not held */
    size_t nranks;              /* every queued job's workers */
};

static bool bounded(const drv_admit_job_t *j)
{
    return j->wait_deadline > 0 && isfinite(j->wait_deadline);
}

bool sched_edf_pinned(const drv_admit_job_t *j, double now, double wait_margin)
{
    return !j->preemptible ||
           drv_admit_victim_priority(0, bounded(j), j->wait_deadline - now, wait_margin) == INT_MAX;
}

sched_edf_t *sched_edf_create(size_t n, const drv_admit_input_t *in)
{
    sched_edf_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->n = n;
    size_t nq = in->n_queue ? in->n_queue : 1;
    for (size_t i = 0; i < in->n_queue; i++)
        e->nranks += (size_t)in->queue[i].gang.workers;
    e->base = malloc(sizeof *e->base * (n ? n : 1));
    e->work = malloc(sizeof *e->work * (n ? n : 1));
    e->pin = malloc(sizeof *e->pin * (in->n_running + nq + 1));
    e->cand = malloc(sizeof *e->cand * nq);
    e->roff = malloc(sizeof *e->roff * nq);
    e->ranks = malloc(sizeof *e->ranks * (e->nranks ? e->nranks : 1));
    if (!e->base || !e->work || !e->pin || !e->cand || !e->roff || !e->ranks) {
        sched_edf_destroy(e);
        return NULL;
    }
    return e;
}

void sched_edf_destroy(sched_edf_t *e)
{
    if (!e)
        return;
    free(e->base);
    free(e->work);
    free(e->pin);
    free(e->cand);
    free(e->roff);
    free(e->ranks);
    free(e);
}

static const drv_admit_job_t *sort_q;

static int by_bound(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    double da = sort_q[a].wait_deadline, db = sort_q[b].wait_deadline;
    if (da != db)
        return da < db ? -1 : 1;
    if (sort_q[a].submit_time != sort_q[b].submit_time)
        return sort_q[a].submit_time < sort_q[b].submit_time ? -1 : 1;
    return (a > b) - (a < b);
}

static int by_pin_end(const void *x, const void *y)
{
    const pinned_t *a = x, *b = y;
    return (a->end > b->end) - (a->end < b->end);
}

static double end_of(double now, double duration)
{
    return duration > 0 ? now + duration : INFINITY;
}

/* The candidates placed in deadline order on e->work (a copy of e->base,
 * plus X when with_x); the number that do not place; *first: the first
 * of them (a queue index). pin[0..np) sorted by end. */
static size_t misses(sched_edf_t *e, const drv_admit_input_t *in, size_t nc, pinned_t *pin,
                     size_t np, size_t *first)
{
    memcpy(e->work, e->base, sizeof *e->work * e->n);
    for (size_t i = 0; i < np; i++)
        drv_gang_commit(e->work, pin[i].gang, pin[i].ranks);
    size_t miss = 0, p = 0;
    for (size_t c = 0; c < nc; c++) {
        const drv_admit_job_t *j = &in->queue[e->cand[c]];
        double at = j->wait_deadline;
        for (; p < np && pin[p].end <= at; p++)
            drv_gang_release(e->work, pin[p].gang, pin[p].ranks);
        for (size_t b = 0; b < c; b++) {
            const drv_admit_job_t *jb = &in->queue[e->cand[b]];
            drv_sched_choice_t *rb = e->ranks + e->roff[b];
            if (rb[0].node >= 0 && end_of(jb->wait_deadline, jb->duration) <= at) {
                drv_gang_release(e->work, &jb->gang, rb);
                rb[0].node = -1;
            }
        }
        drv_sched_choice_t *rk = e->ranks + e->roff[c];
        drv_gang_placement_t pl = {.ranks = rk};
        if (drv_gang_place(e->work, e->n, &j->gang, in->policy, &pl, NULL, 0) == 0) {
            drv_gang_commit(e->work, &j->gang, rk);
        } else {
            rk[0].node = -1;
            if (!miss++)
                *first = e->cand[c];
        }
    }
    return miss;
}

int sched_edf_holds(sched_edf_t *e, const drv_sched_node_t *nodes, const drv_admit_input_t *in,
                    const drv_admit_result_t *out, size_t qi, const drv_sched_choice_t *ranks,
                    size_t *missed)
{
    const drv_admit_job_t *x = &in->queue[qi];
    if (!sched_edf_pinned(x, in->now, in->wait_margin))
        return 0;
    double xend = end_of(in->now, x->duration), xd = bounded(x) ? x->wait_deadline : INFINITY;
    size_t nc = 0, off = 0;
    for (size_t i = 0; i < in->n_queue; i++) {
        const drv_admit_job_t *j = &in->queue[i];
        if (i == qi || out->jobs[i].ranks || !bounded(j) || j->wait_deadline >= xend ||
            j->wait_deadline >= xd || out->jobs[i].state == DRV_JOB_UNSCHEDULABLE)
            continue;
        e->cand[nc++] = i;
    }
    if (!nc)
        return 0;
    sort_q = in->queue;
    qsort(e->cand, nc, sizeof *e->cand, by_bound);
    for (size_t c = 0; c < nc; c++) {
        e->roff[c] = off;
        off += (size_t)in->queue[e->cand[c]].gang.workers;
    }
    /* the pinned snapshot: the running and just admitted work a due job
     * could not preempt stays; the rest goes; pin[] lists what stays */
    memcpy(e->base, nodes, sizeof *e->base * e->n);
    size_t np = 0;
    for (size_t i = 0; i < in->n_running; i++) {
        const drv_admit_running_t *r = &in->running[i];
        drv_gang_release(e->base, &r->gang, r->ranks);
        if (!r->preemptible || r->priority == INT_MAX)
            e->pin[np++] = (pinned_t){r->expected_end > 0 && isfinite(r->expected_end)
                                          ? r->expected_end : INFINITY,
                                      &r->gang, r->ranks};
    }
    for (size_t i = 0; i < in->n_queue; i++) {
        const drv_admit_job_t *j = &in->queue[i];
        if (!out->jobs[i].ranks)
            continue;
        drv_gang_release(e->base, &j->gang, out->jobs[i].ranks);
        if (sched_edf_pinned(j, in->now, in->wait_margin))
            e->pin[np++] = (pinned_t){end_of(in->now, j->duration), &j->gang, out->jobs[i].ranks};
    }
    qsort(e->pin, np, sizeof *e->pin, by_pin_end);
    size_t first = 0, first_without = 0;
    size_t without = misses(e, in, nc, e->pin, np, &first_without);
    /* with X: X joins the pinned work, in end order */
    size_t at = np;
    while (at > 0 && e->pin[at - 1].end > xend) {
        e->pin[at] = e->pin[at - 1];
        at--;
    }
    e->pin[at] = (pinned_t){xend, &x->gang, ranks};
    size_t with = misses(e, in, nc, e->pin, np + 1, &first);
    if (with <= without)
        return 0;
    *missed = first;
    return 1;
}
