/* s3.h — one S3-compatible object store (AWS S3, MinIO, Ceph RGW, R2): a
 * bucket at an endpoint, with the credential that signs for it.
 *
 * Agents never hold S3 credentials: the head presigns (SigV4 query
 * strings, src/common/sigv4.c) the few requests an agent or the CLI makes
 * itself — GET (a Range header may go with it), PUT of an object and PUT of
 * one part of a multipart upload — and makes the rest itself with libcurl
 * (s3_http.c): HEAD, ListObjectsV2, and creating, completing and aborting
 * multipart uploads. Those are signed in the Authorization header, because
 * not every store accepts presigned POSTs (R2 presigns GET, HEAD, PUT and
 * DELETE only).
 *
 * Blob layout: PREFIX/blobs/sha256/HEX, content-addressed like the head's
 * embedded store, so a blob the bucket has is never sent again.
 *
 * Errors: a failed call fills drv_error_t with the class in `status`: 403
 * (refused: a wrong key or secret, a denied policy, an expired URL), 404
 * (no such key, bucket or upload), 503 (unreachable, or S3 answered 5xx),
 * 502 (any other answer); `code` is S3's error Code ("NoSuchKey",
 * "SignatureDoesNotMatch", "AccessDenied", or "HTTP400" when the answer
 * had none) and `message` says what was asked and S3's Message.
 *
 * A context is immutable after drv_s3_create and may be shared by threads;
 * the calls of s3_http.c block on the network (never under the state lock).
 * This part (s3.c) is pure: no I/O, no clock (callers pass `now`). */
#ifndef DRV_S3_H
#define DRV_S3_H

#include <stddef.h>

#include "common/error.h"

#define DRV_S3_KEY_MAX 1024          /* S3's limit on a key, in bytes */
#define DRV_S3_MAX_PARTS 10000       /* of a multipart upload */
#define DRV_S3_MIN_PART (5LL << 20)  /* every part but the last: at least 5 MiB */

typedef struct drv_s3 drv_s3_t;

/* A store. endpoint: "https://s3.us-east-1.amazonaws.com" or
 * "http://127.0.0.1:9000" (scheme and host[:port], no path); path_style:
 * requests go to ENDPOINT/BUCKET/KEY (MinIO, Ceph, moto) rather than to
 * BUCKET.HOST/KEY (virtual-hosted, AWS's default). The secret is copied and
 * wiped on destroy. NULL with err on bad input. */
drv_s3_t *drv_s3_create(const char *endpoint, const char *region, const char *bucket,
                        const char *access_key, const char *secret_key, int path_style,
                        drv_error_t *err);
void drv_s3_destroy(drv_s3_t *s);   /* NULL is fine */

/* A presigned URL for METHOD ("GET", "PUT", "HEAD" or "DELETE") on key,
 * valid for expires seconds (1 .. 604800) from now (epoch seconds). query:
 * NULL or the request's own encoded parameters. Caller frees. */
char *drv_s3_presign(const drv_s3_t *s, const char *method, const char *key, const char *query,
                     long long now, long expires, drv_error_t *err);

/* A presigned PUT of part part (1 .. 10000) of multipart upload upload_id. */
char *drv_s3_presign_part(const drv_s3_t *s, const char *key, const char *upload_id, int part,
                          long long now, long expires, drv_error_t *err);

/* The key of a blob: "PREFIX/blobs/sha256/HEX" (no prefix: "blobs/sha256/HEX";
 * slashes around prefix are dropped). hex: 64 lower-case hex digits. */
int drv_s3_blob_key(const char *prefix, const char *hex, char *out, size_t n, drv_error_t *err);

/* --- for s3_http.c ---------------------------------------------------------------- */

/* The URL of key (with the request's encoded query, or none) and the Host it
 * is signed for. 0, or -1 with err (a key too long or empty). */
int drv_s3_url(const drv_s3_t *s, const char *key, const char *query, char **url, char *host,
               size_t host_len, drv_error_t *err);
/* The Authorization header of a request on key (header-signed, body hashed
 * into x-amz-content-sha256, which the caller sends as content_sha256). */
int drv_s3_authorization(const drv_s3_t *s, const char *method, const char *key,
                         const char *query, const char *host, const char *amz_date,
                         const char *content_sha256, char *out, size_t out_len);

/* --- calls to the store (s3_http.c; libcurl, libxml2: head side only) -------------- */

typedef struct drv_s3_object {
    int exists;
    long long size;
    char etag[80];       /* as S3 gives it, quotes stripped */
} drv_s3_object_t;

/* HEAD key: exists and size. A missing key is not an error (exists = 0). */
int drv_s3_head(const drv_s3_t *s, const char *key, drv_s3_object_t *out, drv_error_t *err);

/* Every key under prefix, in key order, through ListObjectsV2 pages of up to
 * max_keys (1 .. 1000; 0: 1000): cb for each; a cb returning -1 stops the
 * listing with -1 (its err left as cb filled it). pages (may be NULL) gets
 * the number of pages read. */
typedef int (*drv_s3_list_cb)(void *ctx, const char *key, long long size, drv_error_t *err);
int drv_s3_list(const drv_s3_t *s, const char *prefix, int max_keys, drv_s3_list_cb cb, void *ctx,
                int *pages, drv_error_t *err);

/* Multipart uploads: create (upload_id gets S3's id), then parts are PUT
 * through drv_s3_presign_part URLs, each answering an ETag; complete with the
 * parts' ETags in order (etags[0] is part 1), or abort. */
int drv_s3_multipart_create(const drv_s3_t *s, const char *key, char *upload_id, size_t id_len,
                            drv_error_t *err);
int drv_s3_multipart_complete(const drv_s3_t *s, const char *key, const char *upload_id,
                              const char *const *etags, int nparts, drv_error_t *err);
int drv_s3_multipart_abort(const drv_s3_t *s, const char *key, const char *upload_id,
                           drv_error_t *err);

/* The id of an unfinished multipart upload of exactly key (ListMultipartUploads
 * with prefix key; the newest when several), or "" when none. */
int drv_s3_multipart_find(const drv_s3_t *s, const char *key, char *upload_id, size_t id_len,
                          drv_error_t *err);

/* The parts an unfinished upload holds (ListParts, all pages): cb for each,
 * in part order, with its size and ETag (quotes stripped); -1 from cb stops. */
typedef int (*drv_s3_part_cb)(void *ctx, int part, long long size, const char *etag,
                              drv_error_t *err);
int drv_s3_list_parts(const drv_s3_t *s, const char *key, const char *upload_id,
                      drv_s3_part_cb cb, void *ctx, drv_error_t *err);

/* DELETE key (a missing key is fine: S3 answers 204 either way). */
int drv_s3_delete(const drv_s3_t *s, const char *key, drv_error_t *err);

#endif
