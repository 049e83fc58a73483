/* sources.c — see sources.h: creating artifacts whose bytes live on an
 * operator's S3 store or at https:// URLs, and the URL a node reads each
 * of their blobs from.
 *
 * Two layouts. "blobs": what `drover artifact push --store` makes, every
 * distinct file once at PREFIX/blobs/sha256/HEX (the client gives the
 * manifest; the head checks every blob is there with its size). "files":
 * an import of a location as it is: every object under PREFIX/ (S3) or
 * every file an https source names is one file of the artifact, at its
 * relative path; the head reads and hashes each one (sequentially, on a
 * thread of head/imports.c, never under the lock).
 *
 * https sources name their files one of two ways: a URL not ending in '/'
 * is one file (its last path segment is its name); a URL ending in '/' is
 * a directory whose files are listed, one relative path per line, in
 * URL + "drover-files.txt" (blank lines and lines starting with '#' are
 * skipped). http:// is taken as well, for loopback tests and mirrors on a
 * private network; nothing about it differs. */
#define _GNU_SOURCE
#include "api/sources.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/resource.h"
#include "common/json.h"
#include "common/util.h"
#include "objstore/source.h"
#include "state/head.h"

#define LIST_NAME "drover-files.txt"
#define LIST_MAX (8u << 20)
#define READ_TTL 600   /* the head's own presigned GETs while importing */

/* drv_manifest_path_problem's answer, NULL when the path is fine. */
static const char *path_problem(const char *p)
{
    const char *why = drv_manifest_path_problem(p);
    return why && *why ? why : NULL;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q)
        abort();
    return q;
}

/* --- stores ---------------------------------------------------------------- */

/* Under the read lock: the store's context. */
static drv_s3_t *store_locked(drv_state_t *st, const char *name, char *bucket, size_t n,
                              drv_error_t *err)
{
    const drv_obj_t *s = drv_state_get(st, DRV_K_STORE, name);
    if (!s)
        return drv_err_unprocessable(err, "store", "store '%s' not found (drover get stores "
                                     "lists them; an admin adds one)", name), NULL;
    if (bucket)
        snprintf(bucket, n, "%s", drv_json_str(s->spec, "bucket"));
    return drv_s3_create(drv_json_str(s->spec, "endpoint"), drv_json_str(s->spec, "region"),
                         drv_json_str(s->spec, "bucket"), drv_json_str(s->spec, "access_key_id"),
                         drv_json_str(s->spec, "secret_access_key"),
                         json_is_true(json_object_get(s->spec, "path_style")), err);
}

drv_s3_t *drv_sources_store(drv_head_t *head, const char *name, char *bucket, size_t n,
                            drv_error_t *err)
{
    drv_state_rdlock(head->state);
    drv_s3_t *s = store_locked(head->state, name, bucket, n, err);
    drv_state_unlock(head->state);
    return s;
}

/* "s3://BUCKET/PREFIX" into bucket and prefix (no slashes around it). */
static int parse_s3(const char *src, char *bucket, size_t bn, char *prefix, size_t pn,
                    drv_error_t *err)
{
    const char *b = src + 5, *slash = strchr(b, '/');
    size_t bl = slash ? (size_t)(slash - b) : strlen(b);
    if (bl < 3 || bl >= bn)
        return drv_err_invalid(err, "source", "source '%.200s' must be s3://BUCKET/PREFIX", src);
    memcpy(bucket, b, bl);
    bucket[bl] = 0;
    const char *p = slash ? slash + 1 : "";
    size_t pl = strlen(p);
    while (pl && p[pl - 1] == '/')
        pl--;
    if (pl >= pn || pl > 512)
        return drv_err_invalid(err, "source", "source '%.200s': the prefix is too long", src);
    memcpy(prefix, p, pl);
    prefix[pl] = 0;
    if (strstr(prefix, "//") || (pl && path_problem(prefix)))
        return drv_err_invalid(err, "source", "source '%.200s': the prefix must be a clean "
                               "relative path (no '//', '.', '..')", src);
    return 0;
}

