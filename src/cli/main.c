/* main.c — `drover`, the command-line client of droverd: global flags,
 * the command table, flag parsing and help (the commands read their flags
 * through cli_flags.c).
 *
 * Flags may come before or after the command and its arguments
 * (`drover -o json get clusters` = `drover get clusters -o json`); "--"
 * ends flags. Every command and subcommand answers -h/--help with its
 * usage, flags and examples on stdout (exit 0). Usage errors print one line
 * and a --help hint on stderr (exit 2).
 */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buildinfo.h"
#include "common/suggest.h"

static const drv_cli_cmd_t *const commands[] = {
    &drv_cli_cmd_login,
    &drv_cli_cmd_apply,
    &drv_cli_cmd_get,
    &drv_cli_cmd_describe,
    &drv_cli_cmd_delete,
    &drv_cli_cmd_cordon,
    &drv_cli_cmd_uncordon,
    &drv_cli_cmd_drain,
    &drv_cli_cmd_node,
    &drv_cli_cmd_logs,
    &drv_cli_cmd_events,
    &drv_cli_cmd_audit,
    &drv_cli_cmd_status,
    &drv_cli_cmd_predict,
    &drv_cli_cmd_nodepool,
    &drv_cli_cmd_artifact,
    &drv_cli_cmd_instance_types,
    &drv_cli_cmd_recommend,
    &drv_cli_cmd_token,
    &drv_cli_cmd_user,
    NULL,
};

static const drv_cli_opt_t global_opts[] = {
    {"server", 0, "URL[,URL...]", "droverd URL, or several heads' (env DROVER_SERVER; default " DRV_CLI_DEFAULT_SERVER ")"},
    {"token", 0, "TOKEN", "API token (env DROVER_TOKEN)"},
    {"ca-file", 0, "FILE", "trust this CA (PEM) for an https:// head (env DROVER_CA_FILE)"},
    {"insecure", 0, NULL, "allow plain http:// to a head not on loopback"},
    {"output", 'o', "FORMAT", "output format: table (default), wide, json or yaml"},
    {"help", 'h', NULL, "show this help"},
    {NULL, 0, NULL, NULL},
};

/* The same, plus --version, for `drover --help`. */
static const drv_cli_opt_t main_opts[] = {
    {"server", 0, "URL[,URL...]", "droverd URL, or several heads' (env DROVER_SERVER; default " DRV_CLI_DEFAULT_SERVER ")"},
    {"token", 0, "TOKEN", "API token (env DROVER_TOKEN)"},
    {"ca-file", 0, "FILE", "trust this CA (PEM) for an https:// head (env DROVER_CA_FILE)"},
    {"insecure", 0, NULL, "allow plain http:// to a head not on loopback"},
    {"output", 'o', "FORMAT", "output format: table (default), wide, json or yaml"},
    {"help", 'h', NULL, "show this help"},
    {"version", 0, NULL, "print the version and exit"},
    {NULL, 0, NULL, NULL},
};

static const char connection_help[] =
    "Server and token come from, first match wins: --server/--token, the\n"
    "DROVER_SERVER/DROVER_TOKEN environment variables, the config file written\n"
    "by `drover login` ($XDG_CONFIG_HOME/drover/config, else\n"
    "~/.config/drover/config), then the default server " DRV_CLI_DEFAULT_SERVER ".\n"
    "When no token is found anywhere and ./.drover/admin.token exists (the data\n"
    "directory `make up` uses), that admin token is used, so the quick start\n"
    "needs no login.\n";

/* ---- help ------------------------------------------------------------------ */

static void print_opts(const char *title, const drv_cli_opt_t *opts)
{
    char left[64];
    int width = 0;
    if (!opts || !opts[0].name)
        return;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            printf("\n%s:\n", title);
        for (const drv_cli_opt_t *o = opts; o->name; o++) {
            snprintf(left, sizeof left, "%c%c%s--%s%s%s", o->short_name ? '-' : ' ',
                     o->short_name ? o->short_name : ' ', o->short_name ? ", " : "  ", o->name,
                     o->metavar ? " " : "", o->metavar ? o->metavar : "");
            int len = (int)strlen(left);
            if (pass == 0 && len > width)
                width = len;
            else if (pass == 1)
                printf("  %-*s  %s\n", width, left, o->help);
        }
    }
}

