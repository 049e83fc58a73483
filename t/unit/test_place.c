/* test_place.c — unit tests of placement (src/sched): every policy on
 * hand-made snapshots (CPU only, shares, whole and multi-GPU, GPU types,
 * unhealthy GPUs, cordoned nodes, disable_packing, nodepool priority with
 * overflow, nothing fits), each policy's own preference, the typical
 * shapes, the fragmentation measure against worked examples, and the
 * context (incremental state) against the stateless path.
 *
 * Units: GPUs of 1000 "MiB" so that a share of m milli-GPU is
 * gpu_memory_mib = m, compute m / 10, as drover-sim models the trace.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/place.h"
#include "sched/rng.h"

#define NMAX 16

static drv_sched_node_t nodes[NMAX];

static void node(int i, int pool, int64_t cpu, int64_t mem, int n_gpus, const char *type)
{
    drv_sched_node_t *nd = &nodes[i];
    memset(nd, 0, sizeof *nd);
    static char ids[NMAX][8];
    snprintf(ids[i], sizeof ids[i], "n%d", i);
    nd->id = ids[i];
    nd->pool = pool;
    nd->schedulable = true;
    nd->cpu_millis = cpu;
    nd->memory_mib = mem;
    nd->n_gpus = n_gpus;
    for (int g = 0; g < n_gpus; g++) {
        nd->gpus[g].index = g;
        nd->gpus[g].type = type;
        nd->gpus[g].memory_mib = 1000;
        nd->gpus[g].healthy = true;
    }
}

/* GPU g of node i already holds a share of m milli (or whole when m = 1000). */
static void used(int i, int g, int64_t m)
{
    drv_sched_gpu_t *gp = &nodes[i].gpus[g];
    gp->shares++;
    gp->used_memory_mib += m;
    gp->used_compute += m >= 1000 ? 100 : (int)(m / 10);
    if (m >= 1000)
        gp->exclusive = true;
}

static drv_sched_request_t share(int64_t milli, int64_t cpu)
{
    return (drv_sched_request_t){.gpu_count = 1, .gpu_memory_mib = milli,
                                 .compute_percent = (int)(milli / 10), .cpu_millis = cpu,
                                 .memory_mib = 100};
}

static drv_sched_request_t whole(int count, int64_t cpu)
{
    return (drv_sched_request_t){.gpu_count = count, .gpu_memory_mib = 1000,
                                 .compute_percent = 100, .cpu_millis = cpu, .memory_mib = 100};
}

static drv_sched_request_t cpu_only(int64_t cpu)
{
    return (drv_sched_request_t){.cpu_millis = cpu, .memory_mib = 100};
}

static const drv_place_policy_t *pol(const char *name)
{
    const drv_place_policy_t *p = drv_place_policy(name);
    assert_non_null(p);
    return p;
}

/* Place with a policy (stateless); -1 when nothing fits. */
static int place(const char *name, size_t n, const drv_sched_request_t *r, drv_sched_choice_t *c)
{
    char why[256] = "";
    int rc = pol(name)->place(nodes, n, r, c, why, sizeof why);
    if (rc == 0)
        assert_true(why[0] == '\0');
    else
        assert_true(why[0] != '\0');
    return rc == 0 ? c->node : -1;
}

/* A choice is valid: node eligible, room, GPUs fit, whole/share right. */
static void check_valid(size_t n, const drv_sched_request_t *r, const drv_sched_choice_t *c)
{
    assert_true(c->node >= 0 && (size_t)c->node < n);
    const drv_sched_node_t *nd = &nodes[c->node];
    assert_true(nd->schedulable && nd->pool >= 0);
    assert_true(nd->cpu_millis - nd->used_cpu_millis >= r->cpu_millis);
    assert_true(nd->memory_mib - nd->used_memory_mib >= r->memory_mib);
    if (r->gpu_count == 0) {
        assert_int_equal(c->n_gpus, 0);
        return;
    }
    int want = r->gpu_count;
    assert_int_equal(c->n_gpus, want);
    bool must_whole = r->gpu_count >= 2 || r->disable_packing || r->gpu_memory_mib >= 1000;
    if (must_whole)
        assert_true(c->whole);
    for (int k = 0; k < c->n_gpus; k++) {
        const drv_sched_gpu_t *g = &nd->gpus[c->gpus[k]];
        for (int j = 0; j < k; j++)
            assert_int_not_equal(c->gpus[j], c->gpus[k]);
        assert_true(g->healthy && !g->exclusive);
        if (c->whole)
            assert_int_equal(g->shares, 0);
        else
            assert_true(g->memory_mib - g->used_memory_mib >= r->gpu_memory_mib &&
                        100 - g->used_compute >= r->compute_percent);
        if (r->n_gpu_types) {
            bool ok = false;
            for (size_t t = 0; t < r->n_gpu_types; t++)
                ok |= strcasecmp(r->gpu_types[t], g->type) == 0;
            assert_true(ok);
        }
    }
}

static const char *ALL[] = {"drover", "fgd",    "best-fit",   "packing",      "spread",
                            "random", "dotprod", "clustering", "paper-bestfit"};
