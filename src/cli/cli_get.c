/* cli_get.c — `drover get`, `describe` and `delete`: the resource kinds the
 * CLI knows (names, aliases, API paths, list filters) and the three generic
 * verbs over them.
 *
 * Nested kinds live under a parent and are addressed PARENT/ID (or ID with
 * --PARENT): nodepools under their cluster (CLUSTER/NODEPOOL), replicas
 * under their deployment (DEPLOYMENT/REPLICA). Objects are named "KIND ID..."
 * or "KIND/ID..." (drv_cli_objects, cli_objects.c). Lists follow
 * next_page_token to the end (drv_cli_list), so scripts always see every
 * item.
 */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

typedef struct kind {
    const char *name;            /* plural (drv_cli_kind); also the table layout */
    const char *singular;        /* for "cluster/demo created" */
    const char *coll;            /* "clusters" in /v1/clusters */
    /* nested kinds: the parent's flag and singular ("cluster") and its
     * collection ("clusters"): /v1/clusters/{c}/nodepools/{np} */
    const char *parent;
    const char *parent_coll;
    const char *example;         /* of PARENT/ID, for messages */
    /* flags of `get` passed to lists as query arguments of the same name */
    const char *filters[3];
    bool mine_only;              /* the list takes no ?all_users=true */
    const char *no_delete;       /* why delete is refused; NULL: it is not */
    const char *deleted;         /* verb printed by delete */
    /* describe in table mode; NULL: the generic key/value view */
    int (*describe)(drv_cli_t *cli, const json_t *obj);
    /* the kind its events are under (GET /v1/events?kind=); NULL: none */
    const char *events;
} kind_t;

static const kind_t kinds[] = {
    {.name = "clusters", .singular = "cluster", .coll = "clusters",
     .deleted = "deleted", .events = "cluster"},
    {.name = "credentials", .singular = "credential", .coll = "credentials", .deleted = "deleted"},
    {.name = "stores", .singular = "store", .coll = "stores", .deleted = "deleted"},
    {.name = "nodepools", .singular = "nodepool", .coll = "nodepools",
     .parent = "cluster", .parent_coll = "clusters", .example = "demo/gpu",
     .deleted = "deleted", .events = "nodepool"},
    {.name = "models", .singular = "model", .coll = "models", .deleted = "deleted"},
    {.name = "artifacts", .singular = "artifact", .coll = "artifacts", .deleted = "deleted",
     .describe = drv_cli_describe_artifact},
    {.name = "deployments", .singular = "deployment", .coll = "deployments", .deleted = "deleted", .events = "deployment",
     .describe = drv_cli_describe_deployment},
    {.name = "jobs", .singular = "job", .coll = "jobs", .deleted = "deleted", .events = "job",
     .describe = drv_cli_describe_job},
    {.name = "queues", .singular = "queue", .coll = "queues",
     .no_delete = "queues are the jobs' own: delete or cancel jobs"},
    {.name = "nodes", .singular = "node", .coll = "nodes",
     .filters = {"cluster", "nodepool"}, .deleted = "terminating",
     .describe = drv_cli_describe_node, .events = "node"},
    {.name = "replicas", .singular = "replica", .coll = "replicas",
     .parent = "deployment", .parent_coll = "deployments", .example = "demo/demo-1a2b3c",
     .filters = {"node", "cluster"}, .mine_only = true, .describe = drv_cli_describe_replica,
     .no_delete = "replicas belong to their deployment: change its autoscale.min_replicas "
                  "and max_replicas, or delete the deployment"},
    {.name = "users", .singular = "user", .coll = "users", .deleted = "deleted"},
    {.name = "tokens", .singular = "token", .coll = "tokens", .deleted = "revoked"},
    {.name = "instance-types", .singular = "instance-type", .coll = "instance-types", .no_delete = "instance-types are read-only"},
    {.name = "providers", .singular = "provider", .coll = "providers",
     .no_delete = "providers are read-only"},
    {.name = NULL},
};

/* The flags that name a parent or filter a list; each must apply to the
 * kind at hand. */
static const char *const scope_flags[] = {"cluster", "nodepool", "deployment", "node", NULL};

