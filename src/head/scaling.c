/* scaling.c — see scaling.h. The autoscalers' memory lives in two sorted
 * arrays keyed by object key; an entry not used in a full pass (its
 * deployment or nodepool is gone, or not scaled) is dropped at the end of
 * that pass, so a re-created object starts with fresh memory. */
#include "head/scaling.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoscale/nodes.h"
#include "autoscale/replicas.h"
#include "common/log.h"
#include "common/util.h"
#include "head/events.h"
#include "head/nodes.h"

typedef struct ras_entry {
    char key[256];
    drv_ras_state_t st;
    bool seen;
} ras_entry_t;

typedef struct nas_entry {
    char key[256];
    drv_nas_state_t st;
    bool seen;
} nas_entry_t;

struct drv_scaling {
    ras_entry_t *ras;
    size_t n_ras, cap_ras;
    nas_entry_t *nas;
    size_t n_nas, cap_nas;
    drv_nas_decision_t decision;      /* ~40 KiB: not on the stack */
    drv_nas_node_t nodes[4096];       /* one nodepool's nodes, per decision */
    drv_obj_t *objs[4096];
};

static const char *sget(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

drv_scaling_t *drv_scaling_create(void)
{
    return calloc(1, sizeof(drv_scaling_t));
}

void drv_scaling_destroy(drv_scaling_t *s)
{
    if (!s)
        return;
    free(s->ras);
    free(s->nas);
    free(s);
}

/* Find or add the entry for key in a sorted array of elements of `size`
 * bytes whose first member is the key. */
static void *entry(void **arr, size_t *n, size_t *cap, size_t size, const char *key)
{
    size_t lo = 0, hi = *n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp((char *)*arr + mid * size, key);
        if (c == 0)
            return (char *)*arr + mid * size;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        void *na = realloc(*arr, ncap * size);
        if (!na)
            abort();
        *arr = na;
        *cap = ncap;
    }
    char *at = (char *)*arr + lo * size;
    memmove(at + size, at, (*n - lo) * size);
    memset(at, 0, size);
    snprintf(at, 256, "%s", key);
    (*n)++;
    return at;
}

/* Drop the entries not marked seen since the last call, unmark the rest. */
static void prune(void *arr, size_t *n, size_t size, size_t seen_off)
{
    size_t j = 0;
    for (size_t i = 0; i < *n; i++) {
        char *e = (char *)arr + i * size;
        bool *seen = (bool *)(e + seen_off);
        if (!*seen)
            continue;
        *seen = false;
        if (j != i)
            memcpy((char *)arr + j * size, e, size);
        j++;
    }
    *n = j;
}

int64_t drv_scaling_replicas(drv_scaling_t *s, drv_head_t *head, const drv_obj_t *dep,
                             int64_t now_ms,
                             double load, bool demand, int current, int starting,
                             int ready, char *event, size_t event_len)
{
    ras_entry_t *e = entry((void **)&s->ras, &s->n_ras, &s->cap_ras, sizeof *e, dep->key);
    e->seen = true;
    drv_ras_config_t cfg;
    drv_ras_config_from_json(json_object_get(dep->spec, "autoscale"), &cfg);
    drv_ras_observe(&e->st, now_ms, load);
    drv_ras_decision_t d;
    drv_error_t err;
    event[0] = '\0';
    if (drv_ras_decide(&cfg, &e->st, now_ms, current, starting, ready, demand, &d, &err) < 0) {
        drv_warn("deployment %s: autoscaler: %s", dep->key, err.message);
        return cfg.min_replicas;
    }
    if (d.changed && d.desired != current) {
        snprintf(event, event_len, "%s: %s", d.kind, d.reason);
        drv_info("deployment %s: %d -> %d replicas (%s)", dep->key, current, d.desired,
                 event);
        drv_events_add(head->events, dep->owner, "deployment", dep->id, d.kind,
                       "%d -> %d replicas: %s", current, d.desired, d.reason);
    }
    return d.desired;
}

