/* test_http1.c — src/agent/http1.c, the agent's HTTP/1.1 parsers, on good,
 * malformed, truncated and oversized input: requests (request line,
 * headers, keep-alive rules, percent-decoding, every bound: 431, 414, too
 * many headers, 505, 501), query parameters, responses (Content-Length,
 * chunked with extensions and trailers, until close, HEAD, 204, interim
 * 1xx, bytes after the answer) fed whole and one byte at a time, the
 * streaming mode (head and body callbacks, as the gateway uses it), and a
 * deterministic fuzz: random bytes and mutations of valid messages, fed
 * in random pieces, must give an answer (complete, more, or an error)
 * and never crash (the sanitizer build checks memory), and feeding in
 * pieces must agree with feeding at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/http1.h"

static int parse_req(const char *text, drv_h1_request_t *rq, char *buf, size_t cap, int *status)
{
    size_t n = strlen(text);
    assert_true(n < cap);
    memcpy(buf, text, n + 1);
    const char *why = NULL;
    *status = 0;
    int rc = drv_h1_parse_request(buf, n, rq, status, &why);
    if (rc < 0)
        assert_non_null(why);
    return rc;
}

static void test_request_ok(void **st)
{
    static char buf[DRV_H1_MAX_HEAD * 2];
    drv_h1_request_t rq;
    int status;
    const char *t = "GET /logs/r%2D1?offset=-5&x=%41 HTTP/1.1\r\nHost: a\r\n"
                    "X-Drover-Key:   abc  \r\nConnection: keep-alive\r\n\r\nNEXT";
    int rc = parse_req(t, &rq, buf, sizeof buf, &status);
    assert_int_equal(rc, (int)(strlen(t) - 4));
    assert_string_equal(rq.method, "GET");
    assert_string_equal(rq.path, "/logs/r-1");
    assert_string_equal(rq.query, "offset=-5&x=%41");
    assert_string_equal(drv_h1_header(rq.h, rq.nh, "x-drover-key"), "abc");
    assert_null(drv_h1_header(rq.h, rq.nh, "X-Missing"));
    assert_true(rq.keep_alive);
    assert_int_equal(rq.content_length, -1);
    char v[16];
    assert_int_equal(drv_h1_query_get(rq.query, "offset", v, sizeof v), 1);
    assert_string_equal(v, "-5");
    assert_int_equal(drv_h1_query_get(rq.query, "x", v, sizeof v), 1);
    assert_string_equal(v, "A");
    assert_int_equal(drv_h1_query_get(rq.query, "off", v, sizeof v), 0);
    assert_int_equal(drv_h1_query_get("a=%zz", "a", v, sizeof v), -1);
    assert_int_equal(drv_h1_query_get("a=0123456789abcdefghij", "a", v, sizeof v), -1);
    assert_int_equal(drv_h1_query_get("a", "a", v, sizeof v), 1);
    assert_string_equal(v, "");
    /* keep-alive rules */
    assert_true(parse_req("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", &rq, buf,
                          sizeof buf, &status) > 0);
    assert_false(rq.keep_alive);
    assert_true(parse_req("GET / HTTP/1.0\r\n\r\n", &rq, buf, sizeof buf, &status) > 0);
    assert_false(rq.keep_alive);
    assert_true(parse_req("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &rq, buf,
                          sizeof buf, &status) > 0);
    assert_true(rq.keep_alive);
    assert_true(parse_req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n", &rq, buf,
                          sizeof buf, &status) > 0);
    assert_int_equal(rq.content_length, 12);
    assert_true(parse_req("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", &rq,
                          buf, sizeof buf, &status) > 0);
    assert_true(rq.chunked);
}

static void test_request_incomplete(void **st)
{
    static char buf[256];
    const char *t = "GET /x?y=1 HTTP/1.1\r\nHost: a\r\nA: b\r\n\r\n";
    size_t n = strlen(t);
    for (size_t k = 0; k < n; k++) {
        memcpy(buf, t, k);
        drv_h1_request_t rq;
        int status;
        const char *why;
        assert_int_equal(drv_h1_parse_request(buf, k, &rq, &status, &why), 0);
    }
}

