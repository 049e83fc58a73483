/* test_gang.c — unit tests of gang placement (src/sched/gang.c): a gang
 * that fits on one node, the fewest nodes (tightest last node), ranks
 * packed per node with rank 0 on the fullest, nodepool priority and a
 * gang spanning nodepools, the job's nodepool map, shares, CPU as the
 * limit, no fit with the exact reason, never a partial gang (the snapshot
 * is untouched by a failed placement; two gangs of 3 on 4 GPUs), release
 * as the inverse of commit, and bad input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "sched/gang.h"

#define NMAX 8

static drv_sched_node_t nodes[NMAX];

static void node(int i, int pool, int n_gpus)
{
    drv_sched_node_t *nd = &nodes[i];
    memset(nd, 0, sizeof *nd);
    static char ids[NMAX][8];
    snprintf(ids[i], sizeof ids[i], "n%d", i);
    nd->id = ids[i];
    nd->pool = pool;
    nd->schedulable = true;
    nd->cpu_millis = 64000;
    nd->memory_mib = 256000;
    nd->n_gpus = n_gpus;
    for (int g = 0; g < n_gpus; g++) {
        nd->gpus[g].index = g;
        nd->gpus[g].type = "H100";
        nd->gpus[g].memory_mib = 80000;
        nd->gpus[g].healthy = true;
    }
}

/* the first k GPUs of node i held whole by something else */
static void busy(int i, int k)
{
    for (int g = 0; g < k; g++) {
        nodes[i].gpus[g].shares = 1;
        nodes[i].gpus[g].exclusive = true;
        nodes[i].gpus[g].used_memory_mib = 80000;
        nodes[i].gpus[g].used_compute = 100;
    }
}

static drv_gang_request_t gang(int workers, int gpus)
{
    return (drv_gang_request_t){.workers = workers,
                                .worker = {.gpu_count = gpus, .compute_percent = 100,
                                           .cpu_millis = 4000, .memory_mib = 16000}};
}

static drv_sched_choice_t ranks[64];
static char why[256];

static int place(size_t n, const drv_gang_request_t *g, drv_gang_placement_t *p)
{
    memset(p, 0, sizeof *p);
    p->ranks = ranks;
    why[0] = '\0';
    return drv_gang_place(nodes, n, g, NULL, p, why, sizeof why);
}

static void test_fits_one_node(void **state)
{
    (void)state;
    node(0, 0, 8);
    node(1, 0, 8);
    drv_gang_request_t g = gang(4, 1);
    drv_gang_placement_t p;
    assert_int_equal(place(2, &g, &p), 0);
    assert_int_equal(p.n_nodes, 1);
    assert_int_equal(p.pool_rank, 0);
    bool seen[8] = {0};
    for (int r = 0; r < 4; r++) {
        assert_int_equal(ranks[r].node, 0);
        assert_int_equal(ranks[r].n_gpus, 1);
        assert_true(ranks[r].whole);
        assert_false(seen[ranks[r].gpus[0]]);
        seen[ranks[r].gpus[0]] = true;
    }
    /* 2 workers x 4 GPUs: one node, distinct GPUs */
    g = gang(2, 4);
    assert_int_equal(place(2, &g, &p), 0);
    assert_int_equal(p.n_nodes, 1);
    assert_int_equal(ranks[0].node, ranks[1].node);
    assert_int_equal(ranks[0].n_gpus, 4);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            assert_int_not_equal(ranks[0].gpus[a], ranks[1].gpus[b]);
}

