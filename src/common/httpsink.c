/* httpsink.c — see httpsink.h: the bounded body libcurl writes into. */
#include "common/httpsink.h"

#include <stdlib.h>
#include <string.h>

size_t drv_httpc_sink_write(char *ptr, size_t size, size_t nmemb, void *sink)
{
    drv_httpc_sink_t *s = sink;
    size_t n = size * nmemb;
    if (s->len + n + 1 > (s->max ? s->max : DRV_HTTPC_MAX_BODY)) {
        s->too_big = true;
        return 0;
    }
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + n + 1)
            cap *= 2;
        char *nd = realloc(s->data, cap);
        if (!nd)
            return 0;
        s->data = nd, s->cap = cap;
    }
    memcpy(s->data + s->len, ptr, n);
    s->len += n;
    s->data[s->len] = '\0';
    return n;
}
