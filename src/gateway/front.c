/* front.c — the HTTP side of drover-gateway: libmicrohttpd serving the
 * inference routes with the head's rules (docs/api.md "Inference"), the
 * tokens checked against the head's document (follow.h):
 *
 *   POST /v1/deployments/{d}/predict
 *   POST /openai/v1/chat/completions, /openai/v1/completions
 *   GET  /openai/v1/models
 *   GET  /metrics      this gateway's counters for the caller's deployments
 *   GET  /healthz      no token: whether the head answers, the routes version
 *
 * A request is read (bodies up to 1 MiB: 413 beyond), authenticated, and
 * handed to the shared gateway code as a job exactly as api/http.c does
 * (whose MHD settings, path unescaping and body reading it shares):
 * the connection is suspended, the gateway thread resumes it with the
 * answer, the completion callback releases the job.
 *
 * Threads: MHD's pool; per-connection state is the connection's own.
 */
#define _GNU_SOURCE
#include "gateway/front.h"

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/http.h"
#include "common/util.h"
#include "gateway/table.h"

struct drv_gw_front {
    struct MHD_Daemon *d;
    drv_gateway_t *g;
    drv_gw_follow_t *f;
    atomic_int suspended;
};

typedef struct conn {
    char *body;
    size_t len, cap;
    bool too_large;
    bool suspended;
    drv_gw_job_t *job;
} conn_t;

static enum MHD_Result send_doc(struct MHD_Connection *c, drv_resp_t *r)
{
    struct MHD_Response *mr =
        MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
    r->body = NULL;
    MHD_add_response_header(mr, "Content-Type",
                            r->content_type ? r->content_type : "application/json");
    if (r->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", r->retry_after);
        MHD_add_response_header(mr, "Retry-After", ra);
    }
    if (r->header_name)
        MHD_add_response_header(mr, r->header_name, r->header_value);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, mr);
    MHD_destroy_response(mr);
    drv_resp_free(r);
    return ret;
}

static enum MHD_Result send_err(struct MHD_Connection *c, const drv_error_t *err,
                                int retry_after)
{
    drv_resp_t r;
    memset(&r, 0, sizeof r);
    drv_resp_error(&r, err);
    r.retry_after = retry_after;
    return send_doc(c, &r);
}

static enum MHD_Result send_json(struct MHD_Connection *c, int status, json_t *doc)
{
    drv_resp_t r;
    memset(&r, 0, sizeof r);
    drv_resp_json(&r, status, doc);
    return send_doc(c, &r);
}

/* The routes: path -> what it is. */
enum { P_NONE, P_PREDICT, P_CHAT, P_COMPLETIONS, P_MODELS, P_METRICS, P_HEALTHZ };

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

