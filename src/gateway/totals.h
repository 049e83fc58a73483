/* totals.h — a deployment's running service totals (drv_gw_demand_t's, the
 * SLO model's input) as a standalone gateway's load report carries them to
 * the head (POST /v1/gateway/load, docs/api.md "Standalone gateways"): the
 * encoding (drover-gateway, gateway.c), the checked decoding and the
 * accumulation of each report's difference (the head, api/gateway_peers.c).
 * One table of (json name, offset) in totals.c drives all three: a new
 * uint64_t total of drv_gw_demand_t is one line there. The prompt
 * histogram travels sparse, as "prompt_hist": [[bin, count], ...] of its
 * non-zero bins. Pure.
 */
#ifndef DRV_GW_TOTALS_H
#define DRV_GW_TOTALS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "gateway/gateway.h"

/* A total above this is refused (2^62: years of the fastest-growing one,
 * served_us, at thousands of requests a second; room for a sum over
 * several gateways); drover-gateway sends at most this. */
#define DRV_GW_TOTAL_MAX (1ULL << 62)

typedef struct drv_gw_total_field {
    const char *name;        /* the report's field name (the struct member's) */
    size_t off;              /* offsetof(drv_gw_demand_t, member), a uint64_t */
} drv_gw_total_field_t;

/* The table (prompt_hist apart). */
extern const drv_gw_total_field_t drv_gw_total_fields[];
extern const size_t drv_gw_n_total_fields;

/* Add d's totals to the report entry o: every field of the table and
 * "prompt_hist" (non-zero bins only). -1 on OOM. */
int drv_gw_totals_to_json(const drv_gw_demand_t *d, json_t *o);

/* Read the totals of report entry o into d (its totals only; a missing one
 * is 0). *has: o carries any (false: a report without totals, d's totals
 * zeroed). -1 with a 400 naming the field as where.NAME (e.g.
 * "deployments[3].served") on a wrong type, a negative or a total over
 * DRV_GW_TOTAL_MAX, and for prompt_hist: not an array, more than
 * DRV_PROMPTLEN_BINS pairs, a bin out of range or twice. */
int drv_gw_totals_from_json(const json_t *o, const char *where, drv_gw_demand_t *d, bool *has,
                            drv_error_t *err);

/* True when any total of now is below last's (the gateway restarted: its
 * totals count from zero again). */
bool drv_gw_totals_went_down(const drv_gw_demand_t *last, const drv_gw_demand_t *now);

/* sum += now - last, total by total; last NULL (first seen) or went down
 * (a restart): sum += now. Other fields of sum untouched. */
void drv_gw_totals_add_delta(drv_gw_demand_t *sum, const drv_gw_demand_t *last,
                             const drv_gw_demand_t *now);

/* True when d has any non-zero total. */
bool drv_gw_totals_any(const drv_gw_demand_t *d);

#endif
