/* ec2.c — the EC2 Query API client (see ec2.h): form-encoded POSTs to the
 * account's endpoint, Version 2016-11-15, signed with SigV4 (service
 * "ec2"); XML answers walked with libxml2 by element local name, so the
 * namespace and the order of siblings do not matter. No shared state. */
#define _GNU_SOURCE
#include "provider/ec2.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/httpsink.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xml.h"
#include "common/sigv4.h"

#define API_VERSION "2016-11-15"
#define MAX_ANSWER (16 * 1024 * 1024)
#define MAX_PAGES 1000

/* --- form building ---------------------------------------------------------- */

int drv_ec2_encode(const char *s, char *out, size_t n)
{
    return drv_sigv4_uri_encode(s, 0, out, n);
}

typedef struct form {
    char *s;
    size_t len, cap;
    bool bad;
} form_t;

static void form_add(form_t *f, const char *key, const char *value)
{
    size_t vl = strlen(value), need = strlen(key) + 3 * vl + 3;
    if (f->bad)
        return;
    if (f->len + need + 1 > f->cap) {
        size_t ncap = (f->cap ? f->cap * 2 : 1024) + need;
        char *ns = realloc(f->s, ncap);
        if (!ns) {
            f->bad = true;
            return;
        }
        f->s = ns;
        f->cap = ncap;
    }
    int n = sprintf(f->s + f->len, "%s%s=", f->len ? "&" : "", key);
    f->len += (size_t)n;
    if (drv_ec2_encode(value, f->s + f->len, f->cap - f->len) < 0)
        f->bad = true;
    else
        f->len += strlen(f->s + f->len);
}

/* --- errors ---------------------------------------------------------------- */

static const struct {
    const char *code;
    drv_prov_class_t cls;
} error_classes[] = {
    /* capacity and quota: another capacity type or instance type may work */
    {"InsufficientInstanceCapacity", DRV_PROV_FALLBACK},
    {"InsufficientHostCapacity", DRV_PROV_FALLBACK},
    {"InsufficientReservedInstanceCapacity", DRV_PROV_FALLBACK},
    {"SpotMaxPriceTooLow", DRV_PROV_FALLBACK},
    {"MaxSpotInstanceCountExceeded", DRV_PROV_FALLBACK},
    {"InstanceLimitExceeded", DRV_PROV_FALLBACK},
    {"VcpuLimitExceeded", DRV_PROV_FALLBACK},
    {"Unsupported", DRV_PROV_FALLBACK},
    /* transient */
    {"RequestLimitExceeded", DRV_PROV_RETRY},
    {"Throttling", DRV_PROV_RETRY},
    {"InternalError", DRV_PROV_RETRY},
    {"ServiceUnavailable", DRV_PROV_RETRY},
    {"Unavailable", DRV_PROV_RETRY},
    /* a person must act */
    {"AuthFailure", DRV_PROV_GIVE_UP},
    {"InvalidClientTokenId", DRV_PROV_GIVE_UP},
    {"SignatureDoesNotMatch", DRV_PROV_GIVE_UP},
    {"UnauthorizedOperation", DRV_PROV_GIVE_UP},
    {"OptInRequired", DRV_PROV_GIVE_UP},
    {"Blocked", DRV_PROV_GIVE_UP},
    {"InvalidAMIID.NotFound", DRV_PROV_GIVE_UP},
    {"InvalidAMIID.Malformed", DRV_PROV_GIVE_UP},
    {"InvalidSubnetID.NotFound", DRV_PROV_GIVE_UP},
    {"InvalidGroup.NotFound", DRV_PROV_GIVE_UP},
};

drv_prov_class_t drv_ec2_classify(long http_status, const char *code)
{
    for (size_t i = 0; code && i < sizeof error_classes / sizeof error_classes[0]; i++)
        if (strcmp(error_classes[i].code, code) == 0)
            return error_classes[i].cls;
    if (http_status == 0 || http_status >= 500 || http_status == 429)
        return DRV_PROV_RETRY;
    if (http_status == 401 || http_status == 403)
        return DRV_PROV_GIVE_UP;
    return DRV_PROV_GIVE_UP;   /* an unknown 4xx: a bad request retried stays bad */
}

/* --- XML --------------------------------------------------------------------- */


static xmlDoc *parse(const char *xml, size_t len)
{
    return drv_xml_parse(xml, len, MAX_ANSWER);
}

