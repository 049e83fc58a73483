/* audit.c — see audit.h. Entries are state objects of kind DRV_K_AUDIT
 * keyed "MS13-COUNTER8" (the time in ms, zero-padded, then a counter), so
 * the kind's sorted array is in time order: adds append, trims take the
 * front, listing walks back from the end. */
#include "api/audit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

struct drv_audit {
    drv_state_t *st;
    size_t max_entries;
    int64_t max_age_s;
    atomic_uint counter;     /* keeps keys of one millisecond apart */
};

drv_audit_t *drv_audit_create(drv_state_t *st, size_t max_entries, int64_t max_age_s)
{
    drv_audit_t *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->st = st;
    a->max_entries = max_entries ? max_entries : DRV_AUDIT_MAX_ENTRIES;
    a->max_age_s = max_age_s ? max_age_s : DRV_AUDIT_MAX_AGE_S;
    return a;
}

void drv_audit_destroy(drv_audit_t *a)
{
    free(a);
}

/* "clusters" of /v1/clusters/c1/nodepools, "" when none */
static void path_kind(const char *path, char *out, size_t n)
{
    const char *p = strncmp(path, "/v1/", 4) == 0 ? path + 4 : path + (*path == '/');
    size_t len = strcspn(p, "/");
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), p);
}

/* Drop the oldest entries beyond the bounds (under the write lock), in
 * batches: past max_entries + slack (max_entries / 100) the log goes back
 * to max_entries at once, one removal of a prefix and the deletes together
 * in one group commit, instead of one delete per add; entries older than
 * max_age_s go at every add (the front is checked, nothing is scanned). */
static void trim(drv_audit_t *a, int64_t now_ms)
{
    drv_state_t *st = a->st;
    char cut[16];
    snprintf(cut, sizeof cut, "%013lld", (long long)(now_ms - a->max_age_s * 1000));
    size_t n = drv_state_count(st, DRV_K_AUDIT), k = 0;
    if (n > a->max_entries + a->max_entries / 100)
        k = n - a->max_entries;
    for (const drv_obj_t *o; k < n && (o = drv_state_at(st, DRV_K_AUDIT, k)) &&
                             strncmp(o->key, cut, 13) < 0;)
        k++;
    if (k)
        drv_state_del_first(st, DRV_K_AUDIT, k);
}

/* A string member; ASCII ones without jansson's UTF-8 check (it takes
 * the others). 0, -1 when v is NULL or jansson refused it. */
static int set_str(json_t *o, const char *k, const char *v)
{
    if (!v)
        return -1;
    size_t n = 0;
    while (v[n] && (unsigned char)v[n] < 0x80)
        n++;
    json_t *s = v[n] ? json_string(v) : json_stringn_nocheck(v, n);
    return json_object_set_new_nocheck(o, k, s);
}

/* The entry's spec: what json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s,
 * s:s, s:i, s:s}", ...) makes (NULL where it would fail: a string that is
 * not UTF-8), at about half its cost (no format to parse). */
static json_t *entry(const char *key, const char *at, int64_t now, const char *user,
                     const char *token, const char *method, const char *path, const char *kind,
                     int status, const char *remote)
{
    json_t *o = json_object();
    if (!o || set_str(o, "id", key) < 0 || set_str(o, "at", at) < 0 ||
        json_object_set_new_nocheck(o, "at_ms", json_integer(now)) < 0 ||
        set_str(o, "user", user) < 0 || set_str(o, "token", token) < 0 ||
        set_str(o, "method", method) < 0 || set_str(o, "path", path) < 0 ||
        set_str(o, "kind", kind) < 0 ||
        json_object_set_new_nocheck(o, "status", json_integer(status)) < 0 ||
        set_str(o, "remote", remote) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

void drv_audit_add(drv_audit_t *a, const char *user, const char *token_id, const char *method,
                   const char *path, int status, const char *remote)
{
    if (!a)
        return;
    int64_t now = drv_now_ms();
    char key[40], at[40], kind[64];
    snprintf(key, sizeof key, "%013lld-%08x", (long long)now,
             atomic_fetch_add(&a->counter, 1) & 0xffffffffu);
    drv_rfc3339(now / 1000, at, sizeof at);
    char p[513];   /* printable ASCII only (and bounded): a path may hold any byte */
    size_t n = 0;
    for (; path[n] && n < sizeof p - 1; n++)
        p[n] = path[n] > 0x20 && path[n] < 0x7f ? path[n] : '?';
    p[n] = '\0';
    path_kind(p, kind, sizeof kind);
    json_t *spec = entry(key, at, now, user ? user : "", token_id ? token_id : "", method, p,
                         kind, status, remote && *remote ? remote : "");
    if (!spec)
        return;
    drv_obj_t *o = drv_obj_new(DRV_K_AUDIT, key, user && *user ? user : "-", key, spec, NULL);
    o->created_at = o->updated_at = now / 1000;
    o->rv = 1;
    drv_obj_prepare(o);   /* its JSON before the lock: the put only indexes and queues */
    drv_state_wrlock(a->st);
    drv_state_put(a->st, o);
    trim(a, now);
    drv_state_unlock(a->st);
}

static bool matches(const json_t *e, const drv_audit_query_t *q)
{
    const char *u = json_string_value(json_object_get(e, "user"));
    const char *k = json_string_value(json_object_get(e, "kind"));
    return (!q->user || (u && strcmp(u, q->user) == 0)) &&
           (!q->kind || (k && strcmp(k, q->kind) == 0)) &&
           json_integer_value(json_object_get(e, "at_ms")) >= q->since_ms;
}

json_t *drv_audit_list(drv_audit_t *a, const drv_audit_query_t *q, drv_error_t *err)
{
    json_t *items = json_array();
    if (!a)
        return json_pack("{s:o}", "items", items);
    const char *page = q->page_token;
    if (page && (strlen(page) != 22 || page[13] != '-')) {
        json_decref(items);
        drv_err_invalid(err, "page_token", "page_token is not one this log handed out");
        return NULL;
    }
    char last[40] = "";
    bool more = false;
    drv_state_rdlock(a->st);
    /* the first entry below page (or the newest), walking back in time */
    size_t i = page ? drv_state_lower_bound(a->st, DRV_K_AUDIT, page)
                    : drv_state_count(a->st, DRV_K_AUDIT);
    while (i-- > 0) {
        const drv_obj_t *o = drv_state_at(a->st, DRV_K_AUDIT, i);
        if (json_integer_value(json_object_get(o->spec, "at_ms")) < q->since_ms)
            break;   /* older ones are older still */
        if (!matches(o->spec, q))
            continue;
        if (json_array_size(items) == q->limit) {
            more = true;
            break;
        }
        json_array_append_new(items, json_deep_copy(o->spec));
        snprintf(last, sizeof last, "%s", o->key);
    }
    drv_state_unlock(a->st);
    json_t *doc = json_pack("{s:o}", "items", items);
    if (more)
        json_object_set_new(doc, "next_page_token", json_string(last));
    return doc;
}
