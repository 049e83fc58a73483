/* consbench.c — how long the node autoscaler's newer decisions take at
 * scale (bench/consolidate/run): one consolidation look (drv_cons_pick:
 * find an under-used node whose replicas fit elsewhere, simulated with the
 * default placement policy) on a synthetic cluster of 8-GPU nodes, next to
 * one stateless placement decision on the same snapshot (the reference: a
 * look costs a snapshot copy plus a few placements per candidate tried);
 * and one overflow decision (drv_nas_decide_pools) for many pending
 * replicas over a deployment's four nodepools.
 *
 * usage: consbench NODES REPLICAS_PER_NODE LOOKS PENDING
 * Prints one JSON object. Single-threaded; the clock is CLOCK_MONOTONIC.
 * Deterministic snapshots (a fixed-seed generator of its own).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autoscale/consolidate.h"
#include "autoscale/overflow.h"

static uint64_t rng = 42;

static uint32_t next(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng >> 33);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const int RANK0[] = {0};

/* A cluster of n 8 x V100 (16 GiB) nodes; node i is filled to a random
 * level with shares of 2 or 4 GiB (25 / 50 % compute). */
static size_t build(size_t n, size_t per, drv_sched_node_t *nodes, drv_cons_replica_t *reps,
                    char (*ids)[16])
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        drv_sched_node_t *nd = &nodes[i];
        memset(nd, 0, sizeof *nd);
        snprintf(ids[i], 16, "n%zu", i);
        nd->id = ids[i];
        nd->schedulable = true;
        nd->cpu_millis = 96000;
        nd->memory_mib = 786432;
        nd->n_gpus = 8;
        for (int g = 0; g < 8; g++)
            nd->gpus[g] = (drv_sched_gpu_t){.index = g, .type = "V100", .memory_mib = 16384,
                                            .healthy = true};
        size_t fill = per ? next() % (2 * per + 1) : 0;
        for (size_t r = 0; r < fill; r++) {
            int big = next() % 2, g = (int)(next() % 8);
            drv_sched_request_t q = {.gpu_count = 1, .gpu_memory_mib = big ? 4096 : 2048,
                                     .compute_percent = big ? 50 : 25, .cpu_millis = 1000,
                                     .memory_mib = 4096};
            drv_sched_gpu_t *gp = &nd->gpus[g];
            if (gp->used_compute + q.compute_percent > 100)
                continue;
            gp->used_memory_mib += q.gpu_memory_mib;
            gp->used_compute += q.compute_percent;
            gp->shares++;
            nd->used_cpu_millis += q.cpu_millis;
            nd->used_memory_mib += q.memory_mib;
            reps[k++] = (drv_cons_replica_t){.node = (int)i, .req = q, .ready = true,
                                             .rank = RANK0};
        }
    }
    return k;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: consbench NODES REPLICAS_PER_NODE LOOKS PENDING\n");
        return 2;
    }
    size_t n = strtoul(argv[1], NULL, 10), per = strtoul(argv[2], NULL, 10);
    size_t looks = strtoul(argv[3], NULL, 10), pending = strtoul(argv[4], NULL, 10);
    if (n == 0 || looks == 0 || per > 64) {
        fprintf(stderr, "consbench: NODES and LOOKS > 0, REPLICAS_PER_NODE <= 64\n");
        return 2;
    }
    drv_sched_node_t *nodes = calloc(n, sizeof *nodes);
    drv_cons_node_t *info = calloc(n, sizeof *info);
    drv_cons_replica_t *reps = calloc(n * (2 * per + 1) + 1, sizeof *reps);
    char (*ids)[16] = calloc(n, sizeof *ids);
    double *look = calloc(looks, sizeof *look), *place = calloc(looks, sizeof *place);
    drv_cons_pick_t *out = calloc(1, sizeof *out);
    if (!nodes || !info || !reps || !ids || !look || !place || !out)
        return 1;
    drv_error_t err;
    size_t n_reps = 0, moves = 0, picked = 0;
    const drv_place_policy_t *pol = drv_place_policy(NULL);
    for (size_t l = 0; l < looks; l++) {
        n_reps = build(n, per, nodes, reps, ids);
        drv_cons_pool_t pool = {.enabled = true, .min_nodes = 0, .live = (int)n};
        double t0 = now_ms();
        if (drv_cons_pick(NULL, nodes, info, n, &pool, 1, reps, n_reps, 0, out, &err) < 0) {
            fprintf(stderr, "consbench: %s\n", err.message);
            return 1;
        }
        look[l] = now_ms() - t0;
        picked += out->node >= 0;
        moves += out->n_moves;
        drv_sched_choice_t ch;
        char why[64];
        t0 = now_ms();
        pol->place(nodes, n, &reps[0].req, &ch, why, sizeof why);
        place[l] = now_ms() - t0;
    }
    qsort(look, looks, sizeof *look, cmp_double);
    qsort(place, looks, sizeof *place, cmp_double);

    /* overflow: PENDING whole-GPU replicas over four nodepools by priority,
     * the first two at max_nodes, the third backing off */
    static const drv_instance_type_t T = {
        .id = "g8", .provider = "bench", .vcpus = 96, .memory_mib = 786432, .gpu_type = "V100",
        .gpu_count = 8, .gpu_memory_mib = 16384, .price_per_hour = 24.48,
        .spot_price_per_hour = 7.34};
    static const drv_instance_type_t *const TYPES[] = {&T};
    drv_nas_config_t cfg[4];
    drv_nas_state_t st[4];
    drv_nas_pool_t pools[4];
    static const char *const names[] = {"c/p0", "c/p1", "c/p2", "c/p3"};
    for (int p = 0; p < 4; p++) {
        cfg[p] = (drv_nas_config_t){.min_nodes = 0, .max_nodes = p < 2 ? 0 : 100000,
                                    .types = TYPES, .n_types = 1,
                                    .capacity = p == 2 ? DRV_CAPACITY_POLICY_SPOT
                                                       : DRV_CAPACITY_POLICY_ON_DEMAND,
                                    .scale_down_delay_ms = 300000};
        drv_nas_state_init(&st[p]);
        pools[p] = (drv_nas_pool_t){.name = names[p], .cfg = &cfg[p], .state = &st[p]};
    }
    drv_nas_report_failure(&st[2], &cfg[2], "g8", DRV_CAPACITY_SPOT, 0, "no capacity");
    drv_nas_want_t *wants = calloc(pending + 1, sizeof *wants);
    drv_nas_decision_t *ds = calloc(4, sizeof *ds);
    int *at = calloc(pending + 1, sizeof *at);
    if (!wants || !ds || !at)
        return 1;
    for (size_t i = 0; i < pending; i++) {
        wants[i].req = (drv_sched_request_t){.gpu_count = 1 + (int)(i % 2), .compute_percent = 100,
                                             .cpu_millis = 4000, .memory_mib = 16384};
        for (int p = 0; p < 4; p++)
            wants[i].pools[wants[i].n_pools++] = p;
    }
    double t0 = now_ms();
    if (drv_nas_decide_pools(pools, 4, 1000, wants, pending, ds, at, NULL, &err) < 0) {
        fprintf(stderr, "consbench: %s\n", err.message);
        return 1;
    }
    double overflow_ms = now_ms() - t0;
    int nodes_created = 0;
    for (size_t i = 0; i < ds[3].n_create; i++)
        nodes_created += ds[3].create[i].count;

    printf("{\"nodes\": %zu, \"replicas\": %zu, \"looks\": %zu, \"picked\": %zu, "
           "\"moves_per_pick\": %.1f, \"look_ms_p50\": %.3f, \"look_ms_max\": %.3f, "
           "\"place_ms_p50\": %.4f, \"pending\": %zu, \"overflow_ms\": %.3f, "
           "\"overflow_nodes\": %d}\n",
           n, n_reps, looks, picked, picked ? (double)moves / (double)picked : 0.0,
           look[looks / 2], look[looks - 1], place[looks / 2], pending, overflow_ms,
           nodes_created);
    free(nodes);
    free(info);
    free(reps);
    free(ids);
    free(look);
    free(place);
    free(out);
    free(wants);
    free(ds);
    free(at);
    return 0;
}
