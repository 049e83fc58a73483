/* gw_impl.h — the inference gateway's insides, shared by its files only:
 * the gateway thread's gateway.c (loop, inbox, deadlines, life), route.c
 * (registry, pick, queues, cold starts, answering), upstream.c (what a
 * replica's answer means: headers, body, retries, probes) and upconn.c
 * (the HTTP/1.1 connections to replicas); job.c (the connection side of a
 * job), serve.c and metrics.c; outside the folder, api/http_gateway.c (the
 * libmicrohttpd side of a job: answers, streaming reader).
 * See gateway.h for the threads and who owns what.
 */
#ifndef DRV_GW_IMPL_H
#define DRV_GW_IMPL_H

#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/http1.h"
#include "gateway/gateway.h"
#include "gateway/gentok.h"
#include "gateway/prompt.h"
#include "gateway/table.h"

/* --- stats (written by the gateway thread, read by metrics) ---------------- */

#define GW_NBUCKETS 18
extern const double drv_gw_buckets[GW_NBUCKETS];   /* upper bounds, seconds */

typedef struct gw_hist {
    _Atomic uint64_t b[GW_NBUCKETS + 1];   /* last: +Inf */
    _Atomic uint64_t sum_us, count;
} gw_hist_t;

typedef struct gw_stats {
    _Atomic uint64_t by_class[5];    /* answers 1xx .. 5xx */
    _Atomic uint64_t c429, c503;     /* of those: 429 and 503 answers */
    _Atomic uint32_t in_flight;
    gw_hist_t latency;               /* arrival -> last byte to the client */
    gw_hist_t ttfb;                  /* streams: arrival -> first body byte from the replica */
} gw_stats_t;

/* Why the gateway answered itself. */
enum {
    GW_R_QUEUE_FULL,     /* 429 */
    GW_R_NO_CAPACITY,    /* 503: waited for capacity too long */
    GW_R_COLD_TIMEOUT,   /* 503: no replica became ready in time */
    GW_R_DISABLED,       /* 503 */
    GW_R_CONNECT,        /* 502: replica refused, after the retry */
    GW_R_UPSTREAM,       /* 502: replica broke the answer */
    GW_R_TIMEOUT,        /* 504 */
    GW_R_CLIENT_GONE,    /* the client left first */
    GW_R_NOT_FOUND,      /* 404 */
    GW_R_SHUTDOWN,       /* 503 */
    GW_R__COUNT
};
extern const char *const drv_gw_reason_names[GW_R__COUNT];

static inline void gw_add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

void drv_gw_hist_observe(gw_hist_t *h, int64_t us);

/* --- windows and history (stats.c; gateway thread writes under reg_mu) ----- */

#define GW_SAMPLE_MS 10000   /* a snapshot of the counters this often */
#define GW_WINDOW_SNAPS 7    /* 6 steps back: the 60 s window */
#define GW_HISTORY 90        /* points of history: 15 minutes */

/* Cumulative counters at one moment. */
typedef struct gw_snap {
    int64_t t_ms;
    uint64_t cls[5], c429, c503, errors;
    uint64_t lat[GW_NBUCKETS + 1], ttfb[GW_NBUCKETS + 1];
} gw_snap_t;

typedef struct gw_point {
    int64_t t;               /* unix seconds */
    float rps, p50_ms, p99_ms;   /* p: < 0 = no request in the step */
    int32_t desired, ready;
} gw_point_t;

typedef struct gw_window {
    gw_snap_t snap[GW_WINDOW_SNAPS];   /* ring, newest at (next - 1) */
    unsigned next, n;
} gw_window_t;

/* --- deployments and replicas (gateway thread; freed under reg_mu) ---------- */

struct gw_probe;
struct gw_dep;
typedef struct gw_uc gw_uc_t;

