/* cli_catalog.c — the read-only catalog commands: `drover instance-types`
 * (filtered list of instance types with prices) and `drover recommend`
 * (VRAM estimate for a model size and the cheapest instance types that
 * hold it), both thin views over GET /v1/instance-types and
 * GET /v1/recommendations. Numeric flags are checked here, so a typo is a
 * usage error (exit 2) rather than a server refusal.
 */
#include "cli/cli.h"

#include "catalog/presets.h"
#include "common/yaml.h"

#include <stdio.h>
#include <string.h>

/* A flag mapped to a query argument. */
typedef struct qarg {
    const char *flag;
    const char *query;
    char type;           /* 's' string, 'i' integer, 'd' number */
    double min, max;
} qarg_t;

/* Build path?k=v&... from the flags given; 0 or a usage exit code. */
static int build_query(const drv_cli_args_t *a, const char *base, const qarg_t *qs, char *out,
                       size_t n)
{
    snprintf(out, n, "%s", base);
    char sep = '?';
    for (const qarg_t *q = qs; q->flag; q++) {
        const char *v = drv_cli_opt(a, q->flag);
        if (!v)
            continue;
        if (q->type == 'i') {
            long long x = 0;
            if (drv_cli_opt_long(a, q->flag, (long long)q->min, (long long)q->max, &x) < 0)
                return DRV_CLI_USAGE;
        } else if (q->type == 'd') {
            double x = 0;
            if (drv_cli_opt_double(a, q->flag, q->min, q->max, &x) < 0)
                return DRV_CLI_USAGE;
        } else if (!*v) {
            return drv_cli_usage(a, "--%s must not be empty", q->flag);
        }
        size_t len = strlen(out);
        if (len + 2 >= n)
            return drv_cli_usage(a, "arguments too long");
        out[len++] = sep;
        if (drv_cli_pathf(out + len, n - len, "%s=%s", q->query, v) < 0)
            return drv_cli_usage(a, "arguments too long");
        sep = '&';
    }
    return 0;
}

/* ---- instance-types ------------------------------------------------------------ */

static const qarg_t it_args[] = {
    {"provider", "provider", 's', 0, 0},
    {"region", "region", 's', 0, 0},
    {"gpu-type", "gpu_type", 's', 0, 0},
    {"min-gpu-memory", "min_gpu_memory_mib", 'i', 0, 1e9},
    {"min-gpus", "min_gpus", 'i', 0, 1024},
    {"max-price", "max_price_per_hour", 'd', 0, 1e6},
    {NULL, NULL, 0, 0, 0},
};

static int run_instance_types(drv_cli_t *cli, const drv_cli_args_t *a)
{
    char path[2048];
    drv_error_t err = {0};
    int rc = build_query(a, "/v1/instance-types", it_args, path, sizeof path);
    if (rc)
        return rc;
    json_t *items = drv_cli_list(cli, path, &err);
    if (!items)
        return drv_cli_fail(cli, &err);
    rc = drv_cli_print(cli, "instance-types", items, true, false);
    json_decref(items);
    return rc;
}

static const drv_cli_opt_t it_opts[] = {
    {"provider", 'p', "PROVIDER", "only this provider's types (aws, gcp, oracle, vultr, local, ...)"},
    {"region", 'r', "REGION", "only types offered in this region"},
    {"gpu-type", 0, "TYPE", "only this GPU model (L4, A10G, H100, ...; any case)"},
    {"min-gpu-memory", 0, "MIB", "at least this much memory per GPU, in MiB"},
    {"min-gpus", 0, "N", "at least N GPUs"},
    {"max-price", 0, "USD", "on-demand price per hour at most USD"},
    {NULL, 0, NULL, NULL},
};

const drv_cli_cmd_t drv_cli_cmd_instance_types = {
    .name = "instance-types",
    .summary = "list instance types with GPUs and prices, filtered",
    .usage = "instance-types [--provider P] [--region R] [--gpu-type T] [--min-gpu-memory MIB]\n"
             "                      [--min-gpus N] [--max-price USD]",
    .help = "Sorted by on-demand price. Prices are USD per hour; SPOT/H is \"-\" where\n"
            "no spot price is known.\n"
            "\nExamples:\n"
            "  drover instance-types --provider aws --min-gpu-memory 24000\n"
            "  drover instance-types --gpu-type H100 --max-price 100 -o wide\n"
            "  drover instance-types --provider local -o json\n",
    .opts = it_opts,
    .min_pos = 0,
    .max_pos = 0,
    .run = run_instance_types,
};

