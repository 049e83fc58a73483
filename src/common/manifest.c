/* manifest.c — see manifest.h: the manifest's JSON form, its canonical
 * digest and its strict validation. Building one from a directory tree is
 * manifest_build.c. Pure: no I/O, no globals. */
#include "common/manifest.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "common/util.h"

size_t drv_manifest_nchunks(uint64_t size, uint64_t chunk_size)
{
    return chunk_size ? (size_t)((size + chunk_size - 1) / chunk_size) : 0;
}

uint64_t drv_manifest_chunk_len(uint64_t size, uint64_t chunk_size, size_t i)
{
    uint64_t off = (uint64_t)i * chunk_size;
    if (off >= size)
        return 0;
    return size - off < chunk_size ? size - off : chunk_size;
}

const char *drv_manifest_path_problem(const char *path)
{
    size_t n = strlen(path);
    if (n == 0)
        return "is empty";
    if (n > DRV_MANIFEST_MAX_PATH)
        return "is longer than 1024 bytes";
    if (path[0] == '/')
        return "is absolute";
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return "holds a control character";
    const char *c = path;
    for (;;) {
        const char *e = strchr(c, '/');
        size_t len = e ? (size_t)(e - c) : strlen(c);
        if (len == 0)
            return "has an empty component";
        if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return "has a '.' or '..' component";
        if (!e)
            break;
        c = e + 1;
    }
    return "";
}

static bool hex64_ok(const char *s)
{
    if (strlen(s) != 64)
        return false;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

void drv_manifest_free(drv_manifest_t *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nfiles; i++) {
        free(m->files[i].path);
        free(m->files[i].chunks);
    }
    free(m->files);
    free(m);
}

/* The object without the digest, keys in canonical order; NULL on OOM. */
static json_t *canonical(const drv_manifest_t *m)
{
    json_t *files = json_array();
    json_t *o = json_object();
    if (!files || !o)
        goto error;
    json_object_set_new(o, "version", json_integer(1));
    json_object_set_new(o, "chunk_size", json_integer((json_int_t)m->chunk_size));
    json_object_set_new(o, "total_size", json_integer((json_int_t)m->total_size));
    for (size_t i = 0; i < m->nfiles; i++) {
        const drv_manifest_file_t *f = &m->files[i];
        json_t *fo = json_object(), *ch = json_array();
        if (!fo || !ch || json_array_append_new(files, fo) < 0) {
            json_decref(fo);
            json_decref(ch);
            goto error;
        }
        json_object_set_new(fo, "path", json_string(f->path));
        json_object_set_new(fo, "size", json_integer((json_int_t)f->size));
        json_object_set_new(fo, "sha256", json_string(f->sha256));
        for (size_t k = 0; k < f->nchunks; k++)
            json_array_append_new(ch, json_string(f->chunks[k]));
        json_object_set_new(fo, "chunks", ch);
    }
    if (json_object_set_new(o, "files", files) < 0) {
        files = NULL;
        goto error;
    }
    return o;
error:
    json_decref(files);
    json_decref(o);
    return NULL;
}

static const size_t DUMP_FLAGS = JSON_COMPACT | JSON_PRESERVE_ORDER;

int drv_manifest_compute_digest(const drv_manifest_t *m, char hex[65])
{
    json_t *o = canonical(m);
    char *s = o ? json_dumps(o, DUMP_FLAGS) : NULL;
    json_decref(o);
    if (!s)
        return -1;
    drv_sha256_hex(s, strlen(s), hex);
    free(s);
    return 0;
}

char *drv_manifest_to_json(const drv_manifest_t *m)
{
    json_t *o = canonical(m);
    if (!o)
        return NULL;
    json_object_set_new(o, "digest", json_string(m->digest));
    char *s = json_dumps(o, DUMP_FLAGS);
    json_decref(o);
    return s;
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp(((const drv_manifest_file_t *)a)->path, ((const drv_manifest_file_t *)b)->path);
}

/* Files sorted; no duplicates and no file under another file. */
static int check_paths(drv_manifest_t *m, drv_error_t *err)
{
    qsort(m->files, m->nfiles, sizeof *m->files, cmp_path);
    for (size_t i = 0; i + 1 < m->nfiles; i++)
        if (strcmp(m->files[i].path, m->files[i + 1].path) == 0)
            return drv_err_invalid(err, "files", "manifest: path '%s' appears twice",
                                   m->files[i].path);
    char key[DRV_MANIFEST_MAX_PATH + 2];
    for (size_t i = 0; i < m->nfiles; i++) {
        /* the first path >= "P/" is the only candidate for "P/..." */
        snprintf(key, sizeof key, "%s/", m->files[i].path);
        size_t lo = i + 1, hi = m->nfiles, kl = strlen(key);
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (strcmp(m->files[mid].path, key) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < m->nfiles && strncmp(m->files[lo].path, key, kl) == 0)
            return drv_err_invalid(err, "files",
                                   "manifest: '%s' is a file and also the directory of '%s'",
                                   m->files[i].path, m->files[lo].path);
    }
    return 0;
}

