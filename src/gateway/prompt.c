/* prompt.c — see prompt.h: counting the prompt-size estimates. */
#include "gateway/prompt.h"

static void add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

int64_t drv_gw_prompt_estimate(int64_t body_bytes)
{
    return body_bytes > 0 ? body_bytes / DRV_GW_BYTES_PER_TOKEN : -1;
}

void drv_gw_prompt_arrive(gw_prompt_t *p, int64_t est)
{
    if (est < 0)
        return;
    add(&p->n, 1);
    add(&p->tokens, (uint64_t)est);
    add(&p->hist[drv_promptlen_bin((double)est)], 1);
}

void drv_gw_prompt_served(gw_prompt_t *p, int64_t est, int64_t first_us)
{
    if (est < 0)
        return;
    uint64_t e = (uint64_t)est, f = first_us > 0 ? (uint64_t)first_us : 0;
    add(&p->served, 1);
    add(&p->served_p, e);
    add(&p->served_f_us, f);
    add(&p->served_pp, e * e);
    add(&p->served_pf_ms, (e * f + 500) / 1000);
}
