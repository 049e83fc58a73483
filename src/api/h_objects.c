/* h_objects.c — generic create / get / list / patch / delete for the user
 * resource kinds, driven by their descriptors (resource.h, kinds.c).
 *
 * Writes validate and change the in-memory state under the state write
 * lock, queue the record to the store in the same critical section, and
 * set resp->wait_seq so the answer leaves only once the write is durable.
 * Reads copy cached renderings under the read lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handlers.h"
#include "api/list.h"
#include "api/resource.h"
#include "common/json.h"
#include "common/util.h"
#include "state/head.h"
#include "store/store.h"

static const char *const read_only[] = {"owner", "created_at", "updated_at", "resource_version",
                                        "status", NULL};

static int reject_read_only(const json_t *body, drv_error_t *err)
{
    for (size_t i = 0; read_only[i]; i++)
        if (json_object_get(body, read_only[i]))
            return drv_err_invalid(err, read_only[i], "%s is set by the server and is read-only",
                                   read_only[i]);
    return 0;
}

static void make_key(const drv_kind_desc_t *d, const drv_req_t *req, const char *owner,
                     const char *id, char *key, size_t len)
{
    if (d->global)
        snprintf(key, len, "%s", id);
    else if (d->nested)
        snprintf(key, len, "%s/%s/%s", owner, req->params[0], id);
    else
        snprintf(key, len, "%s/%s", owner, id);
}

/* The id a path names: last capture. */
static const char *path_id(const drv_req_t *req)
{
    return req->n_params ? req->params[req->n_params - 1] : "";
}

static void copy_rendered(drv_resp_t *resp, int status, const drv_obj_t *o)
{
    char *body = drv_xmalloc(o->rendered_len + 1);
    memcpy(body, o->rendered, o->rendered_len + 1);
    drv_resp_raw(resp, status, "application/json", body, o->rendered_len);
    resp->etag = o->rv;
}

static uint64_t wait_for(drv_req_t *req, uint64_t seq)
{
    return seq > drv_store_committed(req->head->store) ? seq : 0;
}

static int parse_if_match(const drv_req_t *req, int64_t *rv, drv_error_t *err)
{
    *rv = -1;
    if (!req->if_match)
        return 0;
    const char *s = req->if_match;
    if (strncmp(s, "W/", 2) == 0)
        s += 2;
    char buf[32];
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
        s++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof buf)
        return drv_err_invalid(err, "If-Match", "If-Match must be a resource_version");
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    long long v = strtoll(buf, &end, 10);
    if (*end || v < 0)
        return drv_err_invalid(err, "If-Match", "If-Match must be a resource_version");
    *rv = v;
    return 0;
}

static int check_immutable(const drv_kind_desc_t *d, const json_t *old, const json_t *neu,
                           drv_error_t *err)
{
    for (size_t i = 0; d->immutable && d->immutable[i]; i++) {
        const char *f = d->immutable[i];
        if (!json_equal(json_object_get(old, f), json_object_get(neu, f)))
            return drv_err_unprocessable(err, f, "%s cannot be changed after creation", f);
    }
    return 0;
}

int drv_h_obj_create(drv_req_t *req, drv_resp_t *resp)
{
    const drv_kind_desc_t *d = req->route_arg;
    drv_state_t *st = req->head->state;
    drv_error_t err;
    json_t *spec = drv_req_json(req, &err);
    drv_obj_t *o = NULL;
    bool locked = false;
    if (!spec || reject_read_only(spec, &err) < 0)
        goto error;
    if (d->nested) {
        json_t *c = json_object_get(spec, "cluster");
        if (c && (!json_is_string(c) || strcmp(json_string_value(c), req->params[0]) != 0)) {
            drv_err_invalid(&err, "cluster", "cluster in the body must match the path ('%s')",
                            req->params[0]);
            goto error;
        }
        json_object_set_new(spec, "cluster", json_string(req->params[0]));
    }
    /* what the user gave is kept apart from the defaults, so that a later
     * PATCH recomputes defaults (and defaults derived from other fields) */
    json_t *given = json_deep_copy(spec);
    if (d->normalize)
        d->normalize(spec);
    if (drv_schema_validate(spec, d->schema, "", &err) < 0) {
        json_decref(given);
        goto error;
    }
    const char *id = json_string_value(json_object_get(spec, "id"));
    char key[256];
    make_key(d, req, req->who->user, id, key, sizeof key);
    /* build and render the object before taking the lock */
    o = drv_obj_new(d->kind, key, req->who->user, id, spec, json_pack("{s:o}", "given", given));
    spec = NULL;
    o->created_at = o->updated_at = drv_now_ms() / 1000;
    o->rv = 1;
    if (d->initial_status)
        o->status = d->initial_status(o);
    drv_obj_prepare(o);

    drv_state_wrlock(st);
    locked = true;
    if (drv_state_get(st, d->kind, key)) {
        drv_err_conflict(&err, "%s '%s' already exists", d->name, id);
        goto error;
    }
    if (d->check && d->check(req, req->who->user, o->spec, NULL, &err) < 0)
        goto error;
    uint64_t seq = drv_state_put(st, o);
    copy_rendered(resp, 201, o);
    /* id is the object's: once the lock is dropped, another thread may
     * replace it (a status write) and free its spec */
    if (d->nested)
        snprintf(resp->location, sizeof resp->location, "/v1/clusters/%s/nodepools/%s",
                 req->params[0], id);
    else
        snprintf(resp->location, sizeof resp->location, "%s/%s", d->path, id);
    drv_state_unlock(st);
    resp->wait_seq = wait_for(req, seq);
    return 0;
error:
    if (locked)
        drv_state_unlock(st);
    json_decref(spec);
    drv_obj_free(o);
    drv_resp_error(resp, &err);
    return 0;
}

