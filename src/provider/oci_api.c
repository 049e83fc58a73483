/* oci_api.c — OCI Core Services calls (see oci_api.h): signed requests
 * over libcurl, with the response's opc-next-page header kept. */
#define _GNU_SOURCE
#include "provider/oci_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "common/httpsink.h"
#include "common/util.h"
#include "provider/oci_sign.h"

#define MAX_ANSWER (32 * 1024 * 1024)
#define MAX_PAGES 200
#define ATTEMPTS 4               /* one call's tries on 429/5xx/transport (same retry token) */

/* --- HTTP ------------------------------------------------------------------ */

typedef struct answer {
    drv_httpc_sink_t body;       /* the answer's body */
    char next_page[1024];        /* opc-next-page */
    char request_id[128];        /* opc-request-id (for messages) */
} answer_t;

static void header_value(const char *line, size_t n, const char *name, char *dst, size_t len)
{
    size_t nl = strlen(name);
    if (n <= nl + 1 || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return;
    const char *v = line + nl + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    snprintf(dst, len, "%.*s", (int)(end - v), v);
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ctx)
{
    answer_t *a = ctx;
    size_t n = size * nmemb;
    header_value(p, n, "opc-next-page", a->next_page, sizeof a->next_page);
    header_value(p, n, "opc-request-id", a->request_id, sizeof a->request_id);
    return n;
}

/* The host[:port] and the path of an endpoint URL. */
static void split_url(const char *url, char *host, size_t hlen, const char **path)
{
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    const char *slash = strchr(h, '/');
    snprintf(host, hlen, "%.*s", (int)(slash ? slash - h : (long)strlen(h)), h);
    *path = slash ? slash : "";
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One signed exchange: method, target (path from /20160918 on, with its
 * query), body (NULL: none), extra header (NULL: none). 0 with the answer
 * (*ans->body.data malloc'd) and *status; -1 with err on a transport or signing
 * failure (*cls RETRY or GIVE_UP). */
static int exchange(const drv_oci_account_t *a, const char *method, const char *target,
                    const char *body, const char *extra, answer_t *ans, long *status,
                    drv_prov_class_t *cls, drv_error_t *err)
{
    char host[256], keyid[512], date[32], url[2048], full[1600], sha[45] = "";
    const char *base;
    split_url(a->endpoint, host, sizeof host, &base);
    snprintf(full, sizeof full, "%s/%s%s", base, DRV_OCI_API_VERSION, target);
    snprintf(url, sizeof url, "%s/%s%s", a->endpoint, DRV_OCI_API_VERSION, target);
    snprintf(keyid, sizeof keyid, "%s/%s/%s", a->tenancy, a->user, a->fingerprint);
    drv_oci_http_date(drv_now_ms() / 1000, date);
    char *auth = drv_oci_authorization(a->private_key, keyid, method, full, host, date, body,
                                       "application/json", sha, err);
    if (!auth) {
        *cls = DRV_PROV_GIVE_UP;
        return -1;
    }
    char h_auth[2048], h_date[64], h_host[300], h_sha[80];
    snprintf(h_auth, sizeof h_auth, "Authorization: %s", auth);
    free(auth);
    snprintf(h_date, sizeof h_date, "Date: %s", date);
    snprintf(h_host, sizeof h_host, "Host: %s", host);
    snprintf(h_sha, sizeof h_sha, "x-content-sha256: %s", sha);
    memset(ans, 0, sizeof *ans);
    ans->body.max = MAX_ANSWER;
    *status = 0;
    CURL *c = curl_easy_init();
    if (!c) {
        *cls = DRV_PROV_RETRY;
        return drv_err_internal(err, "curl_easy_init failed");
    }
    struct curl_slist *hs = NULL;
    hs = curl_slist_append(hs, h_auth);
    hs = curl_slist_append(hs, h_date);
    hs = curl_slist_append(hs, h_host);
    hs = curl_slist_append(hs, "Accept: application/json");
    hs = curl_slist_append(hs, "Expect:");
    if (body) {
        hs = curl_slist_append(hs, "Content-Type: application/json");
        hs = curl_slist_append(hs, h_sha);
    }
    if (extra)
        hs = curl_slist_append(hs, extra);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, drv_httpc_sink_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &ans->body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, ans);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(hs);
    curl_easy_cleanup(c);
    explicit_bzero(h_auth, sizeof h_auth);
    if (rc != CURLE_OK) {
        free(ans->body.data);
        ans->body.data = NULL;
        *cls = DRV_PROV_RETRY;
        return drv_err(err, 503, "unavailable", "", "OCI: cannot reach %s: %s%s", a->endpoint,
                       curl_easy_strerror(rc), ans->body.too_big ? " (answer too large)" : "");
    }
    if (!ans->body.data && !(ans->body.data = strdup("")))
        return drv_err_internal(err, "out of memory");
    return 0;
}

/* --- errors ---------------------------------------------------------------- */

drv_prov_class_t drv_oci_classify(long status, const char *code, const char *message,
                                  bool *next_ad)
{
    *next_ad = false;
    code = code ? code : "";
    /* no capacity for the shape in this availability domain now */
    if (message && strcasestr(message, "out of host capacity")) {
        *next_ad = true;
        return DRV_PROV_FALLBACK;
    }
    /* the tenancy's service limit or a compartment quota: not this shape */
    if (strcmp(code, "LimitExceeded") == 0 || strcmp(code, "QuotaExceeded") == 0)
        return DRV_PROV_FALLBACK;
    if (status == 429 || strcmp(code, "TooManyRequests") == 0 || status >= 500 || status == 0)
        return DRV_PROV_RETRY;
    return DRV_PROV_GIVE_UP;   /* 401 NotAuthenticated, 404 NotAuthorizedOrNotFound, 400 */
}

/* An error answer ({"code": "...", "message": "..."}) into err; its class. */
static drv_prov_class_t api_error(long status, const answer_t *ans, const char *what,
                                  bool *next_ad, drv_error_t *err)
{
    json_t *o = json_loads(ans->body.data ? ans->body.data : "", 0, NULL);
    const char *code = json_string_value(json_object_get(o, "code"));
    const char *msg = json_string_value(json_object_get(o, "message"));
    drv_prov_class_t cls = drv_oci_classify(status, code, msg, next_ad);
    drv_err(err, status >= 400 && status < 600 ? (int)status : 502, "oracle", "",
            "OCI %s: HTTP %ld %s: %s%s%s%s", what, status, code ? code : "(no code)",
            msg && *msg ? msg : "(no message)", ans->request_id[0] ? " (opc-request-id " : "",
            ans->request_id, ans->request_id[0] ? ")" : "");
    json_decref(o);
    return cls;
}

/* A call with its retries: 429, 5xx other than capacity, and a lost answer
 * are tried again (0.5, 1, 2 s) with the same request (and retry token).
 * 0 with *ans for a 2xx (or, for DELETE, 404); -1 with *cls and err. */
static int call(const drv_oci_account_t *a, const char *method, const char *target,
                const char *body, const char *extra, const char *what, answer_t *ans,
                drv_prov_class_t *cls, bool *next_ad, unsigned *calls, drv_error_t *err)
{
    *next_ad = false;
    for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
        if (attempt)
            sleep_ms(500 << (attempt - 1));
        long status;
        (*calls)++;
        if (exchange(a, method, target, body, extra, ans, &status, cls, err) < 0) {
            if (*cls == DRV_PROV_RETRY)
                continue;
            return -1;
        }
        if ((status >= 200 && status < 300) || (status == 404 && strcmp(method, "DELETE") == 0))
            return 0;
        *cls = api_error(status, ans, what, next_ad, err);
        free(ans->body.data);
        ans->body.data = NULL;
        if (*cls != DRV_PROV_RETRY)
            return -1;
    }
    return -1;
}

/* --- launch ---------------------------------------------------------------- */

static void lifecycle(const char *st, char *out, size_t len)
{
    static const char *const map[][2] = {
        {"PROVISIONING", "pending"}, {"STARTING", "pending"},     {"MOVING", "pending"},
        {"CREATING_IMAGE", "running"}, {"RUNNING", "running"},   {"STOPPING", "stopping"},
        {"STOPPED", "stopped"},      {"TERMINATING", "shutting-down"},
        {"TERMINATED", "terminated"},
    };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (st && strcmp(st, map[i][0]) == 0) {
            snprintf(out, len, "%s", map[i][1]);
            return;
        }
    snprintf(out, len, "pending");
}

static void fill(const json_t *it, drv_ec2_instance_t *x)
{
    memset(x, 0, sizeof *x);
    snprintf(x->id, sizeof x->id, "%s", json_string_value(json_object_get(it, "id")) ?: "");
    snprintf(x->zone, sizeof x->zone, "%s",
             json_string_value(json_object_get(it, "availabilityDomain")) ?: "");
    snprintf(x->type, sizeof x->type, "%s", json_string_value(json_object_get(it, "shape")) ?: "");
    lifecycle(json_string_value(json_object_get(it, "lifecycleState")), x->state,
              sizeof x->state);
    x->spot = json_is_object(json_object_get(it, "preemptibleInstanceConfig"));
    const json_t *t = json_object_get(it, "freeformTags");
    static const char *const keys[] = {"drover-head", "drover-owner", "drover-cluster",
                                       "drover-nodepool", "drover-node"};
    char *dst[] = {x->head, x->owner, x->cluster, x->nodepool, x->node};
    for (size_t k = 0; k < 5; k++)
        snprintf(dst[k], 64, "%s", json_string_value(json_object_get(t, keys[k])) ?: "");
}

static void retry_token(char out[65])
{
    char h[33];
    if (drv_random_hex(16, h) < 0)
        snprintf(h, sizeof h, "%016llx%016llx", (unsigned long long)drv_mono_ms(),
                 (unsigned long long)drv_now_ms());
    snprintf(out, 65, "drover-%s", h);
}

int drv_oci_launch(const drv_oci_account_t *a, const drv_oci_launch_t *l,
                   drv_ec2_instance_t *out, drv_prov_class_t *cls, bool *next_ad,
                   unsigned *calls, drv_error_t *err)
{
    size_t n = strlen(l->user_data);
    char *b64 = malloc(4 * ((n + 2) / 3) + 1);
    if (!b64) {
        *cls = DRV_PROV_RETRY;
        return drv_err_internal(err, "out of memory");
    }
    EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)l->user_data, (int)n);
    json_t *tags = json_object();
    for (size_t i = 0; i < l->n_tags; i++)
        json_object_set_new(tags, l->tags[i][0], json_string(l->tags[i][1]));
    json_t *b = json_pack(
        "{s:s, s:s, s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s}, s:{s:s}, s:o}",
        "availabilityDomain", l->availability_domain, "compartmentId", a->compartment, "shape",
        l->shape, "displayName", l->display_name, "sourceDetails", "sourceType", "image",
        "imageId", l->image, "createVnicDetails", "subnetId", l->subnet, "displayName",
        l->display_name, "metadata", "user_data", b64, "freeformTags", tags);
    free(b64);
    /* assignPublicIp is left to the subnet's default (a private subnet refuses true) */
    if (b && l->nsg && l->nsg[0])
        json_object_set_new(json_object_get(b, "createVnicDetails"), "nsgIds",
                            json_pack("[s]", l->nsg));
    if (b && l->ocpus > 0)
        json_object_set_new(b, "shapeConfig", json_pack("{s:i, s:I}", "ocpus", l->ocpus,
                                                        "memoryInGBs",
                                                        (json_int_t)l->memory_gb));
    if (b && l->preemptible)
        json_object_set_new(b, "preemptibleInstanceConfig",
                            json_pack("{s:{s:s, s:b}}", "preemptionAction", "type", "TERMINATE",
                                      "preserveBootVolume", 0));
    char *body = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    if (!body) {
        *cls = DRV_PROV_RETRY;
        return drv_err_internal(err, "out of memory");
    }
    char tok[65], h_tok[100];
    retry_token(tok);   /* every try of this launch: the service runs it once */
    snprintf(h_tok, sizeof h_tok, "opc-retry-token: %s", tok);
    answer_t ans;
    int rc = call(a, "POST", "/instances", body, h_tok, "LaunchInstance", &ans, cls, next_ad,
                  calls, err);
    free(body);
    if (rc < 0)
        return -1;
    json_t *o = json_loads(ans.body.data, 0, NULL);
    free(ans.body.data);
    if (!json_is_object(o) || !json_is_string(json_object_get(o, "id"))) {
        json_decref(o);
        *cls = DRV_PROV_RETRY;
        return drv_err(err, 502, "oracle", "", "OCI LaunchInstance: no instance id in the "
                       "answer");
    }
    fill(o, out);
    json_decref(o);
    *cls = DRV_PROV_OK;
    return 0;
}

