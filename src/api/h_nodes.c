/* h_nodes.c — nodes and replicas as users see them: list/get nodes,
 * cordon/uncordon/drain/delete/revoke, list/get replicas. Nodes and replicas are
 * made by the controller and the agents, never created through these. */
#include <stdio.h>
#include <string.h>

#include "api/handlers.h"
#include "api/list.h"
#include "common/util.h"
#include "state/events.h"
#include "state/head.h"
#include "state/nodes.h"
#include "state/state.h"
#include "store/store.h"
#include "common/json.h"

typedef struct node_filter {
    const char *cluster, *nodepool;
} node_filter_t;

static bool node_match(const drv_obj_t *o, void *ctx)
{
    node_filter_t *f = ctx;
    return (!f->cluster || strcmp(drv_json_str(o->spec, "cluster"), f->cluster) == 0) &&
           (!f->nodepool || strcmp(drv_json_str(o->spec, "nodepool"), f->nodepool) == 0);
}

int drv_h_nodes_list(drv_req_t *req, drv_resp_t *resp)
{
    static const char *const allowed[] = {"limit", "page_token", "all_users", "cluster",
                                          "nodepool", NULL};
    char prefix[96];
    if (drv_list_scope(req, resp, allowed, "nodes", prefix, sizeof prefix) < 0)
        return 0;
    node_filter_t f = {drv_req_query(req, "cluster"), drv_req_query(req, "nodepool")};
    return drv_list_prefix(req, resp, DRV_K_NODE, prefix, node_match, &f);
}

static void send_obj(drv_resp_t *resp, const drv_obj_t *o)
{
    char *body = drv_strdup(o->rendered);
    drv_resp_raw(resp, 200, "application/json", body, o->rendered_len);
    resp->etag = o->rv;
}

int drv_h_node_get(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    char key[160];
    snprintf(key, sizeof key, "%s/%s", req->who->user, req->params[0]);
    drv_state_rdlock(req->head->state);
    drv_obj_t *n = drv_state_get(req->head->state, DRV_K_NODE, key);
    if (n)
        send_obj(resp, n);
    drv_state_unlock(req->head->state);
    if (!n) {
        drv_err_not_found(&err, "node '%s' not found", req->params[0]);
        drv_resp_error(resp, &err);
    }
    return 0;
}

/* The caller's node of the path under the state's write lock, or NULL
 * (unlocked, 404 answered). */
/* The node a write names, under the write lock (unlocked and answered on
 * NULL): the caller's own; for an admin also another user's — `?user=U`
 * names the owner, without it a node id only one other user has is taken
 * (several: 409, asking for ?user=). A member naming another user: 403. */
static drv_obj_t *wrlock_node(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    char key[160];
    const char *user = drv_req_query(req, "user");
    if (user && strcmp(user, req->who->user) != 0 && !req->who->admin) {
        drv_err(&err, 403, "permission_denied", "user", "only admins may act on another "
                "user's nodes");
        drv_resp_error(resp, &err);
        return NULL;
    }
    snprintf(key, sizeof key, "%s/%s", user ? user : req->who->user, req->params[0]);
    drv_state_wrlock(req->head->state);
    drv_obj_t *n = drv_state_get(req->head->state, DRV_K_NODE, key);
    if (!n && !user && req->who->admin) {   /* another user's node with that id */
        size_t count = drv_state_count(req->head->state, DRV_K_NODE), found = 0;
        for (size_t i = 0; i < count; i++) {
            drv_obj_t *o = drv_state_at(req->head->state, DRV_K_NODE, i);
            if (o && strcmp(o->id, req->params[0]) == 0 && found++ == 0)
                n = o;
        }
        if (found > 1) {
            drv_state_unlock(req->head->state);
            drv_err_conflict(&err, "%zu users have a node '%s': name its "
                    "owner with ?user=USER", found, req->params[0]);
            drv_resp_error(resp, &err);
            return NULL;
        }
    }
    if (!n) {
        drv_state_unlock(req->head->state);
        drv_err_not_found(&err, "node '%s' not found", req->params[0]);
        drv_resp_error(resp, &err);
    }
    return n;
}

/* Set spec flags of a node (durably) and tell its agent. */
static int set_flags(drv_req_t *req, drv_resp_t *resp, const char *const *names,
                     const bool *values, size_t n)
{
    drv_head_t *head = req->head;
    drv_obj_t *old = wrlock_node(req, resp);
    if (!old)
        return 0;
    uint64_t seq;
    drv_obj_t *o = drv_node_set_flags(head->state, old, names, values, n, &seq);
    if (o != old)
        drv_node_touch(head, o);
    send_obj(resp, o);
    drv_state_unlock(head->state);
    resp->wait_seq = seq > drv_store_committed(head->store) ? seq : 0;
    drv_head_kick(head);
    return 0;
}

int drv_h_node_cordon(drv_req_t *req, drv_resp_t *resp)
{
    static const char *const f[] = {"cordoned"};
    static const bool v[] = {true};
    return set_flags(req, resp, f, v, 1);
}

int drv_h_node_uncordon(drv_req_t *req, drv_resp_t *resp)
{
    static const char *const f[] = {"cordoned", "draining"};
    static const bool v[] = {false, false};
    return set_flags(req, resp, f, v, 2);
}

