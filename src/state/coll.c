/* coll.c — see coll.h. A chunk that fills up splits in two halves; one
 * that empties goes; the starts after a change are adjusted in one pass
 * (a few hundred chunks for a hundred thousand objects). */
#include "state/coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/state.h"

static void oom(void)
{
    fprintf(stderr, "drover: out of memory\n");
    abort();
}

static const char *key_of(const drv_coll_t *c, const drv_obj_t *o)
{
    return c->by_hash ? o->hash : o->key;
}

void drv_coll_free(drv_coll_t *c)
{
    for (size_t k = 0; k < c->nc; k++)
        free(c->c[k].v);
    free(c->c);
    free(c->start);
    bool by_hash = c->by_hash;
    memset(c, 0, sizeof *c);
    c->by_hash = by_hash;
}

/* The chunk holding position i < n: the last k with start[k] <= i. */
static size_t chunk_of(const drv_coll_t *c, size_t i)
{
    size_t lo = 0, hi = c->nc;   /* start[lo] <= i < start[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->start[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

drv_obj_t *drv_coll_at(const drv_coll_t *c, size_t i)
{
    if (i >= c->n)
        return NULL;
    size_t k = chunk_of(c, i);
    return c->c[k].v[i - c->start[k]];
}

size_t drv_coll_lower_bound(const drv_coll_t *c, const char *key)
{
    /* the first chunk whose last key >= key, then within it */
    size_t lo = 0, hi = c->nc;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const drv_coll_chunk_t *ch = &c->c[mid];
        if (strcmp(key_of(c, ch->v[ch->n - 1]), key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == c->nc)
        return c->n;
    const drv_coll_chunk_t *ch = &c->c[lo];
    size_t a = 0, b = ch->n;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (strcmp(key_of(c, ch->v[mid]), key) < 0)
            a = mid + 1;
        else
            b = mid;
    }
    return c->start[lo] + a;
}

drv_obj_t *drv_coll_find(const drv_coll_t *c, const char *key, size_t *pos)
{
    size_t i = drv_coll_lower_bound(c, key);
    if (pos)
        *pos = i;
    drv_obj_t *o = drv_coll_at(c, i);
    return o && strcmp(key_of(c, o), key) == 0 ? o : NULL;
}

void drv_coll_set(drv_coll_t *c, size_t i, drv_obj_t *o)
{
    size_t k = chunk_of(c, i);
    c->c[k].v[i - c->start[k]] = o;
}

static void restart_from(drv_coll_t *c, size_t k)
{
    for (; k < c->nc; k++)
        c->start[k] = k ? c->start[k - 1] + c->c[k - 1].n : 0;
}

/* A new empty chunk at k (the ones from k on move up). */
static void chunk_insert(drv_coll_t *c, size_t k)
{
    if (c->nc == c->capc) {
        size_t cap = c->capc ? c->capc * 2 : 4;
        drv_coll_chunk_t *nc = realloc(c->c, cap * sizeof *nc);
        if (!nc)
            oom();
        c->c = nc;
        size_t *ns = realloc(c->start, cap * sizeof *ns);
        if (!ns)
            oom();
        c->start = ns;
        c->capc = cap;
    }
    memmove(&c->c[k + 1], &c->c[k], (c->nc - k) * sizeof *c->c);
    memmove(&c->start[k + 1], &c->start[k], (c->nc - k) * sizeof *c->start);
    c->c[k].v = malloc(DRV_COLL_CHUNK * sizeof *c->c[k].v);
    if (!c->c[k].v)
        oom();
    c->c[k].n = 0;
    c->nc++;
}

static void chunk_remove(drv_coll_t *c, size_t k)
{
    free(c->c[k].v);
    memmove(&c->c[k], &c->c[k + 1], (c->nc - k - 1) * sizeof *c->c);
    memmove(&c->start[k], &c->start[k + 1], (c->nc - k - 1) * sizeof *c->start);
    c->nc--;
}

void drv_coll_insert(drv_coll_t *c, size_t i, drv_obj_t *o)
{
    if (c->nc == 0) {
        chunk_insert(c, 0);
        c->start[0] = 0;
    }
    /* position n goes at the end of the last chunk; any other into the
     * chunk holding it (before what is there) */
    size_t k = i == c->n ? c->nc - 1 : chunk_of(c, i);
    size_t off = i - c->start[k];
    if (c->c[k].n == DRV_COLL_CHUNK) {   /* split: the upper half to a new chunk */
        chunk_insert(c, k + 1);
        size_t half = DRV_COLL_CHUNK / 2;
        memcpy(c->c[k + 1].v, c->c[k].v + half, (DRV_COLL_CHUNK - half) * sizeof *c->c[k].v);
        c->c[k + 1].n = DRV_COLL_CHUNK - half;
        c->c[k].n = half;
        c->start[k + 1] = c->start[k] + half;
        if (off > half) {   /* (at half exactly: the end of the lower one) */
            k++;
            off -= half;
        }
    }
    drv_coll_chunk_t *ch = &c->c[k];
    memmove(&ch->v[off + 1], &ch->v[off], (ch->n - off) * sizeof *ch->v);
    ch->v[off] = o;
    ch->n++;
    c->n++;
    for (size_t j = k + 1; j < c->nc; j++)
        c->start[j]++;
}

void drv_coll_remove(drv_coll_t *c, size_t i)
{
    size_t k = chunk_of(c, i);
    drv_coll_chunk_t *ch = &c->c[k];
    size_t off = i - c->start[k];
    memmove(&ch->v[off], &ch->v[off + 1], (ch->n - off - 1) * sizeof *ch->v);
    ch->n--;
    c->n--;
    if (ch->n == 0) {
        chunk_remove(c, k);
        restart_from(c, k);
        return;
    }
    for (size_t j = k + 1; j < c->nc; j++)
        c->start[j]--;
}

void drv_coll_remove_first(drv_coll_t *c, size_t k)
{
    if (k == 0)
        return;
    size_t whole = 0;   /* chunks wholly inside [0, k) */
    while (whole < c->nc && c->start[whole] + c->c[whole].n <= k)
        whole++;
    for (size_t j = 0; j < whole; j++)
        free(c->c[j].v);
    memmove(&c->c[0], &c->c[whole], (c->nc - whole) * sizeof *c->c);
    memmove(&c->start[0], &c->start[whole], (c->nc - whole) * sizeof *c->start);
    c->nc -= whole;
    if (c->nc) {   /* what is left of [0, k) is at the front of the first chunk */
        size_t part = k - c->start[0];
        drv_coll_chunk_t *ch = &c->c[0];
        memmove(&ch->v[0], &ch->v[part], (ch->n - part) * sizeof *ch->v);
        ch->n -= part;
    }
    c->n -= k;
    restart_from(c, 0);
}
