/* blobs_gc.c — garbage collection of the embedded blob store (see
 * blobs.h, drv_blobs_gc): blobs no artifact, upload nor committed
 * checkpoint (checkpoints/USER/SCOPE/NAME.json) names, after a
 * grace period, in two passes (owners/ markers, then the blob); partial
 * chunks no upload names; before that, uploads untouched for the expiry
 * period. The file system is the state; this file only reads
 * directories, parses upload manifests and unlinks. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/manifest.h"
#include "common/util.h"
#include "store/blobs.h"

#define PATH_LEN 1024

typedef struct names {
    char **v;
    size_t n, cap;
} names_t;

static void add(names_t *s, const char *hex)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        if (!s->v)
            abort();
    }
    s->v[s->n++] = drv_strdup(hex);
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool has(const char *const *v, size_t n, const char *hex)
{
    return n && bsearch(&hex, v, n, sizeof *v, cmp) != NULL;
}

/* The sha256s of every upload's manifest (uploads/USER/DIGEST.json), once
 * the uploads untouched since expire_before (epoch s; 0: none) are removed. */
static int upload_refs(const drv_blobs_t *b, names_t *out, int64_t expire_before,
                       size_t *expired, drv_error_t *err)
{
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/uploads", drv_blobs_root(b));
    DIR *d = opendir(p);
    if (!d)
        return drv_err_internal(err, "blob gc: %s: %m", p);
    struct dirent *u;
    int rc = 0;
    while (rc == 0 && (u = readdir(d))) {
        if (u->d_name[0] == '.')
            continue;
        char up[PATH_LEN];
        snprintf(up, sizeof up, "%s/%s", p, u->d_name);
        DIR *ud = opendir(up);
        struct dirent *f;
        while (ud && (f = readdir(ud))) {
            size_t l = strlen(f->d_name);
            if (l != 69 || strcmp(f->d_name + 64, ".json") != 0)
                continue;
            char digest[65];
            snprintf(digest, sizeof digest, "%.*s", (int)(l - 5), f->d_name);
            struct stat sb;
            if (expire_before > 0 && fstatat(dirfd(ud), f->d_name, &sb, 0) == 0 &&
                sb.st_mtime < expire_before && unlinkat(dirfd(ud), f->d_name, 0) == 0) {
                (*expired)++;   /* its blobs and chunks are named no more */
                continue;
            }
            drv_manifest_t *m = NULL;
            drv_error_t e;
            if (drv_blobs_upload_load(b, u->d_name, digest, &m, &e) < 0) {
                /* an upload we cannot read: keep everything this pass */
                rc = drv_err_internal(err, "blob gc: upload %s/%s: %s; nothing removed",
                                      u->d_name, digest, e.message);
            } else {
                for (size_t i = 0; i < m->nfiles; i++)
                    add(out, m->files[i].sha256);
            }
            drv_manifest_free(m);
        }
        if (ud)
            closedir(ud);
    }
    closedir(d);
    return rc;
}

/* The sha256s of every committed checkpoint's manifest
 * (checkpoints/USER/SCOPE/NAME.json, store/checkpoints.c). A record that
 * does not parse keeps everything this pass. */
static int ckpt_refs(const drv_blobs_t *b, names_t *out, drv_error_t *err)
{
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/checkpoints", drv_blobs_root(b));
    DIR *d = opendir(p);
    if (!d)
        return 0;   /* no checkpoint committed yet */
    struct dirent *u;
    int rc = 0;
    while (rc == 0 && (u = readdir(d))) {
        if (u->d_name[0] == '.')
            continue;
        char up[PATH_LEN];
        snprintf(up, sizeof up, "%s/%s", p, u->d_name);
        DIR *ud = opendir(up);
        struct dirent *sc;
        while (rc == 0 && ud && (sc = readdir(ud))) {
            if (sc->d_name[0] == '.')
                continue;
            char sp[PATH_LEN];
            snprintf(sp, sizeof sp, "%s/%s", up, sc->d_name);
            DIR *sd = opendir(sp);
            struct dirent *f;
            while (rc == 0 && sd && (f = readdir(sd))) {
                size_t l = strlen(f->d_name);
                if (f->d_name[0] == '.' || l < 6 || strcmp(f->d_name + l - 5, ".json") != 0)
                    continue;
                char fp[PATH_LEN];
                snprintf(fp, sizeof fp, "%s/%s", sp, f->d_name);
                json_error_t je;
                json_t *r = json_load_file(fp, 0, &je);
                json_t *files = json_object_get(json_object_get(r, "manifest"), "files");
                if (!json_is_array(files)) {
                    rc = drv_err_internal(err, "blob gc: checkpoint record %s does not parse; "
                                          "nothing removed", fp);
                } else {
                    size_t i;
                    json_t *fe;
                    json_array_foreach(files, i, fe) {
                        const char *h = json_string_value(json_object_get(fe, "sha256"));
                        if (h)
                            add(out, h);
                    }
                }
                json_decref(r);
            }
            if (sd)
                closedir(sd);
        }
        if (ud)
            closedir(ud);
    }
    closedir(d);
    return rc;
}

