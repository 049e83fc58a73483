/* cli_nodes.c — the worker side of the CLI: `drover cordon`, `uncordon`
 * and `drain` (POST /v1/nodes/{id}/<action>), the detailed view of
 * `describe node` (its GPUs and the replicas placed on it), and the
 * `nodepool` command group for join tokens (`join-token`, `join-tokens`,
 * `revoke-join-token`), which let agents on machines drover did not start
 * join a nodepool.
 *
 * Listing and getting nodes and replicas is generic (cli_get.c kinds
 * table, cli_output.c column tables); only what is special lives here.
 */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/secret.h"

#define AGENT_DATA_DIR "/var/lib/drover-agent"

static bool structured(const drv_cli_t *cli)
{
    return cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML;
}

/* ---- describe node ------------------------------------------------------------ */

static void copy_key(json_t *to, const json_t *from, const char *key)
{
    json_t *v = json_object_get(from, key);
    if (v && !json_object_get(to, key))
        json_object_set(to, key, v);
}

/* A copy of the node's GPUs, each with what the replicas on the node hold
 * of it: allocated_mib and allocated_percent (a whole GPU counts as its
 * memory and 100 %). A replica's GPU is matched by uuid, else by index. */
static json_t *with_allocations(const json_t *gpus, const json_t *reps)
{
    json_t *out = json_deep_copy(gpus);
    size_t i, j, r;
    json_t *g;
    const json_t *rep, *rg;
    if (!json_is_array(out)) {
        json_decref(out);
        return json_array();
    }
    json_array_foreach(out, i, g) {
        const char *uuid = json_string_value(json_object_get(g, "uuid"));
        json_int_t idx = json_integer_value(json_object_get(g, "index"));
        json_int_t mib = 0, pct = 0;
        json_array_foreach(reps, r, rep) {
            bool whole = json_is_true(json_object_get(rep, "whole_gpu"));
            json_array_foreach(json_object_get(rep, "gpus"), j, rg) {
                const char *ru = json_string_value(json_object_get(rg, "uuid"));
                bool same = uuid && *uuid && ru && *ru
                                ? strcmp(uuid, ru) == 0
                                : json_integer_value(json_object_get(rg, "index")) == idx;
                if (!same)
                    continue;
                mib += whole ? json_integer_value(json_object_get(g, "memory_mib"))
                             : json_integer_value(json_object_get(rg, "memory_mib"));
                pct += whole ? 100 : json_integer_value(json_object_get(rg, "compute_percent"));
            }
        }
        json_object_set_new(g, "allocated_mib", json_integer(mib));
        json_object_set_new(g, "allocated_percent", json_integer(pct));
    }
    return out;
}

int drv_cli_describe_node(drv_cli_t *cli, const json_t *node)
{
    static const char *const first[] = {"id", "cluster", "nodepool", "instance_type",
                                        "provider", NULL};
    static const char *const flags[] = {"cordoned", "draining", "terminating", "registered",
                                        NULL};
    const json_t *status = json_object_get(node, "status");
    const char *id = json_string_value(json_object_get(node, "id"));
    drv_error_t err = {0};
    char path[512];
    json_t *reps;

    if (!id || !*id) {
        reps = json_array();
    } else if (drv_cli_pathf(path, sizeof path, "/v1/replicas?node=%s", id) < 0) {
        fprintf(stderr, "error: node id too long\n");
        return DRV_CLI_FAIL;
    } else if (!(reps = drv_cli_list(cli, path, &err))) {
        return drv_cli_fail(cli, &err);
    }

    /* the node's own fields and its status' scalars, in a readable order:
     * what it is, its state and flags, what the agent reports, bookkeeping */
    json_t *flat = json_object();
    for (int i = 0; first[i]; i++)
        copy_key(flat, node, first[i]);
    copy_key(flat, status, "state");
    for (int i = 0; flags[i]; i++)
        copy_key(flat, node, flags[i]);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)status, k, v) {
        if (strcmp(k, "gpus") == 0)
            continue;
        if (strcmp(k, "last_sync") == 0 && json_is_string(v)) {
            char ago[64], buf[160];
            drv_cli_age(json_string_value(v), ago, sizeof ago);
            snprintf(buf, sizeof buf, "%s%s%s%s", json_string_value(v), ago[0] ? " (" : "", ago,
                     ago[0] ? " ago)" : "");
            json_object_set_new(flat, k, json_string(buf));
            continue;
        }
        copy_key(flat, status, k);
    }
    json_object_foreach((json_t *)node, k, v) {
        if (strcmp(k, "status") != 0)
            copy_key(flat, node, k);
    }
    drv_cli_describe(flat);
    json_decref(flat);

    json_t *gpus = with_allocations(json_object_get(status, "gpus"), reps);
    if (json_array_size(gpus) > 0) {
        printf("gpus:\n");
        drv_cli_print_table_at("node-gpus", gpus, false, false, 2);
    } else {
        printf("gpus: <none>\n");
    }
    if (json_array_size(reps) > 0) {
        printf("replicas:\n");
        drv_cli_print_table_at("node-replicas", reps, false, false, 2);
    } else {
        printf("replicas: <none>\n");
    }
    json_decref(gpus);
    json_decref(reps);
    return DRV_CLI_OK;
}

