/* serve_input.c — `drover-sim serve`'s inputs, read strictly.
 *
 * The trace: the Azure LLM inference trace as published (Azure Public
 * Dataset, AzureLLMInferenceTrace_{conv,code}.csv): a header naming
 * TIMESTAMP, ContextTokens and GeneratedTokens (any order, other columns
 * ignored), then one request per line: "YYYY-MM-DD HH:MM:SS[.fraction]",
 * and two non-negative integers. Arrivals must not go backwards. Anything
 * else is refused with "FILE:LINE: reason". Blank lines and CRLF are fine.
 *
 * The config: one YAML document (examples/sim/serve-stack.yaml documents every
 * field). Syntax errors carry the line (common/yaml.c); unknown fields,
 * wrong types and values out of range are refused with "FILE: field.path:
 * reason". The deployment's autoscale block and the nodepool are read by
 * the autoscalers' own config readers (drv_ras_config_from_json,
 * drv_nas_config_from_json), after the field and type checks here.
 */
#include "sim/serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/yaml.h"
#include "sim/trace.h"

/* --- the trace --------------------------------------------------------------------------- */

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int digits(const char *s, size_t n, int64_t *out)
{
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* "2023-11-16 18:15:46.6805900" -> seconds since the epoch; -1 when not. */
static int parse_timestamp(const char *s, size_t n, double *out)
{
    int64_t y, mo, d, h, mi, se;
    if (n < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' ||
        s[16] != ':')
        return -1;
    if (digits(s, 4, &y) < 0 || digits(s + 5, 2, &mo) < 0 || digits(s + 8, 2, &d) < 0 ||
        digits(s + 11, 2, &h) < 0 || digits(s + 14, 2, &mi) < 0 || digits(s + 17, 2, &se) < 0)
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
        return -1;
    double frac = 0, scale = 0.1;
    if (n > 19) {
        if (s[19] != '.' || n == 20 || n > 32)
            return -1;
        for (size_t i = 20; i < n; i++, scale /= 10) {
            if (s[i] < '0' || s[i] > '9')
                return -1;
            frac += (s[i] - '0') * scale;
        }
    }
    *out = (double)(days_from_civil(y, (int)mo, (int)d) * 86400 + h * 3600 + mi * 60 + se) + frac;
    return 0;
}

static int parse_count(const char *s, size_t n, int32_t *out)
{
    int64_t v;
    if (n == 0 || n > 9 || digits(s, n, &v) < 0)
        return -1;
    *out = (int32_t)v;
    return 0;
}

#define TRACE_FIELDS 16

/* Split one line (without its end) on commas; -1 when more than max. */
static int split(const char *s, size_t n, const char **f, size_t *fl, int max)
{
    int k = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == ',') {
            if (k == max)
                return -1;
            f[k] = s + start;
            fl[k] = i - start;
            k++;
            start = i + 1;
        }
    }
    return k;
}

