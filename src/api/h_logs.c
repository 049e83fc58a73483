/* h_logs.c — GET /v1/deployments/{d}/logs: replica logs, read from the
 * agents' log endpoints (agent/logserver.c) with the key each agent
 * reported in its last sync.
 *
 *   ?replica=R&offset=N  one replica, from byte N (N < 0: its last -N bytes);
 *                        X-Drover-Next-Offset says where to continue
 *                        (&format=json: {"text", "next_offset"} instead;
 *                        `drover logs --follow` polls with it)
 *   (no replica)         the tail of every placed replica, each under a
 *                        "==> replica R (node N) <==" header
 * GET /v1/jobs/{j}/logs (route argument "job"): the same for a job's
 * workers of its current attempt (between attempts and after the job
 * ended: of its last one, run.last_workers), ?rank=N for one of them.
 * The agent calls happen outside the state lock, bounded by a timeout.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/handlers.h"
#include "common/util.h"
#include "state/head.h"
#include "state/jobs.h"
#include "state/nodes.h"
#include "state/state.h"

#define MAX_REPLICAS 64
#define MAX_LOG (4 << 20)

typedef struct target {
    char replica[128], node[64], url[160], key[65], state[16];
} target_t;

typedef struct buf {
    char *s;
    size_t n;
    char next[32];
} buf_t;

static size_t on_data(char *p, size_t sz, size_t nm, void *ud)
{
    buf_t *b = ud;
    size_t add = sz * nm;
    return drv_buf_append(&b->s, &b->n, p, add, MAX_LOG) < 0 ? 0 : add;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
    buf_t *b = ud;
    size_t n = sz * nm;
    if (n > 22 && strncasecmp(p, "X-Drover-Next-Offset:", 21) == 0) {
        const char *v = p + 21;
        while (*v == ' ')
            v++;
        snprintf(b->next, sizeof b->next, "%.*s", (int)strcspn(v, "\r\n"), v);
    }
    return n;
}

/* Fetch from one agent; 0 on success, -1 with a message in b->s. */
static int fetch(const target_t *t, long long offset, buf_t *b, char *why, size_t wl)
{
    if (!t->url[0]) {
        snprintf(why, wl, "node %s has not reported a log endpoint (state %s)", t->node,
                 t->state);
        return -1;
    }
    char url[400], hdr[100];
    char esc[400];
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(why, wl, "out of memory");
        return -1;
    }
    char *e = curl_easy_escape(c, t->replica, 0);
    snprintf(esc, sizeof esc, "%s", e ? e : "");
    curl_free(e);
    snprintf(url, sizeof url, "%s/logs/%s?offset=%lld", t->url, esc, offset);
    snprintf(hdr, sizeof hdr, "X-Drover-Key: %s", t->key);
    struct curl_slist *h = curl_slist_append(NULL, hdr);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK || status != 200) {
        snprintf(why, wl, "node %s did not answer for its logs (%s)", t->node,
                 rc != CURLE_OK ? curl_easy_strerror(rc) : (b->s ? b->s : "error"));
        return -1;
    }
    return 0;
}

