/* sigv4.c — AWS Signature Version 4 (see sigv4.h). The algorithm, from the
 * AWS General Reference: canonical request -> string to sign with the
 * credential scope -> HMAC-SHA256 chain from "AWS4"+secret over date,
 * region, service, "aws4_request" -> hex signature. The header form signs
 * host and x-amz-date (and content-type, x-amz-content-sha256 when given);
 * the query form (S3 "Authenticating Requests: Using Query Parameters")
 * puts the credential, date and expiry in the query and signs only host,
 * with an UNSIGNED-PAYLOAD. HMAC is RFC 2104 over src/common/sha256.c. No
 * state; thread-safe. */
#define _GNU_SOURCE
#include "common/sigv4.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/sha256.h"
#include "common/util.h"

#define MAX_EXPIRES 604800L   /* S3's limit on X-Amz-Expires: 7 days */

/* HMAC-SHA256 (RFC 2104): block size 64, longer keys hashed first. */
static void hmac(const void *key, size_t key_len, const char *msg, unsigned char out[32])
{
    unsigned char k[64] = {0}, pad[64], inner[32];
    if (key_len > sizeof k)
        drv_sha256(key, key_len, k);
    else
        memcpy(k, key, key_len);
    drv_sha256_t c;
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    drv_sha256_init(&c);
    drv_sha256_update(&c, pad, sizeof pad);
    drv_sha256_update(&c, msg, strlen(msg));
    drv_sha256_final(&c, inner);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    drv_sha256_init(&c);
    drv_sha256_update(&c, pad, sizeof pad);
    drv_sha256_update(&c, inner, sizeof inner);
    drv_sha256_final(&c, out);
    explicit_bzero(k, sizeof k);
    explicit_bzero(pad, sizeof pad);
}

void drv_hmac_sha256(const void *key, size_t key_len, const char *msg, unsigned char out[32])
{
    hmac(key, key_len, msg, out);
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

int drv_sigv4_uri_encode(const char *s, int keep_slash, char *out, size_t n)
{
    static const char digits[] = "0123456789ABCDEF";
    size_t at = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool keep = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' ||
                    *p == '~' || (keep_slash && *p == '/');
        if (at + (keep ? 1 : 3) >= n)
            return -1;
        if (keep) {
            out[at++] = (char)*p;
        } else {
            out[at++] = '%';
            out[at++] = digits[*p >> 4];
            out[at++] = digits[*p & 15];
        }
    }
    if (at >= n)
        return -1;
    out[at] = '\0';
    return 0;
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
    static const char *const names[] = {
        "host;x-amz-date", "content-type;host;x-amz-date",
        "host;x-amz-content-sha256;x-amz-date", "content-type;host;x-amz-content-sha256;x-amz-date",
    };
    return names[(r->content_type ? 1 : 0) + (r->content_sha256 ? 2 : 0)];
}

char *drv_sigv4_canonical_request(const drv_sigv4_req_t *r)
{
    if (!r->method || !r->path || !r->host || !r->amz_date || (!r->body && r->body_len))
        return NULL;
    char body_hash[65];
    if (!r->content_sha256)
        drv_sha256_hex(r->body ? r->body : "", r->body_len, body_hash);
    char *q = canonical_query(r->query ? r->query : "");
    if (!q)
        return NULL;
    char ct[512] = "", cs[128] = "";
    if (r->content_type)
        snprintf(ct, sizeof ct, "content-type:%s\n", r->content_type);
    if (r->content_sha256)
        snprintf(cs, sizeof cs, "x-amz-content-sha256:%s\n", r->content_sha256);
    char *out = NULL;
    int n = asprintf(&out, "%s\n%s\n%s\n%shost:%s\n%sx-amz-date:%s\n\n%s\n%s", r->method,
                     r->path, q, ct, r->host, cs, r->amz_date, signed_headers(r),
                     r->content_sha256 ? r->content_sha256 : body_hash);
    free(q);
    return n < 0 ? NULL : out;
}

/* The hex signature of canonical request creq; scope_out gets
 * "DATE/REGION/SERVICE/aws4_request". -1 on bad input. */