typedef struct gw_rep {
    struct gw_dep *dep;
    char *key, *id, *endpoint;
    bool in_table;           /* listed by the last routing table */
    bool ready;              /* the table says ready */
    bool promoted;           /* starting, but our own health probe passed */
    uint32_t outstanding;    /* requests running on it (changed by upstream.c only) */
    uint64_t area;           /* the integral of outstanding over time (request us) ... */
    int64_t area_us;         /* ... up to then (drv_gw_now_us; upstream.c rep_area) */
    int consecutive_failures;
    int64_t next_probe_ms;
    struct gw_probe *probe;  /* health probe in flight */
    /* upconn.c: kept-alive connections and where the endpoint is */
    gw_uc_t *idle;           /* most recently used first */
    unsigned n_idle;
    bool addr_ok;            /* addr is endpoint's (resolved at first use) */
    unsigned ep_gen;         /* +1 when the endpoint changes: older connections are not pooled */
    socklen_t addr_len;
    struct sockaddr_storage addr;
    char host[128];          /* the Host header: "127.0.0.1:41234" */
    _Atomic bool ejected;    /* out of rotation until a probe passes */
    _Atomic uint64_t failures;
    gw_stats_t st;
    gw_window_t win;         /* stats.c */
} gw_rep_t;

typedef struct gw_dep {
    char *key, *owner, *id, *predict_path, *health_path;
    int max_conc, cold_start_ms;
    bool enabled, in_table;
    gw_rep_t **reps;         /* every replica we know, sorted by key */
    size_t n_reps, cap_reps;
    gw_rep_t **rt;           /* routable now: (ready or promoted) and not ejected */
    uint32_t *rt_out;        /* scratch: their outstanding counts, for the pick */
    size_t n_rt, cap_rt;
    drv_gw_fifo_t queue;     /* jobs waiting for capacity or a cold start */
    int64_t cold_since_ms;   /* a cold start is going on since (0 = none) */
    int64_t last_arrival_ms; /* the last arrival's drv_gw_now_ms() (route.c: the quiet kick) */
    _Atomic uint32_t queued;
    _Atomic int64_t waiting_since_ms;
    _Atomic bool cold;
    _Atomic uint64_t cold_starts;
    gw_hist_t cold_hist;     /* cold start: first held request -> first replica routable */
    _Atomic int64_t cold_last_us;    /* the last cold start's duration */
    int desired, ready;      /* the table's desired_replicas / ready_replicas */
    gw_window_t win;         /* stats.c */
    gw_point_t hist_pts[GW_HISTORY];   /* ring, newest at (hist_next - 1) */
    unsigned hist_next, hist_n;
    _Atomic uint64_t rejected[GW_R__COUNT];
    gw_stats_t st;
    /* the replica autoscaler's service model (drv_gw_demand_t): requests
     * routed to the deployment; answered by a replica, with the sums of
     * start -> first body byte (and its square, ms^2) and start -> done
     * (and its square, ms^2) */
    _Atomic uint64_t arrivals, served, served_first_us, served_first_sq_ms2, served_us;
    _Atomic uint64_t served_sq_ms2;
    gw_prompt_t prompt;      /* the prompt-size estimates of the same (prompt.h) */
    drv_gw_gen_totals_t gen; /* OpenAI answers: generated tokens and batches (gentok.h) */
} gw_dep_t;

/* --- jobs ----------------------------------------------------------------------- */

enum { J_NEW, J_PARKED, J_QUEUED, J_RUNNING, J_DONE };
enum { M_NONE, M_BUFFER, M_STREAM };

/* inbox message bits */
enum { MSG_QUEUED = 1u, MSG_SUBMIT = 2u, MSG_CANCEL = 4u, MSG_UNPAUSE = 8u, MSG_WATCH = 16u };

#define GW_HDRBUF 8192   /* passed-on answer headers; more: 502 (as nginx's proxy_buffer_size) */
#define GW_STREAM_MAX (256 * 1024)   /* streamed bytes buffered before the replica is paused */

