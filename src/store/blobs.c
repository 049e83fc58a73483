/* blobs.c — see blobs.h: the head's content-addressed blob store, its
 * uploads' manifests and partial chunks, on the file system. */
#define _GNU_SOURCE
#include "store/blobs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/sha256.h"

struct drv_blobs {
    char root[600];
};

#define PATH_LEN 1024
#define COPY_BUF (1u << 20)

bool drv_blobs_hex_ok(const char *hex)
{
    size_t i;
    for (i = 0; hex[i]; i++)
        if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
            return false;
    return i == 64;
}

static void to_hex(const unsigned char d[32], char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[64] = '\0';
}

static int mkdir_one(const char *p, drv_error_t *err)
{
    if (mkdir(p, 0700) < 0 && errno != EEXIST)
        return drv_err_internal(err, "cannot create %s: %s", p, strerror(errno));
    return 0;
}

/* mkdir root/a[/b] as needed */
static int mkdirs(const drv_blobs_t *b, const char *a, const char *c, drv_error_t *err)
{
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/%s", b->root, a);
    if (mkdir_one(p, err) < 0)
        return -1;
    if (!c)
        return 0;
    snprintf(p, sizeof p, "%s/%s/%s", b->root, a, c);
    return mkdir_one(p, err);
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* rename from into dir/name, then fsync dir */
static int commit(const char *from, const char *dir, const char *name, drv_error_t *err)
{
    char to[PATH_LEN];
    snprintf(to, sizeof to, "%s/%s", dir, name);
    if (rename(from, to) < 0) {
        unlink(from);
        return drv_err_internal(err, "cannot rename into %s: %s", to, strerror(errno));
    }
    fsync_dir(dir);
    return 0;
}

drv_blobs_t *drv_blobs_open(const char *data_dir, drv_error_t *err)
{
    drv_blobs_t *b = calloc(1, sizeof *b);
    if (!b) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    if ((size_t)snprintf(b->root, sizeof b->root, "%s/blobs", data_dir) >= sizeof b->root) {
        drv_err_internal(err, "data dir path too long");
        goto error;
    }
    if (mkdir_one(b->root, err) < 0)
        goto error;
    static const char *const dirs[] = {"sha256", "owners", "uploads", "partial", "tmp", NULL};
    for (size_t i = 0; dirs[i]; i++)
        if (mkdirs(b, dirs[i], NULL, err) < 0)
            goto error;
    char tmp[PATH_LEN];
    snprintf(tmp, sizeof tmp, "%s/tmp", b->root);
    DIR *d = opendir(tmp);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.')
            unlinkat(dirfd(d), e->d_name, 0);
    if (d)
        closedir(d);
    return b;
error:
    free(b);
    return NULL;
}

const char *drv_blobs_root(const drv_blobs_t *b)
{
    return b->root;
}

void drv_blobs_close(drv_blobs_t *b)
{
    free(b);
}

static bool exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

bool drv_blobs_whole(const drv_blobs_t *b, const char *hex)
{
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/sha256/%s", b->root, hex);
    return exists(p);
}

bool drv_blobs_owned(const drv_blobs_t *b, const char *user, const char *hex)
{
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/owners/%s/%s", b->root, user, hex);
    return exists(p) && drv_blobs_whole(b, hex);
}

int drv_blobs_open_read(const drv_blobs_t *b, const char *hex, int *fd, uint64_t *size,
                        drv_error_t *err)
{
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/sha256/%s", b->root, hex);
    *fd = open(p, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (*fd < 0 || fstat(*fd, &sb) < 0) {
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        return drv_err_not_found(err, "blob %s not found", hex);
    }
    *size = (uint64_t)sb.st_size;
    return 0;
}

int drv_blobs_tmp_open(const drv_blobs_t *b, char *path, size_t n, drv_error_t *err)
{
    if ((size_t)snprintf(path, n, "%s/tmp/in.XXXXXX", b->root) >= n)
        return drv_err_internal(err, "path too long");
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0)
        return drv_err_internal(err, "cannot create a file in %s/tmp: %s", b->root,
                                strerror(errno));
    return fd;
}

/* Write data to a new file dir/name durably. */
static int write_file(const drv_blobs_t *b, const char *dir, const char *name, const char *data,
                      size_t len, drv_error_t *err)
{
    char tmp[PATH_LEN];
    int fd = drv_blobs_tmp_open(b, tmp, sizeof tmp, err);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    if (off < len || fsync(fd) < 0) {
        drv_err_internal(err, "cannot write %s/%s: %s", dir, name, strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    close(fd);
    return commit(tmp, dir, name, err);
}

static int mark_owner(const drv_blobs_t *b, const char *user, const char *hex, drv_error_t *err)
{
    if (mkdirs(b, "owners", user, err) < 0)
        return -1;
    char dir[PATH_LEN];
    snprintf(dir, sizeof dir, "%s/owners/%s", b->root, user);
    return write_file(b, dir, hex, "", 0, err);
}

int drv_blobs_claim(const drv_blobs_t *b, const char *user, const char *hex, drv_error_t *err)
{
    if (!drv_blobs_hex_ok(hex) || !drv_blobs_whole(b, hex))
        return drv_err_not_found(err, "blob %.64s is not in the store", hex);
    return mark_owner(b, user, hex, err);
}

int drv_blobs_gc_lock(const drv_blobs_t *b, bool exclusive, drv_error_t *err)
{
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/gc.lock", b->root);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    int rc = fd < 0 ? -1 : flock(fd, exclusive ? LOCK_EX : LOCK_SH);
    while (rc < 0 && fd >= 0 && errno == EINTR)
        rc = flock(fd, exclusive ? LOCK_EX : LOCK_SH);
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        return drv_err_internal(err, "cannot lock %s: %s", p, strerror(errno));
    }
    return fd;
}

static const char empty_sha[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

int drv_blobs_upload_save(const drv_blobs_t *b, const char *user, const drv_manifest_t *m,
                          bool *existed, drv_error_t *err)
{
    char dir[PATH_LEN], name[80];
    snprintf(dir, sizeof dir, "%s/uploads/%s", b->root, user);
    snprintf(name, sizeof name, "%s.json", m->digest);
    char p[PATH_LEN + 80];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    *existed = exists(p);
    for (size_t i = 0; i < m->nfiles; i++) {
        const drv_manifest_file_t *f = &m->files[i];
        if (f->size != 0 || drv_blobs_owned(b, user, f->sha256))
            continue;
        char sdir[PATH_LEN];
        snprintf(sdir, sizeof sdir, "%s/sha256", b->root);
        if ((!drv_blobs_whole(b, empty_sha) && write_file(b, sdir, empty_sha, "", 0, err) < 0) ||
            mark_owner(b, user, empty_sha, err) < 0)
            return -1;
    }
    if (*existed) {
        drv_blobs_upload_touch(b, user, m->digest);
        return 0;
    }
    char *json = drv_manifest_to_json(m);
    if (!json)
        return drv_err_internal(err, "out of memory");
    int rc = mkdirs(b, "uploads", user, err) < 0 ? -1
             : write_file(b, dir, name, json, strlen(json), err);
    free(json);
    return rc;
}

int drv_blobs_upload_load(const drv_blobs_t *b, const char *user, const char *digest,
                          drv_manifest_t **out, drv_error_t *err)
{
    *out = NULL;
    if (!drv_blobs_hex_ok(digest))
        return drv_err_not_found(err, "upload '%s' not found (an upload id is a manifest's "
                                 "digest: 64 lowercase hex digits)", digest);
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/uploads/%s/%s.json", b->root, user, digest);
    FILE *f = fopen(p, "re");
    if (!f)
        return drv_err_not_found(err, "upload '%s' not found (start it with POST "
                                 "/v1/artifacts/uploads)", digest);
    char *buf = NULL;
    size_t cap = 0, len = 0, n;
    int rc = -1;
    for (;;) {
        if (len + 65536 > cap) {
            char *nb = realloc(buf, cap = cap * 2 + 65536);
            if (!nb) {
                drv_err_internal(err, "out of memory");
                goto out;
            }
            buf = nb;
        }
        if ((n = fread(buf + len, 1, cap - len, f)) == 0)
            break;
        len += n;
    }
    rc = drv_manifest_parse(buf, len, out, err);
    if (rc < 0)
        drv_err_internal(err, "upload '%s': its stored manifest does not parse", digest);
out:
    fclose(f);
    free(buf);
    return rc;
}

void drv_blobs_upload_drop(const drv_blobs_t *b, const char *user, const char *digest)
{
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/uploads/%s/%s.json", b->root, user, digest);
    unlink(p);
}

void drv_blobs_upload_touch(const drv_blobs_t *b, const char *user, const char *digest)
{
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/uploads/%s/%s.json", b->root, user, digest);
    utimensat(AT_FDCWD, p, NULL, 0);   /* gone meanwhile: nothing to keep alive */
}

int64_t drv_blobs_upload_mtime(const drv_blobs_t *b, const char *user, const char *digest)
{
    char p[PATH_LEN];
    struct stat sb;
    snprintf(p, sizeof p, "%s/uploads/%s/%s.json", b->root, user, digest);
    return stat(p, &sb) == 0 ? (int64_t)sb.st_mtime : -1;
}

static int by_updated(const void *a, const void *c)
{
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "updated_at"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)c, "updated_at"));
    return x < y ? -1 : x > y;
}

