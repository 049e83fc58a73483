/* cache_disk.c — the node cache's files (layout in cache.h): create and
 * destroy (the scan that rebuilds the tables from disk), partial downloads
 * and their sidecars, a blob's final check and rename, snapshot linking,
 * removal of what eviction drops, and the index of last uses. */
#define _GNU_SOURCE
#include "agent/cache_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/cache_rules.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/util.h"

#define SIDECAR_MAX (64u << 20)

static void pathf(char *out, size_t n, drv_cache_t *c, const char *fmt, const char *a,
                  const char *b)
{
    char rel[1400];
    snprintf(rel, sizeof rel, fmt, a, b);
    snprintf(out, n, "%s/%s", c->dir, rel);
}

/* --- removing trees ------------------------------------------------------ */

static int open_up(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
    if (type == FTW_D)
        chmod(p, 0755);
    return 0;
}

static int remove_one(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
    (type == FTW_DP ? rmdir : unlink)(p);
    return 0;
}

static void rm_tree(const char *p)
{
    struct stat st;
    if (lstat(p, &st) < 0)
        return;
    if (!S_ISDIR(st.st_mode)) {
        unlink(p);
        return;
    }
    nftw(p, open_up, 16, FTW_PHYS);
    nftw(p, remove_one, 16, FTW_PHYS | FTW_DEPTH);
}

static void empty_trash(drv_cache_t *c)
{
    char tmp[1200], p[1400];
    snprintf(tmp, sizeof tmp, "%s/tmp", c->dir);
    DIR *d = opendir(tmp);
    if (!d)
        return;
    for (struct dirent *de; (de = readdir(d));)
        if (strncmp(de->d_name, "trash-", 6) == 0) {
            snprintf(p, sizeof p, "%s/%s", tmp, de->d_name);
            rm_tree(p);
        }
    closedir(d);
}

void drv_cache__drop_snapshot(drv_cache_t *c, const char *digest)
{
    char from[1400], to[1400], js[1400], suffix[20];
    pathf(from, sizeof from, c, "snapshots/%s%s", digest, "");
    pathf(js, sizeof js, c, "snapshots/%s%s", digest, ".json");
    drv_random_hex(8, suffix);
    char name[120];
    snprintf(name, sizeof name, "%.64s-%s", digest, suffix);
    pathf(to, sizeof to, c, "tmp/trash-%s%s", name, "");
    unlink(js);
    chmod(from, 0755);   /* a directory moving to another parent must be writable */
    if (rename(from, to) < 0 && errno != ENOENT)
        rm_tree(from);
}

void drv_cache__drop_blob_files(drv_cache_t *c, const char *hex)
{
    char p[1400];
    pathf(p, sizeof p, c, "blobs/sha256/%s%s", hex, "");
    unlink(p);
    pathf(p, sizeof p, c, "tmp/%s%s", hex, ".partial");
    unlink(p);
    pathf(p, sizeof p, c, "tmp/%s%s", hex, ".chunks");
    unlink(p);
}

/* --- the index ----------------------------------------------------------- */

