/* test_consolidate.c — unit tests of the node consolidation decisions
 * (src/autoscale/consolidate.c) on hand-made snapshots: an under-used node
 * whose replicas fit elsewhere is picked, with where they go; never below
 * min_nodes, never a node with a replica still starting, never a cordoned
 * node nor onto one, disable_packing kept, only onto the deployment's
 * nodepools, only in nodepools with consolidation on, nothing while
 * replicas are pending, all of a node's replicas must fit together, fewest
 * replicas first; and when a move is done or given up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "autoscale/consolidate.h"

#define L4_MIB 24576

static const int RANK0[] = {0};          /* one nodepool, listed */
static const int UNLISTED[] = {-1};

/* One L4 node; `used` MiB / `compute` % held by `shares` replicas. */
static drv_sched_node_t l4(const char *id, int64_t used, int compute, int shares)
{
    drv_sched_node_t n;
    memset(&n, 0, sizeof n);
    n.id = id;
    n.schedulable = true;
    n.cpu_millis = 8000;
    n.memory_mib = 32768;
    n.used_cpu_millis = 1000 * shares;
    n.used_memory_mib = 1024 * shares;
    n.n_gpus = 1;
    n.gpus[0] = (drv_sched_gpu_t){.index = 0, .uuid = id, .type = "L4", .memory_mib = L4_MIB,
                                  .healthy = true, .used_memory_mib = used,
                                  .used_compute = compute, .shares = shares};
    return n;
}

static drv_cons_replica_t share(int node, int64_t mib, int compute)
{
    drv_cons_replica_t r = {.node = node, .ready = true, .rank = RANK0,
                            .req = {.gpu_count = 1, .gpu_memory_mib = mib,
                                    .compute_percent = compute, .cpu_millis = 1000,
                                    .memory_mib = 1024}};
    return r;
}

static drv_cons_pool_t pool_on(int live, int min)
{
    drv_cons_pool_t p = {.enabled = true, .min_nodes = min, .live = live};
    return p;
}

static drv_cons_pick_t pick;

static int run(const drv_sched_node_t *nodes, size_t n, const drv_cons_pool_t *pool,
               const drv_cons_replica_t *reps, size_t n_reps, size_t pending)
{
    drv_cons_node_t info[8] = {{0}};
    drv_error_t e = {0};
    assert_int_equal(drv_cons_pick(NULL, nodes, info, n, pool, 1, reps, n_reps, pending, &pick,
                                   &e), 0);
    assert_true(pick.reason[0] != '\0');
    return pick.node;
}

/* Two half-used nodes: one empties onto the other. */
static void test_two_half_nodes(void **st)
{
    (void)st;
    drv_sched_node_t nodes[] = {l4("a", 10000, 40, 1), l4("b", 8000, 30, 1)};
    drv_cons_replica_t reps[] = {share(0, 10000, 40), share(1, 8000, 30)};
    drv_cons_pool_t p = pool_on(2, 0);
    assert_int_equal(run(nodes, 2, &p, reps, 2, 0), 1);   /* b: less allocated */
    assert_int_equal(pick.n_moves, 1);
    assert_int_equal(pick.replica[0], 1);
    assert_int_equal(pick.target[0], 0);
    assert_non_null(strstr(pick.reason, "node b"));
    assert_non_null(strstr(pick.reason, "fit on a"));
}

static void test_never_below_min_nodes(void **st)
{
    (void)st;
    drv_sched_node_t nodes[] = {l4("a", 10000, 40, 1), l4("b", 8000, 30, 1)};
    drv_cons_replica_t reps[] = {share(0, 10000, 40), share(1, 8000, 30)};
    drv_cons_pool_t p = pool_on(2, 2);
    assert_int_equal(run(nodes, 2, &p, reps, 2, 0), -1);
    p = pool_on(3, 2);   /* a third node (on its way, say) leaves room */
    assert_int_equal(run(nodes, 2, &p, reps, 2, 0), 1);
}

static void test_never_moves_a_starting_replica(void **st)
{
    (void)st;
    drv_sched_node_t nodes[] = {l4("a", 10000, 40, 1), l4("b", 8000, 30, 1)};
    drv_cons_replica_t reps[] = {share(0, 10000, 40), share(1, 8000, 30)};
    drv_cons_pool_t p = pool_on(2, 0);
    reps[1].ready = false;   /* b's replica is still starting: a goes onto b instead */
    assert_int_equal(run(nodes, 2, &p, reps, 2, 0), 0);
    assert_int_equal(pick.target[0], 1);
    reps[0].ready = false;
    assert_int_equal(run(nodes, 2, &p, reps, 2, 0), -1);
}

