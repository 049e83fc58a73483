/* gateway.h — the inference gateway: forwards predictions and OpenAI-style
 * requests to ready replicas, balances them, holds them through cold
 * starts, and counts what it does. It knows neither the head's state nor
 * the API: droverd embeds it through head/gateway_link.c (tables and
 * tokens from the state, the controller's hooks) and the API's
 * api/http_gateway.c (libmicrohttpd connections); drover-gateway runs it
 * with follow.c and serve.c.
 *
 * How a request flows:
 *   1. An inference handler (api/h_predict.c, on an HTTP pool thread) makes
 *      a job with drv_gw_job_new() and returns it in resp->job.
 *   2. api/http.c suspends the connection (no thread waits) and hands the
 *      job and the request body over with drv_gw_job_start()
 *      (api/http_gateway.c).
 *   3. The gateway thread routes it: a ready replica of the deployment is
 *      picked (least outstanding of two random ones, below the model's
 *      per-replica concurrency limit) and the body is POSTed there over
 *      the gateway's own HTTP/1.1 connections (upconn.c: kept alive and
 *      reused, never leaving the gateway thread's epoll);
 *      with no capacity the job waits in the deployment's bounded FIFO,
 *      with no ready replica at all it is held as a cold start.
 *   4. When the answer is complete (small answers) or its headers are in
 *      (streams: text/event-stream, chunked, or large), the gateway thread
 *      resumes the connection; http.c calls drv_gw_job_respond(), which
 *      queues the answer. A streamed body flows through a small buffer: the
 *      writer (gateway thread) pauses the upstream transfer when it is full,
 *      the reader (MHD) suspends the connection when it is empty, and each
 *      side wakes the other; nothing busy-waits.
 *   5. http.c calls drv_gw_job_release() when MHD is done with the
 *      connection; a transfer still running then is cancelled. A client that
 *      goes away while its connection is suspended is noticed by the gateway
 *      thread (it polls the client socket for EOF) and cancels at once.
 *   In drover-gateway, serve.c plays api/http.c's part on the gateway
 *   thread itself (drv_gw_io_t below): steps 2 and 4 are function calls
 *   and a tick of the same loop, not thread crossings.
 *
 * Threads and ownership: one gateway thread owns the replica connections,
 * every queue, and the per-deployment and per-replica objects (stats,
 * outstanding counts, ejection). Other threads reach it through a lock-free
 * inbox (jobs, cancels, unpauses) and one atomic pointer (a new routing
 * table). A job is shared by its connection and the gateway thread: it is
 * reference counted and the few fields both touch are under the job's own
 * mutex. The metrics reader takes the registry mutex, which the gateway
 * thread takes only when a routing table arrives; counters are relaxed
 * atomics. No store write, no state lock on the request path.
 */
#ifndef DRV_GATEWAY_H
#define DRV_GATEWAY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/promptlen.h"

typedef struct drv_gateway drv_gateway_t;
typedef struct drv_gw_job drv_gw_job_t;

/* Limits (documented in docs/api.md). */
#define DRV_GW_DEFAULT_TIMEOUT_MS (300 * 1000)  /* without X-Drover-Timeout */
#define DRV_GW_MAX_TIMEOUT_S 3600
#define DRV_GW_QUEUE_MAX 1024        /* waiting requests per deployment (more: 429) */
#define DRV_GW_QUEUE_WAIT_MS 30000   /* longest wait for capacity (then 503) */
#define DRV_GW_EJECT_FAILURES 3      /* consecutive transport failures -> out of rotation */

/* Start the gateway thread. Routing tables come from
 * drv_gateway_set_table() (droverd: head/gateway_link.c, from its state at
 * each controller pass; drover-gateway: follow.c, from the head's routes
 * document); kick is called (gateway thread, must not block) when a cold
 * start begins, and at a deployment's first arrival after
 * DRV_GW_QUIET_KICK_MS without one: droverd's controller then passes at
 * once and at every tick while the traffic lasts (head/scaling.h,
 * DRV_SCALING_BUSY_MS, which must not be shorter), so the SLO model's
 * arrivals spread over a tick, as the simulator's; not over the 5 s since
 * the safety net's pass, which split a cluster after a quiet spell over
 * two 10 s buckets and read clustered traffic's dispersion up to 22 % low
 * (issue 20, t/unit/test_autoscale_disp.c). drover-gateway's kick sends
 * its load report at once. Kicks come at most every 100 ms. */
