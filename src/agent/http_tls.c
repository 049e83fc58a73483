/* http_tls.c — https for drover-agent's calls to the head and for the
 * node cache's ranged reads of https origins (see http_client.h): libcurl, loaded with dlopen("libcurl.so.4") the first
 * time a client for an https:// server makes a request, so that agents
 * talking plain http never map libcurl and its TLS libraries. The curl
 * header gives the types and constants; the functions come from dlsym.
 * Everything here runs on the client's owner thread. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/http_client.h"
#include "common/util.h"

/* the functions used, by name; fields are prefixed so that curl's
 * type-checking macros (curl_easy_setopt, ...) do not expand on them */
static struct {
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} fn;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[300];

static void load(void)
{
    static const char *const names[] = {
        "curl_global_init", "curl_easy_init", "curl_easy_setopt", "curl_easy_perform",
        "curl_easy_getinfo", "curl_easy_cleanup", "curl_easy_strerror", "curl_slist_append",
        "curl_slist_free_all"};
    void **slots[] = {(void **)&fn.global_init, (void **)&fn.easy_init,
                      (void **)&fn.easy_setopt, (void **)&fn.easy_perform,
                      (void **)&fn.easy_getinfo, (void **)&fn.easy_cleanup,
                      (void **)&fn.easy_strerror, (void **)&fn.slist_append,
                      (void **)&fn.slist_free_all};
    void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(load_error, sizeof load_error, "https needs libcurl: %s", dlerror());
        return;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(*slots[i] = dlsym(h, names[i]))) {
            snprintf(load_error, sizeof load_error, "libcurl.so.4 lacks %s", names[i]);
            return;
        }
    /* the handle stays open for the process's life: curl keeps global state */
    if (fn.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        snprintf(load_error, sizeof load_error, "curl_global_init failed");
}

static char *trusted_ca;   /* PEM; NULL: the system's store */
static char *origin_ca;    /* the same for artifact origins (drv_hc_tls_set_origin_ca) */

static int set_pem(char **slot, const char *pem, drv_error_t *err)
{
    char *c = pem ? strdup(pem) : NULL;
    if (pem && !c)
        return drv_err_internal(err, "out of memory");
    free(*slot);
    *slot = c;
    return 0;
}

int drv_hc_tls_set_origin_ca(const char *pem, drv_error_t *err)
{
    return set_pem(&origin_ca, pem, err);
}

int drv_hc_tls_set_ca(const char *pem, drv_error_t *err)
{
    return set_pem(&trusted_ca, pem, err);
}

struct drv_hc_tls {
    CURL *curl;
};

drv_hc_tls_t *drv_hc_tls_create(drv_error_t *err)
{
    pthread_once(&once, load);
    if (load_error[0]) {
        drv_err(err, 0, "unavailable", "", "%s", load_error);
        return NULL;
    }
    drv_hc_tls_t *t = calloc(1, sizeof *t);
    if (!t || !(t->curl = fn.easy_init())) {
        free(t);
        drv_err(err, 0, "unavailable", "", "cannot create a curl handle");
        return NULL;
    }
    return t;
}

void drv_hc_tls_destroy(drv_hc_tls_t *t)
{
    if (!t)
        return;
    fn.easy_cleanup(t->curl);
    free(t);
}

typedef struct sink {
    char *s;
    size_t n;
} sink_t;

static size_t on_data(char *p, size_t sz, size_t nm, void *ud)
{
    sink_t *b = ud;
    size_t add = sz * nm;
    return drv_buf_append(&b->s, &b->n, p, add, DRV_HC_MAX_BODY) < 0 ? 0 : add;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    const atomic_bool *stop = ud;
    return stop && atomic_load(stop) ? 1 : 0;
}

