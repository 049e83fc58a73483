/* sizemap.c — pointer/handle -> charged bytes, for frees (see sizemap.h).
 *
 * Invariants (under m->mu): cap is 0 or a power of two; count + tombs < cap
 * * 7/10 after every put; total is the sum of the live sizes; a key appears
 * in at most one live slot, and every live key is reachable by probing from
 * its hash without crossing an empty slot.
 */
#include "gpushare/sizemap.h"

#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MIN_CAP 256

static inline uint64_t mix(uint64_t x)   /* splitmix64's finalizer */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

void drv_gs_sizemap_init(drv_gs_sizemap_t *m)
{
    assert(m);
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void drv_gs_sizemap_fini(drv_gs_sizemap_t *m)
{
    if (!m)
        return;
    free(m->slots);
    pthread_mutex_destroy(&m->mu);
    memset(m, 0, sizeof *m);
}

/* Index of key's live slot, or -1. */
static ptrdiff_t find(const drv_gs_sizemap_t *m, uint64_t key)
{
    if (m->cap == 0)
        return -1;
    size_t mask = m->cap - 1;
    for (size_t i = mix(key) & mask, n = 0; n < m->cap; i = (i + 1) & mask, n++) {
        const struct drv_gs_entry *e = &m->slots[i];
        if (e->size == 0)
            return -1;
        if (e->size != DRV_GS_TOMB && e->key == key)
            return (ptrdiff_t)i;
    }
    return -1;
}

/* Rebuild into a table of new_cap slots (drops tombstones). 0 / -1. */
static int rehash(drv_gs_sizemap_t *m, size_t new_cap)
{
    struct drv_gs_entry *ns = calloc(new_cap, sizeof *ns);
    if (!ns)
        return -1;
    size_t mask = new_cap - 1;
    for (size_t i = 0; i < m->cap; i++) {
        const struct drv_gs_entry *e = &m->slots[i];
        if (e->size == 0 || e->size == DRV_GS_TOMB)
            continue;
        size_t j = mix(e->key) & mask;
        while (ns[j].size != 0)
            j = (j + 1) & mask;
        ns[j] = *e;
    }
    free(m->slots);
    m->slots = ns;
    m->cap = new_cap;
    m->tombs = 0;
    return 0;
}

int drv_gs_sizemap_put(drv_gs_sizemap_t *m, uint64_t key, uint64_t size, uint64_t *old)
{
    assert(m && size > 0 && size < DRV_GS_TOMB);
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    ptrdiff_t at = find(m, key);
    if (at >= 0) {
        if (old)
            *old = m->slots[at].size;
        m->total = m->total - m->slots[at].size + size;
        m->slots[at].size = size;
        goto out;
    }
    if (old)
        *old = 0;
    if ((m->count + m->tombs + 1) * 10 >= m->cap * 7) {
        size_t want = MIN_CAP;
        while (want * 7 <= (m->count + 1) * 20)   /* live entries at most 35 % after */
            want *= 2;
        if (rehash(m, want) < 0) {
            rc = -1;
            goto out;
        }
    }
    size_t mask = m->cap - 1, i = mix(key) & mask;
    while (m->slots[i].size != 0 && m->slots[i].size != DRV_GS_TOMB)
        i = (i + 1) & mask;
    if (m->slots[i].size == DRV_GS_TOMB)
        m->tombs--;
    m->slots[i].key = key;
    m->slots[i].size = size;
    m->count++;
    m->total += size;
out:
    pthread_mutex_unlock(&m->mu);
    return rc;
}

uint64_t drv_gs_sizemap_take(drv_gs_sizemap_t *m, uint64_t key)
{
    assert(m);
    pthread_mutex_lock(&m->mu);
    uint64_t size = 0;
    ptrdiff_t at = find(m, key);
    if (at >= 0) {
        size = m->slots[at].size;
        m->slots[at].size = DRV_GS_TOMB;
        m->count--;
        m->tombs++;
        m->total -= size;
        if (m->count == 0 && m->tombs > 0) {   /* cheap full reset */
            memset(m->slots, 0, m->cap * sizeof *m->slots);
            m->tombs = 0;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return size;
}

uint64_t drv_gs_sizemap_get(drv_gs_sizemap_t *m, uint64_t key)
{
    assert(m);
    pthread_mutex_lock(&m->mu);
    ptrdiff_t at = find(m, key);
    uint64_t size = at >= 0 ? m->slots[at].size : 0;
    pthread_mutex_unlock(&m->mu);
    return size;
}

size_t drv_gs_sizemap_count(drv_gs_sizemap_t *m)
{
    pthread_mutex_lock(&m->mu);
    size_t n = m->count;
    pthread_mutex_unlock(&m->mu);
    return n;
}

uint64_t drv_gs_sizemap_total(drv_gs_sizemap_t *m)
{
    pthread_mutex_lock(&m->mu);
    uint64_t t = m->total;
    pthread_mutex_unlock(&m->mu);
    return t;
}

void drv_gs_sizemap_reset_after_fork(drv_gs_sizemap_t *m)
{
    /* The mutex may have been held by a thread that does not exist here. */
    free(m->slots);
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}