json_t *drv_blobs_upload_list(const drv_blobs_t *b, const char *user)
{
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/uploads/%s", b->root, user);
    DIR *d = opendir(p);
    json_t **v = NULL;
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        char digest[65];
        if (l != 69 || strcmp(e->d_name + 64, ".json") != 0)
            continue;
        snprintf(digest, sizeof digest, "%.64s", e->d_name);
        int64_t t = drv_blobs_hex_ok(digest) ? drv_blobs_upload_mtime(b, user, digest) : -1;
        if (t < 0)
            continue;
        json_t **nv = realloc(v, (n + 1) * sizeof *v);
        if (!nv)
            abort();
        v = nv;
        v[n++] = json_pack("{s:s, s:I}", "id", digest, "updated_at", (json_int_t)t);
    }
    if (d)
        closedir(d);
    if (n)
        qsort(v, n, sizeof *v, by_updated);
    json_t *out = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(out, v[i]);
    free(v);
    return out;
}

const drv_manifest_file_t *drv_blobs_find(const drv_manifest_t *m, const char *hex)
{
    for (size_t i = 0; i < m->nfiles; i++)
        if (strcmp(m->files[i].sha256, hex) == 0)
            return &m->files[i];
    return NULL;
}

static void partial_dir(const drv_blobs_t *b, const char *user, const char *hex, uint64_t cs,
                        char *out, size_t n)
{
    snprintf(out, n, "%s/partial/%s/%s.%llu", b->root, user, hex, (unsigned long long)cs);
}

