/* vultr_api.c — Vultr API v2 calls (see vultr_api.h). */
#define _GNU_SOURCE
#include "provider/vultr_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "provider/gce.h"

#define MAX_PAGES 200
#define ATTEMPTS 4

drv_prov_class_t drv_vultr_classify(long status, const char *message)
{
    if (status == 429 || status >= 500 || status == 0)
        return DRV_PROV_RETRY;
    /* capacity: the plan is out of stock or not offered in the region now */
    if (message && (strcasestr(message, "not available") || strcasestr(message, "out of stock") ||
                    strcasestr(message, "sold out")))
        return DRV_PROV_FALLBACK;
    return DRV_PROV_GIVE_UP;   /* 400, 401 (key), 403 (key's IP ACL), 404, 422 */
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One call: 429 retried here (backoff 0.5, 1, 2 s). 0 with *ans and
 * *status for any answer other than 429, -1 with *cls. */
static int call(const drv_vultr_account_t *a, const char *method, const char *path,
                const char *body, char **ans, long *status, drv_prov_class_t *cls,
                unsigned *calls, drv_error_t *err)
{
    char url[1024], auth[300];
    snprintf(url, sizeof url, "%s%s", a->endpoint, path);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", a->api_key);
    const char *hs[] = {auth, "Content-Type: application/json", "Expect:", NULL};
    int rc = -1;
    for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
        if (attempt)
            sleep_ms(500 << (attempt - 1));
        (*calls)++;
        if (drv_gce_http(method, url, hs, body, ans, status, err) < 0) {
            *cls = DRV_PROV_RETRY;
            drv_err_prefix(err, "Vultr: ");
            break;   /* the request may have run: no blind retry of a create */
        }
        if (*status != 429) {
            rc = 0;
            break;
        }
        free(*ans);
        *ans = NULL;
        *cls = DRV_PROV_RETRY;
        drv_err(err, 429, "vultr", "", "Vultr %s %s: HTTP 429: rate limit exceeded", method,
                path);
    }
    explicit_bzero(auth, sizeof auth);
    return rc;
}

/* An error answer ({"error": "...", "status": N}) into err; its class. */
static drv_prov_class_t api_error(long status, const char *body, const char *what,
                                  drv_error_t *err)
{
    json_t *o = json_loads(body ? body : "", 0, NULL);
    const char *msg = json_string_value(json_object_get(o, "error"));
    drv_prov_class_t cls = drv_vultr_classify(status, msg);
    drv_err(err, status >= 400 && status < 600 ? (int)status : 502, "vultr", "",
            "Vultr %s: HTTP %ld: %s", what, status,
            msg && *msg ? msg : status == 401 ? "Invalid API key" : "(no message)");
    json_decref(o);
    return cls;
}

int drv_vultr_available(const drv_vultr_account_t *a, const char *region, const char *plan,
                        bool *yes, drv_prov_class_t *cls, unsigned *calls, drv_error_t *err)
{
    char path[256], *ans = NULL;
    long status;
    *yes = false;
    snprintf(path, sizeof path, "/regions/%s/availability", region);
    if (call(a, "GET", path, NULL, &ans, &status, cls, calls, err) < 0)
        return -1;
    if (status != 200) {
        *cls = api_error(status, ans, "region availability", err);
        free(ans);
        return -1;
    }
    json_t *o = json_loads(ans, 0, NULL);
    free(ans);
    const json_t *plans = json_object_get(o, "available_plans");
    if (!json_is_array(plans)) {
        json_decref(o);
        *cls = DRV_PROV_RETRY;
        return drv_err(err, 502, "vultr", "", "Vultr region availability: no available_plans");
    }
    size_t i;
    json_t *p;
    json_array_foreach(plans, i, p)
        if (json_is_string(p) && strcmp(json_string_value(p), plan) == 0)
            *yes = true;
    json_decref(o);
    return 0;
}

static void state_of(const json_t *it, char *out, size_t len)
{
    const char *st = json_string_value(json_object_get(it, "status"));
    const char *ps = json_string_value(json_object_get(it, "power_status"));
    if (st && strcmp(st, "active") == 0)
        snprintf(out, len, "%s", ps && strcmp(ps, "stopped") == 0 ? "stopped" : "running");
    else if (st && strcmp(st, "suspended") == 0)
        snprintf(out, len, "stopped");
    else
        snprintf(out, len, "pending");   /* pending, resizing */
}

static void fill(const json_t *it, drv_ec2_instance_t *x)
{
    memset(x, 0, sizeof *x);
    snprintf(x->id, sizeof x->id, "%s", json_string_value(json_object_get(it, "id")) ?: "");
    snprintf(x->zone, sizeof x->zone, "%s",
             json_string_value(json_object_get(it, "region")) ?: "");
    snprintf(x->type, sizeof x->type, "%s", json_string_value(json_object_get(it, "plan")) ?: "");
    state_of(it, x->state, sizeof x->state);
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(it, "tags"), i, t) {
        const char *s = json_string_value(t);
        const char *eq = s ? strchr(s, '=') : NULL;
        if (!eq)
            continue;
        static const char *const keys[] = {"drover-head", "drover-owner", "drover-cluster",
                                           "drover-nodepool", "drover-node"};
        char *dst[] = {x->head, x->owner, x->cluster, x->nodepool, x->node};
        for (size_t k = 0; k < 5; k++)
            if ((size_t)(eq - s) == strlen(keys[k]) && strncmp(s, keys[k], eq - s) == 0)
                snprintf(dst[k], 64, "%s", eq + 1);
    }
}