int sim_serve_trace_parse(sim_serve_trace_t *t, const char *buf, size_t len, const char *name,
                          drv_error_t *err)
{
    memset(t, 0, sizeof *t);
    size_t cap = 0, line = 0, pos = 0;
    int col_ts = -1, col_ctx = -1, col_gen = -1, n_cols = 0;
    double first = 0, prev = 0;
    while (pos < len) {
        const char *s = buf + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        pos += n + 1;
        line++;
        if (n > 0 && s[n - 1] == '\r')
            n--;
        if (memchr(s, '\0', n)) {
            drv_err_invalid(err, "", "%s:%zu: NUL byte", name, line);
            goto error;
        }
        if (n == 0)
            continue;
        const char *f[TRACE_FIELDS];
        size_t fl[TRACE_FIELDS];
        int k = split(s, n, f, fl, TRACE_FIELDS);
        if (n_cols == 0) {   /* the header */
            if (k < 0) {
                drv_err_invalid(err, "", "%s:%zu: more than %d columns", name, line, TRACE_FIELDS);
                goto error;
            }
            for (int i = 0; i < k; i++) {
                int *col = fl[i] == 9 && memcmp(f[i], "TIMESTAMP", 9) == 0        ? &col_ts
                           : fl[i] == 13 && memcmp(f[i], "ContextTokens", 13) == 0 ? &col_ctx
                           : fl[i] == 15 && memcmp(f[i], "GeneratedTokens", 15) == 0 ? &col_gen
                                                                                     : NULL;
                if (col && *col >= 0) {
                    drv_err_invalid(err, "", "%s:%zu: column '%.*s' twice", name, line, (int)fl[i],
                                    f[i]);
                    goto error;
                }
                if (col)
                    *col = i;
            }
            const char *missing = col_ts < 0 ? "TIMESTAMP" : col_ctx < 0 ? "ContextTokens"
                                  : col_gen < 0 ? "GeneratedTokens" : NULL;
            if (missing) {
                drv_err_invalid(err, "", "%s:%zu: header has no column '%s'", name, line, missing);
                goto error;
            }
            n_cols = k;
            continue;
        }
        if (k != n_cols) {
            if (k < 0)
                drv_err_invalid(err, "", "%s:%zu: more than %d fields, the header has %d", name,
                                line, TRACE_FIELDS, n_cols);
            else
                drv_err_invalid(err, "", "%s:%zu: %d fields, the header has %d", name, line, k,
                                n_cols);
            goto error;
        }
        sim_serve_req_t r;
        double ts;
        if (parse_timestamp(f[col_ts], fl[col_ts], &ts) < 0) {
            drv_err_invalid(err, "", "%s:%zu: TIMESTAMP '%.*s' is not YYYY-MM-DD HH:MM:SS[.frac]",
                            name, line, (int)(fl[col_ts] > 40 ? 40 : fl[col_ts]), f[col_ts]);
            goto error;
        }
        if (parse_count(f[col_ctx], fl[col_ctx], &r.prompt) < 0 ||
            parse_count(f[col_gen], fl[col_gen], &r.gen) < 0) {
            int bad = parse_count(f[col_ctx], fl[col_ctx], &r.prompt) < 0 ? col_ctx : col_gen;
            drv_err_invalid(err, "", "%s:%zu: %s '%.*s' is not a non-negative integer (< 10^9)",
                            name, line, bad == col_ctx ? "ContextTokens" : "GeneratedTokens",
                            (int)(fl[bad] > 40 ? 40 : fl[bad]), f[bad]);
            goto error;
        }
        if (t->n == 0)
            first = prev = ts;
        if (ts < prev) {
            drv_err_invalid(err, "", "%s:%zu: TIMESTAMP goes backwards (%.3f s before line %zu's)",
                            name, line, prev - ts, line - 1);
            goto error;
        }
        prev = ts;
        if (t->n == SERVE_MAX_REQUESTS) {
            drv_err_invalid(err, "", "%s:%zu: more than %d requests", name, line,
                            SERVE_MAX_REQUESTS);
            goto error;
        }
        if (t->n == cap) {
            size_t nc = cap ? cap * 2 : 1024;
            sim_serve_req_t *v = realloc(t->r, nc * sizeof *v);
            if (!v) {
                drv_err_internal(err, "%s: out of memory", name);
                goto error;
            }
            t->r = v;
            cap = nc;
        }
        r.t = ts - first;
        t->r[t->n++] = r;
    }
    if (n_cols == 0) {
        drv_err_invalid(err, "", "%s:1: empty file", name);
        goto error;
    }
    if (t->n == 0) {
        drv_err_invalid(err, "", "%s:%zu: no requests after the header", name, line);
        goto error;
    }
    t->duration_s = t->r[t->n - 1].t;
    return 0;
error:
    sim_serve_trace_free(t);
    return -1;
}

