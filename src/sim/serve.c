/* serve.c — `drover-sim serve`: the command. Reads the trace and the
 * stack config (serve_input.c), runs each scenario (serve_model.c) and
 * prints one row per scenario, as a table or JSON.
 *
 * Scenarios, in this order (a static table):
 *   drover      the config's deployment.autoscale (drover's defaults for
 *               absent fields), load sampled on every controller pass;
 *   ray-serve   the same autoscaler with Ray Serve's AutoscalingConfig
 *               defaults (target_ongoing_requests 2, look_back_period_s 30,
 *               upscale_delay_s 30, downscale_delay_s 600, min_replicas 1,
 *               metrics_interval_s 10 -> a load sample every 10 s; no burst
 *               reaction: Ray has none);
 *   knative     with Knative KPA's defaults (container-concurrency-target-
 *               default 100 x target utilization 70 % = 70, stable-window
 *               60 s, panic window 10 % = 6 s, panic threshold 200 %,
 *               scale-down-delay 0, min-scale 0, to zero after a stable
 *               window without traffic), plus what drover's parameters
 *               cannot say, modelled here: no scale-down while panicking
 *               and max-scale-down-rate 2;
 *   fixed-peak  constant replicas: the drover scenario's peak;
 *   fixed-mean  constant replicas: its time-weighted mean, rounded up.
 * max_replicas (and the nodepool) are the config's for every scenario.
 * Output is deterministic for a config, trace and seed; --timing adds the
 * simulator's own wall time on stderr (not in the output).
 */
#include "sim/serve.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

#define RAY_TARGET 2
#define RAY_LOOK_BACK_S 30
#define RAY_UPSCALE_DELAY_S 30
#define RAY_DOWNSCALE_DELAY_S 600
#define RAY_METRICS_INTERVAL_S 10.0
#define RAY_MIN_REPLICAS 1
#define KNATIVE_TARGET 70           /* 100 x 0.70 */
#define KNATIVE_STABLE_WINDOW_S 60
#define KNATIVE_PANIC_THRESHOLD 2.0

enum { SC_DROVER, SC_RAY, SC_KNATIVE, SC_FIXED_PEAK, SC_FIXED_MEAN, SC_COUNT };

static const char *const scenario_names[SC_COUNT] = {"drover", "ray-serve", "knative",
                                                     "fixed-peak", "fixed-mean"};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: drover-sim serve --trace TRACE.csv --config STACK.yaml [--seed N]\n"
            "                        [-o table|json] [--timing] [--series FILE.csv]\n"
            "\n"
            "Replays an inference trace (Azure LLM format: TIMESTAMP,ContextTokens,\n"
            "GeneratedTokens) through the gateway's load signal and drover's replica and\n"
            "node autoscalers on a virtual clock, with the config's service-time model,\n"
            "provisioning and model-load delays and prices. Reports GPU-hours, cost, cold\n"
            "starts, TTFT and end-to-end latency (p50/p99), SLO attainment, timeouts and\n"
            "drops for drover's parameters, Ray Serve's and Knative's defaults, and fixed\n"
            "replicas at drover's peak and mean. See examples/sim/serve-stack.yaml.\n"
            "\n"
            "  --seed N   jitter and routing ties (default: the config's sim.seed)\n"
            "  --timing   the simulator's wall time per scenario, on stderr\n"
            "  --series FILE  one CSV row per scenario and minute: replicas ready (low, high),\n"
            "             on their way, queue, the desired count, scale-ups/downs, the arrivals\n"
            "             of the minute and how they missed (TTFT, end to end, timed out or\n"
            "             dropped), the SLO model's need, rate and E[S], the learned cold start\n");
}

static int clamp_max(int v, int max)
{
    return v > max ? max : v;
}

