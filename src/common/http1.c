/* http1.c — see http1.h. RFC 9112 message syntax, the strict subset the
 * agent needs: origin-form targets, Content-Length or chunked bodies. */
#include "common/http1.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_LINE 256             /* a chunk-size or trailer line */
#define MAX_METHOD 16

static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decode in[0..n) into out (size cap). -1: bad escape, %00 or too long. */
static int pct_decode(const char *in, size_t n, char *out, size_t cap)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        int ch = (unsigned char)in[i];
        if (ch == '%') {
            if (i + 2 >= n)
                return -1;
            int a = hexval((unsigned char)in[i + 1]), b = hexval((unsigned char)in[i + 2]);
            if (a < 0 || b < 0)
                return -1;
            ch = a * 16 + b;
            if (ch == 0)
                return -1;
            i += 2;
        }
        if (j + 1 >= cap)
            return -1;
        out[j++] = (char)ch;
    }
    out[j] = '\0';
    return 0;
}

/* Does the comma-separated list v hold token tok (case-insensitive)? */
static bool list_has(const char *v, const char *tok)
{
    size_t tl = strlen(tok);
    while (*v) {
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        const char *e = v;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > v && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if ((size_t)(t - v) == tl && strncasecmp(v, tok, tl) == 0)
            return true;
        v = e;
    }
    return false;
}

/* Parse a decimal Content-Length (digits only, below 2^62). -1 if malformed. */
static int64_t parse_length(const char *v)
{
    if (!*v || strlen(v) > 18)
        return -1;
    int64_t n = 0;
    for (; *v; v++) {
        if (*v < '0' || *v > '9')
            return -1;
        n = n * 10 + (*v - '0');
    }
    return n;
}

const char *drv_h1_header(const drv_h1_header_t *h, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(h[i].name, name) == 0)
            return h[i].value;
    return NULL;
}

/* Split the header lines of a head (NUL-terminated lines already cut at
 * each '\n'; p points at the first header line, end past the last) into
 * h[]. Shared by requests and responses. 0, or -1 with *why. */
static int parse_headers(char *p, char *end, drv_h1_header_t *h, size_t *nh, int64_t *clen,
                         bool *chunked, int *te_other, bool *conn_close, bool *conn_keep,
                         const char **why)
{
    *nh = 0;
    *clen = -1;
    *chunked = false;
    *te_other = 0;
    *conn_close = *conn_keep = false;
    while (p < end) {
        char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        char *lend = eol;
        if (lend > p && lend[-1] == '\r')
            lend--;
        *lend = '\0';
        if (lend == p)
            break;   /* the blank line */
        if (*p == ' ' || *p == '\t')
            return *why = "obsolete header line folding", -1;
        char *colon = p;
        while (colon < lend && is_tchar((unsigned char)*colon))
            colon++;
        if (colon == p || colon == lend || *colon != ':')
            return *why = "malformed header line", -1;
        *colon = '\0';
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        char *ve = lend;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            *--ve = '\0';
        for (char *q = v; q < ve; q++)
            if (((unsigned char)*q < 32 && *q != '\t') || *q == 127)
                return *why = "control character in a header value", -1;
        if (*nh == DRV_H1_MAX_HEADERS)
            return *why = "too many header lines", -1;
        h[*nh].name = p;
        h[*nh].value = v;
        (*nh)++;
        if (strcasecmp(p, "Content-Length") == 0) {
            int64_t n = parse_length(v);
            if (n < 0 || (*clen >= 0 && *clen != n))
                return *why = "malformed or conflicting Content-Length", -1;
            *clen = n;
        } else if (strcasecmp(p, "Transfer-Encoding") == 0) {
            if (strcasecmp(v, "chunked") == 0 && !*chunked)
                *chunked = true;
            else
                *te_other = 1;
        } else if (strcasecmp(p, "Connection") == 0) {
            *conn_close |= list_has(v, "close");
            *conn_keep |= list_has(v, "keep-alive");
        }
        p = eol + 1;
    }
    if (*chunked && *clen >= 0)
        return *why = "both Content-Length and Transfer-Encoding", -1;
    return 0;
}

