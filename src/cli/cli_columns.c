/* cli_columns.c — the CLI's table layouts: per kind, its columns (header,
 * dotted JSON path, flags) and the cell formatters they use; data that
 * cli_output.c lays out. */
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli_output_int.h"

typedef struct layout {
    const char *kind;
    const column_t *cols;
} layout_t;

/* ---- cell formatters ------------------------------------------------------------ */

static void cell_age(const json_t *item, const json_t *v, char *out, size_t n)
{
    drv_cli_age(json_string_value(v), out, n);
}

static void cell_mib(const json_t *item, const json_t *v, char *out, size_t n)
{
    if (!json_is_number(v)) {
        out[0] = '\0';
        return;
    }
    double mib = json_number_value(v);
    if (mib >= 1024 && fmod(mib, 1024) == 0)
        snprintf(out, n, "%.0fGi", mib / 1024);
    else
        snprintf(out, n, "%.0fMi", mib);
}

static void cell_cpu(const json_t *item, const json_t *v, char *out, size_t n)
{
    if (!json_is_integer(v))
        drv_cli_render(v, out, n);
    else if (json_integer_value(v) % 1000 == 0)
        snprintf(out, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v) / 1000);
    else
        snprintf(out, n, "%" JSON_INTEGER_FORMAT "m", json_integer_value(v));
}

static void cell_price(const json_t *item, const json_t *v, char *out, size_t n)
{
    if (!json_is_number(v) || json_number_value(v) < 0) {
        out[0] = '\0';
        return;
    }
    /* 4 decimals, trailing zeros dropped down to 2: 0.8048, 1.006, 0.44 */
    snprintf(out, n, "%.4f", json_number_value(v));
    size_t len = strlen(out);
    char *dot = strchr(out, '.');
    while (dot && len > (size_t)(dot - out) + 3 && out[len - 1] == '0')
        out[--len] = '\0';
}

static void cell_percent(const json_t *item, const json_t *v, char *out, size_t n)
{
    if (!json_is_number(v))
        out[0] = '\0';
    else
        snprintf(out, n, "%.0f%%", json_number_value(v));
}

static void cell_seconds(const json_t *item, const json_t *v, char *out, size_t n)
{
    if (json_is_integer(v))
        snprintf(out, n, "%" JSON_INTEGER_FORMAT "s", json_integer_value(v));
    else
        drv_cli_render(v, out, n);
}

static void cell_words(const json_t *item, const json_t *v, char *out, size_t n)
{
    size_t i, len = 0;
    const json_t *e;
    out[0] = '\0';
    json_array_foreach(v, i, e) {
        len += (size_t)snprintf(out + len, len < n ? n - len : 0, "%s%s", i ? " " : "",
                                json_is_string(e) ? json_string_value(e) : "?");
        if (len >= n)
            break;
    }
}

static void cell_command(const json_t *item, const json_t *v, char *out, size_t n)
{
    const json_t *rt = json_object_get(item, "runtime");
    const char *img = json_string_value(json_object_get(rt, "image"));
    const char *preset = json_string_value(json_object_get(rt, "preset"));
    char pre[160];
    if (preset) {   /* a model server's preset: its name (and an image that overrides it) */
        snprintf(pre, sizeof pre, "preset %s%s%s", preset, img ? " " : "", img ? img : "");
        img = pre;
    }
    if (img) {   /* containers: the image, then its command if one is given */
        char words[512];
        cell_words(item, v, words, sizeof words);
        snprintf(out, n, "%s%s%s", img, words[0] ? " " : "", words);
    } else {
        cell_words(item, v, out, n);
    }
    if (strlen(out) > 40 && n > 40)
        strcpy(out + 37, "...");
}

static void cell_replicas(const json_t *item, const json_t *v, char *out, size_t n)
{
    const json_t *ready = json_object_get(v, "ready_replicas");
    const json_t *desired = json_object_get(v, "desired_replicas");
    if (!json_is_integer(ready) && !json_is_integer(desired)) {
        out[0] = '\0';
        return;
    }
    snprintf(out, n, "%" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT,
             json_integer_value(ready), json_integer_value(desired));
}