int drv_ec2_parse_error(const char *xml, size_t len, char *code, size_t code_len, char *msg,
                        size_t msg_len)
{
    code[0] = msg[0] = '\0';
    xmlDoc *doc = parse(xml, len);
    if (!doc)
        return -1;
    const xmlNode *e = drv_xml_find(xmlDocGetRootElement(doc), "Error");
    if (e) {
        drv_xml_text(drv_xml_child(e, "Code"), code, code_len);
        drv_xml_text(drv_xml_child(e, "Message"), msg, msg_len);
    }
    xmlFreeDoc(doc);
    return code[0] ? 0 : -1;
}

static long long parse_time(const char *s)
{
    struct tm tm = {0};
    if (!s[0] || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
        return 0;
    return (long long)timegm(&tm);
}

static void instance_of(const xmlNode *it, drv_ec2_instance_t *x)
{
    char buf[64];
    memset(x, 0, sizeof *x);
    drv_xml_text(drv_xml_child(it, "instanceId"), x->id, sizeof x->id);
    drv_xml_text(drv_xml_child(drv_xml_child(it, "instanceState"), "name"), x->state, sizeof x->state);
    drv_xml_text(drv_xml_child(it, "instanceType"), x->type, sizeof x->type);
    drv_xml_text(drv_xml_child(it, "instanceLifecycle"), buf, sizeof buf);
    x->spot = strcmp(buf, "spot") == 0;
    drv_xml_text(drv_xml_child(it, "launchTime"), buf, sizeof buf);
    x->launched = parse_time(buf);
    for (const xmlNode *t = drv_xml_child(drv_xml_child(it, "tagSet"), "item"); t; t = t->next) {
        if (!drv_xml_named(t, "item"))
            continue;
        char key[64], value[128];
        drv_xml_text(drv_xml_child(t, "key"), key, sizeof key);
        drv_xml_text(drv_xml_child(t, "value"), value, sizeof value);
        static const struct {
            const char *key;
            size_t off;
        } tags[] = {
            {"drover:head", offsetof(drv_ec2_instance_t, head)},
            {"drover:owner", offsetof(drv_ec2_instance_t, owner)},
            {"drover:cluster", offsetof(drv_ec2_instance_t, cluster)},
            {"drover:nodepool", offsetof(drv_ec2_instance_t, nodepool)},
            {"drover:node", offsetof(drv_ec2_instance_t, node)},
        };
        for (size_t k = 0; k < sizeof tags / sizeof tags[0]; k++)
            if (strcmp(key, tags[k].key) == 0)
                snprintf((char *)x + tags[k].off, 64, "%s", value);
    }
}

static int append(drv_ec2_instance_t **out, size_t *n, size_t *cap, const xmlNode *it)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        drv_ec2_instance_t *nv = realloc(*out, ncap * sizeof *nv);
        if (!nv)
            return -1;
        *out = nv;
        *cap = ncap;
    }
    instance_of(it, &(*out)[(*n)++]);
    return 0;
}

/* instancesSet items under node (RunInstances: the root; DescribeInstances:
 * each reservationSet item). */
static int collect(const xmlNode *set, drv_ec2_instance_t **out, size_t *n, size_t *cap)
{
    for (const xmlNode *it = set ? set->children : NULL; it; it = it->next)
        if (drv_xml_named(it, "item") && append(out, n, cap, it) < 0)
            return -1;
    return 0;
}

int drv_ec2_parse_instances(const char *xml, size_t len, drv_ec2_instance_t **out, size_t *n,
                            size_t *cap, char *next_token, size_t nt_len, drv_error_t *err)
{
    if (next_token && nt_len)
        next_token[0] = '\0';
    xmlDoc *doc = parse(xml, len);
    if (!doc)
        return drv_err(err, 502, "bad_gateway", "", "EC2 answered with malformed XML");
    const xmlNode *root = xmlDocGetRootElement(doc);
    int rc = 0;
    const xmlNode *rs = drv_xml_child(root, "reservationSet");
    if (rs) {
        for (const xmlNode *r = rs->children; r && rc == 0; r = r->next)
            if (drv_xml_named(r, "item"))
                rc = collect(drv_xml_child(r, "instancesSet"), out, n, cap);
    } else {
        rc = collect(drv_xml_child(root, "instancesSet"), out, n, cap);
    }
    if (next_token && nt_len)
        drv_xml_text(drv_xml_child(root, "nextToken"), next_token, nt_len);
    xmlFreeDoc(doc);
    if (rc < 0)
        return drv_err_internal(err, "out of memory");
    return 0;
}

/* --- transport --------------------------------------------------------------- */