/* The nodes of nodepool np, as the node autoscaler sees them. */
static size_t collect_nodes(drv_head_t *head, const drv_obj_t *np, drv_nas_node_t *out,
                            size_t max, drv_obj_t **objs, int64_t now_ms)
{
    drv_state_t *st = head->state;
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", np->owner);
    size_t n = 0;
    for (size_t i = drv_state_lower_bound(st, DRV_K_NODE, prefix);
         i < drv_state_count(st, DRV_K_NODE) && n < max; i++) {
        drv_obj_t *nd = drv_state_at(st, DRV_K_NODE, i);
        if (strncmp(nd->key, prefix, strlen(prefix)) != 0)
            break;
        if (strcmp(sget(nd->spec, "cluster"), sget(np->spec, "cluster")) != 0 ||
            strcmp(sget(nd->spec, "nodepool"), np->id) != 0)
            continue;
        drv_nas_node_t *x = &out[n];
        memset(x, 0, sizeof *x);
        x->id = nd->id;
        x->type = drv_catalog_instance_type(head->catalog, sget(nd->spec, "instance_type"));
        x->capacity = sget(nd->spec, "capacity_type") &&
                              strcmp(sget(nd->spec, "capacity_type"), "spot") == 0
                          ? DRV_CAPACITY_SPOT
                          : DRV_CAPACITY_ON_DEMAND;
        x->created_ms = nd->created_at * 1000;
        bool gone = json_is_true(json_object_get(nd->spec, "terminating")) ||
                    json_is_true(json_object_get(nd->spec, "draining")) ||
                    nd->soft.node_state == DRV_NODE_LOST;
        x->state = gone ? DRV_NAS_NODE_GONE
                   : nd->soft.node_state == DRV_NODE_READY ? DRV_NAS_NODE_READY
                   : nd->soft.node_state == DRV_NODE_NOT_READY ? DRV_NAS_NODE_NOT_READY
                                                             : DRV_NAS_NODE_PROVISIONING;
        x->empty = nd->soft.empty_since_ms > 0 && x->state == DRV_NAS_NODE_READY;
        x->empty_since_ms = nd->soft.empty_since_ms;
        objs[n++] = nd;
    }
    (void)now_ms;
    return n;
}

/* Which nodes hold no replica: keep each node's empty_since up to date. */
static void track_empty(drv_head_t *head, int64_t now_ms)
{
    drv_state_t *st = head->state;
    size_t nn = drv_state_count(st, DRV_K_NODE);
    bool *busy = calloc(nn ? nn : 1, sizeof *busy);
    for (size_t i = 0; i < drv_state_count(st, DRV_K_REPLICA); i++) {
        drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
        const char *node = sget(r->spec, "node");
        if (!node)
            continue;
        char key[160];
        snprintf(key, sizeof key, "%s/%s", r->owner, node);
        size_t ni = drv_state_lower_bound(st, DRV_K_NODE, key);
        if (ni < nn && strcmp(drv_state_at(st, DRV_K_NODE, ni)->key, key) == 0)
            busy[ni] = true;
    }
    for (size_t i = 0; i < nn; i++) {
        drv_obj_t *nd = drv_state_at(st, DRV_K_NODE, i);
        if (busy[i] || nd->soft.node_state != DRV_NODE_READY)
            nd->soft.empty_since_ms = 0;
        else if (!nd->soft.empty_since_ms)
            nd->soft.empty_since_ms = now_ms;
    }
    free(busy);
}