/* Prints the list; returns the width its names were aligned to. */
static int print_cmd_list(const char *title, const drv_cli_cmd_t *const *cmds)
{
    int width = 0;
    for (const drv_cli_cmd_t *const *c = cmds; *c; c++)
        if ((int)strlen((*c)->name) > width)
            width = (int)strlen((*c)->name);
    printf("\n%s:\n", title);
    for (const drv_cli_cmd_t *const *c = cmds; *c; c++)
        printf("  %-*s  %s\n", width, (*c)->name, (*c)->summary);
    return width;
}

static void print_cmd_help(const drv_cli_cmd_t *cmd, const char *path)
{
    printf("Usage: drover %s\n\n%s\n", cmd->usage, cmd->summary);
    if (cmd->help)
        printf("\n%s", cmd->help);
    if (cmd->subcmds) {
        print_cmd_list("Commands", cmd->subcmds);
        printf("\nRun 'drover %s COMMAND --help' for a command's flags and examples.\n", path);
    }
    print_opts("Flags", cmd->opts);
    print_opts("Global flags", global_opts);
}

static void print_main_help(void)
{
    printf("drover — command-line client of droverd, the drover head node.\n\n"
           "Usage: drover [global flags] COMMAND [ARGUMENTS] [flags]\n");
    /* then the two words main() takes before the table, aligned with it */
    int width = print_cmd_list("Commands", commands);
    printf("  %-*s  %s\n  %-*s  %s\n", width, "version", "print the version and exit (as --version)",
           width, "help", "help [COMMAND [SUBCOMMAND]]: the same as COMMAND --help");
    print_opts("Global flags (before or after the command)", main_opts);
    printf("\nConnection:\n%s", connection_help);
    printf("\nExit codes: 0 done; 1 the server refused or an input file is bad (the\n"
           "reason on stderr); 2 usage error.\n"
           "\nExamples:\n"
           "  drover apply -f examples/quickstart.yaml\n"
           "  drover get deployments -o wide\n"
           "  drover get nodes\n"
           "  drover recommend --params-b 7\n"
           "\nRun 'drover COMMAND --help' for a command's flags and examples.\n");
}

/* ---- parsing ---------------------------------------------------------------- */

/* Apply one global flag. Returns 0, or DRV_CLI_USAGE after printing. */
static int set_global(drv_cli_t *cli, const drv_cli_args_t *a, const char *name,
                      const char *value)
{
    if (strcmp(name, "server") == 0) {
        cli->server_flag = value;
    } else if (strcmp(name, "token") == 0) {
        cli->token_flag = value;
    } else if (strcmp(name, "ca-file") == 0) {
        cli->ca_file_flag = value;
    } else if (strcmp(name, "insecure") == 0) {
        cli->insecure = true;
    } else if (strcmp(name, "output") == 0) {
        static const char *const names[] = {"table", "wide", "json", "yaml"};
        for (int i = 0; i < 4; i++)
            if (strcmp(value, names[i]) == 0) {
                cli->format = (drv_cli_format_t)i;
                cli->format_set = true;
                return 0;
            }
        return drv_cli_usage(a, "unknown output format \"%s\" (use table, wide, json or yaml)",
                             value);
    }
    return 0;
}

/* "unknown flag --x" with the nearest flag of cmd or the global ones. */
static int unknown_flag(const drv_cli_args_t *a, const char *shown)
{
    drv_suggest_t near;
    drv_suggest_init(&near, shown + 2);
    for (const drv_cli_opt_t *o = a->cmd->opts; shown[1] == '-' && o && o->name; o++)
        drv_suggest_add(&near, o->name);
    for (const drv_cli_opt_t *o = global_opts; shown[1] == '-' && o->name; o++)
        drv_suggest_add(&near, o->name);
    if (drv_suggest_best(&near))
        return drv_cli_usage(a, "unknown flag %s (did you mean --%s?)", shown,
                             drv_suggest_best(&near));
    return drv_cli_usage(a, "unknown flag %s", shown);
}

