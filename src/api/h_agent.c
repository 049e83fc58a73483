/* h_agent.c — the agents' side of the API (/v1/agent/…) and join tokens.
 *
 * Join tokens ("drvj_…", 256 random bits, only their SHA-256 kept, under a
 * nodepool, expiring: 1 h unless ttl_seconds says otherwise) let agents
 * register, each at most `uses` times (1 unless asked: a replayed or
 * shared one-use token joins one agent): the count is checked and consumed
 * under the state's write lock, in the same critical section that creates
 * the node, so racing agents cannot both spend the last use. Registering
 * mints a node credential ("drvn_…") that authenticates every later sync
 * (the agent keeps it in its data dir and uses it after a restart) and
 * nothing else, and for its own node only (a sync naming another: 403);
 * revoking the node (h_nodes.c) drops its hash. A sync reports the node's
 * observed state (soft: kept in memory only) and returns the node's
 * desired replica set with a version; when the agent already has the
 * current version, the request is held as a long poll until the set
 * changes or wait_ms passes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/agent_peers.h"
#include "api/auth.h"
#include "api/handlers.h"
#include "api/schema.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "state/head.h"
#include "state/events.h"
#include "state/jobs.h"
#include "state/nodes.h"
#include "state/state.h"
#include "state/timeline.h"
#include "store/store.h"

#define END {NULL, 0, false, 0, 0, NULL, NULL, NULL}

static uint64_t wait_for(drv_req_t *req, uint64_t seq)
{
    return seq > drv_store_committed(req->head->store) ? seq : 0;
}

/* --- join tokens ------------------------------------------------------------ */

static const drv_field_t jt_fields[] = {
    {"id", DRV_F_ID, false, 0, 0, NULL, NULL, NULL},
    {"description", DRV_F_STRING, false, 0, 256, NULL, NULL, "\"\""},
    {"ttl_seconds", DRV_F_INT, false, 60, 2592000, NULL, NULL, "3600"},
    {"uses", DRV_F_INT, false, 1, DRV_JOIN_USES_MAX, NULL, NULL, "1"},
    END,
};

static drv_obj_t *nodepool_of(drv_req_t *req, drv_error_t *err)
{
    char key[256];
    snprintf(key, sizeof key, "%s/%s/%s", req->who->user, req->params[0], req->params[1]);
    drv_obj_t *np = drv_state_get(req->head->state, DRV_K_NODEPOOL, key);
    if (!np)
        drv_err_not_found(err, "nodepool '%s/%s' not found", req->params[0], req->params[1]);
    return np;
}

int drv_h_jointoken_create(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    drv_error_t err;
    json_t *in = drv_req_json(req, &err);
    if (!in || drv_schema_validate(in, jt_fields, "", &err) < 0) {
        json_decref(in);
        drv_resp_error(resp, &err);
        return 0;
    }
    char id[64], secret[DRV_SECRET_MAX + 1], hash[65], key[320], exp[32];
    const char *given = drv_json_str(in, "id");
    if (given) {
        snprintf(id, sizeof id, "%s", given);
    } else {
        char hex[9];
        drv_random_hex(4, hex);
        snprintf(id, sizeof id, "join-%s", hex);
    }
    if (drv_secret_mint(DRV_JOIN_PREFIX, secret, hash, &err) < 0) {
        json_decref(in);
        drv_resp_error(resp, &err);
        return 0;
    }
    int64_t now = drv_now_ms() / 1000;
    drv_rfc3339(now + json_integer_value(json_object_get(in, "ttl_seconds")), exp, sizeof exp);
    drv_state_wrlock(st);
    drv_obj_t *np = nodepool_of(req, &err);
    snprintf(key, sizeof key, "%s/%s/%s/%s", req->who->user, req->params[0], req->params[1], id);
    if (np && drv_state_get(st, DRV_K_JOINTOKEN, key))
        np = NULL, drv_err_conflict(&err, "join token '%s' already exists", id);
    if (!np) {
        drv_state_unlock(st);
        json_decref(in);
        drv_resp_error(resp, &err);
        return 0;
    }
    json_t *spec = json_pack("{s:s, s:s, s:s, s:O, s:s, s:O, s:i}", "id", id, "cluster",
                             req->params[0], "nodepool", req->params[1], "description",
                             json_object_get(in, "description"), "expires_at", exp, "uses",
                             json_object_get(in, "uses"), "used", 0);
    drv_obj_t *t = drv_obj_new(DRV_K_JOINTOKEN, key, req->who->user, id, spec,
                               json_pack("{s:s}", "hash", hash));
    t->created_at = t->updated_at = now;
    t->rv = 1;
    uint64_t seq = drv_state_put(st, t);
    json_t *doc = json_loadb(t->rendered, t->rendered_len, 0, NULL);
    json_decref(in);   /* under the lock: the token's spec shares its description and uses */
    drv_state_unlock(st);
    json_object_set_new(doc, "secret", json_string(secret));
    if (req->head->cfg.tls_ca_hash[0])   /* the pin agents check before they send it */
        json_object_set_new(doc, "ca_hash", json_string(req->head->cfg.tls_ca_hash));
    drv_resp_json(resp, 201, doc);
    resp->wait_seq = wait_for(req, seq);
    return 0;
}

