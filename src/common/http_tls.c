/* http_tls.c — https for http_client.h's clients (drover-agent's calls to
 * the head, the drover CLI's) and for the node cache's ranged reads of
 * https origins: libcurl, loaded with dlopen("libcurl.so.4") the first time
 * a client for an https:// server makes a request, so that a process
 * talking plain http never maps libcurl and its TLS libraries. The curl
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

#include "common/http_client.h"
#include "common/util.h"

/* the functions used, by name; fields are prefixed so that curl's
 * type-checking macros (curl_easy_setopt, ...) do not expand on them */
static struct {
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    void (*easy_reset)(CURL *);
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
        "curl_easy_getinfo", "curl_easy_reset", "curl_easy_cleanup", "curl_easy_strerror", "curl_slist_append",
        "curl_slist_free_all"};
    void **slots[] = {(void **)&fn.global_init, (void **)&fn.easy_init,
                      (void **)&fn.easy_setopt, (void **)&fn.easy_perform,
                      (void **)&fn.easy_getinfo, (void **)&fn.easy_reset,
                      (void **)&fn.easy_cleanup,
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

/* One transfer's state, for the callbacks: a buffered or streamed answer
 * (on_head/on_body), a streamed request body. */
typedef struct xfer {
    CURL *c;
    int (*on_head)(void *ud, int status, const drv_h1_header_t *h, size_t nh);
    int (*on_body)(void *ud, const char *p, size_t n);
    long (*read_body)(void *ud, uint64_t off, char *buf, size_t n);
    void *ud;
    const atomic_bool *stop;
    int64_t deadline_ms;         /* monotonic; 0 = none */
    drv_h1_header_t h[DRV_HC_GET_MAX_HEADERS];
    char *hv[DRV_HC_GET_MAX_HEADERS];     /* "name\0value\0" per header, malloc'd */
    size_t nh;
    bool head_done, refused, late, too_big, read_failed;
    char *buf;                   /* the buffered answer */
    size_t n, max;
    uint64_t off, body_len;      /* of the request body read so far */
} xfer_t;

static void headers_clear(xfer_t *s)
{
    for (size_t i = 0; i < s->nh; i++)
        free(s->hv[i]);
    s->nh = 0;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
    xfer_t *s = ud;
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
static int head_once(xfer_t *s)
{
    if (s->head_done || !s->on_head)
        return s->refused ? -1 : 0;
    s->head_done = true;
    long status = 0;
    fn.easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &status);
    if (s->on_head(s->ud, (int)status, s->h, s->nh) < 0)
        s->refused = true;
    return s->refused ? -1 : 0;
}

static size_t on_data(char *p, size_t sz, size_t nm, void *ud)
{
    xfer_t *s = ud;
    size_t n = sz * nm;
    if (head_once(s) < 0)
        return 0;
    if (s->on_body)
        return s->on_body(s->ud, p, n) < 0 ? (s->refused = true, 0) : n;
    if (drv_buf_append(&s->buf, &s->n, p, n, s->max) < 0)
        return s->too_big = true, 0;
    return n;
}

static size_t on_read(char *out, size_t sz, size_t nm, void *ud)
{
    xfer_t *s = ud;
    size_t want = sz * nm;
    if (want > s->body_len - s->off)
        want = (size_t)(s->body_len - s->off);
    if (want == 0)
        return 0;
    long got = s->read_body(s->ud, s->off, out, want);
    if (got <= 0 || (size_t)got > want)
        return s->read_failed = true, CURL_READFUNC_ABORT;
    s->off += (uint64_t)got;
    return (size_t)got;
}

/* curl asks again from the start when it resends on a fresh connection */
static int on_seek(void *ud, curl_off_t off, int origin)
{
    xfer_t *s = ud;
    if (origin != SEEK_SET || off < 0 || (uint64_t)off > s->body_len)
        return CURL_SEEKFUNC_CANTSEEK;
    s->off = (uint64_t)off;
    return CURL_SEEKFUNC_OK;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    xfer_t *s = ud;
    if (s->stop && atomic_load(s->stop))
        return 1;
    if (s->deadline_ms && drv_mono_ms() > s->deadline_ms)
        return s->late = true, 1;
    return 0;
}

int drv_hc_tls_request(drv_hc_tls_t *t, const char *base_url, const drv_hc_opts_t *o,
                       const drv_hc_req_t *rq, drv_hc_resp_t *resp, drv_error_t *err)
{
    char url[4200], *auth = NULL, ctype[200];
    memset(resp, 0, sizeof *resp);
    if ((size_t)snprintf(url, sizeof url, "%s%s", base_url, rq->path) >= sizeof url)
        return drv_err(err, 0, "unavailable", "", "URL too long");
    struct curl_slist *h = NULL;
    if (rq->bearer) {
        size_t al = strlen(rq->bearer) + 32;
        if ((auth = malloc(al)))
            snprintf(auth, al, "Authorization: Bearer %s", rq->bearer);
        h = fn.slist_append(h, auth ? auth : "");
    }
    if (rq->content_type) {
        snprintf(ctype, sizeof ctype, "Content-Type: %s", rq->content_type);
        h = fn.slist_append(h, ctype);
    }
    h = fn.slist_append(h, "Accept: application/json");
    for (size_t i = 0; rq->headers && rq->headers[i]; i++)
        h = fn.slist_append(h, rq->headers[i]);
    h = fn.slist_append(h, "Expect:");
    if (!h || (rq->bearer && !auth)) {
        fn.slist_free_all(h);
        free(auth);
        return drv_err(err, 0, "unavailable", "", "out of memory");
    }
    CURL *c = t->curl;
    xfer_t s = {.c = c, .on_head = rq->on_head, .on_body = rq->on_body,
                .read_body = rq->read_body, .ud = rq->ud, .stop = rq->stop,
                .max = rq->max_body ? rq->max_body : DRV_HC_MAX_BODY,
                .body_len = rq->body_len};
    fn.easy_reset(c);   /* no option of the last request leaks into this one; its connection stays */
    fn.easy_setopt(c, CURLOPT_URL, url);
    fn.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
    fn.easy_setopt(c, CURLOPT_CUSTOMREQUEST, rq->method);
    fn.easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (rq->read_body) {
        fn.easy_setopt(c, CURLOPT_UPLOAD, 1L);
        fn.easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)rq->body_len);
        fn.easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        fn.easy_setopt(c, CURLOPT_READDATA, &s);
        fn.easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
        fn.easy_setopt(c, CURLOPT_SEEKDATA, &s);
    } else if (rq->body || strcmp(rq->method, "POST") == 0 || strcmp(rq->method, "PUT") == 0) {
        fn.easy_setopt(c, CURLOPT_POSTFIELDS, rq->body ? rq->body : "");
        fn.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
    }
    if (strcmp(rq->method, "HEAD") == 0)
        fn.easy_setopt(c, CURLOPT_NOBODY, 1L);
    fn.easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    fn.easy_setopt(c, CURLOPT_HEADERDATA, &s);
    fn.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    fn.easy_setopt(c, CURLOPT_WRITEDATA, &s);
    fn.easy_setopt(c, CURLOPT_TIMEOUT_MS, rq->timeout_ms > 0 ? rq->timeout_ms : 300000L);
    fn.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, rq->connect_timeout_ms);
    fn.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    fn.easy_setopt(c, CURLOPT_USERAGENT, o->user_agent);
    fn.easy_setopt(c, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    const char *pem = rq->ca_pem ? rq->ca_pem : trusted_ca;
    struct curl_blob ca = {.data = (void *)pem, .len = pem ? strlen(pem) : 0,
                           .flags = CURL_BLOB_COPY};
    if (pem && !rq->unverified)
        fn.easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
    fn.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, rq->unverified ? 0L : 1L);
    fn.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, rq->unverified ? 0L : 2L);
    fn.easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    fn.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    fn.easy_setopt(c, CURLOPT_XFERINFODATA, &s);
    CURLcode rc = fn.easy_perform(c);
    if (rc == CURLE_OK && head_once(&s) < 0)
        rc = CURLE_WRITE_ERROR;   /* the receiver refused a bodiless answer */
    fn.easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    fn.slist_free_all(h);
    if (auth) {
        memset(auth, 0, strlen(auth));
        free(auth);
    }
    headers_clear(&s);
    if (rc != CURLE_OK) {
        free(s.buf);
        resp->refused = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST;
        resp->too_big = s.too_big;
        return drv_err(err, 0, "unavailable", "", "%s%s",
                       s.too_big         ? "response body too large"
                       : s.refused       ? "stopped reading the answer: aborted by the receiver"
                       : s.read_failed   ? "cannot read the request body"
                       : rc == CURLE_ABORTED_BY_CALLBACK ? (s.late ? "timed out" : "stopped")
                                                         : fn.easy_strerror(rc),
                       rc == CURLE_PEER_FAILED_VERIFICATION ? o->untrusted_hint : "");
    }
    fn.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
    if (!rq->on_body && !s.buf && !(s.buf = calloc(1, 1)))
        return drv_err(err, 0, "unavailable", "", "out of memory");
    resp->body = rq->on_body ? NULL : s.buf;
    resp->len = rq->on_body ? 0 : s.n;
    if (rq->on_body)
        free(s.buf);
    return 0;
}

/* --- streaming GET (the node cache's ranged reads) -------------------------- */

int drv_hc_tls_get(const drv_hc_get_t *g, char *msg, size_t ml)
{
    pthread_once(&once, load);
    if (load_error[0])
        return snprintf(msg, ml, "%s", load_error), -1;
    CURL *c = fn.easy_init();
    if (!c)
        return snprintf(msg, ml, "cannot create a curl handle"), -1;
    xfer_t s = {.c = c, .on_head = g->on_head, .on_body = g->on_body, .ud = g->ud,
                .stop = g->stop, .deadline_ms = g->deadline_ms};
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
    fn.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
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
    fn.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
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
