/* serve_int.h — what the two files of drover-gateway's HTTP/1.1 server
 * share: serve.c (connections, their output and the streamed answers, the
 * loop's callbacks, create/destroy) and serve_request.c (the request path:
 * reading a request's head and body, routing, authenticating, answering or
 * starting its job). The connection and server structs and the answer
 * helpers. Not for other code: serve.h is the server's interface.
 */
#ifndef DRV_GW_SERVE_INT_H
#define DRV_GW_SERVE_INT_H

#include <jansson.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/http1.h"
#include "common/ratelimit.h"
#include "gateway/gateway.h"
#include "gateway/serve.h"

#define SV_MAX_CONNS 10000
#define SV_IDLE_MS 120000         /* a connection with nothing going on is closed after */
#define SV_OUT_HIGH (256 * 1024)  /* streamed bytes queued for a client before we stop pulling */
#define SV_OUT_KEEP (64 * 1024)   /* a larger output buffer is freed once empty */

/* C_CLOSING: the last answer goes out, then a lingering close (C_LINGER:
 * our side shut, what the client still sends is read and dropped, so that
 * unread input does not turn into a reset that loses the answer). */
enum { C_HEAD, C_BODY, C_JOB, C_CLOSING, C_LINGER };
#define SV_LINGER_MS 2000

typedef struct sconn {
    struct sconn *prev, *next;    /* every connection */
    struct sconn *rnext;          /* ready list (the job has news) */
    bool in_ready;
    struct drv_gw_serve *sv;
    int fd;
    int st;
    uint32_t events;              /* what epoll watches now */
    int64_t last_ms;              /* last activity */
    /* the request being read */
    char method[8];
    char path[1024];
    char authz[256], ctype[128], accept[128], timeout[64];
    bool bad_authz, has_timeout, keep_alive, http10;
    char *body;
    size_t body_len, body_want;
    /* the answer */
    drv_gw_job_t *job;
    bool headers_sent, chunked;
    char *out;
    size_t out_len, out_off, out_cap;
    /* input */
    size_t in_len;
    char in[DRV_H1_MAX_HEAD + 1];
    SSL *ssl;                     /* TLS (drv_gw_serve_set_tls); NULL: plain */
    char remote[48];              /* the client's address (text), for the failure limit */
} sconn_t;

struct drv_gw_serve {
    drv_gateway_t *g;
    drv_gw_front_t front;
    drv_gw_io_t io;
    int lfd;
    int port;
    sconn_t *conns;               /* list head */
    size_t n_conns;
    sconn_t *ready;               /* LIFO is fine: each is independent */
    int64_t next_sweep_ms;
    int64_t accept_again_ms;      /* out of descriptors: accepting paused until (0: not) */
    SSL_CTX *tls;                 /* every connection speaks TLS (NULL: plain HTTP); replaced
                                   * by drv_gw_serve_set_cert from another thread, so read
                                   * and written under tls_mu (an SSL holds its own
                                   * reference to the context it began with) */
    pthread_mutex_t tls_mu;
    bool tls_on;                  /* tls != NULL: set at create, never changed (read
                                   * without tls_mu) */
    drv_ratelimit_t *rl;          /* failed authentications per address (NULL: unlimited) */
};


/* The server's own answers before they go out (the API's drv_resp_t is
 * not the gateway's). */
typedef struct sresp {
    int status;
    char *body;              /* malloc'd */
    size_t len;
    const char *content_type;/* static; NULL: application/json */
    int retry_after;         /* 0: none */
    const char *header_name; /* one more header, NULL: none */
    char header_value[64];
    bool openai;             /* an /openai/ path: errors in OpenAI's shape */
} sresp_t;

/* serve.c: output and the server's own answers */
int drv_gw_serve__out_str(sconn_t *c, const char *str);
void drv_gw_serve__answer(sconn_t *c, int status, const char *ctype, const char *body,
                          size_t len, int retry_after, const char *hname, const char *hvalue);
void drv_gw_serve__resp_error(sresp_t *r, const drv_error_t *err);
void drv_gw_serve__answer_resp(sconn_t *c, sresp_t *r);
void drv_gw_serve__answer_err(sconn_t *c, const drv_error_t *err, int retry_after);
void drv_gw_serve__answer_unauth(sconn_t *c, const drv_error_t *err);
void drv_gw_serve__answer_json(sconn_t *c, int status, json_t *doc);
/* Write what is queued. -1: the connection is gone (closed here). */
int drv_gw_serve__flush(drv_gw_serve_t *sv, sconn_t *c);
/* The job has news (gateway thread, under the job's mutex). */
void drv_gw_serve__on_job_news(drv_gw_job_t *j, void *ctx);

/* serve_request.c: parse and answer what c->in holds, as far as it goes. */
void drv_gw_serve__process(drv_gw_serve_t *sv, sconn_t *c);

#endif