#define DRV_GW_QUIET_KICK_MS 5000
/* Whether an arrival at now_ms kicks the controller: the deployment's
 * first (last_arrival_ms 0) or the first after DRV_GW_QUIET_KICK_MS or
 * more without one (route.c; t/unit/test_gateway.c checks it against the
 * controller's cadence). */
static inline bool drv_gw_quiet_kick_due(int64_t last_arrival_ms, int64_t now_ms)
{
    return last_arrival_ms == 0 || now_ms - last_arrival_ms >= DRV_GW_QUIET_KICK_MS;
}
typedef struct drv_gw_hooks {
    void (*kick)(void *ctx);
    void *ctx;
} drv_gw_hooks_t;
drv_gateway_t *drv_gateway_new(const drv_gw_hooks_t *hooks, drv_error_t *err);
/* Set the kick hook before the gateway gets its first job. */
void drv_gateway_set_kick(drv_gateway_t *g, void (*kick)(void *ctx), void *ctx);
struct drv_gw_table;
/* Hand the gateway thread a routing table (it takes t). Any thread. */
void drv_gateway_set_table(drv_gateway_t *g, struct drv_gw_table *t);
/* The deployments with load or running totals: [{deployment: "owner/id",
 * in_flight, queued, cold, and the totals of gateway/totals.h}] (POST
 * /v1/gateway/load). Any thread. */
json_t *drv_gateway_load_json(drv_gateway_t *g);

/* Answer every waiting and running request with 503 (shutting down) and
 * refuse new ones; the thread keeps answering until destroy. Call before
 * the HTTP server stops. */
void drv_gateway_stop(drv_gateway_t *g);
/* End the gateway thread (after drv_gateway_stop): afterwards no job is
 * held and the io server (below) has let go of its connections. Accepts
 * NULL; drv_gateway_destroy does it when not done. */
void drv_gateway_join(drv_gateway_t *g);
/* Join the thread and free everything (after the HTTP server stopped).
 * Accepts NULL. */
void drv_gateway_destroy(drv_gateway_t *g);

/* --- a server on the gateway thread's own loop (drover-gateway, serve.c) ----
 * Its sockets sit in the gateway thread's epoll beside the replica
 * connections, so a request goes client -> replica -> client on one thread. */
typedef struct drv_gw_io {
    /* a descriptor watched with drv_gateway_io_watch is ready (epoll events) */
    void (*event)(void *ctx, void *obj, uint32_t events);
    /* each turn of the loop before it may block: answers to write, sweeps;
     * returns how many ms the loop may block at most (0: turn again now) */
    int (*tick)(void *ctx);
    /* drv_gateway_join, the thread gone: close every connection, release jobs */
    void (*close)(void *ctx);
    void *ctx;
} drv_gw_io_t;
/* Install io (kept by pointer) before the first drv_gateway_io_watch. */
void drv_gateway_set_io(drv_gateway_t *g, const drv_gw_io_t *io);
/* epoll_ctl(op: EPOLL_CTL_ADD/MOD/DEL) fd into the gateway's loop; obj comes
 * back to io->event. -1 with errno on failure. */
int drv_gateway_io_watch(drv_gateway_t *g, int op, int fd, void *obj, uint32_t events);
/* A job whose connection side is io's server (on the gateway thread): the
 * job takes body (malloc'd, may be NULL); wake(j, ctx) is called on the
 * gateway thread, under the job's mutex, whenever the job has news for a
 * connection that waits (see gw_impl.h: suspended, reader_waiting). */
void drv_gw_job_start_local(drv_gw_job_t *j, char *body, size_t len,
                            void (*wake)(drv_gw_job_t *j, void *ctx), void *ctx);

/* --- jobs (api/h_predict.c, api/http.c) ------------------------------------ */