#define N_ALL (sizeof ALL / sizeof ALL[0])

/* --- the table ---------------------------------------------------------------------- */

static void test_table(void **state)
{
    (void)state;
    size_t n;
    const drv_place_policy_t *p = drv_place_policies(&n);
    assert_int_equal(n, N_ALL);
    assert_string_equal(drv_place_policy(NULL)->name, "drover");
    assert_null(drv_place_policy("nope"));
    assert_null(drv_place_policy(""));
    for (size_t i = 0; i < n; i++) {
        assert_ptr_equal(drv_place_policy(p[i].name), &p[i]);
        assert_non_null(p[i].place);
        assert_non_null(p[i].summary);
        assert_non_null(p[i].scorer);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(p[i].name, p[j].name);
    }
}

/* --- edge cases, every policy --------------------------------------------------------- */

static void test_cpu_only(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_ALL; k++) {
        node(0, 0, 1000, 1000, 2, "L4");      /* too little CPU */
        node(1, 0, 8000, 50, 2, "L4");        /* too little memory */
        node(2, 0, 8000, 1000, 0, NULL);      /* CPU-only node: fine */
        drv_sched_request_t r = cpu_only(4000);
        drv_sched_choice_t c;
        assert_int_equal(place(ALL[k], 3, &r, &c), 2);
        check_valid(3, &r, &c);
        assert_false(c.whole);
    }
}

static void test_share(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_ALL; k++) {
        node(0, 0, 8000, 8000, 2, "L4");
        used(0, 0, 800);
        used(0, 1, 1000);                     /* 200 free + a whole one: no room */
        node(1, 0, 8000, 8000, 1, "L4");
        used(1, 0, 500);                      /* 500 free */
        drv_sched_request_t r = share(400, 1000);
        drv_sched_choice_t c;
        assert_int_equal(place(ALL[k], 2, &r, &c), 1);
        check_valid(2, &r, &c);
        assert_false(c.whole);
        assert_int_equal(c.gpu_memory_mib, 400);
        assert_int_equal(c.compute_percent, 40);
        drv_sched_commit(nodes, &r, &c);
        assert_int_equal(nodes[1].gpus[0].used_memory_mib, 900);
        assert_int_equal(nodes[1].gpus[0].shares, 2);
        assert_int_equal(nodes[1].used_cpu_millis, 1000);
        assert_int_equal(nodes[1].kinds, 1);
        /* now nothing has 400 left */
        char why[200];
        assert_int_equal(pol(ALL[k])->place(nodes, 2, &r, &c, why, sizeof why), -1);
        assert_non_null(strstr(why, "400 MiB and 40% compute free"));
    }
}

static void test_whole_needs_empty_gpu(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_ALL; k++) {
        node(0, 0, 8000, 8000, 2, "L4");
        used(0, 0, 100);
        used(0, 1, 100);                      /* both shared: no whole GPU */
        node(1, 0, 8000, 8000, 2, "L4");
        used(1, 0, 100);                      /* GPU 1 is empty */
        drv_sched_request_t r = whole(1, 1000);
        drv_sched_choice_t c;
        assert_int_equal(place(ALL[k], 2, &r, &c), 1);
        check_valid(2, &r, &c);
        assert_int_equal(c.gpus[0], 1);
        assert_true(c.whole);
        assert_int_equal(c.gpu_memory_mib, 1000);
        assert_int_equal(c.compute_percent, 100);
        drv_sched_commit(nodes, &r, &c);
        assert_true(nodes[1].gpus[1].exclusive);
        assert_int_equal(nodes[1].kinds, 1u << 1);
    }
}

static void test_multi_gpu_one_node(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_ALL; k++) {
        node(0, 0, 64000, 64000, 4, "A100");
        used(0, 0, 300);                      /* 3 empty GPUs */
        node(1, 0, 64000, 64000, 2, "A100");  /* 2 empty */
        node(2, 0, 64000, 64000, 8, "A100");
        used(2, 1, 1000);
        used(2, 3, 10);
        used(2, 5, 500);
        used(2, 7, 1000);                     /* 4 empty: 0, 2, 4, 6 */
        drv_sched_request_t r = whole(4, 8000);
        drv_sched_choice_t c;
        assert_int_equal(place(ALL[k], 3, &r, &c), 2);
        check_valid(3, &r, &c);
        int got[4];
        memcpy(got, c.gpus, sizeof got);
        for (int g = 0; g < 4; g++)
            assert_int_equal(got[g], 2 * g);
        drv_sched_commit(nodes, &r, &c);
        assert_int_equal(nodes[2].kinds, 1u << 4);
        char why[200];
        assert_int_equal(pol(ALL[k])->place(nodes, 3, &r, &c, why, sizeof why), -1);
        assert_non_null(strstr(why, "4 whole free GPU(s)"));
        /* more GPUs than any node has */
        drv_sched_request_t big = whole(9, 1000);
        assert_int_equal(place(ALL[k], 3, &big, &c), -1);
    }
}

