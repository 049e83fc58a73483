/* fuzz_sigv4.c — libFuzzer target: SigV4 canonicalisation and signing
 * (common/sigv4.c: the canonical request with its sorted, re-encoded query,
 * the Authorization header, query-string presigning, URI encoding). The
 * input is NUL-separated fields: method, path, query, host, content type,
 * date, region, service, key id, secret, content sha256, body; the last
 * may be missing, and an absent or empty content type / sha256 is NULL. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/sigv4.h"

#define NF 12

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    const char *f[NF];
    size_t lens[NF];
    char *p = buf, *end = buf + size;
    for (int i = 0; i < NF; i++) {
        f[i] = p <= end ? p : "";
        lens[i] = p <= end ? strlen(p) : 0;
        p += lens[i] + 1;
    }
    if (p <= end)   /* the body takes the rest, NULs included */
        lens[NF - 1] = (size_t)(end - f[NF - 1]);
    drv_sigv4_req_t r = {
        .method = f[0], .path = f[1], .query = f[2], .host = f[3],
        .content_type = f[4][0] ? f[4] : NULL, .amz_date = f[5],
        .region = f[6], .service = f[7], .access_key_id = f[8], .secret_access_key = f[9],
        .content_sha256 = f[10][0] ? f[10] : NULL, .body = f[11], .body_len = lens[11],
    };
    char *canon = drv_sigv4_canonical_request(&r);
    free(canon);
    char auth[2048];
    if (drv_sigv4_authorization(&r, auth, sizeof auth) == 0 && strnlen(auth, sizeof auth) == sizeof auth)
        abort();
    drv_sigv4_presign_t ps = {
        .method = f[0], .host = f[3], .path = f[1], .query = f[2], .amz_date = f[5],
        .expires = 1 + (long)(lens[11] % 604800), .region = f[6], .service = f[7],
        .access_key_id = f[8], .secret_access_key = f[9],
    };
    free(drv_sigv4_presign_query(&ps));
    char enc[512];
    if (drv_sigv4_uri_encode(f[1], (int)(lens[0] & 1), enc, sizeof enc) == 0 &&
        strnlen(enc, sizeof enc) == sizeof enc)
        abort();
    free(buf);
    return 0;
}
