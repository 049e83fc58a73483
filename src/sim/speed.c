/* speed.c — `drover-sim speed`: how fast the placement code decides.
 *
 * One online run, timed per decision (drv_sched_ctx_place + commit, as the
 * daemon would do them), on either the trace as is (the seed's benchmark
 * workload) or a synthetic scale-up: --node-count N tiles the trace's GPU
 * nodes up to N nodes, --replicas R draws R pods uniformly with
 * replacement from the pod list. Reports decisions/s over the whole run
 * and the p50 / p99 / max latency of one decision. Timings vary with the
 * machine; nothing else is measured.
 */
#include "sim/sim.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/rng.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: drover-sim speed --nodes NODES.csv --pods PODS.csv [--policy P[,P2...]]\n"
            "                        [--node-count N] [--replicas R] [--seed S] [-o table|json]\n"
            "\n"
            "Times each placement decision (place + commit) of one online run: the\n"
            "seed's benchmark workload on the trace's nodes, or R pods drawn from the pod\n"
            "list onto the trace's GPU nodes tiled up to N nodes.\n");
}

typedef struct speed_result {
    const char *policy;
    size_t nodes, decisions, placed;
    int64_t gpus;
    double per_s, mean_us, p50_us, p99_us, max_us;
} speed_result_t;

static int run(const sim_world_t *w, const drv_place_policy_t *p, size_t node_count,
               size_t replicas, uint64_t seed, speed_result_t *res)
{
    size_t *order = NULL, *node_order = NULL, n_order = 0;
    drv_sched_node_t *nodes = NULL;
    drv_sched_ctx_t *ctx = NULL;
    int64_t *lat = NULL;
    int rc = -1;
    if (sim_workload(w, seed, 1.3, &order, &n_order, &node_order) < 0)
        goto out;
    drv_rng_t r;
    drv_rng_seed(&r, seed ^ 0x2545f4914f6cdd1dULL);
    if (replicas) {
        size_t *v = realloc(order, replicas * sizeof *v);
        if (!v)
            goto out;
        order = v;
        for (size_t k = 0; k < replicas; k++)
            order[k] = (size_t)drv_rng_below(&r, w->n_pods);
        n_order = replicas;
    }
    size_t nn = node_count ? node_count : w->n_nodes;
    nodes = malloc(nn * sizeof *nodes);
    lat = malloc((n_order ? n_order : 1) * sizeof *lat);
    if (!nodes || !lat)
        goto out;
    res->gpus = 0;
    for (size_t k = 0; k < nn; k++) {
        size_t src = k < w->n_nodes ? node_order[k] : (size_t)drv_rng_below(&r, w->n_nodes);
        nodes[k] = w->nodes[src];
        res->gpus += nodes[k].n_gpus;
    }
    drv_sched_ctx_opts_t o = {.shapes = w->shapes, .seed = seed ^ SIM_SCHED_SALT};
    ctx = drv_sched_ctx_create(p, nodes, nn, &o);
    if (!ctx)
        goto out;
    res->placed = 0;
    int64_t t0 = sim_now_ns();
    for (size_t k = 0; k < n_order; k++) {
        const drv_sched_request_t *rq = &w->reqs[order[k]];
        drv_sched_choice_t ch;
        int64_t a = sim_now_ns();
        if (drv_sched_ctx_place(ctx, rq, &ch, NULL, 0) == 0) {
            drv_sched_ctx_commit(ctx, rq, &ch);
            res->placed++;
        }
        lat[k] = sim_now_ns() - a;
    }
    int64_t total = sim_now_ns() - t0;
    qsort(lat, n_order, sizeof *lat, cmp_i64);
    res->policy = p->name;
    res->nodes = nn;
    res->decisions = n_order;
    res->per_s = n_order ? (double)n_order / ((double)total / 1e9) : 0;
    res->mean_us = n_order ? (double)total / 1e3 / (double)n_order : 0;
    res->p50_us = n_order ? (double)lat[n_order / 2] / 1e3 : 0;
    res->p99_us = n_order ? (double)lat[(size_t)((double)(n_order - 1) * 0.99)] / 1e3 : 0;
    res->max_us = n_order ? (double)lat[n_order - 1] / 1e3 : 0;
    rc = 0;
out:
    drv_sched_ctx_destroy(ctx);
    free(nodes);
    free(order);
    free(node_order);
    free(lat);
    return rc;
}