static void test_gpu_types(void **state)
{
    (void)state;
    const char *want[] = {"h100", "A100"};   /* case-insensitive */
    for (size_t k = 0; k < N_ALL; k++) {
        node(0, 0, 8000, 8000, 2, "L4");
        node(1, 0, 8000, 8000, 2, "T4");
        node(2, 0, 8000, 8000, 1, "H100");
        node(3, 0, 8000, 8000, 2, "L4");
        drv_sched_request_t r = share(300, 1000);
        r.gpu_types = want;
        r.n_gpu_types = 2;
        drv_sched_choice_t c;
        assert_int_equal(place(ALL[k], 4, &r, &c), 2);
        check_valid(4, &r, &c);
        drv_sched_request_t w = whole(1, 1000);
        w.gpu_types = want;
        w.n_gpu_types = 1;                    /* only "h100" */
        assert_int_equal(place(ALL[k], 4, &w, &c), 2);
        used(2, 0, 1000);
        char why[200];
        assert_int_equal(pol(ALL[k])->place(nodes, 4, &r, &c, why, sizeof why), -1);
        assert_non_null(strstr(why, "accepted type"));
        /* a GPU with no type never matches a typed request */
        node(0, 0, 8000, 8000, 1, NULL);
        assert_int_equal(place(ALL[k], 1, &r, &c), -1);
    }
}

static void test_unhealthy_and_cordoned(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_ALL; k++) {
        node(0, 0, 8000, 8000, 2, "L4");
        nodes[0].gpus[0].healthy = false;
        nodes[0].gpus[1].healthy = false;
        node(1, 0, 8000, 8000, 2, "L4");
        nodes[1].schedulable = false;          /* cordoned */
        node(2, -1, 8000, 8000, 2, "L4");      /* not in the deployment's nodepools */
        node(3, 0, 8000, 8000, 2, "L4");
        nodes[3].gpus[0].healthy = false;
        drv_sched_request_t r = share(300, 1000);
        drv_sched_choice_t c;
        assert_int_equal(place(ALL[k], 4, &r, &c), 3);
        assert_int_equal(c.gpus[0], 1);
        check_valid(4, &r, &c);
        drv_sched_request_t cpu = cpu_only(100);
        int at = place(ALL[k], 4, &cpu, &c);  /* a node without GPUs still has CPU */
        assert_true(at == 0 || at == 3);
        char why[200];
        drv_sched_request_t big = cpu_only(100000);
        assert_int_equal(pol(ALL[k])->place(nodes, 4, &big, &c, why, sizeof why), -1);
        assert_string_equal(why, "no ready node has 100000 CPU millicores and 100 MiB of "
                                 "memory free");
        nodes[0].schedulable = false;
        nodes[3].schedulable = false;
        assert_int_equal(pol(ALL[k])->place(nodes, 4, &cpu, &c, why, sizeof why), -1);
        assert_string_equal(why, "no ready, schedulable node in the deployment's nodepools");
        /* why may be NULL */
        assert_int_equal(pol(ALL[k])->place(nodes, 4, &cpu, &c, NULL, 0), -1);
    }
}

static void test_disable_packing(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_ALL; k++) {
        node(0, 0, 8000, 8000, 2, "L4");
        used(0, 0, 100);                      /* GPU 0 shared, GPU 1 empty */
        drv_sched_request_t r = share(100, 100);
        r.disable_packing = true;
        drv_sched_choice_t c;
        assert_int_equal(place(ALL[k], 1, &r, &c), 0);
        check_valid(1, &r, &c);
        assert_true(c.whole);
        assert_int_equal(c.gpus[0], 1);
        assert_int_equal(c.gpu_memory_mib, 1000);
        drv_sched_commit(nodes, &r, &c);
        assert_int_equal(place(ALL[k], 1, &r, &c), -1);
        /* no memory given = a whole GPU too */
        node(0, 0, 8000, 8000, 1, "L4");
        drv_sched_request_t any = {.gpu_count = 1, .cpu_millis = 10};
        assert_int_equal(place(ALL[k], 1, &any, &c), 0);
        assert_true(c.whole);
    }
}

static void test_pool_overflow(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_ALL; k++) {
        node(0, 1, 64000, 64000, 8, "L4");     /* lower priority, roomy */
        node(1, 0, 8000, 8000, 1, "L4");       /* highest priority, one GPU */
        node(2, 2, 64000, 64000, 8, "L4");
        drv_sched_request_t r = whole(1, 1000);
        drv_sched_choice_t c;
        assert_int_equal(place(ALL[k], 3, &r, &c), 1);
        drv_sched_commit(nodes, &r, &c);
        assert_int_equal(place(ALL[k], 3, &r, &c), 0);   /* overflow to pool 1 */
        for (int g = 0; g < 8; g++)
            used(0, g, 1000);
        assert_int_equal(place(ALL[k], 3, &r, &c), 2);   /* then pool 2 */
    }
}

/* --- what each policy prefers ------------------------------------------------------------ */

