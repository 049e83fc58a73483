/* cli_job.c — `drover describe job ID` in table mode: the job's fields
 * (the generic key/value view, less the placement and workers), then its
 * wait bound (issue 15: when it is due, from the FIFO shadow, or why it
 * has none), its placement by rank with what each rank's agent reports
 * (state, exit).
 * The events section follows (cli_get.c). */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static const char *sget(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

int drv_cli_describe_job(drv_cli_t *cli, const json_t *job)
{
    (void)cli;
    json_t *view = json_deep_copy(job);
    json_t *st = json_object_get(view, "status");
    const json_t *pl = json_object_get(json_object_get(job, "status"), "placement");
    const json_t *ws = json_object_get(json_object_get(job, "status"), "workers");
    const json_t *wb = json_object_get(json_object_get(job, "status"), "wait_bound");
    const char *unb = sget(json_object_get(job, "status"), "wait_unbounded");
    json_object_del(st, "placement");
    json_object_del(st, "workers");
    json_object_del(st, "wait_bound");
    json_object_del(st, "wait_unbounded");
    drv_cli_describe(view);
    json_decref(view);
    printf("\nWait bound:\n");
    char line[1024];
    if (wb) {
        const json_t *due = json_object_get(wb, "due");
        snprintf(line, sizeof line, "  %s (2 x its FIFO wait of %" JSON_INTEGER_FORMAT
                 " s, at least 10 min: FIFO would start it at %s)%s", sget(wb, "at"),
                 json_integer_value(json_object_get(wb, "fifo_wait_seconds")),
                 sget(wb, "fifo_start"), json_is_true(due) ? "; due: admitted first"
                                         : due ? "; not due yet" : "");
        drv_cli_sanitize(line);
        printf("%s\n", line);
        if (strcmp(sget(wb, "deadline"), sget(wb, "at")) != 0) {
            snprintf(line, sizeof line, "  this queueing's deadline: %s (queued again; the "
                     "time it ran does not count)", sget(wb, "deadline"));
            drv_cli_sanitize(line);
            printf("%s\n", line);
        }
    } else {
        snprintf(line, sizeof line, "  none%s%s", unb[0] ? ": " : "", unb);
        drv_cli_sanitize(line);
        printf("%s\n", line);
    }
    printf("\nPlacement:\n");
    if (json_array_size(pl) == 0) {
        printf("  <none>%s\n", json_object_get(json_object_get(job, "status"), "queue_position")
                                   ? " (queued)" : "");
        return DRV_CLI_OK;
    }
    printf("  %-6s %-24s %-24s %-10s %s\n", "RANK", "NODE", "GPUS", "STATE", "EXIT");
    size_t r;
    const json_t *p;
    json_array_foreach(pl, r, p) {
        char gpus[256] = "", rk[16];
        size_t k, len = 0;
        const json_t *g;
        json_array_foreach(json_object_get(p, "gpus"), k, g) {
            const json_t *pct = json_object_get(g, "compute_percent");
            len += (size_t)snprintf(gpus + len, len < sizeof gpus ? sizeof gpus - len : 0,
                                    "%s%" JSON_INTEGER_FORMAT "%s", k ? "," : "",
                                    json_integer_value(json_object_get(g, "index")),
                                    json_integer_value(pct) < 100 && json_integer_value(pct) > 0
                                        ? "(share)" : "");
            if (len >= sizeof gpus)
                break;
        }
        snprintf(rk, sizeof rk, "%zu", r);
        const json_t *w = json_object_get(ws, rk);
        snprintf(line, sizeof line, "  rank %-1zu %-24s %-24s %-10s %s", r, sget(p, "node"),
                 gpus[0] ? gpus : "-", w ? sget(w, "state") : "sent",
                 sget(w, "last_exit")[0] ? sget(w, "last_exit") : sget(w, "reason"));
        drv_cli_sanitize(line);
        printf("%s\n", line);
    }
    return DRV_CLI_OK;
}
