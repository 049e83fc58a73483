/* cloud.c — see cloud.h. */
#include "head/cloud.h"

#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "common/secret.h"
#include "common/util.h"
#include "head/scaling.h"
#include "state/events.h"
#include "state/nodes.h"
#include "common/json.h"

static void put(char *dst, size_t len, const char *v)
{
    snprintf(dst, len, "%s", v ? v : "");
}

int drv_cloud_settings_of(drv_head_t *head, const drv_obj_t *cl, const drv_obj_t *np,
                          drv_cloud_settings_t *out, drv_error_t *err)
{
    memset(out, 0, sizeof *out);
    const char *region = drv_json_str(cl->spec, "region"), *ep = drv_json_str(cl->spec, "endpoint");
    const char *prov = drv_json_str(cl->spec, "provider");
    bool gcp = prov && strcmp(prov, "gcp") == 0, vultr = prov && strcmp(prov, "vultr") == 0;
    bool oracle = prov && strcmp(prov, "oracle") == 0;
    put(out->region, sizeof out->region, region);
    if (ep)
        put(out->endpoint, sizeof out->endpoint, ep);
    else if (gcp)
        put(out->endpoint, sizeof out->endpoint, "https://compute.googleapis.com/compute/v1");
    else if (vultr)
        put(out->endpoint, sizeof out->endpoint, "https://api.vultr.com/v2");
    else if (oracle)
        snprintf(out->endpoint, sizeof out->endpoint, "https://iaas.%s.oraclecloud.com", region);
    else
        snprintf(out->endpoint, sizeof out->endpoint, "https://ec2.%s.amazonaws.com", region);
    if (prov && strcmp(prov, "slurm") == 0) {
        /* no credential: droverd runs the Slurm commands as its own user */
        out->endpoint[0] = '\0';
        put(out->slurm_conf, sizeof out->slurm_conf, drv_json_str(cl->spec, "slurm_conf"));
        const json_t *sl = np ? json_object_get(np->spec, "slurm") : NULL;
        put(out->partition, sizeof out->partition, drv_json_str(sl, "partition"));
        put(out->account, sizeof out->account, drv_json_str(sl, "account"));
        put(out->time_limit, sizeof out->time_limit, drv_json_str(sl, "time_limit"));
        goto common;
    }
    size_t el = strlen(out->endpoint);
    while ((gcp || vultr || oracle) && el > 0 && out->endpoint[el - 1] == '/')
        out->endpoint[--el] = '\0';
    char key[192];
    if (!drv_json_str(cl->spec, "credential"))
        return drv_err_unprocessable(err, "credential", "cluster '%s' has no credential: set "
                                     "one (PATCH the cluster's credential) to make nodes", cl->id);
    snprintf(key, sizeof key, "%s/%s", cl->owner, drv_json_str(cl->spec, "credential"));
    const drv_obj_t *c = drv_state_get(head->state, DRV_K_CREDENTIAL, key);
    if (!c)
        return drv_err_unprocessable(err, "credential", "cluster '%s': credential '%s' not found",
                                     cl->id, drv_json_str(cl->spec, "credential"));
    put(out->access_key_id, sizeof out->access_key_id, drv_json_str(c->spec, "access_key_id"));
    put(out->secret_access_key, sizeof out->secret_access_key,
        drv_json_str(c->spec, "secret_access_key"));
    put(out->profile, sizeof out->profile, drv_json_str(c->spec, "profile"));
    put(out->sa_key, sizeof out->sa_key, drv_json_str(c->spec, "service_account_key"));
    put(out->api_key, sizeof out->api_key, drv_json_str(c->spec, "api_key"));
    put(out->tenancy, sizeof out->tenancy, drv_json_str(c->spec, "tenancy"));
    put(out->user, sizeof out->user, drv_json_str(c->spec, "user"));
    put(out->fingerprint, sizeof out->fingerprint, drv_json_str(c->spec, "fingerprint"));
    put(out->private_key, sizeof out->private_key, drv_json_str(c->spec, "private_key"));
    put(out->compartment, sizeof out->compartment, drv_json_str(cl->spec, "compartment"));
    const json_t *ads = json_object_get(cl->spec, "availability_domains");
    for (size_t i = 0; i < json_array_size(ads); i++) {
        size_t al = strlen(out->ads);
        snprintf(out->ads + al, sizeof out->ads - al, "%s%s", i ? "," : "",
                 json_string_value(json_array_get(ads, i)));
    }
    put(out->project, sizeof out->project, drv_json_str(cl->spec, "project"));
    const json_t *zs = json_object_get(cl->spec, "zones");
    for (size_t i = 0; i < json_array_size(zs); i++) {
        size_t zl = strlen(out->zones);
        snprintf(out->zones + zl, sizeof out->zones - zl, "%s%s", i ? "," : "",
                 json_string_value(json_array_get(zs, i)));
    }
    const char *image = np ? drv_json_str(np->spec, "image") : NULL;
    put(out->image, sizeof out->image, image ? image : drv_json_str(cl->spec, "image"));
    put(out->subnet, sizeof out->subnet, drv_json_str(cl->spec, "subnet"));
    put(out->security_group, sizeof out->security_group, drv_json_str(cl->spec, "security_group"));
common:;
    const char *hu = drv_json_str(cl->spec, "head_url");
    put(out->head_url, sizeof out->head_url, hu ? hu : head->cfg.server_url);
    put(out->ca_hash, sizeof out->ca_hash, head->cfg.tls_ca_hash);
    const json_t *g = json_object_get(cl->spec, "orphan_grace_seconds");
    out->orphan_grace_s = g ? (int)json_integer_value(g) : DRV_CLOUD_ORPHAN_GRACE_S;
    return 0;
}

