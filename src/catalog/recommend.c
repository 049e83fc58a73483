/* recommend.c — how much GPU memory a model needs, and which instance types
 * of the catalog hold it most cheaply (see recommend.h). Pure functions of
 * their inputs and the immutable catalog; no state, any thread.
 *
 * The estimate:
 *   weights  = params_b * 1e9 * bytes_per_param(dtype)
 *              (fp32 4, bf16/fp16 2, fp8/int8 1, int4 0.5)
 *   kv_cache = 2 (K and V) * layers * kv_heads * head_dim
 *              * context_tokens * batch * kv_bytes
 *              (kv_bytes = 4 for fp32 weights, else 2: quantised weights
 *              still keep an fp16/bf16 KV cache, the serving default)
 *   overhead = max(1 GiB, 10 % of weights)   CUDA context, activations,
 *              allocator slack
 *   total    = weights + kv_cache + overhead
 * Defaults: context 4096 tokens, batch 1, dtype fp16; the architecture,
 * when not given, comes from arch_table below (shapes of real open models of
 * that size, all with grouped-query attention: 8 KV heads of 128).
 *
 * An instance type fits when total * 1.10 <= gpus_used * gpu_memory_mib
 * (10 % headroom, which also covers nominal vs. usable memory), trying one
 * GPU, then tensor parallelism over 2, 4, 8 GPUs of the same machine.
 * A single-GPU fit that needs under half of the GPU is a "fraction": the
 * model can share that GPU with other replicas (design.md §3).
 */
#include "catalog/recommend.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)
#define HEADROOM 1.10
#define FRACTION_BELOW 0.5

typedef struct dtype_info {
    const char *name;
    double bytes_per_param;
    int kv_bytes;
} dtype_info_t;

static const dtype_info_t dtype_table[] = {
    {"fp32", 4.0, 4},
    {"bf16", 2.0, 2},
    {"fp16", 2.0, 2},
    {"fp8", 1.0, 2},
    {"int8", 1.0, 2},
    {"int4", 0.5, 2},
};

/* Architecture by size: the first row with params_b <= max_b. */
typedef struct arch_row {
    double max_b;
    int layers, kv_heads, head_dim;
    const char *like;
} arch_row_t;

static const arch_row_t arch_table[] = {
    {1.0, 28, 8, 128, "Qwen3-0.6B"},
    {2.5, 28, 8, 128, "Qwen3-1.7B"},
    {5.0, 36, 8, 128, "Qwen3-4B"},
    {10.0, 32, 8, 128, "Llama-3.1-8B"},
    {20.0, 40, 8, 128, "Qwen3-14B"},
    {40.0, 64, 8, 128, "Qwen3-32B"},
    {90.0, 80, 8, 128, "Llama-3.1-70B"},
    {150.0, 88, 8, 128, "Mistral-Large-123B"},
    {500.0, 126, 8, 128, "Llama-3.1-405B"},
    {INFINITY, 160, 8, 128, "larger than 500B"},
};

static const dtype_info_t *find_dtype(const char *name)
{
    for (size_t i = 0; i < sizeof dtype_table / sizeof dtype_table[0]; i++)
        if (strcasecmp(dtype_table[i].name, name) == 0)
            return &dtype_table[i];
    return NULL;
}

static const arch_row_t *find_arch(double params_b)
{
    size_t n = sizeof arch_table / sizeof arch_table[0];
    for (size_t i = 0; i < n; i++)
        if (params_b <= arch_table[i].max_b)
            return &arch_table[i];
    return &arch_table[n - 1];
}

/* <= 0: take def; otherwise it must be <= max. */
static int pick(int64_t v, int64_t def, int64_t max, const char *field, int64_t *out,
                drv_error_t *err)
{
    if (v <= 0) {
        *out = def;
        return 0;
    }
    if (v > max)
        return drv_err_invalid(err, field, "%s is %lld, at most %lld is supported", field,
                               (long long)v, (long long)max);
    *out = v;
    return 0;
}

int drv_vram_resolve(const drv_vram_input_t *in, drv_vram_input_t *out, drv_error_t *err)
{
    assert(in && out);
    drv_vram_input_t r = *in;

    if (!isfinite(in->params_b) || in->params_b <= 0 || in->params_b > DRV_REC_MAX_PARAMS_B)
        return drv_err_invalid(err, "params_b",
                               "params_b must be a number of billions of parameters in (0, %g]",
                               DRV_REC_MAX_PARAMS_B);
    const dtype_info_t *dt = find_dtype(in->dtype ? in->dtype : "fp16");
    if (!dt)
        return drv_err_invalid(err, "dtype",
                               "unknown dtype '%s' (expected fp32, bf16, fp16, fp8, int8 or int4)",
                               in->dtype);
    r.dtype = dt->name;
    const arch_row_t *a = find_arch(in->params_b);
    if (pick(in->context_tokens, DRV_REC_DEFAULT_CONTEXT, DRV_REC_MAX_CONTEXT, "context_tokens",
             &r.context_tokens, err) < 0 ||
        pick(in->batch, 1, DRV_REC_MAX_BATCH, "batch", &r.batch, err) < 0 ||
        pick(in->layers, a->layers, DRV_REC_MAX_LAYERS, "layers", &r.layers, err) < 0 ||
        pick(in->kv_heads, a->kv_heads, DRV_REC_MAX_KV_HEADS, "kv_heads", &r.kv_heads, err) < 0 ||
        pick(in->head_dim, a->head_dim, DRV_REC_MAX_HEAD_DIM, "head_dim", &r.head_dim, err) < 0)
        return -1;
    *out = r;
    return 0;
}