int drv_h_jointokens_list(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    drv_error_t err;
    char prefix[320];
    snprintf(prefix, sizeof prefix, "%s/%s/%s/", req->who->user, req->params[0], req->params[1]);
    json_t *items = json_array();
    drv_state_rdlock(st);
    drv_obj_t *np = nodepool_of(req, &err);
    for (size_t i = drv_state_lower_bound(st, DRV_K_JOINTOKEN, prefix);
         np && i < drv_state_count(st, DRV_K_JOINTOKEN); i++) {
        drv_obj_t *t = drv_state_at(st, DRV_K_JOINTOKEN, i);
        if (strncmp(t->key, prefix, strlen(prefix)) != 0)
            break;
        json_array_append_new(items, json_loadb(t->rendered, t->rendered_len, 0, NULL));
    }
    drv_state_unlock(st);
    if (!np) {
        json_decref(items);
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_resp_json(resp, 200, json_pack("{s:o}", "items", items));
    return 0;
}

int drv_h_jointoken_delete(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    drv_error_t err;
    char key[320];
    snprintf(key, sizeof key, "%s/%s/%s/%s", req->who->user, req->params[0], req->params[1],
             req->params[2]);
    drv_state_wrlock(st);
    drv_obj_t *t = drv_state_get(st, DRV_K_JOINTOKEN, key);
    if (!t) {
        drv_state_unlock(st);
        drv_err_not_found(&err, "join token '%s' not found", req->params[2]);
        drv_resp_error(resp, &err);
        return 0;
    }
    char *body = drv_strdup(t->rendered);
    uint64_t seq = drv_state_del(st, DRV_K_JOINTOKEN, key);
    drv_state_unlock(st);
    drv_resp_raw(resp, 200, "application/json", body, strlen(body));
    resp->wait_seq = wait_for(req, seq);
    return 0;
}

/* --- register ---------------------------------------------------------------- */

/* One use of join token t spent (t is replaced: do not use it after). */
static void spend_use(drv_state_t *st, const drv_obj_t *t)
{
    json_t *spec = json_deep_copy(t->spec);
    json_int_t used = json_integer_value(json_object_get(spec, "used"));
    json_object_set_new(spec, "used", json_integer(used + 1));
    drv_obj_t *t2 = drv_obj_new(DRV_K_JOINTOKEN, t->key, t->owner, t->id, spec,
                                json_incref(t->internal));
    t2->created_at = t->created_at;
    t2->updated_at = drv_now_ms() / 1000;
    t2->rv = t->rv + 1;
    drv_state_put(st, t2);
}

static const drv_field_t register_fields[] = {
    {"hostname", DRV_F_STRING, false, 0, 255, NULL, NULL, "\"\""},
    {"address", DRV_F_STRING, false, 0, 255, NULL, NULL, "\"\""},
    {"agent_version", DRV_F_STRING, false, 0, 64, NULL, NULL, "\"\""},
    END,
};

int drv_h_agent_register(drv_req_t *req, drv_resp_t *resp)
{
    drv_head_t *head = req->head;
    drv_state_t *st = head->state;
    drv_error_t err;
    char hash[65], secret[DRV_SECRET_MAX + 1];
    json_t *in = NULL;
    bool locked = false;
    const char *presented = drv_auth_secret(req->authorization, &err);
    if (!presented || drv_secret_hash(DRV_JOIN_PREFIX, presented, hash, &err) < 0)
        goto error;
    if (!(in = drv_req_json(req, &err)) || drv_schema_validate(in, register_fields, "", &err) < 0)
        goto error;
    drv_state_wrlock(st);
    locked = true;
    drv_obj_t *t = drv_state_by_hash(st, hash);
    if (!t || t->kind != DRV_K_JOINTOKEN || !drv_ct_equal(t->hash, hash, 64)) {
        drv_err(&err, 401, "unauthenticated", "",
                "unknown join token: it was never issued, or it was revoked");
        goto error;
    }
    int64_t exp = drv_parse_rfc3339(drv_json_str(t->spec, "expires_at"));
    if (exp >= 0 && exp <= drv_now_ms() / 1000) {
        drv_err(&err, 401, "unauthenticated", "", "join token '%s' expired at %s; ask for a "
                "new one with: drover nodepool join-token %s/%s", t->id,
                drv_json_str(t->spec, "expires_at"), drv_json_str(t->spec, "cluster"), drv_json_str(t->spec, "nodepool"));
        goto error;
    }
    /* tokens made before uses existed count as one-use */
    json_int_t uses = json_object_get(t->spec, "uses")
                          ? json_integer_value(json_object_get(t->spec, "uses")) : 1;
    json_int_t used = json_integer_value(json_object_get(t->spec, "used"));
    if (!drv_json_str(t->spec, "node") && used >= uses) {
        drv_err(&err, 401, "unauthenticated", "", "join token '%s' is used up: it allowed %lld "
                "join(s) and all were made (an agent that joined keeps its node credential); "
                "ask for a new one with: drover nodepool join-token %s/%s [--uses N]", t->id,
                (long long)uses, drv_json_str(t->spec, "cluster"), drv_json_str(t->spec, "nodepool"));
        goto error;
    }
    char npkey[256];
    snprintf(npkey, sizeof npkey, "%s/%s/%s", t->owner, drv_json_str(t->spec, "cluster"),
             drv_json_str(t->spec, "nodepool"));
    drv_obj_t *np = drv_state_get(st, DRV_K_NODEPOOL, npkey);
    if (!np) {
        drv_err(&err, 401, "unauthenticated", "", "the nodepool of join token '%s' no longer "
                "exists", t->id);
        goto error;
    }
    char ckey[192];
    snprintf(ckey, sizeof ckey, "%s/%s", t->owner, drv_json_str(t->spec, "cluster"));
    drv_obj_t *cl = drv_state_get(st, DRV_K_CLUSTER, ckey);
    uint64_t seq;
    drv_obj_t *n;
    json_t *internal;
    bool fresh = false;   /* a node made here (not a provisioned one's first join) */
    char tid[64];
    snprintf(tid, sizeof tid, "%s", t->id);
    if (drv_json_str(t->spec, "node")) {
        /* a provisioned node's boot token (head/cloud.c): the agent becomes
         * that node; the token is used up */
        char nkey[160], nhash[65];
        snprintf(nkey, sizeof nkey, "%s/%s", t->owner, drv_json_str(t->spec, "node"));
        n = drv_state_get(st, DRV_K_NODE, nkey);
        if (!n || json_is_true(json_object_get(n->spec, "registered")) ||
            json_is_true(json_object_get(n->spec, "terminating"))) {
            drv_err(&err, 401, "unauthenticated", "", "join token '%s' was for node '%s', "
                    "which has already joined or is gone", t->id, drv_json_str(t->spec, "node"));
            goto error;
        }
        if (drv_secret_mint(DRV_NODE_PREFIX, secret, nhash, &err) < 0)
            goto error;
        internal = json_pack("{s:s}", "hash", nhash);
        char tkey[320];
        snprintf(tkey, sizeof tkey, "%s", t->key);
        drv_state_del(st, DRV_K_JOINTOKEN, tkey);   /* t is gone now */
        t = NULL;
    } else {
        n = drv_node_create(head, np, cl ? drv_json_str(cl->spec, "provider") : "self-managed", NULL,
                            NULL, secret, &seq, &err);
        if (!n)
            goto error;
        internal = json_incref(n->internal);
        spend_use(st, t);   /* under the same lock as the checks above */
        t = NULL;
        fresh = true;
    }
    /* a registered node: mark it so and keep what it said about itself */
    json_t *spec = json_deep_copy(n->spec);
    json_object_set_new(spec, "registered", json_true());
    json_object_set(spec, "hostname", json_object_get(in, "hostname"));
    json_object_set_new(spec, "join_token", json_string(tid));
    drv_obj_t *n2 = drv_obj_new(DRV_K_NODE, n->key, n->owner, n->id, spec, internal);
    n2->created_at = n->created_at;
    n2->updated_at = fresh ? n->updated_at : drv_now_ms() / 1000;
    n2->rv = fresh ? 1 : n->rv + 1;
    seq = drv_state_put(st, n2);
    drv_node_render_status(st, n2);
    json_t *doc = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i}", "node_id", n2->id, "credential",
                            secret, "cluster", drv_json_str(spec, "cluster"), "nodepool",
                            drv_json_str(spec, "nodepool"), "heartbeat_ms", head->cfg.heartbeat_ms,
                            "node_timeout_ms", head->cfg.node_timeout_ms);
    drv_info("node %s/%s registered with join token '%s'", n2->owner, n2->id, tid);
    drv_events_add(head->events, n2->owner, "node", n2->id, "registered",
                   "joined nodepool %s/%s with join token '%s'", drv_json_str(spec, "cluster"),
                   drv_json_str(spec, "nodepool"), tid);
    json_decref(in);   /* under the lock: the node's spec shares its hostname */
    drv_state_unlock(st);
    drv_resp_json(resp, 201, doc);
    resp->wait_seq = wait_for(req, seq);
    drv_head_kick(head);
    return 0;
