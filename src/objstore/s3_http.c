/* s3_http.c — the calls the head makes to an S3 store itself (see s3.h):
 * HEAD, ListObjectsV2 (paginated by continuation token), DELETE and the
 * multipart upload's create, complete and abort. Each is one libcurl
 * request signed in the Authorization header with the body's SHA-256 in
 * x-amz-content-sha256; answers are XML walked with libxml2 by element
 * local name (src/common/xml.c). S3 may answer
 * CompleteMultipartUpload with 200 and an <Error> body: that is a failure
 * too. No shared state; each call has its own curl handle. */
#define _GNU_SOURCE
#include "objstore/s3.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/httpsink.h"
#include "common/sigv4.h"
#include "objstore/source.h"
#include "common/util.h"
#include "common/xml.h"

#define MAX_ANSWER (16 * 1024 * 1024)
#define MAX_PAGES 100000

typedef struct answer {
    drv_httpc_sink_t body;   /* at most MAX_ANSWER bytes, NUL-terminated */
    char etag[80];
    long long length;   /* Content-Length of the answer, -1 unknown */
} answer_t;

/* The ETag header, quotes stripped. */
static size_t on_header(char *p, size_t size, size_t nmemb, void *ctx)
{
    answer_t *a = ctx;
    size_t n = size * nmemb;
    if (n > 5 && strncasecmp(p, "etag:", 5) == 0) {
        const char *v = p + 5;
        size_t vl = n - 5;
        while (vl && (*v == ' ' || *v == '"'))
            v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == '"' ||
                      v[vl - 1] == ' '))
            vl--;
        snprintf(a->etag, sizeof a->etag, "%.*s", (int)vl, v);
    }
    return n;
}

/* --- XML ---------------------------------------------------------------------------- */


static xmlDoc *parse(const answer_t *a)
{
    return drv_xml_parse(a->body.data, a->body.len, MAX_ANSWER);
}

/* S3's <Error><Code>…</Code><Message>…</Message></Error>; 0 when there is one. */
static int error_of(const answer_t *a, char *code, size_t code_len, char *msg, size_t msg_len)
{
    code[0] = msg[0] = '\0';
    xmlDoc *doc = parse(a);
    const xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    if (root && drv_xml_named(root, "Error")) {
        drv_xml_text(drv_xml_child(root, "Code"), code, code_len);
        drv_xml_text(drv_xml_child(root, "Message"), msg, msg_len);
    }
    xmlFreeDoc(doc);
    return code[0] ? 0 : -1;
}

/* --- transport -------------------------------------------------------------------- */

/* One signed request. what names it in errors ("HEAD KEY"). On 2xx, 0 and
 * *ans holds the body (caller frees ans->body.data); else -1, err classified. */
static int call(const drv_s3_t *s, const char *what, const char *method, const char *key,
                const char *query, const char *body, answer_t *ans, drv_error_t *err)
{
    char host[320], amz[17], sha[65], authz[768];
    char h_date[64], h_sha[96], h_auth[800];
    char *url = NULL;
    struct curl_slist *hs = NULL;
    CURL *c = NULL;
    long status = 0;
    memset(ans, 0, sizeof *ans);
    ans->body.max = MAX_ANSWER;
    if (drv_s3_url(s, key, query, &url, host, sizeof host, err) < 0)
        return -1;
    drv_sigv4_amz_date(time(NULL), amz);
    drv_sha256_hex(body ? body : "", body ? strlen(body) : 0, sha);
    if (drv_s3_authorization(s, method, key, query, host, amz, sha, authz, sizeof authz) < 0) {
        drv_err_invalid(err, "credential", "%s: cannot sign the request", what);
        goto error;
    }
    if (!(c = curl_easy_init())) {
        drv_err(err, 503, "unavailable", "", "%s: curl_easy_init failed", what);
        goto error;
    }
    snprintf(h_date, sizeof h_date, "X-Amz-Date: %s", amz);
    snprintf(h_sha, sizeof h_sha, "X-Amz-Content-SHA256: %s", sha);
    snprintf(h_auth, sizeof h_auth, "Authorization: %s", authz);
    hs = curl_slist_append(hs, h_date);
    hs = curl_slist_append(hs, h_sha);
    hs = curl_slist_append(hs, h_auth);
    hs = curl_slist_append(hs, "Expect:");
    if (body)
        hs = curl_slist_append(hs, "Content-Type: application/xml");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    if (drv_src_ca_file())
        curl_easy_setopt(c, CURLOPT_CAINFO, drv_src_ca_file());
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)(body ? strlen(body) : 0));
    } else if (strcmp(method, "GET") != 0)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, drv_httpc_sink_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &ans->body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, ans);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_off_t cl = -1;
    curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    ans->length = (long long)cl;
    if (rc != CURLE_OK) {
        drv_err(err, 503, "unavailable", "", "%s: cannot reach %s: %s%s", what, host,
                curl_easy_strerror(rc), ans->body.too_big ? " (answer too large)" : "");
        goto error;
    }
    char code[32], msg[400];
    bool failed = status / 100 != 2;
    if (error_of(ans, code, sizeof code, msg, sizeof msg) == 0)
        failed = true;   /* also a 200 with an <Error> (CompleteMultipartUpload) */
    else if (failed)   /* no body (HEAD) or not S3's XML */
        snprintf(code, sizeof code, "%s", status == 403 ? "AccessDenied"
                                          : status == 404 ? "NotFound" : "HTTP"),
            msg[0] = '\0';
    if (failed) {
        if (strcmp(code, "HTTP") == 0)
            snprintf(code, sizeof code, "HTTP%ld", status);
        int cls = status == 403 ? 403 : status == 404 ? 404 : status >= 500 ? 503 : 502;
        if (status / 100 == 2)   /* an error inside a 200: S3 documents InternalError there */
            cls = strcmp(code, "InternalError") == 0 || strcmp(code, "SlowDown") == 0 ? 503 : 502;
        drv_err(err, cls, code, "", "%s: S3 answered %ld %s%s%s", what, status, code,
                msg[0] ? ": " : "", msg);
        goto error;
    }
    curl_slist_free_all(hs);
    curl_easy_cleanup(c);
    explicit_bzero(h_auth, sizeof h_auth);
    free(url);
    return 0;
