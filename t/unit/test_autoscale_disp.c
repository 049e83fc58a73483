/* test_autoscale_disp.c — unit tests of the replica autoscaler's learned
 * dispersion of arrivals (src/autoscale/replicas_slo.c,
 * drv_ras_slo_dispersion; replicas.h "Clustered arrivals"): its value on
 * even, clustered and young memories and a first minute the traffic
 * began in, a step's minutes against the median, its spread over where
 * the 10 s buckets and minutes fall (issue 20's phase: against the rule
 * before, which fails it), and the burst test it widens: clustered
 * traffic's busy seconds are no burst (fails with the Poisson noise
 * alone), a real burst on top of it still is; and droverd's (running
 * totals at its passes) against the simulator's (every arrival) on
 * clustered traffic, with and without the gateway's kick after a quiet
 * spell (issue 20); the peaked queue it sizes clustered traffic with
 * (against Poisson's M/M/c, which fails it). Virtual clock; synthetic
 * traffic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>

#include "autoscale/replicas.h"
#include "head/scaling.h"

#define S 1000LL   /* ms per second */

/* n arrivals spread evenly over the 10 s from t_ms */
static void ten_seconds(drv_ras_state_t *s, int64_t t_ms, int n)
{
    for (int k = 0; k < n; k++)
        drv_ras_observe_arrival(s, t_ms + k * 10 * S / n, 500);
}

/* minutes [from, to) of 10 s counts a, b, a, b, a, b */
static void minutes(drv_ras_state_t *s, int from, int to, int a, int b)
{
    for (int m = from; m < to; m++)
        for (int k = 0; k < 6; k++)
            ten_seconds(s, (m * 60 + k * 10) * S, k % 2 ? b : a);
}

static void test_dispersion(void **st)
{
    (void)st;
    drv_ras_state_t s;
    drv_ras_state_init(&s, NULL, 0);
    minutes(&s, 0, 2, 80, 20);
    /* spans over two minutes: too few, Poisson's 1 */
    assert_float_equal(drv_ras_slo_dispersion(&s, 120 * S + 5 * S), 1, 0);
    minutes(&s, 2, 5, 80, 20);
    /* 10 s counts 80, 20, ... (8 and 2 a second): the windows starting
     * every second count 80, 74, ..., 26, 20, 26, ..., 74, ...: mean 50,
     * variance 306 in every minute-long span: 6.12 (the 10 s buckets
     * alone, 80, 20, ...: 18; shifted by 5 s, 50, 50, ...: 0) */
    assert_float_equal(drv_ras_slo_dispersion(&s, 300 * S + 5 * S), 6.12, 1e-6);
    /* a step minute (counts 80, 300, ...): the spans reaching into it are
     * 75 of 306, under half: the median moves little */
    minutes(&s, 5, 6, 80, 300);
    assert_float_equal(drv_ras_slo_dispersion(&s, 360 * S + 15 * S), 6.12, 1e-6);

    /* even counts: variance 0, at least 1 */
    drv_ras_state_init(&s, NULL, 0);
    minutes(&s, 0, 6, 50, 50);
    assert_float_equal(drv_ras_slo_dispersion(&s, 360 * S + 5 * S), 1, 0);
    /* under DRV_RAS_SLO_DISP_MIN_N arrivals a span: not counted */
    drv_ras_state_init(&s, NULL, 0);
    minutes(&s, 0, 6, 1, 0);
    assert_float_equal(drv_ras_slo_dispersion(&s, 360 * S + 5 * S), 1, 0);
    /* spans before the memory started are not spans seen */
    drv_ras_state_init(&s, NULL, 0);
    minutes(&s, 0, 6, 80, 20);
    s.init_ms = 250 * S;
    assert_float_equal(drv_ras_slo_dispersion(&s, 360 * S + 5 * S), 1, 0);
    /* spans that began before the first arrival are not spans seen: the
     * empty seconds before the traffic are no clustering (80, 20, ... from
     * 60 s on; at 200 s the spans from 60 s are 71, under 2 minutes' 121;
     * those from 0 would be 131, the median 6.12) */
    drv_ras_state_init(&s, NULL, 0);
    minutes(&s, 1, 7, 80, 20);
    assert_float_equal(drv_ras_slo_dispersion(&s, 200 * S), 1, 0);
    assert_float_equal(drv_ras_slo_dispersion(&s, 250 * S), 6.12, 1e-6);
    /* as totals: the first seen by a pass at 60.5 s, the one before at
     * 55.5 s: spread from there, minute 0 would count (7 arrivals) */
    drv_ras_state_init(&s, NULL, 0);
    drv_ras_counters_t tot = {0};
    drv_ras_observe_counters(&s, 55500, &tot);
    tot.arrivals = 7;
    drv_ras_observe_counters(&s, 60500, &tot);
    assert_int_equal(s.first_arrival_ms, 60500);
    /* only what the trend memory holds (its 65 10 s buckets) */
    drv_ras_state_init(&s, NULL, 0);
    minutes(&s, 0, 6, 80, 20);
    minutes(&s, 6, 20, 50, 50);
    assert_float_equal(drv_ras_slo_dispersion(&s, 1200 * S + 5 * S), 1, 0);
}

