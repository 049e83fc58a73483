/* h_store_uploads.c — `drover artifact push --store`: the head plans an
 * upload of a manifest's blobs to an operator's S3 store and completes
 * them; the bytes go from the CLI straight to the store through URLs the
 * head presigns, so the CLI never holds the store's credential.
 *
 *   POST /v1/stores/{name}/uploads   {manifest, prefix}
 *     HEADs every distinct blob at PREFIX/blobs/sha256/HEX; for each one the
 *     bucket lacks (or holds with another size) finds the unfinished
 *     multipart upload of that key (ListMultipartUploads) or creates one,
 *     and answers a presigned URL for each part it does not hold yet
 *     (ListParts; a part held with its size comes with its ETag instead).
 *     Parts are part_size bytes (a function of the blob's size, so every
 *     run cuts the same parts), the last shorter. Blobs the bucket has are
 *     not sent again and parts it has are not either: a push cut off
 *     resumes where it stopped, with no state on the head.
 *   POST /v1/stores/{name}/uploads/complete   {prefix, sha256, size,
 *                                              upload_id, etags}
 *     completes one blob's multipart upload with its parts' ETags, in order,
 *     then HEADs it: a size other than the manifest's is deleted and 422.
 *
 * Then the CLI creates the artifact (POST /v1/artifacts with source
 * s3://BUCKET/PREFIX and the manifest), which checks every blob once more
 * (sources.c). S3 calls block: nothing here runs under the state lock. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handlers.h"
#include "api/sources.h"
#include "api/upload.h"
#include "common/json.h"
#include "common/util.h"

#define PART_URL_TTL 3600
#define PART_MIN (8ull << 20)

static int unknown_fields(const json_t *body, const char *const *known, drv_error_t *err)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v) {
        size_t i;
        for (i = 0; known[i] && strcmp(known[i], k) != 0; i++)
            ;
        if (!known[i])
            return drv_err_invalid(err, k, "unknown field '%s'", k);
    }
    return 0;
}

/* prefix: optional, a clean relative path ("" = the bucket's root). */
static int get_prefix(const json_t *body, char *out, size_t n, drv_error_t *err)
{
    const json_t *p = json_object_get(body, "prefix");
    if (!p) {
        out[0] = 0;
        return 0;
    }
    const char *s = json_string_value(p);
    if (!s || strlen(s) >= n || strlen(s) > 512)
        return drv_err_invalid(err, "prefix", "prefix must be a string of at most 512 bytes");
    size_t l = strlen(s);
    while (l && s[l - 1] == '/')
        l--;
    snprintf(out, n, "%.*s", (int)l, s);
    const char *why = out[0] ? drv_manifest_path_problem(out) : "";
    if ((why && *why) || strstr(out, "//"))
        return drv_err_invalid(err, "prefix", "prefix '%s' must be a clean relative path: %s", s,
                               why && *why ? why : "no '//'");
    return 0;
}

/* The part size of a blob: at least 8 MiB, and few enough parts. */
static uint64_t part_size_of(uint64_t size)
{
    uint64_t ps = PART_MIN, need = (size + DRV_S3_MAX_PARTS - 1) / DRV_S3_MAX_PARTS;
    if (need > ps)
        ps = (need + (1ull << 20) - 1) & ~((1ull << 20) - 1);
    return ps;
}

/* The parts an unfinished upload holds, by part number - 1. */
typedef struct held {
    size_t n;
    char **etag;
    long long *size;
} held_t;

static int on_part(void *ctx, int part, long long size, const char *etag, drv_error_t *err)
{
    (void)err;
    held_t *h = ctx;
    if (part >= 1 && (size_t)part <= h->n && etag[0]) {
        free(h->etag[part - 1]);
        h->etag[part - 1] = drv_strdup(etag);
        h->size[part - 1] = size;
    }
    return 0;
}

static void held_free(held_t *h)
{
    for (size_t i = 0; h->etag && i < h->n; i++)
        free(h->etag[i]);
    free(h->etag);
    free(h->size);
}

