/* cache.c — the node cache (see cache.h for the layout and the rules):
 * the tables, ensure/pin/list, eviction, and the fetcher threads' tasks
 * (open a download, fetch one chunk, finalize a blob, link a snapshot).
 * Disk helpers (scan at start, remove trees, index) are cache_disk.c;
 * peer sources and what the peer server may read are cache_peers.c.
 *
 * Ownership: c->mu guards every blob_t, art_t and fetch_t field. A task is
 * claimed under the lock (its blob/artifact marked busy, so nothing frees
 * or evicts it), run without it, and its result applied under it again.
 * Blob and artifact records are freed only by eviction (never busy ones)
 * and by destroy (after the threads are joined).
 */
#define _GNU_SOURCE
#include "agent/cache_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/cache_rules.h"
#include "agent/fetch.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/util.h"

/* --- tables -------------------------------------------------------------- */

blob_t *drv_cache__blob(drv_cache_t *c, const char *hex)
{
    for (blob_t *b = c->blobs; b; b = b->next)
        if (strcmp(b->hex, hex) == 0)
            return b;
    return NULL;
}

blob_t *drv_cache__blob_add(drv_cache_t *c, const char *hex, uint64_t size, int state)
{
    blob_t *b = calloc(1, sizeof *b);
    if (!b)
        abort();
    memcpy(b->hex, hex, 65);
    b->size = size;
    b->state = state;
    b->next = c->blobs;
    c->blobs = b;
    return b;
}

static art_t *art_find(drv_cache_t *c, const char *digest)
{
    for (art_t *a = c->arts; a; a = a->next)
        if (strcmp(a->digest, digest) == 0)
            return a;
    return NULL;
}

static bool art_uses(const art_t *a, const blob_t *b)
{
    for (size_t i = 0; i < a->nblobs; i++)
        if (a->blobs[i] == b)
            return true;
    return false;
}

/* A blob no eviction may take: in an artifact pinned, fetching or linking. */
static bool protected(drv_cache_t *c, const blob_t *b)
{
    if (b->state == B_FETCHING)
        return true;
    for (art_t *a = c->arts; a; a = a->next)
        if ((a->pins > 0 || a->state == A_FETCHING || a->state == A_LINKING) && art_uses(a, b))
            return true;
    return false;
}

uint64_t drv_cache__held(drv_cache_t *c)
{
    uint64_t h = 0;
    for (blob_t *b = c->blobs; b; b = b->next)
        h += b->state == B_ABSENT ? 0 : b->size;
    return h;
}

static void fetch_free(fetch_t *f)
{
    if (!f)
        return;
    if (f->fd >= 0)
        close(f->fd);
    if (f->sfd >= 0)
        close(f->sfd);
    free(f->sha);
    free(f->cst);
    free(f->tries);
    free(f->next_try);
    free(f->wait_until);
    free(f->mine);
    if (f->ps)
        drv_cache__peers_unref(f->ps);   /* destroy: no thread left */
    free(f->url);
    free(f->bearer);
    free(f);
}

void drv_cache__art_free(art_t *a)
{
    if (!a)
        return;
    drv_manifest_free(a->m);
    free(a->blobs);
    free(a);
}

/* Evict: remove each victim blob and every (unprotected) artifact linking
 * it. Under the lock; only renames and unlinks. */
static void evict(drv_cache_t *c, blob_t **victims, size_t nv)
{
    for (art_t **pa = &c->arts; *pa;) {
        art_t *a = *pa;
        bool hit = false;
        for (size_t i = 0; i < nv && !hit; i++)
            hit = art_uses(a, victims[i]);
        if (!hit) {
            pa = &a->next;
            continue;
        }
        drv_info("cache: evicting snapshot %s", a->digest);
        drv_cache__drop_snapshot(c, a->digest);
        *pa = a->next;
        drv_cache__art_free(a);
    }
    for (size_t i = 0; i < nv; i++) {
        blob_t *v = victims[i];
        drv_info("cache: evicting %s %s (%" PRIu64 " bytes)",
                 v->state == B_PARTIAL ? "partial download" : "blob", v->hex, v->size);
        drv_cache__drop_blob_files(c, v->hex);
        for (blob_t **pb = &c->blobs; *pb; pb = &(*pb)->next)
            if (*pb == v) {
                *pb = v->next;
                break;
            }
        free(v);
    }
    c->index_dirty = true;
}