int drv_vram_estimate(const drv_vram_input_t *in, drv_vram_estimate_t *out, drv_error_t *err)
{
    assert(in && out);
    drv_vram_input_t r;
    if (drv_vram_resolve(in, &r, err) < 0)
        return -1;
    const dtype_info_t *dt = find_dtype(r.dtype);
    assert(dt);

    /* In double: the largest allowed inputs overflow int64 in bytes. */
    double weights = r.params_b * 1e9 * dt->bytes_per_param;
    double kv = 2.0 * (double)r.layers * (double)r.kv_heads * (double)r.head_dim *
                (double)r.context_tokens * (double)r.batch * dt->kv_bytes;
    double overhead = fmax(GIB, 0.10 * weights);
    double total = weights + kv + overhead;

    memset(out, 0, sizeof *out);
    out->weights_gib = weights / GIB;
    out->kv_cache_gib = kv / GIB;
    out->overhead_gib = overhead / GIB;
    out->total_gib = total / GIB;
    out->total_mib = (int64_t)ceil(total / MIB);
    snprintf(out->formula, sizeof out->formula,
             "weights = %g B params x %g bytes (%s) = %.2f GiB; "
             "kv_cache = 2 x %lld layers x %lld kv_heads x %lld head_dim x %lld tokens x "
             "batch %lld x %d bytes = %.2f GiB; "
             "overhead = max(1 GiB, 10%% of weights) = %.2f GiB; "
             "total = %.2f GiB (%lld MiB); fits where GPU memory >= total x 1.10 = %lld MiB",
             r.params_b, dt->bytes_per_param, dt->name, out->weights_gib, (long long)r.layers,
             (long long)r.kv_heads, (long long)r.head_dim, (long long)r.context_tokens,
             (long long)r.batch, dt->kv_bytes, out->kv_cache_gib, out->overhead_gib,
             out->total_gib, (long long)out->total_mib,
             (long long)ceil((double)out->total_mib * HEADROOM));
    return 0;
}

/* --- recommendation ------------------------------------------------------- */

typedef struct option {
    const drv_instance_type_t *t;
    int gpus_used;
    const char *fit;
    double share;        /* of each used GPU's memory */
    double headroom;     /* percent of the used GPUs' memory left */
} option_t;

static double round_to(double x, double unit)
{
    return round(x / unit) * unit;
}

/* Smallest GPU count (1, 2, 4, 8) of t that holds need_mib with headroom. */
static bool fit_type(const drv_instance_type_t *t, int64_t need_mib, option_t *o)
{
    static const int degrees[] = {1, 2, 4, 8};
    if (t->gpu_count <= 0 || t->gpu_memory_mib <= 0)
        return false;
    for (size_t i = 0; i < sizeof degrees / sizeof degrees[0]; i++) {
        int d = degrees[i];
        if (d > t->gpu_count)
            break;
        double usable = (double)d * (double)t->gpu_memory_mib;
        if ((double)need_mib * HEADROOM > usable)
            continue;
        o->t = t;
        o->gpus_used = d;
        o->share = (double)need_mib / usable;
        o->headroom = (usable - (double)need_mib) / usable * 100.0;
        o->fit = d > 1 ? "tensor_parallel" : o->share < FRACTION_BELOW ? "fraction" : "whole_gpu";
        return true;
    }
    return false;
}

static int option_cmp(const void *a, const void *b)
{
    const option_t *x = a, *y = b;
    if (x->t->price_per_hour != y->t->price_per_hour)
        return x->t->price_per_hour < y->t->price_per_hour ? -1 : 1;
    if (x->gpus_used != y->gpus_used)
        return x->gpus_used < y->gpus_used ? -1 : 1;
    return strcmp(x->t->id, y->t->id);
}

static json_t *option_to_json(const option_t *o)
{
    const drv_instance_type_t *t = o->t;
    json_t *regions = json_array();
    if (!regions)
        return NULL;
    for (size_t i = 0; i < t->n_regions; i++)
        if (json_array_append_new(regions, json_string(t->regions[i])) < 0) {
            json_decref(regions);
            return NULL;
        }
    json_t *spot = t->spot_price_per_hour >= 0 ? json_real(t->spot_price_per_hour) : json_null();
    return json_pack("{s:s, s:s, s:s, s:i, s:i, s:I, s:s, s:f, s:f, s:o, s:f, s:o}",
                     "instance_type", t->id, "provider", t->provider, "gpu_type", t->gpu_type,
                     "gpus_used", o->gpus_used, "gpu_count", t->gpu_count,
                     "gpu_memory_mib", (json_int_t)t->gpu_memory_mib, "fit", o->fit,
                     "share_of_gpu", round_to(o->share, 0.001),
                     "price_per_hour", t->price_per_hour, "spot_price_per_hour", spot,
                     "headroom_percent", round_to(o->headroom, 0.1), "regions", regions);
}