int sim_serve_trace_load(sim_serve_trace_t *t, const char *path, drv_error_t *err)
{
    size_t len;
    memset(t, 0, sizeof *t);
    char *buf = drv_trace_read_file(path, &len, err);
    if (!buf)
        return -1;
    int rc = sim_serve_trace_parse(t, buf, len, path, err);
    free(buf);
    return rc;
}

void sim_serve_trace_free(sim_serve_trace_t *t)
{
    if (!t)
        return;
    free(t->r);
    memset(t, 0, sizeof *t);
}

/* --- the config ------------------------------------------------------------------------- */

/* Fields of each section; NULL-terminated. */
static const char *const k_top[] = {"slo", "gateway", "deployment", "nodepool", "provisioning",
                                    "prices", "gpus", "sim", NULL};
static const char *const k_slo[] = {"ttft_seconds", "e2e_seconds", NULL};
static const char *const k_gateway[] = {"request_timeout_seconds", "max_queue", NULL};
static const char *const k_deployment[] = {"resources", "autoscale", NULL};
static const char *const k_resources[] = {"gpu_count", "gpu_memory_mib", "compute_percent",
                                          "cpu_millis", "memory_mib", "gpu_types", NULL};
static const char *const k_autoscale[] = {"min_replicas", "max_replicas", "target_concurrency",
                                          "traffic_history_seconds", "scale_up_delay_seconds",
                                          "scale_down_delay_seconds",
                                          "scale_to_zero_delay_seconds", "max_scale_up_rate",
                                          "ttft_slo_ms", "e2e_slo_ms", NULL};
static const char *const k_nodepool[] = {"instance_types", "capacity_type", "min_nodes",
                                         "max_nodes", "node_scale_down_delay_seconds", NULL};
static const char *const k_provisioning[] = {"default_seconds", "per_type", NULL};
static const char *const k_gpu[] = {"prefill_tokens_per_second", "decode_tokens_per_second",
                                    "max_concurrency", "batch_slowdown", "model_load_seconds",
                                    NULL};
static const char *const k_sim[] = {"control_interval_seconds", "initial_replicas",
                                    "initial_wave_timed", "jitter", "seed", "warmup_seconds",
                                    NULL};

/* `o` (may be NULL: absent) must be a mapping whose keys are all in `allowed`. */
static int check_keys(const json_t *o, const char *path, const char *const *allowed,
                      drv_error_t *err)
{
    if (!o || json_is_null(o))   /* absent or empty: the defaults */
        return 0;
    if (!json_is_object(o))
        return drv_err_invalid(err, path, "%s: must be a mapping", path);
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        bool ok = false;
        for (size_t i = 0; allowed && allowed[i] && !ok; i++)
            ok = strcmp(k, allowed[i]) == 0;
        if (!ok)
            return drv_err_invalid(err, path, "%s%s%s: unknown field", path, *path ? "." : "", k);
    }
    return 0;
}

/* A number field in [lo, hi] (absent: dflt). */
static int num(const json_t *o, const char *path, const char *key, double dflt, double lo,
               double hi, double *out, drv_error_t *err)
{
    const json_t *v = o ? json_object_get(o, key) : NULL;
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < lo ||
        json_number_value(v) > hi)
        return drv_err_invalid(err, key, "%s.%s: must be a number in [%g, %g]", path, key, lo, hi);
    *out = json_number_value(v);
    return 0;
}

/* An integer field in [lo, hi] (absent: dflt). */
static int integer(const json_t *o, const char *path, const char *key, int64_t dflt, int64_t lo,
                   int64_t hi, int64_t *out, drv_error_t *err)
{
    const json_t *v = o ? json_object_get(o, key) : NULL;
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return drv_err_invalid(err, key, "%s.%s: must be an integer in [%lld, %lld]", path, key,
                               (long long)lo, (long long)hi);
    *out = json_integer_value(v);
    return 0;
}