struct drv_gw_job {
    /* set when made, read-only afterwards */
    drv_gateway_t *gw;
    char key[192];
    int kind;
    char suffix[48];
    char ctype[128], accept[128];
    int64_t t0_us;           /* arrival, monotonic */
    int64_t deadline_ms;     /* X-Drover-Timeout or the default */
    int timeout_ms;
    char *body;
    size_t body_len;
    void *conn;              /* libmicrohttpd's connection (api/http_gateway.c), or NULL */
    int client_fd;
    /* the connection side's (api/http_gateway.c: MHD_resume_connection;
     * serve.c: its ready list): called on the gateway thread, under mu */
    void (*wake)(struct drv_gw_job *j, void *ctx);
    void *wake_ctx;

    atomic_int refs;
    atomic_uint msgs;
    struct drv_gw_job *mnext;    /* inbox link */

    /* gateway thread only */
    int state;
    gw_dep_t *dep;
    gw_rep_t *rep;
    gw_rep_t *avoid;         /* failed once: retry elsewhere */
    int attempts;
    bool fresh_conn;         /* the next attempt opens a new connection (after a stale one) */
    gw_uc_t *uc;             /* the replica connection carrying it (J_RUNNING) */
    drv_gw_link_t qlink;     /* deployment queue or parked list */
    drv_gw_link_t alink;     /* active list */
    int64_t wait_deadline_ms;/* queued: give up at */
    bool cold;               /* queued with no ready replica */
    uint64_t parked_gen;
    bool headers_done, body_started, nowatch;
    int64_t start_us, first_us;  /* this attempt sent to the replica; its first body byte */
    int64_t prompt_est;      /* prompt-size estimate, tokens (prompt.h); -1: none */
    drv_gw_gen_t gen;        /* this attempt's answer: its generated tokens (gentok.h) */
    uint64_t area0, area1;   /* its replica's area at send and at done (its batch) ... */
    int64_t stop_us;         /* ... done: left the replica (0: not yet) */

    /* shared with the connection's thread: under mu */
    pthread_mutex_t mu;
    _Atomic bool suspended;  /* the connection waits for us */
    bool conn_gone;          /* MHD is done with the connection */
    bool ready;              /* answer (or its headers) ready to queue */
    int status;
    int mode;
    char hdr[GW_HDRBUF];     /* passthrough headers: "Name\0value\0" pairs */
    size_t hdr_len;
    char *buf;               /* buffer mode: the whole body; stream: pending bytes */
    size_t len, cap, off;
    int64_t content_length;  /* -1: unknown */
    bool eof, failed, paused, reader_waiting;
    bool finished;           /* the gateway is done with it (no transfer) */
    drv_error_t err;         /* err.status != 0: the gateway answers with this */
    int retry_after;
    char replica[96];
};

/* --- the gateway ------------------------------------------------------------------ */

struct drv_gateway {
    pthread_t thread;
    bool started;
    atomic_bool stopping;    /* answer everything with 503 */
    atomic_bool quit;        /* the thread ends */
    _Atomic(drv_gw_table_t *) pending;       /* published, not yet adopted */
    _Atomic(struct drv_gw_job *) inbox;      /* MPSC stack */
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
    bool stop_done;

    /* registry: the gateway thread changes it under reg_mu; readers lock it */
    pthread_mutex_t reg_mu;
    gw_dep_t **deps;         /* sorted by key */
    size_t n_deps, cap_deps;

