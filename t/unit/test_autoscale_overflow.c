/* test_autoscale_overflow.c — unit tests of nodepool priority with overflow
 * (src/autoscale/overflow.c): replicas stay in their first nodepool when it
 * can get capacity, overflow to the next by priority when it is at
 * max_nodes, backing off or has no instance type that holds them, stay
 * uncovered at the end of their list, the events say why on both sides,
 * re-decisions start from the pool's memory as it was (a provisioning
 * timeout counts once), and bad input changes nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "autoscale/overflow.h"

#define S 1000LL
#define MIN (60 * S)

static const drv_instance_type_t SMALL = {   /* 1 x L4 */
    .id = "small", .provider = "test", .vcpus = 8, .memory_mib = 32768, .gpu_type = "L4",
    .gpu_count = 1, .gpu_memory_mib = 24576, .price_per_hour = 1.00, .spot_price_per_hour = 0.30};
static const drv_instance_type_t BIG = {     /* 1 x H100 */
    .id = "big", .provider = "test", .vcpus = 16, .memory_mib = 131072, .gpu_type = "H100",
    .gpu_count = 1, .gpu_memory_mib = 81920, .price_per_hour = 5.00, .spot_price_per_hour = -1};
static const drv_instance_type_t CPU = {     /* no GPU */
    .id = "cpu", .provider = "test", .vcpus = 4, .memory_mib = 16384, .gpu_type = "",
    .gpu_count = 0, .gpu_memory_mib = 0, .price_per_hour = 0.10, .spot_price_per_hour = 0.05};

static const drv_instance_type_t *const T_SMALL[] = {&SMALL};
static const drv_instance_type_t *const T_BIG[] = {&BIG};
static const drv_instance_type_t *const T_CPU[] = {&CPU};

static drv_nas_config_t cfg_of(const drv_instance_type_t *const *types,
                               drv_capacity_policy_t cap, int max)
{
    drv_nas_config_t c = {.min_nodes = 0, .max_nodes = max, .types = types, .n_types = 1,
                          .capacity = cap, .scale_down_delay_ms = 300 * S,
                          .provision_timeout_ms = 10 * MIN, .backoff_ms = 60 * S,
                          .backoff_max_ms = 10 * MIN};
    return c;
}

/* A whole GPU: one per SMALL or BIG node. */
static drv_nas_want_t want(int first, int second)
{
    drv_nas_want_t w = {.req = {.gpu_count = 1, .compute_percent = 100, .cpu_millis = 1000,
                                .memory_mib = 4096}};
    if (first >= 0)
        w.pools[w.n_pools++] = first;
    if (second >= 0)
        w.pools[w.n_pools++] = second;
    return w;
}

static drv_nas_decision_t out[3];

static int created(const drv_nas_decision_t *d)
{
    int n = 0;
    for (size_t i = 0; i < d->n_create; i++)
        n += d->create[i].count;
    return n;
}

static const drv_nas_event_t *overflow_event(const drv_nas_decision_t *d)
{
    for (size_t i = 0; i < d->n_events; i++)
        if (strcmp(d->events[i].kind, "overflow") == 0)
            return &d->events[i];
    return NULL;
}

static void run(drv_nas_pool_t *pools, size_t n_pools, int64_t now, const drv_nas_want_t *w,
                size_t n, int *at, bool *covered)
{
    drv_error_t e = {0};
    memset(out, 0, sizeof out);
    int rc = drv_nas_decide_pools(pools, n_pools, now, w, n, out, at, covered, &e);
    if (rc != 0)
        fprintf(stderr, "decide_pools: %s\n", e.message);
    assert_int_equal(rc, 0);
}

/* The first nodepool can get capacity: nothing overflows, the second is
 * left alone. */
static void test_no_overflow_when_first_can(void **st)
{
    (void)st;
    drv_nas_config_t a = cfg_of(T_SMALL, DRV_CAPACITY_POLICY_ON_DEMAND, 5);
    drv_nas_config_t b = cfg_of(T_BIG, DRV_CAPACITY_POLICY_ON_DEMAND, 5);
    drv_nas_state_t sa = {0}, sb = {0};
    drv_nas_pool_t pools[] = {{.name = "c/a", .cfg = &a, .state = &sa},
                              {.name = "c/b", .cfg = &b, .state = &sb}};
    drv_nas_want_t w[] = {want(0, 1), want(0, 1)};
    int at[2];
    bool cov[2];
    run(pools, 2, 0, w, 2, at, cov);
    assert_int_equal(created(&out[0]), 2);
    assert_int_equal(created(&out[1]), 0);
    assert_null(overflow_event(&out[0]));
    assert_null(overflow_event(&out[1]));
    assert_int_equal(at[0], 0);
    assert_int_equal(at[1], 0);
    assert_true(cov[0] && cov[1]);
}

