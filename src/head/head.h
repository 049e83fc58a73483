/* head.h — the head node's context: everything a handler may reach.
 * Created once by droverd (or a unit test), destroyed on shutdown. */
#ifndef DRV_HEAD_H
#define DRV_HEAD_H

#include "catalog/catalog.h"

struct drv_state;
struct drv_store;

typedef struct drv_head {
    drv_catalog_t *catalog;      /* immutable, lock-free reads */
    struct drv_state *state;     /* in-memory objects; owns its lock */
    struct drv_store *store;     /* durable store + group-commit writer */
    char data_dir[512];
} drv_head_t;

#endif
