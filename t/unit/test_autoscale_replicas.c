/* test_autoscale_replicas.c — unit tests of the replica autoscaler
 * (src/autoscale/replicas.c) on synthetic load series driven by a virtual
 * clock: the history average (window, irregular sampling, restart on a new
 * history length), clamping, every delay (up, down, to zero), the burst
 * reaction, scale from zero on demand, starting replicas kept, cold starts
 * (rule 0: no overshoot for a backlog, on a fluid model of a deployment;
 * the growth cap; a sustained rise still scales), victim order, and config
 * validation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autoscale/replicas.h"

#define S 1000LL   /* ms per second */

static drv_ras_config_t base_cfg(void)
{
    drv_ras_config_t c = {
        .min_replicas = 1, .max_replicas = 10, .target_concurrency = 4,
        .traffic_history_seconds = 60, .scale_up_delay_seconds = 0,
        .scale_down_delay_seconds = 300, .scale_to_zero_delay_seconds = 900,
    };
    return c;
}

static drv_ras_decision_t decide(const drv_ras_config_t *cfg, drv_ras_state_t *s, int64_t now,
                                 int current, int starting, bool demand)
{
    drv_ras_decision_t d;
    drv_error_t e = {0};
    int rc = drv_ras_decide(cfg, s, now, current, starting, starting, current - starting, demand,
                            &d, &e);
    if (rc != 0)
        fprintf(stderr, "decide: %s\n", e.message);
    assert_int_equal(rc, 0);
    assert_int_equal(d.changed, d.desired != current);
    assert_non_null(d.kind);
    assert_true(d.reason[0] != '\0');
    return d;
}

/* The controller's loop on a virtual clock: each second from t0 to t1
 * (inclusive) observe `load`, decide, and apply the decision to *current.
 * Returns the time of the first change (and its decision in *first), or -1. */
static int64_t run(const drv_ras_config_t *cfg, drv_ras_state_t *s, int64_t t0, int64_t t1,
                   int *current, int starting, double load, drv_ras_decision_t *first)
{
    int64_t when = -1;
    for (int64_t t = t0; t <= t1; t += S) {
        drv_ras_observe(s, t, load);
        drv_ras_decision_t d = decide(cfg, s, t, *current, starting, false);
        if (d.changed && when < 0) {
            when = t;
            if (first)
                *first = d;
        }
        *current = d.desired;
    }
    return when;
}

/* --- load history ---------------------------------------------------------- */

static void test_average_over_window(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    assert_int_equal(s.width_ms, 1000);   /* 60 s / 60 buckets */
    assert_true(drv_ras_load(&s, 0, DRV_RAS_BUCKETS) == 0.0);   /* no samples: no load */
    /* 30 s at 8, then 30 s at 16: the mean over the 60 s window is 12 */
    for (int64_t t = 0; t < 30 * S; t += S)
        drv_ras_observe(&s, t, 8);
    for (int64_t t = 30 * S; t < 60 * S; t += S)
        drv_ras_observe(&s, t, 16);
    assert_float_equal(drv_ras_load(&s, 59 * S, DRV_RAS_BUCKETS), 12.0, 1e-9);
    /* the burst window is the newest 6 s: all 16 */
    assert_float_equal(drv_ras_load(&s, 59 * S, DRV_RAS_BURST_BUCKETS), 16.0, 1e-9);
    /* 30 s later with no new samples the 8s have left the window */
    assert_float_equal(drv_ras_load(&s, 89 * S, DRV_RAS_BUCKETS), 16.0, 1e-9);
    /* and a whole window later nothing is left */
    assert_true(drv_ras_load(&s, 200 * S, DRV_RAS_BUCKETS) == 0.0);
    drv_ras_decision_t d = decide(&cfg, &s, 59 * S, 3, 0, false);
    assert_float_equal(d.load, 12.0, 1e-9);
    assert_int_equal(d.recommended, 3);   /* ceil(12 / 4) */
}

static void test_average_irregular_sampling(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    /* ten samples of 100 within one second and one of 0 in the next: the
     * bucket means count equally (close to a time-weighted mean) */
    for (int i = 0; i < 10; i++)
        drv_ras_observe(&s, 100 * i, 100);
    drv_ras_observe(&s, 1500, 0);
    assert_float_equal(drv_ras_load(&s, 1500, DRV_RAS_BUCKETS), 50.0, 1e-9);
    /* negative and NaN samples count as 0 */
    drv_ras_observe(&s, 2500, -7);
    drv_ras_observe(&s, 3500, NAN);
    assert_float_equal(drv_ras_load(&s, 3500, DRV_RAS_BUCKETS), 25.0, 1e-9);
    /* a sample older than its ring slot's bucket is dropped */
    drv_ras_observe(&s, 3500 - 60 * S, 1000);
    assert_float_equal(drv_ras_load(&s, 3500, DRV_RAS_BUCKETS), 25.0, 1e-9);
}