error:
    if (locked)
        drv_state_unlock(st);
    json_decref(in);
    drv_resp_error(resp, &err);
    return 0;
}

/* --- sync ------------------------------------------------------------------ */

static const char *const rstates[] = {"starting", "ready", "backoff", "failed", "terminating",
                                      "fetching", "pulling", "waiting", NULL};

/* storage layer: a replica's artifact fetch, and the node cache */
static const drv_field_t report_fetch_fields[] = {
    {"artifact", DRV_F_STRING, true, 64, 64, NULL, NULL, NULL},
    {"bytes", DRV_F_INT, true, 0, 9.2e18, NULL, NULL, NULL},
    {"total", DRV_F_INT, true, 0, 9.2e18, NULL, NULL, NULL},
    {"seconds", DRV_F_NUMBER, true, 0, 1e9, NULL, NULL, NULL},
    {"rate_bytes_per_s", DRV_F_INT, false, 0, 9.2e18, NULL, NULL, NULL},
    {"eta_seconds", DRV_F_INT, false, 0, 9.2e18, NULL, NULL, NULL},
    END,
};

static const drv_field_t report_cached_fields[] = {
    {"digest", DRV_F_STRING, true, 64, 64, NULL, NULL, NULL},
    {"bytes", DRV_F_INT, true, 0, 9.2e18, NULL, NULL, NULL},
    END,
};

