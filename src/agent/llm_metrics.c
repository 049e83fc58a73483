/* llm_metrics.c — see llm_metrics.h: a line scanner over Prometheus text
 * (name, optional {labels}, value; comments and other metrics skipped);
 * the names are each server's own, listed in llm_metrics.h. */
#define _GNU_SOURCE
#include "agent/llm_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { RUNNING, WAITING, KV };

static const struct {
    const char *name;
    int what;
} names[] = {
    {"vllm:num_requests_running", RUNNING},
    {"vllm:num_requests_waiting", WAITING},
    {"vllm:gpu_cache_usage_perc", KV},
    {"vllm:kv_cache_usage_perc", KV},
    {"sglang:num_running_reqs", RUNNING},    /* SGLang, with --enable-metrics */
    {"sglang:num_queue_reqs", WAITING},
    {"sglang:token_usage", KV},              /* the KV pool's tokens in use, 0..1 */
    {"tgi_batch_current_size", RUNNING},     /* TGI (no KV-cache gauge) */
    {"tgi_queue_size", WAITING},
    {"llamacpp:requests_processing", RUNNING},   /* llama-server --metrics */
    {"llamacpp:requests_deferred", WAITING},
    /* Triton (its --metrics-port): per model, summed; no running or KV-cache gauge */
    {"nv_inference_pending_request_count", WAITING},
};

bool drv_llm_metrics_parse(const char *text, size_t n, drv_llm_load_t *out)
{
    *out = (drv_llm_load_t){.kv_cache = -1};
    bool any = false;
    for (const char *p = text, *end = text + n; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t len = (size_t)(le - p);
        for (size_t k = 0; len > 0 && p[0] != '#' && k < sizeof names / sizeof names[0]; k++) {
            size_t nl2 = strlen(names[k].name);
            if (len <= nl2 || memcmp(p, names[k].name, nl2) != 0 ||
                (p[nl2] != '{' && p[nl2] != ' ' && p[nl2] != '\t'))
                continue;
            const char *v = p + nl2;
            if (*v == '{') {   /* labels: skip to the closing brace (values may hold '}' quoted) */
                bool quoted = false;
                for (v++; v < le && (quoted || *v != '}'); v++) {
                    if (*v == '\\' && v + 1 < le)
                        v++;
                    else if (*v == '"')
                        quoted = !quoted;
                }
                if (v >= le)
                    break;
                v++;
            }
            char num[64];
            while (v < le && (*v == ' ' || *v == '\t'))
                v++;
            size_t vl = strcspn(v, " \t\r\n");
            if (vl == 0 || vl >= sizeof num || v + vl > le)
                break;
            memcpy(num, v, vl);
            num[vl] = '\0';
            char *e;
            double x = strtod(num, &e);
            if (*e || !isfinite(x) || x < 0)
                break;
            any = true;
            if (names[k].what == RUNNING)
                out->running += x;
            else if (names[k].what == WAITING)
                out->waiting += x;
            else if (x > out->kv_cache)
                out->kv_cache = x > 1 ? 1 : x;
            break;
        }
        p = le + 1;
    }
    return any;
}