static void test_history_length_change_restarts(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    for (int64_t t = 0; t < 10 * S; t += S)
        drv_ras_observe(&s, t, 40);
    cfg.traffic_history_seconds = 120;
    drv_ras_decision_t d = decide(&cfg, &s, 10 * S, 1, 0, false);
    assert_int_equal(s.width_ms, 2000);
    assert_true(d.load == 0.0);   /* the history restarted */
    assert_false(d.changed);
}

static void test_zeroed_state_initialises(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    drv_ras_state_t s;
    memset(&s, 0, sizeof s);
    drv_ras_decision_t d = decide(&cfg, &s, 5 * S, 1, 0, false);
    assert_true(s.initialised);
    assert_false(d.changed);
    assert_int_equal(s.up_since_ms, -1);
    memset(&s, 0, sizeof s);
    drv_ras_observe(&s, 5 * S, 4);   /* observe first: 1 s buckets */
    assert_true(s.initialised);
    d = decide(&cfg, &s, 5 * S, 1, 0, false);
    assert_float_equal(d.load, 4.0, 1e-9);
}

/* --- clamping -------------------------------------------------------------- */

static void test_clamp(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    cfg.min_replicas = 2;
    cfg.max_replicas = 5;
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    /* below min: at once, no delay */
    drv_ras_decision_t d = decide(&cfg, &s, 0, 0, 0, false);
    assert_int_equal(d.desired, 2);
    assert_string_equal(d.kind, "clamp");
    d = decide(&cfg, &s, 0, 1, 0, false);
    assert_int_equal(d.desired, 2);
    /* above max (max lowered): at once, even over starting replicas */
    d = decide(&cfg, &s, 0, 8, 8, false);
    assert_int_equal(d.desired, 5);
    assert_string_equal(d.kind, "clamp");
    /* a load needing 40 replicas gets max */
    for (int64_t t = 0; t < 60 * S; t += S)
        drv_ras_observe(&s, t, 160);
    d = decide(&cfg, &s, 59 * S, 5, 0, false);
    assert_int_equal(d.recommended, 5);
    assert_int_equal(d.desired, 5);
    assert_false(d.changed);
    /* no load: the recommendation is min, not below */
    drv_ras_state_init(&s, &cfg, 0);
    drv_ras_observe(&s, 0, 0);
    d = decide(&cfg, &s, 0, 2, 0, false);
    assert_int_equal(d.recommended, 2);
    assert_false(d.changed);
}

/* --- delays ---------------------------------------------------------------- */

static void test_scale_up_after_delay(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    cfg.scale_up_delay_seconds = 30;
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    /* 3 replicas (capacity 12), load 20: needs 5; 1.7x is no burst */
    int current = 3;
    drv_ras_decision_t first;
    int64_t when = run(&cfg, &s, 0, 29 * S, &current, 0, 20, &first);
    assert_int_equal(when, -1);
    assert_int_equal(current, 3);
    when = run(&cfg, &s, 30 * S, 40 * S, &current, 0, 20, &first);
    assert_int_equal(when, 30 * S);
    assert_int_equal(first.desired, 5);
    assert_string_equal(first.kind, "scale_up");
    assert_int_equal(current, 5);
}

static void test_scale_up_need_must_hold(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    cfg.scale_up_delay_seconds = 30;
    cfg.traffic_history_seconds = 6;   /* short history: the average follows quickly */
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    int current = 3;
    /* the need appears for 20 s, goes away for 10 s, comes back: the timer
     * restarts, so nothing changes until 30 s after it came back */
    assert_int_equal(run(&cfg, &s, 0, 20 * S, &current, 0, 20, NULL), -1);
    assert_int_equal(run(&cfg, &s, 21 * S, 30 * S, &current, 0, 8, NULL), -1);
    drv_ras_decision_t first;
    int64_t when = run(&cfg, &s, 31 * S, 100 * S, &current, 0, 20, &first);
    /* the 6 s average passes 12 (3 replicas) at 33 s: need 4 from then on
     * (5 from 35 s), so at 63 s it scales to the need that held, 4 */
    assert_int_equal(when, 63 * S);
    assert_int_equal(first.desired, 4);
    assert_int_equal(current, 5);   /* and 5 once that need held 30 s more (94 s) */
}

