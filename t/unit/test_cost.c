/* test_cost.c — unit tests of src/head/cost.c's pure parts: a node's price
 * per hour by capacity (spot where the catalog knows a spot price, else
 * on-demand) and what it has cost, in whole cents, from its creation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "head/cost.h"

static void price_by_capacity(void **state)
{
    drv_instance_type_t t = {.id = "g4dn.xlarge", .price_per_hour = 0.526,
                             .spot_price_per_hour = 0.21};
    assert_true(drv_cost_price(&t, "on_demand") == 0.526);
    assert_true(drv_cost_price(&t, "spot") == 0.21);
    assert_true(drv_cost_price(&t, NULL) == 0.526);
    t.spot_price_per_hour = -1;   /* unknown: the on-demand price */
    assert_true(drv_cost_price(&t, "spot") == 0.526);
    assert_true(drv_cost_price(NULL, "spot") == 0);
}

static void accrued_in_cents(void **state)
{
    /* $3.60/h for 1000 s = $1.00 exactly; 999 s = 99.9 cents -> 99 */
    assert_true(drv_cost_accrued(3.6, 1000, 2000) == 1.0);
    assert_true(drv_cost_accrued(3.6, 1000, 1999) == 0.99);
    assert_true(drv_cost_accrued(0.526, 0, 3600 * 10) == 5.26);
    assert_true(drv_cost_accrued(1.0, 500, 400) == 0);   /* clock behind: nothing */
    assert_true(drv_cost_accrued(0, 0, 100000) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(price_by_capacity),
        cmocka_unit_test(accrued_in_cents),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
