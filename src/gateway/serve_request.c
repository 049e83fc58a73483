/* serve_request.c — the request path of drover-gateway's HTTP/1.1 server
 * (serve.c has the connections and the loop): a request's head parsed by
 * common/http1.c and its body read by Content-Length into the connection,
 * the route found, the caller authenticated with the head's tokens
 * (creds.h), and the request answered here (errors, /healthz, /metrics,
 * /openai/v1/models) or handed to the gateway as a job (predict, OpenAI
 * completions). Runs on the gateway thread. Shared state: serve_int.h.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/http1.h"
#include "common/json.h"
#include "common/openai.h"
#include "common/procmetrics.h"
#include "common/util.h"
#include "gateway/gw_impl.h"
#include "gateway/serve_int.h"

/* --- requests ------------------------------------------------------------------------ */

/* The routes: path -> what it is. */
enum { P_NONE, P_PREDICT, P_CHAT, P_COMPLETIONS, P_MODELS, P_MODEL, P_METRICS, P_HEALTHZ };

/* "/openai/v1/models/{d}": 1 with d in dep, 0 for another path. */
static int model_path(const char *path, char dep[128])
{
    static const char pre[] = "/openai/v1/models/";
    if (strncmp(path, pre, sizeof pre - 1) != 0)
        return 0;
    const char *id = path + sizeof pre - 1;
    size_t n = strlen(id);
    if (n == 0 || n >= 128 || strchr(id, '/'))
        return 0;
    memcpy(dep, id, n + 1);
    return 1;
}

static int route_of(const char *path, char dep[128])
{
    static const struct {
        const char *path;
        int what;
    } fixed[] = {{"/openai/v1/chat/completions", P_CHAT},
                 {"/openai/v1/completions", P_COMPLETIONS},
                 {"/openai/v1/models", P_MODELS},
                 {"/metrics", P_METRICS},
                 {"/healthz", P_HEALTHZ},
                 {NULL, 0}};
    for (int i = 0; fixed[i].path; i++)
        if (strcmp(path, fixed[i].path) == 0)
            return fixed[i].what;
    if (model_path(path, dep))
        return P_MODEL;
    const char *pre = "/v1/deployments/", *suf = "/predict";
    size_t pl = strlen(pre), n = strlen(path);
    if (strncmp(path, pre, pl) != 0 || n < pl + strlen(suf) + 1 ||
        strcmp(path + n - strlen(suf), suf) != 0)
        return P_NONE;
    size_t dl = n - pl - strlen(suf);
    if (dl >= 128 || memchr(path + pl, '/', dl))
        return P_NONE;
    memcpy(dep, path + pl, dl);
    dep[dl] = '\0';
    return P_PREDICT;
}

/* Hand the request to the gateway as a job (it takes the body). */
static void submit(drv_gw_serve_t *sv, sconn_t *c, const char *user, const char *dep,
                   enum drv_gw_kind kind, const char *suffix)
{
    drv_error_t err;
    int timeout_ms;
    if (drv_gw_parse_timeout(c->has_timeout ? c->timeout : NULL, &timeout_ms, &err) < 0) {
        drv_gw_serve__answer_err(c, &err, 0);
        return;
    }
    if (!drv_id_valid(dep)) {
        drv_err_not_found(&err, "deployment '%.80s' not found", dep);
        drv_gw_serve__answer_err(c, &err, 0);
        return;
    }
    char key[192];
    snprintf(key, sizeof key, "%s/%s", user, dep);
    drv_gw_job_t *j = drv_gw_job_new(sv->g, key, kind, suffix, c->ctype[0] ? c->ctype : NULL,
                                     c->accept[0] ? c->accept : NULL, timeout_ms, &err);
    if (!j) {
        drv_gw_serve__answer_err(c, &err, 5);
        return;
    }
    c->job = j;
    c->st = C_JOB;
    drv_gw_job_start_local(j, c->body, c->body_len, drv_gw_serve__on_job_news, c);
    c->body = NULL;   /* the job owns it now */
    c->body_len = c->body_want = 0;
}

