/* h_users.c — users, personal access tokens and "who am I".
 *
 * Users are keyed by id; tokens by "user/token-id" with the SHA-256 of the
 * secret in their internal record (indexed by state.c for authentication).
 * A revoked token stays listed with revoked: true and never authenticates.
 * Also the first-start bootstrap of the admin user and its token file.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/auth.h"
#include "api/gateway_state.h"
#include "api/handlers.h"
#include "api/list.h"
#include "api/schema.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "state/head.h"
#include "state/state.h"
#include "store/store.h"

#define END {NULL, 0, false, 0, 0, NULL, NULL, NULL}
#define MAX_TOKENS_PER_USER 1000

static const char *const roles[] = {"admin", "member", NULL};
static const char *const scope_names[] = {"all", "read", "predict", "gateway", NULL};

static const drv_field_t user_fields[] = {
    {"id", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"role", DRV_F_ENUM, false, 0, 0, roles, NULL, "\"member\""},
    {"gpu_quota", DRV_F_NUMBER, false, 0, 1e6, NULL, NULL, NULL},   /* jobs' GPUs at once */
    END,
};

/* PATCH /v1/users/{id} (admins): only the quota. */
static const drv_field_t user_patch_fields[] = {
    {"gpu_quota", DRV_F_NUMBER, true, 0, 1e6, NULL, NULL, NULL},
    END,
};

static const drv_field_t token_fields[] = {
    {"id", DRV_F_ID, false, 0, 0, NULL, NULL, NULL},
    {"description", DRV_F_STRING, false, 0, 256, NULL, NULL, "\"\""},
    {"scopes", DRV_F_STRLIST, false, 1, 4, scope_names, NULL, "[\"all\"]"},
    {"expires_in_seconds", DRV_F_INT, false, 60, 315360000, NULL, NULL, NULL},
    END,
};

static uint64_t wait_for(drv_req_t *req, uint64_t seq)
{
    return seq > drv_store_committed(req->head->store) ? seq : 0;
}

static void send_obj(drv_resp_t *resp, int status, const drv_obj_t *o)
{
    char *body = drv_xmalloc(o->rendered_len + 1);
    memcpy(body, o->rendered, o->rendered_len + 1);
    drv_resp_raw(resp, status, "application/json", body, o->rendered_len);
    resp->etag = o->rv;
}

/* Create a token object for user (under the write lock). secret gets the
 * cleartext. Returns the new object (owned by the state). */
static drv_obj_t *mint_token(drv_state_t *st, const char *user, const char *id,
                             const char *description, json_t *scopes, int64_t expires_in,
                             char secret[DRV_TOKEN_LEN + 1], uint64_t *seq, drv_error_t *err)
{
    char hash[65], key[160], exp[32];
    if (drv_token_mint(secret, hash, err) < 0)
        return NULL;
    snprintf(key, sizeof key, "%s/%s", user, id);
    int64_t now = drv_now_ms() / 1000;
    json_t *spec = json_pack("{s:s, s:s, s:O, s:n, s:b}", "id", id, "description", description,
                             "scopes", scopes, "expires_at", "revoked", 0);
    if (expires_in > 0) {
        drv_rfc3339(now + expires_in, exp, sizeof exp);
        json_object_set_new(spec, "expires_at", json_string(exp));
    }
    drv_obj_t *o = drv_obj_new(DRV_K_TOKEN, key, user, id, spec, json_pack("{s:s}", "hash", hash));
    o->created_at = o->updated_at = now;
    o->rv = 1;
    *seq = drv_state_put(st, o);
    return o;
}

/* Rendered object + "secret" (shown once). */
static void send_with_secret(drv_resp_t *resp, const drv_obj_t *o, const char *field,
                             json_t *extra)
{
    json_t *doc = json_loadb(o->rendered, o->rendered_len, 0, NULL);
    json_object_set_new(doc, field, extra);
    drv_resp_json(resp, 201, doc);
    resp->etag = o->rv;
}