/* Where the head in buf[0..len) ends (past the blank line), or 0. */
static size_t head_end(const char *buf, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (buf[i] != '\n')
            continue;
        if (buf[i + 1] == '\n')
            return i + 2;
        if (buf[i + 1] == '\r' && i + 2 < len && buf[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

int drv_h1_parse_request(char *buf, size_t len, drv_h1_request_t *rq, int *status,
                         const char **why)
{
    memset(rq, 0, sizeof *rq);
    rq->content_length = -1;
    size_t scan = len < DRV_H1_MAX_HEAD ? len : DRV_H1_MAX_HEAD;
    size_t hl = head_end(buf, scan);
    if (!hl) {
        if (len >= DRV_H1_MAX_HEAD)
            return *status = 431, *why = "request head too large", -1;
        /* an obviously bad request line fails early, without waiting */
        for (size_t i = 0; i < scan && buf[i] != ' '; i++)
            if (!(buf[i] >= 'A' && buf[i] <= 'Z') || i >= MAX_METHOD)
                return *status = 400, *why = "malformed request line", -1;
        return 0;
    }
    *status = 400;
    /* the request line: METHOD SP target SP HTTP/1.x CRLF */
    char *eol = memchr(buf, '\n', hl);
    if (eol == buf || eol[-1] != '\r')
        return *why = "request line must end in CRLF", -1;
    eol[-1] = '\0';
    char *m = buf, *sp1 = strchr(m, ' ');
    if (!sp1 || sp1 == m || sp1 - m > MAX_METHOD)
        return *why = "malformed request line", -1;
    for (char *q = m; q < sp1; q++)
        if (*q < 'A' || *q > 'Z')
            return *why = "malformed method", -1;
    *sp1 = '\0';
    char *t = sp1 + 1, *sp2 = strchr(t, ' ');
    if (!sp2 || *t != '/')
        return *why = "malformed request target", -1;
    *sp2 = '\0';
    for (char *q = t; *q; q++)
        if ((unsigned char)*q <= 32 || (unsigned char)*q >= 127)
            return *why = "malformed request target", -1;
    const char *ver = sp2 + 1;
    if (strncmp(ver, "HTTP/1.", 7) != 0 || (ver[7] != '0' && ver[7] != '1') || ver[8])
        return *status = strncmp(ver, "HTTP/", 5) == 0 ? 505 : 400,
               *why = "unsupported HTTP version", -1;
    rq->method = m;
    rq->target = t;
    rq->minor = ver[7] - '0';
    char *qm = strchr(t, '?');
    size_t plen = qm ? (size_t)(qm - t) : strlen(t);
    rq->query = qm ? qm + 1 : "";
    if (plen >= sizeof rq->path)
        return *status = 414, *why = "request path too long", -1;
    if (pct_decode(t, plen, rq->path, sizeof rq->path) < 0)
        return *why = "malformed percent-encoding in the path", -1;
    int te_other;
    bool cclose, ckeep;
    if (parse_headers(eol + 1, buf + hl, rq->h, &rq->nh, &rq->content_length, &rq->chunked,
                      &te_other, &cclose, &ckeep, why) < 0)
        return -1;
    if (te_other)
        return *status = 501, *why = "unsupported transfer coding", -1;
    if (rq->minor == 1 && !drv_h1_header(rq->h, rq->nh, "Host"))
        return *why = "HTTP/1.1 request without Host", -1;
    rq->keep_alive = rq->minor == 1 ? !cclose : ckeep && !cclose;
    *status = 0;
    return (int)hl;
}

int drv_h1_query_get(const char *query, const char *key, char *out, size_t n)
{
    size_t kl = strlen(key);
    const char *p = query;
    while (p && *p) {
        const char *amp = strchr(p, '&');
        size_t seg = amp ? (size_t)(amp - p) : strlen(p);
        if (seg >= kl && strncmp(p, key, kl) == 0 && (seg == kl || p[kl] == '=')) {
            const char *v = seg == kl ? p + kl : p + kl + 1;
            size_t vl = seg - (size_t)(v - p);
            return pct_decode(v, vl, out, n) < 0 ? -1 : 1;
        }
        p = amp ? amp + 1 : NULL;
    }
    return 0;
}

/* --- responses ------------------------------------------------------------ */

void drv_h1_response_init(drv_h1_response_t *r, size_t max_body, bool no_body)
{
    memset(r, 0, offsetof(drv_h1_response_t, head));
    r->max_body = max_body;
    r->no_body = no_body;
    r->content_length = -1;
    r->st = DRV_H1_HEAD;
    r->nhead = 0;
    r->left = 0;
    r->cap = 0;
}

void drv_h1_response_free(drv_h1_response_t *r)
{
    free(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
}

static int fail_as(drv_h1_response_t *r, enum drv_h1_err e, const char **why, const char *msg)
{
    r->st = DRV_H1_ERROR;
    r->err = e;
    *why = msg;
    return -1;
}

static int fail(drv_h1_response_t *r, const char **why, const char *msg)
{
    return fail_as(r, DRV_H1_E_MALFORMED, why, msg);
}

/* Make room for add more body bytes (and a NUL) within max_body. */
static int reserve(drv_h1_response_t *r, uint64_t add, const char **why)
{
    if (r->on_body)
        return 0;   /* streamed to the receiver: nothing is kept */
    if (add > r->max_body || r->len + add > r->max_body)
        return fail_as(r, DRV_H1_E_TOO_LARGE, why, "response body too large");
    size_t need = r->len + (size_t)add + 1;
    if (need <= r->cap)
        return 0;
    size_t cap = r->cap ? r->cap : 1024;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *nb = realloc(r->body, cap);
    if (!nb)
        return fail_as(r, DRV_H1_E_NOMEM, why, "out of memory");
    r->body = nb;
    r->cap = cap;
    return 0;
}

static int done(drv_h1_response_t *r, const char **why)
{
    if (!r->on_body) {
        if (reserve(r, 0, why) < 0)
            return -1;
        r->body[r->len] = '\0';
    }
    r->st = DRV_H1_DONE;
    return 1;
}

/* Body bytes: to the receiver, or kept (reserve() made room). */
static int put_body(drv_h1_response_t *r, const char *p, size_t n, const char **why)
{
    if (r->on_body)
        return r->on_body(r->ud, p, n) < 0
                   ? fail_as(r, DRV_H1_E_ABORTED, why, "aborted by the receiver")
                   : 0;
    memcpy(r->body + r->len, p, n);
    r->len += n;
    return 0;
}

/* The head is complete in r->head[0..nhead): status line and headers. */
static int parse_head(drv_h1_response_t *r, const char **why)
{
    char *h = r->head, *end = h + r->nhead;
    char *eol = memchr(h, '\n', r->nhead);
    *eol = '\0';
    if (eol > h && eol[-1] == '\r')
        eol[-1] = '\0';
    if (strncmp(h, "HTTP/1.", 7) != 0 || (h[7] != '0' && h[7] != '1') || h[8] != ' ' ||
        h[9] < '1' || h[9] > '5' || h[10] < '0' || h[10] > '9' || h[11] < '0' || h[11] > '9' ||
        (h[12] != ' ' && h[12] != '\0'))
        return fail(r, why, "malformed status line");
    int minor = h[7] - '0';
    r->status = (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
    drv_h1_header_t hd[DRV_H1_MAX_HEADERS];
    size_t nh;
    int64_t clen;
    bool chunked, cclose, ckeep;
    int te_other;
    if (parse_headers(eol + 1, end, hd, &nh, &clen, &chunked, &te_other, &cclose, &ckeep, why) <
        0)
        return fail(r, why, *why);
    if (te_other)
        return fail(r, why, "unsupported transfer coding");
    r->keep_alive = minor == 1 ? !cclose : ckeep && !cclose;
    r->nhead = 0;
    if (r->status < 200) {   /* 1xx: an interim answer; the real one follows */
        r->status = 0;
        return 0;
    }
    r->content_length = chunked ? -1 : clen;
    if (r->on_head && r->on_head(r->ud, r->status, hd, nh) < 0)
        return fail_as(r, DRV_H1_E_ABORTED, why, "aborted by the receiver");
    if (r->no_body || r->status == 204 || r->status == 304)
        return done(r, why);
    if (chunked) {
        r->st = DRV_H1_CHUNK_SIZE;
    } else if (clen >= 0) {
        if (reserve(r, (uint64_t)clen, why) < 0)
            return -1;
        r->left = (uint64_t)clen;
        r->st = DRV_H1_BODY;
        if (!r->left)
            return done(r, why);
    } else {
        r->keep_alive = false;
        r->st = DRV_H1_UNTIL_CLOSE;
    }
    return 0;
}

/* A chunk-size, chunk-end or trailer line is complete in r->head. */
static int line_done(drv_h1_response_t *r, const char **why)
{
    char *l = r->head;
    size_t n = r->nhead - 1;           /* drop '\n' */
    if (n && l[n - 1] == '\r')
        n--;
    l[n] = '\0';
    r->nhead = 0;
    if (r->st == DRV_H1_CHUNK_END) {
        if (n)
            return fail(r, why, "chunk not followed by CRLF");
        r->st = DRV_H1_CHUNK_SIZE;
        return 0;
    }
    if (r->st == DRV_H1_TRAILER) {
        if (!n)
            return done(r, why);
        r->left += n + 2;   /* trailer bytes so far */
        return r->left > DRV_H1_MAX_HEAD ? fail(r, why, "trailer too large") : 0;
    }
    uint64_t size = 0;
    size_t i = 0;
    for (; i < n && hexval((unsigned char)l[i]) >= 0; i++) {
        if (i >= 15)
            return fail_as(r, DRV_H1_E_TOO_LARGE, why, "chunk size too large");
        size = size * 16 + (uint64_t)hexval((unsigned char)l[i]);
    }
    while (i < n && (l[i] == ' ' || l[i] == '\t'))
        i++;
    if (i == 0 || (i < n && l[i] != ';'))
        return fail(r, why, "malformed chunk size");
    if (size == 0) {
        r->st = DRV_H1_TRAILER;
        r->left = 0;
        return 0;
    }
    if (reserve(r, size, why) < 0)
        return -1;
    r->left = size;
    r->st = DRV_H1_CHUNK_DATA;
    return 0;
}

int drv_h1_response_feed(drv_h1_response_t *r, const char *data, size_t n, size_t *used,
                         const char **why)
{
    size_t i = 0;
    int rc = 0;
    while (i < n && rc == 0) {
        switch (r->st) {
        case DRV_H1_HEAD: {
            if (r->nhead == 0 && (data[i] == '\r' || data[i] == '\n')) {
                i++;   /* empty lines before a status line (a stray CRLF) are ignored */
                break;
            }
            /* a line at a time: up to and including the next LF */
            const char *lf = memchr(data + i, '\n', n - i);
            size_t take = lf ? (size_t)(lf - (data + i)) + 1 : n - i;
            if (take > DRV_H1_MAX_HEAD - 1 - r->nhead) {
                rc = fail(r, why, "response head too large");
                break;
            }
            memcpy(r->head + r->nhead, data + i, take);
            r->nhead += take, i += take;
            /* the first blank line ends the head: look at the tail only */
            if (lf && r->nhead >= 2 &&
                (r->head[r->nhead - 2] == '\n' ||
                 (r->nhead >= 3 && r->head[r->nhead - 2] == '\r' && r->head[r->nhead - 3] == '\n')))
                rc = parse_head(r, why);
            break;
        }
        case DRV_H1_CHUNK_SIZE:
        case DRV_H1_CHUNK_END:
        case DRV_H1_TRAILER:
            if (r->nhead >= MAX_LINE) {
                rc = fail(r, why, "chunk or trailer line too long");
                break;
            }
            r->head[r->nhead++] = data[i++];
            if (r->head[r->nhead - 1] == '\n')
                rc = line_done(r, why);
            break;
        case DRV_H1_BODY:
        case DRV_H1_CHUNK_DATA: {
            size_t take = n - i < r->left ? n - i : (size_t)r->left;
            if (put_body(r, data + i, take, why) < 0) {
                rc = -1;
                break;
            }
            i += take, r->left -= take;
            if (!r->left) {
                if (r->st == DRV_H1_BODY)
                    rc = done(r, why);
                else
                    r->st = DRV_H1_CHUNK_END;
            }
            break;
        }
        case DRV_H1_UNTIL_CLOSE: {
            size_t take = n - i;
            if (reserve(r, take, why) < 0 || put_body(r, data + i, take, why) < 0) {
                rc = -1;
                break;
            }
            i += take;
            break;
        }
        case DRV_H1_DONE:
            rc = 1;
            break;
        case DRV_H1_ERROR:
            *why = "response already failed";
            rc = -1;
            break;
        }
    }
    if (rc == 0 && r->st == DRV_H1_DONE)
        rc = 1;
    if (used)
        *used = i;
    return rc;
}

int drv_h1_response_eof(drv_h1_response_t *r, const char **why)
{
    if (r->st == DRV_H1_DONE)
        return 1;
    if (r->st == DRV_H1_UNTIL_CLOSE)
        return done(r, why);
    if (r->st != DRV_H1_ERROR)
        fail_as(r, DRV_H1_E_CLOSED, why,
                r->st == DRV_H1_HEAD && r->nhead == 0 && r->status == 0
                    ? "connection closed before any answer"
                    : "connection closed in the middle of the answer");
    return -1;
}
