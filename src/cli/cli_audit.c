/* cli_audit.c — `drover audit [--user U] [--kind K] [--since TIME]
 * [--limit N]`: the head's audit log of writes (GET /v1/audit; admins
 * only), newest first, following next_page_token until --limit entries. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

/* The query of one page: the filters, page size and token. */
static int audit_path(const drv_cli_args_t *a, long long page, const char *token, char *path,
                      size_t n)
{
    static const char *const filters[] = {"user", "kind", "since", NULL};
    snprintf(path, n, "/v1/audit?limit=%lld", page);
    for (int i = 0; filters[i]; i++) {
        const char *v = drv_cli_opt(a, filters[i]);
        if (!v)
            continue;
        char part[400];
        if (!*v || drv_cli_pathf(part, sizeof part, "&%s=%s", filters[i], v) < 0)
            return drv_cli_usage(a, "bad --%s \"%s\"", filters[i], v);
        snprintf(path + strlen(path), n - strlen(path), "%s", part);
    }
    if (token) {
        char part[128];
        if (drv_cli_pathf(part, sizeof part, "&page_token=%s", token) < 0)
            return drv_cli_usage(a, "bad page token");
        snprintf(path + strlen(path), n - strlen(path), "%s", part);
    }
    return 0;
}

static int run_audit(drv_cli_t *cli, const drv_cli_args_t *a)
{
    long long limit = 100;
    if (drv_cli_opt_long(a, "limit", 1, 100000, &limit) < 0)
        return DRV_CLI_USAGE;
    json_t *all = json_array();
    char token[64] = "";
    int rc = DRV_CLI_OK;
    while ((long long)json_array_size(all) < limit) {
        char path[1600];
        long long left = limit - (long long)json_array_size(all);
        if ((rc = audit_path(a, left < 1000 ? left : 1000, token[0] ? token : NULL, path,
                             sizeof path)) != 0)
            break;
        drv_error_t err;
        json_t *doc = drv_cli_call(cli, "GET", path, NULL, NULL, NULL, &err);
        if (!doc) {
            rc = drv_cli_fail(cli, &err);
            break;
        }
        json_array_extend(all, json_object_get(doc, "items"));
        const char *next = json_string_value(json_object_get(doc, "next_page_token"));
        snprintf(token, sizeof token, "%s", next ? next : "");
        json_decref(doc);
        if (!token[0])
            break;
    }
    if (rc == DRV_CLI_OK) {
        if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML) {
            rc = drv_cli_print_doc(cli, all);
        } else if (json_array_size(all) == 0) {
            fprintf(stderr, "No audit entries found.\n");
        } else {
            printf("%-20s  %-12s  %-6s  %-40s  %-6s  %s\n", "TIME", "USER", "METHOD", "PATH",
                   "STATUS", "FROM");
            size_t i;
            json_t *e;
            json_array_foreach(all, i, e) {
                printf("%-20s  %-12s  %-6s  %-40s  %-6lld  %s\n",
                       json_string_value(json_object_get(e, "at")),
                       json_string_value(json_object_get(e, "user")),
                       json_string_value(json_object_get(e, "method")),
                       json_string_value(json_object_get(e, "path")),
                       (long long)json_integer_value(json_object_get(e, "status")),
                       json_string_value(json_object_get(e, "remote")));
            }
        }
    }
    json_decref(all);
    return rc;
}

static const drv_cli_opt_t audit_opts[] = {
    {"user", 0, "USER", "one user's writes"},
    {"kind", 0, "KIND", "writes under /v1/KIND (clusters, nodes, users, tokens, ...)"},
    {"since", 0, "TIME", "at or after TIME (RFC 3339, or unix seconds)"},
    {"limit", 0, "N", "at most N entries, the newest (default 100)"},
    {NULL, 0, NULL, NULL},
};

const drv_cli_cmd_t drv_cli_cmd_audit = {
    .name = "audit",
    .summary = "the audit log of writes: who, what, when, from where (admins)",
    .usage = "audit [--user USER] [--kind KIND] [--since TIME] [--limit N]",
    .help = "Lists writes made with users' tokens, newest first: the time, the user (and\n"
            "token id), method, path, the answer's status and the client's address\n"
            "(GET /v1/audit, admins only). The log is kept in the head's store: it\n"
            "survives restarts and is bounded by droverd's --audit-max-entries and\n"
            "--audit-max-age. Bodies are never logged, so no secret is in it.\n"
            "\nExamples:\n"
            "  drover audit\n"
            "  drover audit --user bob --since 2026-01-02T00:00:00Z\n"
            "  drover audit --kind nodes --limit 20 -o json\n",
    .opts = audit_opts,
    .min_pos = 0,
    .max_pos = 0,
    .run = run_audit,
};
