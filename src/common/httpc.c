/* httpc.c — JSON-over-HTTP client for the drover CLI (see httpc.h), on
 * common/http_client.c: plain http over its own sockets, https through
 * libcurl loaded with dlopen at the first https request, so the CLI links
 * no libcurl and a plain-http command never maps it (a start costs a
 * fraction of a libcurl-linked one's CPU: docs/benchmarks.md). Each client
 * owns one drv_hc_t to its current URL, keeping its connection alive.
 *
 * Several heads (issue 17): base_url may list URLs, comma-separated. A
 * request goes to the current one; when it cannot connect (the request
 * never left) the client moves to the next, and when a standby answers 503
 * with the leader's URL ({"leader": URL}) it moves there. A full round of
 * refusals waits a little (a takeover takes a lease TTL) and tries again,
 * for at most FAILOVER_WAIT_MS. Nothing else is retried: a request that may
 * have been executed is never sent twice.
 */
#define _GNU_SOURCE
#include "common/httpc.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_URLS 8
#define FAILOVER_WAIT_MS 15000   /* longer than a takeover with the default 5 s TTL */
#define CONNECT_TIMEOUT_MS 10000

static const char untrusted_hint[] =
    " (its certificate is not signed by a CA this client trusts: pass --ca-file FILE, or "
    "`drover login --ca-hash sha256:HEX` once; the head's DATA_DIR/tls/ca.crt and ca.hash "
    "are the ones)";

struct drv_httpc {
    drv_hc_t *hc;            /* to hc_url, made at the first request there */
    char *hc_url;
    char *base_url;          /* the current one (points into urls) */
    char *urls[MAX_URLS + 1];   /* the given ones, then the leader a standby named */
    int nurls, cur;
    char *token;             /* the bearer token or NULL */
    long timeout_s;
    char *ca_pem;            /* the CA https answers must chain to (NULL: the system's) */
    bool no_verify;          /* drv_httpc_set_tls(verify = false) */
};

drv_httpc_t *drv_httpc_create(const char *base_url, const char *token, drv_error_t *err)
{
    if (!base_url || !*base_url) {
        drv_err_invalid(err, "server", "no server URL");
        return NULL;
    }
    drv_httpc_t *c = calloc(1, sizeof *c);
    if (!c)
        goto oom;
    c->timeout_s = 300;
    for (const char *p = base_url; *p;) {
        size_t n = strcspn(p, ",");
        const char *next = p[n] ? p + n + 1 : p + n;
        while (n > 0 && (*p == ' '))
            p++, n--;
        while (n > 0 && (p[n - 1] == '/' || p[n - 1] == ' '))
            n--;
        if (n) {
            if (c->nurls == MAX_URLS) {
                drv_httpc_destroy(c);
                drv_err_invalid(err, "server", "at most %d server URLs", MAX_URLS);
                return NULL;
            }
            bool bare = !memmem(p, n, "://", 3);
            size_t len = n + (bare ? 7 : 0) + 1;
            if (!(c->urls[c->nurls] = malloc(len)))
                goto oom;
            snprintf(c->urls[c->nurls++], len, "%s%.*s", bare ? "http://" : "", (int)n, p);
        }
        p = next;
    }
    if (!c->nurls) {
        drv_httpc_destroy(c);
        drv_err_invalid(err, "server", "no server URL");
        return NULL;
    }
    c->base_url = c->urls[0];
    if (token && *token && !(c->token = strdup(token)))
        goto oom;
    return c;
oom:
    drv_httpc_destroy(c);
    drv_err_internal(err, "out of memory");
    return NULL;
}

drv_httpc_t *drv_httpc_dup(const drv_httpc_t *c, bool current_only, drv_error_t *err)
{
    drv_httpc_t *d = calloc(1, sizeof *d);
    if (!d)
        goto oom;
    d->timeout_s = c->timeout_s;
    d->no_verify = c->no_verify;
    for (int i = 0; i <= MAX_URLS; i++) {
        const char *u = current_only ? (i == 0 ? c->base_url : NULL) : c->urls[i];
        if (u && !(d->urls[i] = strdup(u)))
            goto oom;
    }
    d->nurls = current_only ? 1 : c->nurls;
    d->cur = current_only ? 0 : c->cur;
    d->base_url = d->urls[d->cur];
    if ((c->token && !(d->token = strdup(c->token))) ||
        (c->ca_pem && !(d->ca_pem = strdup(c->ca_pem))))
        goto oom;
    return d;
oom:
    drv_httpc_destroy(d);
    drv_err_internal(err, "out of memory");
    return NULL;
}

int drv_httpc_set_tls(drv_httpc_t *c, const char *ca_pem, bool verify, drv_error_t *err)
{
    char *p = ca_pem ? strdup(ca_pem) : NULL;
    if (ca_pem && !p)
        return drv_err_internal(err, "out of memory");
    free(c->ca_pem);
    c->ca_pem = p;
    c->no_verify = !verify;
    return 0;
}

