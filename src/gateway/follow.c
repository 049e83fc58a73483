/* follow.c — see follow.h: a standalone gateway's long polls of the head's
 * routes and its load reports. A poll passes wait=VERSION once it has a
 * document: the head answers a new document when the table changes, or 204
 * when its hold ends with our version still current (we keep the table and
 * ask again); a document of the version we hold is not adopted again.
 *
 * Ownership: the routes thread owns its curl handle and the version; the
 * token set and the model list are creds.c's (replaced whole by the routes
 * thread, read by the gateway thread); the report thread owns its curl
 * handle and waits on mu/cv for its next second or a kick.
 *
 * Several heads (issue 17): --head may list URLs. The routes thread moves
 * to the next when a poll gets no answer, and to the leader a standby names
 * in its 503 not_leader; it alone writes server (under mu), the report
 * thread copies it under mu. The table in hand keeps serving meanwhile.
 */
#define _GNU_SOURCE
#include "gateway/follow.h"

#include <assert.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/secret.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/creds.h"
#include "gateway/routes_doc.h"

#define POLL_TIMEOUT_S 40        /* the head holds a long poll 25 s */
#define REPORT_EVERY_MS 1000
#define BODY_MAX (64 * 1024 * 1024)

struct drv_gw_follow {
    drv_gateway_t *g;
    char server[512], authz[300], name[64];
    char servers[8][512];        /* the given heads */
    int nservers, cur;
    int poll_s;                  /* timeout_seconds of a long poll */
    pthread_t routes_thread, report_thread;
    bool routes_started, report_started;
    atomic_bool stop;

    drv_gw_creds_t *creds;       /* tokens and deployments of the last document */

    pthread_mutex_t mu;          /* below; cv wakes the report thread and waiters */
    pthread_cond_t cv;
    bool kicked;
    bool have_routes;
    drv_error_t first_err;       /* why the first document has not come */
    char version[DRV_GW_VERSION_LEN];
    bool reachable;
    int64_t contact_ms;          /* drv_mono_ms() of the last answer from the head */
};

typedef struct buf {
    char *p;
    size_t n, cap;
} buf_t;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    buf_t *b = ud;
    size_t len = size * n;
    if (b->n + len + 1 > BODY_MAX)
        return 0;
    if (b->n + len + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap * 2 : 65536;
        while (ncap < b->n + len + 1)
            ncap *= 2;
        char *np = realloc(b->p, ncap);
        if (!np)
            return 0;
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->n, p, len);
    b->n += len;
    b->p[b->n] = '\0';
    return len;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    return atomic_load(&((drv_gw_follow_t *)ud)->stop) ? 1 : 0;
}

/* One call to the head; *status 0 when it could not be reached. */
static const char *ca_file;   /* drv_gw_follow_set_ca_file (set before any thread) */

void drv_gw_follow_set_ca_file(const char *path)
{
    ca_file = path;
}

static void call(drv_gw_follow_t *f, CURL *e, struct curl_slist *hdrs, const char *method,
                 const char *path, const char *body, long timeout_s, long *status, buf_t *out)
{
    char url[1024];
    pthread_mutex_lock(&f->mu);
    snprintf(url, sizeof url, "%s%s", f->server, path);
    pthread_mutex_unlock(&f->mu);
    out->n = 0;
    if (out->p)
        out->p[0] = '\0';
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, timeout_s);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 3L);
    curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    if (ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, ca_file);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, f);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    } else {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
    *status = 0;
    if (curl_easy_perform(e) == CURLE_OK)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
}

static void contact(drv_gw_follow_t *f, bool ok, const char *why)
{
    pthread_mutex_lock(&f->mu);
    bool was = f->reachable, had = f->have_routes;
    f->reachable = ok;
    if (ok)
        f->contact_ms = drv_mono_ms();
    pthread_mutex_unlock(&f->mu);
    if (was && !ok)
        drv_warn("the head at %s cannot be reached (%s): serving the last routes", f->server,
                 why);
    else if (!was && ok && had)
        drv_info("the head at %s answers again", f->server);
}

/* 0: adopted; -1: the document was refused (why says why). */
static int adopt(drv_gw_follow_t *f, const buf_t *b, char *why, size_t why_len)
{
    drv_gw_table_t *t;
    drv_gw_tokens_t *toks;
    char version[DRV_GW_VERSION_LEN];
    drv_error_t err;
    if (drv_gw_routes_parse(b->p, b->n, &t, &toks, version, &err) < 0) {
        snprintf(why, why_len, "its routes document was refused: %s", err.message);
        return -1;
    }
    pthread_mutex_lock(&f->mu);
    bool same = strcmp(f->version, version) == 0;
    pthread_mutex_unlock(&f->mu);
    if (same) {   /* the document we have (a head that re-sends it): keep ours */
        drv_gw_table_free(t);
        drv_gw_tokens_free(toks);
        return 0;
    }
    drv_gw_creds_set(f->creds, toks, t);
    drv_gateway_set_table(f->g, t);
    pthread_mutex_lock(&f->mu);
    snprintf(f->version, sizeof f->version, "%s", version);
    f->have_routes = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return 0;
}

