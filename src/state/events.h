/* events.h — what the controller decided and why: a bounded in-memory log
 * of events (scale up/down, nodes ready/lost, ...), newest last, read by
 * GET /v1/events and `drover events`. Soft state: a restart starts empty.
 * Thread-safe: its own mutex, held for a copy only (callers may hold the
 * state lock). */
#ifndef DRV_EVENTS_H
#define DRV_EVENTS_H

#include <jansson.h>
#include <stdint.h>

typedef struct drv_events drv_events_t;

drv_events_t *drv_events_create(size_t capacity);
void drv_events_destroy(drv_events_t *ev);

/* Record one event: object "kind/id" of owner, type like "scale_up". */
void drv_events_add(drv_events_t *ev, const char *owner, const char *kind, const char *id,
                    const char *type, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Events of owner (NULL: everyone's), optionally of one object kind and id
 * (NULL: any) and of one cluster (NULL: any; the cluster itself and its
 * nodepools, whose ids are CLUSTER/NODEPOOL), at most limit (the newest),
 * oldest first: a new JSON array. */
json_t *drv_events_list(drv_events_t *ev, const char *owner, const char *kind, const char *id,
                        const char *cluster, size_t limit);

#endif