/* The TTFT target's config of these tests. */
static const drv_ras_config_t slo_cfg = {
    .min_replicas = 1, .max_replicas = 40, .target_concurrency = 4,
    .traffic_history_seconds = 60, .scale_up_delay_seconds = 0,
    .scale_down_delay_seconds = 300, .scale_to_zero_delay_seconds = 900,
    .ttft_slo_ms = 2000,
};

/* A state from 0 with minutes [0, mins) of 10 s counts a, b, ... and five
 * completions a second over them (500 prompt tokens, 100 generated, first
 * token 0.2 s, a slot held service_s, `slots` a replica): the model ready. */
static void clustered(drv_ras_state_t *s, int mins, int a, int b, double service_s, int slots)
{
    drv_ras_state_init(s, &slo_cfg, 0);
    minutes(s, 0, mins, a, b);
    for (int64_t t = 0; t < mins * 60; t++)
        for (int k = 0; k < 5; k++)
            drv_ras_observe_done(s, t * S + k * 200, 500, 100, 0.2, service_s, slots);
}

/* The burst window (the newest 6 s) at the end of a busy 10 s of
 * clustered traffic (8/s, then 2/s, mean 5/s) is beyond Poisson noise
 * above the history's 5/s (8 - 2 sqrt(8 / 6) = 5.7), not beyond the noise
 * of counts 6.12 x as variable (8 - 2 sqrt(6.12 x 8 / 6) = 2.3 < 5): the model sizes
 * for the history's rate. A burst of 40/s after it is still one. */
static void test_clustered_is_no_burst(void **st)
{
    (void)st;
    const drv_ras_config_t cfg = slo_cfg;
    drv_ras_state_t s;
    clustered(&s, 10, 80, 20, 5.2, 8);
    ten_seconds(&s, 600 * S, 80);        /* a busy 10 s: the history 300 in 60 s */
    drv_ras_slo_estimate_t e;
    drv_ras_slo_estimate(&cfg, &s, 609 * S + 999, &e);
    assert_true(e.ready);
    assert_float_equal(e.dispersion, 6.12, 1e-6);
    assert_float_equal(e.lambda, 5, 1e-9);
    assert_int_equal(e.need, drv_ras_slo_need(5, e.mean_service_s, e.first_p99_s, 8, 2, 40,
                                              NULL));
    /* a burst: 40/s from 610 s (40 - 2 sqrt(6.12 x 40 / 6) = 27.2 against
     * the history's 680 / 60 = 11.3) */
    ten_seconds(&s, 610 * S, 400);
    drv_ras_slo_estimate(&cfg, &s, 619 * S + 999, &e);
    assert_float_equal(e.lambda, 40 - 2 * sqrt(e.dispersion * 40 / 6.0), 1e-9);
    assert_float_equal(e.dispersion, 6.12, 1e-6);
}

