/* routes.c — the API's route table (data, not code) and the dispatcher that
 * applies authentication, scope and role checks before calling a handler. */
#include <stdio.h>
#include <string.h>

#include "api/api.h"
#include "api/audit.h"
#include "api/cors.h"
#include "api/handlers.h"
#include "api/resource.h"
#include "common/openai.h"
#include "state/head.h"

#define R DRV_SCOPE_READ
#define W DRV_SCOPE_WRITE
#define P DRV_SCOPE_PREDICT

static const drv_route_t routes[] = {
    {"GET", "/healthz", 0, false, drv_h_healthz, NULL},
    {"GET", "/v1/status", R, false, drv_h_status, NULL},
    {"GET", "/v1/audit", R, true, drv_h_audit, NULL},
    /* the CA clients pin (sha256 of its SPKI) before sending any secret */
    {"GET", "/v1/tls/ca", 0, false, drv_h_tls_ca, NULL},

    /* the web console (h_console.c): its files need no token */
    {"GET", "/", 0, false, drv_h_console_index, NULL},
    {"GET", "/ui/{}", 0, false, drv_h_console_asset, NULL},

    {"GET", "/v1/users/me", R, false, drv_h_me, NULL},
    {"GET", "/v1/users", R, true, drv_h_users_list, NULL},
    {"POST", "/v1/users", W, true, drv_h_user_create, NULL},
    {"GET", "/v1/users/{}", R, false, drv_h_user_get, NULL},
    {"DELETE", "/v1/users/{}", W, true, drv_h_user_delete, NULL},
    {"PATCH", "/v1/users/{}", W, true, drv_h_user_patch, NULL},

    {"GET", "/v1/tokens", R, false, drv_h_tokens_list, NULL},
    {"POST", "/v1/tokens", W, false, drv_h_token_create, NULL},
    {"GET", "/v1/tokens/{}", R, false, drv_h_token_get, NULL},
    {"DELETE", "/v1/tokens/{}", W, false, drv_h_token_revoke, NULL},

    {"GET", "/v1/providers", R, false, drv_h_providers_list, NULL},
    {"GET", "/v1/providers/{}", R, false, drv_h_provider_get, NULL},
    {"GET", "/v1/providers/{}/regions", R, false, drv_h_regions_list, NULL},
    {"GET", "/v1/instance-types", R, false, drv_h_instance_types_list, NULL},
    {"GET", "/v1/instance-types/{}", R, false, drv_h_instance_type_get, NULL},
    {"GET", "/v1/recommendations", R, false, drv_h_recommendations, NULL},

    {"GET", "/v1/credentials", R, false, drv_h_obj_list, &drv_kind_credential},
    {"POST", "/v1/credentials", W, false, drv_h_obj_create, &drv_kind_credential},
    {"GET", "/v1/credentials/{}", R, false, drv_h_obj_get, &drv_kind_credential},
    {"PATCH", "/v1/credentials/{}", W, false, drv_h_obj_patch, &drv_kind_credential},
    {"DELETE", "/v1/credentials/{}", W, false, drv_h_obj_delete, &drv_kind_credential},

    /* operators' S3 stores (kinds_store.c): every user reads, admins write */
    {"GET", "/v1/stores", R, false, drv_h_obj_list, &drv_kind_store},
    {"POST", "/v1/stores", W, true, drv_h_obj_create, &drv_kind_store},
    {"GET", "/v1/stores/{}", R, false, drv_h_obj_get, &drv_kind_store},
    {"POST", "/v1/stores/{}/uploads", W, false, drv_h_store_upload, NULL},
    {"POST", "/v1/stores/{}/uploads/complete", W, false, drv_h_store_upload_complete, NULL},
    {"PATCH", "/v1/stores/{}", W, true, drv_h_obj_patch, &drv_kind_store},
    {"DELETE", "/v1/stores/{}", W, true, drv_h_obj_delete, &drv_kind_store},

    {"GET", "/v1/clusters", R, false, drv_h_obj_list, &drv_kind_cluster},
    {"POST", "/v1/clusters", W, false, drv_h_obj_create, &drv_kind_cluster},
    {"GET", "/v1/clusters/{}", R, false, drv_h_obj_get, &drv_kind_cluster},
    {"PATCH", "/v1/clusters/{}", W, false, drv_h_obj_patch, &drv_kind_cluster},
    {"DELETE", "/v1/clusters/{}", W, false, drv_h_obj_delete, &drv_kind_cluster},

    {"GET", "/v1/nodepools", R, false, drv_h_obj_list, &drv_kind_nodepool},
    {"GET", "/v1/clusters/{}/nodepools", R, false, drv_h_obj_list, &drv_kind_nodepool},
    {"POST", "/v1/clusters/{}/nodepools", W, false, drv_h_obj_create, &drv_kind_nodepool},
    {"GET", "/v1/clusters/{}/nodepools/{}", R, false, drv_h_obj_get, &drv_kind_nodepool},
    {"PATCH", "/v1/clusters/{}/nodepools/{}", W, false, drv_h_obj_patch, &drv_kind_nodepool},
    {"DELETE", "/v1/clusters/{}/nodepools/{}", W, false, drv_h_obj_delete, &drv_kind_nodepool},

    {"GET", "/v1/models", R, false, drv_h_obj_list, &drv_kind_model},
    {"POST", "/v1/models", W, false, drv_h_obj_create, &drv_kind_model},
    {"GET", "/v1/models/{}", R, false, drv_h_obj_get, &drv_kind_model},
    {"PATCH", "/v1/models/{}", W, false, drv_h_obj_patch, &drv_kind_model},
    {"DELETE", "/v1/models/{}", W, false, drv_h_obj_delete, &drv_kind_model},

    /* artifacts (h_artifacts.c); uploads before /v1/artifacts/{} */
    {"POST", "/v1/artifacts/uploads", W, false, drv_h_upload_create, NULL},
    {"GET", "/v1/artifacts/uploads", R, false, drv_h_upload_list, NULL},
    {"GET", "/v1/artifacts/uploads/{}", R, false, drv_h_upload_get, NULL},
    {"PUT", "/v1/artifacts/uploads/{}/blobs/{}/chunks/{}", W, false, drv_h_upload_chunk, NULL},
    {"GET", "/v1/artifacts", R, false, drv_h_obj_list, &drv_kind_artifact},
    {"POST", "/v1/artifacts", W, false, drv_h_artifact_create, NULL},
    {"GET", "/v1/artifacts/{}", R, false, drv_h_obj_get, &drv_kind_artifact},
    {"DELETE", "/v1/artifacts/{}", W, false, drv_h_obj_delete, &drv_kind_artifact},
    /* node credentials or a read token: authenticated in the handler */
    {"GET", "/v1/blobs/sha256/{}", 0, false, drv_h_blob_get, NULL},
    /* head to head (h_peer.c): URLs signed with the heads' key, on standbys too */
    {"GET", "/v1/heads/blobs/sha256/{}", 0, false, drv_h_peer_blob, NULL},
    {"GET", "/v1/heads/checkpoints", 0, false, drv_h_peer_ckpts, NULL},
    {"POST", "/v1/heads/replicate", 0, false, drv_h_peer_replicate, NULL},

    {"GET", "/v1/deployments", R, false, drv_h_obj_list, &drv_kind_deployment},
    {"POST", "/v1/deployments", W, false, drv_h_obj_create, &drv_kind_deployment},
    {"GET", "/v1/deployments/{}", R, false, drv_h_obj_get, &drv_kind_deployment},
    {"PATCH", "/v1/deployments/{}", W, false, drv_h_obj_patch, &drv_kind_deployment},
    {"DELETE", "/v1/deployments/{}", W, false, drv_h_obj_delete, &drv_kind_deployment},

    /* training jobs (h_jobs.c): PATCH priority/description; DELETE cancels, or removes an ended one */
    {"GET", "/v1/jobs", R, false, drv_h_obj_list, &drv_kind_job},
    {"GET", "/v1/queues", R, false, drv_h_queues_list, NULL},
    {"POST", "/v1/jobs", W, false, drv_h_obj_create, &drv_kind_job},
    {"GET", "/v1/jobs/{}", R, false, drv_h_obj_get, &drv_kind_job},
    {"PATCH", "/v1/jobs/{}", W, false, drv_h_obj_patch, &drv_kind_job},
    {"DELETE", "/v1/jobs/{}", W, false, drv_h_job_delete, NULL},
    {"GET", "/v1/jobs/{}/logs", R, false, drv_h_logs, "job"},

    {"GET", "/v1/clusters/{}/nodepools/{}/join-tokens", R, false, drv_h_jointokens_list, NULL},
    {"POST", "/v1/clusters/{}/nodepools/{}/join-tokens", W, false, drv_h_jointoken_create, NULL},
    {"DELETE", "/v1/clusters/{}/nodepools/{}/join-tokens/{}", W, false, drv_h_jointoken_delete, NULL},

    {"GET", "/v1/nodes", R, false, drv_h_nodes_list, NULL},
    {"GET", "/v1/nodes/{}", R, false, drv_h_node_get, NULL},
    {"DELETE", "/v1/nodes/{}", W, false, drv_h_node_delete, NULL},
    {"POST", "/v1/nodes/{}/cordon", W, false, drv_h_node_cordon, NULL},
    {"POST", "/v1/nodes/{}/uncordon", W, false, drv_h_node_uncordon, NULL},
    {"POST", "/v1/nodes/{}/drain", W, false, drv_h_node_drain, NULL},
    {"POST", "/v1/nodes/{}/revoke", W, false, drv_h_node_revoke, NULL},
    {"GET", "/v1/replicas", R, false, drv_h_replicas_list, NULL},
    {"GET", "/v1/deployments/{}/replicas", R, false, drv_h_replicas_list, NULL},
    {"GET", "/v1/deployments/{}/replicas/{}", R, false, drv_h_replica_get, NULL},
    {"GET", "/v1/deployments/{}/logs", R, false, drv_h_logs, NULL},
    /* checkpoints (h_checkpoints.c) */
    {"GET", "/v1/deployments/{}/checkpoints", R, false, drv_h_deployment_ckpts, NULL},
    {"GET", "/v1/checkpoints/{}", R, false, drv_h_ckpt_list, NULL},
    {"DELETE", "/v1/checkpoints/{}/{}", W, false, drv_h_ckpt_delete, NULL},
    {"GET", "/v1/events", R, false, drv_h_events, NULL},

    /* agents: authenticated by join token / node credential in the handler */
    {"POST", "/v1/agent/register", 0, false, drv_h_agent_register, NULL},
    {"POST", "/v1/agent/sync", 0, false, drv_h_agent_sync, NULL},
    {"POST", "/v1/agent/checkpoints/uploads", 0, false, drv_h_agent_ckpt_upload, NULL},
    {"PUT", "/v1/agent/checkpoints/uploads/{}/blobs/{}/chunks/{}", 0, false,
     drv_h_agent_ckpt_chunk, NULL},
    {"GET", "/v1/agent/checkpoints/{}", 0, false, drv_h_agent_ckpt_list, NULL},
    {"POST", "/v1/agent/checkpoints/{}", 0, false, drv_h_agent_ckpt_commit, NULL},
    {"GET", "/v1/agent/checkpoints/{}/{}", 0, false, drv_h_agent_ckpt_get, NULL},
    {"DELETE", "/v1/agent/checkpoints/{}/{}", 0, false, drv_h_agent_ckpt_delete, NULL},

    /* inference: the gateway (h_predict.c); metrics need a read-scoped token */
    {"POST", "/v1/deployments/{}/predict", P, false, drv_h_predict, NULL},
    {"POST", "/openai/v1/chat/completions", P, false, drv_h_openai, "/chat/completions"},
    {"POST", "/openai/v1/completions", P, false, drv_h_openai, "/completions"},
    {"GET", "/openai/v1/models", P, false, drv_h_openai_models, NULL},
    {"GET", "/openai/v1/models/{}", P, false, drv_h_openai_model, NULL},
    {"GET", "/metrics", R, false, drv_h_metrics, NULL},
    {"GET", "/v1/deployments/{}/metrics", R, false, drv_h_deployment_metrics, NULL},
    {"GET", "/v1/gateway/routes", DRV_SCOPE_GATEWAY, true, drv_h_gateway_routes, NULL},
    {"POST", "/v1/gateway/load", DRV_SCOPE_GATEWAY, true, drv_h_gateway_load, NULL},
};
#define N_ROUTES (sizeof routes / sizeof routes[0])

