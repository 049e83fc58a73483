/* peering.c — see peering.h: the agent's cache server, its peer tokens,
 * ensures with peers and the prefetch list. The sync thread calls
 * everything; the tokens are read by it too (the server keeps its own
 * copy of the accepted ones). */
#include "agent/peering.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cacheserve.h"
#include "common/log.h"
#include "common/manifest.h"
#include "common/util.h"

#define PREFETCH_MAX 64
#define FAILING_MAX 64
#define BACKOFF_FIRST_MS 30000L
#define BACKOFF_MAX_MS (15 * 60000L)

/* An artifact whose download failed: retried with backoff, not at every
 * desired set (a set changes whenever any replica of the node does). */
typedef struct failing {
    char digest[65];
    int fails;                   /* retries so far */
    int64_t next_ms;             /* monotonic: no retry before */
} failing_t;

typedef struct prefetch {
    char id[129];
    char digest[65];
    uint64_t total;
    char error[512];             /* the ensure's refusal ("" = it started) */
} prefetch_t;

struct drv_peering {
    drv_cache_t *cache;
    drv_cacheserve_t *srv;       /* NULL: --peer-listen off */
    char url[300];
    char token[128];             /* presented to peers; "" = none yet */
    char accepted[3][128];       /* what the server accepts now */
    prefetch_t *pf;
    size_t npf;
    bool has_pf;
    failing_t failing[FAILING_MAX];
    size_t nfailing;
};

long drv_peering_backoff_ms(int fails)
{
    long ms = BACKOFF_FIRST_MS;
    for (int i = 1; i < fails && ms < BACKOFF_MAX_MS; i++)
        ms *= 2;
    return ms < BACKOFF_MAX_MS ? ms : BACKOFF_MAX_MS;
}

/* Whether to ensure digest now: true unless it failed and its backoff has
 * not passed (a retry moves the backoff on; a ready one is forgotten). */
static bool may_try(drv_peering_t *p, const char *digest)
{
    drv_cache_progress_t pr;
    drv_cache_state_t st = drv_cache_progress(p->cache, digest, &pr);
    failing_t *f = NULL;
    for (size_t i = 0; i < p->nfailing && !f; i++)
        if (strcmp(p->failing[i].digest, digest) == 0)
            f = &p->failing[i];
    if (st != DRV_CACHE_FAILED) {
        if (f && st == DRV_CACHE_READY)
            *f = p->failing[--p->nfailing];
        return true;
    }
    int64_t now = drv_mono_ms();
    if (f && now < f->next_ms)
        return false;
    if (!f) {
        if (p->nfailing == FAILING_MAX)   /* the oldest goes */
            memmove(p->failing, p->failing + 1, --p->nfailing * sizeof *p->failing);
        f = &p->failing[p->nfailing++];
        memset(f, 0, sizeof *f);
        snprintf(f->digest, sizeof f->digest, "%s", digest);
    }
    f->fails++;
    f->next_ms = now + drv_peering_backoff_ms(f->fails);
    drv_info("artifact %s failed before (%s); trying again (retry %d; the next not before %ld s)",
             digest, pr.error, f->fails, drv_peering_backoff_ms(f->fails) / 1000);
    return true;
}

