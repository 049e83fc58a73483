/* cli_progress.c — one line saying where a cold deployment's start is, from
 * its replicas (GET /v1/deployments/D/replicas): waiting for a node,
 * fetching the model's artifact (bytes of total, rate, ETA), starting, or
 * ready. Pure: `drover predict` (cli_predict.c) polls and prints it;
 * t/unit/test_cli_progress.c tests it. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static double mib(json_int_t b)
{
    return (double)b / (1024.0 * 1024.0);
}

static bool is(const json_t *rep, const char *state)
{
    return strcmp(str(json_object_get(rep, "status"), "state"), state) == 0;
}

/* The fetch furthest along (by fraction), NULL when none is fetching. */
static const json_t *best_fetch(const json_t *reps)
{
    const json_t *best = NULL;
    double best_frac = -1;
    size_t i;
    const json_t *r;
    json_array_foreach(reps, i, r) {
        const json_t *f = json_object_get(json_object_get(r, "status"), "fetch");
        if (!is(r, "fetching") || !json_is_object(f))
            continue;
        json_int_t total = json_integer_value(json_object_get(f, "total"));
        double frac = total > 0 ? (double)json_integer_value(json_object_get(f, "bytes")) / (double)total
                                : 0;
        if (frac > best_frac) {
            best = r;
            best_frac = frac;
        }
    }
    return best;
}

static const json_t *first_in(const json_t *reps, const char *state)
{
    size_t i;
    const json_t *r;
    json_array_foreach(reps, i, r) if (is(r, state)) return r;
    return NULL;
}

drv_cli_phase_t drv_cli_cold_line(const json_t *reps, char *out, size_t n)
{
    const json_t *r;
    out[0] = '\0';
    if (!json_is_array(reps))
        return DRV_PHASE_UNKNOWN;
    if (first_in(reps, "ready")) {
        snprintf(out, n, "a replica is ready; waiting for the answer");
        return DRV_PHASE_READY;
    }
    if ((r = best_fetch(reps))) {
        const json_t *f = json_object_get(json_object_get(r, "status"), "fetch");
        json_int_t bytes = json_integer_value(json_object_get(f, "bytes"));
        json_int_t total = json_integer_value(json_object_get(f, "total"));
        const json_t *rate = json_object_get(f, "rate_bytes_per_s");
        const json_t *eta = json_object_get(f, "eta_seconds");
        size_t len = (size_t)snprintf(out, n, "fetching the model on node %s: %.1f of %.1f MiB",
                                      str(r, "node"), mib(bytes), mib(total));
        if (len < n && json_is_integer(rate) && json_integer_value(rate) > 0)
            len += (size_t)snprintf(out + len, n - len, " at %.1f MiB/s",
                                    mib(json_integer_value(rate)));
        if (len < n && json_is_integer(eta))
            snprintf(out + len, n - len, ", ETA %llds", (long long)json_integer_value(eta));
        return DRV_PHASE_FETCHING;
    }
    if ((r = first_in(reps, "fetching"))) {   /* reported before its first progress */
        snprintf(out, n, "fetching the model on node %s", str(r, "node"));
        return DRV_PHASE_FETCHING;
    }
    if ((r = first_in(reps, "starting")) && json_is_string(json_object_get(r, "node"))) {
        if (!json_object_get(json_object_get(r, "status"), "pid")) {   /* not the agent's yet */
            snprintf(out, n, "placed on node %s; waiting for its agent", str(r, "node"));
            return DRV_PHASE_WAITING;
        }
        snprintf(out, n, "starting the model on node %s", str(r, "node"));
        return DRV_PHASE_STARTING;
    }
    if ((r = first_in(reps, "waiting"))) {   /* agent: a terminating replica holds its GPU */
        snprintf(out, n, "placed on node %s; %s", str(r, "node"),
                 str(json_object_get(r, "status"), "reason"));
        return DRV_PHASE_WAITING;
    }
    if ((r = first_in(reps, "backoff"))) {
        snprintf(out, n, "the model's process exited; restarting it on node %s", str(r, "node"));
        return DRV_PHASE_STARTING;
    }
    if ((r = first_in(reps, "pending")) || (r = first_in(reps, "starting"))) {
        const char *why = str(json_object_get(r, "status"), "reason");
        snprintf(out, n, "waiting for a node%s%s", why[0] ? ": " : "", why);
        return DRV_PHASE_WAITING;
    }
    if ((r = first_in(reps, "failed"))) {
        snprintf(out, n, "replica %s failed (%s); waiting for the next one", str(r, "id"),
                 str(json_object_get(r, "status"), "reason"));
        return DRV_PHASE_WAITING;
    }
    if (json_array_size(reps) == 0) {
        snprintf(out, n, "waiting for a node: no replica yet (scaling up from zero)");
        return DRV_PHASE_WAITING;
    }
    snprintf(out, n, "waiting for a replica (%s)", str(json_object_get(json_array_get(reps, 0),
                                                                        "status"), "state"));
    return DRV_PHASE_WAITING;
}