int drv_hc_tls_request(drv_hc_tls_t *t, const char *base_url, const drv_hc_req_t *rq,
                       drv_hc_resp_t *resp, drv_error_t *err)
{
    char url[1600], auth[300], ctype[200];
    memset(resp, 0, sizeof *resp);
    if ((size_t)snprintf(url, sizeof url, "%s%s", base_url, rq->path) >= sizeof url)
        return drv_err(err, 0, "unavailable", "", "URL too long");
    struct curl_slist *h = NULL;
    if (rq->bearer) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", rq->bearer);
        h = fn.slist_append(h, auth);
    }
    if (rq->content_type) {
        snprintf(ctype, sizeof ctype, "Content-Type: %s", rq->content_type);
        h = fn.slist_append(h, ctype);
    }
    h = fn.slist_append(h, "Expect:");
    sink_t b = {0};
    CURL *c = t->curl;
    fn.easy_setopt(c, CURLOPT_URL, url);
    fn.easy_setopt(c, CURLOPT_CUSTOMREQUEST, rq->method);
    fn.easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (rq->body) {
        fn.easy_setopt(c, CURLOPT_POSTFIELDS, rq->body);
        fn.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
    }
    fn.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    fn.easy_setopt(c, CURLOPT_WRITEDATA, &b);
    fn.easy_setopt(c, CURLOPT_TIMEOUT_MS, rq->timeout_ms);
    fn.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, rq->connect_timeout_ms);
    fn.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    fn.easy_setopt(c, CURLOPT_USERAGENT, "drover-agent");
    fn.easy_setopt(c, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    struct curl_blob ca = {.data = trusted_ca, .len = trusted_ca ? strlen(trusted_ca) : 0,
                           .flags = CURL_BLOB_COPY};
    if (trusted_ca && !rq->unverified)
        fn.easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
    fn.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, rq->unverified ? 0L : 1L);
    fn.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, rq->unverified ? 0L : 2L);
    fn.easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    fn.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    fn.easy_setopt(c, CURLOPT_XFERINFODATA, (void *)rq->stop);
    CURLcode rc = fn.easy_perform(c);
    /* no option of this request may leak into the next one */
    fn.easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    fn.easy_setopt(c, CURLOPT_POSTFIELDS, NULL);
    fn.easy_setopt(c, CURLOPT_HTTPGET, 1L);
    fn.easy_setopt(c, CURLOPT_CAINFO_BLOB, NULL);
    fn.slist_free_all(h);
    if (rc != CURLE_OK) {
        free(b.s);
        return drv_err(err, 0, "unavailable", "", "%s%s", fn.easy_strerror(rc),
                       rc == CURLE_PEER_FAILED_VERIFICATION
                           ? " (the head's certificate is not signed by the trusted CA: check "
                             "--ca-hash/--ca-file)"
                           : "");
    }
    fn.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
    if (!b.s && !(b.s = calloc(1, 1)))
        return drv_err(err, 0, "unavailable", "", "out of memory");
    resp->body = b.s;
    resp->len = b.n;
    return 0;
}

/* --- streaming GET (the node cache's ranged reads) -------------------------- */

typedef struct stream {
    const drv_hc_get_t *g;
    CURL *c;
    drv_h1_header_t h[DRV_HC_GET_MAX_HEADERS];
    char *hv[DRV_HC_GET_MAX_HEADERS];     /* "name\0value\0" per header, malloc'd */
    size_t nh;
    bool head_done, refused, late;
} stream_t;

static void headers_clear(stream_t *s)
{
    for (size_t i = 0; i < s->nh; i++)
        free(s->hv[i]);
    s->nh = 0;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
    stream_t *s = ud;
    size_t n = sz * nm, k = n;
    if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {   /* a new answer (after a 100, ...) */
        headers_clear(s);
        return n;
    }
    while (k && (p[k - 1] == '\r' || p[k - 1] == '\n'))
        k--;
    const char *colon = memchr(p, ':', k);
    if (!colon || s->nh == DRV_HC_GET_MAX_HEADERS)
        return n;
    size_t nl = (size_t)(colon - p), vs = nl + 1;
    while (vs < k && (p[vs] == ' ' || p[vs] == '\t'))
        vs++;
    char *b = malloc(k + 2);
    if (!b)
        return 0;
    memcpy(b, p, nl);
    b[nl] = 0;
    memcpy(b + nl + 1, p + vs, k - vs);
    b[nl + 1 + k - vs] = 0;
    s->hv[s->nh] = b;
    s->h[s->nh].name = b;
    s->h[s->nh].value = b + nl + 1;
    s->nh++;
    return n;
}