/* Match one pattern; captures point into path (segments are NUL-less
 * slices, so they are copied into req->params storage below). */
static bool match(const char *pattern, const char *path, char caps[][128], size_t *ncap)
{
    *ncap = 0;
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (p[0] == '{' && p[1] == '}') {
            const char *end = strchr(s, '/');
            size_t n = end ? (size_t)(end - s) : strlen(s);
            if (n == 0 || n >= 128 || *ncap >= DRV_MAX_PARAMS)
                return false;
            memcpy(caps[*ncap], s, n);
            caps[*ncap][n] = '\0';
            (*ncap)++;
            s += n;
            p += 2;
        } else if (*p == *s) {
            p++;
            s++;
        } else {
            return false;
        }
    }
    return *p == '\0' && *s == '\0';
}

static __thread char tl_caps[DRV_MAX_PARAMS][128];

const drv_route_t *drv_route_match(const char *method, const char *path, drv_req_t *req,
                                   bool *path_matched)
{
    *path_matched = false;
    char caps[DRV_MAX_PARAMS][128];
    size_t ncap;
    for (size_t i = 0; i < N_ROUTES; i++) {
        if (!match(routes[i].pattern, path, caps, &ncap))
            continue;
        *path_matched = true;
        if (strcmp(routes[i].method, method) != 0)
            continue;
        memcpy(tl_caps, caps, sizeof caps);
        for (size_t j = 0; j < ncap; j++)
            req->params[j] = tl_caps[j];
        req->n_params = ncap;
        req->route_arg = routes[i].arg;
        return &routes[i];
    }
    return NULL;
}

