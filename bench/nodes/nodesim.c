/* nodesim.c — simulates many drover agents against one droverd, over real
 * HTTP/1.1 on keep-alive connections (one per simulated node), from one
 * thread (epoll, non-blocking sockets). Used by bench/nodes/run.
 *
 *   nodesim register URL JOIN_TOKEN COUNT OUT_FILE [CONCURRENCY]
 *       registers COUNT nodes (POST /v1/agent/register), CONCURRENCY at a
 *       time; writes "node_id credential" lines to OUT_FILE.
 *
 *   nodesim sync URL CREDS_FILE COUNT INTERVAL_MS WARMUP_S DURATION_S
 *                PROBE_FRACTION RESULT_FILE [RAMP_PER_S]
 *       runs COUNT nodes (the first COUNT credentials) the way drover-agent
 *       syncs: the first sync has version 0 and wait_ms 0; then each sync
 *       carries the node's version and wait_ms = INTERVAL_MS, the head holds
 *       it (long poll) until the node's desired set changes or wait_ms
 *       passes, and the node syncs again at once. Nodes start staggered over
 *       one interval, or at RAMP_PER_S [500] nodes a second when that is
 *       longer (a fleet joining, not a thundering herd: the head's accept
 *       queue is finite). So N nodes send N / interval syncs per second and
 *       hold N connections. WARMUP_S counts from the end of that ramp.
 *
 *       Latency: a held sync's time is mostly the intentional hold. So a
 *       random PROBE_FRACTION of the syncs are sent with wait_ms 0 (the head
 *       answers at once, after doing all the work of a sync: authenticate,
 *       parse, validate, record the report) and their latency (send to last
 *       byte) is the "sync latency"; after a probe the node waits out the
 *       rest of its interval before its next sync, so the sync rate stays
 *       N / interval. For held syncs, the overshoot (time past send +
 *       wait_ms) is reported too: it is the head's processing before the
 *       hold plus its lateness in ending the hold.
 *
 *       The window (DURATION_S) opens WARMUP_S after the ramp, or later,
 *       once every node is in its sync loop (two answered syncs; at most
 *       120 s later). Latency samples are taken in the window only; errors,
 *       connects and gaps are counted in the window and, as join_*, before
 *       it (joining and warm-up). A node's "gap" is how long it went without
 *       an answered sync (in the window: since the window opened); the head
 *       marks a node not_ready after 10 s without a sync. A connect slower
 *       than 1 s met a full accept queue (its SYN was retransmitted).
 *       Writes key=value lines to RESULT_FILE.
 *
 * NODESIM_TRACE=FILE (sync): one line per answer in the window: seconds
 * into the window, node index, p (probe) / h (held) / w (woken), latency us.
 *
 * An https:// URL: every connection is TLS (OpenSSL, TLS 1.2 or later, the
 * head's certificate verified against NODESIM_CA_FILE, else the system's
 * store, and its IP address checked), as drover-agent talks to a droverd
 * --tls. The handshake is part of the connection, not of a sync's latency
 * (a sync's clock starts when its request can go out); connections are
 * kept alive, so it happens once per node, as with the agent.
 *
 * Every answer other than 200 (201 for register), every connection error,
 * and every sync not answered within wait_ms + 15 s counts as an error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_EXTRA_NS (15LL * 1000000000LL)
#define RETRY_NS (1000LL * 1000000LL)

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what, const char *a)
{
    fprintf(stderr, "nodesim: %s%s\n", what, a);
    exit(1);
}

/* --- growable sample arrays ----------------------------------------------- */

typedef struct samples {
    uint32_t *v;   /* microseconds */
    size_t n, cap;
} samples_t;

static void sample_add(samples_t *s, int64_t ns)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4096;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        if (!s->v)
            die("out of memory", "");
    }
    int64_t us = ns / 1000;
    s->v[s->n++] = us < 0 ? 0 : us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t pct(const samples_t *s, double p)
{
    if (!s->n)
        return 0;
    size_t i = (size_t)ceil(p / 100.0 * (double)s->n);
    if (i > 0)
        i--;
    if (i >= s->n)
        i = s->n - 1;
    return s->v[i];
}

/* --- connections ------------------------------------------------------------ */

enum { C_IDLE, C_CONNECTING, C_HANDSHAKE, C_SENDING, C_RECEIVING };

