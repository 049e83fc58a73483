/* test_autoscale_gangs.c — unit tests of the node autoscaler's gang rule
 * (drv_nas_decide_gangs, src/autoscale/nodes.c, and through
 * drv_nas_decide_pools): a pending gang gets nodes only when all of its
 * workers fit within max_nodes, counting the nodes on their way; a gang that
 * does not fit whole gets none (with its reason), leaves the nodes on their
 * way and the lone replicas alone, and overflows whole to the next nodepool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoscale/nodes.h"
#include "autoscale/overflow.h"

#define S 1000LL

static const drv_instance_type_t QUAD = {   /* 4 x L4 */
    .id = "quad", .provider = "test", .vcpus = 48, .memory_mib = 196608, .gpu_type = "L4",
    .gpu_count = 4, .gpu_memory_mib = 24576, .price_per_hour = 3.60, .spot_price_per_hour = 1.50};
static const drv_instance_type_t *const TYPES[] = {&QUAD};

static drv_sched_request_t one_gpu(void)
{
    drv_sched_request_t r = {.gpu_count = 1, .compute_percent = 100, .cpu_millis = 2000,
                             .memory_mib = 8192};
    return r;
}

static drv_nas_config_t cfg_max(int max)
{
    drv_nas_config_t c = {.min_nodes = 0, .max_nodes = max, .types = TYPES, .n_types = 1,
                          .capacity = DRV_CAPACITY_POLICY_ON_DEMAND,
                          .scale_down_delay_ms = 300 * S, .provision_timeout_ms = 600 * S,
                          .backoff_ms = 60 * S, .backoff_max_ms = 600 * S};
    return c;
}

static drv_nas_node_t coming(const char *id)
{
    drv_nas_node_t n = {.id = id, .type = &QUAD, .state = DRV_NAS_NODE_PROVISIONING,
                        .created_ms = 990 * S};   /* 10 s ago */
    return n;
}

/* n_pend requests: the first gang_n workers of gang `g`, then lone ones. */
static size_t pend_of(drv_sched_request_t *r, int *gang, size_t gang_n, int g, size_t lone)
{
    for (size_t i = 0; i < gang_n + lone; i++) {
        r[i] = one_gpu();
        gang[i] = i < gang_n ? g : 0;
    }
    return gang_n + lone;
}

static drv_nas_decision_t D;   /* ~40 KiB: off the stack */

static drv_nas_decision_t *decide(int max, const drv_nas_node_t *nodes, size_t n_nodes,
                                  const drv_sched_request_t *r, const int *gang, size_t n,
                                  bool *covered)
{
    drv_nas_config_t c = cfg_max(max);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    drv_error_t e = {0};
    int rc = drv_nas_decide_gangs(&c, &s, 1000 * S, nodes, n_nodes, r, gang, n, covered, &D, &e);
    if (rc != 0)
        fprintf(stderr, "decide: %s\n", e.message);
    assert_int_equal(rc, 0);
    return &D;
}

static int created(const drv_nas_decision_t *d)
{
    int n = 0;
    for (size_t i = 0; i < d->n_create; i++)
        n += d->create[i].count;
    return n;
}

static int count_true(const bool *b, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += b[i];
    return k;
}

static void test_gang_fits(void **st)
{
    (void)st;
    drv_sched_request_t r[16];
    int g[16];
    bool cov[16];
    size_t n = pend_of(r, g, 8, 7, 0);
    drv_nas_decision_t *d = decide(2, NULL, 0, r, g, n, cov);
    assert_int_equal(created(d), 2);
    assert_int_equal(count_true(cov, n), 8);
    assert_int_equal(d->gang_held, 0);
    assert_int_equal(d->at_max, 0);
    assert_string_equal(d->gang_why, "");
}

static void test_gang_would_not_fit(void **st)
{
    (void)st;
    drv_sched_request_t r[16];
    int g[16];
    bool cov[16];
    size_t n = pend_of(r, g, 12, 7, 0);
    /* as lone replicas, max_nodes would still start two nodes for 8 of them */
    drv_nas_config_t c = cfg_max(2);
    drv_nas_state_t s;
    drv_nas_state_init(&s);
    drv_error_t e = {0};
    assert_int_equal(drv_nas_decide(&c, &s, 1000 * S, NULL, 0, r, n, cov, &D, &e), 0);
    assert_int_equal(created(&D), 2);
    /* as one gang: nothing, with the reason */
    drv_nas_decision_t *d = decide(2, NULL, 0, r, g, n, cov);
    assert_int_equal(created(d), 0);
    assert_int_equal(count_true(cov, n), 0);
    assert_int_equal(d->gang_held, 12);
    assert_int_equal(d->at_max, 12);
    assert_int_equal(d->live_after, 0);
    assert_non_null(strstr(d->gang_why, "a gang of 12 worker(s) needs 3 node(s) of quad"));
    assert_non_null(strstr(d->gang_why, "max_nodes 2"));
    bool ev = false;
    for (size_t i = 0; i < d->n_events; i++)
        ev |= strcmp(d->events[i].kind, "at_max_nodes") == 0 &&
              strcmp(d->events[i].reason, d->gang_why) == 0;
    assert_true(ev);
}

