/* routes_doc.c — see routes_doc.h: the routing table and the inference
 * tokens as a JSON document (head side) and back (gateway side). Pure
 * (droverd's table and tokens come from api/gateway_state.c).
 */
#include "gateway/routes_doc.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* --- head side ------------------------------------------------------------------ */

static uint64_t fnv64(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

char *drv_gw_routes_doc(const drv_gw_table_t *t, json_t *tokens, size_t *len,
                        char version[DRV_GW_VERSION_LEN])
{
    json_t *deps = json_array();
    for (size_t d = 0; d < t->n_deps; d++) {
        const drv_gw_tdep_t *td = &t->deps[d];
        json_t *reps = json_array();
        for (size_t k = 0; k < td->n; k++) {
            const drv_gw_trep_t *r = &t->reps[td->first + k];
            json_array_append_new(reps, json_pack("{s:s, s:s, s:s, s:b}", "key", r->key, "id",
                                                  r->id, "endpoint", r->endpoint, "ready",
                                                  r->ready));
        }
        json_array_append_new(
            deps, json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:b, s:I, s:i, s:i, s:o}",
                            "key", td->key, "owner", td->owner, "id", td->id, "predict_path",
                            td->predict_path, "health_path", td->health_path, "max_concurrency",
                            td->max_concurrency, "cold_start_ms", td->cold_start_ms, "enabled",
                            td->enabled, "created", (json_int_t)td->created,
                            "desired_replicas", td->desired_replicas, "ready_replicas",
                            td->ready_replicas, "replicas", reps));
    }
    json_t *doc = json_pack("{s:o, s:o}", "deployments", deps, "tokens", tokens);
    char *body = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(doc);
    if (!body)
        return NULL;
    /* dumped once: the version is the hash of this dump, spliced in before
     * its closing brace ("version" sorts after "tokens": the document stays
     * in sorted-key order) */
    size_t n = strlen(body);
    assert(n >= 2 && body[n - 1] == '}');
    snprintf(version, DRV_GW_VERSION_LEN, "%016llx", (unsigned long long)fnv64(body, n));
    static const char field[] = ",\"version\":\"\"}";
    char *out = realloc(body, n + sizeof field + DRV_GW_VERSION_LEN);
    if (!out) {
        free(body);
        return NULL;
    }
    n--;   /* over the closing brace */
    n += (size_t)snprintf(out + n, sizeof field + DRV_GW_VERSION_LEN, ",\"version\":\"%s\"}",
                          version);
    *len = n;
    return out;
}

/* --- gateway side ------------------------------------------------------------------ */

static int tok_cmp(const void *a, const void *b)
{
    return strcmp(((const drv_gw_tok_t *)a)->hash, ((const drv_gw_tok_t *)b)->hash);
}

int drv_gw_tokens_parse(const json_t *arr, drv_gw_tokens_t **out, drv_error_t *err)
{
    drv_gw_tokens_t *ts = calloc(1, sizeof *ts);
    size_t n = json_array_size(arr);
    if (ts)
        ts->v = calloc(n ? n : 1, sizeof *ts->v);
    if (!ts || !ts->v) {
        drv_gw_tokens_free(ts);
        return drv_err_internal(err, "out of memory");
    }
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o) {
        const char *h = json_string_value(json_object_get(o, "hash"));
        const char *u = json_string_value(json_object_get(o, "user"));
        json_t *e = json_object_get(o, "expires_at");
        if (!h || strlen(h) != 64 || !u || !*u || strlen(u) >= sizeof ts->v[0].user ||
            !json_is_integer(e) || !json_is_boolean(json_object_get(o, "predict"))) {
            drv_gw_tokens_free(ts);
            return drv_err_invalid(err, "tokens", "routes document: token %zu is malformed", i);
        }
        drv_gw_tok_t *t = &ts->v[ts->n++];
        snprintf(t->hash, sizeof t->hash, "%s", h);
        snprintf(t->user, sizeof t->user, "%s", u);
        t->expires_at = json_integer_value(e);
        t->predict = json_is_true(json_object_get(o, "predict"));
    }
    qsort(ts->v, ts->n, sizeof *ts->v, tok_cmp);
    *out = ts;
    return 0;
}

static const char *str_of(const json_t *o, const char *k, bool *bad)
{
    const char *s = json_string_value(json_object_get(o, k));
    if (!s) {
        *bad = true;
        return "";
    }
    return s;
}

static int int_of(const json_t *o, const char *k, bool *bad)
{
    const json_t *v = json_object_get(o, k);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
        *bad = true;
        return 0;
    }
    return (int)json_integer_value(v);
}

