/* test_admit.c — unit tests of job admission and preemption victims
 * (src/sched/admit.c, victims.c, edf.c): two gangs that each need 3 of 4
 * GPUs (one admitted, the other waits whole), priority order, dominant-resource fair share
 * between two users (progressive filling) against FIFO, per-user GPU
 * quota, deployments' reserved capacity first, EASY backfill (ends before
 * the reservation, or fits in the GPUs the head leaves spare; none without
 * a known reservation), a stream of small jobs that does not starve a
 * large gang (it starts exactly at its reservation), unschedulable jobs,
 * and victims: least work lost, then fewest victims, never a job of equal
 * or higher priority, snapshot unchanged when nothing helps. Aging: the
 * effective priority (levels, the cap); the pass's shortcuts (a job that
 * takes only GPUs the head cannot use still backfills); a low-priority gang that a
 * stream of higher-priority jobs starves without aging starts with it.
 * Wait bounds: the FIFO shadow's starts (strict order, shape-aware, no
 * estimate = never ends) and deadlines; the bounds rebuilt from recorded
 * starts on a fresh shadow (droverd's) agree with the online shadow; a job due by its bound goes before
 * a higher-priority one and holds the reservation; one not yet due does
 * not; a running job near its bound is never a victim. shape_bounded: a
 * bounded head not yet due is reserved by placement (whole nodes) and
 * backfill goes around it, where the count would block it. reserve_due: a
 * second due job behind the head holds a reservation too, and backfill
 * goes around both. edf_guard: work no due job could take back (not
 * preemptible, or protected by its own bound) is held when it would make
 * an earlier bound impossible, and only then. sticky_due: a job found due
 * by an earlier pass stays due when the GPUs it waited for are free, and
 * starts before a higher-priority job that would take them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/admit.h"
#include "sched/shadow.h"

#define NMAX 4
#define JMAX 64

static drv_sched_node_t nodes[NMAX];
static size_t n_nodes;

static void cluster(int n, int gpus_each)
{
    memset(nodes, 0, sizeof nodes);
    n_nodes = (size_t)n;
    for (int i = 0; i < n; i++) {
        drv_sched_node_t *nd = &nodes[i];
        static char ids[NMAX][8];
        snprintf(ids[i], sizeof ids[i], "n%d", i);
        nd->id = ids[i];
        nd->schedulable = true;
        nd->cpu_millis = 64000;
        nd->memory_mib = 512000;
        nd->n_gpus = gpus_each;
        for (int g = 0; g < gpus_each; g++) {
            nd->gpus[g].index = g;
            nd->gpus[g].type = "H100";
            nd->gpus[g].memory_mib = 80000;
            nd->gpus[g].healthy = true;
        }
    }
}

static drv_gang_request_t gang(int workers, int gpus)
{
    return (drv_gang_request_t){.workers = workers,
                                .worker = {.gpu_count = gpus, .compute_percent = 100,
                                           .cpu_millis = 1000, .memory_mib = 1000}};
}

static drv_admit_job_t job(const char *id, const char *user, int prio, double submit,
                           double duration, int workers, int gpus)
{
    return (drv_admit_job_t){.id = id, .user = user, .priority = prio, .submit_time = submit,
                             .duration = duration, .gang = gang(workers, gpus)};
}

/* running jobs, placed and committed in the order given */
static drv_admit_running_t running[JMAX];
static drv_sched_choice_t run_ranks[JMAX][16];
static size_t n_running;

static void run(const char *id, const char *user, int prio, bool preemptible, double end,
                double ckpt, int workers, int gpus)
{
    drv_admit_running_t *r = &running[n_running];
    *r = (drv_admit_running_t){.id = id, .user = user, .priority = prio,
                               .preemptible = preemptible, .expected_end = end,
                               .last_checkpoint = ckpt, .gang = gang(workers, gpus),
                               .ranks = run_ranks[n_running]};
    drv_gang_placement_t p = {.ranks = run_ranks[n_running]};
    assert_int_equal(drv_gang_place(nodes, n_nodes, &r->gang, NULL, &p, NULL, 0), 0);
    drv_gang_commit(nodes, &r->gang, run_ranks[n_running]);
    n_running++;
}

static drv_admit_job_t queue[JMAX];
static size_t n_queue;
static drv_admit_result_t res;

static double aging;            /* drv_admit_input_t.aging_seconds for admit() */
static double margin;           /* drv_admit_input_t.wait_margin */
static bool shape;              /* drv_admit_input_t.shape_bounded */
static bool rdue;               /* drv_admit_input_t.reserve_due */
static bool edf;                /* drv_admit_input_t.edf_guard */
static bool sticky;             /* drv_admit_input_t.sticky_due */

static void admit(double now, int order, bool backfill, const drv_admit_user_t *users,
                  size_t n_users)
{
    drv_admit_input_t in = {.now = now, .queue = queue, .n_queue = n_queue,
                            .running = running, .n_running = n_running, .users = users,
                            .n_users = n_users, .order = order, .backfill = backfill,
                            .aging_seconds = aging, .wait_margin = margin,
                            .shape_bounded = shape, .reserve_due = rdue, .edf_guard = edf,
                            .sticky_due = sticky};
    drv_error_t err;
    drv_admit_result_free(&res);
    assert_int_equal(drv_admit(nodes, n_nodes, &in, &res, &err), 0);
}

static void state_is(size_t q, drv_admit_state_t s)
{
    if (res.jobs[q].state != s)
        fail_msg("job %s: %s, want %s (%s)", queue[q].id, drv_admit_state_name(res.jobs[q].state),
                 drv_admit_state_name(s), res.jobs[q].why);
}

