/* cli_logs.c — `drover logs deployment/ID [--replica R] [--follow] [--tail BYTES]`
 * (or `deployment ID`, or just `ID`) and `drover logs job/ID [--rank N]`:
 * replica logs through the head (GET /v1/deployments/{d}/logs), a job's
 * workers' (GET /v1/jobs/{j}/logs). --follow polls one replica's (one
 * rank's: --rank, default 0) log with the offset the head hands back. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* The replica to follow: the one given, or the deployment's only one. */
static int pick_replica(drv_cli_t *cli, const char *dep, char *out, size_t len)
{
    char path[512];
    drv_error_t err;
    drv_cli_pathf(path, sizeof path, "/v1/deployments/%s/replicas", dep);
    json_t *items = drv_cli_list(cli, path, &err);
    if (!items)
        return drv_cli_fail(cli, &err);
    size_t placed = 0;
    size_t i;
    json_t *r;
    json_array_foreach(items, i, r) {
        if (json_is_string(json_object_get(r, "node"))) {
            if (!placed)
                snprintf(out, len, "%s", json_string_value(json_object_get(r, "id")));
            placed++;
        }
    }
    json_decref(items);
    if (placed == 1)
        return DRV_CLI_OK;
    fprintf(stderr, "error: deployment '%s' has %zu placed replicas; --follow needs one: "
            "pick it with --replica (see drover get replicas -d %s)\n", dep, placed, dep);
    return DRV_CLI_FAIL;
}

static int run_logs(drv_cli_t *cli, const drv_cli_args_t *a)
{
    const char *dep;
    drv_cli_objects_t objs;
    int prc = drv_cli_objects(a, "deployment", &objs);
    if (prc)
        return prc;
    bool job = objs.kind && strcmp(objs.kind->singular, "job") == 0;
    if (!job && (prc = drv_cli_one_object(a, "deployment", &dep)))
        return prc;
    if (job && objs.nids != 1)
        return drv_cli_usage(a, "expected one job: job/ID or job ID");
    if (job)
        dep = objs.ids[0];
    const char *coll = job ? "jobs" : "deployments", *one_key = job ? "rank" : "replica";
    if (job && drv_cli_opt(a, "replica"))
        return drv_cli_usage(a, "--replica is for deployments; a job's worker is --rank N");
    if (!job && drv_cli_opt(a, "rank"))
        return drv_cli_usage(a, "--rank is for jobs; a deployment's replica is --replica R");
    long long tail = 16384;
    if (drv_cli_opt_long(a, "tail", 1, 4 << 20, &tail) < 0)
        return DRV_CLI_USAGE;
    const char *replica = drv_cli_opt(a, job ? "rank" : "replica");
    bool follow = drv_cli_flag(a, "follow");
    if (job && replica) {
        long long rk;
        if (drv_cli_opt_long(a, "rank", 0, 4095, &rk) < 0)
            return DRV_CLI_USAGE;
    }
    if (job && follow && !replica)
        replica = "0";
    drv_error_t err;
    if (drv_cli_connect(cli, &err) < 0)
        return drv_cli_fail(cli, &err);
    char chosen[160];
    if (follow && !replica && !job) {
        int rc = pick_replica(cli, dep, chosen, sizeof chosen);
        if (rc != DRV_CLI_OK)
            return rc;
        replica = chosen;
    }
    char path[700];
    if (!replica) {
        drv_cli_pathf(path, sizeof path, "/v1/%s/%s/logs", coll, dep);
        snprintf(path + strlen(path), sizeof path - strlen(path), "?offset=-%lld", tail);
        drv_http_resp_t resp;
        if (drv_httpc_request(cli->http, "GET", path, NULL, NULL, &resp, &err) < 0)
            return drv_cli_fail(cli, &err);
        int rc = DRV_CLI_OK;
        if (resp.status == 200) {
            fwrite(resp.body, 1, resp.len, stdout);
        } else {
            json_t *j = json_loads(resp.body, 0, NULL);
            const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
            fprintf(stderr, "error: %s\n", m ? m : resp.body);
            json_decref(j);
            rc = DRV_CLI_FAIL;
        }
        drv_http_resp_free(&resp);
        return rc;
    }
    signal(SIGINT, on_sigint);
    long long offset = -tail;
    int misses = 0;
    for (;;) {
        drv_cli_pathf(path, sizeof path, "/v1/%s/%s/logs?%s=%s", coll, dep, one_key, replica);
        snprintf(path + strlen(path), sizeof path - strlen(path), "&format=json&offset=%lld",
                 offset);
        long status = 0;
        json_t *doc = drv_cli_call(cli, "GET", path, NULL, NULL, &status, &err);
        if (!doc) {
            /* while following, a node that is briefly away is not the end */
            if (follow && status == 503 && misses++ < 30 && !interrupted) {
                sleep(1);
                continue;
            }
            return drv_cli_fail(cli, &err);
        }
        misses = 0;
        const char *text = json_string_value(json_object_get(doc, "text"));
        if (text && *text) {
            fputs(text, stdout);
            fflush(stdout);
        }
        offset = json_integer_value(json_object_get(doc, "next_offset"));
        json_decref(doc);
        if (!follow || interrupted)
            break;
        usleep(500 * 1000);
        if (interrupted)
            break;
    }
    return DRV_CLI_OK;
}

static const drv_cli_opt_t logs_opts[] = {
    {"replica", 'r', "REPLICA", "one replica (default: every placed replica's tail)"},
    {"rank", 0, "N", "a job's worker of rank N (default: every running worker's tail)"},
    {"follow", 'f', NULL, "keep printing new lines (one replica; Ctrl-C stops)"},
    {"tail", 0, "BYTES", "how much of the end to show first (default 16384)"},
    {NULL, 0, NULL, NULL},
};

const drv_cli_cmd_t drv_cli_cmd_logs = {
    .name = "logs",
    .summary = "print the logs of a deployment's replicas or a job's workers",
    .usage = "logs deployment/ID | deployment ID | job/ID [--replica R | --rank N] [--follow] "
             "[--tail BYTES]",
    .help = "Prints the replicas' stdout and stderr, as captured by their node's agent\n"
            "(size-capped, rotated files). Without --replica: the tail of every placed\n"
            "replica, each under a '==> replica R (node N) <==' header. --follow keeps\n"
            "printing one replica's new output; with one placed replica it is picked for you.\n"
            "A job's workers (job/ID) are shown the same way, under '==> worker W (node N)\n"
            "<==' headers; --rank N picks one (--follow: rank 0 unless --rank says).\n"
            "\nExamples:\n"
            "  drover logs deployment/demo\n"
            "  drover logs deployment/demo --replica demo-3f2a1c --follow\n"
            "  drover logs job/train --rank 1\n",
    .opts = logs_opts,
    .min_pos = 1,
    .max_pos = 2,
    .run = run_logs,
};
