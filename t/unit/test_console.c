/* test_console.c — the web console's embedded files and their handler
 * (h_console.c) without HTTP: every file of web/ is in the table with the
 * right content type and its exact bytes; answers carry the CSP and nosniff
 * headers and an ETag; unknown names are a 404 that carries them too; the
 * route table sends / and /ui/NAME to the console and leaves /v1 alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/console_assets.h"
#include "api/handlers.h"

static const char *hdr(const drv_resp_t *r, const char *name)
{
    for (const drv_kv_t *h = r->headers; h && h->key; h++)
        if (strcmp(h->key, name) == 0)
            return h->value;
    return NULL;
}

static void assert_console_headers(const drv_resp_t *r)
{
    const char *csp = r->csp;   /* per answer: connect-src names the heads (api/cors.h) */
    assert_non_null(strstr(csp, "connect-src 'self'"));
    assert_null(hdr(r, "Content-Security-Policy"));
    assert_non_null(strstr(csp, "default-src 'self'"));
    assert_non_null(strstr(csp, "frame-ancestors 'none'"));
    assert_null(strstr(csp, "unsafe-inline"));
    assert_string_equal(hdr(r, "X-Content-Type-Options"), "nosniff");
}

static void serve(const char *name, drv_resp_t *r)
{
    drv_req_t req;
    memset(&req, 0, sizeof req);
    memset(r, 0, sizeof *r);
    req.method = "GET";
    req.params[0] = name;
    req.n_params = 1;
    drv_h_console_asset(&req, r);
}

static void test_every_file_served(void **state)
{
    static const char *const want[] = {"index.html", "app.js", "api.js", "dom.js", "style.css",
                                       "icon.svg", NULL};
    for (const char *const *w = want; *w; w++) {
        bool found = false;
        for (size_t i = 0; i < drv_console_n_assets; i++)
            found |= strcmp(drv_console_assets[i].name, *w) == 0;
        assert_true(found);
    }
    for (size_t i = 0; i < drv_console_n_assets; i++) {
        const drv_console_asset_t *a = &drv_console_assets[i];
        drv_resp_t r;
        serve(a->name, &r);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.len, a->len);
        assert_memory_equal(r.body, a->data, a->len);
        assert_true(r.etag > 0);
        assert_console_headers(&r);
        const char *ext = strrchr(a->name, '.');
        assert_non_null(ext);
        const char *ct = strcmp(ext, ".js") == 0     ? "text/javascript; charset=utf-8"
                         : strcmp(ext, ".css") == 0  ? "text/css; charset=utf-8"
                         : strcmp(ext, ".html") == 0 ? "text/html; charset=utf-8"
                         : strcmp(ext, ".svg") == 0  ? "image/svg+xml"
                                                     : "image/png";
        assert_string_equal(r.content_type, ct);
        drv_resp_free(&r);
    }
}

static void test_index_and_unknown(void **state)
{
    drv_req_t req;
    drv_resp_t r;
    memset(&req, 0, sizeof req);
    memset(&r, 0, sizeof r);
    req.method = "GET";
    drv_h_console_index(&req, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "text/html; charset=utf-8");
    assert_non_null(strstr(r.body, "/ui/app.js"));
    drv_resp_free(&r);

    serve("nope.js", &r);
    assert_int_equal(r.status, 404);
    assert_non_null(strstr(r.body, "not_found"));
    assert_console_headers(&r);
    drv_resp_free(&r);
}

static void test_routes(void **state)
{
    drv_req_t req;
    bool matched;
    memset(&req, 0, sizeof req);
    const drv_route_t *rt = drv_route_match("GET", "/", &req, &matched);
    assert_non_null(rt);
    assert_ptr_equal(rt->handler, drv_h_console_index);
    assert_int_equal(rt->scope, 0);
    rt = drv_route_match("GET", "/ui/app.js", &req, &matched);
    assert_non_null(rt);
    assert_ptr_equal(rt->handler, drv_h_console_asset);
    assert_string_equal(req.params[0], "app.js");
    assert_null(drv_route_match("GET", "/ui/a/b.js", &req, &matched));
    rt = drv_route_match("GET", "/v1/clusters", &req, &matched);
    assert_non_null(rt);
    assert_ptr_not_equal(rt->handler, drv_h_console_asset);
    assert_int_not_equal(rt->scope, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_file_served),
        cmocka_unit_test(test_index_and_unknown),
        cmocka_unit_test(test_routes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