static int sign(const char *creq, const char *amz_date, const char *region, const char *service,
                const char *secret, char scope_out[256], char sighex[65])
{
    if (!region || !service || !secret || !amz_date || strlen(amz_date) != 16)
        return -1;
    char creq_hash[65], date[9], *sts = NULL;
    drv_sha256_hex(creq, strlen(creq), creq_hash);
    memcpy(date, amz_date, 8);
    date[8] = '\0';
    int n = snprintf(scope_out, 256, "%s/%s/%s/aws4_request", date, region, service);
    if (n < 0 || n >= 256)
        return -1;
    if (asprintf(&sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", amz_date, scope_out, creq_hash) < 0)
        return -1;
    /* the signing key: HMAC chain from "AWS4" + secret */
    size_t sl = strlen(secret);
    char *k0 = malloc(sl + 5);
    if (!k0) {
        free(sts);
        return -1;
    }
    memcpy(k0, "AWS4", 4);
    memcpy(k0 + 4, secret, sl + 1);
    unsigned char k1[32], k2[32], k3[32], k4[32], sig[32];
    hmac(k0, sl + 4, date, k1);
    hmac(k1, 32, region, k2);
    hmac(k2, 32, service, k3);
    hmac(k3, 32, "aws4_request", k4);
    hmac(k4, 32, sts, sig);
    explicit_bzero(k0, sl + 4);
    explicit_bzero(k4, sizeof k4);
    free(k0);
    free(sts);
    hex(sig, 32, sighex);
    return 0;
}

int drv_sigv4_authorization(const drv_sigv4_req_t *r, char *out, size_t out_len)
{
    if (!r->access_key_id)
        return -1;
    char *creq = drv_sigv4_canonical_request(r);
    if (!creq)
        return -1;
    char scope[256], sighex[65];
    int rc = sign(creq, r->amz_date, r->region, r->service, r->secret_access_key, scope, sighex);
    free(creq);
    if (rc < 0)
        return -1;
    int n = snprintf(out, out_len,
                     "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
                     r->access_key_id, scope, signed_headers(r), sighex);
    return n < 0 || (size_t)n >= out_len ? -1 : 0;
}

char *drv_sigv4_presign_query(const drv_sigv4_presign_t *p)
{
    if (!p->method || !p->host || !p->path || !p->amz_date || strlen(p->amz_date) != 16 ||
        !p->region || !p->service || !p->access_key_id || !p->secret_access_key ||
        p->expires < 1 || p->expires > MAX_EXPIRES)
        return NULL;
    const char *own = p->query ? p->query : "";
    if (strstr(own, "X-Amz-") || strstr(own, "x-amz-"))
        return NULL;
    char cred[512], ecred[1536];
    snprintf(cred, sizeof cred, "%s/%.8s/%s/%s/aws4_request", p->access_key_id, p->amz_date,
             p->region, p->service);
    if (strlen(cred) >= sizeof cred - 1 || drv_sigv4_uri_encode(cred, 0, ecred, sizeof ecred) < 0)
        return NULL;
    char *q = NULL, *cq = NULL, *creq = NULL, *out = NULL;
    if (asprintf(&q, "%s%sX-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%s&X-Amz-Date=%s"
                     "&X-Amz-Expires=%ld&X-Amz-SignedHeaders=host",
                 own, own[0] ? "&" : "", ecred, p->amz_date, p->expires) < 0) {
        q = NULL;
        goto done;
    }
    cq = canonical_query(q);
    if (!cq)
        goto done;
    if (asprintf(&creq, "%s\n%s\n%s\nhost:%s\n\nhost\nUNSIGNED-PAYLOAD", p->method, p->path, cq,
                 p->host) < 0) {
        creq = NULL;
        goto done;
    }
    char scope[256], sighex[65];
    if (sign(creq, p->amz_date, p->region, p->service, p->secret_access_key, scope, sighex) < 0)
        goto done;
    if (asprintf(&out, "%s&X-Amz-Signature=%s", cq, sighex) < 0)
        out = NULL;
done:
    free(q);
    free(cq);
    free(creq);
    return out;
}

void drv_sigv4_amz_date(long long t, char out[17])
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}
