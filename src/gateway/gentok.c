/* gentok.c — see gentok.h: the generated-token scanner, two small state
 * machines over the bytes (the usage key and number; the stream's lines),
 * each keeping what it matched so far, so a body split anywhere counts
 * the same, each skipping what cannot matter with memmem / memchr; and
 * the totals' adds. */
#define _GNU_SOURCE   /* memmem */
#include <math.h>
#include <string.h>

#include "gateway/gentok.h"

static const char KEY[] = "\"completion_tokens\"";
#define KEY_LEN (sizeof KEY - 1)   /* 19 */
enum { UM_COLON = 20, UM_AFTER = 21, UM_NUM = 22 };   /* after the key (s->um) */

/* the stream's line states (s->ls) */
enum {
    LS_START,    /* at a line's start: lk chars of "data:" matched */
    LS_SP,       /* just after "data:" (one space is the separator) */
    LS_VAL,      /* in the value: lk chars of "[DONE]" matched */
    LS_DONE,     /* the value so far is "[DONE]" */
    LS_SKIP,     /* the rest of the line does not matter */
};

void drv_gw_gen_init(drv_gw_gen_t *s, bool sse)
{
    memset(s, 0, sizeof *s);
    s->sse = sse;
    s->usage = -1;
}

static bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static void usage_step(drv_gw_gen_t *s, unsigned char c)
{
    if (s->um < KEY_LEN) {
        if (c == (unsigned char)KEY[s->um])
            s->um = s->um + 1 == KEY_LEN ? UM_COLON : s->um + 1;
        else
            s->um = c == '"';   /* the quote alone starts the key again */
        return;
    }
    if (s->um == UM_COLON) {
        if (c == ':')
            s->um = UM_AFTER;
        else if (!is_ws(c))
            s->um = c == '"';
        return;
    }
    if (s->um == UM_AFTER) {
        if (c >= '0' && c <= '9') {
            s->num = c - '0';
            s->um = UM_NUM;
        } else if (!is_ws(c)) {
            s->um = c == '"';
        }
        return;
    }
    /* UM_NUM */
    if (c >= '0' && c <= '9') {
        if (s->num <= DRV_GW_GEN_MAX)   /* past it: no count, and no overflow */
            s->num = s->num * 10 + (c - '0');
        return;
    }
    if (c != '.' && c != 'e' && c != 'E' && s->num <= DRV_GW_GEN_MAX)
        s->usage = s->num;
    s->um = c == '"';
}

static void chunk(drv_gw_gen_t *s)
{
    if (!s->ev_data) {   /* one per event, however many data lines it has */
        s->events++;
        s->ev_data = true;
    }
}

static void line_step(drv_gw_gen_t *s, unsigned char c)
{
    if (c == '\n' && s->cr) {   /* "\r\n" is one line end */
        s->cr = false;
        return;
    }
    s->cr = c == '\r';
    if (c == '\n' || c == '\r') {
        if (s->ls == LS_START && s->lk == 0)
            s->ev_data = false;   /* a blank line ends the event */
        else if (s->ls == LS_VAL && s->lk > 0)
            chunk(s);             /* a value that only began like [DONE] */
        s->ls = LS_START;         /* (an empty value or [DONE]: no chunk) */
        s->lk = 0;
        return;
    }
    switch (s->ls) {
    case LS_START:
        if (c == (unsigned char)"data:"[s->lk]) {
            if (++s->lk == 5) {
                s->ls = LS_SP;
                s->lk = 0;
            }
        } else {
            s->ls = LS_SKIP;
        }
        return;
    case LS_SP:
        s->ls = LS_VAL;
        if (c == ' ')
            return;   /* else c is the value's first char */
        /* fall through */
    case LS_VAL:
        if (c == (unsigned char)"[DONE]"[s->lk]) {
            if (++s->lk == 6)
                s->ls = LS_DONE;
        } else {
            chunk(s);
            s->ls = LS_SKIP;
        }
        return;
    case LS_DONE:
        chunk(s);   /* "[DONE]" and more: data after all */
        s->ls = LS_SKIP;
        return;
    default:
        return;
    }
}

/* The usage matcher over [p, e): memmem to the next whole key, its
 * pieces byte by byte (a key begun at the end of one read, the colon and
 * number after one). */
static void usage_feed(drv_gw_gen_t *s, const char *p, const char *e)
{
    while (p < e) {
        if (s->um != 0) {
            usage_step(s, (unsigned char)*p++);
            continue;
        }
        const char *k = memmem(p, (size_t)(e - p), KEY, KEY_LEN);
        if (k) {
            p = k + KEY_LEN;
            s->um = UM_COLON;
            continue;
        }
        /* no whole key: the end may hold its beginning */
        size_t len = (size_t)(e - p) < KEY_LEN - 1 ? (size_t)(e - p) : KEY_LEN - 1;
        for (; len > 0; len--)
            if (memcmp(e - len, KEY, len) == 0) {
                s->um = (uint8_t)len;
                break;
            }
        return;
    }
}

/* The line matcher over [p, e): a line's first bytes one by one, then
 * memchr to its end. */
static void lines_feed(drv_gw_gen_t *s, const char *p, const char *e)
{
    while (p < e) {
        if (s->ls == LS_SKIP) {   /* (s->cr is false: the byte before was no line end) */
            const char *nl = memchr(p, '\n', (size_t)(e - p));
            const char *cr = memchr(p, '\r', (size_t)((nl ? nl : e) - p));
            p = cr ? cr : nl;
            if (!p)
                return;
        }
        line_step(s, (unsigned char)*p++);
    }
}

void drv_gw_gen_feed(drv_gw_gen_t *s, const char *p, size_t n)
{
    usage_feed(s, p, p + n);
    if (s->sse)
        lines_feed(s, p, p + n);
}

int64_t drv_gw_gen_count(const drv_gw_gen_t *s)
{
    if (s->usage >= 0)
        return s->usage;
    return s->sse ? (int64_t)s->events : 0;
}

static void add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

void drv_gw_gen_served(drv_gw_gen_totals_t *t, int64_t gen, double batch, int64_t decode_us)
{
    if (gen <= 0)
        return;
    add(&t->n, 1);
    add(&t->tokens, (uint64_t)gen);
    if (gen < 2 || decode_us <= 0 || !(batch >= 1) || !isfinite(batch))
        return;
    double x = batch - 1, y = (double)decode_us / 1e6 / (double)gen;
    if (x > 1e6)
        x = 1e6;   /* (no replica runs a million at once; the sums stay bounded) */
    add(&t->bn, 1);
    add(&t->bx_milli, (uint64_t)llround(x * 1e3));
    add(&t->bxx_centi, (uint64_t)llround(x * x * 1e2));
    add(&t->by_10ns, (uint64_t)llround(y * 1e8));
    add(&t->bxy_us, (uint64_t)llround(x * y * 1e6));
}
