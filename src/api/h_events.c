/* h_events.c — GET /v1/audit (admins: the audit log of writes, api/audit.h;
 * ?user=U, ?limit=N [100], newest first) and GET /v1/events: the controller's decisions and their
 * reasons (state/events.c), the caller's own (admins: ?all_users=true).
 * Filters: kind (node|nodepool|deployment|cluster), object (its id;
 * nodepools are CLUSTER/NODEPOOL), cluster (the cluster's and its
 * nodepools'), limit (default 100, the newest). */
#include "api/audit.h"
#include "api/handlers.h"
#include "state/events.h"
#include "state/head.h"

int drv_h_events(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    static const char *const allowed[] = {"kind", "object", "cluster", "limit", "all_users", NULL};
    int64_t limit = 100;
    bool all = false;
    if (drv_req_check_query(req, allowed, &err) < 0 ||
        drv_req_query_int(req, "limit", 1, 4096, &limit, &err) < 0 ||
        drv_req_query_bool(req, "all_users", &all, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    if (all && !req->who->admin) {
        drv_err(&err, 403, "permission_denied", "all_users", "only admins may list all events");
        drv_resp_error(resp, &err);
        return 0;
    }
    json_t *items = drv_events_list(req->head->events, all ? NULL : req->who->user,
                                    drv_req_query(req, "kind"), drv_req_query(req, "object"),
                                    drv_req_query(req, "cluster"), (size_t)limit);
    drv_resp_json(resp, 200, json_pack("{s:o}", "items", items));
    return 0;
}

int drv_h_audit(drv_req_t *req, drv_resp_t *resp)
{
    drv_error_t err;
    static const char *const allowed[] = {"user", "limit", NULL};
    int64_t limit = 100;
    if (drv_req_check_query(req, allowed, &err) < 0 ||
        drv_req_query_int(req, "limit", 1, DRV_AUDIT_CAP, &limit, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    json_t *items = drv_audit_list(req->head->audit, drv_req_query(req, "user"), (size_t)limit);
    drv_resp_json(resp, 200, json_pack("{s:o}", "items", items));
    return 0;
}
