/* test_agent_http.c — the agent's HTTP over real loopback sockets:
 *  - httpd.c: answers, keep-alive with pipelined requests, HEAD, percent-
 *    decoded paths, malformed requests (400 and close), an oversized head
 *    (431), a request body (413), a peer that sends one byte at a time, one
 *    that vanishes mid-request, more connections than DRV_HTTPD_MAX_CONNS;
 *    out of descriptors (accept failing with EMFILE) without spinning, and
 *    serving again once descriptors are free;
 *  - http_client.c against a canned server (one answer per connection):
 *    Content-Length, chunked, until close, a truncated answer, garbage, an
 *    oversized body, a server that never answers (timeout), the stop flag,
 *    connection refused, malformed URLs;
 *  - resolver.c (the client's name lookups) through a test double of
 *    getaddrinfo: cached answers, a new lookup after a refused connection,
 *    address literals never looked up, a lookup that hangs ended by the
 *    request's deadline and by the stop flag, then its late answer used;
 *  - health.c probes against the same canned server.
 * Waits are bounded by generous timeouts, never asserted on as speed. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/health.h"
#include "common/http_client.h"
#include "agent/httpd.h"
#include "common/util.h"
#include "loopback.h"

/* --- a raw client ------------------------------------------------------------ */

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void put(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        s += w, n -= (size_t)w;
    }
}

/* Everything until the server closes (or 20 s pass): malloc'd. */
static char *read_all(int fd)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (n + 1 == cap)
            b = realloc(b, cap *= 2);
        ssize_t r = recv(fd, b + n, cap - n - 1, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    b[n] = '\0';
    return b;
}

static int count(const char *hay, const char *needle)
{
    int c = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        c++;
    return c;
}

/* --- httpd ------------------------------------------------------------------- */

static void handler(void *ud, const drv_h1_request_t *rq, drv_httpd_reply_t *out)
{
    atomic_int *calls = ud;
    atomic_fetch_add(calls, 1);
    char text[1200];
    char q[64] = "";
    drv_h1_query_get(rq->query, "q", q, sizeof q);
    snprintf(text, sizeof text, "%s %s q=%s\n", rq->method, rq->path, q);
    drv_httpd_text(out, strcmp(rq->path, "/missing") == 0 ? 404 : 200, text);
    snprintf(out->headers, sizeof out->headers, "X-Test: 1\r\n");
}

