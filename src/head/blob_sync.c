/* blob_sync.c — see blob_sync.h. Two threads: the sync (passes, and a
 * standby's holds asked for by the leader) and, on a leader, the sender of
 * its semi-synchronous uploads to the standbys. The sync holds the state
 * lock only to copy the artifacts' blob names; every fetch, disk write and
 * request runs outside it. */
#define _GNU_SOURCE
#include "head/blob_sync.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/peer.h"
#include "common/httpsink.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "state/state.h"
#include "store/blobs.h"
#include "store/checkpoints.h"
#include "store/lease.h"

#define PASS_MS 1000
#define URL_TTL_S 900           /* a 307's signed URL, as a presigned S3 GET's */
#define FETCH_TTL_S 300         /* this head's own fetches */
#define GONE_AFTER_MS 3000      /* past the TTL: a head the roster shows as gone */
#define LIST_MAX (64u << 20)    /* a checkpoint listing's body */

/* A leader's upload waiting for a standby to hold it (head.h replicate). */
typedef struct ticket {
    char id[300];
    json_t *item;                /* {user, blobs, checkpoint?, answer?} */
    int state;                   /* DRV_REPL_WAIT, _HELD, _NONE (no standby left),
                                  * _PENDING (too big to ask for) */
    int64_t deadline_ms;         /* monotonic: tried until then */
    bool collected;              /* its request ran again and read the state */
} ticket_t;

#define TICKET_KEEP_MS 60000     /* kept past its deadline for its request's re-run */
#define SEND_MAX (768u << 10)    /* a batch's body (a standby takes 1 MiB) */
#define RETRY_MS 200

struct drv_blob_sync {
    drv_head_t *head;
    pthread_t thread, sender;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, kicked;
    json_t *wants;               /* a standby's: [{items, key}], under mu */
    json_t *rewake;              /* the keys it woke: once more, in case a hold was not
                                  * registered yet (sync thread only) */
    pthread_mutex_t tmu;         /* the leader's tickets */
    pthread_cond_t tcv;
    ticket_t *t;
    size_t nt, capt;
    bool tkicked, tstop;
};

/* The other heads' URLs, the leader's first (roster of the lease). */
typedef struct peers {
    size_t n;
    char url[DRV_LEASE_MAX_HEADS][256];
    bool leader;                 /* this head leads */
    bool first_is_leader;
} peers_t;

static void peers_of(drv_head_t *h, peers_t *p)
{
    drv_lease_view_t *v = drv_xmalloc(sizeof *v);
    drv_lease_view(h->lease, v);
    memset(p, 0, sizeof *p);
    p->leader = v->leader;
    for (size_t i = 0; i < v->nheads; i++) {
        const drv_lease_head_t *o = &v->heads[i];
        if (strcmp(o->holder, v->self) == 0 || !o->url[0] ||
            o->seen_ms_ago > h->cfg.lease_ttl_ms + GONE_AFTER_MS)
            continue;
        snprintf(p->url[p->n], sizeof p->url[0], "%s", o->url);
        if (strcmp(o->role, "leader") == 0 && !p->first_is_leader) {
            char t[256];
            memcpy(t, p->url[0], sizeof t);
            memcpy(p->url[0], p->url[p->n], sizeof t);
            memcpy(p->url[p->n], t, sizeof t);
            p->first_is_leader = true;
        }
        p->n++;
    }
    free(v);
}

static CURL *easy(const drv_head_t *h, const char *url, long timeout_ms)
{
    CURL *c = curl_easy_init();
    if (!c)
        return NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    if (timeout_ms)
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    /* a head that stalls for 30 s is given up (a big blob may take long) */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
    if (h->cfg.tls_ca_pem) {   /* heads on https: trust the CA this head serves */
        struct curl_blob ca = {.data = (void *)h->cfg.tls_ca_pem,
                               .len = strlen(h->cfg.tls_ca_pem), .flags = CURL_BLOB_COPY};
        curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
    }
    return c;
}

static size_t to_fd(char *ptr, size_t size, size_t nmemb, void *ud)
{
    int fd = *(int *)ud;
    size_t len = size * nmemb, off = 0;
    while (off < len) {
        ssize_t w = write(fd, ptr + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return 0;   /* stops the transfer */
        off += (size_t)w;
    }
    return len;
}

/* GET url into fd: the HTTP status, 0 when the transfer failed. */
static long get_to_fd(const drv_head_t *h, const char *url, int fd)
{
    CURL *c = easy(h, url, 0);
    long code = 0;
    if (!c)
        return 0;
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_fd);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &fd);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    return code;
}

