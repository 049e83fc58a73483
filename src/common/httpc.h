/* httpc.h — a small JSON-over-HTTP client for droverd's REST API (the
 * drover CLI's), on common/http_client.h: plain http over sockets, https
 * through libcurl loaded at the first https request (no libcurl linked).
 *
 * One drv_httpc_t holds a base URL ("http://127.0.0.1:7480"), an optional
 * bearer token and one connection kept alive across calls. It is not
 * thread-safe: one owner thread per client.
 *
 * Transport failures (connection refused, DNS, timeout) fill err with
 * status 0, code "unavailable" and "cannot reach droverd at URL: reason".
 * drv_httpc_json() also turns a non-2xx answer into err from the server's
 * error body {"error": {"code", "message", "field"}}.
 */
#ifndef DRV_HTTPC_H
#define DRV_HTTPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "common/error.h"
#include "common/http_client.h"

#include "common/httpsink.h"   /* DRV_HTTPC_MAX_BODY, the body sink */

typedef struct drv_httpc drv_httpc_t;

typedef struct drv_http_resp {
    long status;             /* HTTP status */
    char *body;              /* malloc'd, NUL-terminated ("" when empty) */
    size_t len;
} drv_http_resp_t;

/* base_url without a trailing path ("http://host:port"); token may be NULL. */
drv_httpc_t *drv_httpc_create(const char *base_url, const char *token, drv_error_t *err);
void drv_httpc_destroy(drv_httpc_t *c);

const char *drv_httpc_base_url(const drv_httpc_t *c);
/* https: verify the head against ca_pem (PEM; NULL: the system's store), or
 * not at all when verify is false (only for GET /v1/tls/ca, whose answer
 * the caller checks against a pin). TLS 1.2 or later either way. */
int drv_httpc_set_tls(drv_httpc_t *c, const char *ca_pem, bool verify, drv_error_t *err);
/* Whole-request timeout in seconds (default 300; 0 = none). */
void drv_httpc_set_timeout(drv_httpc_t *c, long seconds);

/* Send method path (which starts with "/", may carry a query string) with
 * an optional JSON body and optional If-Match value (NULL = none). Returns
 * 0 with resp filled for any HTTP answer, -1 on transport failure. */
int drv_httpc_request(drv_httpc_t *c, const char *method, const char *path,
                      const json_t *body, const char *if_match, drv_http_resp_t *resp,
                      drv_error_t *err);
void drv_http_resp_free(drv_http_resp_t *resp);

/* A client of its own to the same heads (all of them, from the current
 * one; or only the current one), with the same token, TLS settings and
 * timeout: for another thread, or a streamed request beside c's. */
drv_httpc_t *drv_httpc_dup(const drv_httpc_t *c, bool current_only, drv_error_t *err);

/* One request with a streamed answer or body (rq's on_head/on_body,
 * read_body: a streamed predict, chunk uploads) to the current URL, with
 * the client's token, TLS settings and connection (rq->timeout_ms 0: the
 * client's timeout). No failover: resp->refused says whether to move on
 * (drv_httpc_move_on). -1 with err "cannot reach droverd at URL: reason"
 * when there was no answer. */
int drv_httpc_send(drv_httpc_t *c, const drv_hc_req_t *rq, drv_hc_resp_t *resp,
                   drv_error_t *err);

/* Several heads, for requests made outside drv_httpc_request (a streamed
 * predict, chunk uploads: drv_httpc_send) to drv_httpc_base_url():
 * after one that was refused (never reached a server) or answered resp,
 * true when the client moved to another URL (the next, or the leader a
 * standby's 503 not_leader named; a full round waits 0.5 s, for at most
 * 15 s) and the request may be sent again there; false: take this answer
 * (or error: err gets a prefix after a round of refusals). f starts
 * zeroed, one per request. */
typedef struct drv_httpc_failover {
    long waited_ms;
    int misses, follows;
} drv_httpc_failover_t;
bool drv_httpc_move_on(drv_httpc_t *c, drv_httpc_failover_t *f, bool refused,
                       const drv_http_resp_t *resp, drv_error_t *err);

/* Request and decode: on 2xx returns the parsed JSON body (json null for an
 * empty body) and, when status is not NULL, the HTTP status. On a non-2xx
 * answer returns NULL with err filled from the server's error object
 * (err->status = HTTP status) and *status set. */
json_t *drv_httpc_json(drv_httpc_t *c, const char *method, const char *path,
                       const json_t *body, const char *if_match, long *status,
                       drv_error_t *err);

/* Percent-encode s for use as one path segment or query value into out
 * (size n). Returns -1 when it does not fit. */
int drv_http_escape(const char *s, char *out, size_t n);

#endif
