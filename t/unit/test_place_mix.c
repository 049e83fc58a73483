/* test_place_mix.c — unit tests of what drover's placement policy takes from
 * the workload mix (src/sched/mix.c): a scarce GPU model's capacity is kept
 * for the type-constrained requests that need it, the control without
 * constraints places as before, and the mix's numbers (excess per model,
 * the stranding term's weight from the CPU intensity) on worked examples.
 *
 * Units: GPUs of 1000 "MiB", a share of m milli-GPU is gpu_memory_mib = m,
 * compute m / 10, as drover-sim models the Alibaba trace.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sched/place.h"
#include "sched/sched_int.h"

#define NMAX 8

static drv_sched_node_t nodes[NMAX];
static const char *T4[] = {"T4"};

static void node(int i, int64_t cpu, int n_gpus, const char *type)
{
    drv_sched_node_t *nd = &nodes[i];
    memset(nd, 0, sizeof *nd);
    static char ids[NMAX][8];
    snprintf(ids[i], sizeof ids[i], "n%d", i);
    nd->id = ids[i];
    nd->schedulable = true;
    nd->cpu_millis = cpu;
    nd->memory_mib = 1 << 20;
    nd->n_gpus = n_gpus;
    for (int g = 0; g < n_gpus; g++) {
        nd->gpus[g].index = g;
        nd->gpus[g].type = type;
        nd->gpus[g].memory_mib = 1000;
        nd->gpus[g].healthy = true;
    }
}

static drv_sched_request_t share(int64_t milli, bool t4)
{
    return (drv_sched_request_t){.gpu_count = 1, .gpu_memory_mib = milli,
                                 .compute_percent = (int)(milli / 10), .cpu_millis = 1000,
                                 .memory_mib = 100, .gpu_types = t4 ? T4 : NULL,
                                 .n_gpu_types = t4 ? 1 : 0};
}

static drv_sched_request_t whole1(void)
{
    return (drv_sched_request_t){.gpu_count = 1, .gpu_memory_mib = 1000, .compute_percent = 100,
                                 .cpu_millis = 1000, .memory_mib = 100};
}

/* The cluster: n0 a T4 node of 2 GPUs, GPU 0 half used (so a 500 share
 * fills it exactly, what plain fragmentation descent likes best); n1..n3
 * G2 nodes of 8 empty GPUs. T4 is 2 of 26 GPUs. */
static size_t cluster(void)
{
    node(0, 64000, 2, "T4");
    nodes[0].gpus[0].shares = 1;
    nodes[0].gpus[0].used_memory_mib = 500;
    nodes[0].gpus[0].used_compute = 50;
    for (int i = 1; i <= 3; i++)
        node(i, 96000, 8, "G2");
    return 4;
}

/* The mix: 5 whole GPUs, 2 shares of 500 that run anywhere, and 3 shares of
 * 500 that need a T4 (constrained == true) or run anywhere too (false). */
static drv_sched_shapes_t *mix_shapes(bool constrained)
{
    drv_sched_request_t r[10];
    for (int i = 0; i < 5; i++)
        r[i] = whole1();
    for (int i = 5; i < 7; i++)
        r[i] = share(500, false);
    for (int i = 7; i < 10; i++)
        r[i] = share(500, constrained);
    drv_sched_shapes_t *s = drv_sched_shapes_create(r, 10, 1.0);
    assert_non_null(s);
    return s;
}

static int place_ctx(size_t n, const drv_sched_shapes_t *s, const drv_sched_request_t *r,
                     const char *policy)
{
    drv_sched_ctx_opts_t o = {.shapes = s, .seed = 1};
    drv_sched_ctx_t *ctx = drv_sched_ctx_create(drv_place_policy(policy), nodes, n, &o);
    assert_non_null(ctx);
    drv_sched_choice_t c;
    int rc = drv_sched_ctx_place(ctx, r, &c, NULL, 0);
    drv_sched_ctx_destroy(ctx);
    return rc == 0 ? c.node : -1;
}

/* A share that could run anywhere leaves the scarce T4 to the requests that
 * need it; the T4 request still gets it. */