static int setup(void **state)
{
    (void)state;
    n_running = n_queue = 0;
    aging = 0;
    margin = 0;
    shape = rdue = edf = sticky = false;
    memset(&res, 0, sizeof res);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    drv_admit_result_free(&res);
    return 0;
}

static int gpus_held(void)
{
    int h = 0;
    for (size_t i = 0; i < n_nodes; i++)
        for (int g = 0; g < nodes[i].n_gpus; g++)
            h += nodes[i].gpus[g].shares;
    return h;
}

static void test_two_gangs_of_three(void **state)
{
    (void)state;
    cluster(2, 2);
    queue[n_queue++] = job("a", "u1", 0, 0, 100, 3, 1);
    queue[n_queue++] = job("b", "u2", 0, 1, 100, 3, 1);
    admit(10, DRV_ADMIT_FAIR, true, NULL, 0);
    state_is(0, DRV_JOB_ADMITTED);
    state_is(1, DRV_JOB_HEAD);
    assert_int_equal(res.n_admitted, 1);
    assert_int_equal(res.head, 1);
    assert_null(res.jobs[1].ranks);
    assert_int_equal(gpus_held(), 3);   /* b holds nothing */
    /* a, admitted at 10 for 100 s, frees its GPUs at 110 */
    assert_float_equal(res.reservation, 110, 1e-9);
    assert_non_null(strstr(res.jobs[1].why, "needs 3×1 GPU, at most 1 free"));
}

static void test_priority_order(void **state)
{
    (void)state;
    cluster(1, 4);
    queue[n_queue++] = job("low", "u1", 0, 0, 100, 4, 1);
    queue[n_queue++] = job("high", "u1", 5, 10, 100, 4, 1);
    admit(20, DRV_ADMIT_FAIR, true, NULL, 0);
    state_is(1, DRV_JOB_ADMITTED);
    state_is(0, DRV_JOB_HEAD);
    assert_int_equal(res.jobs[1].position, 0);
    assert_int_equal(res.jobs[0].position, 1);
    assert_float_equal(res.reservation, 120, 1e-9);   /* when "high" ends */
}

static void test_fair_share(void **state)
{
    (void)state;
    /* u1 already holds 4 of 8 GPUs; 2 free: u2's later job goes first */
    cluster(1, 8);
    run("r1", "u1", 0, false, 1000, 0, 4, 1);
    run("r2", "u3", 0, false, 1000, 0, 2, 1);
    queue[n_queue++] = job("u1-job", "u1", 0, 0, 10, 2, 1);
    queue[n_queue++] = job("u2-job", "u2", 0, 5, 10, 2, 1);
    admit(10, DRV_ADMIT_FAIR, false, NULL, 0);
    state_is(1, DRV_JOB_ADMITTED);
    state_is(0, DRV_JOB_HEAD);
    /* FIFO: the older one */
    cluster(1, 8);
    n_running = 0;
    run("r1", "u1", 0, false, 1000, 0, 4, 1);
    run("r2", "u3", 0, false, 1000, 0, 2, 1);
    admit(10, DRV_ADMIT_FIFO, false, NULL, 0);
    state_is(0, DRV_JOB_ADMITTED);
    state_is(1, DRV_JOB_HEAD);
}

static void test_progressive_filling(void **state)
{
    (void)state;
    /* 8 free GPUs; u1 has three 2-GPU jobs, u2 two: u1, u2, u1, u2, u1 */
    cluster(1, 8);
    queue[n_queue++] = job("a1", "u1", 0, 0, 10, 1, 2);
    queue[n_queue++] = job("a2", "u1", 0, 1, 10, 1, 2);
    queue[n_queue++] = job("a3", "u1", 0, 2, 10, 1, 2);
    queue[n_queue++] = job("b1", "u2", 0, 3, 10, 1, 2);
    queue[n_queue++] = job("b2", "u2", 0, 4, 10, 1, 2);
    admit(5, DRV_ADMIT_FAIR, true, NULL, 0);
    int want_pos[5] = {0, 2, 4, 1, 3};
    for (int i = 0; i < 5; i++)
        assert_int_equal(res.jobs[i].position, want_pos[i]);
    state_is(0, DRV_JOB_ADMITTED);
    state_is(1, DRV_JOB_ADMITTED);
    state_is(3, DRV_JOB_ADMITTED);
    state_is(4, DRV_JOB_ADMITTED);
    state_is(2, DRV_JOB_HEAD);
}

static void test_quota(void **state)
{
    (void)state;
    cluster(1, 8);
    const drv_admit_user_t users[] = {{"u1", 3}};
    queue[n_queue++] = job("a1", "u1", 0, 0, 10, 2, 1);
    queue[n_queue++] = job("a2", "u1", 0, 1, 10, 2, 1);
    queue[n_queue++] = job("b1", "u2", 0, 2, 10, 6, 1);
    admit(5, DRV_ADMIT_FAIR, true, users, 1);
    state_is(0, DRV_JOB_ADMITTED);
    state_is(1, DRV_JOB_OVER_QUOTA);
    state_is(2, DRV_JOB_ADMITTED);      /* the over-quota job holds no reservation */
    assert_int_equal(res.head, -1);
    assert_string_equal(res.jobs[1].why, "user u1 holds 2 GPUs; 2 more would pass the quota of 3");
}

