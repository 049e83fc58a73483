/* sizemap.h — what each live allocation of this process was charged, so a
 * free can give the same amount back (libdrover-gpushare.so).
 *
 * A map from a 64-bit key (a device pointer, a cuMemCreate handle, a CUDA
 * array) to the bytes charged for it: open addressing with linear probing
 * and tombstones in a power-of-two table that grows (and is rebuilt without
 * tombstones) past 70 % load. Sizes are never 0 (nothing is charged for an
 * empty allocation), so size 0 marks an empty slot.
 *
 * Threads: every call takes the map's mutex; any thread may call. After
 * fork() the child calls drv_gs_sizemap_reset_after_fork(): the parent's
 * allocations are not the child's (CUDA state does not survive fork).
 * Memory comes from calloc/free; a failed growth leaves the map as it was
 * (put returns -1 and the caller keeps the bytes charged: conservative).
 */
#ifndef DRV_GPUSHARE_SIZEMAP_H
#define DRV_GPUSHARE_SIZEMAP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct drv_gs_sizemap {
    pthread_mutex_t mu;
    struct drv_gs_entry {
        uint64_t key;
        uint64_t size;          /* 0: empty; DRV_GS_TOMB: deleted */
    } *slots;
    size_t cap;                 /* 0 or a power of two */
    size_t count;               /* live entries */
    size_t tombs;
    uint64_t total;             /* sum of live sizes */
} drv_gs_sizemap_t;

#define DRV_GS_TOMB UINT64_MAX

/* An empty map (no allocation until the first put). */
void drv_gs_sizemap_init(drv_gs_sizemap_t *m);
void drv_gs_sizemap_fini(drv_gs_sizemap_t *m);

/* Record key -> size (size in 1..2^63). A key already present gets the new
 * size; *old (NULL-able) receives the size it had (0 when it was absent).
 * 0, or -1 when the table could not grow (nothing changed). */
int drv_gs_sizemap_put(drv_gs_sizemap_t *m, uint64_t key, uint64_t size, uint64_t *old);

/* Remove key; returns its size, 0 when absent. */
uint64_t drv_gs_sizemap_take(drv_gs_sizemap_t *m, uint64_t key);

/* Size of key without removing it, 0 when absent. */
uint64_t drv_gs_sizemap_get(drv_gs_sizemap_t *m, uint64_t key);

size_t drv_gs_sizemap_count(drv_gs_sizemap_t *m);
uint64_t drv_gs_sizemap_total(drv_gs_sizemap_t *m);

/* In a forked child: a fresh mutex and no entries (the table is freed). */
void drv_gs_sizemap_reset_after_fork(drv_gs_sizemap_t *m);

#endif
