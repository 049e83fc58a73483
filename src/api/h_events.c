/* h_events.c — GET /v1/audit (admins: the audit log of writes, api/audit.h;
 * ?user=U, ?kind=K, ?since=TIME, ?limit=N [100, at most 1000], ?page_token,
 * newest first) and GET /v1/events: the controller's decisions and their
 * reasons (state/events.c), the caller's own (admins: ?all_users=true).
 * Filters: kind (node|nodepool|deployment|cluster), object (its id;
 * nodepools are CLUSTER/NODEPOOL), cluster (the cluster's and its
 * nodepools'), limit (default 100, the newest). */
#include <stdlib.h>

#include "api/audit.h"
#include "api/handlers.h"
#include "state/events.h"
#include "common/util.h"
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
    static const char *const allowed[] = {"user", "kind", "since", "limit", "page_token", NULL};
    int64_t limit = 100;
    if (drv_req_check_query(req, allowed, &err) < 0 ||
        drv_req_query_int(req, "limit", 1, DRV_AUDIT_PAGE_MAX, &limit, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    drv_audit_query_t q = {.user = drv_req_query(req, "user"), .kind = drv_req_query(req, "kind"),
                           .page_token = drv_req_query(req, "page_token"),
                           .limit = (size_t)limit};
    const char *since = drv_req_query(req, "since");
    if (since) {   /* an RFC 3339 time, or unix seconds */
        char *end;
        long long secs = strtoll(since, &end, 10);
        int64_t t = *since && !*end && secs >= 0 ? secs : drv_parse_rfc3339(since);
        if (t < 0) {
            drv_err_invalid(&err, "since", "since must be an RFC 3339 time "
                            "(2026-01-02T15:04:05Z) or unix seconds");
            drv_resp_error(resp, &err);
            return 0;
        }
        q.since_ms = t * 1000;
    }
    json_t *doc = drv_audit_list(req->head->audit, &q, &err);
    if (!doc)
        drv_resp_error(resp, &err);
    else
        drv_resp_json(resp, 200, doc);
    return 0;
}