static void test_httpd(void **st)
{
    atomic_int calls = 0;
    drv_error_t err;
    drv_httpd_t *d = drv_httpd_create("127.0.0.1", 0, handler, &calls, &err);
    assert_non_null(d);
    int port = drv_httpd_port(d);
    assert_true(port > 0);

    /* two pipelined requests on one connection, then one that closes */
    int fd = dial(port);
    const char *two = "GET /a%20b?q=1 HTTP/1.1\r\nHost: x\r\n\r\n"
                      "HEAD /missing HTTP/1.1\r\nHost: x\r\n\r\n"
                      "GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    put(fd, two, strlen(two));
    char *all = read_all(fd);
    assert_non_null(strstr(all, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(all, "GET /a b q=1\n"));
    assert_non_null(strstr(all, "HTTP/1.1 404 Not Found\r\n"));
    assert_null(strstr(all, "HEAD /missing"));          /* HEAD: no body */
    assert_non_null(strstr(all, "GET /last q=\n"));
    assert_int_equal(count(all, "X-Test: 1\r\n"), 3);
    assert_int_equal(count(all, "Connection: close\r\n"), 1);
    free(all);
    close(fd);

    /* one byte at a time */
    fd = dial(port);
    const char *slow = "GET /slow HTTP/1.0\r\n\r\n";
    for (const char *p = slow; *p; p++) {
        put(fd, p, 1);
        usleep(1000);
    }
    all = read_all(fd);
    assert_non_null(strstr(all, "GET /slow q=\n"));
    free(all);
    close(fd);

    /* malformed, oversized, with a body: an error and the connection closed */
    static const struct { const char *req; const char *want; } bad[] = {
        {"BLAH\r\n\r\n", "HTTP/1.1 400 "},
        {"GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 400 "},
        {"GET / HTTP/3.0\r\nHost: x\r\n\r\n", "HTTP/1.1 505 "},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody", "HTTP/1.1 413 "},
        {"\x16\x03\x01\x02\x00", "HTTP/1.1 400 "},
    };
    int before = atomic_load(&calls);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fd = dial(port);
        put(fd, bad[i].req, strlen(bad[i].req));
        all = read_all(fd);   /* returns: the server closed */
        if (strncmp(all, bad[i].want, strlen(bad[i].want)) != 0)
            fail_msg("case %zu: got \"%.60s\"", i, all);
        assert_non_null(strstr(all, "Connection: close\r\n"));
        free(all);
        close(fd);
    }
    assert_int_equal(atomic_load(&calls), before);   /* the handler never saw them */
    fd = dial(port);
    size_t big = DRV_H1_MAX_HEAD + 100;
    char *huge = malloc(big);
    memcpy(huge, "GET / HTTP/1.1\r\nX: ", 19);
    memset(huge + 19, 'a', big - 19);
    put(fd, huge, big);
    free(huge);
    all = read_all(fd);
    assert_non_null(strstr(all, "HTTP/1.1 431 "));
    free(all);
    close(fd);

    /* a peer that goes away mid-request, and more peers than the table holds */
    fd = dial(port);
    put(fd, "GET /half", 9);
    close(fd);
    int fds[DRV_HTTPD_MAX_CONNS + 8];
    for (int i = 0; i < DRV_HTTPD_MAX_CONNS + 8; i++)
        fds[i] = dial(port);
    for (int i = 0; i < DRV_HTTPD_MAX_CONNS + 8; i++)
        close(fds[i]);
    /* still serving */
    fd = dial(port);
    put(fd, "GET /after HTTP/1.0\r\n\r\n", 23);
    all = read_all(fd);
    assert_non_null(strstr(all, "GET /after q=\n"));
    free(all);
    close(fd);
    drv_httpd_destroy(d);
    drv_httpd_destroy(NULL);
}

/* Out of descriptors, in a child process (its descriptor limit is lowered):
 * accept fails while the listener stays readable; the server must neither
 * spin on it nor die, and must serve the waiting peer once descriptors are
 * free. Returns 0, or the number of the step that failed. */
static int emfile_child(void)
{
    atomic_int calls = 0;
    drv_error_t err;
    drv_httpd_t *d = drv_httpd_create("127.0.0.1", 0, handler, &calls, &err);
    if (!d)
        return 10;
    int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct rlimit rl;
    if (cfd < 0 || getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 11;
    if (rl.rlim_cur > 256)
        rl.rlim_cur = 256;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 11;
    static int spare[256];
    size_t ns = 0;
    for (int f; ns < 256 && (f = dup(cfd)) >= 0;)
        spare[ns++] = f;
    if (ns == 0 || ns == 256 || errno != EMFILE)
        return 12;
    /* the kernel completes the handshake; the server cannot accept it */
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)drv_httpd_port(d)),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(cfd, (struct sockaddr *)&sa, sizeof sa) < 0)
        return 13;
    struct timeval tv = {.tv_sec = 20};
    setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    put(cfd, "GET /back HTTP/1.0\r\n\r\n", 23);
    /* paused ACCEPT_PAUSE_MS (100 ms) at a time, the loop wakes about twice
     * per pause (its end, the failed accept); spinning, it would wake
     * millions of times. A slow machine only makes fewer wake-ups. */
    unsigned long w0 = drv_httpd_wakes(d);
    int64_t t0 = drv_mono_ms();
    usleep(500 * 1000);
    unsigned long wakes = drv_httpd_wakes(d) - w0;
    int64_t el = drv_mono_ms() - t0;
    if (wakes > (unsigned long)(4 * (el / 100) + 20)) {
        fprintf(stderr, "%lu wake-ups in %lld ms out of descriptors\n", wakes, (long long)el);
        return 14;
    }
    /* descriptors free again: the peer that waited is served */
    while (ns)
        close(spare[--ns]);
    char *all = read_all(cfd);
    int rc = strstr(all, "GET /back q=\n") ? 0 : 15;
    free(all);
    close(cfd);
    drv_httpd_destroy(d);
    return rc;
}

