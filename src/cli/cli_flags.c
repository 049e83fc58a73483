/* cli_flags.c — a parsed command line's flags as the commands read them:
 * the last or every value of a flag, booleans, checked numbers, and the
 * one-line usage error. main.c parses argv into drv_cli_args_t; the
 * command files read it through these. Calls no other file of the CLI.
 */
#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int opt_index(const drv_cli_cmd_t *cmd, const char *name)
{
    for (int i = 0; cmd->opts && cmd->opts[i].name; i++)
        if (strcmp(cmd->opts[i].name, name) == 0)
            return i;
    return -1;
}

const char *drv_cli_opt(const drv_cli_args_t *a, const char *name)
{
    int idx = opt_index(a->cmd, name);
    const char *v = NULL;
    for (int i = 0; idx >= 0 && i < a->nval; i++)
        if (a->val_opt[i] == idx)
            v = a->val[i];
    return v;
}

bool drv_cli_flag(const drv_cli_args_t *a, const char *name)
{
    return drv_cli_opt(a, name) != NULL;
}

int drv_cli_opt_all(const drv_cli_args_t *a, const char *name, const char **out, int max)
{
    int idx = opt_index(a->cmd, name), n = 0;
    for (int i = 0; idx >= 0 && i < a->nval && n < max; i++)
        if (a->val_opt[i] == idx)
            out[n++] = a->val[i];
    return n;
}

int drv_cli_usage(const drv_cli_args_t *a, const char *fmt, ...)
{
    const char *path = a && a->cmd_path[0] ? a->cmd_path : NULL;
    va_list ap;
    fprintf(stderr, "drover%s%s: ", path ? " " : "", path ? path : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nRun 'drover%s%s --help' for usage.\n", path ? " " : "", path ? path : "");
    return DRV_CLI_USAGE;
}

int drv_cli_opt_long(const drv_cli_args_t *a, const char *name, long long min, long long max,
                     long long *out)
{
    const char *v = drv_cli_opt(a, name);
    if (!v)
        return 0;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < min || x > max) {
        drv_cli_usage(a, "--%s must be an integer from %lld to %lld, not \"%s\"", name, min, max,
                      v);
        return -1;
    }
    *out = x;
    return 0;
}

int drv_cli_opt_double(const drv_cli_args_t *a, const char *name, double min, double max,
                       double *out)
{
    const char *v = drv_cli_opt(a, name);
    if (!v)
        return 0;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x) || x < min || x > max) {
        drv_cli_usage(a, "--%s must be a number from %g to %g, not \"%s\"", name, min, max, v);
        return -1;
    }
    *out = x;
    return 0;
}
