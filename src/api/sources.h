/* sources.h — artifacts whose bytes are not in the head's own store: on an
 * operator's S3 store (source s3://BUCKET/PREFIX) or read-only at https://
 * URLs (sources.c, sources_s3.c), and what h_artifacts.c shares with it. */
#ifndef DRV_SOURCES_H
#define DRV_SOURCES_H

#include <stddef.h>
#include <stdint.h>

#include "api/api.h"
#include "common/manifest.h"
#include "objstore/s3.h"
#include "state/head.h"
#include "state/state.h"

/* Insert the artifact spec (taken, even on error) with manifest m: 201, or
 * 409 when the id is taken; h_artifacts.c. With m NULL (an import) the
 * artifact is inserted `importing` (internal.import: a fresh token
 * head/imports.c works under) and the answer is 202; an artifact of that
 * id whose import failed is replaced. */
int drv_artifact_insert(drv_req_t *req, drv_resp_t *resp, json_t *spec,
                        const drv_manifest_t *m, drv_error_t *err);

/* An s3:// or https:// artifact about to be created (spec validated; *m
 * the manifest the client gave, or NULL to import): resolves the store
 * (fills spec.store), sets spec.layout, and either checks that every blob
 * of *m is in the bucket with its size (layout "blobs", what `drover
 * artifact push --store` made) or, for an import (layout "files"), checks
 * what needs no network (the URL's form, the store) and leaves *m NULL:
 * the reading is drv_sources_import's, in the background. Network I/O:
 * outside the lock. */
int drv_sources_prepare(drv_req_t *req, json_t *spec, drv_manifest_t **m, drv_error_t *err);

/* An import's progress: files hashed of files (0 while the source is being
 * listed) and bytes hashed so far; nonzero stops the import. */
typedef int (*drv_import_tick_fn)(void *ctx, size_t files_done, size_t files, uint64_t bytes);

/* Read and hash every file of an import's location (spec: source, store)
 * into its manifest (head/imports.c runs it; blocking, never under the
 * lock). Errors as drv_src_hash's: a source's refusal is a 422 naming it;
 * a stop is a 409 "stopped". */
drv_manifest_t *drv_sources_import(drv_head_t *head, const json_t *spec, drv_import_tick_fn tick,
                                   void *ctx, drv_error_t *err);

/* The S3 context of store `name` (caller destroys); bucket gets its bucket.
 * Takes the read lock itself. 422 when there is none. */
drv_s3_t *drv_sources_store(drv_head_t *head, const char *name, char *bucket, size_t n,
                            drv_error_t *err);

/* Where a node reads blob hex of artifact a (an s3:// or https:// one;
 * under the read lock, no I/O): a presigned GET valid for ttl_s, or the
 * https URL. malloc'd; NULL with err. */
char *drv_sources_blob_url(drv_req_t *req, const drv_obj_t *a, const char *hex, long ttl_s,
                           drv_error_t *err);

#endif