static void test_scale_up_takes_the_need_that_held(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    cfg.scale_up_delay_seconds = 10;
    cfg.traffic_history_seconds = 1;   /* the load is the newest sample */
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    int current = 4;
    /* needs 6 (load 24), then 8 (load 32; 2x of 16 is no burst): after 10 s
     * of a need above 4 it goes to the smallest need seen, 6 */
    assert_int_equal(run(&cfg, &s, 0, 4 * S, &current, 0, 24, NULL), -1);
    drv_ras_decision_t first;
    int64_t when = run(&cfg, &s, 5 * S, 10 * S, &current, 0, 31, &first);
    assert_int_equal(when, 10 * S);
    assert_int_equal(first.desired, 6);
}

static void test_scale_down_after_delay(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    int current = 5;
    /* steady load 18 = 5 replicas */
    assert_int_equal(run(&cfg, &s, 0, 119 * S, &current, 0, 18, NULL), -1);
    /* load drops to 4 (1 replica): the average falls over the 60 s window;
     * nothing goes for 300 s after the need first fell below 5 */
    drv_ras_decision_t first;
    int64_t when = run(&cfg, &s, 120 * S, 1000 * S, &current, 0, 4, &first);
    assert_true(when >= 120 * S + 300 * S);
    assert_string_equal(first.kind, "scale_down");
    /* the first step keeps the largest need seen during the delay (4, as the
     * average passed 13..16 when the timer started) */
    assert_int_equal(first.desired, 4);
    assert_int_equal(current, 1);   /* and later steps reach the need */
}

static void test_scale_down_reset_by_traffic(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    cfg.traffic_history_seconds = 1;
    cfg.scale_down_delay_seconds = 60;
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    int current = 3;
    assert_int_equal(run(&cfg, &s, 0, 50 * S, &current, 0, 4, NULL), -1);
    assert_int_equal(run(&cfg, &s, 51 * S, 51 * S, &current, 0, 12, NULL), -1);   /* back to 3 */
    drv_ras_decision_t first;
    int64_t when = run(&cfg, &s, 52 * S, 200 * S, &current, 0, 4, &first);
    assert_int_equal(when, 52 * S + 60 * S);
    assert_int_equal(first.desired, 1);
}

static void test_scale_to_zero(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    cfg.min_replicas = 0;
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    int current = 3;
    assert_int_equal(run(&cfg, &s, 0, 59 * S, &current, 0, 10, NULL), -1);
    /* traffic stops at 60 s (the last request seen at 59 s) */
    drv_ras_decision_t first;
    int64_t when = run(&cfg, &s, 60 * S, 957 * S, &current, 0, 0, &first);
    assert_true(when >= 60 * S + 300 * S);   /* the scale-down delay first */
    assert_string_equal(first.kind, "scale_down");
    assert_int_equal(current, 1);            /* down to one, not zero, before 900 s idle */
    drv_ras_decision_t d = decide(&cfg, &s, 958 * S, 1, 0, false);
    assert_false(d.changed);
    d = decide(&cfg, &s, 959 * S, 1, 0, false);   /* 900 s after the last traffic */
    assert_int_equal(d.desired, 0);
    assert_string_equal(d.kind, "scale_to_zero");
    /* and stays there without traffic */
    current = 0;
    assert_int_equal(run(&cfg, &s, 960 * S, 2000 * S, &current, 0, 0, NULL), -1);
}

static void test_to_zero_needs_min_zero(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();   /* min 1 */
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    int current = 1;
    assert_int_equal(run(&cfg, &s, 0, 5000 * S, &current, 0, 0, NULL), -1);
    assert_int_equal(current, 1);
}

static void test_old_traffic_does_not_wake_zero(void **st)
{
    (void)st;
    /* a long history (600 s) and a short to-zero delay (30 s): when the
     * deployment goes to zero its history still holds traffic, which must
     * neither keep it up nor bring it back */
    drv_ras_config_t cfg = base_cfg();
    cfg.min_replicas = 0;
    cfg.traffic_history_seconds = 600;
    cfg.scale_down_delay_seconds = 0;
    cfg.scale_to_zero_delay_seconds = 30;
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    int current = 1;
    assert_int_equal(run(&cfg, &s, 0, 9 * S, &current, 0, 3, NULL), -1);
    drv_ras_decision_t first;
    int64_t when = run(&cfg, &s, 10 * S, 100 * S, &current, 0, 0, &first);
    assert_int_equal(when, 9 * S + 30 * S);
    assert_string_equal(first.kind, "scale_to_zero");
    assert_int_equal(current, 0);
    assert_true(drv_ras_load(&s, 100 * S, DRV_RAS_BUCKETS) > 0);   /* still in the history */
}

