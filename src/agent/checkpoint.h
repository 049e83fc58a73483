/* checkpoint.h — the agent's checkpoints (issue 14 item 7): a replica or
 * job worker whose desired spec names a checkpoint scope gets
 * DROVER_CHECKPOINT_DIR = DATA_DIR/checkpoints/SCOPE. A checkpoint is a
 * subdirectory of it that the workload marks complete by writing the file
 * COMPLETE in it last (anything, even empty; written last, so its presence
 * means every other file is whole). This module
 *   - restores, before the workload first starts on this agent, the
 *     newest checkpoint the head has committed for the scope into the
 *     directory (through the node cache: blobs it holds are not fetched
 *     again), removes subdirectories without COMPLETE (a half-written
 *     checkpoint never survives a restart) and leftovers of a restore;
 *   - watches the directory while the workload runs and uploads each
 *     complete checkpoint in the background, oldest first, as an artifact
 *     push does (manifest, then only the chunks the head lacks: files
 *     unchanged since an earlier checkpoint are not sent again), and
 *     commits its manifest last, with keep: the head then deletes the
 *     oldest beyond keep, and so does the agent here. A checkpoint whose
 *     upload was cut off has no commit and never counts; after a restart
 *     on the same node it is uploaded again (only what is missing).
 *   - refuses a checkpoint with no file besides COMPLETE (logged, never
 *     committed, not retried).
 * The workload is never blocked: uploads read its files from this
 * module's own thread. A workload should not change a checkpoint once it
 * wrote COMPLETE (a file that changes while being read fails that upload;
 * it is retried up to 3 times).
 *
 * Threads: one thread of its own (restores and uploads, one at a time,
 * with its own HTTP client); drv_ckpt_acquire/release/status take a mutex
 * briefly and may be called from any thread (the supervisor's).
 */
#ifndef DRV_CHECKPOINT_H
#define DRV_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

struct drv_cache;

#define DRV_CKPT_MARKER "COMPLETE"
#define DRV_CKPT_CHUNK_DEFAULT (8ull << 20)

typedef struct drv_ckpt_opts {
    const char *server;          /* the head, http://HOST:PORT */
    const char *credential;      /* node credential (copied) */
    const char *data_dir;        /* directories in DATA_DIR/checkpoints/SCOPE */
    struct drv_cache *cache;     /* restores go through it (not owned) */
    uint64_t chunk_size;         /* of checkpoint manifests; 0 = DRV_CKPT_CHUNK_DEFAULT */
    double upload_mib_s;         /* upload bandwidth bound; 0 = none */
    int scan_ms;                 /* how often directories are looked at; 0 = 500 */
} drv_ckpt_opts_t;

typedef struct drv_ckpt drv_ckpt_t;

drv_ckpt_t *drv_ckpt_create(const drv_ckpt_opts_t *o, drv_error_t *err);
/* Stops the thread (an upload in flight is abandoned: it never counts; the
 * directories stay, and what was not committed is uploaded when the agent
 * comes back). Idempotent; acquire/release may still be called after. The
 * agent calls it before stopping its replicas, so that a shutdown removes
 * no directory. */
void drv_ckpt_stop(drv_ckpt_t *c);
/* drv_ckpt_stop, then frees c. */
void drv_ckpt_destroy(drv_ckpt_t *c);

/* Is scope usable (1..127 of [A-Za-z0-9._:-], not starting with '.')? */
bool drv_ckpt_scope_valid(const char *scope);
/* The directory of scope (DATA_DIR/checkpoints/SCOPE). */
void drv_ckpt_dir(const drv_ckpt_t *c, const char *scope, char *buf, size_t n);

/* A workload of scope wants to start: non-blocking. 1 when its directory
 * is ready (restored; watched from now on), 0 while the restore runs, -1
 * when it failed (why filled; a later call retries). The restore lays
 * out every committed checkpoint the directory lacks; it runs for a
 * scope's first holder and again for a new holder of a scope no one holds
 * (a job's next attempt on a node that kept the directory). Calls for a
 * scope held by another record answer 1 at once.
 * Each call that answered 1 is matched by one drv_ckpt_release. */
int drv_ckpt_acquire(drv_ckpt_t *c, const char *scope, int keep, char *why, size_t wl);
/* The workload is gone: complete checkpoints still waiting are uploaded,
 * then the scope is forgotten and its directory removed (unless acquired
 * again meanwhile). */
void drv_ckpt_release(drv_ckpt_t *c, const char *scope);

typedef struct drv_ckpt_stats {
    uint64_t committed, rejected, failed; /* uploads */
    uint64_t bytes_sent, bytes_skipped;   /* chunk bytes PUT / not sent (the head had them) */
    uint64_t restored;
    char last[128];              /* the last committed "SCOPE/NAME" */
} drv_ckpt_stats_t;
void drv_ckpt_stats(drv_ckpt_t *c, drv_ckpt_stats_t *out);

/* Remove subdirectories of dir without the marker, and restore leftovers
 * (".restore-*"). For a workload's restart on this node. */
void drv_ckpt_clean_dir(const char *dir);

#endif
