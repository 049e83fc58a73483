/* gce.c — Compute Engine v1 REST calls (see gce.h): instances.insert with
 * requestId and its zone operation waited for to DONE, instances.delete,
 * instances.aggregatedList by label; error answers classified. Tokens come
 * from gce_auth.c and are never logged. */
#define _GNU_SOURCE
#include "provider/gce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "common/httpsink.h"
#include "common/util.h"

#define MAX_ANSWER (32 * 1024 * 1024)
#define MAX_PAGES 200
#define OP_WAIT_MS 300000        /* an insert whose operation is not DONE by then: retry */
#define ATTEMPTS 4               /* one call's tries on RETRY answers (same requestId) */

/* --- HTTP ------------------------------------------------------------------ */

int drv_gce_http(const char *method, const char *url, const char *const *headers,
                 const char *body, char **answer, long *status, drv_error_t *err)
{
    drv_httpc_sink_t ans = {.max = MAX_ANSWER};
    *answer = NULL;
    *status = 0;
    CURL *c = curl_easy_init();
    if (!c)
        return drv_err_internal(err, "curl_easy_init failed");
    struct curl_slist *hs = NULL;
    for (size_t i = 0; headers && headers[i]; i++)
        hs = curl_slist_append(hs, headers[i]);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, drv_httpc_sink_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &ans);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 150L);   /* zoneOperations.wait holds up to 2 min */
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(hs);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        free(ans.data);
        /* the URL has no secret in it (tokens travel in headers and bodies) */
        return drv_err(err, 503, "unavailable", "", "cannot reach %s: %s%s", url,
                       curl_easy_strerror(rc), ans.too_big ? " (answer too large)" : "");
    }
    *answer = ans.data ? ans.data : strdup("");
    return *answer ? 0 : drv_err_internal(err, "out of memory");
}

/* --- errors ---------------------------------------------------------------- */

static const struct {
    const char *reason;
    drv_prov_class_t cls;
    bool next_zone;
} error_classes[] = {
    /* this zone has no capacity now: the region's next zone, then another capacity */
    {"ZONE_RESOURCE_POOL_EXHAUSTED", DRV_PROV_FALLBACK, true},
    {"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", DRV_PROV_FALLBACK, true},
    {"insufficientCapacity", DRV_PROV_FALLBACK, true},
    {"resourcePoolExhausted", DRV_PROV_FALLBACK, true},
    /* quota: another capacity or type (give up for GPUS_ALL_REGIONS, below) */
    {"QUOTA_EXCEEDED", DRV_PROV_FALLBACK, false},
    {"quotaExceeded", DRV_PROV_FALLBACK, false},
    /* transient */
    {"rateLimitExceeded", DRV_PROV_RETRY, false},
    {"userRateLimitExceeded", DRV_PROV_RETRY, false},
    {"RATE_LIMIT_EXCEEDED", DRV_PROV_RETRY, false},
    {"backendError", DRV_PROV_RETRY, false},
    {"internalError", DRV_PROV_RETRY, false},
    {"resourceNotReady", DRV_PROV_RETRY, false},
    /* a person must act */
    {"invalid_grant", DRV_PROV_GIVE_UP, false},
    {"invalid_client", DRV_PROV_GIVE_UP, false},
    {"unauthorized_client", DRV_PROV_GIVE_UP, false},
    {"forbidden", DRV_PROV_GIVE_UP, false},
    {"PERMISSION_DENIED", DRV_PROV_GIVE_UP, false},
    {"accessNotConfigured", DRV_PROV_GIVE_UP, false},
    {"authError", DRV_PROV_GIVE_UP, false},
    {"invalid", DRV_PROV_GIVE_UP, false},
    {"badRequest", DRV_PROV_GIVE_UP, false},
    {"notFound", DRV_PROV_GIVE_UP, false},
};

drv_prov_class_t drv_gce_classify(long status, const char *reason, const char *message,
                                  bool *next_zone)
{
    *next_zone = false;
    for (size_t i = 0; i < sizeof error_classes / sizeof *error_classes; i++)
        if (strcmp(reason, error_classes[i].reason) == 0) {
            *next_zone = error_classes[i].next_zone;
            /* a global GPU quota: no other zone, capacity or type helps */
            if (error_classes[i].cls == DRV_PROV_FALLBACK && !*next_zone && message &&
                strstr(message, "GPUS_ALL_REGIONS"))
                return DRV_PROV_GIVE_UP;
            return error_classes[i].cls;
        }
    if (status == 429 || status >= 500 || status == 0)
        return DRV_PROV_RETRY;
    return DRV_PROV_GIVE_UP;   /* 400, 401, 403, 404: the request or the account is wrong */
}

