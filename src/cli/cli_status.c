/* cli_status.c — `drover status`: the heads of this drover (GET /v1/status):
 * which one leads, the lease's epoch and expiry, each standby's lag behind
 * the record log. With SQLite there is one head, always the leader. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static int run_status(drv_cli_t *cli, const drv_cli_args_t *a)
{
    (void)a;
    drv_error_t err;
    long status;
    json_t *doc = drv_cli_call(cli, "GET", "/v1/status", NULL, NULL, &status, &err);
    if (!doc)
        return drv_cli_fail(cli, &err);
    int rc = DRV_CLI_OK;
    if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML) {
        rc = drv_cli_print_doc(cli, doc);
        json_decref(doc);
        return rc;
    }
    json_t *lease = json_object_get(doc, "lease");
    printf("Store:   %s\n", json_string_value(json_object_get(doc, "store")));
    if (json_is_object(lease))
        printf("Lease:   epoch %lld, held by %s, expires in %lld ms (TTL %lld ms)\n",
               (long long)json_integer_value(json_object_get(lease, "epoch")),
               json_string_value(json_object_get(lease, "holder")),
               (long long)json_integer_value(json_object_get(lease, "expires_in_ms")),
               (long long)json_integer_value(json_object_get(lease, "ttl_ms")));
    else
        printf("Lease:   none (one head)\n");
    printf("Log:     seq %lld\n\n", (long long)json_integer_value(json_object_get(doc, "log_seq")));
    printf("%-28s  %-8s  %-32s  %8s  %s\n", "HEAD", "ROLE", "URL", "LAG", "SEEN");
    size_t i;
    json_t *h;
    json_array_foreach(json_object_get(doc, "heads"), i, h) {
        char seen[32] = "-";
        json_t *ago = json_object_get(h, "seen_ms_ago");
        if (ago)
            snprintf(seen, sizeof seen, "%.1fs ago", (double)json_integer_value(ago) / 1000);
        printf("%-28s  %-8s  %-32s  %8lld  %s%s\n", json_string_value(json_object_get(h, "id")),
               json_string_value(json_object_get(h, "role")),
               json_string_value(json_object_get(h, "url")),
               (long long)json_integer_value(json_object_get(h, "lag")), seen,
               json_is_true(json_object_get(h, "self")) ? "  (answered)" : "");
    }
    json_decref(doc);
    return rc;
}

static const drv_cli_opt_t status_opts[] = {
    {NULL, 0, NULL, NULL},
};

const drv_cli_cmd_t drv_cli_cmd_status = {
    .name = "status",
    .summary = "the heads: which one leads, the lease, each standby's lag",
    .usage = "status",
    .help = "Shows the heads that share this drover's PostgreSQL store: their roles\n"
            "(leader, standby, gone), the leader lease's epoch and expiry (judged by the\n"
            "database's clock) and how many records of the log each standby has not\n"
            "applied yet. A standby answers this too, so it works with any head in\n"
            "--server. With SQLite there is one head, the leader.\n"
            "\nExamples:\n"
            "  drover status\n"
            "  drover --server http://h1:7480,http://h2:7480 status -o json\n",
    .opts = status_opts,
    .min_pos = 0,
    .max_pos = 0,
    .run = run_status,
};
