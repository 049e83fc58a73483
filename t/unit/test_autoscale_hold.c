/* test_autoscale_hold.c — unit test of the SLO mode's rate memory
 * (src/autoscale/replicas.c, replicas.h "SLO-aware sizing"): a rate seen
 * while requests were short holds, once they are long, no more than the
 * offered load it brought (rate x E[S] then, over E[S] now), where the
 * rate at the model of now would hold replicas for a load that never came
 * (conv seeds 3 and 4: 11 replicas held for minute 4's rate once E[S] had
 * grown by a third; docs/benchmarks.md). A rate seen at the same E[S]
 * stays held (test_autoscale_slo.c, test_hold_remembers_the_burst).
 * Virtual clock; steady synthetic traffic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

#include "autoscale/replicas.h"
#include "ras_decide.h"

#define S 1000LL   /* ms per second */

/* One second at t: `rate` arrivals (evenly spread), as many completions
 * of the given first-token and service times, 8 slots. */
static void second(drv_ras_state_t *s, int64_t t, int rate, double first_s, double service_s)
{
    for (int k = 0; k < rate; k++) {
        int64_t at = t + k * S / rate;
        drv_ras_observe_arrival(s, at, 500);
        drv_ras_observe_done(s, at, 500, 100, first_s, service_s, 8);
    }
}

/* 2/s, then 4/s of 4 s requests (the model learns them), then 7/s of 1 s
 * ones for two minutes (no step: under twice the typical rate), then 20
 * minutes at 2/s of 12 s ones. */
static void test_held_rate_at_most_the_load_seen(void **st)
{
    (void)st;
    drv_ras_config_t cfg = {
        .min_replicas = 1, .max_replicas = 40, .target_concurrency = 4,
        .traffic_history_seconds = 60, .scale_up_delay_seconds = 0,
        .scale_down_delay_seconds = 60, .scale_to_zero_delay_seconds = 900,
        .ttft_slo_ms = 2000,
    };
    drv_ras_state_t s;
    drv_ras_state_init(&s, &cfg, 0);
    int cur = 4;
    int64_t t = 0;
    double before_ready = 0, rate_seen = 0;
    for (; t < 600; t++) {
        second(&s, t * S, t < 200 ? 2 : 4, 0.2, 4);
        drv_ras_decision_t d = decide(&cfg, &s, t * S, cur);
        if (!d.slo.ready && d.slo.lambda > before_ready)
            before_ready = d.slo.lambda;   /* held as seen: no E[S] to weigh it by */
        cur = d.desired;
    }
    for (; t < 720; t++) {
        second(&s, t * S, 7, 0.2, 1);
        drv_ras_decision_t d = decide(&cfg, &s, t * S, cur);
        assert_true(d.slo.ready);
        if (d.slo.lambda > rate_seen)
            rate_seen = d.slo.lambda;
        cur = d.desired;
    }
    drv_ras_decision_t d = {0};
    for (; t < 720 + 20 * 60; t++) {
        second(&s, t * S, 2, 0.2, 12);
        d = decide(&cfg, &s, t * S, cur);
        cur = d.desired;
    }
    double es = d.slo.mean_service_s;
    assert_true(es > 8);                               /* the model learned the long ones */
    assert_int_equal(d.slo.surge_need, 0);             /* no step was seen */
    assert_true(rate_seen >= 6.5 && before_ready < rate_seen);
    /* the short requests' rate is held as the load it brought, 7 x ~1.5 s,
     * not at today's E[S]: what stays held is the rate from before the
     * model was ready (fails without the cap: held_rate is 7) */
    assert_true(d.slo.held_rate <= before_ready + 1e-9);
    int at_rate = drv_ras_slo_need(rate_seen, es, d.slo.first_p99_s, 8, 2.0, 40, NULL);
    assert_true(d.slo.held < at_rate);                 /* the scale-down floor */
    assert_true(d.slo.held >= d.slo.need);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held_rate_at_most_the_load_seen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
