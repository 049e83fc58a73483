/* cli_get.c — `drover get`, `describe` and `delete`: the resource kinds the
 * CLI knows (names, aliases, API paths) and the three generic verbs over
 * them.
 *
 * Nodepools live under their cluster and are addressed CLUSTER/NODEPOOL
 * (or NODEPOOL with --cluster CLUSTER). Lists follow next_page_token to the
 * end (drv_cli_list), so scripts always see every item.
 */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

typedef struct kind {
    const char *name;            /* plural; also the table layout */
    const char *singular;        /* for "cluster/demo created" */
    const char *aliases[3];
    const char *coll;            /* "clusters" in /v1/clusters */
    bool nested;                 /* nodepools: under /v1/clusters/{c}/ */
    bool read_only;              /* the catalog */
    const char *deleted;         /* verb printed by delete */
} kind_t;

static const kind_t kinds[] = {
    {"clusters", "cluster", {"cl", NULL}, "clusters", false, false, "deleted"},
    {"nodepools", "nodepool", {"np", NULL}, "nodepools", true, false, "deleted"},
    {"models", "model", {NULL}, "models", false, false, "deleted"},
    {"deployments", "deployment", {"deploy", NULL}, "deployments", false, false, "deleted"},
    {"users", "user", {NULL}, "users", false, false, "deleted"},
    {"tokens", "token", {NULL}, "tokens", false, false, "revoked"},
    {"instance-types", "instance-type", {"it", NULL}, "instance-types", false, true, NULL},
    {"providers", "provider", {NULL}, "providers", false, true, NULL},
    {NULL, NULL, {NULL}, NULL, false, false, NULL},
};

static const kind_t *find_kind(const char *name)
{
    for (const kind_t *k = kinds; k->name; k++) {
        if (strcmp(k->name, name) == 0 || strcmp(k->singular, name) == 0)
            return k;
        for (int i = 0; i < 3 && k->aliases[i]; i++)
            if (strcmp(k->aliases[i], name) == 0)
                return k;
    }
    return NULL;
}

/* The kind named by the first argument, or a usage error. */
static int kind_arg(const drv_cli_args_t *a, const kind_t **out)
{
    *out = find_kind(a->pos[0]);
    if (*out)
        return 0;
    return drv_cli_usage(a, "unknown kind \"%s\" (one of: clusters, nodepools, models, "
                         "deployments, users, tokens, instance-types, providers)", a->pos[0]);
}

/* Path and label ("nodepool/demo/gpu") of one object. */
static int object_path(const drv_cli_args_t *a, const kind_t *k, const char *id, char *path,
                       size_t n, char *label, size_t ln)
{
    const char *cluster = drv_cli_opt(a, "cluster");
    int rc;
    if (k->nested) {
        char c[256], np[256];
        const char *slash = strchr(id, '/');
        if (slash) {
            snprintf(c, sizeof c, "%.*s", (int)(slash - id), id);
            snprintf(np, sizeof np, "%s", slash + 1);
        } else if (cluster) {
            snprintf(c, sizeof c, "%s", cluster);
            snprintf(np, sizeof np, "%s", id);
        } else {
            return drv_cli_usage(a, "nodepools are addressed as CLUSTER/NODEPOOL (e.g. demo/gpu), "
                                 "or NODEPOOL with --cluster CLUSTER");
        }
        if (!c[0] || !np[0] || strchr(np, '/'))
            return drv_cli_usage(a, "bad nodepool \"%s\": expected CLUSTER/NODEPOOL", id);
        rc = drv_cli_pathf(path, n, "/v1/clusters/%s/nodepools/%s", c, np);
        snprintf(label, ln, "%s/%s/%s", k->singular, c, np);
    } else {
        if (cluster)
            return drv_cli_usage(a, "--cluster applies to nodepools only");
        if (!*id)
            return drv_cli_usage(a, "empty id");
        rc = drv_cli_pathf(path, n, "/v1/%s/%s", k->coll, id);
        snprintf(label, ln, "%s/%s", k->singular, id);
    }
    if (rc < 0)
        return drv_cli_usage(a, "id too long");
    return 0;
}