/* After a poll of status st (body b): move to the leader a standby named,
 * or to the next head when this one did not answer. Routes thread. */
static void move_on(drv_gw_follow_t *f, long st, const buf_t *b)
{
    char to[512] = "";
    if (st == 503 && b->p) {
        json_t *doc = json_loadb(b->p, b->n, 0, NULL);
        const char *code = json_string_value(json_object_get(json_object_get(doc, "error"),
                                                             "code"));
        const char *leader = json_string_value(json_object_get(doc, "leader"));
        if (code && strcmp(code, "not_leader") == 0 && leader &&
            (strncmp(leader, "http://", 7) == 0 || strncmp(leader, "https://", 8) == 0))
            snprintf(to, sizeof to, "%s", leader);
        else if (code && strcmp(code, "not_leader") == 0 && f->nservers > 1)
            snprintf(to, sizeof to, "%s", f->servers[f->cur = (f->cur + 1) % f->nservers]);
        json_decref(doc);
    } else if (st == 0 && f->nservers > 1) {
        snprintf(to, sizeof to, "%s", f->servers[f->cur = (f->cur + 1) % f->nservers]);
    }
    if (!to[0] || strcmp(to, f->server) == 0)
        return;
    drv_info("routes: moving from head %s to %s", f->server, to);
    pthread_mutex_lock(&f->mu);
    snprintf(f->server, sizeof f->server, "%s", to);
    pthread_mutex_unlock(&f->mu);
}

static void pause_ms(drv_gw_follow_t *f, int ms)
{
    for (int i = 0; i < ms / 50 && !atomic_load(&f->stop); i++)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
}

static void *routes_main(void *arg)
{
    drv_gw_follow_t *f = arg;
    CURL *e = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, f->authz);
    buf_t b = {0};
    int backoff = 200;
    while (e && !atomic_load(&f->stop)) {
        char path[128];
        pthread_mutex_lock(&f->mu);
        bool waited = f->version[0] != '\0';
        if (waited && f->poll_s != DRV_GW_ROUTES_HOLD_S)   /* heads before 204 refuse it */
            snprintf(path, sizeof path, "/v1/gateway/routes?wait=%s&timeout_seconds=%d",
                     f->version, f->poll_s);
        else if (waited)
            snprintf(path, sizeof path, "/v1/gateway/routes?wait=%s", f->version);
        else
            snprintf(path, sizeof path, "/v1/gateway/routes");
        pthread_mutex_unlock(&f->mu);
        long st;
        call(f, e, h, "GET", path, NULL, POLL_TIMEOUT_S, &st, &b);
        if (atomic_load(&f->stop))
            break;
        char why[400];
        if ((st == 204 && waited) || (st == 200 && adopt(f, &b, why, sizeof why) == 0)) {
            /* 204: the hold ended and our version is still current: keep
             * the table, ask again with the same wait= */
            if (st == 204)
                drv_debug("routes: our version is still current (204)");
            contact(f, true, "");
            backoff = 200;
            continue;
        }
        /* a refused document is an error like the others: backoff, no spin
         * (the head would answer the same version again at once) */
        move_on(f, st, &b);
        if (st == 0)
            snprintf(why, sizeof why, "no answer");
        else if (st != 200)
            snprintf(why, sizeof why, "HTTP %ld: %.200s", st, b.p ? b.p : "");
        contact(f, st != 0, why);
        pthread_mutex_lock(&f->mu);
        if (!f->have_routes) {
            drv_err(&f->first_err, 503, "unavailable", "", "GET %s/v1/gateway/routes: %s",
                    f->server, why);
            pthread_cond_broadcast(&f->cv);
        }
        pthread_mutex_unlock(&f->mu);
        if (st != 0)
            drv_warn("GET /v1/gateway/routes: %s", why);
        pause_ms(f, backoff);
        backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
    }
    free(b.p);
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    return NULL;
}

