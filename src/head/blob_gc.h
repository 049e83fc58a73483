/* blob_gc.h — droverd's garbage collector of the embedded blob store: a
 * thread that, every interval, collects the sha256s every artifact's
 * manifest names (under the state read lock, copied) and runs
 * drv_blobs_gc (store/blobs.h) outside the lock: uploads untouched for
 * upload_expiry_s expire first; blobs no artifact nor upload names, older
 * than the grace period, go in two passes. */
#ifndef DRV_BLOB_GC_H
#define DRV_BLOB_GC_H

#include <stdint.h>

#include "common/error.h"
#include "state/head.h"

typedef struct drv_blob_gc drv_blob_gc_t;

drv_blob_gc_t *drv_blob_gc_create(drv_head_t *head, int interval_s, int64_t grace_s,
                                  int64_t upload_expiry_s, drv_error_t *err);
void drv_blob_gc_destroy(drv_blob_gc_t *g);

#endif