/* Every key of o is one of names (NULL-terminated). */
static int only_keys(json_t *o, const char *const *names, const char *where, drv_error_t *err)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        bool known = false;
        for (const char *const *n = names; *n && !known; n++)
            known = strcmp(k, *n) == 0;
        if (!known)
            return drv_err_invalid(err, where, "manifest: unknown field '%s'%s%s", k,
                                   *where ? " in " : "", where);
    }
    return 0;
}

/* A non-negative integer field, or -1 with err. */
static int get_u64(json_t *o, const char *key, const char *field, uint64_t *out, drv_error_t *err)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return drv_err_invalid(err, field, "manifest: %s is missing", field);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return drv_err_invalid(err, field, "manifest: %s must be a non-negative integer", field);
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int get_hex(json_t *v, const char *field, char out[65], drv_error_t *err)
{
    if (!v)
        return drv_err_invalid(err, field, "manifest: %s is missing", field);
    if (!json_is_string(v) || !hex64_ok(json_string_value(v)))
        return drv_err_invalid(err, field,
                               "manifest: %s must be a sha256 in 64 lowercase hex digits", field);
    memcpy(out, json_string_value(v), 65);
    return 0;
}

static int parse_file(json_t *fo, size_t i, uint64_t chunk_size, drv_manifest_file_t *f,
                      size_t *chunks_left, drv_error_t *err)
{
    static const char *const keys[] = {"path", "size", "sha256", "chunks", NULL};
    char fld[96];
    snprintf(fld, sizeof fld, "files[%zu]", i);
    if (!json_is_object(fo))
        return drv_err_invalid(err, fld, "manifest: %s must be an object", fld);
    if (only_keys(fo, keys, fld, err) < 0)
        return -1;
    json_t *p = json_object_get(fo, "path");
    snprintf(fld, sizeof fld, "files[%zu].path", i);
    if (!p || !json_is_string(p))
        return drv_err_invalid(err, fld, "manifest: %s must be a string", fld);
    const char *why = drv_manifest_path_problem(json_string_value(p));
    if (*why || strlen(json_string_value(p)) != json_string_length(p))
        return drv_err_invalid(err, fld, "manifest: %s '%s' %s", fld, json_string_value(p),
                               *why ? why : "holds a NUL byte");
    f->path = drv_strdup(json_string_value(p));
    snprintf(fld, sizeof fld, "files[%zu].size", i);
    if (get_u64(fo, "size", fld, &f->size, err) < 0)
        return -1;
    if (f->size > DRV_MANIFEST_MAX_FILE_SIZE)
        return drv_err_invalid(err, fld, "manifest: %s %llu is over the %llu-byte bound", fld,
                               (unsigned long long)f->size,
                               (unsigned long long)DRV_MANIFEST_MAX_FILE_SIZE);
    snprintf(fld, sizeof fld, "files[%zu].sha256", i);
    if (get_hex(json_object_get(fo, "sha256"), fld, f->sha256, err) < 0)
        return -1;
    json_t *ch = json_object_get(fo, "chunks");
    snprintf(fld, sizeof fld, "files[%zu].chunks", i);
    if (!ch || !json_is_array(ch))
        return drv_err_invalid(err, fld, "manifest: %s must be an array", fld);
    size_t want = drv_manifest_nchunks(f->size, chunk_size);
    if (json_array_size(ch) != want)
        return drv_err_invalid(err, fld,
                               "manifest: %s has %zu chunks; a %llu-byte file in %llu-byte "
                               "chunks has %zu",
                               fld, json_array_size(ch), (unsigned long long)f->size,
                               (unsigned long long)chunk_size, want);
    if (want > *chunks_left)
        return drv_err_invalid(err, fld, "manifest: more than %u chunks in all",
                               DRV_MANIFEST_MAX_CHUNKS);
    *chunks_left -= want;
    f->chunks = want ? calloc(want, sizeof *f->chunks) : NULL;
    if (want && !f->chunks)
        return drv_err_internal(err, "out of memory");
    f->nchunks = want;
    for (size_t k = 0; k < want; k++) {
        snprintf(fld, sizeof fld, "files[%zu].chunks[%zu]", i, k);
        if (get_hex(json_array_get(ch, k), fld, f->chunks[k], err) < 0)
            return -1;
    }
    if (want == 1 && strcmp(f->chunks[0], f->sha256) != 0)
        return drv_err_invalid(err, fld, "manifest: files[%zu] is one chunk, whose sha256 must "
                               "be the file's", i);
    return 0;
}