static void test_fewest_nodes(void **state)
{
    (void)state;
    node(0, 0, 8);
    busy(0, 6);     /* 2 free */
    node(1, 0, 8);
    busy(1, 4);     /* 4 free */
    node(2, 0, 8);
    busy(2, 5);     /* 3 free */
    drv_gang_placement_t p;
    drv_gang_request_t g = gang(4, 1);
    assert_int_equal(place(3, &g, &p), 0);
    assert_int_equal(p.n_nodes, 1);
    for (int r = 0; r < 4; r++)
        assert_int_equal(ranks[r].node, 1);
    /* 3 fit on n2 (3 free, tightest) rather than n1 (4 free) */
    g = gang(3, 1);
    assert_int_equal(place(3, &g, &p), 0);
    for (int r = 0; r < 3; r++)
        assert_int_equal(ranks[r].node, 2);
    /* 5: n1 (4) + the tightest that holds 1: n0 (2 free), not n2 (3) */
    g = gang(5, 1);
    assert_int_equal(place(3, &g, &p), 0);
    assert_int_equal(p.n_nodes, 2);
    for (int r = 0; r < 4; r++)
        assert_int_equal(ranks[r].node, 1);
    assert_int_equal(ranks[4].node, 0);
    /* 6: n1 (4) + 2: n0 exactly; ranks of a node consecutive, fullest first */
    g = gang(6, 1);
    assert_int_equal(place(3, &g, &p), 0);
    int want[6] = {1, 1, 1, 1, 0, 0};
    for (int r = 0; r < 6; r++)
        assert_int_equal(ranks[r].node, want[r]);
    /* 9 = all of them: three nodes */
    g = gang(9, 1);
    assert_int_equal(place(3, &g, &p), 0);
    assert_int_equal(p.n_nodes, 3);
    int want9[9] = {1, 1, 1, 1, 2, 2, 2, 0, 0};
    for (int r = 0; r < 9; r++)
        assert_int_equal(ranks[r].node, want9[r]);
}

static void test_no_fit_reason_and_untouched(void **state)
{
    (void)state;
    node(0, 0, 2);
    busy(0, 1);
    node(1, 0, 2);
    busy(1, 1);
    node(2, 0, 2);
    busy(2, 1);
    drv_sched_node_t before[3];
    memcpy(before, nodes, sizeof before);
    static const char *const names[] = {"gpu"};
    drv_gang_request_t g = gang(4, 1);
    g.pool_names = names;
    g.n_pool_names = 1;
    drv_gang_placement_t p;
    assert_int_equal(place(3, &g, &p), -1);
    assert_string_equal(why, "needs 4×1 GPU, at most 3 free on nodes of nodepool gpu");
    assert_memory_equal(before, nodes, sizeof before);
    /* no eligible node */
    nodes[0].schedulable = nodes[1].schedulable = nodes[2].schedulable = false;
    assert_int_equal(place(3, &g, &p), -1);
    assert_string_equal(why, "needs 4×1 GPU, and no ready, schedulable node is in the job's "
                             "nodepools");
}

static void test_two_gangs_of_three_on_four(void **state)
{
    (void)state;
    node(0, 0, 2);
    node(1, 0, 2);
    drv_gang_request_t g = gang(3, 1);
    drv_gang_placement_t p;
    assert_int_equal(place(2, &g, &p), 0);
    drv_gang_commit(nodes, &g, ranks);
    drv_sched_node_t after_first[2];
    memcpy(after_first, nodes, sizeof after_first);
    assert_int_equal(place(2, &g, &p), -1);
    assert_string_equal(why, "needs 3×1 GPU, at most 1 free on nodes of nodepool #0");
    assert_memory_equal(after_first, nodes, sizeof after_first);
    int held = 0;
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++)
            held += nodes[i].gpus[k].shares;
    assert_int_equal(held, 3);
}