typedef struct node {
    int idx;
    int fd;
    int cstate;
    SSL *ssl;           /* https:// only */
    char *cred;         /* credential (sync) */
    char id[80];        /* node id (register) */
    uint64_t version;
    bool probe;         /* the request in flight has wait_ms 0 */
    int wait_ms;        /* of the request in flight */
    int64_t sent_ns;    /* when the request in flight was sent (connected) */
    int64_t conn_ns;    /* when its connection attempt began */
    int64_t last_ok_ns; /* when the last answered sync was answered */
    int answers;        /* answered syncs */
    char *out;
    size_t out_len, out_off;
    char *in;
    size_t in_len, in_cap;
    size_t heap_pos;    /* +1; 0 when not scheduled */
    int64_t due_ns;
    int done;           /* register: registered */
} node_t;

static struct sockaddr_in g_addr;
static char g_host[128];
static char g_ip[64];     /* the URL's IPv4 address, checked in the certificate */
static int g_ep;
static SSL_CTX *g_tls;    /* https:// URL */

/* --- timer heap (by due_ns) --------------------------------------------------- */

static node_t **g_heap;
static size_t g_heap_n;

static void heap_swap(size_t a, size_t b)
{
    node_t *t = g_heap[a];
    g_heap[a] = g_heap[b];
    g_heap[b] = t;
    g_heap[a]->heap_pos = a + 1;
    g_heap[b]->heap_pos = b + 1;
}

static void heap_up(size_t i)
{
    while (i > 0 && g_heap[(i - 1) / 2]->due_ns > g_heap[i]->due_ns) {
        heap_swap(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < g_heap_n && g_heap[l]->due_ns < g_heap[m]->due_ns)
            m = l;
        if (r < g_heap_n && g_heap[r]->due_ns < g_heap[m]->due_ns)
            m = r;
        if (m == i)
            return;
        heap_swap(i, m);
        i = m;
    }
}

static void schedule(node_t *n, int64_t due)
{
    if (n->heap_pos) {
        n->due_ns = due;
        heap_up(n->heap_pos - 1);
        heap_down(n->heap_pos - 1);
        return;
    }
    n->due_ns = due;
    g_heap[g_heap_n] = n;
    n->heap_pos = ++g_heap_n;
    heap_up(g_heap_n - 1);
}

static node_t *heap_pop(void)
{
    node_t *n = g_heap[0];
    g_heap_n--;
    if (g_heap_n) {
        g_heap[0] = g_heap[g_heap_n];
        g_heap[0]->heap_pos = 1;
        heap_down(0);
    }
    n->heap_pos = 0;
    return n;
}

/* --- stats ------------------------------------------------------------------- */

/* counters per phase: 0 = joining and warm-up (before the window), 1 = window */
typedef struct phase {
    uint64_t syncs, held, woken, http_err, conn_err, timeouts, connects, slow_connects;
    uint64_t gaps_over_timeout;
    int64_t max_gap_ns, max_probe_ns, max_over_ns;
} phase_t;

static struct {
    int64_t win_start, win_end;   /* win_start is INT64_MAX until the window opens */
    samples_t probe, over, reg;
    phase_t ph[2];
    int last_bad_status;
    char last_bad_body[200];
} S = {.win_start = INT64_MAX, .win_end = INT64_MAX};

static bool in_window(int64_t t) { return t >= S.win_start && t < S.win_end; }
static phase_t *phase(int64_t t) { return &S.ph[in_window(t) ? 1 : 0]; }

/* NODESIM_TRACE=FILE: one line per answered sync in the window:
 * seconds into the window, node, kind (p probe, h held, w woken), latency us */
static FILE *g_trace;

/* --- sockets -------------------------------------------------------------------- */

static void conn_close(node_t *n)
{
    if (n->ssl) {
        SSL_free(n->ssl);   /* no close_notify: the connection failed or the server closed it */
        n->ssl = NULL;
    }
    if (n->fd >= 0) {
        epoll_ctl(g_ep, EPOLL_CTL_DEL, n->fd, NULL);
        close(n->fd);
    }
    n->fd = -1;
    n->cstate = C_IDLE;
    n->in_len = 0;
}

static int conn_open(node_t *n)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    n->fd = fd;
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = n};
    epoll_ctl(g_ep, EPOLL_CTL_ADD, fd, &ev);
    if (connect(fd, (struct sockaddr *)&g_addr, sizeof g_addr) < 0 && errno != EINPROGRESS) {
        conn_close(n);
        return -1;
    }
    n->cstate = C_CONNECTING;
    return 0;
}

static void set_events(node_t *n, uint32_t ev)
{
    struct epoll_event e = {.events = ev, .data.ptr = n};
    epoll_ctl(g_ep, EPOLL_CTL_MOD, n->fd, &e);
}