static void test_reserved_first(void **state)
{
    (void)state;
    cluster(1, 4);
    queue[n_queue++] = job("big", "u1", 0, 0, 10, 4, 1);
    queue[n_queue++] = job("small", "u1", 0, 1, 10, 2, 1);
    const drv_admit_reserve_t rsv[] = {{"llm", gang(2, 1)}};
    drv_admit_input_t in = {.now = 5, .queue = queue, .n_queue = n_queue, .reserve = rsv,
                            .n_reserve = 1, .backfill = true};
    assert_int_equal(drv_admit(nodes, n_nodes, &in, &res, NULL), 0);
    state_is(0, DRV_JOB_HEAD);
    /* no running job ends: no reservation, so "small" may not backfill */
    state_is(1, DRV_JOB_BLOCKED);
    assert_int_equal(res.reserve_unplaced, 0);
    assert_int_equal(gpus_held(), 2);
}

static void test_backfill(void **state)
{
    (void)state;
    /* 8 GPUs, 6 held until t=100; the big gang needs all 8 */
    cluster(1, 8);
    run("r", "u0", 0, false, 100, 0, 6, 1);
    queue[n_queue++] = job("big", "u1", 0, 0, 500, 8, 1);
    queue[n_queue++] = job("short", "u2", 0, 1, 50, 2, 1);   /* ends at 60 <= 100 */
    queue[n_queue++] = job("long", "u3", 0, 2, 200, 2, 1);   /* would delay big */
    admit(10, DRV_ADMIT_FAIR, true, NULL, 0);
    state_is(0, DRV_JOB_HEAD);
    assert_float_equal(res.reservation, 100, 1e-9);
    state_is(1, DRV_JOB_BACKFILLED);
    state_is(2, DRV_JOB_NO_FIT);    /* short took the 2 free GPUs */
    /* without "short": long fits now but would delay big */
    queue[1] = queue[2];
    n_queue = 2;
    cluster(1, 8);
    n_running = 0;
    run("r", "u0", 0, false, 100, 0, 6, 1);
    admit(10, DRV_ADMIT_FAIR, true, NULL, 0);
    state_is(1, DRV_JOB_BLOCKED);
    assert_string_equal(res.jobs[1].why, "would delay job big past its reservation");
    /* no backfill at all (FIFO): waits */
    admit(10, DRV_ADMIT_FIFO, false, NULL, 0);
    state_is(1, DRV_JOB_WAITING);
    /* 10 GPUs: big leaves 2 spare at t=100, so long backfills on them */
    cluster(1, 10);
    n_running = 0;
    run("r", "u0", 0, false, 100, 0, 8, 1);
    admit(10, DRV_ADMIT_FAIR, true, NULL, 0);
    state_is(0, DRV_JOB_HEAD);
    state_is(1, DRV_JOB_BACKFILLED);
}

/* a stream of small jobs (2 GPUs, 10 s, one every 2 s, alternating users)
 * and one 8-GPU gang at t=5 on 8 GPUs: the gang starts at its
 * reservation, t=14, though small jobs keep coming; a 3-second small job
 * at t=6 backfills. */
static void test_no_starvation(void **state)
{
    (void)state;
    cluster(1, 8);
    typedef struct {
        drv_admit_job_t j;
        double start, end;
        drv_sched_choice_t ranks[8];
    } sj_t;
    static sj_t all[JMAX];
    size_t n_all = 0;
    static char ids[JMAX][8];
    for (int k = 0; k < 30; k++) {
        snprintf(ids[n_all], sizeof ids[n_all], "s%d", k);
        all[n_all].j = job(ids[n_all], k % 2 ? "u1" : "u2", 0, 2.0 * k, 10, 1, 2);
        n_all++;
    }
    all[n_all++].j = job("big", "u3", 0, 5, 20, 8, 1);
    all[n_all++].j = job("tiny", "u4", 0, 6, 3, 1, 2);
    for (size_t i = 0; i < n_all; i++)
        all[i].start = all[i].end = -1;
    double first_reservation = -1, big_start = -1, tiny_start = -1;
    size_t map[JMAX];
    for (int t = 0; t <= 80; t++) {
        n_queue = n_running = 0;
        for (size_t i = 0; i < n_all; i++) {
            sj_t *s = &all[i];
            if (s->start >= 0 && s->end <= t && s->end >= 0 && s->end != -2) {
                drv_gang_release(nodes, &s->j.gang, s->ranks);
                s->end = -2;    /* done */
            }
        }
        for (size_t i = 0; i < n_all; i++) {
            sj_t *s = &all[i];
            if (s->start < 0 && s->j.submit_time <= t) {
                map[n_queue] = i;
                queue[n_queue++] = s->j;
            } else if (s->start >= 0 && s->end != -2) {
                running[n_running++] = (drv_admit_running_t){
                    .id = s->j.id, .user = s->j.user, .expected_end = s->end,
                    .gang = s->j.gang, .ranks = s->ranks};
            }
        }
        admit(t, DRV_ADMIT_FAIR, true, NULL, 0);
        if (res.head >= 0 && strcmp(queue[res.head].id, "big") == 0 && first_reservation < 0)
            first_reservation = res.reservation;
        for (size_t q = 0; q < n_queue; q++)
            if (res.jobs[q].ranks) {
                sj_t *s = &all[map[q]];
                memcpy(s->ranks, res.jobs[q].ranks, sizeof *s->ranks * (size_t)s->j.gang.workers);
                s->start = t;
                s->end = t + s->j.duration;
                if (strcmp(s->j.id, "big") == 0)
                    big_start = t;
                if (strcmp(s->j.id, "tiny") == 0) {
                    tiny_start = t;
                    state_is(q, DRV_JOB_BACKFILLED);
                }
            }
    }
    assert_float_equal(first_reservation, 14, 1e-9);
    assert_float_equal(big_start, 14, 1e-9);
    assert_float_equal(tiny_start, 6, 1e-9);
}

