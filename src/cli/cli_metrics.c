/* cli_metrics.c — `drover describe deployment D` in table mode: the
 * deployment's fields (the generic view), then a Metrics block from
 * GET /v1/deployments/D/metrics (the gateway's last 60 seconds: requests by
 * status, rate, in flight and queued, latency and time-to-first-byte
 * percentiles, cold starts, and a line per replica).
 *
 * Metrics are an addition: when they cannot be fetched the description is
 * still printed, with a note on stderr, and the command succeeds.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static long long num(const json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

/* "12.3 ms", or "-" when null. */
static const char *ms(const json_t *o, const char *k, char *buf, size_t n)
{
    const json_t *v = json_object_get(o, k);
    if (!json_is_number(v))
        return "-";
    snprintf(buf, n, "%.3g ms", json_number_value(v));
    return buf;
}

static void print_metrics(const json_t *m)
{
    const json_t *req = json_object_get(m, "requests");
    const json_t *bs = json_object_get(req, "by_status");
    const json_t *lat = json_object_get(m, "latency_ms"), *tt = json_object_get(m, "ttfb_ms");
    const json_t *cs = json_object_get(m, "cold_starts");
    char a[32], b[32], c[32];
    printf("Metrics (last %llds, this head's gateway):\n", num(m, "window_seconds"));
    printf("  requests:     %lld (2xx %lld, 4xx %lld, 5xx %lld; 429 %lld, 503 %lld)\n",
           num(req, "total"), num(bs, "2xx"), num(bs, "4xx"), num(bs, "5xx"), num(bs, "429"),
           num(bs, "503"));
    printf("  rate:         %.2f req/s\n",
           json_number_value(json_object_get(m, "requests_per_second")));
    printf("  in flight:    %lld\n  queued:       %lld\n", num(m, "in_flight"), num(m, "queued"));
    printf("  latency:      p50 %s, p90 %s, p99 %s\n", ms(lat, "p50", a, sizeof a),
           ms(lat, "p90", b, sizeof b), ms(lat, "p99", c, sizeof c));
    printf("  ttfb:         p50 %s, p99 %s (streamed answers)\n", ms(tt, "p50", a, sizeof a),
           ms(tt, "p99", b, sizeof b));
    printf("  cold starts:  %lld (mean %s, last %s)\n", num(cs, "count"),
           ms(cs, "mean_duration_ms", a, sizeof a), ms(cs, "last_duration_ms", b, sizeof b));
    const json_t *reps = json_object_get(m, "replicas");
    if (json_array_size(reps) == 0)
        return;
    printf("  %-28s %9s %9s %7s %10s %10s\n", "REPLICA", "IN-FLIGHT", "REQUESTS", "ERRORS",
           "P50", "P99");
    size_t i;
    const json_t *r;
    json_array_foreach(reps, i, r) {
        const json_t *rl = json_object_get(r, "latency_ms");
        printf("  %-28s %9lld %9lld %7lld %10s %10s\n",
               json_string_value(json_object_get(r, "id")) ?: "?", num(r, "in_flight"),
               num(r, "requests"), num(r, "errors"), ms(rl, "p50", a, sizeof a),
               ms(rl, "p99", b, sizeof b));
    }
}

int drv_cli_describe_deployment(drv_cli_t *cli, const json_t *dep)
{
    json_t *copy = json_deep_copy(dep);
    json_object_del(json_object_get(copy, "status"), "cold_starts");
    drv_cli_describe(copy);
    json_decref(copy);
    drv_cli_print_cold_starts(json_object_get(dep, "status"));   /* cli_coldstart.c */
    const char *id = json_string_value(json_object_get(dep, "id"));
    char path[512];
    if (!id || drv_cli_pathf(path, sizeof path, "/v1/deployments/%s/metrics", id) < 0)
        return DRV_CLI_OK;
    drv_error_t err = {0};
    if (json_object_get(json_object_get(dep, "spec"), "checkpoint") ||
        json_object_get(dep, "checkpoint"))
        drv_cli_describe_checkpoints(cli, id);   /* cli_checkpoints.c */
    json_t *m = drv_cli_call(cli, "GET", path, NULL, NULL, NULL, &err);
    if (!m) {
        fprintf(stderr, "note: no metrics for deployment '%s': %s\n", id, err.message);
        return DRV_CLI_OK;
    }
    printf("\n");
    print_metrics(m);
    json_decref(m);
    return DRV_CLI_OK;
}
