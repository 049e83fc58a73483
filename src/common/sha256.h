/* sha256.h — SHA-256 (FIPS 180-4) in plain C, so that programs which need
 * only a digest (drover-agent: declared GPU UUIDs, ids) do not load
 * libcrypto. Checked against the FIPS 180-2 test vectors
 * (t/unit/test_sha256.c). Not constant-time with respect to the message
 * length, which is never secret here; the state is the caller's. Uses the
 * CPU's SHA instructions when it has them (about 4-5x faster). */
#ifndef DRV_SHA256_H
#define DRV_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct drv_sha256 {
    uint32_t h[8];
    uint64_t len;            /* bytes hashed so far */
    unsigned char buf[64];   /* a partial block */
    size_t nbuf;
} drv_sha256_t;

void drv_sha256_init(drv_sha256_t *c);
void drv_sha256_update(drv_sha256_t *c, const void *data, size_t len);
void drv_sha256_final(drv_sha256_t *c, unsigned char out[32]);
/* One call: the digest of data. */
void drv_sha256(const void *data, size_t len, unsigned char out[32]);

/* Which block function runs: "sha-ni" (x86 SHA extensions) or "generic". */
const char *drv_sha256_impl(void);
/* Tests: true forces the portable path, false re-detects (process-wide). */
void drv_sha256_set_generic(bool generic);

#endif