static void make_scenario(const sim_serve_config_t *c, int which, const sim_serve_result_t *drover,
                          sim_serve_scenario_t *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", scenario_names[which]);
    const int max = c->autoscale.max_replicas;
    drv_ras_config_t *r = &s->ras;
    switch (which) {
    case SC_DROVER:
        *r = c->autoscale;
        break;
    case SC_RAY:
        *r = (drv_ras_config_t){.min_replicas = clamp_max(RAY_MIN_REPLICAS, max),
                                .max_replicas = max,
                                .target_concurrency = RAY_TARGET,
                                .traffic_history_seconds = RAY_LOOK_BACK_S,
                                .scale_up_delay_seconds = RAY_UPSCALE_DELAY_S,
                                .scale_down_delay_seconds = RAY_DOWNSCALE_DELAY_S,
                                .scale_to_zero_delay_seconds = RAY_DOWNSCALE_DELAY_S,
                                .panic_factor = 1e12,   /* no burst reaction */
                                .max_scale_up_rate = -1};   /* nor drover's cold-start rule */
        s->sample_interval_s = RAY_METRICS_INTERVAL_S;
        break;
    case SC_KNATIVE:
        *r = (drv_ras_config_t){.min_replicas = 0,
                                .max_replicas = max,
                                .target_concurrency = KNATIVE_TARGET,
                                .traffic_history_seconds = KNATIVE_STABLE_WINDOW_S,
                                .scale_up_delay_seconds = 0,
                                .scale_down_delay_seconds = 0,
                                .scale_to_zero_delay_seconds = KNATIVE_STABLE_WINDOW_S,
                                .panic_factor = KNATIVE_PANIC_THRESHOLD,
                                .max_scale_up_rate = -1};   /* max-scale-up-rate 1000: no cap */
        s->knative_panic = true;
        break;
    case SC_FIXED_PEAK:
        s->fixed = true;
        s->fixed_replicas = drover->peak_replicas > 0 ? drover->peak_replicas : 1;
        break;
    default:
        s->fixed = true;
        /* the mean over the window the results compare (after warm-up) */
        s->fixed_replicas = (int)ceil(drover->mean_replicas_warm - 1e-9);
        if (s->fixed_replicas < 1)
            s->fixed_replicas = 1;
        break;
    }
    char slo[64] = "";
    if (!s->fixed && r->ttft_slo_ms > 0)
        snprintf(slo, sizeof slo, " ttft-slo %dms", r->ttft_slo_ms);
    if (!s->fixed && r->e2e_slo_ms > 0)
        snprintf(slo + strlen(slo), sizeof slo - strlen(slo), " e2e-slo %dms", r->e2e_slo_ms);
    if (s->fixed)
        snprintf(s->params, sizeof s->params, "%d replicas", s->fixed_replicas);
    else
        snprintf(s->params, sizeof s->params,
                 "min %d max %d target %d window %ds up %ds down %ds zero %ds%s%s%s%s",
                 r->min_replicas, r->max_replicas, r->target_concurrency,
                 r->traffic_history_seconds, r->scale_up_delay_seconds,
                 r->scale_down_delay_seconds, r->scale_to_zero_delay_seconds, slo,
                 s->sample_interval_s > 0 ? " sample 10s" : "",
                 s->knative_panic ? " panic 2x/6s" : r->panic_factor > 100 ? " no-burst" : "",
                 r->max_scale_up_rate < 0 ? "" : " cold-start rule");
}

static json_t *real6(double v)
{
    if (!isfinite(v))
        return json_null();
    return json_real(round(v * 1e6) / 1e6);
}

