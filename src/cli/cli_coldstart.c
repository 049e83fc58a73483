/* cli_coldstart.c — the cold-start views of `drover describe`: a replica's
 * "Cold start:" block (its timeline relative to the record's creation, and
 * the split into waiting for a node, fetch and load) and a deployment's
 * "Cold starts:" table, one line per replica the head saw start
 * (status.timeline and status.cold_start, state/timeline.h). */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>
#include "common/util.h"

static double num(const json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

void drv_cli_print_cold_start(const json_t *status)
{
    const json_t *tl = json_object_get(status, "timeline"), *cs = json_object_get(status, "cold_start");
    if (!json_is_object(tl))
        return;
    static const char *const keys[] = {"created_ms", "placed_ms", "fetch_started_ms",
                                       "process_started_ms", "ready_ms", NULL};
    static const char *const names[] = {"created", "placed on a node", "fetch started",
                                        "process started", "ready", NULL};
    json_int_t t0 = json_integer_value(json_object_get(tl, "created_ms"));
    printf("\nCold start:\n");
    for (int i = 0; keys[i]; i++) {
        const json_t *v = json_object_get(tl, keys[i]);
        if (!json_is_integer(v))
            continue;
        char ts[40];
        drv_rfc3339(json_integer_value(v) / 1000, ts, sizeof ts);
        if (t0)
            printf("  %-17s %s  (+%.3fs)\n", names[i], ts,
                   (double)(json_integer_value(v) - t0) / 1000.0);
        else
            printf("  %-17s %s\n", names[i], ts);
    }
    if (json_is_object(cs))
        printf("  split:            waiting for a node %.3fs (placement %.3fs), fetch %.3fs, "
               "load %.3fs; total %.3fs\n",
               num(cs, "waiting_seconds"), num(cs, "placement_seconds"), num(cs, "fetch_seconds"),
               num(cs, "load_seconds"), num(cs, "total_seconds"));
    else
        printf("  split:            not ready yet\n");
}

int drv_cli_describe_replica(drv_cli_t *cli, const json_t *rep)
{
    (void)cli;
    json_t *copy = json_deep_copy(rep);
    json_t *st = json_object_get(copy, "status");
    json_object_del(st, "timeline");
    json_object_del(st, "cold_start");
    drv_cli_describe(copy);
    json_decref(copy);
    drv_cli_print_cold_start(json_object_get(rep, "status"));
    return DRV_CLI_OK;
}

void drv_cli_print_cold_starts(const json_t *dep_status)
{
    const json_t *cs = json_object_get(dep_status, "cold_starts");
    if (json_array_size(cs) == 0)
        return;
    printf("\nCold starts (seconds; the replicas there now):\n");
    printf("  %-28s %9s %9s %9s %9s\n", "REPLICA", "WAITING", "FETCH", "LOAD", "TOTAL");
    size_t i;
    const json_t *c;
    json_array_foreach(cs, i, c) {
        char id[DRV_CLI_CELL_MAX];
        drv_cli_render(json_object_get(c, "replica"), id, sizeof id);
        drv_cli_sanitize(id);
        printf("  %-28s %9.3f %9.3f %9.3f %9.3f\n", id, num(c, "waiting_seconds"),
               num(c, "fetch_seconds"), num(c, "load_seconds"), num(c, "total_seconds"));
    }
}