static const char *const pfstates[] = {"fetching", "ready", "failed", "evicted", NULL};

static const drv_field_t report_prefetch_fields[] = {
    {"artifact", DRV_F_STRING, true, 1, 128, NULL, NULL, NULL},
    {"digest", DRV_F_STRING, true, 64, 64, NULL, NULL, NULL},
    {"state", DRV_F_ENUM, true, 0, 0, pfstates, NULL, NULL},
    {"bytes", DRV_F_INT, true, 0, 9.2e18, NULL, NULL, NULL},
    {"total", DRV_F_INT, true, 0, 9.2e18, NULL, NULL, NULL},
    {"error", DRV_F_STRING, false, 0, 512, NULL, NULL, NULL},
    END,
};

static const drv_field_t report_cache_fields[] = {
    {"held_bytes", DRV_F_INT, true, 0, 9.2e18, NULL, NULL, NULL},
    {"max_bytes", DRV_F_INT, true, 0, 9.2e18, NULL, NULL, NULL},
    {"blobs", DRV_F_INT, true, 0, 1e9, NULL, NULL, NULL},
    {"artifacts", DRV_F_OBJLIST, true, 0, 4096, NULL, report_cached_fields, NULL},
    {"peer_url", DRV_F_STRING, false, 8, 255, NULL, NULL, NULL},   /* its cache server */
    {"prefetch", DRV_F_OBJLIST, false, 0, 64, NULL, report_prefetch_fields, NULL},
    END,
};

/* isolation on the node (agent/isolate.h): per limit enforced or not and why */
static const drv_field_t report_iso_limit_fields[] = {
    {"enforced", DRV_F_BOOL, true, 0, 0, NULL, NULL, NULL},
    {"value", DRV_F_STRING, false, 0, 128, NULL, NULL, NULL},
    {"file", DRV_F_STRING, false, 0, 512, NULL, NULL, NULL},
    {"path", DRV_F_STRING, false, 0, 4300, NULL, NULL, NULL},
    {"reason", DRV_F_STRING, false, 0, 512, NULL, NULL, NULL},
    END,
};

static const drv_field_t report_iso_fields[] = {
    {"cgroup", DRV_F_STRING, false, 0, 512, NULL, NULL, NULL},
    {"memory", DRV_F_OBJECT, true, 0, 0, NULL, report_iso_limit_fields, NULL},
    {"cpu", DRV_F_OBJECT, true, 0, 0, NULL, report_iso_limit_fields, NULL},
    {"pids", DRV_F_OBJECT, true, 0, 0, NULL, report_iso_limit_fields, NULL},
    {"user", DRV_F_OBJECT, true, 0, 0, NULL, report_iso_limit_fields, NULL},
    {"workdir", DRV_F_OBJECT, true, 0, 0, NULL, report_iso_limit_fields, NULL},
    END,
};

