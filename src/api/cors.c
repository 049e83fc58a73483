/* cors.c — see cors.h. Both lists are the lease's last snapshot
 * (store/lease.h drv_lease_view). CORS allows the origin of every URL the
 * heads table holds: a page loaded from a head keeps calling the others
 * after its head died, until that head's row is dropped a day later (the
 * roster alone, heads seen in the last 60 s, refused it a minute after the
 * death: the page stopped working until reloaded from a live head). The
 * CSP of a page served now lists the roster's heads only: a dead head is
 * no head to call, and the page's own origin is 'self'. A head joining
 * later is allowed from its first roster round on (a console page's CSP
 * from its load on). */
#include "api/cors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/lease.h"

/* The origin of url (scheme://host[:port], no path) into out. */
static void origin_of(const char *url, char *out, size_t n)
{
    const char *p = strstr(url, "://");
    size_t len = p ? (size_t)(p + 3 - url) + strcspn(p + 3, "/?#") : strlen(url);
    snprintf(out, n, "%.*s", (int)len, url);
}

/* Call fn with each head's origin (this one's first) until it returns true:
 * the roster's heads, and with all every URL of the heads table too. */
static bool each_origin(const drv_head_t *h, bool all, bool (*fn)(const char *o, void *ud),
                        void *ud)
{
    drv_lease_t *l = h ? __atomic_load_n(&h->lease, __ATOMIC_ACQUIRE) : NULL;
    if (!l)
        return false;
    char o[300];
    origin_of(h->cfg.server_url, o, sizeof o);
    if (fn(o, ud))
        return true;
    drv_lease_view_t *v = malloc(sizeof *v);
    if (!v)
        return false;
    drv_lease_view(l, v);
    bool hit = false;
    for (size_t i = 0; i < v->nheads && !hit; i++) {
        if (!v->heads[i].url[0])
            continue;
        origin_of(v->heads[i].url, o, sizeof o);
        hit = fn(o, ud);
    }
    for (size_t i = 0; all && i < v->nurls && !hit; i++) {
        origin_of(v->urls[i], o, sizeof o);
        hit = fn(o, ud);
    }
    free(v);
    return hit;
}

static bool same(const char *o, void *ud)
{
    return strcmp(o, (const char *)ud) == 0;
}

bool drv_cors_origin_ok(const drv_head_t *h, const char *origin)
{
    return origin && *origin && strlen(origin) < 300 && !strchr(origin, ' ') &&
           each_origin(h, true, same, (void *)origin);
}

typedef struct acc {
    char *out;
    size_t n, len;
} acc_t;

static bool add(const char *o, void *ud)
{
    acc_t *a = ud;
    if (strchr(o, ' ') || strchr(o, ';') || strchr(o, ','))
        return false;   /* nothing that could change the policy's meaning */
    size_t ol = strlen(o);
    for (const char *p = a->out; (p = strstr(p, o)); p += ol)   /* once each */
        if ((p == a->out || p[-1] == ' ') && (p[ol] == ' ' || p[ol] == '\0'))
            return false;
    if (a->len + ol + 2 > a->n)
        return true;
    a->len += (size_t)snprintf(a->out + a->len, a->n - a->len, "%s%s", a->len ? " " : "", o);
    return false;
}

void drv_cors_origins(const drv_head_t *h, char *out, size_t n)
{
    acc_t a = {out, n, 0};
    out[0] = '\0';
    each_origin(h, false, add, &a);
}

void drv_cors_preflight(const drv_req_t *req, drv_resp_t *resp)
{
    static const drv_kv_t allow[] = {
        {"Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE"},
        {"Access-Control-Allow-Headers", "Authorization, Content-Type, If-Match, X-Drover-Timeout"},
        {"Access-Control-Max-Age", "600"},
        {NULL, NULL},
    };
    drv_resp_raw(resp, 204, "text/plain", NULL, 0);
    if (drv_cors_origin_ok(req->head, drv_req_header(req, "Origin")))
        resp->headers = allow;
}