/* --- terminate ------------------------------------------------------------- */

int drv_oci_terminate(const drv_oci_account_t *a, const char *id, drv_prov_class_t *cls,
                      unsigned *calls, drv_error_t *err)
{
    char target[256], eid[200];
    if (drv_ec2_encode(id, eid, sizeof eid) < 0) {
        *cls = DRV_PROV_GIVE_UP;
        return drv_err_internal(err, "instance id %s does not fit", id);
    }
    snprintf(target, sizeof target, "/instances/%s?preserveBootVolume=false", eid);
    answer_t ans;
    bool nad;
    int rc = call(a, "DELETE", target, NULL, NULL, "TerminateInstance", &ans, cls, &nad, calls,
                  err);
    if (rc == 0)
        free(ans.body.data);
    return rc;
}

/* --- list ------------------------------------------------------------------ */

int drv_oci_parse_list(const char *body, const char *head, drv_ec2_instance_t **out, size_t *n,
                       size_t *cap, drv_error_t *err)
{
    json_t *o = json_loads(body, 0, NULL);
    if (!json_is_array(o)) {
        json_decref(o);
        return drv_err(err, 502, "oracle", "", "OCI ListInstances: the answer is not a JSON "
                       "array");
    }
    size_t i;
    json_t *it;
    json_array_foreach(o, i, it) {
        const char *h = json_string_value(json_object_get(json_object_get(it, "freeformTags"),
                                                          "drover-head"));
        const char *st = json_string_value(json_object_get(it, "lifecycleState"));
        if (!h || strcmp(h, head) != 0 || (st && strcmp(st, "TERMINATED") == 0))
            continue;
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
        fill(it, &(*out)[*n]);
        if ((*out)[*n].id[0])
            (*n)++;
    }
    json_decref(o);
    return 0;
}

