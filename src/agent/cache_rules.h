/* cache_rules.h — the node cache's pure decisions and file formats
 * (cache.c does the I/O), unit-tested in t/unit/test_cache.c.
 *
 * Sidecar (tmp/HEX.chunks) of a download:
 *   "drover-chunks 1 SIZE CHUNK_SIZE NCHUNKS\n" then "I\n" per chunk I
 *   verified and flushed. A last line without its newline (a write cut by a
 *   crash) is ignored; any other malformed line, an index out of range or a
 *   header that is not this download's makes the whole sidecar void (the
 *   download starts over).
 * Index (index): "drover-cache-index 1\n" then "HEX SIZE LAST_USE_MS\n" per
 *   blob; written whole to index.tmp and renamed.
 * LRU: victims are chosen among evictable entries by oldest last use (ties:
 *   by hex), until the bytes freed reach the need.
 * Peer sources (peer fan-out): the members of a cluster (the peers and this
 *   node) are ranked per chunk by rendezvous hashing: score(member, chunk) =
 *   a 64-bit mix of FNV-1a over "ID\nHEX\nINDEX", highest first (ties: by
 *   member index). The first member not banned is the chunk's owner: the
 *   one node that fetches it from the origin; the others get it from the
 *   owner (or any peer that has it). drv_cache_chunk_plan turns a ranking
 *   into the sources of one try (see there).
 */
#ifndef DRV_CACHE_RULES_H
#define DRV_CACHE_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The header line (with its newline) into buf; its length. */
int drv_cache_sidecar_header(char *buf, size_t n, uint64_t size, uint64_t chunk_size,
                             size_t nchunks);
/* Parse a sidecar: 0 with done[i] = 1 for each chunk listed (done has
 * nchunks bytes, zeroed here) and *ndone their count; -1 when void. */
int drv_cache_sidecar_parse(const char *text, size_t len, uint64_t size, uint64_t chunk_size,
                            size_t nchunks, unsigned char *done, size_t *ndone);

typedef struct drv_cache_lru_item {
    const char *hex;
    uint64_t size;
    int64_t last_use_ms;
    bool evictable;
} drv_cache_lru_item_t;

/* Choose victims (indexes into items, written to victims, which has room
 * for n) freeing at least need bytes: 0 with *nv set, or -1 (and *nv = 0)
 * when all evictable items together are not enough. */
int drv_cache_lru_pick(const drv_cache_lru_item_t *items, size_t n, uint64_t need,
                       size_t *victims, size_t *nv);

/* One index line "HEX SIZE LAST\n" parsed; 0, or -1 when malformed. */
int drv_cache_index_line(const char *line, char hex[65], uint64_t *size, int64_t *last);

/* Rank members ids[0..n) for chunk `chunk` of blob hex: order[] gets a
 * permutation of 0..n-1, best first. The same inputs give the same order on
 * every node; removing a member moves only the chunks it owned. */
void drv_cache_rank(const char *const *ids, size_t n, const char *hex, size_t chunk,
                    size_t *order);

/* The sources of one try of a chunk. rank: the members by rank (n of them);
 * banned[m]: member m failed or sent bad bytes during this download (self
 * is never banned); self: this node's member index, or SIZE_MAX when it is
 * not a member; retry: an earlier try found no peer holding the chunk;
 * waited_out: the time allowed for waiting on the owner is over.
 *   - first try: every peer not banned, in rank order;
 *   - a retry: the owner alone (when it is a peer);
 *   - the origin comes after them when this node is the owner, when there
 *     is no owner peer (all banned, or self not a member) or when waited
 *     out; otherwise *origin is false and, if no peer has the chunk, the
 *     caller waits a little and tries again (the owner is fetching it).
 * Writes member indexes to srcs (room for n) and returns how many. */
size_t drv_cache_chunk_plan(const size_t *rank, size_t n, const bool *banned, size_t self,
                            bool retry, bool waited_out, size_t *srcs, bool *origin);

#endif
