/* fetch.h — one ranged HTTP GET for the node cache (cache.c): the bytes of
 * [off, off+len) of a URL, streamed to a callback as they arrive.
 *
 * Plain http:// over a socket of its own (one request per connection: a
 * range is a manifest chunk, 64 MiB by default, so a handshake per range
 * costs nothing measurable), the answer parsed by common/http1.c's
 * streaming mode; https:// through http_tls.c's runtime-loaded libcurl
 * (a Range header, a streaming write callback; libcurl is mapped only the
 * first time an https URL is read). Trust for https: the first URL (the
 * head's blob route) must chain to the head's CA (--ca-file/--ca-hash,
 * else the system's store), a redirect's target to the origin CA
 * (--origin-ca-file, else the system's store). The answer must be a 206
 * whose Content-Range is exactly the range asked for (or a 200 when the
 * range is the whole body), with exactly len bytes; anything else is an
 * error naming what came. Messages never show a URL's query.
 *
 * A redirect (301, 302, 303, 307, 308 with an absolute Location) is
 * followed, up to DRV_FETCH_MAX_REDIRECTS times, without the bearer: this
 * is how a node reads an artifact on an S3 store or at an https source —
 * the head answers its blob read with a presigned or https URL
 * (api/sources.c), so a node never holds a store's credential and a URL
 * is fresh for every chunk (resumes after a restart never meet an expired
 * one). Every byte is verified by the cache whatever answered.
 *
 * Blocking, for the cache's fetcher threads (never the agent's main loop):
 * each wait is bounded by timeout_ms of silence, by the stop flag and by
 * an optional deadline for the whole range. The
 * host name is resolved with getaddrinfo on the calling thread.
 */
#ifndef DRV_FETCH_H
#define DRV_FETCH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define DRV_FETCH_MAX_REDIRECTS 3

typedef struct drv_fetch_req {
    const char *url;             /* http[s]://HOST[:PORT]/PATH (already percent-encoded) */
    const char *bearer;          /* Authorization: Bearer ...; NULL = none */
    uint64_t off, len;           /* len > 0 */
    uint64_t total;              /* the whole body's size (a 200 is accepted when off=0, len=total) */
    int (*on_data)(void *ud, const char *p, size_t n);   /* -1 stops with an error */
    void *ud;
    long timeout_ms;             /* of silence; 0 = 30 s */
    int64_t deadline_ms;         /* monotonic ms by which all must have come; 0 = none */
    const char *what;            /* the server in messages ("origin", "peer n2"); NULL = origin */
    const atomic_bool *stop;     /* may be NULL */
} drv_fetch_req_t;

/* 0 when exactly len bytes of the range came; -1 with err otherwise
 * (err->status is the HTTP status when one came, else 0). */
int drv_fetch_range(const drv_fetch_req_t *rq, drv_error_t *err);

/* The URL of a file: base + "/" + rel with every byte outside
 * [A-Za-z0-9-._~/] percent-encoded (malloc'd). */
char *drv_fetch_url_join(const char *base, const char *rel);

#endif
