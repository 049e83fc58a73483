/* api.h — the REST API's request/response model, shared by the HTTP glue
 * (http.c), the route table (routes.c) and every handler (h_*.c).
 *
 * A handler is a plain function of (request, response): it never sees
 * libmicrohttpd, so the unit tests call handlers directly. A handler that
 * wrote to the store sets resp->wait_seq; the HTTP layer holds the answer
 * back (connection suspended, no thread blocked) until that write is durable.
 */
#ifndef DRV_API_H
#define DRV_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "common/error.h"
#include "common/http1.h"   /* DRV_MAX_BODY */
#include "common/secret.h"

#define DRV_MAX_QUERY 16
#define DRV_MAX_PARAMS 4

typedef struct drv_principal {
    char user[64];           /* user id */
    bool admin;              /* role == admin */
    unsigned scopes;         /* DRV_SCOPE_* */
    char token_id[64];       /* token used; "" for node credentials */
} drv_principal_t;

typedef struct drv_kv {
    const char *key;
    const char *value;
} drv_kv_t;

struct drv_head;             /* state/head.h: the daemon's context */
struct drv_upload;           /* api/upload.h: a body streamed to a file */

typedef struct drv_req {
    const char *method;              /* "GET", "POST", ... */
    const char *path;                /* without the query string */
    const char *params[DRV_MAX_PARAMS]; /* path captures, in order */
    size_t n_params;
    drv_kv_t query[DRV_MAX_QUERY];   /* decoded query arguments */
    size_t n_query;
    const char *body;                /* NUL-terminated; NULL when empty */
    size_t body_len;
    const char *if_match;            /* If-Match header or NULL */
    const char *authorization;       /* Authorization header or NULL */
    bool resumed;                    /* re-run after a hold (long poll) ended */
    const drv_principal_t *who;      /* NULL only on unauthenticated routes */
    const void *route_arg;           /* the matched route's arg */
    struct drv_head *head;
    void *conn;                      /* the HTTP connection (for drv_req_header); NULL in tests */
    const char *remote;              /* the client's address ("" or NULL: unknown) */
    struct drv_upload *upload;       /* streamed body (blob chunks) or NULL; body is then NULL */
} drv_req_t;

typedef struct drv_resp {
    int status;
    char *body;              /* malloc'd, owned by the response */
    size_t len;
    const char *content_type; /* static string; default application/json */
    int64_t etag;            /* resource_version for ETag; 0 = none */
    char location[2560];     /* Location header, "" = none (a presigned URL fits) */
    int retry_after;         /* Retry-After seconds, 0 = none */
    uint64_t wait_seq;       /* answer only once store seq >= this (0 = now) */
    const char *header_name; /* one extra response header (static name), NULL = none */
    char header_value[64];
    const drv_kv_t *headers; /* more static headers, {NULL, NULL}-terminated; NULL = none */
    char csp[1280];          /* Content-Security-Policy, "" = none (the console's: api/cors.h) */
    int hold_ms;             /* long poll: hold, re-run the handler with req->resumed */
    uint64_t hold_key;       /*   when drv_head_wake(key) is called or hold_ms passes */
    struct drv_gw_job *job;  /* inference: the gateway answers later (gateway/gateway.h) */
    bool openai;             /* errors in OpenAI's shape (common/openai.h): /openai/ paths */
    bool has_file;           /* answer file_len bytes of file_fd from file_off (owned; */
    int file_fd;             /*   closed when sent or by drv_resp_free), not body */
    uint64_t file_off, file_len;
} drv_resp_t;

/* A request header's value (http.c); NULL when absent or without a connection. */
const char *drv_req_header(const drv_req_t *req, const char *name);
/* Look up a query argument; NULL when absent. */
const char *drv_req_query(const drv_req_t *req, const char *key);
/* Reject query arguments not in allowed (NULL-terminated list): 400. */
int drv_req_check_query(const drv_req_t *req, const char *const *allowed, drv_error_t *err);
/* Parse an integer / number / bool query argument; absent -> *out unchanged.
 * Returns -1 with a 400 naming the argument on bad syntax or range. */
int drv_req_query_int(const drv_req_t *req, const char *key, int64_t min, int64_t max,
                      int64_t *out, drv_error_t *err);
int drv_req_query_double(const drv_req_t *req, const char *key, double min, double max,
                         double *out, drv_error_t *err);
int drv_req_query_bool(const drv_req_t *req, const char *key, bool *out, drv_error_t *err);
/* Parse the body as one JSON object: 400 on malformed/truncated/not-object. */
json_t *drv_req_json(const drv_req_t *req, drv_error_t *err);

/* Responses. drv_resp_json steals the reference to doc. */
void drv_resp_json(drv_resp_t *resp, int status, json_t *doc);
void drv_resp_raw(drv_resp_t *resp, int status, const char *content_type,
                  char *body_malloced, size_t len);
/* The error document: {"error":{"code","message","field"?}}, or OpenAI's
 * {"error":{"message","type","param","code"}} when resp->openai is set. */
void drv_resp_error(drv_resp_t *resp, const drv_error_t *err);
void drv_resp_free(drv_resp_t *resp);

typedef int (*drv_handler_fn)(drv_req_t *req, drv_resp_t *resp);

/* A route: method + pattern ("{}" captures one path segment). */
typedef struct drv_route {
    const char *method;
    const char *pattern;
    unsigned scope;          /* DRV_SCOPE_* required; 0 = no token needed */
    bool admin_only;
    drv_handler_fn handler;
    const void *arg;         /* passed to the handler as req->route_arg */
} drv_route_t;

/* Match method+path against the route table. Returns the route and fills
 * req->params; NULL with *path_matched = true when only the method differs
 * (-> 405), false when no pattern matches (-> 404). */
const drv_route_t *drv_route_match(const char *method, const char *path,
                                   drv_req_t *req, bool *path_matched);

/* Run a request end to end after auth: route, scope/role checks, handler.
 * Fills resp in every case (errors included). */
void drv_api_dispatch(drv_req_t *req, drv_resp_t *resp, const drv_principal_t *who,
                      int auth_status, const drv_error_t *auth_err);

#endif