int drv_cloud_join_token(drv_head_t *head, const drv_obj_t *n, int ttl_s, char *secret,
                         drv_error_t *err)
{
    char hash[65], key[320], exp[32];
    if (drv_secret_mint(DRV_JOIN_PREFIX, secret, hash, err) < 0)
        return -1;
    const char *cluster = drv_json_str(n->spec, "cluster"), *np = drv_json_str(n->spec, "nodepool");
    snprintf(key, sizeof key, "%s/%s/%s/%s", n->owner, cluster, np, n->id);
    int64_t now = drv_now_ms() / 1000;
    drv_rfc3339(now + ttl_s, exp, sizeof exp);
    json_t *spec = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", n->id, "cluster", cluster,
                             "nodepool", np, "description", "boot token of a provisioned node",
                             "expires_at", exp, "node", n->id);
    drv_obj_t *t = drv_obj_new(DRV_K_JOINTOKEN, key, n->owner, n->id, spec,
                               json_pack("{s:s}", "hash", hash));
    t->created_at = t->updated_at = now;
    t->rv = 1;
    drv_state_put(head->state, t);
    return 0;
}

static drv_obj_t *get2(drv_state_t *st, drv_kind_t k, const char *a, const char *b)
{
    char key[256];
    snprintf(key, sizeof key, "%s/%s", a, b);
    return drv_state_get(st, k, key);
}

static drv_obj_t *nodepool_of(drv_state_t *st, const drv_obj_t *n)
{
    char key[256];
    snprintf(key, sizeof key, "%s/%s/%s", n->owner, drv_json_str(n->spec, "cluster"),
             drv_json_str(n->spec, "nodepool"));
    return drv_state_get(st, DRV_K_NODEPOOL, key);
}

/* Show (or clear, msg NULL) a provider error on nodepool np. */
static void nodepool_error(drv_state_t *st, drv_obj_t *np, const char *cls, const char *msg)
{
    json_t *s = np->status ? json_deep_copy(np->status) : json_object();
    if (msg)
        json_object_set_new(s, "provider_error",
                            json_pack("{s:s, s:s, s:I}", "class", cls, "message", msg, "at",
                                      (json_int_t)(drv_now_ms() / 1000)));
    else
        json_object_del(s, "provider_error");
    if (json_equal(s, np->status))
        json_decref(s);
    else
        drv_state_set_status(st, np, s);
}

static void terminate_node(drv_head_t *head, drv_obj_t *n)
{
    static const char *const f[] = {"terminating"};
    static const bool v[] = {true};
    drv_node_set_flags(head->state, n, f, v, 1, NULL);
}

int drv_cloud_prepare_launch(drv_head_t *head, struct drv_scaling *scaling,
                             drv_node_launch_t *l, drv_error_t *err)
{
    drv_state_t *st = head->state;
    drv_obj_t *n = get2(st, DRV_K_NODE, l->owner, l->node_id);
    if (!n)
        return drv_err_not_found(err, "node %s/%s is gone", l->owner, l->node_id);
    drv_obj_t *np = nodepool_of(st, n);
    const drv_obj_t *cl = get2(st, DRV_K_CLUSTER, n->owner, drv_json_str(n->spec, "cluster"));
    if (!np || !cl) {
        drv_err_not_found(err, "the nodepool of node %s/%s is gone", l->owner, l->node_id);
        goto error;
    }
    if (drv_cloud_settings_of(head, cl, np, &l->cloud, err) < 0)
        goto error;
    put(l->cluster, sizeof l->cluster, cl->id);
    put(l->nodepool, sizeof l->nodepool, np->id);
    put(l->instance_type, sizeof l->instance_type, drv_json_str(n->spec, "instance_type"));
    put(l->capacity, sizeof l->capacity, drv_json_str(n->spec, "capacity_type"));
    char secret[DRV_SECRET_MAX + 1];
    if (drv_cloud_join_token(head, n, DRV_CLOUD_JOIN_TTL_S, secret, err) < 0)
        goto error;
    put(l->join_token, sizeof l->join_token, secret);
    explicit_bzero(secret, sizeof secret);
    return 0;
error:
    if (np) {
        /* back off like a refused launch: no new node record every pass */
        char why[96];
        snprintf(why, sizeof why, "%.95s", err->message);
        drv_scaling_report_failure(scaling, head, np, drv_json_str(n->spec, "instance_type"),
                                   drv_json_str(n->spec, "capacity_type"), drv_now_ms(), why);
        nodepool_error(st, np, "give_up", err->message);
    }
    terminate_node(head, n);
    return -1;
}