static const kind_t *find_kind(const drv_cli_kind_t *names)
{
    for (const kind_t *k = kinds; k->name && names; k++)
        if (strcmp(k->name, names->plural) == 0)
            return k;
    return NULL;
}

static bool is_filter(const kind_t *k, const char *flag)
{
    for (int i = 0; i < 3 && k->filters[i]; i++)
        if (strcmp(k->filters[i], flag) == 0)
            return true;
    return false;
}

/* "nodepools and nodes": the kinds a scope flag applies to. */
static void kinds_of_flag(const char *flag, char *out, size_t n)
{
    size_t len = 0;
    int count = 0, total = 0;
    for (const kind_t *k = kinds; k->name; k++)
        if ((k->parent && strcmp(k->parent, flag) == 0) || is_filter(k, flag))
            total++;
    out[0] = '\0';
    for (const kind_t *k = kinds; k->name && len < n; k++) {
        if (!((k->parent && strcmp(k->parent, flag) == 0) || is_filter(k, flag)))
            continue;
        count++;
        len += (size_t)snprintf(out + len, n - len, "%s%s",
                                count == 1 ? "" : count == total ? " and " : ", ", k->name);
    }
}

/* The kind and ids of the arguments (KIND ID... or KIND/ID...), or a usage
 * error; need_ids: at least one ID. Also checks that every scope flag given
 * applies to the kind: a parent flag always, a filter only when lists are
 * asked for (no ID). */
static int kind_arg(const drv_cli_args_t *a, bool need_ids, const kind_t **out,
                    drv_cli_objects_t *objs)
{
    int rc = drv_cli_objects(a, NULL, objs);
    if (rc)
        return rc;
    *out = find_kind(objs->kind);
    if (!*out)
        return drv_cli_usage(a, "missing KIND (usage: drover %s)", a->cmd->usage);
    if (need_ids && objs->nids == 0)
        return drv_cli_usage(a, "missing ID (usage: drover %s)", a->cmd->usage);
    bool with_ids = objs->nids > 0;
    for (int i = 0; scope_flags[i]; i++) {
        const char *f = scope_flags[i];
        if (!drv_cli_flag(a, f))
            continue;
        bool parent = (*out)->parent && strcmp((*out)->parent, f) == 0;
        if (parent)
            continue;
        if (!is_filter(*out, f)) {
            char which[256];
            kinds_of_flag(f, which, sizeof which);
            return drv_cli_usage(a, "--%s applies to %s only", f, which);
        }
        if (with_ids)
            return drv_cli_usage(a, "--%s filters lists: give no ID with it", f);
    }
    return 0;
}

/* "CLUSTER" from "cluster", for messages. */
static const char *upper_of(const char *s, char *out, size_t n)
{
    size_t i = 0;
    for (; s[i] && i + 1 < n; i++)
        out[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 'a' + 'A' : s[i]);
    out[i] = '\0';
    return out;
}

/* Path and label ("nodepool/demo/gpu") of one object. */
static int object_path(const drv_cli_args_t *a, const kind_t *k, const char *id, char *path,
                       size_t n, char *label, size_t ln)
{
    int rc;
    if (!*id)
        return drv_cli_usage(a, "empty id");
    if (k->parent) {
        const char *given = drv_cli_opt(a, k->parent);
        char p[256], child[256], pu[64], cu[64];
        const char *slash = strchr(id, '/');
        if (slash) {
            snprintf(p, sizeof p, "%.*s", (int)(slash - id), id);
            snprintf(child, sizeof child, "%s", slash + 1);
        } else if (given) {
            snprintf(p, sizeof p, "%s", given);
            snprintf(child, sizeof child, "%s", id);
        } else {
            upper_of(k->parent, pu, sizeof pu);
            upper_of(k->singular, cu, sizeof cu);
            return drv_cli_usage(a, "%s are addressed as %s/%s (e.g. %s), or %s with --%s %s",
                                 k->name, pu, cu, k->example, cu, k->parent, pu);
        }
        if (!p[0] || !child[0] || strchr(child, '/'))
            return drv_cli_usage(a, "bad %s \"%s\": expected %s/%s", k->singular, id,
                                 upper_of(k->parent, pu, sizeof pu),
                                 upper_of(k->singular, cu, sizeof cu));
        rc = drv_cli_pathf(path, n, "/v1/%s/%s/%s/%s", k->parent_coll, p, k->coll, child);
        snprintf(label, ln, "%s/%s/%s", k->singular, p, child);
    } else {
        rc = drv_cli_pathf(path, n, "/v1/%s/%s", k->coll, id);
        snprintf(label, ln, "%s/%s", k->singular, id);
    }
    if (rc < 0)
        return drv_cli_usage(a, "id too long");
    return 0;
}

