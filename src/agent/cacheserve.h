/* cacheserve.h — the agent's peer cache server: other nodes' caches read
 * verified chunks and blobs of this node's cache from it (peer fan-out,
 * cache.h).
 *
 *   GET|HEAD /v1/cache/blobs/sha256/{hex}   Authorization: Bearer SECRET
 *   Range: bytes=A-B or bytes=A- (one range; none: the whole blob)
 * Answers 206 with Content-Range (200 without Range), 401 for a missing or
 * unaccepted secret, 404 for a blob not held or a range not inside chunks
 * verified, 416 for a range past the end or of another form. A whole blob
 * serves any range; a download in progress serves the chunks its sidecar
 * marks verified. Bodies go out with sendfile in bounded pieces from the
 * server's own thread (httpd.c): no copy in memory, the agent's main loop
 * never involved.
 *
 * Secrets: the accepted ones are kept as their sha256 and a presented
 * bearer's sha256 is compared with each in constant time. drover-agent
 * accepts the peer tokens of its cluster that the head hands out in each
 * sync answer (api/agent_peers.h) and replaces the list as they rotate. */
#ifndef DRV_CACHESERVE_H
#define DRV_CACHESERVE_H

#include <stddef.h>

#include "agent/cache.h"
#include "common/error.h"

typedef struct drv_cacheserve drv_cacheserve_t;

/* Serve cache c on host:port (port 0: an ephemeral one), accepting any of
 * secrets[0..n) (none empty; n = 0: every request is refused until
 * drv_cacheserve_set_secrets). */
drv_cacheserve_t *drv_cacheserve_create(drv_cache_t *c, const char *host, int port,
                                        const char *const *secrets, size_t n, drv_error_t *err);
/* Accept secrets[0..n) from now on instead (any thread). -1 when one is
 * empty (the old list stays). */
int drv_cacheserve_set_secrets(drv_cacheserve_t *s, const char *const *secrets, size_t n,
                               drv_error_t *err);
void drv_cacheserve_destroy(drv_cacheserve_t *s);
int drv_cacheserve_port(const drv_cacheserve_t *s);

#endif
