/* gateway_state.c — droverd's state as the gateway's plain inputs (see
 * gateway_state.h): the routing table, the live inference tokens (as the
 * routes document lists them, and as a token set), and refreshing the
 * inference listener's token set when a token or user changes. Reads the
 * state under the caller's lock; no I/O.
 */
#include "api/gateway_state.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/secret.h"
#include "common/util.h"
#include "state/nodes.h"
#include "state/state.h"
#include "common/json.h"

/* --- the routing table --------------------------------------------------------- */

drv_gw_table_t *drv_gw_table_build(drv_state_t *st)
{
    drv_gw_table_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    size_t nd = drv_state_count(st, DRV_K_DEPLOYMENT);
    size_t cap_r = 16;
    t->deps = calloc(nd ? nd : 1, sizeof *t->deps);
    t->reps = malloc(cap_r * sizeof *t->reps);
    if (!t->deps || !t->reps) {
        drv_gw_table_free(t);
        return NULL;
    }
    for (size_t d = 0; d < nd; d++) {
        drv_obj_t *dep = drv_state_at(st, DRV_K_DEPLOYMENT, d);
        drv_gw_tdep_t *td = &t->deps[t->n_deps++];
        td->key = drv_gw_table_str(t, dep->key);
        td->owner = drv_gw_table_str(t, dep->owner);
        td->id = drv_gw_table_str(t, dep->id);
        td->enabled = json_is_true(json_object_get(dep->spec, "enabled"));
        td->created = dep->created_at;
        td->desired_replicas =
            (int)json_integer_value(json_object_get(dep->status, "desired_replicas"));
        td->ready_replicas = (int)json_integer_value(json_object_get(dep->status, "ready_replicas"));
        const json_t *as = json_object_get(dep->spec, "autoscale");
        const json_t *cs = json_object_get(as, "cold_start_timeout_seconds");
        td->cold_start_ms =
            (int)(json_is_integer(cs) ? json_integer_value(cs) : DRV_GW_DEFAULT_COLD_START_S) *
            1000;
        char key[256];
        snprintf(key, sizeof key, "%s/%s", dep->owner, drv_json_str(dep->spec, "model"));
        const drv_obj_t *model = drv_state_get(st, DRV_K_MODEL, key);
        const json_t *rt = model ? json_object_get(model->spec, "runtime") : NULL;
        const char *pp = drv_json_str(rt, "predict_path"), *hp = drv_json_str(rt, "health_path");
        const json_t *mc = json_object_get(rt, "max_concurrency");
        td->predict_path = drv_gw_table_str(t, pp ? pp : "/predict");
        td->health_path = drv_gw_table_str(t, hp ? hp : "/health");
        td->max_concurrency =
            json_is_integer(mc) ? (int)json_integer_value(mc) : DRV_GW_DEFAULT_MAX_CONCURRENCY;
        td->first = t->n_reps;
        if (!model)
            continue;   /* no model: no replica can serve (held, then 503) */
        char prefix[256];
        snprintf(prefix, sizeof prefix, "%s/", dep->key);
        size_t plen = strlen(prefix);
        for (size_t i = drv_state_lower_bound(st, DRV_K_REPLICA, prefix);
             i < drv_state_count(st, DRV_K_REPLICA); i++) {
            drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
            if (strncmp(r->key, prefix, plen) != 0)
                break;
            const char *rs = drv_json_str(r->status, "state"), *ep = drv_json_str(r->status, "endpoint");
            if (!rs || !ep || !*ep || strncmp(ep, "http://", 7) != 0)
                continue;
            bool ready = strcmp(rs, "ready") == 0;
            if (!ready && strcmp(rs, "starting") != 0)
                continue;
            const drv_obj_t *node = drv_replica_node(st, r);
            if (!node || node->soft.node_state != DRV_NODE_READY ||
                json_is_true(json_object_get(node->spec, "draining")) ||
                json_is_true(json_object_get(node->spec, "terminating")))
                continue;
            if (t->n_reps == cap_r) {
                cap_r *= 2;
                drv_gw_trep_t *nr = realloc(t->reps, cap_r * sizeof *nr);
                if (!nr) {
                    drv_gw_table_free(t);
                    return NULL;
                }
                t->reps = nr;
            }
            drv_gw_trep_t *tr = &t->reps[t->n_reps++];
            tr->key = drv_gw_table_str(t, r->key);
            tr->id = drv_gw_table_str(t, r->id);
            size_t elen = strlen(ep);
            while (elen > 7 && ep[elen - 1] == '/')
                elen--;
            char buf[256];
            snprintf(buf, sizeof buf, "%.*s", (int)elen, ep);
            tr->endpoint = drv_gw_table_str(t, buf);
            tr->ready = ready;
        }
        td->n = t->n_reps - td->first;
    }
    return t;
}

/* --- tokens ---------------------------------------------------------------------- */

json_t *drv_gw_tokens_json(drv_state_t *st, int64_t now_s)
{
    json_t *a = json_array();
    for (size_t i = 0; i < drv_state_count(st, DRV_K_TOKEN); i++) {
        drv_obj_t *tok = drv_state_at(st, DRV_K_TOKEN, i);
        if (!tok->hash || json_is_true(json_object_get(tok->spec, "revoked")) ||
            !drv_state_get(st, DRV_K_USER, tok->owner))
            continue;
        unsigned scopes = drv_scopes_from_json(json_object_get(tok->spec, "scopes"));
        const char *exp = json_string_value(json_object_get(tok->spec, "expires_at"));
        int64_t at = exp ? drv_parse_rfc3339(exp) : 0;
        if (exp && (at < 0 || at <= now_s))
            continue;
        json_array_append_new(a, json_pack("{s:s, s:s, s:b, s:I}", "hash", tok->hash, "user",
                                           tok->owner, "predict", (scopes & DRV_SCOPE_PREDICT) != 0,
                                           "expires_at", (json_int_t)at));
    }
    return a;
}

drv_gw_tokens_t *drv_gw_tokens_build(drv_state_t *st, int64_t now_s)
{
    json_t *a = drv_gw_tokens_json(st, now_s);   /* the same rules as the document's */
    drv_gw_tokens_t *ts = NULL;
    drv_error_t err;
    if (a && drv_gw_tokens_parse(a, &ts, &err) < 0)
        ts = NULL;
    json_decref(a);
    return ts;
}

void drv_gw_tokens_changed(drv_head_t *head)
{
    if (!head->gw_creds)
        return;
    drv_gw_tokens_t *toks = drv_gw_tokens_build(head->state, time(NULL));
    if (!toks)
        drv_warn("gateway: out of memory building the inference listener's tokens; "
                 "it refuses every token until the next pass");
    drv_gw_creds_set_tokens(head->gw_creds, toks);
}
