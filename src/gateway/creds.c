/* creds.c — see creds.h: the token set and the deployment list a gateway
 * serving its own HTTP checks requests against. */
#define _GNU_SOURCE
#include "gateway/creds.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/openai.h"
#include "common/secret.h"

struct drv_gw_creds {
    pthread_rwlock_t rw;
    drv_gw_tokens_t *tokens;
    json_t *models;              /* OpenAI model objects (common/openai.h), by owned_by */
};

drv_gw_creds_t *drv_gw_creds_create(void)
{
    drv_gw_creds_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->models = json_array();
    if (!c->models || pthread_rwlock_init(&c->rw, NULL) != 0) {
        json_decref(c->models);
        free(c);
        return NULL;
    }
    return c;
}

void drv_gw_creds_destroy(drv_gw_creds_t *c)
{
    if (!c)
        return;
    drv_gw_tokens_free(c->tokens);
    json_decref(c->models);
    pthread_rwlock_destroy(&c->rw);
    free(c);
}

void drv_gw_creds_set(drv_gw_creds_t *c, drv_gw_tokens_t *toks, const drv_gw_table_t *t)
{
    json_t *models = json_array();
    for (size_t i = 0; t && models && i < t->n_deps; i++)
        json_array_append_new(models, drv_openai_model(t->deps[i].id, t->deps[i].owner,
                                                       t->deps[i].created));
    pthread_rwlock_wrlock(&c->rw);
    drv_gw_tokens_t *old_t = c->tokens;
    json_t *old_m = c->models;
    c->tokens = toks;
    if (models)
        c->models = models;
    else
        old_m = NULL;   /* out of memory: keep the old list */
    pthread_rwlock_unlock(&c->rw);
    drv_gw_tokens_free(old_t);
    json_decref(old_m);
}

void drv_gw_creds_set_tokens(drv_gw_creds_t *c, drv_gw_tokens_t *toks)
{
    pthread_rwlock_wrlock(&c->rw);
    drv_gw_tokens_t *old = c->tokens;
    c->tokens = toks;
    pthread_rwlock_unlock(&c->rw);
    drv_gw_tokens_free(old);
}

int drv_gw_creds_auth(drv_gw_creds_t *c, const char *authz, char user[64], drv_error_t *err)
{
    const char *secret = drv_auth_secret(authz, err);
    char hash[65];
    if (!secret || drv_token_hash(secret, hash, err) < 0)
        return -1;
    int rc = 0;
    pthread_rwlock_rdlock(&c->rw);
    const drv_gw_tok_t *t = c->tokens ? drv_gw_tokens_find(c->tokens, hash) : NULL;
    if (!t)
        rc = drv_err(err, 401, "unauthenticated", "", "invalid token");
    else if (t->expires_at && t->expires_at <= (int64_t)time(NULL))
        rc = drv_err(err, 401, "unauthenticated", "", "token expired");
    else if (!t->predict)
        rc = drv_err(err, 403, "permission_denied", "",
                     "this token's scope does not allow inference (needs predict)");
    else
        snprintf(user, 64, "%s", t->user);
    pthread_rwlock_unlock(&c->rw);
    return rc;
}

/* The models of user, deep copies (the list is shared with other threads);
 * id: only that one. */
static json_t *models_of(drv_gw_creds_t *c, const char *user, const char *id)
{
    json_t *data = json_array();
    size_t i;
    json_t *m;
    pthread_rwlock_rdlock(&c->rw);
    json_array_foreach(c->models, i, m) {
        const char *owner = json_string_value(json_object_get(m, "owned_by"));
        const char *mid = json_string_value(json_object_get(m, "id"));
        if (owner && strcmp(owner, user) == 0 && mid && (!id || strcmp(mid, id) == 0))
            json_array_append_new(data, json_deep_copy(m));
    }
    pthread_rwlock_unlock(&c->rw);
    return data;
}

json_t *drv_gw_creds_models(drv_gw_creds_t *c, const char *user)
{
    return json_pack("{s:s, s:o}", "object", "list", "data", models_of(c, user, NULL));
}

json_t *drv_gw_creds_model(drv_gw_creds_t *c, const char *user, const char *id)
{
    json_t *data = models_of(c, user, id);
    json_t *m = json_incref(json_array_get(data, 0));
    json_decref(data);
    return m;
}