static void rm_dir_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.')
            unlinkat(dirfd(d), e->d_name, 0);
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Remove every owners/USER/hex; how many there were. */
static size_t drop_markers(const char *root, const char *hex)
{
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/owners", root);
    DIR *d = opendir(p);
    struct dirent *u;
    size_t n = 0;
    while (d && (u = readdir(d))) {
        if (u->d_name[0] == '.')
            continue;
        char mp[PATH_LEN];
        snprintf(mp, sizeof mp, "%s/%s/%s", p, u->d_name, hex);
        n += unlink(mp) == 0;
    }
    if (d)
        closedir(d);
    return n;
}

int drv_blobs_gc(drv_blobs_t *b, const char *const *refs, size_t n, int64_t now_s,
                 int64_t grace_s, int64_t upload_expiry_s, drv_blobs_gc_stats_t *st,
                 drv_error_t *err)
{
    memset(st, 0, sizeof *st);
    const char *root = drv_blobs_root(b);
    int lk = drv_blobs_gc_lock(b, true, err);   /* commits wait: see blobs.h */
    if (lk < 0)
        return -1;
    names_t up = {0};
    int rc = upload_refs(b, &up, upload_expiry_s > 0 ? now_s - upload_expiry_s : 0,
                         &st->expired, err);
    if (rc == 0)
        rc = ckpt_refs(b, &up, err);
    if (rc == 0 && up.n)
        qsort(up.v, up.n, sizeof *up.v, cmp);
    const char *const *uv = (const char *const *)up.v;
    char p[PATH_LEN];
    snprintf(p, sizeof p, "%s/sha256", root);
    DIR *d = rc == 0 ? opendir(p) : NULL;
    if (rc == 0 && !d)
        rc = drv_err_internal(err, "blob gc: %s: %m", p);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!drv_blobs_hex_ok(e->d_name))
            continue;
        st->blobs++;
        struct stat sb;
        if (has(refs, n, e->d_name) || has(uv, up.n, e->d_name) ||
            fstatat(dirfd(d), e->d_name, &sb, 0) < 0 || sb.st_mtime > now_s - grace_s)
            continue;
        size_t held = drop_markers(root, e->d_name);
        if (held) {
            st->unheld++;   /* the blob itself at a later pass */
        } else if (unlinkat(dirfd(d), e->d_name, 0) == 0) {
            st->removed++;
            st->removed_bytes += (uint64_t)sb.st_size;
        }
    }
    if (d)
        closedir(d);
    /* partial/USER/HEX.CS/ of blobs no upload names */
    snprintf(p, sizeof p, "%s/partial", root);
    DIR *pd = rc == 0 ? opendir(p) : NULL;
    struct dirent *u;
    while (pd && (u = readdir(pd))) {
        if (u->d_name[0] == '.')
            continue;
        char udir[PATH_LEN];
        snprintf(udir, sizeof udir, "%s/%s", p, u->d_name);
        DIR *ud = opendir(udir);
        struct dirent *f;
        while (ud && (f = readdir(ud))) {
            char hex[65];
            if (strlen(f->d_name) < 66 || f->d_name[64] != '.')
                continue;
            memcpy(hex, f->d_name, 64);
            hex[64] = 0;
            struct stat sb;
            if (!drv_blobs_hex_ok(hex) || has(uv, up.n, hex) ||
                fstatat(dirfd(ud), f->d_name, &sb, 0) < 0 || sb.st_mtime > now_s - grace_s)
                continue;
            char pdir[PATH_LEN];
            snprintf(pdir, sizeof pdir, "%s/%s", udir, f->d_name);
            rm_dir_files(pdir);
            st->partials++;
        }
        if (ud)
            closedir(ud);
    }
    if (pd)
        closedir(pd);
    for (size_t i = 0; i < up.n; i++)
        free(up.v[i]);
    free(up.v);
    close(lk);
    return rc;
}
