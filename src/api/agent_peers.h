/* agent_peers.h — the head's side of the node caches' peer fan-out and of
 * nodepool prefetch (issue 14, items 5 and 6), for the agent sync
 * (h_agent.c). All functions run under the state lock.
 *
 * Peer tokens. The agents of one cluster read chunks from each other's
 * cache servers (src/agent/cacheserve.c) with a bearer token the head
 * derives: "drvp_" + hex(HMAC-SHA256(K, OWNER "\n" CLUSTER "\n" EPOCH)),
 * EPOCH = unix seconds / DRV_PEER_EPOCH_S, K 32 random bytes drawn when the
 * head starts (in memory only). Every sync answer carries
 *   "peer": {"token": T(e), "accept": [T(e-1), T(e), T(e+1)], "ttl_seconds"}
 * An agent presents T(e) and its server accepts exactly its "accept" list:
 * a node whose credential is revoked gets no new tokens, so what it knows
 * stops working within 3 epochs; another cluster's or user's tokens never
 * match; agents one epoch apart still accept each other. A head restart
 * draws a new K: until each agent's next sync (a heartbeat), peers refuse
 * its token, which bans them for that download (it falls back to the
 * origin).
 *
 * Peers. Each desired replica whose artifact has a manifest gets
 * artifact.peers: [{"node", "url", "blobs"?}], the other nodes of the same
 * owner and cluster that are ready, report a cache server
 * ("cache.peer_url") and hold (their cache report lists its digest) or
 * want (a replica of a model with that artifact is placed on them, or
 * their nodepool prefetches it) this artifact or another of the owner's
 * that shares blobs with it: the members of the rendezvous ranking
 * (cache_rules.h), per blob. "blobs" lists the sha256s a peer covers when
 * it covers only some (it is a member of those blobs' rankings only). At
 * most DRV_PEER_MAX, by node id.
 *
 * Prefetch. A nodepool with "prefetch": true gets, with each desired set
 * sent to its nodes (at join and whenever the set changes), "prefetch":
 * the artifacts (id, manifest, blobs, peers) of the models of every
 * deployment that places on that nodepool; the agent fetches them into its
 * cache without a replica. */
#ifndef DRV_AGENT_PEERS_H
#define DRV_AGENT_PEERS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "state/head.h"
#include "state/state.h"

#define DRV_PEER_EPOCH_S 300
#define DRV_PEER_MAX 64

/* The "peer" object of a sync answer for a node of owner's cluster at
 * epoch seconds now_s. */
json_t *drv_peer_tokens(const char *owner, const char *cluster, int64_t now_s);

/* Add artifact.peers to each replica of set (node's desired set) whose
 * artifact carries a manifest. */
void drv_peer_annotate(drv_state_t *st, const drv_obj_t *node, json_t *set);

/* Placement's tie-break (sched/warm.c): the manifest digest of model's
 * drover:// artifact (NULL: none), and whether node's cache holds it. */
const char *drv_peer_model_digest(drv_state_t *st, const drv_obj_t *model);
/* The artifact record model names by id (NULL: none, or no such record). */
const drv_obj_t *drv_peer_model_artifact(drv_state_t *st, const drv_obj_t *model);
bool drv_peer_node_holds(const drv_obj_t *node, const char *digest);

/* The node's prefetch list (an array, maybe empty), or NULL when its
 * nodepool does not prefetch. */
json_t *drv_peer_prefetch(drv_state_t *st, const drv_obj_t *node);

/* Events for the prefetches a sync reports (cache.prefetch of new against
 * that of old, the node's status before): "prefetching", "prefetched",
 * "prefetch_failed", once per change of an artifact's state. */
void drv_peer_prefetch_events(drv_head_t *head, const drv_obj_t *node, const json_t *old_cache,
                              const json_t *new_cache);

/* Containers: the images the node pre-pulls — [{image, registry_auth?}] of
 * the models its nodepool's deployments run (runtime.image or a preset's),
 * once each —, or NULL when its nodepool does not prefetch or the node has
 * no container engine (agent/prepull.h). */
json_t *drv_peer_image_prefetch(drv_state_t *st, const drv_obj_t *node);

/* Events for the images a sync reports (container_runtime.images of new
 * against old): "prefetching", "prefetched", "prefetch_failed", once per
 * change of an image's state. */
void drv_peer_image_events(drv_head_t *head, const drv_obj_t *node, const json_t *old_ctr,
                           const json_t *new_ctr);

#endif