int drv_users_bootstrap(drv_head_t *head, drv_error_t *err)
{
    drv_state_t *st = head->state;
    char secret[DRV_TOKEN_LEN + 1], path[600];
    uint64_t seq = 0;
    drv_state_wrlock(st);
    if (drv_state_count(st, DRV_K_USER) > 0) {
        drv_state_unlock(st);
        return 0;
    }
    drv_obj_t *u = drv_obj_new(DRV_K_USER, "admin", "admin", "admin",
                               json_pack("{s:s, s:s}", "id", "admin", "role", "admin"), NULL);
    u->created_at = u->updated_at = drv_now_ms() / 1000;
    u->rv = 1;
    drv_state_put(st, u);
    json_t *scopes = json_pack("[s]", "all");
    drv_obj_t *t = mint_token(st, "admin", "admin", "first token, written to admin.token",
                              scopes, 0, secret, &seq, err);
    json_decref(scopes);
    drv_state_unlock(st);
    if (!t)
        return -1;
    drv_store_wait(head->store, seq);
    snprintf(path, sizeof path, "%s/admin.token", head->data_dir);
    char tmp[620];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return drv_err_internal(err, "cannot write %s", tmp);
    char line[DRV_TOKEN_LEN + 2];
    snprintf(line, sizeof line, "%s\n", secret);
    ssize_t w = write(fd, line, strlen(line));
    if (w != (ssize_t)strlen(line) || fsync(fd) < 0 || close(fd) < 0 || rename(tmp, path) < 0)
        return drv_err_internal(err, "cannot write %s", path);
    drv_info("first start: created user 'admin'; its token is in %s (mode 0600)", path);
    return 0;
}

int drv_h_me(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    char key[160];
    snprintf(key, sizeof key, "%s/%s", req->who->user, req->who->token_id);
    drv_state_rdlock(st);
    drv_obj_t *t = drv_state_get(st, DRV_K_TOKEN, key);
    /* copies, not references: the answer is dumped and freed after the
     * unlock, when another write may have dropped the token's spec */
    json_t *tok = t ? json_pack("{s:s, s:o, s:o}", "id", t->id, "scopes",
                                json_deep_copy(json_object_get(t->spec, "scopes")), "expires_at",
                                json_deep_copy(json_object_get(t->spec, "expires_at")))
                    : json_null();
    drv_state_unlock(st);
    drv_resp_json(resp, 200, json_pack("{s:s, s:s, s:o}", "id", req->who->user, "role",
                                       req->who->admin ? "admin" : "member", "token", tok));
    return 0;
}

