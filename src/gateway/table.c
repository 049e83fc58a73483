/* table.c — see table.h: routing table, power of two choices, bounded
 * FIFO, "model" scan. Pure functions (the table is built from droverd's
 * state in api/gateway_state.c, from a routes document in routes_doc.c). */
#include "gateway/table.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* --- string arena ---------------------------------------------------------- */

struct drv_gw_chunk {
    struct drv_gw_chunk *next;
    size_t used, cap;
    char data[];
};

static const char *arena_str(drv_gw_table_t *t, const char *s)
{
    size_t n = strlen(s) + 1;
    drv_gw_chunk_t *c = t->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        c = malloc(sizeof *c + cap);
        if (!c)
            abort();
        c->next = t->chunks;
        c->used = 0;
        c->cap = cap;
        t->chunks = c;
    }
    char *p = c->data + c->used;
    memcpy(p, s, n);
    c->used += n;
    return p;
}

/* --- table ------------------------------------------------------------------ */

const char *drv_gw_table_str(drv_gw_table_t *t, const char *s)
{
    return arena_str(t, s);
}

void drv_gw_table_free(drv_gw_table_t *t)
{
    if (!t)
        return;
    while (t->chunks) {
        drv_gw_chunk_t *n = t->chunks->next;
        free(t->chunks);
        t->chunks = n;
    }
    free(t->deps);
    free(t->reps);
    free(t);
}

const drv_gw_tdep_t *drv_gw_table_find(const drv_gw_table_t *t, const char *key)
{
    size_t lo = 0, hi = t->n_deps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(t->deps[mid].key, key);
        if (c == 0)
            return &t->deps[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* --- power of two choices ------------------------------------------------------ */

uint64_t drv_gw_rand(uint64_t *rng)
{
    uint64_t x = *rng ? *rng : 0x9e3779b97f4a7c15ULL;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    return x;
}

static bool eligible(const uint32_t *out, size_t i, uint32_t limit, int skip)
{
    return (int)i != skip && (limit == 0 || out[i] < limit);
}

/* The k-th eligible index. */
static int kth(const uint32_t *out, size_t n, uint32_t limit, int skip, size_t k)
{
    for (size_t i = 0; i < n; i++)
        if (eligible(out, i, limit, skip) && k-- == 0)
            return (int)i;
    return -1;
}

int drv_gw_p2c(const uint32_t *out, size_t n, uint32_t limit, int skip, uint64_t *rng)
{
    assert(out || n == 0);
    if (n == 0)
        return -1;
    /* fast path: two random draws over all replicas, both eligible */
    if (n >= 2) {
        size_t a = (size_t)(drv_gw_rand(rng) % n);
        size_t b = (size_t)(drv_gw_rand(rng) % (n - 1));
        if (b >= a)
            b++;
        bool ea = eligible(out, a, limit, skip), eb = eligible(out, b, limit, skip);
        if (ea && eb)
            return out[b] < out[a] ? (int)b : (int)a;
    }
    /* some are not eligible: draw among the eligible ones */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += eligible(out, i, limit, skip);
    if (m == 0)
        return -1;
    if (m == 1)
        return kth(out, n, limit, skip, 0);
    size_t ka = (size_t)(drv_gw_rand(rng) % m);
    size_t kb = (size_t)(drv_gw_rand(rng) % (m - 1));
    if (kb >= ka)
        kb++;
    int a = kth(out, n, limit, skip, ka), b = kth(out, n, limit, skip, kb);
    return out[b] < out[a] ? b : a;
}

/* --- FIFO --------------------------------------------------------------------------- */

int drv_gw_fifo_push(drv_gw_fifo_t *q, drv_gw_link_t *l)
{
    if (q->cap && q->n >= q->cap)
        return -1;
    l->next = NULL;
    l->prev = q->tail;
    if (q->tail)
        q->tail->next = l;
    else
        q->head = l;
    q->tail = l;
    q->n++;
    return 0;
}

void drv_gw_fifo_remove(drv_gw_fifo_t *q, drv_gw_link_t *l)
{
    assert(q->n > 0);
    if (l->prev)
        l->prev->next = l->next;
    else
        q->head = l->next;
    if (l->next)
        l->next->prev = l->prev;
    else
        q->tail = l->prev;
    l->prev = l->next = NULL;
    q->n--;
}

drv_gw_link_t *drv_gw_fifo_pop(drv_gw_fifo_t *q)
{
    drv_gw_link_t *l = q->head;
    if (l)
        drv_gw_fifo_remove(q, l);
    return l;
}

/* --- "model" scan ---------------------------------------------------------------------- */

static const char *ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* Past a JSON string starting at p (the opening quote); NULL if unterminated. */
static const char *skip_string(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        if (*p == '\\')
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return NULL;
}

/* Past one JSON value (strings and nesting aware, not validating). */
static const char *skip_value(const char *p, const char *end)
{
    p = ws(p, end);
    if (p >= end)
        return NULL;
    if (*p == '"')
        return skip_string(p, end);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (p < end) {
            if (*p == '"') {
                p = skip_string(p, end);
                if (!p)
                    return NULL;
                continue;
            }
            if (*p == '{' || *p == '[')
                depth++;
            else if (*p == '}' || *p == ']') {
                if (--depth == 0)
                    return p + 1;
            }
            p++;
        }
        return NULL;
    }
    while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' &&
           *p != '\r' && *p != '\t')
        p++;
    return p;
}