static void test_cordons(void **st)
{
    (void)st;
    drv_sched_node_t nodes[] = {l4("a", 10000, 40, 1), l4("b", 8000, 30, 1)};
    drv_cons_replica_t reps[] = {share(0, 10000, 40), share(1, 8000, 30)};
    drv_cons_pool_t p = pool_on(2, 0);
    nodes[0].schedulable = false;   /* a cordoned: neither emptied nor a target */
    assert_int_equal(run(nodes, 2, &p, reps, 2, 0), -1);
    nodes[0].schedulable = true;
    nodes[1].schedulable = false;
    assert_int_equal(run(nodes, 2, &p, reps, 2, 0), -1);
}

static void test_disable_packing(void **st)
{
    (void)st;
    /* b's replica holds its GPU whole (disable_packing): it cannot join a's
     * share, and a's share cannot join it */
    drv_sched_node_t nodes[] = {l4("a", 10000, 40, 1), l4("b", L4_MIB, 100, 1)};
    nodes[1].gpus[0].exclusive = true;
    drv_cons_replica_t reps[] = {share(0, 10000, 40), share(1, 0, 100)};
    reps[1].req.disable_packing = true;
    drv_cons_pool_t p = pool_on(2, 0);
    assert_int_equal(run(nodes, 2, &p, reps, 2, 0), -1);
    /* with a free third node, each could go there: the share, first */
    drv_sched_node_t three[] = {nodes[0], nodes[1], l4("c", 0, 0, 0)};
    p = pool_on(3, 0);
    assert_int_equal(run(three, 3, &p, reps, 2, 0), 0);
    assert_int_equal(pick.target[0], 2);
}

static void test_only_the_deployments_nodepools(void **st)
{
    (void)st;
    drv_sched_node_t nodes[] = {l4("a", 10000, 40, 1), l4("b", 8000, 30, 1)};
    drv_cons_replica_t reps[] = {share(0, 10000, 40), share(1, 8000, 30)};
    reps[0].rank = reps[1].rank = UNLISTED;
    drv_cons_pool_t p = pool_on(2, 0);
    assert_int_equal(run(nodes, 2, &p, reps, 2, 0), -1);
}

static void test_off_and_pending(void **st)
{
    (void)st;
    drv_sched_node_t nodes[] = {l4("a", 10000, 40, 1), l4("b", 8000, 30, 1)};
    drv_cons_replica_t reps[] = {share(0, 10000, 40), share(1, 8000, 30)};
    drv_cons_pool_t p = pool_on(2, 0);
    assert_int_equal(run(nodes, 2, &p, reps, 2, 3), -1);
    assert_non_null(strstr(pick.reason, "3 replica(s) pending"));
    p.enabled = false;
    assert_int_equal(run(nodes, 2, &p, reps, 2, 0), -1);
}

/* b's two shares fit on a one at a time, not together; a's replica is
 * starting, so a is no candidate: nothing moves. */
static void test_all_must_fit_together(void **st)
{
    (void)st;
    drv_sched_node_t nodes[] = {l4("a", 10000, 40, 1), l4("b", 16000, 40, 2)};
    drv_cons_replica_t reps[] = {share(0, 10000, 40), share(1, 8000, 20), share(1, 8000, 20)};
    reps[0].ready = false;
    drv_cons_pool_t p = pool_on(2, 0);
    assert_int_equal(run(nodes, 2, &p, reps, 3, 0), -1);
    /* with 6000 MiB shares they fit together: both move, onto a */
    nodes[1] = l4("b", 12000, 40, 2);
    reps[1].req.gpu_memory_mib = reps[2].req.gpu_memory_mib = 6000;
    assert_int_equal(run(nodes, 2, &p, reps, 3, 0), 1);
    assert_int_equal(pick.n_moves, 2);
    assert_int_equal(pick.target[0], 0);
    assert_int_equal(pick.target[1], 0);
}

static void test_fewest_replicas_first(void **st)
{
    (void)st;
    /* either could go onto the other; b holds fewer replicas (though more
     * memory): b goes */
    drv_sched_node_t nodes[] = {l4("a", 10000, 50, 2), l4("b", 12000, 40, 1)};
    drv_cons_replica_t reps[] = {share(0, 5000, 25), share(0, 5000, 25), share(1, 12000, 40)};
    drv_cons_pool_t p = pool_on(2, 0);
    assert_int_equal(run(nodes, 2, &p, reps, 3, 0), 1);
    assert_int_equal(pick.n_moves, 1);
}

/* A failed try leaves the snapshot as it was: q's two 7000 MiB shares
 * fail after the first took p's room; r's two 9000 MiB shares then need
 * that room on p (and q's). */