/* ---- cordon, uncordon, drain ------------------------------------------------- */

/* POST /v1/nodes/ID/<action> for each NODE (ID, node/ID or node ID...);
 * "node/ID <done>" per node, stop at the first refusal. -o json|yaml: the
 * node(s) as answered. */
static int node_action(drv_cli_t *cli, const drv_cli_args_t *a, const char *action,
                       const char *done)
{
    drv_error_t err = {0};
    drv_cli_objects_t ids;
    int rc = drv_cli_objects(a, "node", &ids);
    if (rc)
        return rc;
    if (!ids.kind || strcmp(ids.kind->singular, "node") != 0 || ids.nids == 0)
        return drv_cli_usage(a, "expected nodes: NODE..., node/NODE... or node NODE...");
    json_t *nodes = json_array();
    for (int i = 0; i < ids.nids; i++) {
        char path[1024];
        if (!*ids.ids[i]) {
            rc = drv_cli_usage(a, "empty node id");
            break;
        }
        if (drv_cli_pathf(path, sizeof path, "/v1/nodes/%s/%s", ids.ids[i], action) < 0) {
            rc = drv_cli_usage(a, "node id too long");
            break;
        }
        json_t *node = drv_cli_call(cli, "POST", path, NULL, NULL, NULL, &err);
        if (!node) {
            rc = drv_cli_fail(cli, &err);
            break;
        }
        if (structured(cli))
            json_array_append(nodes, node);
        else
            printf("node/%s %s\n", ids.ids[i], done);
        json_decref(node);
    }
    if (structured(cli) && json_array_size(nodes) > 0)
        drv_cli_print_doc(cli, json_array_size(nodes) == 1 ? json_array_get(nodes, 0) : nodes);
    json_decref(nodes);
    return rc;
}

static int run_cordon(drv_cli_t *cli, const drv_cli_args_t *a)
{
    return node_action(cli, a, "cordon", "cordoned");
}

static int run_uncordon(drv_cli_t *cli, const drv_cli_args_t *a)
{
    return node_action(cli, a, "uncordon", "uncordoned");
}

static int run_drain(drv_cli_t *cli, const drv_cli_args_t *a)
{
    return node_action(cli, a, "drain", "draining");
}

const drv_cli_cmd_t drv_cli_cmd_cordon = {
    .name = "cordon",
    .summary = "stop placing new replicas on nodes (running ones stay)",
    .usage = "cordon NODE [NODE...]",
    .help = "Marks each node cordoned (POST /v1/nodes/NODE/cordon) and prints\n"
            "\"node/NODE cordoned\". Replicas already on the node keep running; new ones\n"
            "go elsewhere. `drover get nodes` shows the state as \"ready,cordoned\".\n"
            "Undo with `drover uncordon NODE`. -o json prints the node.\n"
            "\nExamples:\n"
            "  drover cordon gpu-4fa4df\n"
            "  drover get nodes -o wide\n",
    .min_pos = 1,
    .max_pos = -1,
    .run = run_cordon,
};