static void test_best_fit_and_spread(void **state)
{
    (void)state;
    node(0, 0, 8000, 8000, 2, "L4");
    used(0, 0, 300);                           /* 700 free */
    node(1, 0, 8000, 8000, 2, "L4");
    used(1, 0, 600);                           /* 400 free: tightest for 350 */
    used(1, 1, 1000);
    node(2, 0, 8000, 8000, 4, "L4");           /* empty: most free */
    drv_sched_request_t r = share(350, 100);
    drv_sched_choice_t c;
    assert_int_equal(place("best-fit", 3, &r, &c), 1);
    assert_int_equal(c.gpus[0], 0);
    assert_int_equal(place("spread", 3, &r, &c), 2);
    /* best-fit packs 4 quarter shares onto one GPU (t/nodes.sh's case) */
    node(0, 0, 8000, 8000, 1, "L4");
    node(1, 0, 8000, 8000, 1, "L4");
    drv_sched_request_t q = share(250, 100);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(place("best-fit", 2, &q, &c), 0);
        drv_sched_commit(nodes, &q, &c);
    }
    assert_int_equal(place("best-fit", 2, &q, &c), 1);
}

static void test_drover_packs_equal_shares(void **state)
{
    (void)state;
    /* the default with no typical shapes (each request its own): four
     * quarter shares on two 1-GPU nodes go onto one GPU */
    node(0, 0, 8000, 32000, 1, "L4");
    node(1, 0, 8000, 32000, 1, "L4");
    drv_sched_request_t q = share(250, 500);
    drv_sched_choice_t c;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(place("drover", 2, &q, &c), 0);
        drv_sched_commit(nodes, &q, &c);
    }
    assert_int_equal(place("drover", 2, &q, &c), 1);
}

static void test_packing(void **state)
{
    (void)state;
    node(0, 0, 8000, 8000, 2, "L4");           /* empty node: 33 - 2 = 31 */
    node(1, 0, 8000, 8000, 2, "L4");
    used(1, 0, 1000);                          /* free GPU on a used node: 50 - 1 = 49 */
    node(2, 0, 8000, 8000, 2, "L4");
    used(2, 0, 300);                           /* a shared GPU: 100 - 70/10 = 93 */
    drv_sched_request_t r = share(200, 100);
    drv_sched_choice_t c;
    assert_int_equal(place("packing", 3, &r, &c), 2);
    assert_int_equal(c.gpus[0], 0);
    drv_sched_request_t w = whole(1, 100);
    assert_int_equal(place("packing", 3, &w, &c), 1);  /* 49 beats 49 (node 2) by order, 31 */
    node(1, 0, 8000, 8000, 2, "L4");
    assert_int_equal(place("packing", 3, &w, &c), 2);  /* 49 vs 31 and 31 */
}

static void test_clustering(void **state)
{
    (void)state;
    node(0, 0, 8000, 8000, 2, "L4");           /* empty: 25..50 */
    node(1, 0, 8000, 8000, 2, "L4");
    nodes[1].kinds = 1;                        /* runs shares only: 75..100 */
    used(1, 0, 300);
    node(2, 0, 8000, 8000, 2, "L4");
    nodes[2].kinds = 1u << 1;                  /* runs 1-GPU replicas only */
    used(2, 0, 1000);
    drv_sched_request_t r = share(200, 100);
    drv_sched_choice_t c;
    assert_int_equal(place("clustering", 3, &r, &c), 1);
    drv_sched_request_t w = whole(1, 100);
    assert_int_equal(place("clustering", 3, &w, &c), 2);
    drv_sched_request_t w2 = whole(2, 100);
    assert_int_equal(place("clustering", 3, &w2, &c), 0);  /* the only node with 2 free */
}

static void test_dotprod_and_paper_bestfit(void **state)
{
    (void)state;
    node(0, 0, 64000, 64000, 8, "L4");         /* 8 free GPUs */
    node(1, 0, 64000, 64000, 2, "L4");         /* 2 free GPUs */
    drv_sched_request_t r = whole(1, 4000);
    drv_sched_choice_t c;
    /* dotprod: 100 (1 - (64/128 * 4/128 + 8/8 * 1/8) / 2) = 92 vs (.. + 2/8 * 1/8) = 97 */
    assert_int_equal(place("dotprod", 2, &r, &c), 1);
    /* paper-bestfit: (1 - (60/128 + 7/8) / 2) = 32 vs (1 - (60/128 + 1/8) / 2) = 70 */
    assert_int_equal(place("paper-bestfit", 2, &r, &c), 1);
}

/* FGD and drover steer shares away from leaving a slice no typical task
 * can use, where best-fit packs it tight. Typical shapes: one, a share of
 * 600 (weight 1). Node 0 has an empty GPU, node 1 a GPU with 700 free.
 * A share of 200: on node 0 it leaves 800 (a 600 still fits: growth 0,
 * score int(100 sigmoid(0)) = 50); on node 1 it leaves 500 (frag 0 -> 500,
 * score int(100 sigmoid(-0.5)) = 37). */
