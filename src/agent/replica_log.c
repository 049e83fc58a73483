/* replica_log.c — a replica's log file: capture, rotation, tail, reads.
 * See replica_log.h for the layout, invariants and thread ownership. */
#define _GNU_SOURCE
#include "agent/replica_log.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define TAIL_READ_MAX 16384   /* bytes looked at per file for a tail */

void drv_rlog_init(drv_rlog_t *l, const char *dir, int64_t max_bytes, int files)
{
    assert(l && dir && max_bytes > 0 && files >= 0);
    memset(l, 0, sizeof *l);
    snprintf(l->dir, sizeof l->dir, "%s", dir);
    snprintf(l->path, sizeof l->path, "%s/%s", dir, DRV_RLOG_NAME);
    l->fd = -1;
    l->max_bytes = max_bytes;
    l->files = files;
}

int drv_rlog_mkdirs(const char *dir)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0750) < 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    if (mkdir(p, 0750) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

static int open_current(drv_rlog_t *l, int extra_flags)
{
    int fd = open(l->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | extra_flags, 0640);
    if (fd < 0)
        return -1;
    struct stat st;
    l->size = fstat(fd, &st) == 0 ? (int64_t)st.st_size : 0;
    l->fd = fd;
    return 0;
}

int drv_rlog_open(drv_rlog_t *l, drv_error_t *err)
{
    assert(l);
    if (l->fd >= 0)
        return 0;
    if (drv_rlog_mkdirs(l->dir) < 0)
        return drv_err_internal(err, "cannot create %s: %s", l->dir, strerror(errno));
    if (open_current(l, 0) < 0)
        return drv_err_internal(err, "cannot open %s: %s", l->path, strerror(errno));
    return 0;
}

void drv_rlog_close(drv_rlog_t *l)
{
    if (l && l->fd >= 0) {
        close(l->fd);
        l->fd = -1;
    }
}

static void report_errno(drv_rlog_t *l, const char *what)
{
    if (l->write_errno != errno) {
        l->write_errno = errno;
        drv_warn("replica log %s: %s: %s (output dropped)", l->path, what, strerror(errno));
    }
}

/* stdout.log.(N-1) -> .N, ..., stdout.log -> .1; then a fresh stdout.log. */
static void rotate(drv_rlog_t *l)
{
    char from[4200], to[4200];
    drv_rlog_close(l);
    if (l->files == 0) {
        if (open_current(l, O_TRUNC) < 0)
            report_errno(l, "truncate");
        return;
    }
    for (int i = l->files - 1; i >= 1; i--) {
        snprintf(from, sizeof from, "%s.%d", l->path, i);
        snprintf(to, sizeof to, "%s.%d", l->path, i + 1);
        if (rename(from, to) < 0 && errno != ENOENT)
            report_errno(l, "rotate");
    }
    snprintf(to, sizeof to, "%s.1", l->path);
    if (rename(l->path, to) < 0 && errno != ENOENT)
        report_errno(l, "rotate");
    if (open_current(l, O_TRUNC) < 0)
        report_errno(l, "reopen");
}

static void write_all(drv_rlog_t *l, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(l->fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            report_errno(l, "write");
            return;
        }
        p += w;
        n -= (size_t)w;
        l->size += w;
    }
    l->write_errno = 0;
}

void drv_rlog_write(drv_rlog_t *l, const void *buf, size_t n)
{
    assert(l && (buf || n == 0));
    const char *p = buf;
    while (n > 0) {
        if (l->fd < 0 && drv_rlog_open(l, NULL) < 0) {
            report_errno(l, "open");
            return;
        }
        int64_t room = l->max_bytes - l->size;
        if ((int64_t)n <= room) {
            write_all(l, p, n);
            return;
        }
        /* Split at the last newline that fits; a line that does not fit
         * starts the next file, unless it could not fit in any file. */
        size_t take = room > 0 ? (size_t)room : 0;
        const char *nl = take ? memrchr(p, '\n', take) : NULL;
        if (nl)
            take = (size_t)(nl - p) + 1;
        else if (l->size > 0)
            take = 0;
        if (take)
            write_all(l, p, take);
        p += take;
        n -= take;
        rotate(l);
        if (l->fd < 0)
            return;
    }
}

void drv_rlog_note(drv_rlog_t *l, const char *fmt, ...)
{
    char line[1024];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "drover-agent %04d-%02d-%02dT%02d:%02d:%02d.%03ldZ: ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    line[len++] = '\n';
    drv_rlog_write(l, line, len);
}

void drv_rlog_remove(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    size_t nl = strlen(DRV_RLOG_NAME);
    char p[4400];
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, DRV_RLOG_NAME, nl) != 0 ||
            (e->d_name[nl] != '\0' && e->d_name[nl] != '.'))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* Append the last `want` bytes of path to fd; returns the bytes copied. */
static int64_t copy_end(const char *path, int fd, int64_t want)
{
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return 0;
    struct stat st;
    int64_t done = 0;
    if (fstat(in, &st) == 0 && want > 0) {
        off_t from = st.st_size > (off_t)want ? st.st_size - (off_t)want : 0;
        char buf[65536];
        ssize_t r;
        while ((r = pread(in, buf, sizeof buf, from + (off_t)done)) > 0) {
            if (write(fd, buf, (size_t)r) != r)
                break;
            done += r;
        }
    }
    close(in);
    return done;
}