/* --- zero, bursts ---------------------------------------------------------- */

static void test_scale_from_zero_on_demand(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    cfg.min_replicas = 0;
    cfg.scale_up_delay_seconds = 600;   /* not waited for at zero */
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    /* a new deployment with min 0 stays at zero */
    drv_ras_decision_t d = decide(&cfg, &s, 0, 0, 0, false);
    assert_int_equal(d.desired, 0);
    assert_false(d.changed);
    /* a request arrives: one replica at once */
    d = decide(&cfg, &s, 5 * S, 0, 0, true);
    assert_int_equal(d.desired, 1);
    assert_string_equal(d.kind, "scale_from_zero");
    assert_int_equal(s.last_traffic_ms, 5 * S);   /* demand counts as traffic */
    /* requests queued while at zero (the gateway holds them): enough for them */
    drv_ras_state_init(&s, &cfg, 0);
    drv_ras_observe(&s, 2 * S, 9);
    d = decide(&cfg, &s, 2 * S, 0, 0, false);
    assert_int_equal(d.desired, 3);   /* ceil(9 / 4) */
    assert_string_equal(d.kind, "scale_from_zero");
    /* clamped to max */
    cfg.max_replicas = 2;
    drv_ras_state_init(&s, &cfg, 0);
    drv_ras_observe(&s, 2 * S, 100);
    d = decide(&cfg, &s, 2 * S, 0, 0, false);
    assert_int_equal(d.desired, 2);
}

static void test_burst_reacts_at_once(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    cfg.scale_up_delay_seconds = 120;
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    int current = 2;   /* capacity 8 */
    assert_int_equal(run(&cfg, &s, 0, 59 * S, &current, 0, 6, NULL), -1);
    /* 15 in flight (1.9x): waits for the delay */
    assert_int_equal(run(&cfg, &s, 60 * S, 70 * S, &current, 0, 15, NULL), -1);
    /* 40 in flight: 5x the capacity; the burst window (6 s) sees it within
     * a few seconds and scales at once, to what the burst needs */
    drv_ras_decision_t first;
    int64_t when = run(&cfg, &s, 71 * S, 80 * S, &current, 0, 40, &first);
    assert_true(when > 0 && when <= 71 * S + 6 * S);
    assert_string_equal(first.kind, "scale_up");
    assert_true(strstr(first.reason, "burst") != NULL);
    assert_true(first.desired > 2);
    assert_true(first.desired <= 10);
    /* the next burst step follows as the burst window fills */
    assert_int_equal(current, 10);   /* ceil(40 / 4), max 10 */
}

static void test_burst_factor_configurable(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    cfg.scale_up_delay_seconds = 120;
    cfg.traffic_history_seconds = 1;
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    /* 1.5x: not a burst at the default factor 2 */
    drv_ras_observe(&s, 0, 12);
    drv_ras_decision_t d = decide(&cfg, &s, 0, 2, 0, false);
    assert_false(d.changed);
    cfg.panic_factor = 1.5;
    d = decide(&cfg, &s, 0, 2, 0, false);
    assert_true(d.changed);
    assert_int_equal(d.desired, 3);
}

static void test_no_scale_down_during_burst(void **st)
{
    (void)st;
    /* a long history that still averages low while the newest seconds burst:
     * the burst need holds the count up */
    drv_ras_config_t cfg = base_cfg();
    cfg.traffic_history_seconds = 600;
    cfg.scale_down_delay_seconds = 0;
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    for (int64_t t = 0; t < 540 * S; t += S)
        drv_ras_observe(&s, t, 0);
    for (int64_t t = 540 * S; t < 600 * S; t += S)
        drv_ras_observe(&s, t, 20);
    drv_ras_decision_t d = decide(&cfg, &s, 599 * S, 5, 0, false);
    assert_int_equal(d.recommended, 1);   /* the average: 2 */
    assert_false(d.changed);
}

/* --- starting replicas ----------------------------------------------------- */

