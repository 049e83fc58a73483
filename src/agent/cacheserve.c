/* cacheserve.c — see cacheserve.h: the peer cache server's one handler on
 * httpd.c. Threads: the HTTP server's own; the cache is thread-safe. */
#include "agent/cacheserve.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/httpd.h"
#include "common/sha256.h"
#include "common/util.h"

#define PREFIX "/v1/cache/blobs/sha256/"

struct drv_cacheserve {
    drv_httpd_t *d;
    drv_cache_t *cache;
    pthread_mutex_t mu;          /* guards keys, nkeys (replaced by set_secrets) */
    unsigned char (*keys)[32];   /* sha256 of each accepted secret */
    size_t nkeys;
};

static bool authorized(drv_cacheserve_t *s, const drv_h1_request_t *rq)
{
    const char *h = drv_h1_header(rq->h, rq->nh, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0 || !h[7])
        return false;
    unsigned char md[32];
    drv_sha256(h + 7, strlen(h + 7), md);
    bool ok = false;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->nkeys; i++)   /* all of them: the time does not tell which */
        ok |= drv_ct_equal(md, s->keys[i], 32);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* "bytes=A-B" or "bytes=A-": 0 (B = UINT64_MAX when open), -1 otherwise. */
static int parse_range(const char *v, uint64_t *a, uint64_t *b)
{
    if (strncmp(v, "bytes=", 6) != 0)
        return -1;
    const char *p = v + 6;
    size_t na = strspn(p, "0123456789");
    if (na == 0 || na > 19 || p[na] != '-')
        return -1;
    *a = strtoull(p, NULL, 10);
    const char *q = p + na + 1;
    size_t nb = strspn(q, "0123456789");
    if (q[nb] != 0 || nb > 19)
        return -1;
    *b = nb ? strtoull(q, NULL, 10) : UINT64_MAX;
    return *b < *a ? -1 : 0;
}

static bool is_hex64(const char *p)
{
    return strlen(p) == 64 && strspn(p, "0123456789abcdef") == 64;
}

static void on_request(void *ud, const drv_h1_request_t *rq, drv_httpd_reply_t *out)
{
    drv_cacheserve_t *s = ud;
    if (strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0) {
        drv_httpd_text(out, 405, "GET only\n");
        snprintf(out->headers, sizeof out->headers, "Allow: GET, HEAD\r\n");
        return;
    }
    if (!authorized(s, rq)) {
        drv_httpd_text(out, 401, "bad or missing bearer credential\n");
        snprintf(out->headers, sizeof out->headers, "WWW-Authenticate: Bearer\r\n");
        return;
    }
    const char *hex = rq->path + strlen(PREFIX);
    if (strncmp(rq->path, PREFIX, strlen(PREFIX)) != 0 || !is_hex64(hex)) {
        drv_httpd_text(out, 404, "no such path (GET /v1/cache/blobs/sha256/HEX)\n");
        return;
    }
    const char *rh = drv_h1_header(rq->h, rq->nh, "Range");
    uint64_t a = 0, b = UINT64_MAX;
    if (rh && parse_range(rh, &a, &b) < 0) {
        drv_httpd_text(out, 416, "one range only: bytes=A-B or bytes=A-\n");
        return;
    }
    uint64_t len = b == UINT64_MAX ? UINT64_MAX : b - a + 1, size = 0;
    int fd;
    drv_error_t e = {0};
    if (drv_cache_open_range(s->cache, hex, a, &len, rh != NULL, &fd, &size, &e) < 0) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s\n", e.message);
        drv_httpd_text(out, e.status == 416 ? 416 : 404, msg);
        if (e.status == 416)
            snprintf(out->headers, sizeof out->headers, "Content-Range: bytes */%" PRIu64 "\r\n",
                     size);
        return;
    }
    out->status = rh ? 206 : 200;
    out->content_type = "application/octet-stream";
    out->body_fd = fd;
    out->body_off = a;
    out->len = (size_t)len;
    if (rh)
        snprintf(out->headers, sizeof out->headers,
                 "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n", a, a + len - 1,
                 size);
}

/* The sha256 of each secret, malloc'd (NULL with err when one is empty). */
static unsigned char (*hash_secrets(const char *const *secrets, size_t n, drv_error_t *err))[32]
{
    for (size_t i = 0; i < n; i++)
        if (!secrets[i] || !*secrets[i])
            return drv_err_invalid(err, "secrets", "secret %zu is empty", i), NULL;
    unsigned char (*keys)[32] = calloc(n ? n : 1, sizeof *keys);
    if (!keys)
        return drv_err_internal(err, "out of memory"), NULL;
    for (size_t i = 0; i < n; i++)
        drv_sha256(secrets[i], strlen(secrets[i]), keys[i]);
    return keys;
}

drv_cacheserve_t *drv_cacheserve_create(drv_cache_t *c, const char *host, int port,
                                        const char *const *secrets, size_t n, drv_error_t *err)
{
    drv_cacheserve_t *s = calloc(1, sizeof *s);
    if (!s)
        return drv_err_internal(err, "out of memory"), NULL;
    if (!(s->keys = hash_secrets(secrets, n, err))) {
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->cache = c;
    s->nkeys = n;
    s->d = drv_httpd_create(host, port, on_request, s, err);
    if (!s->d) {
        pthread_mutex_destroy(&s->mu);
        free(s->keys);
        free(s);
        return NULL;
    }
    return s;
}

int drv_cacheserve_set_secrets(drv_cacheserve_t *s, const char *const *secrets, size_t n,
                               drv_error_t *err)
{
    unsigned char (*keys)[32] = hash_secrets(secrets, n, err);
    if (!keys)
        return -1;
    pthread_mutex_lock(&s->mu);
    unsigned char (*old)[32] = s->keys;
    s->keys = keys;
    s->nkeys = n;
    pthread_mutex_unlock(&s->mu);
    free(old);
    return 0;
}

void drv_cacheserve_destroy(drv_cacheserve_t *s)
{
    if (!s)
        return;
    drv_httpd_destroy(s->d);
    pthread_mutex_destroy(&s->mu);
    free(s->keys);
    free(s);
}

int drv_cacheserve_port(const drv_cacheserve_t *s) { return drv_httpd_port(s->d); }
