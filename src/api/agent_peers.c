/* agent_peers.c — see agent_peers.h: peer tokens, the peers of each wanted
 * artifact and nodepool prefetch lists (artifacts, and images for the
 * node's container engine) for the agent sync. Pure reads of
 * the state (the caller holds its lock); the token key is drawn once. */
#include "api/agent_peers.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/presets.h"
#include "common/sigv4.h"
#include "common/util.h"
#include "state/events.h"
#include "state/nodes.h"
#include "common/json.h"

/* --- tokens ------------------------------------------------------------------------------ */

static char token_key[65];
static pthread_once_t token_once = PTHREAD_ONCE_INIT;

static void draw_key(void)
{
    if (drv_random_hex(32, token_key) < 0)
        abort();   /* no randomness: nothing sound to hand out */
}

static void token(const char *owner, const char *cluster, int64_t epoch, char out[70])
{
    char msg[400];
    snprintf(msg, sizeof msg, "%s\n%s\n%lld", owner, cluster, (long long)epoch);
    unsigned char md[32];
    drv_hmac_sha256(token_key, 64, msg, md);
    memcpy(out, "drvp_", 5);
    for (int i = 0; i < 32; i++)
        snprintf(out + 5 + 2 * i, 3, "%02x", md[i]);
}

json_t *drv_peer_tokens(const char *owner, const char *cluster, int64_t now_s)
{
    pthread_once(&token_once, draw_key);
    int64_t e = now_s / DRV_PEER_EPOCH_S;
    char t[3][70];
    for (int i = 0; i < 3; i++)
        token(owner, cluster ? cluster : "", e - 1 + i, t[i]);
    return json_pack("{s:s, s:[s, s, s], s:i}", "token", t[1], "accept", t[0], t[1], t[2],
                     "ttl_seconds", DRV_PEER_EPOCH_S);
}

static bool holds(const drv_obj_t *n, const char *digest);

/* --- who wants what ---------------------------------------------------------------------- */

/* The artifact id a model names (NULL: none). */
static const char *model_artifact(drv_state_t *st, const char *owner, const char *model)
{
    char key[192];
    snprintf(key, sizeof key, "%s/%s", owner, model ? model : "");
    const drv_obj_t *m = drv_state_get(st, DRV_K_MODEL, key);
    return m ? drv_json_str(json_object_get(m->spec, "artifact"), "id") : NULL;
}

static const drv_obj_t *nodepool_of(drv_state_t *st, const drv_obj_t *node)
{
    char key[256];
    snprintf(key, sizeof key, "%s/%s/%s", node->owner, drv_json_str(node->spec, "cluster"),
             drv_json_str(node->spec, "nodepool"));
    return drv_state_get(st, DRV_K_NODEPOOL, key);
}

static bool prefetches(drv_state_t *st, const drv_obj_t *node)
{
    const drv_obj_t *np = drv_json_str(node->spec, "nodepool") ? nodepool_of(st, node) : NULL;
    return np && json_is_true(json_object_get(np->spec, "prefetch"));
}

/* Does a deployment of owner whose model has artifact art place on the
 * node's nodepool? */
static const drv_obj_t *next_on_pool(drv_state_t *st, const drv_obj_t *node, size_t *i);

static bool pool_wants(drv_state_t *st, const drv_obj_t *node, const char *art)
{
    const drv_obj_t *d;
    for (size_t i = SIZE_MAX; (d = next_on_pool(st, node, &i));) {
        const char *a = model_artifact(st, d->owner, drv_json_str(d->spec, "model"));
        if (a && strcmp(a, art) == 0)
            return true;
    }
    return false;
}

const drv_obj_t *drv_peer_model_artifact(drv_state_t *st, const drv_obj_t *model)
{
    const char *id = drv_json_str(json_object_get(model->spec, "artifact"), "id");
    if (!id)
        return NULL;
    char key[192];
    snprintf(key, sizeof key, "%s/%s", model->owner, id);
    return drv_state_get(st, DRV_K_ARTIFACT, key);
}