static int parse_table(const json_t *deps, drv_gw_table_t **out, drv_error_t *err)
{
    drv_gw_table_t *t = calloc(1, sizeof *t);
    size_t nd = json_array_size(deps), nr = 0, i;
    json_t *d;
    json_array_foreach(deps, i, d) nr += json_array_size(json_object_get(d, "replicas"));
    if (t) {
        t->deps = calloc(nd ? nd : 1, sizeof *t->deps);
        t->reps = calloc(nr ? nr : 1, sizeof *t->reps);
    }
    if (!t || !t->deps || !t->reps) {
        drv_gw_table_free(t);
        return drv_err_internal(err, "out of memory");
    }
    bool bad = false;
    json_array_foreach(deps, i, d) {
        drv_gw_tdep_t *td = &t->deps[t->n_deps++];
        const json_t *reps = json_object_get(d, "replicas");
        if (!json_is_object(d) || !json_is_array(reps) || !json_is_boolean(json_object_get(d, "enabled")))
            bad = true;
        td->key = drv_gw_table_str(t, str_of(d, "key", &bad));
        td->owner = drv_gw_table_str(t, str_of(d, "owner", &bad));
        td->id = drv_gw_table_str(t, str_of(d, "id", &bad));
        td->predict_path = drv_gw_table_str(t, str_of(d, "predict_path", &bad));
        td->health_path = drv_gw_table_str(t, str_of(d, "health_path", &bad));
        td->max_concurrency = int_of(d, "max_concurrency", &bad);
        td->cold_start_ms = int_of(d, "cold_start_ms", &bad);
        td->desired_replicas = int_of(d, "desired_replicas", &bad);
        td->ready_replicas = int_of(d, "ready_replicas", &bad);
        td->enabled = json_is_true(json_object_get(d, "enabled"));
        /* optional: a head from before it was added sends none */
        td->created = (int64_t)json_integer_value(json_object_get(d, "created"));
        if (i > 0 && strcmp(t->deps[i - 1].key, td->key) >= 0)
            bad = true;   /* the gateway binary-searches: keys must be sorted */
        td->first = t->n_reps;
        size_t k;
        json_t *r;
        json_array_foreach(reps, k, r) {
            drv_gw_trep_t *tr = &t->reps[t->n_reps++];
            tr->key = drv_gw_table_str(t, str_of(r, "key", &bad));
            tr->id = drv_gw_table_str(t, str_of(r, "id", &bad));
            tr->endpoint = drv_gw_table_str(t, str_of(r, "endpoint", &bad));
            if (!json_is_boolean(json_object_get(r, "ready")) ||
                strncmp(tr->endpoint, "http://", 7) != 0 ||
                (k > 0 && strcmp(t->reps[t->n_reps - 2].key, tr->key) >= 0))
                bad = true;
            tr->ready = json_is_true(json_object_get(r, "ready"));
        }
        td->n = t->n_reps - td->first;
        if (bad) {
            drv_gw_table_free(t);
            return drv_err_invalid(err, "deployments",
                                   "routes document: deployment %zu is malformed", i);
        }
    }
    *out = t;
    return 0;
}

int drv_gw_routes_parse(const char *body, size_t len, drv_gw_table_t **t,
                        drv_gw_tokens_t **toks, char version[DRV_GW_VERSION_LEN],
                        drv_error_t *err)
{
    json_error_t je;
    json_t *doc = json_loadb(body, len, 0, &je);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return drv_err_invalid(err, "", "routes document: not a JSON object (%s)", je.text);
    }
    const char *v = json_string_value(json_object_get(doc, "version"));
    const json_t *deps = json_object_get(doc, "deployments");
    const json_t *tk = json_object_get(doc, "tokens");
    if (!v || strlen(v) != DRV_GW_VERSION_LEN - 1 || !json_is_array(deps) || !json_is_array(tk)) {
        json_decref(doc);
        return drv_err_invalid(err, "", "routes document: needs version, deployments, tokens");
    }
    drv_gw_table_t *nt = NULL;
    drv_gw_tokens_t *ntk = NULL;
    if (parse_table(deps, &nt, err) < 0 || drv_gw_tokens_parse(tk, &ntk, err) < 0) {
        drv_gw_table_free(nt);
        json_decref(doc);
        return -1;
    }
    snprintf(version, DRV_GW_VERSION_LEN, "%s", v);
    json_decref(doc);
    *t = nt;
    *toks = ntk;
    return 0;
}

const drv_gw_tok_t *drv_gw_tokens_find(const drv_gw_tokens_t *ts, const char *hash)
{
    if (!ts || strlen(hash) != 64)
        return NULL;
    size_t lo = 0, hi = ts->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ts->v[mid].hash, hash);
        if (c == 0)
            return drv_ct_equal(ts->v[mid].hash, hash, 64) ? &ts->v[mid] : NULL;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void drv_gw_tokens_free(drv_gw_tokens_t *ts)
{
    if (!ts)
        return;
    free(ts->v);
    free(ts);
}