static json_t *scenario_json(const sim_serve_scenario_t *s, const sim_serve_result_t *r)
{
    json_t *o = json_pack("{s:s, s:s}", "name", s->name, "params", s->params);
    if (s->fixed)
        json_object_set_new(o, "fixed_replicas", json_integer(s->fixed_replicas));
    else
        json_object_set_new(
            o, "autoscale",
            json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:o, s:o, s:o, s:b}", "min_replicas",
                      s->ras.min_replicas, "max_replicas", s->ras.max_replicas,
                      "target_concurrency", s->ras.target_concurrency, "traffic_history_seconds",
                      s->ras.traffic_history_seconds, "scale_up_delay_seconds",
                      s->ras.scale_up_delay_seconds, "scale_down_delay_seconds",
                      s->ras.scale_down_delay_seconds, "scale_to_zero_delay_seconds",
                      s->ras.scale_to_zero_delay_seconds, "panic_factor",
                      s->ras.panic_factor > 100 ? json_null()
                                                : real6(s->ras.panic_factor > 0
                                                            ? s->ras.panic_factor
                                                            : DRV_RAS_PANIC_FACTOR),
                      "max_scale_up_rate",
                      s->ras.max_scale_up_rate < 0
                          ? json_null()
                          : json_integer(s->ras.max_scale_up_rate > 0 ? s->ras.max_scale_up_rate
                                                                      : DRV_RAS_SCALE_UP_RATE),
                      "sample_interval_seconds",
                      s->sample_interval_s > 0 ? real6(s->sample_interval_s) : json_null(),
                      "knative_panic_mode", s->knative_panic));
    if (!s->fixed)
        json_object_set_new(json_object_get(o, "autoscale"), "ttft_slo_ms",
                            s->ras.ttft_slo_ms > 0 ? json_integer(s->ras.ttft_slo_ms)
                                                   : json_null());
    if (!s->fixed)
        json_object_set_new(json_object_get(o, "autoscale"), "e2e_slo_ms",
                            s->ras.e2e_slo_ms > 0 ? json_integer(s->ras.e2e_slo_ms)
                                                  : json_null());
    json_object_set_new(o, "gpu_hours", real6(r->gpu_hours));
    json_object_set_new(o, "gpu_hours_after_warmup", real6(r->gpu_hours_warm));
    json_object_set_new(o, "cost_usd", real6(r->cost));
    json_object_set_new(o, "node_hours", real6(r->node_hours));
    json_object_set_new(o, "nodes_created", json_integer(r->nodes_created));
    json_object_set_new(o, "replicas", json_pack("{s:i, s:o, s:o, s:i}", "peak", r->peak_replicas,
                                                 "mean", real6(r->mean_replicas),
                                                 "mean_after_warmup", real6(r->mean_replicas_warm),
                                                 "scale_events", r->scale_events));
    json_object_set_new(o, "cold_starts",
                        json_pack("{s:i, s:o, s:I}", "count", r->cold_starts, "total_delay_s",
                                  real6(r->cold_start_delay_s), "requests_waited",
                                  (json_int_t)r->requests_waited_cold));
    json_object_set_new(o, "latency_s",
                        json_pack("{s:o, s:o, s:o, s:o}", "ttft_p50", real6(r->ttft_p50),
                                  "ttft_p99", real6(r->ttft_p99), "e2e_p50", real6(r->e2e_p50),
                                  "e2e_p99", real6(r->e2e_p99)));
    json_object_set_new(o, "slo_attainment", real6(r->slo_attainment));
    json_object_set_new(o, "slo_attainment_after_warmup", real6(r->slo_attainment_warm));
    json_object_set_new(o, "requests",
                        json_pack("{s:I, s:I, s:I, s:I}", "total", (json_int_t)r->requests,
                                  "completed", (json_int_t)r->completed, "timeouts",
                                  (json_int_t)r->timeouts, "dropped", (json_int_t)r->dropped));
    json_object_set_new(o, "end_s", real6(r->end_s));
    return o;
}

static void print_table(const char *trace, const char *config, const sim_serve_config_t *c,
                        const sim_serve_trace_t *t, const sim_serve_scenario_t *sc,
                        const sim_serve_result_t *res)
{
    printf("trace %s: %zu requests over %.0f s; config %s; seed %llu\n", trace, t->n,
           t->duration_s, config, (unsigned long long)c->seed);
    printf("SLO:");
    if (c->slo_ttft_s > 0)
        printf(" TTFT <= %gs", c->slo_ttft_s);
    if (c->slo_e2e_s > 0)
        printf("%s e2e <= %gs", c->slo_ttft_s > 0 ? " and" : "", c->slo_e2e_s);
    printf("\n\n%-11s %9s %9s %7s %8s %8s %8s %8s %6s %9s %8s %7s %5s %6s\n", "SCENARIO",
           "GPU-HOURS", "COST-USD", "SLO", "TTFT-P50", "TTFT-P99", "E2E-P50", "E2E-P99", "COLD",
           "COLD-WAIT", "TIMEOUTS", "DROPPED", "PEAK", "MEAN");
    for (int i = 0; i < SC_COUNT; i++) {
        const sim_serve_result_t *r = &res[i];
        char lat[4][16];
        const double v[4] = {r->ttft_p50, r->ttft_p99, r->e2e_p50, r->e2e_p99};
        for (int k = 0; k < 4; k++)   /* NAN: no request completed */
            snprintf(lat[k], sizeof lat[k], isfinite(v[k]) ? "%.2fs" : "-", v[k]);
        printf("%-11s %9.2f %9.2f %6.2f%% %8s %8s %8s %8s %6d %8.0fs %8zu %7zu %5d %6.2f\n",
               sc[i].name, r->gpu_hours, r->cost, 100 * r->slo_attainment, lat[0], lat[1],
               lat[2], lat[3], r->cold_starts, r->cold_start_delay_s, r->timeouts, r->dropped,
               r->peak_replicas, r->mean_replicas);
    }
    printf("\n");
    for (int i = 0; i < SC_COUNT; i++)
        printf("%-11s %s\n", sc[i].name, sc[i].params);
}

