/* head.h — the head node's context: everything a handler may reach.
 * Created once by droverd (or a unit test), destroyed on shutdown. */
#ifndef DRV_HEAD_H
#define DRV_HEAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "catalog/catalog.h"
#include "common/promptlen.h"

struct drv_state;
struct drv_store;
struct drv_events;
struct drv_gateway;
struct drv_prov_env;
struct drv_gw_peers;
struct drv_gw_creds;
struct drv_blobs;
struct drv_lease;

/* A deployment's running service totals, as the gateway counts them
 * (autoscale/replicas.h drv_ras_counters_t; the gateway does not parse
 * bodies: prompts are estimated from their length, gateway/prompt.h, and
 * generated tokens counted from the answers' bytes, gateway/gentok.h). */
typedef struct drv_head_service {
    uint64_t arrivals, served;           /* routed to it; answered by a replica */
    double first_s, first_sq_s2;         /* sent -> first body byte: sum, sum of squares */
    double service_s, service_sq_s2;     /* sent -> done: sum, sum of squares */
    int slots;                           /* per-replica concurrency limit; 0: none */
    /* prompt-size estimates: arrivals with one, their sum (tokens) and
     * count per common/promptlen.h bin; served ones with one: count, sums
     * of the estimate p, of f = sent -> first body byte (s), p^2, p f */
    uint64_t prompted;
    double prompt_tokens;
    double prompt_hist[DRV_PROMPTLEN_BINS];
    uint64_t tail_n;
    double tail_p, tail_f_s, tail_pp, tail_pf;
    /* generated tokens: served ones with a count, its sum; the full-batch
     * points among them (x = batch - 1, y = decode seconds per generated
     * token): count, sums of x, y, x^2, x y */
    uint64_t gen_n;
    double gen_tokens;
    uint64_t batch_n;
    double batch_x, batch_y, batch_xx, batch_xy;
} drv_head_service_t;

typedef struct drv_head_config {
    int heartbeat_ms;            /* agents sync at least this often (default 2000) */
    int node_timeout_ms;         /* no sync for this long -> not_ready (10000) */
    int node_lost_ms;            /* no sync for this long -> lost (30000) */
    int job_port_min, job_port_max; /* jobs' MASTER_PORT range (29500..29999) */
    long job_wait_margin_s;      /* a job is due this long before its wait bound
                                  * (drv_admit_input_t.wait_margin; 600) */
    char server_url[256];        /* how local agents reach the head */
    char agent_bin[512];         /* drover-agent for the local provider */
    char placement_policy[32];   /* "" = default */
    char head_id[64];            /* this head's stable id (DATA_DIR/head.id) */
    int lease_ttl_ms;            /* the leader lease's TTL (postgres; default 5000) */
    int blob_sync_timeout_ms;    /* a leader's blob upload waits this long for a standby to
                                  * hold it (head/blob_sync.c; 30000; 0: no wait) */
    int64_t upload_expiry_s;     /* an upload untouched this long expires (blob gc; 86400) */
    char tls_ca_hash[80];        /* "sha256:HEX" of the CA served at /v1/tls/ca ("": no TLS) */
    const char *tls_ca_pem;      /* that CA (PEM; NULL: no TLS); owned by droverd's main */
    double auth_fail_rate;       /* failed authentications refilled per address a second
                                  * (common/ratelimit.h; 10; <= 0: no limit) */
    int auth_fail_burst;         /* ... at most this many at once (20) */
    int auth_fail_table;         /* addresses tracked (4096) */
    long audit_max_entries;      /* the audit log's bounds (api/audit.h; 10000 entries, */
    long long audit_max_age_s;   /* 90 days) */
} drv_head_config_t;

