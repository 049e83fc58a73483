/* blobs.h — the head's embedded content-addressed blob store (the
 * `drover://` source of artifacts) and its resumable, chunked uploads.
 *
 * Layout under DATA_DIR/blobs (every name below is made by this module):
 *   sha256/HEX                 a whole blob, its sha256 checked; immutable
 *   owners/USER/HEX            empty: USER has proved it holds blob HEX
 *                              (sent every chunk of it, whole-file checked),
 *                              or the blob is empty
 *   uploads/USER/DIGEST.json   an upload's manifest (the upload id is the
 *                              manifest's digest, so it survives restarts)
 *   partial/USER/HEX.CS/I      chunk I (chunk size CS) of a blob USER is
 *                              sending, its sha256 checked
 *   tmp/                       bodies being received (cleared at open)
 * Every file is written to tmp/, fsynced and renamed into place (then its
 * directory fsynced), so a crash leaves either nothing or the whole file.
 * Whole blobs are shared by all users, but a user counts as holding one
 * only with its owners/ marker: knowing a blob's sha256 is not enough to
 * reuse (and then read) someone else's bytes. Partial chunks are per user
 * for the same reason.
 *
 * Threads: any; the functions keep no shared mutable state (the file
 * system is the state; concurrent writers of one chunk or blob write the
 * same verified bytes and the last rename wins). Every call does disk I/O:
 * never call one under the head's state lock.
 */
#ifndef DRV_BLOBS_H
#define DRV_BLOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "common/error.h"
#include "common/manifest.h"

typedef struct drv_blobs drv_blobs_t;

/* Open (creating its directories) the store under data_dir/blobs and
 * clear its tmp/. NULL with err on failure. */
drv_blobs_t *drv_blobs_open(const char *data_dir, drv_error_t *err);
void drv_blobs_close(drv_blobs_t *b);

/* The store's directory (DATA_DIR/blobs); store/checkpoints.c keeps its
 * records under it, blobs_gc.c walks it. */
const char *drv_blobs_root(const drv_blobs_t *b);

/* Garbage collection (blobs_gc.c). refs[0..n): the sha256s the caller's
 * records (artifacts) name, sorted (strcmp); the store adds those of every
 * upload's manifest. A whole blob named by neither, whose file is older
 * than grace_s at now_s, goes in two passes: first its owners/ markers
 * (after that nobody holds it, so a new artifact naming it must send its
 * bytes again), then, at a later pass that finds it still unnamed and
 * unheld, the blob itself. So an artifact create that checked its blobs
 * before the markers went and is inserted after still finds its blob: it
 * is named by the next pass. Partial chunks of blobs no upload names,
 * older than grace_s, go at once. First of all, an upload whose manifest
 * was last touched (saved, resumed, a chunk received:
 * drv_blobs_upload_touch) upload_expiry_s or more before now_s expires:
 * its manifest goes, so its blobs and chunks are named no more and go as
 * above (0: uploads never expire). Disk I/O: never under the state lock. */
typedef struct drv_blobs_gc_stats {
    size_t blobs;                /* whole blobs looked at */
    size_t unheld;               /* markers removed (first pass) */
    size_t removed;              /* blobs removed (second pass) */
    uint64_t removed_bytes;
    size_t partials;             /* partial blobs removed */
    size_t expired;              /* uploads expired */
} drv_blobs_gc_stats_t;
int drv_blobs_gc(drv_blobs_t *b, const char *const *refs, size_t n, int64_t now_s,
                 int64_t grace_s, int64_t upload_expiry_s, drv_blobs_gc_stats_t *st,
                 drv_error_t *err);

/* The GC's lock (DATA_DIR/blobs/gc.lock, flock): drv_blobs_gc holds it
 * exclusive for its whole pass (the names it reads and what it removes);
 * a writer that makes a blob named and held without an upload naming it
 * (a checkpoint commit of a manifest, store/checkpoints.c) holds it shared
 * from its record's rename to drv_blobs_claim, so a pass sees either
 * neither or both. Returns the fd (close it to release), -1 with err. */
int drv_blobs_gc_lock(const drv_blobs_t *b, bool exclusive, drv_error_t *err);

