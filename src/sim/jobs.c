/* jobs.c — `drover-sim jobs`: a training-job trace on a virtual clock,
 * through the same admission, gang placement and preemption code the head
 * will run (src/sched/admit.c, gang.c), next to FIFO and EASY backfill
 * baselines computed in the same run with the same placement.
 *
 *   --trace  CSV: submit_time,user,workers,gpus_per_worker,duration,
 *            priority,preemptible (by header name, any order; docs/cli.md)
 *   --nodes  CSV: the node list format of `placement` (sn, cpu_milli,
 *            memory_mib, gpu, model); nodes without GPUs are left out
 *
 * Scenarios:
 *   drover  priority, dominant-resource fair share, backfill behind the
 *           head's reservation, and preemption of lower-priority
 *           preemptible jobs for a blocked head (victims that lose the
 *           least work since their last checkpoint);
 *   fifo    submit order, the head blocks everyone behind it;
 *   easy    submit order with Slurm-style EASY backfill (a job behind the
 *           head starts if it ends before the head's reservation or uses
 *           only GPUs the head leaves spare).
 * Model: a job's duration is known to the scheduler (a perfect run-time
 * estimate, the usual backfill-study assumption, optimistic); workers take
 * whole GPUs and no CPU or memory; a preempted job keeps the work up to
 * its last checkpoint (every --checkpoint-every seconds of its run) and
 * queues again. A pass of the scheduler runs at every arrival and end.
 * Output is deterministic.
 */
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sched/admit.h"
#include "sched/rng.h"
#include "sched/shadow.h"
#include "sim/sim.h"

enum { SC_DROVER, SC_FIFO, SC_EASY, SC_COUNT };

/* drover's wait margin (seconds), chosen on seeds 1-3 (bench/jobs/README.md) */
#define WAIT_MARGIN 600
#define WAIT_MARGIN_S "600"
static const char *const sc_names[SC_COUNT] = {"drover", "fifo", "easy"};

typedef struct tjob {
    double submit, duration;
    double est;                 /* the scheduler's run-time estimate (>= duration) */
    char user[64];
    int workers, gpus, priority;
    bool preemptible;
    int line;
} tjob_t;

enum { J_PENDING, J_QUEUED, J_RUNNING, J_DONE, J_UNSCHEDULABLE };

typedef struct jstate {
    int st;
    double remaining, start, first_start, end;
    double queued, enq;         /* time queued in all (every wait, requeues too); since */
    double est_remaining;       /* the estimate left of the work left */
    double est_end;             /* running: when the scheduler expects it to end */
    double budget;              /* drover: its wait bound, 2 x max(FIFO-shadow wait, floor)
                                   seconds queued in all; INFINITY none */
    double shadow_wait;         /* drover: the FIFO shadow's wait at submission; -1 none */
    int preemptions;
    bool was_due;               /* drover: found due by a pass, not started since */
    drv_sched_choice_t *ranks;
} jstate_t;

