/* peer.h — head-to-head URLs (several heads on PostgreSQL; api/h_peer.c):
 * a blob of a head's store and its checkpoint records, signed with the
 * heads' shared secret (drv_head_t.peer_key) and expiring ttl_s from now
 * (at most an hour). base is a head's advertised URL. 0, or -1 when the
 * URL does not fit in n. */
#ifndef DRV_API_PEER_H
#define DRV_API_PEER_H

#include <stddef.h>

#include "state/head.h"

int drv_peer_blob_url(const drv_head_t *h, const char *base, const char *hex, int ttl_s,
                      char *out, size_t n);
int drv_peer_ckpts_url(const drv_head_t *h, const char *base, int ttl_s, char *out, size_t n);
/* POST /v1/heads/replicate with body[0..len): the signature covers the
 * body's sha256. */
int drv_peer_replicate_url(const drv_head_t *h, const char *base, const char *body, size_t len,
                           int ttl_s, char *out, size_t n);

#endif