int drv_cache__make_room(drv_cache_t *c, uint64_t need, drv_error_t *err)
{
    uint64_t held = drv_cache__held(c);
    if (held + need <= c->max)
        return 0;
    size_t n = 0;
    for (blob_t *b = c->blobs; b; b = b->next)
        n++;
    drv_cache_lru_item_t *items = calloc(n + 1, sizeof *items);
    blob_t **bs = calloc(n + 1, sizeof *bs);
    size_t *vi = calloc(n + 1, sizeof *vi);
    int rc = -1;
    if (!items || !bs || !vi) {
        drv_err_internal(err, "out of memory");
        goto out;
    }
    size_t k = 0;
    uint64_t pinned = 0;
    for (blob_t *b = c->blobs; b; b = b->next, k++) {
        bool ev = (b->state == B_PRESENT || b->state == B_PARTIAL) && !protected(c, b);
        if (!ev && b->state != B_ABSENT)
            pinned += b->size;
        items[k] = (drv_cache_lru_item_t){b->hex, b->state == B_ABSENT ? 0 : b->size,
                                          b->last_use_ms, ev};
        bs[k] = b;
    }
    size_t nv = 0;
    uint64_t over = held + need - c->max;
    if (need > c->max || drv_cache_lru_pick(items, n, over, vi, &nv) < 0) {
        drv_err(err, 507, "insufficient_storage", "",
                "the node cache cannot make room for %" PRIu64 " bytes: its bound is %" PRIu64
                ", %" PRIu64 " are in use (pinned or being fetched)",
                need, c->max, pinned);
        goto out;
    }
    blob_t **victims = calloc(nv + 1, sizeof *victims);
    if (!victims) {
        drv_err_internal(err, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nv; i++)
        victims[i] = bs[vi[i]];
    evict(c, victims, nv);
    free(victims);
    rc = 0;
out:
    free(items);
    free(bs);
    free(vi);
    return rc;
}

/* --- ensure, pin, list --------------------------------------------------- */

static fetch_t *fetch_new(const drv_manifest_t *m, const drv_manifest_file_t *f,
                          const drv_cache_origin_t *o, peerset_t *ps)
{
    fetch_t *x = calloc(1, sizeof *x);
    if (!x)
        abort();
    x->fd = x->sfd = -1;
    x->chunk_size = m->chunk_size;
    x->nchunks = f->nchunks;
    x->sha = drv_xmalloc((f->nchunks + 1) * sizeof *x->sha);
    if (f->nchunks)
        memcpy(x->sha, f->chunks, f->nchunks * sizeof *x->sha);
    x->cst = calloc(f->nchunks + 1, 1);
    x->tries = calloc(f->nchunks + 1, sizeof *x->tries);
    x->next_try = calloc(f->nchunks + 1, sizeof *x->next_try);
    x->wait_until = calloc(f->nchunks + 1, sizeof *x->wait_until);
    x->mine = malloc(f->nchunks + 1);
    if (!x->cst || !x->tries || !x->next_try || !x->wait_until || !x->mine)
        abort();
    memset(x->mine, 1, f->nchunks + 1);
    if (ps) {
        x->ps = ps;
        ps->refs++;
        drv_cache__peers_mark_mine(ps, x, f->sha256);
    }
    x->url = drv_fetch_url_join(o->base_url, o->by_path ? f->path : f->sha256);
    x->bearer = o->bearer ? drv_strdup(o->bearer) : NULL;
    return x;
}

static void touch(drv_cache_t *c, art_t *a)
{
    int64_t now = drv_now_ms();
    for (size_t i = 0; i < a->nblobs; i++)
        a->blobs[i]->last_use_ms = now;
    c->index_dirty = true;
}

static drv_manifest_t *manifest_copy(const drv_manifest_t *m)
{
    char *js = drv_manifest_to_json(m);
    drv_manifest_t *out = NULL;
    if (js)
        drv_manifest_parse(js, strlen(js), &out, NULL);
    free(js);
    return out;
}

int drv_cache_ensure(drv_cache_t *c, const drv_manifest_t *m, const drv_cache_origin_t *origin,
                     drv_error_t *err)
{
    return drv_cache_ensure_peers(c, m, origin, NULL, 0, NULL, err);
}

int drv_cache_ensure_peers(drv_cache_t *c, const drv_manifest_t *m,
                           const drv_cache_origin_t *origin, const drv_cache_peer_t *peers,
                           size_t npeers, const char *self, drv_error_t *err)
{
    if (!origin || !origin->base_url ||
        (strncmp(origin->base_url, "http://", 7) != 0 &&
         strncmp(origin->base_url, "https://", 8) != 0))
        return drv_err_invalid(err, "origin", "the origin must be an http:// or https:// URL");
    peerset_t *ps = NULL;
    bool by_blob = false;   /* some peer is a member of some blobs' rankings only */
    for (size_t i = 0; i < npeers; i++)
        by_blob |= peers[i].blobs != NULL;
    if (npeers && !(ps = drv_cache__peers_new(peers, npeers, self, NULL, err)))
        return -1;   /* (checks them all) */
    drv_manifest_t *copy = manifest_copy(m);
    if (!copy) {
        drv_cache__peers_unref(ps);   /* nobody else has it yet */
        return drv_err_invalid(err, "manifest", "the manifest does not validate");
    }
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    art_t *a = art_find(c, m->digest);
    if (a && a->state != A_FAILED) {
        if (a->state == A_READY)
            touch(c, a);
        drv_manifest_free(copy);
        goto out;
    }
    /* distinct blobs; a blob seen for the first time is absent */
    blob_t **bl = calloc(copy->nfiles + 1, sizeof *bl);
    if (!bl)
        abort();
    size_t nb = 0;
    uint64_t need = 0;
    for (size_t i = 0; i < copy->nfiles; i++) {
        const drv_manifest_file_t *f = &copy->files[i];
        blob_t *b = drv_cache__blob(c, f->sha256);
        if (b && b->size != f->size) {
            drv_err_invalid(err, "manifest", "%s: sha256 %s with %" PRIu64 " bytes, but the "
                            "cache holds that blob with %" PRIu64, f->path, f->sha256, f->size,
                            b->size);
            free(bl);
            drv_manifest_free(copy);
            rc = -1;
            goto out;
        }
        if (!b)
            b = drv_cache__blob_add(c, f->sha256, f->size, B_ABSENT);
        bool dup = false;
        for (size_t k = 0; k < nb && !dup; k++)
            dup = bl[k] == b;
        if (!dup) {
            bl[nb++] = b;
            need += b->state == B_ABSENT ? b->size : 0;
        }
    }
    if (!a) {
        a = calloc(1, sizeof *a);
        if (!a)
            abort();
        memcpy(a->digest, m->digest, 65);
        a->next = c->arts;
        c->arts = a;
    }
    drv_manifest_free(a->m);
    free(a->blobs);
    a->m = copy;
    a->blobs = bl;
    a->nblobs = nb;
    a->state = A_FETCHING;   /* protects its blobs while room is made */
    a->error[0] = 0;
    if (drv_cache__make_room(c, need, err) < 0) {
        a->state = A_FAILED;
        snprintf(a->error, sizeof a->error, "%s", err ? err->message : "no room");
        rc = -1;
        goto out;
    }
    a->started_ms = drv_mono_ms();
    a->got_at_start = 0;
    for (size_t i = 0; i < copy->nfiles; i++) {
        blob_t *b = drv_cache__blob(c, copy->files[i].sha256);
        if (b->state == B_ABSENT || b->state == B_PARTIAL) {
            peerset_t *bps = ps && by_blob ? drv_cache__peers_new(peers, npeers, self,
                                                                  copy->files[i].sha256, NULL)
                                           : ps;
            if (bps && bps != ps && bps->n == 0) {   /* no peer has or wants this blob */
                drv_cache__peers_unref(bps);
                bps = NULL;
            }
            b->f = fetch_new(copy, &copy->files[i], origin, bps);
            if (bps != ps)
                drv_cache__peers_unref(bps);   /* the download holds its own reference */
            b->state = B_FETCHING;
            b->last_use_ms = drv_now_ms();
        }
    }
    for (size_t i = 0; i < nb; i++)
        a->got_at_start += bl[i]->f ? bl[i]->f->got : 0;
    pthread_cond_broadcast(&c->work);
out:
    if (ps)
        drv_cache__peers_unref(ps);   /* the downloads hold their own references */
    pthread_mutex_unlock(&c->mu);
    if (rc == 0)
        drv_cache__save_index(c);
    return rc;
}

static drv_cache_state_t fill_progress(drv_cache_t *c, const char *digest,
                                       drv_cache_progress_t *p)
{
    drv_cache_progress_t z = {0};
    art_t *a = art_find(c, digest);
    if (a) {
        z.state = a->state == A_READY ? DRV_CACHE_READY
                  : a->state == A_FAILED ? DRV_CACHE_FAILED : DRV_CACHE_FETCHING;
        uint64_t got = 0;
        for (size_t i = 0; i < a->nblobs; i++) {
            blob_t *b = a->blobs[i];
            z.total += b->size;
            z.done += b->state == B_PRESENT ? b->size : b->f ? b->f->verified : 0;
            got += b->f ? b->f->got : 0;
            z.from_origin += b->from_origin;
            z.from_peers += b->from_peers;
        }
        int64_t el = drv_mono_ms() - a->started_ms;
        z.rate = el > 0 && got >= a->got_at_start ? (double)(got - a->got_at_start) * 1000.0 / (double)el : 0;
        snprintf(z.error, sizeof z.error, "%s", a->error);
    }
    if (p)
        *p = z;
    return z.state;
}

drv_cache_state_t drv_cache_progress(drv_cache_t *c, const char *digest, drv_cache_progress_t *p)
{
    pthread_mutex_lock(&c->mu);
    drv_cache_state_t s = fill_progress(c, digest, p);
    pthread_mutex_unlock(&c->mu);
    return s;
}

drv_cache_state_t drv_cache_wait(drv_cache_t *c, const char *digest, long timeout_ms,
                                 drv_cache_progress_t *p)
{
    struct timespec dl;
    if (timeout_ms >= 0)
        drv_deadline_in(timeout_ms, &dl);
    pthread_mutex_lock(&c->mu);
    drv_cache_state_t s;
    while ((s = fill_progress(c, digest, p)) == DRV_CACHE_FETCHING)
        if (timeout_ms < 0)
            pthread_cond_wait(&c->done, &c->mu);
        else if (pthread_cond_timedwait(&c->done, &c->mu, &dl) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&c->mu);
    return s;
}

int drv_cache_snapshot_path(drv_cache_t *c, const char *digest, char *out, size_t n,
                            drv_error_t *err)
{
    pthread_mutex_lock(&c->mu);
    art_t *a = art_find(c, digest);
    bool ready = a && a->state == A_READY;
    pthread_mutex_unlock(&c->mu);
    if (!ready)
        return drv_err_not_found(err, "artifact %s is not ready in the node cache", digest);
    snprintf(out, n, "%s/snapshots/%s", c->dir, digest);
    return 0;
}

static int pin_by(drv_cache_t *c, const char *digest, int d, drv_error_t *err)
{
    pthread_mutex_lock(&c->mu);
    art_t *a = art_find(c, digest);
    int rc = 0;
    if (!a || a->state == A_FAILED)
        rc = drv_err_not_found(err, "artifact %s is not in the node cache", digest);
    else if (d < 0 && a->pins == 0)
        rc = drv_err_conflict(err, "artifact %s is not pinned", digest);
    else
        a->pins += d, touch(c, a);
    pthread_mutex_unlock(&c->mu);
    drv_cache__save_index(c);
    return rc;
}

int drv_cache_pin(drv_cache_t *c, const char *digest, drv_error_t *err)
{
    return pin_by(c, digest, 1, err);
}

int drv_cache_unpin(drv_cache_t *c, const char *digest, drv_error_t *err)
{
    return pin_by(c, digest, -1, err);
}

int drv_cache_list(drv_cache_t *c, drv_cache_entry_t **out, size_t *n, uint64_t *held)
{
    pthread_mutex_lock(&c->mu);
    size_t k = 0;
    for (blob_t *b = c->blobs; b; b = b->next)
        k++;
    drv_cache_entry_t *v = calloc(k + 1, sizeof *v);
    if (!v) {
        pthread_mutex_unlock(&c->mu);
        return -1;
    }
    k = 0;
    for (blob_t *b = c->blobs; b; b = b->next) {
        if (b->state == B_ABSENT)
            continue;
        drv_cache_entry_t *e = &v[k++];
        memcpy(e->hex, b->hex, 65);
        e->size = b->size;
        e->last_use_ms = b->last_use_ms;
        e->in_use = protected(c, b);
        e->partial = b->state != B_PRESENT;
    }
    if (held)
        *held = drv_cache__held(c);
    pthread_mutex_unlock(&c->mu);
    *out = v;
    *n = k;
    return 0;
}

/* --- the fetcher threads ------------------------------------------------- */

enum task_kind { T_NONE, T_OPEN, T_CHUNK, T_FINALIZE, T_LINK };

typedef struct task {
    enum task_kind kind;
    blob_t *b;
    art_t *a;
    size_t chunk;
} task_t;

/* Fail a blob's download: its artifacts fail with msg. Under the lock. */
static void blob_failed(drv_cache_t *c, blob_t *b, const char *msg)
{
    for (art_t *a = c->arts; a; a = a->next)
        if (a->state == A_FETCHING && art_uses(a, b)) {
            a->state = A_FAILED;
            snprintf(a->error, sizeof a->error, "%s", msg);
        }
    pthread_cond_broadcast(&c->done);
}

/* A download nobody works on any more goes back to a partial file (or to
 * nothing when none was made). Under the lock; returns the fetch to free. */
static fetch_t *fetch_detach(blob_t *b, bool keep_partial)
{
    fetch_t *f = b->f;
    b->f = NULL;
    b->state = keep_partial ? B_PARTIAL : B_ABSENT;
    if (f && f->ps)
        drv_cache__peers_unref(f->ps), f->ps = NULL;
    return f;
}

/* The chunk of f to fetch next: TODO and due, this node's own first; -1
 * when none is due (c->wake_ms: the earliest one waiting). */
static long next_chunk(drv_cache_t *c, fetch_t *f, int64_t now)
{
    long other = -1;
    for (size_t i = 0; i < f->nchunks; i++) {
        if (f->cst[i] != CH_TODO)
            continue;
        if (f->next_try[i] > now) {
            if (!c->wake_ms || f->next_try[i] < c->wake_ms)
                c->wake_ms = f->next_try[i];
            continue;
        }
        if (f->mine[i])
            return (long)i;
        if (other < 0)
            other = (long)i;
    }
    return other;
}

static task_t pick(drv_cache_t *c)
{
    int64_t now = drv_mono_ms();
    c->wake_ms = 0;
    for (art_t *a = c->arts; a; a = a->next) {
        if (a->state != A_FETCHING)
            continue;
        bool all = true;
        for (size_t i = 0; i < a->nblobs && all; i++)
            all = a->blobs[i]->state == B_PRESENT;
        if (all) {
            a->state = A_LINKING;
            return (task_t){T_LINK, NULL, a, 0};
        }
    }
    blob_t *best = NULL;
    long best_i = -1;
    for (blob_t *b = c->blobs; b; b = b->next) {
        fetch_t *f = b->f;
        if (b->state != B_FETCHING || f->busy_open || f->finalizing)
            continue;
        if (!f->opened) {
            f->busy_open = true;
            return (task_t){T_OPEN, b, NULL, 0};
        }
        if (f->failed)
            continue;
        if (f->ndone == f->nchunks && f->ninflight == 0) {
            f->finalizing = true;
            return (task_t){T_FINALIZE, b, NULL, 0};
        }
        if (f->ndone + f->ninflight < f->nchunks && (!best || f->ninflight < best->f->ninflight)) {
            long i = next_chunk(c, f, now);
            if (i >= 0)
                best = b, best_i = i;
        }
    }
    if (best) {
        fetch_t *f = best->f;
        size_t i = (size_t)best_i;
        f->cst[i] = CH_INFLIGHT;
        f->ninflight++;
        return (task_t){T_CHUNK, best, NULL, i};
    }
    return (task_t){T_NONE, NULL, NULL, 0};
}

typedef struct chunk_io {
    int fd;
    uint64_t off;
    drv_sha256_t h;
    int err;
} chunk_io_t;

static int on_data(void *ud, const char *p, size_t n)
{
    chunk_io_t *io = ud;
    drv_sha256_update(&io->h, p, n);
    while (n > 0) {
        ssize_t w = pwrite(io->fd, p, n, (off_t)io->off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return io->err = w < 0 ? errno : EIO, -1;
        p += w, n -= (size_t)w, io->off += (uint64_t)w;
    }
    return 0;
}

static void hexify(const unsigned char md[32], char out[65])
{
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

int drv_cache__get_chunk(drv_cache_t *c, const char *url, const char *bearer, const char *what,
                         long stall_ms, int64_t deadline_ms, int fd, uint64_t off, uint64_t len,
                         uint64_t total, const char *want, char *msg, size_t ml, int *status,
                         bool *mismatch)
{
    chunk_io_t io = {.fd = fd, .off = off};
    drv_sha256_init(&io.h);
    drv_fetch_req_t rq = {.url = url, .bearer = bearer, .what = what, .off = off, .len = len,
                          .total = total, .on_data = on_data, .ud = &io, .timeout_ms = stall_ms,
                          .deadline_ms = deadline_ms, .stop = &c->stop};
    drv_error_t e = {0};
    *status = 0;
    *mismatch = false;
    if (drv_fetch_range(&rq, &e) < 0) {
        *status = e.status;
        snprintf(msg, ml, "%s", io.err ? strerror(io.err) : e.message);
        return -1;
    }
    unsigned char md[32];
    char got[65];
    drv_sha256_final(&io.h, md);
    hexify(md, got);
    if (strcmp(got, want) != 0) {
        *mismatch = true;
        snprintf(msg, ml, "sha256 mismatch: expected %s, got %s", want, got);
        return -1;
    }
    return 0;
}

static void run_chunk(drv_cache_t *c, blob_t *b, size_t i)
{
    pthread_mutex_lock(&c->mu);
    fetch_t *f = b->f;
    bool peers = f->ps != NULL;
    pthread_mutex_unlock(&c->mu);
    int from = peers ? drv_cache__chunk_from_peers(c, b, i) : 0;
    if (from < 0)
        return;   /* waiting for the owner (applied) */

    pthread_mutex_lock(&c->mu);
    uint64_t off = (uint64_t)i * f->chunk_size;
    uint64_t len = drv_manifest_chunk_len(b->size, f->chunk_size, i);
    char want[65];
    memcpy(want, f->sha[i], 65);
    char *url = drv_strdup(f->url), *bearer = f->bearer ? drv_strdup(f->bearer) : NULL;
    int fd = f->fd, sfd = f->sfd;
    pthread_mutex_unlock(&c->mu);

    char why[600] = "", msg[768] = "";
    int status = 0;
    bool mismatch = false;
    bool ok = from == 1 ||   /* a peer's bytes, verified */
              drv_cache__get_chunk(c, url, bearer, "origin", c->opts.timeout_ms, 0, fd, off, len,
                                   b->size, want, why, sizeof why, &status, &mismatch) == 0;
    free(url);
    free(bearer);
    if (!ok && mismatch)
        snprintf(msg, sizeof msg, "blob %s chunk %zu (bytes %" PRIu64 "-%" PRIu64 "): %s",
                 b->hex, i, off, off + len - 1, why);
    else if (!ok)
        snprintf(msg, sizeof msg, "blob %s chunk %zu: %s", b->hex, i, why);
    if (ok) {
        char line[32];
        int ll = snprintf(line, sizeof line, "%zu\n", i);
        if (fdatasync(fd) < 0 || write(sfd, line, (size_t)ll) != ll) {
            ok = false;
            snprintf(msg, sizeof msg, "blob %s chunk %zu: cannot record it: %s", b->hex, i,
                     strerror(errno));
        }
    }
    if (!ok && !atomic_load(&c->stop))
        drv_warn("cache: %s", msg);
    pthread_mutex_lock(&c->mu);
    f->ninflight--;
    if (ok) {
        f->cst[i] = CH_DONE;
        f->ndone++;
        f->verified += len;
        f->got += len;
        *(from == 1 ? &b->from_peers : &b->from_origin) += len;
    } else if (atomic_load(&c->stop) || ++f->tries[i] > c->opts.retries ||
               (status >= 400 && status < 500)) {   /* a refusal: trying again won't help */
        f->cst[i] = CH_TODO;
        if (atomic_load(&c->stop) && !f->failed)
            f->failed = true, snprintf(f->error, sizeof f->error, "the cache is closing");
        if (!f->failed && !atomic_load(&c->stop)) {
            f->failed = true;
            snprintf(f->error, sizeof f->error, "%s (after %d tries; not served)", msg,
                     f->tries[i]);
            blob_failed(c, b, f->error);
        }
    } else {
        f->cst[i] = CH_TODO;
    }
    fetch_t *done = NULL;
    if (f->failed && f->ninflight == 0) {
        blob_failed(c, b, f->error);   /* also those that joined since */
        done = fetch_detach(b, true);
    }
    pthread_mutex_unlock(&c->mu);
    fetch_free(done);
}

static void run_open(drv_cache_t *c, blob_t *b)
{
    pthread_mutex_lock(&c->mu);
    fetch_t *f = b->f;
    uint64_t size = b->size, cs = f->chunk_size;
    size_t nc = f->nchunks;
    pthread_mutex_unlock(&c->mu);
    unsigned char *done = calloc(nc + 1, 1);
    size_t ndone = 0;
    char msg[512] = "";
    int fd = -1, sfd = -1;
    if (!done)
        abort();
    if (drv_cache__open_partial(c, b->hex, size, cs, nc, done, &ndone, &fd, &sfd, msg,
                                sizeof msg) == 0 && ndone)
        drv_info("cache: resuming blob %s: %zu of %zu chunks already verified", b->hex, ndone, nc);
    pthread_mutex_lock(&c->mu);
    f->busy_open = false;
    f->opened = true;
    f->fd = fd, f->sfd = sfd;
    fetch_t *gone = NULL;
    if (fd < 0) {
        f->failed = true;
        blob_failed(c, b, msg);
        gone = fetch_detach(b, false);
    } else {
        for (size_t i = 0; i < nc; i++)
            if (done[i]) {
                f->cst[i] = CH_DONE;
                f->verified += drv_manifest_chunk_len(size, cs, i);
            }
        f->ndone = ndone;
    }
    pthread_cond_broadcast(&c->work);
    pthread_mutex_unlock(&c->mu);
    fetch_free(gone);
    free(done);
}

static void run_finalize(drv_cache_t *c, blob_t *b)
{
    pthread_mutex_lock(&c->mu);
    fetch_t *f = b->f;
    int fd = f->fd;
    f->fd = -1;   /* the finalizer closes it */
    pthread_mutex_unlock(&c->mu);
    char msg[512] = "";
    int rc = drv_cache__finalize_blob(c, b->hex, b->size, fd, msg, sizeof msg);
    if (rc < 0)
        drv_warn("cache: %s", msg);
    pthread_mutex_lock(&c->mu);
    fetch_t *gone = fetch_detach(b, false);
    if (rc == 0) {
        b->state = B_PRESENT;
        b->last_use_ms = drv_now_ms();
        c->index_dirty = true;
    } else {
        blob_failed(c, b, msg);
    }
    pthread_cond_broadcast(&c->work);
    pthread_mutex_unlock(&c->mu);
    fetch_free(gone);
    drv_cache__save_index(c);
}

static void run_link(drv_cache_t *c, art_t *a)
{
    char msg[512] = "";
    int rc = drv_cache__link_snapshot(c, a->m, msg, sizeof msg);
    if (rc < 0)
        drv_warn("cache: %s", msg);
    pthread_mutex_lock(&c->mu);
    a->state = rc == 0 ? A_READY : A_FAILED;
    if (rc < 0)
        snprintf(a->error, sizeof a->error, "%s", msg);
    else
        touch(c, a);
    pthread_cond_broadcast(&c->done);
    pthread_mutex_unlock(&c->mu);
    drv_cache__save_index(c);
}

void *drv_cache__worker(void *arg)
{
    drv_cache_t *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!atomic_load(&c->stop)) {
        task_t t = pick(c);
        if (t.kind == T_NONE) {
            if (c->wake_ms) {   /* a chunk waits on its owner: try it again then */
                struct timespec dl;
                drv_deadline_in(c->wake_ms - drv_mono_ms() + 1, &dl);
                pthread_cond_timedwait(&c->work, &c->mu, &dl);
            } else {
                pthread_cond_wait(&c->work, &c->mu);
            }
            continue;
        }
        pthread_mutex_unlock(&c->mu);
        switch (t.kind) {
        case T_OPEN: run_open(c, t.b); break;
        case T_CHUNK: run_chunk(c, t.b, t.chunk); break;
        case T_FINALIZE: run_finalize(c, t.b); break;
        case T_LINK: run_link(c, t.a); break;
        case T_NONE: break;
        }
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

void drv_cache__fetch_free(fetch_t *f) { fetch_free(f); }