static void test_httpd_emfile(void **st)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(emfile_child());
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status))
        fail_msg("out of descriptors: step %d failed", WEXITSTATUS(status));
}

/* --- a canned server: each connection gets the next canned answer ------------ */

typedef struct canned {
    int lfd, port;
    const char *answer;          /* NULL: read the request and never answer */
    char request[4096];          /* the last request head received */
    pthread_t th;
    atomic_bool quit;
} canned_t;

static void *canned_main(void *arg)
{
    canned_t *c = arg;
    while (!atomic_load(&c->quit)) {
        struct pollfd pf = {.fd = c->lfd, .events = POLLIN};
        if (poll(&pf, 1, 50) <= 0)
            continue;
        int fd = accept4(c->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        size_t n = 0;
        while (n + 1 < sizeof c->request) {
            struct pollfd p2 = {.fd = fd, .events = POLLIN};
            if (poll(&p2, 1, 5000) <= 0)
                break;
            ssize_t r = recv(fd, c->request + n, sizeof c->request - n - 1, 0);
            if (r <= 0)
                break;
            n += (size_t)r;
            c->request[n] = '\0';
            char *e = strstr(c->request, "\r\n\r\n");
            const char *cl = strcasestr(c->request, "Content-Length: ");
            if (e && (!cl || strlen(e + 4) >= (size_t)atoi(cl + 16)))
                break;
        }
        if (c->answer) {
            put(fd, c->answer, strlen(c->answer));
        } else {
            while (!atomic_load(&c->quit))
                usleep(10000);
        }
        close(fd);
    }
    return NULL;
}


/* Serve canned answers on lfd, a bound socket (it becomes c's). */
static void canned_start_on(canned_t *c, const char *answer, int lfd)
{
    memset(c, 0, sizeof *c);
    c->answer = answer;
    c->lfd = lfd;
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    assert_int_equal(listen(c->lfd, 16), 0);
    getsockname(c->lfd, (struct sockaddr *)&sa, &sl);
    c->port = ntohs(sa.sin_port);
    assert_int_equal(pthread_create(&c->th, NULL, canned_main, c), 0);
}

static void canned_start(canned_t *c, const char *answer)
{
    int port;
    canned_start_on(c, answer, bound_socket(&port));
}

static void canned_stop(canned_t *c)
{
    atomic_store(&c->quit, true);
    pthread_join(c->th, NULL);
    close(c->lfd);
}

static atomic_bool never = false;

/* One POST through drv_hc to a canned answer: 0/-1, resp and err filled. */
static int ask(const char *answer, long timeout_ms, const atomic_bool *stop, drv_hc_resp_t *resp,
               drv_error_t *err, char *request_seen, size_t rl)
{
    canned_t c;
    canned_start(&c, answer);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", c.port);
    drv_hc_t *hc = drv_hc_create(url, err);
    assert_non_null(hc);
    drv_hc_req_t rq = {.method = "POST", .path = "/v1/agent/sync", .bearer = "secret",
                       .content_type = "application/json", .body = "{\"a\":1}", .body_len = 7,
                       .timeout_ms = timeout_ms, .connect_timeout_ms = 3000,
                       .stop = stop ? stop : &never};
    int rc = drv_hc_request(hc, &rq, resp, err);
    drv_hc_destroy(hc);
    canned_stop(&c);
    if (request_seen)
        snprintf(request_seen, rl, "%s", c.request);
    return rc;
}

static void test_client(void **st)
{
    drv_hc_resp_t r;
    drv_error_t err;
    char seen[4096];
    assert_int_equal(ask("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"v\":2}", 20000, NULL, &r,
                         &err, seen, sizeof seen), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"v\":2}");
    drv_hc_resp_free(&r);
    assert_non_null(strstr(seen, "POST /v1/agent/sync HTTP/1.1\r\n"));
    assert_non_null(strstr(seen, "Authorization: Bearer secret\r\n"));
    assert_non_null(strstr(seen, "Content-Length: 7\r\n"));
    assert_non_null(strstr(seen, "\r\n\r\n{\"a\":1}"));

    assert_int_equal(ask("HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", 20000, NULL, &r, &err, NULL, 0), 0);
    assert_int_equal(r.status, 409);
    assert_string_equal(r.body, "abcde");
    drv_hc_resp_free(&r);
    assert_int_equal(ask("HTTP/1.0 200 OK\r\n\r\nto the end", 20000, NULL, &r, &err, NULL, 0), 0);
    assert_string_equal(r.body, "to the end");
    drv_hc_resp_free(&r);

    /* no usable answer: -1, a message, nothing allocated */
    assert_int_equal(ask("HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort", 20000, NULL, &r,
                         &err, NULL, 0), -1);
    assert_non_null(strstr(err.message, "closed in the middle"));
    assert_null(r.body);
    assert_int_equal(ask("garbage\r\n\r\n", 20000, NULL, &r, &err, NULL, 0), -1);
    assert_non_null(strstr(err.message, "bad answer"));
    assert_int_equal(ask("HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n", 20000, NULL,
                         &r, &err, NULL, 0), -1);
    assert_non_null(strstr(err.message, "too large"));
    assert_int_equal(ask(NULL, 300, NULL, &r, &err, NULL, 0), -1);   /* never answers */
    assert_non_null(strstr(err.message, "timed out"));
    atomic_bool stop = true;
    assert_int_equal(ask(NULL, 60000, &stop, &r, &err, NULL, 0), -1);
    assert_non_null(strstr(err.message, "stopped"));

    /* refused: a port nothing listens on (bound, not listening) */
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    bind(s, (struct sockaddr *)&sa, sizeof sa);
    getsockname(s, (struct sockaddr *)&sa, &sl);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(sa.sin_port));
    drv_hc_t *hc = drv_hc_create(url, &err);
    assert_non_null(hc);
    drv_hc_req_t rq = {.method = "POST", .path = "/x", .timeout_ms = 5000,
                       .connect_timeout_ms = 3000};
    assert_int_equal(drv_hc_request(hc, &rq, &r, &err), -1);
    assert_non_null(strstr(err.message, "cannot connect"));
    rq.path = "/bad path";
    assert_int_equal(drv_hc_request(hc, &rq, &r, &err), -1);
    drv_hc_destroy(hc);
    close(s);

    /* requests that would not be one HTTP message (CR/LF would smuggle a
     * header or a second request): refused before connecting, over http
     * and https alike, and the listener never sees a connection */
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    sl = sizeof sa;
    assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(l, 16), 0);
    getsockname(l, (struct sockaddr *)&sa, &sl);
    static const drv_hc_req_t smuggle[] = {
        {.method = "GET", .path = "/a\r\nX-Evil: 1"},
        {.method = "GET", .path = "/a\nb"},
        {.method = "GET", .path = "/a b"},
        {.method = "GET", .path = "no-slash"},
        {.method = "GET\r\nX: 1", .path = "/a"},
        {.method = "G T", .path = "/a"},
        {.method = "", .path = "/a"},
        {.method = "POST", .path = "/a", .bearer = "tok\r\nX-Evil: 1"},
        {.method = "POST", .path = "/a", .bearer = "tok\n"},
        {.method = "POST", .path = "/a", .content_type = "application/json\r\n\r\nGET /x"},
    };
    for (int tls = 0; tls < 2; tls++) {
        snprintf(url, sizeof url, "%s://127.0.0.1:%d", tls ? "https" : "http",
                 ntohs(sa.sin_port));
        hc = drv_hc_create(url, &err);
        assert_non_null(hc);
        for (size_t i = 0; i < sizeof smuggle / sizeof smuggle[0]; i++) {
            drv_hc_req_t q = smuggle[i];
            q.timeout_ms = 5000;
            q.connect_timeout_ms = 3000;
            if (drv_hc_request(hc, &q, &r, &err) != -1)
                fail_msg("request %zu was sent", i);
            if (!strstr(err.message, "refused before sending"))
                fail_msg("request %zu: %s", i, err.message);
            assert_null(r.body);
            int got = accept4(l, NULL, NULL, SOCK_CLOEXEC);
            if (got >= 0)
                fail_msg("request %zu (%s): a connection was made", i, tls ? "https" : "http");
            assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
        }
        drv_hc_destroy(hc);
    }
    close(l);

    static const char *bad_urls[] = {"ftp://x", "http://", "http://host:0", "http://host:99999",
                                     "http://host:12ab", "http://host/p?q", "http://[::1",
                                     "127.0.0.1:80"};
    for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++)
        if (drv_hc_create(bad_urls[i], &err))
            fail_msg("%s was accepted", bad_urls[i]);
    hc = drv_hc_create("http://[::1]:7480/", &err);
    assert_non_null(hc);
    drv_hc_destroy(hc);
    /* a path prefix goes before every request path */
    canned_t c;
    canned_start(&c, "HTTP/1.1 204 No Content\r\n\r\n");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/drover//", c.port);
    hc = drv_hc_create(url, &err);
    assert_non_null(hc);
    rq.path = "/v1/x";
    assert_int_equal(drv_hc_request(hc, &rq, &r, &err), 0);
    assert_int_equal(r.status, 204);
    drv_hc_resp_free(&r);
    drv_hc_destroy(hc);
    canned_stop(&c);
    assert_non_null(strstr(c.request, "POST /drover/v1/x HTTP/1.1\r\n"));
    drv_hc_destroy(NULL);
}