static void cell_dep_nodepools(const json_t *item, const json_t *v, char *out, size_t n)
{
    size_t i, len = 0;
    const json_t *e;
    out[0] = '\0';
    json_array_foreach(v, i, e) {
        const char *c = json_string_value(json_object_get(e, "cluster"));
        const char *np = json_string_value(json_object_get(e, "nodepool"));
        len += (size_t)snprintf(out + len, len < n ? n - len : 0, "%s%s/%s", i ? "," : "",
                                c ? c : "?", np ? np : "?");
        if (len >= n)
            break;
    }
}

static void cell_counts(const json_t *item, const json_t *v, char *out, size_t n)
{
    const char *k;
    const json_t *e;
    size_t len = 0;
    out[0] = '\0';
    json_object_foreach((json_t *)v, k, e) {
        if (json_is_integer(e) && json_integer_value(e) == 0)
            continue;
        char one[64];
        drv_cli_render(e, one, sizeof one);
        len += (size_t)snprintf(out + len, len < n ? n - len : 0, "%s%s=%s", len ? "," : "", k,
                                one);
        if (len >= n)
            break;
    }
}

static void cell_count(const json_t *item, const json_t *v, char *out, size_t n)
{
    if (json_is_array(v))
        snprintf(out, n, "%zu", json_array_size(v));
    else
        drv_cli_render(v, out, n);
}

static void cell_yesno(const json_t *item, const json_t *v, char *out, size_t n)
{
    snprintf(out, n, "%s", json_is_boolean(v) ? (json_is_true(v) ? "yes" : "no") : "");
}

static void cell_packing(const json_t *item, const json_t *v, char *out, size_t n)
{
    snprintf(out, n, "%s", json_is_true(v) ? "off" : "on");
}

static void cell_expires(const json_t *item, const json_t *v, char *out, size_t n)
{
    if (json_is_string(v) && json_string_length(v))
        snprintf(out, n, "%s", json_string_value(v));
    else
        snprintf(out, n, "never");
}

static void cell_token_state(const json_t *item, const json_t *v, char *out, size_t n)
{
    long long exp = drv_cli__parse_time(json_string_value(json_object_get(item, "expires_at")));
    if (json_is_true(json_object_get(item, "revoked")))
        snprintf(out, n, "revoked");
    else if (exp >= 0 && exp <= (long long)time(NULL))
        snprintf(out, n, "expired");
    else if (json_object_get(item, "uses") &&
             json_integer_value(json_object_get(item, "used")) >=
                 json_integer_value(json_object_get(item, "uses")))
        snprintf(out, n, "used-up");   /* a join token whose joins are spent */
    else
        snprintf(out, n, "active");
}

/* a join token's "USED/USES", e.g. 1/1 */
static void cell_uses(const json_t *item, const json_t *v, char *out, size_t n)
{
    if (!json_object_get(item, "uses"))
        snprintf(out, n, "-");
    else
        snprintf(out, n, "%lld/%lld", (long long)json_integer_value(json_object_get(item, "used")),
                 (long long)json_integer_value(json_object_get(item, "uses")));
}

static void cell_gpus_used(const json_t *item, const json_t *v, char *out, size_t n)
{
    const json_t *used = json_object_get(item, "gpus_used");
    const json_t *count = json_object_get(item, "gpu_count");
    char a[64], b[64];
    drv_cli_render(used, a, sizeof a);
    drv_cli_render(count, b, sizeof b);
    snprintf(out, n, "%s/%s", a[0] ? a : "?", b[0] ? b : "?");
}

/* "ready", or "ready,cordoned" / "not_ready,draining" when a spec flag
 * is not already what the state says. */
static void cell_node_state(const json_t *item, const json_t *v, char *out, size_t n)
{
    const char *state = json_string_value(v);
    bool term = json_is_true(json_object_get(item, "terminating"));
    bool drain = json_is_true(json_object_get(item, "draining"));
    bool cordon = json_is_true(json_object_get(item, "cordoned"));
    snprintf(out, n, "%s", state ? state : "");
    if (!state || term || strcmp(state, "terminating") == 0)
        return;
    if (drain && strcmp(state, "draining") != 0)
        snprintf(out + strlen(out), n - strlen(out), ",draining");
    else if (cordon && !drain)
        snprintf(out + strlen(out), n - strlen(out), ",cordoned");
}

