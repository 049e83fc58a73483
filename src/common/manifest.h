/* manifest.h — an artifact's manifest: every file's relative path, size and
 * sha256, the sha256 of each fixed-size chunk of it (for ranged, resumable,
 * verified transfer), the total size and the manifest's own digest.
 *
 * JSON form (what drv_manifest_to_json writes and drv_manifest_parse reads):
 *   {"version":1,"chunk_size":67108864,"total_size":N,
 *    "files":[{"path":"a/b.bin","size":N,"sha256":"HEX",
 *              "chunks":["HEX",...]},...],
 *    "digest":"HEX"}
 * The digest is the sha256 of the canonical form: that object without
 * "digest", keys in the order above, files sorted by path (bytewise), no
 * whitespace, strings escaped as jansson's compact dump does (paths hold no
 * control characters, so only '"' and '\' are ever escaped), integers in
 * decimal. Hex is 64 lowercase digits. File k has ceil(size/chunk_size)
 * chunks (none when empty); the last may be short.
 *
 * Paths: relative, '/'-separated, valid UTF-8, no empty, "." or ".."
 * component, no control character, at most DRV_MANIFEST_MAX_PATH bytes, no
 * duplicates, and no file that is also another file's directory ("a" and
 * "a/b"). drv_manifest_build follows a symlink whose target stays inside
 * the tree and names a regular file (the link's path gets the target's
 * content, as a copy would); a link leaving the tree, a dangling link, a
 * link to a directory, and fifos, sockets and devices are refused.
 *
 * Pure apart from drv_manifest_build (which reads the tree with a small
 * pthread pool); a manifest is immutable once built or parsed and may be
 * shared by threads.
 */
#ifndef DRV_MANIFEST_H
#define DRV_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define DRV_MANIFEST_CHUNK_DEFAULT (64ull << 20)
#define DRV_MANIFEST_CHUNK_MIN 4096ull
#define DRV_MANIFEST_CHUNK_MAX (1ull << 30)
#define DRV_MANIFEST_MAX_FILES 100000
#define DRV_MANIFEST_MAX_PATH 1024
#define DRV_MANIFEST_MAX_FILE_SIZE (4ull << 40)     /* 4 TiB */
#define DRV_MANIFEST_MAX_TOTAL (64ull << 40)        /* 64 TiB */
#define DRV_MANIFEST_MAX_CHUNKS (1u << 22)          /* over all files */
#define DRV_MANIFEST_MAX_JSON (512u << 20)

typedef struct drv_manifest_file {
    char *path;
    uint64_t size;
    char sha256[65];
    size_t nchunks;
    char (*chunks)[65];          /* nchunks hex digests */
} drv_manifest_file_t;

typedef struct drv_manifest {
    uint64_t chunk_size;
    uint64_t total_size;
    size_t nfiles;
    drv_manifest_file_t *files;  /* sorted by path */
    char digest[65];
} drv_manifest_t;

/* Hash the regular files under dir (threads workers, 0 = the CPU count up
 * to 8; chunk_size 0 = DRV_MANIFEST_CHUNK_DEFAULT) into *out. -1 with err
 * naming the path and the reason for anything refused (see above), an
 * empty tree, more than DRV_MANIFEST_MAX_FILES files or a size over the
 * bounds, and a file that changes size while it is hashed. */
int drv_manifest_build(const char *dir, uint64_t chunk_size, int threads, drv_manifest_t **out,
                       drv_error_t *err);

/* Parse and validate a manifest's JSON: unknown or missing fields, wrong
 * types, bad paths, bad hex, chunk lists inconsistent with the sizes, a
 * total that is not the sum, a digest that is not the content's are errors
 * (400, err->field the JSON path, e.g. "files[3].chunks[1]"). */
int drv_manifest_parse(const char *json, size_t len, drv_manifest_t **out, drv_error_t *err);

/* The JSON form, with the digest (malloc'd, NUL-terminated); NULL only on
 * out-of-memory. */
char *drv_manifest_to_json(const drv_manifest_t *m);

/* The sha256 of m's canonical form, into hex (65 bytes). -1 on out-of-memory. */
int drv_manifest_compute_digest(const drv_manifest_t *m, char hex[65]);

/* The number of chunks a file of size bytes has, and chunk i's length. */
size_t drv_manifest_nchunks(uint64_t size, uint64_t chunk_size);
uint64_t drv_manifest_chunk_len(uint64_t size, uint64_t chunk_size, size_t i);

/* A path check as the manifest applies it ("" when fine, else why). */
const char *drv_manifest_path_problem(const char *path);

void drv_manifest_free(drv_manifest_t *m);

#endif
