/* placement.c — `drover-sim placement`: the FGD paper's GPU-sharing
 * benchmark (../shared/data/fgd-benchmark.md) run with drover's policies.
 *
 * For each policy and seed: the seed's workload (world.c) is scheduled
 * online on the seed's node order — one pod at a time, no queue, retry,
 * preemption or migration; a pod that fits nowhere is dropped. After each
 * pod: arrived = cumulative GPU request (failed pods too) in % of the
 * cluster's capacity, rounded half-even to an integer bin 0..130;
 * allocated = used GPU in % (rounded to 2 decimals, as the reference
 * analysis does); fragmentation = the FGD measure of every node w.r.t. the
 * pod list's typical shapes. Per bin, the mean of the pods in it (a bin no
 * pod landed in takes the pods of the bins on either side). Reported per
 * policy: mean and sample sd over seeds of allocation and unallocated %
 * at arrival 100 %, fragmentation %, and the mean curve over 0..130 %.
 *
 * Output is a pure function of the inputs and options (no timings: with
 * --timing those go to stderr), so the same seed gives byte-identical
 * JSON.
 */
#include "sim/sim.h"

#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BINS 131
#define MAX_SEEDS 1000
#define MAX_POLICIES 32

typedef struct seed_result {
    double alloc[BINS], frag[BINS];  /* NAN = no data */
    size_t pods, placed, failed;
    int64_t ns;                      /* wall time of the scheduling loop */
    double p50_us, p99_us;
} seed_result_t;

static double round2(double x)
{
    return nearbyint(x * 100) / 100;
}

/* Per-bin means with the reference's fallback to the neighbouring bins. */
static void bin_means(const double *sum, const double *fsum, const size_t *cnt, double *alloc,
                      double *frag, double total_gpus)
{
    for (int b = 0; b < BINS; b++) {
        double s = sum[b], f = fsum[b];
        size_t c = cnt[b];
        if (c == 0) {
            if (b > 0) {
                s += sum[b - 1];
                f += fsum[b - 1];
                c += cnt[b - 1];
            }
            if (b + 1 < BINS) {
                s += sum[b + 1];
                f += fsum[b + 1];
                c += cnt[b + 1];
            }
        }
        alloc[b] = c ? round2(s / (double)c) : NAN;
        frag[b] = c ? round2(100.0 * (f / (double)c) / 1000.0 / total_gpus) : NAN;
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int run_seed(const sim_world_t *w, const drv_place_policy_t *p, uint64_t seed,
                    double inflate, bool timing, seed_result_t *res)
{
    size_t *order = NULL, *node_order = NULL, n_order = 0;
    drv_sched_node_t *nodes = NULL;
    drv_sched_ctx_t *ctx = NULL;
    int64_t *lat = NULL;
    int rc = -1;
    if (sim_workload(w, seed, inflate, &order, &n_order, &node_order) < 0)
        goto out;
    nodes = malloc(w->n_nodes * sizeof *nodes);
    lat = timing ? malloc((n_order ? n_order : 1) * sizeof *lat) : NULL;
    if (!nodes || (timing && !lat))
        goto out;
    for (size_t k = 0; k < w->n_nodes; k++)
        nodes[k] = w->nodes[node_order[k]];
    drv_sched_ctx_opts_t o = {.shapes = w->shapes, .seed = seed ^ SIM_SCHED_SALT};
    ctx = drv_sched_ctx_create(p, nodes, w->n_nodes, &o);
    if (!ctx)
        goto out;
    double sum[BINS] = {0}, fsum[BINS] = {0};
    size_t cnt[BINS] = {0};
    double total_gpus = (double)w->gpus;
    int64_t arrived = 0, used = 0;
    memset(res, 0, sizeof *res);
    int64_t t0 = sim_now_ns();
    for (size_t k = 0; k < n_order; k++) {
        const drv_sched_request_t *r = &w->reqs[order[k]];
        drv_sched_choice_t ch;
        arrived += w->milli[order[k]];
        int64_t a = timing ? sim_now_ns() : 0;
        if (drv_sched_ctx_place(ctx, r, &ch, NULL, 0) == 0) {
            drv_sched_ctx_commit(ctx, r, &ch);
            used += (int64_t)ch.n_gpus * ch.gpu_memory_mib;
            res->placed++;
        } else {
            res->failed++;
        }
        if (timing)
            lat[k] = sim_now_ns() - a;
        double arr = nearbyint((double)arrived / total_gpus / 10.0);
        if (arr >= 0 && arr < BINS) {
            int b = (int)arr;
            sum[b] += round2((double)used / total_gpus / 10.0);
            fsum[b] += drv_sched_ctx_frag(ctx);
            cnt[b]++;
        }
    }
    res->ns = sim_now_ns() - t0;
    res->pods = n_order;
    bin_means(sum, fsum, cnt, res->alloc, res->frag, total_gpus);
    if (timing && n_order) {
        qsort(lat, n_order, sizeof *lat, cmp_i64);
        res->p50_us = (double)lat[n_order / 2] / 1000.0;
        res->p99_us = (double)lat[(size_t)((double)(n_order - 1) * 0.99)] / 1000.0;
    }
    rc = 0;
out:
    drv_sched_ctx_destroy(ctx);
    free(nodes);
    free(order);
    free(node_order);
    free(lat);
    return rc;
}

typedef struct stat2 {
    double mean, sd;
} stat2_t;

static stat2_t stats(const double *v, size_t n)
{
    stat2_t s = {NAN, NAN};
    size_t k = 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i])) {
            sum += v[i];
            k++;
        }
    if (!k)
        return s;
    s.mean = sum / (double)k;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i]))
            ss += (v[i] - s.mean) * (v[i] - s.mean);
    s.sd = k > 1 ? sqrt(ss / (double)(k - 1)) : 0;
    return s;
}