/* "GET, POST" for the Allow header of a 405. */
static void allowed_methods(const char *path, char *buf, size_t len)
{
    char caps[DRV_MAX_PARAMS][128];
    size_t ncap;
    buf[0] = '\0';
    for (size_t i = 0; i < N_ROUTES; i++) {
        if (match(routes[i].pattern, path, caps, &ncap) && !strstr(buf, routes[i].method)) {
            size_t n = strlen(buf);
            snprintf(buf + n, len - n, "%s%s", n ? ", " : "", routes[i].method);
        }
    }
}

static const char *scope_word(unsigned s)
{
    return s == DRV_SCOPE_READ      ? "read"
           : s == DRV_SCOPE_WRITE   ? "write"
           : s == DRV_SCOPE_GATEWAY ? "gateway"
                                    : "predict";
}

void drv_api_dispatch(drv_req_t *req, drv_resp_t *resp, const drv_principal_t *who,
                      int auth_status, const drv_error_t *auth_err)
{
    drv_error_t err;
    bool path_matched;
    resp->openai = drv_openai_path(req->path);   /* its errors in OpenAI's shape */
    if (strcmp(req->method, "OPTIONS") == 0) {    /* a browser's CORS preflight (api/cors.h) */
        drv_cors_preflight(req, resp);
        return;
    }
    if (drv_api_standby_answer(req, resp))         /* a standby head: the leader's URL */
        return;
    const drv_route_t *r = drv_route_match(req->method, req->path, req, &path_matched);
    if (!r) {
        if (path_matched) {
            char allow[64];
            allowed_methods(req->path, allow, sizeof allow);
            drv_err(&err, 405, "method_not_allowed", "",
                    "method %.16s is not allowed on %.200s (allowed: %s)", req->method,
                    req->path, allow);
            drv_resp_error(resp, &err);
            resp->header_name = "Allow";
            snprintf(resp->header_value, sizeof resp->header_value, "%s", allow);
            return;
        }
        drv_err(&err, 404, "not_found", "", "no such path: %.200s%s", req->path,
                strlen(req->path) > 200 ? "..." : "");
        drv_resp_error(resp, &err);
        return;
    }
    if (r->scope) {
        if (auth_status != 0) {
            drv_resp_error(resp, auth_err);
            return;
        }
        if (!(who->scopes & r->scope)) {
            drv_err(&err, 403, "permission_denied", "",
                    "this token's scope does not allow %s on %s (needs %s)", req->method,
                    req->path, scope_word(r->scope));
            drv_resp_error(resp, &err);
            return;
        }
        if (r->admin_only && !who->admin) {
            drv_err(&err, 403, "permission_denied", "", "only admins may %s %s", req->method,
                    req->path);
            drv_resp_error(resp, &err);
            return;
        }
        req->who = who;
    }
    resp->status = 0;
    r->handler(req, resp);
    if (resp->status == 0) {
        drv_err_internal(&err, "handler produced no answer");
        drv_resp_error(resp, &err);
    }
    /* the audit log: writes with a user's token (agents' and inference
     * calls are not writes of this kind), once a request: a held one's (a
     * long poll, an upload waiting for a standby: api/upload.h) at its end */
    if ((r->scope & DRV_SCOPE_WRITE) && r->scope != DRV_SCOPE_PREDICT && req->who &&
        strcmp(req->method, "GET") != 0 && (req->resumed || resp->hold_ms <= 0))
        drv_audit_add(req->head->audit, req->who->user, req->who->token_id, req->method,
                      req->path, resp->status, req->remote);
}
