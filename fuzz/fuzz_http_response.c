/* fuzz_http_response.c — libFuzzer target: the HTTP/1.1 response parser in
 * client mode (common/http1.c drv_h1_response_feed/_eof, behind the
 * agent's http_client.c and health.c and the gateway's upstream client).
 * The first byte sets how the bytes arrive (pieces of 1..64 bytes or all
 * at once), whether the request was HEAD and whether the body streams to
 * callbacks; the rest is what the server sent, then the connection closes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/http1.h"

static int on_head(void *ud, int status, const drv_h1_header_t *h, size_t nh)
{
    if (status < 200 || status > 599)
        abort();
    drv_h1_header(h, nh, "content-type");
    return 0;
}

static int on_body(void *ud, const char *p, size_t n)
{
    size_t *total = ud;
    *total += n;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    data++, size--;
    size_t piece = (mode & 0x3f) ? (mode & 0x3f) : size;
    static drv_h1_response_t r;   /* 16 KiB of head buffer: not on the stack */
    size_t streamed = 0;
    drv_h1_response_init(&r, 4096, mode & 0x40);
    if (mode & 0x80) {
        r.on_head = on_head;
        r.on_body = on_body;
        r.ud = &streamed;
    }
    const char *why = NULL;
    size_t off = 0;
    int rc = 0;
    while (off < size && rc == 0) {
        size_t n = size - off < piece ? size - off : piece, used = 0;
        rc = drv_h1_response_feed(&r, (const char *)data + off, n, &used, &why);
        if (used > n)
            abort();
        off += used;
        if (rc == 0 && used < n)
            abort();   /* more needed, yet not all consumed */
    }
    if (rc == 0)
        rc = drv_h1_response_eof(&r, &why);
    if (rc < 0 && (!why || r.err == DRV_H1_E_NONE))
        abort();
    if (rc == 1 && !(mode & 0x80) && !(mode & 0x40) && r.body && r.len > 4096)
        abort();   /* over max_body */
    drv_h1_response_free(&r);
    return 0;
}
