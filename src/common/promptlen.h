/* promptlen.h — prompt lengths in 1/8-octave bins: the one definition of
 * the bins the gateway counts prompt-size estimates in (gateway/route.c)
 * and the replica autoscaler's tail rule keeps its histogram in
 * (autoscale/replicas.c, "Tail"), so droverd's counts fold into the
 * autoscaler's histogram bin for bin. Pure. */
#ifndef DRV_COMMON_PROMPTLEN_H
#define DRV_COMMON_PROMPTLEN_H

#include <stddef.h>

#define DRV_PROMPTLEN_BINS 128      /* bins of 1/8 octave of 1 + tokens; the last holds the rest */

/* The bin of a prompt of `tokens` tokens (negative and NaN: 0):
 * floor(8 log2(1 + tokens)), at most DRV_PROMPTLEN_BINS - 1. */
size_t drv_promptlen_bin(double tokens);

/* The prompt length a bin stands for: its middle, in log scale. */
double drv_promptlen_tokens(size_t bin);

#endif
