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
 * SLO mode (cfg->ttft_slo_ms > 0 or cfg->e2e_slo_ms > 0; see "SLO-aware
 * sizing" below): rules 4 and 6 size on the predicted TTFT (and end-to-end
 * time: the wait plus the hold time's p99, mean + 2.33 sd of admit -> done,
 * vs e2e_slo_ms; the larger need wins) instead of target_concurrency once the
 * service model has learned enough (DRV_RAS_SLO_MIN_SAMPLES completions,
 * DRV_RAS_SLO_WARMUP_MS since the first); before that, and without
 * ttft_slo_ms, everything is as above (the measurements are then unused).
 *
 * SLO-aware sizing. The caller also feeds, when it can:
 *   drv_ras_observe_arrival()  each request the gateway receives (its prompt
 *                              tokens): the arrival rate and mean prompt of
 *                              the history and of the burst window;
 *   drv_ras_observe_done()     each request a replica completed: prompt and
 *                              generated tokens, admit -> first token and
 *                              admit -> done on the replica, and the
 *                              replica's concurrency limit (its slots).
 *   drv_ras_observe_counters() the same as running totals (droverd's gateway).
 * From these the state learns, as exponentially weighted means over
 * completions (weight DRV_RAS_SLO_ALPHA; a plain mean for the first
 * 1 / DRV_RAS_SLO_ALPHA), each replica's service rate: the
 * first-token cost per prompt token (prefill tokens/s), the decode rate per
 * sequence (tokens/s), the mean time a request holds a slot E[S] and the
 * first-token time's mean and spread. A replica count n is then an M/M/c
 * queue of c = n x slots servers, offered a = lambda x E[S] (E[S] adjusted
 * to the prompts now arriving at the learned prefill rate); the gateway
 * wait W has P(W > t) = ErlangC(c, a) exp(-(c / E[S] - lambda) t), and the
 * predicted TTFT p99 is the smallest t + first-token p99 (mean + 2.33 sd)
 * with P(W > t) <= 1 %. drv_ras_slo_need() gives the smallest n whose
 * prediction is within ttft_slo_ms (max_replicas when none is; when the
 * first token alone takes the SLO, the smallest n with no wait at the
 * quantile). lambda is the larger of the history's arrival rate and the
 * burst window's (less DRV_RAS_SLO_BURST_SD standard deviations, Poisson's x the dispersion:
 * noise is no burst), so a burst raises the need at once. Scale-down
 * (rule 6) goes no lower than the largest need at the rate seen (lambda,
 * scaled ahead as it was then: see "Scale ahead") in the last
 * DRV_RAS_SLO_HOLD_BUCKETS minutes, as far as the rate reached it: each
 * minute's need scaled ahead counts, once scale_down_delay_seconds and a
 * cold start (the learned one, else DRV_RAS_SLO_COLD_PRIOR_S) have passed
 * after it (whole minutes), at most as the largest need at the rate seen
 * (need_seen) from that minute to then (a scale-ahead the rate did not
 * live up to is not kept for the hour; one it did is). Nor does it go
 * below the need, with the model of now, at the largest rate seen in them
 * (recorded from the first pass, before the model is ready) (`held`): a
 * cold start takes minutes, so capacity released between bursts is not
 * back when the next one comes. Each minute's rate counts there at most
 * as the offered load seen in it (lambda x E[S], recorded once the model
 * is ready) over E[S] now: a rate seen while requests were short holds,
 * once they are long, only the load it brought (`held_rate`).
 *
 * Floor without a second delay (since 2026-12-07, issue 20's ties). The
 * scale-down delay keeps the count at the largest need of the passes of
 * the last scale_down_delay_seconds; the memory above (`held`) is itself
 * the floor of an hour. Before, the delay also ran on that floor: when it
 * fell (a minute left the hour, a cap applied) the count waited the whole
 * delay again, though no pass had needed more for longer (conv-gamma2.8:
 * 22 stood five minutes after the floor and every need had fallen to 17).
 * Once the model has sized every pass of the delay's window (whole
 * minutes, within the memory's hour), a scale-down goes at once to the
 * largest of: the need of the minutes the delay covers (per minute, as
 * sized: `recent_max`), the floor of this minute and the
 * DRV_RAS_SLO_FLOOR_MINUTES before it (the floor moves with E[S] pass to
 * pass: its dips are no reason to go), and the floor now; else the rule
 * above (the delay on both). The delay's promise is kept: the count never
 * goes below what a pass of the delay's window needed.
 *
 * Full batches. A request waits only when every slot is busy, and then
 * runs in a full batch. With drv_ras_observe_done_batch() (the batch each
 * completion ran in), or the same points as totals (drv_ras_counters_t
 * batch_*: droverd's gateway), the state fits the decode time per generated token
 * y against x = batch - 1 as y = y0 (1 + beta x) (weighted means; none
 * until DRV_RAS_SLO_MIN_SAMPLES and a variance of x of at least
 * DRV_RAS_SLO_BATCH_MIN_VAR), and the end-to-end target's queue is sized
 * with E[S] and the hold time's p99 x (1 + beta (slots - 1)) / (1 + beta
 * mean x). The TTFT target keeps E[S] as learned. Rule 4 (burst) fires when the need is at least panic_factor x
 * current; rule 0a's cap applies unchanged, and rule 0b is not needed:
 * arrivals, unlike in-flight + queued, do not grow with the backlog of a
 * cold start.
 *
 * Scale ahead. Replicas asked for now serve one cold start later, so a
 * rising rate is sized for where it will be then: during a burst (the
 * burst window's rate beyond noise above the history's), lambda is
 * extrapolated along the line from the history's rate (centred half a
 * history back) to the burst window's (half a burst window back) over the
 * learned cold start, by at most DRV_RAS_SLO_AHEAD_MAX x the burst's
 * excess (lambda_burst - lambda_history). The cold start is learned by
 * drv_ras_decide itself, with no input of its own: the time from a
 * scale-up decision while none was on its way to the pass that finds none
 * on its way again (the slowest of that wave: an upper bound), a weighted
 * mean (DRV_RAS_COLD_ALPHA); not a wave a scale-down removed before any of
 * it was placed (the victims are the unplaced first). None learned yet: no
 * scale-ahead.
 *
 * Trend. A slow rise (no burst window beyond noise) also meets replicas
 * sized for before it, one cold start late. With C the learned cold start
 * (DRV_RAS_SLO_COLD_PRIOR_S until one is measured), r1 the arrival rate of
 * the last C seconds and r0 of the C before (complete 10 s buckets of the
 * last DRV_RAS_SLO_TREND_BUCKETS), when r1 - r0 is beyond
 * DRV_RAS_SLO_BURST_SD sds (Poisson's x the dispersion) and the history's rate now is still at
 * least r1 (the rise is not over), the need is sized at r1 +
 * DRV_RAS_SLO_AHEAD_MAX x (r1 - r0): the rise of the last cold start once
 * more (lambda_trend; lambda_ahead when larger). The scale-down memory
 * keeps the need without it (need_no_trend): a rise is no reason to hold
 * replicas for an hour.
 *
 * Tail. The first token of a long prompt can take the TTFT target alone,
 * and a replica's batch slows it (processor sharing: 1 + beta (k - 1) at
 * a batch of k, beta learned as for full batches): with fewer replicas
 * the batches are fuller and more long prompts miss, though none waits.
 * The first-token p99 above (mean + 2.33 sd, a normal tail) sees neither.
 * So the state also keeps the prompt lengths of the arrivals, a histogram
 * (DRV_RAS_SLO_TAIL_BINS bins of 1/8 octave, the last ~DRV_RAS_SLO_TAIL_N
 * arrivals), and learns each completion's first-token time at a batch of
 * one, f / (1 + beta (b - 1)), as a line c0 + c1 x prompt (weighted least
 * squares over the last ~DRV_RAS_SLO_TAIL_N completions; used once
 * 1 / DRV_RAS_SLO_ALPHA completions have carried their batch). At n
 * replicas a request's batch is 1 + lambda E[S] / n (at most the slots),
 * and its TTFT misses when its first token there plus the M/M/c wait
 * exceeds the target: the predicted share of misses is the histogram's
 * sum of P(W > slo - first) (1 when first > slo). The TTFT target's need
 * is at least the smallest n whose share is within DRV_RAS_SLO_TAIL_EXTRA
 * of the share at max_replicas (what no more replicas avoid): the misses
 * a count can remove are kept under 2 % (drv_ras_slo_tail_need;
 * `need_tail`). With drv_ras_observe_done_batch the line is used once
 * 1 / DRV_RAS_SLO_ALPHA completions have carried their batch; with the
 * gateway's totals (drv_ras_observe_counters: the prompt histogram and the
 * sums of p, f, p^2, p f of the completions with a prompt estimate) once as
 * many completions came from them, f taken at a batch of one as
 * f / (1 + beta x) with x the mean of the batch points in the same
 * difference (the totals pair no prompt with its batch; none in it: the
 * learned mean x; beta 0 while none is learned). Without those totals the
 * tail is off (c1 = 0).
 *
 * Surprise. A step — the rate jumps within seconds to several times
 * anything of the last hour and falls back within a cold start — meets
 * the replicas sized for before it, whatever is started then; only
 * capacity standing before it serves it. A workload that has shown steps
 * will show more, so the state learns how large they are. The baseline b
 * is the median arrivals per minute of the complete minutes of the last
 * DRV_RAS_SLO_HOLD_BUCKETS (the typical rate: steps are minutes of the
 * hour, not its median; none until DRV_RAS_SLO_BASE_MINUTES). A pass sees
 * a step when the rate of the newest DRV_RAS_SLO_STEP_BUCKETS complete 10 s
 * buckets, less DRV_RAS_SLO_BURST_SD sds (the same), is at least
 * DRV_RAS_SLO_STEP_MIN x b (`step`); with the model ready it records the
 * step's size as a need ratio, need_seen / (the need at b: the step as
 * seen, not scaled ahead), the
 * largest per minute. The standing need is the need at today's b times
 * the largest ratio of the last DRV_RAS_SLO_HOLD_BUCKETS minutes times
 * DRV_RAS_SLO_STEP_MARGIN (rounded up, at most max_replicas), kept like
 * the need memory (the largest per
 * minute, for as long, and no longer than a step is in the last hour):
 * rule 6 scales up to it and does not scale down below it (`surge_need`).
 * The margin (2026-12-07): the steps seen are a sample, and the next can
 * be larger — a service's bursts are so many times its rate at the time,
 * which varies (the burst variants' windows: 1.5-2.5 x one another), so a
 * first step sized for exactly left the next, larger one to meet the
 * replicas standing before it, and its capacity came a cold start after
 * it (conv-mix14: 17 requests/s for 45 s, then 25 for 2.5 minutes at 11
 * standing replicas, 80.98 % against fixed-peak's 91.34 %). 1.5 x was
 * chosen on every set but "fresh13" (1.25, 1.75, 2 tried;
 * docs/benchmarks.md): it costs ~10 % more GPU-hours on stepped traffic
 * and nothing on traffic without steps.
 * Being the largest of any pass, it keeps a pass's transient too: just
 * after a step, the step's queued completions lift E[S] and the need at b
 * doubles for seconds (conv-mix14: 36 stand where 14-18 would; left as
 * is: rules without it met the goal on fewer traces, docs/benchmarks.md,
 * issue 20's posthold notes). Without steps (steady or Poisson traffic,
 * longer prompts, clustered arrivals: their 30 s rates stay under 2 x
 * the median minute) nothing is recorded and nothing changes. The
 * constants below were chosen on the "tune" half of bench/serve/variants,
 * for the surprise on every set but "fresh3", for the tail on every set
 * but "fresh4", the need memory's cap (as far as the rate reached it) and
 * the step ratio at the rate seen on every set but "fresh6", the rate
 * memory's cap (the load seen) on every set but "fresh7", the
 * dispersion on every set but "fresh8"; its phase-free form on its spread
 * over phases alone, checked on every set but "fresh9"; the floor's
 * minutes (DRV_RAS_SLO_FLOOR_MINUTES) on every set but "fresh10" and
 * "fresh11" (docs/benchmarks.md).
 *
 * Clustered arrivals. "Beyond noise" (the burst window over the history,
 * the trend's rise, the step) is measured against the arrivals' own noise,
 * not Poisson's: the state learns the dispersion D: for every minute-long
 * span of the trend memory (one starting at each 1 s sub-bucket,
 * DRV_RAS_SLO_SUB_MS), the variance over the mean of the arrival counts
 * of the 60 10 s windows starting in it (one a second, the last ending 9 s
 * into the next minute), and the median of those spans (a step or a
 * burst's edge is a few of them, not the median), at least 1 (Poisson);
 * 1 until spans over DRV_RAS_SLO_DISP_MINUTES minutes with
 * DRV_RAS_SLO_DISP_MIN_N arrivals each are seen (drv_ras_slo_dispersion).
 * Spans and windows start every second, so where 10 s buckets or minutes
 * fall does not change it (before 2026-12-07 it was the median over
 * whole minutes of their six 10 s buckets' counts, and the same arrivals
 * offset by 0-55 s read a minute anywhere from half to twice as variable:
 * issue 20's phase; t/unit/test_autoscale_disp.c). Spans that began
 * before the first arrival are not spans seen (the seconds before the
 * traffic began are no clustering: droverd's clock, unlike the
 * simulator's, rarely begins at the first request; issue 20's loop,
 * docs/benchmarks.md). Every Poisson variance above is D times as large. Clustered arrivals (gamma gaps of CV c: D about c^2) then do
 * not pass for bursts: before (2026-12-06) their busy seconds were sized
 * for, scaled ahead and held by the rate memory for the hour (conv-gamma3:
 * 27 replicas where a fixed 22 met the SLO). Steady, Poisson and stepped
 * traffic stay near 1 and change nothing (conv's D is about 1).
 *
 * Peaked queues (2026-12-07, issue 20's gamma family). The M/M/c wait
 * above is Poisson's: clustered arrivals wait longer at the same count.
 * Once the dispersion D has been learned over the trend memory's whole
 * span (DRV_RAS_SLO_TREND_BUCKETS x 10 s since the first arrival; before,
 * the few spans seen can be a step's edge: conv-mix8 read D 25 at minute
 * 3, and sized on it the need memory held max_replicas for the hour), the
 * queue is sized as peaked traffic of peakedness z = D (Hayward's
 * approximation: the arrivals as batches of z): ErlangC of c / z servers
 * offered a / z, P(W > t) = that x exp(-(c / E[S] - lambda) t / z), for
 * every need (TTFT, end to end, the tail; drv_ras_slo_peakedness,
 * `peakedness`). Poisson traffic (D 1) is sized as before. Without it the
 * hour's floor, the need at the largest rate seen, left 10 replicas where
 * gamma arrivals of CV 2 met a minute 30 % above that rate (conv-gamma2,
 * conv-gamma2.1: 98.7 and 97.9 % against fixed-peak's 99.8 %). z = D
 * against z = (1 + D) / 2 (GI/M/c's heavy-traffic form) was chosen on the
 * seen sets (docs/benchmarks.md); the fresh12 set was fixed before.
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
#include "common/promptlen.h"

#define DRV_RAS_BUCKETS 60          /* buckets spanning traffic_history_seconds */
#define DRV_RAS_BURST_BUCKETS 6     /* the newest 10%: the burst window */
#define DRV_RAS_PANIC_FACTOR 2.0    /* default: burst >= 2x capacity reacts at once */
#define DRV_RAS_SCALE_UP_RATE 20    /* default max_scale_up_rate (rule 0a) */
#define DRV_RAS_SLO_MIN_SAMPLES 20  /* completions before the SLO model is used, ... */
#define DRV_RAS_SLO_WARMUP_MS 120000 /* ... and time since the first (early completions
                                        are the short requests: E[S] biased low) */
#define DRV_RAS_SLO_ALPHA 0.005      /* weight of one completion in the learned means */
#define DRV_RAS_SLO_QUANTILE 0.99   /* the TTFT quantile kept under ttft_slo_ms */
#define DRV_RAS_TTFT_SLO_MAX_MS 600000   /* the API's upper bound (10 minutes) */
#define DRV_RAS_E2E_SLO_MAX_MS 3600000   /* e2e_slo_ms's (1 hour) */
#define DRV_RAS_SLO_HOLD_BUCKETS 60 /* SLO mode's scale-down memory: 30 ... */
#define DRV_RAS_SLO_HOLD_WIDTH_MS 60000  /* ... one-minute buckets of the largest need */
#define DRV_RAS_SLO_HOLD_RANK 1     /* scale down to no less than the largest of them */
#define DRV_RAS_SLO_BURST_SD 2.0    /* a burst rate counts beyond this many sds (Poisson's x
                                       the learned dispersion: "Clustered arrivals") */
#define DRV_RAS_SLO_AHEAD_MAX 1.0   /* scale-ahead: at most this many x the burst's excess */
#define DRV_RAS_SLO_BATCH_MIN_VAR 0.25   /* full batches: the batch's variance needed to learn */
#define DRV_RAS_COLD_ALPHA 0.2      /* weight of one measured cold start (plain mean first) */
#define DRV_RAS_SLO_TREND_BUCKETS 64     /* the trend's memory of arrivals: 64 ... */
#define DRV_RAS_SLO_TREND_WIDTH_MS 10000 /* ... buckets of 10 s (10 2/3 minutes) */
#define DRV_RAS_SLO_SUB_MS 1000          /* ... each kept as 1 s sub-buckets (the dispersion's
                                            10 s windows start every second) ... */
#define DRV_RAS_SLO_TREND_SUBS ((DRV_RAS_SLO_TREND_BUCKETS + 1) * \
                                (DRV_RAS_SLO_TREND_WIDTH_MS / DRV_RAS_SLO_SUB_MS))
                                         /* ... one 10 s bucket more (the oldest whole) */
#define DRV_RAS_SLO_COLD_PRIOR_S 180.0   /* the trend's cold start until one is measured */
#define DRV_RAS_SLO_TAIL_BINS DRV_PROMPTLEN_BINS   /* tail: prompt lengths in 1/8-octave
                                       bins of 1 + tokens (common/promptlen.h) */
#define DRV_RAS_SLO_TAIL_N 5000.0   /* ... over about the last 5000 arrivals (decaying weights) */
#define DRV_RAS_SLO_TAIL_EXTRA 0.02 /* tail: removable misses kept under 2 % of the requests */
#define DRV_RAS_SLO_STEP_BUCKETS 3  /* surprise: a step is the newest 3 trend buckets' rate (30 s) ... */
#define DRV_RAS_SLO_STEP_MIN 2.0    /* ... at least 2 x the baseline (beyond noise) */
#define DRV_RAS_SLO_STEP_MARGIN 1.5 /* surprise: stand for steps 1.5 x the largest seen */
#define DRV_RAS_SLO_DISP_MINUTES 3  /* dispersion: the median of spans starting over at least
                                       2 minutes (121 minute-long spans, 3 minutes seen) ... */
#define DRV_RAS_SLO_DISP_MIN_N 6.0  /* ... with at least 6 arrivals each (else Poisson's 1) */
#define DRV_RAS_SLO_BASE_MINUTES 2  /* the baseline: median minute of the hour, once 2 are complete */
#define DRV_RAS_SLO_FLOOR_MINUTES 1 /* a scale-down: the floor's largest of this minute and 1 before */

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
    int ttft_slo_ms;                 /* > 0: SLO-aware sizing (see above); 0: off */
    int e2e_slo_ms;                  /* > 0: the same for the end-to-end time; 0: off */
    int metric;                      /* DRV_RAS_METRIC_*: what the load is (drv_ras_llm_load) */
    double target_kv_cache;          /* kv_cache: each replica's KV-cache usage aimed at */
} drv_ras_config_t;

/* LLM-aware load (autoscale.metric; issue 16). The load drv_ras_observe()
 * takes is in-flight + queued requests at the gateway (concurrency, the
 * default); with a model server's own counts (its metrics_path, as each
 * ready replica last reported them) it can be instead:
 *   queue     the servers' running + waiting requests, summed: sized by
 *             target_concurrency like the gateway's (and it sees requests
 *             that did not come through the gateway, and each server's
 *             own queue);
 *   kv_cache  the KV-cache usage (0..1), summed over the replicas, over
 *             target_kv_cache, times target_concurrency: so rule 6's
 *             ceil(load / target_concurrency) is the replicas whose usage
 *             would each be target_kv_cache.
 * drv_ras_llm_load() maps n such samples to that load; with no sample (no
 * replica ready, or none reports the metric) it is the gateway's load. */
#define DRV_RAS_METRIC_CONCURRENCY 0
#define DRV_RAS_METRIC_QUEUE 1
#define DRV_RAS_METRIC_KV_CACHE 2
#define DRV_RAS_TARGET_KV_CACHE 0.8

typedef struct drv_ras_llm_sample {
    double running, waiting;         /* requests */
    double kv_cache;                 /* 0..1; < 0: not reported */
} drv_ras_llm_sample_t;

double drv_ras_llm_load(const drv_ras_config_t *cfg, const drv_ras_llm_sample_t *s, size_t n,
                        double gateway_load);

/* The learned service model of one deployment's replicas (SLO mode). */
typedef struct drv_ras_service {
    double n;                        /* completions seen (saturates) */
    double prompt, gen;              /* weighted means over completions: tokens */
    double first_s, first_sq;        /* admit -> first token: mean, mean of squares */
    double service_s;                /* admit -> done: the time a request holds a slot */
    double service_sq, n_sq;         /* its mean square, over completions that carried it */
    double slots;                    /* the replicas' concurrency limit (last seen) */
    /* full batches: weighted means over completions that carried their batch
     * b (x = b - 1) and decode seconds per generated token y */
    double nb, bx, by, bxx, bxy;
    int64_t first_ms;                /* the first completion's time */
    /* tail: weighted means over completions of the prompt p and the first
     * token at a batch of one f0 (f / (1 + beta x)): p, f0, p^2, p f0 */
    double nt, tp, tf, tpp, tpf;
    double ntc;                      /* of nt, completions from counters */
} drv_ras_service_t;

/* The same measurements as running totals (what droverd's gateway keeps
 * per deployment): drv_ras_observe_counters() feeds the difference since
 * its last call. Token sums may be 0 (unknown): the model then goes by
 * time alone. droverd's gateway estimates prompts from the body's length
 * (gateway/prompt.h) and counts only the requests that have one
 * (`prompted`); with its histogram and tail sums the tail is on. It
 * counts generated tokens where an answer shows them (gateway/gentok.h:
 * `gen_n`) and each answer's batch: with the batch sums the full-batch
 * fit (beta) is learned as from drv_ras_observe_done_batch. */
typedef struct drv_ras_counters {
    uint64_t arrivals;               /* requests received */
    uint64_t completed;              /* answered by a replica */
    double prompt_tokens;            /* sum over arrivals (those `prompted` when it is
                                        counted); 0: unknown */
    uint64_t prompted;               /* arrivals with a prompt estimate; 0: prompt_tokens
                                        is over every arrival */
    double prompt_hist[DRV_RAS_SLO_TAIL_BINS];  /* those arrivals per tail bin
                                        (drv_ras_slo_tail_bin); all 0: none counted */
    uint64_t tail_n;                 /* completed with a prompt estimate: count, ... */
    double tail_p, tail_f_s;         /* ... sums of the prompt p and admit -> first byte f, */
    double tail_pp, tail_pf;         /* ... of p^2 and of p f (tokens, seconds) */
    double gen_tokens;               /* sum over completed (those `gen_n` when it is
                                        counted); 0: unknown */
    uint64_t gen_n;                  /* completed with a generated count; 0: gen_tokens is
                                        over every completed */
    double first_s, first_sq_s2;     /* admit -> first byte: sum, sum of squares */
    double service_s;                /* admit -> done: sum */
    double service_sq_s2;            /* its sum of squares; 0: unknown (sd = mean assumed) */
    int slots;                       /* a replica's concurrency limit; 0: unknown */
    /* full batches: completions with their batch b (the mean in flight on
     * the replica over admit -> done) and at least 2 generated tokens, as
     * drv_ras_observe_done_batch's points: count, sums of x = b - 1, of y
     * = decode seconds per generated token, x^2 and x y; 0: none */
    uint64_t batch_n;
    double batch_x, batch_y, batch_xx, batch_xy;
} drv_ras_counters_t;

/* What the model predicts, for status pages, reasons and tests. */
typedef struct drv_ras_slo_estimate {
    bool ready;                      /* enough completions seen */
    double lambda;                   /* requests/s seen (max of history and burst beyond
                                        noise); set with an SLO even when not ready */
    double mean_service_s;           /* E[S] for the prompts now arriving */
    double first_p99_s;              /* first-token time on a replica, p99 */
    double replica_rps;              /* requests/s one replica serves (slots / E[S]) */
    double replica_tps;              /* tokens/s one replica processes (prompt + generated) */
    double prefill_tps, decode_tps;  /* learned: prompt tokens/s to first token, per sequence */
    int need;                        /* smallest count within the SLO (max_replicas if none) */
    int need_history;                /* the same at the history's rate alone (no burst) */
    int need_seen;                   /* the same at the rate seen now (burst window's beyond
                                        noise, else the history's), not scaled ahead */
    int held;                        /* the scale-down floor: the larger of the largest
                                        need of the last DRV_RAS_SLO_HOLD_BUCKETS minutes
                                        (scaled ahead, as far as the rate reached it), the
                                        need, with the model of now, at held_rate, and
                                        surge_need (set by drv_ras_decide) */
    int held_memory;                 /* the same without surge_need: the need and rate
                                        memories' floor (drv_ras_decide) */
    double held_rate;                /* DRV_RAS_SLO_HOLD_RANK-th largest rate seen (lambda) in
                                        the last DRV_RAS_SLO_HOLD_BUCKETS minutes, the minutes
                                        before the model was ready too, each at most its
                                        minute's load seen over E[S] now (drv_ras_decide) */
    double predicted_p99_s;          /* predicted TTFT p99 at `need` (INFINITY if over) */
    double service_p99_s;            /* a slot's hold time, p99 (for the prompts now arriving) */
    double predicted_e2e_p99_s;      /* predicted end-to-end p99 at `need` (e2e_slo_ms) */
    double cold_start_s;             /* learned (0: none yet) */
    double lambda_ahead;             /* the rate `need` is sized for (>= lambda; the
                                        scale-up reasons name it) */
    int need_no_trend;               /* `need` without the trend (what the memory keeps) */
    double lambda_trend;             /* the trend's rate one cold start ahead (0: no
                                        rise beyond noise; see "Trend") */
    double batch_slowdown;           /* learned: y = y0 (1 + slowdown x), 0: none learned */
    double full_batch_factor;        /* E[S] at a full batch / E[S] as learned (>= 1) */
    double dispersion;               /* the arrivals' learned variance / mean per 10 s (>= 1;
                                        1: Poisson, or not learned yet; see "Clustered
                                        arrivals") */
    double peakedness;               /* z the queue is sized with (>= 1; 1: Poisson) */
    double baseline;                 /* surprise's b: the median minute's rate (0: none yet) */
    double step;                     /* this pass's 30 s rate beyond noise / b (0: no b) */
    double surge;                    /* the largest step need ratio of the last hour (0:
                                        none; drv_ras_decide; see "Surprise") */
    int surge_need;                  /* the standing need it gives (0: none; drv_ras_decide) */
    double tail_c0, tail_c1;         /* tail: first token at a batch of one = c0 + c1 prompt
                                        (seconds; c1 = 0: not learned) */
    double tail_floor;               /* the predicted share over the TTFT target at
                                        max_replicas (no count avoids them) */
    int need_tail;                   /* the TTFT target's need by the tail (0: none) */
} drv_ras_slo_estimate_t;

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
    /* SLO mode: arrivals per bucket (the same epochs as ring) and the model */
    int64_t arr_epoch[DRV_RAS_BUCKETS];
    double arr_n[DRV_RAS_BUCKETS], arr_prompt[DRV_RAS_BUCKETS];
    int64_t init_ms;                 /* when the memory started: the rate's first window */
    int64_t first_arrival_ms;        /* the first arrival's time (-1: none yet): the
                                        dispersion's minutes begin at or after it */
    int64_t need_epoch[DRV_RAS_SLO_HOLD_BUCKETS];
    double need_max[DRV_RAS_SLO_HOLD_BUCKETS];   /* largest SLO need (need_no_trend: scaled
                                                    ahead) per minute */
    int64_t seen_epoch[DRV_RAS_SLO_HOLD_BUCKETS];
    double seen_max[DRV_RAS_SLO_HOLD_BUCKETS];   /* largest need_seen per minute (what the
                                                    rate reached: the memory's cap) */
    int64_t rate_epoch[DRV_RAS_SLO_HOLD_BUCKETS];
    double rate_max[DRV_RAS_SLO_HOLD_BUCKETS];   /* largest rate seen per minute (SLO mode) */
    int64_t load_epoch[DRV_RAS_SLO_HOLD_BUCKETS];
    double load_max[DRV_RAS_SLO_HOLD_BUCKETS];   /* largest offered load (rate x E[S]) per
                                                    minute, once the model is ready */
    int64_t base_epoch[DRV_RAS_SLO_HOLD_BUCKETS];
    double base_n[DRV_RAS_SLO_HOLD_BUCKETS];     /* arrivals per minute (surprise's baseline) */
    int64_t ratio_epoch[DRV_RAS_SLO_HOLD_BUCKETS];
    double ratio_max[DRV_RAS_SLO_HOLD_BUCKETS];  /* largest step need ratio per minute */
    int64_t surge_epoch[DRV_RAS_SLO_HOLD_BUCKETS];
    double surge_max[DRV_RAS_SLO_HOLD_BUCKETS];  /* largest standing need per minute */
    int64_t recent_epoch[DRV_RAS_SLO_HOLD_BUCKETS];
    double recent_max[DRV_RAS_SLO_HOLD_BUCKETS]; /* largest SLO need (as sized) per minute:
                                                    the scale-down delay's window */
    int64_t floor_epoch[DRV_RAS_SLO_HOLD_BUCKETS];
    double floor_max[DRV_RAS_SLO_HOLD_BUCKETS];  /* largest floor (slo.held) per minute */
    int64_t slo_since_ms;            /* the first pass the SLO model sized (-1: none yet) */
    int64_t trend_epoch[DRV_RAS_SLO_TREND_SUBS];
    double trend_n[DRV_RAS_SLO_TREND_SUBS];      /* arrivals per 2.5 s sub-bucket (the
                                                    trend, the step, the dispersion) */
    double tail_hist[DRV_RAS_SLO_TAIL_BINS];     /* prompt lengths of the arrivals (tail) */
    double tail_w;                   /* the next arrival's weight (grows: older ones decay) */
    drv_ras_service_t svc;
    drv_ras_counters_t last_counters;    /* drv_ras_observe_counters' previous totals ... */
    int64_t last_counters_ms;            /* ... and when (its arrivals spread from there) */
    bool have_counters;
    /* scale-ahead: the cold start, learned from the decisions (see above) */
    int64_t wave_since_ms;           /* -1: no scale-up wave on its way */
    double cold_start_s;             /* weighted mean; 0: none measured */
    int cold_starts;                 /* measured (saturates at 1000) */
} drv_ras_state_t;

/* The outcome of one drv_ras_decide() call. */
typedef struct drv_ras_decision {
    int desired;                     /* replicas wanted now */
    bool changed;                    /* desired != current */
    int recommended;                 /* clamp(ceil(load/target)) before delays */
    double load;                     /* mean in-flight+queued over the history */
    double burst_load;               /* same over the burst window */
    drv_ras_slo_estimate_t slo;      /* SLO mode: the model's prediction (else zero) */
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

/* SLO mode's measurements (see "SLO-aware sizing"). A zeroed state is
 * initialised by them too. Negative or NaN inputs count as 0; a completion
 * with service_s <= 0 is ignored. */
void drv_ras_observe_arrival(drv_ras_state_t *s, int64_t now_ms, double prompt_tokens);
void drv_ras_observe_done(drv_ras_state_t *s, int64_t now_ms, double prompt_tokens,
                          double gen_tokens, double first_token_s, double service_s, int slots);
/* The same with the batch the request ran in: the mean count of requests
 * in flight on its replica (itself included) over admit -> done; <= 0:
 * unknown (drv_ras_observe_done's). From the decode time per generated
 * token against it the state learns how a fuller batch slows a request
 * (see "Full batches"). */
void drv_ras_observe_done_batch(drv_ras_state_t *s, int64_t now_ms, double prompt_tokens,
                                double gen_tokens, double first_token_s, double service_s,
                                int slots, double batch);

/* The difference between `totals` and the previous call's: its arrivals
 * (their prompt tokens spread evenly: the mean of the `prompted` ones
 * when those are counted) are spread evenly over the time since the
 * previous call (at most the last traffic_history: a longer gap's land
 * in it), each bucket getting its share, and, by the histogram's
 * differences, go into the tail's histogram (the same weights as single
 * arrivals'). (Put all in now_ms's bucket, a caller whose calls come
 * seconds apart makes a burst of them: droverd's controller, whose
 * passes came up to 5 s apart, read the burst window's rate up to twice
 * the real one and scaled ahead on it; bench/serve/loop.) its completions are learned as that many of their mean
 * (generated tokens: the mean of the `gen_n` ones when those are counted),
 * its tail sums as that many points of the tail's line, and its batch sums
 * as that many points of the full-batch fit at their means (the same
 * weights as drv_ras_observe_done_batch's single points: a plain mean for
 * the first 1 / DRV_RAS_SLO_ALPHA, then each decaying the rest by
 * 1 - DRV_RAS_SLO_ALPHA). The first call only sets the baseline, as does
 * one whose totals went down (a restarted gateway). */
void drv_ras_observe_counters(drv_ras_state_t *s, int64_t now_ms,
                              const drv_ras_counters_t *totals);

/* The SLO model's estimate at now_ms for `cfg` (ttft_slo_ms > 0), using
 * the arrivals and completions in s (not changed). `target_concurrency`
 * stands in for the slots while none was reported. */
void drv_ras_slo_estimate(const drv_ras_config_t *cfg, const drv_ras_state_t *s, int64_t now_ms,
                          drv_ras_slo_estimate_t *out);

/* Scale-ahead's rate (see "Scale ahead"): lambda_burst extrapolated over
 * cold_start_s along the line from lambda_history (lag_s before it),
 * at most DRV_RAS_SLO_AHEAD_MAX x (lambda_burst - lambda_history) above
 * it; lambda_burst when it is not above lambda_history, or cold_start_s
 * or lag_s is not > 0. */
double drv_ras_slo_ahead(double lambda_history, double lambda_burst, double lag_s,
                         double cold_start_s);

/* Trend's rate (see "Trend") at now_ms over a cold start of cold_s seconds;
 * 0 when the rise is not beyond noise or the memory is too young. */
double drv_ras_slo_trend(const drv_ras_state_t *s, int64_t now_ms, double cold_s,
                         double lambda_now);

/* Dispersion at now_ms ("Clustered arrivals"): the median over the
 * minute-long spans of the trend memory, one starting each second, of the
 * variance over the mean of the counts of the 10 s windows starting in
 * them, one a second (1 for Poisson arrivals, more for clustered ones),
 * at least 1; 1 while spans over fewer than DRV_RAS_SLO_DISP_MINUTES
 * minutes are there. */
double drv_ras_slo_dispersion(const drv_ras_state_t *s, int64_t now_ms);

/* The peakedness the queue is sized with (see "Peaked queues"): the
 * dispersion given, once the arrivals have filled the trend memory (its
 * DRV_RAS_SLO_TREND_BUCKETS buckets since the first arrival), else 1. */
double drv_ras_slo_peakedness(const drv_ras_state_t *s, int64_t now_ms, double dispersion);

/* Surprise's baseline (see "Surprise") at now_ms: the median arrivals
 * per second of the complete minutes of the last DRV_RAS_SLO_HOLD_BUCKETS
 * since the memory started (a minute without arrivals counts as 0); 0
 * while fewer than DRV_RAS_SLO_BASE_MINUTES are complete. */
double drv_ras_slo_baseline(const drv_ras_state_t *s, int64_t now_ms);

/* Surprise's step at now_ms against baseline b (> 0): the arrival rate of
 * the newest DRV_RAS_SLO_STEP_BUCKETS complete trend buckets, less
 * DRV_RAS_SLO_BURST_SD sds (Poisson's x the dispersion), over b; 0 when b is not > 0. */
double drv_ras_slo_step(const drv_ras_state_t *s, int64_t now_ms, double b);

/* Tail's bin of a prompt of `tokens` tokens, and the prompt length a bin
 * stands for (its middle, in log scale): common/promptlen.h's, the bins
 * droverd's gateway counts in too. */
size_t drv_ras_slo_tail_bin(double tokens);
double drv_ras_slo_tail_tokens(size_t bin);

/* Tail's need (see "Tail"): the smallest n in [1, max_n] of replicas with
 * `slots` each for which the predicted share of requests over slo_s (the
 * first token at the batch of n replicas, c0 + c1 x prompt slowed by
 * 1 + beta x the others in flight, plus the M/M/c wait at lambda, es) is
 * at most the share at max_n (*floor_out) plus `tail`; max_n when none
 * is. hist: `bins` weights of drv_ras_slo_tail_bin's bins
 * (need not sum to 1). 0 when there is nothing to size on (no weight, c1
 * not > 0, lambda or es not > 0). */
int drv_ras_slo_tail_need(const double *hist, size_t bins, double lambda, double es, double c0,
                          double c1, double beta, int slots, double slo_s, double tail,
                          int max_n, double *floor_out);

/* Fold one measured cold start (seconds) into s's learned one. */
void drv_ras_learn_cold_start(drv_ras_state_t *s, double seconds);

/* The estimator alone: the smallest n in [1, max_n] of replicas with
 * `slots` each whose predicted TTFT p99 (M/M/c wait + first_p99_s, see
 * above) is within slo_s, for arrivals at lambda requests/s each holding a
 * slot mean_service_s; max_n when none is (its prediction in *pred_s:
 * INFINITY when even that is over). lambda <= 0: 1. */
int drv_ras_slo_need(double lambda, double mean_service_s, double first_p99_s, int slots,
                     double slo_s, int max_n, double *pred_s);

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