/* A boolean field (absent: dflt). */
static int boolean(const json_t *o, const char *path, const char *key, bool dflt, bool *out,
                   drv_error_t *err)
{
    const json_t *v = o ? json_object_get(o, key) : NULL;
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!json_is_boolean(v))
        return drv_err_invalid(err, key, "%s.%s: must be true or false", path, key);
    *out = json_is_true(v);
    return 0;
}

/* Every present field of a section an integer (for the autoscalers' readers,
 * which take defaults for anything else). */
static int all_integers(const json_t *o, const char *path, const char *const *keys,
                        const char *except, drv_error_t *err)
{
    for (size_t i = 0; keys[i]; i++) {
        const json_t *v = o ? json_object_get(o, keys[i]) : NULL;
        if (v && (!except || strcmp(keys[i], except) != 0) && !json_is_integer(v))
            return drv_err_invalid(err, keys[i], "%s.%s: must be an integer", path, keys[i]);
    }
    return 0;
}

static int read_gpus(sim_serve_config_t *c, const json_t *gpus, drv_error_t *err)
{
    if (!json_is_object(gpus) || json_object_size(gpus) == 0)
        return drv_err_invalid(err, "gpus",
                               "gpus: a mapping GPU type -> service model is required");
    const char *k;
    const json_t *g;
    json_object_foreach((json_t *)gpus, k, g) {
        if (c->n_gpus == SERVE_MAX_GPU_MODELS)
            return drv_err_invalid(err, "gpus", "gpus: at most %d GPU types", SERVE_MAX_GPU_MODELS);
        sim_serve_gpu_model_t *m = &c->gpus[c->n_gpus++];
        char path[96];
        snprintf(path, sizeof path, "gpus.%s", k);
        if (strlen(k) >= sizeof m->gpu_type || !*k)
            return drv_err_invalid(err, "gpus", "%s: GPU type name too long", path);
        snprintf(m->gpu_type, sizeof m->gpu_type, "%s", k);
        int64_t mc = 0;   /* set by integer(); 0 only quiets -Wmaybe-uninitialized */
        if (check_keys(g, path, k_gpu, err) < 0 || !g ||
            num(g, path, "prefill_tokens_per_second", NAN, 1e-3, 1e9, &m->prefill_tps, err) < 0 ||
            num(g, path, "decode_tokens_per_second", NAN, 1e-3, 1e9, &m->decode_tps, err) < 0 ||
            integer(g, path, "max_concurrency", 1, 1, 4096, &mc, err) < 0 ||
            num(g, path, "batch_slowdown", 0, 0, 100, &m->batch_slowdown, err) < 0 ||
            num(g, path, "model_load_seconds", 60, 0, 86400, &m->model_load_s, err) < 0)
            return -1;
        if (isnan(m->prefill_tps) || isnan(m->decode_tps))
            return drv_err_invalid(err, "gpus", "%s: prefill_tokens_per_second and "
                                   "decode_tokens_per_second are required", path);
        m->max_concurrency = (int)mc;
    }
    return 0;
}

/* Every key of o (a per-type mapping) is an instance type of the nodepool. */
static int only_pool_types(const sim_serve_config_t *c, const json_t *o, const char *path,
                           drv_error_t *err)
{
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        size_t i = 0;
        while (i < c->nodepool.n_types && strcmp(c->types[i]->id, k) != 0)
            i++;
        if (i == c->nodepool.n_types)
            return drv_err_invalid(err, path, "%s.%s: not an instance type of the nodepool", path,
                                   k);
    }
    return 0;
}

