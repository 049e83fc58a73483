/* http_tool.c — a small HTTP/1.1 client for the tests' api() helper
 * (t/lib/common.bash): the curl options api() uses, over plain http to a
 * numeric IPv4 address, in a process that starts in a few milliseconds.
 * curl loads some 30 libraries (about 23 ms of CPU a start on the test
 * machine) and the suites start it thousands of times.
 *
 * usage: http_tool [-s] [-g] [--path-as-is] [-o FILE] [-D FILE]
 *                  [-w '%{http_code}'] [-X METHOD] [-H 'Name: value']...
 *                  [-d DATA | --data-binary DATA|@FILE] [-m SECONDS] URL
 *
 * As curl does: the status code goes to stdout for -w ("000" without an
 * answer); the body to -o FILE (created once an answer has begun, even when
 * empty) or stdout; the header block as received to -D FILE; -H 'Name:'
 * drops a header the tool would add (Host, User-Agent, Accept, Content-Type),
 * 'Name;' sends it empty; -d sends DATA as given with Content-Type
 * application/x-www-form-urlencoded unless a -H names one. Exit status: 0
 * once an answer was read, 7 no connection, 28 past -m, 52 an empty answer,
 * 56 a broken one.
 *
 * Anything else — https, a host name, another option or -w format, -d @FILE,
 * two bodies, a URL with a space or a dot segment (curl would rewrite it) —
 * exits 99 before any I/O: api() then runs curl itself.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define UNSUPPORTED 99
#define MAX_HEADERS 64
#define HEAD_MAX (64 * 1024)

typedef struct {
    const char *out_file, *hdr_file, *method, *data, *data_file, *url;
    int write_code, path_as_is;
    double max_time;              /* seconds; 0: none */
    const char *headers[MAX_HEADERS];
    int n_headers;
} opts_t;

typedef struct {
    int fd;
    char *buf;                    /* bytes read, not yet consumed */
    size_t len, cap;
    double deadline;              /* monotonic seconds; 0: none */
    int eof;
} conn_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* parse_args: 0, or UNSUPPORTED for anything outside the subset */
static int parse_args(int argc, char **argv, opts_t *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-s") || !strcmp(a, "-g") || !strcmp(a, "-sg"))
            continue;
        if (!strcmp(a, "--path-as-is")) {
            o->path_as_is = 1;
            continue;
        }
        if (a[0] != '-') {
            if (o->url)
                return UNSUPPORTED;
            o->url = a;
            continue;
        }
        if (!v)
            return UNSUPPORTED;
        i++;
        if (!strcmp(a, "-o"))
            o->out_file = v;
        else if (!strcmp(a, "-D"))
            o->hdr_file = v;
        else if (!strcmp(a, "-X"))
            o->method = v;
        else if (!strcmp(a, "-w")) {
            if (strcmp(v, "%{http_code}"))
                return UNSUPPORTED;
            o->write_code = 1;
        } else if (!strcmp(a, "-H")) {
            if (o->n_headers == MAX_HEADERS || strchr(v, '\r') || strchr(v, '\n'))
                return UNSUPPORTED;
            o->headers[o->n_headers++] = v;
        } else if (!strcmp(a, "-d") || !strcmp(a, "--data") || !strcmp(a, "--data-binary")) {
            if (o->data || o->data_file)
                return UNSUPPORTED;
            if (v[0] == '@') {
                if (strcmp(a, "--data-binary") || !v[1])
                    return UNSUPPORTED;   /* -d @FILE strips newlines: curl's job */
                o->data_file = v + 1;
            } else
                o->data = v;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--max-time")) {
            char *end;
            o->max_time = strtod(v, &end);
            if (*end || o->max_time <= 0)
                return UNSUPPORTED;
        } else
            return UNSUPPORTED;
    }
    return o->url ? 0 : UNSUPPORTED;
}