drv_peering_t *drv_peering_create(drv_cache_t *c, const char *listen, const char *url,
                                  drv_error_t *err)
{
    drv_peering_t *p = calloc(1, sizeof *p);
    if (!p)
        return drv_err_internal(err, "out of memory"), NULL;
    p->cache = c;
    if (!listen || strcmp(listen, "off") == 0)
        return p;
    const char *colon = strrchr(listen, ':');
    char host[256];
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof host || !colon[1] ||
        *end || port < 0 || port > 65535) {
        free(p);
        return drv_err_invalid(err, "peer-listen", "--peer-listen takes HOST:PORT (PORT 0: any "
                               "free one) or off, not '%s'", listen), NULL;
    }
    snprintf(host, sizeof host, "%.*s", (int)(colon - listen), listen);
    if (url && strncmp(url, "http://", 7) != 0) {
        free(p);
        return drv_err_invalid(err, "peer-url", "--peer-url must be http://HOST:PORT, not '%s'",
                               url), NULL;
    }
    if (!url && (strcmp(host, "0.0.0.0") == 0 || strchr(host, ':'))) {
        free(p);
        return drv_err_invalid(err, "peer-url", "--peer-listen %s: give --peer-url, the address "
                               "other nodes reach this one at", listen), NULL;
    }
    if (!(p->srv = drv_cacheserve_create(c, host, (int)port, NULL, 0, err))) {
        drv_err_prefix(err, "the peer cache server (--peer-listen %s)", listen);
        free(p);
        return NULL;
    }
    if (url)
        snprintf(p->url, sizeof p->url, "%s", url);
    else
        snprintf(p->url, sizeof p->url, "http://%s:%d", host, drv_cacheserve_port(p->srv));
    drv_info("peer cache server on %s:%d (peers read it at %s)", host,
             drv_cacheserve_port(p->srv), p->url);
    return p;
}

void drv_peering_destroy(drv_peering_t *p)
{
    if (!p)
        return;
    drv_cacheserve_destroy(p->srv);
    free(p->pf);
    free(p);
}

const char *drv_peering_url(const drv_peering_t *p) { return p && p->srv ? p->url : NULL; }

void drv_peering_set_tokens(drv_peering_t *p, const json_t *peer)
{
    const char *t = json_string_value(json_object_get(peer, "token"));
    const json_t *acc = json_object_get(peer, "accept");
    if (!t || strlen(t) >= sizeof p->token || !json_is_array(acc) || json_array_size(acc) > 3)
        return;
    snprintf(p->token, sizeof p->token, "%s", t);
    const char *list[3];
    size_t n = 0;
    bool same = true;
    for (size_t i = 0; i < json_array_size(acc); i++) {
        const char *a = json_string_value(json_array_get(acc, i));
        if (!a || !*a || strlen(a) >= sizeof p->accepted[0])
            return;
        list[n++] = a;
    }
    for (size_t i = 0; i < 3; i++)
        same &= strcmp(i < n ? list[i] : "", p->accepted[i]) == 0;
    if (same || !p->srv)
        return;
    drv_error_t e;
    if (drv_cacheserve_set_secrets(p->srv, list, n, &e) < 0) {
        drv_warn("peer tokens from the head: %s", e.message);
        return;
    }
    for (size_t i = 0; i < 3; i++)
        snprintf(p->accepted[i], sizeof p->accepted[i], "%s", i < n ? list[i] : "");
}

int drv_peering_ensure(drv_peering_t *p, const json_t *art, const char *server,
                       const char *bearer, const char *self, drv_error_t *err)
{
    const json_t *man = json_object_get(art, "manifest");
    const char *blobs = json_string_value(json_object_get(art, "blobs"));
    if (!json_is_object(man) || !blobs)
        return drv_err_invalid(err, "artifact", "no manifest or blob path from the head");
    const char *dg = json_string_value(json_object_get(man, "digest"));
    if (dg && strlen(dg) == 64 && !may_try(p, dg))
        return 0;   /* backing off: the cache keeps reporting it failed */
    char *text = json_dumps(man, JSON_COMPACT);
    drv_manifest_t *m = NULL;
    int rc = text ? drv_manifest_parse(text, strlen(text), &m, err) : -1;
    free(text);
    if (rc < 0)
        return -1;
    char origin[1100];
    snprintf(origin, sizeof origin, "%s%s", server, blobs);
    drv_cache_origin_t o = {.base_url = origin, .bearer = bearer};
    const json_t *pl = json_object_get(art, "peers");
    size_t n = p->token[0] ? json_array_size(pl) : 0;   /* no token yet: none would let us in */
    if (n > DRV_CACHE_MAX_PEERS)
        n = DRV_CACHE_MAX_PEERS;
    drv_cache_peer_t *peers = calloc(n ? n : 1, sizeof *peers);
    const char ***bl = calloc(n ? n : 1, sizeof *bl);   /* each peer's blobs, when listed */
    size_t k = 0;
    for (size_t i = 0; peers && bl && i < n; i++) {
        const json_t *e = json_array_get(pl, i);
        const char *id = json_string_value(json_object_get(e, "node"));
        const char *url = json_string_value(json_object_get(e, "url"));
        const json_t *bj = json_object_get(e, "blobs");
        if (!id || !url)
            continue;
        peers[k] = (drv_cache_peer_t){.id = id, .base_url = url, .bearer = p->token};
        if (json_is_array(bj)) {   /* a member of those blobs' rankings only (agent_peers.h) */
            size_t nb = json_array_size(bj);
            if (!(bl[k] = calloc(nb + 1, sizeof **bl)))
                break;
            for (size_t j = 0; j < nb; j++)
                bl[k][j] = json_string_value(json_array_get(bj, j));
            peers[k].blobs = bl[k];
            peers[k].nblobs = nb;
        }
        k++;
    }
    rc = peers ? drv_cache_ensure_peers(p->cache, m, &o, peers, k, k ? self : NULL, err)
               : drv_err_internal(err, "out of memory");
    if (rc == 0 && k)
        drv_debug("artifact %s: %zu peer(s) named by the head", m->digest, k);
    for (size_t i = 0; bl && i < k; i++)
        free(bl[i]);
    free(bl);
    free(peers);
    drv_manifest_free(m);
    return rc;
}