/* At max_nodes: what does not fit overflows to the next nodepool. */
static void test_overflow_at_max_nodes(void **st)
{
    (void)st;
    drv_nas_config_t a = cfg_of(T_SMALL, DRV_CAPACITY_POLICY_ON_DEMAND, 2);
    drv_nas_config_t b = cfg_of(T_BIG, DRV_CAPACITY_POLICY_ON_DEMAND, 5);
    drv_nas_state_t sa = {0}, sb = {0};
    drv_nas_node_t busy = {.id = "a-1", .type = &SMALL, .state = DRV_NAS_NODE_READY};
    drv_nas_pool_t pools[] = {{.name = "c/a", .cfg = &a, .state = &sa, .nodes = &busy,
                               .n_nodes = 1},
                              {.name = "c/b", .cfg = &b, .state = &sb}};
    drv_nas_want_t w[] = {want(0, 1), want(0, 1), want(0, 1)};
    int at[3];
    bool cov[3];
    run(pools, 2, 0, w, 3, at, cov);
    assert_int_equal(created(&out[0]), 1);   /* up to max_nodes 2 */
    assert_int_equal(created(&out[1]), 2);   /* the other two */
    assert_int_equal(out[0].at_max, 0);      /* they are not waiting there any more */
    assert_int_equal(at[0], 0);
    assert_int_equal(at[1], 1);
    assert_int_equal(at[2], 1);
    assert_true(cov[0] && cov[1] && cov[2]);
    const drv_nas_event_t *from = overflow_event(&out[0]), *to = overflow_event(&out[1]);
    assert_non_null(from);
    assert_non_null(to);
    assert_int_equal(from->replicas, 2);
    assert_non_null(strstr(from->reason, "to nodepool c/b"));
    assert_non_null(strstr(from->reason, "max_nodes (2)"));
    assert_non_null(strstr(to->reason, "from nodepool c/a"));
    assert_non_null(strstr(to->reason, "max_nodes (2)"));
}

/* Every type of the first nodepool backs off after a capacity error. */
static void test_overflow_on_backoff(void **st)
{
    (void)st;
    drv_nas_config_t a = cfg_of(T_SMALL, DRV_CAPACITY_POLICY_SPOT, 5);
    drv_nas_config_t b = cfg_of(T_BIG, DRV_CAPACITY_POLICY_ON_DEMAND, 5);
    drv_nas_state_t sa = {0}, sb = {0};
    drv_nas_report_failure(&sa, &a, "small", DRV_CAPACITY_SPOT, 0, "InsufficientInstanceCapacity");
    drv_nas_pool_t pools[] = {{.name = "c/a", .cfg = &a, .state = &sa},
                              {.name = "c/b", .cfg = &b, .state = &sb}};
    drv_nas_want_t w[] = {want(0, 1)};
    int at[1];
    run(pools, 2, 10 * S, w, 1, at, NULL);
    assert_int_equal(created(&out[0]), 0);
    assert_int_equal(created(&out[1]), 1);
    assert_int_equal(at[0], 1);
    assert_non_null(strstr(overflow_event(&out[1])->reason, "backing off"));
    /* once the backoff is over, the first nodepool is used again */
    run(pools, 2, 2 * MIN, w, 1, at, NULL);
    assert_int_equal(created(&out[0]), 1);
    assert_int_equal(created(&out[1]), 0);
    assert_int_equal(at[0], 0);
}

/* A replica that overflowed waits for the node on its way in the second
 * nodepool after the first one's backoff runs out: no second node for it.
 * Another replica, which that node cannot hold, goes to the first. */