/* The store an s3:// source is on: spec.store, or the one store with that bucket. */
static int pick_store(drv_req_t *req, json_t *spec, const char *bucket, drv_error_t *err)
{
    drv_state_t *st = req->head->state;
    const char *given = drv_json_str(spec, "store");
    char found[64] = "", names[300] = "";
    int n = 0;
    drv_state_rdlock(st);
    if (given) {
        const drv_obj_t *s = drv_state_get(st, DRV_K_STORE, given);
        int rc = 0;
        if (!s)
            rc = drv_err_unprocessable(err, "store", "store '%s' not found (drover get stores "
                                       "lists them)", given);
        else if (strcmp(drv_json_str(s->spec, "bucket"), bucket) != 0)
            rc = drv_err_unprocessable(err, "source", "store '%s' is bucket '%s', not '%s'",
                                       given, drv_json_str(s->spec, "bucket"), bucket);
        drv_state_unlock(st);
        return rc;
    }
    for (size_t i = 0; i < drv_state_count(st, DRV_K_STORE); i++) {
        const drv_obj_t *s = drv_state_at(st, DRV_K_STORE, i);
        if (strcmp(drv_json_str(s->spec, "bucket"), bucket) != 0)
            continue;
        if (n++ == 0)
            snprintf(found, sizeof found, "%s", s->id);
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", s->id);
    }
    drv_state_unlock(st);
    if (n == 0)
        return drv_err_unprocessable(err, "source", "no store has bucket '%s' (drover get "
                                     "stores lists them; an admin adds one)", bucket);
    if (n > 1)
        return drv_err_invalid(err, "store", "stores %s all have bucket '%s': say which "
                               "(store: NAME, or --store NAME)", names, bucket);
    json_object_set_new(spec, "store", json_string(found));
    return 0;
}

/* --- building a manifest from hashed files --------------------------------- */

typedef struct flist {
    drv_manifest_file_t *v;
    size_t n, cap;
    uint64_t total;
} flist_t;

static void flist_free(flist_t *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].path);
        free(l->v[i].chunks);
    }
    free(l->v);
}

static drv_manifest_file_t *flist_add(flist_t *l, const char *path)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    drv_manifest_file_t *f = &l->v[l->n++];
    memset(f, 0, sizeof *f);
    f->path = drv_strdup(path);
    return f;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const drv_manifest_file_t *)a)->path, ((const drv_manifest_file_t *)b)->path);
}

/* The manifest of l (sorted here), checked by the strict parser. */
static drv_manifest_t *flist_manifest(flist_t *l, uint64_t chunk_size, drv_error_t *err)
{
    if (l->n == 0)
        return drv_err_unprocessable(err, "source", "the source holds no file"), NULL;
    qsort(l->v, l->n, sizeof *l->v, by_path);
    drv_manifest_t m = {.chunk_size = chunk_size, .nfiles = l->n, .files = l->v};
    for (size_t i = 0; i < l->n; i++)
        m.total_size += l->v[i].size;
    drv_manifest_compute_digest(&m, m.digest);
    char *js = drv_manifest_to_json(&m);
    drv_manifest_t *out = NULL;
    if (!js || drv_manifest_parse(js, strlen(js), &out, err) < 0) {
        if (js)
            drv_err_prefix(err, "the source's files do not make a valid manifest");
        else
            drv_err_internal(err, "out of memory");
        out = NULL;
    }
    free(js);
    return out;
}

static int check_sizes(const flist_t *l, uint64_t size, const char *what, drv_error_t *err)
{
    if (size > DRV_MANIFEST_MAX_FILE_SIZE)
        return drv_err_unprocessable(err, "source", "%s is %" PRIu64 " bytes: over the %llu "
                                     "TiB a file may have", what, size,
                                     DRV_MANIFEST_MAX_FILE_SIZE >> 40);
    if (l->total + size > DRV_MANIFEST_MAX_TOTAL)
        return drv_err_unprocessable(err, "source", "the source holds over %llu TiB",
                                     DRV_MANIFEST_MAX_TOTAL >> 40);
    if (l->n >= DRV_MANIFEST_MAX_FILES)
        return drv_err_unprocessable(err, "source", "the source holds over %d files",
                                     DRV_MANIFEST_MAX_FILES);
    return 0;
}

/* --- progress ------------------------------------------------------------- */

/* An import's progress as its files stream through the hash. */
typedef struct prog {
    drv_import_tick_fn fn;
    void *ctx;
    size_t done, files;
    uint64_t base;   /* bytes of the files done */
} prog_t;

static int prog_tick(void *ctx, uint64_t bytes)
{
    prog_t *p = ctx;
    return p->fn ? p->fn(p->ctx, p->done, p->files, p->base + bytes) : 0;
}

/* One file hashed: count it; nonzero when the import is to stop. */
static int prog_file(prog_t *p, uint64_t size)
{
    p->done++;
    p->base += size;
    return prog_tick(p, 0);
}

/* --- S3 ------------------------------------------------------------------- */

typedef struct listing {
    flist_t *l;
    size_t skip;           /* strlen(prefix/) */
    long long *sizes;
    size_t nsizes;
} listing_t;

