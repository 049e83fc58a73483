/* warm.c — the placement tie-break by cache contents (issue 14, item 5):
 * among placements the policy scores equally, prefer a node that already
 * holds the request's artifact in its node cache (drv_sched_node_t.warm,
 * set by the caller per request). Applied by the core (place.c, ctx.c)
 * after the policy's score tuple and before random ties: the score always
 * wins, so warmth never makes a placement worse by the policy's measure. */
#include "sched/sched_int.h"

int sched_warm_cmp(const drv_sched_node_t *a, const drv_sched_node_t *b)
{
    return (int)a->warm - (int)b->warm;
}
