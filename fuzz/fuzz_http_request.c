/* fuzz_http_request.c — libFuzzer target: the HTTP/1.1 request parser in
 * server mode (common/http1.c drv_h1_parse_request, behind the agent's
 * server and the gateway's), and the query-string reader on what it
 * parsed. The input is the bytes a client sent. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/http1.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    drv_h1_request_t rq;
    int status = 0;
    const char *why = NULL;
    int n = drv_h1_parse_request(buf, size, &rq, &status, &why);
    if (n < 0 && (!why || status < 400 || status > 599))
        abort();   /* an error must say which status and why */
    if (n > 0) {
        if ((size_t)n > size || !rq.method || !rq.target || !rq.query || rq.nh > DRV_H1_MAX_HEADERS)
            abort();
        char v[256];
        drv_h1_query_get(rq.query, "offset", v, sizeof v);
        drv_h1_header(rq.h, rq.nh, "host");
    }
    free(buf);
    return 0;
}
