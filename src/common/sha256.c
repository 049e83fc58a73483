/* sha256.c — see sha256.h. Straight from FIPS 180-4 §6.2: 64-byte blocks,
 * big-endian words, the message padded with 0x80, zeros and the bit length.
 * On x86-64 CPUs with the SHA extensions (SHA-NI: Intel since Ice Lake /
 * Goldmont, AMD since Zen) the blocks go through sha256rnds2/msg1/msg2,
 * chosen once at run time (cpuid); elsewhere the portable rounds below. The
 * two paths are checked against each other in t/unit/test_sha256.c. */
#include "common/sha256.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define DRV_SHA_NI 1
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }

static void block_generic(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

#ifdef DRV_SHA_NI
/* n blocks with the SHA extensions. The state is kept as ABEF / CDGH, the
 * message schedule as four vectors of four words (W[t-16..t-1]). */
__attribute__((target("sha,sse4.1"))) static void blocks_shani(uint32_t h[8],
                                                               const unsigned char *p, size_t n)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1);  /* CDAB */
    __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B);   /* EFGH */
    __m128i s0 = _mm_alignr_epi8(tmp, s1, 8);                                          /* ABEF */
    s1 = _mm_blend_epi16(s1, tmp, 0xF0);                                               /* CDGH */
    for (; n; n--, p += 64) {
        __m128i save0 = s0, save1 = s1, m[4];
        for (int i = 0; i < 16; i++) {
            if (i < 4)
                m[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
            else
                m[i & 3] = _mm_sha256msg2_epu32(
                    _mm_add_epi32(_mm_sha256msg1_epu32(m[i & 3], m[(i + 1) & 3]),
                                  _mm_alignr_epi8(m[(i + 3) & 3], m[(i + 2) & 3], 4)),
                    m[(i + 3) & 3]);
            __m128i msg = _mm_add_epi32(m[i & 3], _mm_loadu_si128((const __m128i *)&K[4 * i]));
            s1 = _mm_sha256rnds2_epu32(s1, s0, msg);
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(msg, 0x0E));
        }
        s0 = _mm_add_epi32(s0, save0);
        s1 = _mm_add_epi32(s1, save1);
    }
    tmp = _mm_shuffle_epi32(s0, 0x1B);                  /* FEBA */
    s1 = _mm_shuffle_epi32(s1, 0xB1);                   /* DCHG */
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(tmp, s1, 0xF0));   /* DCBA */
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(s1, tmp, 8));      /* HGFE */
}
#endif

/* -1 unknown yet, 0 portable, 1 SHA-NI; DROVER_SHA256=generic forces the
 * portable path (for the tests and for comparing). */
static atomic_int use_ni = -1;

#ifdef DRV_SHA_NI
/* SHA (CPUID.7.0:EBX bit 29) and SSE4.1 (CPUID.1:ECX bit 19), read with
 * cpuid itself: clang before 16 has no "sha" for __builtin_cpu_supports. */
static bool cpu_has_sha_ni(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)))
        return false;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
}
#endif

static bool have_ni(void)
{
    int v = atomic_load_explicit(&use_ni, memory_order_relaxed);
    if (v < 0) {
        v = 0;
#ifdef DRV_SHA_NI
        const char *force = getenv("DROVER_SHA256");
        v = cpu_has_sha_ni() && !(force && strcmp(force, "generic") == 0);
#endif
        atomic_store_explicit(&use_ni, v, memory_order_relaxed);
    }
    return v;
}

static void blocks(uint32_t h[8], const unsigned char *p, size_t n)
{
#ifdef DRV_SHA_NI
    if (have_ni()) {
        blocks_shani(h, p, n);
        return;
    }
#endif
    for (; n; n--, p += 64)
        block_generic(h, p);
}

static void block(uint32_t h[8], const unsigned char *p) { blocks(h, p, 1); }

const char *drv_sha256_impl(void) { return have_ni() ? "sha-ni" : "generic"; }

void drv_sha256_set_generic(bool generic)
{
    atomic_store(&use_ni, generic ? 0 : -1);
}

void drv_sha256_init(drv_sha256_t *c)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof iv);
    c->len = 0;
    c->nbuf = 0;
}

void drv_sha256_update(drv_sha256_t *c, const void *data, size_t len)
{
    const unsigned char *p = data;
    c->len += len;
    if (c->nbuf) {
        size_t take = 64 - c->nbuf < len ? 64 - c->nbuf : len;
        memcpy(c->buf + c->nbuf, p, take);
        c->nbuf += take, p += take, len -= take;
        if (c->nbuf < 64)
            return;
        block(c->h, c->buf);
        c->nbuf = 0;
    }
    if (len >= 64) {
        blocks(c->h, p, len / 64);
        p += len / 64 * 64;
        len %= 64;
    }
    memcpy(c->buf, p, len);
    c->nbuf = len;
}

void drv_sha256_final(drv_sha256_t *c, unsigned char out[32])
{
    uint64_t bits = c->len * 8;
    c->buf[c->nbuf++] = 0x80;
    if (c->nbuf > 56) {
        memset(c->buf + c->nbuf, 0, 64 - c->nbuf);
        block(c->h, c->buf);
        c->nbuf = 0;
    }
    memset(c->buf + c->nbuf, 0, 56 - c->nbuf);
    for (int i = 0; i < 8; i++)
        c->buf[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
    block(c->h, c->buf);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(c->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)c->h[i];
    }
    memset(c, 0, sizeof *c);
}

void drv_sha256(const void *data, size_t len, unsigned char out[32])
{
    drv_sha256_t c;
    drv_sha256_init(&c);
    drv_sha256_update(&c, data, len);
    drv_sha256_final(&c, out);
}
