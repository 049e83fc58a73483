/* auth.c — see auth.h. Reads the state under its read lock only. */
#include "api/auth.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "state/state.h"

int drv_authenticate(drv_head_t *head, const char *authz, drv_principal_t *who,
                     drv_error_t *err)
{
    memset(who, 0, sizeof *who);
    const char *secret = drv_auth_secret(authz, err);
    if (!secret)
        return -1;
    char hash[65];
    if (drv_token_hash(secret, hash, err) < 0)
        return -1;

    int rc = 0;
    drv_state_rdlock(head->state);
    drv_obj_t *tok = drv_state_by_hash(head->state, hash);
    if (!tok || tok->kind != DRV_K_TOKEN || !drv_ct_equal(tok->hash, hash, 64)) {
        rc = drv_err(err, 401, "unauthenticated", "", "invalid token");
        goto out;
    }
    if (json_is_true(json_object_get(tok->spec, "revoked"))) {
        rc = drv_err(err, 401, "unauthenticated", "", "token '%s' has been revoked", tok->id);
        goto out;
    }
    const char *exp = json_string_value(json_object_get(tok->spec, "expires_at"));
    if (exp) {
        int64_t t = drv_parse_rfc3339(exp);
        if (t >= 0 && t <= drv_now_ms() / 1000) {
            rc = drv_err(err, 401, "unauthenticated", "", "token '%s' expired at %s", tok->id,
                         exp);
            goto out;
        }
    }
    drv_obj_t *user = drv_state_get(head->state, DRV_K_USER, tok->owner);
    if (!user) {
        rc = drv_err(err, 401, "unauthenticated", "", "the token's user no longer exists");
        goto out;
    }
    snprintf(who->user, sizeof who->user, "%s", user->id);
    snprintf(who->token_id, sizeof who->token_id, "%s", tok->id);
    who->admin = strcmp(json_string_value(json_object_get(user->spec, "role")), "admin") == 0;
    who->scopes = drv_scopes_from_json(json_object_get(tok->spec, "scopes"));
out:
    drv_state_unlock(head->state);
    return rc;
}

int drv_auth_node_refused(drv_state_t *st, const char *hash, drv_error_t *err)
{
    /* a failure path only (and rate-limited per address): a scan is fine */
    for (size_t i = 0; i < drv_state_count(st, DRV_K_NODE); i++) {
        const drv_obj_t *n = drv_state_at(st, DRV_K_NODE, i);
        const char *rh = json_string_value(json_object_get(n->internal, "revoked_hash"));
        if (rh && strlen(rh) == 64 && drv_ct_equal(rh, hash, 64))
            return drv_err(err, 401, "unauthenticated", "", "the credential of node '%s' was "
                           "revoked at %s: stop its replicas and join again with a new join "
                           "token", n->id,
                           json_string_value(json_object_get(n->spec, "revoked_at")));
    }
    return drv_err(err, 401, "unauthenticated", "", "unknown node credential: this node was "
                   "deleted (or never joined); stop its replicas and join again with a join "
                   "token");
}

int drv_auth_node(drv_head_t *head, const char *authorization, char owner[64], char node[64],
                  drv_error_t *err)
{
    const char *secret = drv_auth_secret(authorization, err);
    char hash[65];
    if (!secret)
        return -1;
    if (strncmp(secret, DRV_NODE_PREFIX, strlen(DRV_NODE_PREFIX)) != 0)
        return drv_err(err, 401, "unauthenticated", "", "this call takes a node credential");
    if (drv_secret_hash(DRV_NODE_PREFIX, secret, hash, err) < 0)
        return -1;
    drv_state_rdlock(head->state);
    drv_obj_t *n = drv_state_by_hash(head->state, hash);
    bool ok = n && n->kind == DRV_K_NODE && drv_ct_equal(n->hash, hash, 64);
    if (ok && owner)
        snprintf(owner, 64, "%s", n->owner);
    if (ok && node)
        snprintf(node, 64, "%s", n->id);
    int rc = ok ? 0 : drv_auth_node_refused(head->state, hash, err);
    drv_state_unlock(head->state);
    return rc;
}
