/* cache.h — the node cache of artifacts (issue 14): verified,
 * content-addressed blobs and read-only snapshot directories of hard links.
 *
 * On disk, under the cache directory (the agent's DATA_DIR/cache):
 *   blobs/sha256/HEX          one file's content, named by its sha256, 0444
 *   snapshots/DIGEST/...      one artifact (DIGEST = its manifest digest):
 *                             hard links to the blobs laid out as the
 *                             manifest says; files 0444, directories 0555
 *   snapshots/DIGEST.json     that artifact's manifest
 *   tmp/HEX.partial           a blob being downloaded (pwrite at offsets)
 *   tmp/HEX.chunks            its sidecar: a header line, then one line per
 *                             chunk verified and flushed to disk
 *   index                     last use of every blob (see cache_rules.h)
 *   lock                      flock'd by the one process using the cache
 *
 * Downloads: the cache's fetcher threads (opts.threads of them) issue
 * ranged GETs, one per manifest chunk, spread over the blobs being fetched;
 * each chunk's bytes are hashed while they stream in and written with
 * pwrite; a chunk whose sha256 is right is fdatasync'ed and then recorded in
 * the sidecar; a wrong one is retried (opts.retries times) and then fails
 * the blob with an error naming blob, chunk, expected and actual digests.
 * When every chunk is in, the whole file's sha256 is checked and the file
 * renamed into blobs/. Nothing unverified is ever linked into a snapshot.
 * Resume rule: after a crash or restart, chunks the sidecar lists are kept
 * and only the others are fetched again, so a restart costs at most the
 * chunks that were in flight (at most opts.threads chunks).
 * One download per blob per node: callers wanting a blob already being
 * fetched (for any artifact) join that download.
 *
 * Size bound and eviction rule: the bytes of blobs held, partial or being
 * fetched never exceed max_bytes. An ensure that needs room evicts the
 * blobs used least recently first (last use: fetched, ensured, pinned or
 * unpinned; persisted in the index), skipping every blob of an artifact
 * that is pinned or being fetched or linked; evicting a blob removes the
 * snapshots that link it. If that cannot make room, the ensure fails (507)
 * and nothing is evicted. Pins are in memory: after a restart the agent pins
 * again what its running replicas use.
 *
 * Peer fan-out (drv_cache_ensure_peers): besides the origin, an ensure
 * may name peers, other nodes' cache servers (cacheserve.h), and this
 * node's own id among them. Each chunk is asked of the peers first, in the
 * order drv_cache_rank gives for it (cache_rules.h); the best-ranked member
 * not banned is the chunk's owner, the only node that takes it from the
 * origin at once; the others, finding no peer holding it, wait for the
 * owner (asking again every DRV_CACHE_PEER_POLL_MS) up to opts.owner_wait_ms
 * and then go to the origin. Every chunk is verified whatever its source.
 * A peer that answers 404 does not hold the chunk (yet); one that refuses,
 * fails, stalls (opts.peer_stall_ms), is too slow (opts.peer_deadline_ms
 * per chunk) or sends a chunk whose sha256 is wrong is banned: not asked
 * again during that download (a warning names it). A download joined by a
 * later ensure keeps the peers of the ensure that started it.
 *
 * Thread safety: every function may be called from any thread; none does
 * network I/O or hashing on the caller's thread (ensure only decides and
 * renames/unlinks evicted files; the fetcher threads do the rest). One
 * mutex guards the tables; downloads, hashing, fsync and linking run outside
 * it.
 */
#ifndef DRV_CACHE_H
#define DRV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/manifest.h"

typedef struct drv_cache drv_cache_t;

typedef struct drv_cache_opts {
    int threads;                 /* concurrent ranged GETs; 0 = 4 */
    int retries;                 /* tries again of a chunk that failed; 0 = 3, -1 = none */
    long timeout_ms;             /* of silence on a request; 0 = 30 s */
    long peer_stall_ms;          /* of silence from a peer; 0 = 5 s */
    long peer_deadline_ms;       /* for one chunk from a peer; 0 = 120 s */
    long owner_wait_ms;          /* waiting for a chunk's owner to hold it; 0 = 30 s, -1 = none */
} drv_cache_opts_t;

#define DRV_CACHE_PEER_POLL_MS 200   /* asking the owner again, while waiting */
#define DRV_CACHE_MAX_PEERS 256

/* Where an artifact's blobs come from: BASE/HEX, or BASE/PATH (the file's
 * manifest path, percent-encoded) when by_path. */
typedef struct drv_cache_origin {
    const char *base_url;        /* http[s]://HOST[:PORT][/PREFIX] */
    const char *bearer;          /* NULL = none */
    bool by_path;
} drv_cache_origin_t;