int drv_h_node_drain(drv_req_t *req, drv_resp_t *resp)
{
    static const char *const f[] = {"cordoned", "draining"};
    static const bool v[] = {true, true};
    return set_flags(req, resp, f, v, 2);
}

int drv_h_node_delete(drv_req_t *req, drv_resp_t *resp)
{
    /* the controller finishes the job: replicas go, the provider releases
     * the machine (a local agent is stopped), then the record goes */
    static const char *const f[] = {"cordoned", "terminating"};
    static const bool v[] = {true, true};
    return set_flags(req, resp, f, v, 2);
}

/* Revoke a node's credential: its hash leaves the index (internal.hash
 * becomes internal.revoked_hash, kept so that a refusal can say why), so
 * the agent is refused at its next call; the node is cordoned and, with no
 * more syncs, goes not_ready then lost like a dead node. Idempotent. */
int drv_h_node_revoke(drv_req_t *req, drv_resp_t *resp)
{
    drv_head_t *head = req->head;
    char ts[32];
    drv_obj_t *n = wrlock_node(req, resp);
    if (!n)
        return 0;
    uint64_t seq = 0;
    if (!json_is_true(json_object_get(n->spec, "revoked"))) {
        json_t *spec = json_deep_copy(n->spec);
        drv_rfc3339(drv_now_ms() / 1000, ts, sizeof ts);
        json_object_set_new(spec, "revoked", json_true());
        json_object_set_new(spec, "revoked_at", json_string(ts));
        json_object_set_new(spec, "cordoned", json_true());
        json_t *internal = n->internal ? json_deep_copy(n->internal) : json_object();
        if (json_object_get(internal, "hash")) {
            json_object_set(internal, "revoked_hash", json_object_get(internal, "hash"));
            json_object_del(internal, "hash");
        }
        drv_obj_t *o = drv_obj_new(DRV_K_NODE, n->key, n->owner, n->id, spec, internal);
        o->created_at = n->created_at;
        o->updated_at = drv_now_ms() / 1000;
        o->rv = n->rv + 1;
        seq = drv_state_put(head->state, o);
        drv_node_render_status(head->state, o);
        drv_node_touch(head, o);   /* a held long poll ends: the agent hears at once */
        drv_events_add(head->events, o->owner, "node", o->id, "revoked",
                       "its credential was revoked by %s", req->who->user);
        n = o;
    }
    send_obj(resp, n);
    drv_state_unlock(head->state);
    resp->wait_seq = seq > drv_store_committed(head->store) ? seq : 0;
    drv_head_kick(head);
    return 0;
}

typedef struct replica_filter {
    const char *deployment, *node, *cluster;
    drv_state_t *st;   /* read-locked by drv_list_prefix while it filters */
} replica_filter_t;

/* Placed on a node of the cluster (a pending replica is on none). */
static bool replica_in_cluster(drv_state_t *st, const drv_obj_t *r, const char *cluster)
{
    const drv_obj_t *n = drv_replica_node(st, r);
    const char *c = n ? drv_json_str(n->spec, "cluster") : NULL;
    return c && strcmp(c, cluster) == 0;
}

static bool replica_match(const drv_obj_t *o, void *ctx)
{
    replica_filter_t *f = ctx;
    const char *node = drv_json_str(o->spec, "node");
    return (!f->deployment || strcmp(drv_json_str(o->spec, "deployment"), f->deployment) == 0) &&
           (!f->node || (node && strcmp(node, f->node) == 0)) &&
           (!f->cluster || replica_in_cluster(f->st, o, f->cluster));
}

int drv_h_replicas_list(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    static const char *const allowed[] = {"limit", "page_token", "node", "deployment",
                                          "cluster", NULL};
    if (drv_req_check_query(req, allowed, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    char prefix[192];
    replica_filter_t f = {drv_req_query(req, "deployment"), drv_req_query(req, "node"),
                          drv_req_query(req, "cluster"), req->head->state};
    if (req->n_params == 1) {   /* /v1/deployments/{d}/replicas */
        char dkey[160];
        snprintf(dkey, sizeof dkey, "%s/%s", req->who->user, req->params[0]);
        drv_state_rdlock(req->head->state);
        bool exists = drv_state_get(req->head->state, DRV_K_DEPLOYMENT, dkey) != NULL;
        drv_state_unlock(req->head->state);
        if (!exists) {
            drv_err_not_found(&err, "deployment '%s' not found", req->params[0]);
            drv_resp_error(resp, &err);
            return 0;
        }
        snprintf(prefix, sizeof prefix, "%s/%s/", req->who->user, req->params[0]);
    } else {
        snprintf(prefix, sizeof prefix, "%s/", req->who->user);
    }
    return drv_list_prefix(req, resp, DRV_K_REPLICA, prefix, replica_match, &f);
}

int drv_h_replica_get(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    char key[320];
    snprintf(key, sizeof key, "%s/%s/%s", req->who->user, req->params[0], req->params[1]);
    drv_state_rdlock(req->head->state);
    drv_obj_t *r = drv_state_get(req->head->state, DRV_K_REPLICA, key);
    if (r)
        send_obj(resp, r);
    drv_state_unlock(req->head->state);
    if (!r) {
        drv_err_not_found(&err, "replica '%s' not found", req->params[1]);
        drv_resp_error(resp, &err);
    }
    return 0;
}