static void test_fgd_avoids_unusable_slices(void **state)
{
    (void)state;
    node(0, 0, 64000, 64000, 1, "L4");
    node(1, 0, 64000, 64000, 1, "L4");
    used(1, 0, 300);
    drv_sched_request_t typical = share(600, 1000);
    drv_sched_shapes_t *m = drv_sched_shapes_create(&typical, 1, 0.95);
    assert_non_null(m);
    drv_sched_request_t r = share(200, 1000);
    drv_sched_choice_t c;
    drv_sched_ctx_opts_t o = {.shapes = m, .seed = 1};
    for (const char *const *p = (const char *const[]){"fgd", "drover", NULL}; *p; p++) {
        drv_sched_ctx_t *ctx = drv_sched_ctx_create(pol(*p), nodes, 2, &o);
        assert_non_null(ctx);
        assert_int_equal(drv_sched_ctx_place(ctx, &r, &c, NULL, 0), 0);
        assert_int_equal(c.node, 0);
        drv_sched_ctx_destroy(ctx);
    }
    assert_int_equal(place("best-fit", 2, &r, &c), 1);
    drv_sched_shapes_destroy(m);
}

/* drover's measure counts a node whose CPU runs out before its GPUs.
 * Typical shape: 1 whole GPU with 4 CPUs. Node 0: 2 GPUs, 8 CPUs
 * (balanced); node 1: 2 GPUs, 64 CPUs. A CPU-only task of 4 CPUs on node 0
 * leaves room for one GPU task instead of two: paper measure unchanged
 * (a GPU task still fits: tie, node 0 first), drover's grows by
 * 0.2 x 1000 (score 45 vs 50), so drover puts it on node 1. */
static void test_drover_cpu_aware(void **state)
{
    (void)state;
    node(0, 0, 8000, 64000, 2, "G2");
    node(1, 0, 64000, 64000, 2, "G2");
    drv_sched_request_t typical = whole(1, 4000);
    drv_sched_shapes_t *m = drv_sched_shapes_create(&typical, 1, 1);
    drv_sched_request_t r = cpu_only(4000);
    drv_sched_choice_t c;
    drv_sched_ctx_opts_t o = {.shapes = m};
    drv_sched_ctx_t *f = drv_sched_ctx_create(pol("fgd"), nodes, 2, &o);
    drv_sched_ctx_t *d = drv_sched_ctx_create(pol("drover"), nodes, 2, &o);
    assert_int_equal(drv_sched_ctx_place(f, &r, &c, NULL, 0), 0);
    assert_int_equal(c.node, 0);
    assert_int_equal(drv_sched_ctx_place(d, &r, &c, NULL, 0), 0);
    assert_int_equal(c.node, 1);
    /* memory too: node 1 short of memory for a second GPU task */
    node(0, 0, 64000, 64000, 2, "G2");
    node(1, 0, 64000, 300, 2, "G2");
    drv_sched_ctx_touch(d, 0);
    drv_sched_ctx_touch(d, 1);
    drv_sched_request_t small = cpu_only(10);
    small.memory_mib = 100;
    typical.memory_mib = 150;
    drv_sched_shapes_destroy(m);
    m = drv_sched_shapes_create(&typical, 1, 1);
    drv_sched_ctx_set_shapes(d, m);
    assert_int_equal(drv_sched_ctx_place(d, &small, &c, NULL, 0), 0);
    assert_int_equal(c.node, 0);
    drv_sched_ctx_destroy(f);
    drv_sched_ctx_destroy(d);
    drv_sched_shapes_destroy(m);
}

static void test_random_seeded(void **state)
{
    (void)state;
    for (int i = 0; i < 4; i++)
        node(i, 0, 1000000, 1000000, 1, "L4");
    drv_sched_request_t r = cpu_only(1);
    drv_sched_choice_t c1, c2;
    drv_sched_ctx_opts_t o = {.seed = 7};
    drv_sched_ctx_t *a = drv_sched_ctx_create(pol("random"), nodes, 4, &o);
    drv_sched_ctx_t *b = drv_sched_ctx_create(pol("random"), nodes, 4, &o);
    int hits[4] = {0};
    for (int k = 0; k < 2000; k++) {
        assert_int_equal(drv_sched_ctx_place(a, &r, &c1, NULL, 0), 0);
        assert_int_equal(drv_sched_ctx_place(b, &r, &c2, NULL, 0), 0);
        assert_int_equal(c1.node, c2.node);    /* same seed, same draws */
        hits[c1.node]++;
    }
    for (int i = 0; i < 4; i++)
        assert_true(hits[i] > 400 && hits[i] < 600);
    drv_sched_ctx_destroy(a);
    drv_sched_ctx_destroy(b);
    /* stateless: the same snapshot gives the same answer */
    int first = place("random", 4, &r, &c1);
    for (int k = 0; k < 10; k++)
        assert_int_equal(place("random", 4, &r, &c1), first);
}

/* --- typical shapes --------------------------------------------------------------------- */

