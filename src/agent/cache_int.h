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

typedef struct fetch {
    uint64_t chunk_size;
    size_t nchunks;
    char (*sha)[65];             /* the chunks' digests (from the first manifest that asked) */
    unsigned char *cst;          /* per chunk: CH_* */
    int *tries;                  /* per chunk: failed tries */
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