const drv_cli_cmd_t drv_cli_cmd_uncordon = {
    .name = "uncordon",
    .summary = "let nodes take replicas again (undoes cordon and drain)",
    .usage = "uncordon NODE [NODE...]",
    .help = "Clears the node's cordoned and draining marks (POST\n"
            "/v1/nodes/NODE/uncordon) and prints \"node/NODE uncordoned\". -o json prints\n"
            "the node.\n"
            "\nExamples:\n"
            "  drover uncordon gpu-4fa4df\n",
    .min_pos = 1,
    .max_pos = -1,
    .run = run_uncordon,
};

const drv_cli_cmd_t drv_cli_cmd_drain = {
    .name = "drain",
    .summary = "cordon nodes and move their replicas elsewhere",
    .usage = "drain NODE [NODE...]",
    .help = "Marks each node cordoned and draining (POST /v1/nodes/NODE/drain) and\n"
            "prints \"node/NODE draining\". The controller then stops the node's replicas\n"
            "and places them again on other nodes; the node stays empty until\n"
            "`drover uncordon NODE`. Watch it empty with\n"
            "`drover get replicas --node NODE`. -o json prints the node.\n"
            "\nExamples:\n"
            "  drover drain gpu-4fa4df\n"
            "  drover get replicas --node gpu-4fa4df\n",
    .min_pos = 1,
    .max_pos = -1,
    .run = run_drain,
};

static int run_revoke(drv_cli_t *cli, const drv_cli_args_t *a)
{
    return node_action(cli, a, "revoke", "revoked");
}

static const drv_cli_cmd_t node_revoke = {
    .name = "revoke",
    .summary = "revoke nodes' credentials: their agents are refused from their next call",
    .usage = "node revoke NODE [NODE...]",
    .help = "Revokes each node's credential (POST /v1/nodes/NODE/revoke) and prints\n"
            "\"node/NODE revoked\". The node's agent is refused (401) at its next sync or\n"
            "upload, stops its replicas and forgets the credential; the node is cordoned,\n"
            "goes not_ready then lost like a dead node, and its replicas are placed again\n"
            "elsewhere. The machine can join again only with a new join token. Remove the\n"
            "record with `drover delete node NODE`. -o json prints the node. An admin may\n"
            "revoke any user's node: a NODE the admin has none of is looked up among all\n"
            "users' nodes.\n"
            "\nExamples:\n"
            "  drover node revoke gpu-4fa4df\n",
    .min_pos = 1,
    .max_pos = -1,
    .run = run_revoke,
};

static const drv_cli_cmd_t *const node_cmds[] = {&node_revoke, NULL};

const drv_cli_cmd_t drv_cli_cmd_node = {
    .name = "node",
    .summary = "node identities: revoke a node's credential",
    .usage = "node COMMAND [flags]",
    .help = "Nodes are listed with `drover get nodes`, cordoned with `drover cordon`\n"
            "and removed with `drover delete node`; this group revokes their credentials.\n",
    .subcmds = node_cmds,
};

/* ---- nodepool join tokens ------------------------------------------------------ */

/* CLUSTER/NODEPOOL (or NODEPOOL with --cluster) -> the nodepool's path and
 * "CLUSTER/NODEPOOL". 0 or a usage exit code. */