/* --- name lookups (resolver.c) through a test double of getaddrinfo ---------- */

/* Names under .drover.test resolve to 127.0.0.1, counted, and block while
 * gai_hang is set (a DNS server that does not answer); every other call
 * goes to the real getaddrinfo. This definition in the test program
 * takes the place of libc's for the code linked into it. */
static int (*real_gai)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
static pthread_mutex_t gai_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gai_cv = PTHREAD_COND_INITIALIZER;
static int gai_lookups;
static bool gai_hang;

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    size_t nl = node ? strlen(node) : 0;
    if (nl < 12 || strcmp(node + nl - 12, ".drover.test") != 0)
        return real_gai(node, service, hints, res);
    if (hints && (hints->ai_flags & AI_NUMERICHOST))
        return EAI_NONAME;
    pthread_mutex_lock(&gai_mu);
    gai_lookups++;
    while (gai_hang)
        pthread_cond_wait(&gai_cv, &gai_mu);
    pthread_mutex_unlock(&gai_mu);
    return real_gai("127.0.0.1", service, hints, res);
}

static int lookups(void)
{
    pthread_mutex_lock(&gai_mu);
    int n = gai_lookups;
    pthread_mutex_unlock(&gai_mu);
    return n;
}

static void set_hang(bool on)
{
    pthread_mutex_lock(&gai_mu);
    gai_hang = on;
    pthread_cond_broadcast(&gai_cv);
    pthread_mutex_unlock(&gai_mu);
}