static void test_starting_replicas_kept(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    cfg.traffic_history_seconds = 1;
    cfg.scale_down_delay_seconds = 10;
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    int current = 5;
    /* 5 replicas, 3 still starting, need 1: down to 3, not 1 */
    drv_ras_decision_t first;
    int64_t when = run(&cfg, &s, 0, 20 * S, &current, 3, 4, &first);
    assert_int_equal(when, 10 * S);
    assert_int_equal(first.desired, 3);
    assert_true(strstr(first.reason, "starting") != NULL);
    /* all starting: hold */
    drv_ras_state_init(&s, &cfg, 0);
    current = 4;
    assert_int_equal(run(&cfg, &s, 0, 60 * S, &current, 4, 4, NULL), -1);
    /* to zero waits for starting ones too */
    cfg.min_replicas = 0;
    cfg.scale_to_zero_delay_seconds = 10;
    drv_ras_state_init(&s, &cfg, 0);
    drv_ras_decision_t d = decide(&cfg, &s, 20 * S, 1, 1, false);
    assert_false(d.changed);
    assert_true(strstr(d.reason, "starting") != NULL);
    d = decide(&cfg, &s, 20 * S, 3, 1, false);
    assert_int_equal(d.desired, 1);
    d = decide(&cfg, &s, 20 * S, 1, 0, false);
    assert_int_equal(d.desired, 0);
}

/* --- cold starts (rule 0) ------------------------------------------------------- */

/* A deployment under traffic, as a fluid on a virtual clock: `lambda`
 * requests/s arrive; in flight + queued = L; a ready replica holds up to
 * `slots` requests and each takes `service_s` (so it completes
 * slots / service_s per second when full); a replica added by a decision
 * is ready `cold_s` later (pending, then starting: it counts in current,
 * not in ready); a scale-down removes the newest ready ones. */
typedef struct fluid {
    double lambda, slots, service_s, cold_s, l;
    int n;                      /* replicas */
    double ready_at[64];        /* ascending: added in time order */
    int peak;
} fluid_t;

static int fluid_ready(const fluid_t *f, double t)
{
    int r = 0;
    while (r < f->n && f->ready_at[r] <= t)
        r++;
    return r;
}

/* Each second in [t0, t1): serve, observe, decide (starting: the not-ready
 * ones past half their cold start, the rest pending), apply. */
static void fluid_run(const drv_ras_config_t *cfg, drv_ras_state_t *s, fluid_t *f, int t0, int t1)
{
    for (int t = t0; t < t1; t++) {
        int ready = fluid_ready(f, t);
        double busy = f->l < ready * f->slots ? f->l : ready * f->slots;
        f->l += f->lambda - busy / f->service_s;
        if (f->l < 0)
            f->l = 0;
        drv_ras_observe(s, t * S, f->l);
        int starting = 0;
        for (int i = ready; i < f->n; i++)
            starting += f->ready_at[i] - t <= f->cold_s / 2;
        drv_ras_decision_t d;
        drv_error_t e = {0};
        assert_int_equal(drv_ras_decide(cfg, s, t * S, f->n, starting, f->n - ready, ready, false, &d,
                                        &e), 0);
        assert_true(d.desired >= 0 && d.desired <= 64);
        for (; f->n < d.desired; f->n++)
            f->ready_at[f->n] = t + f->cold_s;
        if (d.desired < f->n) {   /* ready ones only, in these series */
            int drop = f->n - d.desired;
            assert_true(drop <= ready);
            memmove(&f->ready_at[ready - drop], &f->ready_at[ready],
                    (size_t)(f->n - ready) * sizeof f->ready_at[0]);
            f->n = d.desired;
        }
        if (f->n > f->peak)
            f->peak = f->n;
    }
}

static drv_ras_config_t cold_cfg(void)
{
    drv_ras_config_t c = {
        .min_replicas = 1, .max_replicas = 40, .target_concurrency = 12,
        .traffic_history_seconds = 60, .scale_up_delay_seconds = 0,
        .scale_down_delay_seconds = 300, .scale_to_zero_delay_seconds = 900,
    };
    return c;
}

/* 5 requests/s of 20 s each need 100 in flight: 9 replicas at 12. */
static fluid_t cold_fluid(void)
{
    fluid_t f = {.lambda = 5, .slots = 16, .service_s = 20, .cold_s = 180, .n = 1, .peak = 1};
    f.ready_at[0] = 0;
    return f;
}