/* A whole request is in (head fields and body): answer it or start its job. */
static void dispatch(drv_gw_serve_t *sv, sconn_t *c)
{
    drv_error_t err;
    char dep[128];
    const char *path = c->path;
    int what = route_of(path, dep);
    bool post = what == P_PREDICT || what == P_CHAT || what == P_COMPLETIONS;
    c->st = C_HEAD;
    if (what == P_NONE) {
        drv_err(&err, 404, "not_found", "", "no such path on this gateway: %.200s", path);
        drv_gw_serve__answer_err(c, &err, 0);
    } else if (strcmp(c->method, post ? "POST" : "GET") != 0) {
        sresp_t r;
        memset(&r, 0, sizeof r);
        r.openai = drv_openai_path(path);
        drv_err(&err, 405, "method_not_allowed", "", "method %.16s is not allowed on %.200s",
                c->method, path);
        drv_gw_serve__resp_error(&r, &err);
        r.header_name = "Allow";
        snprintf(r.header_value, sizeof r.header_value, "%s", post ? "POST" : "GET");
        drv_gw_serve__answer_resp(c, &r);
    } else if (what == P_HEALTHZ) {
        drv_gw_serve__answer_json(c, 200, sv->front.health(sv->front.ctx));
    } else {
        char user[64];
        if (c->bad_authz) {
            drv_err(&err, 401, "unauthenticated", "", "the Authorization header is too long");
            drv_gw_serve__answer_unauth(c, &err);
        } else if (drv_gw_creds_auth(sv->front.creds, c->authz[0] ? c->authz : NULL, user,
                                     &err) < 0) {
            drv_gw_serve__answer_unauth(c, &err);
        } else if (c->body_len && memchr(c->body, '\0', c->body_len)) {
            drv_err_invalid(&err, "", "the body contains a NUL byte");
            drv_gw_serve__answer_err(c, &err, 0);
        } else if (what == P_PREDICT) {
            submit(sv, c, user, dep, DRV_GW_PREDICT, NULL);
        } else if (what == P_CHAT || what == P_COMPLETIONS) {
            char model[128];
            if (drv_gw_json_model(c->body, c->body_len, model, sizeof model) < 0) {
                drv_err_invalid(&err, "model", "the body must be a JSON object whose \"model\" "
                                "names one of your deployments (GET /openai/v1/models lists them)");
                drv_gw_serve__answer_err(c, &err, 0);
            } else {
                submit(sv, c, user, model, DRV_GW_OPENAI,
                       what == P_CHAT ? "/chat/completions" : "/completions");
            }
        } else if (what == P_MODELS) {
            drv_gw_serve__answer_json(c, 200, drv_gw_creds_models(sv->front.creds, user));
        } else if (what == P_MODEL) {
            json_t *m = drv_gw_creds_model(sv->front.creds, user, dep);
            if (m) {
                drv_gw_serve__answer_json(c, 200, m);
            } else {
                drv_err_not_found(&err, "model '%.80s' not found: no deployment of yours has "
                                  "that id (GET /openai/v1/models lists them)", dep);
                drv_gw_serve__answer_err(c, &err, 0);
            }
        } else {   /* P_METRICS */
            char *buf = NULL;
            size_t len = 0, cap = 0;
            drv_gateway_metrics(sv->g, user, &buf, &len, &cap);
            char proc[4096];   /* a few small /proc reads: microseconds */
            if (drv_procmetrics_text(proc, sizeof proc) > 0)
                drv_appendf(&buf, &len, &cap, "%s", proc);
            drv_gw_serve__answer(c, 200, "text/plain; version=0.0.4; charset=utf-8",
                                 buf ? buf : "", len, 0, NULL, NULL);
            free(buf);
        }
    }
    if (c->st != C_JOB) {
        free(c->body);
        c->body = NULL;
        c->body_len = c->body_want = 0;
        if (!c->keep_alive)
            c->st = C_CLOSING;
    }
}

static void copy_header(char *dst, size_t n, const char *v, bool *too_long)
{
    if (!v) {
        dst[0] = '\0';
        return;
    }
    size_t l = strlen(v);
    if (l >= n) {
        if (too_long)
            *too_long = true;
        l = n - 1;
    }
    memcpy(dst, v, l);
    dst[l] = '\0';
}

/* A complete head at the start of c->in (len bytes): keep what the request
 * needs, start reading its body. 0, or -1 when an error was answered and
 * the connection closes. */