enum drv_gw_kind {
    DRV_GW_PREDICT,          /* POST to the model's predict_path */
    DRV_GW_OPENAI,           /* POST to /v1 + suffix ("/chat/completions") */
};

/* A job for deployment key "owner/id". suffix: OpenAI path after /v1 (NULL
 * for predictions); content_type / accept: the client's headers (NULL =
 * none); timeout_ms: the request's bound (0 = default). NULL with a 503
 * when the gateway is stopping. */
drv_gw_job_t *drv_gw_job_new(drv_gateway_t *g, const char *key, enum drv_gw_kind kind,
                             const char *suffix, const char *content_type, const char *accept,
                             int timeout_ms, drv_error_t *err);
/* X-Drover-Timeout (h: the header's value, NULL = absent): seconds,
 * decimals allowed, 0 < t <= DRV_GW_MAX_TIMEOUT_S; *ms 0 when absent. -1
 * with a 400 naming the header otherwise. */
int drv_gw_parse_timeout(const char *h, int *ms, drv_error_t *err);
/* Drop a job that was never started (the handler failed after making it). */
void drv_gw_job_discard(drv_gw_job_t *j);
/* Starting a job from a libmicrohttpd connection and answering it there:
 * api/http_gateway.h. */
/* http.c, from the request-completed callback: the connection is done with
 * the job (cancels a transfer still running). */
void drv_gw_job_release(drv_gw_job_t *j);

/* --- what others read -------------------------------------------------------- */

typedef struct drv_gw_demand {
    uint32_t in_flight;      /* requests running on replicas */
    uint32_t queued;         /* requests waiting (capacity or cold start) */
    int64_t waiting_since_ms;/* drv_mono_ms() of the oldest waiting request, 0 = none */
    bool cold;               /* waiting with no ready replica */
    /* running totals for the replica autoscaler's service model (SLO mode):
     * requests routed here; answered by a replica (status < 500) with the
     * sums of start -> first body byte (us; its square in ms^2) and start ->
     * done (us; its square in ms^2), the attempt that answered; the
     * per-replica limit */
    uint64_t arrivals, served, served_first_us, served_first_sq_ms2, served_us;
    uint64_t served_sq_ms2;
    int max_concurrency;     /* 0: no limit */
    /* prompt-size estimates (gateway/prompt.h: body bytes / 4, an
     * estimate; requests without a body have none): arrivals with one, the
     * sum of their estimates (tokens) and their count per bin of
     * common/promptlen.h; served requests (as above) with one: count, sums
     * of the estimate p, of start -> first body byte f (us), of p^2 and
     * of p f (token ms) */
    uint64_t prompted, prompt_tokens, prompt_hist[DRV_PROMPTLEN_BINS];
    uint64_t served_prompted, served_p, served_p_first_us, served_pp, served_pf_ms;
    /* generated tokens (OpenAI answers; gateway/gentok.h: the usage, else
     * a stream's chunks): served requests with a count, its sum; of those,
     * the full-batch points (x = batch - 1, y = decode seconds per token):
     * count, sums of x (1/1000), x^2 (1/100), y (10 ns), x y (us) */
    uint64_t served_gen, gen_tokens;
    uint64_t batch_n, batch_x_milli, batch_xx_centi, batch_y_10ns, batch_xy_us;
} drv_gw_demand_t;

/* Demand on deployment key "owner/id" (for a replica autoscaler). Returns
 * false when the gateway has not seen that deployment. Any thread. */
bool drv_gateway_demand(drv_gateway_t *g, const char *key, drv_gw_demand_t *out);

/* Append the gateway's metrics in Prometheus text format to a malloc'd
 * buffer (*buf, *len, *cap; grown as needed). owner: only that user's
 * deployments (NULL: all). Any thread. */
void drv_gateway_metrics(drv_gateway_t *g, const char *owner, char **buf, size_t *len,
                         size_t *cap);

/* GET /v1/deployments/{id}/metrics (docs/api.md): the last 60 s and 15
 * minutes of history of deployment key "owner/id" (zeros when the gateway
 * has not seen it). Any thread. NULL only on OOM. */
json_t *drv_gateway_dep_metrics(drv_gateway_t *g, const char *key, const char *id);

#endif
