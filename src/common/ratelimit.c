/* ratelimit.c — see ratelimit.h: chained hash buckets over a fixed array
 * of cap entries; eviction scans for the least recently used (only when a
 * new address fails while the table is full). */
#include "common/ratelimit.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE ((size_t)-1)

typedef struct entry {
    char addr[48];        /* an IPv4 or IPv6 address in text */
    double tokens;
    int64_t at_ms;        /* when tokens was last brought up to date */
    size_t next;          /* the next entry of its bucket's chain, or NONE */
} entry_t;

struct drv_ratelimit {
    pthread_mutex_t mu;
    double rate, burst;
    size_t cap, n;        /* slots; slots in use */
    entry_t *e;
    size_t *buckets;      /* nb heads (entry indexes or NONE) */
    size_t nb;
};

drv_ratelimit_t *drv_ratelimit_create(double rate, double burst, size_t cap)
{
    if (!(rate > 0) || !(burst >= 1) || cap < 1)
        return NULL;
    drv_ratelimit_t *rl = calloc(1, sizeof *rl);
    if (!rl)
        return NULL;
    rl->rate = rate;
    rl->burst = burst;
    rl->cap = cap;
    rl->nb = 1;
    while (rl->nb < cap * 2)
        rl->nb *= 2;
    rl->e = calloc(cap, sizeof *rl->e);
    rl->buckets = malloc(rl->nb * sizeof *rl->buckets);
    if (!rl->e || !rl->buckets) {
        drv_ratelimit_destroy(rl);
        return NULL;
    }
    for (size_t i = 0; i < rl->nb; i++)
        rl->buckets[i] = NONE;
    pthread_mutex_init(&rl->mu, NULL);
    return rl;
}

void drv_ratelimit_destroy(drv_ratelimit_t *rl)
{
    if (!rl)
        return;
    if (rl->e && rl->buckets)
        pthread_mutex_destroy(&rl->mu);
    free(rl->e);
    free(rl->buckets);
    free(rl);
}

static size_t bucket_of(const drv_ratelimit_t *rl, const char *addr)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *s = addr; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (size_t)(h & (rl->nb - 1));
}

/* Take entry i out of its bucket's chain. */
static void unlink_entry(drv_ratelimit_t *rl, size_t i)
{
    size_t *p = &rl->buckets[bucket_of(rl, rl->e[i].addr)];
    while (*p != NONE && *p != i)
        p = &rl->e[*p].next;
    if (*p == i)
        *p = rl->e[i].next;
}

/* The slot for a new address: a free one, else the least recently used. */
static size_t take_slot(drv_ratelimit_t *rl)
{
    if (rl->n < rl->cap)
        return rl->n++;
    size_t lru = 0;
    for (size_t i = 1; i < rl->cap; i++)
        if (rl->e[i].at_ms < rl->e[lru].at_ms)
            lru = i;
    unlink_entry(rl, lru);
    return lru;
}

int drv_ratelimit_fail(drv_ratelimit_t *rl, const char *addr, int64_t now_ms,
                       int *retry_after_s)
{
    if (!rl)
        return 0;
    char a[48];
    snprintf(a, sizeof a, "%s", addr && *addr ? addr : "?");
    pthread_mutex_lock(&rl->mu);
    size_t b = bucket_of(rl, a), i = rl->buckets[b];
    while (i != NONE && strcmp(rl->e[i].addr, a) != 0)
        i = rl->e[i].next;
    if (i == NONE) {
        i = take_slot(rl);
        b = bucket_of(rl, a);   /* (unchanged: eviction rewires other chains only) */
        memcpy(rl->e[i].addr, a, sizeof a);
        rl->e[i].tokens = rl->burst;
        rl->e[i].at_ms = now_ms;
        rl->e[i].next = rl->buckets[b];
        rl->buckets[b] = i;
    }
    entry_t *e = &rl->e[i];
    if (now_ms > e->at_ms) {
        e->tokens += (double)(now_ms - e->at_ms) / 1000.0 * rl->rate;
        if (e->tokens > rl->burst)
            e->tokens = rl->burst;
    }
    if (now_ms > e->at_ms)
        e->at_ms = now_ms;
    int rc = 0;
    if (e->tokens >= 1) {
        e->tokens -= 1;
    } else {
        rc = -1;
        double wait = (1 - e->tokens) / rl->rate;
        int secs = wait < 86400 ? (int)wait : 86400;
        if (secs < wait)
            secs++;
        *retry_after_s = secs < 1 ? 1 : secs;
    }
    pthread_mutex_unlock(&rl->mu);
    return rc;
}

size_t drv_ratelimit_tracked(drv_ratelimit_t *rl)
{
    if (!rl)
        return 0;
    pthread_mutex_lock(&rl->mu);
    size_t n = rl->n;
    pthread_mutex_unlock(&rl->mu);
    return n;
}

int drv_ratelimit_parse(const char *s, double *rate, int *burst)
{
    if (strcmp(s, "off") == 0) {
        *rate = 0;
        return 0;
    }
    char *end;
    double r = strtod(s, &end);
    if (end == s || *end != '/' || !(r > 0 && r <= 1e6))
        return -1;
    const char *b = end + 1;
    long n = strtol(b, &end, 10);
    if (end == b || *end || n < 1 || n > 1000000)
        return -1;
    *rate = r;
    *burst = (int)n;
    return 0;
}
