/* test_httpc.c — the drover CLI's HTTP client (common/httpc.c on
 * common/http_client.c, plain http, no libcurl) against a scripted server
 * on loopback: one connection kept alive across requests (the token,
 * If-Match and User-Agent sent), chunked and Content-Length answers, a
 * kept connection the server closed while idle and one it closed on the
 * next request (sent once more on a fresh connection), a connection closed
 * before any answer on a fresh connection (an error, not resent), a
 * truncated body, an oversized body, a refused port (and the move to the
 * next URL), a standby's 503 naming the leader, a server that never
 * answers (the client's timeout), an error body, and a streamed request
 * body with a streamed answer (drv_httpc_send). Waits are bounded by
 * generous timeouts, never asserted on as speed. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/httpc.h"
#include "loopback.h"

/* --- a scripted server ------------------------------------------------------- */

enum after { KEEP, CLOSE, HANG };

typedef struct step {
    const char *answer;          /* sent once the request is in; NULL: none */
    enum after after;            /* then: wait for the next request, close, or never answer */
} step_t;

#define MAX_REQ 16

typedef struct server {
    int lfd, port;
    const step_t *steps;
    size_t nsteps;
    pthread_t th;
    atomic_bool quit;
    /* what came in (read after server_stop) */
    int conns, nreq;
    char head[MAX_REQ][2048];
    size_t body_len[MAX_REQ];
    uint64_t body_sum[MAX_REQ];  /* sum of byte * (offset + 1) */
} server_t;

/* One request from fd into s (head, body counted). 0, or -1 when the
 * client closed or stayed silent. */
static int read_request(server_t *s, int fd)
{
    char buf[65536];
    size_t n = 0;
    char *end = NULL;
    while (!end) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (n + 1 >= sizeof buf || poll(&pf, 1, 10000) <= 0)
            return -1;
        ssize_t r = recv(fd, buf + n, sizeof buf - n - 1, 0);
        if (r <= 0)
            return -1;
        n += (size_t)r;
        buf[n] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    int k = s->nreq < MAX_REQ ? s->nreq : MAX_REQ - 1;
    size_t hl = (size_t)(end + 4 - buf);
    snprintf(s->head[k], sizeof s->head[k], "%.*s", (int)hl, buf);
    const char *cl = strcasestr(buf, "\r\nContent-Length: ");
    size_t want = cl && cl < end ? (size_t)strtoull(cl + 18, NULL, 10) : 0, got = 0;
    uint64_t sum = 0;
    for (size_t i = hl; i < n && got < want; i++, got++)
        sum += (unsigned char)buf[i] * (got + 1);
    while (got < want) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 10000) <= 0)
            return -1;
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0)
            return -1;
        for (ssize_t i = 0; i < r && got < want; i++, got++)
            sum += (unsigned char)buf[i] * (got + 1);
    }
    s->body_len[k] = got;
    s->body_sum[k] = sum;
    s->nreq++;
    return 0;
}

static void *server_main(void *arg)
{
    server_t *s = arg;
    size_t next = 0;
    while (!atomic_load(&s->quit)) {
        struct pollfd pf = {.fd = s->lfd, .events = POLLIN};
        if (poll(&pf, 1, 50) <= 0)
            continue;
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        s->conns++;
        while (!atomic_load(&s->quit) && read_request(s, fd) == 0) {
            const step_t *st = next < s->nsteps ? &s->steps[next++] : NULL;
            if (st && st->answer) {
                for (size_t off = 0, len = strlen(st->answer); off < len;) {
                    ssize_t w = send(fd, st->answer + off, len - off, MSG_NOSIGNAL);
                    if (w <= 0)
                        break;
                    off += (size_t)w;
                }
            }
            if (st && st->after == HANG)
                while (!atomic_load(&s->quit))
                    usleep(10000);
            if (!st || st->after != KEEP)
                break;
        }
        close(fd);
    }
    return NULL;
}

static void server_start(server_t *s, const step_t *steps, size_t n)
{
    memset(s, 0, sizeof *s);
    s->steps = steps;
    s->nsteps = n;
    s->lfd = bound_socket(&s->port);
    assert_int_equal(listen(s->lfd, 16), 0);
    assert_int_equal(pthread_create(&s->th, NULL, server_main, s), 0);
}