static void test_unschedulable(void **state)
{
    (void)state;
    cluster(1, 4);
    queue[n_queue++] = job("huge", "u1", 9, 0, 10, 8, 1);
    queue[n_queue++] = job("ok", "u1", 0, 1, 10, 2, 1);
    admit(5, DRV_ADMIT_FAIR, true, NULL, 0);
    state_is(0, DRV_JOB_UNSCHEDULABLE);
    state_is(1, DRV_JOB_ADMITTED);
    drv_error_t err;
    queue[0].gang.workers = 0;
    drv_admit_input_t in = {.queue = queue, .n_queue = n_queue};
    drv_admit_result_free(&res);
    assert_int_equal(drv_admit(nodes, n_nodes, &in, &res, &err), -1);
    assert_string_equal(err.message, "job huge: workers must be 1 to 4096, not 0");
}

static void test_victims(void **state)
{
    (void)state;
    size_t v[JMAX], nv = 99;
    char why[256];
    drv_gang_request_t need = gang(4, 1);
    /* one 8-GPU node, full: A 4 GPUs (lost 4 x 10 = 40), B and C 2 GPUs
     * (2 x 5 = 10 each): B + C lose 20 < 40 */
    cluster(1, 8);
    run("A", "u", 0, true, 0, 90, 4, 1);
    run("B", "u", 0, true, 0, 95, 2, 1);
    run("C", "u", 0, true, 0, 95, 2, 1);
    assert_int_equal(drv_admit_victims(nodes, n_nodes, running, n_running, &need, 10, 100, NULL,
                                       v, &nv, why, sizeof why), 0);
    assert_int_equal(nv, 2);
    assert_true((v[0] == 1 && v[1] == 2) || (v[0] == 2 && v[1] == 1));
    assert_int_equal(gpus_held(), 4);
    /* B and C lose 2 x 15 each = 60 > 40: A alone */
    cluster(1, 8);
    n_running = 0;
    run("A", "u", 0, true, 0, 90, 4, 1);
    run("B", "u", 0, true, 0, 85, 2, 1);
    run("C", "u", 0, true, 0, 85, 2, 1);
    assert_int_equal(drv_admit_victims(nodes, n_nodes, running, n_running, &need, 10, 100, NULL,
                                       v, &nv, why, sizeof why), 0);
    assert_int_equal(nv, 1);
    assert_int_equal(v[0], 0);
    /* equal loss (A 4 x 5 = 20, B + C 2 x 5 x 2 = 20): the fewest victims, A */
    cluster(1, 8);
    n_running = 0;
    run("A", "u", 0, true, 0, 95, 4, 1);
    run("B", "u", 0, true, 0, 95, 2, 1);
    run("C", "u", 0, true, 0, 95, 2, 1);
    assert_int_equal(drv_admit_victims(nodes, n_nodes, running, n_running, &need, 10, 100, NULL,
                                       v, &nv, why, sizeof why), 0);
    assert_int_equal(nv, 1);
    assert_int_equal(v[0], 0);
    /* A of higher priority, C not preemptible: only B is a candidate,
     * which is not enough: -1, the snapshot unchanged */
    cluster(1, 8);
    n_running = 0;
    run("A", "u", 20, true, 0, 95, 4, 1);
    run("B", "u", 0, true, 0, 95, 2, 1);
    run("C", "u", 0, false, 0, 95, 2, 1);
    drv_sched_node_t before[1];
    memcpy(before, nodes, sizeof before);
    assert_int_equal(drv_admit_victims(nodes, n_nodes, running, n_running, &need, 10, 100, NULL,
                                       v, &nv, why, sizeof why), -1);
    assert_memory_equal(before, nodes, sizeof before);
    assert_string_equal(why, "needs 4×1 GPU; preempting all 1 preemptible job(s) of lower "
                             "priority would not make room");
    /* it fits already: no victims */
    need = gang(1, 0);
    assert_int_equal(drv_admit_victims(nodes, n_nodes, running, n_running, &need, 10, 100, NULL,
                                       v, &nv, why, sizeof why), 0);
    assert_int_equal(nv, 0);
}

/* The pass skips placing jobs behind the head that cannot fit or would be
 * blocked anyway; decisions stay those of placing them: a job that can
 * only take GPUs the head cannot use still backfills past the reservation,
 * and nothing the pass did not admit holds a GPU. */