void drv_peering_prefetch(drv_peering_t *p, const json_t *list, const char *server,
                          const char *bearer, const char *self)
{
    size_t n = json_array_size(list);
    if (n > PREFETCH_MAX)
        n = PREFETCH_MAX;
    prefetch_t *pf = calloc(n ? n : 1, sizeof *pf);
    if (!pf)
        return;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *a = json_array_get(list, i);
        const char *id = json_string_value(json_object_get(a, "id"));
        const char *dg = json_string_value(json_object_get(json_object_get(a, "manifest"), "digest"));
        if (!id || !dg || strlen(dg) != 64)
            continue;
        prefetch_t *e = &pf[k++];
        snprintf(e->id, sizeof e->id, "%s", id);
        snprintf(e->digest, sizeof e->digest, "%s", dg);
        e->total = (uint64_t)json_integer_value(
            json_object_get(json_object_get(a, "manifest"), "total_size"));
        drv_error_t err;
        if (drv_peering_ensure(p, a, server, bearer, self, &err) < 0) {
            snprintf(e->error, sizeof e->error, "%s", err.message);
            drv_warn("prefetch of artifact %s: %s", id, err.message);
        } else {
            drv_info("prefetching artifact %s (%s) into the node cache", id, dg);
        }
    }
    free(p->pf);
    p->pf = pf;
    p->npf = k;
    p->has_pf = true;
}

json_t *drv_peering_prefetch_report(drv_peering_t *p)
{
    if (!p || !p->has_pf)
        return NULL;
    json_t *out = json_array();
    for (size_t i = 0; i < p->npf; i++) {
        prefetch_t *e = &p->pf[i];
        drv_cache_progress_t pr = {0};
        drv_cache_state_t st = e->error[0] ? DRV_CACHE_FAILED
                                           : drv_cache_progress(p->cache, e->digest, &pr);
        const char *name = st == DRV_CACHE_READY      ? "ready"
                           : st == DRV_CACHE_FETCHING ? "fetching"
                           : st == DRV_CACHE_FAILED   ? "failed"
                                                      : "evicted";
        json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I}", "artifact", e->id, "digest", e->digest,
                              "state", name, "bytes",
                              (json_int_t)(st == DRV_CACHE_READY && !pr.total ? e->total : pr.done), "total",
                              (json_int_t)(pr.total ? pr.total : e->total));
        const char *why = e->error[0] ? e->error : pr.error;
        if (st == DRV_CACHE_FAILED && why[0])
            json_object_set_new(o, "error", json_string(why));
        json_array_append_new(out, o);
    }
    return out;
}