static void test_request_bad(void **st)
{
    static const struct { const char *text; int status; } cases[] = {
        {"get / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        {"GET / HTTP/1.1\nHost: a\r\n\r\n", 400},
        {"GET /\r\n\r\n", 400},
        {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        {"GET x HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
        {"GET / HTTQ/1.1\r\nHost: a\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\n\r\n", 400},                               /* no Host */
        {"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost a\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHo st: a\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\n: a\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
         400},
        {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
        {"GET /a%00b HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        {"GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        {"GET /a% HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        {"GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        {"VERYLONGMETHODNAMEXX / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
    };
    static char buf[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        drv_h1_request_t rq;
        int status;
        int rc = parse_req(cases[i].text, &rq, buf, sizeof buf, &status);
        if (rc != -1 || status != cases[i].status)
            fail_msg("case %zu (%s): rc %d status %d", i, cases[i].text, rc, status);
    }
    /* an obviously bad request line fails before its end arrives */
    drv_h1_request_t rq;
    int status;
    assert_int_equal(parse_req("\x16\x03\x01", &rq, buf, sizeof buf, &status), -1);
}

static void test_request_bounds(void **st)
{
    static char buf[DRV_H1_MAX_HEAD * 3];
    drv_h1_request_t rq;
    int status;
    const char *why;
    /* a head that never ends: 431 once it reaches the bound */
    size_t n = DRV_H1_MAX_HEAD + 10;
    memcpy(buf, "GET / HTTP/1.1\r\nX: ", 19);
    memset(buf + 19, 'a', n - 19);
    assert_int_equal(drv_h1_parse_request(buf, DRV_H1_MAX_HEAD - 1, &rq, &status, &why), 0);
    assert_int_equal(drv_h1_parse_request(buf, n, &rq, &status, &why), -1);
    assert_int_equal(status, 431);
    /* a path longer than the decoded buffer: 414 */
    n = (size_t)snprintf(buf, sizeof buf, "GET /%02000d HTTP/1.1\r\nHost: a\r\n\r\n", 0);
    assert_int_equal(drv_h1_parse_request(buf, n, &rq, &status, &why), -1);
    assert_int_equal(status, 414);
    /* too many header lines */
    n = (size_t)snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 0; i < DRV_H1_MAX_HEADERS; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "H%d: v\r\n", i);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "\r\n");
    assert_int_equal(drv_h1_parse_request(buf, n, &rq, &status, &why), -1);
    assert_int_equal(status, 400);
}

/* --- responses --------------------------------------------------------------- */

/* Feed text whole, and again one byte at a time; both must agree. Returns
 * the result and leaves the byte-wise response in r (caller frees). */
static int feed_both(const char *text, size_t n, size_t max, bool no_body, drv_h1_response_t *r,
                     bool eof)
{
    const char *why;
    drv_h1_response_t *a = calloc(1, sizeof *a);
    assert_non_null(a);
    drv_h1_response_init(a, max, no_body);
    size_t used = 0;
    int ra = drv_h1_response_feed(a, text, n, &used, &why);
    if (ra == 0 && eof)
        ra = drv_h1_response_eof(a, &why);
    drv_h1_response_init(r, max, no_body);
    int rb = 0;
    size_t i = 0;
    for (; i < n && rb == 0; i++) {
        size_t u;
        rb = drv_h1_response_feed(r, text + i, 1, &u, &why);
    }
    if (rb == 0 && eof)
        rb = drv_h1_response_eof(r, &why);
    assert_int_equal(ra, rb);
    assert_int_equal(a->err, r->err);
    if (ra < 0)
        assert_int_not_equal(r->err, DRV_H1_E_NONE);
    else
        assert_int_equal(r->err, DRV_H1_E_NONE);
    if (ra == 1) {
        assert_int_equal(a->status, r->status);
        assert_int_equal(a->len, r->len);
        assert_memory_equal(a->body, r->body, a->len);
        assert_int_equal(a->body[a->len], '\0');
        assert_int_equal(used, i);   /* the same bytes belong to the answer */
    }
    drv_h1_response_free(a);
    free(a);
    return ra;
}

static drv_h1_response_t R;

static int feed(const char *text, size_t max, bool no_body, bool eof)
{
    drv_h1_response_free(&R);
    return feed_both(text, strlen(text), max, no_body, &R, eof);
}

static void test_response_ok(void **st)
{
    assert_int_equal(feed("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA", 100, false,
                          false), 1);
    assert_int_equal(R.status, 200);
    assert_string_equal(R.body, "hello");
    assert_true(R.keep_alive);
    assert_int_equal(feed("HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n"
                          "Trailer: x\r\n\r\n", 100, false, false), 1);
    assert_int_equal(R.status, 201);
    assert_string_equal(R.body, "helloabcdefghijklmnopqrstuvwxyz");
    assert_int_equal(feed("HTTP/1.0 200 OK\r\n\r\nuntil close", 100, false, true), 1);
    assert_string_equal(R.body, "until close");
    assert_false(R.keep_alive);
    assert_int_equal(feed("HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n", 100, true, false), 1);
    assert_int_equal(R.len, 0);
    assert_int_equal(feed("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", 100, false,
                          false), 1);
    assert_false(R.keep_alive);
    assert_int_equal(feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\nContent-Length: 2"
                          "\r\n\r\nno", 100, false, false), 1);
    assert_int_equal(R.status, 503);
    assert_string_equal(R.body, "no");
    assert_int_equal(feed("HTTP/1.1 200 OK\nContent-Length: 1\n\nx", 100, false, false), 1);
    assert_string_equal(R.body, "x");
    /* a stray CRLF before the status line (after an earlier answer) is skipped */
    assert_int_equal(feed("\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\ny", 100, false, false), 1);
    assert_string_equal(R.body, "y");
    /* exactly max is fine */
    assert_int_equal(feed("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd", 4, false, false),
                     1);
    assert_int_equal(R.err, DRV_H1_E_NONE);
}

static void test_response_bad(void **st)
{
    static const struct {
        const char *text;
        size_t max;
        bool eof;
        enum drv_h1_err err;   /* the kind of failure */
    } cases[] = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
         100, true, DRV_H1_E_CLOSED}, /* truncated */
        {"", 100, true, DRV_H1_E_CLOSED}, /* nothing */
        {"HTTP/1.1 200 OK\r\nContent-Le", 100, true, DRV_H1_E_CLOSED}, /* head cut */
        {"HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n",
         100, false, DRV_H1_E_TOO_LARGE}, /* too big */
        {"HTTP/1.0 200 OK\r\n\r\n0123456789", 5, false, DRV_H1_E_TOO_LARGE}, /* too big */
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n",
         100, false, DRV_H1_E_TOO_LARGE},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
         100, false, DRV_H1_E_MALFORMED},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
         100, false, DRV_H1_E_MALFORMED},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
         100, false, DRV_H1_E_MALFORMED},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
         100, false, DRV_H1_E_TOO_LARGE},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n",
         100, true, DRV_H1_E_CLOSED},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 100, false, DRV_H1_E_MALFORMED},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
         100, false, DRV_H1_E_MALFORMED},
        {"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", 100, false, DRV_H1_E_MALFORMED},
        {"HTTP/1.1 2000 OK\r\n\r\n", 100, false, DRV_H1_E_MALFORMED},
        {"HTTP/1.1 099 OK\r\n\r\n", 100, false, DRV_H1_E_MALFORMED},
        {"HTTP/2 200 OK\r\n\r\n", 100, false, DRV_H1_E_MALFORMED},
        {"SSH-2.0-OpenSSH\r\n\r\n", 100, false, DRV_H1_E_MALFORMED},
        {"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n", 100, false, DRV_H1_E_MALFORMED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (feed(cases[i].text, cases[i].max, false, cases[i].eof) != -1)
            fail_msg("case %zu (%s) was accepted", i, cases[i].text);
        if (R.err != cases[i].err)
            fail_msg("case %zu (%s): error kind %d, want %d", i, cases[i].text, (int)R.err,
                     (int)cases[i].err);
    }
    /* a head that never ends */
    static char big[DRV_H1_MAX_HEAD + 100];
    memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
    memset(big + 20, 'a', sizeof big - 21);
    big[sizeof big - 1] = '\0';
    assert_int_equal(feed(big, 100, false, false), -1);
    assert_int_equal(R.err, DRV_H1_E_MALFORMED);
    /* endless trailers */
    static char tr[DRV_H1_MAX_HEAD * 2];
    size_t n = (size_t)snprintf(tr, sizeof tr, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked"
                                               "\r\n\r\n0\r\n");
    while (n + 20 < sizeof tr)
        n += (size_t)snprintf(tr + n, sizeof tr - n, "T: 0123456789abc\r\n");
    assert_int_equal(feed(tr, 100, false, false), -1);
    assert_int_equal(R.err, DRV_H1_E_MALFORMED);
    drv_h1_response_free(&R);
}