static void test_backfill_shortcuts(void **state)
{
    (void)state;
    static const char *const h100[] = {"H100"}, *const l4[] = {"L4"};
    cluster(2, 4);
    for (int g = 0; g < 4; g++)
        nodes[1].gpus[g].type = "L4";
    nodes[1].schedulable = false;                    /* so that r lands on n0's H100s */
    run("r", "u0", 0, false, 100, 0, 2, 1);          /* 2 GPUs until t=100 */
    nodes[1].schedulable = true;
    drv_admit_job_t big = job("big", "u1", 0, 0, 500, 4, 1);
    big.gang.worker.gpu_types = h100;
    big.gang.worker.n_gpu_types = 1;
    drv_admit_job_t other = job("on-l4", "u2", 0, 1, 1000, 2, 1); /* ends after t=100 */
    other.gang.worker.gpu_types = l4;
    other.gang.worker.n_gpu_types = 1;
    queue[n_queue++] = big;
    queue[n_queue++] = other;
    admit(10, DRV_ADMIT_FAIR, true, NULL, 0);
    state_is(0, DRV_JOB_HEAD);
    assert_float_equal(res.reservation, 100, 1e-9);
    /* ends at 1010, after the reservation, but the head can use only H100s:
     * on-l4 takes none of them and backfills */
    state_is(1, DRV_JOB_BACKFILLED);
    /* an unconstrained head: 8 GPUs, 6 held until t=100, head needs 8; behind
     * it jobs that end after t=100 (blocked without being placed), one too
     * big for what is free (no fit), one that ends in time (backfilled) */
    cluster(1, 8);
    n_running = n_queue = 0;
    run("r", "u0", 0, false, 100, 0, 6, 1);
    queue[n_queue++] = job("head", "u1", 0, 0, 500, 8, 1);
    queue[n_queue++] = job("long1", "u2", 0, 1, 200, 1, 1);
    queue[n_queue++] = job("toobig", "u3", 0, 2, 10, 1, 4);
    queue[n_queue++] = job("long2", "u4", 0, 3, 300, 2, 1);
    queue[n_queue++] = job("short", "u5", 0, 4, 50, 2, 1);
    admit(10, DRV_ADMIT_FAIR, true, NULL, 0);
    state_is(0, DRV_JOB_HEAD);
    state_is(1, DRV_JOB_BLOCKED);
    state_is(2, DRV_JOB_NO_FIT);
    state_is(3, DRV_JOB_BLOCKED);
    state_is(4, DRV_JOB_BACKFILLED);
    assert_int_equal(res.n_admitted, 1);
    assert_int_equal(gpus_held(), 8);   /* r's 6 and short's 2, nothing else */
    for (int q = 0; q < 4; q++)
        assert_null(res.jobs[q].ranks);
}

static void test_effective_priority(void **state)
{
    (void)state;
    drv_admit_job_t j = job("j", "u1", 3, 100, 10, 1, 1);
    assert_int_equal(drv_admit_effective_priority(&j, 50, 600), 3);     /* not yet submitted */
    assert_int_equal(drv_admit_effective_priority(&j, 699, 600), 3);
    assert_int_equal(drv_admit_effective_priority(&j, 700, 600), 4);
    assert_int_equal(drv_admit_effective_priority(&j, 100 + 6000, 600), 13);
    assert_int_equal(drv_admit_effective_priority(&j, 1e9, 0), 3);      /* off */
    assert_int_equal(drv_admit_effective_priority(&j, 1e300, 1e-3), INT_MAX); /* capped */
    /* FIFO order ignores aging */
    cluster(1, 4);
    queue[n_queue++] = job("old", "u1", 0, 0, 100, 4, 1);
    queue[n_queue++] = job("new", "u1", 5, 9000, 100, 4, 1);
    aging = 600;
    admit(9000, DRV_ADMIT_FAIR, true, NULL, 0);
    state_is(0, DRV_JOB_ADMITTED);      /* 0 + 15 levels > 5 */
    state_is(1, DRV_JOB_HEAD);
    cluster(1, 4);
    aging = 0;
    admit(9000, DRV_ADMIT_FAIR, true, NULL, 0);
    state_is(1, DRV_JOB_ADMITTED);
    state_is(0, DRV_JOB_HEAD);
}

/* A 4-GPU gang of priority 0 on 4 GPUs, and every 50 s a new 1-GPU job of
 * priority 10 running 120 s: each pass admits the newcomers first, so the
 * gang never finds 4 free GPUs. Returns when it started, or -1 if it did
 * not in `steps` passes. */
static double stream_start(double aging_s, int steps)
{
    static char ids[JMAX][16];
    double end[JMAX] = {0};
    bool started[JMAX] = {false}, done[JMAX] = {false};
    size_t nj = 0;
    setup(NULL);
    aging = aging_s;
    drv_admit_job_t all[JMAX];
    all[nj++] = job("big", "u1", 0, 0, 100, 4, 1);
    double big_start = -1;
    for (int k = 0; k < steps && big_start < 0; k++) {
        double now = 50.0 * k;
        size_t slot = (size_t)k % (JMAX - 1) + 1;  /* reuse finished jobs' slots */
        assert_true(slot >= nj || done[slot]);
        snprintf(ids[slot], sizeof ids[slot], "h%d", k);
        all[slot] = job(ids[slot], "u2", 10, now, 120, 1, 1);
        started[slot] = done[slot] = false;
        if (slot >= nj)
            nj = slot + 1;
        /* the snapshot at now: the jobs still running, placed afresh */
        cluster(1, 4);
        n_running = n_queue = 0;
        size_t qmap[JMAX];
        for (size_t i = 0; i < nj; i++) {
            if (started[i] && !done[i] && end[i] <= now)
                done[i] = true;
            if (started[i] && !done[i])
                run(all[i].id, all[i].user, all[i].priority, false, end[i], 0,
                    all[i].gang.workers, all[i].gang.worker.gpu_count);
            else if (!started[i]) {
                qmap[n_queue] = i;
                queue[n_queue++] = all[i];
            }
        }
        admit(now, DRV_ADMIT_FAIR, true, NULL, 0);
        for (size_t q = 0; q < n_queue; q++)
            if (res.jobs[q].ranks) {
                size_t i = qmap[q];
                started[i] = true;
                end[i] = now + all[i].duration;
                if (i == 0)
                    big_start = now;
            }
    }
    drv_admit_result_free(&res);
    return big_start;
}