static int nodepool_arg(const drv_cli_args_t *a, const char *arg, char *path, size_t n,
                        char *name, size_t nn)
{
    const char *cluster = drv_cli_opt(a, "cluster");
    const char *slash = strchr(arg, '/');
    char c[256], np[256];
    if (slash) {
        snprintf(c, sizeof c, "%.*s", (int)(slash - arg), arg);
        snprintf(np, sizeof np, "%s", slash + 1);
        if (cluster && strcmp(cluster, c) != 0)
            return drv_cli_usage(a, "--cluster %s and nodepool %s disagree", cluster, arg);
    } else if (cluster) {
        snprintf(c, sizeof c, "%s", cluster);
        snprintf(np, sizeof np, "%s", arg);
    } else {
        return drv_cli_usage(a, "nodepools are addressed as CLUSTER/NODEPOOL (e.g. demo/gpu), "
                             "or NODEPOOL with --cluster CLUSTER");
    }
    if (!c[0] || !np[0] || strchr(np, '/'))
        return drv_cli_usage(a, "bad nodepool \"%s\": expected CLUSTER/NODEPOOL", arg);
    if (drv_cli_pathf(path, n, "/v1/clusters/%s/nodepools/%s/join-tokens", c, np) < 0)
        return drv_cli_usage(a, "nodepool name too long");
    snprintf(name, nn, "%s/%s", c, np);
    return 0;
}

/* The head's URL as an agent should be given it: --agent-server, else
 * the server this CLI talks to. */
static int agent_server(drv_cli_t *cli, const drv_cli_args_t *a, char *out, size_t n,
                        drv_error_t *err)
{
    const char *given = drv_cli_opt(a, "agent-server");
    if (given) {
        if (!*given || strchr(given, ' ') || strchr(given, '\'') || strchr(given, '"'))
            return drv_cli_usage(a, "bad --agent-server \"%s\"", given);
        snprintf(out, n, "%s%s", strstr(given, "://") ? "" : "http://", given);
        return 0;
    }
    if (drv_cli_connect(cli, err) < 0)
        return drv_cli_fail(cli, err);
    snprintf(out, n, "%s", cli->server);
    return 0;
}

static int run_join_token(drv_cli_t *cli, const drv_cli_args_t *a)
{
    drv_error_t err = {0};
    char path[1024], name[600], server[1100], ttl_text[64] = "";
    int rc = nodepool_arg(a, a->pos[0], path, sizeof path, name, sizeof name);
    if (rc)
        return rc;
    const char *ttl = drv_cli_opt(a, "ttl"), *desc = drv_cli_opt(a, "description");
    const char *id = drv_cli_opt(a, "id"), *uses_text = drv_cli_opt(a, "uses");
    long long secs = 0, uses = 1;
    if (uses_text) {
        char *end;
        uses = strtoll(uses_text, &end, 10);
        if (!*uses_text || *end || uses < 1 || uses > DRV_JOIN_USES_MAX)
            return drv_cli_usage(a, "bad --uses \"%s\": how many agents may join with the "
                                 "token, 1 to %d", uses_text, DRV_JOIN_USES_MAX);
    }
    if (ttl) {
        secs = drv_cli_parse_duration(ttl);
        if (secs < 60 || secs > 30LL * 86400)
            return drv_cli_usage(a, "bad --ttl \"%s\": a duration from 1m to 30d (e.g. 1h, "
                                 "12h, 7d)", ttl);
    }
    if (!structured(cli) && (rc = agent_server(cli, a, server, sizeof server, &err)) != 0)
        return rc;
    json_t *body = json_object();
    if (secs)
        json_object_set_new(body, "ttl_seconds", json_integer(secs));
    if (desc)
        json_object_set_new(body, "description", json_string(desc));
    if (id)
        json_object_set_new(body, "id", json_string(id));
    if (uses_text)
        json_object_set_new(body, "uses", json_integer(uses));
    json_t *tok = drv_cli_call(cli, "POST", path, body, NULL, NULL, &err);
    json_decref(body);
    if (!tok)
        return drv_cli_fail(cli, &err);
    if (structured(cli)) {
        drv_cli_print_doc(cli, tok);
        json_decref(tok);
        return DRV_CLI_OK;
    }
    const char *tid = json_string_value(json_object_get(tok, "id"));
    const char *secret = json_string_value(json_object_get(tok, "secret"));
    const char *exp = json_string_value(json_object_get(tok, "expires_at"));
    const char *pin = json_string_value(json_object_get(tok, "ca_hash"));
    char pin_arg[120] = "";
    if (pin)   /* the agent checks the head's CA against it before it sends the secret */
        snprintf(pin_arg, sizeof pin_arg, " \\\n      --ca-hash %s", pin);
    char uses_line[80];
    if (uses == 1)
        snprintf(uses_line, sizeof uses_line, "One agent may");
    else
        snprintf(uses_line, sizeof uses_line, "Up to %lld agents may", uses);
    long long left = secs ? secs : 3600;
    if (left % 86400 == 0)
        snprintf(ttl_text, sizeof ttl_text, "%lldd", left / 86400);
    else if (left % 3600 == 0)
        snprintf(ttl_text, sizeof ttl_text, "%lldh", left / 3600);
    else if (left % 60 == 0)
        snprintf(ttl_text, sizeof ttl_text, "%lldm", left / 60);
    else
        snprintf(ttl_text, sizeof ttl_text, "%llds", left);
    printf("join token: %s (nodepool %s)\n"
           "secret:     %s\n"
           "expires:    %s (in %s)\n\n"
           "Start a node of nodepool %s: on the new machine, run\n\n"
           "  drover-agent --server %s --join-token %s --data-dir %s%s\n\n"
           "The secret is shown only once: store it now. %s join with it until it\n"
           "expires or is revoked (drover nodepool revoke-join-token %s %s); a restarted\n"
           "agent uses its own node credential, not the token.\n",
           tid ? tid : "?", name, secret ? secret : "?", exp ? exp : "?", ttl_text, name,
           server, secret ? secret : "?", AGENT_DATA_DIR, pin_arg, uses_line, name,
           tid ? tid : "?");
    json_decref(tok);
    return DRV_CLI_OK;
}