int drv_vultr_create(const drv_vultr_account_t *a, const drv_vultr_create_t *c,
                     drv_ec2_instance_t *out, drv_prov_class_t *cls, unsigned *calls,
                     drv_error_t *err)
{
    size_t n = strlen(c->user_data);
    char *b64 = malloc(4 * ((n + 2) / 3) + 1);
    if (!b64) {
        *cls = DRV_PROV_RETRY;
        return drv_err_internal(err, "out of memory");
    }
    EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)c->user_data, (int)n);
    json_t *tags = json_array();
    for (size_t i = 0; i < c->n_tags; i++)
        json_array_append_new(tags, json_string(c->tags[i]));
    json_t *b = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "region", c->region, "plan",
                          c->plan, "label", c->label, "hostname", c->label, "user_data", b64,
                          "tags", tags);
    free(b64);
    /* image: an OS id (digits) or a snapshot id (with drover-agent installed) */
    bool os = c->image[0] && strspn(c->image, "0123456789") == strlen(c->image);
    if (os)
        json_object_set_new(b, "os_id", json_integer(atoll(c->image)));
    else
        json_object_set_new(b, "snapshot_id", json_string(c->image));
    if (c->vpc && c->vpc[0])
        json_object_set_new(b, "attach_vpc", json_pack("[s]", c->vpc));
    if (c->firewall_group && c->firewall_group[0])
        json_object_set_new(b, "firewall_group_id", json_string(c->firewall_group));
    char *body = json_dumps(b, JSON_COMPACT), *ans = NULL;
    json_decref(b);
    long status;
    int rc = body ? call(a, "POST", "/instances", body, &ans, &status, cls, calls, err) : -1;
    free(body);
    if (rc < 0)
        return -1;
    if (status != 202 && status != 201 && status != 200) {
        *cls = api_error(status, ans, "create instance", err);
        free(ans);
        return -1;
    }
    json_t *o = json_loads(ans, 0, NULL);
    free(ans);
    const json_t *it = json_object_get(o, "instance");
    if (!json_is_object(it) || !json_is_string(json_object_get(it, "id"))) {
        json_decref(o);
        *cls = DRV_PROV_RETRY;
        return drv_err(err, 502, "vultr", "", "Vultr create instance: no instance id in the "
                       "answer");
    }
    fill(it, out);
    json_decref(o);
    return 0;
}

int drv_vultr_delete(const drv_vultr_account_t *a, const char *id, drv_prov_class_t *cls,
                     unsigned *calls, drv_error_t *err)
{
    char path[128], *ans = NULL;
    long status;
    snprintf(path, sizeof path, "/instances/%s", id);
    if (call(a, "DELETE", path, NULL, &ans, &status, cls, calls, err) < 0)
        return -1;
    int rc = 0;
    if (status != 204 && status != 200 && status != 404) {
        *cls = api_error(status, ans, "delete instance", err);
        rc = -1;
    }
    free(ans);
    return rc;
}

int drv_vultr_parse_list(const char *body, const char *region, drv_ec2_instance_t **out,
                         size_t *n, size_t *cap, char *next, size_t next_len, drv_error_t *err)
{
    json_t *o = json_loads(body, 0, NULL);
    const json_t *v = json_object_get(o, "instances");
    if (!json_is_array(v)) {
        json_decref(o);
        return drv_err(err, 502, "vultr", "", "Vultr list instances: no instances array");
    }
    snprintf(next, next_len, "%s", json_string_value(json_object_get(
        json_object_get(json_object_get(o, "meta"), "links"), "next")) ?: "");
    size_t i;
    json_t *it;
    json_array_foreach(v, i, it) {
        const char *r = json_string_value(json_object_get(it, "region"));
        if (!r || strcmp(r, region) != 0)
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

int drv_vultr_list(const drv_vultr_account_t *a, const char *region, const char *tag,
                   drv_ec2_instance_t **out, size_t *n, drv_prov_class_t *cls,
                   unsigned *calls, drv_error_t *err)
{
    size_t cap = 0;
    char cursor[512] = "", etag[256];
    *out = NULL;
    *n = 0;
    if (drv_ec2_encode(tag, etag, sizeof etag) < 0) {
        *cls = DRV_PROV_GIVE_UP;
        return drv_err_internal(err, "the head tag does not fit");
    }
    for (int page = 0; page < MAX_PAGES; page++) {
        char path[1400], ec[600] = "", *ans = NULL;
        long status;
        if (cursor[0] && drv_ec2_encode(cursor, ec, sizeof ec) < 0)
            break;
        snprintf(path, sizeof path, "/instances?tag=%s&per_page=%d%s%s", etag,
                 a->per_page >= 1 && a->per_page <= 500 ? a->per_page : 100,
                 cursor[0] ? "&cursor=" : "", ec);
        if (call(a, "GET", path, NULL, &ans, &status, cls, calls, err) < 0)
            goto error;
        if (status != 200) {
            *cls = api_error(status, ans, "list instances", err);
            free(ans);
            goto error;
        }
        int rc = drv_vultr_parse_list(ans, region, out, n, &cap, cursor, sizeof cursor, err);
        free(ans);
        if (rc < 0) {
            *cls = DRV_PROV_RETRY;
            goto error;
        }
        if (!cursor[0])
            return 0;
    }
    *cls = DRV_PROV_RETRY;
    drv_err(err, 502, "vultr", "", "Vultr list instances: more than %d pages", MAX_PAGES);
error:
    free(*out);
    *out = NULL;
    *n = 0;
    return -1;
}