/* A GPU's model for the GPUS column: NVML's "NVIDIA L4" is "L4". */
static const char *gpu_model(const json_t *gpu)
{
    const char *name = json_string_value(json_object_get(gpu, "name"));
    if (!name || !*name)
        return "GPU";
    if (strncmp(name, "NVIDIA ", 7) == 0 && name[7])
        return name + 7;
    return name;
}

/* A node's GPUs as "1xL4", "8xH100", "1xA100,1xL4"; "0" when it reported
 * none, empty before it reported. */
static void cell_node_gpus(const json_t *item, const json_t *v, char *out, size_t n)
{
    size_t i, j, len = 0, total = json_array_size(v);
    const json_t *g;
    out[0] = '\0';
    if (!json_is_array(v))
        return;
    if (total == 0) {
        snprintf(out, n, "0");
        return;
    }
    json_array_foreach(v, i, g) {
        const char *name = gpu_model(g);
        bool seen = false;
        for (j = 0; j < i && !seen; j++)
            seen = strcmp(gpu_model(json_array_get(v, j)), name) == 0;
        if (seen)
            continue;
        size_t count = 0;
        for (j = i; j < total; j++)
            count += strcmp(gpu_model(json_array_get(v, j)), name) == 0;
        len += (size_t)snprintf(out + len, len < n ? n - len : 0, "%s%zux%s", len ? "," : "",
                                count, name);
        if (len >= n)
            break;
    }
}

/* A replica's GPUs: "0:6000MiB/25%" per share, "0,1 (whole)" for whole
 * GPUs, empty on CPU only. */
static void cell_replica_gpus(const json_t *item, const json_t *v, char *out, size_t n)
{
    size_t i, len = 0;
    const json_t *g;
    bool whole = json_is_true(json_object_get(item, "whole_gpu"));
    out[0] = '\0';
    json_array_foreach(v, i, g) {
        const json_t *idx = json_object_get(g, "index");
        char one[128];
        if (whole)
            snprintf(one, sizeof one, "%" JSON_INTEGER_FORMAT, json_integer_value(idx));
        else
            snprintf(one, sizeof one,
                     "%" JSON_INTEGER_FORMAT ":%" JSON_INTEGER_FORMAT "MiB/%" JSON_INTEGER_FORMAT
                     "%%",
                     json_integer_value(idx), json_integer_value(json_object_get(g, "memory_mib")),
                     json_integer_value(json_object_get(g, "compute_percent")));
        len += (size_t)snprintf(out + len, len < n ? n - len : 0, "%s%s", i ? "," : "", one);
        if (len >= n)
            return;
    }
    if (whole && len)
        snprintf(out + len, len < n ? n - len : 0, " (whole)");
}

/* The node a replica is placed on: spec, else what the agent reports. */
/* a fetching replica's artifact: "42% 310Mi/s eta 7s" (blank otherwise) */
static void cell_fetch(const json_t *item, const json_t *v, char *out, size_t n)
{
    const char *st = json_string_value(json_object_get(json_object_get(item, "status"), "state"));
    double total = json_number_value(json_object_get(v, "total"));
    out[0] = '\0';
    if (!st || strcmp(st, "fetching") != 0 || !json_is_object(v))
        return;
    int len = snprintf(out, n, "%.0f%% %.0fMi/s",
                       total > 0 ? 100 * json_number_value(json_object_get(v, "bytes")) / total : 0,
                       json_number_value(json_object_get(v, "rate_bytes_per_s")) / 1048576);
    if (json_is_integer(json_object_get(v, "eta_seconds")) && len > 0 && (size_t)len < n)
        snprintf(out + len, n - (size_t)len, " eta %llds",
                 (long long)json_integer_value(json_object_get(v, "eta_seconds")));
}