/* GET url as JSON (a 200 only), NULL otherwise. */
static json_t *get_json(const drv_head_t *h, const char *url)
{
    CURL *c = easy(h, url, 30000);
    drv_httpc_sink_t sink = {.max = LIST_MAX};
    long code = 0;
    json_t *j = NULL;
    if (!c)
        return NULL;
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, drv_httpc_sink_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    if (code == 200 && sink.data && !sink.too_big)
        j = json_loads(sink.data, 0, NULL);
    free(sink.data);
    return j;
}

/* Fetch blob hex into the store from prefer (may be NULL), else the first
 * peer that has it; only bytes whose sha256 is hex land. 0 when whole. */
static int fetch_blob(drv_head_t *h, const peers_t *p, const char *prefer, const char *hex)
{
    for (size_t i = 0; i <= p->n; i++) {
        const char *base = i == 0 ? prefer : p->url[i - 1];
        if (!base || (i > 0 && prefer && strcmp(base, prefer) == 0))
            continue;
        char url[1024], tmp[1024];
        drv_error_t err;
        if (drv_peer_blob_url(h, base, hex, FETCH_TTL_S, url, sizeof url) < 0)
            continue;
        int fd = drv_blobs_tmp_open(h->blobs, tmp, sizeof tmp, &err);
        if (fd < 0) {
            drv_warn("blob sync: %s", err.message);
            return -1;
        }
        long code = get_to_fd(h, url, fd);
        close(fd);
        if (code != 200) {
            unlink(tmp);
            drv_debug("blob sync: blob %.12s... from %s: %s %ld", hex, base,
                      code ? "HTTP" : "no answer", code);
            continue;
        }
        if (drv_blobs_adopt(h->blobs, tmp, hex, &err) < 0) {
            drv_warn("blob sync: blob %.12s... from %s: %s", hex, base, err.message);
            continue;
        }
        drv_info("blob sync: copied blob %.12s... from %s", hex, base);
        return 0;
    }
    return drv_blobs_whole(h->blobs, hex) ? 0 : -1;
}

/* Blob hex whole here and held by user: 0, or -1 when no head gave it. */
static int ensure(drv_head_t *h, const peers_t *p, const char *prefer, const char *user,
                  const char *hex)
{
    if (drv_blobs_owned(h->blobs, user, hex))
        return 0;
    if (!drv_blobs_whole(h->blobs, hex) && fetch_blob(h, p, prefer, hex) < 0)
        return -1;
    drv_error_t err;
    if (drv_blobs_mark_owner(h->blobs, user, hex, &err) < 0) {
        drv_warn("blob sync: %s", err.message);
        return -1;
    }
    return 0;
}

/* --- artifacts --------------------------------------------------------------------------- */

typedef struct pair {
    char *owner, *hex;
} pair_t;

static void artifacts_pass(drv_head_t *h, const peers_t *p)
{
    drv_state_t *st = h->state;
    size_t k = 0, cap = 0;
    pair_t *v = NULL;
    drv_state_rdlock(st);
    for (size_t i = 0; i < drv_state_count(st, DRV_K_ARTIFACT); i++) {
        const drv_obj_t *a = drv_state_at(st, DRV_K_ARTIFACT, i);
        const char *src = json_string_value(json_object_get(a->spec, "source"));
        if (!src || strcmp(src, "drover://") != 0)
            continue;
        size_t j;
        json_t *f;
        json_array_foreach(json_object_get(json_object_get(a->spec, "manifest"), "files"), j, f) {
            const char *hex = json_string_value(json_object_get(f, "sha256"));
            if (!hex || !drv_blobs_hex_ok(hex))
                continue;
            if (k == cap)
                if (!(v = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof *v)))
                    abort();
            v[k].owner = drv_strdup(a->owner);
            v[k++].hex = drv_strdup(hex);
        }
    }
    drv_state_unlock(st);
    for (size_t i = 0; i < k; i++) {
        if (p->n && ensure(h, p, NULL, v[i].owner, v[i].hex) < 0)
            drv_debug("blob sync: no head has blob %.12s... of %s yet", v[i].hex, v[i].owner);
        free(v[i].owner);
        free(v[i].hex);
    }
    free(v);
}

