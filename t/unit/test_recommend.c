/* test_recommend.c — unit tests of the VRAM estimate and the GPU
 * recommendation (src/catalog/recommend.c) against the embedded catalog:
 * the arithmetic, common-sense fits (0.6B, 7B, 14B, 70B), order, limits,
 * provider filter, input validation, and GET /v1/recommendations
 * (src/api/h_catalog.c) called directly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handlers.h"
#include "catalog/catalog.h"
#include "catalog/recommend.h"
#include "state/head.h"

static int setup(void **state)
{
    drv_error_t e = {0};
    *state = drv_catalog_create_default(&e);
    if (!*state)
        fprintf(stderr, "default catalog: %s\n", e.message);
    return *state ? 0 : -1;
}

static int teardown(void **state)
{
    drv_catalog_destroy(*state);
    return 0;
}

static drv_vram_input_t model(double params_b, const char *dtype)
{
    return (drv_vram_input_t){.params_b = params_b, .dtype = dtype};
}

static json_t *recommend(drv_catalog_t *cat, double params_b, const char *dtype,
                         const char *provider, int limit)
{
    drv_error_t e = {0};
    drv_vram_input_t in = model(params_b, dtype);
    json_t *doc = drv_recommend(cat, &in, provider, limit, &e);
    if (!doc)
        fprintf(stderr, "drv_recommend: %s\n", e.message);
    assert_non_null(doc);
    return doc;
}

static json_t *find_option(json_t *doc, const char *type)
{
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(doc, "options"), i, o)
        if (strcmp(json_string_value(json_object_get(o, "instance_type")), type) == 0)
            return o;
    return NULL;
}

static const char *str(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static double num(json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

/* Every option holds total x 1.10 and the list is in price order. */
static void check_options(json_t *doc)
{
    double need = num(json_object_get(doc, "estimate"), "total_mib") * 1.10;
    double prev = -1;
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(doc, "options"), i, o) {
        double usable = num(o, "gpus_used") * num(o, "gpu_memory_mib");
        assert_true(need <= usable);
        assert_true(num(o, "gpus_used") <= num(o, "gpu_count"));
        assert_true(num(o, "price_per_hour") >= prev);
        prev = num(o, "price_per_hour");
        assert_true(num(o, "headroom_percent") >= 9.0);
        assert_true(json_array_size(json_object_get(o, "regions")) >= 1);
        const char *fit = str(o, "fit");
        double share = num(o, "share_of_gpu");
        if (num(o, "gpus_used") > 1)
            assert_string_equal(fit, "tensor_parallel");
        else if (share < 0.5)
            assert_string_equal(fit, "fraction");
        else
            assert_string_equal(fit, "whole_gpu");
    }
}

/* --- the estimate --------------------------------------------------------- */

