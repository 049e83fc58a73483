/* cache_peers.c — the node cache's side of peer fan-out (rules in cache.h
 * and cache_rules.h): the peer set of an ensure, which chunks this node
 * owns, one try of a chunk from the peers (bans applied), and what the
 * peer server (cacheserve.c) may read: whole blobs, and the verified
 * chunks of a download in progress. */
#define _GNU_SOURCE
#include "agent/cache_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/cache_rules.h"
#include "agent/fetch.h"
#include "common/log.h"
#include "common/util.h"

#define DEFAULT_STALL_MS 5000
#define DEFAULT_DEADLINE_MS 120000
#define DEFAULT_OWNER_WAIT_MS 30000

static void peers_free(peerset_t *ps)
{
    if (!ps)
        return;
    for (size_t i = 0; i < ps->n; i++) {
        free(ps->p[i].id);
        free(ps->p[i].url);
        free(ps->p[i].bearer);
    }
    if (ps->has_self)
        free((char *)ps->ids[ps->n]);
    free(ps->p);
    free(ps->ids);
    free(ps);
}

static bool bad_id(const char *id)
{
    if (!id || !*id || strlen(id) > 253)
        return true;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        if (*p <= 0x20 || *p == 0x7f)
            return true;
    return false;
}

static bool names_blob(const drv_cache_peer_t *q, const char *hex)
{
    if (!q->blobs)
        return true;
    for (size_t i = 0; i < q->nblobs; i++)
        if (q->blobs[i] && strcmp(q->blobs[i], hex) == 0)
            return true;
    return false;
}

peerset_t *drv_cache__peers_new(const drv_cache_peer_t *peers, size_t n, const char *self,
                                const char *hex, drv_error_t *err)
{
    if (n > DRV_CACHE_MAX_PEERS)
        return drv_err_invalid(err, "peers", "%zu peers: at most %d", n, DRV_CACHE_MAX_PEERS),
               NULL;
    if (self && bad_id(self))
        return drv_err_invalid(err, "self", "this node's id is empty or holds a space or "
                               "control character"), NULL;
    peerset_t *ps = calloc(1, sizeof *ps);
    if (!ps)
        abort();
    ps->refs = 1;
    ps->p = calloc(n + 1, sizeof *ps->p);
    ps->ids = calloc(n + 2, sizeof *ps->ids);
    if (!ps->p || !ps->ids)
        abort();
    for (size_t i = 0; i < n; i++) {
        const drv_cache_peer_t *q = &peers[i];
        if (bad_id(q->id)) {
            drv_err_invalid(err, "peers", "peers[%zu]: the id is empty or holds a space or "
                            "control character", i);
            goto error;
        }
        if (!q->base_url || strncmp(q->base_url, "http://", 7) != 0) {
            drv_err_invalid(err, "peers", "peers[%zu] (%s): the URL must be http://HOST:PORT", i,
                            q->id);
            goto error;
        }
        if (self && strcmp(q->id, self) == 0)
            continue;   /* the cluster's list may name this node too */
        if (hex && !names_blob(q, hex))
            continue;   /* not a member of this blob's ranking */
        for (size_t k = 0; k < ps->n; k++)
            if (strcmp(ps->p[k].id, q->id) == 0) {
                drv_err_invalid(err, "peers", "peers[%zu]: the id %s appears twice", i, q->id);
                goto error;
            }
        peer_t *p = &ps->p[ps->n++];
        p->id = drv_strdup(q->id);
        p->url = drv_fetch_url_join(q->base_url, "v1/cache/blobs/sha256");
        p->bearer = q->bearer ? drv_strdup(q->bearer) : NULL;
        ps->ids[ps->n - 1] = p->id;
    }
    if (self) {
        ps->has_self = true;
        ps->ids[ps->n] = drv_strdup(self);
    }
    return ps;
error:
    peers_free(ps);
    return NULL;
}

void drv_cache__peers_unref(peerset_t *ps)
{
    if (ps && --ps->refs == 0)
        peers_free(ps);
}

static size_t members(const peerset_t *ps) { return ps->n + (ps->has_self ? 1 : 0); }

void drv_cache__peers_mark_mine(const peerset_t *ps, fetch_t *f, const char *hex)
{
    size_t nm = members(ps), order[DRV_CACHE_MAX_PEERS + 1];
    for (size_t i = 0; i < f->nchunks; i++) {
        drv_cache_rank(ps->ids, nm, hex, i, order);
        f->mine[i] = ps->has_self && order[0] == ps->n;
    }
}

typedef struct src {
    size_t member;
    char url[1200];
    char *bearer;
    char what[300];
} src_t;