/* Peaked queues (replicas.h): clustered arrivals are sized as peaked
 * traffic of z = the dispersion. 10 s counts 110, 60, ... (11 and 6 a
 * second): windows of mean 85 and variance 212.5 (306 x (50 / 60)^2):
 * D = 2.5. With 10 slots a replica (E[S] 15.2 s), c / z = 4 n servers
 * offered a / 2.5 and the decay (10 n / E[S] - lambda) / 2.5 are exactly
 * the M/M/c queue of replicas with 4 slots at lambda / 2.5: the need is
 * that one's, one more than Poisson's M/M/c at lambda. Not
 * while the spans are younger than the trend memory (a step's edge can
 * be all they saw): Poisson's, as before. */
static void test_peaked_queue(void **st)
{
    (void)st;
    const drv_ras_config_t cfg = slo_cfg;
    drv_ras_state_t s;
    clustered(&s, 12, 110, 60, 15.2, 10);
    drv_ras_slo_estimate_t e;
    /* young: 600 s of spans, under the memory's 640 s */
    drv_ras_slo_estimate(&cfg, &s, 600 * S, &e);
    assert_true(e.ready);
    assert_float_equal(e.dispersion, 2.5, 1e-6);
    assert_float_equal(e.peakedness, 1, 0);
    assert_int_equal(e.need, drv_ras_slo_need(e.lambda, e.mean_service_s, e.first_p99_s, 10, 2,
                                              40, NULL));
    drv_ras_slo_estimate(&cfg, &s, 720 * S, &e);
    assert_float_equal(e.dispersion, 2.5, 1e-6);
    assert_float_equal(e.peakedness, e.dispersion, 0);
    int poisson = drv_ras_slo_need(e.lambda, e.mean_service_s, e.first_p99_s, 10, 2, 40, NULL);
    int peaked = drv_ras_slo_need(e.lambda / 2.5, e.mean_service_s, e.first_p99_s, 4, 2, 40,
                                  NULL);
    print_message("peaked queue: need %d, Poisson's %d\n", peaked, poisson);
    assert_true(peaked > poisson);
    assert_int_equal(e.need, peaked);
    /* even traffic (D 1) at the same rate: Poisson's queue */
    clustered(&s, 12, 85, 85, 15.2, 10);
    drv_ras_slo_estimate(&cfg, &s, 720 * S, &e);
    assert_float_equal(e.peakedness, 1, 0);
    assert_int_equal(e.need, poisson);
}

/* xorshift64's next uniform in (0, 1) */
static double unif(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return ((double)(*x >> 11) + 0.5) / 9007199254740992.0;
}

/* a gamma draw of shape k < 1 and mean k (Marsaglia and Tsang's, boosted by U^(1/k)) */
static double gamma_draw(uint64_t *x, double k)
{
    const double d = k + 1 - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double z = sqrt(-2 * log(unif(x))) * cos(2 * M_PI * unif(x)), v = 1 + c * z;
        if (v <= 0)
            continue;
        v = v * v * v;
        double u = unif(x);
        if (log(u) < 0.5 * z * z + d - d * v + d * log(v))
            return d * v * pow(unif(x), 1 / k);
    }
}

/* Issue 20: droverd learns the dispersion from its gateway's running
 * totals at its passes, each pass's arrivals spread over the time since
 * the one before (drv_ras_observe_counters); the simulator from every
 * arrival at its time. Clustered traffic (gamma gaps of CV 3 at 6/s, as
 * conv-gamma3) for 30 minutes, the dispersion compared at each minute
 * from the 10th (a full trend memory) on: the largest relative difference
 * and the means. droverd's cadence (head/scaling.c, controller.c): a
 * pass on the next 250 ms tick while a pass saw arrivals in the last
 * DRV_SCALING_BUSY_MS (5 s), else the 5 s safety net, and (kick) at once
 * at the first arrival after DRV_GW_QUIET_KICK_MS (5 s) without one
 * (gateway/route.c; here: on the tick after it). */