/* "unknown command "x"" with the nearest of list. */
static int unknown_cmd(const drv_cli_args_t *a, const drv_cli_cmd_t *const *list,
                       const char *name)
{
    drv_suggest_t near;
    drv_suggest_init(&near, name);
    for (; *list; list++)
        drv_suggest_add(&near, (*list)->name);
    if (drv_suggest_best(&near))
        return drv_cli_usage(a, "unknown command \"%s\" (did you mean %s?)", name,
                             drv_suggest_best(&near));
    return drv_cli_usage(a, "unknown command \"%s\"", name);
}

static const drv_cli_opt_t *find_opt(const drv_cli_opt_t *opts, const char *name, size_t len,
                                     char short_name)
{
    for (const drv_cli_opt_t *o = opts; o && o->name; o++) {
        if (short_name && o->short_name == short_name)
            return o;
        if (!short_name && strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
    }
    return NULL;
}

/* Parse argv[0..argc) for cmd. Sets *help when -h/--help was given. */
static int parse_args(drv_cli_t *cli, int argc, char **argv, drv_cli_args_t *a, bool *help)
{
    bool only_pos = false;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (only_pos || arg[0] != '-' || strcmp(arg, "-") == 0) {
            if (a->npos == DRV_CLI_MAX_POS)
                return drv_cli_usage(a, "too many arguments");
            a->pos[a->npos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_pos = true;
            continue;
        }
        const drv_cli_opt_t *o;
        const char *value = NULL, *name;
        char shown[80];
        bool is_global = false;
        if (arg[1] == '-') {
            name = arg + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_opt(a->cmd->opts, name, len, 0);
            if (!o && (o = find_opt(global_opts, name, len, 0)))
                is_global = true;
            snprintf(shown, sizeof shown, "--%.*s", (int)len, name);
            if (!o)
                return unknown_flag(a, shown);
            if (eq) {
                if (!o->metavar)
                    return drv_cli_usage(a, "flag %s takes no value", shown);
                value = eq + 1;
            }
        } else {
            o = find_opt(a->cmd->opts, NULL, 0, arg[1]);
            if (!o && (o = find_opt(global_opts, NULL, 0, arg[1])))
                is_global = true;
            snprintf(shown, sizeof shown, "-%c", arg[1]);
            if (!o)
                return unknown_flag(a, shown);
            if (arg[2]) {
                if (!o->metavar)
                    return drv_cli_usage(a, "flag %s takes no value (combined short flags "
                                         "are not supported)", shown);
                value = arg + 2;
            }
        }
        if (o->metavar && !value) {
            if (i + 1 >= argc)
                return drv_cli_usage(a, "flag %s needs a value (%s)", shown, o->metavar);
            value = argv[++i];
        }
        if (!o->metavar)
            value = "";
        if (is_global) {
            if (strcmp(o->name, "help") == 0) {
                *help = true;
                continue;
            }
            int rc = set_global(cli, a, o->name, value);
            if (rc)
                return rc;
            continue;
        }
        if (a->nval == DRV_CLI_MAX_VALS)
            return drv_cli_usage(a, "too many flags");
        a->val_opt[a->nval] = (int)(o - a->cmd->opts);
        a->val[a->nval++] = value;
    }
    return 0;
}

static bool has_help_flag(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return true;
    }
    return false;
}

static const drv_cli_cmd_t *find_cmd(const drv_cli_cmd_t *const *list, const char *name)
{
    for (; *list; list++)
        if (strcmp((*list)->name, name) == 0)
            return *list;
    return NULL;
}

