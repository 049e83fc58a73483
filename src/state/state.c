/* state.c — see state.h. Collections are sorted arrays of object pointers:
 * O(log n) lookup, ordered listing by key prefix, cheap for the tens of
 * thousands of objects a head holds. */
#define _GNU_SOURCE
#include "state/state.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/log.h"
#include "common/util.h"

const char *const drv_kind_names[DRV_K__COUNT] = {
    "user", "token", "cluster", "nodepool", "model", "deployment", "jointoken", "node", "replica",
    "credential", "artifact", "store", "job", "audit",
};

/* Fields stored but never shown by the API (cloud secrets). */
static const char *const hidden_fields[DRV_K__COUNT][6] = {
    [DRV_K_CREDENTIAL] = {"secret_access_key", "service_account_key", "api_key", "private_key",
                          "password" /* registry */, NULL},
    [DRV_K_STORE] = {"secret_access_key", NULL},
};

typedef struct coll {
    drv_obj_t **v;
    size_t n, cap;
} coll_t;

struct drv_state {
    pthread_rwlock_t lock;
    drv_store_t *store;
    coll_t kinds[DRV_K__COUNT];
    coll_t by_hash;              /* objects with a secret's hash, sorted by it */
    uint64_t seq;                /* last assigned store seq */
};

drv_state_t *drv_state_create(drv_store_t *store)
{
    drv_state_t *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&st->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    st->store = store;
    return st;
}

void drv_obj_free(drv_obj_t *o)
{
    if (!o)
        return;
    free(o->key);
    free(o->owner);
    free(o->id);
    json_decref(o->spec);
    json_decref(o->internal);
    json_decref(o->status);
    free(o->hash);
    free(o->rendered);
    free(o->envelope);
    free(o);
}

void drv_state_destroy(drv_state_t *st)
{
    if (!st)
        return;
    for (int k = 0; k < DRV_K__COUNT; k++) {
        for (size_t i = 0; i < st->kinds[k].n; i++)
            drv_obj_free(st->kinds[k].v[i]);
        free(st->kinds[k].v);
    }
    free(st->by_hash.v);
    pthread_rwlock_destroy(&st->lock);
    free(st);
}

void drv_state_rdlock(drv_state_t *st) { pthread_rwlock_rdlock(&st->lock); }
void drv_state_wrlock(drv_state_t *st) { pthread_rwlock_wrlock(&st->lock); }
void drv_state_unlock(drv_state_t *st) { pthread_rwlock_unlock(&st->lock); }

/* --- sorted collections ---------------------------------------------------- */

static const char *key_of(const drv_obj_t *o, bool by_hash)
{
    return by_hash ? o->hash : o->key;
}

static size_t lower_bound(const coll_t *c, const char *key, bool by_hash)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(key_of(c->v[mid], by_hash), key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static drv_obj_t *find(const coll_t *c, const char *key, bool by_hash, size_t *pos)
{
    size_t i = lower_bound(c, key, by_hash);
    if (pos)
        *pos = i;
    if (i < c->n && strcmp(key_of(c->v[i], by_hash), key) == 0)
        return c->v[i];
    return NULL;
}

static void coll_insert_at(coll_t *c, size_t i, drv_obj_t *o)
{
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 16;
        drv_obj_t **nv = realloc(c->v, ncap * sizeof *nv);
        if (!nv) {
            fprintf(stderr, "drover: out of memory\n");
            abort();
        }
        c->v = nv;
        c->cap = ncap;
    }
    memmove(&c->v[i + 1], &c->v[i], (c->n - i) * sizeof *c->v);
    c->v[i] = o;
    c->n++;
}

static void coll_remove_at(coll_t *c, size_t i)
{
    memmove(&c->v[i], &c->v[i + 1], (c->n - i - 1) * sizeof *c->v);
    c->n--;
}

drv_obj_t *drv_state_get(drv_state_t *st, drv_kind_t kind, const char *key)
{
    return find(&st->kinds[kind], key, false, NULL);
}

drv_obj_t *drv_state_by_hash(drv_state_t *st, const char *hash)
{
    return find(&st->by_hash, hash, true, NULL);
}

size_t drv_state_count(drv_state_t *st, drv_kind_t kind) { return st->kinds[kind].n; }

size_t drv_state_lower_bound(drv_state_t *st, drv_kind_t kind, const char *key)
{
    return lower_bound(&st->kinds[kind], key, false);
}