static bool have_chunk(const char *pdir, size_t i)
{
    char p[PATH_LEN + 32];
    snprintf(p, sizeof p, "%s/%zu", pdir, i);
    return exists(p);
}

json_t *drv_blobs_missing(const drv_blobs_t *b, const char *user, const drv_manifest_t *m,
                          uint64_t *bytes)
{
    json_t *out = json_array();
    uint64_t total = 0;
    for (size_t i = 0; i < m->nfiles; i++) {
        const drv_manifest_file_t *f = &m->files[i];
        if (drv_blobs_find(m, f->sha256) != f || drv_blobs_owned(b, user, f->sha256))
            continue;   /* a repeat of an earlier file's content, or held */
        char pdir[PATH_LEN];
        partial_dir(b, user, f->sha256, m->chunk_size, pdir, sizeof pdir);
        json_t *chunks = json_array();
        for (size_t c = 0; c < f->nchunks; c++)
            if (!have_chunk(pdir, c)) {
                json_array_append_new(chunks, json_integer((json_int_t)c));
                total += drv_manifest_chunk_len(f->size, m->chunk_size, c);
            }
        if (json_array_size(chunks) == 0 && f->nchunks > 0) {
            /* every chunk is in but the blob is not: a crash between the
             * last chunk and the assembly; the next chunk PUT retries it */
            json_array_append_new(chunks, json_integer((json_int_t)f->nchunks - 1));
            total += drv_manifest_chunk_len(f->size, m->chunk_size, f->nchunks - 1);
        }
        json_array_append_new(out, json_pack("{s:s, s:o}", "sha256", f->sha256, "chunks",
                                              chunks));
    }
    if (bytes)
        *bytes = total;
    return out;
}

