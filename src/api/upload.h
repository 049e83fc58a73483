/* upload.h — request bodies streamed to a file instead of memory: the
 * chunks of PUT /v1/artifacts/uploads/{id}/blobs/{hex}/chunks/{i}, which
 * may be far over the API's DRV_MAX_BODY. http.c feeds libmicrohttpd's
 * upload callback into a temporary file of the blob store (hashing it as
 * it goes); the handler (h_artifacts.c) then checks and keeps or drops it.
 * One upload belongs to one connection (one MHD thread at a time).
 */
#ifndef DRV_UPLOAD_H
#define DRV_UPLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/manifest.h"
#include "common/sha256.h"
#include "state/head.h"

typedef struct drv_upload {
    int fd;                  /* the temporary file (-1 when none) */
    char path[1024];
    uint64_t len;            /* bytes received */
    uint64_t max;            /* more is too_large (nothing more written) */
    bool too_large;
    bool discard;            /* unauthenticated, or no store: data is dropped */
    int write_errno;         /* a failed write (ENOSPC, ...); 0 = none */
    drv_sha256_t sha;
    char sha256[65];         /* set by drv_upload_finish */
} drv_upload_t;

/* Manifests travel in JSON bodies (an upload's, an artifact's, a
 * checkpoint's): over the API's DRV_MAX_BODY (1 MiB, about 5,000 files)
 * on those routes only, up to DRV_MANIFEST_BODY_MAX (about 130,000 files
 * with 100-byte paths, past the builder's 100,000-file bound), and only
 * for a request whose Authorization authenticates now (a user token or a
 * node credential): an anonymous body never gets more than 1 MiB of
 * memory. Everything else: DRV_MAX_BODY. */
#define DRV_MANIFEST_BODY_MAX (32u * 1024 * 1024)
size_t drv_upload_body_limit(drv_head_t *head, const char *method, const char *url,
                             const char *authorization);

/* Is (method, url) a route whose body is streamed? */
bool drv_upload_wanted(const char *method, const char *url);
/* A new upload for a request (authorization: its header, checked now so an
 * unauthenticated body is never written; content_length: the header's
 * value or NULL). NULL on out-of-memory. */
drv_upload_t *drv_upload_begin(drv_head_t *head, const char *authorization,
                               const char *content_length);
void drv_upload_add(drv_upload_t *u, const char *data, size_t n);
/* The body is complete: sha256 filled. */
void drv_upload_finish(drv_upload_t *u);
/* Close and remove what is left (the handler may have renamed the file). */
void drv_upload_free(drv_upload_t *u);

/* --- shared by the upload handlers (h_artifacts.c, h_checkpoints.c) ------ */
struct drv_req;
struct drv_resp;
/* Parse the manifest object v (400s name "field.PATH"; one sha256 with two
 * sizes or chunk lists is refused). NULL with err. */
drv_manifest_t *drv_upload_manifest_of(const json_t *v, const char *field, drv_error_t *err);
/* {id, chunk_size, total_size, missing_bytes, missing} of user's upload m. */
json_t *drv_upload_doc(drv_head_t *head, const char *user, const drv_manifest_t *m);
/* Take the streamed chunk of PUT .../uploads/{id}/blobs/{hex}/chunks/{i}
 * (req->params 0..2) into user's upload; answers 204 or the error. */
int drv_upload_chunk_as(struct drv_req *req, struct drv_resp *resp, const char *user);

/* Semi-synchronous uploads (several heads: drv_head_t.replicate): before
 * its 2xx, an artifact create (kind "artifact") or checkpoint commit
 * ("checkpoint") of user hands item {user, blobs, checkpoint?} (stolen)
 * to the head, which asks the live standbys to hold it. true: the request
 * is held now (resp is a placeholder; return at once, the handler runs
 * again with req->resumed and item NULL). false: answer, with *state
 * "held" (a standby holds every blob, sha256 verified), "pending" (none did
 * within blob_sync_timeout: they copy it in the background) or NULL (one
 * head, or no standby live: as on one head); when it ran again, *kept
 * (kept may be NULL) is the item it was first given (a new reference, or
 * NULL). The request's id is kind, user and the body's sha256, the same
 * when it runs again; what names the object in the not_replicated event. */
bool drv_upload_replicate(struct drv_req *req, struct drv_resp *resp, const char *kind,
                          const char *user, const char *what, json_t *item,
                          const char **state, json_t **kept);
/* The answer's mark of state (NULL: none): header X-Drover-Replication, and
 * in doc (when not NULL) "replication" and, when pending, "warning". */
void drv_upload_replication_mark(struct drv_resp *resp, json_t *doc, const char *state);

#endif
