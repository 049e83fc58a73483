/* request.c — helpers every handler uses: query arguments, the JSON body,
 * and building responses (see api.h). */
#include "api/api.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json.h"
#include "common/openai.h"
#include "common/suggest.h"
#include "common/util.h"

const char *drv_req_query(const drv_req_t *req, const char *key)
{
    for (size_t i = 0; i < req->n_query; i++)
        if (strcmp(req->query[i].key, key) == 0)
            return req->query[i].value ? req->query[i].value : "";
    return NULL;
}

int drv_req_check_query(const drv_req_t *req, const char *const *allowed, drv_error_t *err)
{
    for (size_t i = 0; i < req->n_query; i++) {
        bool ok = false;
        for (size_t j = 0; allowed && allowed[j]; j++)
            if (strcmp(req->query[i].key, allowed[j]) == 0)
                ok = true;
        if (!ok) {
            const char *near = drv_suggest_from(req->query[i].key, allowed);
            return drv_err_invalid(err, req->query[i].key, "unknown query argument '%s'%s%s%s",
                                   req->query[i].key, near ? " (did you mean '" : "",
                                   near ? near : "", near ? "'?)" : "");
        }
    }
    return 0;
}

int drv_req_query_int(const drv_req_t *req, const char *key, int64_t min, int64_t max,
                      int64_t *out, drv_error_t *err)
{
    const char *v = drv_req_query(req, key);
    if (!v)
        return 0;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || errno)
        return drv_err_invalid(err, key, "query argument '%s' must be an integer, got '%.40s'",
                               key, v);
    if (n < min || n > max)
        return drv_err_invalid(err, key, "query argument '%s' must be between %lld and %lld",
                               key, (long long)min, (long long)max);
    *out = n;
    return 0;
}

int drv_req_query_double(const drv_req_t *req, const char *key, double min, double max,
                         double *out, drv_error_t *err)
{
    const char *v = drv_req_query(req, key);
    if (!v)
        return 0;
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(d))
        return drv_err_invalid(err, key, "query argument '%s' must be a number, got '%.40s'",
                               key, v);
    if (d < min || d > max)
        return drv_err_invalid(err, key, "query argument '%s' must be between %g and %g", key,
                               min, max);
    *out = d;
    return 0;
}

int drv_req_query_bool(const drv_req_t *req, const char *key, bool *out, drv_error_t *err)
{
    const char *v = drv_req_query(req, key);
    if (!v)
        return 0;
    if (!*v || strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
        *out = true;
    else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
        *out = false;
    else
        return drv_err_invalid(err, key, "query argument '%s' must be true or false", key);
    return 0;
}

json_t *drv_req_json(const drv_req_t *req, drv_error_t *err)
{
    if (!req->body || req->body_len == 0) {
        drv_err_invalid(err, "", "a JSON object body is required");
        return NULL;
    }
    json_error_t jerr;
    json_t *j = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j) {
        drv_err_invalid(err, "", "malformed JSON at line %d, column %d: %s", jerr.line,
                        jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        drv_err_invalid(err, "", "the body must be a JSON object, not %s",
                        drv_json_type_name(j));
        json_decref(j);
        return NULL;
    }
    return j;
}

void drv_resp_raw(drv_resp_t *resp, int status, const char *content_type, char *body,
                  size_t len)
{
    free(resp->body);
    resp->status = status;
    resp->content_type = content_type;
    resp->body = body;
    resp->len = len;
}

void drv_resp_json(drv_resp_t *resp, int status, json_t *doc)
{
    size_t len;
    char *s = drv_json_dump(doc, &len);
    json_decref(doc);
    drv_resp_raw(resp, status, "application/json", s, len);
}

void drv_resp_error(drv_resp_t *resp, const drv_error_t *err)
{
    int status = err->status ? err->status : 500;
    drv_resp_json(resp, status, resp->openai ? drv_openai_error(err) : drv_error_json(err));
    resp->etag = 0;
    resp->location[0] = '\0';
}

void drv_resp_free(drv_resp_t *resp)
{
    if (resp->has_file)
        close(resp->file_fd);
    resp->has_file = false;
    free(resp->body);
    resp->body = NULL;
    resp->len = 0;
}