static int run_join_tokens(drv_cli_t *cli, const drv_cli_args_t *a)
{
    drv_error_t err = {0};
    char path[1024], name[600];
    int rc = nodepool_arg(a, a->pos[0], path, sizeof path, name, sizeof name);
    if (rc)
        return rc;
    json_t *items = drv_cli_list(cli, path, &err);
    if (!items)
        return drv_cli_fail(cli, &err);
    rc = drv_cli_print(cli, "join-tokens", items, true, false);
    json_decref(items);
    return rc;
}

static int run_revoke_join_token(drv_cli_t *cli, const drv_cli_args_t *a)
{
    drv_error_t err = {0};
    char base[1024], name[600];
    int rc = nodepool_arg(a, a->pos[0], base, sizeof base, name, sizeof name);
    if (rc)
        return rc;
    json_t *done = json_array();
    for (int i = 1; i < a->npos; i++) {
        char path[1400];
        size_t len = strlen(base);
        if (!*a->pos[i]) {
            rc = drv_cli_usage(a, "empty join token id");
            break;
        }
        snprintf(path, sizeof path, "%s/", base);
        if (drv_cli_pathf(path + len + 1, sizeof path - len - 1, "%s", a->pos[i]) < 0) {
            rc = drv_cli_usage(a, "join token id too long");
            break;
        }
        json_t *tok = drv_cli_call(cli, "DELETE", path, NULL, NULL, NULL, &err);
        if (!tok) {
            rc = drv_cli_fail(cli, &err);
            break;
        }
        if (structured(cli))
            json_array_append(done, tok);
        else
            printf("join-token/%s/%s revoked\n", name, a->pos[i]);
        json_decref(tok);
    }
    if (structured(cli) && json_array_size(done) > 0)
        drv_cli_print_doc(cli, json_array_size(done) == 1 ? json_array_get(done, 0) : done);
    json_decref(done);
    return rc;
}

static const drv_cli_opt_t join_token_opts[] = {
    {"ttl", 0, "DURATION", "lifetime, 1m to 30d: 30m, 12h, 7d, ... (default 1h)"},
    {"description", 'd', "TEXT", "what the token is for"},
    {"id", 0, "ID", "token id (default: join-<random>)"},
    {"uses", 0, "N", "how many agents may join with it, 1 to 10000 (default 1)"},
    {"agent-server", 0, "URL", "head URL for the printed agent command (default: --server)"},
    {"cluster", 0, "CLUSTER", "the cluster, when the nodepool is given as NODEPOOL"},
    {NULL, 0, NULL, NULL},
};

