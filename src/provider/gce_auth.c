/* gce_auth.c — service-account keys and OAuth2 access tokens for the
 * Compute Engine client (see gce.h): the key's fields, the RS256-signed
 * JWT grant (RFC 7519/7523, signed with libcrypto), its exchange at the
 * key's token_uri, and the token cache. Secrets (the private key, the
 * tokens) never reach a log line or an error message. */
#define _GNU_SOURCE
#include "provider/gce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "common/util.h"

#define MAX_TOKENS 16

typedef struct token {
    char email[256], uri[256];
    char key_hash[65];          /* of the private key: two keys of one account differ */
    char value[2048];
    int64_t refresh_ms;         /* monotonic: fetch a new one from then on */
} token_t;

struct drv_gce {
    token_t tok[MAX_TOKENS];
    size_t n_tok, next_evict;
    unsigned long long fetched;
};

drv_gce_t *drv_gce_create(void)
{
    return calloc(1, sizeof(drv_gce_t));
}

void drv_gce_destroy(drv_gce_t *g)
{
    if (!g)
        return;
    explicit_bzero(g, sizeof *g);
    free(g);
}

unsigned long long drv_gce_tokens_fetched(const drv_gce_t *g)
{
    return g->fetched;
}

static int copy_field(const json_t *o, const char *name, char *dst, size_t len, bool need,
                      drv_error_t *err)
{
    const json_t *v = json_object_get(o, name);
    if (!v && !need) {
        dst[0] = '\0';
        return 0;
    }
    if (!json_is_string(v) || !json_string_length(v))
        return drv_err_invalid(err, "service_account_key", "the service-account key has no "
                               "%s (a JSON key as downloaded from IAM is expected)", name);
    if (json_string_length(v) >= len)
        return drv_err_invalid(err, "service_account_key", "the service-account key's %s is "
                               "too long", name);
    memcpy(dst, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

int drv_gce_parse_key(const char *text, drv_gce_key_t *k, drv_error_t *err)
{
    memset(k, 0, sizeof *k);
    json_error_t je;
    json_t *o = text ? json_loads(text, 0, &je) : NULL;
    if (!json_is_object(o)) {
        json_decref(o);
        return drv_err_invalid(err, "service_account_key", "the service-account key is not a "
                               "JSON object");
    }
    const char *type = json_string_value(json_object_get(o, "type"));
    int rc = 0;
    if (!type || strcmp(type, "service_account") != 0)
        rc = drv_err_invalid(err, "service_account_key", "the key's type is '%s', not "
                             "'service_account'", type ? type : "(none)");
    if (rc == 0)
        rc = copy_field(o, "client_email", k->client_email, sizeof k->client_email, true, err);
    if (rc == 0)
        rc = copy_field(o, "private_key", k->private_key, sizeof k->private_key, true, err);
    if (rc == 0)
        rc = copy_field(o, "private_key_id", k->private_key_id, sizeof k->private_key_id, false,
                        err);
    if (rc == 0)
        rc = copy_field(o, "token_uri", k->token_uri, sizeof k->token_uri, true, err);
    if (rc == 0)
        rc = copy_field(o, "project_id", k->project_id, sizeof k->project_id, false, err);
    if (rc == 0 && strncmp(k->token_uri, "https://", 8) != 0 &&
        strncmp(k->token_uri, "http://", 7) != 0)
        rc = drv_err_invalid(err, "service_account_key", "the key's token_uri is not an "
                             "http(s) URL");
    if (rc == 0 && !strstr(k->private_key, "-----BEGIN "))
        rc = drv_err_invalid(err, "service_account_key", "the key's private_key is not PEM");
    /* jansson's copy of the key goes with the object */
    json_decref(o);
    if (rc < 0)
        explicit_bzero(k, sizeof *k);
    return rc;
}

void drv_gce_b64url(const unsigned char *data, size_t n, char *out)
{
    EVP_EncodeBlock((unsigned char *)out, data, (int)n);
    char *w = out;
    for (char *r = out; *r; r++) {
        if (*r == '=')
            break;
        *w++ = *r == '+' ? '-' : *r == '/' ? '_' : *r;
    }
    *w = '\0';
}

static char *b64url_str(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (out)
        drv_gce_b64url((const unsigned char *)s, n, out);
    return out;
}

char *drv_gce_jwt(const drv_gce_key_t *k, const char *scope, int64_t now, drv_error_t *err)
{
    json_t *h = json_pack("{s:s, s:s}", "alg", "RS256", "typ", "JWT");
    if (k->private_key_id[0])
        json_object_set_new(h, "kid", json_string(k->private_key_id));
    json_t *c = json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", k->client_email, "scope", scope,
                          "aud", k->token_uri, "iat", (json_int_t)now, "exp",
                          (json_int_t)(now + 3600));
    char *hs = json_dumps(h, JSON_COMPACT), *cs = json_dumps(c, JSON_COMPACT);
    json_decref(h);
    json_decref(c);
    char *hb = hs ? b64url_str(hs) : NULL, *cb = cs ? b64url_str(cs) : NULL;
    free(hs);
    free(cs);
    char *input = NULL, *jwt = NULL;
    EVP_PKEY *pkey = NULL;
    EVP_MD_CTX *md = NULL;
    unsigned char sig[1024];
    size_t siglen = sizeof sig;
    if (!hb || !cb || asprintf(&input, "%s.%s", hb, cb) < 0) {
        input = NULL;
        drv_err_internal(err, "out of memory");
        goto done;
    }
    BIO *bio = BIO_new_mem_buf(k->private_key, -1);
    pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    if (!pkey || EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA) {
        drv_err_invalid(err, "service_account_key", "the key's private_key is not an RSA "
                        "private key OpenSSL can read");
        goto done;
    }
    md = EVP_MD_CTX_new();
    if (!md || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, pkey) != 1 ||
        EVP_DigestSign(md, sig, &siglen, (const unsigned char *)input, strlen(input)) != 1) {
        drv_err_internal(err, "cannot sign the JWT grant (RS256)");
        goto done;
    }
    char sb[4 * ((sizeof sig + 2) / 3) + 1];
    drv_gce_b64url(sig, siglen, sb);
    if (asprintf(&jwt, "%s.%s", input, sb) < 0) {
        jwt = NULL;
        drv_err_internal(err, "out of memory");
    }
done:
    EVP_MD_CTX_free(md);
    EVP_PKEY_free(pkey);
    free(hb);
    free(cb);
    free(input);
    return jwt;
}

