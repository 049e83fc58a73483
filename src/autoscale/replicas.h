/* replicas.h — the replica autoscaler: how many replicas a deployment wants.
 *
 * Pure decisions over explicit inputs (design §9): no globals, no clock
 * reads (`now_ms` is an argument, any monotonic or wall clock in ms), no
 * I/O, no allocation. The daemon, the simulator and the tests run this code.
 * The caller keeps one drv_ras_state_t per deployment (its memory between
 * calls: the load history and the timers) and owns its locking.
 *
 * Load (design §4.7) is in-flight + queued requests of the whole deployment,
 * sampled by the caller with drv_ras_observe() (each controller pass, say).
 * Samples land in DRV_RAS_BUCKETS time buckets spanning
 * traffic_history_seconds; the *load* is the mean of the bucket means that
 * hold samples (close to a time-weighted mean even when the caller samples
 * irregularly; buckets without samples are skipped; no samples = no load).
 * The *burst load* is the same over the newest DRV_RAS_BURST_BUCKETS
 * buckets (the last 10% of the window).
 *
 * drv_ras_decide(), with `current` replicas of which `starting` are still
 * starting (placed, not yet ready), `on_way` are on their way (starting or
 * not yet placed: failed or restarting ones are not) and `ready` serve, in
 * this order of precedence (rule 0 shapes rules 4 and 6):
 *   0. cold-start awareness: a backlog that builds up while replicas are on
 *      their way is no reason for more of them: they will drain it. (Sized
 *      on it, a deployment starting from 1 replica under steady traffic
 *      climbs to max_replicas during one cold start and then idles.)
 *      a. while some replicas are on their way (on_way > 0), a scale-up
 *         goes to at most max_scale_up_rate x the count when none was on
 *         its way, last time (at least 1; never below current): at most
 *         that many-fold growth per cold start;
 *      b. when none is on its way any more and the load (max of load and burst
 *         load) is above current x target_concurrency, that load is the
 *         backlog they found: no scale-up until the load falls to
 *         current x target_concurrency (drained), the burst load reaches
 *         panic_factor x that backlog (a burst they cannot absorb), or,
 *         traffic_history_seconds later, the burst load is still at least
 *         the backlog (they do not drain it).
 *      max_scale_up_rate < 0 turns rule 0 off (the simulator's baselines).
 *   1. current > max_replicas           -> max_replicas at once ("clamp");
 *                                          max wins over the starting floor
 *   2. current < min_replicas           -> min_replicas at once ("clamp")
 *   3. current == 0 and demand (a request arrived, demand_at_zero, or a
 *      sample > 0 since the last decision that wanted zero)
 *                                       -> max(1, ceil(newest sample/target))
 *                                          at once ("scale_from_zero"); old
 *      traffic still in the history does not bring replicas back
 *   4. burst load >= panic_factor x current x target_concurrency
 *                                        -> ceil(max(load,burst)/target) at
 *                                          once ("scale_up", a burst; 0a's cap,
 *                                          not during 0b's hold)
 *   5. min_replicas == 0 and no traffic for scale_to_zero_delay_seconds
 *      (and none at now_ms)             -> 0 ("scale_to_zero"), but never
 *                                          below `starting`
 *   6. recommended = clamp(ceil(load / target_concurrency), min, max):
 *      above current for scale_up_delay_seconds -> the smallest
 *        recommendation seen during that time (the need that held), at
 *        most 0a's cap, and not during 0b's hold;
 *      below current (and so is the burst window's need) for
 *        scale_down_delay_seconds -> the largest of the recommendation and
 *        the burst need seen during that time, at least 1 (zero is rule
 *        5's) and at least `starting` (a starting replica is never scaled
 *        down);
 *      otherwise hold. A change of direction restarts the timer.
 * Every decision resets both timers when it changes the count.
 *
 * The caller applies a decrease by deleting replicas of its choosing;
 * drv_ras_pick_victims() gives the order this module recommends (pending,
 * then failed, then ready — newest first — never starting ones).
 */
#ifndef DRV_AUTOSCALE_REPLICAS_H
#define DRV_AUTOSCALE_REPLICAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "common/error.h"

#define DRV_RAS_BUCKETS 60          /* buckets spanning traffic_history_seconds */
#define DRV_RAS_BURST_BUCKETS 6     /* the newest 10%: the burst window */
#define DRV_RAS_PANIC_FACTOR 2.0    /* default: burst >= 2x capacity reacts at once */
#define DRV_RAS_SCALE_UP_RATE 20    /* default max_scale_up_rate (rule 0a) */

/* The deployment's `autoscale` fields (design §3), delays in seconds. */
typedef struct drv_ras_config {
    int min_replicas;                /* >= 0 */
    int max_replicas;                /* >= 1, >= min_replicas */
    int target_concurrency;          /* >= 1: in-flight + queued per replica */
    int traffic_history_seconds;     /* >= 1 */
    int scale_up_delay_seconds;      /* >= 0 */
    int scale_down_delay_seconds;    /* >= 0 */
    int scale_to_zero_delay_seconds; /* >= 0 (the API keeps it >= scale_down) */
    double panic_factor;             /* <= 0: DRV_RAS_PANIC_FACTOR */
    int max_scale_up_rate;           /* rule 0a; 0: DRV_RAS_SCALE_UP_RATE; < 0: rule 0 off;
                                        1 is refused */
} drv_ras_config_t;