/* An API error answer ({"error": {"code", "message", "status", "errors":
 * [{"reason", "message"}]}}) into err; returns its class. */
static drv_prov_class_t api_error(long status, const char *body, const char *what,
                                  bool *next_zone, char *reason_out, size_t rlen,
                                  drv_error_t *err)
{
    json_t *o = json_loads(body ? body : "", 0, NULL);
    const json_t *e = json_object_get(o, "error");
    const char *msg = json_string_value(json_object_get(e, "message"));
    const char *reason = json_string_value(json_object_get(json_array_get(
        json_object_get(e, "errors"), 0), "reason"));
    if (!reason)
        reason = json_string_value(json_object_get(e, "status"));
    drv_prov_class_t cls = drv_gce_classify(status, reason ? reason : "", msg, next_zone);
    if (reason_out)
        snprintf(reason_out, rlen, "%s", reason ? reason : "");
    drv_err(err, status >= 400 && status < 600 ? (int)status : 502, "gcp", "",
            "GCP %s: HTTP %ld %s: %s", what, status, reason ? reason : "(no reason)",
            msg ? msg : "(no message)");
    json_decref(o);
    return cls;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One authorized call: a token (refreshed once when the API says 401),
 * JSON body or none. 0 with *answer and *status (any HTTP answer), -1 on
 * a transport or token failure (*cls set). */
static int authed(drv_gce_t *g, const drv_gce_account_t *a, const char *method,
                  const char *url, const char *body, char **answer, long *status,
                  drv_prov_class_t *cls, unsigned *calls, drv_error_t *err)
{
    for (int round = 0; round < 2; round++) {
        char tok[2048], auth[2100];
        if (drv_gce_token(g, a->key, round > 0, tok, sizeof tok, cls, calls, err) < 0)
            return -1;
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", tok);
        explicit_bzero(tok, sizeof tok);
        const char *hs[] = {auth, "Content-Type: application/json", "Expect:", NULL};
        (*calls)++;
        int rc = drv_gce_http(method, url, hs, body, answer, status, err);
        explicit_bzero(auth, sizeof auth);
        if (rc < 0) {
            *cls = DRV_PROV_RETRY;
            return -1;
        }
        if (*status != 401 || round > 0)
            return 0;
        free(*answer);   /* an expired or revoked token: one fresh one */
        *answer = NULL;
    }
    return 0;
}

static void uuid4(char out[37])
{
    char h[33];
    if (drv_random_hex(16, h) < 0)
        snprintf(h, sizeof h, "%016llx%016llx", (unsigned long long)drv_mono_ms(),
                 (unsigned long long)drv_now_ms());
    h[12] = '4';
    h[16] = "89ab"[h[16] % 4];
    snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", h, h + 8, h + 12, h + 16, h + 20);
}

static const char *last_segment(const char *url)
{
    const char *s = url ? strrchr(url, '/') : NULL;
    return s ? s + 1 : url ? url : "";
}

/* --- insert ---------------------------------------------------------------- */

static json_t *insert_body(const drv_gce_insert_t *in)
{
    char mt[192], subnet[256];
    snprintf(mt, sizeof mt, "zones/%s/machineTypes/%s", in->zone, in->machine_type);
    json_t *labels = json_object();
    for (size_t i = 0; i < in->n_labels; i++)
        json_object_set_new(labels, in->labels[i][0], json_string(in->labels[i][1]));
    json_t *nic = json_pack("{s:[{s:s, s:s}]}", "accessConfigs", "type", "ONE_TO_ONE_NAT",
                            "name", "External NAT");
    if (in->subnet && in->subnet[0]) {
        if (strchr(in->subnet, '/'))
            snprintf(subnet, sizeof subnet, "%s", in->subnet);
        else
            snprintf(subnet, sizeof subnet, "regions/%s/subnetworks/%s", in->region,
                     in->subnet);
        json_object_set_new(nic, "subnetwork", json_string(subnet));
    } else {
        json_object_set_new(nic, "network", json_string("global/networks/default"));
    }
    /* GPU machines cannot live-migrate: TERMINATE on host maintenance */
    json_t *sched = in->spot
                        ? json_pack("{s:s, s:s, s:s, s:b}", "provisioningModel", "SPOT",
                                    "instanceTerminationAction", "DELETE", "onHostMaintenance",
                                    "TERMINATE", "automaticRestart", 0)
                        : json_pack("{s:s, s:s, s:b}", "provisioningModel", "STANDARD",
                                    "onHostMaintenance", "TERMINATE", "automaticRestart", 1);
    json_t *b = json_pack(
        "{s:s, s:s, s:o, s:{s:[{s:s, s:s}]}, s:[{s:b, s:b, s:{s:s}}], s:[o], s:o}", "name",
        in->name, "machineType", mt, "labels", labels, "metadata", "items", "key",
        "startup-script", "value", in->startup_script, "disks", "boot", 1, "autoDelete", 1,
        "initializeParams", "sourceImage", in->image, "networkInterfaces", nic, "scheduling",
        sched);
    if (b && in->network_tag && in->network_tag[0])
        json_object_set_new(b, "tags", json_pack("{s:[s]}", "items", in->network_tag));
    return b;
}

/* Wait for operation op of zone to be DONE (zoneOperations.wait, which
 * answers when it is DONE or near its own 2-minute deadline: called again
 * until DONE, no polling delay of ours); its error, if any, classified. */
static int wait_op(drv_gce_t *g, const drv_gce_account_t *a, const char *zone, json_t *op,
                   drv_prov_class_t *cls, bool *next_zone, unsigned *calls, drv_error_t *err)
{
    char name[128];
    snprintf(name, sizeof name, "%s", json_string_value(json_object_get(op, "name")) ?: "");
    json_incref(op);
    int64_t start = drv_mono_ms();
    for (int round = 0;; round++) {
        const char *st = json_string_value(json_object_get(op, "status"));
        if (st && strcmp(st, "DONE") == 0)
            break;
        if (!name[0] || drv_mono_ms() - start > OP_WAIT_MS) {
            json_decref(op);
            *cls = DRV_PROV_RETRY;
            return drv_err(err, 504, "gcp", "", "GCP insert: operation %s not DONE after %d s",
                           name[0] ? name : "(unnamed)", OP_WAIT_MS / 1000);
        }
        if (round > 0)
            sleep_ms(200);   /* it answered before DONE: not a hot loop */
        char url[768], *ans = NULL;
        long status;
        snprintf(url, sizeof url, "%s/projects/%s/zones/%s/operations/%s/wait", a->endpoint,
                 a->project, zone, name);
        if (authed(g, a, "POST", url, NULL, &ans, &status, cls, calls, err) < 0) {
            if (*cls != DRV_PROV_RETRY) {
                json_decref(op);
                return -1;
            }
            continue;   /* a transport hiccup while polling: poll again */
        }
        if (status != 200) {
            drv_prov_class_t c = api_error(status, ans, "zoneOperations.wait", next_zone, NULL,
                                           0, err);
            free(ans);
            if (c == DRV_PROV_RETRY)
                continue;
            json_decref(op);
            *cls = c;
            return -1;
        }
        json_t *next = json_loads(ans, 0, NULL);
        free(ans);
        if (next) {
            json_decref(op);
            op = next;
        }
    }
    const json_t *e0 = json_array_get(json_object_get(json_object_get(op, "error"), "errors"), 0);
    int rc = 0;
    if (e0) {
        const char *code = json_string_value(json_object_get(e0, "code"));
        const char *msg = json_string_value(json_object_get(e0, "message"));
        long hs = (long)json_integer_value(json_object_get(op, "httpErrorStatusCode"));
        *cls = drv_gce_classify(hs, code ? code : "", msg, next_zone);
        rc = drv_err(err, hs >= 400 && hs < 600 ? (int)hs : 502, "gcp", "",
                     "GCP insert in %s: %s: %s", zone, code ? code : "(no code)",
                     msg ? msg : "(no message)");
    }
    json_decref(op);
    return rc;
}

int drv_gce_insert(drv_gce_t *g, const drv_gce_account_t *a, const drv_gce_insert_t *in,
                   drv_prov_class_t *cls, bool *next_zone, unsigned *calls, drv_error_t *err)
{
    *next_zone = false;
    json_t *b = insert_body(in);
    char *body = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    if (!body) {
        *cls = DRV_PROV_RETRY;
        return drv_err_internal(err, "out of memory");
    }
    char rid[37], url[768];
    uuid4(rid);   /* the retries below reuse it: the API runs the insert once */
    snprintf(url, sizeof url, "%s/projects/%s/zones/%s/instances?requestId=%s", a->endpoint,
             a->project, in->zone, rid);
    int rc = -1;
    for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
        if (attempt)
            sleep_ms(500 << (attempt - 1));   /* 0.5, 1, 2 s */
        char *ans = NULL, reason[64] = "";
        long status;
        if (authed(g, a, "POST", url, body, &ans, &status, cls, calls, err) < 0) {
            if (*cls == DRV_PROV_RETRY)
                continue;
            break;
        }
        if (status == 200) {
            json_t *op = json_loads(ans, 0, NULL);
            free(ans);
            if (!op) {
                *cls = DRV_PROV_RETRY;
                drv_err(err, 502, "gcp", "", "GCP insert: the answer is not JSON");
                continue;
            }
            rc = wait_op(g, a, in->zone, op, cls, next_zone, calls, err);
            json_decref(op);
            if (rc < 0 && *cls == DRV_PROV_RETRY && !*next_zone)
                continue;
            break;
        }
        *cls = api_error(status, ans, "instances.insert", next_zone, reason, sizeof reason, err);
        free(ans);
        if (status == 409 && strcmp(reason, "alreadyExists") == 0) {
            rc = 0;   /* made by an earlier attempt: it is ours (the name is the node's) */
            break;
        }
        if (*cls != DRV_PROV_RETRY)
            break;
    }
    free(body);
    if (rc == 0) {
        *cls = DRV_PROV_OK;
        drv_err_clear(err);
    }
    return rc;
}