static void test_aging_prevents_starvation(void **state)
{
    (void)state;
    /* without aging: 400 passes (20,000 s), the gang never starts */
    assert_true(stream_start(0, 400) < 0);
    /* with aging 600 s: at 10 levels (6,000 s) it ties the newcomers'
     * priority and wins on fair share (u1 holds nothing), holds the
     * reservation, and starts when the running ones have ended */
    double t = stream_start(600, 400);
    if (t < 6000 || t > 6000 + 120 + 50)
        fail_msg("the gang started at %g, want 6000..6170", t);
}

static void test_fifo_shadow(void **state)
{
    (void)state;
    cluster(2, 4);
    drv_error_t err;
    drv_fifo_shadow_t *sh = drv_fifo_shadow_create(nodes, n_nodes, NULL, &err);
    assert_non_null(sh);
    double t;
    drv_gang_request_t a = gang(2, 4), b = gang(1, 4), c = gang(1, 1), d = gang(2, 4);
    assert_int_equal(drv_fifo_shadow_submit(sh, 0, &a, 100, &t, &err), 0);
    assert_float_equal(t, 0, 1e-9);                 /* both nodes, until 100 */
    assert_int_equal(drv_fifo_shadow_submit(sh, 10, &b, 50, &t, &err), 0);
    assert_float_equal(t, 100, 1e-9);               /* waits for a */
    assert_int_equal(drv_fifo_shadow_submit(sh, 20, &c, 500, &t, &err), 0);
    assert_float_equal(t, 100, 1e-9);               /* never before b: strict order */
    assert_int_equal(drv_fifo_shadow_submit(sh, 30, &d, 0, &t, &err), 0);
    assert_float_equal(t, 600, 1e-9);               /* both whole nodes: after c ends */
    assert_int_equal(drv_fifo_shadow_submit(sh, 40, &c, 10, &t, &err), 0);
    assert_true(isinf(t));                          /* behind d, which has no estimate */
    drv_gang_request_t bad = gang(0, 1);
    assert_int_equal(drv_fifo_shadow_submit(sh, 50, &bad, 10, &t, &err), -1);
    drv_fifo_shadow_destroy(sh);
    /* the bound: submit + 2 x max(FIFO wait, floor) */
    assert_float_equal(drv_wait_deadline(10, 100, 2, 600), 1210, 1e-9);
    assert_float_equal(drv_wait_deadline(30, 2030, 2, 600), 4030, 1e-9);
    assert_true(isinf(drv_wait_deadline(40, INFINITY, 2, 600)));
}

/* drv_fifo_shadow_bounds, as droverd uses it: recorded starts replayed on
 * a fresh shadow give the bound the online shadow gives */
static void test_shadow_bounds(void **state)
{
    (void)state;
    cluster(2, 4);
    drv_error_t err;
    drv_wait_job_t j[5] = {
        {.submit = 0, .est = 100, .gang = gang(2, 4), .fifo_start = NAN},
        {.submit = 10, .est = 50, .gang = gang(1, 4), .fifo_start = NAN},
        {.submit = 20, .est = 500, .gang = gang(1, 1), .fifo_start = NAN},
    };
    assert_int_equal(drv_fifo_shadow_bounds(nodes, n_nodes, NULL, j, 3, 2, 600, &err), 0);
    assert_float_equal(j[0].fifo_start, 0, 1e-9);
    assert_float_equal(j[1].fifo_start, 100, 1e-9);
    assert_float_equal(j[2].fifo_start, 100, 1e-9);
    assert_float_equal(j[1].deadline, 1210, 1e-9);
    /* a head restarted: the three recorded, a fourth new one. Online it
     * would wait for b's whole node (c holds a GPU of the other) */
    j[3] = (drv_wait_job_t){.submit = 30, .est = 10, .gang = gang(1, 4), .fifo_start = NAN};
    assert_int_equal(drv_fifo_shadow_bounds(nodes, n_nodes, NULL, j, 4, 2, 600, &err), 0);
    assert_float_equal(j[1].fifo_start, 100, 1e-9);     /* known ones unchanged */
    assert_float_equal(j[3].fifo_start, 150, 1e-9);
    assert_float_equal(j[3].deadline, 30 + 2 * 600, 1e-9);
    drv_fifo_shadow_t *sh = drv_fifo_shadow_create(nodes, n_nodes, NULL, &err);
    assert_non_null(sh);
    double t = 0;
    for (int i = 0; i < 4; i++)
        assert_int_equal(drv_fifo_shadow_submit(sh, j[i].submit, &j[i].gang, j[i].est, &t, &err),
                         0);
    assert_float_equal(t, 150, 1e-9);                  /* the online shadow agrees */
    drv_fifo_shadow_destroy(sh);
    /* known jobs that ended before the new one's submit, or had no start,
     * do not delay it; nothing unknown: nothing done */
    drv_wait_job_t k[3] = {
        {.submit = 0, .est = 5, .gang = gang(2, 4), .fifo_start = 0},
        {.submit = 1, .est = 50, .gang = gang(2, 4), .fifo_start = INFINITY},
        {.submit = 10, .est = 5, .gang = gang(2, 4), .fifo_start = NAN},
    };
    assert_int_equal(drv_fifo_shadow_bounds(nodes, n_nodes, NULL, k, 2, 2, 600, &err), 0);
    assert_int_equal(drv_fifo_shadow_bounds(nodes, n_nodes, NULL, k, 3, 2, 600, &err), 0);
    assert_float_equal(k[2].fifo_start, 10, 1e-9);
    assert_float_equal(k[2].deadline, 1210, 1e-9);
    /* a gang no node could hold: no bound */
    k[2] = (drv_wait_job_t){.submit = 10, .est = 5, .gang = gang(3, 4), .fifo_start = NAN};
    assert_int_equal(drv_fifo_shadow_bounds(nodes, n_nodes, NULL, k, 3, 2, 600, &err), 0);
    assert_true(isinf(k[2].fifo_start) && isinf(k[2].deadline));
    /* bad input: an error, not a crash */
    k[2] = (drv_wait_job_t){.submit = 10, .est = 5, .gang = gang(0, 4), .fifo_start = NAN};
    assert_int_equal(drv_fifo_shadow_bounds(nodes, n_nodes, NULL, k, 3, 2, 600, &err), -1);
    /* a requeued job: its queueing budget less what it queued before */
    assert_float_equal(drv_wait_requeued(1230, 30, 30, 0), 1230, 1e-9);
    assert_float_equal(drv_wait_requeued(1230, 30, 500, 100), 1600, 1e-9);
    assert_true(isinf(drv_wait_requeued(INFINITY, 30, 500, 100)));
}

