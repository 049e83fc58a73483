/* h_console.c — serves the web console (web/, embedded at build time as
 * drv_console_assets[], see console_assets.h) from memory: GET / is
 * index.html, GET /ui/NAME every other file. No token is needed for these
 * (they hold no data; the console's scripts call the API with the user's
 * token).
 *
 * Every answer carries a strict Content-Security-Policy (scripts, styles,
 * images and API calls from this origin only — API calls also to the other
 * heads' origins with several heads, api/cors.h; no inline code; never
 * framed), X-Content-Type-Options: nosniff, and an ETag (a hash of the
 * file) with Cache-Control: no-cache, so browsers keep the files and
 * revalidate them: If-None-Match with the current ETag gets a bodiless 304.
 * Stateless: any thread may run these handlers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/console_assets.h"
#include "api/cors.h"
#include "api/handlers.h"

/* connect-src: this origin and, with several heads, every head's (api/cors.h) */
#define CONSOLE_CSP                                                                    \
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "  \
    "connect-src 'self'%s%s; font-src 'self'; object-src 'none'; base-uri 'none'; "    \
    "form-action 'self'; frame-ancestors 'none'"

static void set_csp(const drv_req_t *req, drv_resp_t *resp)
{
    char heads[1000];
    drv_cors_origins(req->head, heads, sizeof heads);
    snprintf(resp->csp, sizeof resp->csp, CONSOLE_CSP, heads[0] ? " " : "", heads);
}

static const drv_kv_t console_headers[] = {
    {"X-Content-Type-Options", "nosniff"},
    {"X-Frame-Options", "DENY"},
    {"Referrer-Policy", "no-referrer"},
    {"Cache-Control", "no-cache"},
    {NULL, NULL},
};

static const drv_console_asset_t *find_asset(const char *name)
{
    for (size_t i = 0; i < drv_console_n_assets; i++)
        if (strcmp(drv_console_assets[i].name, name) == 0)
            return &drv_console_assets[i];
    return NULL;
}

/* Does an If-None-Match header list tag ("*" matches all; W/ prefixes are
 * weak forms of the same tag)? */
static bool etag_listed(const char *inm, const char *tag)
{
    if (!inm)
        return false;
    if (strcmp(inm, "*") == 0)
        return true;
    size_t n = strlen(tag);
    for (const char *p = strstr(inm, tag); p; p = strstr(p + 1, tag)) {
        char after = p[n];
        if (after == '\0' || after == ',' || after == ' ')
            return true;
    }
    return false;
}

static int serve(drv_req_t *req, drv_resp_t *resp, const char *name)
{
    drv_error_t err;
    const drv_console_asset_t *a = find_asset(name);
    if (!a) {
        drv_err(&err, 404, "not_found", "", "the console has no file %.200s", name);
        drv_resp_error(resp, &err);
        resp->headers = console_headers;
        set_csp(req, resp);
        return 0;
    }
    char tag[32];
    snprintf(tag, sizeof tag, "\"%lld\"", (long long)a->etag);
    resp->headers = console_headers;
    set_csp(req, resp);
    resp->etag = a->etag;
    if (etag_listed(drv_req_header(req, "If-None-Match"), tag)) {
        drv_resp_raw(resp, 304, a->content_type, NULL, 0);
        return 0;
    }
    char *body = malloc(a->len ? a->len : 1);
    if (!body) {
        drv_err_internal(&err, "out of memory");
        drv_resp_error(resp, &err);
        return 0;
    }
    memcpy(body, a->data, a->len);
    drv_resp_raw(resp, 200, a->content_type, body, a->len);
    return 0;
}

int drv_h_console_index(drv_req_t *req, drv_resp_t *resp)
{
    return serve(req, resp, "index.html");
}

int drv_h_console_asset(drv_req_t *req, drv_resp_t *resp)
{
    return serve(req, resp, req->params[0]);
}