/* --- delete ---------------------------------------------------------------- */

int drv_gce_delete(drv_gce_t *g, const drv_gce_account_t *a, const char *zone,
                   const char *name, drv_prov_class_t *cls, unsigned *calls, drv_error_t *err)
{
    char rid[37], url[768];
    uuid4(rid);
    snprintf(url, sizeof url, "%s/projects/%s/zones/%s/instances/%s?requestId=%s", a->endpoint,
             a->project, zone, name, rid);
    for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
        if (attempt)
            sleep_ms(500 << (attempt - 1));
        char *ans = NULL;
        long status;
        bool nz;
        if (authed(g, a, "DELETE", url, NULL, &ans, &status, cls, calls, err) < 0) {
            if (*cls == DRV_PROV_RETRY)
                continue;
            return -1;
        }
        if (status == 200 || status == 404) {   /* 404: already gone */
            free(ans);
            *cls = DRV_PROV_OK;
            return 0;
        }
        *cls = api_error(status, ans, "instances.delete", &nz, NULL, 0, err);
        free(ans);
        if (*cls != DRV_PROV_RETRY)
            return -1;
    }
    return -1;
}

/* --- list ------------------------------------------------------------------ */

static void state_of(const char *status, char *out, size_t len)
{
    static const char *const map[][2] = {
        {"PROVISIONING", "pending"}, {"STAGING", "pending"},   {"RUNNING", "running"},
        {"REPAIRING", "running"},    {"STOPPING", "stopping"}, {"SUSPENDING", "stopping"},
        {"SUSPENDED", "stopped"},    {"STOPPED", "stopped"},   {"TERMINATED", "stopped"},
    };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (status && strcmp(status, map[i][0]) == 0) {
            snprintf(out, len, "%s", map[i][1]);
            return;
        }
    snprintf(out, len, "pending");
}