static void test_shapes(void **state)
{
    (void)state;
    drv_sched_request_t v[10];
    for (int i = 0; i < 5; i++)
        v[i] = share(500, 1000);               /* X x5 */
    for (int i = 5; i < 8; i++)
        v[i] = whole(1, 2000);                 /* Y x3 */
    v[8] = cpu_only(9000);                     /* Z x1 */
    v[9] = cpu_only(8000);                     /* W x1 */
    v[0].memory_mib = 100;
    v[1].memory_mib = 300;                     /* X's memory: mean of 100,300,100,100,100 = 140 */
    drv_sched_shapes_t *s = drv_sched_shapes_create(v, 10, 0.8);
    assert_int_equal(drv_sched_shapes_count(s), 2);   /* 5/10 < 0.8, 8/10 >= 0.8 */
    const drv_sched_shape_t *a = drv_sched_shapes_at(s, 0), *b = drv_sched_shapes_at(s, 1);
    assert_int_equal(a->req.gpu_memory_mib, 500);
    assert_int_equal(a->count, 5);
    assert_int_equal(a->req.memory_mib, 140);
    assert_true(fabs(a->weight - 5.0 / 8) < 1e-12);
    assert_int_equal(b->req.gpu_count, 1);
    assert_int_equal(b->req.gpu_memory_mib, 1000);
    assert_true(fabs(b->weight - 3.0 / 8) < 1e-12);
    assert_null(drv_sched_shapes_at(s, 2));
    drv_sched_shapes_destroy(s);
    /* coverage 1: all four; equal counts ordered by CPU, descending */
    s = drv_sched_shapes_create(v, 10, 1);
    assert_int_equal(drv_sched_shapes_count(s), 4);
    assert_int_equal(drv_sched_shapes_at(s, 2)->req.cpu_millis, 9000);
    assert_int_equal(drv_sched_shapes_at(s, 3)->req.cpu_millis, 8000);
    double sum = 0;
    for (size_t i = 0; i < 4; i++)
        sum += drv_sched_shapes_at(s, i)->weight;
    assert_true(fabs(sum - 1) < 1e-12);
    drv_sched_shapes_destroy(s);
    /* types are part of the key, and copied */
    char t1[] = "V100M16", t2[] = "V100M32";
    const char *ta[] = {t1, t2}, *tb[] = {t1};
    v[0].gpu_types = ta;
    v[0].n_gpu_types = 2;
    v[1].gpu_types = tb;
    v[1].n_gpu_types = 1;
    s = drv_sched_shapes_create(v, 10, 1);
    assert_int_equal(drv_sched_shapes_count(s), 6);
    strcpy(t1, "XXXXXXX");
    bool seen = false;
    for (size_t i = 0; i < drv_sched_shapes_count(s); i++) {
        const drv_sched_request_t *q = &drv_sched_shapes_at(s, i)->req;
        if (q->n_gpu_types == 2) {
            assert_string_equal(q->gpu_types[0], "V100M16");
            assert_string_equal(q->gpu_types[1], "V100M32");
            seen = true;
        }
    }
    assert_true(seen);
    drv_sched_shapes_destroy(s);
    s = drv_sched_shapes_create(NULL, 0, 0.95);
    assert_int_equal(drv_sched_shapes_count(s), 0);
    drv_sched_shapes_destroy(s);
    drv_sched_shapes_destroy(NULL);
}

/* --- the measure, worked by hand -------------------------------------------------------- */

static void test_frag_worked_examples(void **state)
{
    (void)state;
    /* Shapes: A = a 500 share, 1 CPU (5 of 10 requests: weight .5);
     *         B = 1 whole GPU, 2 CPUs (3: .3); C = CPU only (2: .2). */
    drv_sched_request_t v[10];
    for (int i = 0; i < 5; i++)
        v[i] = share(500, 1000);
    for (int i = 5; i < 8; i++)
        v[i] = whole(1, 2000);
    v[8] = v[9] = cpu_only(3000);
    drv_sched_shapes_t *m = drv_sched_shapes_create(v, 10, 1);
    assert_int_equal(drv_sched_shapes_count(m), 3);

    /* Example 1: 2 GPUs, free 1000 and 300, 10 CPUs free. Total free 1300.
     *   A: GPU0 fits 500, GPU1 (300) does not; hostable -> 300
     *   B: GPU0 empty fits, GPU1 shared does not; hostable -> 300
     *   C: CPU only -> all free, 1300
     *   frag = .5 x 300 + .3 x 300 + .2 x 1300 = 150 + 90 + 260 = 500 */
    node(0, 0, 10000, 10000, 2, "L4");
    used(0, 1, 700);
    assert_true(fabs(drv_sched_node_free_milli(&nodes[0]) - 1300) < 1e-9);
    assert_true(fabs(drv_sched_node_frag(&nodes[0], m) - 500) < 1e-9);

    /* Example 2: the same with 1.5 CPUs free. A still hostable (300);
     *   B needs 2 CPUs: not hostable -> 1300; C 1300.
     *   frag = 150 + .3 x 1300 + 260 = 800 */
    nodes[0].used_cpu_millis = 8500;
    assert_true(fabs(drv_sched_node_frag(&nodes[0], m) - 800) < 1e-9);

    /* Example 3: GPU0 unhealthy: free is GPU1's 300 only.
     *   A: no GPU fits -> 300; B -> 300; C -> 300: frag = 300 */
    nodes[0].used_cpu_millis = 0;
    nodes[0].gpus[0].healthy = false;
    assert_true(fabs(drv_sched_node_frag(&nodes[0], m) - 300) < 1e-9);

    /* Example 4: an empty 2-GPU node: every GPU fits A and B: frag is the
     * CPU-only shape's share of the free capacity, .2 x 2000 = 400. A node
     * with everything held whole has nothing free: 0. */
    node(1, 0, 10000, 10000, 2, "L4");
    assert_true(fabs(drv_sched_node_frag(&nodes[1], m) - 400) < 1e-9);
    used(1, 0, 1000);
    used(1, 1, 1000);
    assert_true(fabs(drv_sched_node_frag(&nodes[1], m)) < 1e-9);
    drv_sched_shapes_destroy(m);

    /* Example 5: a typed shape on a node of another type: all free is
     * fragmented. One shape, 1 whole "A100" GPU; an L4 node with 600 + 1000
     * free -> 1600. On an A100 node the same state -> the shared GPU's 600. */
    const char *a100[] = {"A100"};
    drv_sched_request_t t = whole(1, 0);
    t.gpu_types = a100;
    t.n_gpu_types = 1;
    m = drv_sched_shapes_create(&t, 1, 1);
    node(2, 0, 10000, 10000, 2, "L4");
    used(2, 0, 400);
    assert_true(fabs(drv_sched_node_frag(&nodes[2], m) - 1600) < 1e-9);
    nodes[2].gpus[0].type = nodes[2].gpus[1].type = "a100";
    assert_true(fabs(drv_sched_node_frag(&nodes[2], m) - 600) < 1e-9);
    assert_true(fabs(drv_sched_node_frag(&nodes[2], NULL)) < 1e-9);
    drv_sched_shapes_destroy(m);
}