/* Another node's cache server: chunks at BASE/v1/cache/blobs/sha256/HEX. */
typedef struct drv_cache_peer {
    const char *id;              /* the node's stable name, the same on every node */
    const char *base_url;        /* http://HOST:PORT */
    const char *bearer;          /* a secret it accepts; NULL = none */
    /* The blobs (sha256 hex) it holds or wants, when not every blob of the
     * artifact (another artifact of its shares them): it is a member of
     * those blobs' rankings only. NULL: all. */
    const char *const *blobs;
    size_t nblobs;
} drv_cache_peer_t;

typedef enum drv_cache_state {
    DRV_CACHE_UNKNOWN = 0,       /* never ensured, or evicted */
    DRV_CACHE_FETCHING,          /* downloading or linking */
    DRV_CACHE_READY,             /* the snapshot exists */
    DRV_CACHE_FAILED,            /* see error; ensure again to retry */
} drv_cache_state_t;

typedef struct drv_cache_progress {
    drv_cache_state_t state;
    uint64_t done, total;        /* bytes verified of the artifact's distinct blobs */
    double rate;                 /* bytes/s fetched since this ensure began */
    uint64_t from_origin, from_peers;   /* bytes verified by this process, by source */
    char error[512];
} drv_cache_progress_t;

typedef struct drv_cache_entry {
    char hex[65];
    uint64_t size;
    int64_t last_use_ms;         /* wall clock */
    bool in_use;                 /* pinned, or wanted by a download in progress */
    bool partial;                /* a download's leftover, not a blob yet */
} drv_cache_entry_t;

/* Open (creating) the cache in dir. -1 with err when dir cannot be made or
 * is in use by another process. Leftover downloads are kept for resume;
 * if what is held is over max_bytes, the least recently used goes now. */
drv_cache_t *drv_cache_create(const char *dir, uint64_t max_bytes, const drv_cache_opts_t *opts,
                              drv_error_t *err);
/* Stops the fetchers (a download in flight is abandoned; it resumes later). */
void drv_cache_destroy(drv_cache_t *c);

/* Make the artifact m available: 0 when it is ready, being fetched (now or
 * already) or linked; -1 with err when it cannot be (no room: 507; bad
 * origin: 400). Poll drv_cache_progress or block in drv_cache_wait. */
int drv_cache_ensure(drv_cache_t *c, const drv_manifest_t *m, const drv_cache_origin_t *origin,
                     drv_error_t *err);
/* The same, with peers (npeers <= DRV_CACHE_MAX_PEERS; ids distinct; one
 * whose id is self is left out) and self, this node's id among them (NULL:
 * not a member, it never waits for owners). 400 when a peer is malformed. */
int drv_cache_ensure_peers(drv_cache_t *c, const drv_manifest_t *m,
                           const drv_cache_origin_t *origin, const drv_cache_peer_t *peers,
                           size_t npeers, const char *self, drv_error_t *err);
/* The artifact's state (DRV_CACHE_UNKNOWN when the cache has none). */
drv_cache_state_t drv_cache_progress(drv_cache_t *c, const char *digest, drv_cache_progress_t *p);
/* Wait until the artifact is ready or failed, or timeout_ms (< 0: no
 * bound) passed; returns the state then. */
drv_cache_state_t drv_cache_wait(drv_cache_t *c, const char *digest, long timeout_ms,
                                 drv_cache_progress_t *p);
/* The snapshot directory of a ready artifact. */
int drv_cache_snapshot_path(drv_cache_t *c, const char *digest, char *out, size_t n,
                            drv_error_t *err);
/* Pins count: a pinned artifact's blobs are never evicted. Pin an artifact
 * the cache knows (ready or being fetched); unpin one pinned. */
int drv_cache_pin(drv_cache_t *c, const char *digest, drv_error_t *err);
int drv_cache_unpin(drv_cache_t *c, const char *digest, drv_error_t *err);
/* What is held (blobs and partial downloads), malloc'd array; *held the
 * bytes in all (what the bound counts). */
int drv_cache_list(drv_cache_t *c, drv_cache_entry_t **out, size_t *n, uint64_t *held);

/* For the peer server: a descriptor to read [off, off + *len) of blob hex
 * from (*len is cut to the blob's end; UINT64_MAX = to the end), its size
 * in *size. A whole blob serves any range; a blob being downloaded serves
 * only ranges inside chunks it verified. 404 when not held or not
 * verified, 416 when off is past the end (or the blob is empty and a range
 * was asked: ranged = true). The caller closes *fd. */
int drv_cache_open_range(drv_cache_t *c, const char *hex, uint64_t off, uint64_t *len,
                         bool ranged, int *fd, uint64_t *size, drv_error_t *err);

#endif