    /* gateway thread only */
    drv_gw_fifo_t parked;    /* jobs for a deployment the table does not know yet */
    drv_gw_fifo_t active;    /* every job the gateway holds (for client-socket watch) */
    uint64_t table_gen;
    int64_t table_built_us;  /* when the adopted table was built */
    int64_t last_kick_ms;
    int64_t next_probe_ms;
    bool probe_wanted;
    uint64_t rng;
    int64_t next_expiry_ms;
    size_t queue_max;        /* per deployment: DRV_GW_QUEUE_MAX or $DROVER_GATEWAY_QUEUE_MAX */
    struct pollfd *wfd;      /* [0]: epfd; then client sockets being watched */
    struct drv_gw_job **wjob;
    size_t cap_wfd;
    _Atomic uint64_t gen_published;
    int epfd;                /* replica connections, the io server's sockets, evfd */
    int evfd;                /* eventfd: drv_gw_wake() */
    atomic_bool sleeping;    /* the gateway thread may block: wakers write evfd */
    /* upconn.c */
    gw_uc_t *uc_busy;        /* connections carrying a request or a probe */
    gw_uc_t *uc_dead;        /* closed this turn, freed after the events are handled */
    int64_t uc_due_ms;       /* the earliest deadline among the busy (INT64_MAX: none) */
    char *rbuf;              /* what a connection reads goes here first */
    int64_t next_sample_ms;
    void (*kick_fn)(void *ctx);      /* a cold start began (drv_gw_hooks_t) */
    _Atomic(const drv_gw_io_t *) io; /* a server sharing the loop (drv_gateway_set_io) */
    bool joined;                     /* drv_gateway_join ran */
    void *kick_ctx;
};

/* gateway.c: epoll data of a replica connection is its address with
 * this bit set, an io server's object has IO_TAG (gateway.c), the eventfd
 * is its descriptor. */
#define GW_UC_TAG (1ULL << 62)

/* job.c */
void drv_gw_job_unref(drv_gw_job_t *j);
static inline void drv_gw_job_ref(drv_gw_job_t *j)
{
    atomic_fetch_add_explicit(&j->refs, 1, memory_order_relaxed);
}
/* Post message bits to the gateway thread (any thread). */
void drv_gw_post(drv_gw_job_t *j, unsigned bits);
/* Gateway thread: wake the connection if it waits (under j->mu). */
void drv_gw_wake_conn_locked(drv_gw_job_t *j);
/* The error code of a gateway answer with this status ("bad_gateway"). */
const char *drv_gw_error_code(int status);

int64_t drv_gw_now_us(void);
/* Wake the gateway thread (any thread; an eventfd write). */
void drv_gw_wake(drv_gateway_t *g);
static inline int64_t drv_gw_now_ms(void) { return drv_gw_now_us() / 1000; }

#define JOB_OF(l, member) ((drv_gw_job_t *)((char *)(l) - offsetof(drv_gw_job_t, member)))

/* route.c (gateway thread) */
gw_dep_t *drv_gw_dep_find(drv_gateway_t *g, const char *key);   /* also under reg_mu */
void drv_gw_rebuild_rt(gw_dep_t *d);
void drv_gw_dep_free(drv_gateway_t *g, gw_dep_t *d);
/* Answer j with a gateway error (or cut its stream when headers went out);
 * the gateway is done with it. */
