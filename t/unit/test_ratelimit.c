/* test_ratelimit.c — src/common/ratelimit.c: a burst is allowed then refused
 * with a Retry-After that fits the rate, tokens come back with time (and
 * never beyond the burst), addresses are apart, and the table stays at its
 * cap, evicting the least recently failing address. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

#include "common/ratelimit.h"

static void test_burst_then_refused(void **state)
{
    (void)state;
    drv_ratelimit_t *rl = drv_ratelimit_create(2, 5, 16);
    assert_non_null(rl);
    int retry = 0;
    for (int i = 0; i < 5; i++)
        assert_int_equal(drv_ratelimit_fail(rl, "10.0.0.1", 1000, &retry), 0);
    assert_int_equal(drv_ratelimit_fail(rl, "10.0.0.1", 1000, &retry), -1);
    assert_int_equal(retry, 1);   /* one token at 2/s: within a second */
    /* another address is apart */
    assert_int_equal(drv_ratelimit_fail(rl, "10.0.0.2", 1000, &retry), 0);
    /* 0.5 s later one token is back, then none */
    assert_int_equal(drv_ratelimit_fail(rl, "10.0.0.1", 1500, &retry), 0);
    assert_int_equal(drv_ratelimit_fail(rl, "10.0.0.1", 1500, &retry), -1);
    /* a long pause refills to the burst, not beyond */
    for (int i = 0; i < 5; i++)
        assert_int_equal(drv_ratelimit_fail(rl, "10.0.0.1", 1000000, &retry), 0);
    assert_int_equal(drv_ratelimit_fail(rl, "10.0.0.1", 1000000, &retry), -1);
    drv_ratelimit_destroy(rl);
}

static void test_slow_rate_retry_after(void **state)
{
    (void)state;
    drv_ratelimit_t *rl = drv_ratelimit_create(0.1, 1, 4);   /* one per 10 s */
    int retry = 0;
    assert_int_equal(drv_ratelimit_fail(rl, "::1", 0, &retry), 0);
    assert_int_equal(drv_ratelimit_fail(rl, "::1", 0, &retry), -1);
    assert_int_equal(retry, 10);
    drv_ratelimit_destroy(rl);
}

static void test_bounded_lru(void **state)
{
    (void)state;
    drv_ratelimit_t *rl = drv_ratelimit_create(1, 2, 4);
    int retry = 0;
    char a[32];
    for (int i = 0; i < 100; i++) {
        snprintf(a, sizeof a, "192.0.2.%d", i);
        assert_int_equal(drv_ratelimit_fail(rl, a, 1000 + i, &retry), 0);
    }
    assert_int_equal(drv_ratelimit_tracked(rl), 4);
    /* the newest four are kept: 99 has spent one of two tokens */
    assert_int_equal(drv_ratelimit_fail(rl, "192.0.2.99", 1099, &retry), 0);
    assert_int_equal(drv_ratelimit_fail(rl, "192.0.2.99", 1099, &retry), -1);
    /* an evicted address starts afresh with a full bucket */
    assert_int_equal(drv_ratelimit_fail(rl, "192.0.2.0", 1100, &retry), 0);
    assert_int_equal(drv_ratelimit_fail(rl, "192.0.2.0", 1100, &retry), 0);
    assert_int_equal(drv_ratelimit_fail(rl, "192.0.2.0", 1100, &retry), -1);
    assert_int_equal(drv_ratelimit_tracked(rl), 4);
    drv_ratelimit_destroy(rl);
}

static void test_bad_settings(void **state)
{
    (void)state;
    assert_null(drv_ratelimit_create(0, 5, 4));
    assert_null(drv_ratelimit_create(1, 0, 4));
    assert_null(drv_ratelimit_create(1, 5, 0));
    int retry = 0;
    assert_int_equal(drv_ratelimit_fail(NULL, "x", 0, &retry), 0);   /* no limiter: no limit */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_then_refused),
        cmocka_unit_test(test_slow_rate_retry_after),
        cmocka_unit_test(test_bounded_lru),
        cmocka_unit_test(test_bad_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
