/* peering.h — drover-agent's part in the node caches' peer fan-out and in
 * nodepool prefetch (issue 14, items 5 and 6):
 *  - its peer cache server (cacheserve.c) on --peer-listen (default: the
 *    advertise address, an ephemeral port; "off": none), whose URL each
 *    sync reports as cache.peer_url;
 *  - the peer tokens of its cluster from each sync answer ("peer": the one
 *    to present, the ones its server accepts; api/agent_peers.h);
 *  - ensures of artifacts with the peers the head names: each desired
 *    replica's artifact (before the supervisor's own ensure, which then
 *    joins that download and keeps its peers) and each artifact of the
 *    nodepool's prefetch list, tracked for the sync's cache.prefetch.
 *  - backoff for artifacts that cannot be fetched: an artifact whose
 *    download failed is tried again at the next desired set, then not
 *    before drv_peering_backoff_ms(retries) has passed (30 s doubling to
 *    15 min): a node whose set changes often does not re-download a bad
 *    artifact each time.
 * Called from the sync thread only, except the server's own thread. */
#ifndef DRV_PEERING_H
#define DRV_PEERING_H

#include <jansson.h>

#include "agent/cache.h"
#include "common/error.h"

typedef struct drv_peering drv_peering_t;

/* listen: "off", or HOST:PORT (PORT 0: ephemeral); url: what peers are told
 * (NULL: http://HOST:PORT as bound; HOST 0.0.0.0 needs url). */
drv_peering_t *drv_peering_create(drv_cache_t *c, const char *listen, const char *url,
                                  drv_error_t *err);
void drv_peering_destroy(drv_peering_t *p);
/* The URL peers read this node's cache at; NULL when not serving. */
const char *drv_peering_url(const drv_peering_t *p);
/* A sync answer's "peer" object: the token to present, the ones to accept. */
void drv_peering_set_tokens(drv_peering_t *p, const json_t *peer);
/* Ensure the artifact art ({manifest, blobs, peers}: a desired replica's
 * or a prefetch entry) from origin base server + art.blobs with bearer,
 * peers first; self is this node's id. 0, or -1 with err (nothing started). */
int drv_peering_ensure(drv_peering_t *p, const json_t *art, const char *server,
                       const char *bearer, const char *self, drv_error_t *err);
/* Replace the prefetch list (a sync answer's "prefetch" array) and ensure
 * each of its artifacts; failures are logged and reported. */
void drv_peering_prefetch(drv_peering_t *p, const json_t *list, const char *server,
                          const char *bearer, const char *self);
/* The wait after the n-th retry (n >= 1) of a failed artifact. */
long drv_peering_backoff_ms(int n);
/* cache.prefetch of a sync report: [{artifact, digest, state, bytes,
 * total[, error]}]; NULL when there is no prefetch list. */
json_t *drv_peering_prefetch_report(drv_peering_t *p);

#endif