static void test_scarce_model_kept(void **state)
{
    (void)state;
    size_t n = cluster();
    drv_sched_shapes_t *s = mix_shapes(true);
    drv_sched_request_t any = share(500, false), t4 = share(500, true);
    /* plain fragmentation descent fills the half-used T4 GPU */
    assert_int_equal(place_ctx(n, s, &any, "fgd"), 0);
    int i = place_ctx(n, s, &any, "drover");
    assert_true(i >= 1 && i <= 3);
    assert_int_equal(place_ctx(n, s, &t4, "drover"), 0);
    drv_sched_shapes_destroy(s);
}

/* Control: the same cluster and shapes without the constraint: T4 is not
 * scarce and drover fills the half-used GPU, as fgd does. */
static void test_no_constraint_no_change(void **state)
{
    (void)state;
    size_t n = cluster();
    drv_sched_shapes_t *s = mix_shapes(false);
    drv_sched_request_t any = share(500, false);
    assert_int_equal(place_ctx(n, s, &any, "drover"), 0);
    sched_mix_t mix;
    sched_mix_compute(nodes, n, s, &mix);
    for (int k = 0; k < mix.n; k++)
        assert_true(mix.excess[k] == 0);
    drv_sched_shapes_destroy(s);
}

/* The numbers: demand = 0.5 x 1000 + 0.2 x 500 + 0.3 x 500 = 750 milli per
 * task; T4's constrained share 150 / 750 = 0.2 against 2 / 26 of the GPUs,
 * Q = 0.2: excess = 0.2 x 13 - 0.2 = 2.4; G2 none. CPU: 1000 per 750 milli
 * against (64000 + 3 x 96000) per 26000: rho = (4 / 3) / (352 / 26). */
static void test_mix_numbers(void **state)
{
    (void)state;
    size_t n = cluster();
    drv_sched_shapes_t *s = mix_shapes(true);
    sched_mix_t mix;
    sched_mix_compute(nodes, n, s, &mix);
    assert_int_equal(mix.n, 2);
    assert_true(fabs(sched_mix_excess(&mix, &nodes[0].gpus[1]) - 2.4) < 1e-9);
    assert_true(sched_mix_excess(&mix, &nodes[1].gpus[0]) == 0);
    double rho = (1000.0 / 750.0) / (352000.0 / 26000.0);
    assert_true(fabs(mix.rho - rho) < 1e-9);
    assert_true(fabs(mix.beta - SCHED_DROVER_BETA0 * rho * rho * rho) < 1e-12);
    /* a type named in another case is the same model */
    drv_sched_gpu_t g = nodes[0].gpus[1];
    g.type = "t4";
    assert_true(fabs(sched_mix_excess(&mix, &g) - 2.4) < 1e-9);
    /* no shapes: nothing scarce, the default weight */
    sched_mix_compute(nodes, n, NULL, &mix);
    assert_int_equal(mix.n, 0);
    assert_true(mix.beta == SCHED_DROVER_BETA0);
    assert_true(sched_mix_beta(NULL) == SCHED_DROVER_BETA0);
    drv_sched_shapes_destroy(s);
}

/* A constrained shape no node can serve takes nothing from anyone. */
static void test_unknown_model_ignored(void **state)
{
    (void)state;
    size_t n = cluster();
    static const char *H100[] = {"H100"};
    drv_sched_request_t r[4] = {whole1(), whole1(), share(500, false), share(500, false)};
    r[2].gpu_types = H100;
    r[2].n_gpu_types = 1;
    drv_sched_shapes_t *s = drv_sched_shapes_create(r, 4, 1.0);
    assert_non_null(s);
    sched_mix_t mix;
    sched_mix_compute(nodes, n, s, &mix);
    for (int k = 0; k < mix.n; k++)
        assert_true(mix.excess[k] == 0);
    drv_sched_shapes_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scarce_model_kept),
        cmocka_unit_test(test_no_constraint_no_change),
        cmocka_unit_test(test_mix_numbers),
        cmocka_unit_test(test_unknown_model_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
