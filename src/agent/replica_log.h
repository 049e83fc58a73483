/* replica_log.h — a replica's log file: capture with size-capped rotation,
 * the tail of the log for status reports, and offset reads for
 * `drover logs --follow`.
 *
 * Layout: DIR/stdout.log is the current file (the replica's stdout and
 * stderr, one pipe, plus the supervisor's own "drover-agent:" lines);
 * rotation renames stdout.log -> stdout.log.1 -> ... -> stdout.log.N and
 * drops what falls off the end. No file ever exceeds max_bytes: a chunk is
 * split at its last newline that still fits (a line longer than a whole
 * file is split where the file is full).
 *
 * Invariants: fd >= 0 iff the log is open; size is the current file's size.
 * Thread ownership: a drv_rlog_t belongs to the supervisor thread, which
 * alone writes and rotates it. drv_rlog_tail() and drv_rlog_read() work on
 * paths and may be called from any thread (a concurrent rotation makes a
 * reader see the renamed file's old contents or the fresh file, never a
 * torn state).
 */
#ifndef DRV_REPLICA_LOG_H
#define DRV_REPLICA_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

#define DRV_RLOG_NAME "stdout.log"

typedef struct drv_rlog {
    char dir[4096];
    char path[4096];     /* dir/stdout.log */
    int fd;              /* -1 when closed */
    int64_t size;        /* bytes in the current file */
    int64_t max_bytes;   /* per file, > 0 */
    int files;           /* rotated files kept, >= 0 */
    int write_errno;     /* last write error reported (reported once) */
} drv_rlog_t;

/* Set up l for DIR (no I/O); call before drv_rlog_open/close. */
void drv_rlog_init(drv_rlog_t *l, const char *dir, int64_t max_bytes, int files);
/* mkdir -p DIR (mode 0750). 0 / -1 with errno. */
int drv_rlog_mkdirs(const char *dir);
/* Create DIR (and parents) and open DIR/stdout.log for appending. 0 / -1. */
int drv_rlog_open(drv_rlog_t *l, drv_error_t *err);
/* Append n bytes, rotating as needed. Errors are logged once, data dropped. */
void drv_rlog_write(drv_rlog_t *l, const void *buf, size_t n);
/* Append one supervisor line: "drover-agent <time>: <message>\n". */
void drv_rlog_note(drv_rlog_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void drv_rlog_close(drv_rlog_t *l);
/* Delete DIR/stdout.log, its rotated files (any number) and DIR itself. */
void drv_rlog_remove(const char *dir);
/* A finished worker's log kept: the last keep_bytes of DIR's log (reaching
 * into stdout.log.1 when the current file holds fewer) become
 * TO/stdout.log (written whole, then renamed), and DIR goes as
 * drv_rlog_remove does. 0 / -1 with errno (DIR is removed either way). */
int drv_rlog_retire(const char *dir, const char *to, int64_t keep_bytes);
/* Keep the `keep` newest (by mtime) log directories under PARENT, removing
 * the others as drv_rlog_remove does. */
void drv_rlog_prune(const char *parent, int keep);

/* The last `lines` lines of the log at `path` (reaching into path.1 when the
 * current file holds fewer), as valid UTF-8 with control characters other
 * than newline and tab replaced by '?', NUL-terminated in buf (len > 0).
 * Returns the number of bytes written (0 when there is no log). */
size_t drv_rlog_tail(const char *path, int lines, char *buf, size_t len);

/* Read up to max bytes of the file at path, from offset when offset >= 0
 * (an offset past the end means the file was rotated since: reading starts
 * again at 0), or the last -offset bytes when offset < 0. *next_offset gets
 * the offset just past what was read. Returns bytes read (0: nothing new),
 * or -1 with errno set. */
ssize_t drv_rlog_read(const char *path, int64_t offset, void *buf, size_t max,
                      int64_t *next_offset);

/* Replace invalid UTF-8 and control characters (but \n and \t) with '?', in place. */
void drv_rlog_sanitize(char *s, size_t n);

#endif