static double disp_at_passes(bool kick, double *mean_a, double *mean_b)
{
    const double cv = 3, rate = 6, k = 1 / (cv * cv);
    drv_ras_state_t a, b;   /* a: per arrival (drover-sim); b: totals (droverd) */
    drv_ras_state_init(&a, NULL, 0);
    drv_ras_state_init(&b, NULL, 0);
    drv_ras_counters_t tot = {.slots = 16};
    drv_ras_observe_counters(&b, 0, &tot);
    uint64_t x = 0x2545f4914f6cdd1dull;
    double t = gamma_draw(&x, k) / k / rate;
    int64_t last_arrival_pass = -1000 * S, last_pass = 0;
    uint64_t seen = 0;
    double worst = 0, sa = 0, sb = 0;
    int n = 0;
    for (int64_t now = 250; now <= 1800 * S; now += 250) {
        for (; t * 1000 <= (double)now; t += gamma_draw(&x, k) / k / rate) {
            drv_ras_observe_arrival(&a, (int64_t)(t * 1000), 500);
            tot.arrivals++;
        }
        bool busy = now - last_arrival_pass < DRV_SCALING_BUSY_MS;
        bool kicked = kick && tot.arrivals != seen && !busy;
        if (!busy && !kicked && now - last_pass < 5 * S)
            continue;
        drv_ras_observe_counters(&b, now, &tot);
        if (tot.arrivals != seen)
            last_arrival_pass = now;
        seen = tot.arrivals;
        last_pass = now;
        if (now % (60 * S) == 0 && now >= 600 * S) {
            double da = drv_ras_slo_dispersion(&a, now), db = drv_ras_slo_dispersion(&b, now);
            double r = fabs(db - da) / da;
            worst = r > worst ? r : worst;
            sa += da;
            sb += db;
            n++;
        }
    }
    assert_true(n >= 15);
    *mean_a = sa / n;
    *mean_b = sb / n;
    fprintf(stderr, "%s: dispersion per arrival %.2f, totals at passes %.2f (mean of %d "
            "minutes), largest difference %.1f %%\n", kick ? "kick" : "no kick", *mean_a,
            *mean_b, n, 100 * worst);
    return worst;
}

/* Issue 20: the same arrivals, their times offset by 0-57.2 s (0.97 s
 * apart: not whole seconds either): where the 10 s buckets, the minutes
 * and the sub-buckets fall changes. Clustered
 * traffic (gamma gaps of CV 3 at 6/s, as conv-gamma3) for 40 minutes; at
 * each minute from the 11th (a full trend memory), the largest over the
 * smallest value over the offsets. The median of those ratios: of
 * drv_ras_slo_dispersion, and of the rule before 2026-12-07 (the 10 s
 * counts of whole 10 s buckets, per minute: old_rule below) on the same
 * times. */
#define PHASE_N 60
#define PHASE_EVAL 29
#define PHASE_NEW_MAX 1.15   /* measured 1.06 (2026-12-07) ... */
#define PHASE_OLD_MIN 1.5    /* ... against the rule before's 2.06 */
static double arr_t[20000];   /* arrival times, s */

/* The rule before: the median over the complete minutes of the last 64
 * 10 s buckets (m x 60 s >= first) of the variance over the mean of their six 10 s counts
 * (c10: the arrivals per 10 s bucket; minutes with fewer than 6 arrivals
 * skipped; 1 under 3 minutes). */
