/* gangbench.c — gang placement latency (src/sched/gang.c) at scale: a
 * 64-worker gang on a 10,000-node snapshot (8 GPUs each, a seeded random
 * 0..8 of them already held), placed again and again on snapshots that
 * drift (each round commits the gang, then releases a random earlier
 * one). Prints p50 / p99 / max per shape, wall clock and this thread's
 * CPU time (on a shared machine the CPU time is the placement's own cost;
 * wall time adds waiting for a core). A timing program, not a test:
 * nothing is asserted (goal, issue 15: p99 < 10 ms).
 *
 *   gangbench [--nodes N] [--rounds R] [--seed S]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/gang.h"
#include "sched/rng.h"

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    size_t n = 10000, rounds = 400;
    uint64_t seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--nodes") == 0)
            n = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0)
            seed = strtoull(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "usage: gangbench [--nodes N] [--rounds R] [--seed S]\n");
            return 2;
        }
    }
    if (n == 0 || rounds == 0) {
        fprintf(stderr, "gangbench: --nodes and --rounds must be >= 1\n");
        return 2;
    }
    static const struct { const char *name; int workers, gpus; } shapes[] = {
        {"64 x 1 GPU", 64, 1}, {"64 x 8 GPUs", 64, 8}, {"8 x 8 GPUs", 8, 8}};
    drv_sched_node_t *nodes = calloc(n, sizeof *nodes);
    int64_t *t = malloc(sizeof *t * rounds), *tc = malloc(sizeof *tc * rounds);
    drv_sched_choice_t (*held)[64] = malloc(sizeof *held * rounds);
    if (!nodes || !t || !tc || !held) {
        fprintf(stderr, "gangbench: out of memory\n");
        return 1;
    }
    printf("| gang | nodes | rounds | placed | p50 ms | p99 ms | max ms | CPU p50 ms | CPU p99 ms |\n"
           "|---|---|---|---|---|---|---|---|---|\n");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        drv_rng_t rng;
        drv_rng_seed(&rng, seed);
        for (size_t i = 0; i < n; i++) {
            drv_sched_node_t *nd = &nodes[i];
            memset(nd, 0, sizeof *nd);
            nd->schedulable = true;
            nd->cpu_millis = 192000;
            nd->memory_mib = 2000000;
            nd->n_gpus = 8;
            int busy = (int)drv_rng_below(&rng, 9);
            for (int g = 0; g < 8; g++) {
                nd->gpus[g] = (drv_sched_gpu_t){.index = g, .type = "H100", .memory_mib = 80000,
                                                .healthy = true};
                if (g < busy)
                    nd->gpus[g].shares = 1, nd->gpus[g].exclusive = true,
                    nd->gpus[g].used_memory_mib = 80000, nd->gpus[g].used_compute = 100;
            }
        }
        drv_gang_request_t req = {.workers = shapes[s].workers,
                                  .worker = {.gpu_count = shapes[s].gpus, .compute_percent = 100,
                                             .cpu_millis = 8000, .memory_mib = 64000}};
        size_t placed = 0, live = 0;
        for (size_t r = 0; r < rounds; r++) {
            drv_gang_placement_t p = {.ranks = held[live]};
            int64_t a = now_ns(), c = cpu_ns();
            int rc = drv_gang_place(nodes, n, &req, NULL, &p, NULL, 0);
            t[r] = now_ns() - a;
            tc[r] = cpu_ns() - c;
            if (rc == 0) {
                drv_gang_commit(nodes, &req, held[live]);
                live++;
                placed++;
            }
            if (live > 0 && (rc != 0 || drv_rng_below(&rng, 2) == 0)) {
                size_t k = (size_t)drv_rng_below(&rng, live);
                drv_gang_release(nodes, &req, held[k]);
                memcpy(held[k], held[live - 1], sizeof held[k]);
                live--;
            }
        }
        qsort(t, rounds, sizeof *t, cmp64);
        qsort(tc, rounds, sizeof *tc, cmp64);
        printf("| %s | %zu | %zu | %zu | %.3f | %.3f | %.3f | %.3f | %.3f |\n", shapes[s].name, n,
               rounds, placed, t[rounds / 2] / 1e6, t[(size_t)(rounds * 0.99)] / 1e6,
               t[rounds - 1] / 1e6, tc[rounds / 2] / 1e6, tc[(size_t)(rounds * 0.99)] / 1e6);
    }
    free(nodes);
    free(t);
    free(tc);
    free(held);
    return 0;
}