static void test_nodepools(void **state)
{
    (void)state;
    node(0, 0, 2);  /* pool rank 0: 2 GPUs */
    node(1, 1, 4);  /* rank 1: 4 GPUs */
    node(2, 1, 4);
    drv_gang_placement_t p;
    drv_gang_request_t g = gang(2, 1);
    assert_int_equal(place(3, &g, &p), 0);
    assert_int_equal(p.pool_rank, 0);
    assert_int_equal(ranks[0].node, 0);
    /* 4 do not fit in rank 0: all in rank 1, on one node */
    g = gang(4, 1);
    assert_int_equal(place(3, &g, &p), 0);
    assert_int_equal(p.pool_rank, 1);
    assert_int_equal(p.n_nodes, 1);
    /* 10 only across both: -1 */
    g = gang(10, 1);
    assert_int_equal(place(3, &g, &p), 0);
    assert_int_equal(p.pool_rank, -1);
    assert_int_equal(p.n_nodes, 3);
    /* the job's own map: pool id 0 not allowed, id 1 its first */
    static const int map[] = {-1, 0};
    g = gang(2, 1);
    g.pool_rank = map;
    g.n_pool_rank = 2;
    assert_int_equal(place(3, &g, &p), 0);
    assert_int_equal(p.pool_rank, 0);
    assert_int_not_equal(ranks[0].node, 0);
    g.workers = 9;
    assert_int_equal(place(3, &g, &p), -1);
    assert_string_equal(why, "needs 9×1 GPU, at most 8 free on nodes of nodepool #1");
}

static void test_shares_and_cpu(void **state)
{
    (void)state;
    node(0, 0, 2);
    node(1, 0, 2);
    drv_gang_request_t g = {.workers = 4,
                            .worker = {.gpu_count = 1, .gpu_memory_mib = 40000,
                                       .compute_percent = 50, .cpu_millis = 1000,
                                       .memory_mib = 1000}};
    drv_gang_placement_t p;
    assert_int_equal(place(2, &g, &p), 0);
    assert_int_equal(p.n_nodes, 1);
    int per_gpu[2] = {0};
    for (int r = 0; r < 4; r++) {
        assert_int_equal(ranks[r].node, 0);
        assert_false(ranks[r].whole);
        assert_int_equal(ranks[r].compute_percent, 50);
        per_gpu[ranks[r].gpus[0]]++;
    }
    assert_int_equal(per_gpu[0], 2);
    assert_int_equal(per_gpu[1], 2);
    /* CPU for only 2 workers per node: 4 workers take both nodes */
    nodes[0].cpu_millis = nodes[1].cpu_millis = 2500;
    assert_int_equal(place(2, &g, &p), 0);
    assert_int_equal(p.n_nodes, 2);
    g.workers = 5;
    assert_int_equal(place(2, &g, &p), -1);
    assert_string_equal(why, "needs 5×a 50% share of a GPU, at most 4 free on nodes of nodepool #0");
}

static void test_commit_release(void **state)
{
    (void)state;
    node(0, 0, 4);
    node(1, 0, 4);
    busy(1, 1);
    drv_sched_node_t before[2];
    memcpy(before, nodes, sizeof before);
    drv_gang_request_t g = gang(6, 1);
    drv_gang_placement_t p;
    assert_int_equal(place(2, &g, &p), 0);
    drv_gang_commit(nodes, &g, ranks);
    assert_int_equal(nodes[0].used_cpu_millis, 4 * 4000);
    assert_int_equal(nodes[1].used_cpu_millis, 2 * 4000);
    drv_gang_release(nodes, &g, ranks);
    nodes[0].kinds = nodes[1].kinds = 0;
    assert_memory_equal(before, nodes, sizeof before);
}

static void test_bad_input(void **state)
{
    (void)state;
    node(0, 0, 4);
    drv_gang_request_t g = gang(0, 1);
    drv_gang_placement_t p;
    assert_int_equal(place(1, &g, &p), -1);
    assert_string_equal(why, "a gang has 1 to 4096 workers, not 0");
    g = gang(1, 65);
    assert_int_equal(place(1, &g, &p), -1);
    assert_non_null(strstr(why, "at most 0 free"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fits_one_node),
        cmocka_unit_test(test_fewest_nodes),
        cmocka_unit_test(test_no_fit_reason_and_untouched),
        cmocka_unit_test(test_two_gangs_of_three_on_four),
        cmocka_unit_test(test_nodepools),
        cmocka_unit_test(test_shares_and_cpu),
        cmocka_unit_test(test_commit_release),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