int drv_gw_json_model(const char *body, size_t len, char *out, size_t outlen)
{
    if (!body || outlen == 0)
        return -1;
    const char *p = body, *end = body + len;
    p = ws(p, end);
    if (p >= end || *p != '{')
        return -1;
    p++;
    for (;;) {
        p = ws(p, end);
        if (p >= end || *p == '}')
            return -1;
        if (*p != '"')
            return -1;
        const char *k = p + 1;
        const char *kend = skip_string(p, end);
        if (!kend)
            return -1;
        bool is_model = kend - 1 - k == 5 && memcmp(k, "model", 5) == 0;
        p = ws(kend, end);
        if (p >= end || *p != ':')
            return -1;
        p = ws(p + 1, end);
        if (is_model) {
            if (p >= end || *p != '"')
                return -1;
            size_t n = 0;
            for (p++; p < end && *p != '"'; p++) {
                char c = *p;
                if (c == '\\') {
                    if (++p >= end || (*p != '"' && *p != '\\' && *p != '/'))
                        return -1;
                    c = *p;
                }
                if (n + 1 >= outlen)
                    return -1;
                out[n++] = c;
            }
            if (p >= end)
                return -1;
            out[n] = '\0';
            return 0;
        }
        p = skip_value(p, end);
        if (!p)
            return -1;
        p = ws(p, end);
        if (p < end && *p == ',')
            p++;
        else
            return -1;
    }
}

/* --- quantiles ----------------------------------------------------------------- */

double drv_gw_quantile_ms(const uint64_t *counts, const double *bounds, size_t nb, double q)
{
    uint64_t total = 0;
    for (size_t i = 0; i <= nb; i++)
        total += counts[i];
    if (total == 0)
        return -1;
    double want = q * (double)total, cum = 0;
    for (size_t i = 0; i <= nb; i++) {
        if (counts[i] == 0 || cum + (double)counts[i] < want) {
            cum += (double)counts[i];
            continue;
        }
        if (i == nb)   /* above the last bound: all we know is "more than" */
            return bounds[nb - 1] * 1000;
        double lo = i ? bounds[i - 1] : 0, hi = bounds[i];
        double frac = (want - cum) / (double)counts[i];
        return (lo + (hi - lo) * frac) * 1000;
    }
    return bounds[nb - 1] * 1000;
}