static int read_types(sim_serve_config_t *c, const json_t *np, const json_t *prov,
                      const json_t *prices, drv_error_t *err)
{
    if (!np)
        return drv_err_invalid(err, "nodepool", "nodepool: required");
    if (check_keys(np, "nodepool", k_nodepool, err) < 0 ||
        all_integers(np, "nodepool", k_nodepool + 2, NULL, err) < 0)
        return -1;
    if (drv_nas_config_from_json(np, c->cat, c->types, DRV_NAS_MAX_TYPES, &c->nodepool, err) < 0) {
        drv_err_prefix(err, "nodepool");
        return -1;
    }
    double dflt;
    const json_t *per = prov ? json_object_get(prov, "per_type") : NULL;
    if (check_keys(prov, "provisioning", k_provisioning, err) < 0 ||
        num(prov, "provisioning", "default_seconds", 120, 0, 86400, &dflt, err) < 0)
        return -1;
    if (per && !json_is_object(per))
        return drv_err_invalid(err, "per_type", "provisioning.per_type: must be a mapping");
    if (prices && !json_is_object(prices))
        return drv_err_invalid(err, "prices", "prices: must be a mapping");
    if (only_pool_types(c, per, "provisioning.per_type", err) < 0 ||
        only_pool_types(c, prices, "prices", err) < 0)
        return -1;
    for (size_t i = 0; i < c->nodepool.n_types; i++) {
        const drv_instance_type_t *t = c->types[i];
        if (num(per, "provisioning.per_type", t->id, dflt, 0, 86400, &c->provision_s[i], err) < 0 ||
            num(prices, "prices", t->id, t->price_per_hour, 0, 1e6, &c->price[i], err) < 0)
            return -1;
        if (t->gpu_count < 1)
            return drv_err_invalid(err, "instance_types", "nodepool: %s has no GPU", t->id);
        if (!sim_serve_gpu_model(c, t->gpu_type))
            return drv_err_invalid(err, "gpus", "gpus: no service model for %s (the GPU of %s)",
                                   t->gpu_type, t->id);
    }
    return 0;
}

static int read_deployment(sim_serve_config_t *c, const json_t *d, drv_error_t *err)
{
    const json_t *res = d ? json_object_get(d, "resources") : NULL;
    const json_t *as = d ? json_object_get(d, "autoscale") : NULL;
    int64_t gc = 0, mem = 0, cp = 0, cpu = 0, rmem = 0;   /* set by integer() */
    if (check_keys(d, "deployment", k_deployment, err) < 0 ||
        check_keys(res, "deployment.resources", k_resources, err) < 0 ||
        check_keys(as, "deployment.autoscale", k_autoscale, err) < 0 ||
        all_integers(as, "deployment.autoscale", k_autoscale, NULL, err) < 0 ||
        integer(res, "deployment.resources", "gpu_count", 1, 1, 8, &gc, err) < 0 ||
        integer(res, "deployment.resources", "gpu_memory_mib", 0, 0, 1 << 24, &mem, err) < 0 ||
        integer(res, "deployment.resources", "compute_percent", 100, 1, 100, &cp, err) < 0 ||
        integer(res, "deployment.resources", "cpu_millis", 1000, 0, 1 << 24, &cpu, err) < 0 ||
        integer(res, "deployment.resources", "memory_mib", 4096, 0, 1 << 26, &rmem, err) < 0)
        return -1;
    c->replica = (drv_sched_request_t){.gpu_count = (int)gc, .gpu_memory_mib = mem,
                                       .compute_percent = (int)cp, .cpu_millis = cpu,
                                       .memory_mib = rmem};
    const json_t *gt = res ? json_object_get(res, "gpu_types") : NULL;
    if (gt) {
        if (!json_is_array(gt) || json_array_size(gt) > SERVE_MAX_GPU_MODELS)
            return drv_err_invalid(err, "gpu_types", "deployment.resources.gpu_types: a list of "
                                   "at most %d GPU types", SERVE_MAX_GPU_MODELS);
        for (size_t i = 0; i < json_array_size(gt); i++) {
            c->replica_types[i] = json_string_value(json_array_get(gt, i));
            if (!c->replica_types[i] || !*c->replica_types[i])
                return drv_err_invalid(err, "gpu_types", "deployment.resources.gpu_types[%zu]: "
                                       "must be a GPU type name", i);
        }
        c->replica.gpu_types = c->replica_types;
        c->replica.n_gpu_types = json_array_size(gt);
    }
    drv_ras_config_from_json(as, &c->autoscale);
    if (drv_ras_config_check(&c->autoscale, err) < 0) {
        drv_err_prefix(err, "deployment");
        return -1;
    }
    return 0;
}

