/* replicas_int.h — what replicas.c (the decisions) and replicas_slo.c (the
 * SLO model) share: the bucket arithmetic and the need for every target
 * set. Not for other code: use replicas.h. */
#ifndef DRV_AUTOSCALE_REPLICAS_INT_H
#define DRV_AUTOSCALE_REPLICAS_INT_H

#include <stddef.h>
#include <stdint.h>

#include "autoscale/replicas.h"

/* a / b rounded towards minus infinity (b > 0). */
static inline int64_t ras_floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* The slot of epoch e in a ring of n buckets (e may be negative). */
static inline size_t ras_ring_slot(int64_t e, int64_t n)
{
    return (size_t)(((e % n) + n) % n);
}

/* The slot of epoch e in the DRV_RAS_BUCKETS history rings. */
static inline size_t ras_slot_of(int64_t epoch)
{
    return ras_ring_slot(epoch, DRV_RAS_BUCKETS);
}

/* The tail model of an estimate (see "Tail"): the state's histogram with
 * the estimate's line and batch slowdown; and the arrivals' peakedness
 * every queue of ras_both_need is sized with ("Peaked queues"). */
typedef struct ras_tail_model {
    const double *hist;
    double c0, c1, beta;
    double peak;                     /* the arrivals' peakedness z (>= 1; 1: Poisson) */
} ras_tail_model_t;

/* The smallest count within every target set: TTFT (wait + first token,
 * and the tail's need when tm is not NULL) and end to end (wait + the
 * slot's hold time at a full batch, `full` x E[S]), each at its p99; the
 * predictions at it in *pred_ttft, *pred_e2e (either may be NULL). */
int ras_both_need(const drv_ras_config_t *cfg, const ras_tail_model_t *tm, double lambda,
                  double es, double first_p99, double svc_p99, int slots, double full,
                  double *pred_ttft, double *pred_e2e);

#endif
