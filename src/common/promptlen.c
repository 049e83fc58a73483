/* promptlen.c — see promptlen.h: the 1/8-octave bins of prompt lengths. */
#include "common/promptlen.h"

#include <math.h>

size_t drv_promptlen_bin(double tokens)
{
    double b = 8 * log2(1 + (tokens > 0 && isfinite(tokens) ? tokens : 0));
    return b < DRV_PROMPTLEN_BINS - 1 ? (size_t)b : DRV_PROMPTLEN_BINS - 1;
}

double drv_promptlen_tokens(size_t bin)
{
    return exp2(((double)bin + 0.5) / 8) - 1;
}
