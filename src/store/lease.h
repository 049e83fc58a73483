/* lease.h — several heads on one PostgreSQL: the leader lease, the standbys'
 * follow of the record log, and the roster of heads (issue 17).
 *
 * The lease is one row (lease: holder, url, epoch, expires) whose expiry is
 * judged by the database's clock. A head takes it when it has expired (or
 * when it is its own, left by an earlier run on the same data dir), bumping
 * the epoch and logging the takeover in lease_history; the leader renews it
 * every second. The store fences every commit by the epoch (store/pg.c,
 * drover_fence), so a deposed leader cannot write whatever its clock says.
 * A standby follows the log by seq (objects.seq > what it applied), woken by
 * the leader's NOTIFY drover_log at each commit, polling once a second as a
 * fallback, and hands the records to its state (cfg.apply) so that taking
 * over reads only the tail of the log. Every head upserts its row of heads
 * (role, applied seq) every second; drv_lease_view() is the last snapshot:
 * the roster (heads seen in the last 60 s) and every URL the table holds.
 *
 * Threads: one lease thread with its own connection; drv_lease_view and
 * drv_lease_is_leader are safe from any thread.
 */
#ifndef DRV_LEASE_H
#define DRV_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define DRV_LEASE_TTL_DEFAULT_MS 5000
#define DRV_LEASE_MAX_HEADS 16
#define DRV_LEASE_MAX_URLS 32

typedef struct drv_lease drv_lease_t;

typedef struct drv_lease_rec {
    const char *kind, *key;
    const char *body;        /* NULL: deleted */
    uint64_t seq;
} drv_lease_rec_t;

typedef struct drv_lease_cfg {
    const char *url;         /* the store's postgres:// URL */
    const char *holder;      /* this head's stable id (one per data dir) */
    const char *advertise;   /* its API URL, which standbys hand to clients */
    int ttl_ms;              /* lease TTL (renewed every second) */
    uint64_t from_seq;       /* the log position the state was loaded at */
    /* Standby: apply records, in seq order (lease thread). -1 is fatal. */
    int (*apply)(void *ctx, const drv_lease_rec_t *recs, size_t n, drv_error_t *err);
    /* The lease was taken and the log read to its end: called before
     * drv_lease_is_leader turns true (lease thread). */
    void (*on_lead)(void *ctx, long long epoch, long long after_expiry_ms);
    /* The lease is lost (or could not be renewed within its TTL): called
     * after drv_lease_is_leader turned false; the lease thread then stops. */
    void (*on_lost)(void *ctx, const char *why);
    void *ctx;
} drv_lease_cfg_t;

typedef struct drv_lease_head {
    char holder[128];
    char url[256];
    char role[16];           /* "leader", "standby" */
    uint64_t applied_seq;    /* how far it has applied the log */
    int64_t seen_ms_ago;     /* since its last roster update */
} drv_lease_head_t;

typedef struct drv_lease_view {
    bool leader;             /* this head leads */
    char self[128];          /* this head's holder id */
    long long epoch;         /* the lease's current epoch */
    char holder[128];        /* who holds it */
    char leader_url[256];    /* its advertised URL ("" when none yet) */
    int64_t expires_in_ms;   /* judged by the database (negative: expired) */
    uint64_t log_seq;        /* the log's newest seq */
    uint64_t applied_seq;    /* this head's position */
    uint64_t changes;        /* leadership changes this head saw */
    uint64_t takeovers;      /* times this head took the lease */
    long long last_takeover_ms;   /* its last takeover, after the previous lease expired */
    size_t nheads;           /* the roster: heads seen in the last 60 s */
    drv_lease_head_t heads[DRV_LEASE_MAX_HEADS];
    /* Every advertised URL of the heads table, distinct, the most recently
     * seen first: dead heads' too, until their rows are dropped a day after
     * they were last seen (what a console page loaded from a dead head
     * still sends as its Origin, api/cors.c). */
    size_t nurls;
    char urls[DRV_LEASE_MAX_URLS][256];
} drv_lease_view_t;

/* Connect, run one round (take the lease when free, else read the roster)
 * synchronously, and start the lease thread. */
drv_lease_t *drv_lease_create(const drv_lease_cfg_t *cfg, drv_error_t *err);
/* Stop the thread; a leader gives the lease up (call after the store has
 * committed its queue) so that a standby takes over at once. */
void drv_lease_destroy(drv_lease_t *l);

/* This head leads: it took the lease and, by its own monotonic clock, the
 * lease cannot have expired yet (less than the TTL since its last
 * successful renewal was sent), whatever the lease thread is waiting for. */
bool drv_lease_is_leader(const drv_lease_t *l);
void drv_lease_view(drv_lease_t *l, drv_lease_view_t *out);
/* The leader's advertised URL into out ("" when unknown). */
void drv_lease_leader_url(drv_lease_t *l, char *out, size_t n);

/* The heads' shared secret (64 hex digits, from the database's head_key
 * row; read at create, immutable): what their head-to-head credential is
 * derived from. Never a user's token. */
void drv_lease_key(const drv_lease_t *l, char out[65]);

#endif