int drv_oci_list(const drv_oci_account_t *a, const char *head, drv_ec2_instance_t **out,
                 size_t *n, drv_prov_class_t *cls, unsigned *calls, drv_error_t *err)
{
    size_t cap = 0;
    char page[1024] = "", ec[200];
    *out = NULL;
    *n = 0;
    if (drv_ec2_encode(a->compartment, ec, sizeof ec) < 0) {
        *cls = DRV_PROV_GIVE_UP;
        return drv_err_internal(err, "the compartment id does not fit");
    }
    for (int p = 0; p < MAX_PAGES; p++) {
        char target[1600], ep[1100] = "";
        if (page[0] && drv_ec2_encode(page, ep, sizeof ep) < 0)
            break;
        snprintf(target, sizeof target, "/instances?compartmentId=%s&limit=%d%s%s", ec,
                 a->page_size >= 1 && a->page_size <= 1000 ? a->page_size : 100,
                 page[0] ? "&page=" : "", ep);
        answer_t ans;
        bool nad;
        if (call(a, "GET", target, NULL, NULL, "ListInstances", &ans, cls, &nad, calls, err) < 0)
            goto error;
        int rc = drv_oci_parse_list(ans.body.data, head, out, n, &cap, err);
        free(ans.body.data);
        if (rc < 0) {
            *cls = DRV_PROV_RETRY;
            goto error;
        }
        snprintf(page, sizeof page, "%s", ans.next_page);
        if (!page[0])
            return 0;
    }
    *cls = DRV_PROV_RETRY;
    drv_err(err, 502, "oracle", "", "OCI ListInstances: more than %d pages", MAX_PAGES);
error:
    free(*out);
    *out = NULL;
    *n = 0;
    return -1;
}