static void label(const json_t *labels, const char *k, char *dst, size_t len)
{
    snprintf(dst, len, "%s", json_string_value(json_object_get(labels, k)) ?: "");
}

int drv_gce_parse_list(const char *body, const char *region, drv_ec2_instance_t **out,
                       size_t *n, size_t *cap, char *next, size_t next_len, drv_error_t *err)
{
    json_t *o = json_loads(body, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return drv_err(err, 502, "gcp", "", "GCP aggregatedList: the answer is not a JSON "
                       "object");
    }
    snprintf(next, next_len, "%s",
             json_string_value(json_object_get(o, "nextPageToken")) ?: "");
    const char *scope;
    json_t *sv;
    size_t rlen = strlen(region);
    json_object_foreach(json_object_get(o, "items"), scope, sv) {
        /* "zones/us-central1-a": {"instances": [...]} or {"warning": ...} */
        if (strncmp(scope, "zones/", 6) != 0 || strncmp(scope + 6, region, rlen) != 0 ||
            scope[6 + rlen] != '-')
            continue;
        size_t i;
        json_t *it;
        json_array_foreach(json_object_get(sv, "instances"), i, it) {
            if (*n == *cap) {
                size_t nc = *cap ? *cap * 2 : 16;
                drv_ec2_instance_t *nv = realloc(*out, nc * sizeof *nv);
                if (!nv) {
                    json_decref(o);
                    return drv_err_internal(err, "out of memory");
                }
                *out = nv;
                *cap = nc;
            }
            drv_ec2_instance_t *x = &(*out)[*n];
            memset(x, 0, sizeof *x);
            snprintf(x->id, sizeof x->id, "%s",
                     json_string_value(json_object_get(it, "name")) ?: "");
            snprintf(x->zone, sizeof x->zone, "%s",
                     last_segment(json_string_value(json_object_get(it, "zone"))));
            if (!x->zone[0])
                snprintf(x->zone, sizeof x->zone, "%s", scope + 6);
            snprintf(x->type, sizeof x->type, "%s",
                     last_segment(json_string_value(json_object_get(it, "machineType"))));
            state_of(json_string_value(json_object_get(it, "status")), x->state,
                     sizeof x->state);
            const char *pm = json_string_value(json_object_get(
                json_object_get(it, "scheduling"), "provisioningModel"));
            x->spot = pm && strcmp(pm, "SPOT") == 0;
            const json_t *l = json_object_get(it, "labels");
            label(l, "drover-head", x->head, sizeof x->head);
            label(l, "drover-owner", x->owner, sizeof x->owner);
            label(l, "drover-cluster", x->cluster, sizeof x->cluster);
            label(l, "drover-nodepool", x->nodepool, sizeof x->nodepool);
            label(l, "drover-node", x->node, sizeof x->node);
            if (x->id[0])
                (*n)++;
        }
    }
    json_decref(o);
    return 0;
}