int drv_h_users_list(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    static const char *const allowed[] = {"limit", "page_token", NULL};
    if (drv_req_check_query(req, allowed, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    return drv_list_prefix(req, resp, DRV_K_USER, "", NULL, NULL);
}

int drv_h_user_create(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    drv_error_t err;
    json_t *spec = drv_req_json(req, &err);
    if (!spec || drv_schema_validate(spec, user_fields, "", &err) < 0) {
        json_decref(spec);
        drv_resp_error(resp, &err);
        return 0;
    }
    char id[64];
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(spec, "id")));
    char secret[DRV_TOKEN_LEN + 1];
    uint64_t seq;
    drv_state_wrlock(st);
    if (drv_state_get(st, DRV_K_USER, id)) {
        drv_state_unlock(st);
        drv_err_conflict(&err, "user '%s' already exists", id);
        json_decref(spec);
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_obj_t *u = drv_obj_new(DRV_K_USER, id, id, id, spec, NULL);
    u->created_at = u->updated_at = drv_now_ms() / 1000;
    u->rv = 1;
    drv_state_put(st, u);
    json_t *scopes = json_pack("[s]", "all");
    drv_obj_t *t = mint_token(st, id, "initial", "first token, made with the user", scopes, 0,
                              secret, &seq, &err);
    json_decref(scopes);
    if (!t) {
        drv_state_del(st, DRV_K_USER, id);
        drv_state_unlock(st);
        drv_resp_error(resp, &err);
        return 0;
    }
    u = drv_state_get(st, DRV_K_USER, id);
    send_with_secret(resp, u, "token", json_pack("{s:s, s:s}", "id", "initial", "secret", secret));
    drv_gw_tokens_changed(req->head);
    drv_state_unlock(st);
    snprintf(resp->location, sizeof resp->location, "/v1/users/%s", id);
    resp->wait_seq = wait_for(req, seq);
    drv_head_kick(req->head);   /* standalone gateways' token sets: at the next pass, now */
    return 0;
}

int drv_h_user_get(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    drv_error_t err;
    const char *id = req->params[0];
    if (strcmp(id, "me") != 0 && !req->who->admin && strcmp(id, req->who->user) != 0) {
        drv_err_not_found(&err, "user '%s' not found", id);
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_state_rdlock(st);
    drv_obj_t *u = drv_state_get(st, DRV_K_USER, id);
    if (u)
        send_obj(resp, 200, u);
    drv_state_unlock(st);
    if (!u) {
        drv_err_not_found(&err, "user '%s' not found", id);
        drv_resp_error(resp, &err);
    }
    return 0;
}

int drv_h_user_patch(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    drv_error_t err;
    const char *id = req->params[0];
    json_t *body = drv_req_json(req, &err);
    if (body && json_is_object(body) && json_is_null(json_object_get(body, "gpu_quota")))
        json_object_del(body, "gpu_quota");   /* null: no quota */
    else if (!body || drv_schema_validate(body, user_patch_fields, "", &err) < 0) {
        json_decref(body);
        drv_resp_error(resp, &err);
        return 0;
    }
    if (json_object_size(body) > 1 || (json_object_size(body) == 1 &&
                                       !json_object_get(body, "gpu_quota"))) {
        drv_err_invalid(&err, json_object_iter_key(json_object_iter(body)),
                        "only gpu_quota can be changed on a user");
        json_decref(body);
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_state_wrlock(st);
    drv_obj_t *u = drv_state_get(st, DRV_K_USER, id);
    if (!u) {
        drv_state_unlock(st);
        json_decref(body);
        drv_err_not_found(&err, "user '%s' not found", id);
        drv_resp_error(resp, &err);
        return 0;
    }
    json_t *spec = json_deep_copy(u->spec);
    const json_t *q = json_object_get(body, "gpu_quota");
    if (q)
        json_object_set(spec, "gpu_quota", (json_t *)q);
    else
        json_object_del(spec, "gpu_quota");
    drv_obj_t *n = drv_obj_new(DRV_K_USER, u->key, u->owner, u->id, spec,
                               u->internal ? json_deep_copy(u->internal) : NULL);
    n->created_at = u->created_at;
    n->updated_at = drv_now_ms() / 1000;
    n->rv = u->rv + 1;
    uint64_t seq = drv_state_put(st, n);
    n = drv_state_get(st, DRV_K_USER, id);
    send_obj(resp, 200, n);
    json_decref(body);   /* under the lock: the user's spec shares its gpu_quota (h_agent.c) */
    drv_state_unlock(st);
    resp->wait_seq = wait_for(req, seq);
    drv_head_kick(req->head);   /* admission sees the quota at the next pass */
    return 0;
}

/* Delete every object of kind whose key starts with prefix. */
static uint64_t delete_prefix(drv_state_t *st, drv_kind_t kind, const char *prefix)
{
    uint64_t seq = 0;
    size_t plen = strlen(prefix);
    for (;;) {
        size_t i = drv_state_lower_bound(st, kind, prefix);
        drv_obj_t *o = drv_state_at(st, kind, i);
        if (!o || strncmp(o->key, prefix, plen) != 0)
            return seq;
        seq = drv_state_del(st, kind, o->key);
    }
}

int drv_h_user_delete(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    drv_error_t err;
    static const char *const allowed[] = {"cascade", NULL};
    bool cascade = false;
    const char *id = req->params[0];
    if (drv_req_check_query(req, allowed, &err) < 0 ||
        drv_req_query_bool(req, "cascade", &cascade, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    if (strcmp(id, req->who->user) == 0) {
        drv_err_conflict(&err, "you cannot delete your own user");
        drv_resp_error(resp, &err);
        return 0;
    }
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", id);
    drv_state_wrlock(st);
    drv_obj_t *u = drv_state_get(st, DRV_K_USER, id);
    if (!u) {
        drv_state_unlock(st);
        drv_err_not_found(&err, "user '%s' not found", id);
        drv_resp_error(resp, &err);
        return 0;
    }
    static const drv_kind_t owned[] = {DRV_K_JOB, DRV_K_DEPLOYMENT, DRV_K_MODEL, DRV_K_ARTIFACT,
                                       DRV_K_NODEPOOL, DRV_K_CLUSTER, DRV_K_CREDENTIAL};
    const size_t n_owned = sizeof owned / sizeof owned[0];
    for (size_t k = 0; k < n_owned && !cascade; k++) {
        drv_obj_t *o = drv_state_at(st, owned[k], drv_state_lower_bound(st, owned[k], prefix));
        if (o && strncmp(o->key, prefix, strlen(prefix)) == 0) {
            drv_err_conflict(&err, "user '%s' still owns %s '%s' (and maybe more); delete "
                             "them first or use ?cascade=true", id, drv_kind_names[owned[k]],
                             o->id);   /* under the lock: o is the state's */
            drv_state_unlock(st);
            drv_resp_error(resp, &err);
            return 0;
        }
    }
    send_obj(resp, 200, u);
    resp->etag = 0;
    uint64_t seq = 0, s;
    for (size_t k = 0; k < n_owned; k++)
        if ((s = delete_prefix(st, owned[k], prefix)))
            seq = s;
    if ((s = delete_prefix(st, DRV_K_TOKEN, prefix)))
        seq = s;
    seq = drv_state_del(st, DRV_K_USER, id);
    drv_gw_tokens_changed(req->head);
    drv_state_unlock(st);
    resp->wait_seq = wait_for(req, seq);
    drv_head_kick(req->head);   /* ... and standalone gateways' at the next pass: now */
    return 0;
}

int drv_h_tokens_list(drv_req_t *req, drv_resp_t *resp)
{
    static const char *const allowed[] = {"limit", "page_token", "all_users", NULL};
    char prefix[96];
    if (drv_list_scope(req, resp, allowed, "tokens", prefix, sizeof prefix) < 0)
        return 0;
    return drv_list_prefix(req, resp, DRV_K_TOKEN, prefix, NULL, NULL);
}

int drv_h_token_create(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    drv_error_t err;
    json_t *in = drv_req_json(req, &err);
    if (!in || drv_schema_validate(in, token_fields, "", &err) < 0) {
        json_decref(in);
        drv_resp_error(resp, &err);
        return 0;
    }
    char id[64], secret[DRV_TOKEN_LEN + 1], prefix[96], key[160];
    const char *given = json_string_value(json_object_get(in, "id"));
    if (given) {
        snprintf(id, sizeof id, "%s", given);
    } else {
        char hex[17];
        drv_random_hex(4, hex);
        snprintf(id, sizeof id, "tok-%s", hex);
    }
    snprintf(prefix, sizeof prefix, "%s/", req->who->user);
    snprintf(key, sizeof key, "%s/%s", req->who->user, id);
    uint64_t seq;
    drv_state_wrlock(st);
    if (drv_state_get(st, DRV_K_TOKEN, key)) {
        drv_state_unlock(st);
        json_decref(in);
        drv_err_conflict(&err, "token '%s' already exists", id);
        drv_resp_error(resp, &err);
        return 0;
    }
    size_t n = 0;
    for (size_t i = drv_state_lower_bound(st, DRV_K_TOKEN, prefix);
         i < drv_state_count(st, DRV_K_TOKEN) &&
         strncmp(drv_state_at(st, DRV_K_TOKEN, i)->key, prefix, strlen(prefix)) == 0;
         i++)
        n++;
    if (n >= MAX_TOKENS_PER_USER) {
        drv_state_unlock(st);
        json_decref(in);
        drv_err(&err, 422, "unprocessable", "", "you have %zu tokens, the most one user may "
                "have; revoke or delete some first", n);
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_obj_t *t = mint_token(st, req->who->user, id,
                              json_string_value(json_object_get(in, "description")),
                              json_object_get(in, "scopes"),
                              json_integer_value(json_object_get(in, "expires_in_seconds")),
                              secret, &seq, &err);
    if (t) {
        send_with_secret(resp, t, "secret", json_string(secret));
        drv_gw_tokens_changed(req->head);
    }
    json_decref(in);   /* under the lock: the token's spec shares its scopes (h_agent.c) */
    drv_state_unlock(st);
    if (!t) {
        drv_resp_error(resp, &err);
        return 0;
    }
    snprintf(resp->location, sizeof resp->location, "/v1/tokens/%s", id);
    resp->wait_seq = wait_for(req, seq);
    drv_head_kick(req->head);   /* standalone gateways' token sets: at the next pass, now */
    return 0;
}

int drv_h_token_get(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    drv_error_t err;
    char key[160];
    snprintf(key, sizeof key, "%s/%s", req->who->user, req->params[0]);
    drv_state_rdlock(st);
    drv_obj_t *t = drv_state_get(st, DRV_K_TOKEN, key);
    if (t)
        send_obj(resp, 200, t);
    drv_state_unlock(st);
    if (!t) {
        drv_err_not_found(&err, "token '%s' not found", req->params[0]);
        drv_resp_error(resp, &err);
    }
    return 0;
}

int drv_h_token_revoke(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    drv_error_t err;
    char key[160];
    snprintf(key, sizeof key, "%s/%s", req->who->user, req->params[0]);
    drv_state_wrlock(st);
    drv_obj_t *old = drv_state_get(st, DRV_K_TOKEN, key);
    if (!old) {
        drv_state_unlock(st);
        drv_err_not_found(&err, "token '%s' not found", req->params[0]);
        drv_resp_error(resp, &err);
        return 0;
    }
    if (json_is_true(json_object_get(old->spec, "revoked"))) {
        send_obj(resp, 200, old);
        resp->wait_seq = wait_for(req, old->seq);
        drv_state_unlock(st);
        return 0;
    }
    json_t *spec = json_deep_copy(old->spec);
    json_object_set_new(spec, "revoked", json_true());
    drv_obj_t *t = drv_obj_new(DRV_K_TOKEN, key, old->owner, old->id, spec,
                               json_incref(old->internal));
    t->created_at = old->created_at;
    t->updated_at = drv_now_ms() / 1000;
    t->rv = old->rv + 1;
    uint64_t seq = drv_state_put(st, t);
    send_obj(resp, 200, t);
    drv_gw_tokens_changed(req->head);   /* in force there before the 200 */
    drv_state_unlock(st);
    resp->wait_seq = wait_for(req, seq);
    drv_head_kick(req->head);   /* standalone gateways stop taking it at the next pass: now */
    return 0;
}