static int list_path(const drv_cli_args_t *a, const kind_t *k, char *path, size_t n)
{
    const char *cluster = drv_cli_opt(a, "cluster");
    bool all = drv_cli_flag(a, "all-users");
    int rc;
    if (cluster && !k->nested)
        return drv_cli_usage(a, "--cluster applies to nodepools only");
    if (cluster)
        rc = drv_cli_pathf(path, n, "/v1/clusters/%s/nodepools", cluster);
    else
        rc = drv_cli_pathf(path, n, "/v1/%s", k->coll);
    if (rc < 0)
        return drv_cli_usage(a, "--cluster too long");
    if (all)
        strncat(path, "?all_users=true", n - strlen(path) - 1);
    return 0;
}

/* GET each object named on the command line; an array of them. */
static json_t *get_each(drv_cli_t *cli, const drv_cli_args_t *a, const kind_t *k, int *rc)
{
    drv_error_t err = {0};
    char path[1024], label[600];
    json_t *objs = json_array();
    for (int i = 1; i < a->npos; i++) {
        if ((*rc = object_path(a, k, a->pos[i], path, sizeof path, label, sizeof label)) != 0)
            goto error;
        json_t *obj = drv_cli_call(cli, "GET", path, NULL, NULL, NULL, &err);
        if (!obj) {
            *rc = drv_cli_fail(cli, &err);
            goto error;
        }
        json_array_append_new(objs, obj);
    }
    *rc = DRV_CLI_OK;
    return objs;
error:
    json_decref(objs);
    return NULL;
}

static int run_get(drv_cli_t *cli, const drv_cli_args_t *a)
{
    const kind_t *k;
    int rc = kind_arg(a, &k);
    if (rc)
        return rc;
    bool all = drv_cli_flag(a, "all-users");
    if (a->npos > 1) {
        if (all)
            return drv_cli_usage(a, "--all-users applies to lists (no ID)");
        json_t *objs = get_each(cli, a, k, &rc);
        if (!objs)
            return rc;
        if (json_array_size(objs) == 1)
            rc = drv_cli_print(cli, k->name, json_array_get(objs, 0), false, false);
        else
            rc = drv_cli_print(cli, k->name, objs, true, false);
        json_decref(objs);
        return rc;
    }
    char path[1024];
    drv_error_t err = {0};
    if ((rc = list_path(a, k, path, sizeof path)) != 0)
        return rc;
    json_t *items = drv_cli_list(cli, path, &err);
    if (!items)
        return drv_cli_fail(cli, &err);
    rc = drv_cli_print(cli, k->name, items, true, all);
    json_decref(items);
    return rc;
}

static int run_describe(drv_cli_t *cli, const drv_cli_args_t *a)
{
    const kind_t *k;
    int rc = kind_arg(a, &k);
    if (rc)
        return rc;
    json_t *objs = get_each(cli, a, k, &rc);
    if (!objs)
        return rc;
    if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML) {
        rc = drv_cli_print_doc(cli, json_array_size(objs) == 1 ? json_array_get(objs, 0) : objs);
    } else {
        size_t i;
        json_t *obj;
        json_array_foreach(objs, i, obj) {
            if (i)
                fputc('\n', stdout);
            drv_cli_describe(obj);
        }
    }
    json_decref(objs);
    return rc;
}

static int run_delete(drv_cli_t *cli, const drv_cli_args_t *a)
{
    const kind_t *k;
    int rc = kind_arg(a, &k);
    if (rc)
        return rc;
    if (k->read_only)
        return drv_cli_usage(a, "%s are read-only", k->name);
    bool cascade = drv_cli_flag(a, "cascade");
    bool structured = cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML;
    json_t *done = json_array();
    drv_error_t err = {0};
    for (int i = 1; i < a->npos && rc == DRV_CLI_OK; i++) {
        char path[1100], label[600];
        if ((rc = object_path(a, k, a->pos[i], path, sizeof path, label, sizeof label)) != 0)
            break;
        if (cascade)
            strncat(path, "?cascade=true", sizeof path - strlen(path) - 1);
        json_t *obj = drv_cli_call(cli, "DELETE", path, NULL, NULL, NULL, &err);
        if (!obj) {
            rc = drv_cli_fail(cli, &err);
            break;
        }
        if (structured)
            json_array_append(done, obj);
        else
            printf("%s %s\n", label, k->deleted);
        json_decref(obj);
    }
    if (structured && json_array_size(done) > 0)
        drv_cli_print_doc(cli, json_array_size(done) == 1 ? json_array_get(done, 0) : done);
    json_decref(done);
    return rc;
}