static const drv_field_t report_load_fields[] = {   /* agent/llm_metrics.h */
    {"running", DRV_F_NUMBER, true, 0, 1e9, NULL, NULL, NULL},
    {"waiting", DRV_F_NUMBER, true, 0, 1e9, NULL, NULL, NULL},
    {"kv_cache", DRV_F_NUMBER, false, 0, 1, NULL, NULL, NULL},
    END,
};

static const drv_field_t report_replica_fields[] = {
    {"id", DRV_F_STRING, true, 1, 160, NULL, NULL, NULL},
    {"deployment", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"state", DRV_F_ENUM, true, 0, 0, rstates, NULL, NULL},
    {"endpoint", DRV_F_STRING, false, 0, 255, NULL, NULL, NULL},
    {"pid", DRV_F_INT, false, 0, 1e9, NULL, NULL, NULL},
    {"restarts", DRV_F_INT, false, 0, 1e9, NULL, NULL, "0"},
    {"last_exit", DRV_F_STRING, false, 0, 255, NULL, NULL, NULL},
    {"reason", DRV_F_STRING, false, 0, 512, NULL, NULL, NULL},
    {"log_tail", DRV_F_STRING, false, 0, 8192, NULL, NULL, NULL},
    {"enforcement", DRV_F_STRMAP, false, 0, 16, NULL, NULL, NULL},
    {"fetch", DRV_F_OBJECT, false, 0, 0, NULL, report_fetch_fields, NULL},
    {"isolation", DRV_F_OBJECT, false, 0, 0, NULL, report_iso_fields, NULL},
    {"oom_kills", DRV_F_INT, false, 0, 1e9, NULL, NULL, NULL},
    {"load", DRV_F_OBJECT, false, 0, 0, NULL, report_load_fields, NULL},   /* LLM-aware load */
    END,
};

static const char *const istates[] = {"pulling", "ready", "failed", NULL};

static const drv_field_t report_image_fields[] = {   /* agent/prepull.h */
    {"image", DRV_F_STRING, true, 1, 512, NULL, NULL, NULL},
    {"state", DRV_F_ENUM, true, 0, 0, istates, NULL, NULL},
    {"error", DRV_F_STRING, false, 0, 512, NULL, NULL, NULL},
    END,
};

static const drv_field_t report_ctr_fields[] = {   /* containers: the node's engine */
    {"engine", DRV_F_STRING, true, 1, 16, NULL, NULL, NULL},   /* "podman" | "docker" | "none" */
    {"version", DRV_F_STRING, false, 0, 64, NULL, NULL, NULL},
    {"reason", DRV_F_STRING, false, 0, 512, NULL, NULL, NULL},
    {"images", DRV_F_OBJLIST, false, 0, 64, NULL, report_image_fields, NULL},   /* prefetch */
    END,
};

/* training jobs' workers (state/jobs.c): run once, no health check */
static const char *const wstates[] = {"starting", "ready", "failed", "succeeded", "terminating",
                                      "fetching", "backoff", "waiting", NULL};

static const drv_field_t report_worker_fields[] = {
    {"id", DRV_F_STRING, true, 1, 160, NULL, NULL, NULL},
    {"job", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"state", DRV_F_ENUM, true, 0, 0, wstates, NULL, NULL},
    {"pid", DRV_F_INT, false, 0, 1e9, NULL, NULL, NULL},
    {"restarts", DRV_F_INT, false, 0, 1e9, NULL, NULL, "0"},
    {"last_exit", DRV_F_STRING, false, 0, 255, NULL, NULL, NULL},
    {"reason", DRV_F_STRING, false, 0, 512, NULL, NULL, NULL},
    {"log_tail", DRV_F_STRING, false, 0, 8192, NULL, NULL, NULL},
    {"enforcement", DRV_F_STRMAP, false, 0, 16, NULL, NULL, NULL},
    {"isolation", DRV_F_OBJECT, false, 0, 0, NULL, report_iso_fields, NULL},
    {"oom_kills", DRV_F_INT, false, 0, 1e9, NULL, NULL, NULL},
    END,
};

