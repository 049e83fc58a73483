/* httpsink.h — a bounded, NUL-terminated response body for libcurl's
 * CURLOPT_WRITEFUNCTION, shared by the gcp/vultr (provider/gce.c) and
 * oracle (provider/oci_api.c) clients, and the CLI's body limit
 * (common/httpc.c). libc only: it lives in drvcommon, which links no
 * libcurl. */
#ifndef DRV_HTTPSINK_H
#define DRV_HTTPSINK_H

#include <stdbool.h>
#include <stddef.h>

#define DRV_HTTPC_MAX_BODY (256 * 1024 * 1024)   /* responses over this fail */

/* A bounded, NUL-terminated response body for libcurl: CURLOPT_WRITEFUNCTION
 * drv_httpc_sink_write, CURLOPT_WRITEDATA the sink. At most max bytes (0:
 * DRV_HTTPC_MAX_BODY); past it the transfer stops and too_big is set. The
 * caller frees data. */
typedef struct drv_httpc_sink {
    char *data;
    size_t len, cap, max;
    bool too_big;
} drv_httpc_sink_t;
size_t drv_httpc_sink_write(char *ptr, size_t size, size_t nmemb, void *sink);

#endif