const char *drv_peer_model_digest(drv_state_t *st, const drv_obj_t *model)
{
    const drv_obj_t *a = drv_peer_model_artifact(st, model);
    return a ? drv_json_str(json_object_get(a->spec, "manifest"), "digest") : NULL;
}

bool drv_peer_node_holds(const drv_obj_t *n, const char *digest) { return holds(n, digest); }

static bool holds(const drv_obj_t *n, const char *digest)
{
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(json_object_get(n->status, "cache"), "artifacts"), i, a) {
        const char *d = drv_json_str(a, "digest");
        if (d && strcmp(d, digest) == 0)
            return true;
    }
    return false;
}

/* --- peers by blob ------------------------------------------------------------------------ */

/* Who wants what: (node, artifact id) for every placed replica of the
 * owner whose model has an artifact, read once per desired set (not once
 * per artifact of it). */
typedef struct wants {
    const char **node, **art;
    size_t n, cap;
} wants_t;

static void wants_read(drv_state_t *st, const char *owner, wants_t *w)
{
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", owner);
    size_t plen = strlen(prefix);
    for (size_t i = drv_state_lower_bound(st, DRV_K_REPLICA, prefix);
         i < drv_state_count(st, DRV_K_REPLICA); i++) {
        const drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
        if (strncmp(r->key, prefix, plen) != 0)
            break;
        const char *rn = drv_json_str(r->spec, "node");
        const char *a = rn ? model_artifact(st, r->owner, drv_json_str(r->spec, "model")) : NULL;
        if (!a)
            continue;
        if (w->n == w->cap) {
            w->cap = w->cap ? 2 * w->cap : 32;
            w->node = realloc(w->node, w->cap * sizeof *w->node);
            w->art = realloc(w->art, w->cap * sizeof *w->art);
            if (!w->node || !w->art)
                abort();
        }
        w->node[w->n] = rn;
        w->art[w->n++] = a;
    }
}

static void wants_free(wants_t *w)
{
    free(w->node);
    free(w->art);
}

/* The distinct blobs of the target artifact, sorted (bsearch), and which of
 * them one candidate covers. */
typedef struct target {
    const char *digest;
    const char **hex;
    size_t n;
    bool *hit;
    size_t nhit;
} target_t;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void target_init(target_t *t, const json_t *man)
{
    const json_t *files = json_object_get(man, "files");
    t->digest = drv_json_str(man, "digest");
    t->hex = calloc(json_array_size(files) + 1, sizeof *t->hex);
    t->hit = calloc(json_array_size(files) + 1, sizeof *t->hit);
    if (!t->hex || !t->hit)
        abort();
    size_t i;
    json_t *f;
    json_array_foreach(files, i, f) if (drv_json_str(f, "sha256")) t->hex[t->n++] = drv_json_str(f, "sha256");
    qsort(t->hex, t->n, sizeof *t->hex, cmp_str);
    size_t k = 0;
    for (i = 0; i < t->n; i++)
        if (k == 0 || strcmp(t->hex[k - 1], t->hex[i]) != 0)
            t->hex[k++] = t->hex[i];
    t->n = k;
}

static void target_free(target_t *t)
{
    free(t->hex);
    free(t->hit);
}

/* Mark the target's blobs that artifact a (of the node's owner) has. */
static void cover(target_t *t, const drv_obj_t *a)
{
    const json_t *man = a ? json_object_get(a->spec, "manifest") : NULL;
    const char *d = drv_json_str(man, "digest");
    if (!d)
        return;
    bool all = t->digest && strcmp(d, t->digest) == 0;
    for (size_t i = 0; all && i < t->n; i++)
        t->hit[i] = true;
    size_t k;
    json_t *f;
    json_array_foreach(json_object_get(man, "files"), k, f) {
        if (all)
            break;
        const char *h = drv_json_str(f, "sha256");
        const char **at = h ? bsearch(&h, t->hex, t->n, sizeof *t->hex, cmp_str) : NULL;
        if (at)
            t->hit[at - t->hex] = true;
    }
}

static const drv_obj_t *artifact_id(drv_state_t *st, const char *owner, const char *id)
{
    char key[192];
    snprintf(key, sizeof key, "%s/%s", owner, id);
    return drv_state_get(st, DRV_K_ARTIFACT, key);
}