static const drv_field_t sync_fields[] = {
    {"version", DRV_F_INT, false, 0, 9.2e18, NULL, NULL, "0"},
    {"node", DRV_F_STRING, false, 1, 64, NULL, NULL, NULL},   /* the id it knows itself by */
    {"wait_ms", DRV_F_INT, false, 0, 60000, NULL, NULL, "0"},
    {"hostname", DRV_F_STRING, false, 0, 255, NULL, NULL, NULL},
    {"address", DRV_F_STRING, false, 0, 255, NULL, NULL, NULL},
    {"agent_version", DRV_F_STRING, false, 0, 64, NULL, NULL, NULL},
    {"cpus", DRV_F_INT, false, 0, 100000, NULL, NULL, NULL},
    {"memory_mib", DRV_F_INT, false, 0, 1e9, NULL, NULL, NULL},
    {"gpu_source", DRV_F_STRING, false, 0, 32, NULL, NULL, NULL},
    {"gpus", DRV_F_ARRAY, false, 0, 64, NULL, NULL, NULL},   /* checked below */
    {"replicas", DRV_F_OBJLIST, false, 0, 4096, NULL, report_replica_fields, "[]"},
    {"workers", DRV_F_OBJLIST, false, 0, 4096, NULL, report_worker_fields, "[]"},
    {"logs", DRV_F_STRMAP, false, 0, 4, NULL, NULL, NULL},
    {"cache", DRV_F_OBJECT, false, 0, 0, NULL, report_cache_fields, NULL},
    {"container_runtime", DRV_F_OBJECT, false, 0, 0, NULL, report_ctr_fields, NULL},
    {"manifest_refs", DRV_F_BOOL, false, 0, 0, NULL, NULL, NULL},   /* see share_manifests */
    END,
};

/* GPUs come from NVML or a declaration: check what the scheduler relies on. */
static int check_gpus(json_t *gpus, drv_error_t *err)
{
    size_t i;
    json_t *g;
    json_array_foreach(gpus, i, g) {
        char f[64];
        snprintf(f, sizeof f, "gpus[%zu]", i);
        if (!json_is_object(g) || !json_is_integer(json_object_get(g, "index")) ||
            !json_is_string(json_object_get(g, "uuid")) ||
            !json_is_string(json_object_get(g, "name")) ||
            !json_is_integer(json_object_get(g, "memory_mib")) ||
            json_integer_value(json_object_get(g, "memory_mib")) < 0 ||
            !json_is_boolean(json_object_get(g, "healthy")))
            return drv_err_invalid(err, f, "%s needs index, uuid, name, memory_mib and healthy", f);
    }
    return 0;
}

/* Fold one reported replica into the replica object's status; true when
 * it changed (the controller then recounts ready replicas). */
static bool absorb_replica(drv_head_t *head, const drv_obj_t *node, json_t *rep)
{
    drv_state_t *st = head->state;
    char key[320];
    snprintf(key, sizeof key, "%s/%s/%s", node->owner, drv_json_str(rep, "deployment"), drv_json_str(rep, "id"));
    drv_obj_t *r = drv_state_get(st, DRV_K_REPLICA, key);
    if (!r || !drv_json_str(r->spec, "node") || strcmp(drv_json_str(r->spec, "node"), node->id) != 0)
        return false;   /* stale: not (or no longer) this node's; the agent stops it */
    json_t *s = json_deep_copy(rep);
    json_object_del(s, "id");
    json_object_del(s, "deployment");
    json_object_set_new(s, "node", json_string(node->id));
    drv_timeline_carry(r->status, s);   /* the cold start's stamps (state/timeline.h) */
    drv_timeline_observe(s, drv_now_ms());
    if (json_equal(s, r->status)) {
        json_decref(s);
        return false;
    }
    const char *was = drv_json_str(r->status, "state"), *now = drv_json_str(s, "state");
    if (now && strcmp(now, "failed") == 0 && (!was || strcmp(was, "failed") != 0))
        drv_events_add(head->events, r->owner, "deployment", drv_json_str(rep, "deployment"),
                       "replica_failed", "replica %s on node %s: %s", r->id, node->id,
                       drv_json_str(s, "reason") ? drv_json_str(s, "reason") : "no reason given");
    json_int_t ooms = json_integer_value(json_object_get(s, "oom_kills"));
    if (ooms > json_integer_value(json_object_get(r->status, "oom_kills")))
        drv_events_add(head->events, r->owner, "deployment", drv_json_str(rep, "deployment"),
                       "oom_killed", "replica %s on node %s: %s", r->id, node->id,
                       drv_json_str(s, "last_exit") ? drv_json_str(s, "last_exit") : "killed by the OOM killer");
    drv_state_set_status(st, r, s);
    return true;
}

/* GPU shares: tell the agent which desired replicas belong to a deployment
 * asking for strict isolation (it refuses to start those whose share it
 * cannot enforce). The reported "enforcement" map of each replica is kept
 * in its status by absorb_replica, like every reported field. */
