/* test_place_warm.c — the placement tie-break by cache contents
 * (src/sched/warm.c): among nodes every policy scores equally, the one
 * holding the request's artifact (warm) is chosen, by the stateless entry
 * point and by the placement context alike, whatever its position; a
 * better score still wins over warmth; with no warm node the choice is the
 * policy's own (the first of the ties for deterministic policies). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "sched/place.h"

#define N 5

static drv_sched_node_t nodes[N];

static void empty_nodes(void)
{
    static char ids[N][8];
    memset(nodes, 0, sizeof nodes);
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "n%d", i);
        nodes[i].id = ids[i];
        nodes[i].schedulable = true;
        nodes[i].cpu_millis = 8000;
        nodes[i].memory_mib = 32768;
        nodes[i].n_gpus = 2;
        for (int g = 0; g < 2; g++)
            nodes[i].gpus[g] = (drv_sched_gpu_t){.index = g, .type = "L4", .memory_mib = 1000,
                                                 .healthy = true};
    }
}

static const drv_sched_request_t whole1 = {.gpu_count = 1, .compute_percent = 100,
                                           .cpu_millis = 1000, .memory_mib = 1024};

static int place_stateless(const char *policy, const drv_sched_request_t *rq)
{
    drv_sched_choice_t ch;
    char why[256];
    assert_int_equal(drv_place_policy(policy)->place(nodes, N, rq, &ch, why, sizeof why), 0);
    return ch.node;
}

static int place_ctx(const char *policy, const drv_sched_request_t *rq)
{
    drv_sched_ctx_t *ctx = drv_sched_ctx_create(drv_place_policy(policy), nodes, N, NULL);
    assert_non_null(ctx);
    drv_sched_choice_t ch;
    char why[256];
    assert_int_equal(drv_sched_ctx_place(ctx, rq, &ch, why, sizeof why), 0);
    drv_sched_ctx_destroy(ctx);
    return ch.node;
}

static const char *const policies[] = {"drover", "fgd", "best-fit", "packing", "spread", NULL};

static void test_warm_node_wins_ties(void **state)
{
    (void)state;
    for (const char *const *p = policies; *p; p++) {
        for (int w = 0; w < N; w++) {
            empty_nodes();
            nodes[w].warm = true;
            char msg[64];
            snprintf(msg, sizeof msg, "%s, warm n%d", *p, w);
            int a = place_stateless(*p, &whole1), b = place_ctx(*p, &whole1);
            if (a != w || b != w)
                fail_msg("%s: stateless chose n%d, context n%d", msg, a, b);
        }
    }
}

static void test_no_warm_node_first_of_ties(void **state)
{
    (void)state;
    empty_nodes();
    assert_int_equal(place_stateless("drover", &whole1), 0);
    assert_int_equal(place_ctx("drover", &whole1), 0);
    assert_int_equal(place_stateless("best-fit", &whole1), 0);
}

/* best-fit packs a share onto the GPU that already holds one: a better
 * score than the warm, empty node's, so warmth does not override it. */
static void test_score_beats_warmth(void **state)
{
    (void)state;
    drv_sched_request_t sh = {.gpu_count = 1, .gpu_memory_mib = 300, .compute_percent = 30,
                              .cpu_millis = 500, .memory_mib = 512};
    for (const char *const *p = (const char *const[]){"best-fit", "packing", NULL}; *p; p++) {
        empty_nodes();
        nodes[3].gpus[0].shares = 1;
        nodes[3].gpus[0].used_memory_mib = 500;
        nodes[3].gpus[0].used_compute = 50;
        nodes[3].used_cpu_millis = 500;
        nodes[3].used_memory_mib = 512;
        nodes[1].warm = true;
        assert_int_equal(place_stateless(*p, &sh), 3);
        assert_int_equal(place_ctx(*p, &sh), 3);
    }
}

/* a warm node in a lower-priority nodepool does not beat the first pool */
static void test_pool_priority_beats_warmth(void **state)
{
    (void)state;
    empty_nodes();
    for (int i = 0; i < N; i++)
        nodes[i].pool = i < 2 ? 0 : 1;
    nodes[4].warm = true;
    assert_int_equal(place_stateless("drover", &whole1), 0);
    assert_int_equal(place_ctx("drover", &whole1), 0);
    nodes[1].warm = true;
    assert_int_equal(place_stateless("drover", &whole1), 1);
    assert_int_equal(place_ctx("drover", &whole1), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warm_node_wins_ties),
        cmocka_unit_test(test_no_warm_node_first_of_ties),
        cmocka_unit_test(test_score_beats_warmth),
        cmocka_unit_test(test_pool_priority_beats_warmth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
