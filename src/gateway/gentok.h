/* gentok.h — counting an OpenAI answer's generated tokens from its bytes,
 * and a deployment's totals of them and of its answers' batches, for the
 * replica autoscaler's decode rate and batch slowdown (the SLO model,
 * autoscale/replicas.h "Full batches"). A pure scanner: the
 * gateway feeds it the answer's body as it reads it (gateway thread,
 * upstream.c), split anywhere, and asks for the count when the answer is
 * complete. No allocation, no JSON parse: memmem for the usage's key,
 * memchr for a stream's line ends and a few comparisons at each line's
 * start (on the build machine about 3 GB/s on a stream of chat chunks and
 * 7 on JSON, where one memchr does 11; the commit that made it so says how).
 *
 * What counts:
 *   - `"completion_tokens": N` anywhere in the body (OpenAI's usage
 *     object, in a JSON answer or a stream's usage chunk): the last such N
 *     wins (servers that repeat a running usage in every chunk end with the
 *     total). Only a JSON key can match: the name's closing quote must be
 *     a real one (in a string's content it is escaped, \"), followed by
 *     white space, ':', white space and decimal digits ended by a
 *     character that is not part of a number. A value above
 *     DRV_GW_GEN_MAX, a fraction, an exponent or a sign is no count;
 *   - in a stream (text/event-stream), without a usage: the events that
 *     carry data other than `[DONE]` — one per chunk. An estimate: servers
 *     send a chunk with the role or the finish reason beside the tokens'
 *     (drover-demo-model: max_tokens word chunks and one with the finish
 *     reason), and one chunk may carry more than one token.
 * Neither seen: unknown (0). */
#ifndef DRV_GW_GENTOK_H
#define DRV_GW_GENTOK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DRV_GW_GEN_MAX 100000000   /* larger usage values are no count */

typedef struct drv_gw_gen {
    bool sse;                /* the body is an event stream */
    uint64_t events;         /* stream: events with a chunk so far */
    int64_t usage;           /* the last completion_tokens seen; -1: none */
    /* the usage matcher */
    uint8_t um;              /* chars of "completion_tokens" (with its quotes) matched,
                                then: 20 before ':', 21 after, 22 in the digits */
    int64_t num;             /* digits so far */
    /* the stream's line matcher */
    uint8_t ls;              /* line state (gentok.c) */
    uint8_t lk;              /* chars of "data:" or "[DONE]" matched */
    bool cr;                 /* the last char was '\r' (a '\n' after it ends nothing more) */
    bool ev_data;            /* this event has had a data line */
} drv_gw_gen_t;

/* Start counting a body (sse: the answer's Content-Type is
 * text/event-stream). */
void drv_gw_gen_init(drv_gw_gen_t *s, bool sse);

/* The next n bytes of the body. */
void drv_gw_gen_feed(drv_gw_gen_t *s, const char *p, size_t n);

/* The generated tokens of the body fed so far: the usage when one was
 * seen, else the stream's chunk events, else 0 (unknown). */
int64_t drv_gw_gen_count(const drv_gw_gen_t *s);

/* A deployment's running totals (zero-initialised; never reset), counted
 * on the gateway thread with relaxed atomic adds (two per answer with a
 * count, six with a batch point), read by any thread (drv_gateway_demand).
 * The batch point of an answer is x = its batch - 1 (the mean count in
 * flight on its replica over send -> done, itself included) and y = its
 * decode seconds per generated token ((done - first body byte) / count),
 * for the full-batch fit y = y0 (1 + beta x); only answers with a count of
 * at least 2, a batch and a decode time > 0 (as drover-sim's per-request
 * points). The integer units: x in 1/1000, x^2 in 1/100, y in 10 ns, x y
 * in us. At 1,000 answers/s with a batch of 257 and 0.1 s per token the
 * sums wrap in 2,000 (x), 89 (x^2), 58 (y) and 23 (x y) years. */
typedef struct drv_gw_gen_totals {
    _Atomic uint64_t n, tokens;          /* answers with a count; their counts' sum */
    _Atomic uint64_t bn;                 /* of those, batch points */
    _Atomic uint64_t bx_milli, bxx_centi, by_10ns, bxy_us;   /* their sums */
} drv_gw_gen_totals_t;

/* Count an answer served by a replica: gen its count (<= 0: unknown,
 * nothing counted), batch its mean batch (< 1: unknown), decode_us its
 * first body byte -> done. */
void drv_gw_gen_served(drv_gw_gen_totals_t *t, int64_t gen, double batch, int64_t decode_us);

#endif