static void test_estimate_arithmetic(void **state)
{
    (void)state;
    drv_vram_estimate_t est;
    drv_error_t e;

    /* 7B fp16, derived 32 layers x 8 kv heads x 128, 4096 tokens */
    drv_vram_input_t in = model(7, "fp16");
    assert_int_equal(drv_vram_estimate(&in, &est, &e), 0);
    assert_true(fabs(est.weights_gib - 7e9 * 2 / (1 << 30)) < 1e-9);          /* 13.04 */
    assert_true(fabs(est.kv_cache_gib - 0.5) < 1e-9);   /* 2*32*8*128*4096*2 B */
    assert_true(fabs(est.overhead_gib - est.weights_gib * 0.1) < 1e-9);
    assert_true(fabs(est.total_gib - (est.weights_gib + est.kv_cache_gib + est.overhead_gib)) < 1e-9);
    assert_int_equal(est.total_mib, (int64_t)ceil(est.total_gib * 1024));
    assert_non_null(strstr(est.formula, "weights = 7 B params x 2 bytes (fp16) = 13.04 GiB"));
    assert_non_null(strstr(est.formula, "2 x 32 layers x 8 kv_heads x 128 head_dim x 4096 tokens"));
    assert_non_null(strstr(est.formula, "max(1 GiB, 10% of weights) = 1.30 GiB"));
    assert_non_null(strstr(est.formula, "x 1.10"));

    /* small model: the 1 GiB floor of the overhead */
    in = model(0.6, "bf16");
    assert_int_equal(drv_vram_estimate(&in, &est, &e), 0);
    assert_true(est.overhead_gib == 1.0);
    assert_true(est.total_gib > 2.0 && est.total_gib < 3.0);
    assert_non_null(strstr(est.formula, "(bf16)"));

    /* fp32 keeps an fp32 KV cache; int4 halves int8's weights, same KV */
    in = model(7, "fp32");
    assert_int_equal(drv_vram_estimate(&in, &est, &e), 0);
    assert_true(fabs(est.kv_cache_gib - 1.0) < 1e-9);
    drv_vram_estimate_t i8, i4;
    in = model(7, "int8");
    assert_int_equal(drv_vram_estimate(&in, &i8, &e), 0);
    in = model(7, "INT4");       /* case-insensitive */
    assert_int_equal(drv_vram_estimate(&in, &i4, &e), 0);
    assert_true(fabs(i8.weights_gib - 2 * i4.weights_gib) < 1e-9);
    assert_true(i8.kv_cache_gib == i4.kv_cache_gib);
    assert_non_null(strstr(i4.formula, "(int4)"));

    /* explicit architecture, context and batch */
    in = (drv_vram_input_t){.params_b = 7, .dtype = "fp16", .context_tokens = 32768, .batch = 4,
                            .layers = 28, .kv_heads = 4, .head_dim = 128};
    assert_int_equal(drv_vram_estimate(&in, &est, &e), 0);
    assert_true(fabs(est.kv_cache_gib - 2.0 * 28 * 4 * 128 * 32768 * 4 * 2 / (1 << 30)) < 1e-9);
    assert_non_null(strstr(est.formula, "2 x 28 layers x 4 kv_heads x 128 head_dim x 32768 tokens x batch 4"));

    /* NULL dtype means fp16 */
    drv_vram_input_t r;
    in = model(70, NULL);
    assert_int_equal(drv_vram_resolve(&in, &r, &e), 0);
    assert_string_equal(r.dtype, "fp16");
    assert_int_equal(r.layers, 80);
    assert_int_equal(r.kv_heads, 8);
    assert_int_equal(r.head_dim, 128);
    assert_int_equal(r.context_tokens, 4096);
    assert_int_equal(r.batch, 1);
    in = model(0.6, NULL);
    assert_int_equal(drv_vram_resolve(&in, &r, &e), 0);
    assert_int_equal(r.layers, 28);
    in = model(14, NULL);
    assert_int_equal(drv_vram_resolve(&in, &r, &e), 0);
    assert_int_equal(r.layers, 40);

    /* the largest inputs do not overflow */
    in = (drv_vram_input_t){.params_b = DRV_REC_MAX_PARAMS_B, .dtype = "fp32",
                            .context_tokens = DRV_REC_MAX_CONTEXT, .batch = DRV_REC_MAX_BATCH,
                            .layers = DRV_REC_MAX_LAYERS, .kv_heads = DRV_REC_MAX_KV_HEADS,
                            .head_dim = DRV_REC_MAX_HEAD_DIM};
    assert_int_equal(drv_vram_estimate(&in, &est, &e), 0);
    assert_true(est.total_mib > 0 && isfinite(est.total_gib));
}

static void expect_invalid(drv_vram_input_t in, const char *field)
{
    drv_vram_estimate_t est;
    drv_error_t e;
    drv_err_clear(&e);
    assert_int_equal(drv_vram_estimate(&in, &est, &e), -1);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.code, "invalid_argument");
    assert_string_equal(e.field, field);
}

