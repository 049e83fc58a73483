/* shadow.c — the online FIFO shadow behind the jobs' wait bounds. See
 * shadow.h. Costs: a submission releases the shadow jobs that ended by
 * its candidate start and tries drv_gang_place once per distinct end it
 * has to wait for (O(nodes) each); the shadow holds only jobs not yet
 * ended at the last start. */
#include "sched/shadow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct sjob {
    double end;                 /* INFINITY: no estimate */
    drv_gang_request_t gang;    /* pointers cleared: release needs none */
    drv_sched_choice_t *ranks;
} sjob_t;

struct drv_fifo_shadow {
    drv_sched_node_t *nodes;
    size_t n;
    const drv_place_policy_t *policy;
    sjob_t *v;
    size_t nv, cap;
    double last_start;
    drv_sched_choice_t *scratch;
    int scratch_cap;
};

drv_fifo_shadow_t *drv_fifo_shadow_create(const drv_sched_node_t *nodes, size_t n,
                                          const drv_place_policy_t *policy, drv_error_t *err)
{
    drv_fifo_shadow_t *sh = calloc(1, sizeof *sh);
    if (sh)
        sh->nodes = malloc(sizeof *sh->nodes * (n ? n : 1));
    if (!sh || !sh->nodes) {
        free(sh);
        drv_err_internal(err, "out of memory creating the FIFO shadow");
        return NULL;
    }
    memcpy(sh->nodes, nodes, sizeof *nodes * n);
    sh->n = n;
    sh->policy = policy;
    sh->last_start = -INFINITY;
    return sh;
}

void drv_fifo_shadow_destroy(drv_fifo_shadow_t *sh)
{
    if (!sh)
        return;
    for (size_t i = 0; i < sh->nv; i++)
        free(sh->v[i].ranks);
    free(sh->v);
    free(sh->nodes);
    free(sh->scratch);
    free(sh);
}

/* Release every shadow job ended by t. */
static void release_until(drv_fifo_shadow_t *sh, double t)
{
    size_t k = 0;
    for (size_t i = 0; i < sh->nv; i++) {
        if (sh->v[i].end <= t) {
            drv_gang_release(sh->nodes, &sh->v[i].gang, sh->v[i].ranks);
            free(sh->v[i].ranks);
        } else {
            sh->v[k++] = sh->v[i];
        }
    }
    sh->nv = k;
}

static double next_end(const drv_fifo_shadow_t *sh)
{
    double e = INFINITY;
    for (size_t i = 0; i < sh->nv; i++)
        if (sh->v[i].end < e)
            e = sh->v[i].end;
    return e;
}

int drv_fifo_shadow_submit(drv_fifo_shadow_t *sh, double submit, const drv_gang_request_t *gang,
                           double est_duration, double *start, drv_error_t *err)
{
    *start = INFINITY;
    if (gang->workers < 1 || gang->workers > DRV_GANG_MAX_WORKERS)
        return drv_err_invalid(err, "workers", "a gang has 1 to %d workers, not %d",
                               DRV_GANG_MAX_WORKERS, gang->workers);
    if (gang->workers > sh->scratch_cap) {
        drv_sched_choice_t *s = realloc(sh->scratch, sizeof *s * (size_t)gang->workers);
        if (!s)
            return drv_err_internal(err, "out of memory in the FIFO shadow");
        sh->scratch = s;
        sh->scratch_cap = gang->workers;
    }
    if (sh->nv == sh->cap) {
        size_t cap = sh->cap ? 2 * sh->cap : 64;
        sjob_t *v = realloc(sh->v, sizeof *v * cap);
        if (!v)
            return drv_err_internal(err, "out of memory in the FIFO shadow");
        sh->v = v;
        sh->cap = cap;
    }
    double t = submit > sh->last_start ? submit : sh->last_start;
    drv_gang_placement_t p = {.ranks = sh->scratch};
    for (;;) {
        release_until(sh, t);
        if (drv_gang_place(sh->nodes, sh->n, gang, sh->policy, &p, NULL, 0) == 0)
            break;
        double e = next_end(sh);
        if (!isfinite(e))
            return 0;           /* never fits, or behind a job with no estimate */
        t = e;
    }
    sjob_t *j = &sh->v[sh->nv];
    j->ranks = malloc(sizeof *j->ranks * (size_t)gang->workers);
    if (!j->ranks)
        return drv_err_internal(err, "out of memory in the FIFO shadow");
    memcpy(j->ranks, sh->scratch, sizeof *j->ranks * (size_t)gang->workers);
    j->gang = *gang;
    j->gang.pool_rank = NULL;
    j->gang.n_pool_rank = 0;
    j->gang.pool_names = NULL;
    j->gang.n_pool_names = 0;
    j->gang.worker.gpu_types = NULL;
    j->gang.worker.n_gpu_types = 0;
    j->end = est_duration > 0 ? t + est_duration : INFINITY;
    drv_gang_commit(sh->nodes, gang, j->ranks);
    sh->nv++;
    sh->last_start = t;
    *start = t;
    return 0;
}

double drv_wait_deadline(double submit, double fifo_start, double factor, double floor_s)
{
    if (!isfinite(fifo_start))
        return INFINITY;
    double w = fifo_start - submit;
    return submit + factor * (w > floor_s ? w : floor_s);
}

int drv_fifo_shadow_bounds(const drv_sched_node_t *nodes, size_t n,
                           const drv_place_policy_t *policy, drv_wait_job_t *jobs, size_t n_jobs,
                           double factor, double floor_s, drv_error_t *err)
{
    double first = INFINITY;   /* the first unknown job's submit */
    for (size_t i = 0; i < n_jobs; i++)
        if (isnan(jobs[i].fifo_start) && jobs[i].submit < first)
            first = jobs[i].submit;
    if (!isfinite(first))
        return 0;
    drv_fifo_shadow_t *sh = drv_fifo_shadow_create(nodes, n, policy, err);
    if (!sh)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n_jobs && rc == 0; i++) {
        drv_wait_job_t *j = &jobs[i];
        double start;
        if (!isnan(j->fifo_start)) {
            if (isfinite(j->fifo_start) && j->fifo_start + j->est > first)
                rc = drv_fifo_shadow_submit(sh, j->fifo_start, &j->gang, j->est, &start, err);
            continue;
        }
        if ((rc = drv_fifo_shadow_submit(sh, j->submit, &j->gang, j->est, &start, err)) == 0) {
            j->fifo_start = start;
            j->deadline = drv_wait_deadline(j->submit, start, factor, floor_s);
        }
    }
    drv_fifo_shadow_destroy(sh);
    return rc;
}

double drv_wait_requeued(double bound, double submit, double enqueued_at, double queued_s)
{
    if (!isfinite(bound))
        return INFINITY;
    return enqueued_at + (bound - submit) - queued_s;
}