static json_t *mark_strict(drv_state_t *st, const drv_obj_t *node, json_t *set)
{
    size_t i;
    json_t *d;
    json_array_foreach(set, i, d) {
        char key[320];
        const char *dep_id = drv_json_str(d, "deployment");
        snprintf(key, sizeof key, "%s/%s", node->owner, dep_id ? dep_id : "");
        drv_obj_t *dep = drv_state_get(st, DRV_K_DEPLOYMENT, key);
        if (dep && json_is_true(json_object_get(dep->spec, "strict_isolation")))
            json_object_set_new(d, "strict_isolation", json_true());
    }
    return set;
}

/* Storage layer: each distinct manifest once per answer. A desired set
 * carries a replica's artifact manifest per replica (and a prefetch entry
 * its own), so N replicas of one model would repeat it N times. To an
 * agent that says manifest_refs, the answer carries "manifests": {DIGEST:
 * manifest} and each artifact (or prefetch entry) "manifest_digest"
 * instead of "manifest"; the agent puts them back before it reads the set. */
static void share_manifests(json_t *doc)
{
    static const char *const lists[] = {"replicas", "prefetch", NULL};
    json_t *all = json_object();
    for (int l = 0; lists[l]; l++) {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(doc, lists[l]), i, e) {
            json_t *holder = l == 0 ? json_object_get(e, "artifact") : e;
            json_t *man = json_object_get(holder, "manifest");
            const char *dg = drv_json_str(man, "digest");
            if (!json_is_object(man) || !dg || strlen(dg) != 64)
                continue;
            if (!json_object_get(all, dg))
                json_object_set(all, dg, man);
            json_object_set_new(holder, "manifest_digest", json_string(dg));
            json_object_del(holder, "manifest");
        }
    }
    if (json_object_size(all))
        json_object_set_new(doc, "manifests", all);
    else
        json_decref(all);
}