int sim_speed_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"nodes", required_argument, NULL, 'n'},      {"pods", required_argument, NULL, 'p'},
        {"policy", required_argument, NULL, 'P'},     {"seed", required_argument, NULL, 's'},
        {"node-count", required_argument, NULL, 'N'}, {"replicas", required_argument, NULL, 'R'},
        {"output", required_argument, NULL, 'o'},     {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *nodes_path = NULL, *pods_path = NULL, *policy_arg = "drover", *out = "table";
    unsigned long long seed = 42, node_count = 0, replicas = 0;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        char *e = NULL;
        switch (c) {
        case 'n': nodes_path = optarg; break;
        case 'p': pods_path = optarg; break;
        case 'P': policy_arg = optarg; break;
        case 'o': out = optarg; break;
        case 's': seed = strtoull(optarg, &e, 10); break;
        case 'N': node_count = strtoull(optarg, &e, 10); break;
        case 'R': replicas = strtoull(optarg, &e, 10); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (e && (*e || e == optarg || *optarg == '-')) {
            fprintf(stderr, "drover-sim speed: '%s' is not a non-negative integer\n", optarg);
            return 2;
        }
    }
    if (optind < argc || !nodes_path || !pods_path || node_count > 1000000 ||
        replicas > 100000000) {
        fprintf(stderr, "drover-sim speed: %s\n",
                optind < argc ? "unexpected argument"
                : !nodes_path || !pods_path ? "--nodes and --pods are required"
                                            : "at most 1,000,000 nodes and 10^8 replicas");
        usage(stderr);
        return 2;
    }
    bool json = strcmp(out, "json") == 0;
    if (!json && strcmp(out, "table") != 0) {
        fprintf(stderr, "drover-sim speed: -o wants table or json\n");
        return 2;
    }
    sim_world_t w;
    drv_error_t err = {0};
    if (sim_world_load(&w, nodes_path, pods_path, &err) < 0) {
        fprintf(stderr, "drover-sim: %s\n", err.message);
        return 1;
    }
    json_t *arr = json_array();
    if (!json)
        printf("%-14s %8s %8s %10s %8s %12s %9s %9s %9s %9s\n", "policy", "nodes", "GPUs",
               "decisions", "placed", "decisions/s", "mean us", "p50 us", "p99 us", "max us");
    char *plist = strdup(policy_arg), *save = NULL;
    int rc = 0;
    for (char *tok = strtok_r(plist, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const drv_place_policy_t *p = drv_place_policy(tok);
        if (!p) {
            fprintf(stderr, "drover-sim speed: unknown policy '%s'\n", tok);
            rc = 2;
            break;
        }
        speed_result_t r;
        if (run(&w, p, (size_t)node_count, (size_t)replicas, seed, &r) < 0) {
            fprintf(stderr, "drover-sim: out of memory\n");
            rc = 1;
            break;
        }
        if (json)
            json_array_append_new(
                arr, json_pack("{s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f}", "policy",
                               r.policy, "nodes", (json_int_t)r.nodes, "gpus",
                               (json_int_t)r.gpus, "decisions", (json_int_t)r.decisions,
                               "placed", (json_int_t)r.placed, "decisions_per_s", r.per_s,
                               "mean_us", r.mean_us, "p50_us", r.p50_us, "p99_us", r.p99_us,
                               "max_us", r.max_us));
        else
            printf("%-14s %8zu %8lld %10zu %8zu %12.0f %9.1f %9.1f %9.1f %9.1f\n", r.policy,
                   r.nodes, (long long)r.gpus, r.decisions, r.placed, r.per_s, r.mean_us,
                   r.p50_us, r.p99_us, r.max_us);
    }
    free(plist);
    if (json && rc == 0) {
        char *s = json_dumps(arr, JSON_INDENT(1) | JSON_COMPACT | JSON_REAL_PRECISION(8));
        printf("%s\n", s ? s : "[]");
        free(s);
    }
    json_decref(arr);
    sim_world_free(&w);
    return rc;
}