void drv_cache__save_index(drv_cache_t *c)
{
    pthread_mutex_lock(&c->index_mu);
    pthread_mutex_lock(&c->mu);
    char *buf = NULL;
    size_t len = 0;
    bool dirty = c->index_dirty;
    c->index_dirty = false;
    if (dirty) {
        drv_buf_append(&buf, &len, "drover-cache-index 1\n", 21, SIZE_MAX);
        for (blob_t *b = c->blobs; b; b = b->next) {
            if (b->state != B_PRESENT)
                continue;
            char line[128];
            int n = snprintf(line, sizeof line, "%s %" PRIu64 " %" PRId64 "\n", b->hex, b->size,
                             b->last_use_ms);
            drv_buf_append(&buf, &len, line, (size_t)n, SIZE_MAX);
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (dirty && buf) {
        char p[1200], tp[1200];
        snprintf(p, sizeof p, "%s/index", c->dir);
        snprintf(tp, sizeof tp, "%s/index.tmp", c->dir);
        int fd = open(tp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, buf, len) != (ssize_t)len || close(fd) < 0 ||
            rename(tp, p) < 0)
            drv_warn("cache: cannot write %s: %s", p, strerror(errno));
    }
    free(buf);
    empty_trash(c);
    pthread_mutex_unlock(&c->index_mu);
}

/* --- downloads ----------------------------------------------------------- */

static char *slurp(const char *p, size_t max, size_t *len)
{
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *buf = NULL;
    size_t n = 0;
    char tmp[65536];
    ssize_t r;
    while ((r = read(fd, tmp, sizeof tmp)) > 0)
        if (drv_buf_append(&buf, &n, tmp, (size_t)r, max) < 0) {
            free(buf);
            buf = NULL;
            break;
        }
    close(fd);
    if (buf)
        *len = n;
    else if (r == 0 && n == 0)
        buf = drv_strdup(""), *len = 0;
    return buf;
}

int drv_cache__open_partial(drv_cache_t *c, const char *hex, uint64_t size, uint64_t chunk_size,
                            size_t nchunks, unsigned char *done, size_t *ndone, int *fd,
                            int *sfd, char *msg, size_t ml)
{
    char pp[1400], sp[1400], tp[1400];
    pathf(pp, sizeof pp, c, "tmp/%s%s", hex, ".partial");
    pathf(sp, sizeof sp, c, "tmp/%s%s", hex, ".chunks");
    pathf(tp, sizeof tp, c, "tmp/%s%s", hex, ".chunks.tmp");
    *fd = *sfd = -1;
    *ndone = 0;
    size_t len = 0;
    char *side = slurp(sp, SIDECAR_MAX, &len);
    struct stat st;
    bool resume = side && drv_cache_sidecar_parse(side, len, size, chunk_size, nchunks, done,
                                                  ndone) == 0 &&
                  stat(pp, &st) == 0 && (uint64_t)st.st_size == size;
    free(side);
    if (!resume) {
        memset(done, 0, nchunks);
        *ndone = 0;
    }
    /* the sidecar is rewritten whole (no torn line to append to) */
    char *text = NULL;
    size_t tl = 0;
    char line[128];
    int hl = drv_cache_sidecar_header(line, sizeof line, size, chunk_size, nchunks);
    drv_buf_append(&text, &tl, line, (size_t)hl, SIZE_MAX);
    for (size_t i = 0; i < nchunks; i++)
        if (done[i]) {
            int n = snprintf(line, sizeof line, "%zu\n", i);
            drv_buf_append(&text, &tl, line, (size_t)n, SIZE_MAX);
        }
    *fd = open(pp, O_RDWR | O_CREAT | O_CLOEXEC | (resume ? 0 : O_TRUNC), 0600);
    int w = open(tp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = *fd >= 0 && w >= 0 && (resume || ftruncate(*fd, (off_t)size) == 0) &&
              write(w, text, tl) == (ssize_t)tl && fsync(w) == 0;
    if (w >= 0)
        close(w);
    ok = ok && rename(tp, sp) == 0;
    free(text);
    if (ok)
        *sfd = open(sp, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (!ok || *sfd < 0) {
        snprintf(msg, ml, "blob %s: cannot set up its download in %s/tmp: %s", hex, c->dir,
                 strerror(errno));
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        return -1;
    }
    return 0;
}

int drv_cache__finalize_blob(drv_cache_t *c, const char *hex, uint64_t size, int fd, char *msg,
                             size_t ml)
{
    char pp[1400], sp[1400], bp[1400], bd[1200];
    pathf(pp, sizeof pp, c, "tmp/%s%s", hex, ".partial");
    pathf(sp, sizeof sp, c, "tmp/%s%s", hex, ".chunks");
    pathf(bp, sizeof bp, c, "blobs/sha256/%s%s", hex, "");
    snprintf(bd, sizeof bd, "%s/blobs/sha256", c->dir);
    drv_sha256_t h;
    drv_sha256_init(&h);
    char *buf = drv_xmalloc(1 << 20);
    uint64_t off = 0;
    while (off < size) {
        ssize_t n = pread(fd, buf, 1 << 20, (off_t)off);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            break;
        }
        drv_sha256_update(&h, buf, (size_t)n);
        off += (uint64_t)n;
    }
    free(buf);
    unsigned char md[32];
    char got[65];
    drv_sha256_final(&h, md);
    for (int i = 0; i < 32; i++)
        snprintf(got + 2 * i, 3, "%02x", md[i]);
    int rc = -1;
    if (off != size || strcmp(got, hex) != 0) {
        snprintf(msg, ml, "blob %s: the whole file's sha256 is %s although every chunk "
                 "verified (the manifest's chunk and file digests disagree); discarded, not "
                 "served", hex, off == size ? got : "(short read)");
        unlink(pp), unlink(sp);
        goto out;
    }
    if (fsync(fd) < 0 || fchmod(fd, 0444) < 0 || rename(pp, bp) < 0) {
        snprintf(msg, ml, "blob %s: cannot move it into %s: %s", hex, bd, strerror(errno));
        goto out;
    }
    unlink(sp);
    int dfd = open(bd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0)
        fsync(dfd), close(dfd);
    rc = 0;
out:
    close(fd);
    return rc;
}

/* --- snapshots ----------------------------------------------------------- */

static int mkdirs(char *p, size_t base)
{
    for (char *s = p + base + 1; (s = strchr(s, '/')); s++) {
        *s = 0;
        int rc = mkdir(p, 0755);
        *s = '/';
        if (rc < 0 && errno != EEXIST)
            return -1;
    }
    return 0;
}

static int seal_dir(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
    if (type == FTW_DP && ftw->level > 0)
        chmod(p, 0555);
    return 0;
}

int drv_cache__link_snapshot(drv_cache_t *c, const drv_manifest_t *m, char *msg, size_t ml)
{
    char tmpd[1400], dst[1400], js[1400], jt[1400], suffix[20];
    drv_random_hex(8, suffix);
    pathf(tmpd, sizeof tmpd, c, "tmp/snap-%s-%s", m->digest, suffix);
    pathf(dst, sizeof dst, c, "snapshots/%s%s", m->digest, "");
    pathf(js, sizeof js, c, "snapshots/%s%s", m->digest, ".json");
    pathf(jt, sizeof jt, c, "snapshots/%s%s", m->digest, ".json.tmp");
    char *text = drv_manifest_to_json(m);
    size_t tl = text ? strlen(text) : 0;
    if (!text || mkdir(tmpd, 0755) < 0) {
        snprintf(msg, ml, "snapshot %s: cannot create %s: %s", m->digest, tmpd, strerror(errno));
        free(text);
        return -1;
    }
    size_t base = strlen(tmpd);
    for (size_t i = 0; i < m->nfiles; i++) {
        char to[2600], from[1400];
        snprintf(to, sizeof to, "%s/%s", tmpd, m->files[i].path);
        pathf(from, sizeof from, c, "blobs/sha256/%s%s", m->files[i].sha256, "");
        if (mkdirs(to, base) < 0 || link(from, to) < 0) {
            snprintf(msg, ml, "snapshot %s: cannot link %s: %s", m->digest, m->files[i].path,
                     strerror(errno));
            goto error;
        }
    }
    nftw(tmpd, seal_dir, 16, FTW_PHYS | FTW_DEPTH);
    int fd = open(jt, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    bool ok = fd >= 0 && write(fd, text, tl) == (ssize_t)tl && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok || rename(jt, js) < 0) {
        snprintf(msg, ml, "snapshot %s: cannot write %s: %s", m->digest, js, strerror(errno));
        goto error;
    }
    struct stat st;
    if (lstat(dst, &st) == 0) {
        chmod(dst, 0755);
        rm_tree(dst);
    }
    if (rename(tmpd, dst) < 0) {
        snprintf(msg, ml, "snapshot %s: cannot move it into place: %s", m->digest,
                 strerror(errno));
        unlink(js);
        goto error;
    }
    chmod(dst, 0555);
    free(text);
    return 0;
error:
    rm_tree(tmpd);
    free(text);
    return -1;
}

/* --- create / destroy ---------------------------------------------------- */

typedef struct idx {
    char hex[65];
    int64_t last;
} idx_t;

static void load_blobs(drv_cache_t *c)
{
    char p[1400];
    size_t len = 0, ni = 0;
    snprintf(p, sizeof p, "%s/index", c->dir);
    char *text = slurp(p, 256u << 20, &len);
    idx_t *ix = NULL;
    if (text) {
        ix = calloc(len / 64 + 1, sizeof *ix);
        for (char *l = strchr(text, '\n'); ix && l && l[1]; l = strchr(l + 1, '\n')) {
            uint64_t sz;
            if (drv_cache_index_line(l + 1, ix[ni].hex, &sz, &ix[ni].last) == 0)
                ni++;
        }
    }
    snprintf(p, sizeof p, "%s/blobs/sha256", c->dir);
    DIR *d = opendir(p);
    for (struct dirent *de; d && (de = readdir(d));) {
        char fp[1400];
        struct stat st;
        snprintf(fp, sizeof fp, "%s/%s", p, de->d_name);
        if (strlen(de->d_name) != 64 || strspn(de->d_name, "0123456789abcdef") != 64 ||
            lstat(fp, &st) < 0 || !S_ISREG(st.st_mode))
            continue;
        blob_t *b = drv_cache__blob_add(c, de->d_name, (uint64_t)st.st_size, B_PRESENT);
        b->last_use_ms = (int64_t)st.st_mtime * 1000;
        for (size_t i = 0; i < ni; i++)
            if (strcmp(ix[i].hex, b->hex) == 0)
                b->last_use_ms = ix[i].last;
    }
    if (d)
        closedir(d);
    free(ix);
    free(text);
}

/* Partial downloads with a sidecar stay (to resume); the rest of tmp/ goes. */
static void load_partials(drv_cache_t *c)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/tmp", c->dir);
    DIR *d = opendir(p);
    for (struct dirent *de; d && (de = readdir(d));) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char fp[1400], hex[65] = "";
        snprintf(fp, sizeof fp, "%s/%s", p, de->d_name);
        const char *dot = strchr(de->d_name, '.');
        bool keep = false;
        if (dot && dot - de->d_name == 64 && strspn(de->d_name, "0123456789abcdef") == 64) {
            memcpy(hex, de->d_name, 64);
            hex[64] = 0;
            keep = strcmp(dot, ".partial") == 0 || strcmp(dot, ".chunks") == 0;
        }
        if (keep && strcmp(dot, ".chunks") == 0) {
            char pp[1400], head[160] = "";
            snprintf(pp, sizeof pp, "%s/%s.partial", p, hex);
            FILE *f = fopen(fp, "r");
            uint64_t size = 0, cs;
            size_t nc;
            struct stat st;
            bool ok = f && fgets(head, sizeof head, f) &&
                      sscanf(head, "drover-chunks 1 %" SCNu64 " %" SCNu64 " %zu", &size, &cs,
                             &nc) == 3 && stat(pp, &st) == 0 && !drv_cache__blob(c, hex);
            if (f)
                fclose(f);
            if (ok) {
                blob_t *b = drv_cache__blob_add(c, hex, size, B_PARTIAL);
                b->last_use_ms = (int64_t)st.st_mtime * 1000;
            }
        }
        if (!keep)
            rm_tree(fp);
    }
    if (d)
        closedir(d);
    /* a partial without its sidecar (or of a blob held whole) goes too */
    d = opendir(p);
    for (struct dirent *de; d && (de = readdir(d));) {
        const char *dot = strchr(de->d_name, '.');
        if (!dot || dot - de->d_name != 64)
            continue;
        char hex[65];
        memcpy(hex, de->d_name, 64);
        hex[64] = 0;
        blob_t *b = drv_cache__blob(c, hex);
        if (!b || b->state != B_PARTIAL) {
            char fp[1400];
            snprintf(fp, sizeof fp, "%s/%s", p, de->d_name);
            unlink(fp);
        }
    }
    if (d)
        closedir(d);
}