/* The peers of artifact art (manifest man) for node: [{node, url}] for a
 * member that holds or wants every blob of it, [{node, url, blobs: [HEX,
 * ...]}] for one that holds or wants some (through another artifact that
 * shares them: the members of those blobs' rankings only). */
static json_t *peers_of(drv_state_t *st, const drv_obj_t *node, const char *art,
                        const json_t *man, const wants_t *w)
{
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", node->owner);
    size_t plen = strlen(prefix);
    const char *cl = drv_json_str(node->spec, "cluster");
    target_t t = {0};
    target_init(&t, man);
    json_t *out = json_array();
    for (size_t i = drv_state_lower_bound(st, DRV_K_NODE, prefix);
         i < drv_state_count(st, DRV_K_NODE) && json_array_size(out) < DRV_PEER_MAX; i++) {
        const drv_obj_t *n = drv_state_at(st, DRV_K_NODE, i);
        if (strncmp(n->key, prefix, plen) != 0)
            break;
        const char *url = drv_json_str(json_object_get(n->status, "cache"), "peer_url");
        if (n == node || !url || !cl || !drv_json_str(n->spec, "cluster") ||
            strcmp(drv_json_str(n->spec, "cluster"), cl) != 0 || n->soft.node_state != DRV_NODE_READY)
            continue;
        memset(t.hit, 0, t.n * sizeof *t.hit);
        size_t k;
        json_t *h;
        /* what it holds: the owner's artifacts of the digests its cache reports */
        json_array_foreach(json_object_get(json_object_get(n->status, "cache"), "artifacts"), k,
                           h) {
            const char *d = drv_json_str(h, "digest");
            for (size_t j = drv_state_lower_bound(st, DRV_K_ARTIFACT, prefix);
                 d && j < drv_state_count(st, DRV_K_ARTIFACT); j++) {
                const drv_obj_t *a = drv_state_at(st, DRV_K_ARTIFACT, j);
                if (strncmp(a->key, prefix, plen) != 0)
                    break;
                const char *ad = drv_json_str(json_object_get(a->spec, "manifest"), "digest");
                if (ad && strcmp(ad, d) == 0) {
                    cover(&t, a);
                    break;
                }
            }
            if (d && t.digest && strcmp(d, t.digest) == 0)
                for (size_t x = 0; x < t.n; x++)
                    t.hit[x] = true;   /* (even with no record of that digest left) */
        }
        /* what it wants: its replicas' artifacts, its nodepool's prefetch */
        for (size_t j = 0; j < w->n; j++)
            if (strcmp(w->node[j], n->id) == 0)
                cover(&t, artifact_id(st, n->owner, w->art[j]));
        if (prefetches(st, n)) {
            if (pool_wants(st, n, art))
                cover(&t, artifact_id(st, n->owner, art));
            for (size_t j = drv_state_lower_bound(st, DRV_K_ARTIFACT, prefix);
                 j < drv_state_count(st, DRV_K_ARTIFACT); j++) {
                const drv_obj_t *a = drv_state_at(st, DRV_K_ARTIFACT, j);
                if (strncmp(a->key, prefix, plen) != 0)
                    break;
                if (strcmp(a->id, art) != 0 && pool_wants(st, n, a->id))
                    cover(&t, a);
            }
        }
        size_t nhit = 0;
        for (size_t x = 0; x < t.n; x++)
            nhit += t.hit[x];
        if (nhit == 0)
            continue;
        json_t *p = json_pack("{s:s, s:s}", "node", n->id, "url", url);
        if (nhit < t.n) {
            json_t *bl = json_array();
            for (size_t x = 0; x < t.n; x++)
                if (t.hit[x])
                    json_array_append_new(bl, json_string(t.hex[x]));
            json_object_set_new(p, "blobs", bl);
        }
        json_array_append_new(out, p);
    }
    target_free(&t);
    return out;
}

