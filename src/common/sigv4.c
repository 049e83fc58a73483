/* sigv4.c — AWS Signature Version 4 (see sigv4.h). The algorithm, from the
 * AWS General Reference: canonical request -> string to sign with the
 * credential scope -> HMAC-SHA256 chain from "AWS4"+secret over date,
 * region, service, "aws4_request" -> hex signature. OpenSSL gives HMAC and
 * SHA-256. No state; thread-safe. */
#define _GNU_SOURCE
#include "common/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

static void hmac(const void *key, size_t key_len, const char *msg, unsigned char out[32])
{
    unsigned int n = 32;
    HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, strlen(msg), out, &n);
}

static void hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static int cmp_param(const void *a, const void *b)
{
    /* "key=value" strings: by key, then by value */
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    size_t kx = strcspn(x, "="), ky = strcspn(y, "=");
    int c = strncmp(x, y, kx < ky ? kx : ky);
    if (c == 0 && kx != ky)
        c = kx < ky ? -1 : 1;
    return c ? c : strcmp(x + kx, y + ky);
}

/* The query with its parameters sorted (each gets "=" when it has none). */
static char *canonical_query(const char *q)
{
    size_t len = strlen(q), n = 1;
    for (size_t i = 0; i < len; i++)
        n += q[i] == '&';
    char *copy = drv_strdup(q);
    char **parts = calloc(n, sizeof *parts);
    char *out = malloc(len + n + 1);
    if (!copy || !parts || !out) {
        free(copy), free(parts), free(out);
        return NULL;
    }
    size_t k = 0;
    char *save = NULL;
    for (char *t = strtok_r(copy, "&", &save); t; t = strtok_r(NULL, "&", &save))
        parts[k++] = t;
    qsort(parts, k, sizeof *parts, cmp_param);
    out[0] = '\0';
    size_t at = 0;
    for (size_t i = 0; i < k; i++)
        at += (size_t)sprintf(out + at, "%s%s%s", i ? "&" : "", parts[i],
                              strchr(parts[i], '=') ? "" : "=");
    free(parts);
    free(copy);
    return out;
}

static const char *signed_headers(const drv_sigv4_req_t *r)
{
    return r->content_type ? "content-type;host;x-amz-date" : "host;x-amz-date";
}

char *drv_sigv4_canonical_request(const drv_sigv4_req_t *r)
{
    if (!r->method || !r->path || !r->host || !r->amz_date || (!r->body && r->body_len))
        return NULL;
    char body_hash[65];
    drv_sha256_hex(r->body ? r->body : "", r->body_len, body_hash);
    char *q = canonical_query(r->query ? r->query : "");
    if (!q)
        return NULL;
    char *out = NULL;
    int n;
    if (r->content_type)
        n = asprintf(&out, "%s\n%s\n%s\ncontent-type:%s\nhost:%s\nx-amz-date:%s\n\n%s\n%s",
                     r->method, r->path, q, r->content_type, r->host, r->amz_date,
                     signed_headers(r), body_hash);
    else
        n = asprintf(&out, "%s\n%s\n%s\nhost:%s\nx-amz-date:%s\n\n%s\n%s", r->method, r->path,
                     q, r->host, r->amz_date, signed_headers(r), body_hash);
    free(q);
    return n < 0 ? NULL : out;
}

int drv_sigv4_authorization(const drv_sigv4_req_t *r, char *out, size_t out_len)
{
    if (!r->region || !r->service || !r->access_key_id || !r->secret_access_key ||
        !r->amz_date || strlen(r->amz_date) != 16)
        return -1;
    char *creq = drv_sigv4_canonical_request(r);
    if (!creq)
        return -1;
    char creq_hash[65], date[9], scope[256], *sts = NULL;
    drv_sha256_hex(creq, strlen(creq), creq_hash);
    free(creq);
    memcpy(date, r->amz_date, 8);
    date[8] = '\0';
    snprintf(scope, sizeof scope, "%s/%s/%s/aws4_request", date, r->region, r->service);
    if (asprintf(&sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", r->amz_date, scope, creq_hash) < 0)
        return -1;
    /* the signing key: HMAC chain from "AWS4" + secret */
    size_t sl = strlen(r->secret_access_key);
    char *k0 = malloc(sl + 5);
    if (!k0) {
        free(sts);
        return -1;
    }
    memcpy(k0, "AWS4", 4);
    memcpy(k0 + 4, r->secret_access_key, sl + 1);
    unsigned char k1[32], k2[32], k3[32], k4[32], sig[32];
    hmac(k0, sl + 4, date, k1);
    hmac(k1, 32, r->region, k2);
    hmac(k2, 32, r->service, k3);
    hmac(k3, 32, "aws4_request", k4);
    hmac(k4, 32, sts, sig);
    explicit_bzero(k0, sl + 4);
    free(k0);
    free(sts);
    char sighex[65];
    hex(sig, 32, sighex);
    int n = snprintf(out, out_len,
                     "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
                     r->access_key_id, scope, signed_headers(r), sighex);
    return n < 0 || (size_t)n >= out_len ? -1 : 0;
}

void drv_sigv4_amz_date(long long t, char out[17])
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}