int drv_rlog_retire(const char *dir, const char *to, int64_t keep_bytes)
{
    char cur[4400], prev[4400], tmp[4400], dst[4400];
    snprintf(cur, sizeof cur, "%s/%s", dir, DRV_RLOG_NAME);
    snprintf(prev, sizeof prev, "%s/%s.1", dir, DRV_RLOG_NAME);
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", to, DRV_RLOG_NAME);
    snprintf(dst, sizeof dst, "%s/%s", to, DRV_RLOG_NAME);
    struct stat st;
    int64_t cur_size = stat(cur, &st) == 0 ? (int64_t)st.st_size : 0;
    if (drv_rlog_mkdirs(to) < 0)
        return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0)
        return -1;
    if (cur_size < keep_bytes)   /* reach into the rotated file for the rest */
        copy_end(prev, fd, keep_bytes - cur_size);
    copy_end(cur, fd, keep_bytes);
    int rc = close(fd) == 0 && rename(tmp, dst) == 0 ? 0 : -1;
    if (rc < 0)
        unlink(tmp);
    drv_rlog_remove(dir);
    return rc;
}

typedef struct aged {
    char name[256];
    time_t mtime;
} aged_t;

static int newest_first(const void *a, const void *b)
{
    const aged_t *x = a, *y = b;
    return (x->mtime < y->mtime) - (x->mtime > y->mtime);
}

void drv_rlog_prune(const char *parent, int keep)
{
    DIR *d = opendir(parent);
    if (!d)
        return;
    aged_t *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    char p[4400];
    while ((e = readdir(d))) {
        struct stat st;
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof v->name)
            continue;
        snprintf(p, sizeof p, "%s/%s", parent, e->d_name);
        if (stat(p, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            v = realloc(v, cap * sizeof *v);
            if (!v)
                abort();
        }
        snprintf(v[n].name, sizeof v[n].name, "%s", e->d_name);
        v[n++].mtime = st.st_mtime;
    }
    closedir(d);
    if (n > (size_t)keep) {
        qsort(v, n, sizeof *v, newest_first);
        for (size_t i = (size_t)keep; i < n; i++) {
            snprintf(p, sizeof p, "%s/%s", parent, v[i].name);
            drv_rlog_remove(p);
        }
    }
    free(v);
}

/* --- reading ------------------------------------------------------------ */

/* The last up-to-max bytes of a file into buf; returns the count (0 on error). */
static size_t read_end(const char *path, char *buf, size_t max)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    size_t got = 0;
    if (fstat(fd, &st) == 0) {
        off_t from = st.st_size > (off_t)max ? st.st_size - (off_t)max : 0;
        while (got < max) {
            ssize_t r = pread(fd, buf + got, max - got, from + (off_t)got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
    }
    close(fd);
    return got;
}

static int count_lines(const char *p, size_t n)
{
    int c = 0;
    for (size_t i = 0; i < n; i++)
        c += p[i] == '\n';
    if (n > 0 && p[n - 1] != '\n')
        c++;
    return c;
}

/* Length of the valid UTF-8 sequence at p (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    unsigned cp = c & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void drv_rlog_sanitize(char *s, size_t n)
{
    unsigned char *p = (unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x20 || p[i] == 0x7f) {
            if (p[i] != '\n' && p[i] != '\t')
                p[i] = '?';
            i++;
            continue;
        }
        size_t k = utf8_len(p + i, n - i);
        if (k == 0) {
            p[i++] = '?';
            continue;
        }
        i += k;
    }
}

size_t drv_rlog_tail(const char *path, int lines, char *buf, size_t len)
{
    assert(path && buf && len > 0 && lines > 0);
    buf[0] = '\0';
    char *tmp = malloc(2 * TAIL_READ_MAX);
    if (!tmp)
        return 0;
    size_t n = read_end(path, tmp + TAIL_READ_MAX, TAIL_READ_MAX);
    char *start = tmp + TAIL_READ_MAX;
    if (count_lines(start, n) <= lines) {
        /* Too little in the current file: prepend the end of the previous one. */
        char prev[4200];
        snprintf(prev, sizeof prev, "%s.1", path);
        size_t k = read_end(prev, tmp, TAIL_READ_MAX);
        if (k > 0) {
            memmove(tmp + TAIL_READ_MAX - k, tmp, k);
            start -= k;
            n += k;
        }
    }
    /* Drop a trailing newline, then walk back `lines` newlines. */
    size_t end = n;
    while (end > 0 && start[end - 1] == '\n')
        end--;
    size_t from = end;
    int seen = 0;
    while (from > 0) {
        if (start[from - 1] == '\n' && ++seen == lines)
            break;
        from--;
    }
    /* Fit in len - 1 bytes, starting at a line (or at least a character) boundary. */
    if (end - from > len - 1) {
        size_t cut = end - (len - 1);
        const char *nl = memchr(start + cut, '\n', end - cut);
        if (nl && (size_t)(nl - start) + 1 < end)
            cut = (size_t)(nl - start) + 1;
        else
            while (cut < end && ((unsigned char)start[cut] & 0xc0) == 0x80)
                cut++;
        from = cut;
    }
    size_t out = end - from;
    memcpy(buf, start + from, out);
    buf[out] = '\0';
    drv_rlog_sanitize(buf, out);
    free(tmp);
    return out;
}

ssize_t drv_rlog_read(const char *path, int64_t offset, void *buf, size_t max,
                      int64_t *next_offset)
{
    assert(path && (buf || max == 0));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    int64_t size = st.st_size;
    if (offset < 0)
        offset = -offset >= size ? 0 : size + offset;
    else if (offset > size)
        offset = 0;   /* rotated since the last read */
    ssize_t got = 0;
    while ((size_t)got < max) {
        ssize_t r = pread(fd, (char *)buf + got, max - (size_t)got, (off_t)(offset + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        if (r == 0)
            break;
        got += r;
    }
    close(fd);
    if (next_offset)
        *next_offset = offset + got;
    return got;
}
