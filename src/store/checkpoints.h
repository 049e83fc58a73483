/* checkpoints.h — the head's committed checkpoints (issue 14 item 7): one
 * record per checkpoint, per user and scope, next to the blob store whose
 * blobs hold the checkpoint's files.
 *
 * Layout under DATA_DIR/blobs/checkpoints (names made by this module):
 *   USER/SCOPE/NAME.json   one committed checkpoint:
 *                          {"scope","name","committed_at_ms","digest",
 *                           "total_size","files","manifest":{...}}
 *   USER/SCOPE/.lock       flock'd while a commit or delete runs
 * A record is written to the blob store's tmp/, fsynced and renamed into
 * place (then its directory fsynced): a commit is all or nothing, and is
 * the last step of an upload, so a checkpoint whose upload was cut off has
 * no record and never counts. "Newest" is the highest committed_at_ms
 * (then the greater name).
 *
 * Scope: 1..127 bytes of [A-Za-z0-9._:-], not starting with '.' (e.g.
 * "deployment:web:0", "job:train:3"); name: 1..127 bytes of [A-Za-z0-9._-],
 * not starting with '.'. The caller checks who may touch a user's scope.
 *
 * Threads: any; every call does disk I/O: never under the state lock.
 */
#ifndef DRV_CHECKPOINTS_H
#define DRV_CHECKPOINTS_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "common/error.h"
#include "common/manifest.h"
#include "store/blobs.h"

#define DRV_CKPT_KEEP_MAX 100

bool drv_ckpt_scope_ok(const char *scope);
bool drv_ckpt_name_ok(const char *name);

/* Commit checkpoint name of user's scope with manifest m (the caller has
 * checked that user holds every blob), replacing one of the same name;
 * then delete the oldest beyond keep (0 = keep all). *pruned (NULL-able)
 * gets the names deleted (a new array). 400 for a bad scope or name. The
 * record's rename and the re-marking of its blobs as user's
 * (drv_blobs_claim) happen under the GC's shared lock, so a GC pass that
 * ran since the caller's check cannot leave the record naming blobs
 * without their markers (nodes' reads would be refused); a blob that was
 * collected meanwhile makes it a 409, no record left. */
int drv_ckpts_commit(const drv_blobs_t *b, const char *user, const char *scope,
                     const char *name, const drv_manifest_t *m, int keep, json_t **pruned,
                     drv_error_t *err);

/* user's checkpoints whose scope is `scope` (or, when prefix, starts with
 * it), newest first, without their manifests unless with_manifest. */
json_t *drv_ckpts_list(const drv_blobs_t *b, const char *user, const char *scope, bool prefix,
                       bool with_manifest, drv_error_t *err);

/* One record (with its manifest): 404 when there is none. */
int drv_ckpts_get(const drv_blobs_t *b, const char *user, const char *scope, const char *name,
                  json_t **out, drv_error_t *err);

/* Delete one record: 404 when there is none. */
int drv_ckpts_delete(const drv_blobs_t *b, const char *user, const char *scope,
                     const char *name, drv_error_t *err);

/* Every user's every record, with its manifest:
 * [{"user": U, "record": {...}}] (what a standby head copies; lease.h). */
json_t *drv_ckpts_all(const drv_blobs_t *b);

/* Write a record another head holds (rec as drv_ckpts_all gives it, its
 * blobs already whole here), as is: committed_at_ms kept, nothing pruned.
 * 400 for a bad user, scope or name. */
int drv_ckpts_put(const drv_blobs_t *b, const char *user, const json_t *rec, drv_error_t *err);

#endif