typedef drv_httpc_sink_t answer_t;   /* the body of an EC2 answer, at most MAX_ANSWER */

/* host[:port] of an endpoint URL. */
static int host_of(const char *url, char *host, size_t len)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t n = strcspn(p, "/?#");
    if (n == 0 || n >= len)
        return -1;
    memcpy(host, p, n);
    host[n] = '\0';
    return 0;
}

/* POST the form; on 2xx *answer gets the body. -1 with cls/err otherwise. */
static int call(const drv_ec2_account_t *a, const char *action, form_t *f, answer_t *ans,
                drv_prov_class_t *cls, drv_error_t *err)
{
    char host[256], amz[17], authz[768], url[300];
    *cls = DRV_PROV_GIVE_UP;
    memset(ans, 0, sizeof *ans);
    ans->max = MAX_ANSWER;
    if (f->bad) {
        free(f->s);
        return drv_err_internal(err, "EC2 %s: request too large", action);
    }
    if (!a->endpoint[0] || host_of(a->endpoint, host, sizeof host) < 0) {
        free(f->s);
        return drv_err_invalid(err, "endpoint", "EC2 endpoint '%s' is not a URL", a->endpoint);
    }
    drv_sigv4_amz_date(time(NULL), amz);
    static const char ctype[] = "application/x-www-form-urlencoded; charset=utf-8";
    drv_sigv4_req_t sr = {
        .method = "POST", .path = "/", .query = "", .host = host, .content_type = ctype,
        .amz_date = amz, .body = f->s, .body_len = f->len, .region = a->region,
        .service = "ec2", .access_key_id = a->access_key_id,
        .secret_access_key = a->secret_access_key,
    };
    if (drv_sigv4_authorization(&sr, authz, sizeof authz) < 0) {
        free(f->s);
        return drv_err_invalid(err, "credential", "cannot sign the EC2 request (is the "
                               "credential complete?)");
    }
    snprintf(url, sizeof url, "%s%s", a->endpoint,
             a->endpoint[strlen(a->endpoint) - 1] == '/' ? "" : "/");
    CURL *c = curl_easy_init();
    if (!c) {
        free(f->s);
        *cls = DRV_PROV_RETRY;
        return drv_err_internal(err, "curl_easy_init failed");
    }
    char h_ct[128], h_date[64], h_auth[800];
    snprintf(h_ct, sizeof h_ct, "Content-Type: %s", ctype);
    snprintf(h_date, sizeof h_date, "X-Amz-Date: %s", amz);
    snprintf(h_auth, sizeof h_auth, "Authorization: %s", authz);
    struct curl_slist *hs = NULL;
    hs = curl_slist_append(hs, h_ct);
    hs = curl_slist_append(hs, h_date);
    hs = curl_slist_append(hs, h_auth);
    hs = curl_slist_append(hs, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, f->s);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)f->len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, drv_httpc_sink_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, ans);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hs);
    curl_easy_cleanup(c);
    explicit_bzero(h_auth, sizeof h_auth);
    free(f->s);
    f->s = NULL;
    if (rc != CURLE_OK) {
        *cls = DRV_PROV_RETRY;
        drv_err(err, 503, "unavailable", "", "EC2 %s: cannot reach %s: %s%s", action,
                a->endpoint, curl_easy_strerror(rc), ans->too_big ? " (answer too large)" : "");
        goto error;
    }
    if (status / 100 != 2) {
        char code[96], msg[256];
        if (drv_ec2_parse_error(ans->data ? ans->data : "", ans->len, code, sizeof code, msg,
                                sizeof msg) < 0)
            snprintf(code, sizeof code, "HTTP%ld", status), msg[0] = '\0';
        *cls = drv_ec2_classify(status, code);
        drv_err(err, *cls == DRV_PROV_GIVE_UP ? 422 : 503, code, "", "EC2 %s failed: %s: %s",
                action, code, msg[0] ? msg : "(no message)");
        goto error;
    }
    *cls = DRV_PROV_OK;
    return 0;
error:
    free(ans->data);
    ans->data = NULL;
    return -1;
}

static void base_form(form_t *f, const char *action)
{
    memset(f, 0, sizeof *f);
    form_add(f, "Action", action);
    form_add(f, "Version", API_VERSION);
}

static char *base64(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (out)
        EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
    return out;
}