static void test_nodes_on_their_way_counted(void **st)
{
    (void)st;
    drv_sched_request_t r[16];
    int g[16];
    bool cov[16];
    drv_nas_node_t way[] = {coming("n1")};
    /* 4 on the way + 1 new node = the gang of 8 within max_nodes 2 */
    size_t n = pend_of(r, g, 8, 3, 0);
    drv_nas_decision_t *d = decide(2, way, 1, r, g, n, cov);
    assert_int_equal(created(d), 1);
    assert_int_equal(d->covered_on_the_way, 4);
    assert_int_equal(count_true(cov, n), 8);
    /* 12 workers: the node on its way and one more hold 8; nothing for it,
     * and the node on its way does not count as covering any of it */
    n = pend_of(r, g, 12, 3, 0);
    d = decide(2, way, 1, r, g, n, cov);
    assert_int_equal(created(d), 0);
    assert_int_equal(d->covered_on_the_way, 0);
    assert_int_equal(count_true(cov, n), 0);
    assert_int_equal(d->gang_held, 12);
    assert_int_equal(d->live_after, 1);
    assert_non_null(strstr(d->gang_why, "(1 live node(s)"));
    /* two nodes on their way already hold a gang of 8: no new node */
    drv_nas_node_t way2[] = {coming("n1"), coming("n2")};
    n = pend_of(r, g, 8, 3, 0);
    d = decide(2, way2, 2, r, g, n, cov);
    assert_int_equal(created(d), 0);
    assert_int_equal(count_true(cov, n), 8);
    assert_int_equal(d->gang_held, 0);
}

static void test_lone_replicas_and_other_gangs_unaffected(void **st)
{
    (void)st;
    drv_sched_request_t r[16];
    int g[16];
    bool cov[16];
    /* a held gang of 12 takes nothing from a lone replica behind it */
    size_t n = pend_of(r, g, 12, 5, 1);
    drv_nas_decision_t *d = decide(2, NULL, 0, r, g, n, cov);
    assert_int_equal(created(d), 1);
    assert_int_equal(count_true(cov, n), 1);
    assert_true(cov[12]);
    assert_int_equal(d->gang_held, 12);
    /* gang 1 (4 workers) first, then gang 2 (8): 1 + 2 nodes > max 2 →
     * gang 1 gets its node, gang 2 none */
    for (size_t i = 0; i < 12; i++) {
        r[i] = one_gpu();
        g[i] = i < 4 ? 1 : 2;
    }
    d = decide(2, NULL, 0, r, g, 12, cov);
    assert_int_equal(created(d), 1);
    assert_int_equal(count_true(cov, 4), 4);
    assert_int_equal(count_true(cov + 4, 8), 0);
    assert_int_equal(d->gang_held, 8);
    /* with max_nodes 3 both fit whole */
    d = decide(3, NULL, 0, r, g, 12, cov);
    assert_int_equal(created(d), 3);
    assert_int_equal(count_true(cov, 12), 12);
}

static void test_gang_overflows_whole(void **st)
{
    (void)st;
    drv_nas_config_t c0 = cfg_max(1), c1 = cfg_max(3);
    drv_nas_state_t s0, s1;
    drv_nas_state_init(&s0);
    drv_nas_state_init(&s1);
    drv_nas_pool_t pools[] = {{.name = "c/first", .cfg = &c0, .state = &s0},
                              {.name = "c/second", .cfg = &c1, .state = &s1}};
    drv_nas_want_t w[8];
    for (size_t i = 0; i < 8; i++)
        w[i] = (drv_nas_want_t){.req = one_gpu(), .pools = {0, 1}, .n_pools = 2, .gang = 9};
    static drv_nas_decision_t out[2];
    int at[8];
    bool cov[8];
    drv_error_t e = {0};
    assert_int_equal(drv_nas_decide_pools(pools, 2, 1000 * S, w, 8, out, at, cov, &e), 0);
    assert_int_equal(created(&out[0]), 0);   /* not one node of 4 for half the gang */
    assert_int_equal(created(&out[1]), 2);
    for (size_t i = 0; i < 8; i++) {
        assert_int_equal(at[i], 1);
        assert_true(cov[i]);
    }
    /* without the gang id the first nodepool takes half of it */
    for (size_t i = 0; i < 8; i++)
        w[i].gang = 0;
    assert_int_equal(drv_nas_decide_pools(pools, 2, 1000 * S, w, 8, out, at, cov, &e), 0);
    assert_int_equal(created(&out[0]), 1);
    assert_int_equal(created(&out[1]), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gang_fits),
        cmocka_unit_test(test_gang_would_not_fit),
        cmocka_unit_test(test_nodes_on_their_way_counted),
        cmocka_unit_test(test_lone_replicas_and_other_gangs_unaffected),
        cmocka_unit_test(test_gang_overflows_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