typedef struct result {
    size_t done, unschedulable, preemptions;
    double jct_mean, jct_p99, wait_mean, wait_p99, util, lost_gpu_h, makespan;
    double queued_mean, queued_p99;
    /* against FIFO, job by job: queued / max(FIFO queued, floor) */
    size_t cmp_jobs, over_2x;
    double worst_ratio;
    double *queued_of;          /* per job (trace order), -1 not completed */
    double *shadow_of;          /* drover: per job, the FIFO shadow's wait (-1 none) */
    double no_queue_jct_mean;   /* mean duration of the completed jobs: the mean JCT if
                                   every job started at submission and ran once */
} result_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: drover-sim jobs --trace TRACE.csv --nodes NODES.csv [--checkpoint-every S]\n"
            "                       [--aging S] [--wait-floor S] [--no-preemption]\n"
            "                       [--wait-margin S] [--no-wait-bound] [--no-reserve-bounded]\n"
            "                       [--no-reserve-due] [--no-edf-guard] [--no-sticky-due]\n"
            "                       [--refine-shadow]\n"
            "                       [--estimate-noise F] [--noise-seed N]\n"
            "                       [--jobs-out FILE.csv]\n"
            "                       [-o table|json]\n"
            "\n"
            "Replays a training-job trace (submit_time,user,workers,gpus_per_worker,duration,\n"
            "priority,preemptible) on the nodes' GPUs through drover's admission (priority, fair\n"
            "share, backfill behind a reservation), gang placement and preemption, next to FIFO\n"
            "and EASY backfill. Reports job completion time and queueing delay (mean, p99), GPU\n"
            "utilisation, preemptions and the GPU-hours they lost.\n"
            "\n"
            "  --checkpoint-every S  seconds of run between a job's checkpoints (default 1800)\n"
            "  --aging S             drover: a waiting job rises one priority level per S seconds\n"
            "                        waited (default 600; 0 = off)\n"
            "  --wait-floor S        the per-job comparison with FIFO divides a job's time queued\n"
            "                        by max(its FIFO time queued, S) (default 600)\n"
            "  --no-preemption       drover: never preempt (an ablation)\n"
            "  --wait-margin S       drover: a job is due (ordered first, reserved, may preempt)\n"
            "                        once its earliest start is within S of its wait bound,\n"
            "                        submit + 2 x max(its FIFO-shadow wait, --wait-floor)\n"
            "                        (default " WAIT_MARGIN_S ")\n"
            "  --no-wait-bound       drover: no wait bounds (an ablation)\n"
            "  --refine-shadow       drover: recompute the bounds whenever a job ends, the FIFO\n"
            "                        shadow replayed with the run times known by then (ended\n"
            "                        jobs) and estimates for the rest (an experiment)\n"
            "  --no-reserve-bounded  drover, an ablation (the old rule): a head with a wait bound\n"
            "                        holds a count of GPUs until it is due, instead of the\n"
            "                        reservation found by placement (whole nodes) that backfill\n"
            "                        is placed around (the default, as in droverd)\n"
            "  --no-reserve-due      drover, an ablation: only the head holds a reservation;\n"
            "                        by default a due job behind it that does not start holds\n"
            "                        one too (found by placement, the earlier ones held), and\n"
            "                        backfill is placed around them all (as in droverd)\n"
            "  --no-edf-guard        drover, an ablation: by default work no due job could\n"
            "                        preempt (not preemptible, or protected by its bound) is\n"
            "                        held when it would make more queued jobs with earlier\n"
            "                        bounds miss them (the EDF guard, sched/edf.c; as in droverd)\n"
            "  --no-sticky-due       drover, an ablation: by default a job a pass found due stays\n"
            "                        due until it starts, even once it could start at once (as\n"
            "                        in droverd), so the GPUs freed for it go to it\n"
            "  --reserve-bounded, --reserve-due, --edf-guard, --sticky-due\n"
            "                        accepted: the defaults (scripts of earlier runs name them)\n"
            "  --estimate-noise F    the schedulers see run times of duration x U(1, F) instead\n"
            "                        of the exact duration (default 1: exact)\n"
            "  --noise-seed N        seed of those draws (default 1)\n"
            "  --jobs-out FILE.csv   also write each job's time queued per scenario (seconds,\n"
            "                        -1: not completed), by trace line, and the FIFO shadow's\n"
            "                        wait at submission that drover's bound came from\n");
}

/* --- the trace ---------------------------------------------------------------------- */

static const char *const cols[] = {"submit_time", "user", "workers", "gpus_per_worker",
                                   "duration", "priority", "preemptible"};
#define NCOLS 7

static int num(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return *s && !*end && !errno && isfinite(*v) ? 0 : -1;
}

static int parse_trace(char *buf, const char *fname, tjob_t **out, size_t *n_out, drv_error_t *err)
{
    int pos[NCOLS], ncol = 0, line = 0;
    size_t cap = 0, n = 0;
    tjob_t *v = NULL;
    char *save = NULL;
    for (char *ln = strtok_r(buf, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
        line++;
        size_t l = strlen(ln);
        if (l && ln[l - 1] == '\r')
            ln[--l] = '\0';
        if (!l)
            continue;
        char *f[32];
        int nf = 0;
        for (char *p = ln;; p++) {
            if (nf == 32) {
                free(v);
                return drv_err_invalid(err, "trace", "%s:%d: more than 32 columns", fname, line);
            }
            f[nf++] = p;
            p = strchr(p, ',');
            if (!p)
                break;
            *p = '\0';
        }
        if (!ncol) {
            ncol = nf;
            for (int c = 0; c < NCOLS; c++) {
                pos[c] = -1;
                for (int k = 0; k < nf; k++)
                    if (strcmp(f[k], cols[c]) == 0)
                        pos[c] = k;
                if (pos[c] < 0) {
                    free(v);
                    return drv_err_invalid(err, "trace", "%s:%d: no column '%s' in the header",
                                           fname, line, cols[c]);
                }
            }
            continue;
        }
        if (nf != ncol) {
            free(v);
            return drv_err_invalid(err, "trace", "%s:%d: %d fields, the header has %d", fname,
                                   line, nf, ncol);
        }
        tjob_t j = {.line = line};
        double w, g, p;
        const char *pre = f[pos[6]];
        const char *bad = NULL;
        if (num(f[pos[0]], &j.submit) < 0 || j.submit < 0)
            bad = "submit_time must be a number >= 0";
        else if (!*f[pos[1]] || strlen(f[pos[1]]) >= sizeof j.user)
            bad = "user must be 1 to 63 characters";
        else if (num(f[pos[2]], &w) < 0 || w != floor(w) || w < 1 || w > DRV_GANG_MAX_WORKERS)
            bad = "workers must be an integer 1..4096";
        else if (num(f[pos[3]], &g) < 0 || g != floor(g) || g < 1 || g > DRV_SCHED_MAX_GPUS)
            bad = "gpus_per_worker must be an integer 1..64";
        else if (num(f[pos[4]], &j.duration) < 0 || j.duration <= 0)
            bad = "duration must be a number > 0 (seconds)";
        else if (num(f[pos[5]], &p) < 0 || p != floor(p) || fabs(p) > 1e6)
            bad = "priority must be an integer";
        else if (strcmp(pre, "0") && strcmp(pre, "1") && strcasecmp(pre, "true") &&
                 strcasecmp(pre, "false"))
            bad = "preemptible must be 0, 1, true or false";
        if (bad) {
            free(v);
            return drv_err_invalid(err, "trace", "%s:%d: %s", fname, line, bad);
        }
        snprintf(j.user, sizeof j.user, "%s", f[pos[1]]);
        j.workers = (int)w;
        j.gpus = (int)g;
        j.priority = (int)p;
        j.preemptible = strcmp(pre, "1") == 0 || strcasecmp(pre, "true") == 0;
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            tjob_t *nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                free(v);
                return drv_err_internal(err, "out of memory");
            }
            v = nv;
        }
        v[n++] = j;
    }
    if (!ncol || !n) {
        free(v);
        return drv_err_invalid(err, "trace", "%s: no jobs", fname);
    }
    *out = v;
    *n_out = n;
    return 0;
}