static void server_stop(server_t *s)
{
    atomic_store(&s->quit, true);
    pthread_join(s->th, NULL);
    close(s->lfd);
}

static drv_httpc_t *client_to(const server_t *s, const char *token)
{
    char url[64];
    drv_error_t err;
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s->port);
    drv_httpc_t *c = drv_httpc_create(url, token, &err);
    assert_non_null(c);
    return c;
}

#define OK_JSON(body) "HTTP/1.1 200 OK\r\nContent-Length: " #body "\r\n\r\n"

/* --- the tests --------------------------------------------------------------- */

/* Two requests, one connection: Content-Length, then chunked; the headers. */
static void test_keepalive(void **st)
{
    static const step_t steps[] = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}", KEEP},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"b\r\n4\r\n\":2}\r\n0\r\n\r\n",
         KEEP},
    };
    server_t s;
    server_start(&s, steps, 2);
    drv_httpc_t *c = client_to(&s, "tok");
    drv_error_t err = {0};
    long status = 0;
    json_t *one = drv_httpc_json(c, "GET", "/v1/x", NULL, NULL, &status, &err);
    assert_non_null(one);
    assert_int_equal(status, 200);
    assert_int_equal(json_integer_value(json_object_get(one, "a")), 1);
    json_t *body = json_pack("{s:s}", "k", "v");
    json_t *two = drv_httpc_json(c, "PUT", "/v1/y", body, "\"7\"", &status, &err);
    assert_non_null(two);
    assert_int_equal(json_integer_value(json_object_get(two, "b")), 2);
    json_decref(one);
    json_decref(two);
    json_decref(body);
    drv_httpc_destroy(c);
    server_stop(&s);
    assert_int_equal(s.conns, 1);
    assert_int_equal(s.nreq, 2);
    assert_non_null(strstr(s.head[0], "GET /v1/x HTTP/1.1\r\n"));
    assert_non_null(strstr(s.head[0], "Authorization: Bearer tok\r\n"));
    assert_non_null(strstr(s.head[0], "User-Agent: drover-cli\r\n"));
    assert_null(strstr(s.head[0], "Connection: close"));
    assert_non_null(strstr(s.head[1], "PUT /v1/y HTTP/1.1\r\n"));
    assert_non_null(strstr(s.head[1], "If-Match: \"7\"\r\n"));
    assert_non_null(strstr(s.head[1], "Content-Type: application/json\r\n"));
    assert_int_equal(s.body_len[1], strlen("{\"k\":\"v\"}"));
}

/* The server closes an idle kept connection: the next request takes a
 * fresh one. It closes one on the next request without answering: that
 * request goes once more on a fresh connection. */
static void test_stale(void **st)
{
    static const step_t steps[] = {
        {OK_JSON(1) "1", CLOSE},     /* answered, then closed while idle */
        {OK_JSON(1) "2", KEEP},
        {NULL, CLOSE},               /* read, not answered: the connection goes */
        {OK_JSON(1) "3", KEEP},
    };
    server_t s;
    server_start(&s, steps, 4);
    drv_httpc_t *c = client_to(&s, NULL);
    drv_error_t err = {0};
    for (int i = 1; i <= 3; i++) {
        json_t *v = drv_httpc_json(c, "GET", "/v1/n", NULL, NULL, NULL, &err);
        if (!v)
            fail_msg("request %d: %s", i, err.message);
        assert_int_equal(json_integer_value(v), i);
        json_decref(v);
    }
    drv_httpc_destroy(c);
    server_stop(&s);
    assert_int_equal(s.conns, 3);
    assert_int_equal(s.nreq, 4);
    assert_null(strstr(s.head[0], "Authorization:"));
}

/* Failures on a fresh connection: no answer, a truncated body, an
 * oversized one, none within the client's timeout. Each is -1 with the
 * CLI's message, and nothing is sent twice. */