static void *stop_soon(void *arg)
{
    usleep(100 * 1000);
    atomic_store((atomic_bool *)arg, true);
    return NULL;
}

static void test_resolve(void **st)
{
    drv_hc_resp_t r;
    drv_error_t err;
    char url[128];
    int port;
    int fd = bound_socket(&port);   /* refuses until it listens */
    snprintf(url, sizeof url, "http://head.drover.test:%d", port);
    drv_hc_t *hc = drv_hc_create(url, &err);
    assert_non_null(hc);
    assert_int_equal(lookups(), 0);   /* a name: looked up at the first request */
    drv_hc_req_t rq = {.method = "GET", .path = "/v1/x", .timeout_ms = 20000,
                       .connect_timeout_ms = 3000, .stop = &never};

    /* a refused connection makes the next request look the name up again */
    assert_int_equal(drv_hc_request(hc, &rq, &r, &err), -1);
    assert_non_null(strstr(err.message, "cannot connect"));
    assert_int_equal(lookups(), 1);
    assert_int_equal(drv_hc_request(hc, &rq, &r, &err), -1);
    assert_int_equal(lookups(), 2);
    /* answered: the addresses are kept (DRV_RESOLVER_TTL_MS) */
    canned_t c;
    canned_start_on(&c, "HTTP/1.1 204 No Content\r\n\r\n", fd);
    for (int i = 0; i < 3; i++) {
        if (drv_hc_request(hc, &rq, &r, &err) != 0)
            fail_msg("request %d: %s", i, err.message);
        assert_int_equal(r.status, 204);
        drv_hc_resp_free(&r);
    }
    assert_int_equal(lookups(), 3);
    assert_non_null(strstr(c.request, "Host: head.drover.test:"));
    drv_hc_destroy(hc);

    /* an address literal is never looked up */
    snprintf(url, sizeof url, "http://127.0.0.1:%d", c.port);
    hc = drv_hc_create(url, &err);
    assert_non_null(hc);
    assert_int_equal(drv_hc_request(hc, &rq, &r, &err), 0);
    drv_hc_resp_free(&r);
    drv_hc_destroy(hc);
    assert_int_equal(lookups(), 3);

    /* a lookup that does not answer: the request's deadline and the stop
     * flag end the wait, and later requests wait on the same lookup */
    set_hang(true);
    snprintf(url, sizeof url, "http://slow.drover.test:%d/", c.port);
    hc = drv_hc_create(url, &err);
    assert_non_null(hc);
    rq.timeout_ms = 300;
    assert_int_equal(drv_hc_request(hc, &rq, &r, &err), -1);
    assert_string_equal(err.message, "cannot resolve slow.drover.test: timed out");
    atomic_bool stop = false;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stop_soon, &stop), 0);
    rq.timeout_ms = 600000;
    rq.stop = &stop;
    assert_int_equal(drv_hc_request(hc, &rq, &r, &err), -1);
    assert_string_equal(err.message, "cannot resolve slow.drover.test: stopped");
    pthread_join(th, NULL);
    assert_int_equal(lookups(), 4);   /* one lookup, still pending */
    /* once it answers, the next request uses its answer */
    set_hang(false);
    rq.timeout_ms = 20000;
    rq.stop = &never;
    assert_int_equal(drv_hc_request(hc, &rq, &r, &err), 0);
    assert_int_equal(r.status, 204);
    drv_hc_resp_free(&r);
    assert_int_equal(lookups(), 4);
    /* no address answers any more and the new lookup hangs: after a short
     * wait (a second, not the request's 10 minutes) the previous answer is
     * tried again rather than none */
    canned_stop(&c);
    assert_int_equal(drv_hc_request(hc, &rq, &r, &err), -1);
    assert_non_null(strstr(err.message, "cannot connect"));
    set_hang(true);
    rq.timeout_ms = 600000;
    assert_int_equal(drv_hc_request(hc, &rq, &r, &err), -1);
    assert_non_null(strstr(err.message, "cannot connect"));
    assert_int_equal(lookups(), 5);
    drv_hc_destroy(hc);
    set_hang(false);

    /* a client destroyed while its lookup hangs: the lookup frees itself
     * when it ends (ASan's leak check sees to that) */
    set_hang(true);
    hc = drv_hc_create(url, &err);
    rq.timeout_ms = 100;
    assert_int_equal(drv_hc_request(hc, &rq, &r, &err), -1);
    drv_hc_destroy(hc);
    set_hang(false);
}