/* Snapshots whose manifest parses, matches its name and whose blobs are
 * all here are ready; the rest is removed. */
static void load_snapshots(drv_cache_t *c)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/snapshots", c->dir);
    DIR *d = opendir(p);
    for (struct dirent *de; d && (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        char fp[1400], name[80] = "";
        snprintf(fp, sizeof fp, "%s/%s", p, de->d_name);
        size_t nl = strlen(de->d_name);
        bool json = nl == 69 && strcmp(de->d_name + 64, ".json") == 0;
        snprintf(name, sizeof name, "%.64s", de->d_name);
        char jp[1400], dp[1400];
        snprintf(jp, sizeof jp, "%s/%s.json", p, name);
        snprintf(dp, sizeof dp, "%s/%s", p, name);
        struct stat st;
        if (!json) {
            if (nl != 64 || stat(jp, &st) < 0)
                drv_cache__drop_snapshot(c, de->d_name), unlink(fp);
            continue;
        }
        size_t len;
        char *text = slurp(fp, DRV_MANIFEST_MAX_JSON, &len);
        drv_manifest_t *m = NULL;
        bool ok = text && drv_manifest_parse(text, len, &m, NULL) == 0 &&
                  strcmp(m->digest, name) == 0 && stat(dp, &st) == 0 && S_ISDIR(st.st_mode);
        free(text);
        art_t *a = ok ? calloc(1, sizeof *a) : NULL;
        if (a) {
            a->blobs = calloc(m->nfiles + 1, sizeof *a->blobs);
            for (size_t i = 0; ok && i < m->nfiles; i++) {
                blob_t *b = drv_cache__blob(c, m->files[i].sha256);
                ok = b && b->state == B_PRESENT;
                bool dup = false;
                for (size_t k = 0; ok && k < a->nblobs && !dup; k++)
                    dup = a->blobs[k] == b;
                if (ok && !dup)
                    a->blobs[a->nblobs++] = b;
            }
        }
        if (!a || !ok) {
            drv_manifest_free(m);
            if (a)
                a->m = NULL;
            drv_cache__art_free(a);
            drv_cache__drop_snapshot(c, name);
            continue;
        }
        memcpy(a->digest, name, 65);
        a->m = m;
        a->state = A_READY;
        a->next = c->arts;
        c->arts = a;
    }
    if (d)
        closedir(d);
}