void drv_gw_fail(drv_gateway_t *g, drv_gw_job_t *j, int status, int reason, int retry_after,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The replica answered in full: count it, wake the connection, done. */
void drv_gw_ok(drv_gateway_t *g, drv_gw_job_t *j);
void drv_gw_update_expiry(drv_gateway_t *g, int64_t at);
/* A routable replica of d with capacity (not avoid), NULL when none. */
gw_rep_t *drv_gw_pick(drv_gateway_t *g, gw_dep_t *d, const gw_rep_t *avoid);
/* Publish d's queue length and oldest waiter for readers. */
void drv_gw_set_waiting(gw_dep_t *d);
/* Start queued jobs of d while a replica has capacity. */
void drv_gw_drain(drv_gateway_t *g, gw_dep_t *d);
/* A replica became routable: end d's cold start (counted). */
void drv_gw_cold_over(gw_dep_t *d);
/* A new (or re-routed) job: start it, queue it, park it or answer it. */
void drv_gw_route(drv_gateway_t *g, drv_gw_job_t *j);
/* Take a new routing table (freed here) into the registry. */
void drv_gw_adopt(drv_gateway_t *g, drv_gw_table_t *t);

/* stats.c (gateway thread): snapshot the counters when due (under reg_mu). */
void drv_gw_sample(drv_gateway_t *g, int64_t now_ms);
/* A new deployment's or replica's window: zero counters as of now. */
void drv_gw_window_init(gw_window_t *w, int64_t now_ms);

/* How a replica connection ended (upconn.c -> upstream.c). */
enum {
    UC_OK,        /* a whole answer */
    UC_CONNECT,   /* no connection: nothing was sent */
    UC_NOTHING,   /* a kept-alive connection closed (or reset), or a new one reset,
                     before a byte of the answer, within UC_RACE_MS of the request
                     going out (or while it went out): the replica closed it as the
                     request went out, or closed its listener with it still queued,
                     so it never ran */
    UC_TIMEOUT,   /* the request's deadline passed */
    UC_FAILED,    /* the replica broke the answer (or the receiver aborted it) */
    UC_LOCAL,     /* the gateway could not make a connection (descriptors, memory) */
};

/* upstream.c (gateway thread) */
void drv_gw_probe_cancel(drv_gateway_t *g, gw_rep_t *r);
void drv_gw_start_transfer(drv_gateway_t *g, drv_gw_job_t *j, gw_rep_t *r);
/* Leave the running state: connection dropped if still attached, counts down. */
void drv_gw_stop_transfer(drv_gateway_t *g, drv_gw_job_t *j);
/* j's connection ended (how: UC_*, why: a message when not UC_OK). */
void drv_gw_on_done(drv_gateway_t *g, drv_gw_job_t *j, int how, const char *why);
/* A probe ended: status is the answer's (0: none). */
void drv_gw_probe_done(drv_gateway_t *g, struct gw_probe *p, int status);
/* Start the probes that are due; note when the next one is. */
void drv_gw_probes(drv_gateway_t *g, int64_t now);
/* The answer's head and body as they arrive (upconn.c calls these).
 * up_body: 0 go on, 1 go on but stop reading until MSG_UNPAUSE (the
 * stream buffer is full), -1 abort (nobody reads). */
int drv_gw_up_head(drv_gw_job_t *j, int status, const drv_h1_header_t *h, size_t nh,
                   int64_t content_length, const char **why);
int drv_gw_up_body(drv_gw_job_t *j, const char *p, size_t n);

/* upconn.c (gateway thread): HTTP/1.1 connections to replicas */
/* Send j's request to r on a kept-alive connection or a new one; how it
 * ends comes to drv_gw_on_done, never from inside this call. -1: out of
 * memory, nothing started. */
int drv_gw_uc_send_job(drv_gateway_t *g, drv_gw_job_t *j, gw_rep_t *r);
/* GET r's health path on a new connection; the end comes to drv_gw_probe_done. */
gw_uc_t *drv_gw_uc_send_probe(drv_gateway_t *g, struct gw_probe *p, gw_rep_t *r);
/* Give up a connection still carrying something: closed, nothing reported. */
void drv_gw_uc_abort(drv_gateway_t *g, gw_uc_t *u);
/* Read again after up_body asked for a pause. */
void drv_gw_uc_resume(drv_gateway_t *g, gw_uc_t *u);
/* An epoll event for u. */
void drv_gw_uc_event(drv_gateway_t *g, gw_uc_t *u, uint32_t events);
/* End what passed its deadline; g->uc_due_ms says when to call again. */
void drv_gw_uc_sweep(drv_gateway_t *g, int64_t now_ms);
/* Free the connections closed this turn (after the turn's events). */
void drv_gw_uc_reap(drv_gateway_t *g);
/* r's endpoint changed or r goes away: its idle connections closed, its
 * address forgotten. */
void drv_gw_uc_forget(drv_gateway_t *g, gw_rep_t *r);

#endif