static void test_estimate_validation(void **state)
{
    (void)state;
    expect_invalid(model(0, "fp16"), "params_b");
    expect_invalid(model(-7, "fp16"), "params_b");
    expect_invalid(model(100001, "fp16"), "params_b");
    expect_invalid(model(NAN, "fp16"), "params_b");
    expect_invalid(model(INFINITY, "fp16"), "params_b");
    expect_invalid(model(7, "fp12"), "dtype");
    expect_invalid(model(7, ""), "dtype");
    drv_vram_input_t in = model(7, "fp16");
    in.context_tokens = DRV_REC_MAX_CONTEXT + 1;
    expect_invalid(in, "context_tokens");
    in = model(7, "fp16");
    in.batch = 1000000;
    expect_invalid(in, "batch");
    in = model(7, "fp16");
    in.layers = 100000;
    expect_invalid(in, "layers");
    in = model(7, "fp16");
    in.kv_heads = 5000;
    expect_invalid(in, "kv_heads");
    in = model(7, "fp16");
    in.head_dim = 1 << 20;
    expect_invalid(in, "head_dim");
    /* a NULL error is allowed */
    drv_vram_estimate_t est;
    in = model(-1, "fp16");
    assert_int_equal(drv_vram_estimate(&in, &est, NULL), -1);
}

/* --- common sense --------------------------------------------------------- */

static void test_small_model_fits_small_gpus_as_fraction(void **state)
{
    json_t *doc = recommend(*state, 0.6, "bf16", NULL, 100);
    check_options(doc);
    static const char *const types[] = {"g4dn.xlarge", "g6.xlarge", "g5.xlarge", "g2-standard-4",
                                        "VM.GPU.A10.1", "g6e.xlarge"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        json_t *o = find_option(doc, types[i]);
        if (!o)
            fprintf(stderr, "no option %s\n", types[i]);
        assert_non_null(o);
        assert_int_equal(json_integer_value(json_object_get(o, "gpus_used")), 1);
        assert_string_equal(str(o, "fit"), "fraction");
        assert_true(num(o, "share_of_gpu") < 0.5);
    }
    /* a 4 GiB vGPU slice holds it as a whole (small) GPU; a 2 GiB one does not */
    json_t *slice = find_option(doc, "vcg-a100-1c-6g-4vram");
    assert_non_null(slice);
    assert_string_equal(str(slice, "fit"), "whole_gpu");
    assert_null(find_option(doc, "vcg-a16-2c-8g-2vram"));
    /* cheapest first: the 4 GiB slice at $0.118-0.123/h leads */
    json_t *first = json_array_get(json_object_get(doc, "options"), 0);
    assert_true(num(first, "price_per_hour") < 0.2);
    /* no free declared types unless asked for, and no CPU-only types ever */
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(doc, "options"), i, o) {
        assert_true(num(o, "price_per_hour") > 0);
        assert_true(num(o, "gpu_count") >= 1);
    }
    json_decref(doc);

    doc = recommend(*state, 0.6, "bf16", "local", 100);
    check_options(doc);
    assert_non_null(find_option(doc, "local-t4"));
    assert_null(find_option(doc, "local-cpu"));
    assert_string_equal(str(find_option(doc, "local-t4"), "fit"), "fraction");
    json_array_foreach(json_object_get(doc, "options"), i, o)
        assert_string_equal(str(o, "provider"), "local");
    json_decref(doc);
}

static void test_7b_fp16_fits_24gb_not_16gb(void **state)
{
    json_t *doc = recommend(*state, 7, "fp16", NULL, 100);
    check_options(doc);
    json_t *l4 = find_option(doc, "g6.xlarge");
    assert_non_null(l4);
    assert_string_equal(str(l4, "fit"), "whole_gpu");
    assert_non_null(find_option(doc, "g5.xlarge"));
    assert_null(find_option(doc, "g4dn.xlarge"));           /* T4 16 GiB: too small */
    assert_null(find_option(doc, "vcg-a16-6c-64g-16vram"));  /* A16 16 GiB: too small */
    json_decref(doc);
}