static bool is_help_arg(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

/* Consume global flags at the start of argv (before a command or a
 * subcommand). Stops at -h/--help, --version or the first other word. */
static int eat_globals(drv_cli_t *cli, drv_cli_args_t *a, int argc, char **argv, int *used)
{
    int i = 0;
    while (i < argc && argv[i][0] == '-' && argv[i][1] && !is_help_arg(argv[i]) &&
           strcmp(argv[i], "--version") != 0 && strcmp(argv[i], "--") != 0) {
        const char *arg = argv[i];
        const drv_cli_opt_t *o;
        if (arg[1] == '-') {
            const char *eq = strchr(arg + 2, '=');
            size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
            o = find_opt(global_opts, arg + 2, len, 0);
        } else {
            o = find_opt(global_opts, NULL, 0, arg[1]);
        }
        int n = 1;
        if (o && o->metavar && !strchr(arg, '=') && !(arg[1] != '-' && arg[2]) && i + 1 < argc)
            n = 2;
        /* parse_args reports unknown flags and missing values */
        const drv_cli_cmd_t *saved = a->cmd;
        drv_cli_cmd_t none = {.name = saved->name, .usage = saved->usage};
        bool help = false;
        a->cmd = &none;
        int rc = parse_args(cli, n, argv + i, a, &help);
        a->cmd = saved;
        if (rc)
            return rc;
        i += n;
    }
    *used = i;
    return 0;
}

/* Resolve cmd (descending into subcommands), parse its flags, run it. */
static int run_cmd(drv_cli_t *cli, const drv_cli_cmd_t *cmd, const char *path, int argc,
                   char **argv)
{
    drv_cli_args_t a;
    memset(&a, 0, sizeof a);
    a.cmd = cmd;
    snprintf(a.cmd_path, sizeof a.cmd_path, "%s", path);

    if (cmd->subcmds) {
        int used = 0, rc = eat_globals(cli, &a, argc, argv, &used);
        if (rc)
            return rc;
        argc -= used, argv += used;
        if (argc == 0)
            return drv_cli_usage(&a, "missing command (one of the commands listed by --help)");
        if (is_help_arg(argv[0]) || strcmp(argv[0], "help") == 0) {
            print_cmd_help(cmd, path);
            return DRV_CLI_OK;
        }
        const drv_cli_cmd_t *sub = find_cmd(cmd->subcmds, argv[0]);
        if (!sub)
            return unknown_cmd(&a, cmd->subcmds, argv[0]);
        char subpath[64];
        snprintf(subpath, sizeof subpath, "%s %s", path, sub->name);
        return run_cmd(cli, sub, subpath, argc - 1, argv + 1);
    }

    if (has_help_flag(argc, argv)) {
        print_cmd_help(cmd, path);
        return DRV_CLI_OK;
    }
    bool help = false;
    int rc = parse_args(cli, argc, argv, &a, &help);
    if (rc)
        return rc;
    if (a.npos < cmd->min_pos)
        return drv_cli_usage(&a, "missing argument (usage: drover %s)", cmd->usage);
    if (cmd->max_pos >= 0 && a.npos > cmd->max_pos)
        return drv_cli_usage(&a, "unexpected argument \"%s\"", a.pos[cmd->max_pos]);
    return cmd->run(cli, &a);
}

static int print_help_of(int argc, char **argv)
{
    if (argc == 0) {
        print_main_help();
        return DRV_CLI_OK;
    }
    const drv_cli_cmd_t *cmd = find_cmd(commands, argv[0]);
    if (!cmd)
        return unknown_cmd(NULL, commands, argv[0]);
    if (cmd->subcmds && argc > 1) {
        const drv_cli_cmd_t *sub = find_cmd(cmd->subcmds, argv[1]);
        if (sub) {
            char path[64];
            snprintf(path, sizeof path, "%s %s", cmd->name, sub->name);
            print_cmd_help(sub, path);
            return DRV_CLI_OK;
        }
    }
    print_cmd_help(cmd, cmd->name);
    return DRV_CLI_OK;
}

int main(int argc, char **argv)
{
    drv_cli_t cli;
    memset(&cli, 0, sizeof cli);
    cli.format = DRV_OUT_TABLE;

    drv_cli_cmd_t top = {.name = "", .usage = "COMMAND"};
    drv_cli_args_t a;
    memset(&a, 0, sizeof a);
    a.cmd = &top;
    int used = 0, rc = eat_globals(&cli, &a, argc - 1, argv + 1, &used);
    if (rc)
        return rc;
    int i = 1 + used;
    if (i >= argc)
        return drv_cli_usage(NULL, "missing command");
    const char *name = argv[i];
    if (is_help_arg(name))
        return print_help_of(0, NULL);
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("drover %s (commit %s)\n", drv_build_version, drv_build_commit);
        return DRV_CLI_OK;
    }
    if (strcmp(name, "help") == 0)
        return print_help_of(argc - i - 1, argv + i + 1);
    const drv_cli_cmd_t *cmd = find_cmd(commands, name);
    if (!cmd)
        return unknown_cmd(NULL, commands, name);
    rc = run_cmd(&cli, cmd, cmd->name, argc - i - 1, argv + i + 1);
    drv_httpc_destroy(cli.http);
    return rc;
}