static double old_rule(const double *c10, double now, double first)
{
    double v[16];
    size_t nv = 0;
    int64_t m1 = (int64_t)floor(now / 60) - 1, oldest = (int64_t)floor(now / 10) - 63;
    for (int64_t m = m1; m * 6 >= oldest && m * 60 >= first; m--) {
        const double *c = c10 + m * 6;
        double sum = 0, var = 0;
        for (int k = 0; k < 6; k++)
            sum += c[k];
        if (sum < 6)
            continue;
        for (int k = 0; k < 6; k++)
            var += (c[k] - sum / 6) * (c[k] - sum / 6) / 6;
        v[nv++] = var / (sum / 6);
    }
    if (nv < 3)
        return 1;
    for (size_t i = 1; i < nv; i++)   /* insertion sort */
        for (size_t j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    double med = nv % 2 ? v[nv / 2] : (v[nv / 2 - 1] + v[nv / 2]) / 2;
    return med > 1 ? med : 1;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the median over the evaluation minutes of max / min over the offsets */
static double median_ratio(double d[PHASE_N][PHASE_EVAL], double *lo_mean, double *hi_mean)
{
    double r[PHASE_EVAL];
    *lo_mean = INFINITY;
    *hi_mean = 0;
    for (int j = 0; j < PHASE_EVAL; j++) {
        double lo = INFINITY, hi = 0;
        for (int o = 0; o < PHASE_N; o++) {
            lo = d[o][j] < lo ? d[o][j] : lo;
            hi = d[o][j] > hi ? d[o][j] : hi;
        }
        r[j] = hi / lo;
    }
    for (int o = 0; o < PHASE_N; o++) {
        double m = 0;
        for (int j = 0; j < PHASE_EVAL; j++)
            m += d[o][j] / PHASE_EVAL;
        *lo_mean = m < *lo_mean ? m : *lo_mean;
        *hi_mean = m > *hi_mean ? m : *hi_mean;
    }
    qsort(r, PHASE_EVAL, sizeof r[0], cmp_d);
    return r[PHASE_EVAL / 2];
}

static void test_dispersion_phase_free(void **st)
{
    (void)st;
    const double cv = 3, rate = 6, k = 1 / (cv * cv);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    size_t n = 0;
    for (double t = 5 + gamma_draw(&x, k) / k / rate; t < 2400 && n < 20000;
         t += gamma_draw(&x, k) / k / rate)
        arr_t[n++] = t;
    static double now_d[PHASE_N][PHASE_EVAL], old_d[PHASE_N][PHASE_EVAL];
    for (int o = 0; o < PHASE_N; o++) {
        double off = 0.97 * o;
        drv_ras_state_t s;
        drv_ras_state_init(&s, NULL, 0);
        static double c10[2600 / 10];
        memset(c10, 0, sizeof c10);
        for (size_t i = 0; i < n; i++)
            c10[(int)((arr_t[i] + off) / 10)]++;
        size_t i = 0;
        for (int j = 0; j < PHASE_EVAL; j++) {
            double at = 673 + 60.0 * j + off;   /* the same time in the traffic's terms */
            for (; i < n && arr_t[i] + off <= at; i++)
                drv_ras_observe_arrival(&s, (int64_t)((arr_t[i] + off) * 1000), 500);
            now_d[o][j] = drv_ras_slo_dispersion(&s, (int64_t)(at * 1000));
            old_d[o][j] = old_rule(c10, at, arr_t[0] + off);
        }
    }
    double lo_new, hi_new, lo_old, hi_old;
    double r_new = median_ratio(now_d, &lo_new, &hi_new);
    double r_old = median_ratio(old_d, &lo_old, &hi_old);
    fprintf(stderr, "phase: max/min over %d offsets, median over %d minutes: %.3f (before: "
            "%.3f); mean over the minutes %.2f-%.2f (before: %.2f-%.2f)\n", PHASE_N, PHASE_EVAL, r_new,
            r_old, lo_new, hi_new, lo_old, hi_old);
    assert_true(lo_old > 3);          /* clustered: far from Poisson's 1 */
    assert_true(r_new < PHASE_NEW_MAX);
    assert_true(r_old > PHASE_OLD_MIN);
}

static void test_dispersion_at_droverd_passes(void **st)
{
    (void)st;
    double ma, mb;
    /* droverd as the simulator: within 8 % at every minute, 2 % on the
     * mean (the passes' arrivals spread over up to 5 s after a quiet
     * spell: 1 s sub-buckets see that, 10 s buckets did less: 2.5 % then) */
    assert_true(disp_at_passes(true, &ma, &mb) < 0.08);
    assert_true(ma > 3);   /* clustered: far from Poisson's 1 */
    assert_float_equal(mb, ma, 0.02 * ma);
    /* without the gateway's kick: a cluster after a quiet spell, seen by
     * the safety net's pass up to 5 s later, is spread over those 5 s;
     * 10 s buckets split it over two (up to 22 % low before 2026-12-07),
     * windows starting every second do not: about as close as with the
     * kick (6.0 % at most, 2.3 % on the mean) */
    assert_true(disp_at_passes(false, &ma, &mb) < 0.08);
    assert_float_equal(mb, ma, 0.03 * ma);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispersion),
        cmocka_unit_test(test_clustered_is_no_burst),
        cmocka_unit_test(test_peaked_queue),
        cmocka_unit_test(test_dispersion_at_droverd_passes),
        cmocka_unit_test(test_dispersion_phase_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