#define KINDS_HELP                                                                  \
    "Kinds (singular, plural or short form): clusters (cluster, cl),\n"              \
    "nodepools (nodepool, np), models (model), deployments (deployment, deploy),\n"  \
    "users (user), tokens (token), instance-types (instance-type, it),\n"            \
    "providers (provider). Nodepools are addressed as CLUSTER/NODEPOOL, or\n"        \
    "NODEPOOL with --cluster CLUSTER.\n"

static const drv_cli_opt_t get_opts[] = {
    {"cluster", 0, "CLUSTER", "nodepools: only this cluster's (or the cluster of ID)"},
    {"all-users", 'A', NULL, "admins: list every user's resources (adds an OWNER column)"},
    {NULL, 0, NULL, NULL},
};

static const drv_cli_opt_t describe_opts[] = {
    {"cluster", 0, "CLUSTER", "nodepools: the cluster of ID"},
    {NULL, 0, NULL, NULL},
};

static const drv_cli_opt_t delete_opts[] = {
    {"cluster", 0, "CLUSTER", "nodepools: the cluster of ID"},
    {"cascade", 0, NULL, "also delete the object's children (a cluster's nodepools, ...)"},
    {NULL, 0, NULL, NULL},
};

#define GET_HELP_EXAMPLES                                                     \
    "\nExamples:\n"                                                           \
    "  drover get clusters\n"                                                 \
    "  drover get nodepools --cluster demo -o wide\n"                         \
    "  drover get nodepool demo/gpu -o json\n"                                \
    "  drover get deployments --all-users\n"                                  \
    "  drover get instance-types -o json | jq '.[].id'\n"

const drv_cli_cmd_t drv_cli_cmd_get = {
    .name = "get",
    .summary = "list resources, or show some as a table or JSON/YAML",
    .usage = "get KIND [ID...] [flags]",
    .help = "Without ID, lists every object of KIND (all pages). -o json prints the\n"
            "list as a JSON array of objects, or the object itself for one ID.\n\n"
             KINDS_HELP  GET_HELP_EXAMPLES,
    .opts = get_opts,
    .min_pos = 1,
    .max_pos = -1,
    .run = run_get,
};

const drv_cli_cmd_t drv_cli_cmd_describe = {
    .name = "describe",
    .summary = "show one resource in detail",
    .usage = "describe KIND ID [ID...] [flags]",
    .help = "Prints every field of the object, nested objects indented.\n\n"
             KINDS_HELP 
            "\nExamples:\n"
            "  drover describe deployment demo\n"
            "  drover describe nodepool demo/gpu\n"
            "  drover describe instance-type g5.xlarge\n",
    .opts = describe_opts,
    .min_pos = 2,
    .max_pos = -1,
    .run = run_describe,
};

const drv_cli_cmd_t drv_cli_cmd_delete = {
    .name = "delete",
    .summary = "delete resources",
    .usage = "delete KIND ID [ID...] [--cascade]",
    .help = "Deleting a parent that still has children (a cluster with nodepools, a user\n"
            "with resources) is refused unless --cascade is given. Deleting a token\n"
            "revokes it.\n\n"
             KINDS_HELP 
            "\nExamples:\n"
            "  drover delete deployment demo\n"
            "  drover delete nodepool demo/gpu\n"
            "  drover delete cluster demo --cascade\n",
    .opts = delete_opts,
    .min_pos = 2,
    .max_pos = -1,
    .run = run_delete,
};