static void test_failures(void **st)
{
    static const struct {
        step_t step;
        long timeout_s;
        const char *want;
    } cases[] = {
        {{NULL, CLOSE}, 0, "closed"},
        {{"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort", CLOSE}, 0, "closed in the middle"},
        {{"HTTP/1.1 200 OK\r\nContent-Length: 300000000\r\n\r\n", CLOSE}, 0,
         "is larger than 256 MiB"},
        {{"garbage\r\n\r\n", CLOSE}, 0, "bad answer"},
        {{NULL, HANG}, 1, "timed out"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        server_t s;
        server_start(&s, &cases[i].step, 1);
        drv_httpc_t *c = client_to(&s, NULL);
        if (cases[i].timeout_s)
            drv_httpc_set_timeout(c, cases[i].timeout_s);
        drv_error_t err = {0};
        drv_http_resp_t r = {0};
        int rc = drv_httpc_request(c, "POST", "/v1/p", NULL, NULL, &r, &err);
        char want[64];
        snprintf(want, sizeof want, "cannot reach droverd at http://127.0.0.1:%d", s.port);
        drv_httpc_destroy(c);
        server_stop(&s);
        if (rc != -1)
            fail_msg("case %zu: answered %ld", i, r.status);
        assert_null(r.body);
        if (!strstr(err.message, cases[i].want) ||
            (!strstr(cases[i].want, "larger") && !strstr(err.message, want)))
            fail_msg("case %zu: %s", i, err.message);
        assert_int_equal(err.status, 0);
        assert_string_equal(err.code, "unavailable");
        assert_int_equal(s.nreq, 1);
    }
}

/* A refused port, then a standby naming the leader: the client moves on. */
static void test_failover(void **st)
{
    static const step_t leader_steps[] = {{OK_JSON(2) "42", KEEP}};
    server_t leader, standby;
    server_start(&leader, leader_steps, 1);
    char standby_answer[300];
    snprintf(standby_answer, sizeof standby_answer,
             "HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n"
             "{\"error\":{\"code\":\"not_leader\",\"message\":\"standby\"},"
             "\"leader\":\"http://127.0.0.1:%05d\"}",
             (int)strlen("{\"error\":{\"code\":\"not_leader\",\"message\":\"standby\"},"
                         "\"leader\":\"http://127.0.0.1:00000\"}"),
             leader.port);
    step_t standby_steps[] = {{standby_answer, KEEP}};
    server_start(&standby, standby_steps, 1);
    int dead_port;
    int dead = bound_socket(&dead_port);   /* bound, not listening: refused */
    char urls[200], leader_url[64];
    snprintf(urls, sizeof urls, "http://127.0.0.1:%d,http://127.0.0.1:%d", dead_port,
             standby.port);
    snprintf(leader_url, sizeof leader_url, "http://127.0.0.1:%05d", leader.port);
    drv_error_t err = {0};
    drv_httpc_t *c = drv_httpc_create(urls, NULL, &err);
    assert_non_null(c);
    json_t *v = drv_httpc_json(c, "POST", "/v1/w", NULL, NULL, NULL, &err);
    if (!v)
        fail_msg("%s", err.message);
    assert_int_equal(json_integer_value(v), 42);
    assert_string_equal(drv_httpc_base_url(c), leader_url);
    json_decref(v);
    drv_httpc_destroy(c);
    server_stop(&leader);
    server_stop(&standby);

    /* one URL, refused: the CLI's message, no waiting round */
    char one[64];
    snprintf(one, sizeof one, "http://127.0.0.1:%d", dead_port);
    c = drv_httpc_create(one, NULL, &err);
    drv_http_resp_t r;
    assert_int_equal(drv_httpc_request(c, "GET", "/v1/x", NULL, NULL, &r, &err), -1);
    char want[100];
    snprintf(want, sizeof want, "cannot reach droverd at %s: cannot connect", one);
    if (!strstr(err.message, want))
        fail_msg("%s", err.message);
    drv_httpc_destroy(c);
    close(dead);
}

/* A non-2xx answer: err from the server's error object, status set. */
static void test_error_body(void **st)
{
    static const char body[] =
        "{\"error\":{\"code\":\"not_found\",\"message\":\"no such thing\",\"field\":\"name\"}}";
    char answer[300];
    snprintf(answer, sizeof answer, "HTTP/1.1 404 Not Found\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    step_t steps[] = {{answer, KEEP}};
    server_t s;
    server_start(&s, steps, 1);
    drv_httpc_t *c = client_to(&s, NULL);
    drv_error_t err = {0};
    long status = 0;
    assert_null(drv_httpc_json(c, "DELETE", "/v1/z", NULL, NULL, &status, &err));
    assert_int_equal(status, 404);
    assert_int_equal(err.status, 404);
    assert_string_equal(err.message, "no such thing");
    assert_string_equal(err.field, "name");
    drv_httpc_destroy(c);
    server_stop(&s);
}

/* --- drv_httpc_send: a streamed body and a streamed answer ------------------- */

#define STREAM_LEN 300000

typedef struct stream {
    int status;
    char got[256];
    size_t n;
    int reads;
} stream_t;

static long pattern(void *ud, uint64_t off, char *buf, size_t n)
{
    stream_t *s = ud;
    s->reads++;
    if (n > 10000)
        n = 10000;   /* in pieces */
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)('a' + (off + i) % 26);
    return (long)n;
}

static int head_cb(void *ud, int status, const drv_h1_header_t *h, size_t nh)
{
    stream_t *s = ud;
    s->status = status;
    assert_string_equal(drv_h1_header(h, nh, "ETag"), "\"e1\"");
    return 0;
}

static int body_cb(void *ud, const char *p, size_t n)
{
    stream_t *s = ud;
    assert_true(s->n + n < sizeof s->got);
    memcpy(s->got + s->n, p, n);
    s->n += n;
    s->got[s->n] = '\0';
    return 0;
}

static void test_stream(void **st)
{
    static const step_t steps[] = {
        {"HTTP/1.1 201 Created\r\nETag: \"e1\"\r\nTransfer-Encoding: chunked\r\n\r\n"
         "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", KEEP},
        {"HTTP/1.1 201 Created\r\nETag: \"e1\"\r\nContent-Length: 2\r\n\r\nok", KEEP},
    };
    server_t s;
    server_start(&s, steps, 2);
    drv_httpc_t *c = client_to(&s, "t2");
    for (int i = 0; i < 2; i++) {
        stream_t x = {0};
        drv_hc_req_t rq = {.method = "PUT", .path = "/v1/chunk",
                           .content_type = "application/octet-stream", .body_len = STREAM_LEN,
                           .read_body = pattern, .on_head = head_cb, .on_body = body_cb,
                           .ud = &x};
        drv_hc_resp_t resp;
        drv_error_t err = {0};
        if (drv_httpc_send(c, &rq, &resp, &err) < 0)
            fail_msg("send %d: %s", i, err.message);
        assert_int_equal(resp.status, 201);
        assert_null(resp.body);
        assert_int_equal(x.status, 201);
        assert_string_equal(x.got, i == 0 ? "hello world" : "ok");
        assert_true(x.reads >= STREAM_LEN / 10000);
    }
    drv_httpc_destroy(c);
    server_stop(&s);
    uint64_t want = 0;
    for (uint64_t i = 0; i < STREAM_LEN; i++)
        want += (uint64_t)('a' + i % 26) * (i + 1);
    assert_int_equal(s.conns, 1);
    assert_int_equal(s.nreq, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(s.body_len[i], STREAM_LEN);
        assert_true(s.body_sum[i] == want);
        assert_non_null(strstr(s.head[i], "Authorization: Bearer t2\r\n"));
        assert_non_null(strstr(s.head[i], "Content-Length: 300000\r\n"));
    }
}

/* drv_hc_split_url: origin and rest of an absolute URL. */
static void test_split(void **st)
{
    char base[64];
    const char *path;
    assert_int_equal(drv_hc_split_url("https://s3.test:9000/b/k?X-Amz=1", base, sizeof base,
                                      &path), 0);
    assert_string_equal(base, "https://s3.test:9000");
    assert_string_equal(path, "/b/k?X-Amz=1");
    assert_int_equal(drv_hc_split_url("http://h", base, sizeof base, &path), 0);
    assert_string_equal(base, "http://h");
    assert_string_equal(path, "/");
    assert_int_equal(drv_hc_split_url("ftp://h/x", base, sizeof base, &path), -1);
    assert_int_equal(drv_hc_split_url("http:///x", base, sizeof base, &path), -1);
    assert_int_equal(drv_hc_split_url("http://h?q", base, sizeof base, &path), -1);
    assert_int_equal(drv_hc_split_url("http://a-very-long-host-name.example/x", base, 8, &path),
                     -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keepalive), cmocka_unit_test(test_stale),
        cmocka_unit_test(test_failures),  cmocka_unit_test(test_failover),
        cmocka_unit_test(test_error_body), cmocka_unit_test(test_stream),
        cmocka_unit_test(test_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