/* --- checkpoints ------------------------------------------------------------------------- */

static void rec_key(const char *user, const json_t *rec, char *out, size_t n)
{
    const char *s = json_string_value(json_object_get(rec, "scope"));
    const char *m = json_string_value(json_object_get(rec, "name"));
    snprintf(out, n, "%s\n%s\n%s", user, s ? s : "", m ? m : "");
}

/* Copy one record of another head (from) unless this head has it as is
 * (replace: also when it differs); its blobs first. */
static void copy_rec(drv_head_t *h, const peers_t *p, const char *from, const char *user,
                     const json_t *rec, bool replace)
{
    const char *scope = json_string_value(json_object_get(rec, "scope"));
    const char *name = json_string_value(json_object_get(rec, "name"));
    json_t *mine = NULL;
    drv_error_t err;
    if (!user || !scope || !name)
        return;
    if (drv_ckpts_get(h->blobs, user, scope, name, &mine, &err) == 0) {
        bool same = json_equal(json_object_get(mine, "digest"), json_object_get(rec, "digest")) &&
                    json_equal(json_object_get(mine, "committed_at_ms"),
                               json_object_get(rec, "committed_at_ms"));
        json_decref(mine);
        if (same || !replace)
            return;
    }
    size_t j;
    json_t *f;
    json_array_foreach(json_object_get(json_object_get(rec, "manifest"), "files"), j, f) {
        const char *hex = json_string_value(json_object_get(f, "sha256"));
        if (!hex || !drv_blobs_hex_ok(hex) || ensure(h, p, from, user, hex) < 0)
            return;   /* the next pass tries again; no record without its blobs */
    }
    if (drv_ckpts_put(h->blobs, user, rec, &err) < 0)
        drv_warn("blob sync: checkpoint %s/%s of %s: %s", scope, name, user, err.message);
    else
        drv_info("blob sync: copied checkpoint %s/%s of %s from %s", scope, name, user, from);
}