static enum MHD_Result submit(drv_gw_front_t *fr, struct MHD_Connection *c, conn_t *x,
                              const char *user, const char *dep, enum drv_gw_kind kind,
                              const char *suffix)
{
    drv_error_t err;
    int timeout_ms;
    const char *to = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Drover-Timeout");
    if (drv_gw_parse_timeout(to, &timeout_ms, &err) < 0)
        return send_err(c, &err, 0);
    if (!drv_id_valid(dep)) {
        drv_err_not_found(&err, "deployment '%.80s' not found", dep);
        return send_err(c, &err, 0);
    }
    char key[192];
    snprintf(key, sizeof key, "%s/%s", user, dep);
    drv_gw_job_t *j = drv_gw_job_new(
        fr->g, key, kind, suffix, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"),
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept"), timeout_ms, &err);
    if (!j)
        return send_err(c, &err, 5);
    x->job = j;
    x->suspended = true;
    atomic_fetch_add(&fr->suspended, 1);
    MHD_suspend_connection(c);
    drv_gw_job_start(j, c, x->body, x->len);
    x->body = NULL;   /* the job owns it now */
    x->len = x->cap = 0;
    return MHD_YES;
}

static enum MHD_Result handle(drv_gw_front_t *fr, struct MHD_Connection *c, conn_t *x,
                              const char *url, const char *method)
{
    drv_error_t err;
    char dep[128];
    int what = route_of(url, dep);
    bool post = what == P_PREDICT || what == P_CHAT || what == P_COMPLETIONS;
    if (what == P_NONE) {
        drv_err(&err, 404, "not_found", "", "no such path on this gateway: %.200s", url);
        return send_err(c, &err, 0);
    }
    if (strcmp(method, post ? "POST" : "GET") != 0) {
        drv_resp_t r;
        memset(&r, 0, sizeof r);
        drv_err(&err, 405, "method_not_allowed", "", "method %.16s is not allowed on %.200s",
                method, url);
        drv_resp_error(&r, &err);
        r.header_name = "Allow";
        snprintf(r.header_value, sizeof r.header_value, "%s", post ? "POST" : "GET");
        return send_doc(c, &r);
    }
    if (what == P_HEALTHZ)
        return send_json(c, 200, drv_gw_follow_health(fr->f));
    if (x->too_large) {
        drv_err(&err, 413, "payload_too_large", "", "request body is larger than %d bytes",
                DRV_MAX_BODY);
        return send_err(c, &err, 0);
    }
    char user[64];
    if (drv_gw_follow_auth(fr->f,
                           MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                           user, &err) < 0)
        return send_err(c, &err, 0);
    if (x->len && memchr(x->body, '\0', x->len)) {
        drv_err_invalid(&err, "", "the body contains a NUL byte");
        return send_err(c, &err, 0);
    }
    switch (what) {
    case P_PREDICT: return submit(fr, c, x, user, dep, DRV_GW_PREDICT, NULL);
    case P_CHAT:
    case P_COMPLETIONS: {
        char model[128];
        if (drv_gw_json_model(x->body, x->len, model, sizeof model) < 0) {
            drv_err_invalid(&err, "model", "the body must be a JSON object whose \"model\" "
                            "names one of your deployments (GET /openai/v1/models lists them)");
            return send_err(c, &err, 0);
        }
        return submit(fr, c, x, user, model, DRV_GW_OPENAI,
                      what == P_CHAT ? "/chat/completions" : "/completions");
    }
    case P_MODELS: return send_json(c, 200, drv_gw_follow_models(fr->f, user));
    default: {   /* P_METRICS */
        char *buf = NULL;
        size_t len = 0, cap = 0;
        drv_gateway_metrics(fr->g, user, &buf, &len, &cap);
        drv_resp_t r;
        memset(&r, 0, sizeof r);
        drv_resp_raw(&r, 200, "text/plain; version=0.0.4; charset=utf-8", buf, len);
        return send_doc(c, &r);
    }
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    drv_gw_front_t *fr = cls;
    conn_t *x = *con_cls;
    if (!x) {
        x = calloc(1, sizeof *x);
        if (!x)
            return MHD_NO;
        *con_cls = x;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > DRV_MAX_BODY)
            x->too_large = true;
        return MHD_YES;
    }
    if (x->suspended) {   /* re-entered after a resume */
        x->suspended = false;
        atomic_fetch_sub(&fr->suspended, 1);
    }
    if (x->job)   /* resumed by the gateway: its answer is ready */
        return drv_gw_job_respond(x->job, c);
    if (*upload_size) {
        if (drv_http_body_add(&x->body, &x->len, &x->cap, &x->too_large, upload,
                              *upload_size) < 0)
            return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    return handle(fr, c, x, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)c, (void)toe;
    conn_t *x = *con_cls;
    if (!x)
        return;
    if (x->suspended)
        atomic_fetch_sub(&((drv_gw_front_t *)cls)->suspended, 1);
    if (x->job)
        drv_gw_job_release(x->job);
    free(x->body);
    free(x);
    *con_cls = NULL;
}

drv_gw_front_t *drv_gw_front_create(drv_gateway_t *g, drv_gw_follow_t *f, const char *listen,
                                    int threads, drv_error_t *err)
{
    drv_gw_front_t *fr = calloc(1, sizeof *fr);
    if (!fr) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    fr->g = g;
    fr->f = f;
    fr->d = drv_http_start(listen, threads, on_request, fr, on_completed, err);
    if (!fr->d) {
        free(fr);
        return NULL;
    }
    return fr;
}

int drv_gw_front_port(const drv_gw_front_t *fr)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(fr->d, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : -1;
}

void drv_gw_front_destroy(drv_gw_front_t *fr)
{
    if (!fr)
        return;
    drv_http_stop(fr->d, &fr->suspended);   /* after drv_gateway_stop answered everything */
    free(fr);
}