static int take_head(sconn_t *c, const drv_h1_request_t *rq)
{
    drv_error_t err;
    snprintf(c->method, sizeof c->method, "%s", rq->method);
    snprintf(c->path, sizeof c->path, "%s", rq->path);
    c->bad_authz = false;
    copy_header(c->authz, sizeof c->authz, drv_h1_header(rq->h, rq->nh, "Authorization"),
                &c->bad_authz);
    copy_header(c->ctype, sizeof c->ctype, drv_h1_header(rq->h, rq->nh, "Content-Type"), NULL);
    copy_header(c->accept, sizeof c->accept, drv_h1_header(rq->h, rq->nh, "Accept"), NULL);
    const char *to = drv_h1_header(rq->h, rq->nh, "X-Drover-Timeout");
    c->has_timeout = to != NULL;
    copy_header(c->timeout, sizeof c->timeout, to, NULL);
    c->keep_alive = rq->keep_alive;
    c->http10 = rq->minor == 0;
    if (rq->chunked) {
        c->keep_alive = false;
        drv_err(&err, 411, "length_required", "",
                "send the request body with a Content-Length (chunked uploads are not accepted)");
        drv_gw_serve__answer_err(c, &err, 0);
        return -1;
    }
    if (rq->content_length > DRV_MAX_BODY) {
        c->keep_alive = false;   /* the body is not read: the connection cannot go on */
        drv_err(&err, 413, "payload_too_large", "", "request body is larger than %d bytes",
                DRV_MAX_BODY);
        drv_gw_serve__answer_err(c, &err, 0);
        return -1;
    }
    c->body_want = rq->content_length > 0 ? (size_t)rq->content_length : 0;
    c->body_len = 0;
    free(c->body);
    c->body = NULL;
    if (c->body_want) {
        c->body = malloc(c->body_want + 1);
        if (!c->body) {
            c->keep_alive = false;
            drv_err_internal(&err, "out of memory");
            drv_gw_serve__answer_err(c, &err, 1);
            return -1;
        }
        const char *ex = drv_h1_header(rq->h, rq->nh, "Expect");
        if (ex && strcasecmp(ex, "100-continue") == 0 && !c->http10)
            drv_gw_serve__out_str(c, "HTTP/1.1 100 Continue\r\n\r\n");
    }
    c->st = C_BODY;
    return 0;
}

/* Parse and answer what c->in holds, as far as it goes. */
void drv_gw_serve__process(drv_gw_serve_t *sv, sconn_t *c)
{
    while ((c->st == C_HEAD || c->st == C_BODY) && c->out_len - c->out_off < SV_OUT_HIGH) {
        if (c->st == C_HEAD) {
            if (!c->in_len)
                break;
            drv_h1_request_t rq;
            int status = 0;
            const char *why = NULL;
            c->in[c->in_len] = '\0';
            int n = drv_h1_parse_request(c->in, c->in_len, &rq, &status, &why);
            if (n == 0) {
                if (c->in_len < DRV_H1_MAX_HEAD)
                    break;   /* more to come */
                status = 431;
                why = "the request head is too large";
            }
            if (n <= 0) {
                drv_error_t err;
                drv_err(&err, status ? status : 400, "invalid", "", "%s",
                        why ? why : "malformed request");
                c->keep_alive = false;
                c->path[0] = '\0';   /* not the last request's: drover's error shape */
                drv_gw_serve__answer_err(c, &err, 0);
                c->st = C_CLOSING;
                c->in_len = 0;
                break;
            }
            int rc = take_head(c, &rq);
            memmove(c->in, c->in + n, c->in_len - (size_t)n);
            c->in_len -= (size_t)n;
            if (rc < 0) {
                c->st = C_CLOSING;
                c->in_len = 0;
                break;
            }
        }
        size_t take = c->body_want - c->body_len;   /* C_BODY */
        if (take > c->in_len)
            take = c->in_len;
        if (take) {
            memcpy(c->body + c->body_len, c->in, take);
            c->body_len += take;
            memmove(c->in, c->in + take, c->in_len - take);
            c->in_len -= take;
        }
        if (c->body_len < c->body_want)
            break;
        if (c->body)
            c->body[c->body_len] = '\0';
        dispatch(sv, c);
    }
    drv_gw_serve__flush(sv, c);
}