void drv_httpc_destroy(drv_httpc_t *c)
{
    if (!c)
        return;
    drv_hc_destroy(c->hc);
    free(c->hc_url);
    for (int i = 0; i <= MAX_URLS; i++)
        free(c->urls[i]);
    if (c->token) {
        memset(c->token, 0, strlen(c->token));
        free(c->token);
    }
    free(c->ca_pem);
    free(c);
}

const char *drv_httpc_base_url(const drv_httpc_t *c)
{
    return c->base_url;
}

void drv_httpc_set_timeout(drv_httpc_t *c, long seconds)
{
    c->timeout_s = seconds < 0 ? 0 : seconds;
}

/* The connection's client for the current URL (made anew when it moved). */
static drv_hc_t *client(drv_httpc_t *c, drv_error_t *err)
{
    if (c->hc && strcmp(c->hc_url, c->base_url) == 0)
        return c->hc;
    drv_hc_destroy(c->hc);
    free(c->hc_url);
    c->hc_url = NULL;
    if (!(c->hc = drv_hc_create(c->base_url, err)))
        return NULL;
    if (!(c->hc_url = strdup(c->base_url))) {
        drv_hc_destroy(c->hc);
        c->hc = NULL;
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    drv_hc_set_opts(c->hc, &(drv_hc_opts_t){.keep_alive = true, .user_agent = "drover-cli",
                                             .untrusted_hint = untrusted_hint});
    return c->hc;
}

int drv_httpc_send(drv_httpc_t *c, const drv_hc_req_t *rq_in, drv_hc_resp_t *resp,
                   drv_error_t *err)
{
    memset(resp, 0, sizeof *resp);
    drv_hc_t *hc = client(c, err);
    if (!hc)
        return -1;
    drv_hc_req_t rq = *rq_in;
    if (!rq.bearer)
        rq.bearer = c->token;
    if (!rq.timeout_ms)
        rq.timeout_ms = c->timeout_s ? c->timeout_s * 1000 : DRV_HC_NO_TIMEOUT_MS;
    if (!rq.connect_timeout_ms)
        rq.connect_timeout_ms = CONNECT_TIMEOUT_MS;
    rq.ca_pem = c->ca_pem;
    rq.unverified = c->no_verify;
    if (drv_hc_request(hc, &rq, resp, err) == 0)
        return 0;
    if (resp->too_big)
        drv_err(err, 0, "unavailable", "", "answer from droverd at %s is larger than %d MiB",
                c->base_url, (int)((rq.max_body ? rq.max_body : DRV_HC_MAX_BODY) >> 20));
    else if (err->status == 0)   /* not a request refused before sending (status 400) */
        drv_err_prefix(err, "cannot reach droverd at %s", c->base_url);
    return -1;
}

/* One request to the current URL; *refused when it never reached a server. */
static int request_once(drv_httpc_t *c, const char *method, const char *path,
                        const json_t *body, const char *if_match, drv_http_resp_t *resp,
                        bool *refused, drv_error_t *err)
{
    char ifm[160];
    const char *hdrs[2] = {NULL, NULL};
    memset(resp, 0, sizeof *resp);
    char *payload = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (body && !payload)
        return drv_err_internal(err, "out of memory");
    if (if_match) {
        if ((size_t)snprintf(ifm, sizeof ifm, "If-Match: %s", if_match) >= sizeof ifm) {
            free(payload);
            return drv_err_invalid(err, "if-match", "If-Match value too long");
        }
        hdrs[0] = ifm;
    }
    drv_hc_req_t rq = {.method = method, .path = path, .headers = hdrs,
                       .content_type = payload ? "application/json" : NULL,
                       .body = payload, .body_len = payload ? strlen(payload) : 0,
                       .max_body = DRV_HTTPC_MAX_BODY};
    drv_hc_resp_t r;
    int rc = drv_httpc_send(c, &rq, &r, err);
    free(payload);
    *refused = rc < 0 && r.refused;
    if (rc < 0)
        return -1;
    resp->status = r.status;
    resp->body = r.body;
    resp->len = r.len;
    return 0;
}

/* The leader a standby's 503 names (malloc'd), or NULL. */
static char *leader_of(const drv_http_resp_t *r)
{
    if (r->status != 503)
        return NULL;
    json_t *doc = json_loadb(r->body, r->len, 0, NULL);
    const char *code = json_string_value(json_object_get(json_object_get(doc, "error"), "code"));
    const char *url = json_string_value(json_object_get(doc, "leader"));
    char *out = code && strcmp(code, "not_leader") == 0 ? strdup(url ? url : "") : NULL;
    json_decref(doc);
    return out;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

bool drv_httpc_move_on(drv_httpc_t *c, drv_httpc_failover_t *f, bool refused,
                       const drv_http_resp_t *resp, drv_error_t *err)
{
    char *leader = refused ? NULL : leader_of(resp);
    if (!refused && !leader)
        return false;   /* an answer (or a standby that says nothing more) */
    if (refused && c->nurls == 1 && c->cur == 0)
        return false;   /* one server, down: as without failover */
    int next = (c->cur + 1) % c->nurls;
    if (leader && *leader) {   /* go where the standby points */
        next = -1;
        for (int i = 0; i <= MAX_URLS && c->urls[i]; i++)
            if (strcmp(c->urls[i], leader) == 0)
                next = i;
        if (next < 0) {
            free(c->urls[MAX_URLS]);
            c->urls[MAX_URLS] = strdup(leader);
            next = c->urls[MAX_URLS] ? MAX_URLS : (c->cur + 1) % c->nurls;
        }
    }
    bool pointed = leader && *leader && next != c->cur && f->follows++ < 8;
    free(leader);
    f->misses = pointed ? 0 : f->misses + 1;
    if (f->misses >= c->nurls) {   /* a full round: a takeover may be under way */
        if (f->waited_ms >= FAILOVER_WAIT_MS) {
            if (refused)
                drv_err_prefix(err, "no head of %d answered for %ld s", c->nurls,
                               f->waited_ms / 1000);
            return false;
        }
        nap_ms(500);
        f->waited_ms += 500;
        f->misses = 0;
    }
    c->cur = next;
    c->base_url = c->urls[next];
    return true;
}

int drv_httpc_request(drv_httpc_t *c, const char *method, const char *path,
                      const json_t *body, const char *if_match, drv_http_resp_t *resp,
                      drv_error_t *err)
{
    drv_httpc_failover_t f = {0};
    for (;;) {
        bool refused = false;
        int rc = request_once(c, method, path, body, if_match, resp, &refused, err);
        if (rc < 0 && !refused)
            return -1;
        if (!drv_httpc_move_on(c, &f, refused, resp, err))
            return rc;
        if (!refused)
            drv_http_resp_free(resp);
    }
}

void drv_http_resp_free(drv_http_resp_t *resp)
{
    if (!resp)
        return;
    free(resp->body);
    resp->body = NULL;
    resp->len = 0;
}

/* Fill err from a non-2xx answer: the server's error object when there is
 * one, else a line made of the status and the start of the body. */
static void error_from_answer(const drv_httpc_t *c, const drv_http_resp_t *r, drv_error_t *err)
{
    json_t *doc = json_loadb(r->body, r->len, 0, NULL);
    json_t *e = json_object_get(doc, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *msg = json_string_value(json_object_get(e, "message"));
    const char *field = json_string_value(json_object_get(e, "field"));
    if (msg) {
        drv_err(err, (int)r->status, code ? code : "error", field ? field : "", "%s", msg);
    } else {
        char snippet[160];
        size_t n = 0;
        for (size_t i = 0; i < r->len && n + 1 < sizeof snippet; i++)
            snippet[n++] = (r->body[i] == '\n' || r->body[i] == '\r') ? ' ' : r->body[i];
        snippet[n] = '\0';
        drv_err(err, (int)r->status, "error", "", "droverd at %s answered HTTP %ld%s%s",
                c->base_url, r->status, n ? ": " : "", snippet);
    }
    json_decref(doc);
}

json_t *drv_httpc_json(drv_httpc_t *c, const char *method, const char *path,
                       const json_t *body, const char *if_match, long *status,
                       drv_error_t *err)
{
    drv_http_resp_t r;
    if (status)
        *status = 0;
    if (drv_httpc_request(c, method, path, body, if_match, &r, err) < 0)
        return NULL;
    if (status)
        *status = r.status;
    json_t *doc = NULL;
    if (r.status < 200 || r.status > 299) {
        error_from_answer(c, &r, err);
    } else if (r.len == 0) {
        doc = json_null();
    } else {
        json_error_t jerr;
        doc = json_loadb(r.body, r.len, JSON_DECODE_ANY, &jerr);
        if (!doc)
            drv_err(err, 0, "internal", "", "droverd at %s sent malformed JSON: %s",
                    c->base_url, jerr.text);
    }
    drv_http_resp_free(&r);
    return doc;
}

int drv_http_escape(const char *s, char *out, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t j = 0;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' ||
                     ch == '~';
        if (plain) {
            if (j + 1 >= n)
                return -1;
            out[j++] = (char)ch;
        } else {
            if (j + 3 >= n)
                return -1;
            out[j++] = '%';
            out[j++] = hex[ch >> 4];
            out[j++] = hex[ch & 15];
        }
    }
    if (j >= n)
        return -1;
    out[j] = '\0';
    return 0;
}