static void test_14b_fp16_needs_48gb(void **state)
{
    json_t *doc = recommend(*state, 14, "fp16", NULL, 100);
    check_options(doc);
    /* no single 24 GiB GPU holds it */
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(doc, "options"), i, o)
        if (num(o, "gpus_used") == 1)
            assert_true(num(o, "gpu_memory_mib") > 24576);
    assert_null(find_option(doc, "g6.xlarge"));
    assert_null(find_option(doc, "g5.xlarge"));
    assert_null(find_option(doc, "g2-standard-4"));
    assert_null(find_option(doc, "VM.GPU.A10.1"));
    /* an L40S (48 GiB) does */
    json_t *l40s = find_option(doc, "g6e.xlarge");
    assert_non_null(l40s);
    assert_string_equal(str(l40s, "fit"), "whole_gpu");
    assert_int_equal(json_integer_value(json_object_get(l40s, "gpus_used")), 1);
    assert_non_null(find_option(doc, "vcg-l40s-16c-180g-48vram"));
    /* four 24 GiB A10G can split it (tensor parallel over 2) */
    json_t *g5 = find_option(doc, "g5.12xlarge");
    assert_non_null(g5);
    assert_string_equal(str(g5, "fit"), "tensor_parallel");
    assert_int_equal(json_integer_value(json_object_get(g5, "gpus_used")), 2);
    json_decref(doc);

    /* the same with int8 weights fits one 24 GiB GPU */
    doc = recommend(*state, 14, "int8", NULL, 100);
    assert_non_null(find_option(doc, "g6.xlarge"));
    json_decref(doc);
}

static void test_70b_fp16_needs_several_80gb(void **state)
{
    json_t *doc = recommend(*state, 70, "fp16", NULL, 100);
    check_options(doc);
    json_t *est = json_object_get(doc, "estimate");
    assert_true(num(est, "total_gib") > 140 && num(est, "total_gib") < 150);
    size_t i;
    json_t *o;
    assert_true(json_array_size(json_object_get(doc, "options")) >= 4);
    json_array_foreach(json_object_get(doc, "options"), i, o) {
        assert_true(num(o, "gpus_used") >= 2);                 /* no single-GPU option */
        assert_string_equal(str(o, "fit"), "tensor_parallel");
        if (num(o, "gpu_memory_mib") >= 81920)
            assert_int_equal((int)num(o, "gpus_used"), 2);     /* two 80 GB GPUs suffice */
        assert_true(num(o, "gpu_memory_mib") >= 40960);        /* 24 GiB GPUs never reach it */
    }
    assert_null(find_option(doc, "a2-ultragpu-1g"));
    assert_null(find_option(doc, "a3-highgpu-1g"));
    assert_null(find_option(doc, "vcg-a100-12c-120g-80vram"));
    assert_null(find_option(doc, "g5.12xlarge"));
    json_t *p4de = find_option(doc, "p4de.24xlarge");
    assert_non_null(p4de);
    assert_int_equal(json_integer_value(json_object_get(p4de, "gpus_used")), 2);
    json_t *p4d = find_option(doc, "p4d.24xlarge");           /* 40 GB A100s: four */
    assert_non_null(p4d);
    assert_int_equal(json_integer_value(json_object_get(p4d, "gpus_used")), 4);
    json_decref(doc);

    /* per provider, the cheapest holds two 80 GB GPUs (gcp: the 2-GPU A3, elsewhere two of
     * an 8-GPU machine) */
    static const struct { const char *provider, *type; } cheapest[] = {
        {"gcp", "a3-highgpu-2g"}, {"oracle", "BM.GPU.A100-v2.8"}, {"local", "local-a100x2"},
    };
    for (size_t k = 0; k < sizeof cheapest / sizeof cheapest[0]; k++) {
        doc = recommend(*state, 70, "fp16", cheapest[k].provider, 5);
        check_options(doc);
        json_t *first = json_array_get(json_object_get(doc, "options"), 0);
        assert_non_null(first);
        assert_string_equal(str(first, "instance_type"), cheapest[k].type);
        assert_int_equal(json_integer_value(json_object_get(first, "gpus_used")), 2);
        assert_int_equal(json_integer_value(json_object_get(first, "gpu_memory_mib")), 81920);
        json_decref(doc);
    }

    /* int4 70B fits one 80 GB GPU */
    doc = recommend(*state, 70, "int4", NULL, 100);
    json_t *h100 = find_option(doc, "a3-highgpu-1g");
    assert_non_null(h100);
    assert_int_equal(json_integer_value(json_object_get(h100, "gpus_used")), 1);
    json_decref(doc);
}

