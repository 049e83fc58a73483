/* test_autoscale_disp.c — unit tests of the replica autoscaler's learned
 * dispersion of arrivals (src/autoscale/replicas_slo.c,
 * drv_ras_slo_dispersion; replicas.h "Clustered arrivals"): its value on
 * even, clustered and young memories, a step's minutes against the
 * median, and the burst test it widens: clustered traffic's busy seconds
 * are no burst (fails with the Poisson noise alone), a real burst on top
 * of it still is. Virtual clock; synthetic traffic. */
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
    /* two complete minutes: too few, Poisson's 1 */
    assert_float_equal(drv_ras_slo_dispersion(&s, 120 * S + 5 * S), 1, 0);
    minutes(&s, 2, 5, 80, 20);
    /* counts 80, 20, ...: mean 50, variance 900: 18 */
    assert_float_equal(drv_ras_slo_dispersion(&s, 300 * S + 5 * S), 18, 1e-9);
    /* a step minute (counts 80, 300, ...) is one of the six: the median moves little */
    minutes(&s, 5, 6, 80, 300);
    assert_float_equal(drv_ras_slo_dispersion(&s, 360 * S + 5 * S), 18, 1e-9);

    /* even counts: variance 0, at least 1 */
    drv_ras_state_init(&s, NULL, 0);
    minutes(&s, 0, 6, 50, 50);
    assert_float_equal(drv_ras_slo_dispersion(&s, 360 * S + 5 * S), 1, 0);
    /* under DRV_RAS_SLO_DISP_MIN_N arrivals a minute: not counted */
    drv_ras_state_init(&s, NULL, 0);
    minutes(&s, 0, 6, 1, 0);
    assert_float_equal(drv_ras_slo_dispersion(&s, 360 * S + 5 * S), 1, 0);
    /* minutes before the memory started are not minutes seen */
    drv_ras_state_init(&s, NULL, 0);
    minutes(&s, 0, 6, 80, 20);
    s.init_ms = 250 * S;
    assert_float_equal(drv_ras_slo_dispersion(&s, 360 * S + 5 * S), 1, 0);
    /* only what the trend memory holds (its 64 buckets: the last 10 complete minutes) */
    drv_ras_state_init(&s, NULL, 0);
    minutes(&s, 0, 6, 80, 20);
    minutes(&s, 6, 20, 50, 50);
    assert_float_equal(drv_ras_slo_dispersion(&s, 1200 * S + 5 * S), 1, 0);
}

/* The burst window (the newest 6 s) at the end of a busy 10 s of
 * clustered traffic (8/s, then 2/s, mean 5/s) is beyond Poisson noise
 * above the history's 5/s (8 - 2 sqrt(8 / 6) = 5.7), not beyond the noise
 * of counts 18 x as variable (8 - 2 sqrt(18 x 8 / 6) < 5): the model sizes
 * for the history's rate. A burst of 40/s after it is still one. */
static void test_clustered_is_no_burst(void **st)
{
    (void)st;
    drv_ras_config_t cfg = {
        .min_replicas = 1, .max_replicas = 40, .target_concurrency = 4,
        .traffic_history_seconds = 60, .scale_up_delay_seconds = 0,
        .scale_down_delay_seconds = 300, .scale_to_zero_delay_seconds = 900,
        .ttft_slo_ms = 2000,
    };
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    minutes(&s, 0, 10, 80, 20);
    for (int64_t t = 0; t < 600; t++)   /* completions: the model is ready */
        for (int k = 0; k < 5; k++)
            drv_ras_observe_done(&s, t * S + k * 200, 500, 100, 0.2, 5.2, 8);
    ten_seconds(&s, 600 * S, 80);        /* a busy 10 s: the history 300 in 60 s */
    drv_ras_slo_estimate_t e;
    drv_ras_slo_estimate(&cfg, &s, 609 * S + 999, &e);
    assert_true(e.ready);
    assert_float_equal(e.dispersion, 18, 1e-9);
    assert_float_equal(e.lambda, 5, 1e-9);
    assert_int_equal(e.need, drv_ras_slo_need(5, e.mean_service_s, e.first_p99_s, 8, 2, 40,
                                              NULL));
    /* a burst: 40/s from 610 s (40 - 2 sqrt(18 x 40 / 6) = 18.1 against
     * the history's 680 / 60 = 11.3) */
    ten_seconds(&s, 610 * S, 400);
    drv_ras_slo_estimate(&cfg, &s, 619 * S + 999, &e);
    assert_float_equal(e.lambda, 40 - 2 * sqrt(18 * 40 / 6.0), 1e-9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispersion),
        cmocka_unit_test(test_clustered_is_no_burst),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