static json_t *input_to_json(const drv_vram_input_t *in, const drv_vram_input_t *r,
                             const char *provider, int limit)
{
    json_t *derived = json_array();
    if (!derived)
        return NULL;
    const struct { const char *name; int64_t given; } fields[] = {
        {"context_tokens", in->context_tokens}, {"batch", in->batch},
        {"layers", in->layers}, {"kv_heads", in->kv_heads}, {"head_dim", in->head_dim},
    };
    if (!in->dtype)
        json_array_append_new(derived, json_string("dtype"));
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].given <= 0)
            json_array_append_new(derived, json_string(fields[i].name));
    return json_pack("{s:f, s:s, s:I, s:I, s:I, s:I, s:I, s:s?, s:i, s:o}",
                     "params_b", r->params_b, "dtype", r->dtype,
                     "context_tokens", (json_int_t)r->context_tokens,
                     "batch", (json_int_t)r->batch, "layers", (json_int_t)r->layers,
                     "kv_heads", (json_int_t)r->kv_heads, "head_dim", (json_int_t)r->head_dim,
                     "provider", provider, "limit", limit, "defaulted", derived);
}

static json_t *estimate_to_json(const drv_vram_estimate_t *e)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:I, s:s}",
                     "weights_gib", round_to(e->weights_gib, 0.01),
                     "kv_cache_gib", round_to(e->kv_cache_gib, 0.01),
                     "overhead_gib", round_to(e->overhead_gib, 0.01),
                     "total_gib", round_to(e->total_gib, 0.01),
                     "total_mib", (json_int_t)e->total_mib, "formula", e->formula);
}

json_t *drv_recommend(const drv_catalog_t *cat, const drv_vram_input_t *in,
                      const char *provider, int limit, drv_error_t *err)
{
    assert(cat && in);
    const drv_instance_type_t **types = NULL;
    option_t *opts = NULL;
    json_t *doc = NULL, *options = NULL;
    drv_vram_input_t r;
    drv_vram_estimate_t est;

    if (provider && !drv_catalog_provider(cat, provider)) {
        drv_err_invalid(err, "provider", "unknown provider '%s'", provider);
        return NULL;
    }
    if (limit <= 0)
        limit = DRV_REC_DEFAULT_LIMIT;
    if (drv_vram_resolve(in, &r, err) < 0 || drv_vram_estimate(in, &est, err) < 0)
        return NULL;

    drv_it_filter_t f = {.provider = provider, .min_gpu_memory_mib = -1, .min_gpus = 1,
                         .max_price_per_hour = -1};
    size_t n = drv_catalog_query(cat, &f, NULL, 0), n_opts = 0;
    types = calloc(n ? n : 1, sizeof *types);
    opts = calloc(n ? n : 1, sizeof *opts);
    if (!types || !opts) {
        drv_err_internal(err, "out of memory");
        goto error;
    }
    drv_catalog_query(cat, &f, types, n);
    for (size_t i = 0; i < n; i++) {
        /* Free declared types (local, self-managed, slurm) would crowd out every
         * priced option; they appear when their provider is asked for. */
        if (!provider && types[i]->price_per_hour <= 0)
            continue;
        if (fit_type(types[i], est.total_mib, &opts[n_opts]))
            n_opts++;
    }
    qsort(opts, n_opts, sizeof *opts, option_cmp);

    options = json_array();
    if (!options)
        goto oom;
    for (size_t i = 0; i < n_opts && i < (size_t)limit; i++)
        if (json_array_append_new(options, option_to_json(&opts[i])) < 0)
            goto oom;
    json_t *notes = json_array();
    if (!notes)
        goto oom;
    if (!provider)
        json_array_append_new(notes, json_string(
            "types without a price (providers local, self-managed and slurm) are listed only "
            "when provider names them"));
    if (n_opts == 0)
        json_array_append_new(notes, json_string(
            "no instance type in the catalog holds this model with 10% headroom"));
    doc = json_pack("{s:o, s:o, s:o, s:I, s:o}", "input", input_to_json(in, &r, provider, limit),
                    "estimate", estimate_to_json(&est), "options", options,
                    "options_total", (json_int_t)n_opts, "notes", notes);
    options = NULL;   /* stolen by json_pack, also on failure */
    if (!doc)
        goto oom;
    free(types);
    free(opts);
    return doc;
oom:
    drv_err_internal(err, "out of memory");
error:
    json_decref(options);
    free(types);
    free(opts);
    return NULL;
}
