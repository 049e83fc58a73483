/* cli_catalog.c — the read-only catalog commands: `drover instance-types`
 * (filtered list of instance types with prices) and `drover recommend`
 * (VRAM estimate for a model size and the cheapest instance types that
 * hold it), both thin views over GET /v1/instance-types and
 * GET /v1/recommendations. Numeric flags are checked here, so a typo is a
 * usage error (exit 2) rather than a server refusal.
 */
#include "cli/cli.h"

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

static int run_recommend(drv_cli_t *cli, const drv_cli_args_t *a)
{
    char path[2048];
    drv_error_t err = {0};
    if (!drv_cli_opt(a, "params-b"))
        return drv_cli_usage(a, "--params-b is required (billions of parameters, e.g. 7)");
    int rc = build_query(a, "/v1/recommendations", rec_args, path, sizeof path);
    if (rc)
        return rc;
    json_t *doc = drv_cli_call(cli, "GET", path, NULL, NULL, NULL, &err);
    if (!doc)
        return drv_cli_fail(cli, &err);
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
    {NULL, 0, NULL, NULL},
};

const drv_cli_cmd_t drv_cli_cmd_recommend = {
    .name = "recommend",
    .summary = "estimate a model's GPU memory and list instance types that hold it",
    .usage = "recommend --params-b B [--dtype DTYPE] [--context-tokens N] [--batch N]\n"
             "                 [--layers N] [--kv-heads N] [--head-dim N] [--provider P] [--limit N]",
    .help = "Estimates VRAM as weights + KV cache + runtime overhead, prints the formula\n"
            "with the numbers used, then the cheapest instance types that hold the model\n"
            "with at least 10% headroom (GPUS is GPUs used / GPUs on the type).\n"
            "\nExamples:\n"
            "  drover recommend --params-b 7\n"
            "  drover recommend --params-b 70 --dtype fp8 --context-tokens 32768 --provider aws\n"
            "  drover recommend --params-b 8 -o json | jq '.options[0].instance_type'\n",
    .opts = rec_opts,
    .min_pos = 0,
    .max_pos = 0,
    .run = run_recommend,
};