int drv_ec2_run_instance(const drv_ec2_account_t *a, const drv_ec2_run_t *r, char id_out[32],
                         drv_prov_class_t *cls, drv_error_t *err)
{
    form_t f;
    base_form(&f, "RunInstances");
    form_add(&f, "ImageId", r->image);
    form_add(&f, "InstanceType", r->type);
    form_add(&f, "MinCount", "1");
    form_add(&f, "MaxCount", "1");
    if (r->subnet && r->subnet[0])
        form_add(&f, "SubnetId", r->subnet);
    if (r->security_group && r->security_group[0])
        form_add(&f, "SecurityGroupId.1", r->security_group);
    if (r->client_token && r->client_token[0])
        form_add(&f, "ClientToken", r->client_token);
    if (r->spot) {
        form_add(&f, "InstanceMarketOptions.MarketType", "spot");
        form_add(&f, "InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time");
        form_add(&f, "InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior",
                 "terminate");
    }
    if (r->user_data) {
        char *b64 = base64(r->user_data);
        if (!b64) {
            free(f.s);
            *cls = DRV_PROV_RETRY;
            return drv_err_internal(err, "out of memory");
        }
        form_add(&f, "UserData", b64);
        free(b64);
    }
    if (r->n_tags) {
        form_add(&f, "TagSpecification.1.ResourceType", "instance");
        for (size_t i = 0; i < r->n_tags && i < DRV_EC2_MAX_TAGS; i++) {
            char k[64];
            snprintf(k, sizeof k, "TagSpecification.1.Tag.%zu.Key", i + 1);
            form_add(&f, k, r->tags[i][0]);
            snprintf(k, sizeof k, "TagSpecification.1.Tag.%zu.Value", i + 1);
            form_add(&f, k, r->tags[i][1]);
        }
    }
    answer_t ans;
    if (call(a, "RunInstances", &f, &ans, cls, err) < 0)
        return -1;
    drv_ec2_instance_t *v = NULL;
    size_t n = 0, cap = 0;
    int rc = drv_ec2_parse_instances(ans.data, ans.len, &v, &n, &cap, NULL, 0, err);
    free(ans.data);
    if (rc == 0 && n == 0)
        rc = drv_err(err, 502, "bad_gateway", "", "EC2 RunInstances answered with no instance");
    if (rc == 0)
        snprintf(id_out, 32, "%s", v[0].id);
    free(v);
    if (rc < 0)
        *cls = DRV_PROV_RETRY;
    return rc;
}

int drv_ec2_terminate(const drv_ec2_account_t *a, const char *const *ids, size_t n,
                      drv_prov_class_t *cls, drv_error_t *err)
{
    form_t f;
    base_form(&f, "TerminateInstances");
    for (size_t i = 0; i < n && i < 100; i++) {
        char k[32];
        snprintf(k, sizeof k, "InstanceId.%zu", i + 1);
        form_add(&f, k, ids[i]);
    }
    answer_t ans;
    if (call(a, "TerminateInstances", &f, &ans, cls, err) < 0) {
        if (strcmp(err->code, "InvalidInstanceID.NotFound") == 0) {
            *cls = DRV_PROV_OK;   /* already gone */
            return 0;
        }
        return -1;
    }
    free(ans.data);
    return 0;
}

int drv_ec2_describe(const drv_ec2_account_t *a, const char *head, drv_ec2_instance_t **out,
                     size_t *n, drv_prov_class_t *cls, drv_error_t *err)
{
    size_t cap = 0;
    char token[2048] = "";
    *out = NULL;
    *n = 0;
    for (int page = 0; page < MAX_PAGES; page++) {
        form_t f;
        base_form(&f, "DescribeInstances");
        form_add(&f, "Filter.1.Name", "tag:drover:head");
        form_add(&f, "Filter.1.Value.1", head);
        char max[16];
        snprintf(max, sizeof max, "%d", a->page_size >= 5 && a->page_size <= 1000 ? a->page_size
                                                                                  : 100);
        form_add(&f, "MaxResults", max);
        if (token[0])
            form_add(&f, "NextToken", token);
        answer_t ans;
        if (call(a, "DescribeInstances", &f, &ans, cls, err) < 0)
            goto error;
        int rc = drv_ec2_parse_instances(ans.data, ans.len, out, n, &cap, token, sizeof token, err);
        free(ans.data);
        if (rc < 0) {
            *cls = DRV_PROV_RETRY;
            goto error;
        }
        if (!token[0])
            return 0;
    }
    *cls = DRV_PROV_RETRY;
    drv_err(err, 502, "bad_gateway", "", "EC2 DescribeInstances: more than %d pages", MAX_PAGES);
error:
    free(*out);
    *out = NULL;
    *n = 0;
    return -1;
}