/* The list path: /v1/<coll>, or /v1/<parent_coll>/P/<coll> with --PARENT,
 * plus the filters given as query arguments. */
static int list_path(const drv_cli_args_t *a, const kind_t *k, char *path, size_t n)
{
    const char *parent = k->parent ? drv_cli_opt(a, k->parent) : NULL;
    char sep = '?', npc[256] = "";
    int rc;
    if (parent && (!*parent || strchr(parent, '/')))
        return drv_cli_usage(a, "bad --%s \"%s\"", k->parent, parent);
    if (parent)
        rc = drv_cli_pathf(path, n, "/v1/%s/%s/%s", k->parent_coll, parent, k->coll);
    else
        rc = drv_cli_pathf(path, n, "/v1/%s", k->coll);
    if (rc < 0)
        return drv_cli_usage(a, "arguments too long");
    /* --nodepool CLUSTER/NODEPOOL is --cluster CLUSTER --nodepool NODEPOOL */
    const char *np = is_filter(k, "nodepool") ? drv_cli_opt(a, "nodepool") : NULL;
    const char *slash = np ? strchr(np, '/') : NULL;
    if (slash) {
        const char *c = drv_cli_opt(a, "cluster");
        snprintf(npc, sizeof npc, "%.*s", (int)(slash - np), np);
        if (c && strcmp(c, npc) != 0)
            return drv_cli_usage(a, "--cluster %s and --nodepool %s disagree", c, np);
    }
    for (int i = 0; i < 3 && k->filters[i]; i++) {
        const char *f = k->filters[i], *v = drv_cli_opt(a, f);
        if (strcmp(f, "cluster") == 0 && npc[0])
            v = npc;
        else if (strcmp(f, "nodepool") == 0 && slash)
            v = slash + 1;
        if (!v)
            continue;
        if (!*v || strchr(v, '/'))
            return drv_cli_usage(a, "bad --%s \"%s\"", f, drv_cli_opt(a, f));
        size_t len = strlen(path);
        if (len + 2 >= n || drv_cli_pathf(path + len + 1, n - len - 1, "%s=%s", f, v) < 0)
            return drv_cli_usage(a, "arguments too long");
        path[len] = sep;
        sep = '&';
    }
    if (drv_cli_flag(a, "all-users")) {
        if (k->mine_only)
            return drv_cli_usage(a, "--all-users does not apply to %s", k->name);
        size_t len = strlen(path);
        if ((size_t)snprintf(path + len, n - len, "%call_users=true", sep) >= n - len)
            return drv_cli_usage(a, "arguments too long");
    }
    return 0;
}

