/* cli_events.c — `drover events [KIND/ID | KIND ID] [--limit N] [--all-users]`: what
 * the controller decided and why (GET /v1/events), oldest first; and the
 * "Events:" section that `drover describe` prints under an object. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static int run_events(drv_cli_t *cli, const drv_cli_args_t *a)
{
    long long limit = 100;
    if (drv_cli_opt_long(a, "limit", 1, 4096, &limit) < 0)
        return DRV_CLI_USAGE;
    char kind[32] = "", object[200] = "";
    if (a->npos > 0) {
        drv_cli_objects_t objs;
        int rc = drv_cli_objects(a, NULL, &objs);
        if (rc)
            return rc;
        if (objs.nids != 1)
            return drv_cli_usage(a, "expected one object: KIND/ID or KIND ID (node/ID, "
                                    "nodepool/CLUSTER/NODEPOOL, deployment/ID, cluster/ID)");
        snprintf(kind, sizeof kind, "%s", objs.kind->singular);
        snprintf(object, sizeof object, "%s", objs.ids[0]);
        if (strcmp(kind, "node") != 0 && strcmp(kind, "nodepool") != 0 &&
            strcmp(kind, "deployment") != 0 && strcmp(kind, "cluster") != 0)
            return drv_cli_usage(a, "events are about node, nodepool, deployment or cluster, "
                                    "not '%s'", kind);
    }
    char path[512];
    if (strcmp(kind, "cluster") == 0)   /* the cluster's and its nodepools' */
        drv_cli_pathf(path, sizeof path, "/v1/events?cluster=%s", object);
    else if (kind[0])
        drv_cli_pathf(path, sizeof path, "/v1/events?kind=%s&object=%s", kind, object);
    else
        snprintf(path, sizeof path, "/v1/events?");
    snprintf(path + strlen(path), sizeof path - strlen(path), "%slimit=%lld%s",
             kind[0] ? "&" : "", limit, drv_cli_flag(a, "all-users") ? "&all_users=true" : "");
    drv_error_t err;
    long status;
    json_t *doc = drv_cli_call(cli, "GET", path, NULL, NULL, &status, &err);
    if (!doc)
        return drv_cli_fail(cli, &err);
    json_t *items = json_object_get(doc, "items");
    int rc = DRV_CLI_OK;
    if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML) {
        rc = drv_cli_print_doc(cli, items);
    } else if (json_array_size(items) == 0) {
        fprintf(stderr, "No events found.\n");
    } else {
        printf("%-20s  %-10s  %-24s  %-18s  %s\n", "TIME", "KIND", "OBJECT", "TYPE", "REASON");
        size_t i;
        json_t *e;
        json_array_foreach(items, i, e) {
            printf("%-20s  %-10s  %-24s  %-18s  %s\n",
                   json_string_value(json_object_get(e, "time")),
                   json_string_value(json_object_get(e, "kind")),
                   json_string_value(json_object_get(e, "object")),
                   json_string_value(json_object_get(e, "type")),
                   json_string_value(json_object_get(e, "reason")));
        }
    }
    json_decref(doc);
    return rc;
}

int drv_cli_describe_events(drv_cli_t *cli, const char *query)
{
    char path[600];
    snprintf(path, sizeof path, "/v1/events?%s&limit=50", query);
    drv_error_t err;
    json_t *doc = drv_cli_call(cli, "GET", path, NULL, NULL, NULL, &err);
    if (!doc)
        return drv_cli_fail(cli, &err);
    json_t *items = json_object_get(doc, "items");
    if (json_array_size(items) == 0) {
        printf("Events:  <none>\n");
        json_decref(doc);
        return DRV_CLI_OK;
    }
    printf("Events:\n  %-18s  %-5s  %s\n", "TYPE", "AGE", "MESSAGE");
    size_t i;
    json_t *e;
    json_array_foreach(items, i, e) {
        char age[32];
        drv_cli_age(json_string_value(json_object_get(e, "time")), age, sizeof age);
        printf("  %-18s  %-5s  %s\n", json_string_value(json_object_get(e, "type")), age,
               json_string_value(json_object_get(e, "reason")));
    }
    json_decref(doc);
    return DRV_CLI_OK;
}

static const drv_cli_opt_t events_opts[] = {
    {"limit", 0, "N", "at most N events, the newest (default 100)"},
    {"all-users", 'A', NULL, "everyone's (admins)"},
    {NULL, 0, NULL, NULL},
};

const drv_cli_cmd_t drv_cli_cmd_events = {
    .name = "events",
    .summary = "what the controller decided and why (scaling, nodes)",
    .usage = "events [KIND/ID | KIND ID] [--limit N] [--all-users]",
    .help = "Lists recent decisions with their reasons, oldest first: replicas scaled up\n"
            "or down, nodes asked for or released by the node autoscaler, nodes that\n"
            "joined, went not_ready or were lost. Kept in droverd's memory (the last\n"
            "4096; a restart starts afresh).\n"
            "\nExamples:\n"
            "  drover events\n"
            "  drover events deployment/demo\n"
            "  drover events nodepool/demo/gpu -o json\n"
            "  drover events cluster/demo        # the cluster's and its nodepools'\n",
    .opts = events_opts,
    .min_pos = 0,
    .max_pos = 2,
    .run = run_events,
};
