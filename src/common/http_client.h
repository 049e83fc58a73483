/* http_client.h — the HTTP client of drover-agent (its calls to the head:
 * register, sync long-polls) and of the drover CLI (common/httpc.c, its
 * streamed predict and chunk uploads). Plain http:// is spoken over sockets
 * here (http1.h parses the answer: Content-Length, chunked or until close);
 * for https:// libcurl is loaded with dlopen at the first request
 * (http_tls.c), so a plain-http process never maps libcurl or a TLS stack.
 *
 * One request per connection ("Connection: close") unless keep-alive is
 * asked for (drv_hc_opts_t): a sync every couple of seconds does not need
 * it, and a fresh connection never meets a peer that timed it out; the CLI
 * keeps its connection across one command's requests (a kept connection
 * the server closed meanwhile is seen before it is used, and a request
 * whose answer never started on a reused connection is sent once more on
 * a fresh one). Not thread-safe: one owner thread per client.
 */
#ifndef DRV_HTTP_CLIENT_H
#define DRV_HTTP_CLIENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/http1.h"

#define DRV_HC_MAX_BODY (64u << 20)   /* answers over 64 MiB fail */
#define DRV_HC_NO_TIMEOUT_MS (400L * 24 * 3600 * 1000)   /* a timeout_ms of "none", in effect */

typedef struct drv_hc drv_hc_t;

typedef struct drv_hc_req {
    const char *method;          /* "POST" */
    const char *path;            /* "/v1/agent/sync", with any query */
    const char *bearer;          /* Authorization: Bearer ...; NULL = none */
    const char *content_type;    /* of body; NULL = none */
    const char *body;
    size_t body_len;
    /* instead of body: body_len bytes streamed from read_body(ud, off, buf,
     * n), which puts up to n bytes from offset off into buf and returns how
     * many (> 0), or -1 (the request fails). It may be asked again from 0
     * when the request is sent once more on a fresh connection. */
    long (*read_body)(void *ud, uint64_t off, char *buf, size_t n);
    const char *const *headers;  /* more "Name: value" lines, NULL-terminated; NULL = none */
    long timeout_ms;             /* the whole exchange (0: 300 s) */
    long connect_timeout_ms;
    const atomic_bool *stop;     /* when it becomes true the request is abandoned; may be NULL */
    bool unverified;             /* https: do not check the server's certificate (only for
                                  * GET /v1/tls/ca, whose answer is checked against a pin) */
    const char *ca_pem;          /* https: the CA (PEM) to verify against; NULL: the process's
                                  * (drv_hc_tls_set_ca), else the system's store */
    size_t max_body;             /* a buffered answer over this fails (0: DRV_HC_MAX_BODY) */
    /* a streamed answer (optional): on_head once with the final status and
     * headers (valid during the call), then on_body with the body's bytes
     * as they come; resp->body stays NULL. A -1 from either ends the
     * request with -1. ud goes to these and to read_body. */
    int (*on_head)(void *ud, int status, const drv_h1_header_t *h, size_t nh);
    int (*on_body)(void *ud, const char *p, size_t n);
    void *ud;
} drv_hc_req_t;

typedef struct drv_hc_resp {
    long status;
    char *body;                  /* malloc'd, NUL-terminated (NULL when streamed) */
    size_t len;
    /* why a request failed (-1), for callers that act on it */
    bool refused;                /* no connection was made (refused, unreachable, name
                                  * unknown): the request never left */
    bool too_big;                /* the answer was over max_body */
} drv_hc_resp_t;

/* Per-client settings (drv_hc_set_opts); NULL strings keep the defaults. */
typedef struct drv_hc_opts {
    bool keep_alive;             /* keep the connection for the next request */
    const char *user_agent;      /* default "drover-agent"; the string must outlive c */
    const char *untrusted_hint;  /* appended to an https certificate failure (default:
                                  * the agent's, naming --ca-hash/--ca-file); must outlive c */
} drv_hc_opts_t;

/* base_url: "http[s]://HOST[:PORT][/PATH]"; PATH (trailing slashes dropped)
 * is prepended to every request's path, as with a head behind a proxy. */
drv_hc_t *drv_hc_create(const char *base_url, drv_error_t *err);
void drv_hc_destroy(drv_hc_t *c);
void drv_hc_set_opts(drv_hc_t *c, const drv_hc_opts_t *o);
/* Split an absolute URL ("https://host:port/p?q") into its origin
 * ("https://host:port", into base, size n) and the rest (*path: "/p?q", or
 * "/" when there is none). -1 when it is no http(s) URL or base is short. */
int drv_hc_split_url(const char *url, char *base, size_t n, const char **path);

/* 0 with resp filled for any HTTP answer; -1 when there was none (refused,
 * timed out, stopped, malformed answer), err->message saying why and
 * resp->refused / too_big set. A method that is not a token, a path not
 * starting with '/' or holding a space or control character, or a bearer,
 * content type or header line holding CR, LF or another control character
 * (a header line also needs its ':') is refused before any socket is
 * opened. */
int drv_hc_request(drv_hc_t *c, const drv_hc_req_t *rq, drv_hc_resp_t *resp, drv_error_t *err);
void drv_hc_resp_free(drv_hc_resp_t *resp);

/* --- http_tls.c: https through libcurl loaded at run time -------------------- */
typedef struct drv_hc_tls drv_hc_tls_t;
/* dlopen libcurl.so.4 (once per process); NULL with err when it is missing. */
drv_hc_tls_t *drv_hc_tls_create(drv_error_t *err);
void drv_hc_tls_destroy(drv_hc_tls_t *t);
/* The CA (PEM) every later https request verifies the head against instead
 * of the system's store; NULL: the system's. Set before any client thread
 * runs (agent start-up, trust.c). */
int drv_hc_tls_set_ca(const char *pem, drv_error_t *err);
int drv_hc_tls_request(drv_hc_tls_t *t, const char *base_url, const drv_hc_opts_t *o,
                       const drv_hc_req_t *rq, drv_hc_resp_t *resp, drv_error_t *err);
/* The CA (PEM) that https artifact origins (an https source, a presigned
 * S3 URL, as the head's redirects name them) must chain to instead of the
 * system's store (--origin-ca-file); NULL: the system's. Set at start-up. */
int drv_hc_tls_set_origin_ca(const char *pem, drv_error_t *err);

/* One streaming https GET (the node cache's ranged reads, fetch.c): a
 * fresh handle per call, redirects not followed (the caller follows them
 * and decides what credential goes on). on_head gets the final answer's
 * status and headers before any body byte (or at the end of a bodiless
 * answer); a -1 from it or from on_body ends the transfer and the call
 * returns -1 with msg "" (the callback keeps its own reason). Otherwise -1
 * with msg saying why (TLS, connect, stall_ms of silence, the deadline,
 * stop). The URL never appears in msg (a presigned query is a secret). */
#define DRV_HC_GET_MAX_HEADERS 64
typedef struct drv_hc_get {
    const char *url;             /* https://... */
    const char *range;           /* "bytes=A-B"; NULL = none */
    const char *bearer;          /* NULL = none */
    bool origin;                 /* trust: the origin CA (true) or the head's (false) */
    long stall_ms;               /* of silence, and to connect; 0 = 30 s */
    int64_t deadline_ms;         /* monotonic; 0 = none */
    const atomic_bool *stop;
    int (*on_head)(void *ud, int status, const drv_h1_header_t *h, size_t nh);
    int (*on_body)(void *ud, const char *p, size_t n);
    void *ud;
} drv_hc_get_t;
int drv_hc_tls_get(const drv_hc_get_t *g, char *msg, size_t ml);

#endif