void drv_cloud_absorb(drv_head_t *head, struct drv_scaling *scaling, const drv_prov_result_t *r,
                      int64_t now_ms)
{
    drv_state_t *st = head->state;
    char npkey[256], npid[160];
    snprintf(npkey, sizeof npkey, "%s/%s/%s", r->owner, r->cluster, r->nodepool);
    snprintf(npid, sizeof npid, "%s/%s", r->cluster, r->nodepool);
    drv_obj_t *np = drv_state_get(st, DRV_K_NODEPOOL, npkey);
    drv_obj_t *n = get2(st, DRV_K_NODE, r->owner, r->node_id);
    if (!r->create)
        return;
    if (r->cls == DRV_PROV_OK) {
        if (np)
            nodepool_error(st, np, NULL, NULL);
        if (n) {
            json_t *spec = json_deep_copy(n->spec);
            json_object_set_new(spec, "instance_id", json_string(r->instance_id));
            drv_obj_t *o = drv_obj_new(DRV_K_NODE, n->key, n->owner, n->id, spec,
                                       n->internal ? json_incref(n->internal) : NULL);
            o->created_at = n->created_at;
            o->updated_at = drv_now_ms() / 1000;
            o->rv = n->rv + 1;
            drv_state_put(st, o);
            drv_node_render_status(st, o);
            drv_events_add(head->events, r->owner, "node", r->node_id, "provisioned", "%s",
                           r->message);
        }
        return;
    }
    /* the launch failed: no machine; this node record goes, and the
     * autoscaler's backoff decides what comes instead and when */
    if (n)
        terminate_node(head, n);
    if (!np)
        return;
    char why[96];
    snprintf(why, sizeof why, "%.95s", r->message);
    drv_scaling_report_failure(scaling, head, np, r->instance_type, r->capacity, now_ms, why);
    nodepool_error(st, np, drv_prov_class_name(r->cls), r->message);
    drv_events_add(head->events, r->owner, "nodepool", npid, "provider_error",
                   "%s %s node %s: %s (%s)", r->instance_type, r->capacity, r->node_id,
                   r->message,
                   r->cls == DRV_PROV_FALLBACK ? "falling back to another capacity or type"
                   : r->cls == DRV_PROV_RETRY  ? "retrying after a backoff"
                                               : "giving up until this is fixed; retrying "
                                                 "after a backoff");
}

void drv_cloud_known(drv_head_t *head, const drv_provider_ops_t *ops, drv_node_ref_t **nodes,
                     size_t *n, drv_cloud_settings_t **accounts, size_t *n_accounts)
{
    drv_state_t *st = head->state;
    size_t nn = drv_state_count(st, DRV_K_NODE), nc = drv_state_count(st, DRV_K_CLUSTER);
    *nodes = calloc(nn ? nn : 1, sizeof **nodes);
    *accounts = calloc(nc ? nc : 1, sizeof **accounts);
    *n = *n_accounts = 0;
    if (!*nodes || !*accounts)
        abort();
    for (size_t i = 0; i < nc; i++) {
        const drv_obj_t *cl = drv_state_at(st, DRV_K_CLUSTER, i);
        if (drv_provider_ops(drv_json_str(cl->spec, "provider")) != ops)
            continue;
        if (drv_cloud_settings_of(head, cl, NULL, &(*accounts)[*n_accounts], NULL) == 0)
            (*n_accounts)++;
    }
    for (size_t i = 0; i < nn; i++) {
        const drv_obj_t *nd = drv_state_at(st, DRV_K_NODE, i);
        const drv_obj_t *cl = get2(st, DRV_K_CLUSTER, nd->owner, drv_json_str(nd->spec, "cluster"));
        if (!cl || drv_provider_ops(drv_json_str(cl->spec, "provider")) != ops)
            continue;
        put((*nodes)[*n].owner, sizeof (*nodes)[*n].owner, nd->owner);
        put((*nodes)[*n].node_id, sizeof (*nodes)[*n].node_id, nd->id);
        (*n)++;
    }
}
