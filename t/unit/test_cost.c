/* test_cost.c — unit tests of src/head/cost.c: a node's price per hour by
 * capacity (spot where the catalog knows a spot price, else on-demand),
 * what it has cost, in whole cents, from its creation; when a node's cost
 * is shown again (first cost, new price and the final cost at once, an
 * accrual at most every DRV_COST_RENDER_S); and drv_cost_update over a real
 * state (the embedded catalog, in memory): throttled node figures, exact
 * nodepool and cluster totals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "head/cost.h"
#include "state/state.h"

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

static json_t *cost(double price, const char *cap, double acc)
{
    return json_pack("{s:f, s:s, s:f}", "price_per_hour", price, "capacity_type", cap,
                     "accrued_usd", acc);
}

static void render_due(void **state)
{
    json_t *a = cost(1.0, "on_demand", 0.5), *b = cost(1.0, "on_demand", 0.51),
           *spot = cost(0.4, "spot", 0.5);
    assert_true(drv_cost_render_due(NULL, a, 0, 1000, false));         /* first cost */
    assert_false(drv_cost_render_due(a, a, 0, 5000, false));           /* unchanged */
    assert_false(drv_cost_render_due(a, b, 1000, 1000, false));        /* a cent: wait */
    assert_false(drv_cost_render_due(a, b, 1000, 1000 + DRV_COST_RENDER_S - 1, false));
    assert_true(drv_cost_render_due(a, b, 1000, 1000 + DRV_COST_RENDER_S, false));
    assert_true(drv_cost_render_due(a, b, 1000, 999, false));          /* clock went back */
    assert_true(drv_cost_render_due(a, b, 1000, 1001, true));          /* ending: final cost */
    assert_true(drv_cost_render_due(a, spot, 1000, 1001, false));      /* new price */
    json_decref(a);
    json_decref(b);
    json_decref(spot);
}

/* --- drv_cost_update over a real state ------------------------------------------------- */

static drv_head_t H;

/* A head with the embedded catalog and an in-memory state (no store). */
static int head_setup(void **state)
{
    drv_error_t err;
    H.catalog = drv_catalog_create_default(&err);
    assert_non_null(H.catalog);
    H.state = drv_state_create(NULL);
    assert_non_null(H.state);
    return 0;
}

static int head_teardown(void **state)
{
    drv_state_destroy(H.state);
    drv_catalog_destroy(H.catalog);
    return 0;
}

static void put(drv_kind_t kind, const char *key, const char *id, json_t *spec, int64_t created)
{
    drv_obj_t *o = drv_obj_new(kind, key, "u", id, spec, NULL);
    o->created_at = o->updated_at = created;
    o->rv = 1;
    drv_state_put(H.state, o);
}

static double shown(drv_kind_t kind, const char *key)
{
    const drv_obj_t *o = drv_state_get(H.state, kind, key);
    assert_non_null(o);
    const json_t *acc = json_object_get(json_object_get(o->status, "cost"), "accrued_usd");
    assert_non_null(acc);
    return json_real_value(acc);
}

static void update_throttled(void **state)
{
    const int64_t t0 = 1700000000;
    /* p5.48xlarge: $55.04/h, a cent and a half every second */
    double price = drv_cost_price(drv_catalog_instance_type(H.catalog, "p5.48xlarge"), "on_demand");
    assert_true(price > 36);
    drv_state_wrlock(H.state);
    put(DRV_K_CLUSTER, "u/c", "c", json_pack("{s:s, s:s}", "id", "c", "provider", "aws"), t0);
    put(DRV_K_NODEPOOL, "u/c/p", "p", json_pack("{s:s, s:s}", "id", "p", "cluster", "c"), t0);
    json_t *spec = json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", "n1", "cluster", "c", "nodepool",
                             "p", "instance_type", "p5.48xlarge", "capacity_type", "on_demand");
    put(DRV_K_NODE, "u/n1", "n1", json_deep_copy(spec), t0);
    drv_cost_update(&H, t0);   /* the first cost: at once */
    assert_true(shown(DRV_K_NODE, "u/n1") == 0);
    /* 30 s on: the node still shows 0; the totals are exact */
    drv_cost_update(&H, t0 + 30);
    assert_true(shown(DRV_K_NODE, "u/n1") == 0);
    double acc30 = drv_cost_accrued(price, t0, t0 + 30);
    assert_true(acc30 > 0);
    assert_true(shown(DRV_K_NODEPOOL, "u/c/p") == acc30);
    assert_true(shown(DRV_K_CLUSTER, "u/c") == acc30);
    /* a new node's first cost is at once, and it is in the totals */
    json_object_set_new(spec, "id", json_string("n2"));
    put(DRV_K_NODE, "u/n2", "n2", json_deep_copy(spec), t0 + 20);
    drv_cost_update(&H, t0 + 40);
    double acc40 = drv_cost_accrued(price, t0, t0 + 40), n2_40 = drv_cost_accrued(price, t0 + 20,
                                                                                  t0 + 40);
    assert_true(shown(DRV_K_NODE, "u/n1") == 0);
    assert_true(shown(DRV_K_NODE, "u/n2") == n2_40);
    assert_true(fabs(shown(DRV_K_NODEPOOL, "u/c/p") - (acc40 + n2_40)) < 0.005);
    /* DRV_COST_RENDER_S after the first: n1 shows its cost again */
    drv_cost_update(&H, t0 + DRV_COST_RENDER_S);
    assert_true(shown(DRV_K_NODE, "u/n1") == drv_cost_accrued(price, t0, t0 + DRV_COST_RENDER_S));
    assert_true(shown(DRV_K_NODE, "u/n2") == n2_40);   /* n2's turn comes later */
    drv_cost_update(&H, t0 + DRV_COST_RENDER_S + 10);
    assert_true(shown(DRV_K_NODE, "u/n1") == drv_cost_accrued(price, t0, t0 + DRV_COST_RENDER_S));
    /* n1 ends (terminating): its final cost is shown at once, and again at
     * every pass while it ends */
    json_object_set_new(spec, "id", json_string("n1"));
    json_object_set_new(spec, "terminating", json_true());
    put(DRV_K_NODE, "u/n1", "n1", json_deep_copy(spec), t0);
    drv_cost_update(&H, t0 + DRV_COST_RENDER_S + 11);
    assert_true(shown(DRV_K_NODE, "u/n1") ==
                drv_cost_accrued(price, t0, t0 + DRV_COST_RENDER_S + 11));
    drv_cost_update(&H, t0 + DRV_COST_RENDER_S + 12);
    assert_true(shown(DRV_K_NODE, "u/n1") ==
                drv_cost_accrued(price, t0, t0 + DRV_COST_RENDER_S + 12));
    drv_state_unlock(H.state);
    json_decref(spec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(price_by_capacity),
        cmocka_unit_test(accrued_in_cents),
        cmocka_unit_test(render_due),
        cmocka_unit_test_setup_teardown(update_throttled, head_setup, head_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