/* the status and headers, once, before the first body byte */
static int head_once(stream_t *s)
{
    if (s->head_done)
        return s->refused ? -1 : 0;
    s->head_done = true;
    long status = 0;
    fn.easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &status);
    if (s->g->on_head(s->g->ud, (int)status, s->h, s->nh) < 0)
        s->refused = true;
    return s->refused ? -1 : 0;
}

static size_t on_stream(char *p, size_t sz, size_t nm, void *ud)
{
    stream_t *s = ud;
    size_t n = sz * nm;
    if (head_once(s) < 0 || s->g->on_body(s->g->ud, p, n) < 0)
        return 0;
    return n;
}

static int on_stream_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    stream_t *s = ud;
    if (s->g->stop && atomic_load(s->g->stop))
        return 1;
    if (s->g->deadline_ms && drv_mono_ms() > s->g->deadline_ms)
        return s->late = true, 1;
    return 0;
}

int drv_hc_tls_get(const drv_hc_get_t *g, char *msg, size_t ml)
{
    pthread_once(&once, load);
    if (load_error[0])
        return snprintf(msg, ml, "%s", load_error), -1;
    CURL *c = fn.easy_init();
    if (!c)
        return snprintf(msg, ml, "cannot create a curl handle"), -1;
    stream_t s = {.g = g, .c = c};
    char range[80], auth[1100];
    struct curl_slist *h = NULL;
    if (g->range) {
        snprintf(range, sizeof range, "Range: %s", g->range);
        h = fn.slist_append(h, range);
    }
    if (g->bearer) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", g->bearer);
        h = fn.slist_append(h, auth);
    }
    long stall_s = g->stall_ms > 0 ? (g->stall_ms + 999) / 1000 : 30;
    const char *ca = g->origin ? origin_ca : trusted_ca;
    struct curl_blob blob = {.data = (void *)ca, .len = ca ? strlen(ca) : 0,
                             .flags = CURL_BLOB_COPY};
    fn.easy_setopt(c, CURLOPT_URL, g->url);
    fn.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
    fn.easy_setopt(c, CURLOPT_HTTPHEADER, h);
    fn.easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    fn.easy_setopt(c, CURLOPT_HEADERDATA, &s);
    fn.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
    fn.easy_setopt(c, CURLOPT_WRITEDATA, &s);
    fn.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    fn.easy_setopt(c, CURLOPT_USERAGENT, "drover-agent");
    fn.easy_setopt(c, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    if (ca)
        fn.easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
    fn.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    fn.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    fn.easy_setopt(c, CURLOPT_CONNECTTIMEOUT, stall_s);
    fn.easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);   /* stall_ms without a byte: give up */
    fn.easy_setopt(c, CURLOPT_LOW_SPEED_TIME, stall_s);
    fn.easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    fn.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_stream_progress);
    fn.easy_setopt(c, CURLOPT_XFERINFODATA, &s);
    CURLcode rc = fn.easy_perform(c);
    int out = 0;
    if (rc == CURLE_OK && head_once(&s) < 0) {
        out = -1, msg[0] = 0;   /* the answer was refused: the callbacks said why */
    } else if (rc == CURLE_WRITE_ERROR && s.head_done) {
        out = -1, msg[0] = 0;   /* a callback stopped it */
    } else if (rc != CURLE_OK) {
        out = -1;
        bool stopped = rc == CURLE_ABORTED_BY_CALLBACK && !s.late;
        snprintf(msg, ml, "%s%s",
                 s.late ? "too slow: past the deadline" : stopped ? "stopped"
                                                        : fn.easy_strerror(rc),
                 rc == CURLE_PEER_FAILED_VERIFICATION
                     ? g->origin ? " (the origin's CA is not trusted: --origin-ca-file)"
                                 : " (the head's CA is not trusted: --ca-hash/--ca-file)"
                     : "");
    }
    headers_clear(&s);
    fn.slist_free_all(h);
    fn.easy_cleanup(c);
    return out;
}
