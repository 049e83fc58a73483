/* util.h — small shared helpers: ids, time, random secrets, hashing. */
#ifndef DRV_UTIL_H
#define DRV_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$ */
bool drv_id_valid(const char *id);

int64_t drv_now_ms(void);          /* wall clock, ms since the epoch */
struct timespec;
/* The CLOCK_REALTIME instant ms from now (for pthread_cond_timedwait). */
void drv_deadline_in(int64_t ms, struct timespec *ts);
int64_t drv_mono_ms(void);         /* monotonic clock, ms */
/* RFC 3339 UTC with seconds: "2026-11-29T17:40:00Z"; buf >= 21 bytes. */
void drv_rfc3339(int64_t epoch_s, char *buf, size_t len);
/* Parse what drv_rfc3339 writes; -1 when malformed. */
int64_t drv_parse_rfc3339(const char *s);

/* n random bytes from the OS CSPRNG as lowercase hex (out >= 2n+1). 0/-1. */
int drv_random_hex(size_t n, char *out);
/* SHA-256 of data as lowercase hex (out >= 65). */
void drv_sha256_hex(const void *data, size_t len, char out[65]);
/* Constant-time equality of two equal-length buffers. */
bool drv_ct_equal(const void *a, const void *b, size_t len);

/* Append n bytes to the malloc'd buffer *s of *len bytes, keeping it
 * NUL-terminated; -1 (buffer unchanged) when it would pass max bytes or
 * memory runs out. For HTTP body sinks. */
int drv_buf_append(char **s, size_t *len, const void *p, size_t n, size_t max);

/* printf to the end of the malloc'd text *buf (*len bytes, *cap allocated;
 * grown as needed, aborts on out-of-memory). For Prometheus text. */
void drv_appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

char *drv_strdup(const char *s);   /* aborts on out-of-memory */
void *drv_xmalloc(size_t n);       /* aborts on out-of-memory */

/* What tells a file changed: its modification time, size and inode (all
 * zero when it cannot be read). drv_file_stamp_changed fills *now and says
 * whether it differs from *was. */
typedef struct drv_file_stamp {
    int64_t mtime_ns, size;
    uint64_t ino;
} drv_file_stamp_t;
void drv_file_stamp(const char *path, drv_file_stamp_t *out);
bool drv_file_stamp_changed(const char *path, const drv_file_stamp_t *was,
                            drv_file_stamp_t *now);

/* Is item[0..len) one of the comma-separated list's elements? (Never for
 * len 0.) */
bool drv_list_has(const char *list, const char *item, size_t len);

/* Make dir (mode 0700; its parent must exist) unless it exists, then write
 * its absolute path back into dir (cap bytes): a daemon hands paths under
 * its data dir to processes that run elsewhere (droverd's local agents, an
 * agent's replicas in their own working directories), where a relative one
 * names nothing. 0, or -1 with errno set (ENAMETOOLONG: no room in dir). */
int drv_dir_make_absolute(char *dir, size_t cap);

#endif