/* --- TLS ------------------------------------------------------------------------ */

static void tls_init(void)
{
    g_tls = SSL_CTX_new(TLS_client_method());
    if (!g_tls)
        die("cannot make a TLS context", "");
    SSL_CTX_set_min_proto_version(g_tls, TLS1_2_VERSION);
    SSL_CTX_set_verify(g_tls, SSL_VERIFY_PEER, NULL);
    const char *ca = getenv("NODESIM_CA_FILE");
    if (ca && *ca ? SSL_CTX_load_verify_locations(g_tls, ca, NULL) != 1
                  : SSL_CTX_set_default_verify_paths(g_tls) != 1)
        die("cannot load the CA of NODESIM_CA_FILE: ", ca ? ca : "(the system's store)");
    /* idle keep-alive connections give their buffers back: N nodes, N connections */
    SSL_CTX_set_mode(g_tls, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                                SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    signal(SIGPIPE, SIG_IGN);   /* OpenSSL writes with write(), not send(MSG_NOSIGNAL) */
}

/* What an SSL call's result asks for: 0 to wait (epoll events set for it), -1 error. */
static int tls_wait(node_t *n, int r)
{
    switch (SSL_get_error(n->ssl, r)) {
    case SSL_ERROR_WANT_READ: set_events(n, EPOLLIN); return 0;
    case SSL_ERROR_WANT_WRITE: set_events(n, EPOLLOUT); return 0;
    default:
        ERR_clear_error();
        return -1;
    }
}

/* Start (or go on with) the handshake on a connected socket: 1 done, 0 to
 * wait, -1 on error (a certificate that does not verify among them). */
static int tls_handshake(node_t *n)
{
    if (!n->ssl) {
        if (!(n->ssl = SSL_new(g_tls)) || SSL_set_fd(n->ssl, n->fd) != 1)
            die("cannot make a TLS connection", "");
        SSL_set_connect_state(n->ssl);
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(n->ssl), g_ip);
    }
    int r = SSL_do_handshake(n->ssl);
    return r == 1 ? 1 : tls_wait(n, r);
}

