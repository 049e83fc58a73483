/* cli_apply.c — `drover apply -f FILE`: create or update every object of one
 * or more multi-document YAML files, in file order, idempotently.
 *
 * All files are read and checked first (YAML syntax with file:line:col,
 * then one top-level kind key per document), so a bad file changes
 * nothing. Then each document in turn: GET the object; 404 -> POST it
 * ("created"); found -> PATCH only the fields whose values differ, as a
 * JSON merge patch conditional on the resource_version just read
 * ("configured", or "unchanged" when nothing differs or the server kept
 * the version). The first refusal stops the run (exit 1) with a message
 * naming the file and document.
 */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/suggest.h"
#include "common/yaml.h"

#define MAX_FILES 64

/* One document to apply. */
typedef struct item {
    const char *file;        /* as given ("-" shown as <stdin>) */
    int docno;               /* 1-based within its file */
    const char *kind;        /* "cluster", "nodepool", "model", "deployment" */
    json_t *body;            /* borrowed from the file's documents */
    char label[300];         /* "nodepool/demo/gpu" */
    char path[600];          /* /v1/clusters/demo/nodepools/gpu */
    char coll[400];          /* /v1/clusters/demo/nodepools */
} item_t;

static const char *const apply_kinds[] = {"credential", "store", "cluster", "nodepool",
                                          "model", "deployment", "job", NULL};

static const char *shown_name(const char *file)
{
    return strcmp(file, "-") == 0 ? "<stdin>" : file;
}

/* Check one document and fill it; -1 with err naming file and document. */
static int plan_item(const char *file, int docno, json_t *doc, item_t *it, drv_error_t *err)
{
    const char *name = shown_name(file);
    if (!json_is_object(doc) || json_object_size(doc) != 1)
        return drv_err_invalid(err, "", "%s: document %d: expected exactly one top-level key "
                               "naming the kind (credential, store, cluster, nodepool, model, deployment or job)",
                               name, docno);
    const char *kind = json_object_iter_key(json_object_iter(doc));
    json_t *body = json_object_iter_value(json_object_iter(doc));
    const char *const *k;
    for (k = apply_kinds; *k && strcmp(*k, kind) != 0; k++)
        ;
    if (!*k) {
        const char *near = drv_suggest_from(kind, apply_kinds);
        return drv_err_invalid(err, "", "%s: document %d: unknown kind \"%s\" (%s%s%sexpected "
                               "credential, store, cluster, nodepool, model, deployment or job)", name, docno,
                               kind, near ? "did you mean " : "", near ? near : "",
                               near ? "? " : "");
    }
    if (!json_is_object(body))
        return drv_err_invalid(err, "", "%s: document %d: %s must be a mapping of fields",
                               name, docno, kind);
    json_t *idv = json_object_get(body, "id");
    const char *id = json_string_value(idv);
    if (idv && !id)
        return drv_err_invalid(err, "", "%s: document %d (%s): id must be a string (quote it)",
                               name, docno, kind);
    if (!id || !*id)
        return drv_err_invalid(err, "", "%s: document %d (%s): missing id", name, docno, kind);
    memset(it, 0, sizeof *it);
    it->file = file, it->docno = docno, it->kind = *k, it->body = body;
    int rc;
    if (strcmp(kind, "nodepool") == 0) {
        const char *cluster = json_string_value(json_object_get(body, "cluster"));
        if (json_object_get(body, "cluster") && !cluster)
            return drv_err_invalid(err, "", "%s: document %d (nodepool/%s): cluster must "
                                   "be a string", name, docno, id);
        if (!cluster || !*cluster)
            return drv_err_invalid(err, "", "%s: document %d (nodepool/%s): missing "
                                   "cluster", name, docno, id);
        snprintf(it->label, sizeof it->label, "nodepool/%s/%s", cluster, id);
        rc = drv_cli_pathf(it->coll, sizeof it->coll, "/v1/clusters/%s/nodepools", cluster);
        rc |= drv_cli_pathf(it->path, sizeof it->path, "/v1/clusters/%s/nodepools/%s", cluster,
                            id);
    } else {
        snprintf(it->label, sizeof it->label, "%s/%s", kind, id);
        rc = drv_cli_pathf(it->coll, sizeof it->coll, "/v1/%ss", kind);
        rc |= drv_cli_pathf(it->path, sizeof it->path, "/v1/%ss/%s", kind, id);
    }
    if (rc < 0)
        return drv_err_invalid(err, "id", "%s: document %d (%s): id too long", name, docno,
                               it->label);
    return 0;
}

/* The merge patch that turns cur into want for the fields want names:
 * unchanged fields dropped, nested objects diffed. NULL when no change. */
static json_t *merge_diff(const json_t *cur, const json_t *want)
{
    json_t *patch = NULL;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)want, key, val) {
        const json_t *c = json_object_get(cur, key);
        json_t *d = NULL;
        if (json_is_object(val) && json_is_object(c))
            d = merge_diff(c, val);
        else if (!c || !json_equal(c, val))
            d = json_deep_copy(val);
        if (!d)
            continue;
        if (!patch)
            patch = json_object();
        json_object_set_new(patch, key, d);
    }
    return patch;
}