static void test_cold_start_no_overshoot(void **st)
{
    (void)st;
    drv_ras_config_t cfg = cold_cfg();
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    fluid_t f = cold_fluid();
    /* starting from 1 replica under steady traffic: the queue grows for a
     * whole cold start, but the count stops at 20 (max_scale_up_rate x 1)
     * and adds nothing for the backlog once they are ready */
    fluid_run(&cfg, &s, &f, 0, 420);
    assert_int_equal(f.peak, DRV_RAS_SCALE_UP_RATE);
    assert_true(f.l < 100 * 1.5);   /* the backlog drained */
    /* later, the surplus goes after the scale-down delay; the need stays */
    fluid_run(&cfg, &s, &f, 420, 1400);
    assert_int_equal(f.peak, DRV_RAS_SCALE_UP_RATE);
    assert_true(f.n >= 9 && f.n <= 11);

    /* the same series without rule 0 climbs to max_replicas */
    cfg.max_scale_up_rate = -1;
    drv_ras_state_init(&s, &cfg, 0);
    f = cold_fluid();
    fluid_run(&cfg, &s, &f, 0, 420);
    assert_int_equal(f.peak, 40);
}

static void test_cold_start_growth_cap(void **st)
{
    (void)st;
    drv_ras_config_t cfg = cold_cfg();
    cfg.max_scale_up_rate = 3;
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    /* 2 replicas settled, then 1 more on its way: a burst of 30x capacity
     * goes to 3 x 2 = 6 at once, no further while they start */
    drv_ras_decision_t d;
    drv_error_t e = {0};
    assert_int_equal(drv_ras_decide(&cfg, &s, 0, 2, 0, 0, 2, false, &d, &e), 0);
    for (int t = 1; t <= 10; t++) {
        drv_ras_observe(&s, t * S, 1000);
        assert_int_equal(drv_ras_decide(&cfg, &s, t * S, 3, 1, 1, 2, false, &d, &e), 0);
        assert_true(d.desired <= 6);
    }
    assert_int_equal(d.desired, 6);
    assert_string_equal(d.kind, "scale_up");
    assert_int_equal(s.settled, 2);
    /* rule 6 is capped the same way: at the cap it holds and says why */
    assert_int_equal(drv_ras_decide(&cfg, &s, 11 * S, 6, 4, 4, 2, false, &d, &e), 0);
    assert_false(d.changed);
    assert_true(strstr(d.reason, "not ready") != NULL);
    /* once all are ready the cap is 3 x 6; the backlog they find holds */
    assert_int_equal(drv_ras_decide(&cfg, &s, 12 * S, 6, 0, 0, 6, false, &d, &e), 0);
    assert_false(d.changed);
    assert_true(strstr(d.reason, "backlog") != NULL);
    assert_int_equal(s.settled, 6);
}

/* A replica that failed and was not removed is not on its way: it neither
 * keeps the growth cap on nor keeps the settled count from moving. */
static void test_failed_replica_no_cap(void **st)
{
    (void)st;
    drv_ras_config_t cfg = cold_cfg();
    cfg.max_scale_up_rate = 2;
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    drv_ras_decision_t d;
    drv_error_t e = {0};
    /* 4 replicas: 3 ready, 1 failed, none on its way; a steady load that
     * needs 10 (120 in flight at 12 each) scales to 10 at once */
    for (int t = 0; t <= 5; t++)
        drv_ras_observe(&s, t * S, 120);
    assert_int_equal(drv_ras_decide(&cfg, &s, 5 * S, 4, 0, 0, 3, false, &d, &e), 0);
    assert_string_equal(d.kind, "scale_up");
    assert_int_equal(d.desired, 10);
    assert_int_equal(s.settled, 4);
    assert_false(s.on_way);
    /* with 6 of them on their way (and the failed one still there) the cap
     * is 2 x 4 = 8 */
    drv_ras_state_init(&s, &cfg, 0);
    for (int t = 0; t <= 5; t++)
        drv_ras_observe(&s, t * S, 120);
    assert_int_equal(drv_ras_decide(&cfg, &s, 4 * S, 4, 0, 0, 3, false, &d, &e), 0);
    assert_int_equal(drv_ras_decide(&cfg, &s, 5 * S, 7, 2, 3, 3, false, &d, &e), 0);
    assert_true(s.on_way);
    assert_int_equal(d.desired, 8);
    assert_true(strstr(d.reason, "capped") != NULL);
}

static void test_sustained_rise_after_cold_start(void **st)
{
    (void)st;
    drv_ras_config_t cfg = cold_cfg();
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    fluid_t f = cold_fluid();
    fluid_run(&cfg, &s, &f, 0, 900);
    int before = f.n;
    /* the traffic triples and stays: 300 in flight need 25 replicas, more
     * than the 20 of the first cold start; the count follows */
    f.lambda = 15;
    fluid_run(&cfg, &s, &f, 900, 1800);
    assert_true(f.n > before);
    assert_true(f.n >= 25);
    assert_true(f.l < 300 * 1.5);   /* and they keep up */
}

