/* source.h — reading an import's files from where they already are: any
 * URL the head may GET (an https:// source, or a presigned S3 GET), hashed
 * as it streams into a manifest file entry (whole sha256 and one sha256
 * per chunk). Nothing is written to disk.
 *
 * Blocking (libcurl, head side only): never under the state lock. Errors:
 * the source's refusal is a 422 naming the URL and its answer ("answered
 * 404"), so an import that names a missing or forbidden file is the
 * client's to fix; unreachable is 503; a file over max_size or a body
 * longer or shorter than Content-Length is 422. */
#ifndef DRV_SOURCE_H
#define DRV_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/manifest.h"

/* Called while a file streams through the hash (every few MiB and at its
 * end) with the bytes of it hashed so far; nonzero stops the read (the
 * hash then fails with 409 "stopped"). */
typedef int (*drv_src_tick_fn)(void *ctx, uint64_t bytes);

/* GET url and hash it: fills f->size, f->sha256, f->nchunks and f->chunks
 * (malloc'd; f->path is the caller's). shown: the URL as messages show it
 * (a presigned URL's query is a bearer secret: pass "s3://BUCKET/KEY").
 * tick may be NULL. */
int drv_src_hash(const char *url, const char *shown, uint64_t chunk_size, uint64_t max_size,
                 drv_src_tick_fn tick, void *tick_ctx, drv_manifest_file_t *f,
                 drv_error_t *err);

/* The CA bundle (PEM file) https sources and S3 endpoints must chain to
 * instead of the system's store (droverd --origin-ca-file); NULL: the
 * system's. Set at start-up, before any thread reads a source. */
void drv_src_set_ca_file(const char *path);
const char *drv_src_ca_file(void);   /* NULL: the system's store */

/* GET url into memory (at most max bytes; more is a 422): *out is
 * malloc'd and NUL-terminated. */
int drv_src_get_text(const char *url, size_t max, char **out, size_t *len, drv_error_t *err);

#endif