drv_obj_t *drv_state_at(drv_state_t *st, drv_kind_t kind, size_t i)
{
    return i < st->kinds[kind].n ? st->kinds[kind].v[i] : NULL;
}

uint64_t drv_state_last_seq(drv_state_t *st) { return st->seq; }

/* --- objects ---------------------------------------------------------------- */

drv_obj_t *drv_obj_new(drv_kind_t kind, const char *key, const char *owner, const char *id,
                       json_t *spec, json_t *internal)
{
    drv_obj_t *o = calloc(1, sizeof *o);
    if (!o) {
        fprintf(stderr, "drover: out of memory\n");
        abort();
    }
    o->kind = kind;
    o->key = drv_strdup(key);
    o->owner = drv_strdup(owner);
    o->id = drv_strdup(id);
    o->spec = spec;
    o->internal = internal;
    const char *h = internal ? json_string_value(json_object_get(internal, "hash")) : NULL;
    if (h)
        o->hash = drv_strdup(h);
    return o;
}

/* Public view: spec fields, then metadata, then status. A shallow copy of
 * the spec is enough (and spares a copy of every nested value): only its
 * top-level members are set or replaced. */
static void render(drv_obj_t *o)
{
    json_t *doc = json_is_object(o->spec) ? json_copy(o->spec) : json_object();
    for (size_t i = 0; hidden_fields[o->kind][i]; i++)
        if (json_object_get(doc, hidden_fields[o->kind][i]))
            json_object_set_new(doc, hidden_fields[o->kind][i], json_string("(hidden)"));
    char ts[32];
    json_object_set_new(doc, "owner", json_string(o->owner));
    drv_rfc3339(o->created_at, ts, sizeof ts);
    json_object_set_new(doc, "created_at", json_string(ts));
    drv_rfc3339(o->updated_at, ts, sizeof ts);
    json_object_set_new(doc, "updated_at", json_string(ts));
    json_object_set_new(doc, "resource_version", json_integer(o->rv));
    if (o->status)
        json_object_set(doc, "status", o->status);
    free(o->rendered);
    o->rendered = drv_json_dump(doc, &o->rendered_len);
    json_decref(doc);
}

/* Storage envelope: everything but the soft status. */
static char *envelope(const drv_obj_t *o)
{
    json_t *env = json_pack("{s:s, s:s, s:O, s:I, s:I, s:I}", "owner", o->owner, "id", o->id,
                            "spec", o->spec, "created_at", (json_int_t)o->created_at,
                            "updated_at", (json_int_t)o->updated_at, "rv", (json_int_t)o->rv);
    if (o->internal)
        json_object_set(env, "internal", o->internal);
    char *s = drv_json_dump(env, NULL);
    json_decref(env);
    return s;
}

static void index_insert(drv_state_t *st, drv_obj_t *o)
{
    size_t pos;
    coll_t *c = &st->kinds[o->kind];
    drv_obj_t *old = find(c, o->key, false, &pos);
    if (old) {
        if (old->hash) {
            size_t hp;
            if (find(&st->by_hash, old->hash, true, &hp) == old)
                coll_remove_at(&st->by_hash, hp);
        }
        c->v[pos] = o;
        drv_obj_free(old);
    } else {
        coll_insert_at(c, pos, o);
    }
    if (o->hash) {
        size_t hp;
        find(&st->by_hash, o->hash, true, &hp);
        coll_insert_at(&st->by_hash, hp, o);
    }
}

void drv_obj_prepare(drv_obj_t *o)
{
    render(o);
    free(o->envelope);
    o->envelope = envelope(o);
}

uint64_t drv_state_put(drv_state_t *st, drv_obj_t *o)
{
    drv_obj_t *old = find(&st->kinds[o->kind], o->key, false, NULL);
    bool stale = !o->envelope;
    if (old && old != o) {
        o->soft = old->soft;
        if (!o->status && old->status) {
            o->status = json_incref(old->status);
            stale = true;
        }
    }
    if (stale)
        render(o);
    char *body = o->envelope ? o->envelope : envelope(o);
    o->envelope = NULL;
    o->seq = ++st->seq;
    drv_store_op_t op = {
        .del = false,
        .kind = drv_kind_names[o->kind],
        .key = drv_strdup(o->key),
        .body = body,
        .seq = o->seq,
    };
    index_insert(st, o);
    if (st->store)
        drv_store_enqueue(st->store, &op);
    else {
        free(op.key);
        free(op.body);
    }
    return o->seq;
}

