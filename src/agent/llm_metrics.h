/* llm_metrics.h — LLM-aware load (issue 16): what a model server's
 * Prometheus text (its runtime.metrics_path, a preset's) says about its
 * load, read with each server's own gauge names (docs/runtimes.md):
 *                running                       waiting                      KV cache 0..1
 *   vLLM       vllm:num_requests_running     vllm:num_requests_waiting    vllm:gpu_cache_usage_perc
 *                                                                         (vllm:kv_cache_usage_perc)
 *   SGLang     sglang:num_running_reqs       sglang:num_queue_reqs        sglang:token_usage
 *   TGI        tgi_batch_current_size        tgi_queue_size               -
 *   llama.cpp  llamacpp:requests_processing  llamacpp:requests_deferred   -
 * (Triton's metrics are on a port of their own, off in its preset; Ollama has none.)
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