int drv_manifest_parse(const char *json, size_t len, drv_manifest_t **out, drv_error_t *err)
{
    static const char *const keys[] = {"version", "chunk_size", "total_size", "files", "digest",
                                       NULL};
    *out = NULL;
    drv_manifest_t *m = NULL;
    json_t *o = NULL;
    if (len > DRV_MANIFEST_MAX_JSON) {
        drv_err_invalid(err, "", "manifest: %zu bytes is over the %u-byte bound", len,
                        DRV_MANIFEST_MAX_JSON);
        goto error;
    }
    json_error_t je;
    o = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        drv_err_invalid(err, "", "manifest: not JSON: %s (line %d, column %d)", je.text,
                        je.line, je.column);
        goto error;
    }
    if (!json_is_object(o)) {
        drv_err_invalid(err, "", "manifest: must be a JSON object");
        goto error;
    }
    if (only_keys(o, keys, "", err) < 0)
        goto error;
    m = calloc(1, sizeof *m);
    if (!m) {
        drv_err_internal(err, "out of memory");
        goto error;
    }
    uint64_t version;
    if (get_u64(o, "version", "version", &version, err) < 0)
        goto error;
    if (version != 1) {
        drv_err_invalid(err, "version", "manifest: version %llu is not supported (only 1)",
                        (unsigned long long)version);
        goto error;
    }
    if (get_u64(o, "chunk_size", "chunk_size", &m->chunk_size, err) < 0 ||
        get_u64(o, "total_size", "total_size", &m->total_size, err) < 0)
        goto error;
    if (m->chunk_size < DRV_MANIFEST_CHUNK_MIN || m->chunk_size > DRV_MANIFEST_CHUNK_MAX) {
        drv_err_invalid(err, "chunk_size", "manifest: chunk_size %llu is outside %llu..%llu",
                        (unsigned long long)m->chunk_size,
                        (unsigned long long)DRV_MANIFEST_CHUNK_MIN,
                        (unsigned long long)DRV_MANIFEST_CHUNK_MAX);
        goto error;
    }
    json_t *files = json_object_get(o, "files");
    if (!files || !json_is_array(files) || json_array_size(files) == 0) {
        drv_err_invalid(err, "files", "manifest: files must be a non-empty array");
        goto error;
    }
    if (json_array_size(files) > DRV_MANIFEST_MAX_FILES) {
        drv_err_invalid(err, "files", "manifest: %zu files is over the bound of %d",
                        json_array_size(files), DRV_MANIFEST_MAX_FILES);
        goto error;
    }
    m->files = calloc(json_array_size(files), sizeof *m->files);
    if (!m->files) {
        drv_err_internal(err, "out of memory");
        goto error;
    }
    size_t chunks_left = DRV_MANIFEST_MAX_CHUNKS;
    uint64_t sum = 0;
    for (size_t i = 0; i < json_array_size(files); i++) {
        m->nfiles = i + 1;
        if (parse_file(json_array_get(files, i), i, m->chunk_size, &m->files[i], &chunks_left,
                       err) < 0)
            goto error;
        sum += m->files[i].size;
        if (sum > DRV_MANIFEST_MAX_TOTAL) {
            drv_err_invalid(err, "total_size", "manifest: the files' sizes add up to more "
                            "than the %llu-byte bound", (unsigned long long)DRV_MANIFEST_MAX_TOTAL);
            goto error;
        }
    }
    if (sum != m->total_size) {
        drv_err_invalid(err, "total_size", "manifest: total_size %llu is not the files' sum %llu",
                        (unsigned long long)m->total_size, (unsigned long long)sum);
        goto error;
    }
    if (check_paths(m, err) < 0 || get_hex(json_object_get(o, "digest"), "digest", m->digest,
                                           err) < 0)
        goto error;
    char want[65];
    if (drv_manifest_compute_digest(m, want) < 0) {
        drv_err_internal(err, "out of memory");
        goto error;
    }
    if (strcmp(want, m->digest) != 0) {
        drv_err_invalid(err, "digest", "manifest: digest %s does not match its content (%s)",
                        m->digest, want);
        goto error;
    }
    json_decref(o);
    *out = m;
    return 0;
error:
    json_decref(o);
    drv_manifest_free(m);
    return -1;
}
