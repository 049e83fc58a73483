/* coll.h — a sorted collection of object pointers (state.c's per-kind
 * collections and its secret-hash index), addressed by position like a
 * sorted array: O(log n) lookup by key, position i in O(log(n / 256)), and
 * ordered, prefix-bounded listing. It is stored as a list of chunks of at
 * most DRV_COLL_CHUNK pointers with each chunk's starting position, so an
 * insert or a removal moves at most one chunk's pointers (and adjusts the
 * starts after it) instead of everything behind it: a create of a random
 * key into 50,000 objects used to move 200 KB. The collection compares
 * keys, never owns the objects. */
#ifndef DRV_STATE_COLL_H
#define DRV_STATE_COLL_H

#include <stdbool.h>
#include <stddef.h>

#define DRV_COLL_CHUNK 512

struct drv_obj;

typedef struct drv_coll_chunk {
    struct drv_obj **v;   /* DRV_COLL_CHUNK slots, n in use; never empty */
    size_t n;
} drv_coll_chunk_t;

typedef struct drv_coll {
    drv_coll_chunk_t *c;
    size_t *start;        /* start[k]: position of c[k].v[0] */
    size_t nc, capc;      /* chunks */
    size_t n;             /* objects */
    bool by_hash;         /* ordered by obj->hash, else by obj->key */
} drv_coll_t;

void drv_coll_free(drv_coll_t *c);   /* the chunks, not the objects */
/* First position whose key >= key (n when none). */
size_t drv_coll_lower_bound(const drv_coll_t *c, const char *key);
/* The object at position i (NULL when i >= n). */
struct drv_obj *drv_coll_at(const drv_coll_t *c, size_t i);
/* The object of key (NULL when absent); *pos gets its lower bound. */
struct drv_obj *drv_coll_find(const drv_coll_t *c, const char *key, size_t *pos);
void drv_coll_set(drv_coll_t *c, size_t i, struct drv_obj *o);   /* replace at i < n */
void drv_coll_insert(drv_coll_t *c, size_t i, struct drv_obj *o); /* i <= n; aborts on OOM */
void drv_coll_remove(drv_coll_t *c, size_t i);                    /* i < n */
/* Remove positions [0, k) (k <= n). */
void drv_coll_remove_first(drv_coll_t *c, size_t k);

#endif
