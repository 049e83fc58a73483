/* h_status.c — several heads (issue 17): GET /v1/status (the heads, their
 * roles, the lease, each one's lag behind the log), the standby's answer to
 * every other call (503 and the leader's URL; also a head of several that
 * does not know its role yet), and the HA series of /metrics. With SQLite
 * there is one head, always the leader. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "api/handlers.h"
#include "common/util.h"
#include "state/events.h"
#include "state/head.h"
#include "store/lease.h"
#include "store/store.h"

/* What a standby serves itself: its health, the status, its metrics, what
 * the other heads fetch from it (h_peer.c) and the console's files (they
 * hold no data; its API calls then follow the leader: api/cors.h). */
static bool standby_path(const char *path)
{
    return strcmp(path, "/healthz") == 0 || strcmp(path, "/v1/status") == 0 ||
           strcmp(path, "/metrics") == 0 || strncmp(path, "/v1/heads/", 10) == 0 ||
           strcmp(path, "/") == 0 || strncmp(path, "/ui/", 4) == 0;
}

/* The lease, or NULL on SQLite; droverd sets it once, before it publishes
 * its URL (an atomic load: HTTP threads may already run). */
static drv_lease_t *lease_of(const drv_head_t *h)
{
    return __atomic_load_n(&h->lease, __ATOMIC_ACQUIRE);
}

/* Does this head lead? SQLite: always. Several heads: only once its lease
 * round said so; before its lease exists (a start, a re-execution after a
 * step-down: the HTTP threads run before the first round, which needs the
 * URL they listen on) it does not know, and must not act as a leader. */
static bool leads(const drv_head_t *h)
{
    drv_lease_t *l = lease_of(h);
    return l ? drv_lease_is_leader(l) : !h->ha;
}

bool drv_api_standby_answer(drv_req_t *req, drv_resp_t *resp)
{
    drv_lease_t *l = lease_of(req->head);
    if (leads(req->head) || standby_path(req->path))
        return false;
    char url[256] = "";
    if (l)
        drv_lease_leader_url(l, url, sizeof url);
    json_t *e = json_pack("{s:s, s:s}", "code", "not_leader", "message", "");
    char msg[400];
    if (!l)
        snprintf(msg, sizeof msg, "this head is starting and does not know yet whether it "
                                  "leads; retry shortly");
    else if (url[0])
        snprintf(msg, sizeof msg, "this head is a standby; the leader is %s", url);
    else
        snprintf(msg, sizeof msg, "this head is a standby and no head leads right now "
                                  "(a takeover is under way); retry shortly");
    json_object_set_new(e, "message", json_string(msg));
    json_t *doc = json_pack("{s:o}", "error", e);
    if (url[0])
        json_object_set_new(doc, "leader", json_string(url));
    drv_resp_json(resp, 503, doc);
    resp->retry_after = 1;
    if (url[0] && strlen(url) < sizeof resp->header_value) {
        resp->header_name = "X-Drover-Leader";
        snprintf(resp->header_value, sizeof resp->header_value, "%s", url);
    }
    return true;
}

const char *drv_api_role(const drv_head_t *h)
{
    return leads(h) ? "leader" : "standby";
}