/* --- health probes ----------------------------------------------------------- */

static long probe(const char *answer, int timeout_ms, char *why, size_t wl)
{
    canned_t c;
    canned_start(&c, answer);
    drv_probe_t p;
    drv_probe_init(&p);
    long status = -1;
    int64_t now = drv_mono_ms();
    assert_int_equal(drv_probe_start(&p, c.port, "/health", timeout_ms, now, why, wl), 0);
    while (drv_probe_step(&p, drv_mono_ms(), &status, why, wl) == 0) {
        struct pollfd pf = {.fd = drv_probe_fd(&p), .events = drv_probe_events(&p)};
        poll(&pf, 1, 50);
    }
    assert_false(drv_probe_active(&p));
    canned_stop(&c);
    assert_non_null(strstr(c.request, "GET /health HTTP/1.1\r\n"));
    return status;
}

static void test_probe(void **st)
{
    char why[300];
    assert_int_equal(probe("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 20000, why,
                           sizeof why), 200);
    assert_int_equal(probe("HTTP/1.1 503 Loading\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                           20000, why, sizeof why), 503);
    assert_string_equal(why, "HTTP 503");
    assert_int_equal(probe("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab", 20000, why,
                           sizeof why), 0);
    assert_non_null(strstr(why, "bad answer"));
    assert_int_equal(probe(NULL, 200, why, sizeof why), 0);
    assert_non_null(strstr(why, "within the timeout"));
    /* a /health body over DRV_PROBE_MAX_BODY counts by its status (the
     * parser's DRV_H1_E_TOO_LARGE), declared or sent until close */
    size_t bl = DRV_PROBE_MAX_BODY + 4096;
    char *big = malloc(bl + 100);
    assert_non_null(big);
    int hl = snprintf(big, 100, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", bl);
    memset(big + hl, 'x', bl);
    big[hl + bl] = '\0';
    assert_int_equal(probe(big, 20000, why, sizeof why), 200);
    assert_string_equal(why, "HTTP 200");
    hl = snprintf(big, 100, "HTTP/1.0 503 Busy\r\n\r\n");
    memset(big + hl, 'x', bl);
    big[hl + bl] = '\0';
    assert_int_equal(probe(big, 20000, why, sizeof why), 503);
    free(big);
    /* refused */
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    bind(s, (struct sockaddr *)&sa, sizeof sa);
    getsockname(s, (struct sockaddr *)&sa, &sl);
    drv_probe_t p;
    drv_probe_init(&p);
    long status = -1;
    int rc = drv_probe_start(&p, ntohs(sa.sin_port), "/health", 5000, drv_mono_ms(), why,
                             sizeof why);
    while (rc == 0 && drv_probe_step(&p, drv_mono_ms(), &status, why, sizeof why) == 0)
        usleep(10000);
    assert_int_equal(status, 0);
    assert_non_null(strstr(why, "cannot connect"));
    assert_int_equal(drv_probe_start(&p, 1, "/bad path", 100, 0, why, sizeof why), -1);
    drv_probe_cancel(&p);
    close(s);
}

int main(void)
{
    *(void **)&real_gai = dlsym(RTLD_NEXT, "getaddrinfo");
    assert_non_null(real_gai);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_httpd),
        cmocka_unit_test(test_httpd_emfile),
        cmocka_unit_test(test_client),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_probe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
