/* ras_decide.h — for the replica autoscaler's unit tests that decide with
 * every replica ready and no demand signal (test_autoscale_hold.c,
 * test_autoscale_floor.c); included after cmocka.h and autoscale/replicas.h. */
#ifndef DRV_T_RAS_DECIDE_H
#define DRV_T_RAS_DECIDE_H

#include <stdio.h>

/* drv_ras_decide with current replicas, all ready; a failure fails the test. */
static drv_ras_decision_t decide(const drv_ras_config_t *cfg, drv_ras_state_t *s, int64_t now,
                                 int current)
{
    drv_ras_decision_t d;
    drv_error_t e = {0};
    int rc = drv_ras_decide(cfg, s, now, current, 0, 0, current, false, &d, &e);
    if (rc != 0)
        fprintf(stderr, "decide: %s\n", e.message);
    assert_int_equal(rc, 0);
    return d;
}

#endif