drv_cache_t *drv_cache_create(const char *dir, uint64_t max_bytes, const drv_cache_opts_t *opts,
                              drv_error_t *err)
{
    drv_cache_t *c = calloc(1, sizeof *c);
    if (!c)
        return drv_err_internal(err, "out of memory"), NULL;
    c->dir = drv_strdup(dir);
    c->max = max_bytes;
    c->lockfd = -1;
    if (opts)
        c->opts = *opts;
    if (c->opts.threads <= 0)
        c->opts.threads = 4;
    if (c->opts.threads > 64)
        c->opts.threads = 64;
    c->opts.retries = c->opts.retries == 0 ? 3 : c->opts.retries < 0 ? 0 : c->opts.retries;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->index_mu, NULL);
    pthread_cond_init(&c->done, NULL);   /* drv_deadline_in: CLOCK_REALTIME */
    pthread_cond_init(&c->work, NULL);
    const char *subs[] = {"", "/blobs", "/blobs/sha256", "/snapshots", "/tmp"};
    for (size_t i = 0; i < sizeof subs / sizeof *subs; i++) {
        char p[1200];
        snprintf(p, sizeof p, "%s%s", dir, subs[i]);
        if (mkdir(p, 0755) < 0 && errno != EEXIST) {
            drv_err_internal(err, "node cache: cannot create %s: %s", p, strerror(errno));
            goto error;
        }
    }
    char lp[1200];
    snprintf(lp, sizeof lp, "%s/lock", dir);
    c->lockfd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (c->lockfd < 0 || flock(c->lockfd, LOCK_EX | LOCK_NB) < 0) {
        drv_err_conflict(err, "node cache %s: %s", dir,
                         errno == EWOULDBLOCK ? "in use by another process" : strerror(errno));
        goto error;
    }
    load_blobs(c);
    load_partials(c);
    load_snapshots(c);
    if (drv_cache__make_room(c, 0, NULL) < 0)
        drv_warn("cache: %s holds more than its bound and cannot shrink", dir);
    c->index_dirty = true;
    drv_cache__save_index(c);
    c->thr = calloc((size_t)c->opts.threads, sizeof *c->thr);
    for (int i = 0; c->thr && i < c->opts.threads; i++, c->nthr++)
        if (pthread_create(&c->thr[i], NULL, drv_cache__worker, c) != 0)
            break;
    if (c->nthr == 0) {
        drv_err_internal(err, "node cache: cannot start its fetcher threads");
        goto error;
    }
    return c;
error:
    drv_cache_destroy(c);
    return NULL;
}

void drv_cache_destroy(drv_cache_t *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    atomic_store(&c->stop, true);
    pthread_cond_broadcast(&c->work);
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < c->nthr; i++)
        pthread_join(c->thr[i], NULL);
    free(c->thr);
    while (c->arts) {
        art_t *a = c->arts;
        c->arts = a->next;
        drv_cache__art_free(a);
    }
    while (c->blobs) {
        blob_t *b = c->blobs;
        c->blobs = b->next;
        drv_cache__fetch_free(b->f);
        free(b);
    }
    if (c->lockfd >= 0)
        close(c->lockfd);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->index_mu);
    pthread_cond_destroy(&c->work);
    pthread_cond_destroy(&c->done);
    free(c->dir);
    free(c);
}