/* --- context vs stateless ---------------------------------------------------------------- */

static void random_cluster(drv_rng_t *r, size_t n)
{
    static const char *types[] = {"L4", "T4", "A100"};
    for (size_t i = 0; i < n; i++) {
        int g = (int)drv_rng_below(r, 9);
        node((int)i, (int)drv_rng_below(r, 3) - (drv_rng_below(r, 8) == 0),
             (int64_t)(4000 + drv_rng_below(r, 60000)), (int64_t)(4000 + drv_rng_below(r, 60000)),
             g, types[drv_rng_below(r, 3)]);
        nodes[i].schedulable = drv_rng_below(r, 10) != 0;
        for (int j = 0; j < g; j++)
            nodes[i].gpus[j].healthy = drv_rng_below(r, 12) != 0;
    }
}

static drv_sched_request_t random_request(drv_rng_t *r)
{
    static const char *l4[] = {"L4"}, *two[] = {"a100", "t4"};
    drv_sched_request_t q;
    switch (drv_rng_below(r, 4)) {
    case 0: q = cpu_only((int64_t)(100 + drv_rng_below(r, 8000))); break;
    case 1: q = share((int64_t)(50 * (1 + drv_rng_below(r, 19))), (int64_t)drv_rng_below(r, 6000)); break;
    case 2: q = whole(1 + (int)drv_rng_below(r, 4), (int64_t)drv_rng_below(r, 9000)); break;
    default: q = share(100, 500); q.disable_packing = true; break;
    }
    q.memory_mib = (int64_t)drv_rng_below(r, 9000);
    switch (drv_rng_below(r, 6)) {
    case 0: q.gpu_types = l4; q.n_gpu_types = 1; break;
    case 1: q.gpu_types = two; q.n_gpu_types = 2; break;
    default: break;
    }
    return q;
}

/* For every deterministic policy, placing through a context (cached scores,
 * incremental state, with and without typical shapes) chooses exactly what
 * the stateless call chooses on the same snapshot, and the context's
 * cluster fragmentation equals the sum of the nodes'. */