static void test_sustained_rise_when_warm(void **st)
{
    (void)st;
    drv_ras_config_t cfg = cold_cfg();
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    fluid_t f = cold_fluid();
    for (f.n = 0; f.n < 9; f.n++)   /* 9 ready at t = 0: the steady need */
        f.ready_at[f.n] = 0;
    f.l = 100;
    fluid_run(&cfg, &s, &f, 0, 300);
    assert_int_equal(f.n, 9);
    /* a steady rise to 8 requests/s over 5 minutes: 160 in flight, 14 */
    for (int k = 0; k < 300; k += 10) {
        f.lambda = 5 + 3.0 * k / 300;
        fluid_run(&cfg, &s, &f, 300 + k, 310 + k);
    }
    fluid_run(&cfg, &s, &f, 600, 1200);
    assert_true(f.n >= 14 && f.n <= 20);
}

static void test_from_zero_unchanged_by_cap(void **st)
{
    (void)st;
    drv_ras_config_t cfg = base_cfg();
    cfg.min_replicas = 0;
    cfg.max_scale_up_rate = 2;
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    /* 40 waiting at zero: ceil(40 / 4) = 10 at once, not capped */
    drv_ras_observe(&s, S, 40);
    drv_ras_decision_t d = decide(&cfg, &s, S, 0, 0, true);
    assert_string_equal(d.kind, "scale_from_zero");
    assert_int_equal(d.desired, 10);
    /* and a burst while those 10 start is capped at 2 x 1 (settled at 0) */
    drv_error_t e = {0};
    for (int t = 2; t < 10; t++) {
        drv_ras_observe(&s, t * S, 400);
        assert_int_equal(drv_ras_decide(&cfg, &s, t * S, 10, 10, 10, 0, false, &d, &e), 0);
        assert_false(d.changed);
    }
}

static void test_pick_victims(void **st)
{
    (void)st;
    drv_ras_replica_t r[] = {
        {DRV_RAS_REPLICA_READY, 100},     /* 0 */
        {DRV_RAS_REPLICA_STARTING, 500},  /* 1: never */
        {DRV_RAS_REPLICA_PENDING, 200},   /* 2 */
        {DRV_RAS_REPLICA_READY, 300},     /* 3 */
        {DRV_RAS_REPLICA_FAILED, 50},     /* 4 */
        {DRV_RAS_REPLICA_PENDING, 400},   /* 5 */
        {DRV_RAS_REPLICA_READY, 300},     /* 6: same age as 3, higher index first */
    };
    size_t out[8];
    size_t n = drv_ras_pick_victims(r, 7, 8, out);
    assert_int_equal(n, 6);
    size_t want[] = {5, 2, 4, 6, 3, 0};
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(out[i], want[i]);
    assert_int_equal(drv_ras_pick_victims(r, 7, 2, out), 2);
    assert_int_equal(out[0], 5);
    assert_int_equal(out[1], 2);
    assert_int_equal(drv_ras_pick_victims(r, 7, 0, out), 0);
    drv_ras_replica_t only_starting[] = {{DRV_RAS_REPLICA_STARTING, 1}};
    assert_int_equal(drv_ras_pick_victims(only_starting, 1, 1, out), 0);
    assert_int_equal(drv_ras_pick_victims(NULL, 0, 3, out), 0);
}

/* --- config ---------------------------------------------------------------- */