int drv_h_status(drv_req_t *req, drv_resp_t *resp)
{
    drv_head_t *h = req->head;
    drv_lease_t *l = lease_of(h);
    json_t *heads = json_array(), *doc;
    if (!l) {   /* SQLite, or a head of several before its first lease round */
        const char *role = h->ha ? "standby" : "leader";
        json_array_append_new(heads, json_pack("{s:s, s:s, s:s, s:i}", "id", h->cfg.head_id,
                                               "url", h->cfg.server_url, "role", role,
                                               "lag", 0));
        doc = json_pack("{s:s, s:s, s:s, s:I, s:n, s:o}", "store", h->ha ? "postgres" : "sqlite",
                        "role", role, "self", h->cfg.head_id, "epoch", (json_int_t)0, "lease",
                        "heads", heads);
        drv_resp_json(resp, 200, doc);
        return 0;
    }
    drv_lease_view_t v;
    drv_lease_view(l, &v);
    for (size_t i = 0; i < v.nheads; i++) {
        const drv_lease_head_t *x = &v.heads[i];
        bool gone = x->seen_ms_ago > 3000 + (int64_t)h->cfg.lease_ttl_ms;
        bool leads = strcmp(x->holder, v.holder) == 0 && v.expires_in_ms >= 0 &&
                     strcmp(x->role, "leader") == 0;
        uint64_t lag = v.log_seq > x->applied_seq ? v.log_seq - x->applied_seq : 0;
        json_array_append_new(heads, json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:b}", "id",
                                               x->holder, "url", x->url, "role",
                                               gone ? "gone" : leads ? "leader" : "standby",
                                               "applied_seq", (json_int_t)x->applied_seq, "lag",
                                               (json_int_t)(leads ? 0 : lag), "seen_ms_ago",
                                               (json_int_t)x->seen_ms_ago, "self",
                                               strcmp(x->holder, v.self) == 0));
    }
    json_t *lease = json_pack("{s:s, s:s, s:I, s:I, s:i}", "holder", v.holder, "url",
                              v.leader_url, "epoch", (json_int_t)v.epoch, "expires_in_ms",
                              (json_int_t)v.expires_in_ms, "ttl_ms", h->cfg.lease_ttl_ms);
    doc = json_pack("{s:s, s:s, s:s, s:I, s:o, s:I, s:I, s:I, s:o}", "store", "postgres", "role",
                    v.leader ? "leader" : "standby", "self", v.self, "epoch", (json_int_t)v.epoch,
                    "lease", lease, "log_seq", (json_int_t)v.log_seq, "leadership_changes",
                    (json_int_t)v.changes, "takeovers", (json_int_t)v.takeovers, "heads", heads);
    drv_resp_json(resp, 200, doc);
    return 0;
}

void drv_api_ha_metrics(drv_head_t *h, char **buf, size_t *len, size_t *cap)
{
    drv_lease_view_t v = {.leader = !h->ha};   /* no lease yet: SQLite's, or a starting head's */
    drv_lease_t *l = lease_of(h);
    if (l)
        drv_lease_view(l, &v);
    uint64_t lag = v.log_seq > v.applied_seq ? v.log_seq - v.applied_seq : 0;
    drv_appendf(buf, len, cap,
                "# HELP drover_head_leader 1 when this head leads, 0 for a standby.\n"
                "# TYPE drover_head_leader gauge\ndrover_head_leader %d\n"
                "# HELP drover_head_lease_epoch The leader lease's epoch (0: one head, SQLite).\n"
                "# TYPE drover_head_lease_epoch gauge\ndrover_head_lease_epoch %lld\n"
                "# HELP drover_head_leadership_changes_total Lease epochs this head saw change.\n"
                "# TYPE drover_head_leadership_changes_total counter\n"
                "drover_head_leadership_changes_total %llu\n"
                "# HELP drover_head_takeovers_total Times this head took the lease.\n"
                "# TYPE drover_head_takeovers_total counter\ndrover_head_takeovers_total %llu\n"
                "# HELP drover_head_log_lag Records of the log this head has not applied.\n"
                "# TYPE drover_head_log_lag gauge\ndrover_head_log_lag %llu\n",
                v.leader ? 1 : 0, v.epoch, (unsigned long long)v.changes,
                (unsigned long long)v.takeovers, (unsigned long long)(v.leader ? 0 : lag));
    if (l)
        drv_appendf(buf, len, cap,
                    "# HELP drover_head_uploads_total Artifact pushes and checkpoint commits this "
                    "head answered with a standby holding them (held) or after "
                    "blob_sync_timeout without (pending).\n"
                    "# TYPE drover_head_uploads_total counter\n"
                    "drover_head_uploads_total{replication=\"held\"} %llu\n"
                    "drover_head_uploads_total{replication=\"pending\"} %llu\n",
                    (unsigned long long)atomic_load(&h->uploads_held),
                    (unsigned long long)atomic_load(&h->uploads_pending));
}
