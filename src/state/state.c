/* state.c — see state.h. Collections are sorted collections of object
 * pointers addressed by position (coll.h: chunks of a sorted array):
 * O(log n) lookup, ordered listing by key prefix, inserts that move one
 * chunk, for the tens of thousands of objects a head holds. */
#define _GNU_SOURCE
#include "state/state.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "state/coll.h"

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

struct drv_state {
    pthread_rwlock_t lock;
    drv_store_t *store;
    drv_coll_t kinds[DRV_K__COUNT];
    drv_coll_t by_hash;          /* objects with a secret's hash, sorted by it */
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
    st->by_hash.by_hash = true;
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
        for (size_t j = 0; j < st->kinds[k].nc; j++)
            for (size_t i = 0; i < st->kinds[k].c[j].n; i++)
                drv_obj_free(st->kinds[k].c[j].v[i]);
        drv_coll_free(&st->kinds[k]);
    }
    drv_coll_free(&st->by_hash);
    pthread_rwlock_destroy(&st->lock);
    free(st);
}

void drv_state_rdlock(drv_state_t *st) { pthread_rwlock_rdlock(&st->lock); }
void drv_state_wrlock(drv_state_t *st) { pthread_rwlock_wrlock(&st->lock); }
void drv_state_unlock(drv_state_t *st) { pthread_rwlock_unlock(&st->lock); }

/* --- sorted collections ---------------------------------------------------- */

static drv_obj_t *find(const drv_coll_t *c, const char *key, size_t *pos)
{
    return drv_coll_find(c, key, pos);
}

drv_obj_t *drv_state_get(drv_state_t *st, drv_kind_t kind, const char *key)
{
    return find(&st->kinds[kind], key, NULL);
}

drv_obj_t *drv_state_by_hash(drv_state_t *st, const char *hash)
{
    return find(&st->by_hash, hash, NULL);
}

size_t drv_state_count(drv_state_t *st, drv_kind_t kind) { return st->kinds[kind].n; }

size_t drv_state_lower_bound(drv_state_t *st, drv_kind_t kind, const char *key)
{
    return drv_coll_lower_bound(&st->kinds[kind], key);
}

drv_obj_t *drv_state_at(drv_state_t *st, drv_kind_t kind, size_t i)
{
    return drv_coll_at(&st->kinds[kind], i);
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
static char *render_generic(const drv_obj_t *o, size_t *len)
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
    char *s = drv_json_dump(doc, len);
    json_decref(doc);
    return s;
}

/* Whether jansson makes a string of s (ASCII always; else it checks UTF-8). */
static bool takes_string(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p && *p < 0x80)
        p++;
    if (!*p)
        return true;
    json_t *probe = json_string(s);
    bool ok = probe != NULL;
    json_decref(probe);
    return ok;
}

/* Whether the public view is the spec's dump with the metadata appended:
 * the spec is an object holding no hidden field and none of the names the
 * metadata takes (which would be replaced in place; "status" only when
 * the object has one: an audit entry's spec holds the answer's), and the
 * owner and id are strings jansson takes (valid UTF-8). Always so for
 * what the API writes. */
static bool spliceable(const drv_obj_t *o)
{
    static const char *const meta[] = {"owner", "created_at", "updated_at", "resource_version"};
    if (!json_is_object(o->spec) || !o->owner || !o->id ||
        (o->status && json_object_get(o->spec, "status")))
        return false;
    for (size_t i = 0; hidden_fields[o->kind][i]; i++)
        if (json_object_get(o->spec, hidden_fields[o->kind][i]))
            return false;
    for (size_t i = 0; i < sizeof meta / sizeof *meta; i++)
        if (json_object_get(o->spec, meta[i]))
            return false;
    return takes_string(o->owner) && takes_string(o->id);
}

/* The public view from the spec's dump: the same bytes render_generic
 * writes (json_copy keeps the members' order; new ones go last), without
 * copying the spec into a new document and dumping it again. */
static char *render_spliced(const drv_obj_t *o, const char *spec, size_t spec_len, size_t *len)
{
    drv_jbuf_t b = {0};
    char ts[32];
    drv_jbuf_raw(&b, spec, spec_len - 1);   /* without its '}' */
    if (spec_len > 2) /* the spec has members: a comma after them */
        drv_jbuf_lit(&b, ",");
    drv_jbuf_lit(&b, "\"owner\":");
    drv_jbuf_str(&b, o->owner);
    drv_rfc3339(o->created_at, ts, sizeof ts);
    drv_jbuf_lit(&b, ",\"created_at\":");
    drv_jbuf_str(&b, ts);
    drv_rfc3339(o->updated_at, ts, sizeof ts);
    drv_jbuf_lit(&b, ",\"updated_at\":");
    drv_jbuf_str(&b, ts);
    drv_jbuf_lit(&b, ",\"resource_version\":");
    drv_jbuf_int(&b, o->rv);
    if (o->status) {
        drv_jbuf_lit(&b, ",\"status\":");
        drv_jbuf_value(&b, o->status);
    }
    drv_jbuf_lit(&b, "}");
    return drv_jbuf_finish(&b, len);
}