void drv_peer_annotate(drv_state_t *st, const drv_obj_t *node, json_t *set)
{
    size_t i;
    json_t *d;
    wants_t w = {0};
    bool wants_done = false;
    json_array_foreach(set, i, d) {
        json_t *art = json_object_get(d, "artifact");
        const char *digest = drv_json_str(json_object_get(art, "manifest"), "digest");
        const char *id = drv_json_str(art, "id");
        if (!digest || !id)
            continue;
        json_t *same = NULL;   /* an earlier replica of the same artifact */
        for (size_t k = 0; k < i && !same; k++) {
            json_t *o = json_object_get(json_array_get(set, k), "artifact");
            const char *od = drv_json_str(json_object_get(o, "manifest"), "digest");
            if (od && strcmp(od, digest) == 0)
                same = json_object_get(o, "peers");
        }
        if (!same && !wants_done) {
            wants_read(st, node->owner, &w);
            wants_done = true;
        }
        json_object_set_new(art, "peers", same ? json_incref(same)
                                               : peers_of(st, node, id, json_object_get(art, "manifest"), &w));
    }
    wants_free(&w);
}

/* --- prefetch ---------------------------------------------------------------------------- */

/* Does deployment d place on nodepool cl/pool? */
static bool on_pool(const drv_obj_t *d, const char *cl, const char *pool)
{
    bool on = false;
    size_t k;
    json_t *pl;
    json_array_foreach(json_object_get(d->spec, "nodepools"), k, pl) on |=
        cl && pool && drv_json_str(pl, "cluster") && drv_json_str(pl, "nodepool") &&
        strcmp(drv_json_str(pl, "cluster"), cl) == 0 && strcmp(drv_json_str(pl, "nodepool"), pool) == 0;
    return on;
}

/* The next deployment of the node's owner that places on its nodepool,
 * after *i (start with *i = SIZE_MAX); NULL when there is none. */
static const drv_obj_t *next_on_pool(drv_state_t *st, const drv_obj_t *node, size_t *i)
{
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", node->owner);
    size_t plen = strlen(prefix);
    const char *cl = drv_json_str(node->spec, "cluster"), *pool = drv_json_str(node->spec, "nodepool");
    *i = *i == SIZE_MAX ? drv_state_lower_bound(st, DRV_K_DEPLOYMENT, prefix) : *i + 1;
    for (; *i < drv_state_count(st, DRV_K_DEPLOYMENT); ++*i) {
        const drv_obj_t *d = drv_state_at(st, DRV_K_DEPLOYMENT, *i);
        if (strncmp(d->key, prefix, plen) != 0)
            return NULL;
        if (on_pool(d, cl, pool))
            return d;
    }
    return NULL;
}

/* The state of the entry of list whose `key` is name (a report before), or NULL. */
static const char *state_in(const json_t *list, const char *key, const char *name)
{
    const char *was = NULL;
    size_t k;
    json_t *o;
    json_array_foreach(list, k, o) {
        if (drv_json_str(o, key) && name && strcmp(drv_json_str(o, key), name) == 0)
            was = drv_json_str(o, "state");
    }
    return was;
}

json_t *drv_peer_image_prefetch(drv_state_t *st, const drv_obj_t *node)
{
    const char *eng = drv_json_str(json_object_get(node->status, "container_runtime"), "engine");
    if (!prefetches(st, node) || !eng || strcmp(eng, "none") == 0)
        return NULL;
    json_t *out = json_array();
    const drv_obj_t *d;
    for (size_t i = SIZE_MAX;
         json_array_size(out) < DRV_PEER_MAX && (d = next_on_pool(st, node, &i));) {
        char mkey[192];
        snprintf(mkey, sizeof mkey, "%s/%s", d->owner, drv_json_str(d->spec, "model"));
        const drv_obj_t *m = drv_state_get(st, DRV_K_MODEL, mkey);
        const json_t *rt = m ? json_object_get(m->spec, "runtime") : NULL;
        if (!m || !drv_runtime_image(rt))
            continue;
        /* the image and its login as a replica's desired entry has them */
        json_t *e = json_object();
        drv_node_desired_image(st, d->owner, rt, &(drv_preset_in_t){0}, e);
        bool dup = false;
        size_t k;
        json_t *o;
        json_array_foreach(out, k, o) dup |= strcmp(drv_json_str(o, "image"), drv_json_str(e, "image")) == 0;
        if (!dup)
            json_array_append_new(out, json_pack("{s:O}", "image", json_object_get(e, "image")));
        if (!dup && json_object_get(e, "registry_auth"))
            json_object_set(json_array_get(out, json_array_size(out) - 1), "registry_auth",
                            json_object_get(e, "registry_auth"));
        json_decref(e);
    }
    return out;
}

