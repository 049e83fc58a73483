/* logserver.c — see logserver.h.
 *
 *   GET /logs/{replica}?offset=N    bytes from offset N (N < 0: the last -N)
 *   header X-Drover-Key: <key>      required
 * The answer is text/plain; X-Drover-Next-Offset says where to continue.
 * Threads: the HTTP server's own thread (httpd.c); the supervisor is
 * thread-safe. */
#include "agent/logserver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/httpd.h"
#include "common/util.h"

#define MAX_CHUNK (1 << 20)

struct drv_logserver {
    drv_httpd_t *d;
    drv_supervisor_t *sup;
    char url[160];
    char key[65];
};

/* An offset: an optional '-' and up to 18 digits. */
static int parse_offset(const char *s, long long *out)
{
    const char *p = s + (*s == '-');
    if (!*p || strlen(p) > 18 || strspn(p, "0123456789") != strlen(p))
        return -1;
    *out = strtoll(s, NULL, 10);
    return 0;
}

static void on_request(void *ud, const drv_h1_request_t *rq, drv_httpd_reply_t *out)
{
    drv_logserver_t *ls = ud;
    if (strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0) {
        drv_httpd_text(out, 405, "GET only\n");
        snprintf(out->headers, sizeof out->headers, "Allow: GET, HEAD\r\n");
        return;
    }
    const char *key = drv_h1_header(rq->h, rq->nh, "X-Drover-Key");
    if (!key || strlen(key) != 64 || !drv_ct_equal(key, ls->key, 64)) {
        drv_httpd_text(out, 401, "bad or missing X-Drover-Key\n");
        return;
    }
    const char *url = rq->path;
    if (strncmp(url, "/logs/", 6) != 0 || !url[6] || strchr(url + 6, '/')) {
        drv_httpd_text(out, 404, "no such path\n");
        return;
    }
    char off[32];
    long long offset = -65536;
    int q = drv_h1_query_get(rq->query, "offset", off, sizeof off);
    if (q < 0 || (q == 1 && parse_offset(off, &offset) < 0)) {
        drv_httpd_text(out, 400, "offset must be an integer\n");
        return;
    }
    if (offset < -MAX_CHUNK)
        offset = -MAX_CHUNK;
    char *buf = malloc(MAX_CHUNK);
    if (!buf) {
        drv_httpd_text(out, 500, "out of memory\n");
        return;
    }
    int64_t next = 0;
    drv_error_t err;
    ssize_t n = drv_supervisor_log_read(ls->sup, url + 6, offset, buf, MAX_CHUNK, &next, &err);
    if (n < 0) {
        free(buf);
        char msg[600];
        snprintf(msg, sizeof msg, "%s\n", err.message);
        drv_httpd_text(out, err.status == 404 ? 404 : 500, msg);
        return;
    }
    out->status = 200;
    out->body = buf;
    out->len = (size_t)n;
    snprintf(out->headers, sizeof out->headers, "X-Drover-Next-Offset: %lld\r\n",
             (long long)next);
}

drv_logserver_t *drv_logserver_create(drv_supervisor_t *sup, const char *host, drv_error_t *err)
{
    drv_logserver_t *ls = calloc(1, sizeof *ls);
    if (!ls) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    ls->sup = sup;
    if (drv_random_hex(32, ls->key) < 0) {
        free(ls);
        drv_err_internal(err, "no randomness");
        return NULL;
    }
    ls->d = drv_httpd_create(host, 0, on_request, ls, err);
    if (!ls->d) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        free(ls);
        drv_err_internal(err, "cannot start the log endpoint on %s: %s", host, why);
        return NULL;
    }
    snprintf(ls->url, sizeof ls->url, "http://%s:%d", host, drv_httpd_port(ls->d));
    return ls;
}

void drv_logserver_destroy(drv_logserver_t *ls)
{
    if (!ls)
        return;
    drv_httpd_destroy(ls->d);
    free(ls);
}

const char *drv_logserver_url(const drv_logserver_t *ls) { return ls->url; }
const char *drv_logserver_key(const drv_logserver_t *ls) { return ls->key; }
