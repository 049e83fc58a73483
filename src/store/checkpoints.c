/* checkpoints.c — see checkpoints.h: committed checkpoint records, one
 * file each, written whole by rename. */
#define _GNU_SOURCE
#include "store/checkpoints.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

#define PATH_LEN 1024

static bool name_chars(const char *s, bool colon)
{
    size_t i;
    if (!s || !s[0] || s[0] == '.')
        return false;
    for (i = 0; s[i]; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || (colon && c == ':')))
            return false;
    }
    return i < 128;
}

bool drv_ckpt_scope_ok(const char *scope)
{
    return name_chars(scope, true);
}

bool drv_ckpt_name_ok(const char *name)
{
    return name_chars(name, false);
}

static int check_names(const char *scope, const char *name, drv_error_t *err)
{
    if (!drv_ckpt_scope_ok(scope))
        return drv_err_invalid(err, "scope", "checkpoint scope '%.140s' is not valid (1-127 of "
                               "[A-Za-z0-9._:-], not starting with '.')", scope ? scope : "");
    if (name && !drv_ckpt_name_ok(name))
        return drv_err_invalid(err, "name", "checkpoint name '%.140s' is not valid (1-127 of "
                               "[A-Za-z0-9._-], not starting with '.')", name);
    return 0;
}

static void scope_dir(const drv_blobs_t *b, const char *user, const char *scope, char *p,
                      size_t n)
{
    if (scope)
        snprintf(p, n, "%s/checkpoints/%s/%s", drv_blobs_root(b), user, scope);
    else
        snprintf(p, n, "%s/checkpoints/%s", drv_blobs_root(b), user);
}

static int mkdir_p3(const drv_blobs_t *b, const char *user, const char *scope, drv_error_t *err)
{
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/checkpoints", drv_blobs_root(b));
    if (mkdir(p, 0700) < 0 && errno != EEXIST)
        return drv_err_internal(err, "cannot create %s: %s", p, strerror(errno));
    scope_dir(b, user, NULL, p, sizeof p);
    if (mkdir(p, 0700) < 0 && errno != EEXIST)
        return drv_err_internal(err, "cannot create %s: %s", p, strerror(errno));
    scope_dir(b, user, scope, p, sizeof p);
    if (mkdir(p, 0700) < 0 && errno != EEXIST)
        return drv_err_internal(err, "cannot create %s: %s", p, strerror(errno));
    return 0;
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* flock the scope's .lock: the fd, -1 with err */
static int lock_scope(const char *dir, drv_error_t *err)
{
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/.lock", dir);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) < 0) {
        if (fd >= 0)
            close(fd);
        return drv_err_internal(err, "cannot lock %s: %s", p, strerror(errno));
    }
    return fd;
}

static json_t *load(const char *path, bool with_manifest)
{
    json_t *j = json_load_file(path, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    if (!with_manifest)
        json_object_del(j, "manifest");
    return j;
}

/* newest first: committed_at_ms, then name */
static int cmp_rec(const void *pa, const void *pb)
{
    const json_t *a = *(json_t *const *)pa, *b = *(json_t *const *)pb;
    json_int_t ta = json_integer_value(json_object_get(a, "committed_at_ms"));
    json_int_t tb = json_integer_value(json_object_get(b, "committed_at_ms"));
    if (ta != tb)
        return ta > tb ? -1 : 1;
    const char *na = json_string_value(json_object_get(a, "name"));
    const char *nb = json_string_value(json_object_get(b, "name"));
    int c = strcmp(na ? na : "", nb ? nb : "");
    return c > 0 ? -1 : c < 0;
}

/* Append the records of one scope dir to arr. */
static void scan_scope(const char *dir, bool with_manifest, json_t *arr)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.' || l < 6 || strcmp(e->d_name + l - 5, ".json") != 0)
            continue;
        char p[PATH_LEN];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        json_t *r = load(p, with_manifest);
        if (r)
            json_array_append_new(arr, r);
    }
    if (d)
        closedir(d);
}

static void sort_arr(json_t *arr)
{
    size_t n = json_array_size(arr);
    if (n < 2)
        return;
    json_t **v = malloc(n * sizeof *v);
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(arr, i));
    qsort(v, n, sizeof *v, cmp_rec);
    json_array_clear(arr);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, v[i]);
    free(v);
}