static void test_node_on_its_way_counts_across_nodepools(void **st)
{
    (void)st;
    drv_nas_config_t a = cfg_of(T_SMALL, DRV_CAPACITY_POLICY_SPOT, 5);
    drv_nas_config_t b = cfg_of(T_BIG, DRV_CAPACITY_POLICY_ON_DEMAND, 5);
    drv_nas_state_t sa = {0}, sb = {0};
    drv_nas_report_failure(&sa, &a, "small", DRV_CAPACITY_SPOT, 0, "InsufficientInstanceCapacity");
    drv_nas_node_t coming = {.id = "b-1", .type = &BIG, .state = DRV_NAS_NODE_PROVISIONING,
                             .created_ms = 10 * S};
    drv_nas_pool_t pools[] = {{.name = "c/a", .cfg = &a, .state = &sa},
                              {.name = "c/b", .cfg = &b, .state = &sb, .nodes = &coming,
                               .n_nodes = 1}};
    drv_nas_want_t w[] = {want(0, 1), want(0, 1)};
    int at[2];
    bool cov[2];
    run(pools, 2, 2 * MIN, w, 1, at, cov);   /* a's backoff is over */
    assert_int_equal(created(&out[0]), 0);
    assert_int_equal(created(&out[1]), 0);
    assert_int_equal(at[0], 1);
    assert_true(cov[0]);
    assert_null(overflow_event(&out[0]));    /* nothing new to tell */
    run(pools, 2, 2 * MIN, w, 2, at, cov);   /* b-1 holds one of the two */
    assert_int_equal(created(&out[0]), 1);
    assert_int_equal(created(&out[1]), 0);
    assert_int_equal(at[0], 1);
    assert_int_equal(at[1], 0);
    assert_true(cov[0] && cov[1]);
    assert_null(overflow_event(&out[0]));
    /* a node on its way in the first nodepool: the second one's is not
     * preferred */
    drv_nas_node_t mine = {.id = "a-1", .type = &SMALL, .state = DRV_NAS_NODE_PROVISIONING,
                           .created_ms = 10 * S};
    pools[0].nodes = &mine;
    pools[0].n_nodes = 1;
    run(pools, 2, 2 * MIN, w, 1, at, cov);
    assert_int_equal(at[0], 0);
    assert_true(cov[0]);
}

/* A replica whose list has many nodepools, all but the last at max_nodes,
 * moves down all of it (an event for each step). */
static void test_long_list(void **st)
{
    (void)st;
    drv_nas_config_t full = cfg_of(T_SMALL, DRV_CAPACITY_POLICY_ON_DEMAND, 0);
    drv_nas_config_t room = cfg_of(T_SMALL, DRV_CAPACITY_POLICY_ON_DEMAND, 1);
    static drv_nas_state_t s[DRV_NAS_MAX_PRIO];
    static drv_nas_decision_t many[DRV_NAS_MAX_PRIO];
    static char names[DRV_NAS_MAX_PRIO][16];
    drv_nas_pool_t pools[DRV_NAS_MAX_PRIO];
    drv_nas_want_t w = want(-1, -1);
    for (int k = 0; k < DRV_NAS_MAX_PRIO; k++) {
        snprintf(names[k], sizeof names[k], "c/p%d", k);
        pools[k] = (drv_nas_pool_t){.name = names[k],
                                    .cfg = k == DRV_NAS_MAX_PRIO - 1 ? &room : &full,
                                    .state = &s[k]};
        w.pools[w.n_pools++] = k;
    }
    int at[1];
    drv_error_t e = {0};
    assert_int_equal(drv_nas_decide_pools(pools, DRV_NAS_MAX_PRIO, 0, &w, 1, many, at, NULL, &e),
                     0);
    assert_int_equal(at[0], DRV_NAS_MAX_PRIO - 1);
    assert_int_equal(created(&many[DRV_NAS_MAX_PRIO - 1]), 1);
    for (int k = 0; k < DRV_NAS_MAX_PRIO; k++)
        assert_non_null(overflow_event(&many[k]));
}

/* No instance type of the first nodepool holds the request. */
static void test_overflow_no_fit(void **st)
{
    (void)st;
    drv_nas_config_t a = cfg_of(T_CPU, DRV_CAPACITY_POLICY_ON_DEMAND, 5);
    drv_nas_config_t b = cfg_of(T_SMALL, DRV_CAPACITY_POLICY_ON_DEMAND, 5);
    drv_nas_state_t sa = {0}, sb = {0};
    drv_nas_pool_t pools[] = {{.name = "c/cpu", .cfg = &a, .state = &sa},
                              {.name = "c/gpu", .cfg = &b, .state = &sb}};
    drv_nas_want_t w[] = {want(0, 1)};
    int at[1];
    run(pools, 2, 0, w, 1, at, NULL);
    assert_int_equal(at[0], 1);
    assert_int_equal(created(&out[1]), 1);
    assert_non_null(strstr(overflow_event(&out[0])->reason, "no instance type of c/cpu"));
    assert_int_equal(out[0].no_fit, 0);
}