int drv_h_store_upload(drv_req_t *req, drv_resp_t *resp)
{
    static const char *const known[] = {"manifest", "prefix", NULL};
    drv_error_t err;
    json_t *body = drv_req_json(req, &err), *blobs = json_array();
    drv_manifest_t *m = NULL;
    drv_s3_t *s3 = NULL;
    char prefix[600], bucket[64];
    uint64_t missing = 0;
    if (!body || unknown_fields(body, known, &err) < 0 ||
        get_prefix(body, prefix, sizeof prefix, &err) < 0 ||
        !(m = drv_upload_manifest_of(json_object_get(body, "manifest"), "manifest", &err)) ||
        !(s3 = drv_sources_store(req->head, req->params[0], bucket, sizeof bucket, &err)))
        goto error;
    long long now = drv_now_ms() / 1000;
    for (size_t i = 0; i < m->nfiles; i++) {
        const drv_manifest_file_t *f = &m->files[i];
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = strcmp(m->files[j].sha256, f->sha256) != 0;
        if (!first)
            continue;
        char key[DRV_S3_KEY_MAX + 1], upload_id[512];
        drv_s3_object_t o;
        if (drv_s3_blob_key(prefix, f->sha256, key, sizeof key, &err) < 0 ||
            drv_s3_head(s3, key, &o, &err) < 0)
            goto error;
        if (o.exists && o.size == (long long)f->size)
            continue;
        uint64_t ps = part_size_of(f->size);
        size_t nparts = f->size ? (size_t)((f->size + ps - 1) / ps) : 1;
        held_t held = {.n = nparts};
        held.etag = calloc(nparts, sizeof *held.etag);
        held.size = calloc(nparts, sizeof *held.size);
        if (!held.etag || !held.size) {
            held_free(&held);
            drv_err_internal(&err, "out of memory");
            goto error;
        }
        /* resume: an unfinished upload of this key keeps the parts it holds */
        if (drv_s3_multipart_find(s3, key, upload_id, sizeof upload_id, &err) < 0 ||
            (upload_id[0] && drv_s3_list_parts(s3, key, upload_id, on_part, &held, &err) < 0) ||
            (!upload_id[0] &&
             drv_s3_multipart_create(s3, key, upload_id, sizeof upload_id, &err) < 0)) {
            held_free(&held);
            goto error;
        }
        json_t *parts = json_array();
        for (size_t p = 0; p < nparts; p++) {
            uint64_t len = f->size - p * ps < ps ? f->size - p * ps : ps;
            json_t *e = json_pack("{s:i, s:I, s:I}", "part", (int)p + 1, "offset",
                                  (json_int_t)(p * ps), "length", (json_int_t)len);
            if (held.etag[p] && held.size[p] == (long long)len) {
                json_object_set_new(e, "etag", json_string(held.etag[p]));
            } else {
                char *url = drv_s3_presign_part(s3, key, upload_id, (int)p + 1, now,
                                                PART_URL_TTL, &err);
                if (!url) {
                    json_decref(e);
                    json_decref(parts);
                    held_free(&held);
                    goto error;
                }
                json_object_set_new(e, "url", json_string(url));
                free(url);
                missing += len;
            }
            json_array_append_new(parts, e);
        }
        held_free(&held);
        json_array_append_new(blobs, json_pack("{s:s, s:s, s:I, s:s, s:I, s:o}", "sha256",
                                               f->sha256, "path", f->path, "size",
                                               (json_int_t)f->size, "upload_id", upload_id,
                                               "part_size", (json_int_t)ps, "parts", parts));
    }
    char src[700];
    snprintf(src, sizeof src, "s3://%s/%s", bucket, prefix);
    drv_resp_json(resp, 200, json_pack("{s:s, s:s, s:s, s:I, s:o}", "store", req->params[0],
                                       "source", src, "prefix", prefix, "missing_bytes",
                                       (json_int_t)missing, "blobs", blobs));
    json_decref(body);
    drv_manifest_free(m);
    drv_s3_destroy(s3);
    return 0;
error:
    json_decref(blobs);
    json_decref(body);
    drv_manifest_free(m);
    drv_s3_destroy(s3);
    drv_resp_error(resp, &err);
    return 0;
}

int drv_h_store_upload_complete(drv_req_t *req, drv_resp_t *resp)
{
    static const char *const known[] = {"prefix", "sha256", "size", "upload_id", "etags", NULL};
    drv_error_t err;
    json_t *body = drv_req_json(req, &err);
    drv_s3_t *s3 = NULL;
    const char **etags = NULL;
    char prefix[600], key[DRV_S3_KEY_MAX + 1];
    if (!body || unknown_fields(body, known, &err) < 0 ||
        get_prefix(body, prefix, sizeof prefix, &err) < 0)
        goto error;
    const char *hex = json_string_value(json_object_get(body, "sha256"));
    const char *id = json_string_value(json_object_get(body, "upload_id"));
    const json_t *sz = json_object_get(body, "size"), *et = json_object_get(body, "etags");
    if (!id || !*id) {
        drv_err_invalid(&err, "upload_id", "upload_id is required (from the upload's plan)");
        goto error;
    }
    if (!json_is_integer(sz) || json_integer_value(sz) < 0) {
        drv_err_invalid(&err, "size", "size must be the blob's size in bytes");
        goto error;
    }
    if (!json_is_array(et) || json_array_size(et) == 0 ||
        json_array_size(et) > DRV_S3_MAX_PARTS) {
        drv_err_invalid(&err, "etags", "etags must list each part's ETag, in order");
        goto error;
    }
    if (drv_s3_blob_key(prefix, hex ? hex : "", key, sizeof key, &err) < 0) {
        snprintf(err.field, sizeof err.field, "sha256");
        goto error;
    }
    etags = calloc(json_array_size(et), sizeof *etags);
    for (size_t i = 0; etags && i < json_array_size(et); i++)
        if (!(etags[i] = json_string_value(json_array_get(et, i))) || !*etags[i]) {
            drv_err_invalid(&err, "etags", "etags[%zu] must be a part's ETag", i);
            goto error;
        }
    if (!etags) {
        drv_err_internal(&err, "out of memory");
        goto error;
    }
    if (!(s3 = drv_sources_store(req->head, req->params[0], NULL, 0, &err)) ||
        drv_s3_multipart_complete(s3, key, id, etags, (int)json_array_size(et), &err) < 0)
        goto error;
    drv_s3_object_t o;
    if (drv_s3_head(s3, key, &o, &err) < 0)
        goto error;
    if (!o.exists || o.size != (long long)json_integer_value(sz)) {
        drv_error_t e2;
        drv_s3_delete(s3, key, &e2);
        drv_err_unprocessable(&err, "size", "blob %s has %lld bytes in the store, not %lld: "
                              "deleted", hex, o.size, (long long)json_integer_value(sz));
        goto error;
    }
    drv_resp_raw(resp, 204, "text/plain", NULL, 0);
    free(etags);
    json_decref(body);
    drv_s3_destroy(s3);
    return 0;
error:
    free(etags);
    json_decref(body);
    drv_s3_destroy(s3);
    drv_resp_error(resp, &err);
    return 0;
}
