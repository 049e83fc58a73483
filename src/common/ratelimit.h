/* ratelimit.h — failed authentications, limited per source address
 * (issue 18, item 3), on droverd's API (api/http.c) and inference
 * listener and on drover-gateway (gateway/serve.c): a token bucket per address (rate tokens a second,
 * at most burst), one token spent by each failed authentication (an
 * answer of 401); when an address has none left its failures are
 * answered 429 with Retry-After instead. Successful requests never touch
 * it, so a client with a good credential is unaffected by its neighbours'
 * (or its own earlier) failures. Bounded memory: at most cap addresses,
 * in a hash table; a new address when it is full evicts the least
 * recently failing one. Thread-safe (its own mutex, no I/O under it). */
#ifndef DRV_COMMON_RATELIMIT_H
#define DRV_COMMON_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

#define DRV_RL_RATE 10.0      /* default: failures a second refilled per address */
#define DRV_RL_BURST 20.0     /* default: failures an address may make at once */
#define DRV_RL_CAP 4096       /* default: addresses tracked */

typedef struct drv_ratelimit drv_ratelimit_t;

/* rate > 0, burst >= 1, cap >= 1; NULL on OOM. */
drv_ratelimit_t *drv_ratelimit_create(double rate, double burst, size_t cap);
void drv_ratelimit_destroy(drv_ratelimit_t *rl);

/* A failed authentication from addr at now_ms (a monotonic clock): 0 when
 * the address had a token (spent: answer the 401), -1 when it had none
 * (answer 429; *retry_after_s, >= 1, says when the next token comes). */
int drv_ratelimit_fail(drv_ratelimit_t *rl, const char *addr, int64_t now_ms,
                       int *retry_after_s);

/* "RATE/BURST" (failures a second, 0 < RATE <= 1e6; at once, 1..1000000)
 * or "off" (*rate 0): the --auth-fail-limit of droverd and drover-gateway.
 * -1 when malformed. */
int drv_ratelimit_parse(const char *s, double *rate, int *burst);

/* Addresses tracked now (for tests and /metrics). */
size_t drv_ratelimit_tracked(drv_ratelimit_t *rl);

#endif
