/* source.c — see source.h: a GET streamed through SHA-256 (whole file and
 * per chunk), or into memory, with libcurl. */
#define _GNU_SOURCE
#include "objstore/source.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "common/util.h"

#define TICK_BYTES (1u << 20)

typedef struct hs {
    uint64_t chunk_size, max, got, in_chunk;
    drv_sha256_t whole, chunk;
    char (*chunks)[65];
    size_t nchunks, cap;
    bool too_big, oom, stopped;
    long status;
    drv_src_tick_fn tick;
    void *tick_ctx;
    uint64_t ticked;   /* h->got at the last tick */
    /* text mode */
    char *text;
    size_t tlen, tmax;
} hs_t;

static void hexify(const unsigned char d[32], char out[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[64] = '\0';
}

static void end_chunk(hs_t *h)
{
    if (h->nchunks == h->cap) {
        size_t nc = h->cap ? 2 * h->cap : 16;
        char(*n)[65] = realloc(h->chunks, nc * sizeof *n);
        if (!n) {
            h->oom = true;
            return;
        }
        h->chunks = n, h->cap = nc;
    }
    unsigned char d[32];
    drv_sha256_final(&h->chunk, d);
    hexify(d, h->chunks[h->nchunks++]);
    drv_sha256_init(&h->chunk);
    h->in_chunk = 0;
}

/* Only a 200's body counts: the status is known when the body starts. */
static bool body_ok(hs_t *h, CURL *c)
{
    if (!h->status)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &h->status);
    return h->status == 200;
}

typedef struct cb {
    hs_t *h;
    CURL *c;
} cb_t;

static size_t on_hash(char *p, size_t size, size_t nmemb, void *ctx)
{
    cb_t *x = ctx;
    hs_t *h = x->h;
    size_t n = size * nmemb;
    if (!body_ok(h, x->c))
        return n;   /* an error's body: dropped */
    if (h->got + n > h->max) {
        h->too_big = true;
        return 0;
    }
    h->got += n;
    drv_sha256_update(&h->whole, p, n);
    while (n > 0) {
        uint64_t room = h->chunk_size - h->in_chunk;
        size_t take = n < room ? n : (size_t)room;
        drv_sha256_update(&h->chunk, p, take);
        h->in_chunk += take;
        p += take, n -= take;
        if (h->in_chunk == h->chunk_size)
            end_chunk(h);
    }
    if (h->tick && h->got - h->ticked >= TICK_BYTES) {
        h->ticked = h->got;
        if (h->tick(h->tick_ctx, h->got)) {
            h->stopped = true;
            return 0;
        }
    }
    return size * nmemb;
}

static size_t on_text(char *p, size_t size, size_t nmemb, void *ctx)
{
    cb_t *x = ctx;
    hs_t *h = x->h;
    size_t n = size * nmemb;
    if (!body_ok(h, x->c))
        return n;
    if (h->tlen + n > h->tmax) {
        h->too_big = true;
        return 0;
    }
    char *t = realloc(h->text, h->tlen + n + 1);
    if (!t) {
        h->oom = true;
        return 0;
    }
    memcpy(t + h->tlen, p, n);
    h->text = t;
    h->tlen += n;
    t[h->tlen] = '\0';
    return n;
}

static const char *ca_file;   /* drv_src_set_ca_file */

void drv_src_set_ca_file(const char *path)
{
    ca_file = path && *path ? path : NULL;
}

const char *drv_src_ca_file(void)
{
    return ca_file;
}

static int get(const char *url, const char *shown, hs_t *h, curl_write_callback wcb,
               drv_error_t *err)
{
    CURL *c = curl_easy_init();
    if (!c)
        return drv_err(err, 503, "unavailable", "source", "%s: curl_easy_init failed", shown);
    cb_t x = {h, c};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, wcb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);   /* 30 s without a byte: give up */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_USERAGENT, "droverd");
    if (ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, ca_file);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_off_t cl = -1;
    curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    curl_easy_cleanup(c);
    if (h->stopped)
        return drv_err(err, 409, "stopped", "source", "%s: the read was stopped", shown);
    if (h->too_big)
        return drv_err_unprocessable(err, "source", "%s is larger than %" PRIu64 " bytes", shown,
                                     h->max ? h->max : (uint64_t)h->tmax);
    if (h->oom)
        return drv_err_internal(err, "out of memory reading %s", shown);
    if (rc != CURLE_OK && status != 200 && status != 0)
        rc = CURLE_OK;   /* an error answer whose body we dropped */
    if (rc != CURLE_OK)
        return drv_err(err, 503, "unavailable", "source", "%s: cannot read it: %s%s", shown,
                       curl_easy_strerror(rc),
                       rc == CURLE_PEER_FAILED_VERIFICATION
                           ? " (its certificate is not signed by a CA droverd trusts: the "
                             "system's store, or droverd --origin-ca-file)"
                           : "");
    if (status != 200)
        return drv_err_unprocessable(err, "source", "%s answered %ld%s", shown, status,
                                     status == 403   ? " (forbidden)"
                                     : status == 404 ? " (not found)"
                                                     : "");
    if (cl >= 0 && (uint64_t)cl != (h->max ? h->got : h->tlen))
        return drv_err_unprocessable(err, "source", "%s: %" PRIu64 " bytes came, Content-Length "
                                     "said %lld", shown, h->max ? h->got : (uint64_t)h->tlen,
                                     (long long)cl);
    return 0;
}

int drv_src_hash(const char *url, const char *shown, uint64_t chunk_size, uint64_t max_size,
                 drv_src_tick_fn tick, void *tick_ctx, drv_manifest_file_t *f,
                 drv_error_t *err)
{
    hs_t h = {.chunk_size = chunk_size ? chunk_size : DRV_MANIFEST_CHUNK_DEFAULT,
              .max = max_size ? max_size : DRV_MANIFEST_MAX_FILE_SIZE, .tick = tick,
              .tick_ctx = tick_ctx};
    drv_sha256_init(&h.whole);
    drv_sha256_init(&h.chunk);
    if (get(url, shown, &h, on_hash, err) < 0) {
        free(h.chunks);
        return -1;
    }
    if (h.in_chunk > 0)
        end_chunk(&h);
    if (h.oom) {
        free(h.chunks);
        return drv_err_internal(err, "out of memory reading %s", shown);
    }
    if (tick && tick(tick_ctx, h.got)) {
        free(h.chunks);
        return drv_err(err, 409, "stopped", "source", "%s: the read was stopped", shown);
    }
    unsigned char d[32];
    drv_sha256_final(&h.whole, d);
    hexify(d, f->sha256);
    f->size = h.got;
    f->nchunks = h.nchunks;
    f->chunks = h.chunks;
    return 0;
}

int drv_src_get_text(const char *url, size_t max, char **out, size_t *len, drv_error_t *err)
{
    hs_t h = {.tmax = max};
    if (get(url, url, &h, on_text, err) < 0) {
        free(h.text);
        return -1;
    }
    *out = h.text ? h.text : drv_strdup("");
    *len = h.tlen;
    return 0;
}