/* Send up to len bytes: the count sent, 0 to wait, -1 on error. */
static ssize_t io_send(node_t *n, const char *p, size_t len)
{
    if (n->ssl) {
        size_t w = 0;
        int r = SSL_write_ex(n->ssl, p, len, &w);
        return r == 1 ? (ssize_t)w : tls_wait(n, r);
    }
    for (;;) {
        ssize_t w = send(n->fd, p, len, MSG_NOSIGNAL);
        if (w >= 0)
            return w;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* Receive up to len bytes: the count, 0 when there is nothing now, -1 on
 * error, -2 when the server closed the connection. */
static ssize_t io_recv(node_t *n, char *p, size_t len)
{
    if (n->ssl) {
        size_t got = 0;
        int r = SSL_read_ex(n->ssl, p, len, &got);
        if (r == 1)
            return (ssize_t)got;
        int e = SSL_get_error(n->ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return 0;   /* a TLS record without data (a session ticket) counts as nothing */
        ERR_clear_error();
        return e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0) ? -2 : -1;
    }
    for (;;) {
        ssize_t r = recv(n->fd, p, len, 0);
        if (r > 0)
            return r;
        if (r == 0)
            return -2;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* Write what is left of n->out; 1 when all is sent, 0 to wait, -1 on error. */
static int flush_out(node_t *n)
{
    while (n->out_off < n->out_len) {
        ssize_t w = io_send(n, n->out + n->out_off, n->out_len - n->out_off);
        if (w <= 0)
            return (int)w;
        n->out_off += (size_t)w;
    }
    return 1;
}

static void start_send(node_t *n)
{
    n->out_off = 0;
    n->in_len = 0;
    if (n->fd < 0) {
        n->conn_ns = now_ns();
        if (conn_open(n) < 0) {
            phase(n->conn_ns)->conn_err++;
            schedule(n, now_ns() + RETRY_NS);
            return;
        }
        return;   /* EPOLLOUT: connected, then we send */
    }
    n->cstate = C_SENDING;
    int r = flush_out(n);
    if (r < 0) {
        phase(now_ns())->conn_err++;
        conn_close(n);
        schedule(n, now_ns() + RETRY_NS);
    } else if (r == 0) {
        if (!n->ssl)   /* TLS: tls_wait set what it waits for */
            set_events(n, EPOLLOUT);
    } else {
        n->cstate = C_RECEIVING;
        set_events(n, EPOLLIN);
    }
}

/* Parse a complete response in n->in: 1 complete, 0 need more, -1 bad. */
static int parse_response(node_t *n, int *status, const char **body, size_t *body_len,
                          bool *close_after)
{
    if (n->in_len < 12)
        return 0;
    char *hdr_end = memmem(n->in, n->in_len, "\r\n\r\n", 4);
    if (!hdr_end)
        return 0;
    if (strncmp(n->in, "HTTP/1.", 7) != 0)
        return -1;
    *status = atoi(n->in + 9);
    size_t hlen = (size_t)(hdr_end - n->in) + 4;
    long clen = -1;
    *close_after = strncmp(n->in, "HTTP/1.0", 8) == 0;
    for (char *p = n->in; p < hdr_end;) {
        char *eol = memmem(p, (size_t)(hdr_end + 2 - p), "\r\n", 2);
        if (!eol)
            break;
        if (eol - p > 15 && strncasecmp(p, "Content-Length:", 15) == 0)
            clen = strtol(p + 15, NULL, 10);
        else if (eol - p > 11 && strncasecmp(p, "Connection:", 11) == 0) {
            char *v = p + 11;
            while (*v == ' ')
                v++;
            if (strncasecmp(v, "close", 5) == 0)
                *close_after = true;
        } else if (eol - p > 18 && strncasecmp(p, "Transfer-Encoding:", 18) == 0)
            return -1;   /* droverd always sends Content-Length */
        p = eol + 2;
    }
    if (clen < 0)
        clen = 0;
    if (n->in_len < hlen + (size_t)clen)
        return 0;
    *body = n->in + hlen;
    *body_len = (size_t)clen;
    return 1;
}

/* a JSON number or string value after "key": in body (flat scan; enough here) */
static const char *json_find(const char *body, size_t len, const char *key, size_t *vlen)
{
    char pat[64];
    int pl = snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = memmem(body, len, pat, (size_t)pl);
    if (!p)
        return NULL;
    p += pl;
    while (p < body + len && *p == ' ')
        p++;
    const char *e = p;
    if (*p == '"') {
        p++;
        e = memchr(p, '"', (size_t)(body + len - p));
        if (!e)
            return NULL;
    } else {
        while (e < body + len && *e != ',' && *e != '}')
            e++;
    }
    *vlen = (size_t)(e - p);
    return p;
}

/* --- register mode ---------------------------------------------------------- */

static int r_count, r_next, r_done;
static char *r_token;
static FILE *r_out;

static void reg_build(node_t *n)
{
    char body[256];
    int bl = snprintf(body, sizeof body,
                      "{\"hostname\":\"sim-%05d\",\"address\":\"127.0.0.1\",\"agent_version\":"
                      "\"nodesim\"}", n->idx);
    free(n->out);
    if (asprintf(&n->out,
                 "POST /v1/agent/register HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
                 "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                 g_host, r_token, bl, body) < 0)
        die("out of memory", "");
    n->out_len = strlen(n->out);
}

/* --- sync mode ---------------------------------------------------------------- */

static int s_interval_ms;
static double s_probe;

static void sync_build(node_t *n, bool first)
{
    char body[1200];
    n->probe = first || drand48() < s_probe;
    n->wait_ms = (first || n->probe) ? 0 : s_interval_ms;
    int bl = snprintf(
        body, sizeof body,
        "{\"version\":%llu,\"hostname\":\"sim-%05d\",\"address\":\"127.0.0.1\","
        "\"agent_version\":\"0.1.0\",\"cpus\":8,\"memory_mib\":32768,\"gpu_source\":\"declared\","
        "\"gpus\":[{\"index\":0,\"uuid\":\"GPU-%08x-0000-4000-8000-%012x\",\"name\":\"L4\","
        "\"memory_mib\":24576,\"memory_used_mib\":0,\"utilization_percent\":null,"
        "\"temperature_c\":null,\"healthy\":true,\"health_reason\":\"\",\"source\":\"declared\"}],"
        "\"replicas\":[],\"logs\":{\"url\":\"http://127.0.0.1:%d\",\"key\":"
        "\"%016x%016x%016x%016x\"},\"wait_ms\":%d}",
        (unsigned long long)n->version, n->idx, (unsigned)n->idx, (unsigned)n->idx,
        20000 + n->idx % 40000, (unsigned)n->idx, 0xabcdefu, 0x12345u, (unsigned)n->idx,
        n->wait_ms);
    free(n->out);
    if (asprintf(&n->out,
                 "POST /v1/agent/sync HTTP/1.1\r\nHost: %s\r\nAccept: */*\r\n"
                 "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
                 "Content-Length: %d\r\n\r\n%s",
                 g_host, n->cred, bl, body) < 0)
        die("out of memory", "");
    n->out_len = strlen(n->out);
}

static bool g_register;

/* A complete answer arrived (or the connection failed: status < 0). */
static void on_answer(node_t *n, int status, const char *body, size_t blen, bool close_after)
{
    int64_t t = now_ns();
    if (close_after || status < 0)
        conn_close(n);
    phase_t *P = phase(t);
    if (status < 0) {
        if (status == -2)
            P->timeouts++;
        else
            P->conn_err++;
        schedule(n, t + RETRY_NS);
        return;
    }
    if (n->fd >= 0)
        n->cstate = C_IDLE;   /* kept open (keep-alive) for the next request */
    if (g_register) {
        if (status != 201) {
            P->http_err++;
            S.last_bad_status = status;
            snprintf(S.last_bad_body, sizeof S.last_bad_body, "%.*s", (int)(blen < 190 ? blen : 190), body);
            schedule(n, t + RETRY_NS);
            return;
        }
        size_t il, cl;
        const char *id = json_find(body, blen, "node_id", &il);
        const char *cr = json_find(body, blen, "credential", &cl);
        if (!id || !cr) {
            P->http_err++;
            schedule(n, t + RETRY_NS);
            return;
        }
        sample_add(&S.reg, t - n->sent_ns);
        fprintf(r_out, "%.*s %.*s\n", (int)il, id, (int)cl, cr);
        r_done++;
        if (r_next < r_count) {
            n->idx = r_next++;
            reg_build(n);
            n->sent_ns = now_ns();
            start_send(n);
        }
        return;
    }
    if (status != 200) {
        P->http_err++;
        S.last_bad_status = status;
        snprintf(S.last_bad_body, sizeof S.last_bad_body, "%.*s", (int)(blen < 190 ? blen : 190), body);
        schedule(n, t + RETRY_NS);
        return;
    }
    size_t vl;
    const char *v = json_find(body, blen, "version", &vl);
    uint64_t ver = v ? strtoull(v, NULL, 10) : 0;
    bool changed = ver != n->version;
    int64_t lat = t - n->sent_ns;
    bool win = in_window(t);
    P->syncs++;
    if (win && g_trace)
        fprintf(g_trace, "%.3f %d %c %lld\n", (double)(t - S.win_start) / 1e9, n->idx,
                n->probe ? 'p' : changed ? 'w' : 'h', (long long)(lat / 1000));
    if (n->last_ok_ns) {
        /* time without an answered sync (in the window: since it opened);
         * the head marks a node not_ready after node_timeout without one */
        int64_t since = win && n->last_ok_ns < S.win_start ? S.win_start : n->last_ok_ns;
        int64_t gap = t - since;
        if (gap > P->max_gap_ns)
            P->max_gap_ns = gap;
        if (gap > 10LL * 1000000000LL)
            P->gaps_over_timeout++;
    }
    if (n->probe) {
        if (n->version) {   /* not a node's first sync */
            if (win)
                sample_add(&S.probe, lat);
            if (lat > P->max_probe_ns)
                P->max_probe_ns = lat;
        }
    } else if (changed) {
        P->woken++;
    } else {
        P->held++;
        int64_t over = lat - (int64_t)n->wait_ms * 1000000LL;
        if (win)
            sample_add(&S.over, over);
        if (over > P->max_over_ns)
            P->max_over_ns = over;
    }
    n->answers++;
    n->last_ok_ns = t;
    n->version = ver;
    if (n->probe && !changed) {
        /* wait out the rest of the interval the held sync would have taken */
        schedule(n, n->sent_ns + (int64_t)s_interval_ms * 1000000LL);
    } else {
        sync_build(n, false);
        n->sent_ns = now_ns();
        start_send(n);
    }
}

static void on_event(node_t *n, uint32_t ev)
{
    if (n->cstate == C_CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(n->fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err || (ev & (EPOLLERR | EPOLLHUP))) {
            on_answer(n, -1, NULL, 0, true);
            return;
        }
        /* a connect slower than 1 s met a full accept queue (SYN retransmitted) */
        int64_t t = now_ns();
        phase(t)->connects++;
        if (t - n->conn_ns > 1000000000LL)
            phase(t)->slow_connects++;
        n->cstate = g_tls ? C_HANDSHAKE : C_SENDING;
        n->sent_ns = t;   /* the request goes out now: its latency counts from here */
    }
    if (n->cstate == C_HANDSHAKE) {
        int r = tls_handshake(n);
        if (r < 0) {
            on_answer(n, -1, NULL, 0, true);
            return;
        }
        if (r == 0)
            return;
        n->cstate = C_SENDING;
        n->sent_ns = now_ns();   /* TLS: from the end of the handshake */
    }
    if (n->cstate == C_SENDING) {
        int r = flush_out(n);
        if (r < 0) {
            on_answer(n, -1, NULL, 0, true);
            return;
        }
        if (r == 1) {
            n->cstate = C_RECEIVING;
            set_events(n, EPOLLIN);
        }
        return;
    }
    if (n->cstate == C_RECEIVING || n->cstate == C_IDLE) {
        for (;;) {
            if (n->in_cap - n->in_len < 4096) {
                n->in_cap = n->in_cap ? n->in_cap * 2 : 8192;
                if (n->in_cap > (8u << 20)) {
                    on_answer(n, -1, NULL, 0, true);
                    return;
                }
                n->in = realloc(n->in, n->in_cap);
                if (!n->in)
                    die("out of memory", "");
            }
            ssize_t r = io_recv(n, n->in + n->in_len, n->in_cap - n->in_len - 1);
            if (r == 0)
                break;
            if (r == -1) {
                on_answer(n, -1, NULL, 0, true);
                return;
            }
            if (r == -2) {   /* closed by the server */
                if (n->cstate == C_IDLE) {
                    conn_close(n);
                    return;
                }
                on_answer(n, -1, NULL, 0, true);
                return;
            }
            n->in_len += (size_t)r;
        }
        if (n->cstate != C_RECEIVING)
            return;
        int status;
        const char *body;
        size_t blen;
        bool close_after;
        int p = parse_response(n, &status, &body, &blen, &close_after);
        if (p < 0) {
            on_answer(n, -1, NULL, 0, true);
            return;
        }
        if (p == 1)
            on_answer(n, status, body, blen, close_after);
    }
}

static void parse_url(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    char host[128];
    snprintf(host, sizeof host, "%s", p);
    char *slash = strchr(host, '/');
    if (slash)
        *slash = '\0';
    snprintf(g_host, sizeof g_host, "%s", host);
    char *colon = strrchr(host, ':');
    if (!colon)
        die("URL needs a port: ", url);
    *colon = '\0';
    memset(&g_addr, 0, sizeof g_addr);
    g_addr.sin_family = AF_INET;
    g_addr.sin_port = htons((uint16_t)atoi(colon + 1));
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &g_addr.sin_addr) != 1)
        die("need an IPv4 URL: ", url);
    snprintf(g_ip, sizeof g_ip, "%s", host);
    if (strncmp(url, "https://", 8) == 0)
        tls_init();
    else if (strncmp(url, "http://", 7) != 0 && strstr(url, "://"))
        die("need an http:// or https:// URL: ", url);
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* Check in-flight requests for timeouts (every second). */
static void check_timeouts(node_t *nodes, int count, int64_t t)
{
    for (int i = 0; i < count; i++) {
        node_t *n = &nodes[i];
        if (((n->cstate == C_CONNECTING || n->cstate == C_HANDSHAKE) &&
             t - n->conn_ns > TIMEOUT_EXTRA_NS) ||
            ((n->cstate == C_RECEIVING || n->cstate == C_SENDING) &&
             t - n->sent_ns > (int64_t)n->wait_ms * 1000000LL + TIMEOUT_EXTRA_NS))
            on_answer(n, -2, NULL, 0, true);
    }
}

static void loop(node_t *nodes, int count, int64_t until, bool (*finished)(void))
{
    struct epoll_event evs[512];
    int64_t next_check = now_ns() + 1000000000LL;
    for (;;) {
        int64_t t = now_ns();
        if (t >= until || (finished && finished()))
            return;
        while (g_heap_n && g_heap[0]->due_ns <= t) {
            node_t *n = heap_pop();
            if (g_register) {
                n->sent_ns = now_ns();
                start_send(n);
            } else {
                sync_build(n, n->version == 0);
                n->sent_ns = now_ns();
                start_send(n);
            }
        }
        if (t >= next_check) {
            check_timeouts(nodes, count, t);
            next_check = t + 1000000000LL;
        }
        int64_t wake = next_check < until ? next_check : until;
        if (g_heap_n && g_heap[0]->due_ns < wake)
            wake = g_heap[0]->due_ns;
        int timeout_ms = (int)((wake - t + 999999) / 1000000);
        if (timeout_ms < 0)
            timeout_ms = 0;
        int k = epoll_wait(g_ep, evs, 512, timeout_ms);
        for (int i = 0; i < k; i++)
            on_event(evs[i].data.ptr, evs[i].events);
    }
}

static bool reg_finished(void) { return r_done >= r_count; }

#define SETTLE_MAX_S 120
static node_t *g_nodes;
static int g_count;

static bool all_joined(void)
{
    static int64_t last_check;
    int64_t t = now_ns();
    if (t - last_check < 100000000LL)
        return false;
    last_check = t;
    for (int i = 0; i < g_count; i++)
        if (g_nodes[i].answers < 2)
            return false;
    return true;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: nodesim register URL JOIN_TOKEN COUNT OUT_FILE [CONCURRENCY]\n"
            "       nodesim sync URL CREDS_FILE COUNT INTERVAL_MS WARMUP_S DURATION_S "
            "PROBE_FRACTION RESULT_FILE [RAMP_PER_S]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    srand48((long)now_ns());
    g_ep = epoll_create1(EPOLL_CLOEXEC);
    if (strcmp(argv[1], "register") == 0) {
        if (argc < 6)
            return usage();
        g_register = true;
        parse_url(argv[2]);
        r_token = argv[3];
        r_count = atoi(argv[4]);
        r_out = fopen(argv[5], "w");
        if (!r_out)
            die("cannot write ", argv[5]);
        int conc = argc > 6 ? atoi(argv[6]) : 32;
        if (conc > r_count)
            conc = r_count;
        node_t *nodes = calloc((size_t)conc, sizeof *nodes);
        g_heap = calloc((size_t)conc + 1, sizeof *g_heap);
        int64_t t0 = now_ns();
        for (int i = 0; i < conc; i++) {
            nodes[i].fd = -1;
            nodes[i].idx = r_next++;
            reg_build(&nodes[i]);
            schedule(&nodes[i], t0);
        }
        loop(nodes, conc, t0 + 3600LL * 1000000000LL, reg_finished);
        double secs = (double)(now_ns() - t0) / 1e9;
        fclose(r_out);
        if (S.reg.n)
            qsort(S.reg.v, S.reg.n, sizeof *S.reg.v, cmp_u32);
        printf("registered=%d seconds=%.2f per_s=%.0f p50_us=%u p99_us=%u http_errors=%llu "
               "conn_errors=%llu\n",
               r_done, secs, r_done / secs, pct(&S.reg, 50), pct(&S.reg, 99),
               (unsigned long long)S.ph[0].http_err, (unsigned long long)S.ph[0].conn_err);
        if (S.ph[0].http_err)
            fprintf(stderr, "nodesim: last error %d: %s\n", S.last_bad_status, S.last_bad_body);
        return r_done == r_count ? 0 : 1;
    }
    if (strcmp(argv[1], "sync") != 0 || argc < 10)
        return usage();
    parse_url(argv[2]);
    int count = atoi(argv[4]);
    s_interval_ms = atoi(argv[5]);
    double warmup = atof(argv[6]), duration = atof(argv[7]);
    s_probe = atof(argv[8]);
    const char *result = argv[9];
    double ramp_per_s = argc > 10 ? atof(argv[10]) : 500;
    if (ramp_per_s <= 0)
        ramp_per_s = 500;
    if (getenv("NODESIM_TRACE") && !(g_trace = fopen(getenv("NODESIM_TRACE"), "w")))
        die("cannot write ", getenv("NODESIM_TRACE"));
    FILE *cf = fopen(argv[3], "r");
    if (!cf)
        die("cannot read ", argv[3]);
    node_t *nodes = calloc((size_t)count, sizeof *nodes);
    g_heap = calloc((size_t)count + 1, sizeof *g_heap);
    char line[512];
    int got = 0;
    while (got < count && fgets(line, sizeof line, cf)) {
        char id[128], cred[256];
        if (sscanf(line, "%127s %255s", id, cred) != 2)
            continue;
        nodes[got].cred = strdup(cred);
        snprintf(nodes[got].id, sizeof nodes[got].id, "%s", id);
        nodes[got].idx = got;
        nodes[got].fd = -1;
        got++;
    }
    fclose(cf);
    if (got < count)
        die("too few credentials in ", argv[3]);
    /* nodes start (connect, first sync) spread over the ramp: one interval,
     * or longer at RAMP_PER_S */
    double ramp_s = s_interval_ms / 1000.0;
    if (count / ramp_per_s > ramp_s)
        ramp_s = count / ramp_per_s;
    int64_t t0 = now_ns();
    for (int i = 0; i < count; i++)
        schedule(&nodes[i], t0 + (int64_t)(ramp_s * 1e9 * i / count));
    /* warm-up: WARMUP_S after the ramp, and on until every node is in its
     * sync loop (two answered syncs), at most SETTLE_MAX_S more */
    g_nodes = nodes;
    g_count = count;
    loop(nodes, count, t0 + (int64_t)((ramp_s + warmup) * 1e9), NULL);
    loop(nodes, count, now_ns() + (int64_t)SETTLE_MAX_S * 1000000000LL, all_joined);
    double joined_s = (double)(now_ns() - t0) / 1e9;
    int joined = 0;
    for (int i = 0; i < count; i++)
        joined += nodes[i].answers >= 2;
    S.win_start = now_ns();
    S.win_end = S.win_start + (int64_t)(duration * 1e9);
    double c0 = cpu_s();
    printf("nodesim: measuring %d nodes for %.0f s\n", count, duration);
    fflush(stdout);
    loop(nodes, count, S.win_end, NULL);
    double sim_cpu = (cpu_s() - c0) / duration * 100;
    /* nodes without an answered sync for node_timeout at the end */
    int64_t tend = now_ns();
    int stale = 0;
    for (int i = 0; i < count; i++) {
        int64_t since = nodes[i].last_ok_ns > S.win_start ? nodes[i].last_ok_ns : S.win_start;
        if (tend - since > 10LL * 1000000000LL)
            stale++;
    }
    if (S.probe.n)
        qsort(S.probe.v, S.probe.n, sizeof *S.probe.v, cmp_u32);
    if (S.over.n)
        qsort(S.over.v, S.over.n, sizeof *S.over.v, cmp_u32);
    FILE *f = fopen(result, "w");
    if (!f)
        die("cannot write ", result);
    const phase_t *J = &S.ph[0], *W = &S.ph[1];
    fprintf(f,
            "nodes=%d\nduration_s=%.1f\nramp_s=%.1f\nwindow_opened_s=%.1f\njoined_before_window=%d\n"
            "syncs=%llu\nsyncs_per_s=%.1f\n"
            "probe_n=%zu\nprobe_p50_us=%u\nprobe_p90_us=%u\nprobe_p99_us=%u\nprobe_p999_us=%u\n"
            "probe_max_us=%u\nheld_n=%zu\nover_p50_us=%u\nover_p99_us=%u\nover_max_us=%u\n"
            "woken=%llu\nhttp_errors=%llu\nconn_errors=%llu\ntimeouts=%llu\nconnects=%llu\n"
            "slow_connects=%llu\nmax_gap_ms=%.0f\ngaps_over_timeout=%llu\nstale_nodes=%d\n"
            "sim_cpu_pct=%.1f\n"
            "join_syncs=%llu\njoin_max_probe_us=%lld\njoin_max_over_us=%lld\njoin_http_errors=%llu\n"
            "join_conn_errors=%llu\njoin_timeouts=%llu\njoin_connects=%llu\njoin_slow_connects=%llu\n"
            "join_max_gap_ms=%.0f\njoin_gaps_over_timeout=%llu\n",
            count, duration, ramp_s, joined_s, joined, (unsigned long long)W->syncs,
            (double)W->syncs / duration, S.probe.n, pct(&S.probe, 50), pct(&S.probe, 90),
            pct(&S.probe, 99), pct(&S.probe, 99.9), S.probe.n ? S.probe.v[S.probe.n - 1] : 0,
            S.over.n, pct(&S.over, 50), pct(&S.over, 99), S.over.n ? S.over.v[S.over.n - 1] : 0,
            (unsigned long long)W->woken, (unsigned long long)W->http_err,
            (unsigned long long)W->conn_err, (unsigned long long)W->timeouts,
            (unsigned long long)W->connects, (unsigned long long)W->slow_connects,
            (double)W->max_gap_ns / 1e6, (unsigned long long)W->gaps_over_timeout, stale, sim_cpu,
            (unsigned long long)J->syncs, (long long)(J->max_probe_ns / 1000),
            (long long)(J->max_over_ns / 1000), (unsigned long long)J->http_err,
            (unsigned long long)J->conn_err, (unsigned long long)J->timeouts,
            (unsigned long long)J->connects, (unsigned long long)J->slow_connects,
            (double)J->max_gap_ns / 1e6, (unsigned long long)J->gaps_over_timeout);
    fclose(f);
    if (g_trace)
        fclose(g_trace);
    if (J->http_err || W->http_err)
        fprintf(stderr, "nodesim: last error %d: %s\n", S.last_bad_status, S.last_bad_body);
    return 0;
}