static void test_due_first(void **state)
{
    (void)state;
    cluster(1, 4);
    run("r", "u9", 0, false, 1000, 0, 4, 1);
    queue[n_queue] = job("old", "u1", 0, 0, 100, 4, 1);
    queue[n_queue++].wait_deadline = 1200;
    queue[n_queue++] = job("hi", "u2", 5, 100, 100, 4, 1);
    margin = 600;
    /* at 500 old's earliest start (1000, when r ends) is past 1200 - 600: due */
    admit(500, DRV_ADMIT_FAIR, true, NULL, 0);
    assert_true(res.jobs[0].due);
    assert_false(res.jobs[1].due);
    assert_int_equal(res.jobs[0].position, 0);
    state_is(0, DRV_JOB_HEAD);
    assert_float_equal(res.reservation, 1000, 1e-9);
    /* a bound far off: not due, priority decides */
    queue[0].wait_deadline = 5000;
    admit(500, DRV_ADMIT_FAIR, true, NULL, 0);
    assert_false(res.jobs[0].due);
    assert_int_equal(res.jobs[1].position, 0);
    state_is(1, DRV_JOB_HEAD);
    /* no bound at all: never due */
    queue[0].wait_deadline = 0;
    admit(4000, DRV_ADMIT_FAIR, true, NULL, 0);
    assert_false(res.jobs[0].due);
    /* a running job near its bound is never a victim; far from it, its own priority */
    assert_int_equal(drv_admit_victim_priority(3, true, 100, 600), INT_MAX);
    assert_int_equal(drv_admit_victim_priority(3, true, 600 + DRV_ADMIT_WAIT_GUARD + 1, 600), 3);
    assert_int_equal(drv_admit_victim_priority(3, false, 0, 600), 3);
}

/* shape_bounded: a head with a bound, not yet due, reserved by placement.
 * 2 nodes x 4 GPUs, 3 held on each (ends 100 and 200): 2 GPUs free, one
 * per node. A 1 x 2-GPU head: the count says it could start now (2 free)
 * and leaves nothing spare, so a long 1-GPU job is blocked; by placement
 * it starts at 100 where r0 was, and the 1-GPU job backfills on a GPU
 * that leaves it room then. */
static void test_bounded_head_reserved_by_placement(void **state)
{
    (void)state;
    cluster(2, 4);
    run("r0", "u9", 0, false, 100, 0, 1, 3);
    run("r1", "u9", 0, false, 200, 0, 1, 3);
    assert_int_not_equal(run_ranks[0][0].node, run_ranks[1][0].node);
    queue[n_queue] = job("big", "u1", 0, 0, 1000, 1, 2);
    queue[n_queue++].wait_deadline = 10000;
    queue[n_queue++] = job("small", "u2", 0, 1, 5000, 1, 1);
    margin = 600;
    admit(10, DRV_ADMIT_FAIR, true, NULL, 0);   /* by count */
    assert_false(res.jobs[0].due);
    state_is(0, DRV_JOB_HEAD);
    assert_float_equal(res.reservation, 10, 1e-9);
    state_is(1, DRV_JOB_BLOCKED);
    shape = true;
    admit(10, DRV_ADMIT_FAIR, true, NULL, 0);   /* by placement */
    assert_false(res.jobs[0].due);
    state_is(0, DRV_JOB_HEAD);
    assert_float_equal(res.reservation, 100, 1e-9);
    state_is(1, DRV_JOB_BACKFILLED);
}

/* reserve_due: 3 nodes x 4 GPUs, 3 held on each (ends 100, 200, 10000).
 * Two due 1 x 4-GPU jobs: d1 (earlier deadline) is the head, reserved on
 * n0 from 100; d2 behind it would get n1 at 200. A long 1-GPU job that
 * backfills takes the first node that ties, n1, and pushes d2 to 5000,
 * unless d2 holds n1 too: then it goes on n2. */