int drv_gce_list(drv_gce_t *g, const drv_gce_account_t *a, const char *region,
                 const char *head, drv_ec2_instance_t **out, size_t *n, drv_prov_class_t *cls,
                 unsigned *calls, drv_error_t *err)
{
    size_t cap = 0;
    char token[1024] = "", filter[256], ef[600];
    *out = NULL;
    *n = 0;
    snprintf(filter, sizeof filter, "labels.drover-head = \"%s\"", head);
    if (drv_ec2_encode(filter, ef, sizeof ef) < 0) {
        *cls = DRV_PROV_GIVE_UP;
        return drv_err_internal(err, "the head id does not fit a filter");
    }
    for (int page = 0; page < MAX_PAGES; page++) {
        char url[2048], et[1100] = "", *ans = NULL;
        long status;
        if (token[0] && drv_ec2_encode(token, et, sizeof et) < 0)
            break;
        snprintf(url, sizeof url, "%s/projects/%s/aggregated/instances?filter=%s&maxResults=%d%s%s",
                 a->endpoint, a->project, ef,
                 a->page_size >= 1 && a->page_size <= 500 ? a->page_size : 500,
                 token[0] ? "&pageToken=" : "", et);
        if (authed(g, a, "GET", url, NULL, &ans, &status, cls, calls, err) < 0)
            goto error;
        if (status != 200) {
            bool nz;
            *cls = api_error(status, ans, "instances.aggregatedList", &nz, NULL, 0, err);
            free(ans);
            goto error;
        }
        int rc = drv_gce_parse_list(ans, region, out, n, &cap, token, sizeof token, err);
        free(ans);
        if (rc < 0) {
            *cls = DRV_PROV_RETRY;
            goto error;
        }
        if (!token[0])
            return 0;
    }
    *cls = DRV_PROV_RETRY;
    drv_err(err, 502, "gcp", "", "GCP aggregatedList: more than %d pages", MAX_PAGES);
error:
    free(*out);
    *out = NULL;
    *n = 0;
    return -1;
}