int drv_h_agent_sync(drv_req_t *req, drv_resp_t *resp)
{
    drv_head_t *head = req->head;
    drv_state_t *st = head->state;
    drv_error_t err;
    char hash[65];
    json_t *in = NULL;
    const char *presented = drv_auth_secret(req->authorization, &err);
    if (!presented || drv_secret_hash(DRV_NODE_PREFIX, presented, hash, &err) < 0)
        goto error;
    if (!(in = drv_req_json(req, &err)) || drv_schema_validate(in, sync_fields, "", &err) < 0 ||
        check_gpus(json_object_get(in, "gpus"), &err) < 0)
        goto error;
    uint64_t known = (uint64_t)json_integer_value(json_object_get(in, "version"));
    int wait_ms = (int)json_integer_value(json_object_get(in, "wait_ms"));

    drv_state_wrlock(st);
    drv_obj_t *n = drv_state_by_hash(st, hash);
    if (!n || n->kind != DRV_K_NODE || !drv_ct_equal(n->hash, hash, 64)) {
        drv_auth_node_refused(st, hash, &err);
        drv_state_unlock(st);
        goto error;
    }
    const char *named = drv_json_str(in, "node");
    if (named && strcmp(named, n->id) != 0) {   /* a credential speaks for its own node only */
        drv_err(&err, 403, "permission_denied", "node", "this node credential is node '%s''s, "
                "not node '%.64s''s: a node credential works only for its own node", n->id,
                named);
        drv_state_unlock(st);
        goto error;
    }
    /* a node loaded from the store that syncs before the controller's first
     * pass has no version of this boot yet: 0 is what an agent with no set
     * (a restarted one) sends, so it would never get its set */
    if (n->soft.version == 0)
        n->soft.version = head->version_base;
    if (!req->resumed) {
        /* a report: the node is alive; keep what it observed */
        bool was_ready = n->soft.node_state == DRV_NODE_READY;
        n->soft.seen_ms = drv_mono_ms();
        n->soft.node_state = DRV_NODE_READY;
        static const char *const keep[] = {"hostname", "address", "agent_version", "cpus",
                                           "memory_mib", "gpu_source", "gpus", "cache",
                                           "container_runtime", NULL};
        /* re-render the node (the costly part of a sync, under the lock) only
         * when what it reports changed, or every 5 s for last_sync */
        const char *shown = drv_json_str(n->status, "state");
        bool same = n->status && drv_mono_ms() - n->soft.status_ms < 5000 && shown &&
                    strcmp(shown, drv_node_state_name(n)) == 0;
        for (size_t i = 0; same && keep[i]; i++)
            same = !json_object_get(in, keep[i]) ||
                   json_equal(json_object_get(in, keep[i]), json_object_get(n->status, keep[i]));
        const json_t *logs = json_object_get(in, "logs");
        if (logs)
            snprintf(n->soft.aux, sizeof n->soft.aux, "%s %s", drv_json_str(logs, "url") ? drv_json_str(logs, "url") : "",
                     drv_json_str(logs, "key") ? drv_json_str(logs, "key") : "");
        if (!same) {
            drv_peer_prefetch_events(head, n, json_object_get(n->status, "cache"),
                                     json_object_get(in, "cache"));
            drv_peer_image_events(head, n, json_object_get(n->status, "container_runtime"),
                                  json_object_get(in, "container_runtime"));
            json_t *s = n->status ? json_deep_copy(n->status) : json_object();
            for (size_t i = 0; keep[i]; i++)
                if (json_object_get(in, keep[i]))
                    json_object_set(s, keep[i], json_object_get(in, keep[i]));
            char ts[32];
            drv_rfc3339(drv_now_ms() / 1000, ts, sizeof ts);
            json_object_set_new(s, "last_sync", json_string(ts));
            json_object_set_new(s, "state", json_string(drv_node_state_name(n)));
            drv_state_set_status(st, n, s);
            n->soft.status_ms = drv_mono_ms();
        }
        size_t i;
        json_t *rep;
        bool changed = false;
        json_array_foreach(json_object_get(in, "replicas"), i, rep) changed |=
            absorb_replica(head, n, rep);
        json_array_foreach(json_object_get(in, "workers"), i, rep) changed |=
            drv_job_absorb_worker(head, n, rep);
        changed |= drv_jobs_stopping_report(head, n, json_object_get(in, "workers"));
        if (!was_ready) {
            drv_info("node %s/%s is ready", n->owner, n->id);
            drv_events_add(head->events, n->owner, "node", n->id, "ready",
                           "its agent syncs");
        }
        if (!was_ready || changed)
            drv_head_kick(head);
    }
    if (known == n->soft.version && wait_ms > 0 && !req->resumed) {
        resp->hold_ms = wait_ms;
        resp->hold_key = drv_key_hash(n->key);
        resp->status = 204;   /* placeholder: replaced when the hold ends */
        json_decref(in);   /* under the lock: see below */
        drv_state_unlock(st);
        return 0;
    }
    json_t *doc = json_pack("{s:s, s:I, s:i, s:i, s:i, s:b}", "node", n->id, "version",
                            (json_int_t)n->soft.version, "heartbeat_ms", head->cfg.heartbeat_ms,
                            "node_timeout_ms", head->cfg.node_timeout_ms,
                            "job_lease_grace_ms", DRV_JOB_LEASE_GRACE_MS, "drain",
                            json_is_true(json_object_get(n->spec, "draining")));
    if (known != n->soft.version) {
        json_t *set = mark_strict(st, n, drv_node_desired(head, n));
        drv_peer_annotate(st, n, set);   /* storage layer: peers, prefetch */
        json_object_set_new(doc, "replicas", set);
        json_t *pf = drv_peer_prefetch(st, n);
        if (pf)
            json_object_set_new(doc, "prefetch", pf);
        json_t *ipf = drv_peer_image_prefetch(st, n);   /* containers: the images too */
        if (ipf)
            json_object_set_new(doc, "image_prefetch", ipf);
        if (json_is_true(json_object_get(in, "manifest_refs")))
            share_manifests(doc);
    }
    if (drv_json_str(n->spec, "cluster"))
        json_object_set_new(doc, "peer",
                            drv_peer_tokens(n->owner, drv_json_str(n->spec, "cluster"), drv_now_ms() / 1000));
    /* under the lock: the node's status and its jobs' shares parts of in
     * (gpus, cache, a worker's reason or isolation), and another thread may
     * drop them from there; the last reference is then in's, and it must go
     * in the same order as the state's reads of them (jansson's decrement
     * does not order the free after those reads: ThreadSanitizer, t/jobs) */
    json_decref(in);
    drv_state_unlock(st);
    /* the answer shares parts of specs (a model's, an artifact's manifest):
     * dumped here, outside the lock (they are never changed in place, only
     * replaced), and dropped under it, for the same reason as in */
    size_t len;
    char *body = drv_json_dump(doc, &len);
    drv_state_rdlock(st);
    json_decref(doc);
    drv_state_unlock(st);
    drv_resp_raw(resp, 200, "application/json", body, len);
    return 0;
error:
    json_decref(in);
    drv_resp_error(resp, &err);
    return 0;
}