static void *report_main(void *arg)
{
    drv_gw_follow_t *f = arg;
    CURL *e = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, f->authz);
    h = curl_slist_append(h, "Content-Type: application/json");
    buf_t b = {0};
    while (e && !atomic_load(&f->stop)) {
        json_t *doc = json_pack("{s:s, s:o}", "gateway", f->name, "deployments",
                                drv_gateway_load_json(f->g));
        char *body = json_dumps(doc, JSON_COMPACT);
        json_decref(doc);
        long st = 0;
        if (body)
            call(f, e, h, "POST", "/v1/gateway/load", body, 3, &st, &b);
        free(body);
        if (st != 0 && st != 200)
            drv_warn("POST /v1/gateway/load: HTTP %ld: %.200s", st, b.p ? b.p : "");
        pthread_mutex_lock(&f->mu);
        if (!f->kicked && !atomic_load(&f->stop)) {
            struct timespec ts;
            drv_deadline_in(REPORT_EVERY_MS, &ts);
            pthread_cond_timedwait(&f->cv, &f->mu, &ts);
        }
        f->kicked = false;
        pthread_mutex_unlock(&f->mu);
    }
    free(b.p);
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    return NULL;
}

void drv_gw_follow_kick(void *ctx)
{
    drv_gw_follow_t *f = ctx;
    pthread_mutex_lock(&f->mu);
    f->kicked = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

drv_gw_follow_t *drv_gw_follow_create(drv_gateway_t *g, const char *server, const char *token,
                                      const char *name, int first_wait_ms, int poll_s,
                                      drv_error_t *err)
{
    assert(poll_s >= 1 && poll_s <= DRV_GW_ROUTES_HOLD_S);
    drv_gw_follow_t *f = calloc(1, sizeof *f);
    if (!f) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    for (const char *p = server; *p;) {   /* URL1,URL2,...: several heads */
        size_t n = strcspn(p, ",");
        const char *next = p[n] ? p + n + 1 : p + n;
        while (n > 0 && p[n - 1] == '/')
            n--;
        if (n && (f->nservers == 8 || n >= sizeof f->servers[0] ||
                  (strncmp(p, "http://", 7) != 0 && strncmp(p, "https://", 8) != 0))) {
            drv_err_invalid(err, "server", f->nservers == 8 ? "at most 8 --server URLs"
                            : "--server must be an http:// or https:// URL (or several, "
                              "comma-separated), not '%s'", server);
            free(f);
            return NULL;
        }
        if (n)
            snprintf(f->servers[f->nservers++], sizeof f->servers[0], "%.*s", (int)n, p);
        p = next;
    }
    if (!f->nservers) {
        drv_err_invalid(err, "server", "--server must be an http:// or https:// URL, not '%s'",
                        server);
        free(f);
        return NULL;
    }
    f->g = g;
    snprintf(f->server, sizeof f->server, "%s", f->servers[0]);
    snprintf(f->authz, sizeof f->authz, "Authorization: Bearer %s", token);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->poll_s = poll_s;
    if (!(f->creds = drv_gw_creds_create())) {
        free(f);
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    drv_err(&f->first_err, 503, "unavailable", "", "no answer from %s yet", f->server);
    f->routes_started = pthread_create(&f->routes_thread, NULL, routes_main, f) == 0;
    f->report_started =
        f->routes_started && pthread_create(&f->report_thread, NULL, report_main, f) == 0;
    if (!f->report_started) {
        drv_err_internal(err, "cannot start threads");
        drv_gw_follow_destroy(f);
        return NULL;
    }
    int64_t until = drv_mono_ms() + first_wait_ms;
    pthread_mutex_lock(&f->mu);
    while (!f->have_routes && drv_mono_ms() < until) {
        struct timespec ts;
        drv_deadline_in(100, &ts);
        pthread_cond_timedwait(&f->cv, &f->mu, &ts);
    }
    bool ok = f->have_routes;
    if (!ok)
        *err = f->first_err;
    pthread_mutex_unlock(&f->mu);
    if (!ok) {
        drv_gw_follow_destroy(f);
        return NULL;
    }
    return f;
}

void drv_gw_follow_destroy(drv_gw_follow_t *f)
{
    if (!f)
        return;
    atomic_store(&f->stop, true);
    drv_gw_follow_kick(f);
    if (f->routes_started)
        pthread_join(f->routes_thread, NULL);
    if (f->report_started)
        pthread_join(f->report_thread, NULL);
    drv_gw_creds_destroy(f->creds);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
}

drv_gw_creds_t *drv_gw_follow_creds(drv_gw_follow_t *f)
{
    return f->creds;
}

json_t *drv_gw_follow_health(drv_gw_follow_t *f)
{
    pthread_mutex_lock(&f->mu);
    json_t *doc = json_pack("{s:s, s:s, s:b, s:I}", "status", "ok", "routes_version",
                            f->version, "head_reachable", f->reachable,
                            "seconds_since_contact",
                            (json_int_t)((drv_mono_ms() - f->contact_ms) / 1000));
    pthread_mutex_unlock(&f->mu);
    return doc;
}