static json_t *jnum(double x)
{
    return isnan(x) ? json_null() : json_real(round2(x) == 0 ? 0 : round2(x));
}

static json_t *jstat(stat2_t s)
{
    return json_pack("{s:o, s:o}", "mean", jnum(s.mean), "sd", jnum(s.sd));
}

typedef struct policy_result {
    const drv_place_policy_t *p;
    stat2_t alloc100, unalloc100, frag100, alloc90, alloc110, alloc130, failed, placed;
    double curve_alloc[BINS], curve_frag[BINS];
} policy_result_t;

static void summarise(policy_result_t *pr, const seed_result_t *sr, size_t ns)
{
    double *v = malloc((ns ? ns : 1) * sizeof *v);
    if (!v)
        abort();
#define STAT(field, expr)                  \
    do {                                   \
        for (size_t i = 0; i < ns; i++)    \
            v[i] = (expr);                 \
        pr->field = stats(v, ns);          \
    } while (0)
    STAT(alloc100, sr[i].alloc[100]);
    STAT(unalloc100, 100.0 - sr[i].alloc[100]);
    STAT(frag100, sr[i].frag[100]);
    STAT(alloc90, sr[i].alloc[90]);
    STAT(alloc110, sr[i].alloc[110]);
    STAT(alloc130, sr[i].alloc[130]);
    STAT(failed, (double)sr[i].failed);
    STAT(placed, (double)sr[i].placed);
#undef STAT
    for (int b = 0; b < BINS; b++) {
        for (size_t i = 0; i < ns; i++)
            v[i] = sr[i].alloc[b];
        pr->curve_alloc[b] = stats(v, ns).mean;
        for (size_t i = 0; i < ns; i++)
            v[i] = sr[i].frag[b];
        pr->curve_frag[b] = stats(v, ns).mean;
    }
    free(v);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: drover-sim placement --nodes NODES.csv --pods PODS.csv --policy P[,P2...]\n"
            "                            [--seeds 42-51] [--inflate 1.3] [-o table|json] [--timing]\n"
            "\n"
            "Runs the FGD paper's GPU-sharing placement benchmark (Alibaba\n"
            "cluster-trace-gpu-v2023): per seed, pods sorted by name and shuffled,\n"
            "inflated to INFLATE x the cluster's GPU capacity, scheduled online on a\n"
            "shuffled node order. Prints, per policy, the mean and sd over seeds of the\n"
            "GPU allocation and unallocated GPU %% at arrival 100 %%, the fragmentation\n"
            "%%, and (json) the curve over arrival 0..130 %%. --timing: decision\n"
            "latencies on stderr.\n"
            "\n"
            "policies:\n");
    size_t n;
    const drv_place_policy_t *pol = drv_place_policies(&n);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "  %-14s %s%s\n", pol[i].name, pol[i].summary, i == 0 ? " (default)" : "");
}