static int on_key(void *ctx, const char *key, long long size, drv_error_t *err)
{
    listing_t *x = ctx;
    const char *rel = key + x->skip;
    size_t rl = strlen(rel);
    if (rl == 0 || rel[rl - 1] == '/')   /* a "folder" marker */
        return 0;
    const char *why = path_problem(rel);
    if (why)
        return drv_err_unprocessable(err, "source", "object '%.300s' cannot be a file of an "
                                     "artifact: %s", key, why);
    if (check_sizes(x->l, (uint64_t)size, key, err) < 0)
        return -1;
    flist_add(x->l, rel);
    x->l->total += (uint64_t)size;
    x->sizes = xrealloc(x->sizes, x->l->n * sizeof *x->sizes);
    x->sizes[x->l->n - 1] = size;
    return 0;
}

static drv_manifest_t *import_s3(const drv_s3_t *s3, const char *bucket, const char *prefix,
                                 prog_t *p, drv_error_t *err)
{
    flist_t l = {0};
    char lp[600];
    snprintf(lp, sizeof lp, "%s%s", prefix, prefix[0] ? "/" : "");
    listing_t x = {.l = &l, .skip = strlen(lp)};
    drv_manifest_t *m = NULL;
    if (drv_s3_list(s3, lp, 0, on_key, &x, NULL, err) < 0) {
        if (err->status == 403 || err->status == 404)
            err->status = 422, snprintf(err->field, sizeof err->field, "source");
        goto out;
    }
    p->files = l.n;
    if (prog_tick(p, 0)) {
        drv_err(err, 409, "stopped", "source", "the import was stopped");
        goto out;
    }
    for (size_t i = 0; i < l.n; i++) {
        char key[DRV_S3_KEY_MAX + 1], shown[1200];
        snprintf(key, sizeof key, "%s%s", lp, l.v[i].path);
        snprintf(shown, sizeof shown, "s3://%s/%s", bucket, key);
        char *url = drv_s3_presign(s3, "GET", key, NULL, drv_now_ms() / 1000, READ_TTL, err);
        if (!url)
            goto out;
        int rc = drv_src_hash(url, shown, DRV_MANIFEST_CHUNK_DEFAULT, (uint64_t)x.sizes[i],
                              prog_tick, p, &l.v[i], err);
        free(url);
        if (rc < 0)
            goto out;
        if (l.v[i].size != (uint64_t)x.sizes[i]) {
            drv_err_unprocessable(err, "source", "%s changed while it was read (%" PRIu64
                                  " bytes, listed with %lld)", shown, l.v[i].size, x.sizes[i]);
            goto out;
        }
        if (prog_file(p, l.v[i].size)) {
            drv_err(err, 409, "stopped", "source", "the import was stopped");
            goto out;
        }
    }
    if (l.n == 0) {
        drv_err_unprocessable(err, "source", "s3://%s/%s holds no object", bucket, lp);
        goto out;
    }
    m = flist_manifest(&l, DRV_MANIFEST_CHUNK_DEFAULT, err);
out:
    flist_free(&l);
    free(x.sizes);
    return m;
}

/* Every distinct blob of m at PREFIX/blobs/sha256/HEX with its size, or 409. */
static int check_pushed(const drv_s3_t *s3, const char *bucket, const char *prefix,
                        const drv_manifest_t *m, drv_error_t *err)
{
    char list[400] = "";
    size_t bad = 0, len = 0;
    for (size_t i = 0; i < m->nfiles; i++) {
        const drv_manifest_file_t *f = &m->files[i];
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = strcmp(m->files[j].sha256, f->sha256) != 0;
        if (!first)
            continue;
        char key[DRV_S3_KEY_MAX + 1];
        drv_s3_object_t o;
        if (drv_s3_blob_key(prefix, f->sha256, key, sizeof key, err) < 0 ||
            drv_s3_head(s3, key, &o, err) < 0)
            return -1;
        if (o.exists && o.size == (long long)f->size)
            continue;
        if (bad++ < 3 && len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s (%.60s: %s)",
                                    bad > 1 ? ", " : "", f->sha256, f->path,
                                    o.exists ? "another size" : "missing");
    }
    if (bad == 0)
        return 0;
    return drv_err_conflict(err, "%zu blob(s) of the manifest are not in s3://%s/%s%sblobs/"
                            "sha256: %s%s; send them (drover artifact push --store)", bad,
                            bucket, prefix, prefix[0] ? "/" : "", list, bad > 3 ? ", ..." : "");
}

/* --- https ---------------------------------------------------------------- */