/* split_url: "http://A.B.C.D[:PORT]/path" into an address and the target */
static int split_url(const char *url, int path_as_is, struct sockaddr_in *sa,
                     char *host, size_t host_size, const char **target)
{
    if (strncmp(url, "http://", 7))
        return UNSUPPORTED;
    const char *h = url + 7, *slash = strchr(h, '/');
    const char *end = slash ? slash : h + strlen(h);
    if ((size_t)(end - h) >= host_size || end == h)
        return UNSUPPORTED;
    memcpy(host, h, end - h);
    host[end - h] = '\0';
    *target = slash ? slash : "/";
    if (strpbrk(*target, " \t#") || strpbrk(host, "@[]"))
        return UNSUPPORTED;
    if (!path_as_is) {
        size_t pl = strcspn(*target, "?");
        for (const char *p = *target; p < *target + pl; p++)
            if (p[0] == '/' && p[1] == '.' &&
                (p + 2 == *target + pl || p[2] == '/' ||
                 (p[2] == '.' && (p + 3 == *target + pl || p[3] == '/'))))
                return UNSUPPORTED;
    }
    char addr[64];
    long port = 80;
    char *colon = strchr(host, ':');
    size_t al = colon ? (size_t)(colon - host) : strlen(host);
    if (al >= sizeof addr)
        return UNSUPPORTED;
    memcpy(addr, host, al);
    addr[al] = '\0';
    if (colon) {
        char *pe;
        port = strtol(colon + 1, &pe, 10);
        if (*pe || port <= 0 || port > 65535)
            return UNSUPPORTED;
    }
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((unsigned short)port);
    if (!strcmp(addr, "localhost"))
        strcpy(addr, "127.0.0.1");
    return inet_pton(AF_INET, addr, &sa->sin_addr) == 1 ? 0 : UNSUPPORTED;
}