static void test_due_behind_head_reserved(void **state)
{
    (void)state;
    cluster(3, 4);
    run("r0", "u9", 0, false, 100, 0, 1, 3);
    run("r1", "u9", 0, false, 200, 0, 1, 3);
    run("r2", "u9", 0, false, 10000, 0, 1, 3);
    assert_int_equal(run_ranks[1][0].node, 1);
    queue[n_queue] = job("d1", "u1", 0, 0, 1000, 1, 4);
    queue[n_queue++].wait_deadline = 500;
    queue[n_queue] = job("d2", "u2", 0, 0, 1000, 1, 4);
    queue[n_queue++].wait_deadline = 600;
    queue[n_queue++] = job("small", "u3", 0, 1, 5000, 1, 1);
    margin = 600;
    shape = true;
    drv_sched_node_t before[NMAX];
    memcpy(before, nodes, sizeof nodes);
    for (int with = 0; with < 2; with++) {
        memcpy(nodes, before, sizeof nodes);   /* admit() commits what it admits */
        rdue = with;
        admit(5, DRV_ADMIT_FAIR, true, NULL, 0);
        assert_true(res.jobs[0].due && res.jobs[1].due);
        state_is(0, DRV_JOB_HEAD);
        assert_float_equal(res.reservation, 100, 1e-9);
        state_is(1, DRV_JOB_NO_FIT);
        state_is(2, DRV_JOB_BACKFILLED);
        assert_int_equal(res.jobs[2].ranks[0].node, with ? 2 : 1);
        assert_true((strstr(res.jobs[1].why, "reserved from t=200") != NULL) == with);
    }
}

/* edf_guard: 2 nodes x 4 GPUs; n0 held to 10000 by a job that is not
 * preemptible, n1 half held to 300 by a preemptible one. d (1 x 4 GPUs,
 * bound 1000, priority 0) is not due (its start, 300, is before 1000 -
 * 600) and x (1 x 2 GPUs, priority 5, to 5000) goes first and fits on n1.
 * Started, x would pin n1 past 1000, where d, which no victim could then
 * help, needs a whole node: held. Preemptible, or ending before 1000, or
 * with the guard off, x starts. */
static void test_edf_guard(void **state)
{
    (void)state;
    margin = 600;
    struct {
        bool guard, preemptible;
        double duration, x_bound;
        drv_admit_state_t want;
    } cases[] = {
        {false, false, 5000, 0, DRV_JOB_ADMITTED},
        {true, false, 5000, 0, DRV_JOB_BLOCKED},
        {true, true, 5000, 0, DRV_JOB_ADMITTED},   /* a due d could preempt it */
        {true, false, 500, 0, DRV_JOB_ADMITTED},   /* gone by d's bound */
        {true, true, 5000, 1500, DRV_JOB_BLOCKED}, /* protected by its own bound */
        {true, true, 5000, 900, DRV_JOB_ADMITTED}, /* its bound comes first */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        setup(NULL);
        margin = 600;
        cluster(2, 4);
        run("r0", "u9", 0, false, 10000, 0, 1, 4);
        run("p", "u8", 0, true, 300, 0, 1, 2);
        queue[n_queue] = job("d", "u1", 0, 0, 1000, 1, 4);
        queue[n_queue++].wait_deadline = 1000;
        queue[n_queue] = job("x", "u2", 5, 0, cases[c].duration, 1, 2);
        queue[n_queue].preemptible = cases[c].preemptible;
        queue[n_queue++].wait_deadline = cases[c].x_bound;
        edf = cases[c].guard;
        admit(0, DRV_ADMIT_FAIR, true, NULL, 0);
        assert_false(res.jobs[0].due);
        state_is(1, cases[c].want);
        if (cases[c].want == DRV_JOB_BLOCKED) {
            assert_non_null(strstr(res.jobs[1].why, "miss its wait bound t=1000"));
            state_is(0, DRV_JOB_HEAD);
        }
        teardown(NULL);
    }
}

/* sticky_due: 1 node x 4 GPUs, free now (say its victims have just
 * gone). d (1 x 1 GPU, priority 0, bound 1000) could start now, so by the
 * due test alone it is not due at 0 (0 < 1000 - 600) and hi (1 x 4 GPUs,
 * priority 5) takes the node. Found due by an earlier pass (was_due), d stays due with
 * sticky_due and starts first; was_due without the rule, or the rule
 * without was_due, changes nothing. */
static void test_sticky_due(void **state)
{
    (void)state;
    struct {
        bool rule, was_due;
        size_t admitted;
    } cases[] = {{false, false, 1}, {false, true, 1}, {true, false, 1}, {true, true, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        setup(NULL);
        margin = 600;
        shape = rdue = edf = true;
        cluster(1, 4);
        queue[n_queue] = job("d", "u1", 0, 0, 1000, 1, 1);
        queue[n_queue].was_due = cases[c].was_due;
        queue[n_queue++].wait_deadline = 1000;
        queue[n_queue++] = job("hi", "u2", 5, 0, 1000, 1, 4);
        sticky = cases[c].rule;
        admit(0, DRV_ADMIT_FAIR, true, NULL, 0);
        if (res.jobs[0].due != (cases[c].admitted == 0))
            fail_msg("case %zu: due %d", c, res.jobs[0].due);
        state_is(cases[c].admitted, DRV_JOB_ADMITTED);
        state_is(1 - cases[c].admitted, DRV_JOB_HEAD);
        teardown(NULL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_two_gangs_of_three, setup, teardown),
        cmocka_unit_test_setup_teardown(test_priority_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fair_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progressive_filling, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quota, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reserved_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_backfill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_starvation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unschedulable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_victims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_backfill_shortcuts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_effective_priority, setup, teardown),
        cmocka_unit_test_setup_teardown(test_aging_prevents_starvation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_shadow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shadow_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_due_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounded_head_reserved_by_placement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_due_behind_head_reserved, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edf_guard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sticky_due, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