static void test_config(void **st)
{
    (void)st;
    drv_ras_config_t c;
    drv_ras_config_from_json(NULL, &c);
    assert_int_equal(c.min_replicas, 1);
    assert_int_equal(c.max_replicas, 1);
    assert_int_equal(c.target_concurrency, 4);
    assert_int_equal(c.traffic_history_seconds, 60);
    assert_int_equal(c.scale_up_delay_seconds, 0);
    assert_int_equal(c.scale_down_delay_seconds, 300);
    assert_int_equal(c.scale_to_zero_delay_seconds, 900);
    assert_int_equal(c.max_scale_up_rate, 0);   /* DRV_RAS_SCALE_UP_RATE */
    json_t *as = json_pack("{s:i, s:i, s:i, s:i}", "min_replicas", 0, "max_replicas", 7,
                           "target_concurrency", 2, "scale_up_delay_seconds", 15);
    drv_ras_config_from_json(as, &c);
    json_decref(as);
    assert_int_equal(c.min_replicas, 0);
    assert_int_equal(c.max_replicas, 7);
    assert_int_equal(c.target_concurrency, 2);
    assert_int_equal(c.scale_up_delay_seconds, 15);
    drv_error_t e = {0};
    assert_int_equal(drv_ras_config_check(&c, &e), 0);

    drv_ras_config_t b = base_cfg();
    b.max_replicas = 0;
    assert_int_equal(drv_ras_config_check(&b, &e), -1);
    assert_string_equal(e.field, "autoscale.max_replicas");
    b = base_cfg();
    b.max_scale_up_rate = 1;   /* would never grow while one is on its way */
    assert_int_equal(drv_ras_config_check(&b, &e), -1);
    assert_string_equal(e.field, "autoscale.max_scale_up_rate");
    as = json_pack("{s:i}", "max_scale_up_rate", 5);
    drv_ras_config_from_json(as, &c);
    json_decref(as);
    assert_int_equal(c.max_scale_up_rate, 5);
    b = base_cfg();
    b.min_replicas = 11;
    assert_int_equal(drv_ras_config_check(&b, &e), -1);
    assert_string_equal(e.field, "autoscale.max_replicas");
    b = base_cfg();
    b.target_concurrency = 0;
    assert_int_equal(drv_ras_config_check(&b, &e), -1);
    assert_string_equal(e.field, "autoscale.target_concurrency");
    b = base_cfg();
    b.traffic_history_seconds = 0;
    assert_int_equal(drv_ras_config_check(&b, &e), -1);
    assert_string_equal(e.field, "autoscale.traffic_history_seconds");
    b = base_cfg();
    b.scale_down_delay_seconds = -1;
    assert_int_equal(drv_ras_config_check(&b, &e), -1);

    /* decide refuses bad input and leaves the state alone */
    drv_ras_state_t s, copy;
    drv_ras_config_t good = base_cfg();
    drv_ras_state_init(&s, &good, 0);
    memcpy(&copy, &s, sizeof s);
    drv_ras_decision_t d;
    b = base_cfg();
    b.target_concurrency = 0;
    assert_int_equal(drv_ras_decide(&b, &s, 0, 1, 0, 0, 1, false, &d, &e), -1);
    assert_int_equal(drv_ras_decide(&good, &s, 0, 1, 2, 2, 0, false, &d, &e), -1);
    assert_int_equal(drv_ras_decide(&good, &s, 0, 2, 1, 1, 2, false, &d, &e), -1);
    assert_int_equal(drv_ras_decide(&good, &s, 0, 2, 0, 0, -1, false, &d, &e), -1);
    assert_int_equal(drv_ras_decide(&good, &s, 0, 3, 2, 1, 0, false, &d, &e), -1);   /* on_way < starting */
    assert_int_equal(drv_ras_decide(&good, &s, 0, -1, 0, 0, 0, false, &d, &e), -1);
    assert_memory_equal(&copy, &s, sizeof s);
    assert_int_equal(drv_ras_decide(&good, &s, 0, 1, 0, 0, 1, false, &d, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_average_over_window),
        cmocka_unit_test(test_average_irregular_sampling),
        cmocka_unit_test(test_history_length_change_restarts),
        cmocka_unit_test(test_zeroed_state_initialises),
        cmocka_unit_test(test_clamp),
        cmocka_unit_test(test_scale_up_after_delay),
        cmocka_unit_test(test_scale_up_need_must_hold),
        cmocka_unit_test(test_scale_up_takes_the_need_that_held),
        cmocka_unit_test(test_scale_down_after_delay),
        cmocka_unit_test(test_scale_down_reset_by_traffic),
        cmocka_unit_test(test_scale_to_zero),
        cmocka_unit_test(test_to_zero_needs_min_zero),
        cmocka_unit_test(test_old_traffic_does_not_wake_zero),
        cmocka_unit_test(test_scale_from_zero_on_demand),
        cmocka_unit_test(test_burst_reacts_at_once),
        cmocka_unit_test(test_burst_factor_configurable),
        cmocka_unit_test(test_no_scale_down_during_burst),
        cmocka_unit_test(test_starting_replicas_kept),
        cmocka_unit_test(test_cold_start_no_overshoot),
        cmocka_unit_test(test_cold_start_growth_cap),
        cmocka_unit_test(test_failed_replica_no_cap),
        cmocka_unit_test(test_sustained_rise_after_cold_start),
        cmocka_unit_test(test_sustained_rise_when_warm),
        cmocka_unit_test(test_from_zero_unchanged_by_cap),
        cmocka_unit_test(test_pick_victims),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
