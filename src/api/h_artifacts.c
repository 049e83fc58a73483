/* h_artifacts.c — artifacts of the embedded drover:// store: resumable
 * uploads (POST/GET /v1/artifacts/uploads, PUT .../blobs/HEX/chunks/I),
 * creating an artifact once every blob is whole (POST /v1/artifacts), and
 * ranged blob reads for nodes and owners (GET /v1/blobs/sha256/HEX).
 * Listing, reading and deleting artifacts are h_objects.c's (the kind's
 * descriptor is in kinds.c).
 *
 * Every blob-store call (store/blobs.h: stat, hashing, fsync) runs before
 * or after the state lock, never under it; under the lock only the state
 * is consulted (does the artifact exist, may this principal read a blob).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/auth.h"
#include "api/handlers.h"
#include "api/resource.h"
#include "api/sources.h"
#include "api/upload.h"
#include "common/json.h"
#include "common/manifest.h"
#include "common/util.h"
#include "state/head.h"
#include "store/blobs.h"
#include "store/store.h"

/* A node's presigned URL lives long enough for one chunk's retries, not for
 * the artifact: each chunk asks again. */
#define BLOB_URL_TTL 900

static int need_store(drv_req_t *req, drv_error_t *err)
{
    if (!req->head->blobs)
        return drv_err(err, 503, "unavailable", "", "this head has no blob store");
    return 0;
}

drv_manifest_t *drv_upload_manifest_of(const json_t *v, const char *field, drv_error_t *err)
{
    drv_manifest_t *m = NULL;
    if (!json_is_object(v)) {
        drv_err_invalid(err, field, "%s must be a manifest object (see docs/api.md)", field);
        return NULL;
    }
    size_t len;
    char *s = drv_json_dump(v, &len);
    if (drv_manifest_parse(s, len, &m, err) < 0) {
        char f[sizeof err->field];
        snprintf(f, sizeof f, "%s%s%s", field, err->field[0] ? "." : "", err->field);
        snprintf(err->field, sizeof err->field, "%s", f);
        m = NULL;
    }
    free(s);
    if (!m)
        return NULL;
    /* one content, one description: the same sha256 with another size or
     * other chunks is a manifest that lies about one of them */
    for (size_t i = 0; i < m->nfiles; i++) {
        const drv_manifest_file_t *f = &m->files[i], *first = drv_blobs_find(m, f->sha256);
        if (first != f && (first->size != f->size ||
                           memcmp(first->chunks, f->chunks, f->nchunks * sizeof *f->chunks))) {
            drv_err_invalid(err, field, "%s: files '%s' and '%s' have the same sha256 but "
                            "different sizes or chunks", field, first->path, f->path);
            drv_manifest_free(m);
            return NULL;
        }
    }
    return m;
}

json_t *drv_upload_doc(drv_head_t *head, const char *user, const drv_manifest_t *m)
{
    uint64_t bytes;
    json_t *missing = drv_blobs_missing(head->blobs, user, m, &bytes);
    json_t *doc = json_pack("{s:s, s:I, s:I, s:I, s:I, s:o}", "id", m->digest, "chunk_size",
                            (json_int_t)m->chunk_size, "total_size", (json_int_t)m->total_size,
                            "file_count", (json_int_t)m->nfiles, "missing_bytes",
                            (json_int_t)bytes, "missing", missing);
    int64_t t = drv_blobs_upload_mtime(head->blobs, user, m->digest);
    if (t >= 0) {   /* (an agent's checkpoint upload expires the same way) */
        json_object_set_new(doc, "updated_at", json_integer(t));
        if (head->cfg.upload_expiry_s > 0)
            json_object_set_new(doc, "expires_at", json_integer(t + head->cfg.upload_expiry_s));
    }
    return doc;
}