error:
    curl_slist_free_all(hs);
    curl_easy_cleanup(c);
    explicit_bzero(h_auth, sizeof h_auth);
    free(url);
    free(ans->body.data);
    ans->body.data = NULL;
    return -1;
}

/* --- calls ------------------------------------------------------------------------ */

int drv_s3_head(const drv_s3_t *s, const char *key, drv_s3_object_t *out, drv_error_t *err)
{
    answer_t a;
    char what[64];
    snprintf(what, sizeof what, "HEAD %.50s", key ? key : "");
    memset(out, 0, sizeof *out);
    if (!key || !key[0])
        return drv_err_invalid(err, "key", "HEAD needs an object key");
    drv_error_t e = {0};
    if (call(s, what, "HEAD", key, NULL, NULL, &a, &e) < 0) {
        if (e.status == 404)
            return 0;
        if (err)
            *err = e;
        return -1;
    }
    /* HEAD has no body: the size is the Content-Length header, which curl
     * gives as the download's length */
    out->exists = 1;
    out->size = a.length;
    snprintf(out->etag, sizeof out->etag, "%s", a.etag);
    free(a.body.data);
    return 0;
}

static int list_page(const answer_t *a, drv_s3_list_cb cb, void *ctx, char *token,
                     size_t token_len, drv_error_t *err)
{
    xmlDoc *doc = parse(a);
    const xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    if (!root || !drv_xml_named(root, "ListBucketResult")) {
        xmlFreeDoc(doc);
        return drv_err(err, 502, "bad_gateway", "", "ListObjectsV2: S3 answered with no "
                       "ListBucketResult");
    }
    int rc = 0;
    char key[DRV_S3_KEY_MAX + 1], size[32], truncated[8];
    for (const xmlNode *c = root->children; c && rc == 0; c = c->next) {
        if (!drv_xml_named(c, "Contents"))
            continue;
        drv_xml_text(drv_xml_child(c, "Key"), key, sizeof key);
        drv_xml_text(drv_xml_child(c, "Size"), size, sizeof size);
        rc = cb(ctx, key, strtoll(size, NULL, 10), err);
    }
    drv_xml_text(drv_xml_child(root, "IsTruncated"), truncated, sizeof truncated);
    drv_xml_text(drv_xml_child(root, "NextContinuationToken"), token, token_len);
    if (strcmp(truncated, "true") != 0)
        token[0] = '\0';
    else if (!token[0] && rc == 0)
        rc = drv_err(err, 502, "bad_gateway", "", "ListObjectsV2: a truncated page without "
                     "a NextContinuationToken");
    xmlFreeDoc(doc);
    return rc;
}