/* GET each object named on the command line; an array of them. */
static json_t *get_each(drv_cli_t *cli, const drv_cli_args_t *a, const kind_t *k,
                        const drv_cli_objects_t *ids, int *rc)
{
    drv_error_t err = {0};
    char path[1024], label[600];
    json_t *objs = json_array();
    for (int i = 0; i < ids->nids; i++) {
        if ((*rc = object_path(a, k, ids->ids[i], path, sizeof path, label, sizeof label)) != 0)
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
    drv_cli_objects_t ids;
    if (drv_cli_is_checkpoints(a))   /* cli_checkpoints.c */
        return drv_cli_get_checkpoints(cli, a);
    if (drv_cli_is_uploads(a))   /* cli_artifact.c */
        return drv_cli_get_uploads(cli, a);
    int rc = kind_arg(a, false, &k, &ids);
    if (rc)
        return rc;
    bool all = drv_cli_flag(a, "all-users");
    if (ids.nids > 0) {
        if (all)
            return drv_cli_usage(a, "--all-users applies to lists (no ID)");
        json_t *objs = get_each(cli, a, k, &ids, &rc);
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

/* describe's "Events:" section for obj, when its kind has events. */
static int describe_events(drv_cli_t *cli, const kind_t *k, const json_t *obj)
{
    const char *id = json_string_value(json_object_get(obj, "id"));
    if (!k->events || !id)
        return DRV_CLI_OK;
    char object[300], query[700];
    if (k->parent)
        snprintf(object, sizeof object, "%s/%s",
                 json_string_value(json_object_get(obj, k->parent)), id);
    else
        snprintf(object, sizeof object, "%s", id);
    int rc = strcmp(k->events, "cluster") == 0
                 ? drv_cli_pathf(query, sizeof query, "cluster=%s", object)
                 : drv_cli_pathf(query, sizeof query, "kind=%s&object=%s", k->events, object);
    if (rc < 0)
        return DRV_CLI_OK;   /* an id too long for a query has no events to show */
    fputc('\n', stdout);
    return drv_cli_describe_events(cli, query);
}

static int run_describe(drv_cli_t *cli, const drv_cli_args_t *a)
{
    const kind_t *k;
    drv_cli_objects_t ids;
    int rc = kind_arg(a, true, &k, &ids);
    if (rc)
        return rc;
    json_t *objs = get_each(cli, a, k, &ids, &rc);
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
            if (k->describe) {
                int r = k->describe(cli, obj);
                if (r != DRV_CLI_OK)
                    rc = r;
            } else {
                drv_cli_describe(obj);
            }
            int r = describe_events(cli, k, obj);
            if (r != DRV_CLI_OK)
                rc = r;
        }
    }
    json_decref(objs);
    return rc;
}

static int run_delete(drv_cli_t *cli, const drv_cli_args_t *a)
{
    const kind_t *k;
    drv_cli_objects_t ids;
    int rc = kind_arg(a, true, &k, &ids);
    if (rc)
        return rc;
    if (k->no_delete)
        return drv_cli_usage(a, "%s", k->no_delete);
    bool cascade = drv_cli_flag(a, "cascade");
    bool structured = cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML;
    json_t *done = json_array();
    drv_error_t err = {0};
    for (int i = 0; i < ids.nids && rc == DRV_CLI_OK; i++) {
        char path[1100], label[600];
        if ((rc = object_path(a, k, ids.ids[i], path, sizeof path, label, sizeof label)) != 0)
            break;
        if (cascade)
            strncat(path, "?cascade=true", sizeof path - strlen(path) - 1);
        long status = 0;
        json_t *obj = drv_cli_call(cli, "DELETE", path, NULL, NULL, &status, &err);
        if (!obj) {
            drv_cli_cascade_hint(&err);
            rc = drv_cli_fail(cli, &err);
            break;
        }
        if (structured)
            json_array_append(done, obj);
        else
            printf("%s %s\n", label, status == 202 ? "cancelled" : k->deleted);   /* a job */
        json_decref(obj);
    }
    if (structured && json_array_size(done) > 0)
        drv_cli_print_doc(cli, json_array_size(done) == 1 ? json_array_get(done, 0) : done);
    json_decref(done);
    return rc;
}

#define KINDS_HELP                                                                  \
    "Kinds (singular, plural or short form): clusters (cluster, cl),\n"              \
    "credentials (credential, cred), stores (store),\n"                             \
    "nodepools (nodepool, np), models (model), artifacts (artifact, art),\n"         \
    "deployments (deployment, deploy), jobs (job),\n"                                             \
    "nodes (node, no), replicas (replica, rep), users (user), tokens (token),\n"     \
    "instance-types (instance-type, it), providers (provider), queues (queue);\n"                  \
    "for get only: checkpoints DEPLOYMENT (checkpoint, ckpt), uploads (upload).\n"                     \
    "Nodepools are addressed as CLUSTER/NODEPOOL (or NODEPOOL --cluster CLUSTER),\n" \
    "replicas as DEPLOYMENT/REPLICA (or REPLICA --deployment DEPLOYMENT).\n"       \
    "KIND ID and KIND/ID are the same: `cluster demo` = `cluster/demo`,\n"          \
    "`nodepool demo/gpu` = `nodepool/demo/gpu`.\n"

static const drv_cli_opt_t get_opts[] = {
    {"cluster", 0, "CLUSTER", "nodepools, nodes, replicas: only this cluster's (nodepools: or the cluster of ID)"},
    {"nodepool", 0, "NODEPOOL", "nodes: only this nodepool's (NODEPOOL or CLUSTER/NODEPOOL)"},
    {"deployment", 'd', "DEPLOYMENT", "replicas: only this deployment's (or the deployment of ID)"},
    {"node", 0, "NODE", "replicas: only those placed on this node"},
    {"all-users", 'A', NULL, "admins: list every user's resources (adds an OWNER column)"},
    {NULL, 0, NULL, NULL},
};

static const drv_cli_opt_t describe_opts[] = {
    {"cluster", 0, "CLUSTER", "nodepools: the cluster of ID"},
    {"deployment", 'd', "DEPLOYMENT", "replicas: the deployment of ID"},
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
    "  drover get nodes --nodepool demo/gpu -o wide\n"                        \
    "  drover get replicas -d demo\n"                                         \
    "  drover get replica demo/demo-1a2b3c -o json\n"                         \
    "  drover get checkpoints demo\n"                                         \
    "  drover get uploads\n"                                         \
    "  drover get instance-types -o json | jq '.[].id'\n"

const drv_cli_cmd_t drv_cli_cmd_get = {
    .name = "get",
    .summary = "list resources, or show some as a table or JSON/YAML",
    .usage = "get KIND [ID...] | KIND/ID... [flags]",
    .help = "Without ID, lists every object of KIND (all pages). -o json prints the\n"
            "list as a JSON array of objects, or the object itself for one ID.\n"
            "--cluster, --nodepool, --deployment and --node narrow a list to the kinds\n"
            "they apply to; --all-users does not apply to replicas.\n\n"
             KINDS_HELP  GET_HELP_EXAMPLES,
    .opts = get_opts,
    .min_pos = 1,
    .max_pos = -1,
    .run = run_get,
};

const drv_cli_cmd_t drv_cli_cmd_describe = {
    .name = "describe",
    .summary = "show one resource in detail",
    .usage = "describe KIND ID [ID...] | KIND/ID... [flags]",
    .help = "Prints every field of the object, nested objects indented; multi-line text\n"
            "(a replica's log_tail) as an indented block. A node also shows a table of\n"
            "its GPUs and one of the replicas placed on it (GET /v1/replicas?node=ID).\n"
            "Deployments, nodepools, nodes and clusters end with their recent events\n"
            "(TYPE, AGE, MESSAGE; a cluster's include its nodepools'), as `drover events`.\n"
            "-o json|yaml prints the object itself.\n\n"
             KINDS_HELP
            "\nExamples:\n"
            "  drover describe deployment demo\n"
            "  drover describe nodepool demo/gpu\n"
            "  drover describe node gpu-4fa4df\n"
            "  drover describe replica demo/demo-1a2b3c\n"
            "  drover describe instance-type g5.xlarge\n",
    .opts = describe_opts,
    .min_pos = 1,
    .max_pos = -1,
    .run = run_describe,
};

const drv_cli_cmd_t drv_cli_cmd_delete = {
    .name = "delete",
    .summary = "delete resources",
    .usage = "delete KIND ID [ID...] | KIND/ID... [--cascade]",
    .help = "Deleting a parent that still has children (a cluster with nodepools, a user\n"
            "with resources) is refused unless --cascade is given. Deleting a token\n"
            "revokes it. Deleting a node marks it terminating (\"node/ID terminating\"):\n"
            "the controller stops its replicas (they are placed again elsewhere), has the\n"
            "provider release the machine, then removes the node. Replicas, instance\n"
            "types and providers cannot be deleted.\n\n"
             KINDS_HELP
            "\nExamples:\n"
            "  drover delete deployment demo\n"
            "  drover delete nodepool demo/gpu\n"
            "  drover delete node gpu-4fa4df\n"
            "  drover delete cluster demo --cascade\n",
    .opts = delete_opts,
    .min_pos = 1,
    .max_pos = -1,
    .run = run_delete,
};
