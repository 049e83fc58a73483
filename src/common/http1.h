/* http1.h — HTTP/1.1 message parsing for drover-agent's own small server
 * (agent/httpd.c) and clients (common/http_client.c, agent/health.c), which
 * replace libmicrohttpd and libcurl there (their TLS stacks were most of
 * the agent's memory), for the gateway's server (gateway/serve.c) and its
 * client to replicas (gateway/upconn.c, with the streaming mode below). Pure functions over caller-owned buffers; no I/O, no
 * globals, so any thread may use them.
 *
 * Bounded by design: a request or response head is at most DRV_H1_MAX_HEAD
 * bytes and DRV_H1_MAX_HEADERS header lines; a response body is at most
 * the caller's max_body; a chunk-size line at most 256 bytes. Anything
 * malformed, ambiguous (Content-Length with chunked, two different
 * Content-Lengths, bare LF line ends in the request line, obs-fold) or
 * over a bound is an error, never a crash or a guess.
 */
#ifndef DRV_HTTP1_H
#define DRV_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DRV_H1_MAX_HEAD 16384
#define DRV_MAX_BODY (1024 * 1024)   /* request bodies over 1 MiB -> 413 (API and gateways) */
#define DRV_H1_MAX_HEADERS 64

typedef struct drv_h1_header {
    const char *name, *value;    /* NUL-terminated, inside the parsed buffer */
} drv_h1_header_t;

/* --- requests (server side) ---------------------------------------------- */

typedef struct drv_h1_request {
    const char *method;          /* "GET" */
    const char *target;          /* "/logs/r1?offset=0" as sent */
    char path[1024];             /* "/logs/r1", percent-decoded; never contains NUL */
    const char *query;           /* "offset=0", "" when none */
    int minor;                   /* HTTP/1.<minor>: 0 or 1 */
    drv_h1_header_t h[DRV_H1_MAX_HEADERS];
    size_t nh;
    int64_t content_length;      /* -1: none */
    bool chunked;
    bool keep_alive;             /* 1.1 without "Connection: close", or 1.0 with keep-alive */
} drv_h1_request_t;

/* Parse the request head at the start of buf[0..len), in place (it writes
 * NULs into buf; rq points into it). Returns the head's length in bytes
 * (> 0, up to and including the blank line) when complete, 0 when more
 * bytes are needed, and -1 with *status (400, 431 head too large, 414
 * path too long, 501 transfer coding, 505 version) and *why filled. */
int drv_h1_parse_request(char *buf, size_t len, drv_h1_request_t *rq, int *status,
                         const char **why);

/* The value of the first header called name (case-insensitive), or NULL. */
const char *drv_h1_header(const drv_h1_header_t *h, size_t n, const char *name);

/* The value of key in a query string ("a=1&b=2"), percent-decoded into out
 * (size n). 1 found, 0 absent, -1 malformed or too long. */
int drv_h1_query_get(const char *query, const char *key, char *out, size_t n);

/* --- responses (client side) --------------------------------------------- */

enum drv_h1_resp_state { DRV_H1_HEAD, DRV_H1_BODY, DRV_H1_CHUNK_SIZE, DRV_H1_CHUNK_DATA,
                         DRV_H1_CHUNK_END, DRV_H1_TRAILER, DRV_H1_UNTIL_CLOSE, DRV_H1_DONE,
                         DRV_H1_ERROR };

/* Why a response failed (drv_h1_response_t.err), for callers that act on
 * the kind of failure; *why keeps the readable message. */
enum drv_h1_err {
    DRV_H1_E_NONE = 0,
    DRV_H1_E_MALFORMED,          /* bad syntax, unsupported coding, a head or line over its bound */
    DRV_H1_E_TOO_LARGE,          /* the body is over max_body (status is known) */
    DRV_H1_E_NOMEM,
    DRV_H1_E_CLOSED,             /* the peer closed before the answer was complete */
    DRV_H1_E_ABORTED,            /* an on_head / on_body callback said stop */
};

typedef struct drv_h1_response {
    /* set by the caller before the first feed */
    size_t max_body;             /* a larger body is an error */
    bool no_body;                /* the request was HEAD */
    /* streaming (optional; set after drv_h1_response_init, which clears
     * them): on_head is called once with the final (>= 200) status line's
     * headers, valid during the call only; on_body then gets the body's
     * bytes as they come (chunked framing removed) instead of body/len,
     * with no max_body bound. A callback returning -1 fails the feed with
     * "aborted by the receiver". */
    int (*on_head)(void *ud, int status, const drv_h1_header_t *h, size_t nh);
    int (*on_body)(void *ud, const char *p, size_t n);
    void *ud;
    /* results */
    int status;                  /* 100..599 once the head is in */
    bool keep_alive;             /* the connection may carry another request */
    int64_t content_length;      /* of the final answer: -1 none (chunked or until close) */
    char *body;                  /* malloc'd, NUL-terminated once DONE; the caller frees */
    size_t len;
    enum drv_h1_err err;         /* set with the -1 of feed/eof */
    /* parser state */
    enum drv_h1_resp_state st;
    char head[DRV_H1_MAX_HEAD];
    size_t nhead;
    uint64_t left;               /* bytes of the body or of the chunk still to come */
    size_t cap;
} drv_h1_response_t;

/* Start parsing a response: r zeroed or just drv_h1_response_free()d. */
void drv_h1_response_init(drv_h1_response_t *r, size_t max_body, bool no_body);
/* Feed n received bytes. Returns 1 when the response is complete (bytes
 * after it are not consumed: *used says how many were), 0 when more are
 * needed, -1 on a malformed or oversized response (*why and r->err filled). */
int drv_h1_response_feed(drv_h1_response_t *r, const char *data, size_t n, size_t *used,
                         const char **why);
/* The peer closed the connection: 1 when that completes the response (a
 * body delimited by the close), -1 when the response is truncated. */
int drv_h1_response_eof(drv_h1_response_t *r, const char **why);
/* Free the body (the struct itself is the caller's). */
void drv_h1_response_free(drv_h1_response_t *r);

#endif
