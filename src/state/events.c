/* events.c — see events.h. A ring buffer of fixed-size records. */
#include "state/events.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

typedef struct event {
    int64_t at_ms;
    char owner[64], kind[16], id[128], type[32], reason[320];
} event_t;

struct drv_events {
    pthread_mutex_t mu;
    event_t *ring;
    size_t cap, head, n;       /* head: next slot to write */
};

drv_events_t *drv_events_create(size_t capacity)
{
    drv_events_t *ev = calloc(1, sizeof *ev);
    if (!ev)
        return NULL;
    ev->cap = capacity ? capacity : 1;
    ev->ring = calloc(ev->cap, sizeof *ev->ring);
    if (!ev->ring) {
        free(ev);
        return NULL;
    }
    pthread_mutex_init(&ev->mu, NULL);
    return ev;
}

void drv_events_destroy(drv_events_t *ev)
{
    if (!ev)
        return;
    pthread_mutex_destroy(&ev->mu);
    free(ev->ring);
    free(ev);
}

void drv_events_add(drv_events_t *ev, const char *owner, const char *kind, const char *id,
                    const char *type, const char *fmt, ...)
{
    if (!ev)
        return;
    event_t e;
    memset(&e, 0, sizeof e);
    e.at_ms = drv_now_ms();
    snprintf(e.owner, sizeof e.owner, "%s", owner);
    snprintf(e.kind, sizeof e.kind, "%s", kind);
    snprintf(e.id, sizeof e.id, "%s", id);
    snprintf(e.type, sizeof e.type, "%s", type);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.reason, sizeof e.reason, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&ev->mu);
    ev->ring[ev->head] = e;
    ev->head = (ev->head + 1) % ev->cap;
    if (ev->n < ev->cap)
        ev->n++;
    pthread_mutex_unlock(&ev->mu);
}

/* Whether e is about cluster c: the cluster, or one of its nodepools. */
static bool in_cluster(const event_t *e, const char *c)
{
    size_t n = strlen(c);
    if (strcmp(e->kind, "cluster") == 0)
        return strcmp(e->id, c) == 0;
    return strcmp(e->kind, "nodepool") == 0 && strncmp(e->id, c, n) == 0 && e->id[n] == '/';
}

json_t *drv_events_list(drv_events_t *ev, const char *owner, const char *kind, const char *id,
                        const char *cluster, size_t limit)
{
    json_t *out = json_array();
    if (!ev)
        return out;
    pthread_mutex_lock(&ev->mu);
    /* newest first to apply the limit, then reversed */
    for (size_t k = 0; k < ev->n && json_array_size(out) < limit; k++) {
        const event_t *e = &ev->ring[(ev->head + ev->cap - 1 - k) % ev->cap];
        if ((owner && strcmp(e->owner, owner) != 0) || (kind && strcmp(e->kind, kind) != 0) ||
            (id && strcmp(e->id, id) != 0) || (cluster && !in_cluster(e, cluster)))
            continue;
        char ts[32];
        drv_rfc3339(e->at_ms / 1000, ts, sizeof ts);
        json_array_insert_new(out, 0,
                              json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "time", ts, "owner",
                                        e->owner, "kind", e->kind, "object", e->id, "type",
                                        e->type, "reason", e->reason));
    }
    pthread_mutex_unlock(&ev->mu);
    return out;
}
