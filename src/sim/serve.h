/* serve.h — `drover-sim serve`: an inference trace replayed through the
 * gateway's load signal and drover's replica and node autoscalers
 * (src/autoscale, unchanged) on a virtual clock.
 *
 * Three pieces, one file each:
 *   serve_input.c  the trace (Azure LLM inference CSV: TIMESTAMP,
 *                  ContextTokens, GeneratedTokens; "FILE:LINE: reason" on
 *                  bad input) and the stack config (YAML: SLO, gateway,
 *                  deployment resources and autoscale block, nodepool,
 *                  per-GPU-type service model, provisioning delays, prices);
 *   serve_model.c  one discrete-event run of one scenario (an autoscaler
 *                  parameter set, or a fixed replica count);
 *   serve.c        the command: options, the scenarios (drover's configured
 *                  parameters, Ray Serve's and Knative's defaults, fixed at
 *                  peak and at mean), the table / JSON.
 * Everything is single-threaded and owned by the command's stack; a run
 * is a pure function of (config, trace, scenario, seed).
 */
#ifndef DRV_SIM_SERVE_H
#define DRV_SIM_SERVE_H

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "autoscale/nodes.h"
#include "autoscale/replicas.h"
#include "catalog/catalog.h"
#include "common/error.h"
#include "sched/place.h"

#define SERVE_MAX_GPU_MODELS 16
#define SERVE_MAX_REQUESTS 50000000   /* trace rows accepted */

/* One request of the trace. */
typedef struct sim_serve_req {
    double t;              /* arrival, seconds after the first request */
    int32_t prompt;        /* ContextTokens */
    int32_t gen;           /* GeneratedTokens */
} sim_serve_req_t;

typedef struct sim_serve_trace {
    sim_serve_req_t *r;
    size_t n;
    double duration_s;     /* last arrival - first */
} sim_serve_trace_t;

/* Service-time model of one replica on one GPU type. A request alone
 * takes prompt / prefill_tps to its first token's prefill, then one token
 * per 1 / decode_tps; n requests in flight on a replica each progress at
 * 1 / (1 + batch_slowdown x (n - 1)) of that speed (continuous batching as
 * processor sharing). At most max_concurrency requests run on a replica;
 * the gateway queues the rest. */
typedef struct sim_serve_gpu_model {
    char gpu_type[32];
    double prefill_tps, decode_tps;
    int max_concurrency;
    double batch_slowdown;
    double model_load_s;   /* cold start: placed -> ready */
} sim_serve_gpu_model_t;

typedef struct sim_serve_config {
    json_t *doc;                         /* the YAML document, owned */
    drv_catalog_t *cat;                  /* owned */
    double slo_ttft_s, slo_e2e_s;        /* <= 0: not part of the SLO */
    double timeout_s;                    /* a request queued longer times out */
    int max_queue;                       /* a request arriving to a full queue is dropped */
    drv_sched_request_t replica;         /* what one replica asks for */
    const char *replica_types[SERVE_MAX_GPU_MODELS];
    drv_ras_config_t autoscale;          /* drover's parameters (the config's) */
    drv_nas_config_t nodepool;
    const drv_instance_type_t *types[DRV_NAS_MAX_TYPES];
    double price[DRV_NAS_MAX_TYPES];     /* per hour, per instance type (catalog or config) */
    double provision_s[DRV_NAS_MAX_TYPES];
    sim_serve_gpu_model_t gpus[SERVE_MAX_GPU_MODELS];
    size_t n_gpus;
    double control_interval_s;           /* the controller's pass */
    int initial_replicas;                /* < 0: min_replicas; running (warm) at t = 0 */
    bool initial_wave_timed;             /* the autoscaler timed them as a wave (their model
                                            load), as droverd times a new deployment's */
    double jitter;                       /* provisioning and model load x U[1-j, 1+j] */
    double warmup_s;                     /* slo_attainment_warm counts arrivals after it */
    uint64_t seed;
} sim_serve_config_t;

/* A scenario: the autoscaler with a parameter set, or fixed replicas. */
typedef struct sim_serve_scenario {
    char name[32];
    char params[160];                    /* one line, for the table */
    bool fixed;
    int fixed_replicas;                  /* when fixed */
    drv_ras_config_t ras;                /* when not */
    double sample_interval_s;            /* load samples; 0: each control pass */
    bool knative_panic;                  /* Knative's panic-mode hold and scale-down rate */
    FILE *series;                        /* non-NULL: one CSV row per minute (--series) */
} sim_serve_scenario_t;

typedef struct sim_serve_result {
    size_t requests, completed, timeouts, dropped;
    double ttft_p50, ttft_p99, e2e_p50, e2e_p99;    /* seconds, completed requests */
    double slo_attainment;               /* requests meeting the SLO / all requests */
    double slo_attainment_warm;          /* the same over arrivals after sim.warmup_seconds
                                            (NAN: none): without the first cold starts */
    double gpu_hours, cost, node_hours;
    double gpu_hours_warm;               /* GPU-hours billed after sim.warmup_seconds, until
                                            the last arrival (the same window in every run) */
    int nodes_created, peak_replicas;
    double mean_replicas;                /* time-weighted, live (not draining) */
    double mean_replicas_warm;           /* the same after sim.warmup_seconds (fixed-mean's) */
    int cold_starts;                     /* replicas started after t = 0 */
    double cold_start_delay_s;           /* sum of decision -> ready over them */
    size_t requests_waited_cold;         /* arrived with no ready replica */
    int scale_events;                    /* changes of the desired count */
    double end_s;                        /* the virtual clock at the end */
} sim_serve_result_t;

/* serve_input.c */
int sim_serve_trace_load(sim_serve_trace_t *t, const char *path, drv_error_t *err);
int sim_serve_trace_parse(sim_serve_trace_t *t, const char *buf, size_t len, const char *name,
                          drv_error_t *err);
void sim_serve_trace_free(sim_serve_trace_t *t);
int sim_serve_config_load(sim_serve_config_t *c, const char *path, drv_error_t *err);
void sim_serve_config_free(sim_serve_config_t *c);
const sim_serve_gpu_model_t *sim_serve_gpu_model(const sim_serve_config_t *c, const char *gpu_type);

/* serve_model.c: one run. 0, or -1 with err (out of memory, a decision
 * refused). */
int sim_serve_run(const sim_serve_config_t *c, const sim_serve_trace_t *t,
                  const sim_serve_scenario_t *s, sim_serve_result_t *out, drv_error_t *err);

#endif
