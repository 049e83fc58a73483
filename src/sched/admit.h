/* admit.h — job admission and preemption victims: which queued training
 * jobs start now, and which preemptible jobs make room. Pure functions of
 * their inputs (a snapshot, the queue, the running jobs, quotas, the time
 * as a number); nothing here reads a clock, locks or does I/O, so the head,
 * drover-sim and the tests run the same decisions.
 *
 * Here rather than in autoscale/ because it decides placement of work on
 * existing capacity (as sched/ does for replicas) and needs only gang.h;
 * state/ may include sched but not autoscale, so queue positions and
 * reasons can be rendered from the state layer with the same code.
 *
 * drv_admit, one pass:
 *   0. deployments' reserved capacity (replicas owed, min_replicas first)
 *      is placed on the snapshot before any job;
 *   1. jobs due by their wait bound (wait_deadline, wait_margin) first,
 *      earliest deadline first; then one at a time: the highest priority first; on
 *      equal priority the user with the smallest dominant share (max of
 *      GPU, CPU, memory shares of the cluster held by their running and
 *      just admitted jobs; GPU share, then submit time, break ties) —
 *      progressive filling, so shares are updated after each admission;
 *      the user's oldest job first. (DRV_ADMIT_FIFO: submit time only.)
 *      With aging_seconds, the priority used here is the job's own plus
 *      one per aging_seconds waited (drv_admit_effective_priority).
 *   2. a job whose user would pass gpu_quota is skipped (over_quota), and
 *      one that would not fit even on its nodepools' empty nodes is
 *      unschedulable (it never becomes the head);
 *   3. the first job that does not fit is the head: it holds a
 *      reservation, the earliest time at which, with the running jobs
 *      ending as expected, enough GPUs of its nodepools are free (EASY
 *      backfill's shadow time). Later jobs start only as backfill: if they
 *      fit now and either end before the reservation or use only GPUs the
 *      head will not need then. Without a known reservation (a running
 *      job with no expected end is needed for it), nothing backfills: a
 *      large gang is never starved by small ones. Without opts.backfill
 *      (plain FIFO), nothing after the head starts.
 * Every admitted placement is committed to the snapshot (pass a copy).
 *
 * drv_admit_victims: the preemptible running jobs of lower priority to
 * stop so that a gang (a higher-priority job, or a deployment's replicas
 * at priority INT_MAX) fits: the set that loses the least work (GPU-seconds
 * since each one's last checkpoint), then the fewest victims, checked by
 * releasing them on the snapshot and placing the gang.
 *
 * GPUs are counted as drv_gang_worker_gpus (a share: its compute fraction).
 */
#ifndef DRV_ADMIT_H
#define DRV_ADMIT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "sched/gang.h"

typedef struct drv_admit_job {
    const char *id;
    const char *user;
    int priority;               /* higher first */
    double submit_time;         /* seconds, the caller's clock */
    double duration;            /* expected run time, seconds; <= 0 unknown */
    bool preemptible;
    drv_gang_request_t gang;
    /* Its wait bound (sched/shadow.h: submit + 2 x max(FIFO wait, floor)
     * from the FIFO shadow at submission); <= 0 or INFINITY: none. */
    double wait_deadline;
    /* An earlier pass found it due and it has not started since: it stays
     * due (drv_admit_input_t.sticky_due), so the GPUs freed for it (its
     * victims, the ends it waited for) are not taken by jobs ordered
     * above it once it could start. */
    bool was_due;
} drv_admit_job_t;

typedef struct drv_admit_running {
    const char *id;
    const char *user;
    int priority;
    bool preemptible;
    double expected_end;        /* seconds; <= 0 or INFINITY: unknown */
    double last_checkpoint;     /* its newest complete checkpoint (or its start) */
    drv_gang_request_t gang;
    const drv_sched_choice_t *ranks; /* where it runs: gang.workers entries */
} drv_admit_running_t;

typedef struct drv_admit_user {
    const char *name;
    double gpu_quota;           /* GPUs at most at once; < 0 = none */
} drv_admit_user_t;

/* A deployment's replicas still owed, placed one by one before any job. */
typedef struct drv_admit_reserve {
    const char *deployment;
    drv_gang_request_t replicas; /* workers = replicas owed */
} drv_admit_reserve_t;

enum { DRV_ADMIT_FAIR = 0, DRV_ADMIT_FIFO = 1 };