/* ---- recommend --------------------------------------------------------------------- */

static const qarg_t rec_args[] = {
    {"params-b", "params_b", 'd', 1e-6, 1e6},
    {"dtype", "dtype", 's', 0, 0},
    {"context-tokens", "context_tokens", 'i', 1, 1e9},
    {"batch", "batch", 'i', 1, 1e6},
    {"layers", "layers", 'i', 1, 1e5},
    {"kv-heads", "kv_heads", 'i', 1, 1e5},
    {"head-dim", "head_dim", 'i', 1, 1e5},
    {"provider", "provider", 's', 0, 0},
    {"limit", "limit", 'i', 1, 1000},
    {NULL, NULL, 0, 0, 0},
};

static double num(const json_t *obj, const char *key)
{
    return json_number_value(json_object_get(obj, key));
}

/* --preset: a ready model document for the cheapest option (opt) of doc:
 * {"model": {id, runtime: {preset}, resources: {gpu}, params_b, dtype}} and
 * the instance type to give a nodepool. */
static json_t *preset_model(const char *preset, const char *id, const json_t *doc,
                            const json_t *opt)
{
    const json_t *in = json_object_get(doc, "input");
    json_t *gpu = json_pack("{s:O, s:[O]}", "count", json_object_get(opt, "gpus_used"), "types",
                            json_object_get(opt, "gpu_type"));
    double share = json_number_value(json_object_get(opt, "share_of_gpu"));
    if (json_integer_value(json_object_get(opt, "gpus_used")) == 1 && share > 0 && share < 1)
        json_object_set(gpu, "memory_mib",   /* a share: what the estimate needs */
                        json_object_get(json_object_get(doc, "estimate"), "total_mib"));
    char mid[64];
    if (id)
        snprintf(mid, sizeof mid, "%s", id);
    else   /* vllm-7b, tgi-0-5b */
        for (int k = snprintf(mid, sizeof mid, "%s-%gb", preset,
                              json_number_value(json_object_get(in, "params_b"))), i = 0;
             i < k && i < (int)sizeof mid; i++)
            if (mid[i] == '.')
                mid[i] = '-';
    json_t *model = json_pack("{s:s, s:{s:s}, s:{s:o}, s:O, s:O}", "id", mid, "runtime",
                              "preset", preset, "resources", "gpu", gpu, "params_b",
                              json_object_get(in, "params_b"), "dtype",
                              json_object_get(in, "dtype"));
    return json_pack("{s:o}", "model", model);
}

static int print_preset(drv_cli_t *cli, const char *preset, const char *id, const json_t *doc)
{
    const json_t *opt = json_array_get(json_object_get(doc, "options"), 0);
    if (!opt) {
        fprintf(stderr, "error: no instance type holds this model with 10%% headroom: no model "
                        "to print\n");
        return DRV_CLI_FAIL;
    }
    json_t *m = preset_model(preset, id, doc, opt);
    int rc = DRV_CLI_OK;
    if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML) {
        json_object_set(m, "instance_type", json_object_get(opt, "instance_type"));
        rc = drv_cli_print_doc(cli, m);
    } else {
        drv_error_t err = {0};
        char *y = drv_yaml_dump(m, &err);
        if (!y) {
            json_decref(m);
            return drv_cli_fail(cli, &err);
        }
        printf("# runtime.preset %s (image %s) on instance type %s (%s, %lld x %s):\n"
               "# put it in a nodepool's instance_types, then: drover apply -f THIS_FILE\n%s",
               preset, drv_preset_find(preset)->image,
               json_string_value(json_object_get(opt, "instance_type")),
               json_string_value(json_object_get(opt, "provider")),
               (long long)json_integer_value(json_object_get(opt, "gpus_used")),
               json_string_value(json_object_get(opt, "gpu_type")), y);
        free(y);
    }
    json_decref(m);
    return rc;
}