/* Storage envelope: everything but the soft status. The same bytes as
 * json_pack("{s:s, s:s, s:O, s:I, s:I, s:I}", owner, id, spec, ...) with
 * "internal" set last, dumped — written around the spec's dump. */
static char *envelope_spliced(const drv_obj_t *o, const char *spec, size_t spec_len)
{
    drv_jbuf_t b = {0};
    drv_jbuf_lit(&b, "{\"owner\":");
    drv_jbuf_str(&b, o->owner);
    drv_jbuf_lit(&b, ",\"id\":");
    drv_jbuf_str(&b, o->id);
    drv_jbuf_lit(&b, ",\"spec\":");
    drv_jbuf_raw(&b, spec, spec_len);
    drv_jbuf_lit(&b, ",\"created_at\":");
    drv_jbuf_int(&b, o->created_at);
    drv_jbuf_lit(&b, ",\"updated_at\":");
    drv_jbuf_int(&b, o->updated_at);
    drv_jbuf_lit(&b, ",\"rv\":");
    drv_jbuf_int(&b, o->rv);
    if (o->internal) {
        drv_jbuf_lit(&b, ",\"internal\":");
        drv_jbuf_value(&b, o->internal);
    }
    drv_jbuf_lit(&b, "}");
    return drv_jbuf_finish(&b, NULL);
}

static char *envelope_generic(const drv_obj_t *o)
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

/* The public view (o->rendered) and, when want_env, the storage form (the
 * result; NULL otherwise), from one dump of the spec where they can. */
static char *render_both(drv_obj_t *o, bool want_env)
{
    char *env = NULL;
    free(o->rendered);
    if (spliceable(o)) {
        size_t spec_len;
        char *spec = drv_json_dump(o->spec, &spec_len);
        o->rendered = render_spliced(o, spec, spec_len, &o->rendered_len);
        if (want_env)
            env = envelope_spliced(o, spec, spec_len);
        free(spec);
        return env;
    }
    o->rendered = render_generic(o, &o->rendered_len);
    return want_env ? envelope_generic(o) : NULL;
}

static void render(drv_obj_t *o) { render_both(o, false); }

static char *envelope(const drv_obj_t *o)
{
    if (!spliceable(o))
        return envelope_generic(o);
    size_t spec_len;
    char *spec = drv_json_dump(o->spec, &spec_len);
    char *env = envelope_spliced(o, spec, spec_len);
    free(spec);
    return env;
}

static void index_insert(drv_state_t *st, drv_obj_t *o)
{
    size_t pos;
    drv_coll_t *c = &st->kinds[o->kind];
    drv_obj_t *old = find(c, o->key, &pos);
    if (old) {
        if (old->hash) {
            size_t hp;
            if (find(&st->by_hash, old->hash, &hp) == old)
                drv_coll_remove(&st->by_hash, hp);
        }
        drv_coll_set(c, pos, o);
        drv_obj_free(old);
    } else {
        drv_coll_insert(c, pos, o);
    }
    if (o->hash) {
        size_t hp;
        find(&st->by_hash, o->hash, &hp);
        drv_coll_insert(&st->by_hash, hp, o);
    }
}

void drv_obj_prepare(drv_obj_t *o)
{
    char *env = render_both(o, true);
    free(o->envelope);
    o->envelope = env;
}

uint64_t drv_state_put(drv_state_t *st, drv_obj_t *o)
{
    drv_obj_t *old = find(&st->kinds[o->kind], o->key, NULL);
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
    drv_coll_t *c = &st->kinds[kind];
    drv_obj_t *o = find(c, key, &pos);
    if (!o)
        return NULL;
    drv_coll_remove(c, pos);
    if (o->hash) {
        size_t hp;
        if (find(&st->by_hash, o->hash, &hp) == o)
            drv_coll_remove(&st->by_hash, hp);
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
    drv_coll_t *c = &st->kinds[kind];
    if (n > c->n)
        n = c->n;
    for (size_t i = 0; i < n; i++) {
        drv_obj_t *o = drv_coll_at(c, i);
        if (o->hash) {
            size_t hp;
            if (find(&st->by_hash, o->hash, &hp) == o)
                drv_coll_remove(&st->by_hash, hp);
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
    drv_coll_remove_first(c, n);
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