typedef struct drv_admit_input {
    double now;
    const drv_admit_job_t *queue;
    size_t n_queue;
    const drv_admit_running_t *running;
    size_t n_running;
    const drv_admit_user_t *users; /* users not listed have no quota */
    size_t n_users;
    const drv_admit_reserve_t *reserve;
    size_t n_reserve;
    int order;                  /* DRV_ADMIT_FAIR or DRV_ADMIT_FIFO */
    bool backfill;
    const drv_place_policy_t *policy; /* NULL = the default */
    /* Aging (DRV_ADMIT_FAIR only): a job's priority for ordering rises by
     * one level per aging_seconds it has waited (now - submit_time), so an
     * old job overtakes a stream of newer, higher-priority or fair-share
     * favoured ones and no job is starved. 0 = off. Preemption victims
     * are still chosen by the jobs' own priority. */
    double aging_seconds;
    /* Wait bounds: a queued job with a wait_deadline is *due* when its
     * earliest start if reserved now (its GPUs free now plus what the
     * running jobs free at their expected ends, counted before this pass
     * admits anything) is at or past wait_deadline - wait_margin. Due jobs
     * go first, earliest deadline first, above every priority and fair
     * share; the first that does not fit is the head, whose reservation
     * backfill may not delay. Jobs without a deadline are never due. */
    double wait_margin;
    /* Also reserve by placement (whole nodes, as for a due head) a head
     * that has a wait bound but is not due yet, so backfill is placed
     * around the GPUs it will take rather than counted against them. */
    bool shape_bounded;
    /* Reserve every due job: with the head reserved by placement, a due job
     * behind it that does not start now gets a reservation by placement
     * too, found on the snapshot that holds the earlier ones (conservative
     * backfill for due jobs), and backfill that would not end before the
     * earliest of them is placed around them all. */
    bool reserve_due;
    /* The EDF guard: a job that no due job could preempt once started (not
     * preemptible, or started within wait_margin + DRV_ADMIT_WAIT_GUARD of
     * its bound) is held (BLOCKED) when, placed on what due jobs could not
     * take back either, it makes more of the queued jobs with earlier wait
     * bounds miss them, tested earliest deadline first, each at its bound
     * (sched/edf.c). */
    bool edf_guard;
    /* Due stays due: a queued job with was_due is due whatever its
     * earliest start now. */
    bool sticky_due;
} drv_admit_input_t;

typedef enum drv_admit_state {
    DRV_JOB_WAITING = 0,        /* not considered (after the head, no backfill) */
    DRV_JOB_ADMITTED,           /* starts now, in order */
    DRV_JOB_BACKFILLED,         /* starts now, behind the head */
    DRV_JOB_HEAD,               /* does not fit; holds the reservation */
    DRV_JOB_BLOCKED,            /* would fit, but would delay the head */
    DRV_JOB_NO_FIT,             /* behind the head and does not fit now either */
    DRV_JOB_OVER_QUOTA,
    DRV_JOB_UNSCHEDULABLE,      /* would not fit even on its nodepools' empty nodes */
} drv_admit_state_t;

typedef struct drv_admit_verdict {
    drv_admit_state_t state;
    int position;               /* order in which the pass considered it; -1 */
    drv_sched_choice_t *ranks;  /* ADMITTED / BACKFILLED: gang.workers entries
                                   (owned by the result), else NULL */
    bool due;                   /* near its wait bound: ordered first */
    char why[192];
} drv_admit_verdict_t;

typedef struct drv_admit_result {
    drv_admit_verdict_t *jobs;  /* one per queue entry, in queue order */
    size_t n_jobs;
    size_t n_admitted;          /* ADMITTED + BACKFILLED */
    int head;                   /* queue index of the head, -1 none */
    double reservation;         /* the head's; INFINITY when unknown */
    size_t reserve_unplaced;    /* deployment replicas that did not fit */
} drv_admit_result_t;

/* 0 and out filled (free with drv_admit_result_free), or -1 with err (bad
 * input: a negative worker count, a NULL user; out of memory). */
int drv_admit(drv_sched_node_t *nodes, size_t n, const drv_admit_input_t *in,
              drv_admit_result_t *out, drv_error_t *err);
void drv_admit_result_free(drv_admit_result_t *r);

/* The priority a pass orders a job by: its own, plus one level per
 * aging_seconds it has waited at `now` (aging_seconds <= 0: its own). */
int drv_admit_effective_priority(const drv_admit_job_t *j, double now, double aging_seconds);

/* The priority a running job is weighed at as a preemption victim (pass
 * it as drv_admit_running_t.priority): its own (aged) priority, or INT_MAX
 * (never a victim) when it has a wait bound (bounded) and wait_left, the
 * seconds of queueing its bound leaves it, is at most wait_margin +
 * DRV_ADMIT_WAIT_GUARD: requeued, it would be due at once, take its GPUs
 * back first and the preemption would gain nothing (chosen on drover-sim's
 * tuning seeds, bench/jobs/README.md). */
#define DRV_ADMIT_WAIT_GUARD 1800.0
int drv_admit_victim_priority(int priority, bool bounded, double wait_left, double wait_margin);

/* Name of a state ("admitted", "head", ...). */
const char *drv_admit_state_name(drv_admit_state_t s);

/* Victims for `gang` at `priority`: victims[0..*n_victims) are indices
 * into running, most work lost first. The snapshot is left with the
 * victims released (what the gang would find); 0 victims when it fits
 * already. -1 with why, and the snapshot unchanged, when even stopping
 * every candidate would not make it fit. victims has room for n_running. */
int drv_admit_victims(drv_sched_node_t *nodes, size_t n, const drv_admit_running_t *running,
                      size_t n_running, const drv_gang_request_t *gang, int priority, double now,
                      const drv_place_policy_t *policy, size_t *victims, size_t *n_victims,
                      char *why, size_t why_len);

/* Work a running job loses if stopped now: GPUs x seconds since its last
 * checkpoint. */
double drv_admit_lost_work(const drv_admit_running_t *r, double now);

#endif
