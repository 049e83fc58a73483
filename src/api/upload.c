/* upload.c — see upload.h. */
#include "api/upload.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "api/auth.h"
#include "common/log.h"
#include "common/util.h"
#include "common/manifest.h"
#include "state/events.h"
#include "store/blobs.h"

bool drv_upload_wanted(const char *method, const char *url)
{
    static const char pre[] = "/v1/artifacts/uploads/";
    static const char ck[] = "/v1/agent/checkpoints/uploads/";   /* h_checkpoints.c */
    return strcmp(method, "PUT") == 0 &&
           (strncmp(url, pre, sizeof pre - 1) == 0 || strncmp(url, ck, sizeof ck - 1) == 0) &&
           strstr(url, "/chunks/") != NULL;
}

size_t drv_upload_body_limit(drv_head_t *head, const char *method, const char *url,
                             const char *authorization)
{
    static const char *const routes[] = {"/v1/artifacts/uploads", "/v1/artifacts",
                                         "/v1/agent/checkpoints/uploads", NULL};
    static const char ck[] = "/v1/agent/checkpoints/";   /* a commit: .../SCOPE */
    if (strcmp(method, "POST") != 0 || !authorization)
        return DRV_MAX_BODY;
    bool manifest = false;
    for (int i = 0; routes[i] && !manifest; i++)
        manifest = strcmp(url, routes[i]) == 0;
    if (!manifest && strncmp(url, ck, sizeof ck - 1) == 0 && !strchr(url + sizeof ck - 1, '/'))
        manifest = true;
    if (!manifest)
        return DRV_MAX_BODY;
    drv_principal_t who;
    drv_error_t err;
    const char *sec = drv_auth_secret(authorization, &err);
    bool node = sec && strncmp(sec, DRV_NODE_PREFIX, strlen(DRV_NODE_PREFIX)) == 0;
    if (!sec || (node ? drv_auth_node(head, authorization, NULL, NULL, &err)
                      : drv_authenticate(head, authorization, &who, &err)) < 0)
        return DRV_MAX_BODY;   /* the handler answers 401 */
    return DRV_MANIFEST_BODY_MAX;
}

drv_upload_t *drv_upload_begin(drv_head_t *head, const char *authorization,
                               const char *content_length)
{
    drv_upload_t *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->fd = -1;
    u->max = DRV_MANIFEST_CHUNK_MAX;
    drv_sha256_init(&u->sha);
    if (content_length && strtoull(content_length, NULL, 10) > u->max)
        u->too_large = true;
    drv_principal_t who;
    drv_error_t err;
    /* a node credential (checkpoint chunks from agents) or a user token */
    const char *sec = authorization ? drv_auth_secret(authorization, &err) : NULL;
    bool node = sec && strncmp(sec, DRV_NODE_PREFIX, strlen(DRV_NODE_PREFIX)) == 0;
    if (!head->blobs || u->too_large ||
        (node ? drv_auth_node(head, authorization, NULL, NULL, &err)
              : drv_authenticate(head, authorization, &who, &err)) < 0) {
        u->discard = true;   /* the handler answers why */
        return u;
    }
    u->fd = drv_blobs_tmp_open(head->blobs, u->path, sizeof u->path, &err);
    if (u->fd < 0)
        u->write_errno = EIO;
    return u;
}

void drv_upload_add(drv_upload_t *u, const char *data, size_t n)
{
    if (u->len + n > u->max)
        u->too_large = true;
    u->len += n;
    if (u->discard || u->too_large || u->write_errno || u->fd < 0)
        return;
    drv_sha256_update(&u->sha, data, n);
    while (n > 0) {
        ssize_t w = write(u->fd, data, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            u->write_errno = w < 0 ? errno : EIO;
            return;
        }
        data += w;
        n -= (size_t)w;
    }
}

void drv_upload_finish(drv_upload_t *u)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char d[32];
    drv_sha256_final(&u->sha, d);
    for (int i = 0; i < 32; i++) {
        u->sha256[2 * i] = digits[d[i] >> 4];
        u->sha256[2 * i + 1] = digits[d[i] & 15];
    }
    u->sha256[64] = '\0';
}

void drv_upload_free(drv_upload_t *u)
{
    if (!u)
        return;
    if (u->fd >= 0) {
        close(u->fd);
        unlink(u->path);   /* ENOENT when the handler kept it */
    }
    free(u);
}

/* --- semi-synchronous uploads (several heads) ------------------------------------------ */

static void request_id(const drv_req_t *req, const char *kind, const char *user, char *out,
                       size_t n)
{
    char hex[65];
    drv_sha256_hex(req->body ? req->body : "", req->body ? req->body_len : 0, hex);
    snprintf(out, n, "%s\n%s\n%s", kind, user, hex);
}

bool drv_upload_replicate(drv_req_t *req, drv_resp_t *resp, const char *kind, const char *user,
                          const char *what, json_t *item, const char **state,
                          json_t **kept)
{
    drv_head_t *h = req->head;
    int (*fn)(void *, const char *, json_t *, bool, int *, json_t **) =
        __atomic_load_n(&h->replicate, __ATOMIC_ACQUIRE);
    *state = NULL;
    if (kept)
        *kept = NULL;
    if (!fn || h->cfg.blob_sync_timeout_ms <= 0) {
        json_decref(item);
        return false;
    }
    char id[300];
    int wait_ms = 0;
    request_id(req, kind, user, id, sizeof id);
    int r = fn(h->replicate_ctx, id, req->resumed ? NULL : json_incref(item), req->resumed,
               &wait_ms, kept);
    json_decref(item);
    if (r == DRV_REPL_WAIT && !req->resumed && wait_ms > 0) {
        resp->hold_ms = wait_ms;
        resp->hold_key = drv_key_hash(id);
        resp->status = 202;   /* placeholder: replaced when the hold ends */
        return true;
    }
    if (r == DRV_REPL_HELD)
        *state = "held";
    else if (r != DRV_REPL_NONE)
        *state = "pending";
    if (*state)
        atomic_fetch_add(r == DRV_REPL_HELD ? &h->uploads_held : &h->uploads_pending, 1);
    if (r == DRV_REPL_PENDING || r == DRV_REPL_WAIT) {
        drv_warn("%s %s of %s: no standby held its blobs within %d ms; answered, they copy it in "
                 "the background", kind, what, user, h->cfg.blob_sync_timeout_ms);
        drv_events_add(h->events, user, kind, what, "not_replicated",
                       "no standby head held its blobs within blob_sync_timeout (%d ms): it "
                       "is on this head only until they copy it", h->cfg.blob_sync_timeout_ms);
    }
    return false;
}

void drv_upload_replication_mark(drv_resp_t *resp, json_t *doc, const char *state)
{
    if (!state)
        return;
    resp->header_name = "X-Drover-Replication";
    snprintf(resp->header_value, sizeof resp->header_value, "%s", state);
    if (!doc)
        return;
    json_object_set_new(doc, "replication", json_string(state));
    if (strcmp(state, "pending") == 0)
        json_object_set_new(doc, "warning", json_string(
            "no standby head holds this upload yet (blob_sync_timeout passed): until one "
            "copies it, it is on this head only"));
}
