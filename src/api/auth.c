/* auth.c — see auth.h. Reads the state under its read lock only. */
#include "api/auth.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "head/state.h"

int drv_secret_mint(const char *prefix, char *secret, char hash[65], drv_error_t *err)
{
    char hex[65];
    if (drv_random_hex(32, hex) < 0)
        return drv_err_internal(err, "no randomness available for a secret");
    snprintf(secret, DRV_SECRET_MAX + 1, "%s%s", prefix, hex);
    drv_sha256_hex(secret, strlen(secret), hash);
    return 0;
}

int drv_secret_hash(const char *prefix, const char *secret, char hash[65], drv_error_t *err)
{
    size_t n = strlen(secret), pl = strlen(prefix);
    bool ok = n == pl + 64 && strncmp(secret, prefix, pl) == 0;
    for (size_t i = pl; ok && i < n; i++)
        ok = (secret[i] >= '0' && secret[i] <= '9') || (secret[i] >= 'a' && secret[i] <= 'f');
    if (!ok)
        return drv_err(err, 401, "unauthenticated", "",
                       "malformed token: expected '%s' followed by 64 hex digits", prefix);
    drv_sha256_hex(secret, n, hash);
    return 0;
}

const char *drv_auth_secret(const char *authz, drv_error_t *err)
{
    if (!authz || !*authz) {
        drv_err(err, 401, "unauthenticated", "",
                "missing token: send 'Authorization: Bearer <token>'");
        return NULL;
    }
    const char *secret;
    if (strncasecmp(authz, "Bearer ", 7) == 0)
        secret = authz + 7;
    else if (strncasecmp(authz, "Key ", 4) == 0)
        secret = authz + 4;
    else {
        drv_err(err, 401, "unauthenticated", "",
                "unsupported Authorization scheme: use 'Bearer <token>'");
        return NULL;
    }
    while (*secret == ' ')
        secret++;
    return secret;
}

unsigned drv_scopes_from_json(const json_t *scopes)
{
    unsigned s = 0;
    size_t i;
    json_t *v;
    json_array_foreach(scopes, i, v) {
        const char *n = json_string_value(v);
        if (!n)
            continue;
        if (strcmp(n, "all") == 0)
            s |= DRV_SCOPE_ALL;
        else if (strcmp(n, "read") == 0)
            s |= DRV_SCOPE_READ;
        else if (strcmp(n, "predict") == 0)
            s |= DRV_SCOPE_PREDICT;
        else if (strcmp(n, "gateway") == 0)
            s |= DRV_SCOPE_GATEWAY;
    }
    return s;
}

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
