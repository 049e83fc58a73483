/* cache_int.h — the node cache's internal records, shared by cache.c (the
 * tables and the fetcher threads) and cache_disk.c (files on disk). Not for
 * other code: use cache.h. Every field is guarded by drv_cache_t.mu. */
#ifndef DRV_CACHE_INT_H
#define DRV_CACHE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/cache.h"

enum { B_ABSENT, B_PARTIAL, B_FETCHING, B_PRESENT };          /* blob_t.state */
enum { A_FETCHING, A_LINKING, A_READY, A_FAILED };             /* art_t.state */
enum { CH_TODO, CH_INFLIGHT, CH_DONE };                         /* fetch_t.cst[] */

/* The peers of one ensure, shared by the downloads it started. */
typedef struct peer {
    char *id, *url, *bearer;     /* url: BASE/v1/cache/blobs/sha256 */
    bool banned;                 /* failed or sent bad bytes: not asked again */
} peer_t;

typedef struct peerset {
    int refs;
    size_t n;                    /* peers; member n is self when has_self */
    peer_t *p;
    const char **ids;            /* n (+1 for self) member ids, for drv_cache_rank */
    bool has_self;
} peerset_t;

typedef struct fetch {
    uint64_t chunk_size;
    size_t nchunks;
    char (*sha)[65];             /* the chunks' digests (from the first manifest that asked) */
    unsigned char *cst;          /* per chunk: CH_* */
    int *tries;                  /* per chunk: failed tries */
    int64_t *next_try;           /* per chunk: not before this (monotonic ms; 0 = now) */
    int64_t *wait_until;         /* per chunk: waiting on its owner ends (0 = not waiting) */
    unsigned char *mine;         /* per chunk: this node owns it (fetched first) */
    peerset_t *ps;               /* NULL = the origin only */
    char *url, *bearer;
    int fd, sfd;                 /* tmp/HEX.partial, tmp/HEX.chunks (O_APPEND) */
    bool opened, busy_open, finalizing, failed;
    size_t ndone, ninflight;
    uint64_t verified;           /* bytes of the chunks done (resumed ones too) */
    uint64_t got;                /* bytes fetched and verified by this process */
    char error[512];
} fetch_t;

typedef struct blob {
    char hex[65];
    uint64_t size;
    int state;
    int64_t last_use_ms;
    fetch_t *f;                  /* while B_FETCHING */
    uint64_t from_origin, from_peers;   /* bytes verified by this process, by source */
    struct blob *next;
} blob_t;

typedef struct art {
    char digest[65];
    drv_manifest_t *m;
    int state;
    int pins;
    char error[512];
    blob_t **blobs;              /* distinct */
    size_t nblobs;
    int64_t started_ms;          /* monotonic, of the ensure */
    uint64_t got_at_start;
    struct art *next;
} art_t;

struct drv_cache {
    char *dir;
    uint64_t max;
    drv_cache_opts_t opts;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    atomic_bool stop;
    blob_t *blobs;
    art_t *arts;
    pthread_t *thr;
    int nthr;
    int lockfd;
    bool index_dirty;
    int64_t wake_ms;             /* the earliest next_try waiting (0 = none) */
    pthread_mutex_t index_mu;    /* orders index writes; taken before mu, never inside it */
};

/* cache.c */
blob_t *drv_cache__blob(drv_cache_t *c, const char *hex);
blob_t *drv_cache__blob_add(drv_cache_t *c, const char *hex, uint64_t size, int state);
uint64_t drv_cache__held(drv_cache_t *c);
int drv_cache__make_room(drv_cache_t *c, uint64_t need, drv_error_t *err);
void drv_cache__art_free(art_t *a);
void drv_cache__fetch_free(fetch_t *f);
void *drv_cache__worker(void *arg);

/* One chunk into fd at off: "what" names the source in messages. Hashes
 * as it streams; 0 when the bytes came and match want, else -1 with msg
 * (*status: the HTTP status when one came; *mismatch: the bytes came but
 * their sha256 is wrong). No lock held. */
int drv_cache__get_chunk(drv_cache_t *c, const char *url, const char *bearer, const char *what,
                         long stall_ms, int64_t deadline_ms, int fd, uint64_t off, uint64_t len,
                         uint64_t total, const char *want, char *msg, size_t ml, int *status,
                         bool *mismatch);

/* cache_peers.c */
/* The peer set of an ensure (hex NULL), or of its blob hex: the peers
 * whose blobs list (when they have one) names it. */
peerset_t *drv_cache__peers_new(const drv_cache_peer_t *peers, size_t n, const char *self,
                                const char *hex, drv_error_t *err);
void drv_cache__peers_unref(peerset_t *ps);                          /* under the lock */
void drv_cache__peers_mark_mine(const peerset_t *ps, fetch_t *f, const char *hex);
/* Try the peers for chunk i of blob b (a claimed task; takes the lock
 * itself): 1 its bytes are in the partial file and verified (the caller
 * records them), 0 go to the origin now, -1 the task is given back to wait
 * for the owner (next_try set, applied). */
int drv_cache__chunk_from_peers(drv_cache_t *c, blob_t *b, size_t i);

/* cache_disk.c (no lock taken; the callers say when they hold it) */
void drv_cache__drop_snapshot(drv_cache_t *c, const char *digest);    /* renames into tmp/ */
void drv_cache__drop_blob_files(drv_cache_t *c, const char *hex);
void drv_cache__save_index(drv_cache_t *c);                           /* takes the locks itself */
int drv_cache__open_partial(drv_cache_t *c, const char *hex, uint64_t size, uint64_t chunk_size,
                            size_t nchunks, unsigned char *done, size_t *ndone, int *fd,
                            int *sfd, char *msg, size_t ml);
int drv_cache__finalize_blob(drv_cache_t *c, const char *hex, uint64_t size, int fd, char *msg,
                             size_t ml);
int drv_cache__link_snapshot(drv_cache_t *c, const drv_manifest_t *m, char *msg, size_t ml);

#endif