int sim_serve_config_load(sim_serve_config_t *c, const char *path, drv_error_t *err)
{
    memset(c, 0, sizeof *c);
    json_t *docs = drv_yaml_load_file(path, err);
    if (!docs)
        return -1;
    if (json_array_size(docs) != 1 || !json_is_object(json_array_get(docs, 0))) {
        json_decref(docs);
        return drv_err_invalid(err, "", "%s: one YAML document, a mapping, is expected", path);
    }
    c->doc = json_incref(json_array_get(docs, 0));
    json_decref(docs);
    c->cat = drv_catalog_create_default(err);
    if (!c->cat)
        goto error;
    const json_t *d = c->doc;
    const json_t *slo = json_object_get(d, "slo"), *gw = json_object_get(d, "gateway");
    const json_t *sim = json_object_get(d, "sim");
    int64_t mq = 0, seed = 0, init = 0;   /* set by integer() */
    if (check_keys(d, "", k_top, err) < 0 || check_keys(slo, "slo", k_slo, err) < 0 ||
        check_keys(gw, "gateway", k_gateway, err) < 0 || check_keys(sim, "sim", k_sim, err) < 0 ||
        num(slo, "slo", "ttft_seconds", 0, 1e-3, 86400, &c->slo_ttft_s, err) < 0 ||
        num(slo, "slo", "e2e_seconds", 0, 1e-3, 86400, &c->slo_e2e_s, err) < 0 ||
        num(gw, "gateway", "request_timeout_seconds", 300, 1, 86400, &c->timeout_s, err) < 0 ||
        integer(gw, "gateway", "max_queue", 10000, 0, 10000000, &mq, err) < 0 ||
        num(sim, "sim", "control_interval_seconds", 0.25, 0.05, 600, &c->control_interval_s,
            err) < 0 ||
        num(sim, "sim", "jitter", 0, 0, 0.9, &c->jitter, err) < 0 ||
        num(sim, "sim", "warmup_seconds", 600, 0, 86400 * 30, &c->warmup_s, err) < 0 ||
        integer(sim, "sim", "seed", 1, 0, INT64_MAX, &seed, err) < 0 ||
        integer(sim, "sim", "initial_replicas", -1, 0, 1000000, &init, err) < 0 ||
        boolean(sim, "sim", "initial_wave_timed", true, &c->initial_wave_timed, err) < 0)
        goto error;
    if (c->slo_ttft_s <= 0 && c->slo_e2e_s <= 0) {
        drv_err_invalid(err, "slo", "slo: name ttft_seconds and/or e2e_seconds");
        goto error;
    }
    c->max_queue = (int)mq;
    c->seed = (uint64_t)seed;
    c->initial_replicas = (int)init;
    if (read_gpus(c, json_object_get(d, "gpus"), err) < 0 ||
        read_deployment(c, json_object_get(d, "deployment"), err) < 0 ||
        read_types(c, json_object_get(d, "nodepool"), json_object_get(d, "provisioning"),
                   json_object_get(d, "prices"), err) < 0)
        goto error;
    return 0;
error:
    drv_err_prefix(err, "%s", path);
    sim_serve_config_free(c);
    return -1;
}

void sim_serve_config_free(sim_serve_config_t *c)
{
    if (!c)
        return;
    drv_catalog_destroy(c->cat);
    json_decref(c->doc);
    memset(c, 0, sizeof *c);
}

const sim_serve_gpu_model_t *sim_serve_gpu_model(const sim_serve_config_t *c, const char *gpu_type)
{
    for (size_t i = 0; gpu_type && i < c->n_gpus; i++)
        if (strcmp(c->gpus[i].gpu_type, gpu_type) == 0)
            return &c->gpus[i];
    return NULL;
}