int drv_cache__chunk_from_peers(drv_cache_t *c, blob_t *b, size_t i)
{
    long stall = c->opts.peer_stall_ms > 0 ? c->opts.peer_stall_ms : DEFAULT_STALL_MS;
    long per_chunk = c->opts.peer_deadline_ms > 0 ? c->opts.peer_deadline_ms : DEFAULT_DEADLINE_MS;
    long wait = c->opts.owner_wait_ms > 0 ? c->opts.owner_wait_ms
                : c->opts.owner_wait_ms < 0 ? 0 : DEFAULT_OWNER_WAIT_MS;
    size_t order[DRV_CACHE_MAX_PEERS + 1], pick[DRV_CACHE_MAX_PEERS + 1];
    bool banned[DRV_CACHE_MAX_PEERS + 1];
    src_t *srcs = NULL;

    pthread_mutex_lock(&c->mu);
    fetch_t *f = b->f;
    peerset_t *ps = f->ps;
    size_t nm = members(ps), self = ps->has_self ? ps->n : SIZE_MAX;
    for (size_t k = 0; k < nm; k++)
        banned[k] = k < ps->n && ps->p[k].banned;
    int64_t now = drv_mono_ms();
    bool retry = f->wait_until[i] != 0;
    bool out = retry && now >= f->wait_until[i];
    drv_cache_rank(ps->ids, nm, b->hex, i, order);
    bool origin;
    size_t ns = drv_cache_chunk_plan(order, nm, banned, self, retry, out, pick, &origin);
    if (ns) {
        srcs = calloc(ns, sizeof *srcs);
        if (!srcs)
            abort();
    }
    for (size_t k = 0; k < ns; k++) {
        peer_t *p = &ps->p[pick[k]];
        srcs[k].member = pick[k];
        snprintf(srcs[k].url, sizeof srcs[k].url, "%s/%s", p->url, b->hex);
        srcs[k].bearer = p->bearer ? drv_strdup(p->bearer) : NULL;
        snprintf(srcs[k].what, sizeof srcs[k].what, "peer %s", p->id);
    }
    uint64_t off = (uint64_t)i * f->chunk_size;
    uint64_t len = drv_manifest_chunk_len(b->size, f->chunk_size, i);
    char want[65];
    memcpy(want, f->sha[i], 65);
    int fd = f->fd;
    pthread_mutex_unlock(&c->mu);

    int got = -1;   /* the source that served it */
    size_t nban = 0, ban[DRV_CACHE_MAX_PEERS + 1];
    for (size_t k = 0; k < ns && got < 0 && !atomic_load(&c->stop); k++) {
        char msg[700];
        int status;
        bool mismatch;
        if (drv_cache__get_chunk(c, srcs[k].url, srcs[k].bearer, srcs[k].what, stall,
                                 drv_mono_ms() + per_chunk, fd, off, len, b->size, want, msg,
                                 sizeof msg, &status, &mismatch) == 0) {
            got = (int)k;
        } else if (mismatch) {
            drv_warn("cache: %s sent a bad chunk: blob %s chunk %zu (bytes %" PRIu64 "-%" PRIu64
                     "): %s; not used, and that peer is not asked again during this download",
                     srcs[k].what, b->hex, i, off, off + len - 1, msg);
            ban[nban++] = srcs[k].member;
        } else if (status != 404 && !atomic_load(&c->stop)) {
            drv_warn("cache: %s failed for blob %s chunk %zu: %s; not asked again during this "
                     "download", srcs[k].what, b->hex, i, msg);
            ban[nban++] = srcs[k].member;
        }
    }
    for (size_t k = 0; k < ns; k++)
        free(srcs[k].bearer);
    free(srcs);

    pthread_mutex_lock(&c->mu);
    for (size_t k = 0; k < nban; k++)
        ps->p[ban[k]].banned = true;
    int rc = got >= 0 ? 1 : 0;
    if (got < 0 && nban) {
        rc = -1;   /* the owner may have changed: plan again at once */
        f->next_try[i] = 0;
    } else if (got < 0 && !origin) {
        rc = -1;
        if (!f->wait_until[i])
            f->wait_until[i] = now + wait;
        f->next_try[i] = drv_mono_ms() + DRV_CACHE_PEER_POLL_MS;
    }
    if (rc < 0) {
        f->cst[i] = CH_TODO;
        f->ninflight--;
        pthread_cond_broadcast(&c->work);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int drv_cache_open_range(drv_cache_t *c, const char *hex, uint64_t off, uint64_t *len,
                         bool ranged, int *fd, uint64_t *size, drv_error_t *err)
{
    *fd = -1;
    pthread_mutex_lock(&c->mu);
    blob_t *b = drv_cache__blob(c, hex);
    int state = b ? b->state : B_ABSENT;
    uint64_t sz = b ? b->size : 0;
    int rc = 0;
    *size = sz;
    if (state != B_PRESENT && state != B_FETCHING) {
        rc = drv_err_not_found(err, "blob %s is not held here", hex);
        goto out;
    }
    if (ranged && off >= sz) {
        rc = drv_err(err, 416, "range_not_satisfiable", "Range", "blob %s has %" PRIu64
                     " bytes", hex, sz);
        goto out;
    }
    if (*len > sz - off)
        *len = sz - off;
    if (state == B_FETCHING) {
        fetch_t *f = b->f;
        bool ok = f->opened && f->fd >= 0 && !f->finalizing && f->chunk_size > 0;
        if (ok && *len > 0)
            for (uint64_t k = off / f->chunk_size; ok && k <= (off + *len - 1) / f->chunk_size; k++)
                ok = f->cst[k] == CH_DONE;
        if (ok)
            *fd = fcntl(f->fd, F_DUPFD_CLOEXEC, 0);
        if (*fd < 0)
            rc = drv_err_not_found(err, "blob %s: bytes %" PRIu64 "-%" PRIu64 " are not "
                                   "verified here yet", hex, off, off + *len - 1);
    }
out:
    pthread_mutex_unlock(&c->mu);
    if (rc == 0 && state == B_PRESENT) {
        char p[1400];
        snprintf(p, sizeof p, "%s/blobs/sha256/%s", c->dir, hex);
        *fd = open(p, O_RDONLY | O_CLOEXEC);
        if (*fd < 0)   /* evicted meanwhile */
            rc = drv_err_not_found(err, "blob %s is not held here", hex);
    }
    return rc;
}