typedef struct drv_head {
    drv_catalog_t *catalog;      /* immutable, lock-free reads */
    struct drv_state *state;     /* in-memory objects; owns its lock */
    struct drv_store *store;     /* durable store + group-commit writer */
    char data_dir[512];
    drv_head_config_t cfg;
    struct drv_events *events;   /* decisions and their reasons (soft) */
    struct drv_audit *audit;     /* writes: who, what, when, from where (api/audit.h; set by
                                  * the HTTP layer; NULL: none kept) */
    uint64_t version_base;       /* desired-set versions start here (per boot) */
    /* Wake long polls held on key (set by the HTTP layer; may be NULL). */
    void (*wake)(void *ctx, uint64_t key);
    void *wake_ctx;
    /* Ask the controller for an early pass (set by the controller; may be NULL). */
    void (*kick)(void *ctx);
    void *kick_ctx;
    /* A deployment's load for the replica autoscaler: requests in flight and
     * queued, and whether one waits while it has no replica (set by the
     * gateway's embedding; may be NULL: no load). Called under the state
     * write lock. */
    void (*load)(void *ctx, const char *deployment_key, double *inflight_queued,
                 bool *waiting);
    void *load_ctx;
    /* Its service totals for the SLO model (autoscale.ttft_slo_ms; the
     * embedded gateway's, same ctx as load; may be NULL): false when the
     * gateway has not seen the deployment. Under the state write lock. */
    bool (*service)(void *ctx, const char *deployment_key, drv_head_service_t *out);
    /* The inference gateway (gateway/gateway.h; NULL when not running),
     * embedded by head/gateway_link.c, which also sets the next two. */
    struct drv_gateway *gateway;
    /* The head's side of standalone gateways (api/gateway_peers.h). */
    struct drv_gw_peers *gw_peers;
    /* The inference listener's token set (gateway/creds.h; NULL without
     * --gateway-listen), rebuilt when a token or user changes. */
    struct drv_gw_creds *gw_creds;
    /* Hand the gateway a fresh routing table: the controller calls it at the
     * end of each full pass, under the state write lock (set by
     * head/gateway_link.c; may be NULL). */
    void (*publish)(void *ctx);
    void *publish_ctx;
    /* What the providers know of the head, the aws worker among it
     * (provider/provider.h; filled by droverd; NULL in tests without them). */
    struct drv_prov_env *prov;
    /* The embedded blob store of drover:// artifacts (store/blobs.h; opened
     * by droverd on DATA_DIR; NULL in tests without one: 503). */
    struct drv_blobs *blobs;
    /* Blob bytes sent by GET /v1/blobs/sha256/HEX (the ranges answered),
     * drover_blob_bytes_sent_total on /metrics. */
    _Atomic unsigned long long blob_bytes_sent;
    /* Blob reads answered with a redirect to an S3 store or https source
     * (drover_blob_redirects_total). */
    _Atomic unsigned long long blob_redirects;
    /* The leader lease (store/lease.h) when several heads share PostgreSQL;
     * NULL on SQLite: this head always leads. */
    struct drv_lease *lease;
    /* Several heads may share the store (PostgreSQL; set before the HTTP
     * threads start): until lease is set this head does not know its role
     * and answers as a standby (api/h_status.c), never as a lone leader. */
    bool ha;
    /* The heads' shared secret (store/lease.h drv_lease_key; "" on SQLite),
     * which signs head-to-head URLs (api/h_peer.c); set before lease. */
    char peer_key[65];
    /* Several heads (head/blob_sync.c; NULL on SQLite): a signed URL of a
     * head that has blob hex, into url; 0 when one has it. Network I/O:
     * never under the state lock. */
    int (*blob_elsewhere)(void *ctx, const char *hex, char *url, size_t n);
    void *blob_elsewhere_ctx;
    /* This head's checkpoint records are the whole set (blob_sync.c): a
     * leader once it has copied those the others hold; the standbys' copy
     * drops what the leader lacks only then. */
    _Atomic bool ckpts_whole;
    /* Semi-synchronous blob uploads (head/blob_sync.c; NULL on SQLite): a
     * leader's artifact create and checkpoint commit hand it what must be
     * on another head before their 2xx, item {user, blobs: [HEX...],
     * checkpoint?: record}, under id (the request's: api/upload.c); the
     * answer is a DRV_REPL_* and, for DRV_REPL_WAIT, how long to hold the
     * request (drv_head_wake(drv_key_hash(id)) ends the hold early). With
     * resumed (the held request's re-run) item is NULL, the answer is
     * DRV_REPL_HELD or DRV_REPL_PENDING and *kept (when not NULL) the item
     * it was given (a new reference; NULL when gone). Item is stolen. Never
     * under the state lock. */
    int (*replicate)(void *ctx, const char *id, json_t *item, bool resumed, int *wait_ms,
                     json_t **kept);
    void *replicate_ctx;
    /* A standby asked to hold items now (POST /v1/heads/replicate,
     * api/h_peer.c): queue them (stolen) for the blob sync thread, which
     * calls drv_head_wake(key) once it has tried them all (ctx:
     * replicate_ctx). */
    void (*replica_want)(void *ctx, json_t *items, uint64_t key);
    /* Those uploads' answers: a standby held it / none did in time
     * (drover_head_uploads_total{replication}). */
    _Atomic unsigned long long uploads_held, uploads_pending;
} drv_head_t;

enum {
    DRV_REPL_NONE = 0,   /* no other head is live: answer at once, as on one head */
    DRV_REPL_WAIT,       /* sent to the standbys: hold the request */
    DRV_REPL_HELD,       /* a standby holds it, its sha256s verified */
    DRV_REPL_PENDING     /* none did in time: the standbys copy it in the background */
};

/* Defaults for cfg. */
void drv_head_config_defaults(drv_head_config_t *cfg);
/* Stable 64-bit key of a string (FNV-1a), e.g. a node's key for long polls. */
uint64_t drv_key_hash(const char *s);
static inline void drv_head_wake(drv_head_t *h, uint64_t key)
{
    if (h->wake)
        h->wake(h->wake_ctx, key);
}
static inline void drv_head_kick(drv_head_t *h)
{
    if (h->kick)
        h->kick(h->kick_ctx);
}
static inline void drv_head_publish(drv_head_t *h)
{
    if (h->publish)
        h->publish(h->publish_ctx);
}

#endif
