/* h_checkpoints.c — checkpoints (issue 14 item 7): agents upload a
 * checkpoint's files into the blob store like an artifact push and then
 * commit its manifest; users list and delete them.
 *
 * Agents (node credential; the node's owner owns the checkpoints):
 *   GET    /v1/agent/checkpoints/{scope}            list, newest first
 *   GET    /v1/agent/checkpoints/{scope}/{name}     one, with its manifest
 *   POST   /v1/agent/checkpoints/uploads            {manifest} -> what is missing
 *   PUT    /v1/agent/checkpoints/uploads/{id}/blobs/{hex}/chunks/{i}   (streamed)
 *   POST   /v1/agent/checkpoints/{scope}            {name, upload|manifest, keep}: commit
 *   DELETE /v1/agent/checkpoints/{scope}/{name}
 * Users (read / write tokens):
 *   GET    /v1/deployments/{id}/checkpoints         every slot's, newest first
 *   GET    /v1/checkpoints/{scope}
 *   DELETE /v1/checkpoints/{scope}/{name}
 *
 * Store calls (store/checkpoints.h, store/blobs.h) never run under the
 * state lock; the lock is taken only to authenticate and to look up a
 * deployment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/handlers.h"
#include "api/upload.h"
#include "common/log.h"
#include "common/manifest.h"
#include "state/head.h"
#include "state/state.h"
#include "store/blobs.h"
#include "store/checkpoints.h"

static int need_store(drv_req_t *req, drv_error_t *err)
{
    if (!req->head->blobs)
        return drv_err(err, 503, "unavailable", "", "this head has no blob store");
    return 0;
}

/* the node's owner, or -1 with err */
static int node_owner(drv_req_t *req, char owner[64], drv_error_t *err)
{
    if (need_store(req, err) < 0)
        return -1;
    return drv_auth_node(req->head, req->authorization, owner, NULL, err);
}

static void answer_list(drv_resp_t *resp, json_t *items)
{
    drv_resp_json(resp, 200, json_pack("{s:o}", "items", items));
}

int drv_h_agent_ckpt_list(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    char owner[64];
    json_t *items;
    if (node_owner(req, owner, &err) < 0 ||
        !(items = drv_ckpts_list(req->head->blobs, owner, req->params[0], false, false, &err))) {
        drv_resp_error(resp, &err);
        return 0;
    }
    answer_list(resp, items);
    return 0;
}

