/* totals.c — a deployment's running service totals in a standalone
 * gateway's load report (totals.h): the one table of (json name, offset)
 * that encodes, decodes and differences them, and the prompt histogram's
 * sparse form. Pure.
 */
#include "gateway/totals.h"

#include <stdio.h>
#include <string.h>

/* One uint64_t member of drv_gw_demand_t, named as in the report; the
 * _Generic refuses (at compile time) a member of another type. */
#define TOTAL(m)                                                                               \
    {#m, offsetof(drv_gw_demand_t, m) +                                                        \
             0 * sizeof(_Generic(((drv_gw_demand_t *)0)->m, uint64_t: 1))}

const drv_gw_total_field_t drv_gw_total_fields[] = {
    TOTAL(arrivals),
    TOTAL(served),
    TOTAL(served_first_us),
    TOTAL(served_first_sq_ms2),
    TOTAL(served_us),
    TOTAL(prompted),
    TOTAL(prompt_tokens),
    TOTAL(served_prompted),
    TOTAL(served_p),
    TOTAL(served_p_first_us),
    TOTAL(served_pp),
    TOTAL(served_pf_ms),
    TOTAL(served_sq_ms2),
    TOTAL(served_gen),
    TOTAL(gen_tokens),
    TOTAL(batch_n),
    TOTAL(batch_x_milli),
    TOTAL(batch_xx_centi),
    TOTAL(batch_y_10ns),
    TOTAL(batch_xy_us),
};
const size_t drv_gw_n_total_fields = sizeof drv_gw_total_fields / sizeof drv_gw_total_fields[0];

#define HIST_KEY "prompt_hist"

static inline uint64_t *at(drv_gw_demand_t *d, size_t i)
{
    return (uint64_t *)((char *)d + drv_gw_total_fields[i].off);
}

static inline uint64_t get(const drv_gw_demand_t *d, size_t i)
{
    return *(const uint64_t *)((const char *)d + drv_gw_total_fields[i].off);
}

static inline json_int_t capped(uint64_t v)
{
    return (json_int_t)(v > DRV_GW_TOTAL_MAX ? DRV_GW_TOTAL_MAX : v);
}

int drv_gw_totals_to_json(const drv_gw_demand_t *d, json_t *o)
{
    for (size_t i = 0; i < drv_gw_n_total_fields; i++)
        if (json_object_set_new(o, drv_gw_total_fields[i].name, json_integer(capped(get(d, i)))))
            return -1;
    json_t *h = json_array();
    if (!h || json_object_set_new(o, HIST_KEY, h))
        return -1;
    for (size_t b = 0; b < DRV_PROMPTLEN_BINS; b++)
        if (d->prompt_hist[b] &&
            json_array_append_new(h, json_pack("[I, I]", (json_int_t)b, capped(d->prompt_hist[b]))))
            return -1;
    return 0;
}

/* An integer 0..DRV_GW_TOTAL_MAX. */
static bool total_ok(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (uint64_t)json_integer_value(v) > DRV_GW_TOTAL_MAX)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static int hist_from_json(const json_t *h, const char *where, drv_gw_demand_t *d,
                          drv_error_t *err)
{
    char field[96];
    snprintf(field, sizeof field, "%s." HIST_KEY, where);
    if (!json_is_array(h) || json_array_size(h) > DRV_PROMPTLEN_BINS)
        return drv_err_invalid(err, field, "%s must be an array of at most %d [bin, count] "
                               "pairs (the non-zero bins)", field, DRV_PROMPTLEN_BINS);
    size_t i;
    const json_t *pair;
    json_array_foreach(h, i, pair) {
        const json_t *bv = json_array_get(pair, 0);
        uint64_t count;
        if (!json_is_array(pair) || json_array_size(pair) != 2 || !json_is_integer(bv) ||
            !total_ok(json_array_get(pair, 1), &count))
            return drv_err_invalid(err, field, "%s[%zu] must be [bin, count]: two integers, "
                                   "the count 0..%llu", field, i,
                                   (unsigned long long)DRV_GW_TOTAL_MAX);
        json_int_t b = json_integer_value(bv);
        if (b < 0 || b >= DRV_PROMPTLEN_BINS)
            return drv_err_invalid(err, field, "%s[%zu]: bin %lld is out of range (0..%d)",
                                   field, i, (long long)b, DRV_PROMPTLEN_BINS - 1);
        if (d->prompt_hist[b])
            return drv_err_invalid(err, field, "%s[%zu]: bin %lld is given twice", field, i,
                                   (long long)b);
        d->prompt_hist[b] = count;
    }
    return 0;
}

int drv_gw_totals_from_json(const json_t *o, const char *where, drv_gw_demand_t *d, bool *has,
                            drv_error_t *err)
{
    *has = false;
    for (size_t i = 0; i < drv_gw_n_total_fields; i++)
        *at(d, i) = 0;
    memset(d->prompt_hist, 0, sizeof d->prompt_hist);
    for (size_t i = 0; i < drv_gw_n_total_fields; i++) {
        const json_t *v = json_object_get(o, drv_gw_total_fields[i].name);
        if (!v)
            continue;
        *has = true;
        if (!total_ok(v, at(d, i))) {
            char field[96];
            snprintf(field, sizeof field, "%s.%s", where, drv_gw_total_fields[i].name);
            return drv_err_invalid(err, field, "%s must be an integer from 0 to %llu (a running "
                                   "total), got %s", field, (unsigned long long)DRV_GW_TOTAL_MAX,
                                   json_is_integer(v) ? "one out of range" : "another type");
        }
    }
    const json_t *h = json_object_get(o, HIST_KEY);
    if (h) {
        *has = true;
        if (hist_from_json(h, where, d, err) < 0)
            return -1;
    }
    return 0;
}

bool drv_gw_totals_went_down(const drv_gw_demand_t *last, const drv_gw_demand_t *now)
{
    for (size_t i = 0; i < drv_gw_n_total_fields; i++)
        if (get(now, i) < get(last, i))
            return true;
    for (size_t b = 0; b < DRV_PROMPTLEN_BINS; b++)
        if (now->prompt_hist[b] < last->prompt_hist[b])
            return true;
    return false;
}

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

void drv_gw_totals_add_delta(drv_gw_demand_t *sum, const drv_gw_demand_t *last,
                             const drv_gw_demand_t *now)
{
    if (last && drv_gw_totals_went_down(last, now))
        last = NULL;   /* restarted: all of now is new */
    for (size_t i = 0; i < drv_gw_n_total_fields; i++)
        *at(sum, i) = sat_add(get(sum, i), get(now, i) - (last ? get(last, i) : 0));
    for (size_t b = 0; b < DRV_PROMPTLEN_BINS; b++)
        sum->prompt_hist[b] = sat_add(sum->prompt_hist[b],
                                      now->prompt_hist[b] - (last ? last->prompt_hist[b] : 0));
}

bool drv_gw_totals_any(const drv_gw_demand_t *d)
{
    for (size_t i = 0; i < drv_gw_n_total_fields; i++)
        if (get(d, i))
            return true;
    for (size_t b = 0; b < DRV_PROMPTLEN_BINS; b++)
        if (d->prompt_hist[b])
            return true;
    return false;
}