static void cell_replica_node(const json_t *item, const json_t *v, char *out, size_t n)
{
    if (!json_is_string(v))
        v = json_object_get(json_object_get(item, "status"), "node");
    drv_cli_render(json_is_string(v) ? v : NULL, out, n);
}

/* GPU memory "used/total", e.g. "6002Mi/24Gi". */
static void cell_gpu_memory(const json_t *item, const json_t *v, char *out, size_t n)
{
    char used[64], total[64];
    cell_mib(item, json_object_get(item, "memory_used_mib"), used, sizeof used);
    cell_mib(item, json_object_get(item, "memory_mib"), total, sizeof total);
    snprintf(out, n, "%s/%s", used[0] ? used : "?", total[0] ? total : "?");
}

/* What replicas hold of a GPU: "24000MiB/100%". */
static void cell_gpu_allocated(const json_t *item, const json_t *v, char *out, size_t n)
{
    const json_t *mib = json_object_get(item, "allocated_mib");
    const json_t *pct = json_object_get(item, "allocated_percent");
    if (!json_is_integer(mib) || !json_is_integer(pct))
        out[0] = '\0';
    else
        snprintf(out, n, "%" JSON_INTEGER_FORMAT "MiB/%" JSON_INTEGER_FORMAT "%%",
                 json_integer_value(mib), json_integer_value(pct));
}

static void cell_celsius(const json_t *item, const json_t *v, char *out, size_t n)
{
    if (!json_is_number(v))
        out[0] = '\0';
    else
        snprintf(out, n, "%.0fC", json_number_value(v));
}

/* "ok", or "unhealthy: reason". */
static void cell_gpu_health(const json_t *item, const json_t *v, char *out, size_t n)
{
    const char *reason = json_string_value(json_object_get(item, "health_reason"));
    if (!json_is_boolean(v))
        out[0] = '\0';
    else if (json_is_true(v))
        snprintf(out, n, "ok");
    else
        snprintf(out, n, "unhealthy%s%s", reason && *reason ? ": " : "",
                 reason && *reason ? reason : "");
}

/* ---- layouts ---------------------------------------------------------------------- */

#define OWNER_COL {"OWNER", "owner", NULL, COL_OWNER}
#define END_COL {NULL, NULL, NULL, 0}

static const column_t clusters_cols[] = {
    OWNER_COL,
    {"ID", "id", NULL, 0},
    {"PROVIDER", "provider", NULL, 0},
    {"REGION", "region", NULL, 0},
    {"AGE", "created_at", cell_age, 0},
    {"DESCRIPTION", "description", NULL, COL_WIDE},
    END_COL,
};

static const column_t credentials_cols[] = {
    OWNER_COL,
    {"ID", "id", NULL, 0},
    {"PROVIDER", "provider", NULL, 0},
    {"ACCESS-KEY-ID", "access_key_id", NULL, 0},
    {"PROFILE", "profile", NULL, 0},
    {"AGE", "created_at", cell_age, 0},
    {"DESCRIPTION", "description", NULL, COL_WIDE},
    END_COL,
};

static const column_t stores_cols[] = {
    {"ID", "id", NULL, 0},
    {"ENDPOINT", "endpoint", NULL, 0},
    {"REGION", "region", NULL, 0},
    {"BUCKET", "bucket", NULL, 0},
    {"ACCESS-KEY-ID", "access_key_id", NULL, COL_WIDE},
    {"AGE", "created_at", cell_age, 0},
    {"DESCRIPTION", "description", NULL, COL_WIDE},
    END_COL,
};

static const column_t nodepools_cols[] = {
    OWNER_COL,
    {"CLUSTER", "cluster", NULL, 0},
    {"ID", "id", NULL, 0},
    {"INSTANCE-TYPES", "instance_types", NULL, 0},
    {"CAPACITY", "capacity_type", NULL, 0},
    {"MIN", "min_nodes", NULL, 0},
    {"MAX", "max_nodes", NULL, 0},
    {"NODES", "status.node_count", NULL, 0},
    {"NODE-STATES", "status.nodes", cell_counts, COL_WIDE},
    {"SCALE-DOWN", "node_scale_down_delay_seconds", cell_seconds, COL_WIDE},
    {"AGE", "created_at", cell_age, COL_WIDE},
    {"DESCRIPTION", "description", NULL, COL_WIDE},
    END_COL,
};