typedef struct drv_ras_bucket {
    int64_t epoch;                   /* now_ms / width_ms of its samples */
    double sum;
    uint32_t n;                      /* samples; 0 = empty */
} drv_ras_bucket_t;

/* Per-deployment memory, kept by the caller between calls. Plain data:
 * copy it, zero it, store it; no destroy. Initialise with
 * drv_ras_state_init(). */
typedef struct drv_ras_state {
    bool initialised;                /* false in a zeroed state: the first call inits */
    int64_t width_ms;                /* bucket width, from traffic_history_seconds */
    drv_ras_bucket_t ring[DRV_RAS_BUCKETS];
    int64_t last_traffic_ms;         /* last sample > 0 or demand; init time at first */
    int64_t last_sample_ms;          /* the newest sample ... */
    double last_sample;              /* ... and its value */
    bool traffic_since_zero;         /* a sample > 0 since a decision wanted 0 */
    int64_t up_since_ms;             /* -1: no scale-up need pending */
    int up_min;                      /* smallest recommendation since up_since */
    int64_t down_since_ms;           /* -1: no scale-down need pending */
    int down_max;                    /* largest recommendation since down_since */
    int64_t last_change_ms;          /* -1: never changed */
    int last_desired;                /* the last decision's desired count */
    int settled;                     /* the count when none was on its way, last time */
    bool on_way;                     /* replicas were on their way at the last decision */
    double drain_load;               /* > 0: the backlog left by a cold start (rule 0b) */
    int64_t drain_since_ms;          /* ... since */
} drv_ras_state_t;

/* The outcome of one drv_ras_decide() call. */
typedef struct drv_ras_decision {
    int desired;                     /* replicas wanted now */
    bool changed;                    /* desired != current */
    int recommended;                 /* clamp(ceil(load/target)) before delays */
    double load;                     /* mean in-flight+queued over the history */
    double burst_load;               /* same over the burst window */
    const char *kind;                /* "hold" | "scale_up" | "scale_down" |
                                        "scale_from_zero" | "scale_to_zero" | "clamp" */
    char reason[192];                /* one readable sentence, for the event/status */
} drv_ras_decision_t;

/* Fill a config from a deployment's `autoscale` object (API defaults for
 * absent fields: 1, 1, 4, 60, 0, 300, 900, DRV_RAS_SCALE_UP_RATE). NULL
 * object = all defaults. */
void drv_ras_config_from_json(const json_t *autoscale, drv_ras_config_t *cfg);

/* Check a config; 0, or -1 with err->field naming the autoscale field. */
int drv_ras_config_check(const drv_ras_config_t *cfg, drv_error_t *err);

/* Start a deployment's memory at now_ms (no traffic seen yet: the to-zero
 * delay counts from now). A zeroed state is initialised by its first
 * drv_ras_observe() / drv_ras_decide() instead. cfg may be NULL (1 s
 * buckets until the first decide). */
void drv_ras_state_init(drv_ras_state_t *s, const drv_ras_config_t *cfg, int64_t now_ms);

/* Record one sample: the deployment's in-flight + queued requests at now_ms
 * (negative values count as 0). A sample older than the bucket already in
 * its ring slot is dropped. */
void drv_ras_observe(drv_ras_state_t *s, int64_t now_ms, double inflight_plus_queued);

/* The mean load over the last `buckets` buckets up to now_ms (0 when no
 * samples). Exposed for status pages and tests. */
double drv_ras_load(const drv_ras_state_t *s, int64_t now_ms, int buckets);

/* Decide the desired replica count (see the rules above). `current` is the
 * number of replicas the deployment has (pending, starting, ready, failed —
 * not terminating), `starting` how many of them are placed but not yet
 * ready, `on_way` how many are on their way to ready (starting, plus pending:
 * not yet placed), `ready` how many serve (starting <= on_way,
 * on_way + ready <= current; the rest are failed or restarting: a replica
 * that failed and was not removed is no reason to cap growth). `demand_at_zero`: a request arrived
 * for the deployment while it had no replica. Updates s (timers, history
 * width when traffic_history_seconds changed: the history restarts).
 * Returns 0, or -1 with err on an invalid config or counts (s unchanged). */
int drv_ras_decide(const drv_ras_config_t *cfg, drv_ras_state_t *s, int64_t now_ms,
                   int current, int starting, int on_way, int ready, bool demand_at_zero,
                   drv_ras_decision_t *out, drv_error_t *err);

/* Victim choice for a scale-down. */
typedef enum drv_ras_replica_state {
    DRV_RAS_REPLICA_PENDING,         /* not placed on a node */
    DRV_RAS_REPLICA_STARTING,        /* placed, not ready yet: never a victim */
    DRV_RAS_REPLICA_READY,
    DRV_RAS_REPLICA_FAILED,          /* failed / not ready after being ready */
} drv_ras_replica_state_t;

typedef struct drv_ras_replica {
    drv_ras_replica_state_t state;
    int64_t created_ms;
} drv_ras_replica_t;

/* Choose up to `count` replicas to delete: pending first, then failed, then
 * ready; newest first within each (ties: the higher index). Starting
 * replicas are never chosen. Writes their indices to out[0..returned) and
 * returns how many were chosen (fewer than count when only starting ones
 * remain). */
size_t drv_ras_pick_victims(const drv_ras_replica_t *replicas, size_t n, size_t count,
                            size_t *out);

#endif