/* --- one scenario ------------------------------------------------------------------ */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double p99(double *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp_d);
    size_t k = (size_t)ceil(0.99 * (double)n);
    return v[k ? k - 1 : 0];
}

typedef struct sim {
    const tjob_t *jobs;
    size_t n_jobs;
    drv_sched_node_t *nodes;    /* this scenario's snapshot */
    size_t n_nodes;
    int64_t gpus;
    double ckpt, aging;
    bool no_preempt;
    bool wait_bound;            /* drover: deadlines from the FIFO shadow */
    bool refine;                /* drover: the shadow replayed with known run times */
    const drv_sched_node_t *base;   /* the empty nodes, for replays */
    drv_wait_job_t *wj;         /* refine: one per job */
    bool reserve_bounded;       /* drover: every bounded head reserved by placement */
    bool reserve_due;           /* drover: every due job reserved by placement */
    bool edf_guard;             /* drover: pinned work held for earlier bounds (sched/edf.c) */
    bool sticky_due;            /* drover: a job found due stays due until it starts */
    double wait_margin, floor_s;
    drv_fifo_shadow_t *shadow;
    bool learnt_any;            /* refine: some run time known to differ from its estimate */
    int sc;
    jstate_t *js;
    drv_admit_job_t *q;
    size_t *qmap;
    drv_admit_running_t *run;
    size_t *rmap;
    double busy_gpu_s, lost_gpu_s;
    size_t preemptions;
} sim_t;

static drv_gang_request_t gang_of(const tjob_t *j)
{
    return (drv_gang_request_t){.workers = j->workers,
                                .worker = {.gpu_count = j->gpus, .compute_percent = 100}};
}

static double last_ckpt(const sim_t *s, const jstate_t *st, double now)
{
    return st->start + floor((now - st->start) / s->ckpt) * s->ckpt;
}

/* The priority a running job is weighed at as a preemption victim: the
 * one it would be queued at again (its own plus aging from its submit
 * time), so a victim never outranks, on its return, the gang it made room
 * for, and no pair of jobs preempts each other in turn. */
static int aged_priority(const sim_t *s, size_t i, double now)
{
    const tjob_t *j = &s->jobs[i];
    drv_admit_job_t q = {.priority = j->priority, .submit_time = j->submit};
    return drv_admit_effective_priority(&q, now, s->sc == SC_DROVER ? s->aging : 0);
}

static int victim_priority(const sim_t *s, size_t i, double now)
{
    const jstate_t *st = &s->js[i];
    bool bounded = s->sc == SC_DROVER && isfinite(st->budget);
    return drv_admit_victim_priority(aged_priority(s, i, now), bounded, st->budget - st->queued,
                                     s->wait_margin);
}

/* Build the queue and running arrays for a pass. */
static void collect(sim_t *s, double now, size_t *nq, size_t *nr)
{
    *nq = *nr = 0;
    for (size_t i = 0; i < s->n_jobs; i++) {
        const tjob_t *j = &s->jobs[i];
        jstate_t *st = &s->js[i];
        if (st->st == J_QUEUED) {
            s->qmap[*nq] = i;
            /* drover: the daemon's rule; the baselines order by submit time only */
            s->q[(*nq)++] = (drv_admit_job_t){
                .id = NULL, .user = j->user, .priority = s->sc == SC_DROVER ? j->priority : 0,
                .submit_time = j->submit, .duration = st->est_remaining,
                .preemptible = j->preemptible, .gang = gang_of(j),
                .wait_deadline = s->sc == SC_DROVER ? st->enq + st->budget - st->queued : 0,
                .was_due = st->was_due};
        } else if (st->st == J_RUNNING) {
            s->rmap[*nr] = i;
            s->run[(*nr)++] = (drv_admit_running_t){
                .user = j->user, .priority = victim_priority(s, i, now),
                .preemptible = j->preemptible,
                .expected_end = st->est_end, .last_checkpoint = last_ckpt(s, st, now),
                .gang = gang_of(j), .ranks = st->ranks};
        }
    }
}