static void remove_partial(const char *pdir)
{
    DIR *d = opendir(pdir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.')
            unlinkat(dirfd(d), e->d_name, 0);
    if (d)
        closedir(d);
    rmdir(pdir);
}

static int copy_chunk(const char *pdir, size_t i, uint64_t want, int out, drv_sha256_t *sha,
                      char *buf, drv_error_t *err)
{
    char p[PATH_LEN + 32];
    snprintf(p, sizeof p, "%s/%zu", pdir, i);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return drv_err_internal(err, "chunk %zu vanished during assembly", i);
    uint64_t got = 0;
    int rc = 0;
    for (;;) {
        ssize_t r = read(fd, buf, COPY_BUF);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? -1 : 0;
            break;
        }
        drv_sha256_update(sha, buf, (size_t)r);
        got += (uint64_t)r;
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(out, buf + off, (size_t)(r - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                rc = -1;
                break;
            }
            off += w;
        }
        if (rc < 0)
            break;
    }
    close(fd);
    if (rc < 0 || got != want)
        return drv_err_internal(err, "cannot assemble chunk %zu: %s", i,
                                rc < 0 ? strerror(errno) : "wrong length");
    return 0;
}

/* Every chunk of f is in pdir: check the whole file and move it into place. */
static int assemble(const drv_blobs_t *b, const char *user, const drv_manifest_t *m,
                    const drv_manifest_file_t *f, const char *pdir, drv_error_t *err)
{
    char tmp[PATH_LEN];
    int out = drv_blobs_tmp_open(b, tmp, sizeof tmp, err);
    if (out < 0)
        return -1;
    char *buf = malloc(COPY_BUF);
    drv_sha256_t sha;
    drv_sha256_init(&sha);
    int rc = buf ? 0 : drv_err_internal(err, "out of memory");
    for (size_t i = 0; i < f->nchunks && rc == 0; i++)
        rc = copy_chunk(pdir, i, drv_manifest_chunk_len(f->size, m->chunk_size, i), out, &sha,
                        buf, err);
    free(buf);
    if (rc < 0) {
        close(out);
        unlink(tmp);
        if (drv_blobs_whole(b, f->sha256))   /* a concurrent assembly finished it */
            return mark_owner(b, user, f->sha256, err);
        return -1;
    }
    unsigned char d[32];
    char got[65];
    drv_sha256_final(&sha, d);
    to_hex(d, got);
    if (strcmp(got, f->sha256) != 0) {
        close(out);
        unlink(tmp);
        remove_partial(pdir);
        return drv_err_invalid(err, "", "blob %s: its chunks match the manifest but the whole "
                               "file's sha256 is %s; the manifest is wrong (its chunks were "
                               "discarded)", f->sha256, got);
    }
    char dir[PATH_LEN];
    snprintf(dir, sizeof dir, "%s/sha256", b->root);
    if (drv_blobs_whole(b, f->sha256)) {
        close(out);
        unlink(tmp);
    } else if (fsync(out) < 0) {
        drv_err_internal(err, "cannot fsync blob %s: %s", f->sha256, strerror(errno));
        close(out);
        unlink(tmp);
        return -1;
    } else {
        close(out);
        if (commit(tmp, dir, f->sha256, err) < 0)
            return -1;
    }
    if (mark_owner(b, user, f->sha256, err) < 0)
        return -1;
    remove_partial(pdir);
    return 0;
}