json_t *drv_ckpts_list(const drv_blobs_t *b, const char *user, const char *scope, bool prefix,
                       bool with_manifest, drv_error_t *err)
{
    if (!prefix && check_names(scope, NULL, err) < 0)
        return NULL;
    json_t *arr = json_array();
    char p[PATH_LEN];
    if (!prefix) {
        scope_dir(b, user, scope, p, sizeof p);
        scan_scope(p, with_manifest, arr);
    } else {
        scope_dir(b, user, NULL, p, sizeof p);
        DIR *d = opendir(p);
        struct dirent *e;
        size_t pl = strlen(scope);
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.' || strncmp(e->d_name, scope, pl) != 0)
                continue;
            char sp[PATH_LEN];
            snprintf(sp, sizeof sp, "%s/%s", p, e->d_name);
            scan_scope(sp, with_manifest, arr);
        }
        if (d)
            closedir(d);
    }
    sort_arr(arr);
    return arr;
}

int drv_ckpts_get(const drv_blobs_t *b, const char *user, const char *scope, const char *name,
                  json_t **out, drv_error_t *err)
{
    *out = NULL;
    if (check_names(scope, name, err) < 0)
        return -1;
    char dir[PATH_LEN], p[PATH_LEN + 200];
    scope_dir(b, user, scope, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/%s.json", dir, name);
    if (!(*out = load(p, true)))
        return drv_err_not_found(err, "checkpoint '%s' of scope '%s' not found", name, scope);
    return 0;
}

static int unlink_rec(const char *dir, const char *name)
{
    char p[PATH_LEN + 200];
    snprintf(p, sizeof p, "%s/%s.json", dir, name);
    return unlink(p);
}

/* Write record text as dir/NAME.json durably (the scope is locked). */
static int write_rec(const drv_blobs_t *b, const char *dir, const char *name, const char *text,
                     drv_error_t *err)
{
    char tmp[PATH_LEN], to[PATH_LEN + 200];
    int fd = drv_blobs_tmp_open(b, tmp, sizeof tmp, err);
    if (fd < 0)
        return -1;
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    if (off < len || fsync(fd) < 0) {
        drv_err(err, 507, "insufficient_storage", "", "cannot write checkpoint record: %s",
                strerror(errno ? errno : EIO));
        close(fd);
        unlink(tmp);
        return -1;
    }
    close(fd);
    snprintf(to, sizeof to, "%s/%s.json", dir, name);
    if (rename(tmp, to) < 0) {
        drv_err_internal(err, "cannot rename into %s: %s", to, strerror(errno));
        unlink(tmp);
        return -1;
    }
    fsync_dir(dir);
    return 0;
}

int drv_ckpts_commit(const drv_blobs_t *b, const char *user, const char *scope,
                     const char *name, const drv_manifest_t *m, int keep, json_t **pruned,
                     drv_error_t *err)
{
    if (pruned)
        *pruned = NULL;
    if (check_names(scope, name, err) < 0)
        return -1;
    if (keep < 0 || keep > DRV_CKPT_KEEP_MAX)
        return drv_err_invalid(err, "keep", "keep must be 0 (all) to %d", DRV_CKPT_KEEP_MAX);
    if (mkdir_p3(b, user, scope, err) < 0)
        return -1;
    char *mj = drv_manifest_to_json(m);
    json_t *man = mj ? json_loads(mj, 0, NULL) : NULL;
    free(mj);
    if (!man)
        return drv_err_internal(err, "out of memory");
    json_t *rec = json_pack("{s:s, s:s, s:I, s:s, s:I, s:I, s:o}", "scope", scope, "name", name,
                            "committed_at_ms", (json_int_t)drv_now_ms(), "digest", m->digest,
                            "total_size", (json_int_t)m->total_size, "files",
                            (json_int_t)m->nfiles, "manifest", man);
    char *text = rec ? json_dumps(rec, JSON_COMPACT) : NULL;
    json_decref(rec);
    if (!text)
        return drv_err_internal(err, "out of memory");
    char dir[PATH_LEN];
    scope_dir(b, user, scope, dir, sizeof dir);
    int lk = lock_scope(dir, err), rc = -1, gl = -1;
    if (lk < 0) {
        free(text);
        return -1;
    }
    /* the record and the markers of its blobs, under the GC's lock (shared):
     * a pass that read the records before the record's rename and dropped a
     * marker since is over, and the next one sees the record (blobs.h) */
    if ((gl = drv_blobs_gc_lock(b, false, err)) < 0)
        goto out;
    if (write_rec(b, dir, name, text, err) < 0)
        goto out;
    char to[PATH_LEN + 200];
    snprintf(to, sizeof to, "%s/%s.json", dir, name);
    for (size_t i = 0; i < m->nfiles; i++) {
        const drv_manifest_file_t *f = &m->files[i];
        if (drv_blobs_find(m, f->sha256) != f || drv_blobs_claim(b, user, f->sha256, err) == 0)
            continue;
        unlink(to);   /* a record never names missing bytes */
        fsync_dir(dir);
        drv_err_conflict(err, "blob %s of '%s' is no longer in the store (collected while "
                         "this checkpoint was committed): send it again", f->sha256, f->path);
        goto out;
    }
    close(gl);
    gl = -1;
    rc = 0;
    if (keep > 0) {
        json_t *all = json_array(), *gone = json_array();
        scan_scope(dir, false, all);
        sort_arr(all);
        for (size_t i = (size_t)keep; i < json_array_size(all); i++) {
            const char *n = json_string_value(json_object_get(json_array_get(all, i), "name"));
            if (n && strcmp(n, name) != 0 && drv_ckpt_name_ok(n) && unlink_rec(dir, n) == 0)
                json_array_append_new(gone, json_string(n));
        }
        json_decref(all);
        if (json_array_size(gone))
            fsync_dir(dir);
        if (pruned)
            *pruned = gone;
        else
            json_decref(gone);
    }
out:
    if (gl >= 0)
        close(gl);
    close(lk);
    free(text);
    return rc;
}

int drv_ckpts_delete(const drv_blobs_t *b, const char *user, const char *scope,
                     const char *name, drv_error_t *err)
{
    if (check_names(scope, name, err) < 0)
        return -1;
    char dir[PATH_LEN];
    scope_dir(b, user, scope, dir, sizeof dir);
    struct stat sb;
    if (stat(dir, &sb) < 0)
        return drv_err_not_found(err, "checkpoint '%s' of scope '%s' not found", name, scope);
    int lk = lock_scope(dir, err);
    if (lk < 0)
        return -1;
    int rc = 0;
    if (unlink_rec(dir, name) < 0)
        rc = errno == ENOENT
                 ? drv_err_not_found(err, "checkpoint '%s' of scope '%s' not found", name, scope)
                 : drv_err_internal(err, "cannot delete checkpoint '%s': %s", name,
                                    strerror(errno));
    else
        fsync_dir(dir);
    close(lk);
    return rc;
}

/* A user id as this module makes directories of it: no '/', not hidden. */
static bool user_ok(const char *u)
{
    return u && u[0] && u[0] != '.' && !strchr(u, '/') && strlen(u) < 128;
}

json_t *drv_ckpts_all(const drv_blobs_t *b)
{
    json_t *out = json_array();
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/checkpoints", drv_blobs_root(b));
    DIR *d = opendir(p);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!user_ok(e->d_name))
            continue;
        json_t *recs = drv_ckpts_list(b, e->d_name, "", true, true, NULL);
        size_t i;
        json_t *r;
        json_array_foreach(recs, i, r)
            json_array_append_new(out, json_pack("{s:s, s:O}", "user", e->d_name, "record", r));
        json_decref(recs);
    }
    if (d)
        closedir(d);
    return out;
}

int drv_ckpts_put(const drv_blobs_t *b, const char *user, const json_t *rec, drv_error_t *err)
{
    const char *scope = json_string_value(json_object_get(rec, "scope"));
    const char *name = json_string_value(json_object_get(rec, "name"));
    if (!user_ok(user))
        return drv_err_invalid(err, "user", "not a user id: '%.64s'", user ? user : "");
    if (!scope || !name || check_names(scope, name, err) < 0)
        return scope && name ? -1 : drv_err_invalid(err, "", "a checkpoint record without "
                                                    "scope or name");
    if (mkdir_p3(b, user, scope, err) < 0)
        return -1;
    char *text = json_dumps(rec, JSON_COMPACT);
    if (!text)
        return drv_err_internal(err, "out of memory");
    char dir[PATH_LEN];
    scope_dir(b, user, scope, dir, sizeof dir);
    int lk = lock_scope(dir, err), rc = -1;
    if (lk >= 0) {
        rc = write_rec(b, dir, name, text, err);
        close(lk);
    }
    free(text);
    return rc;
}
