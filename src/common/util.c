/* util.c — see util.h. Randomness is getrandom(2) and hashing is
 * sha256.c: no libcrypto, which the agent does not otherwise load. */
#define _GNU_SOURCE
#include "common/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "common/sha256.h"

bool drv_id_valid(const char *id)
{
    if (!id)
        return false;
    size_t n = strlen(id);
    if (n < 1 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !(c == '-' && i > 0 && i < n - 1))
            return false;
    }
    return true;
}

int64_t drv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void drv_deadline_in(int64_t ms, struct timespec *ts)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

int64_t drv_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Years 1970..9999 by arithmetic (days to civil date, H. Hinnant's
 * algorithm): the same text as gmtime_r + strftime, without glibc's
 * time zone lock and format parser, for a create renders three times. */
static bool rfc3339_fast(int64_t epoch_s, char *buf, size_t len)
{
    if (epoch_s < 0 || epoch_s >= 253402300800LL || len < 21)
        return false;
    int64_t days = epoch_s / 86400, sod = epoch_s % 86400;
    int64_t z = days + 719468, era = z / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int d = (int)(doy - (153 * mp + 2) / 5 + 1), m = (int)(mp < 10 ? mp + 3 : mp - 9);
    int y = (int)(yoe + era * 400 + (m <= 2));
    int hh = (int)(sod / 3600), mm = (int)(sod / 60 % 60), ss = (int)(sod % 60);
    char *w = buf;
    *w++ = (char)('0' + y / 1000), *w++ = (char)('0' + y / 100 % 10);
    *w++ = (char)('0' + y / 10 % 10), *w++ = (char)('0' + y % 10), *w++ = '-';
    *w++ = (char)('0' + m / 10), *w++ = (char)('0' + m % 10), *w++ = '-';
    *w++ = (char)('0' + d / 10), *w++ = (char)('0' + d % 10), *w++ = 'T';
    *w++ = (char)('0' + hh / 10), *w++ = (char)('0' + hh % 10), *w++ = ':';
    *w++ = (char)('0' + mm / 10), *w++ = (char)('0' + mm % 10), *w++ = ':';
    *w++ = (char)('0' + ss / 10), *w++ = (char)('0' + ss % 10), *w++ = 'Z';
    *w = '\0';
    return true;
}

void drv_rfc3339(int64_t epoch_s, char *buf, size_t len)
{
    if (rfc3339_fast(epoch_s, buf, len))
        return;
    time_t t = (time_t)epoch_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int64_t drv_parse_rfc3339(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm) : NULL;
    if (!end || *end)
        return -1;
    return (int64_t)timegm(&tm);
}

static void to_hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

int drv_random_hex(size_t n, char *out)
{
    unsigned char buf[64];
    if (n > sizeof buf)
        return -1;
    /* getrandom(2) from the kernel's CSPRNG: blocks only until it is seeded
     * at boot; at most 256 bytes never come back short, but loop anyway */
    for (size_t got = 0; got < n;) {
        ssize_t r = getrandom(buf + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    to_hex(buf, n, out);
    memset(buf, 0, sizeof buf);
    return 0;
}

void drv_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    drv_sha256(data, len, md);
    to_hex(md, sizeof md, out);
}

bool drv_ct_equal(const void *a, const void *b, size_t len)
{
    /* every byte is read whatever differs; volatile keeps the compiler
     * from turning the loop into an early-exit memcmp */
    const volatile unsigned char *x = a, *y = b;
    unsigned char d = 0;
    for (size_t i = 0; i < len; i++)
        d |= x[i] ^ y[i];
    return d == 0;
}

int drv_buf_append(char **s, size_t *len, const void *p, size_t n, size_t max)
{
    if (n > max || *len > max - n)
        return -1;
    char *ns = realloc(*s, *len + n + 1);
    if (!ns)
        return -1;
    memcpy(ns + *len, p, n);
    *s = ns;
    *len += n;
    ns[*len] = '\0';
    return 0;
}

void *drv_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "drover: out of memory\n");
        abort();
    }
    return p;
}

char *drv_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = drv_xmalloc(n);
    memcpy(p, s, n);
    return p;
}

void drv_appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = *cap - *len;
        int n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (*buf && (size_t)n < room) {
            *len += (size_t)n;
            return;
        }
        size_t ncap = *cap ? *cap * 2 : 16384;
        while (ncap < *len + (size_t)n + 1)
            ncap *= 2;
        char *nb = realloc(*buf, ncap);
        if (!nb)
            abort();
        *buf = nb;
        *cap = ncap;
    }
}

void drv_file_stamp(const char *path, drv_file_stamp_t *out)
{
    struct stat st;
    *out = (drv_file_stamp_t){0, 0, 0};
    if (stat(path, &st) == 0)
        *out = (drv_file_stamp_t){(int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
                                  (int64_t)st.st_size, (uint64_t)st.st_ino};
}

bool drv_file_stamp_changed(const char *path, const drv_file_stamp_t *was,
                            drv_file_stamp_t *now)
{
    drv_file_stamp(path, now);
    return now->mtime_ns != was->mtime_ns || now->size != was->size || now->ino != was->ino;
}

bool drv_list_has(const char *list, const char *item, size_t len)
{
    for (const char *p = list; len && *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, item, len) == 0)
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

int drv_dir_make_absolute(char *dir, size_t cap)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -1;
    char *abs = realpath(dir, NULL);
    if (!abs)
        return -1;
    int rc = 0;
    if (strlen(abs) >= cap) {
        errno = ENAMETOOLONG;
        rc = -1;
    } else
        memcpy(dir, abs, strlen(abs) + 1);
    free(abs);
    return rc;
}