int sim_serve_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"trace", required_argument, NULL, 't'}, {"config", required_argument, NULL, 'c'},
        {"seed", required_argument, NULL, 's'},  {"output", required_argument, NULL, 'o'},
        {"timing", no_argument, NULL, 'T'},      {"help", no_argument, NULL, 'h'},
        {"series", required_argument, NULL, 'S'},
        {NULL, 0, NULL, 0}};
    const char *trace_path = NULL, *config_path = NULL, *seed_arg = NULL, *series_path = NULL;
    bool json = false, timing = false;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (ch) {
        case 't': trace_path = optarg; break;
        case 'c': config_path = optarg; break;
        case 's': seed_arg = optarg; break;
        case 'T': timing = true; break;
        case 'S': series_path = optarg; break;
        case 'o':
            if (strcmp(optarg, "json") == 0) {
                json = true;
            } else if (strcmp(optarg, "table") != 0) {
                fprintf(stderr, "drover-sim serve: -o takes table or json\n");
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    uint64_t seed = 0;
    if (seed_arg) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(seed_arg, &end, 10);
        if (!*seed_arg || *end || seed_arg[0] == '-' || errno == ERANGE || v > INT64_MAX) {
            fprintf(stderr, "drover-sim serve: --seed takes an integer from 0 to %lld\n",
                    (long long)INT64_MAX);
            return 2;
        }
        seed = v;
    }
    if (optind < argc || !trace_path || !config_path) {
        fprintf(stderr, "drover-sim serve: %s\n",
                optind < argc ? "unexpected argument" : "--trace and --config are required");
        usage(stderr);
        return 2;
    }
    sim_serve_config_t cfg;
    sim_serve_trace_t tr;
    drv_error_t err = {0};
    if (sim_serve_config_load(&cfg, config_path, &err) < 0) {
        fprintf(stderr, "drover-sim serve: %s\n", err.message);
        return 1;
    }
    if (seed_arg)
        cfg.seed = seed;
    if (sim_serve_trace_load(&tr, trace_path, &err) < 0) {
        fprintf(stderr, "drover-sim serve: %s\n", err.message);
        sim_serve_config_free(&cfg);
        return 1;
    }
    sim_serve_scenario_t sc[SC_COUNT];
    sim_serve_result_t res[SC_COUNT];
    int rc = 1;
    FILE *series = NULL;
    if (series_path) {
        series = fopen(series_path, "w");
        if (!series) {
            fprintf(stderr, "drover-sim serve: %s: %s\n", series_path, strerror(errno));
            goto out;
        }
        fprintf(series, "scenario,minute,ready_lo,ready_hi,on_way_hi,queue_hi,desired,ups,downs,"
                        "last_change,arrivals,miss_ttft,miss_e2e,lost,slo_need_hi,lambda,"
                        "mean_service_s,first_p99_s,cold_start_s,held_hi,dispersion\n");
    }
    for (int i = 0; i < SC_COUNT; i++) {
        make_scenario(&cfg, i, &res[SC_DROVER], &sc[i]);
        sc[i].series = series;
        int64_t t0 = sim_now_ns();
        if (sim_serve_run(&cfg, &tr, &sc[i], &res[i], &err) < 0) {
            fprintf(stderr, "drover-sim serve: %s: %s\n", sc[i].name, err.message);
            goto out;
        }
        if (timing)
            fprintf(stderr, "%s: %zu requests simulated in %.1f ms (%.0f s of virtual time)\n",
                    sc[i].name, tr.n, (double)(sim_now_ns() - t0) / 1e6, res[i].end_s);
    }
    if (json) {
        json_t *arr = json_array();
        for (int i = 0; i < SC_COUNT; i++)
            json_array_append_new(arr, scenario_json(&sc[i], &res[i]));
        json_t *o = json_pack(
            "{s:{s:s, s:I, s:o}, s:s, s:I, s:{s:o, s:o}, s:o}", "trace", "path", trace_path,
            "requests", (json_int_t)tr.n, "duration_s", real6(tr.duration_s), "config",
            config_path, "seed", (json_int_t)cfg.seed, "slo", "ttft_seconds",
            cfg.slo_ttft_s > 0 ? real6(cfg.slo_ttft_s) : json_null(), "e2e_seconds",
            cfg.slo_e2e_s > 0 ? real6(cfg.slo_e2e_s) : json_null(), "scenarios", arr);
        size_t flags = JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12);
        char *s = o ? json_dumps(o, flags) : NULL;
        if (!s) {
            fprintf(stderr, "drover-sim serve: out of memory\n");
            json_decref(o);
            goto out;
        }
        printf("%s\n", s);
        free(s);
        json_decref(o);
    } else {
        print_table(trace_path, config_path, &cfg, &tr, sc, res);
    }
    rc = 0;
out:
    if (series && fclose(series) != 0 && rc == 0) {
        fprintf(stderr, "drover-sim serve: %s: %s\n", series_path, strerror(errno));
        rc = 1;
    }
    sim_serve_trace_free(&tr);
    sim_serve_config_free(&cfg);
    return rc;
}