static const column_t models_cols[] = {
    OWNER_COL,
    {"ID", "id", NULL, 0},
    {"GPUS", "resources.gpu.count", NULL, 0},
    {"GPU-MEM", "resources.gpu.memory_mib", cell_mib, 0},
    {"COMPUTE", "resources.gpu.compute_percent", cell_percent, COL_WIDE},
    {"GPU-TYPES", "resources.gpu.types", NULL, COL_WIDE},
    {"CPU", "resources.cpu_millis", cell_cpu, 0},
    {"MEM", "resources.memory_mib", cell_mib, 0},
    {"PARAMS-B", "params_b", NULL, COL_WIDE},
    {"DTYPE", "dtype", NULL, COL_WIDE},
    {"AGE", "created_at", cell_age, COL_WIDE},
    {"RUNTIME", "runtime.command", cell_command, COL_NARROW},
    {"RUNTIME", "runtime.command", cell_words, COL_WIDE},
    END_COL,
};

static const column_t deployments_cols[] = {
    OWNER_COL,
    {"ID", "id", NULL, 0},
    {"MODEL", "model", NULL, 0},
    {"NODEPOOLS", "nodepools", cell_dep_nodepools, 0},
    {"READY", "status", cell_replicas, 0},
    {"MIN", "autoscale.min_replicas", NULL, 0},
    {"MAX", "autoscale.max_replicas", NULL, 0},
    {"TARGET", "autoscale.target_concurrency", NULL, COL_WIDE},
    {"PACKING", "disable_packing", cell_packing, COL_WIDE},
    {"ENABLED", "enabled", cell_yesno, COL_WIDE},
    {"AGE", "created_at", cell_age, COL_WIDE},
    END_COL,
};

/* containers: "podman 4.3.1", "none" (blank before the agent said) */
static void cell_engine(const json_t *item, const json_t *v, char *out, size_t n)
{
    (void)item;
    const char *e = json_string_value(json_object_get(v, "engine"));
    const char *ver = json_string_value(json_object_get(v, "version"));
    snprintf(out, n, "%s%s%s", e ? e : "", ver && *ver ? " " : "", ver ? ver : "");
}

/* A job's workers: "ready/total". */
/* a fraction (0..1) as a percentage */
static void cell_share(const json_t *item, const json_t *v, char *out, size_t n)
{
    (void)item;
    if (json_is_number(v))
        snprintf(out, n, "%.0f%%", json_number_value(v) * 100.0);
}

static void cell_workers(const json_t *item, const json_t *v, char *out, size_t n)
{
    snprintf(out, n, "%" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT,
             json_integer_value(json_object_get(v, "workers_ready")),
             json_integer_value(json_object_get(v, "workers_total")));
}

static const column_t jobs_cols[] = {
    OWNER_COL,
    {"ID", "id", NULL, 0},
    {"STATE", "status.state", NULL, 0},
    {"WORKERS", "status", cell_workers, 0},
    {"ATTEMPT", "status.attempt", NULL, 0},
    {"QUEUE-POS", "status.queue_position", NULL, 0},
    {"PRIORITY", "priority", NULL, COL_WIDE},
    {"QUEUE", "queue", NULL, COL_WIDE},
    {"GPUS", "resources.gpu.count", NULL, COL_WIDE},
    {"AGE", "created_at", cell_age, 0},
    {"REASON", "status.reason", NULL, COL_WIDE},
    END_COL,
};

static const column_t queues_cols[] = {
    {"QUEUE", "queue", NULL, 0},
    {"USER", "user", NULL, 0},
    {"QUEUED", "queued", NULL, 0},
    {"RUNNING", "running", NULL, 0},
    {"GPUS", "gpus_used", NULL, 0},
    {"SHARE", "gpu_share", cell_share, 0},
    {"GPU-QUOTA", "gpu_quota", NULL, 0},
    END_COL,
};