void drv_peer_image_events(drv_head_t *head, const drv_obj_t *node, const json_t *old_ctr,
                           const json_t *new_ctr)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(new_ctr, "images"), i, e) {
        const char *img = drv_json_str(e, "image"), *st = drv_json_str(e, "state");
        const char *was = state_in(json_object_get(old_ctr, "images"), "image", img);
        if (was && strcmp(was, st) == 0)
            continue;
        if (strcmp(st, "pulling") == 0)
            drv_events_add(head->events, node->owner, "node", node->id, "prefetching",
                           "pulling image %s before any replica lands", img);
        else if (strcmp(st, "ready") == 0)
            drv_events_add(head->events, node->owner, "node", node->id, "prefetched",
                           "image %s is on the node", img);
        else
            drv_events_add(head->events, node->owner, "node", node->id, "prefetch_failed",
                           "pulling image %s failed: %s", img,
                           drv_json_str(e, "error") ? drv_json_str(e, "error") : "no reason given");
    }
}

json_t *drv_peer_prefetch(drv_state_t *st, const drv_obj_t *node)
{
    if (!prefetches(st, node))
        return NULL;
    json_t *out = json_array();
    wants_t w = {0};
    wants_read(st, node->owner, &w);
    const drv_obj_t *d;
    for (size_t i = SIZE_MAX;
         json_array_size(out) < DRV_PEER_MAX && (d = next_on_pool(st, node, &i));) {
        size_t k;
        const char *art = model_artifact(st, d->owner, drv_json_str(d->spec, "model"));
        if (!art)
            continue;
        char key[192];
        snprintf(key, sizeof key, "%s/%s", d->owner, art);
        const drv_obj_t *a = drv_state_get(st, DRV_K_ARTIFACT, key);
        const json_t *man = a ? json_object_get(a->spec, "manifest") : NULL;
        const char *src = a ? drv_json_str(a->spec, "source") : NULL;
        if (!man || !src || !drv_json_str(man, "digest"))
            continue;   /* every source is read through the head's blob path (sources.c) */
        bool dup = false;
        json_t *e;
        json_array_foreach(out, k, e) dup |= strcmp(drv_json_str(e, "id"), art) == 0;
        if (dup)
            continue;
        json_array_append_new(out, json_pack("{s:s, s:O, s:s, s:o}", "id", art, "manifest", (json_t *)man,
                                             "blobs", "/v1/blobs/sha256", "peers",
                                             peers_of(st, node, art, man, &w)));
    }
    wants_free(&w);
    return out;
}

void drv_peer_prefetch_events(drv_head_t *head, const drv_obj_t *node, const json_t *old_cache,
                              const json_t *new_cache)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(new_cache, "prefetch"), i, e) {
        const char *art = drv_json_str(e, "artifact"), *st = drv_json_str(e, "state");
        const char *was = state_in(json_object_get(old_cache, "prefetch"), "artifact", art);
        if (was && strcmp(was, st) == 0)
            continue;
        if (strcmp(st, "fetching") == 0)
            drv_events_add(head->events, node->owner, "node", node->id, "prefetching",
                           "prefetching artifact %s (%lld bytes) before any replica lands", art,
                           (long long)json_integer_value(json_object_get(e, "total")));
        else if (strcmp(st, "ready") == 0)
            drv_events_add(head->events, node->owner, "node", node->id, "prefetched",
                           "artifact %s is in the node cache (%lld bytes)", art,
                           (long long)json_integer_value(json_object_get(e, "total")));
        else if (strcmp(st, "failed") == 0)
            drv_events_add(head->events, node->owner, "node", node->id, "prefetch_failed",
                           "prefetching artifact %s failed: %s", art,
                           drv_json_str(e, "error") ? drv_json_str(e, "error") : "no reason given");
    }
}
