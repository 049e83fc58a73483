/* rng.h — the small, documented PRNG the scheduler and drover-sim use:
 * xoshiro256** (Blackman & Vigna, 2018, public domain algorithm), seeded
 * by running splitmix64 over a 64-bit seed, as the authors recommend.
 * Bounded draws use Lemire's multiply-and-reject method, so they are
 * unbiased. Same seed -> same stream on every platform (pure 64-bit
 * integer arithmetic). A generator is a plain value owned by its user;
 * nothing here is shared or locked.
 */
#ifndef DRV_SCHED_RNG_H
#define DRV_SCHED_RNG_H

#include <stdint.h>

typedef struct drv_rng {
    uint64_t s[4];
} drv_rng_t;

static inline uint64_t drv_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline void drv_rng_seed(drv_rng_t *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = drv_splitmix64(&x);
}

static inline uint64_t drv_rng_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* xoshiro256**: the next 64 random bits. */
static inline uint64_t drv_rng_next(drv_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t result = drv_rng_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = drv_rng_rotl(s[3], 45);
    return result;
}

/* Uniform in [0, n); n >= 1 (Lemire, "Fast random integer generation in an
 * interval", 2019). */
static inline uint64_t drv_rng_below(drv_rng_t *r, uint64_t n)
{
    unsigned __int128 m = (unsigned __int128)drv_rng_next(r) * n;
    uint64_t l = (uint64_t)m;
    if (l < n) {
        uint64_t t = (0 - n) % n;
        while (l < t) {
            m = (unsigned __int128)drv_rng_next(r) * n;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double drv_rng_double(drv_rng_t *r)
{
    return (double)(drv_rng_next(r) >> 11) * 0x1.0p-53;
}

#endif