static const drv_cli_opt_t np_opts[] = {
    {"cluster", 0, "CLUSTER", "the cluster, when the nodepool is given as NODEPOOL"},
    {NULL, 0, NULL, NULL},
};

static const drv_cli_cmd_t np_join_token = {
    .name = "join-token",
    .summary = "create a join token and print the drover-agent command that uses it",
    .usage = "nodepool join-token CLUSTER/NODEPOOL [--ttl DURATION] [--uses N]\n"
             "                            [--description TEXT] [--id ID] [--agent-server URL]",
    .help = "A join token lets drover-agent processes on machines drover did not start\n"
            "(your own servers, a VM you made) join the nodepool as nodes. Prints the\n"
            "secret once, when it expires, and a command line to paste on the new\n"
            "machine:\n\n"
            "  drover-agent --server URL --join-token SECRET --data-dir " AGENT_DATA_DIR "\n\n"
            "URL is the server this CLI talks to; give --agent-server when the machine\n"
            "reaches the head at another address (add --advertise-addr to the agent's\n"
            "command when the head must reach the machine at an address other than\n"
            "127.0.0.1). A token joins one agent unless --uses N allows N (a replayed or\n"
            "shared token is refused once its uses are spent: 401). The agent keeps its\n"
            "own node credential after joining, so the token is needed only for the\n"
            "first start. -o json prints the token object, secret included.\n"
            "\nExamples:\n"
            "  drover nodepool join-token demo/gpu\n"
            "  drover nodepool join-token demo/gpu --ttl 7d --uses 20 --description rack-2 \\\n"
            "      --agent-server http://10.0.0.1:7480\n"
            "  drover nodepool join-token demo/gpu -o json | jq -r .secret\n",
    .opts = join_token_opts,
    .min_pos = 1,
    .max_pos = 1,
    .run = run_join_token,
};

static const drv_cli_cmd_t np_join_tokens = {
    .name = "join-tokens",
    .summary = "list a nodepool's join tokens",
    .usage = "nodepool join-tokens CLUSTER/NODEPOOL",
    .help = "Expired tokens are listed too (STATE expired); revoked ones are gone.\n"
            "-o wide adds the cluster and nodepool.\n"
            "\nExamples:\n"
            "  drover nodepool join-tokens demo/gpu\n"
            "  drover nodepool join-tokens demo/gpu -o json\n",
    .opts = np_opts,
    .min_pos = 1,
    .max_pos = 1,
    .run = run_join_tokens,
};

static const drv_cli_cmd_t np_revoke_join_token = {
    .name = "revoke-join-token",
    .summary = "revoke join tokens (nodes that joined with them stay)",
    .usage = "nodepool revoke-join-token CLUSTER/NODEPOOL ID [ID...]",
    .help = "No agent can join with a revoked token; nodes that already joined keep\n"
            "their own credentials (remove one with `drover delete node ID`). Prints\n"
            "\"join-token/CLUSTER/NODEPOOL/ID revoked\".\n"
            "\nExamples:\n"
            "  drover nodepool revoke-join-token demo/gpu join-4f78872f\n",
    .opts = np_opts,
    .min_pos = 2,
    .max_pos = -1,
    .run = run_revoke_join_token,
};

static const drv_cli_cmd_t *const nodepool_cmds[] = {&np_join_token, &np_join_tokens,
                                                     &np_revoke_join_token, NULL};

const drv_cli_cmd_t drv_cli_cmd_nodepool = {
    .name = "nodepool",
    .summary = "join tokens: let agents on your own machines join a nodepool",
    .usage = "nodepool COMMAND [flags]",
    .help = "Nodepools themselves are made with `drover apply` and shown with\n"
            "`drover get nodepools`; these commands manage their join tokens.\n",
    .subcmds = nodepool_cmds,
};