/* Both nodepools full: the replicas wait at the last one, counted there. */
static void test_end_of_list_stays_uncovered(void **st)
{
    (void)st;
    drv_nas_config_t a = cfg_of(T_SMALL, DRV_CAPACITY_POLICY_ON_DEMAND, 0);
    drv_nas_config_t b = cfg_of(T_BIG, DRV_CAPACITY_POLICY_ON_DEMAND, 1);
    drv_nas_state_t sa = {0}, sb = {0};
    drv_nas_pool_t pools[] = {{.name = "c/a", .cfg = &a, .state = &sa},
                              {.name = "c/b", .cfg = &b, .state = &sb}};
    drv_nas_want_t w[] = {want(0, 1), want(0, 1), want(1, -1)};
    int at[3];
    bool cov[3];
    run(pools, 2, 0, w, 3, at, cov);
    assert_int_equal(created(&out[0]), 0);
    assert_int_equal(created(&out[1]), 1);
    assert_int_equal(out[1].at_max, 2);
    assert_int_equal(at[0], 1);
    assert_int_equal(at[1], 1);
    assert_int_equal(at[2], 1);
    assert_int_equal(cov[0] + cov[1] + cov[2], 1);
    assert_true(cov[0]);   /* the caller's order decides who gets the node */
}

/* A replica with no provisioning nodepool is ignored. */
static void test_no_pools(void **st)
{
    (void)st;
    drv_nas_config_t a = cfg_of(T_SMALL, DRV_CAPACITY_POLICY_ON_DEMAND, 5);
    drv_nas_state_t sa = {0};
    drv_nas_pool_t pools[] = {{.name = "c/a", .cfg = &a, .state = &sa}};
    drv_nas_want_t w[] = {want(-1, -1)};
    int at[1];
    bool cov[1] = {true};
    run(pools, 1, 0, w, 1, at, cov);
    assert_int_equal(at[0], -1);
    assert_false(cov[0]);
    assert_int_equal(created(&out[0]), 0);
}

/* The first nodepool is decided again after replicas left it: it starts
 * from its memory as it was, so a provisioning timeout counts once. */
static void test_redecision_restores_memory(void **st)
{
    (void)st;
    drv_nas_config_t a = cfg_of(T_SMALL, DRV_CAPACITY_POLICY_ON_DEMAND, 1);
    drv_nas_config_t b = cfg_of(T_BIG, DRV_CAPACITY_POLICY_ON_DEMAND, 5);
    drv_nas_state_t sa = {0}, sb = {0};
    drv_nas_node_t late = {.id = "a-late", .type = &SMALL, .state = DRV_NAS_NODE_PROVISIONING,
                           .created_ms = 0};
    drv_nas_pool_t pools[] = {{.name = "c/a", .cfg = &a, .state = &sa, .nodes = &late,
                               .n_nodes = 1},
                              {.name = "c/b", .cfg = &b, .state = &sb}};
    drv_nas_want_t w[] = {want(0, 1)};
    int at[1];
    run(pools, 2, 11 * MIN, w, 1, at, NULL);
    assert_int_equal(out[0].n_delete, 1);        /* the late node goes */
    assert_int_equal(at[0], 1);                  /* small backs off: overflow */
    assert_int_equal(sa.n_backoff, 1);
    assert_int_equal(sa.backoff[0].failures, 1); /* not 2: decided twice, counted once */
    assert_int_equal(sa.backoff[0].until_ms, 11 * MIN + 60 * S);
}

static void test_bad_input(void **st)
{
    (void)st;
    drv_nas_config_t a = cfg_of(T_SMALL, DRV_CAPACITY_POLICY_ON_DEMAND, 5);
    drv_nas_state_t sa = {0};
    drv_nas_report_failure(&sa, &a, "small", DRV_CAPACITY_ON_DEMAND, 0, "x");
    drv_nas_state_t before = sa;
    drv_nas_pool_t pools[] = {{.name = "c/a", .cfg = &a, .state = &sa}};
    drv_nas_want_t w[] = {want(0, 3)};
    drv_error_t e = {0};
    assert_int_equal(drv_nas_decide_pools(pools, 1, 0, w, 1, out, NULL, NULL, &e), -1);
    assert_non_null(strstr(e.message, "index 3"));
    drv_nas_config_t bad = a;
    bad.max_nodes = -1;
    pools[0].cfg = &bad;
    w[0] = want(0, -1);
    assert_int_equal(drv_nas_decide_pools(pools, 1, 0, w, 1, out, NULL, NULL, &e), -1);
    assert_memory_equal(&sa, &before, sizeof sa);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_overflow_when_first_can),
        cmocka_unit_test(test_overflow_at_max_nodes),
        cmocka_unit_test(test_overflow_on_backoff),
        cmocka_unit_test(test_overflow_no_fit),
        cmocka_unit_test(test_node_on_its_way_counts_across_nodepools),
        cmocka_unit_test(test_long_list),
        cmocka_unit_test(test_end_of_list_stays_uncovered),
        cmocka_unit_test(test_no_pools),
        cmocka_unit_test(test_redecision_restores_memory),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
