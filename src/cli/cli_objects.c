/* cli_objects.c — what the commands that name objects share: the kind names
 * the CLI knows (plural, singular, short forms), one parser for both ways
 * of naming objects on a command line, "KIND ID [ID...]" and
 * "KIND/ID [KIND/ID...]", and the --cascade wording of delete's refusals.
 *
 * get, describe, delete, logs, events, predict, cordon, uncordon and drain
 * all parse their arguments with drv_cli_objects(), so every form works
 * everywhere.
 */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#include "common/suggest.h"

static const drv_cli_kind_t kind_names[] = {
    {"clusters", "cluster", {"cl"}},
    {"credentials", "credential", {"cred"}},
    {"stores", "store", {NULL}},
    {"nodepools", "nodepool", {"np"}},
    {"models", "model", {NULL}},
    {"artifacts", "artifact", {"art"}},
    {"deployments", "deployment", {"deploy"}},
    {"jobs", "job", {NULL}},
    {"queues", "queue", {NULL}},
    {"nodes", "node", {"no"}},
    {"replicas", "replica", {"rep"}},
    {"users", "user", {NULL}},
    {"tokens", "token", {NULL}},
    {"instance-types", "instance-type", {"it"}},
    {"providers", "provider", {NULL}},
    {NULL, NULL, {NULL}},
};

const drv_cli_kind_t *drv_cli_kind(const char *word)
{
    for (const drv_cli_kind_t *k = kind_names; k->plural; k++) {
        if (strcmp(k->plural, word) == 0 || strcmp(k->singular, word) == 0)
            return k;
        for (int i = 0; i < 3 && k->aliases[i]; i++)
            if (strcmp(k->aliases[i], word) == 0)
                return k;
    }
    return NULL;
}

/* "unknown kind "deploymnet" (did you mean deployment?; one of: ...)" */
static int unknown_kind(const drv_cli_args_t *a, const char *word)
{
    drv_suggest_t near;
    char names[512];
    size_t len = 0;
    drv_suggest_init(&near, word);
    for (const drv_cli_kind_t *k = kind_names; k->plural; k++) {
        drv_suggest_add(&near, k->singular);
        drv_suggest_add(&near, k->plural);
        if (len < sizeof names)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s",
                                    k == kind_names ? "" : ", ", k->plural);
    }
    const char *best = drv_suggest_best(&near);
    return drv_cli_usage(a, "unknown kind \"%s\" (%s%s%sone of: %s)", word,
                         best ? "did you mean " : "", best ? best : "", best ? "? " : "", names);
}

int drv_cli_objects(const drv_cli_args_t *a, const char *implied, drv_cli_objects_t *out)
{
    memset(out, 0, sizeof *out);
    if (a->npos == 0)
        return 0;
    const char *first = a->pos[0], *slash = strchr(first, '/');
    char word[64];
    if (!slash && implied && (a->npos == 1 || !drv_cli_kind(first))) {
        /* "predict demo": the kind goes without saying */
        out->kind = drv_cli_kind(implied);
        for (int i = 0; i < a->npos; i++)
            out->ids[out->nids++] = a->pos[i];
        return 0;
    }
    if (!slash) {
        /* KIND ID [ID...] */
        out->kind = drv_cli_kind(first);
        if (!out->kind)
            return unknown_kind(a, first);
        for (int i = 1; i < a->npos; i++)
            out->ids[out->nids++] = a->pos[i];
        return 0;
    }
    /* KIND/ID [KIND/ID...]: each of the same kind */
    for (int i = 0; i < a->npos; i++) {
        const char *arg = a->pos[i], *s = strchr(arg, '/');
        if (!s)
            return drv_cli_usage(a, "expected KIND/ID like \"%s\", got \"%s\"", first, arg);
        snprintf(word, sizeof word, "%.*s", (int)(s - arg), arg);
        const drv_cli_kind_t *k = drv_cli_kind(word);
        if (!k)
            return unknown_kind(a, word);
        if (out->kind && k != out->kind)
            return drv_cli_usage(a, "one kind at a time: \"%s\" and \"%s\"", first, arg);
        out->kind = k;
        if (!s[1])
            return drv_cli_usage(a, "empty id in \"%s\"", arg);
        out->ids[out->nids++] = s + 1;
    }
    return 0;
}

int drv_cli_one_object(const drv_cli_args_t *a, const char *kind, const char **id)
{
    drv_cli_objects_t objs;
    int rc = drv_cli_objects(a, kind, &objs);
    if (rc)
        return rc;
    if (!objs.kind || strcmp(objs.kind->singular, kind) != 0 || objs.nids != 1)
        return drv_cli_usage(a, "expected one %s: ID, %s/ID or %s ID", kind, kind, kind);
    *id = objs.ids[0];
    return 0;
}

void drv_cli_cascade_hint(drv_error_t *err)
{
    /* the API's refusal speaks of its query argument; the CLI's is a flag */
    static const char api[] = "?cascade=true", flag[] = "--cascade";
    char *p = strstr(err->message, api);
    if (p && err->status == 409) {
        memmove(p + strlen(flag), p + strlen(api), strlen(p + strlen(api)) + 1);
        memcpy(p, flag, strlen(flag));
    }
}
