/* h_gateway.c — the head's API for standalone gateways (drover-gateway;
 * docs/api.md "Standalone gateways"). Both routes need a token with scope
 * `gateway` (or `all`) of an admin user.
 *
 *   GET  /v1/gateway/routes[?wait=VERSION[&timeout_seconds=N]]  the
 *        routing table and the inference tokens (gateway/routes_doc.h);
 *        with wait equal to the current version the answer is held until
 *        it changes (then the new document) or N seconds pass [25, at most
 *        25] (then 204 No Content: the gateway's version is still current;
 *        it asks again). No wait, or another version: the document at once.
 *   POST /v1/gateway/load                   the gateway's load per deployment,
 *        for the replica autoscaler (api/gateway_peers.c)
 */
#include <string.h>

#include "api/gateway_peers.h"
#include "api/handlers.h"
#include "gateway/routes_doc.h"
#include "state/head.h"

static int no_gateway(drv_resp_t *resp)
{
    drv_error_t err;
    drv_err(&err, 503, "unavailable", "", "the inference gateway is not running");
    drv_resp_error(resp, &err);
    resp->retry_after = 5;
    return 0;
}

int drv_h_gateway_routes(drv_req_t *req, drv_resp_t *resp)
{
    static const char *const allowed[] = {"wait", "timeout_seconds", NULL};
    drv_error_t err;
    drv_gw_peers_t *g = req->head->gw_peers;
    if (!g)
        return no_gateway(resp);
    int64_t hold_s = DRV_GW_ROUTES_HOLD_S;
    if (drv_req_check_query(req, allowed, &err) < 0 ||
        drv_req_query_int(req, "timeout_seconds", 1, DRV_GW_ROUTES_HOLD_S, &hold_s, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    const char *wait = drv_req_query(req, "wait");
    char *doc = NULL;
    size_t len = 0;
    bool hold;
    if (drv_gw_peers_routes(g, req->head, wait, &doc, &len, &hold, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    if (hold && req->resumed) {   /* the hold ended, the version is still current */
        resp->status = 204;
        return 0;
    }
    if (hold) {   /* unchanged: answer when it changes or the hold ends */
        resp->hold_ms = (int)hold_s * 1000;
        resp->hold_key = DRV_GW_ROUTES_KEY;
        resp->status = 204;   /* placeholder: replaced when the hold ends */
        return 0;
    }
    drv_resp_raw(resp, 200, "application/json", doc, len);
    return 0;
}

int drv_h_gateway_load(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    drv_gw_peers_t *g = req->head->gw_peers;
    if (!g)
        return no_gateway(resp);
    json_t *body = drv_req_json(req, &err);
    if (!body || drv_gw_peers_report(g, req->head, body, &err) < 0) {
        json_decref(body);
        drv_resp_error(resp, &err);
        return 0;
    }
    json_decref(body);
    drv_resp_json(resp, 200, json_pack("{s:b}", "accepted", 1));
    return 0;
}