int drv_h_obj_get(drv_req_t *req, drv_resp_t *resp)
{
    const drv_kind_desc_t *d = req->route_arg;
    drv_state_t *st = req->head->state;
    drv_error_t err;
    static const char *const allowed[] = {NULL};
    if (drv_req_check_query(req, allowed, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    char key[256];
    make_key(d, req, req->who->user, path_id(req), key, sizeof key);
    drv_state_rdlock(st);
    drv_obj_t *o = drv_state_get(st, d->kind, key);
    if (o) {
        copy_rendered(resp, 200, o);
        resp->wait_seq = wait_for(req, o->seq);
    }
    drv_state_unlock(st);
    if (!o) {
        drv_err_not_found(&err, "%s '%s' not found", d->name, path_id(req));
        drv_resp_error(resp, &err);
    }
    return 0;
}

static bool in_cluster_named(const drv_obj_t *o, void *ctx)
{
    const char *c = json_string_value(json_object_get(o->spec, "cluster"));
    return c && strcmp(c, ctx) == 0;
}

int drv_h_obj_list(drv_req_t *req, drv_resp_t *resp)
{
    const drv_kind_desc_t *d = req->route_arg;
    drv_state_t *st = req->head->state;
    drv_error_t err;
    static const char *const allowed[] = {"limit", "page_token", "all_users", NULL};
    int64_t limit = 100;
    bool all = false;
    if (drv_req_check_query(req, allowed, &err) < 0 ||
        drv_req_query_int(req, "limit", 1, 1000, &limit, &err) < 0 ||
        drv_req_query_bool(req, "all_users", &all, &err) < 0)
        goto error;
    if (d->global)   /* one namespace: everyone lists all of them */
        return drv_list_prefix(req, resp, d->kind, "", NULL, NULL);
    if (all && !req->who->admin) {
        drv_err(&err, 403, "permission_denied", "all_users", "only admins may list all users' %ss",
                d->name);
        goto error;
    }
    bool in_cluster = d->nested && req->n_params == 1;
    char prefix[256] = "";
    if (!all && in_cluster)
        snprintf(prefix, sizeof prefix, "%s/%s/", req->who->user, req->params[0]);
    else if (!all)
        snprintf(prefix, sizeof prefix, "%s/", req->who->user);
    if (in_cluster && !all) {
        char ckey[256];
        snprintf(ckey, sizeof ckey, "%s/%s", req->who->user, req->params[0]);
        drv_state_rdlock(st);
        bool exists = drv_state_get(st, DRV_K_CLUSTER, ckey) != NULL;
        drv_state_unlock(st);
        if (!exists) {
            drv_err_not_found(&err, "cluster '%s' not found", req->params[0]);
            goto error;
        }
    }
    if (in_cluster && all)   /* every user's nodepools of clusters with this id */
        return drv_list_prefix(req, resp, d->kind, prefix, in_cluster_named,
                               (void *)req->params[0]);
    return drv_list_prefix(req, resp, d->kind, prefix, NULL, NULL);
error:
    drv_resp_error(resp, &err);
    return 0;
}

int drv_h_obj_patch(drv_req_t *req, drv_resp_t *resp)
{
    const drv_kind_desc_t *d = req->route_arg;
    drv_state_t *st = req->head->state;
    drv_error_t err;
    json_t *patch = drv_req_json(req, &err), *spec = NULL, *given = NULL;
    bool locked = false;
    int64_t want_rv;
    const char *id = path_id(req);
    if (!patch || reject_read_only(patch, &err) < 0 || parse_if_match(req, &want_rv, &err) < 0)
        goto error;
    char key[256];
    make_key(d, req, req->who->user, id, key, sizeof key);

    drv_state_wrlock(st);
    locked = true;
    drv_obj_t *old = drv_state_get(st, d->kind, key);
    if (!old) {
        drv_err_not_found(&err, "%s '%s' not found", d->name, id);
        goto error;
    }
    if (want_rv >= 0 && want_rv != old->rv) {
        drv_err_conflict(&err, "%s '%s' has resource_version %lld, not %lld: it changed since "
                         "you read it", d->name, id, (long long)old->rv, (long long)want_rv);
        goto error;
    }
    /* merge into what the user gave (older records: the whole spec) */
    const json_t *old_given = json_object_get(old->internal, "given");
    if (!old_given)
        old_given = old->spec;
    given = drv_json_merge_patch(old_given, patch);
    if (!json_equal(json_object_get(given, "id"), json_object_get(old->spec, "id"))) {
        drv_err_unprocessable(&err, "id", "id cannot be changed (it names the %s)", d->name);
        goto error;
    }
    spec = json_deep_copy(given);
    if (d->normalize)
        d->normalize(spec);
    if (drv_schema_validate(spec, d->schema, "", &err) < 0 ||
        check_immutable(d, old->spec, spec, &err) < 0 ||
        (d->check && d->check(req, req->who->user, spec, old, &err) < 0))
        goto error;
    if (json_equal(spec, old->spec) && json_equal(given, old_given)) {   /* no change */
        copy_rendered(resp, 200, old);
        resp->wait_seq = wait_for(req, old->seq);
        drv_state_unlock(st);
        json_decref(spec);
        json_decref(given);
        json_decref(patch);
        return 0;
    }
    json_t *internal = old->internal ? json_deep_copy(old->internal) : json_object();
    json_object_set_new(internal, "given", given);
    given = NULL;
    drv_obj_t *o = drv_obj_new(d->kind, key, old->owner, old->id, spec, internal);
    spec = NULL;
    o->created_at = old->created_at;
    o->updated_at = drv_now_ms() / 1000;
    o->rv = old->rv + 1;
    if (old->status)
        o->status = json_incref(old->status);
    uint64_t seq = drv_state_put(st, o);
    copy_rendered(resp, 200, o);
    drv_state_unlock(st);
    resp->wait_seq = wait_for(req, seq);
    json_decref(patch);
    return 0;
error:
    if (locked)
        drv_state_unlock(st);
    json_decref(spec);
    json_decref(given);
    json_decref(patch);
    drv_resp_error(resp, &err);
    return 0;
}

int drv_h_obj_delete(drv_req_t *req, drv_resp_t *resp)
{
    const drv_kind_desc_t *d = req->route_arg;
    drv_state_t *st = req->head->state;
    drv_error_t err;
    static const char *const allowed[] = {"cascade", NULL};
    bool cascade = false;
    int64_t want_rv;
    const char *id = path_id(req);
    if (drv_req_check_query(req, allowed, &err) < 0 ||
        drv_req_query_bool(req, "cascade", &cascade, &err) < 0 ||
        parse_if_match(req, &want_rv, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    char key[256];
    make_key(d, req, req->who->user, id, key, sizeof key);
    drv_state_wrlock(st);
    drv_obj_t *o = drv_state_get(st, d->kind, key);
    uint64_t seq = 0;
    if (!o) {
        drv_err_not_found(&err, "%s '%s' not found", d->name, id);
        goto error;
    }
    if (want_rv >= 0 && want_rv != o->rv) {
        drv_err_conflict(&err, "%s '%s' has resource_version %lld, not %lld", d->name, id,
                         (long long)o->rv, (long long)want_rv);
        goto error;
    }
    /* check first (no change on refusal), then delete children */
    if (d->before_delete && d->before_delete(st, o, cascade, &seq, &err) < 0)
        goto error;
    o = drv_state_get(st, d->kind, key);
    copy_rendered(resp, 200, o);
    resp->etag = 0;
    seq = drv_state_del(st, d->kind, key);
    drv_state_unlock(st);
    resp->wait_seq = wait_for(req, seq);
    return 0;
error:
    drv_state_unlock(st);
    drv_resp_error(resp, &err);
    return 0;
}