int drv_h_logs(drv_req_t *req, drv_resp_t *resp)
{
    drv_state_t *st = req->head->state;
    drv_error_t err;
    bool is_job = req->route_arg && strcmp((const char *)req->route_arg, "job") == 0;
    static const char *const allowed[] = {"replica", "offset", "format", NULL};
    static const char *const job_allowed[] = {"rank", "offset", "format", NULL};
    int64_t offset = -16384;
    if (drv_req_check_query(req, is_job ? job_allowed : allowed, &err) < 0 ||
        drv_req_query_int(req, "offset", -MAX_LOG, INT64_MAX, &offset, &err) < 0) {
        drv_resp_error(resp, &err);
        return 0;
    }
    const char *only = drv_req_query(req, is_job ? "rank" : "replica");
    target_t *ts = calloc(MAX_REPLICAS, sizeof *ts);
    size_t n = 0;
    char dkey[160], prefix[192];
    snprintf(dkey, sizeof dkey, "%s/%s", req->who->user, req->params[0]);
    snprintf(prefix, sizeof prefix, "%s/", dkey);
    drv_state_rdlock(st);
    const drv_obj_t *job = is_job ? drv_state_get(st, DRV_K_JOB, dkey) : NULL;
    bool found = is_job ? job != NULL : drv_state_get(st, DRV_K_DEPLOYMENT, dkey) != NULL;
    /* the current attempt's workers, or, between attempts and once the job
     * ended, the last attempt's (their agents keep finished workers' logs) */
    const json_t *pl = job ? json_object_get(drv_job_run(job), "placement") : NULL;
    const json_t *last = job ? json_object_get(drv_job_run(job), "last_workers") : NULL;
    bool current = job && drv_job_state_active(drv_job_state(job)) && json_array_size(pl) > 0;
    int attempt = !job ? 0 : current ? drv_job_attempt(job)
                                     : (int)json_integer_value(json_object_get(last, "attempt"));
    int port_try = !job ? 0 : current ? drv_job_port_try(job)
                                      : (int)json_integer_value(json_object_get(last, "port_try"));
    size_t nw = current ? json_array_size(pl) : json_array_size(json_object_get(last, "nodes"));
    for (size_t r = 0; job && attempt > 0 && r < nw && n < MAX_REPLICAS; r++) {
        char rs[16];
        snprintf(rs, sizeof rs, "%zu", r);
        if (only && strcmp(only, rs) != 0)
            continue;
        char nkey[192];
        snprintf(nkey, sizeof nkey, "%s/%s", job->owner,
                 current ? json_string_value(json_object_get(json_array_get(pl, r), "node"))
                         : json_string_value(json_array_get(json_object_get(last, "nodes"), r)));
        const drv_obj_t *node = drv_state_get(st, DRV_K_NODE, nkey);
        target_t *t = &ts[n++];
        drv_job_worker_id(job->id, attempt, port_try, (int)r, t->replica, sizeof t->replica);
        snprintf(t->state, sizeof t->state, "%s", node ? drv_node_state_name(node) : "gone");
        if (node) {
            snprintf(t->node, sizeof t->node, "%s", node->id);
            sscanf(node->soft.aux, "%159s %64s", t->url, t->key);
        }
    }
    for (size_t i = drv_state_lower_bound(st, DRV_K_REPLICA, prefix);
         !is_job && found && i < drv_state_count(st, DRV_K_REPLICA) && n < MAX_REPLICAS; i++) {
        drv_obj_t *r = drv_state_at(st, DRV_K_REPLICA, i);
        if (strncmp(r->key, prefix, strlen(prefix)) != 0)
            break;
        if (only && strcmp(r->id, only) != 0)
            continue;
        drv_obj_t *node = drv_replica_node(st, r);
        if (!node && !only)
            continue;
        target_t *t = &ts[n++];
        snprintf(t->replica, sizeof t->replica, "%s", r->id);
        if (node) {
            snprintf(t->node, sizeof t->node, "%s", node->id);
            snprintf(t->state, sizeof t->state, "%s", drv_node_state_name(node));
            sscanf(node->soft.aux, "%159s %64s", t->url, t->key);
        } else {
            snprintf(t->state, sizeof t->state, "pending");
        }
    }
    drv_state_unlock(st);
    if (!found || (only && n == 0)) {
        if (!found)
            drv_err_not_found(&err, "%s '%s' not found", is_job ? "job" : "deployment",
                              req->params[0]);
        else if (is_job)
            drv_err_not_found(&err, "job '%s' has no rank %s (none of its attempts ran on a "
                              "node yet, or it has fewer workers)", req->params[0], only);
        else
            drv_err_not_found(&err, "replica '%s' of deployment '%s' not found", only,
                              req->params[0]);
        free(ts);
        drv_resp_error(resp, &err);
        return 0;
    }
    char why[512];
    if (only) {
        buf_t b = {0};
        if (!ts[0].node[0]) {
            drv_err(&err, 503, "unavailable", "", "replica '%s' is not placed on a node yet",
                    only);
        } else if (fetch(&ts[0], offset, &b, why, sizeof why) < 0) {
            drv_err(&err, 503, "unavailable", "", "%s", why);
        } else if (drv_req_query(req, "format") &&
                   strcmp(drv_req_query(req, "format"), "json") == 0) {
            json_t *doc = json_pack("{s:s%, s:I}", "text", b.s ? b.s : "", b.n, "next_offset",
                                    (json_int_t)atoll(b.next));
            if (!doc)   /* not UTF-8: send it lossily rather than not at all */
                doc = json_pack("{s:s, s:I}", "text", "(log bytes are not valid UTF-8)",
                                "next_offset", (json_int_t)atoll(b.next));
            free(b.s);
            free(ts);
            drv_resp_json(resp, 200, doc);
            return 0;
        } else {
            drv_resp_raw(resp, 200, "text/plain; charset=utf-8", b.s ? b.s : drv_strdup(""),
                         b.n);
            resp->header_name = "X-Drover-Next-Offset";
            snprintf(resp->header_value, sizeof resp->header_value, "%s", b.next);
            free(ts);
            return 0;
        }
        free(b.s);
        free(ts);
        resp->retry_after = 2;
        drv_resp_error(resp, &err);
        return 0;
    }
    buf_t all = {0};
    on_data("", 0, 0, &all);
    for (size_t i = 0; i < n; i++) {
        char head[300];
        snprintf(head, sizeof head, "%s==> %s %s (node %s) <==\n", i ? "\n" : "",
                 is_job ? "worker" : "replica", ts[i].replica, ts[i].node);
        on_data(head, 1, strlen(head), &all);
        buf_t b = {0};
        if (fetch(&ts[i], offset < 0 ? offset : -16384, &b, why, sizeof why) < 0) {
            char line[600];
            snprintf(line, sizeof line, "(logs unavailable: %s)\n", why);
            on_data(line, 1, strlen(line), &all);
        } else if (b.n) {
            on_data(b.s, 1, b.n, &all);
        }
        free(b.s);
    }
    if (n == 0) {
        const char *msg = is_job ? "(no worker of this job has run on a node yet)\n"
                                 : "(no replica of this deployment is placed on a node)\n";
        on_data((char *)msg, 1, strlen(msg), &all);
    }
    drv_resp_raw(resp, 200, "text/plain; charset=utf-8", all.s, all.n);
    free(ts);
    return 0;
}