int drv_s3_list(const drv_s3_t *s, const char *prefix, int max_keys, drv_s3_list_cb cb, void *ctx,
                int *pages, drv_error_t *err)
{
    if (max_keys < 0 || max_keys > 1000)
        return drv_err_invalid(err, "max_keys", "ListObjectsV2 pages hold 1 to 1000 keys, "
                               "not %d", max_keys);
    const char *p = prefix ? prefix : "";
    if (strlen(p) > DRV_S3_KEY_MAX)
        return drv_err_invalid(err, "prefix", "S3 prefix longer than %d bytes", DRV_S3_KEY_MAX);
    char eprefix[3 * DRV_S3_KEY_MAX + 1], token[1024] = "", etoken[3 * sizeof token];
    char q[sizeof eprefix + sizeof etoken + 96];
    drv_sigv4_uri_encode(p, 0, eprefix, sizeof eprefix);
    int n = 0;
    if (pages)
        *pages = 0;
    do {
        if (drv_sigv4_uri_encode(token, 0, etoken, sizeof etoken) < 0)
            return drv_err(err, 502, "bad_gateway", "", "ListObjectsV2: token too long");
        snprintf(q, sizeof q, "list-type=2&max-keys=%d&prefix=%s%s%s",
                 max_keys ? max_keys : 1000, eprefix, token[0] ? "&continuation-token=" : "",
                 etoken);
        answer_t a;
        if (call(s, "ListObjectsV2", "GET", "", q, NULL, &a, err) < 0)
            return -1;
        int rc = list_page(&a, cb, ctx, token, sizeof token, err);
        free(a.body.data);
        if (rc < 0)
            return -1;
        if (pages)
            *pages = ++n;
        else
            n++;
    } while (token[0] && n < MAX_PAGES);
    if (token[0])
        return drv_err(err, 502, "bad_gateway", "", "ListObjectsV2: more than %d pages",
                       MAX_PAGES);
    return 0;
}

int drv_s3_multipart_create(const drv_s3_t *s, const char *key, char *upload_id, size_t id_len,
                            drv_error_t *err)
{
    answer_t a;
    upload_id[0] = '\0';
    if (!key || !key[0])
        return drv_err_invalid(err, "key", "a multipart upload needs an object key");
    if (call(s, "CreateMultipartUpload", "POST", key, "uploads", NULL, &a, err) < 0)
        return -1;
    xmlDoc *doc = parse(&a);
    const xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    if (root)
        drv_xml_text(drv_xml_child(root, "UploadId"), upload_id, id_len);
    xmlFreeDoc(doc);
    free(a.body.data);
    if (!upload_id[0] || strlen(upload_id) >= id_len - 1)
        return drv_err(err, 502, "bad_gateway", "", "CreateMultipartUpload: S3 answered "
                       "without an UploadId (or one too long)");
    return 0;
}

/* "uploadId=ENCODED" */
static int upload_query(const char *upload_id, char *q, size_t n, drv_error_t *err)
{
    if (!upload_id || !upload_id[0] || n < 10 ||
        drv_sigv4_uri_encode(upload_id, 0, q + 9, n - 9) < 0)
        return drv_err_invalid(err, "upload_id", "a multipart upload id is needed");
    memcpy(q, "uploadId=", 9);
    return 0;
}

int drv_s3_multipart_complete(const drv_s3_t *s, const char *key, const char *upload_id,
                              const char *const *etags, int nparts, drv_error_t *err)
{
    char q[2048];
    if (upload_query(upload_id, q, sizeof q, err) < 0)
        return -1;
    if (nparts < 1 || nparts > DRV_S3_MAX_PARTS)
        return drv_err_invalid(err, "parts", "a multipart upload has 1 to %d parts, not %d",
                               DRV_S3_MAX_PARTS, nparts);
    size_t cap = 128 + (size_t)nparts * 160, at = 0;
    char *body = malloc(cap);
    if (!body)
        return drv_err_internal(err, "out of memory");
    at += (size_t)sprintf(body, "<CompleteMultipartUpload>");
    for (int i = 0; i < nparts; i++) {
        const char *e = etags[i];
        if (!e || !e[0] || strlen(e) > 100 || strpbrk(e, "<>&\"")) {
            free(body);
            return drv_err_invalid(err, "etags", "part %d has no usable ETag", i + 1);
        }
        at += (size_t)sprintf(body + at, "<Part><PartNumber>%d</PartNumber><ETag>\"%s\"</ETag>"
                                         "</Part>", i + 1, e);
    }
    sprintf(body + at, "</CompleteMultipartUpload>");
    answer_t a;
    int rc = call(s, "CompleteMultipartUpload", "POST", key, q, body, &a, err);
    free(body);
    if (rc == 0)
        free(a.body.data);
    return rc;
}