static const column_t nodes_cols[] = {
    OWNER_COL,
    {"ID", "id", NULL, 0},
    {"CLUSTER", "cluster", NULL, 0},
    {"NODEPOOL", "nodepool", NULL, 0},
    {"INSTANCE-TYPE", "instance_type", NULL, 0},
    {"STATE", "status.state", cell_node_state, 0},
    {"GPUS", "status.gpus", cell_node_gpus, 0},
    {"AGE", "created_at", cell_age, 0},
    {"ADDRESS", "status.address", NULL, COL_WIDE},
    {"GPU-SOURCE", "status.gpu_source", NULL, COL_WIDE},
    {"CPUS", "status.cpus", NULL, COL_WIDE},
    {"MEMORY", "status.memory_mib", cell_mib, COL_WIDE},
    {"CONTAINERS", "status.container_runtime", cell_engine, COL_WIDE},
    {"LAST-SYNC", "status.last_sync", cell_age, COL_WIDE},
    {"CORDONED", "cordoned", cell_yesno, COL_WIDE},
    END_COL,
};

static const column_t replicas_cols[] = {
    OWNER_COL,
    {"ID", "id", NULL, 0},
    {"DEPLOYMENT", "deployment", NULL, 0},
    {"NODE", "node", cell_replica_node, 0},
    {"GPU", "gpus", cell_replica_gpus, 0},
    {"STATE", "status.state", NULL, 0},
    {"FETCH", "status.fetch", cell_fetch, 0},
    {"RESTARTS", "status.restarts", NULL, 0},
    {"AGE", "created_at", cell_age, 0},
    {"ENDPOINT", "status.endpoint", NULL, COL_WIDE},
    {"LAST-EXIT", "status.last_exit", NULL, COL_WIDE},
    {"REASON", "status.reason", NULL, COL_WIDE},
    END_COL,
};

/* describe node: its GPUs, and the replicas placed on it */
static const column_t node_gpus_cols[] = {
    {"INDEX", "index", NULL, 0},
    {"UUID", "uuid", NULL, 0},
    {"NAME", "name", NULL, 0},
    {"MEMORY", NULL, cell_gpu_memory, 0},
    {"ALLOCATED", NULL, cell_gpu_allocated, 0},
    {"UTIL", "utilization_percent", cell_percent, 0},
    {"TEMP", "temperature_c", cell_celsius, 0},
    {"SOURCE", "source", NULL, 0},
    {"HEALTH", "healthy", cell_gpu_health, 0},
    END_COL,
};

static const column_t node_replicas_cols[] = {
    {"ID", "id", NULL, 0},
    {"DEPLOYMENT", "deployment", NULL, 0},
    {"SHARE", "gpus", cell_replica_gpus, 0},
    {"CPU", "cpu_millis", cell_cpu, 0},
    {"MEM", "memory_mib", cell_mib, 0},
    {"STATE", "status.state", NULL, 0},
    END_COL,
};

static const column_t join_tokens_cols[] = {
    {"ID", "id", NULL, 0},
    {"CLUSTER", "cluster", NULL, COL_WIDE},
    {"NODEPOOL", "nodepool", NULL, COL_WIDE},
    {"DESCRIPTION", "description", NULL, 0},
    {"EXPIRES", "expires_at", cell_expires, 0},
    {"USED", NULL, cell_uses, 0},
    {"STATE", NULL, cell_token_state, 0},
    {"AGE", "created_at", cell_age, 0},
    END_COL,
};

static const column_t instance_types_cols[] = {
    {"ID", "id", NULL, 0},
    {"PROVIDER", "provider", NULL, 0},
    {"GPU", "gpu_type", NULL, 0},
    {"COUNT", "gpu_count", NULL, 0},
    {"GPU-MEM", "gpu_memory_mib", cell_mib, 0},
    {"VCPU", "vcpus", NULL, 0},
    {"MEM", "memory_mib", cell_mib, 0},
    {"PRICE/H", "price_per_hour", cell_price, 0},
    {"SPOT/H", "spot_price_per_hour", cell_price, 0},
    {"REGIONS", "regions", NULL, COL_WIDE},
    END_COL,
};