int drv_h_upload_list(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    if (need_store(req, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    json_t *ids = drv_blobs_upload_list(req->head->blobs, req->who->user), *items = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(ids, i, e) {
        drv_manifest_t *m = NULL;
        drv_error_t e2;
        if (drv_blobs_upload_load(req->head->blobs, req->who->user,
                                  json_string_value(json_object_get(e, "id")), &m, &e2) == 0)
            json_array_append_new(items, drv_upload_doc(req->head, req->who->user, m));
        drv_manifest_free(m);   /* (one that went meanwhile is left out) */
    }
    json_decref(ids);
    drv_resp_json(resp, 200, json_pack("{s:o}", "items", items));
    return 0;
}

int drv_h_upload_create(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    drv_manifest_t *m = NULL;
    json_t *body = NULL;
    bool existed;
    if (need_store(req, &err) < 0 || !(body = drv_req_json(req, &err)))
        goto error;
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) if (strcmp(k, "manifest") != 0) {
        drv_err_invalid(&err, k, "unknown field '%s' (an upload takes only \"manifest\")", k);
        goto error;
    }
    if (!(m = drv_upload_manifest_of(json_object_get(body, "manifest"), "manifest", &err)) ||
        drv_blobs_upload_save(req->head->blobs, req->who->user, m, &existed, &err) < 0)
        goto error;
    drv_resp_json(resp, existed ? 200 : 201, drv_upload_doc(req->head, req->who->user, m));
    snprintf(resp->location, sizeof resp->location, "/v1/artifacts/uploads/%s", m->digest);
    json_decref(body);
    drv_manifest_free(m);
    return 0;
error:
    json_decref(body);
    drv_manifest_free(m);
    drv_resp_error(resp, &err);
    return 0;
}

int drv_h_upload_get(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    drv_manifest_t *m = NULL;
    if (need_store(req, &err) < 0 ||
        drv_blobs_upload_load(req->head->blobs, req->who->user, req->params[0], &m, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_resp_json(resp, 200, drv_upload_doc(req->head, req->who->user, m));
    drv_manifest_free(m);
    return 0;
}

int drv_h_upload_chunk(drv_req_t *req, drv_resp_t *resp)
{
    return drv_upload_chunk_as(req, resp, req->who->user);
}

int drv_upload_chunk_as(drv_req_t *req, drv_resp_t *resp, const char *user)
{
    drv_error_t err;
    drv_manifest_t *m = NULL;
    drv_upload_t *u = req->upload;
    const char *id = req->params[0], *hex = req->params[1], *is = req->params[2];
    char *end;
    errno = 0;
    unsigned long long idx = strtoull(is, &end, 10);
    if (need_store(req, &err) < 0)
        goto error;
    if (!u) {
        drv_err_internal(&err, "chunk body was not streamed");
        goto error;
    }
    if (u->too_large) {
        drv_err(&err, 413, "payload_too_large", "", "a chunk is at most %llu bytes",
                (unsigned long long)u->max);
        goto error;
    }
    if (u->write_errno || u->fd < 0) {
        drv_err(&err, 507, "insufficient_storage", "", "cannot store the chunk: %s",
                strerror(u->write_errno ? u->write_errno : EIO));
        goto error;
    }
    if (!drv_blobs_hex_ok(hex)) {
        drv_err_not_found(&err, "blob '%s' not found (a blob is named by 64 lowercase hex "
                          "digits)", hex);
        goto error;
    }
    if (*is < '0' || *is > '9' || *end || errno || idx > SIZE_MAX) {
        drv_err_invalid(&err, "", "chunk index '%s' is not a number", is);
        goto error;
    }
    if (drv_blobs_upload_load(req->head->blobs, user, id, &m, &err) < 0 ||
        drv_blobs_put_chunk(req->head->blobs, user, m, hex, (size_t)idx, u->path,
                            u->fd, u->len, u->sha256, &err) < 0)
        goto error;
    drv_manifest_free(m);
    drv_resp_raw(resp, 204, "text/plain", NULL, 0);
    return 0;
error:
    drv_manifest_free(m);
    drv_resp_error(resp, &err);
    return 0;
}

/* drover:// (0), s3:// or https:// (1: sources.c), or a 400. */
static int source_kind(const char *src, drv_error_t *err)
{
    if (strcmp(src, "drover://") == 0)
        return 0;
    if (strncmp(src, "s3://", 5) == 0 || strncmp(src, "https://", 8) == 0 ||
        strncmp(src, "http://", 7) == 0)
        return 1;
    return drv_err_invalid(err, "source", "source '%.200s' has an unknown scheme (drover://, "
                           "s3://BUCKET/PREFIX or https://...)", src);
}

/* 409 naming the first blobs of m user does not hold. */
static int check_whole(drv_req_t *req, const drv_manifest_t *m, drv_error_t *err)
{
    char list[300] = "";
    size_t n = 0, len = 0;
    for (size_t i = 0; i < m->nfiles; i++) {
        const drv_manifest_file_t *f = &m->files[i];
        if (drv_blobs_find(m, f->sha256) != f ||
            drv_blobs_owned(req->head->blobs, req->who->user, f->sha256))
            continue;
        if (n++ < 3 && len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s (%.60s)",
                                    n > 1 ? ", " : "", f->sha256, f->path);
    }
    if (n == 0)
        return 0;
    return drv_err_conflict(err, "%zu blob(s) of manifest %s are not whole in the store: "
                            "%s%s; send them (POST /v1/artifacts/uploads, then PUT the "
                            "missing chunks)", n, m->digest, list, n > 3 ? ", ..." : "");
}

int drv_artifact_insert(drv_req_t *req, drv_resp_t *resp, json_t *spec,
                        const drv_manifest_t *m, drv_error_t *err)
{
    drv_state_t *st = req->head->state;
    json_t *internal = NULL;
    if (m) {
        char *canon = drv_manifest_to_json(m);
        json_t *cj = canon ? json_loads(canon, 0, NULL) : NULL;
        free(canon);
        if (!cj) {
            json_decref(spec);
            return drv_err_internal(err, "out of memory");
        }
        json_object_set_new(spec, "manifest", cj);
    } else {
        char token[33];
        drv_random_hex(16, token);
        internal = json_pack("{s:s}", "import", token);
    }
    const char *id = json_string_value(json_object_get(spec, "id"));
    char key[256];
    snprintf(key, sizeof key, "%s/%s", req->who->user, id);
    drv_obj_t *o = drv_obj_new(DRV_K_ARTIFACT, key, req->who->user, id, spec, internal);
    o->created_at = o->updated_at = drv_now_ms() / 1000;
    o->rv = 1;
    o->status = drv_kind_artifact.initial_status(o);
    drv_obj_prepare(o);

    drv_state_wrlock(st);
    const drv_obj_t *had = drv_state_get(st, DRV_K_ARTIFACT, key);
    if (had && !drv_artifact_import_failed(had)) {
        drv_state_unlock(st);
        drv_err_conflict(err, "artifact '%s' already exists", o->id);
        drv_obj_free(o);
        return -1;
    }
    if (had)   /* a failed import, imported again: the same record, a later version */
        o->rv = had->rv + 1;
    const char *sn = json_string_value(json_object_get(o->spec, "store"));
    if (sn && !drv_state_get(st, DRV_K_STORE, sn)) {   /* deleted while we read it */
        drv_state_unlock(st);
        drv_err_unprocessable(err, "store", "store '%s' not found", sn);
        drv_obj_free(o);
        return -1;
    }
    uint64_t seq = drv_state_put(st, o);
    char *body = drv_xmalloc(o->rendered_len + 1);
    memcpy(body, o->rendered, o->rendered_len + 1);
    drv_resp_raw(resp, m ? 201 : 202, "application/json", body, o->rendered_len);
    resp->etag = o->rv;
    snprintf(resp->location, sizeof resp->location, "/v1/artifacts/%s", o->id);
    drv_state_unlock(st);
    resp->wait_seq = seq > drv_store_committed(req->head->store) ? seq : 0;
    return 0;
}

/* {user, blobs: m's distinct sha256s}: what a standby must hold (upload.h). */
static json_t *blobs_item(const char *user, const drv_manifest_t *m)
{
    json_t *hexes = json_array();
    for (size_t i = 0; i < m->nfiles; i++)
        if (drv_blobs_find(m, m->files[i].sha256) == &m->files[i])
            json_array_append_new(hexes, json_string(m->files[i].sha256));
    return json_pack("{s:s, s:o}", "user", user, "blobs", hexes);
}

/* The created artifact's answer with its replication state (upload.h). */
static void mark_body(drv_resp_t *resp, const char *state)
{
    json_t *doc = state && resp->body ? json_loadb(resp->body, resp->len, 0, NULL) : NULL;
    drv_upload_replication_mark(resp, doc, state);
    if (!doc)
        return;
    size_t len;
    char *b = drv_json_dump(doc, &len);
    json_decref(doc);
    if (!b)
        return;
    free(resp->body);
    resp->body = b;
    resp->len = len;
}

int drv_h_artifact_create(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    drv_manifest_t *m = NULL;
    json_t *spec = drv_req_json(req, &err), *mj = NULL, *up = NULL;
    int kind = -1;
    if (!spec)
        goto error;
    static const char *const read_only[] = {"owner", "created_at", "updated_at",
                                            "resource_version", "status", "layout", NULL};
    for (size_t i = 0; read_only[i]; i++)
        if (json_object_get(spec, read_only[i])) {
            drv_err_invalid(&err, read_only[i], "%s is set by the server and is read-only",
                            read_only[i]);
            goto error;
        }
    mj = json_incref(json_object_get(spec, "manifest"));
    up = json_incref(json_object_get(spec, "upload"));
    json_object_del(spec, "manifest");
    json_object_del(spec, "upload");
    if (drv_schema_validate(spec, drv_kind_artifact.schema, "", &err) < 0 ||
        (kind = source_kind(json_string_value(json_object_get(spec, "source")), &err)) < 0)
        goto error;
    if (kind == 1) {   /* an S3 store or an https source: sources.c */
        if (up) {
            drv_err_invalid(&err, "upload", "upload names an upload to the head's own store "
                            "(source drover://), not to '%.200s'",
                            json_string_value(json_object_get(spec, "source")));
            goto error;
        }
        if (mj && !(m = drv_upload_manifest_of(mj, "manifest", &err)))
            goto error;
        if (drv_sources_prepare(req, spec, &m, &err) < 0)
            goto error;
        json_t *sp = spec;
        spec = NULL;   /* insert takes it */
        if (drv_artifact_insert(req, resp, sp, m, &err) < 0)
            goto error;
        drv_manifest_free(m);
        json_decref(mj);
        return 0;
    }
    if (json_object_get(spec, "store")) {
        drv_err_invalid(&err, "store", "store names an S3 store, for source s3://BUCKET/PREFIX "
                        "(not drover://)");
        goto error;
    }
    if (need_store(req, &err) < 0)
        goto error;
    if (!mj == !up) {
        drv_err_invalid(&err, "upload", "give exactly one of upload (an upload's id) and "
                        "manifest");
        goto error;
    }
    if (up && !json_is_string(up)) {
        drv_err_invalid(&err, "upload", "upload must be an upload id (a manifest digest)");
        goto error;
    }
    if (up && drv_blobs_upload_load(req->head->blobs, req->who->user, json_string_value(up), &m,
                                    &err) < 0) {
        if (err.status == 404)
            drv_err_invalid(&err, "upload", "upload '%.80s' not found", json_string_value(up));
        goto error;
    }
    if (mj && !(m = drv_upload_manifest_of(mj, "manifest", &err)))
        goto error;
    if (check_whole(req, m, &err) < 0)
        goto error;
    /* several heads: a standby holds the blobs before the artifact exists */
    const char *repl;
    if (drv_upload_replicate(req, resp, "artifact", req->who->user,
                             json_string_value(json_object_get(spec, "id")),
                             blobs_item(req->who->user, m), &repl, NULL))
        goto held;
    json_t *sp = spec;
    spec = NULL;
    if (drv_artifact_insert(req, resp, sp, m, &err) < 0)
        goto error;
    mark_body(resp, repl);
    if (up)
        drv_blobs_upload_drop(req->head->blobs, req->who->user, m->digest);
    drv_manifest_free(m);
    json_decref(mj);
    json_decref(up);
    return 0;
held:
    drv_manifest_free(m);
    json_decref(spec);
    json_decref(mj);
    json_decref(up);
    return 0;
error:
    drv_manifest_free(m);
    json_decref(spec);
    json_decref(mj);
    json_decref(up);
    drv_resp_error(resp, &err);
    return 0;
}

/* --- blob reads -------------------------------------------------------------- */

/* One of owner's artifacts holding blob hex, a drover:// one first (its
 * bytes are here); NULL when none. Under the read lock. */
static const drv_obj_t *owner_blob_artifact(drv_state_t *st, const char *owner, const char *hex)
{
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", owner);
    size_t plen = strlen(prefix);
    const drv_obj_t *remote = NULL;
    for (size_t i = drv_state_lower_bound(st, DRV_K_ARTIFACT, prefix);
         i < drv_state_count(st, DRV_K_ARTIFACT); i++) {
        drv_obj_t *a = drv_state_at(st, DRV_K_ARTIFACT, i);
        if (strncmp(a->key, prefix, plen) != 0)
            break;
        size_t k;
        json_t *f;
        json_array_foreach(json_object_get(json_object_get(a->spec, "manifest"), "files"), k, f)
            if (strcmp(json_string_value(json_object_get(f, "sha256")), hex) == 0) {
                if (strcmp(json_string_value(json_object_get(a->spec, "source")), "drover://") == 0)
                    return a;
                if (!remote)
                    remote = a;
                break;
            }
    }
    return remote;
}

/* Who reads: a node (its owner's blobs) or a user with a read token.
 * owner gets the user whose artifacts count. */
static int blob_reader(drv_req_t *req, char *owner, size_t n, drv_error_t *err)
{
    const char *secret = drv_auth_secret(req->authorization, err);
    if (!secret)
        return -1;
    if (strncmp(secret, DRV_NODE_PREFIX, strlen(DRV_NODE_PREFIX)) == 0) {
        char o[64];
        if (drv_auth_node(req->head, req->authorization, o, NULL, err) < 0)
            return -1;
        snprintf(owner, n, "%s", o);
        return 0;
    }
    drv_principal_t who;
    if (drv_authenticate(req->head, req->authorization, &who, err) < 0)
        return -1;
    if (!(who.scopes & DRV_SCOPE_READ))
        return drv_err(err, 403, "permission_denied", "", "this token's scope does not allow "
                       "reading blobs (needs read)");
    snprintf(owner, n, "%s", who.user);
    return 0;
}

/* "bytes=A-B", "bytes=A-", "bytes=-N" against size: 0 with [off, off+len),
 * 1 when absent, -1 (416) when unsatisfiable or not one range. */
static int parse_range(const char *h, uint64_t size, uint64_t *off, uint64_t *len)
{
    if (!h)
        return 1;
    if (strncmp(h, "bytes=", 6) != 0 || strchr(h, ','))
        return -1;
    const char *p = h + 6;
    char *end;
    if (*p == '-') {
        if (p[1] < '0' || p[1] > '9')
            return -1;
        unsigned long long n = strtoull(p + 1, &end, 10);
        if (*end || n == 0 || size == 0)
            return -1;
        *len = n < size ? n : size;
        *off = size - *len;
        return 0;
    }
    if (*p < '0' || *p > '9')
        return -1;
    unsigned long long a = strtoull(p, &end, 10), b = size ? size - 1 : 0;
    if (*end != '-' || a >= size)
        return -1;
    if (end[1]) {
        if (end[1] < '0' || end[1] > '9')
            return -1;
        b = strtoull(end + 1, &end, 10);
        if (*end || b < a)
            return -1;
        if (b >= size)
            b = size - 1;
    }
    *off = a;
    *len = b - a + 1;
    return 0;
}

int drv_h_blob_send(drv_req_t *req, drv_resp_t *resp, const char *hex)
{
    static const drv_kv_t ranges[] = {{"Accept-Ranges", "bytes"}, {NULL, NULL}};
    drv_error_t err;
    int fd = -1;
    uint64_t size, off = 0, len;
    if (need_store(req, &err) < 0 || !drv_blobs_hex_ok(hex) ||
        drv_blobs_open_read(req->head->blobs, hex, &fd, &size, &err) < 0) {
        if (!drv_blobs_hex_ok(hex))
            drv_err_not_found(&err, "blob %.64s not found", hex);
        drv_resp_error(resp, &err);
        return -1;
    }
    int r = parse_range(drv_req_header(req, "Range"), size, &off, &len);
    if (r < 0) {
        drv_err(&err, 416, "range_not_satisfiable", "Range",
                "Range must be one satisfiable range of bytes (blob %s has %" PRIu64 ")", hex,
                size);
        drv_resp_error(resp, &err);
        resp->header_name = "Content-Range";
        snprintf(resp->header_value, sizeof resp->header_value, "bytes */%" PRIu64, size);
        close(fd);
        return 0;
    }
    if (r == 1)
        len = size;
    resp->status = r == 0 ? 206 : 200;
    resp->content_type = "application/octet-stream";
    resp->has_file = true;
    resp->file_fd = fd;
    resp->file_off = off;
    resp->file_len = len;
    resp->headers = ranges;
    atomic_fetch_add(&req->head->blob_bytes_sent, len);
    if (r == 0) {
        resp->header_name = "Content-Range";
        snprintf(resp->header_value, sizeof resp->header_value,
                 "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1, size);
    }
    return 0;
}

/* 307 to url (a presigned or head-signed GET); -1 with err when too long. */
static int redirect(drv_resp_t *resp, const char *hex, const char *url, drv_error_t *err)
{
    if (strlen(url) >= sizeof resp->location)
        return drv_err_internal(err, "the URL of blob %s is too long", hex);
    snprintf(resp->location, sizeof resp->location, "%s", url);
    drv_resp_raw(resp, 307, "text/plain", NULL, 0);
    return 0;
}

int drv_h_blob_get(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    char owner[64];
    const char *hex = req->params[0];
    if (blob_reader(req, owner, sizeof owner, &err) < 0)
        goto error;
    drv_state_rdlock(req->head->state);
    const drv_obj_t *a = drv_blobs_hex_ok(hex) ? owner_blob_artifact(req->head->state, owner, hex)
                                               : NULL;
    bool local = a && strcmp(json_string_value(json_object_get(a->spec, "source")),
                             "drover://") == 0;
    char *url = a && !local ? drv_sources_blob_url(req, a, hex, BLOB_URL_TTL, &err) : NULL;
    drv_state_unlock(req->head->state);
    /* or one the owner sent itself (a checkpoint's: store/checkpoints.h) */
    if (!a && req->head->blobs && drv_blobs_hex_ok(hex) &&
        drv_blobs_owned(req->head->blobs, owner, hex))
        local = true;
    if (!a && !local) {
        drv_err_not_found(&err, "blob %.64s not found", hex);
        goto error;
    }
    if (!local) {   /* on an S3 store or at an https URL: the node reads it there */
        if (!url)
            goto error;
        int rc = redirect(resp, hex, url, &err);
        free(url);
        if (rc < 0)
            goto error;
        atomic_fetch_add(&req->head->blob_redirects, 1);
        return 0;
    }
    /* a drover:// blob this head has not copied yet (several heads:
     * head/blob_sync.c): 307 to a head that has it, its URL signed */
    char peer[1024];
    int (*elsewhere)(void *, const char *, char *, size_t) =
        __atomic_load_n(&req->head->blob_elsewhere, __ATOMIC_ACQUIRE);
    if (need_store(req, &err) == 0 && !drv_blobs_whole(req->head->blobs, hex) && elsewhere &&
        elsewhere(req->head->blob_elsewhere_ctx, hex, peer, sizeof peer) == 0) {
        if (redirect(resp, hex, peer, &err) < 0)
            goto error;
        atomic_fetch_add(&req->head->blob_redirects, 1);
        return 0;
    }
    drv_h_blob_send(req, resp, hex);
    return 0;
error:
    drv_resp_error(resp, &err);
    return 0;
}
