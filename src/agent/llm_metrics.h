/* llm_metrics.h — LLM-aware load (issue 16): what a model server's
 * Prometheus text (its runtime.metrics_path, a preset's) says about its
 * load, read with vLLM's metric names (docs/runtimes.md):
 *   vllm:num_requests_running  requests in the running batch
 *   vllm:num_requests_waiting  requests queued in the server
 *   vllm:gpu_cache_usage_perc  KV-cache usage, 0..1 (vllm:kv_cache_usage_perc
 *                              in newer releases: either is read)
 * Sums over every label set (one per model or engine) for the counts, the
 * largest value for the KV-cache usage. Pure; the supervisor scrapes
 * (replica_metrics.c) and the agent reports it as the replica's `load`. */
#ifndef DRV_LLM_METRICS_H
#define DRV_LLM_METRICS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct drv_llm_load {
    double running, waiting;     /* requests */
    double kv_cache;             /* 0..1; < 0: not reported */
} drv_llm_load_t;

/* Parse n bytes of Prometheus text exposition. true when at least one of
 * the metrics above is there (out filled; the others 0, kv_cache -1). */
bool drv_llm_metrics_parse(const char *text, size_t n, drv_llm_load_t *out);

#endif
