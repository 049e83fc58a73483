/* prompt.h — the gateway's prompt-size estimates, per deployment, for the
 * replica autoscaler's SLO model (its prompt shift and its "Tail" rule,
 * autoscale/replicas.h). The gateway does not parse bodies: a request's
 * prompt is estimated from its body's length (what its Content-Length
 * declared: both front ends hold the whole body before routing it) as
 * bytes / DRV_GW_BYTES_PER_TOKEN tokens — an estimate (JSON framing,
 * other fields and the tokenizer's real ratio are not known); a request
 * without a body has none and is not counted. Counted on the gateway
 * thread with relaxed atomic adds (three per arrival, five per served
 * request), read by any thread (drv_gateway_demand). */
#ifndef DRV_GW_PROMPT_H
#define DRV_GW_PROMPT_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/promptlen.h"

#define DRV_GW_BYTES_PER_TOKEN 4    /* the estimate: body bytes per prompt token */

/* Running totals of one deployment (zero-initialised; never reset). */
typedef struct gw_prompt {
    _Atomic uint64_t n, tokens;                  /* arrivals with an estimate; its sum */
    _Atomic uint64_t hist[DRV_PROMPTLEN_BINS];   /* those arrivals per bin of the estimate */
    /* requests with an estimate served by a replica: count, sums of the
     * estimate p, of f = sent -> first body byte (us), of p^2 and of p f
     * (token ms) */
    _Atomic uint64_t served, served_p, served_f_us, served_pp, served_pf_ms;
} gw_prompt_t;

/* A request's estimate in tokens from its body's length in bytes; -1 (no
 * estimate) when the length is not > 0. */
int64_t drv_gw_prompt_estimate(int64_t body_bytes);

/* Count an arrival with estimate `est` (< 0: none, nothing counted). */
void drv_gw_prompt_arrive(gw_prompt_t *p, int64_t est);

/* Count a request served by a replica with estimate `est` (< 0: nothing
 * counted) whose first body byte came first_us after it was sent. */
void drv_gw_prompt_served(gw_prompt_t *p, int64_t est, int64_t first_us);

#endif