static int run_recommend(drv_cli_t *cli, const drv_cli_args_t *a)
{
    char path[2048];
    drv_error_t err = {0};
    if (!drv_cli_opt(a, "params-b"))
        return drv_cli_usage(a, "--params-b is required (billions of parameters, e.g. 7)");
    const char *preset = drv_cli_opt(a, "preset"), *id = drv_cli_opt(a, "id");
    if (preset && !drv_preset_find(preset))
        return drv_cli_usage(a, "--preset must be one of vllm, sglang, tgi, llama-cpp, triton, "
                                "ollama (not '%s')", preset);
    if (id && !preset)
        return drv_cli_usage(a, "--id names the model --preset prints; give --preset too");
    if (id && (!*id || strlen(id) > 63 || strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
                                             strlen(id)))
        return drv_cli_usage(a, "--id must be 1..63 of a-z, 0-9 and '-' (a model id)");
    int rc = build_query(a, "/v1/recommendations", rec_args, path, sizeof path);
    if (rc)
        return rc;
    json_t *doc = drv_cli_call(cli, "GET", path, NULL, NULL, NULL, &err);
    if (!doc)
        return drv_cli_fail(cli, &err);
    if (preset) {
        rc = print_preset(cli, preset, id, doc);
        json_decref(doc);
        return rc;
    }
    if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML) {
        rc = drv_cli_print_doc(cli, doc);
        json_decref(doc);
        return rc;
    }
    const json_t *in = json_object_get(doc, "input");
    const json_t *est = json_object_get(doc, "estimate");
    const json_t *opts = json_object_get(doc, "options");
    const char *dtype = json_string_value(json_object_get(in, "dtype"));
    const char *formula = json_string_value(json_object_get(est, "formula"));
    printf("Model:    %gB parameters%s%s\n", json_number_value(json_object_get(in, "params_b")),
           dtype ? ", " : "", dtype ? dtype : "");
    printf("Needs:    %.1f GiB (%" JSON_INTEGER_FORMAT " MiB) = weights %.1f + KV cache %.1f + "
           "overhead %.1f GiB\n",
           num(est, "total_gib"), json_integer_value(json_object_get(est, "total_mib")),
           num(est, "weights_gib"), num(est, "kv_cache_gib"), num(est, "overhead_gib"));
    if (formula)
        printf("Formula:  %s\n", formula);
    if (json_array_size(opts) == 0) {
        fprintf(stderr, "No instance type holds this model with 10%% headroom.\n");
    } else {
        fputc('\n', stdout);
        drv_cli_print_table("recommendations", opts, cli->format == DRV_OUT_WIDE, false);
    }
    json_decref(doc);
    return DRV_CLI_OK;
}

static const drv_cli_opt_t rec_opts[] = {
    {"params-b", 0, "B", "model size in billions of parameters (required)"},
    {"dtype", 0, "DTYPE", "weights type: fp32, bf16, fp16 (default), fp8, int8, int4"},
    {"context-tokens", 0, "N", "context length for the KV cache"},
    {"batch", 0, "N", "concurrent sequences (default 1)"},
    {"layers", 0, "N", "transformer layers (default: derived from the size)"},
    {"kv-heads", 0, "N", "key/value heads (default: derived)"},
    {"head-dim", 0, "N", "head dimension (default: derived)"},
    {"provider", 'p', "PROVIDER", "only this provider's instance types"},
    {"limit", 0, "N", "at most N options (default 10)"},
    {"preset", 0, "SERVER", "print a model YAML for vllm, sglang, tgi, llama-cpp, triton or ollama"},
    {"id", 0, "ID", "the printed model's id (default SERVER-SIZEb)"},
    {NULL, 0, NULL, NULL},
};

const drv_cli_cmd_t drv_cli_cmd_recommend = {
    .name = "recommend",
    .summary = "estimate a model's GPU memory and list instance types that hold it",
    .usage = "recommend --params-b B [--dtype DTYPE] [--context-tokens N] [--batch N]\n"
             "                 [--layers N] [--kv-heads N] [--head-dim N] [--provider P] [--limit N]\n"
             "                 [--preset SERVER [--id ID]]",
    .help = "Estimates VRAM as weights + KV cache + runtime overhead, prints the formula\n"
            "with the numbers used, then the cheapest instance types that hold the model\n"
            "with at least 10% headroom (GPUS is GPUs used / GPUs on the type).\n"
            "With --preset it prints instead a ready model (YAML; -o json: {model,\n"
            "instance_type}) that runs the server's published image on the cheapest option:\n"
            "gpu.count and types from it (a share: gpu.memory_mib the estimate), params_b and\n"
            "dtype; its comment names the instance type for a nodepool.\n"
            "\nExamples:\n"
            "  drover recommend --params-b 7\n"
            "  drover recommend --params-b 70 --dtype fp8 --context-tokens 32768 --provider aws\n"
            "  drover recommend --params-b 8 -o json | jq '.options[0].instance_type'\n"
            "  drover recommend --params-b 8 --provider aws --preset vllm > llama8b.yaml\n",
    .opts = rec_opts,
    .min_pos = 0,
    .max_pos = 0,
    .run = run_recommend,
};