static json_int_t version_of(const json_t *obj)
{
    const json_t *v = json_object_get(obj, "resource_version");
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* Create or update one object. Fills *action and *result (new ref). */
static int apply_item(drv_cli_t *cli, const item_t *it, const char **action, json_t **result,
                      drv_error_t *err)
{
    long status = 0;
    *result = NULL;
    json_t *cur = drv_cli_call(cli, "GET", it->path, NULL, NULL, &status, err);
    if (!cur && status != 404)
        return -1;
    if (!cur) {
        *result = drv_cli_call(cli, "POST", it->coll, it->body, NULL, NULL, err);
        *action = "created";
        return *result ? 0 : -1;
    }
    json_t *patch = merge_diff(cur, it->body);
    if (!patch) {
        *action = "unchanged";
        *result = cur;
        return 0;
    }
    char ifm[32];
    json_int_t before = version_of(cur);
    if (before >= 0)
        snprintf(ifm, sizeof ifm, "%" JSON_INTEGER_FORMAT, before);
    *result = drv_cli_call(cli, "PATCH", it->path, patch, before >= 0 ? ifm : NULL, NULL, err);
    json_decref(patch);
    json_decref(cur);
    if (!*result)
        return -1;
    *action = version_of(*result) == before ? "unchanged" : "configured";
    return 0;
}

static int run_apply(drv_cli_t *cli, const drv_cli_args_t *a)
{
    const char *files[MAX_FILES];
    json_t *docs[MAX_FILES] = {0};
    item_t *items = NULL;
    size_t nitems = 0, cap = 0;
    int nfiles = drv_cli_opt_all(a, "filename", files, MAX_FILES), rc = DRV_CLI_OK, stdin_uses = 0;
    drv_error_t err = {0};
    json_t *results = json_array();
    bool structured = cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML;

    if (nfiles == 0) {
        rc = drv_cli_usage(a, "missing -f FILE (a YAML file, or - for standard input)");
        goto out;
    }
    for (int i = 0; i < nfiles; i++)
        stdin_uses += strcmp(files[i], "-") == 0;
    if (stdin_uses > 1) {
        rc = drv_cli_usage(a, "standard input (-f -) can be read only once");
        goto out;
    }
    /* Read and check everything before the first request. */
    for (int f = 0; f < nfiles; f++) {
        docs[f] = drv_yaml_load_file(files[f], &err);
        if (!docs[f]) {
            rc = drv_cli_fail(NULL, &err);
            goto out;
        }
        size_t d;
        json_t *doc;
        json_array_foreach(docs[f], d, doc) {
            if (json_is_null(doc))
                continue;            /* empty document, e.g. a trailing "---" */
            if (nitems == cap) {
                cap = cap ? cap * 2 : 16;
                item_t *ni = realloc(items, cap * sizeof *items);
                if (!ni) {
                    drv_err_internal(&err, "out of memory");
                    rc = drv_cli_fail(NULL, &err);
                    goto out;
                }
                items = ni;
            }
            if (plan_item(files[f], (int)d + 1, doc, &items[nitems], &err) < 0) {
                rc = drv_cli_fail(NULL, &err);
                goto out;
            }
            nitems++;
        }
    }
    if (nitems == 0) {
        drv_err_invalid(&err, "", "no objects to apply in %s%s", shown_name(files[0]),
                        nfiles > 1 ? " and the other files" : "");
        rc = drv_cli_fail(NULL, &err);
        goto out;
    }
    for (size_t i = 0; i < nitems; i++) {
        const item_t *it = &items[i];
        const char *action = NULL;
        json_t *obj = NULL;
        if (apply_item(cli, it, &action, &obj, &err) < 0) {
            drv_err_prefix(&err, "%s: document %d (%s)", shown_name(it->file), it->docno,
                           it->label);
            rc = drv_cli_fail(cli, &err);
            break;
        }
        if (structured) {
            json_array_append_new(results, json_pack("{s:s, s:s, s:s, s:o}", "kind", it->kind,
                                                     "name", it->label + strlen(it->kind) + 1,
                                                     "action", action, "object", obj));
        } else {
            printf("%s %s\n", it->label, action);
            fflush(stdout);
            json_decref(obj);
        }
    }
    if (structured)
        drv_cli_print_doc(cli, results);
out:
    for (int f = 0; f < nfiles && f < MAX_FILES; f++)
        json_decref(docs[f]);
    free(items);
    json_decref(results);
    return rc;
}

static const drv_cli_opt_t apply_opts[] = {
    {"filename", 'f', "FILE", "YAML file to apply; - reads standard input; repeatable"},
    {NULL, 0, NULL, NULL},
};

const drv_cli_cmd_t drv_cli_cmd_apply = {
    .name = "apply",
    .summary = "create or update the objects described in YAML files",
    .usage = "apply -f FILE [-f FILE...]",
    .help = "Each YAML document has one top-level key naming its kind: credential:,\n"
            "store:, cluster:, nodepool:, model:, deployment: or job:, holding the object's\n"
            "fields (see docs/api.md; a credential's secret is sent on every apply, as the\n"
            "server never shows it back). Objects are applied in file order: created when\n"
            "missing, else updated with the fields whose values differ (a JSON merge patch;\n"
            "fields the file leaves out keep their values). Each prints one line: KIND/ID\n"
            "created | configured | unchanged (nodepools as nodepool/CLUSTER/ID). Applying\n"
            "the same file twice changes nothing. Every file is read and checked before the\n"
            "first change; the first refusal stops the run with exit code 1.\n"
            "With -o json|yaml, prints a list of {kind, name, action, object} instead.\n"
            "\nExamples:\n"
            "  drover apply -f examples/quickstart.yaml\n"
            "  drover apply -f examples/aws-cluster.yaml -f examples/model.yaml\n"
            "  cat model.yaml | drover apply -f -\n",
    .opts = apply_opts,
    .min_pos = 0,
    .max_pos = 0,
    .run = run_apply,
};
