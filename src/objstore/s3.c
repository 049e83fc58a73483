/* s3.c — an S3 store's context, its URLs and presigning (see s3.h). Pure:
 * no I/O and no clock; the network calls are s3_http.c. Virtual-hosted
 * URLs put the bucket in the host (BUCKET.HOST/KEY), path-style ones in the
 * path (HOST/BUCKET/KEY); either way the key is URI-encoded once, '/'
 * kept, as S3's canonical URI wants. */
#define _GNU_SOURCE
#include "objstore/s3.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sigv4.h"
#include "common/util.h"

struct drv_s3 {
    char scheme[8];            /* "http" or "https" */
    char host[256];            /* the endpoint's host[:port] */
    char region[64];
    char bucket[64];
    char access_key[128];
    char *secret_key;
    bool path_style;
};

static bool bucket_ok(const char *b)
{
    /* S3's rules for new buckets: 3..63 of a-z 0-9 . -, starting and ending alnum */
    size_t n = strlen(b);
    if (n < 3 || n > 63 || b[0] == '.' || b[0] == '-' || b[n - 1] == '.' || b[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '.' ||
              b[i] == '-'))
            return false;
    return true;
}

static bool printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == 0x7f)
            return false;
    return true;
}

drv_s3_t *drv_s3_create(const char *endpoint, const char *region, const char *bucket,
                        const char *access_key, const char *secret_key, int path_style,
                        drv_error_t *err)
{
    if (!endpoint || !endpoint[0])
        return drv_err_invalid(err, "endpoint", "an S3 store needs an endpoint URL"), NULL;
    const char *host = NULL, *scheme = NULL;
    if (strncmp(endpoint, "https://", 8) == 0)
        scheme = "https", host = endpoint + 8;
    else if (strncmp(endpoint, "http://", 7) == 0)
        scheme = "http", host = endpoint + 7;
    else
        return drv_err_invalid(err, "endpoint", "S3 endpoint '%s' is not an http(s):// URL",
                               endpoint), NULL;
    size_t hl = strcspn(host, "/?#");
    if (hl == 0 || hl >= sizeof ((drv_s3_t *)0)->host || !printable(host) ||
        (host[hl] && strcmp(host + hl, "/") != 0))
        return drv_err_invalid(err, "endpoint", "S3 endpoint '%s' must be scheme://host[:port] "
                               "(no path)", endpoint), NULL;
    if (!region || !region[0] || strlen(region) >= sizeof ((drv_s3_t *)0)->region ||
        !printable(region))
        return drv_err_invalid(err, "region", "an S3 store needs a region (e.g. us-east-1; "
                               "\"auto\" on R2)"), NULL;
    if (!bucket || !bucket_ok(bucket))
        return drv_err_invalid(err, "bucket", "S3 bucket name '%s' is not valid (3-63 of a-z, "
                               "0-9, '.', '-')", bucket ? bucket : ""), NULL;
    if (!access_key || !access_key[0] || strlen(access_key) >= sizeof ((drv_s3_t *)0)->access_key ||
        !printable(access_key) || !secret_key || !secret_key[0])
        return drv_err_invalid(err, "credential", "an S3 store needs an access key id and a "
                               "secret access key"), NULL;
    drv_s3_t *s = calloc(1, sizeof *s);
    if (!s || !(s->secret_key = drv_strdup(secret_key))) {
        free(s);
        return drv_err_internal(err, "out of memory"), NULL;
    }
    snprintf(s->scheme, sizeof s->scheme, "%s", scheme);
    snprintf(s->host, sizeof s->host, "%.*s", (int)hl, host);
    snprintf(s->region, sizeof s->region, "%s", region);
    snprintf(s->bucket, sizeof s->bucket, "%s", bucket);
    snprintf(s->access_key, sizeof s->access_key, "%s", access_key);
    s->path_style = path_style != 0;
    return s;
}

void drv_s3_destroy(drv_s3_t *s)
{
    if (!s)
        return;
    explicit_bzero(s->secret_key, strlen(s->secret_key));
    free(s->secret_key);
    free(s);
}

/* host gets the Host the request goes to; path the encoded path (for the
 * bucket itself, key "": "/BUCKET" path-style, "/" virtual-hosted). */
static int target(const drv_s3_t *s, const char *key, char *host, size_t host_len, char *path,
                  size_t path_len, drv_error_t *err)
{
    if (!key || strlen(key) > DRV_S3_KEY_MAX)
        return drv_err_invalid(err, "key", "S3 key is missing or longer than %d bytes",
                               DRV_S3_KEY_MAX);
    char ekey[3 * DRV_S3_KEY_MAX + 1];
    if (drv_sigv4_uri_encode(key, 1, ekey, sizeof ekey) < 0)
        return drv_err_internal(err, "S3 key does not encode");
    int n = s->path_style ? snprintf(host, host_len, "%s", s->host)
                          : snprintf(host, host_len, "%s.%s", s->bucket, s->host);
    int m = s->path_style ? snprintf(path, path_len, "/%s%s%s", s->bucket, key[0] ? "/" : "", ekey)
                          : snprintf(path, path_len, "/%s", ekey);
    if (n < 0 || (size_t)n >= host_len || m < 0 || (size_t)m >= path_len)
        return drv_err_internal(err, "S3 URL too long");
    return 0;
}