static void test_nothing_fits(void **state)
{
    json_t *doc = recommend(*state, 2000, "fp32", NULL, 10);
    assert_int_equal(json_array_size(json_object_get(doc, "options")), 0);
    assert_int_equal(json_integer_value(json_object_get(doc, "options_total")), 0);
    assert_true(json_array_size(json_object_get(doc, "notes")) >= 1);
    json_decref(doc);
}

/* --- the document: order, limit, echo, provider filter -------------------- */

static void test_document_shape(void **state)
{
    json_t *doc = recommend(*state, 7, "bf16", NULL, 0);       /* limit 0 -> 10 */
    json_t *opts = json_object_get(doc, "options");
    assert_int_equal(json_array_size(opts), 10);
    assert_true(json_integer_value(json_object_get(doc, "options_total")) > 10);
    check_options(doc);

    json_t *in = json_object_get(doc, "input");
    assert_true(num(in, "params_b") == 7);
    assert_string_equal(str(in, "dtype"), "bf16");
    assert_int_equal(json_integer_value(json_object_get(in, "context_tokens")), 4096);
    assert_int_equal(json_integer_value(json_object_get(in, "batch")), 1);
    assert_int_equal(json_integer_value(json_object_get(in, "layers")), 32);
    assert_int_equal(json_integer_value(json_object_get(in, "limit")), 10);
    assert_true(json_is_null(json_object_get(in, "provider")));
    assert_int_equal(json_array_size(json_object_get(in, "defaulted")), 5);

    json_t *est = json_object_get(doc, "estimate");
    static const char *const keys[] = {"weights_gib", "kv_cache_gib", "overhead_gib", "total_gib",
                                       "total_mib", "formula"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_non_null(json_object_get(est, keys[i]));
    assert_non_null(strstr(str(est, "formula"), "kv_cache = 2 x 32 layers"));

    static const char *const okeys[] = {"instance_type", "provider", "gpu_type", "gpus_used",
                                        "gpu_count", "gpu_memory_mib", "fit", "share_of_gpu",
                                        "price_per_hour", "spot_price_per_hour",
                                        "headroom_percent", "regions"};
    json_t *o = json_array_get(opts, 0);
    for (size_t i = 0; i < sizeof okeys / sizeof okeys[0]; i++)
        assert_non_null(json_object_get(o, okeys[i]));
    json_decref(doc);

    /* limit, provider filter, and a provider without spot has null spot prices */
    doc = recommend(*state, 7, "fp16", "vultr", 3);
    opts = json_object_get(doc, "options");
    assert_int_equal(json_array_size(opts), 3);
    size_t i;
    json_array_foreach(opts, i, o) {
        assert_string_equal(str(o, "provider"), "vultr");
        assert_true(json_is_null(json_object_get(o, "spot_price_per_hour")));
    }
    assert_string_equal(str(json_object_get(doc, "input"), "provider"), "vultr");
    json_decref(doc);

    /* explicit architecture is echoed and not listed as defaulted */
    drv_vram_input_t vin = {.params_b = 8, .dtype = "fp8", .context_tokens = 131072, .batch = 2,
                            .layers = 36, .kv_heads = 8, .head_dim = 128};
    drv_error_t e;
    doc = drv_recommend(*state, &vin, "aws", 5, &e);
    assert_non_null(doc);
    in = json_object_get(doc, "input");
    assert_int_equal(json_integer_value(json_object_get(in, "layers")), 36);
    assert_int_equal(json_integer_value(json_object_get(in, "context_tokens")), 131072);
    assert_int_equal(json_array_size(json_object_get(in, "defaulted")), 0);
    json_decref(doc);

    /* an unknown provider and bad input: 400 naming the field */
    vin = model(7, "fp16");
    drv_err_clear(&e);
    assert_null(drv_recommend(*state, &vin, "azure", 5, &e));
    assert_int_equal(e.status, 400);
    assert_string_equal(e.field, "provider");
    vin = model(7, "q3");
    assert_null(drv_recommend(*state, &vin, NULL, 5, &e));
    assert_string_equal(e.field, "dtype");
}

/* --- GET /v1/recommendations ---------------------------------------------- */

static int call(drv_catalog_t *cat, const char *const *kv, json_t **doc)
{
    static drv_head_t head;
    drv_req_t req = {.method = "GET", .path = "/v1/recommendations", .head = &head};
    drv_resp_t resp = {0};
    char keys[DRV_MAX_QUERY][64];
    head.catalog = cat;
    for (size_t i = 0; kv[i]; i++) {
        const char *eq = strchr(kv[i], '=');
        snprintf(keys[i], sizeof keys[i], "%.*s", (int)(eq - kv[i]), kv[i]);
        req.query[req.n_query++] = (drv_kv_t){keys[i], eq + 1};
    }
    assert_int_equal(drv_h_recommendations(&req, &resp), 0);
    *doc = json_loadb(resp.body, resp.len, 0, NULL);
    assert_non_null(*doc);
    int status = resp.status;
    drv_resp_free(&resp);
    return status;
}

static void test_handler(void **state)
{
    json_t *doc;
    assert_int_equal(call(*state, (const char *[]){"params_b=14", "provider=aws", "limit=2",
                                                  NULL}, &doc), 200);
    assert_int_equal(json_array_size(json_object_get(doc, "options")), 2);
    assert_string_equal(str(json_object_get(doc, "input"), "dtype"), "fp16");
    assert_string_equal(str(json_array_get(json_object_get(doc, "options"), 0), "instance_type"),
                        "g6e.xlarge");
    json_decref(doc);

    assert_int_equal(call(*state, (const char *[]){"params_b=7", "dtype=int4", "context_tokens=8192",
                                                  "batch=2", "layers=32", "kv_heads=8",
                                                  "head_dim=128", NULL}, &doc), 200);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "input"),
                                                        "context_tokens")), 8192);
    json_decref(doc);

    static const struct { const char *q, *field; } bad[] = {
        {"dtype=fp16", "params_b"},        /* params_b missing */
        {"params_b=0", "params_b"},        {"params_b=-3", "params_b"},
        {"params_b=abc", "params_b"},      {"params_b=100001", "params_b"},
        {"params_b=7&dtype=fp7", "dtype"}, {"params_b=7&context_tokens=10000001", "context_tokens"},
        {"params_b=7&batch=0", "batch"},   {"params_b=7&layers=x", "layers"},
        {"params_b=7&limit=1000", "limit"}, {"params_b=7&provider=azure", "provider"},
        {"params_b=7&color=blue", "color"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[128], *save = NULL;
        const char *kv[4] = {0};
        size_t n = 0;
        snprintf(buf, sizeof buf, "%s", bad[i].q);
        for (char *t = strtok_r(buf, "&", &save); t && n < 3; t = strtok_r(NULL, "&", &save))
            kv[n++] = t;
        assert_int_equal(call(*state, kv, &doc), 400);
        json_t *err = json_object_get(doc, "error");
        if (strcmp(str(err, "field"), bad[i].field) != 0)
            fprintf(stderr, "%s: field %s, message %s\n", bad[i].q, str(err, "field"),
                    str(err, "message"));
        assert_string_equal(str(err, "field"), bad[i].field);
        assert_string_equal(str(err, "code"), "invalid_argument");
        json_decref(doc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimate_arithmetic),
        cmocka_unit_test(test_estimate_validation),
        cmocka_unit_test_setup_teardown(test_small_model_fits_small_gpus_as_fraction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_7b_fp16_fits_24gb_not_16gb, setup, teardown),
        cmocka_unit_test_setup_teardown(test_14b_fp16_needs_48gb, setup, teardown),
        cmocka_unit_test_setup_teardown(test_70b_fp16_needs_several_80gb, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nothing_fits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_document_shape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handler, setup, teardown),
    };
    return cmocka_run_group_tests_name("recommend", tests, NULL, NULL);
}
