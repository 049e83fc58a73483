/* gentok.h — counting an OpenAI answer's generated tokens from its bytes,
 * for the replica autoscaler's decode rate and batch slowdown (the SLO
 * model, autoscale/replicas.h "Full batches"). A pure scanner: the
 * gateway feeds it the answer's body as it reads it (gateway thread,
 * upstream.c), split anywhere, and asks for the count when the answer is
 * complete. No allocation, no JSON parse: one pass over the bytes with a
 * few comparisons each, as cheap as a scan for two characters.
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

#endif
