/* h_predict.c — the inference routes and GET /metrics.
 *
 *   POST /v1/deployments/{d}/predict   the body goes to a replica's predict_path
 *   POST /openai/v1/chat/completions   "model" names a deployment; the body goes
 *   POST /openai/v1/completions          to the replica's /v1/... path
 *   GET  /openai/v1/models             the caller's deployments, OpenAI-shaped
 *   GET  /openai/v1/models/{d}         one of them (404 in OpenAI's error shape)
 *   GET  /metrics                      Prometheus text: the gateway's counters,
 *                                      the state's gauges, droverd's process_*
 *                                      series and drover_build_info
 *   GET  /v1/deployments/{d}/metrics   one deployment's last minute and 15 minutes
 *                                      of history, JSON (gateway/stats.c)
 *
 * The inference handlers do not wait: they make a gateway job and return it
 * in resp->job (http.c suspends the connection; gateway/gateway.h). They
 * take no state lock: the deployment is resolved by the gateway from its
 * routing table; a deployment is always the caller's own ("owner/id"), so
 * another user's is 404 like a missing one. /metrics shows a member their
 * own deployments, nodes and replicas, an admin everything.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/gateway_peers.h"
#include "api/handlers.h"
#include "common/openai.h"
#include "common/procmetrics.h"
#include "common/util.h"
#include "gateway/gateway.h"
#include "gateway/table.h"
#include "provider/aws.h"
#include "provider/gcp.h"
#include "provider/oci.h"
#include "provider/slurm.h"
#include "provider/vultr.h"
#include "state/head.h"
#include "state/nodes.h"
#include "state/state.h"

static int submit(drv_req_t *req, drv_resp_t *resp, const char *dep, enum drv_gw_kind kind,
                  const char *suffix)
{
    drv_error_t err;
    drv_gateway_t *g = req->head->gateway;
    if (!g) {
        drv_err(&err, 503, "unavailable", "", "the inference gateway is not running");
        drv_resp_error(resp, &err);
        resp->retry_after = 30;
        return 0;
    }
    int timeout_ms;
    if (drv_gw_parse_timeout(drv_req_header(req, "X-Drover-Timeout"), &timeout_ms, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    if (!drv_id_valid(dep)) {
        drv_err_not_found(&err, "deployment '%.80s' not found", dep);
        drv_resp_error(resp, &err);
        return 0;
    }
    char key[192];
    snprintf(key, sizeof key, "%s/%s", req->who->user, dep);
    drv_gw_job_t *j =
        drv_gw_job_new(g, key, kind, suffix, drv_req_header(req, "Content-Type"),
                       drv_req_header(req, "Accept"), timeout_ms, &err);
    if (!j) {
        drv_resp_error(resp, &err);
        resp->retry_after = 5;
        return 0;
    }
    resp->job = j;
    resp->status = 200;   /* placeholder: the gateway's answer replaces it */
    return 0;
}

int drv_h_predict(drv_req_t *req, drv_resp_t *resp)
{
    return submit(req, resp, req->params[0], DRV_GW_PREDICT, NULL);
}

int drv_h_openai(drv_req_t *req, drv_resp_t *resp)
{
    char model[128];
    if (drv_gw_json_model(req->body, req->body_len, model, sizeof model) < 0) {
        drv_error_t err;
        drv_err_invalid(&err, "model", "the body must be a JSON object whose \"model\" names "
                        "one of your deployments (GET /openai/v1/models lists them)");
        drv_resp_error(resp, &err);
        return 0;
    }
    return submit(req, resp, model, DRV_GW_OPENAI, req->route_arg);
}