static token_t *cached(drv_gce_t *g, const drv_gce_key_t *k, const char *hash)
{
    for (size_t i = 0; i < g->n_tok; i++)
        if (strcmp(g->tok[i].email, k->client_email) == 0 &&
            strcmp(g->tok[i].uri, k->token_uri) == 0 && strcmp(g->tok[i].key_hash, hash) == 0)
            return &g->tok[i];
    return NULL;
}

/* The token endpoint's error ({"error": "invalid_grant",
 * "error_description": "..."}) into err, classified. */
static int token_error(long status, const char *body, drv_prov_class_t *cls, drv_error_t *err)
{
    json_t *o = json_loads(body ? body : "", 0, NULL);
    const char *code = json_string_value(json_object_get(o, "error"));
    const char *desc = json_string_value(json_object_get(o, "error_description"));
    bool nz;
    *cls = drv_gce_classify(status, code ? code : "", desc ? desc : "", &nz);
    drv_err(err, status >= 400 && status < 600 ? (int)status : 502, "gcp_auth", "",
            "GCP token endpoint refused the service-account grant (HTTP %ld): %s%s%s", status,
            code ? code : "no error code", desc ? ": " : "", desc ? desc : "");
    json_decref(o);
    return -1;
}

int drv_gce_token(drv_gce_t *g, const drv_gce_key_t *k, bool drop, char *tok, size_t len,
                  drv_prov_class_t *cls, unsigned *calls, drv_error_t *err)
{
    char hash[65];
    drv_sha256_hex(k->private_key, strlen(k->private_key), hash);
    token_t *t = cached(g, k, hash);
    int64_t now = drv_mono_ms();
    if (t && !drop && now < t->refresh_ms && strlen(t->value) < len) {
        snprintf(tok, len, "%s", t->value);
        return 0;
    }
    char *jwt = drv_gce_jwt(k, DRV_GCE_SCOPE, drv_now_ms() / 1000, err);
    if (!jwt) {
        *cls = DRV_PROV_GIVE_UP;
        return -1;
    }
    char *body = NULL;
    if (asprintf(&body, "grant_type=urn%%3Aietf%%3Aparams%%3Aoauth%%3Agrant-type%%3Ajwt-bearer"
                        "&assertion=%s", jwt) < 0)
        body = NULL;   /* base64url needs no escaping */
    explicit_bzero(jwt, strlen(jwt));
    free(jwt);
    if (!body) {
        *cls = DRV_PROV_RETRY;
        return drv_err_internal(err, "out of memory");
    }
    static const char *const hs[] = {"Content-Type: application/x-www-form-urlencoded",
                                     "Expect:", NULL};
    char *ans = NULL;
    long status = 0;
    (*calls)++;
    int rc = drv_gce_http("POST", k->token_uri, hs, body, &ans, &status, err);
    explicit_bzero(body, strlen(body));
    free(body);
    if (rc < 0) {
        *cls = DRV_PROV_RETRY;
        drv_err_prefix(err, "GCP token endpoint: ");
        return -1;
    }
    if (status != 200) {
        token_error(status, ans, cls, err);
        free(ans);
        return -1;
    }
    json_t *o = json_loads(ans, 0, NULL);
    explicit_bzero(ans, strlen(ans));
    free(ans);
    const char *at = json_string_value(json_object_get(o, "access_token"));
    json_int_t exp = json_integer_value(json_object_get(o, "expires_in"));
    if (!at || strlen(at) >= sizeof t->value || strlen(at) >= len || exp <= 0) {
        json_decref(o);
        *cls = DRV_PROV_RETRY;
        return drv_err(err, 502, "gcp_auth", "", "GCP token endpoint answered without a usable "
                       "access_token and expires_in");
    }
    if (!t) {
        if (g->n_tok < MAX_TOKENS)
            t = &g->tok[g->n_tok++];
        else
            t = &g->tok[g->next_evict++ % MAX_TOKENS];
    }
    snprintf(t->email, sizeof t->email, "%s", k->client_email);
    snprintf(t->uri, sizeof t->uri, "%s", k->token_uri);
    snprintf(t->key_hash, sizeof t->key_hash, "%s", hash);
    snprintf(t->value, sizeof t->value, "%s", at);
    t->refresh_ms = now + (int64_t)exp * 750;   /* three quarters of its life */
    g->fetched++;
    snprintf(tok, len, "%s", at);
    json_decref(o);   /* jansson's copy of the token goes with it */
    return 0;
}