int drv_h_agent_ckpt_get(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    char owner[64];
    json_t *rec;
    if (node_owner(req, owner, &err) < 0 ||
        drv_ckpts_get(req->head->blobs, owner, req->params[0], req->params[1], &rec, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_resp_json(resp, 200, rec);
    return 0;
}

int drv_h_agent_ckpt_upload(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    char owner[64];
    json_t *body = NULL;
    drv_manifest_t *m = NULL;
    bool existed;
    if (node_owner(req, owner, &err) < 0 || !(body = drv_req_json(req, &err)))
        goto error;
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) if (strcmp(k, "manifest") != 0) {
        drv_err_invalid(&err, k, "unknown field '%s' (an upload takes only \"manifest\")", k);
        goto error;
    }
    if (!(m = drv_upload_manifest_of(json_object_get(body, "manifest"), "manifest", &err)) ||
        drv_blobs_upload_save(req->head->blobs, owner, m, &existed, &err) < 0)
        goto error;
    drv_resp_json(resp, existed ? 200 : 201, drv_upload_doc(req->head, owner, m));
    json_decref(body);
    drv_manifest_free(m);
    return 0;
error:
    json_decref(body);
    drv_manifest_free(m);
    drv_resp_error(resp, &err);
    return 0;
}

int drv_h_agent_ckpt_chunk(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    char owner[64];
    if (node_owner(req, owner, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    return drv_upload_chunk_as(req, resp, owner);
}

/* 409 naming the first blob of m that owner does not hold */
static int check_held(drv_req_t *req, const char *owner, const drv_manifest_t *m,
                      drv_error_t *err)
{
    size_t n = 0;
    const drv_manifest_file_t *first = NULL;
    for (size_t i = 0; i < m->nfiles; i++)
        if (!drv_blobs_owned(req->head->blobs, owner, m->files[i].sha256) && n++ == 0)
            first = &m->files[i];
    if (!n)
        return 0;
    return drv_err_conflict(err, "%zu file(s) of checkpoint manifest %s are not whole in the "
                            "store, e.g. '%.200s' (%s): upload them first (nothing committed)",
                            n, m->digest, first->path, first->sha256);
}

/* The commit's answer after its hold: the one it had (api/upload.h), else
 * the record's. */
static void resumed_answer(drv_req_t *req, drv_resp_t *resp, const char *owner,
                           const char *scope, const char *name, const char *what)
{
    const char *repl;
    json_t *item = NULL, *rec = NULL;
    drv_error_t err;
    drv_upload_replicate(req, resp, "checkpoint", owner, what, NULL, &repl, &item);
    json_t *doc = json_deep_copy(json_object_get(item, "answer"));   /* the ticket's stays */
    json_decref(item);
    if (!doc) {
        if (drv_ckpts_get(req->head->blobs, owner, scope, name, &rec, &err) < 0) {
            drv_resp_error(resp, &err);
            return;
        }
        doc = json_pack("{s:s, s:s, s:O, s:O, s:[]}", "scope", scope, "name", name, "digest",
                        json_object_get(rec, "digest"), "total_size",
                        json_object_get(rec, "total_size"), "pruned");
        json_decref(rec);
    }
    if (!doc) {
        drv_err_internal(&err, "out of memory");
        drv_resp_error(resp, &err);
        return;
    }
    drv_upload_replication_mark(resp, doc, repl);
    drv_resp_json(resp, 201, doc);
}

int drv_h_agent_ckpt_commit(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    char owner[64];
    json_t *body = NULL, *pruned = NULL;
    drv_manifest_t *m = NULL;
    const char *scope = req->params[0];
    if (node_owner(req, owner, &err) < 0 || !(body = drv_req_json(req, &err)))
        goto error;
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) if (strcmp(k, "name") && strcmp(k, "manifest") &&
                                        strcmp(k, "upload") && strcmp(k, "keep")) {
        drv_err_invalid(&err, k, "unknown field '%s' (a commit takes name, upload or manifest, "
                        "keep)", k);
        goto error;
    }
    const char *name = json_string_value(json_object_get(body, "name"));
    const json_t *up = json_object_get(body, "upload"), *mj = json_object_get(body, "manifest");
    const json_t *kj = json_object_get(body, "keep");
    if (!drv_ckpt_scope_ok(scope)) {
        drv_err_invalid(&err, "scope", "checkpoint scope '%.140s' is not valid (1-127 of "
                        "[A-Za-z0-9._:-], not starting with '.')", scope);
        goto error;
    }
    if (!name || !drv_ckpt_name_ok(name)) {
        drv_err_invalid(&err, "name", "name must be the checkpoint's directory name (1-127 of "
                        "[A-Za-z0-9._-], not starting with '.')");
        goto error;
    }
    if (kj && (!json_is_integer(kj) || json_integer_value(kj) < 0 ||
               json_integer_value(kj) > DRV_CKPT_KEEP_MAX)) {
        drv_err_invalid(&err, "keep", "keep must be an integer from 0 (all) to %d",
                        DRV_CKPT_KEEP_MAX);
        goto error;
    }
    if (!up == !mj) {
        drv_err_invalid(&err, "upload", "give exactly one of upload (an upload's id) and "
                        "manifest");
        goto error;
    }
    char what[300];
    snprintf(what, sizeof what, "%s/%s", scope, name);
    if (req->resumed) {   /* held until a standby had it (api/upload.h): committed before */
        resumed_answer(req, resp, owner, scope, name, what);
        json_decref(body);
        return 0;
    }
    if (up && (!json_is_string(up) ||
               drv_blobs_upload_load(req->head->blobs, owner, json_string_value(up), &m, &err) < 0)) {
        if (!json_is_string(up) || err.status == 404)
            drv_err_invalid(&err, "upload", "upload '%.80s' not found",
                            json_is_string(up) ? json_string_value(up) : "");
        goto error;
    }
    if (mj && !(m = drv_upload_manifest_of(mj, "manifest", &err)))
        goto error;
    if (check_held(req, owner, m, &err) < 0 ||
        drv_ckpts_commit(req->head->blobs, owner, scope, name, m, (int)json_integer_value(kj),
                         &pruned, &err) < 0)
        goto error;
    if (up)
        drv_blobs_upload_drop(req->head->blobs, owner, m->digest);
    json_t *doc = json_pack("{s:s, s:s, s:s, s:I, s:o}", "scope", scope, "name", name, "digest",
                            m->digest, "total_size", (json_int_t)m->total_size, "pruned",
                            pruned ? pruned : json_array());
    drv_info("checkpoint %s/%s/%s committed (%llu bytes, %zu files)", owner, scope, name,
             (unsigned long long)m->total_size, m->nfiles);
    /* several heads: answered once a standby holds the record and its blobs */
    json_t *rec = NULL, *hexes = json_array();
    drv_error_t e2;
    if (drv_ckpts_get(req->head->blobs, owner, scope, name, &rec, &e2) < 0)
        rec = json_null();
    for (size_t i = 0; i < m->nfiles; i++)
        if (drv_blobs_find(m, m->files[i].sha256) == &m->files[i])
            json_array_append_new(hexes, json_string(m->files[i].sha256));
    const char *repl;
    if (drv_upload_replicate(req, resp, "checkpoint", owner, what,
                             json_pack("{s:s, s:o, s:o, s:O}", "user", owner, "blobs", hexes,
                                       "checkpoint", rec, "answer", doc),
                             &repl, NULL)) {
        json_decref(doc);
        json_decref(body);
        drv_manifest_free(m);
        return 0;
    }
    drv_upload_replication_mark(resp, doc, repl);
    drv_resp_json(resp, 201, doc);
    json_decref(body);
    drv_manifest_free(m);
    return 0;
error:
    json_decref(body);
    drv_manifest_free(m);
    drv_resp_error(resp, &err);
    return 0;
}

int drv_h_agent_ckpt_delete(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    char owner[64];
    if (node_owner(req, owner, &err) < 0 ||
        drv_ckpts_delete(req->head->blobs, owner, req->params[0], req->params[1], &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_resp_raw(resp, 204, "text/plain", NULL, 0);
    return 0;
}

/* --- users ------------------------------------------------------------------- */

int drv_h_deployment_ckpts(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    const char *dep = req->params[0];
    char key[256], prefix[200];
    json_t *items;
    if (need_store(req, &err) < 0)
        goto error;
    snprintf(key, sizeof key, "%s/%s", req->who->user, dep);
    drv_state_rdlock(req->head->state);
    bool exists = drv_state_get(req->head->state, DRV_K_DEPLOYMENT, key) != NULL;
    drv_state_unlock(req->head->state);
    if (!exists) {
        drv_err_not_found(&err, "deployment '%.100s' not found", dep);
        goto error;
    }
    snprintf(prefix, sizeof prefix, "deployment:%s:", dep);
    if (!(items = drv_ckpts_list(req->head->blobs, req->who->user, prefix, true, false, &err)))
        goto error;
    answer_list(resp, items);
    return 0;
error:
    drv_resp_error(resp, &err);
    return 0;
}

int drv_h_ckpt_list(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    json_t *items;
    if (need_store(req, &err) < 0 ||
        !(items = drv_ckpts_list(req->head->blobs, req->who->user, req->params[0], false, false,
                                 &err))) {
        drv_resp_error(resp, &err);
        return 0;
    }
    answer_list(resp, items);
    return 0;
}

int drv_h_ckpt_delete(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    if (need_store(req, &err) < 0 ||
        drv_ckpts_delete(req->head->blobs, req->who->user, req->params[0], req->params[1],
                         &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_resp_raw(resp, 204, "text/plain", NULL, 0);
    return 0;
}