static void test_ctx_matches_stateless(void **state)
{
    (void)state;
    drv_rng_t r;
    drv_rng_seed(&r, 12345);
    drv_sched_request_t hist[200];
    for (int i = 0; i < 200; i++)
        hist[i] = random_request(&r);
    drv_sched_shapes_t *m = drv_sched_shapes_create(hist, 200, 0.95);
    assert_non_null(m);
    static drv_sched_node_t copy[NMAX];
    for (size_t k = 0; k < N_ALL; k++) {
        if (strcmp(ALL[k], "random") == 0)
            continue;
        for (int with_shapes = 0; with_shapes < 2; with_shapes++) {
            drv_rng_seed(&r, 99 + k);
            random_cluster(&r, NMAX);
            drv_sched_ctx_opts_t o = {.shapes = with_shapes ? m : NULL};
            drv_sched_ctx_t *ctx = drv_sched_ctx_create(pol(ALL[k]), nodes, NMAX, &o);
            assert_non_null(ctx);
            for (int step = 0; step < 300; step++) {
                drv_sched_request_t q = random_request(&r);
                drv_sched_choice_t a, b;
                char wa[200] = "", wb[200] = "";
                int ra = drv_sched_ctx_place(ctx, &q, &a, wa, sizeof wa);
                int rb;
                if (with_shapes) {
                    /* the stateless call has no shapes: compare with a fresh context */
                    memcpy(copy, nodes, sizeof copy);
                    drv_sched_ctx_t *fresh = drv_sched_ctx_create(pol(ALL[k]), copy, NMAX, &o);
                    rb = drv_sched_ctx_place(fresh, &q, &b, wb, sizeof wb);
                    drv_sched_ctx_destroy(fresh);
                } else {
                    rb = pol(ALL[k])->place(nodes, NMAX, &q, &b, wb, sizeof wb);
                }
                assert_int_equal(ra, rb);
                assert_string_equal(wa, wb);
                if (ra == 0) {
                    assert_int_equal(a.node, b.node);
                    assert_int_equal(a.n_gpus, b.n_gpus);
                    assert_memory_equal(a.gpus, b.gpus, sizeof(int) * (size_t)a.n_gpus);
                    check_valid(NMAX, &q, &a);
                    drv_sched_ctx_commit(ctx, &q, &a);
                }
                if (step % 37 == 0) {              /* cordon / uncordon a node */
                    size_t i = (size_t)drv_rng_below(&r, NMAX);
                    nodes[i].schedulable = !nodes[i].schedulable;
                    drv_sched_ctx_touch(ctx, i);
                }
                if (with_shapes && step % 50 == 0) {
                    double sum = 0;
                    for (int i = 0; i < NMAX; i++)
                        sum += drv_sched_node_frag(&nodes[i], m);
                    assert_true(fabs(sum - drv_sched_ctx_frag(ctx)) < 1e-6 * (1 + sum));
                }
            }
            drv_sched_ctx_destroy(ctx);
        }
    }
    drv_sched_shapes_destroy(m);
}

/* More request shapes than the cache has slots: evictions keep answers right. */
static void test_ctx_many_shapes(void **state)
{
    (void)state;
    node(0, 0, 100000000, 100000000, 8, "L4");
    node(1, 0, 100000000, 100000000, 8, "L4");
    drv_sched_ctx_t *ctx = drv_sched_ctx_create(pol("best-fit"), nodes, 2, NULL);
    for (int i = 0; i < 1500; i++) {
        drv_sched_request_t q = cpu_only(1 + i % 700);
        drv_sched_choice_t a, b;
        assert_int_equal(drv_sched_ctx_place(ctx, &q, &a, NULL, 0), 0);
        assert_int_equal(pol("best-fit")->place(nodes, 2, &q, &b, NULL, 0), 0);
        assert_int_equal(a.node, b.node);
        drv_sched_ctx_commit(ctx, &q, &a);
    }
    drv_sched_ctx_destroy(ctx);
    drv_sched_ctx_destroy(NULL);
    /* an empty snapshot */
    ctx = drv_sched_ctx_create(pol("drover"), nodes, 0, NULL);
    drv_sched_request_t q = cpu_only(1);
    drv_sched_choice_t c;
    char why[100];
    assert_int_equal(drv_sched_ctx_place(ctx, &q, &c, why, sizeof why), -1);
    assert_string_equal(why, "no ready, schedulable node in the deployment's nodepools");
    assert_true(drv_sched_ctx_frag(ctx) == 0);
    drv_sched_ctx_destroy(ctx);
}

static void test_rng(void **state)
{
    (void)state;
    drv_rng_t a, b;
    drv_rng_seed(&a, 42);
    drv_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++)
        assert_true(drv_rng_next(&a) == drv_rng_next(&b));
    /* splitmix64 reference value (Vigna): first output for seed 0 */
    uint64_t x = 0;
    assert_true(drv_splitmix64(&x) == 0xe220a8397b1dcdafULL);
    for (int i = 0; i < 1000; i++) {
        assert_true(drv_rng_below(&a, 7) < 7);
        double d = drv_rng_double(&a);
        assert_true(d >= 0 && d < 1);
    }
    assert_true(drv_rng_below(&a, 1) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_cpu_only),
        cmocka_unit_test(test_share),
        cmocka_unit_test(test_whole_needs_empty_gpu),
        cmocka_unit_test(test_multi_gpu_one_node),
        cmocka_unit_test(test_gpu_types),
        cmocka_unit_test(test_unhealthy_and_cordoned),
        cmocka_unit_test(test_disable_packing),
        cmocka_unit_test(test_pool_overflow),
        cmocka_unit_test(test_best_fit_and_spread),
        cmocka_unit_test(test_drover_packs_equal_shares),
        cmocka_unit_test(test_packing),
        cmocka_unit_test(test_clustering),
        cmocka_unit_test(test_dotprod_and_paper_bestfit),
        cmocka_unit_test(test_fgd_avoids_unusable_slices),
        cmocka_unit_test(test_drover_cpu_aware),
        cmocka_unit_test(test_random_seeded),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_frag_worked_examples),
        cmocka_unit_test(test_ctx_matches_stateless),
        cmocka_unit_test(test_ctx_many_shapes),
        cmocka_unit_test(test_rng),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