static const column_t options_cols[] = {
    {"INSTANCE-TYPE", "instance_type", NULL, 0},
    {"PROVIDER", "provider", NULL, 0},
    {"GPU", "gpu_type", NULL, 0},
    {"GPUS", NULL, cell_gpus_used, 0},
    {"GPU-MEM", "gpu_memory_mib", cell_mib, 0},
    {"FIT", "fit", NULL, 0},
    {"SHARE", "share_of_gpu", NULL, COL_WIDE},
    {"PRICE/H", "price_per_hour", cell_price, 0},
    {"SPOT/H", "spot_price_per_hour", cell_price, 0},
    {"HEADROOM", "headroom_percent", cell_percent, 0},
    {"REGIONS", "regions", NULL, COL_WIDE},
    END_COL,
};

static const column_t tokens_cols[] = {
    {"ID", "id", NULL, 0},
    {"DESCRIPTION", "description", NULL, 0},
    {"SCOPES", "scopes", NULL, 0},
    {"EXPIRES", "expires_at", cell_expires, 0},
    {"STATE", NULL, cell_token_state, 0},
    {"CREATED", "created_at", NULL, COL_WIDE},
    END_COL,
};

static const column_t users_cols[] = {
    {"ID", "id", NULL, 0},
    {"ROLE", "role", NULL, 0},
    {"AGE", "created_at", cell_age, 0},
    {"CREATED", "created_at", NULL, COL_WIDE},
    END_COL,
};

static const column_t providers_cols[] = {
    {"ID", "id", NULL, 0},
    {"NAME", "name", NULL, 0},
    {"SPOT", "supports_spot", cell_yesno, 0},
    {"REGIONS", "regions", cell_count, COL_NARROW},
    {"REGIONS", "regions", NULL, COL_WIDE},
    END_COL,
};

static void cell_bytes(const json_t *item, const json_t *v, char *out, size_t n)
{
    if (json_is_integer(v))
        drv_cli_bytes((uint64_t)json_integer_value(v), out, n);
    else
        out[0] = '\0';
}

static void cell_short(const json_t *item, const json_t *v, char *out, size_t n)
{
    snprintf(out, n, "%.12s", json_is_string(v) ? json_string_value(v) : "");
}

static const column_t artifacts_cols[] = {
    OWNER_COL,
    {"ID", "id", NULL, 0},
    {"SOURCE", "source", NULL, 0},
    {"STATE", "status.state", NULL, 0},
    {"FILES", "status.file_count", NULL, 0},
    {"SIZE", "status.total_size", cell_bytes, 0},
    {"DIGEST", "status.digest", cell_short, COL_NARROW},
    {"DIGEST", "status.digest", NULL, COL_WIDE},
    {"AGE", "created_at", cell_age, 0},
    END_COL,
};

static const column_t regions_cols[] = {
    {"ID", "id", NULL, 0},
    {"NAME", "name", NULL, 0},
    END_COL,
};

static const column_t default_cols[] = {
    OWNER_COL,
    {"ID", "id", NULL, 0},
    {"AGE", "created_at", cell_age, 0},
    END_COL,
};

static const layout_t layouts[] = {
    {"clusters", clusters_cols},
    {"credentials", credentials_cols},
    {"stores", stores_cols},
    {"nodepools", nodepools_cols},
    {"models", models_cols},
    {"artifacts", artifacts_cols},
    {"deployments", deployments_cols},
    {"jobs", jobs_cols},
    {"queues", queues_cols},
    {"nodes", nodes_cols},
    {"replicas", replicas_cols},
    {"node-gpus", node_gpus_cols},
    {"node-replicas", node_replicas_cols},
    {"join-tokens", join_tokens_cols},
    {"instance-types", instance_types_cols},
    {"recommendations", options_cols},
    {"tokens", tokens_cols},
    {"users", users_cols},
    {"providers", providers_cols},
    {"regions", regions_cols},
    {NULL, NULL},
};

const column_t *drv_cli__columns_of(const char *kind)
{
    for (const layout_t *l = layouts; l->kind; l++)
        if (strcmp(l->kind, kind) == 0)
            return l->cols;
    return default_cols;
}