int drv_blobs_put_chunk(const drv_blobs_t *b, const char *user, const drv_manifest_t *m,
                        const char *hex, size_t idx, const char *tmp_path, int fd, uint64_t len,
                        const char *got_hex, drv_error_t *err)
{
    const drv_manifest_file_t *f = drv_blobs_find(m, hex);
    int rc = -1;
    if (!f) {
        drv_err_not_found(err, "blob %s is not in upload %s", hex, m->digest);
        goto out;
    }
    if (idx >= f->nchunks) {
        drv_err_not_found(err, "blob %s has %zu chunk(s): there is no chunk %zu", hex,
                          f->nchunks, idx);
        goto out;
    }
    uint64_t want = drv_manifest_chunk_len(f->size, m->chunk_size, idx);
    if (len != want) {
        drv_err(err, len > want ? 413 : 400, len > want ? "payload_too_large" : "invalid_argument",
                "", "blob %s chunk %zu is %llu bytes, the body has %llu", hex, idx,
                (unsigned long long)want, (unsigned long long)len);
        goto out;
    }
    if (strcmp(got_hex, f->chunks[idx]) != 0) {
        drv_err_invalid(err, "", "blob %s chunk %zu: sha256 mismatch: expected %s, got %s "
                        "(nothing kept)", hex, idx, f->chunks[idx], got_hex);
        goto out;
    }
    drv_blobs_upload_touch(b, user, m->digest);   /* alive: its expiry counts from now */
    if (drv_blobs_owned(b, user, hex)) {
        rc = 0;   /* already whole and held: nothing to keep */
        goto out;
    }
    char pdir[PATH_LEN], name[32];
    partial_dir(b, user, hex, m->chunk_size, pdir, sizeof pdir);
    if (mkdirs(b, "partial", user, err) < 0 || mkdir_one(pdir, err) < 0)
        goto out;
    if (fsync(fd) < 0) {
        drv_err_internal(err, "cannot fsync chunk: %s", strerror(errno));
        goto out;
    }
    snprintf(name, sizeof name, "%zu", idx);
    if (commit(tmp_path, pdir, name, err) < 0)
        return -1;
    for (size_t i = 0; i < f->nchunks; i++)
        if (!have_chunk(pdir, i))
            return 0;
    return assemble(b, user, m, f, pdir, err);
out:
    unlink(tmp_path);
    return rc;
}

int drv_blobs_mark_owner(const drv_blobs_t *b, const char *user, const char *hex,
                         drv_error_t *err)
{
    if (!drv_blobs_hex_ok(hex) || !user[0] || user[0] == '.' || strchr(user, '/'))
        return drv_err_invalid(err, "", "no blob %.64s of user '%.64s' to mark", hex, user);
    return mark_owner(b, user, hex, err);
}

int drv_blobs_adopt(const drv_blobs_t *b, const char *tmp_path, const char *hex,
                    drv_error_t *err)
{
    int fd = open(tmp_path, O_RDONLY | O_CLOEXEC);
    char *buf = malloc(COPY_BUF);
    int rc = -1;
    if (fd < 0 || !buf) {
        drv_err_internal(err, "cannot read %s: %s", tmp_path, buf ? strerror(errno) : "no memory");
        goto out;
    }
    drv_sha256_t sha;
    drv_sha256_init(&sha);
    ssize_t n;
    while ((n = read(fd, buf, COPY_BUF)) > 0)
        drv_sha256_update(&sha, buf, (size_t)n);
    if (n < 0) {
        drv_err_internal(err, "cannot read %s: %s", tmp_path, strerror(errno));
        goto out;
    }
    unsigned char d[32];
    char got[65];
    drv_sha256_final(&sha, d);
    to_hex(d, got);
    if (!drv_blobs_hex_ok(hex) || strcmp(got, hex) != 0) {
        drv_err_invalid(err, "", "blob %.64s: the bytes received have sha256 %s; discarded",
                        hex, got);
        goto out;
    }
    if (fsync(fd) < 0) {
        drv_err_internal(err, "cannot fsync blob %s: %s", hex, strerror(errno));
        goto out;
    }
    char dir[PATH_LEN];
    snprintf(dir, sizeof dir, "%s/sha256", b->root);
    rc = commit(tmp_path, dir, hex, err);
    tmp_path = NULL;   /* renamed (or removed by commit) */
out:
    if (fd >= 0)
        close(fd);
    if (tmp_path)
        unlink(tmp_path);
    free(buf);
    return rc;
}
