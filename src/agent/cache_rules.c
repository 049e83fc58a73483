/* cache_rules.c — see cache_rules.h: sidecar and index formats, the LRU
 * choice, the ranking of peers per chunk and the plan of one try. Pure. */
#include "agent/cache_rules.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int drv_cache_sidecar_header(char *buf, size_t n, uint64_t size, uint64_t chunk_size,
                             size_t nchunks)
{
    return snprintf(buf, n, "drover-chunks 1 %" PRIu64 " %" PRIu64 " %zu\n", size, chunk_size,
                    nchunks);
}

/* A decimal without sign or leading zeros, in [s, e). */
static int dec(const char *s, const char *e, uint64_t *v)
{
    if (s == e || e - s > 19 || (*s == '0' && e - s > 1))
        return -1;
    uint64_t x = 0;
    for (; s < e; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    *v = x;
    return 0;
}

int drv_cache_sidecar_parse(const char *text, size_t len, uint64_t size, uint64_t chunk_size,
                            size_t nchunks, unsigned char *done, size_t *ndone)
{
    char hdr[128];
    int hl = drv_cache_sidecar_header(hdr, sizeof hdr, size, chunk_size, nchunks);
    memset(done, 0, nchunks);
    *ndone = 0;
    if (len < (size_t)hl || memcmp(text, hdr, (size_t)hl) != 0)
        return -1;
    const char *p = text + hl, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;   /* a torn last line */
        uint64_t i;
        if (dec(p, nl, &i) < 0 || i >= nchunks)
            return memset(done, 0, nchunks), *ndone = 0, -1;
        if (!done[i])
            done[i] = 1, (*ndone)++;
        p = nl + 1;
    }
    return 0;
}

static int by_age(const drv_cache_lru_item_t *x, const drv_cache_lru_item_t *y)
{
    if (x->last_use_ms != y->last_use_ms)
        return x->last_use_ms < y->last_use_ms ? -1 : 1;
    return strcmp(x->hex, y->hex);
}

int drv_cache_lru_pick(const drv_cache_lru_item_t *items, size_t n, uint64_t need,
                       size_t *victims, size_t *nv)
{
    size_t k = 0;
    *nv = 0;
    if (need == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (items[i].evictable)
            victims[k++] = i;
    /* insertion order by age: n is the number of blobs on one node */
    for (size_t i = 1; i < k; i++)
        for (size_t j = i; j > 0; j--) {
            if (by_age(&items[victims[j - 1]], &items[victims[j]]) <= 0)
                break;
            size_t t = victims[j];
            victims[j] = victims[j - 1], victims[j - 1] = t;
        }
    uint64_t freed = 0;
    size_t used = 0;
    while (used < k && freed < need)
        freed += items[victims[used++]].size;
    if (freed < need)
        return -1;
    *nv = used;
    return 0;
}

int drv_cache_index_line(const char *line, char hex[65], uint64_t *size, int64_t *last)
{
    const char *sp1 = strchr(line, ' ');
    if (!sp1 || sp1 - line != 64)
        return -1;
    for (int i = 0; i < 64; i++)
        if (!strchr("0123456789abcdef", line[i]) || !line[i])
            return -1;
    const char *sp2 = strchr(sp1 + 1, ' ');
    if (!sp2)
        return -1;
    const char *e = sp2 + 1 + strcspn(sp2 + 1, "\n");
    uint64_t l;
    if (dec(sp1 + 1, sp2, size) < 0 || dec(sp2 + 1, e, &l) < 0 || l > INT64_MAX)
        return -1;
    memcpy(hex, line, 64);
    hex[64] = 0;
    *last = (int64_t)l;
    return 0;
}

static uint64_t score(const char *id, const char *hex, size_t chunk)
{
    uint64_t h = 1469598103934665603ULL;
    char tail[96];
    snprintf(tail, sizeof tail, "\n%.64s\n%zu", hex, chunk);
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    for (const unsigned char *p = (const unsigned char *)tail; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    /* splitmix64's finalizer: FNV's low bits alone are poorly spread */
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    return h ^ (h >> 31);
}

void drv_cache_rank(const char *const *ids, size_t n, const char *hex, size_t chunk,
                    size_t *order)
{
    uint64_t sc[n + 1];
    for (size_t i = 0; i < n; i++)
        sc[i] = score(ids[i], hex, chunk), order[i] = i;
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0; j--) {
            size_t a = order[j - 1], b = order[j];
            if (sc[a] > sc[b] || (sc[a] == sc[b] && a < b))
                break;
            order[j - 1] = b, order[j] = a;
        }
}

size_t drv_cache_chunk_plan(const size_t *rank, size_t n, const bool *banned, size_t self,
                            bool retry, bool waited_out, size_t *srcs, bool *origin)
{
    size_t owner = SIZE_MAX, k = 0;
    for (size_t i = 0; i < n && owner == SIZE_MAX; i++)
        if (rank[i] == self || !banned[rank[i]])
            owner = rank[i];
    if (!retry) {
        for (size_t i = 0; i < n; i++)
            if (rank[i] != self && !banned[rank[i]])
                srcs[k++] = rank[i];
    } else if (owner != SIZE_MAX && owner != self) {
        srcs[k++] = owner;
    }
    *origin = owner == SIZE_MAX || owner == self || self == SIZE_MAX || waited_out;
    return k;
}