int drv_h_openai_models(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    json_t *data = json_array();
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", req->who->user);
    size_t plen = strlen(prefix);
    drv_state_rdlock(st);
    for (size_t i = drv_state_lower_bound(st, DRV_K_DEPLOYMENT, prefix);
         i < drv_state_count(st, DRV_K_DEPLOYMENT); i++) {
        drv_obj_t *d = drv_state_at(st, DRV_K_DEPLOYMENT, i);
        if (strncmp(d->key, prefix, plen) != 0)
            break;
        json_array_append_new(data, drv_openai_model(d->id, d->owner, d->created_at));
    }
    drv_state_unlock(st);
    drv_resp_json(resp, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
    return 0;
}

int drv_h_openai_model(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    const char *id = req->params[0];
    char key[192];
    snprintf(key, sizeof key, "%s/%s", req->who->user, id);
    drv_state_rdlock(st);
    drv_obj_t *d = drv_state_get(st, DRV_K_DEPLOYMENT, key);
    json_t *m = d ? drv_openai_model(d->id, d->owner, d->created_at) : NULL;
    drv_state_unlock(st);
    if (!m) {
        drv_error_t err;
        drv_err_not_found(&err, "model '%.80s' not found: no deployment of yours has that id "
                          "(GET /openai/v1/models lists them)", id);
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_resp_json(resp, 200, m);
    return 0;
}

/* --- metrics ----------------------------------------------------------------------- */

typedef struct counts {
    const char *name[16];
    int n[16];
    int k;
} counts_t;

static void count(counts_t *c, const char *name)
{
    for (int i = 0; i < c->k; i++)
        if (strcmp(c->name[i], name) == 0) {
            c->n[i]++;
            return;
        }
    if (c->k < 16) {
        c->name[c->k] = name;
        c->n[c->k++] = 1;
    }
}

static const char *rstate(const drv_obj_t *r)
{
    const char *s = json_string_value(json_object_get(r->status, "state"));
    return s ? s : "pending";
}

int drv_h_metrics(drv_req_t *req, drv_resp_t *resp)
{
    const char *owner = req->who->admin ? NULL : req->who->user;
    drv_state_t *st = req->head->state;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    counts_t nodes = {0}, reps = {0};
    size_t ndep = 0;
    char prefix[96] = "";
    if (owner)
        snprintf(prefix, sizeof prefix, "%s/", owner);
    size_t plen = strlen(prefix);
    drv_state_rdlock(st);
    for (size_t i = drv_state_lower_bound(st, DRV_K_NODE, prefix);
         i < drv_state_count(st, DRV_K_NODE); i++) {
        drv_obj_t *n = drv_state_at(st, DRV_K_NODE, i);
        if (strncmp(n->key, prefix, plen) != 0)
            break;
        count(&nodes, drv_node_state_name(n));
    }
    for (size_t i = drv_state_lower_bound(st, DRV_K_REPLICA, prefix);
         i < drv_state_count(st, DRV_K_REPLICA); i++) {
        drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
        if (strncmp(r->key, prefix, plen) != 0)
            break;
        count(&reps, rstate(r));
    }
    for (size_t i = drv_state_lower_bound(st, DRV_K_DEPLOYMENT, prefix);
         i < drv_state_count(st, DRV_K_DEPLOYMENT); i++) {
        if (strncmp(drv_state_at(st, DRV_K_DEPLOYMENT, i)->key, prefix, plen) != 0)
            break;
        ndep++;
    }
    /* the names point into objects: print before unlocking */
    drv_appendf(&buf, &len, &cap,
                "# HELP drover_nodes Nodes by state.\n# TYPE drover_nodes gauge\n");
    for (int i = 0; i < nodes.k; i++)
        drv_appendf(&buf, &len, &cap, "drover_nodes{state=\"%s\"} %d\n", nodes.name[i], nodes.n[i]);
    drv_appendf(&buf, &len, &cap,
            "# HELP drover_replicas Replicas by state.\n# TYPE drover_replicas gauge\n");
    for (int i = 0; i < reps.k; i++)
        drv_appendf(&buf, &len, &cap, "drover_replicas{state=\"%s\"} %d\n", reps.name[i],
                    reps.n[i]);
    drv_state_unlock(st);
    drv_appendf(&buf, &len, &cap,
            "# HELP drover_deployments Deployments.\n# TYPE drover_deployments gauge\n"
            "drover_deployments %zu\n", ndep);
    if (req->head->prov && req->head->prov->aws)
        drv_appendf(&buf, &len, &cap,
                "# HELP drover_aws_api_calls_total EC2 API calls made by the aws provider.\n"
                "# TYPE drover_aws_api_calls_total counter\ndrover_aws_api_calls_total %llu\n",
                drv_aws_calls(req->head->prov->aws));
    if (req->head->prov && req->head->prov->gcp)
        drv_appendf(&buf, &len, &cap,
                "# HELP drover_gcp_api_calls_total Compute Engine and token calls made by the "
                "gcp provider.\n"
                "# TYPE drover_gcp_api_calls_total counter\ndrover_gcp_api_calls_total %llu\n",
                drv_gcp_calls(req->head->prov->gcp));
    if (req->head->prov && req->head->prov->vultr)
        drv_appendf(&buf, &len, &cap,
                "# HELP drover_vultr_api_calls_total Vultr API calls made by the vultr provider.\n"
                "# TYPE drover_vultr_api_calls_total counter\ndrover_vultr_api_calls_total %llu\n",
                drv_vultr_calls(req->head->prov->vultr));
    if (req->head->prov && req->head->prov->oracle)
        drv_appendf(&buf, &len, &cap,
                "# HELP drover_oracle_api_calls_total OCI API calls made by the oracle provider.\n"
                "# TYPE drover_oracle_api_calls_total counter\ndrover_oracle_api_calls_total %llu\n",
                drv_oci_calls(req->head->prov->oracle));
    if (req->head->prov && req->head->prov->slurm)
        drv_appendf(&buf, &len, &cap,
                "# HELP drover_slurm_commands_total Slurm commands (sbatch, scancel, squeue) run "
                "by the slurm provider.\n"
                "# TYPE drover_slurm_commands_total counter\ndrover_slurm_commands_total %llu\n",
                drv_slurm_calls(req->head->prov->slurm));
    if (req->head->blobs && req->who->admin)   /* the head's, not one user's */
        drv_appendf(&buf, &len, &cap,
                "# HELP drover_blob_bytes_sent_total Bytes of blobs the head's store sent.\n"
                "# TYPE drover_blob_bytes_sent_total counter\ndrover_blob_bytes_sent_total %llu\n",
                (unsigned long long)atomic_load(&req->head->blob_bytes_sent));
    if (req->who->admin)
        drv_appendf(&buf, &len, &cap,
                "# HELP drover_blob_redirects_total Blob reads sent on to an S3 store or https "
                "source.\n# TYPE drover_blob_redirects_total counter\n"
                "drover_blob_redirects_total %llu\n",
                (unsigned long long)atomic_load(&req->head->blob_redirects));
    drv_gateway_metrics(req->head->gateway, owner, &buf, &len, &cap);
    if (req->head->gw_peers)   /* standalone gateways' reports */
        drv_gw_peers_metrics(req->head->gw_peers, owner, &buf, &len, &cap);
    if (req->who->admin)   /* the head's, not one user's */
        drv_api_ha_metrics(req->head, &buf, &len, &cap);
    char proc[4096];
    if (drv_procmetrics_text(proc, sizeof proc) > 0)
        drv_appendf(&buf, &len, &cap, "%s", proc);
    drv_resp_raw(resp, 200, "text/plain; version=0.0.4; charset=utf-8", buf, len);
    return 0;
}

int drv_h_deployment_metrics(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    const char *id = req->params[0];
    char key[192];
    snprintf(key, sizeof key, "%s/%s", req->who->user, id);
    drv_state_t *st = req->head->state;
    drv_state_rdlock(st);
    bool found = drv_state_get(st, DRV_K_DEPLOYMENT, key) != NULL;
    drv_state_unlock(st);
    if (!found) {
        drv_err_not_found(&err, "deployment '%.80s' not found", id);
        drv_resp_error(resp, &err);
        return 0;
    }
    json_t *doc = drv_gateway_dep_metrics(req->head->gateway, key, id);
    if (!doc) {
        drv_err_internal(&err, "out of memory");
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_resp_json(resp, 200, doc);
    return 0;
}