void drv_scaling_nodes(drv_scaling_t *s, drv_head_t *head, int64_t now_ms,
                       const drv_pending_t *pending, size_t n_pending, drv_launch_fn launch,
                       void *ctx)
{
    drv_state_t *st = head->state;
    track_empty(head, now_ms);
    drv_sched_request_t *reqs = calloc(n_pending ? n_pending : 1, sizeof *reqs);
    for (size_t p = 0; p < drv_state_count(st, DRV_K_NODEPOOL); p++) {
        drv_obj_t *np = drv_state_at(st, DRV_K_NODEPOOL, p);
        char ckey[192];
        snprintf(ckey, sizeof ckey, "%s/%s", np->owner, sget(np->spec, "cluster"));
        const drv_obj_t *cl = drv_state_get(st, DRV_K_CLUSTER, ckey);
        if (!cl)
            continue;
        const drv_provider_ops_t *ops = drv_provider_ops(sget(cl->spec, "provider"));
        if (!ops->provisions)
            continue;
        nas_entry_t *e = entry((void **)&s->nas, &s->n_nas, &s->cap_nas, sizeof *e, np->key);
        e->seen = true;
        const drv_instance_type_t *types[DRV_NAS_MAX_TYPES];
        drv_nas_config_t cfg;
        drv_error_t err;
        if (drv_nas_config_from_json(np->spec, head->catalog, types, DRV_NAS_MAX_TYPES, &cfg,
                                     &err) < 0) {
            drv_warn("nodepool %s: %s", np->key, err.message);
            continue;
        }
        size_t nr = 0;
        for (size_t i = 0; i < n_pending; i++)
            if (strcmp(pending[i].nodepool_key, np->key) == 0) {
                reqs[nr] = pending[i].req;
                reqs[nr].gpu_types = pending[i].types;
                nr++;
            }
        drv_nas_node_t *nodes = s->nodes;
        drv_obj_t **objs = s->objs;
        size_t nn = collect_nodes(head, np, nodes, sizeof s->nodes / sizeof s->nodes[0], objs,
                                  now_ms);
        drv_nas_decision_t *d = &s->decision;
        if (drv_nas_decide(&cfg, &e->st, now_ms, nodes, nn, reqs, nr, NULL, d, &err) < 0) {
            drv_warn("nodepool %s: node autoscaler: %s", np->key, err.message);
            continue;
        }
        for (size_t i = 0; i < d->n_events; i++)
            if (strcmp(d->events[i].kind, "scale_up") == 0 ||
                strcmp(d->events[i].kind, "scale_down") == 0 ||
                strcmp(d->events[i].kind, "provision_timeout") == 0 ||
                strcmp(d->events[i].kind, "fallback") == 0)
            {
                drv_info("nodepool %s: %s: %s", np->key, d->events[i].kind,
                         d->events[i].reason);
                char npid[160];
                snprintf(npid, sizeof npid, "%s/%s", sget(np->spec, "cluster"), np->id);
                drv_events_add(head->events, np->owner, "nodepool", npid, d->events[i].kind,
                               "%s", d->events[i].reason);
            }
        /* deletions first: they name indices into nodes[] */
        static const char *const term[] = {"terminating"};
        static const bool yes[] = {true};
        for (size_t i = 0; i < d->n_delete; i++)
            drv_node_set_flags(st, objs[d->del[i].node], term, yes, 1, NULL);
        for (size_t i = 0; i < d->n_create; i++) {
            for (int k = 0; k < d->create[i].count; k++) {
                char secret[96];
                uint64_t seq;
                drv_obj_t *n = drv_node_create(head, np, ops->name, d->create[i].type->id,
                                               drv_capacity_name(d->create[i].capacity),
                                               secret, &seq, &err);
                if (!n) {
                    drv_warn("nodepool %s: %s", np->key, err.message);
                    break;
                }
                drv_node_launch_t l;
                memset(&l, 0, sizeof l);
                snprintf(l.node_id, sizeof l.node_id, "%s", n->id);
                snprintf(l.owner, sizeof l.owner, "%s", n->owner);
                snprintf(l.secret, sizeof l.secret, "%s", secret);
                const drv_instance_type_t *it = d->create[i].type;
                if (it->gpu_count > 0)
                    snprintf(l.gpus, sizeof l.gpus, "%dx%s:%lld", it->gpu_count, it->gpu_type,
                             (long long)it->gpu_memory_mib);
                else
                    snprintf(l.gpus, sizeof l.gpus, "none");
                l.cpus = it->vcpus;
                l.memory_mib = (long long)it->memory_mib;
                launch(ctx, ops, &l);
            }
        }
        if (d->n_events) {
            const drv_nas_event_t *ev = &d->events[d->n_events - 1];
            json_t *status = np->status ? json_deep_copy(np->status) : json_object();
            json_object_set_new(status, "last_scale_event",
                                json_pack("{s:s, s:s}", "kind", ev->kind, "reason", ev->reason));
            if (json_equal(status, np->status))
                json_decref(status);
            else
                drv_state_set_status(st, np, status);
        }
    }
    free(reqs);
    /* the end of a full pass: forget deployments and nodepools it did not use */
    prune(s->ras, &s->n_ras, sizeof *s->ras, offsetof(ras_entry_t, seen));
    prune(s->nas, &s->n_nas, sizeof *s->nas, offsetof(nas_entry_t, seen));
}
