/* blob_sync.h — several heads on PostgreSQL (issue 17): every head keeps a
 * copy of the blobs and checkpoint records the others hold, so that a new
 * leader serves what was pushed to the old one. No shared file system: the
 * bytes come over HTTP from the head that has them (api/h_peer.c), at URLs
 * signed with the heads' shared secret, and land only once their sha256 is
 * the one the record names (store/blobs.h drv_blobs_adopt).
 *
 * One thread, a pass a second (sooner when kicked):
 *   - artifacts: every blob a drover:// artifact's manifest names (the
 *     artifacts come with the record log a standby follows) that is not
 *     whole here is fetched from the leader, else from another head; its
 *     owner is marked as holding it;
 *   - checkpoints (records on disk, not in the log): a standby copies the
 *     leader's records it lacks (their blobs first) and, once the leader
 *     says its set is whole, drops those the leader no longer has; a new
 *     leader first copies from the others what it lacks, then says whole.
 *   - a standby's holds: items the leader asks it to hold now (POST
 *     /v1/heads/replicate, api/h_peer.c), fetched first, their requests
 *     woken.
 * A second thread, on a leader: the semi-synchronous uploads, batched to
 * the live standbys in turn until one holds each (or its time is up).
 * And for the HTTP threads: drv_head_t.blob_elsewhere, a signed URL of a
 * head that has a blob this one lacks (a node's read then gets a 307), and
 * drv_head_t.replicate / replica_want (the two sides of the uploads). */
#ifndef DRV_BLOB_SYNC_H
#define DRV_BLOB_SYNC_H

#include "common/error.h"
#include "state/head.h"

typedef struct drv_blob_sync drv_blob_sync_t;

/* Start the thread (head->lease and head->blobs set) and set the head's
 * blob_elsewhere hook. */
drv_blob_sync_t *drv_blob_sync_create(drv_head_t *head, drv_error_t *err);
/* Clear the hook, stop the thread. */
void drv_blob_sync_destroy(drv_blob_sync_t *s);

#endif