/* user holds whole blob hex again (its owners/ marker written anew, in case
 * a GC pass dropped it): 404 when the blob is not whole any more. */
int drv_blobs_claim(const drv_blobs_t *b, const char *user, const char *hex, drv_error_t *err);

/* Is hex 64 lowercase hex digits? */
bool drv_blobs_hex_ok(const char *hex);

/* Is blob hex whole in the store / does user hold it (whole + marker)? */
bool drv_blobs_whole(const drv_blobs_t *b, const char *hex);
bool drv_blobs_owned(const drv_blobs_t *b, const char *user, const char *hex);

/* Open whole blob hex for reading: fd and size. 404 when absent. */
int drv_blobs_open_read(const drv_blobs_t *b, const char *hex, int *fd, uint64_t *size,
                        drv_error_t *err);

/* A temporary file for an incoming body: fd open for writing, its path
 * into path (n bytes). */
int drv_blobs_tmp_open(const drv_blobs_t *b, char *path, size_t n, drv_error_t *err);

/* Record an upload of m for user: its manifest under uploads/ (*existed
 * says whether it was there), and the markers of its empty files. */
int drv_blobs_upload_save(const drv_blobs_t *b, const char *user, const drv_manifest_t *m,
                          bool *existed, drv_error_t *err);
/* The manifest of user's upload digest: 404 when there is none. */
int drv_blobs_upload_load(const drv_blobs_t *b, const char *user, const char *digest,
                          drv_manifest_t **out, drv_error_t *err);
/* Forget user's upload digest (its manifest; chunks go as blobs complete). */
void drv_blobs_upload_drop(const drv_blobs_t *b, const char *user, const char *digest);
/* Mark user's upload digest as active now (its expiry counts from here);
 * drv_blobs_upload_save and drv_blobs_put_chunk do it themselves. */
void drv_blobs_upload_touch(const drv_blobs_t *b, const char *user, const char *digest);
/* When user's upload digest was last touched (epoch s); -1 when there is none. */
int64_t drv_blobs_upload_mtime(const drv_blobs_t *b, const char *user, const char *digest);
/* Every upload of user: [{"id": DIGEST, "updated_at": EPOCH_S}], oldest first. */
json_t *drv_blobs_upload_list(const drv_blobs_t *b, const char *user);

/* What user still has to send of m: [{"sha256": HEX, "chunks": [i, ...]}],
 * one entry per distinct blob user does not hold, chunks not yet received,
 * in manifest order. *bytes (may be NULL) gets their total size. */
json_t *drv_blobs_missing(const drv_blobs_t *b, const char *user, const drv_manifest_t *m,
                          uint64_t *bytes);

/* Take chunk idx of blob hex of m for user from the temporary file tmp_path
 * (fd open, len bytes, sha256 got_hex): checks length and sha256 against
 * the manifest (400 naming blob, chunk, expected and got; 413 when too
 * long; 404 when m has no such blob or chunk), then keeps it durably. When
 * that completes the blob, checks the whole file's sha256 and moves it into
 * sha256/ (a mismatch discards the blob's chunks: 400). The temporary file
 * is removed in every case; fd is left to the caller. */
int drv_blobs_put_chunk(const drv_blobs_t *b, const char *user, const drv_manifest_t *m,
                        const char *hex, size_t idx, const char *tmp_path, int fd, uint64_t len,
                        const char *got_hex, drv_error_t *err);

/* Mark user as holding whole blob hex (a standby copying the blobs of the
 * user's records from another head; head/blob_sync.c). */
int drv_blobs_mark_owner(const drv_blobs_t *b, const char *user, const char *hex,
                         drv_error_t *err);

/* Take the temporary file tmp_path (from drv_blobs_tmp_open, closed) as
 * whole blob hex: its bytes are read back and hashed here, and only a
 * match is fsynced and renamed into sha256/ (400 otherwise). The
 * temporary file is gone in every case. */
int drv_blobs_adopt(const drv_blobs_t *b, const char *tmp_path, const char *hex,
                    drv_error_t *err);

/* The first file of m whose content is hex, NULL when none. */
const drv_manifest_file_t *drv_blobs_find(const drv_manifest_t *m, const char *hex);

#endif