#define PATH_MAX_LEN (3 * DRV_S3_KEY_MAX + 80)

int drv_s3_url(const drv_s3_t *s, const char *key, const char *query, char **url, char *host,
               size_t host_len, drv_error_t *err)
{
    char path[PATH_MAX_LEN];
    *url = NULL;
    if (target(s, key, host, host_len, path, sizeof path, err) < 0)
        return -1;
    if (asprintf(url, "%s://%s%s%s%s", s->scheme, host, path, query && query[0] ? "?" : "",
                 query ? query : "") < 0) {
        *url = NULL;
        return drv_err_internal(err, "out of memory");
    }
    return 0;
}

int drv_s3_authorization(const drv_s3_t *s, const char *method, const char *key,
                         const char *query, const char *host, const char *amz_date,
                         const char *content_sha256, char *out, size_t out_len)
{
    char h[320], path[PATH_MAX_LEN];
    if (target(s, key, h, sizeof h, path, sizeof path, NULL) < 0)
        return -1;
    drv_sigv4_req_t r = {
        .method = method, .path = path, .query = query ? query : "", .host = host,
        .amz_date = amz_date, .region = s->region, .service = "s3",
        .access_key_id = s->access_key, .secret_access_key = s->secret_key,
        .content_sha256 = content_sha256,
    };
    return drv_sigv4_authorization(&r, out, out_len);
}

char *drv_s3_presign(const drv_s3_t *s, const char *method, const char *key, const char *query,
                     long long now, long expires, drv_error_t *err)
{
    static const char *const methods[] = {"GET", "PUT", "HEAD", "DELETE"};
    bool known = false;
    for (size_t i = 0; method && i < sizeof methods / sizeof methods[0]; i++)
        known |= strcmp(method, methods[i]) == 0;
    if (!known)
        return drv_err_invalid(err, "method", "cannot presign S3 method '%s' (GET, PUT, HEAD, "
                               "DELETE)", method ? method : ""), NULL;
    if (expires < 1 || expires > 604800)
        return drv_err_invalid(err, "expires", "a presigned URL lives 1 to 604800 seconds, "
                               "not %ld", expires), NULL;
    if (!key || !key[0])
        return drv_err_invalid(err, "key", "a presigned URL needs an object key"), NULL;
    char host[320], path[PATH_MAX_LEN], amz[17];
    if (target(s, key, host, sizeof host, path, sizeof path, err) < 0)
        return NULL;
    drv_sigv4_amz_date(now, amz);
    drv_sigv4_presign_t p = {
        .method = method, .host = host, .path = path, .query = query, .amz_date = amz,
        .expires = expires, .region = s->region, .service = "s3",
        .access_key_id = s->access_key, .secret_access_key = s->secret_key,
    };
    char *q = drv_sigv4_presign_query(&p), *url = NULL;
    if (!q)
        return drv_err_invalid(err, "query", "cannot presign this request (its query may not "
                               "carry X-Amz-* parameters)"), NULL;
    if (asprintf(&url, "%s://%s%s?%s", s->scheme, host, path, q) < 0)
        url = NULL;
    free(q);
    if (!url)
        drv_err_internal(err, "out of memory");
    return url;
}

char *drv_s3_presign_part(const drv_s3_t *s, const char *key, const char *upload_id, int part,
                          long long now, long expires, drv_error_t *err)
{
    if (part < 1 || part > DRV_S3_MAX_PARTS)
        return drv_err_invalid(err, "part", "part numbers are 1 to %d, not %d",
                               DRV_S3_MAX_PARTS, part), NULL;
    char eid[1024], q[1100];
    if (!upload_id || !upload_id[0] || drv_sigv4_uri_encode(upload_id, 0, eid, sizeof eid) < 0)
        return drv_err_invalid(err, "upload_id", "a part URL needs the upload's id"), NULL;
    snprintf(q, sizeof q, "partNumber=%d&uploadId=%s", part, eid);
    return drv_s3_presign(s, "PUT", key, q, now, expires, err);
}

int drv_s3_blob_key(const char *prefix, const char *hex, char *out, size_t n, drv_error_t *err)
{
    size_t hl = hex ? strlen(hex) : 0;
    bool ok = hl == 64;
    for (size_t i = 0; ok && i < hl; i++)
        ok = (hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f');
    if (!ok)
        return drv_err_invalid(err, "sha256", "a blob is named by 64 lower-case hex digits, "
                               "not '%s'", hex ? hex : "");
    const char *p = prefix ? prefix : "";
    while (*p == '/')
        p++;
    size_t pl = strlen(p);
    while (pl && p[pl - 1] == '/')
        pl--;
    int m = snprintf(out, n, "%.*s%sblobs/sha256/%s", (int)pl, p, pl ? "/" : "", hex);
    if (m < 0 || (size_t)m >= n || (size_t)m > DRV_S3_KEY_MAX)
        return drv_err_invalid(err, "prefix", "S3 prefix too long");
    return 0;
}