static void stop(sim_t *s, size_t i, double now, bool preempted)
{
    jstate_t *st = &s->js[i];
    const tjob_t *j = &s->jobs[i];
    drv_gang_request_t g = gang_of(j);
    drv_gang_release(s->nodes, &g, st->ranks);
    double gpus = (double)j->workers * j->gpus;
    s->busy_gpu_s += (now - st->start) * gpus;
    if (preempted) {
        double kept = last_ckpt(s, st, now) - st->start;
        s->lost_gpu_s += (now - st->start - kept) * gpus;
        st->remaining -= kept;
        st->est_remaining -= kept;
        st->preemptions++;
        s->preemptions++;
        st->st = J_QUEUED;
        st->enq = now;
    } else {
        st->st = J_DONE;
        st->end = now;
    }
}

/* --refine-shadow: the wait bounds of every job not yet done, from the
 * FIFO shadow replayed over the jobs submitted by now (jobs[0..n)) with
 * the run times known by now: a job that has ended ran its duration; the
 * others, their estimates (drv_fifo_shadow_bounds, as droverd's jobs
 * controller). Only what is known at `now` is used. */
static int refine_bounds(sim_t *s, size_t n, drv_error_t *err)
{
    for (size_t i = 0; i < n; i++) {
        const tjob_t *j = &s->jobs[i];
        s->wj[i] = (drv_wait_job_t){.submit = j->submit,
                                    .est = s->js[i].st == J_DONE ? j->duration : j->est,
                                    .gang = gang_of(j), .fifo_start = NAN};
    }
    if (drv_fifo_shadow_bounds(s->base, s->n_nodes, NULL, s->wj, n, 2, s->floor_s, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        jstate_t *st = &s->js[i];
        if (st->st == J_DONE || st->st == J_UNSCHEDULABLE)
            continue;
        st->shadow_wait = isfinite(s->wj[i].fifo_start) ? s->wj[i].fifo_start - s->jobs[i].submit
                                                        : -1;
        st->budget = s->wj[i].deadline - s->jobs[i].submit;
    }
    return 0;
}

/* One scheduling pass at `now` (with preemption for drover). */
static int pass(sim_t *s, double now, drv_error_t *err)
{
    for (int round = 0; round < 4; round++) {
        size_t nq, nr;
        collect(s, now, &nq, &nr);
        if (!nq)
            return 0;
        drv_admit_input_t in = {.now = now, .queue = s->q, .n_queue = nq, .running = s->run,
                                .n_running = nr,
                                .order = s->sc == SC_DROVER ? DRV_ADMIT_FAIR : DRV_ADMIT_FIFO,
                                .backfill = s->sc != SC_FIFO,
                                .aging_seconds = s->sc == SC_DROVER ? s->aging : 0,
                                .wait_margin = s->wait_margin,
                                .shape_bounded = s->sc == SC_DROVER && s->reserve_bounded,
                                .reserve_due = s->sc == SC_DROVER && s->reserve_due,
                                .edf_guard = s->sc == SC_DROVER && s->edf_guard,
                                .sticky_due = s->sc == SC_DROVER && s->sticky_due};
        drv_admit_result_t res;
        if (drv_admit(s->nodes, s->n_nodes, &in, &res, err) < 0)
            return -1;
        for (size_t k = 0; k < nq; k++) {
            jstate_t *st = &s->js[s->qmap[k]];
            st->was_due |= res.jobs[k].due;
            if (res.jobs[k].state == DRV_JOB_UNSCHEDULABLE) {
                st->st = J_UNSCHEDULABLE;
            } else if (res.jobs[k].ranks) {
                const tjob_t *j = &s->jobs[s->qmap[k]];
                memcpy(st->ranks, res.jobs[k].ranks, sizeof *st->ranks * (size_t)j->workers);
                st->st = J_RUNNING;
                st->was_due = false;
                st->queued += now - st->enq;
                st->start = now;
                if (st->first_start < 0)
                    st->first_start = now;
                st->end = now + st->remaining;
                st->est_end = now + st->est_remaining;
            }
        }
        int head = res.head;
        bool head_due = head >= 0 && res.jobs[head].due;
        drv_admit_result_free(&res);
        if (s->sc != SC_DROVER || head < 0 || s->no_preempt)
            return 0;
        /* a blocked head of higher priority may preempt */
        size_t hi = s->qmap[head];
        collect(s, now, &nq, &nr);
        size_t *victims = malloc(sizeof *victims * (nr ? nr : 1)), nv = 0;
        if (!victims)
            return drv_err_internal(err, "out of memory");
        drv_gang_request_t g = gang_of(&s->jobs[hi]);
        /* a head due by its wait bound outranks every preemptible job */
        int rc = drv_admit_victims(s->nodes, s->n_nodes, s->run, nr, &g,
                                   head_due ? INT_MAX : aged_priority(s, hi, now),
                                   now, NULL, victims, &nv, NULL, 0);
        if (rc == 0 && nv > 0) {
            /* drv_admit_victims released them on the snapshot; account for them */
            for (size_t k = 0; k < nv; k++) {
                size_t i = s->rmap[victims[k]];
                drv_gang_request_t vg = gang_of(&s->jobs[i]);
                drv_gang_commit(s->nodes, &vg, s->js[i].ranks);
                stop(s, i, now, true);
            }
        }
        free(victims);
        if (rc != 0 || nv == 0)
            return 0;
    }
    return 0;
}

static int run_scenario(sim_t *s, result_t *r, drv_error_t *err)
{
    double *qo = r->queued_of, *so = r->shadow_of;
    memset(r, 0, sizeof *r);
    r->queued_of = qo;
    r->shadow_of = so;
    size_t *order = malloc(sizeof *order * s->n_jobs);
    if (!order)
        return drv_err_internal(err, "out of memory");
    for (size_t i = 0; i < s->n_jobs; i++) {
        order[i] = i;
        s->js[i] = (jstate_t){.st = J_PENDING, .remaining = s->jobs[i].duration,
                              .est_remaining = s->jobs[i].est, .first_start = -1,
                              .budget = INFINITY, .shadow_wait = -1,
                              .ranks = s->js[i].ranks};
    }
    s->shadow = NULL;
    s->learnt_any = false;
    if (s->sc == SC_DROVER && s->wait_bound &&
        !(s->shadow = drv_fifo_shadow_create(s->nodes, s->n_nodes, NULL, err))) {
        free(order);
        return -1;
    }
    /* jobs are sorted by submit time by the caller */
    size_t next = 0;
    double t0 = s->n_jobs ? s->jobs[0].submit : 0, now = t0;
    int rc = 0;
    for (;;) {
        double t_end = INFINITY;
        for (size_t i = 0; i < s->n_jobs; i++)
            if (s->js[i].st == J_RUNNING && s->js[i].end < t_end)
                t_end = s->js[i].end;
        double t_arr = next < s->n_jobs ? s->jobs[next].submit : INFINITY;
        now = t_end < t_arr ? t_end : t_arr;
        if (!isfinite(now))
            break;
        bool learnt = false;    /* a run time that differs from its estimate */
        for (size_t i = 0; i < s->n_jobs; i++)
            if (s->js[i].st == J_RUNNING && s->js[i].end <= now) {
                stop(s, i, now, false);
                learnt |= s->jobs[i].duration != s->jobs[i].est;
            }
        size_t first_new = next;
        while (next < s->n_jobs && s->jobs[next].submit <= now) {
            s->js[next].enq = s->jobs[next].submit;
            if (s->shadow) {   /* at submission: its FIFO start, so its wait bound */
                drv_gang_request_t g = gang_of(&s->jobs[next]);
                double fs;
                if ((rc = drv_fifo_shadow_submit(s->shadow, s->jobs[next].submit, &g,
                                                 s->jobs[next].est, &fs, err)) < 0)
                    break;
                s->js[next].shadow_wait = isfinite(fs) ? fs - s->jobs[next].submit : -1;
                s->js[next].budget = drv_wait_deadline(s->jobs[next].submit, fs, 2, s->floor_s) -
                                     s->jobs[next].submit;
            }
            s->js[next++].st = J_QUEUED;
        }
        if (rc == 0 && s->shadow && s->refine && (learnt || (next > first_new && s->learnt_any)))
            rc = refine_bounds(s, next, err);
        s->learnt_any |= learnt;
        if (rc < 0 || (rc = pass(s, now, err)) < 0)
            break;
    }
    double *jct = malloc(sizeof *jct * (s->n_jobs ? s->n_jobs : 1));
    double *wait = malloc(sizeof *wait * (s->n_jobs ? s->n_jobs : 1));
    double *qd = malloc(sizeof *qd * (s->n_jobs ? s->n_jobs : 1));
    if (rc == 0 && (!jct || !wait || !qd))
        rc = drv_err_internal(err, "out of memory");
    double last = t0;
    for (size_t i = 0; rc == 0 && i < s->n_jobs; i++) {
        const jstate_t *st = &s->js[i];
        r->queued_of[i] = st->st == J_DONE ? st->queued : -1;
        if (r->shadow_of)
            r->shadow_of[i] = st->shadow_wait;
        if (st->st == J_UNSCHEDULABLE) {
            r->unschedulable++;
        } else if (st->st == J_DONE) {
            jct[r->done] = st->end - s->jobs[i].submit;
            wait[r->done] = st->first_start - s->jobs[i].submit;
            qd[r->done] = st->queued;
            r->jct_mean += jct[r->done];
            r->wait_mean += wait[r->done];
            r->queued_mean += st->queued;
            r->no_queue_jct_mean += s->jobs[i].duration;
            r->done++;
            if (st->end > last)
                last = st->end;
        }
    }
    if (rc == 0 && r->done) {
        r->jct_mean /= (double)r->done;
        r->wait_mean /= (double)r->done;
        r->queued_mean /= (double)r->done;
        r->no_queue_jct_mean /= (double)r->done;
        r->queued_p99 = p99(qd, r->done);
        r->jct_p99 = p99(jct, r->done);
        r->wait_p99 = p99(wait, r->done);
    }
    r->makespan = last - t0;
    r->util = r->makespan > 0 && s->gpus ? s->busy_gpu_s / (r->makespan * (double)s->gpus) : 0;
    r->preemptions = s->preemptions;
    r->lost_gpu_h = s->lost_gpu_s / 3600;
    drv_fifo_shadow_destroy(s->shadow);
    s->shadow = NULL;
    free(order);
    free(jct);
    free(wait);
    free(qd);
    return rc;
}

/* Job by job against FIFO: a job's time queued over max(its FIFO time
 * queued, floor); the jobs above 2 and the worst ratio. */
static void compare_fifo(result_t *r, const result_t *fifo, size_t n, double floor_s)
{
    for (size_t i = 0; i < n; i++) {
        if (r->queued_of[i] < 0 || fifo->queued_of[i] < 0)
            continue;
        double base = fifo->queued_of[i] > floor_s ? fifo->queued_of[i] : floor_s;
        double ratio = r->queued_of[i] / base;
        r->cmp_jobs++;
        if (ratio > 2 + 1e-9)
            r->over_2x++;
        if (ratio > r->worst_ratio)
            r->worst_ratio = ratio;
    }
}

static int write_jobs(const char *path, const tjob_t *jobs, size_t n, const result_t *res,
                      drv_error_t *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return drv_err_invalid(err, "jobs-out", "%s: %s", path, strerror(errno));
    fprintf(f, "line,user,workers,gpus_per_worker,duration,priority,preemptible,"
               "queued_drover,queued_fifo,queued_easy,fifo_shadow_wait\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%d,%s,%d,%d,%.1f,%d,%d,%.1f,%.1f,%.1f,%.1f\n", jobs[i].line, jobs[i].user,
                jobs[i].workers, jobs[i].gpus, jobs[i].duration, jobs[i].priority,
                jobs[i].preemptible, res[SC_DROVER].queued_of[i], res[SC_FIFO].queued_of[i],
                res[SC_EASY].queued_of[i], res[SC_DROVER].shadow_of[i]);
    if (fclose(f) != 0)
        return drv_err_invalid(err, "jobs-out", "%s: write failed", path);
    return 0;
}

static int by_submit(const void *a, const void *b)
{
    const tjob_t *x = a, *y = b;
    if (x->submit != y->submit)
        return x->submit < y->submit ? -1 : 1;
    return (x->line > y->line) - (x->line < y->line);
}

int sim_jobs_main(int argc, char **argv)
{
    const char *trace = NULL, *nodes_path = NULL, *fmt = "table", *jobs_out = NULL;
    double ckpt = 1800, aging = 600, floor_s = 600, margin = WAIT_MARGIN, noise = 1, nseed = 1;
    bool no_preempt = false, wait_bound = true, reserve_bounded = true, refine = false;
    bool reserve_due = true, edf_guard = true, sticky_due = true;
    static const struct option opts[] = {{"trace", required_argument, NULL, 't'},
                                         {"nodes", required_argument, NULL, 'n'},
                                         {"checkpoint-every", required_argument, NULL, 'c'},
                                         {"aging", required_argument, NULL, 'a'},
                                         {"wait-floor", required_argument, NULL, 'f'},
                                         {"jobs-out", required_argument, NULL, 'j'},
                                         {"no-preemption", no_argument, NULL, 'P'},
                                         {"no-wait-bound", no_argument, NULL, 'W'},
                                         {"refine-shadow", no_argument, NULL, 'F'},
                                         {"wait-margin", required_argument, NULL, 'm'},
                                         {"reserve-bounded", no_argument, NULL, 'R'},
                                         {"no-reserve-bounded", no_argument, NULL, 'N'},
                                         {"reserve-due", no_argument, NULL, 'D'},
                                         {"no-reserve-due", no_argument, NULL, 'd'},
                                         {"edf-guard", no_argument, NULL, 'G'},
                                         {"no-edf-guard", no_argument, NULL, 'g'},
                                         {"sticky-due", no_argument, NULL, 'Y'},
                                         {"no-sticky-due", no_argument, NULL, 'y'},
                                         {"estimate-noise", required_argument, NULL, 'e'},
                                         {"noise-seed", required_argument, NULL, 's'},
                                         {"output", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': trace = optarg; break;
        case 'n': nodes_path = optarg; break;
        case 'o': fmt = optarg; break;
        case 'c':
            if (num(optarg, &ckpt) < 0 || ckpt <= 0) {
                fprintf(stderr, "drover-sim jobs: --checkpoint-every must be a number > 0\n");
                return 2;
            }
            break;
        case 'a':
            if (num(optarg, &aging) < 0 || aging < 0) {
                fprintf(stderr, "drover-sim jobs: --aging must be a number >= 0 (seconds)\n");
                return 2;
            }
            break;
        case 'f':
            if (num(optarg, &floor_s) < 0 || floor_s <= 0) {
                fprintf(stderr, "drover-sim jobs: --wait-floor must be a number > 0 (seconds)\n");
                return 2;
            }
            break;
        case 'j': jobs_out = optarg; break;
        case 'P': no_preempt = true; break;
        case 'W': wait_bound = false; break;
        case 'F': refine = true; break;
        case 'R': reserve_bounded = true; break; /* the default; kept for old scripts */
        case 'N': reserve_bounded = false; break;
        case 'D': reserve_due = true; break; /* the default */
        case 'd': reserve_due = false; break;
        case 'G': edf_guard = true; break; /* the default */
        case 'g': edf_guard = false; break;
        case 'Y': sticky_due = true; break; /* the default */
        case 'y': sticky_due = false; break;
        case 'm':
            if (num(optarg, &margin) < 0 || margin < 0) {
                fprintf(stderr, "drover-sim jobs: --wait-margin must be a number >= 0 (seconds)\n");
                return 2;
            }
            break;
        case 'e':
            if (num(optarg, &noise) < 0 || noise < 1) {
                fprintf(stderr, "drover-sim jobs: --estimate-noise must be a number >= 1\n");
                return 2;
            }
            break;
        case 's':
            if (num(optarg, &nseed) < 0 || nseed < 0) {
                fprintf(stderr, "drover-sim jobs: --noise-seed must be a number >= 0\n");
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!trace || !nodes_path || optind != argc ||
        (strcmp(fmt, "table") != 0 && strcmp(fmt, "json") != 0)) {
        usage(stderr);
        return 2;
    }
    int rc = 1;
    drv_error_t err = {0};
    drv_trace_t nt = {0};
    tjob_t *jobs = NULL;
    size_t n_jobs = 0, n_nodes = 0;
    drv_sched_node_t *base = NULL;
    sim_t s = {0};
    result_t res[SC_COUNT] = {0};
    size_t len;
    char *buf = drv_trace_read_file(trace, &len, &err);
    if (buf)
        buf[len] = '\0';   /* the spare byte */
    if (!buf || parse_trace(buf, trace, &jobs, &n_jobs, &err) < 0 ||
        drv_trace_load_nodes(&nt, nodes_path, &err) < 0)
        goto out;
    qsort(jobs, n_jobs, sizeof *jobs, by_submit);
    /* the estimates: exact, or duration x U(1, noise) (users overestimate their limits) */
    drv_rng_t rng;
    drv_rng_seed(&rng, (uint64_t)nseed);
    for (size_t i = 0; i < n_jobs; i++)
        jobs[i].est = jobs[i].duration * (noise > 1 ? 1 + (noise - 1) * drv_rng_double(&rng) : 1);
    base = calloc(nt.n_nodes ? nt.n_nodes : 1, sizeof *base);
    s.nodes = calloc(nt.n_nodes ? nt.n_nodes : 1, sizeof *s.nodes);
    s.js = calloc(n_jobs, sizeof *s.js);
    s.q = calloc(n_jobs, sizeof *s.q);
    s.qmap = calloc(n_jobs, sizeof *s.qmap);
    s.run = calloc(n_jobs, sizeof *s.run);
    s.rmap = calloc(n_jobs, sizeof *s.rmap);
    s.wj = calloc(n_jobs, sizeof *s.wj);
    for (int sc = 0; sc < SC_COUNT; sc++)
        res[sc].queued_of = calloc(n_jobs, sizeof *res[sc].queued_of);
    res[SC_DROVER].shadow_of = calloc(n_jobs, sizeof *res[SC_DROVER].shadow_of);
    if (!base || !s.nodes || !s.js || !s.q || !s.qmap || !s.run || !s.rmap || !s.wj ||
        !res[SC_DROVER].queued_of || !res[SC_FIFO].queued_of || !res[SC_EASY].queued_of ||
        !res[SC_DROVER].shadow_of) {
        drv_err_internal(&err, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n_jobs; i++)
        if (!(s.js[i].ranks = calloc((size_t)jobs[i].workers, sizeof *s.js[i].ranks))) {
            drv_err_internal(&err, "out of memory");
            goto out;
        }
    for (size_t i = 0; i < nt.n_nodes; i++) {
        const drv_trace_node_t *tn = &nt.nodes[i];
        if (tn->gpus <= 0)
            continue;
        drv_sched_node_t *nd = &base[n_nodes++];
        nd->id = tn->name;
        nd->schedulable = true;
        nd->cpu_millis = tn->cpu_milli;
        nd->memory_mib = tn->memory_mib;
        nd->n_gpus = tn->gpus;
        for (int g = 0; g < tn->gpus; g++)
            nd->gpus[g] = (drv_sched_gpu_t){.index = g, .type = tn->model, .memory_mib = 1000,
                                            .healthy = true};
        s.gpus += tn->gpus;
    }
    if (!n_nodes) {
        drv_err_invalid(&err, "nodes", "%s: no node with GPUs", nodes_path);
        goto out;
    }
    s.jobs = jobs;
    s.n_jobs = n_jobs;
    s.n_nodes = n_nodes;
    s.ckpt = ckpt;
    s.aging = aging;
    s.no_preempt = no_preempt;
    s.wait_bound = wait_bound;
    s.refine = refine;
    s.base = base;
    s.reserve_bounded = reserve_bounded;
    s.reserve_due = reserve_due;
    s.edf_guard = edf_guard;
    s.sticky_due = sticky_due;
    s.wait_margin = margin;
    s.floor_s = floor_s;
    for (int sc = 0; sc < SC_COUNT; sc++) {
        memcpy(s.nodes, base, sizeof *base * n_nodes);
        s.sc = sc;
        s.busy_gpu_s = s.lost_gpu_s = 0;
        s.preemptions = 0;
        if (run_scenario(&s, &res[sc], &err) < 0)
            goto out;
    }
    for (int sc = 0; sc < SC_COUNT; sc++)
        compare_fifo(&res[sc], &res[SC_FIFO], n_jobs, floor_s);
    if (jobs_out && write_jobs(jobs_out, jobs, n_jobs, res, &err) < 0)
        goto out;
    if (strcmp(fmt, "json") == 0) {
        printf("{\"trace\":{\"jobs\":%zu,\"gpus\":%lld,\"nodes\":%zu},\"checkpoint_every_s\":%g,"
               "\"aging_s\":%g,\"wait_floor_s\":%g,\"wait_bound\":%s,\"wait_margin_s\":%g,"
               "\"reserve_bounded\":%s,\"reserve_due\":%s,\"edf_guard\":%s,\"sticky_due\":%s,\"refine_shadow\":%s,\"estimate_noise\":%g,\"scenarios\":[",
               n_jobs, (long long)s.gpus,
               n_nodes, ckpt, aging, floor_s, wait_bound ? "true" : "false", margin,
               reserve_bounded ? "true" : "false", reserve_due ? "true" : "false", edf_guard ? "true" : "false", sticky_due ? "true" : "false",
               refine ? "true" : "false", noise);
        for (int sc = 0; sc < SC_COUNT; sc++) {
            const result_t *r = &res[sc];
            printf("%s{\"name\":\"%s\",\"jobs_completed\":%zu,\"jobs_unschedulable\":%zu,"
                   "\"jct_s\":{\"mean\":%.3f,\"p99\":%.3f,\"no_queue_mean\":%.3f},\"queueing_s\":{\"mean\":%.3f,"
                   "\"p99\":%.3f},\"gpu_utilisation\":%.4f,\"makespan_s\":%.3f,"
                   "\"preemptions\":%zu,\"gpu_hours_lost\":%.4f,"
                   "\"queued_total_s\":{\"mean\":%.3f,\"p99\":%.3f},"
                   "\"vs_fifo\":{\"jobs\":%zu,\"over_2x\":%zu,\"fraction_over_2x\":%.6f,"
                   "\"worst_ratio\":%.4f}}",
                   sc ? "," : "", sc_names[sc], r->done, r->unschedulable, r->jct_mean,
                   r->jct_p99, r->no_queue_jct_mean, r->wait_mean, r->wait_p99, r->util, r->makespan, r->preemptions,
                   r->lost_gpu_h, r->queued_mean, r->queued_p99, r->cmp_jobs, r->over_2x,
                   r->cmp_jobs ? (double)r->over_2x / (double)r->cmp_jobs : 0, r->worst_ratio);
        }
        printf("]}\n");
    } else {
        printf("%zu jobs on %zu nodes (%lld GPUs), checkpoint every %g s, aging %g s; "
               ">2x FIFO: time queued over max(FIFO's, %g s)\n\n", n_jobs, n_nodes,
               (long long)s.gpus, ckpt, aging, floor_s);
        printf("%-8s %9s %12s %12s %12s %12s %12s %6s %6s %8s %10s %7s %8s\n", "scenario",
               "completed", "JCT mean s", "JCT p99 s", "wait mean s", "wait p99 s",
               "queued p99 s", "util", "unsch", "preempt", "GPU-h lost", ">2x", "worst");
        for (int sc = 0; sc < SC_COUNT; sc++) {
            const result_t *r = &res[sc];
            printf("%-8s %9zu %12.1f %12.1f %12.1f %12.1f %12.1f %5.1f%% %6zu %8zu %10.2f %7zu "
                   "%8.2f\n", sc_names[sc], r->done, r->jct_mean, r->jct_p99, r->wait_mean,
                   r->wait_p99, r->queued_p99, 100 * r->util, r->unschedulable, r->preemptions,
                   r->lost_gpu_h, r->over_2x, r->worst_ratio);
        }
    }
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "drover-sim jobs: %s\n", err.message);
    free(buf);
    for (size_t i = 0; s.js && i < n_jobs; i++)
        free(s.js[i].ranks);
    free(s.js);
    free(s.q);
    free(s.qmap);
    free(s.run);
    free(s.rmap);
    free(s.wj);
    free(s.nodes);
    free(base);
    for (int sc = 0; sc < SC_COUNT; sc++)
        free(res[sc].queued_of);
    free(res[SC_DROVER].shadow_of);
    free(jobs);
    drv_trace_free(&nt);
    return rc;
}
