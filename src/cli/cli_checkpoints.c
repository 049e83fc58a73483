/* cli_checkpoints.c — `drover get checkpoints DEPLOYMENT` (GET
 * /v1/deployments/{id}/checkpoints: every slot's committed checkpoints,
 * newest first) and the checkpoints section of `drover describe
 * deployment`. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

static bool is_checkpoints(const char *w)
{
    static const char *const names[] = {"checkpoints", "checkpoint", "ckpt", NULL};
    for (int i = 0; names[i]; i++) {
        size_t n = strlen(names[i]);
        if (strncmp(w, names[i], n) == 0 && (w[n] == '\0' || w[n] == '/'))
            return true;
    }
    return false;
}

bool drv_cli_is_checkpoints(const drv_cli_args_t *a)
{
    return a->npos >= 1 && is_checkpoints(a->pos[0]);
}

static json_t *fetch(drv_cli_t *cli, const char *dep, drv_error_t *err)
{
    char path[512];
    if (drv_cli_pathf(path, sizeof path, "/v1/deployments/%s/checkpoints", dep) < 0) {
        drv_err_invalid(err, "", "deployment id too long");
        return NULL;
    }
    json_t *doc = drv_cli_call(cli, "GET", path, NULL, NULL, NULL, err);
    if (!doc)
        return NULL;
    json_t *items = json_incref(json_object_get(doc, "items"));
    json_decref(doc);
    return items ? items : json_array();
}

static void table(const json_t *items, int indent)
{
    printf("%*s%-24s %-32s %10s %6s %8s  %s\n", indent, "", "NAME", "SCOPE", "SIZE", "FILES",
           "AGE", "DIGEST");
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        char size[32], age[32] = "", name[128], scope[160];
        drv_cli_bytes((uint64_t)json_integer_value(json_object_get(it, "total_size")), size,
                      sizeof size);
        json_int_t at = json_integer_value(json_object_get(it, "committed_at_ms"));
        long long s = (long long)time(NULL) - at / 1000;
        if (s < 0)
            s = 0;
        if (s < 120)
            snprintf(age, sizeof age, "%llds", s);
        else if (s < 7200)
            snprintf(age, sizeof age, "%lldm", s / 60);
        else if (s < 172800)
            snprintf(age, sizeof age, "%lldh", s / 3600);
        else
            snprintf(age, sizeof age, "%lldd", s / 86400);
        snprintf(name, sizeof name, "%s", json_string_value(json_object_get(it, "name")) ?: "");
        snprintf(scope, sizeof scope, "%s",
                 json_string_value(json_object_get(it, "scope")) ?: "");
        drv_cli_sanitize(name);
        drv_cli_sanitize(scope);
        const char *dg = json_string_value(json_object_get(it, "digest"));
        printf("%*s%-24s %-32s %10s %6lld %8s  %.12s\n", indent, "", name, scope, size,
               (long long)json_integer_value(json_object_get(it, "files")), age, dg ? dg : "");
    }
}

int drv_cli_get_checkpoints(drv_cli_t *cli, const drv_cli_args_t *a)
{
    const char *dep = NULL, *slash = strchr(a->pos[0], '/');
    if (slash && slash[1])
        dep = slash + 1;
    else if (a->npos >= 2)
        dep = a->pos[1];
    if (!dep || a->npos > (slash ? 1 : 2))
        return drv_cli_usage(a, "usage: drover get checkpoints DEPLOYMENT (one deployment)");
    drv_error_t err = {0};
    json_t *items = fetch(cli, dep, &err);
    if (!items)
        return drv_cli_fail(cli, &err);
    int rc = DRV_CLI_OK;
    if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML)
        rc = drv_cli_print_doc(cli, items);
    else if (json_array_size(items) == 0)
        printf("no checkpoints committed for deployment %s\n", dep);
    else
        table(items, 0);
    json_decref(items);
    return rc;
}

void drv_cli_describe_checkpoints(drv_cli_t *cli, const char *dep)
{
    drv_error_t err = {0};
    json_t *items = fetch(cli, dep, &err);
    if (!items)
        return;
    if (json_array_size(items) > 0) {
        printf("\nCheckpoints:\n");
        table(items, 2);
    }
    json_decref(items);
}