static json_t *list_of(drv_head_t *h, const char *base)
{
    char url[1024];
    if (drv_peer_ckpts_url(h, base, FETCH_TTL_S, url, sizeof url) < 0)
        return NULL;
    json_t *doc = get_json(h, url);
    if (doc && !json_is_array(json_object_get(doc, "items"))) {
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

/* A standby: the leader's set, copied; what it no longer has dropped once
 * it says its set is whole. */
static void ckpts_follow(drv_head_t *h, const peers_t *p)
{
    if (!p->first_is_leader)
        return;
    json_t *doc = list_of(h, p->url[0]);
    if (!doc)
        return;
    json_t *items = json_object_get(doc, "items"), *it, *keys = json_object();
    size_t i;
    char key[512];
    json_array_foreach(items, i, it) {
        const char *user = json_string_value(json_object_get(it, "user"));
        json_t *rec = json_object_get(it, "record");
        copy_rec(h, p, p->url[0], user, rec, true);
        rec_key(user ? user : "", rec, key, sizeof key);
        json_object_set_new(keys, key, json_true());
    }
    if (json_is_true(json_object_get(doc, "whole"))) {
        json_t *all = drv_ckpts_all(h->blobs);
        json_array_foreach(all, i, it) {
            const char *user = json_string_value(json_object_get(it, "user"));
            json_t *rec = json_object_get(it, "record");
            rec_key(user, rec, key, sizeof key);
            if (json_object_get(keys, key))
                continue;
            const char *scope = json_string_value(json_object_get(rec, "scope"));
            const char *name = json_string_value(json_object_get(rec, "name"));
            drv_error_t err;
            if (drv_ckpts_delete(h->blobs, user, scope, name, &err) == 0)
                drv_info("blob sync: dropped checkpoint %s/%s of %s (the leader has it no more)",
                         scope, name, user);
        }
        json_decref(all);
    }
    json_decref(keys);
    json_decref(doc);
}

/* A leader whose set is not whole yet: copy from every other head what it
 * lacks (never replacing its own); whole once every head answered. */
static void ckpts_gather(drv_head_t *h, const peers_t *p)
{
    bool all = true;
    for (size_t k = 0; k < p->n; k++) {
        json_t *doc = list_of(h, p->url[k]), *it;
        size_t i;
        if (!doc) {
            all = false;
            continue;
        }
        json_array_foreach(json_object_get(doc, "items"), i, it)
            copy_rec(h, p, p->url[k], json_string_value(json_object_get(it, "user")),
                     json_object_get(it, "record"), false);
        json_decref(doc);
    }
    if (all) {
        atomic_store(&h->ckpts_whole, true);
        drv_info("blob sync: this head's checkpoint records are whole (%zu other head(s) "
                 "asked)", p->n);
    }
}

/* --- a standby's holds (POST /v1/heads/replicate) ------------------------------------------ */

/* Each item asked for: its blobs (the leader's first), then its checkpoint
 * record as the leader wrote it; the waiting request is woken. */
static void serve_wants(drv_blob_sync_t *s)
{
    drv_head_t *h = s->head;
    pthread_mutex_lock(&s->mu);
    json_t *wants = s->wants;
    s->wants = json_array();
    pthread_mutex_unlock(&s->mu);
    if (!json_array_size(wants)) {
        json_decref(wants);
        return;
    }
    peers_t *p = drv_xmalloc(sizeof *p);
    peers_of(h, p);
    const char *from = p->n ? p->url[0] : "";
    size_t i, j;
    json_t *w, *it;
    json_array_foreach(wants, i, w) {
        json_array_foreach(json_object_get(w, "items"), j, it) {
            const char *user = json_string_value(json_object_get(it, "user"));
            const json_t *rec = json_object_get(it, "checkpoint");
            size_t k;
            json_t *v;
            if (!user)
                continue;
            if (json_is_object(rec)) {   /* its blobs first, then the record */
                copy_rec(h, p, from, user, rec, true);
                continue;
            }
            json_array_foreach(json_object_get(it, "blobs"), k, v) {
                const char *hex = json_string_value(v);
                if (hex && drv_blobs_hex_ok(hex) && ensure(h, p, from, user, hex) < 0)
                    drv_warn("blob sync: blob %.12s... of %s asked for by the leader: no head "
                             "gave it", hex, user);
            }
        }
        drv_head_wake(h, (uint64_t)json_integer_value(json_object_get(w, "key")));
        json_array_append(s->rewake, json_object_get(w, "key"));
    }
    free(p);
    json_decref(wants);
}

static void want(void *ctx, json_t *items, uint64_t key)
{
    drv_blob_sync_t *s = ctx;
    pthread_mutex_lock(&s->mu);
    json_array_append_new(s->wants, json_pack("{s:o, s:I}", "items", items, "key",
                                              (json_int_t)key));
    s->kicked = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* --- a leader's semi-synchronous uploads ----------------------------------------------------- */

/* ms from now on the monotonic clock (the condition variables' clock). */
static void mono_in(long ms, struct timespec *ts)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* A ticket's id ("KIND\nUSER\nSHA256"), for a log line: "KIND of USER (request HEX12...)". */
static const char *id_text(const char *id, char *out, size_t n)
{
    const char *u = strchr(id, '\n'), *x = u ? strchr(u + 1, '\n') : NULL;
    if (!u || !x)
        snprintf(out, n, "an upload");
    else
        snprintf(out, n, "%.*s of %.*s (request %.12s...)", (int)(u - id), id, (int)(x - u - 1),
                 u + 1, x + 1);
    return out;
}

static ticket_t *ticket_find(drv_blob_sync_t *s, const char *id)
{
    for (size_t i = 0; i < s->nt; i++)
        if (strcmp(s->t[i].id, id) == 0)
            return &s->t[i];
    return NULL;
}

/* drv_head_t.replicate (HTTP threads). */
static int replicate(void *ctx, const char *id, json_t *item, bool resumed, int *wait_ms,
                     json_t **kept)
{
    drv_blob_sync_t *s = ctx;
    drv_head_t *h = s->head;
    int r;
    if (resumed) {
        pthread_mutex_lock(&s->tmu);
        ticket_t *t = ticket_find(s, id);
        r = !t ? DRV_REPL_PENDING : t->state == DRV_REPL_WAIT ? DRV_REPL_PENDING : t->state;
        if (t)
            t->collected = true;
        if (kept)
            *kept = t ? json_incref(t->item) : NULL;
        pthread_mutex_unlock(&s->tmu);
        json_decref(item);
        return r;
    }
    peers_t *p = drv_xmalloc(sizeof *p);
    peers_of(h, p);
    bool none = !p->leader || p->n == 0;
    free(p);
    if (none || !item) {
        json_decref(item);
        return DRV_REPL_NONE;
    }
    pthread_mutex_lock(&s->tmu);
    ticket_t *t = ticket_find(s, id);
    if (!t) {
        if (s->nt == s->capt &&
            !(s->t = realloc(s->t, (s->capt = s->capt ? 2 * s->capt : 16) * sizeof *s->t)))
            abort();
        t = &s->t[s->nt++];
        memset(t, 0, sizeof *t);
        snprintf(t->id, sizeof t->id, "%s", id);
    }
    json_decref(t->item);
    t->item = item;
    t->state = DRV_REPL_WAIT;
    t->collected = false;
    t->deadline_ms = drv_mono_ms() + h->cfg.blob_sync_timeout_ms;
    s->tkicked = true;
    pthread_cond_signal(&s->tcv);
    pthread_mutex_unlock(&s->tmu);
    *wait_ms = h->cfg.blob_sync_timeout_ms;
    return DRV_REPL_WAIT;
}

/* Mark ticket id state and wake its request. Under tmu. */
static void ticket_end(drv_blob_sync_t *s, const char *id, int state)
{
    ticket_t *t = ticket_find(s, id);
    if (!t || t->state != DRV_REPL_WAIT)
        return;
    t->state = state;
    drv_head_wake(s->head, drv_key_hash(id));
}

/* POST body to base's /v1/heads/replicate: the "held" array, or NULL. */
static json_t *post_replicate(drv_head_t *h, const char *base, const char *body, size_t len,
                              long wait_ms)
{
    char url[1024];
    if (drv_peer_replicate_url(h, base, body, len, FETCH_TTL_S, url, sizeof url) < 0)
        return NULL;
    CURL *c = easy(h, url, wait_ms + 5000);
    if (!c)
        return NULL;
    drv_httpc_sink_t sink = {.max = 1u << 20};
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    long code = 0;
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, drv_httpc_sink_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    curl_slist_free_all(hd);
    json_t *doc = code == 200 && sink.data && !sink.too_big ? json_loads(sink.data, 0, NULL)
                                                            : NULL;
    if (code != 200)
        drv_debug("blob sync: %s did not hold the uploads asked for (%s %ld)", base,
                  code ? "HTTP" : "no answer", code);
    free(sink.data);
    json_t *held = json_incref(json_object_get(doc, "held"));
    json_decref(doc);
    return held;
}

/* One round: the waiting tickets (as many as fit in a body) to the live
 * standbys in turn until each is held; none left live: they answer. */
static void send_round(drv_blob_sync_t *s)
{
    drv_head_t *h = s->head;
    json_t *ids = json_array(), *items = json_array();
    int64_t now = drv_mono_ms(), last = now;
    size_t bytes = 0;
    pthread_mutex_lock(&s->tmu);
    size_t j = 0;
    for (size_t i = 0; i < s->nt; i++) {   /* those long past their deadline go */
        if (s->t[i].deadline_ms + TICKET_KEEP_MS < now) {
            json_decref(s->t[i].item);
            continue;
        }
        s->t[j++] = s->t[i];
    }
    s->nt = j;
    for (size_t i = 0; i < s->nt; i++) {
        ticket_t *t = &s->t[i];
        /* ended before its request's hold began? wake it again */
        if (t->state != DRV_REPL_WAIT && !t->collected && t->deadline_ms > now)
            drv_head_wake(h, drv_key_hash(t->id));
        if (t->state != DRV_REPL_WAIT || t->deadline_ms <= now)
            continue;
        json_t *it = json_pack("{s:O, s:O, s:O}", "user", json_object_get(t->item, "user"),
                               "blobs", json_object_get(t->item, "blobs"), "checkpoint",
                               json_object_get(t->item, "checkpoint") ?
                               json_object_get(t->item, "checkpoint") : json_null());
        char *one = it ? json_dumps(it, JSON_COMPACT) : NULL;
        size_t l = one ? strlen(one) : SEND_MAX;
        free(one);
        if (it && l > SEND_MAX) {   /* over what a standby takes in a body: not waited for */
            char tx[400];
            drv_warn("blob sync: the %s: %zu bytes of blob names, over what one request to a "
                     "standby carries: answered now, the standbys copy it in the background",
                     id_text(t->id, tx, sizeof tx), l);
            json_decref(it);
            ticket_end(s, t->id, DRV_REPL_PENDING);
            continue;
        }
        if (!it || (json_array_size(items) && bytes + l > SEND_MAX)) {
            json_decref(it);
            continue;   /* the next round */
        }
        bytes += l;
        json_array_append_new(items, it);
        json_array_append_new(ids, json_string(t->id));
        if (t->deadline_ms > last)
            last = t->deadline_ms;
    }
    pthread_mutex_unlock(&s->tmu);
    if (!json_array_size(ids))
        goto out;
    peers_t *p = drv_xmalloc(sizeof *p);
    peers_of(h, p);
    if (!p->leader || p->n == 0) {   /* no standby (left): as on one head */
        pthread_mutex_lock(&s->tmu);
        for (size_t i = 0; i < json_array_size(ids); i++)
            ticket_end(s, json_string_value(json_array_get(ids, i)), DRV_REPL_NONE);
        pthread_mutex_unlock(&s->tmu);
        free(p);
        goto out;
    }
    for (size_t k = 0; k < p->n && json_array_size(items); k++) {
        json_t *doc = json_pack("{s:O, s:I}", "items", items, "wait_ms",
                                (json_int_t)(last - drv_mono_ms()));
        size_t len;
        char *body = drv_json_dump(doc, &len);
        json_decref(doc);
        json_t *held = body ? post_replicate(h, p->url[k], body, len, (long)(last - now)) : NULL;
        free(body);
        if (!json_is_array(held) || json_array_size(held) != json_array_size(items)) {
            json_decref(held);
            continue;
        }
        json_t *ids2 = json_array(), *items2 = json_array();
        pthread_mutex_lock(&s->tmu);
        for (size_t i = 0; i < json_array_size(ids); i++) {
            const char *id = json_string_value(json_array_get(ids, i));
            if (json_is_true(json_array_get(held, i))) {
                ticket_end(s, id, DRV_REPL_HELD);
                char tx[400];
                drv_info("blob sync: %s holds the %s", p->url[k], id_text(id, tx, sizeof tx));
            } else {
                json_array_append(ids2, json_array_get(ids, i));
                json_array_append(items2, json_array_get(items, i));
            }
        }
        pthread_mutex_unlock(&s->tmu);
        json_decref(held);
        json_decref(ids);
        json_decref(items);
        ids = ids2;
        items = items2;
    }
    free(p);
out:
    json_decref(ids);
    json_decref(items);
}

static void *sender_main(void *arg)
{
    drv_blob_sync_t *s = arg;
    pthread_mutex_lock(&s->tmu);
    while (!s->tstop) {
        bool waiting = false;
        int64_t now = drv_mono_ms();
        for (size_t i = 0; i < s->nt && !waiting; i++)
            waiting = (s->t[i].state == DRV_REPL_WAIT || !s->t[i].collected) &&
                      s->t[i].deadline_ms > now;
        if (!s->tkicked) {
            struct timespec ts;
            mono_in(waiting ? RETRY_MS : PASS_MS, &ts);
            pthread_cond_timedwait(&s->tcv, &s->tmu, &ts);
            if (s->tstop)
                break;
        }
        s->tkicked = false;
        pthread_mutex_unlock(&s->tmu);
        send_round(s);
        pthread_mutex_lock(&s->tmu);
    }
    pthread_mutex_unlock(&s->tmu);
    return NULL;
}

/* --- the thread -------------------------------------------------------------------------- */

static void pass(drv_blob_sync_t *s)
{
    drv_head_t *h = s->head;
    peers_t *p = drv_xmalloc(sizeof *p);
    peers_of(h, p);
    artifacts_pass(h, p);
    if (!p->leader)
        ckpts_follow(h, p);
    else if (!atomic_load(&h->ckpts_whole))
        ckpts_gather(h, p);
    free(p);
}

static void *sync_main(void *arg)
{
    drv_blob_sync_t *s = arg;
    int64_t last = 0;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        struct timespec ts;
        long ms = json_array_size(s->rewake) ? RETRY_MS : PASS_MS;
        mono_in(ms, &ts);
        while (!s->stop && !s->kicked && pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0)
            ;
        if (s->stop)
            break;
        s->kicked = false;
        pthread_mutex_unlock(&s->mu);
        json_t *again = s->rewake, *k;
        size_t i;
        s->rewake = json_array();
        json_array_foreach(again, i, k)
            drv_head_wake(s->head, (uint64_t)json_integer_value(k));
        json_decref(again);
        serve_wants(s);
        if (drv_mono_ms() - last >= PASS_MS - RETRY_MS) {
            pass(s);
            serve_wants(s);   /* asked for during the pass */
            last = drv_mono_ms();
        }
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* drv_head_t.blob_elsewhere: the first other head that serves blob hex
 * (2 s each), its URL signed for a node. HTTP threads. */
static int elsewhere(void *ctx, const char *hex, char *out, size_t n)
{
    drv_blob_sync_t *s = ctx;
    drv_head_t *h = s->head;
    peers_t *p = drv_xmalloc(sizeof *p);
    int rc = -1;
    peers_of(h, p);
    for (size_t i = 0; i < p->n && rc < 0; i++) {
        if (drv_peer_blob_url(h, p->url[i], hex, URL_TTL_S, out, n) < 0)
            continue;
        CURL *c = easy(h, out, 2000);
        long code = 0;
        if (!c)
            continue;
        /* its first byte (the routes take GET only; 416: an empty blob) */
        drv_httpc_sink_t sink = {.max = 1024};
        curl_easy_setopt(c, CURLOPT_RANGE, "0-0");
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, drv_httpc_sink_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
        if (curl_easy_perform(c) == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(c);
        free(sink.data);
        if (code == 200 || code == 206 || code == 416)
            rc = 0;
    }
    free(p);
    pthread_mutex_lock(&s->mu);   /* and copy it here soon */
    s->kicked = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

drv_blob_sync_t *drv_blob_sync_create(drv_head_t *head, drv_error_t *err)
{
    drv_blob_sync_t *s = calloc(1, sizeof *s);
    if (!s)
        return drv_err_internal(err, "out of memory"), NULL;
    s->head = head;
    s->wants = json_array();
    s->rewake = json_array();
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->tmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_cond_init(&s->tcv, &ca);
    pthread_condattr_destroy(&ca);
    bool sync = pthread_create(&s->thread, NULL, sync_main, s) == 0;
    if (!sync || pthread_create(&s->sender, NULL, sender_main, s) != 0) {
        if (sync) {
            pthread_mutex_lock(&s->mu);
            s->stop = true;
            pthread_cond_signal(&s->cv);
            pthread_mutex_unlock(&s->mu);
            pthread_join(s->thread, NULL);
        }
        pthread_cond_destroy(&s->cv);
        pthread_cond_destroy(&s->tcv);
        pthread_mutex_destroy(&s->mu);
        pthread_mutex_destroy(&s->tmu);
        json_decref(s->wants);
        json_decref(s->rewake);
        free(s);
        return drv_err_internal(err, "blob sync: cannot start its threads"), NULL;
    }
    head->blob_elsewhere_ctx = s;
    head->replicate_ctx = s;
    __atomic_store_n(&head->replica_want, want, __ATOMIC_RELEASE);
    __atomic_store_n(&head->replicate, replicate, __ATOMIC_RELEASE);
    __atomic_store_n(&head->blob_elsewhere, elsewhere, __ATOMIC_RELEASE);
    return s;
}

void drv_blob_sync_destroy(drv_blob_sync_t *s)
{
    if (!s)
        return;
    __atomic_store_n(&s->head->blob_elsewhere, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&s->head->replicate, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&s->head->replica_want, NULL, __ATOMIC_RELEASE);
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&s->tmu);
    s->tstop = true;
    pthread_cond_signal(&s->tcv);
    pthread_mutex_unlock(&s->tmu);
    pthread_join(s->thread, NULL);
    pthread_join(s->sender, NULL);
    for (size_t i = 0; i < s->nt; i++)
        json_decref(s->t[i].item);
    free(s->t);
    json_decref(s->wants);
    json_decref(s->rewake);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->tcv);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->tmu);
    free(s);
}