/* --- fuzz -------------------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static void mutate(char *b, size_t *n, size_t cap)
{
    static const char alphabet[] = "\r\n :;0123456789abcdefxHTP/%\t\x00\xff-";
    int k = 1 + (int)(rnd() % 4);
    for (int j = 0; j < k && *n; j++) {
        size_t at = rnd() % *n;
        switch (rnd() % 4) {
        case 0: b[at] = alphabet[rnd() % (sizeof alphabet - 1)]; break;
        case 1: *n = at; break;                                          /* truncate */
        case 2: if (*n + 1 < cap) { memmove(b + at + 1, b + at, *n - at); b[at] = '\n'; (*n)++; }
                break;
        default: memmove(b + at, b + at + 1, *n - at - 1); (*n)--; break;
        }
    }
}

static void test_fuzz(void **st)
{
    static const char *reqs[] = {
        "GET /logs/a?offset=-10 HTTP/1.1\r\nHost: x\r\nX-Drover-Key: k\r\n\r\n",
        "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
        "HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    };
    static const char *resps[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n3\r\nabc\r\n0\r\n"
        "T: 1\r\n\r\n",
        "HTTP/1.0 404 Not Found\r\n\r\nbody until close",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    };
    static char b[512];
    for (int iter = 0; iter < 20000; iter++) {
        size_t n;
        if (iter % 10 == 0) {   /* plain random bytes */
            n = rnd() % 200;
            for (size_t i = 0; i < n; i++)
                b[i] = (char)rnd();
        } else {
            const char *src = iter % 2 ? reqs[rnd() % 3] : resps[rnd() % 4];
            n = strlen(src);
            memcpy(b, src, n);
            mutate(b, &n, sizeof b);
        }
        char copy[512];
        memcpy(copy, b, n);
        drv_h1_request_t rq;
        int status;
        const char *why = NULL;
        int rc = drv_h1_parse_request(copy, n, &rq, &status, &why);
        assert_true(rc >= -1 && rc <= (int)n);
        if (rc < 0)
            assert_true(status >= 400 && why);
        drv_h1_response_t *r = calloc(1, sizeof *r);
        assert_non_null(r);
        int rr = feed_both(b, n, 64, false, r, iter % 3 == 0);
        assert_true(rr >= -1 && rr <= 1);
        if (rr == 1)
            assert_true(r->status >= 200 && r->status <= 599 && r->len <= 64);
        drv_h1_response_free(r);
        free(r);
    }
}

/* --- streaming mode ------------------------------------------------------------ */

typedef struct sink {
    int heads, status, abort_after;
    char ctype[64], x[64];
    int64_t clen;
    char body[256];
    size_t len;
} sink_t;

static int sink_head(void *ud, int status, const drv_h1_header_t *h, size_t nh)
{
    sink_t *k = ud;
    k->heads++;
    k->status = status;
    const char *ct = drv_h1_header(h, nh, "content-type"), *x = drv_h1_header(h, nh, "x-a");
    snprintf(k->ctype, sizeof k->ctype, "%s", ct ? ct : "");
    snprintf(k->x, sizeof k->x, "%s", x ? x : "");
    return k->abort_after == 0 ? -1 : 0;
}

static int sink_body(void *ud, const char *p, size_t n)
{
    sink_t *k = ud;
    assert_true(k->len + n < sizeof k->body);
    memcpy(k->body + k->len, p, n);
    k->len += n;
    k->body[k->len] = '\0';
    return k->abort_after > 0 && (int)k->len >= k->abort_after ? -1 : 0;
}

/* Feed text in pieces of step bytes (0: at once) with the callbacks. */
static int feed_sink(const char *text, size_t step, bool eof, sink_t *k, const char **why)
{
    drv_h1_response_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    drv_h1_response_init(r, 4, false);   /* max_body does not bound a stream */
    r->on_head = sink_head;
    r->on_body = sink_body;
    r->ud = k;
    size_t n = strlen(text), i = 0;
    int rc = 0;
    while (i < n && rc == 0) {
        size_t take = step && n - i > step ? step : n - i, used = 0;
        rc = drv_h1_response_feed(r, text + i, take, &used, why);
        i += used;
    }
    if (rc == 0 && eof)
        rc = drv_h1_response_eof(r, why);
    k->clen = r->content_length;
    assert_null(r->body);   /* nothing kept */
    drv_h1_response_free(r);
    free(r);
    return rc;
}

static void test_response_stream(void **st)
{
    (void)st;
    const char *chunked = "HTTP/1.1 100 Continue\r\n\r\n"
                          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-A: b\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n"
                          "6\r\ndata: \r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n";
    for (size_t step = 0; step <= 7; step++) {
        sink_t k = {.abort_after = -1};
        const char *why = NULL;
        assert_int_equal(feed_sink(chunked, step, false, &k, &why), 1);
        assert_int_equal(k.heads, 1);   /* the interim 100 is not a head */
        assert_int_equal(k.status, 200);
        assert_string_equal(k.ctype, "text/event-stream");
        assert_string_equal(k.x, "b");
        assert_int_equal(k.clen, -1);
        assert_string_equal(k.body, "data: abcdefghijklmnopqrstuvwxyz");
    }
    sink_t k = {.abort_after = -1};
    const char *why = NULL;
    assert_int_equal(feed_sink("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world", 3,
                               false, &k, &why), 1);
    assert_int_equal(k.clen, 11);
    assert_string_equal(k.body, "hello world");   /* over max_body: streams are not bounded */
    k = (sink_t){.abort_after = -1};
    assert_int_equal(feed_sink("HTTP/1.0 200 OK\r\n\r\nuntil the close", 2, true, &k, &why), 1);
    assert_string_equal(k.body, "until the close");
    /* the receiver refuses the head, or stops the body */
    k = (sink_t){.abort_after = 0};
    assert_int_equal(feed_sink("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 0, false, &k,
                               &why), -1);
    assert_string_equal(why, "aborted by the receiver");
    assert_int_equal(k.len, 0);
    k = (sink_t){.abort_after = 4};
    assert_int_equal(feed_sink("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabcdefghi", 2, false,
                               &k, &why), -1);
    assert_string_equal(why, "aborted by the receiver");
    /* truncated */
    k = (sink_t){.abort_after = -1};
    assert_int_equal(feed_sink("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", 0, true, &k,
                               &why), -1);
    assert_string_equal(why, "connection closed in the middle of the answer");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_ok),      cmocka_unit_test(test_request_incomplete),
        cmocka_unit_test(test_request_bad),     cmocka_unit_test(test_request_bounds),
        cmocka_unit_test(test_response_ok),     cmocka_unit_test(test_response_bad),
        cmocka_unit_test(test_response_stream), cmocka_unit_test(test_fuzz),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