/* Take (kind, key) out of the indexes; the object, or NULL when absent. */
static drv_obj_t *unindex(drv_state_t *st, drv_kind_t kind, const char *key)
{
    size_t pos;
    coll_t *c = &st->kinds[kind];
    drv_obj_t *o = find(c, key, false, &pos);
    if (!o)
        return NULL;
    coll_remove_at(c, pos);
    if (o->hash) {
        size_t hp;
        if (find(&st->by_hash, o->hash, true, &hp) == o)
            coll_remove_at(&st->by_hash, hp);
    }
    return o;
}

uint64_t drv_state_del(drv_state_t *st, drv_kind_t kind, const char *key)
{
    drv_obj_t *o = unindex(st, kind, key);
    if (!o)
        return 0;
    drv_store_op_t op = {
        .del = true,
        .kind = drv_kind_names[kind],
        .key = drv_strdup(key),
        .seq = ++st->seq,
    };
    drv_obj_free(o);
    if (st->store)
        drv_store_enqueue(st->store, &op);
    else
        free(op.key);
    return op.seq;
}

uint64_t drv_state_del_first(drv_state_t *st, drv_kind_t kind, size_t n)
{
    coll_t *c = &st->kinds[kind];
    if (n > c->n)
        n = c->n;
    for (size_t i = 0; i < n; i++) {
        drv_obj_t *o = c->v[i];
        if (o->hash) {
            size_t hp;
            if (find(&st->by_hash, o->hash, true, &hp) == o)
                coll_remove_at(&st->by_hash, hp);
        }
        drv_store_op_t op = {
            .del = true,
            .kind = drv_kind_names[kind],
            .key = o->key,   /* the op takes the object's key */
            .seq = ++st->seq,
        };
        o->key = NULL;
        drv_obj_free(o);
        if (st->store)
            drv_store_enqueue(st->store, &op);
        else
            free(op.key);
    }
    memmove(&c->v[0], &c->v[n], (c->n - n) * sizeof *c->v);
    c->n -= n;
    return n ? st->seq : 0;
}

void drv_state_set_status(drv_state_t *st, drv_obj_t *o, json_t *status)
{
    (void)st;
    json_decref(o->status);
    o->status = status;
    render(o);
}

/* --- loading -------------------------------------------------------------- */

static int load_one(void *ctx, const char *kind, const char *key, const char *body,
                    drv_error_t *err)
{
    drv_state_t *st = ctx;
    int k;
    for (k = 0; k < DRV_K__COUNT; k++)
        if (strcmp(kind, drv_kind_names[k]) == 0)
            break;
    if (k == DRV_K__COUNT) {
        drv_warn("store: skipping record of unknown kind '%s' (%s)", kind, key);
        return 0;
    }
    json_error_t jerr;
    json_t *env = json_loads(body, 0, &jerr);
    const char *owner, *id;
    json_t *spec, *internal = NULL;
    json_int_t created, updated, rv;
    if (!env || json_unpack_ex(env, &jerr, 0, "{s:s, s:s, s:o, s:I, s:I, s:I, s?o}", "owner",
                               &owner, "id", &id, "spec", &spec, "created_at", &created,
                               "updated_at", &updated, "rv", &rv, "internal", &internal) < 0) {
        json_decref(env);
        return drv_err_internal(err, "store record %s/%s is corrupt: %s", kind, key, jerr.text);
    }
    json_incref(spec);
    if (internal)
        json_incref(internal);
    drv_obj_t *o = drv_obj_new((drv_kind_t)k, key, owner, id, spec, internal);
    o->created_at = created;
    o->updated_at = updated;
    o->rv = rv;
    json_decref(env);
    render(o);
    index_insert(st, o);
    return 0;
}

int drv_state_apply(drv_state_t *st, const char *kind, const char *key, const char *body,
                    drv_error_t *err)
{
    if (body)
        return load_one(st, kind, key, body, err);   /* replaces any object of key */
    for (int k = 0; k < DRV_K__COUNT; k++)
        if (strcmp(kind, drv_kind_names[k]) == 0) {
            drv_obj_free(unindex(st, (drv_kind_t)k, key));
            break;
        }
    return 0;
}

int drv_state_load(drv_state_t *st, drv_error_t *err)
{
    return drv_store_load(st->store, load_one, st, err);
}
