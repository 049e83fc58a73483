/* secret.c — see secret.h. */
#include "common/secret.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"

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
