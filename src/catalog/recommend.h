/* recommend.h — GPU recommendation for a model's size: estimate the VRAM a
 * model needs (weights + KV cache + runtime overhead) and list the cheapest
 * instance types that hold it with >= 10 % headroom. Pure functions over
 * the immutable catalog. */
#ifndef DRV_RECOMMEND_H
#define DRV_RECOMMEND_H

#include <jansson.h>
#include "catalog/catalog.h"

typedef struct drv_vram_input {
    double params_b;        /* billions of parameters, > 0 */
    const char *dtype;      /* fp32 | bf16 | fp16 | fp8 | int8 | int4 */
    int64_t context_tokens; /* <= 0: default */
    int64_t batch;          /* <= 0: default 1 */
    int64_t layers;         /* <= 0: derived from params_b */
    int64_t kv_heads;       /* <= 0: derived */
    int64_t head_dim;       /* <= 0: derived */
} drv_vram_input_t;

typedef struct drv_vram_estimate {
    double weights_gib, kv_cache_gib, overhead_gib, total_gib;
    int64_t total_mib;
    char formula[512];      /* human-readable, with the numbers used */
} drv_vram_estimate_t;

int drv_vram_estimate(const drv_vram_input_t *in, drv_vram_estimate_t *out, drv_error_t *err);

/* Limits of the inputs (inclusive); beyond them -> 400 naming the field. */
#define DRV_REC_MAX_PARAMS_B 100000.0
#define DRV_REC_MAX_CONTEXT 10000000
#define DRV_REC_MAX_BATCH 4096
#define DRV_REC_MAX_LAYERS 1024
#define DRV_REC_MAX_KV_HEADS 1024
#define DRV_REC_MAX_HEAD_DIM 1024
#define DRV_REC_MAX_LIMIT 100
#define DRV_REC_DEFAULT_CONTEXT 4096
#define DRV_REC_DEFAULT_LIMIT 10

/* Validate *in and copy it to *out with every default filled in: dtype
 * (canonical lower-case name, default fp16), context_tokens, batch and the
 * architecture (layers, kv_heads, head_dim) derived from params_b. */
int drv_vram_resolve(const drv_vram_input_t *in, drv_vram_input_t *out, drv_error_t *err);

/* Full recommendation document for GET /v1/recommendations.
 * provider may be NULL (all providers); limit <= 0 means 10. */
json_t *drv_recommend(const drv_catalog_t *cat, const drv_vram_input_t *in,
                      const char *provider, int limit, drv_error_t *err);

#endif