/* wait_fd: 1 ready, 0 past the deadline, -1 error */
static int wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        int ms = -1;
        if (deadline > 0) {
            double left = deadline - now_s();
            if (left <= 0)
                return 0;
            ms = (int)(left * 1000) + 1;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, ms);
        if (r > 0)
            return 1;
        if (r == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* send_all: 0, 28 past the deadline, 55 failed */
static int send_all(conn_t *c, const char *p, size_t n)
{
    while (n > 0) {
        int w = wait_fd(c->fd, POLLOUT, c->deadline);
        if (w <= 0)
            return w == 0 ? 28 : 55;
        ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return 55;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* fill: read more into c->buf; 0 (or eof set), 28 timeout, 56 error */
static int fill(conn_t *c)
{
    if (c->len + 65536 > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 131072;
        while (cap < c->len + 65536)
            cap *= 2;
        char *nb = realloc(c->buf, cap);
        if (!nb)
            return 56;
        c->buf = nb;
        c->cap = cap;
    }
    for (;;) {
        int w = wait_fd(c->fd, POLLIN, c->deadline);
        if (w <= 0)
            return w == 0 ? 28 : 56;
        ssize_t k = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k < 0)
            return errno == ECONNRESET && c->len == 0 ? 52 : 56;
        if (k == 0)
            c->eof = 1;
        c->len += (size_t)k;
        return 0;
    }
}

static void consume(conn_t *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

static int write_all(FILE *f, const char *p, size_t n)
{
    return f && n && fwrite(p, 1, n, f) != n ? -1 : 0;
}

/* read_head: the header block (through the blank line) at c->buf's start;
 * its length in *hl; 0, or an exit status */
static int read_head(conn_t *c, size_t *hl)
{
    for (;;) {
        char *e = c->len ? memmem(c->buf, c->len, "\r\n\r\n", 4) : NULL;
        if (e) {
            *hl = (size_t)(e - c->buf) + 4;
            return 0;
        }
        if (c->eof)
            return c->len == 0 ? 52 : 56;
        if (c->len > HEAD_MAX)
            return 56;
        int r = fill(c);
        if (r)
            return r;
    }
}

/* header_value: the value of header NAME in the block HEAD (length HL), or NULL */
static const char *header_value(const char *head, size_t hl, const char *name, size_t *vl)
{
    size_t nl = strlen(name);
    const char *p = memchr(head, '\n', hl), *end = head + hl;
    while (p && ++p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            break;
        if ((size_t)(eol - p) > nl && p[nl] == ':' && !strncasecmp(p, name, nl)) {
            const char *v = p + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = eol;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' '))
                ve--;
            *vl = (size_t)(ve - v);
            return v;
        }
        p = eol;
    }
    return NULL;
}

/* body_copy: N bytes (or to EOF when N < 0) from the connection to OUT */
static int body_copy(conn_t *c, long long n, FILE *out)
{
    while (n != 0) {
        if (c->len == 0) {
            if (c->eof)
                return n < 0 ? 0 : 18;
            int r = fill(c);
            if (r)
                return r;
            continue;
        }
        size_t k = n < 0 || (unsigned long long)n > c->len ? c->len : (size_t)n;
        if (write_all(out, c->buf, k))
            return 23;
        consume(c, k);
        if (n > 0)
            n -= (long long)k;
    }
    return 0;
}

/* body_chunked: a chunked body to OUT */
static int body_chunked(conn_t *c, FILE *out)
{
    for (;;) {
        char *eol;
        while (!(eol = c->len ? memmem(c->buf, c->len, "\r\n", 2) : NULL)) {
            if (c->eof || c->len > 4096)
                return 56;
            int r = fill(c);
            if (r)
                return r;
        }
        char *pe;
        unsigned long long size = strtoull(c->buf, &pe, 16);
        if (pe == c->buf)
            return 56;
        consume(c, (size_t)(eol - c->buf) + 2);
        if (size == 0)
            return 0;             /* trailers, if any, are not read */
        int r = body_copy(c, (long long)size, out);
        if (r)
            return r;
        while (c->len < 2) {
            if (c->eof)
                return 56;
            if ((r = fill(c)))
                return r;
        }
        if (memcmp(c->buf, "\r\n", 2))
            return 56;
        consume(c, 2);
    }
}

/* has_header: the user gave NAME (as "NAME: v", "NAME:" or "NAME;") */
static int has_header(const opts_t *o, const char *name)
{
    size_t nl = strlen(name);
    for (int i = 0; i < o->n_headers; i++)
        if (!strncasecmp(o->headers[i], name, nl) &&
            (o->headers[i][nl] == ':' || o->headers[i][nl] == ';'))
            return 1;
    return 0;
}

/* build_request: the request head into a malloc'd string */
static char *build_request(const opts_t *o, const char *host, const char *target, size_t body_len,
                           int has_body)
{
    size_t cap = 1024 + strlen(target) + strlen(host);
    for (int i = 0; i < o->n_headers; i++)
        cap += strlen(o->headers[i]) + 4;
    char *req = malloc(cap), *p = req;
    if (!req)
        return NULL;
    const char *method = o->method ? o->method : has_body ? "POST" : "GET";
    p += sprintf(p, "%s %s HTTP/1.1\r\n", method, target);
    if (!has_header(o, "Host"))
        p += sprintf(p, "Host: %s\r\n", host);
    if (!has_header(o, "User-Agent"))
        p += sprintf(p, "User-Agent: drover-http-tool\r\n");
    if (!has_header(o, "Accept"))
        p += sprintf(p, "Accept: */*\r\n");
    for (int i = 0; i < o->n_headers; i++) {
        const char *h = o->headers[i], *c = strpbrk(h, ":;");
        if (!c)
            continue;             /* curl ignores a header without ':' */
        if (*c == ';') {
            if (c[1] == '\0')
                p += sprintf(p, "%.*s:\r\n", (int)(c - h), h);
            else
                p += sprintf(p, "%s\r\n", h);
            continue;
        }
        const char *v = c + 1;
        while (*v == ' ')
            v++;
        if (*v)
            p += sprintf(p, "%s\r\n", h);
    }
    if (has_body) {
        if (!has_header(o, "Content-Length"))
            p += sprintf(p, "Content-Length: %zu\r\n", body_len);
        if (!has_header(o, "Content-Type"))
            p += sprintf(p, "Content-Type: application/x-www-form-urlencoded\r\n");
    }
    sprintf(p, "\r\n");
    return req;
}

/* read_file: the whole of PATH (malloc'd), or NULL */
static char *read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char *b = malloc((size_t)st.st_size + 1);
    size_t n = 0;
    while (b && n < (size_t)st.st_size) {
        ssize_t k = read(fd, b + n, (size_t)st.st_size - n);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    if (b && n != (size_t)st.st_size) {
        free(b);
        return NULL;
    }
    *len = n;
    return b;
}

/* exchange: one request and its answer; the exit status */
static int exchange(const opts_t *o, conn_t *c, int *code)
{
    struct sockaddr_in sa;
    char host[300];
    const char *target;
    if (split_url(o->url, o->path_as_is, &sa, host, sizeof host, &target))
        return UNSUPPORTED;
    size_t body_len = 0;
    char *file_body = NULL;
    const char *body = o->data;
    if (o->data_file) {
        if (!(file_body = read_file(o->data_file, &body_len)))
            return 26;            /* curl: read error */
        body = file_body;
    } else if (body)
        body_len = strlen(body);
    /* curl sends a body over 1 MiB after "Expect: 100-continue", and one
     * with a Transfer-Encoding header chunked: its own ways, left to it */
    if (body_len > 1024 * 1024 || has_header(o, "Transfer-Encoding") || has_header(o, "Expect")) {
        free(file_body);
        return UNSUPPORTED;
    }

    int rc = 0;
    FILE *hf = NULL, *bf = NULL;
    size_t hl, vl;
    char *req = build_request(o, host, target, body_len, body != NULL);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (!req || c->fd < 0) {
        rc = 7;
        goto out;
    }
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        if (errno != EINPROGRESS) {
            rc = 7;
            goto out;
        }
        int w = wait_fd(c->fd, POLLOUT, c->deadline), err = 0;
        socklen_t el = sizeof err;
        if (w == 0) {
            rc = 28;
            goto out;
        }
        if (w < 0 || getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
            rc = 7;
            goto out;
        }
    }
    /* a server may answer (413, 401) and close before the body is all sent:
     * the answer is read all the same */
    int sent = send_all(c, req, strlen(req));
    if (!sent && body_len)
        sent = send_all(c, body, body_len);
    if (sent == 28) {
        rc = sent;
        goto out;
    }

    for (;;) {                    /* interim 1xx answers come before the final one */
        if ((rc = read_head(c, &hl))) {
            if (sent && rc != 28)
                rc = sent;
            goto out;
        }
        if (hl < 12 || strncmp(c->buf, "HTTP/1.", 7) || c->buf[8] != ' ') {
            rc = 8;               /* curl: weird server reply */
            goto out;
        }
        *code = atoi(c->buf + 9);
        if (o->hdr_file && !hf && !(hf = fopen(o->hdr_file, "w"))) {
            rc = 23;
            goto out;
        }
        if (write_all(hf, c->buf, hl)) {
            rc = 23;
            goto out;
        }
        if (*code >= 200 || *code < 100)
            break;
        consume(c, hl);
    }
    if (o->out_file && !(bf = fopen(o->out_file, "w"))) {
        rc = 23;
        goto out;
    }
    const char *te = header_value(c->buf, hl, "Transfer-Encoding", &vl);
    int chunked = te && vl >= 7 && !strncasecmp(te + vl - 7, "chunked", 7);
    const char *cl = header_value(c->buf, hl, "Content-Length", &vl);
    long long n = cl ? strtoll(cl, NULL, 10) : -1;
    const char *method = o->method ? o->method : body ? "POST" : "GET";
    consume(c, hl);
    FILE *out = bf ? bf : stdout;
    if (!strcmp(method, "HEAD") || *code == 204 || *code == 304)
        n = 0;
    if (n == 0)
        rc = 0;
    else if (chunked)
        rc = body_chunked(c, out);
    else
        rc = body_copy(c, n, out);
out:
    if (hf && fclose(hf) && !rc)
        rc = 23;
    if (bf && fclose(bf) && !rc)
        rc = 23;
    free(req);
    free(file_body);
    return rc;
}

int main(int argc, char **argv)
{
    opts_t o = {0};
    if (parse_args(argc, argv, &o))
        return UNSUPPORTED;
    conn_t c = {.fd = -1};
    if (o.max_time > 0)
        c.deadline = now_s() + o.max_time;
    int code = 0;
    int rc = exchange(&o, &c, &code);
    if (c.fd >= 0)
        close(c.fd);
    free(c.buf);
    if (rc == UNSUPPORTED)
        return rc;
    fflush(stdout);
    if (o.write_code)
        printf("%03d", rc == 0 || code ? code : 0);
    return rc;
}