int sim_placement_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"nodes", required_argument, NULL, 'n'},  {"pods", required_argument, NULL, 'p'},
        {"policy", required_argument, NULL, 'P'}, {"seeds", required_argument, NULL, 's'},
        {"inflate", required_argument, NULL, 'i'}, {"output", required_argument, NULL, 'o'},
        {"timing", no_argument, NULL, 't'},       {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *nodes_path = NULL, *pods_path = NULL, *policy_arg = "drover", *out = "table";
    const char *seeds_arg = "42-51";
    double inflate = 1.3;
    bool timing = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n': nodes_path = optarg; break;
        case 'p': pods_path = optarg; break;
        case 'P': policy_arg = optarg; break;
        case 's': seeds_arg = optarg; break;
        case 'o': out = optarg; break;
        case 't': timing = true; break;
        case 'i': {
            char *e;
            inflate = strtod(optarg, &e);
            if (*e || !(inflate > 0) || inflate > 100) {
                fprintf(stderr, "drover-sim placement: --inflate wants a number in (0, 100]\n");
                return 2;
            }
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || !nodes_path || !pods_path) {
        fprintf(stderr, "drover-sim placement: %s\n",
                optind < argc ? "unexpected argument" : "--nodes and --pods are required");
        usage(stderr);
        return 2;
    }
    bool json = strcmp(out, "json") == 0;
    if (!json && strcmp(out, "table") != 0) {
        fprintf(stderr, "drover-sim placement: -o wants table or json\n");
        return 2;
    }
    static uint64_t seeds[MAX_SEEDS];
    size_t n_seeds;
    if (sim_parse_seeds(seeds_arg, seeds, MAX_SEEDS, &n_seeds) < 0) {
        fprintf(stderr, "drover-sim placement: --seeds wants N, A-B or a comma list (at most "
                "%d seeds)\n", MAX_SEEDS);
        return 2;
    }
    const drv_place_policy_t *pols[MAX_POLICIES];
    size_t n_pols = 0;
    char *plist = strdup(policy_arg), *save = NULL;
    for (char *tok = strtok_r(plist, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const drv_place_policy_t *p = drv_place_policy(tok);
        if (!p || n_pols == MAX_POLICIES) {
            fprintf(stderr, "drover-sim placement: %s policy '%s' (see --help)\n",
                    p ? "too many policies, at" : "unknown", tok);
            free(plist);
            return 2;
        }
        pols[n_pols++] = p;
    }
    free(plist);
    if (!n_pols) {
        fprintf(stderr, "drover-sim placement: --policy names no policy\n");
        return 2;
    }

    sim_world_t w;
    drv_error_t err = {0};
    if (sim_world_load(&w, nodes_path, pods_path, &err) < 0) {
        fprintf(stderr, "drover-sim: %s\n", err.message);
        return 1;
    }
    policy_result_t *prs = calloc(n_pols, sizeof *prs);
    seed_result_t *srs = calloc(n_seeds, sizeof *srs);
    if (!prs || !srs) {
        fprintf(stderr, "drover-sim: out of memory\n");
        return 1;
    }
    int rc = 0;
    for (size_t pi = 0; pi < n_pols; pi++) {
        int64_t ns = 0;
        size_t decisions = 0;
        for (size_t si = 0; si < n_seeds; si++) {
            if (run_seed(&w, pols[pi], seeds[si], inflate, timing, &srs[si]) < 0) {
                fprintf(stderr, "drover-sim: out of memory\n");
                rc = 1;
                goto done;
            }
            ns += srs[si].ns;
            decisions += srs[si].pods;
            if (timing)
                fprintf(stderr, "timing: %s seed %llu: %zu decisions in %.3f s (%.0f/s), "
                        "p50 %.1f us, p99 %.1f us\n", pols[pi]->name,
                        (unsigned long long)seeds[si], srs[si].pods, (double)srs[si].ns / 1e9,
                        (double)srs[si].pods / ((double)srs[si].ns / 1e9), srs[si].p50_us,
                        srs[si].p99_us);
        }
        if (timing)
            fprintf(stderr, "timing: %s: %zu decisions in %.3f s (%.0f/s)\n", pols[pi]->name,
                    decisions, (double)ns / 1e9, (double)decisions / ((double)ns / 1e9));
        prs[pi].p = pols[pi];
        summarise(&prs[pi], srs, n_seeds);
    }

    if (json) {
        json_t *jseeds = json_array(), *jpols = json_array();
        for (size_t si = 0; si < n_seeds; si++)
            json_array_append_new(jseeds, json_integer((json_int_t)seeds[si]));
        for (size_t pi = 0; pi < n_pols; pi++) {
            const policy_result_t *pr = &prs[pi];
            json_t *arr = json_array(), *ca = json_array(), *cf = json_array();
            for (int b = 0; b < BINS; b++) {
                json_array_append_new(arr, json_integer(b));
                json_array_append_new(ca, jnum(pr->curve_alloc[b]));
                json_array_append_new(cf, jnum(pr->curve_frag[b]));
            }
            json_array_append_new(
                jpols,
                json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:{s:o, s:o, s:o}}",
                          "policy", pr->p->name, "alloc_gpu_pct_at_arrival_100",
                          jstat(pr->alloc100), "unallocated_gpu_pct_at_arrival_100",
                          jstat(pr->unalloc100), "frag_gpu_pct_at_arrival_100",
                          jstat(pr->frag100), "alloc_gpu_pct_at_arrival_90", jstat(pr->alloc90),
                          "alloc_gpu_pct_at_arrival_110", jstat(pr->alloc110),
                          "alloc_gpu_pct_at_arrival_130", jstat(pr->alloc130), "pods_placed",
                          jstat(pr->placed), "pods_failed", jstat(pr->failed), "curve",
                          "arrival_pct", arr, "alloc_gpu_pct", ca, "frag_gpu_pct", cf));
        }
        json_t *doc = json_pack(
            "{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "benchmark",
            "fgd-benchmark.md (Alibaba cluster-trace-gpu-v2023, GPU sharing)", "nodes_file",
            nodes_path, "pods_file", pods_path, "nodes", (json_int_t)w.n_nodes, "gpus",
            (json_int_t)w.gpus, "pods", (json_int_t)w.n_pods, "typical_shapes",
            (json_int_t)drv_sched_shapes_count(w.shapes), "inflate", json_real(inflate), "seeds",
            jseeds, "policies", jpols);
        char *s = json_dumps(doc, JSON_INDENT(1) | JSON_COMPACT | JSON_REAL_PRECISION(10));
        if (s)
            printf("%s\n", s);
        free(s);
        json_decref(doc);
    } else {
        printf("nodes %zu (%lld GPUs), pods %zu, typical shapes %zu, inflate %.2f, seeds %s\n",
               w.n_nodes, (long long)w.gpus, w.n_pods, drv_sched_shapes_count(w.shapes),
               inflate, seeds_arg);
        printf("%-14s %16s %16s %9s %8s %8s %8s %9s\n", "policy", "alloc@100 %",
               "unalloc@100 %", "frag@100", "@90", "@110", "@130", "failed");
        for (size_t pi = 0; pi < n_pols; pi++) {
            const policy_result_t *pr = &prs[pi];
            printf("%-14s %9.2f ± %4.2f %9.2f ± %4.2f %9.2f %8.2f %8.2f %8.2f %9.0f\n",
                   pr->p->name, pr->alloc100.mean, pr->alloc100.sd, pr->unalloc100.mean,
                   pr->unalloc100.sd, pr->frag100.mean, pr->alloc90.mean, pr->alloc110.mean,
                   pr->alloc130.mean, pr->failed.mean);
        }
    }
done:
    free(prs);
    free(srs);
    sim_world_free(&w);
    return rc;
}