static void test_failed_try_leaves_no_trace(void **st)
{
    (void)st;
    drv_sched_node_t nodes[] = {l4("p", 15000, 40, 1), l4("q", 14000, 40, 2),
                                l4("r", 18000, 40, 2)};
    drv_cons_replica_t reps[] = {share(0, 15000, 40), share(1, 7000, 20), share(1, 7000, 20),
                                 share(2, 9000, 20), share(2, 9000, 20)};
    reps[0].ready = false;   /* p is no candidate */
    drv_cons_pool_t p = pool_on(3, 0);
    assert_int_equal(run(nodes, 3, &p, reps, 5, 0), 2);
    assert_int_equal(pick.n_moves, 2);
    assert_int_not_equal(pick.target[0], pick.target[1]);
    assert_true(pick.target[0] != 2 && pick.target[1] != 2);
}

static void test_bad_input(void **st)
{
    (void)st;
    drv_sched_node_t nodes[] = {l4("a", 0, 0, 0)};
    drv_cons_replica_t reps[] = {share(5, 1000, 10)};
    drv_cons_node_t info[1] = {{0}};
    drv_cons_pool_t p = pool_on(1, 0);
    drv_error_t e = {0};
    assert_int_equal(drv_cons_pick(NULL, nodes, info, 1, &p, 1, reps, 1, 0, &pick, &e), -1);
    info[0].pool = 4;
    reps[0].node = 0;
    assert_int_equal(drv_cons_pick(NULL, nodes, info, 1, &p, 1, reps, 1, 0, &pick, &e), -1);
}

static void test_progress(void **st)
{
    (void)st;
    char why[256];
    drv_cons_dep_t d[2] = {{.ready_before = 2, .desired = 2, .ready_new = 1},
                           {.ready_before = 1, .desired = 3}};
    drv_cons_watch_t w = {.node_ok = true, .elapsed_ms = 1000, .deps = d, .n_deps = 2,
                          .place_timeout_ms = 3000, .ready_timeout_ms = 60000};
    assert_int_equal(drv_cons_progress(&w, why, sizeof why), DRV_CONS_WAIT);
    d[0].ready_new = 2;   /* one deployment is whole again, not the other */
    assert_int_equal(drv_cons_progress(&w, why, sizeof why), DRV_CONS_WAIT);
    d[1].ready_new = 1;
    assert_int_equal(drv_cons_progress(&w, why, sizeof why), DRV_CONS_DONE);
    assert_non_null(strstr(why, "ready"));
    d[1].ready_new = 0;
    d[1].unplaced = 1;
    assert_int_equal(drv_cons_progress(&w, why, sizeof why), DRV_CONS_WAIT);
    w.elapsed_ms = 3000;   /* still no room after place_timeout */
    assert_int_equal(drv_cons_progress(&w, why, sizeof why), DRV_CONS_ABORT);
    assert_non_null(strstr(why, "no room"));
    d[1].unplaced = 0;
    assert_int_equal(drv_cons_progress(&w, why, sizeof why), DRV_CONS_WAIT);
    w.elapsed_ms = 60000;
    assert_int_equal(drv_cons_progress(&w, why, sizeof why), DRV_CONS_ABORT);
    assert_non_null(strstr(why, "not ready within 60s"));
    /* scaled down (or deleted) meanwhile: fewer ready replicas will do */
    w.elapsed_ms = 1000;
    d[0].ready_new = 1;
    d[1].ready_new = 1;
    assert_int_equal(drv_cons_progress(&w, why, sizeof why), DRV_CONS_WAIT);
    d[0].desired = 1;
    assert_int_equal(drv_cons_progress(&w, why, sizeof why), DRV_CONS_DONE);
    d[1].ready_new = 0;
    d[1].desired = 0;
    assert_int_equal(drv_cons_progress(&w, why, sizeof why), DRV_CONS_DONE);
    w.elapsed_ms = 0;
    w.node_ok = false;
    assert_int_equal(drv_cons_progress(&w, why, sizeof why), DRV_CONS_ABORT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_half_nodes),
        cmocka_unit_test(test_never_below_min_nodes),
        cmocka_unit_test(test_never_moves_a_starting_replica),
        cmocka_unit_test(test_cordons),
        cmocka_unit_test(test_disable_packing),
        cmocka_unit_test(test_only_the_deployments_nodepools),
        cmocka_unit_test(test_off_and_pending),
        cmocka_unit_test(test_all_must_fit_together),
        cmocka_unit_test(test_fewest_replicas_first),
        cmocka_unit_test(test_failed_try_leaves_no_trace),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_progress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