/* base + rel, every byte outside [A-Za-z0-9-._~/] percent-encoded. */
static char *url_join(const char *base, const char *rel)
{
    size_t bl = strlen(base);
    char *s = drv_xmalloc(bl + 3 * strlen(rel) + 1), *o = s;
    memcpy(o, base, bl);
    o += bl;
    static const char hx[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)rel; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~/", *p))
            *o++ = (char)*p;
        else
            *o++ = '%', *o++ = hx[*p >> 4], *o++ = hx[*p & 15];
    }
    *o = 0;
    return s;
}

static int hex_val(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The name of a single-file source: its last path segment, percent-decoded. */
static int file_name(const char *url, char *out, size_t n, drv_error_t *err)
{
    const char *e = url + strcspn(url, "?#"), *b = e;
    while (b > url && b[-1] != '/')
        b--;
    size_t o = 0;
    for (const char *p = b; p < e && o + 1 < n; p++) {
        if (*p == '%' && p + 2 < e && hex_val(p[1]) >= 0 && hex_val(p[2]) >= 0) {
            out[o++] = (char)(hex_val(p[1]) * 16 + hex_val(p[2]));
            p += 2;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = 0;
    const char *why = o ? path_problem(out) : "it is empty";
    if (why || strchr(out, '/'))
        return drv_err_invalid(err, "source", "source '%.200s': its last path segment cannot "
                               "name a file (%s); end the URL with '/' to name a directory "
                               "listed in %s", url, why ? why : "it holds '/'", LIST_NAME);
    return 0;
}

/* The checks of an https source that need no network (400). */
static int https_ok(const char *src, drv_error_t *err)
{
    if (strchr(src, '#') || strchr(src, ' ') || strchr(src, '\n'))
        return drv_err_invalid(err, "source", "source '%.200s' holds '#' or white space", src);
    size_t sl = strlen(src);
    char name[DRV_MANIFEST_MAX_PATH + 1];
    if (src[sl - 1] != '/')
        return file_name(src, name, sizeof name, err);
    if (strchr(src, '?'))
        return drv_err_invalid(err, "source", "source '%.200s': a directory URL takes no query",
                               src);
    return 0;
}

static drv_manifest_t *import_https(const char *src, prog_t *pr, drv_error_t *err)
{
    flist_t l = {0};
    drv_manifest_t *m = NULL;
    char *text = NULL;
    char **urls = NULL;
    size_t tlen;
    if (https_ok(src, err) < 0)
        goto out;
    size_t sl = strlen(src);
    if (src[sl - 1] != '/') {   /* one file */
        char name[DRV_MANIFEST_MAX_PATH + 1];
        if (file_name(src, name, sizeof name, err) < 0)
            goto out;
        urls = drv_xmalloc(sizeof *urls);
        urls[0] = drv_strdup(src);
        flist_add(&l, name);
    } else {
        char *lu = url_join(src, LIST_NAME);
        int rc = drv_src_get_text(lu, LIST_MAX, &text, &tlen, err);
        free(lu);
        if (rc < 0)
            goto out;
        if (strlen(text) != tlen) {
            drv_err_unprocessable(err, "source", "%s%s holds a NUL byte: not a list of paths",
                                  src, LIST_NAME);
            goto out;
        }
        int line = 0;
        for (char *save = NULL, *p = strtok_r(text, "\n", &save); p;
             p = strtok_r(NULL, "\n", &save)) {
            line++;
            size_t pl = strlen(p);
            if (pl && p[pl - 1] == '\r')
                p[--pl] = 0;
            if (pl == 0 || p[0] == '#')
                continue;
            const char *why = path_problem(p);
            if (why) {
                drv_err_unprocessable(err, "source", "%s%s line %d: '%.200s' is not a relative "
                                      "path: %s", src, LIST_NAME, line, p, why);
                goto out;
            }
            if (check_sizes(&l, 0, p, err) < 0)
                goto out;
            flist_add(&l, p);
            urls = xrealloc(urls, l.n * sizeof *urls);
            urls[l.n - 1] = url_join(src, p);
        }
    }
    pr->files = l.n;
    for (size_t i = 0; i < l.n; i++) {
        if (drv_src_hash(urls[i], urls[i], DRV_MANIFEST_CHUNK_DEFAULT, 0, prog_tick, pr, &l.v[i],
                         err) < 0 ||
            check_sizes(&l, l.v[i].size, urls[i], err) < 0)
            goto out;
        l.total += l.v[i].size;
        if (prog_file(pr, l.v[i].size)) {
            drv_err(err, 409, "stopped", "source", "the import was stopped");
            goto out;
        }
    }
    m = flist_manifest(&l, DRV_MANIFEST_CHUNK_DEFAULT, err);
out:
    if (urls)
        for (size_t i = 0; i < l.n; i++)
            free(urls[i]);
    free(urls);
    free(text);
    flist_free(&l);
    return m;
}

/* --- the entry points ---------------------------------------------------- */

int drv_sources_prepare(drv_req_t *req, json_t *spec, drv_manifest_t **m, drv_error_t *err)
{
    const char *src = drv_json_str(spec, "source");
    if (strncmp(src, "s3://", 5) != 0) {
        if (*m)
            return drv_err_invalid(err, "manifest", "an https source is read-only: the head "
                                   "reads and hashes it (drover artifact import); give no "
                                   "manifest");
        if (drv_json_str(spec, "store"))
            return drv_err_invalid(err, "store", "store is for s3:// sources");
        if (https_ok(src, err) < 0)
            return -1;
        json_object_set_new(spec, "layout", json_string("files"));
        return 0;
    }
    char bucket[64], prefix[600], sbucket[64];
    if (parse_s3(src, bucket, sizeof bucket, prefix, sizeof prefix, err) < 0 ||
        pick_store(req, spec, bucket, err) < 0)
        return -1;
    drv_s3_t *s3 = drv_sources_store(req->head, drv_json_str(spec, "store"), sbucket, sizeof sbucket,
                                     err);
    if (!s3)
        return -1;
    int rc = 0;
    if (*m) {
        rc = check_pushed(s3, bucket, prefix, *m, err);
        json_object_set_new(spec, "layout", json_string("blobs"));
    } else {
        json_object_set_new(spec, "layout", json_string("files"));
    }
    drv_s3_destroy(s3);
    if (rc < 0 && err->status == 503)
        drv_err_prefix(err, "store '%s'", drv_json_str(spec, "store"));
    return rc;
}

drv_manifest_t *drv_sources_import(drv_head_t *head, const json_t *spec, drv_import_tick_fn tick,
                                   void *ctx, drv_error_t *err)
{
    const char *src = drv_json_str(spec, "source");
    prog_t p = {.fn = tick, .ctx = ctx};
    if (!src)
        return drv_err_invalid(err, "source", "the artifact has no source"), NULL;
    if (strncmp(src, "s3://", 5) != 0)
        return import_https(src, &p, err);
    char bucket[64], prefix[600], sbucket[64];
    if (parse_s3(src, bucket, sizeof bucket, prefix, sizeof prefix, err) < 0)
        return NULL;
    drv_s3_t *s3 = drv_sources_store(head, drv_json_str(spec, "store"), sbucket, sizeof sbucket, err);
    if (!s3)
        return NULL;
    drv_manifest_t *m = import_s3(s3, bucket, prefix, &p, err);
    drv_s3_destroy(s3);
    if (!m && err->status == 503)
        drv_err_prefix(err, "store '%s'", drv_json_str(spec, "store"));
    return m;
}

char *drv_sources_blob_url(drv_req_t *req, const drv_obj_t *a, const char *hex, long ttl_s,
                           drv_error_t *err)
{
    const char *src = drv_json_str(a->spec, "source"), *layout = drv_json_str(a->spec, "layout");
    const char *path = NULL;
    size_t k;
    json_t *f;
    json_array_foreach(json_object_get(json_object_get(a->spec, "manifest"), "files"), k, f)
        if (strcmp(drv_json_str(f, "sha256"), hex) == 0) {
            path = drv_json_str(f, "path");
            break;
        }
    if (!path || !src)
        return drv_err_not_found(err, "blob %.64s not found", hex), NULL;
    if (strncmp(src, "s3://", 5) != 0) {
        size_t sl = strlen(src);
        return src[sl - 1] == '/' ? url_join(src, path) : drv_strdup(src);
    }
    char bucket[64], prefix[600], key[DRV_S3_KEY_MAX + 1];
    if (parse_s3(src, bucket, sizeof bucket, prefix, sizeof prefix, err) < 0)
        return NULL;
    if (layout && strcmp(layout, "files") == 0)
        snprintf(key, sizeof key, "%s%s%s", prefix, prefix[0] ? "/" : "", path);
    else if (drv_s3_blob_key(prefix, hex, key, sizeof key, err) < 0)
        return NULL;
    drv_s3_t *s3 = store_locked(req->head->state, drv_json_str(a->spec, "store"), NULL, 0, err);
    if (!s3)
        return NULL;
    char *url = drv_s3_presign(s3, "GET", key, NULL, drv_now_ms() / 1000, ttl_s, err);
    drv_s3_destroy(s3);
    return url;
}
