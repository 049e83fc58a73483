/* store.h — the durable store: a record log with group commit.
 *
 * Records are (kind, key) -> JSON text. The head keeps every record in
 * memory (state/state.c) and uses the store only to make changes durable and
 * to load them at start. Writes are queued in sequence order by their single
 * producer (the state module, under its lock) and committed by one writer
 * thread that puts every queued write into one transaction: concurrent
 * writers share one commit (and one fsync). drv_store_committed() tells how
 * far the durable prefix reaches; a commit callback announces progress.
 *
 * A failed commit is fatal (like PostgreSQL's PANIC on fsync failure): the
 * daemon exits and restarts from what is durable, so memory never answers
 * for a write the disk does not hold. A commit refused by the lease fence
 * (PostgreSQL with several heads: this head is no longer the leader) is the
 * same rule with another exit: the on_fenced callback (droverd re-executes
 * itself and comes back as a standby, from what is durable), or exit 75.
 *
 * Backends implement drv_store_backend_t: sqlite.c (SQLite in the data dir,
 * the default) and pg.c (PostgreSQL, `--store postgres://...`).
 */
#ifndef DRV_STORE_H
#define DRV_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

typedef struct drv_store_op {
    bool del;            /* true: delete (kind,key); false: upsert */
    const char *kind;    /* static string */
    char *key;           /* owned */
    char *body;          /* owned JSON text, NULL for delete */
    uint64_t seq;
    long long epoch;     /* the lease epoch when it was queued: drv_store_enqueue sets it */
} drv_store_op_t;

typedef int (*drv_store_load_fn)(void *ctx, const char *kind, const char *key,
                                 const char *body, drv_error_t *err);

/* The order records load in: parents before children (users before tokens
 * before the rest), as an SQL expression over the column kind. */
#define DRV_STORE_LOAD_ORDER                                                   \
    "CASE kind WHEN 'user' THEN 0 WHEN 'token' THEN 1 WHEN 'cluster' THEN 2 "  \
    "WHEN 'nodepool' THEN 3 WHEN 'model' THEN 4 WHEN 'deployment' THEN 5 "     \
    "WHEN 'jointoken' THEN 6 WHEN 'node' THEN 7 ELSE 8 END"

typedef struct drv_store_backend {
    const char *name;
    /* Optional: is `where` well-formed (checked before anything starts)? */
    int (*check)(const char *where, drv_error_t *err);
    /* where: the data dir (sqlite) or the database URL (postgres) */
    void *(*open)(const char *where, drv_error_t *err);
    void (*close)(void *b);
    int (*load)(void *b, drv_store_load_fn fn, void *ctx, drv_error_t *err);
    /* Apply ops[0..n) atomically and durably, fenced by their lease epoch
     * (all ops of a batch carry one; 0: unfenced, -1: refused; postgres). */
    int (*commit)(void *b, const drv_store_op_t *ops, size_t n, drv_error_t *err);
    int (*schema_version)(void *b);
    /* What the store is, for messages (no password). */
    const char *(*where)(void *b);
    /* Optional: the highest seq load saw, deletes included (0: none). */
    uint64_t (*loaded_seq)(void *b);
} drv_store_backend_t;

/* drv_error_t.code of a commit the lease fence refused. */
#define DRV_STORE_FENCED "fenced"

extern const drv_store_backend_t drv_store_sqlite;
extern const drv_store_backend_t drv_store_postgres;

/* The backend a --store value names: NULL, "" or "sqlite" is SQLite in the
 * data dir; a postgres:// or postgresql:// URL is PostgreSQL (its syntax
 * checked). NULL and err (invalid_argument) for anything else. */
const drv_store_backend_t *drv_store_backend_for(const char *spec, drv_error_t *err);

typedef struct drv_store drv_store_t;
typedef void (*drv_store_commit_cb)(void *ctx, uint64_t committed_seq);

drv_store_t *drv_store_create(const drv_store_backend_t *backend, const char *where,
                              drv_error_t *err);
void drv_store_destroy(drv_store_t *st);  /* drains the queue first */

/* Replay every record (call before drv_store_start). */
int drv_store_load(drv_store_t *st, drv_store_load_fn fn, void *ctx, drv_error_t *err);
/* Start the writer thread; seq numbers continue after first_seq. */
int drv_store_start(drv_store_t *st, drv_error_t *err);

/* Queue one op (takes ownership of op->key/body). Caller assigns increasing
 * seqs and queues in seq order. Never blocks on I/O. */
void drv_store_enqueue(drv_store_t *st, drv_store_op_t *op);
uint64_t drv_store_committed(const drv_store_t *st);
/* Block until committed >= seq. */
void drv_store_wait(drv_store_t *st, uint64_t seq);
void drv_store_on_commit(drv_store_t *st, drv_store_commit_cb cb, void *ctx);

/* The lease epoch (store/lease.h) the writes queued from now on are made
 * under: -1 while this head does not lead, the epoch once it does. Once set,
 * the store is fenced: a write is committed only under the epoch it was
 * queued with, and only while that is still the store's epoch and above 0
 * (a write queued before this head led is refused, not committed under the
 * epoch it took later); the database checks the epoch itself (postgres,
 * drover_fence). Never called: unfenced (SQLite, one head; the tools). */
void drv_store_set_epoch(drv_store_t *st, long long epoch);
/* The log position load reached (postgres; 0 on SQLite). */
uint64_t drv_store_loaded_seq(drv_store_t *st);
/* Called by the writer thread when the fence refused a commit; the writer
 * then commits nothing more (the callback is expected to end the process).
 * Any other failed commit still exits 70. */
void drv_store_on_fenced(drv_store_t *st, void (*cb)(void *ctx, const char *why), void *ctx);

/* Counters for /metrics and benchmarks. */
uint64_t drv_store_commits(const drv_store_t *st);
int drv_store_schema_version(drv_store_t *st);
const char *drv_store_where(drv_store_t *st);

#endif