int drv_s3_multipart_abort(const drv_s3_t *s, const char *key, const char *upload_id,
                           drv_error_t *err)
{
    char q[2048];
    if (upload_query(upload_id, q, sizeof q, err) < 0)
        return -1;
    answer_t a;
    if (call(s, "AbortMultipartUpload", "DELETE", key, q, NULL, &a, err) < 0)
        return -1;
    free(a.body.data);
    return 0;
}

int drv_s3_multipart_find(const drv_s3_t *s, const char *key, char *upload_id, size_t id_len,
                          drv_error_t *err)
{
    char ekey[3 * DRV_S3_KEY_MAX + 1], q[sizeof ekey + 32];
    upload_id[0] = '\0';
    if (!key || !key[0] || drv_sigv4_uri_encode(key, 0, ekey, sizeof ekey) < 0)
        return drv_err_invalid(err, "key", "ListMultipartUploads needs an object key");
    snprintf(q, sizeof q, "prefix=%s&uploads", ekey);
    answer_t a;
    if (call(s, "ListMultipartUploads", "GET", "", q, NULL, &a, err) < 0)
        return -1;
    xmlDoc *doc = parse(&a);
    const xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    int rc = 0;
    if (!root || !drv_xml_named(root, "ListMultipartUploadsResult"))
        rc = drv_err(err, 502, "bad_gateway", "", "ListMultipartUploads: S3 answered with no "
                     "ListMultipartUploadsResult");
    char k[DRV_S3_KEY_MAX + 1], id[512];
    for (const xmlNode *c = root ? root->children : NULL; c && rc == 0; c = c->next) {
        if (!drv_xml_named(c, "Upload"))
            continue;
        drv_xml_text(drv_xml_child(c, "Key"), k, sizeof k);
        drv_xml_text(drv_xml_child(c, "UploadId"), id, sizeof id);
        if (strcmp(k, key) == 0 && id[0] && strlen(id) < id_len)
            snprintf(upload_id, id_len, "%s", id);   /* the last listed: the newest */
    }
    xmlFreeDoc(doc);
    free(a.body.data);
    return rc;
}

int drv_s3_list_parts(const drv_s3_t *s, const char *key, const char *upload_id,
                      drv_s3_part_cb cb, void *ctx, drv_error_t *err)
{
    char q[1200], uq[700], marker[16] = "0";
    if (upload_query(upload_id, uq, sizeof uq, err) < 0)
        return -1;
    for (int page = 0; page < DRV_S3_MAX_PARTS / 1000 + 2; page++) {
        snprintf(q, sizeof q, "max-parts=1000&part-number-marker=%s&%s", marker, uq);
        answer_t a;
        if (call(s, "ListParts", "GET", key, q, NULL, &a, err) < 0)
            return -1;
        xmlDoc *doc = parse(&a);
        const xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
        int rc = 0;
        /* AWS documents ListPartsResult; moto says ListPartsResponse */
        if (!root || (!drv_xml_named(root, "ListPartsResult") &&
                      !drv_xml_named(root, "ListPartsResponse")))
            rc = drv_err(err, 502, "bad_gateway", "", "ListParts: S3 answered with no "
                         "ListPartsResult");
        char num[16], size[32], etag[128], truncated[8] = "";
        for (const xmlNode *c = root ? root->children : NULL; c && rc == 0; c = c->next) {
            if (!drv_xml_named(c, "Part"))
                continue;
            drv_xml_text(drv_xml_child(c, "PartNumber"), num, sizeof num);
            drv_xml_text(drv_xml_child(c, "Size"), size, sizeof size);
            drv_xml_text(drv_xml_child(c, "ETag"), etag, sizeof etag);
            char *e = etag;
            while (*e == '"')
                e++;
            size_t el = strlen(e);
            while (el && e[el - 1] == '"')
                e[--el] = '\0';
            rc = cb(ctx, atoi(num), strtoll(size, NULL, 10), e, err);
        }
        if (root) {
            drv_xml_text(drv_xml_child(root, "IsTruncated"), truncated, sizeof truncated);
            drv_xml_text(drv_xml_child(root, "NextPartNumberMarker"), marker, sizeof marker);
        }
        xmlFreeDoc(doc);
        free(a.body.data);
        if (rc < 0)
            return -1;
        if (strcmp(truncated, "true") != 0)
            return 0;
    }
    return drv_err(err, 502, "bad_gateway", "", "ListParts: too many pages");
}

int drv_s3_delete(const drv_s3_t *s, const char *key, drv_error_t *err)
{
    if (!key || !key[0])
        return drv_err_invalid(err, "key", "DELETE needs an object key");
    answer_t a;
    if (call(s, "DeleteObject", "DELETE", key, NULL, NULL, &a, err) < 0)
        return -1;
    free(a.body.data);
    return 0;
}
