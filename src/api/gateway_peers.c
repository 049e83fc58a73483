/* gateway_peers.c — the head's side of standalone gateways (drover-gateway;
 * gateway_peers.h): the routes document they follow (GET
 * /v1/gateway/routes) and the load they report (POST /v1/gateway/load),
 * which the replica autoscaler adds to the head's own gateway's load
 * (head/gateway_link.c) and GET /metrics shows, with the running service
 * totals (gateway/totals.h) that the SLO model adds to the head's own
 * gateway's.
 *
 * The document is built only once some gateway has asked for it: then at
 * the end of each full controller pass, under the state lock, from the
 * routing table just built (no I/O); long polls are woken only when its
 * version (a hash of the content) changes. Reports are kept per gateway
 * name, sorted by deployment key, and count for GW_PEER_LIVE_MS after they
 * arrive (a gateway reports every second, and at once when a cold start
 * begins). Everything here is under peers_mu; nothing runs per request.
 *
 * Totals: each report's entries may carry the gateway's running totals
 * per deployment. The head keeps each gateway's last ones and adds every
 * report's difference into a per-deployment sum over all gateways that
 * only grows (drv_gw_totals_add_delta): a total that went down means
 * that gateway restarted (its totals count from zero); a gateway that
 * goes away leaves its share in. A gateway is forgotten (its last totals
 * with it) after GW_PEER_FORGET_MS of silence, or once silent
 * GW_PEER_GONE_MS when its slot is wanted: a gateway that comes back
 * before then is not counted twice.
 */
#include "api/gateway_peers.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/gateway_state.h"
#include "common/util.h"
#include "gateway/totals.h"
#include "state/state.h"

#define PEERS_MAX 256
#define PEER_ENTRIES_MAX 100000
#define GW_PEER_LIVE_MS 5000     /* a report counts this long */
#define GW_PEER_GONE_MS (60 * 1000)          /* silent this long: its slot may be taken */
#define GW_PEER_FORGET_MS (3600 * 1000)      /* silent this long: forgotten */
#define SUMS_MAX PEER_ENTRIES_MAX            /* deployments with summed totals */

typedef struct gw_peer_load {
    char key[192];           /* "owner/id" */
    uint32_t in_flight, queued;
    bool cold;
    drv_gw_demand_t *tot;    /* its running totals (NULL: the entry had none) */
} peer_load_t;

typedef struct dep_sum {
    char key[192];
    drv_gw_demand_t t;       /* the totals summed over the gateways (only grows) */
} dep_sum_t;

typedef struct gw_peer {
    char name[64];
    int64_t at_ms;           /* drv_mono_ms() of the last report */
    peer_load_t *v;          /* sorted by key */
    size_t n;
} gw_peer_t;

struct drv_gw_peers {
    pthread_mutex_t peers_mu;
    gw_peer_t *peers;
    size_t n_peers;
    char *routes_doc;        /* the last routes document (NULL: none built yet) */
    size_t routes_len;
    char routes_version[DRV_GW_VERSION_LEN];
    atomic_bool routes_wanted;   /* a gateway asked: keep the document current */
    dep_sum_t **sums;        /* sorted by key */
    size_t n_sums;
};

static void loads_free(peer_load_t *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i].tot);
    free(v);
}

drv_gw_peers_t *drv_gw_peers_create(void)
{
    drv_gw_peers_t *g = calloc(1, sizeof *g);
    if (g)
        pthread_mutex_init(&g->peers_mu, NULL);
    return g;
}

/* --- routes ------------------------------------------------------------------------ */

/* Keep doc as the current document; true when its version changed. */
static bool store_doc(drv_gw_peers_t *g, char *doc, size_t len, const char *version)
{
    pthread_mutex_lock(&g->peers_mu);
    bool changed = !g->routes_doc || strcmp(g->routes_version, version) != 0;
    if (changed) {
        free(g->routes_doc);
        g->routes_doc = doc;
        g->routes_len = len;
        snprintf(g->routes_version, sizeof g->routes_version, "%s", version);
    } else {
        free(doc);
    }
    pthread_mutex_unlock(&g->peers_mu);
    return changed;
}

void drv_gw_peers_publish(drv_gw_peers_t *g, drv_head_t *head, const drv_gw_table_t *t)
{
    if (!atomic_load(&g->routes_wanted))
        return;
    char version[DRV_GW_VERSION_LEN];
    size_t len = 0;
    char *doc = drv_gw_routes_doc(t, drv_gw_tokens_json(head->state, drv_now_ms() / 1000), &len,
                                  version);
    if (doc && store_doc(g, doc, len, version))
        drv_head_wake(head, DRV_GW_ROUTES_KEY);
}

int drv_gw_peers_routes(drv_gw_peers_t *g, drv_head_t *head, const char *wait, char **doc,
                        size_t *len, bool *hold, drv_error_t *err)
{
    *hold = false;
    atomic_store(&g->routes_wanted, true);
    pthread_mutex_lock(&g->peers_mu);
    bool none = !g->routes_doc;
    pthread_mutex_unlock(&g->peers_mu);
    if (none) {
        /* the first gateway: build it now rather than wait for a pass */
        drv_state_rdlock(head->state);
        drv_gw_table_t *t = drv_gw_table_build(head->state);
        char version[DRV_GW_VERSION_LEN];
        size_t n = 0;
        char *d = t ? drv_gw_routes_doc(t, drv_gw_tokens_json(head->state, drv_now_ms() / 1000),
                                        &n, version)
                    : NULL;
        drv_state_unlock(head->state);
        drv_gw_table_free(t);
        if (!d)
            return drv_err_internal(err, "out of memory");
        store_doc(g, d, n, version);
    }
    pthread_mutex_lock(&g->peers_mu);
    if (wait && strcmp(wait, g->routes_version) == 0) {
        *hold = true;
        *doc = NULL;
    } else {
        *doc = malloc(g->routes_len + 1);
        if (*doc) {
            memcpy(*doc, g->routes_doc, g->routes_len + 1);
            *len = g->routes_len;
        }
    }
    pthread_mutex_unlock(&g->peers_mu);
    if (!*hold && !*doc)
        return drv_err_internal(err, "out of memory");
    return 0;
}

/* --- load reports -------------------------------------------------------------------- */

static int load_cmp(const void *a, const void *b)
{
    return strcmp(((const peer_load_t *)a)->key, ((const peer_load_t *)b)->key);
}

static int count_of(const json_t *o, const char *k, uint32_t *out)
{
    const json_t *v = json_object_get(o, k);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 10000000)
        return -1;
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

/* Parse and check a report into *out (sorted by key); nothing kept on -1. */
static int parse_report(const json_t *body, const char **name, peer_load_t **out, size_t *nout,
                        bool *waiting, drv_error_t *err)
{
    *name = json_string_value(json_object_get(body, "gateway"));
    const json_t *deps = json_object_get(body, "deployments");
    if (!json_is_object(body) || !*name || !drv_id_valid(*name))
        return drv_err_invalid(err, "gateway", "the report needs \"gateway\": the gateway's "
                               "name (letters, digits, '-', up to 63)");
    if (!json_is_array(deps) || json_array_size(deps) > PEER_ENTRIES_MAX)
        return drv_err_invalid(err, "deployments", "\"deployments\" must be an array of at "
                               "most %d {deployment, in_flight, queued, cold}", PEER_ENTRIES_MAX);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v) {
        if (strcmp(k, "gateway") != 0 && strcmp(k, "deployments") != 0)
            return drv_err_invalid(err, k, "unknown field '%s'", k);
    }
    size_t n = json_array_size(deps), i;
    peer_load_t *pl = calloc(n ? n : 1, sizeof *pl);
    if (!pl)
        return drv_err_internal(err, "out of memory");
    *waiting = false;
    json_array_foreach(deps, i, v) {
        const char *key = json_string_value(json_object_get(v, "deployment"));
        const json_t *cold = json_object_get(v, "cold");
        if (!key || !strchr(key, '/') || strlen(key) >= sizeof pl[i].key ||
            count_of(v, "in_flight", &pl[i].in_flight) < 0 ||
            count_of(v, "queued", &pl[i].queued) < 0 || !json_is_boolean(cold)) {
            loads_free(pl, n);
            return drv_err_invalid(err, "deployments", "deployments[%zu] must be {deployment: "
                                   "\"owner/id\", in_flight: n, queued: n, cold: bool}", i);
        }
        snprintf(pl[i].key, sizeof pl[i].key, "%s", key);
        pl[i].cold = json_is_true(cold);
        *waiting = *waiting || (pl[i].cold && pl[i].queued > 0);
        drv_gw_demand_t t;
        bool has;
        char where[48];
        snprintf(where, sizeof where, "deployments[%zu]", i);
        if (drv_gw_totals_from_json(v, where, &t, &has, err) < 0) {
            loads_free(pl, n);
            return -1;
        }
        if (has && !(pl[i].tot = malloc(sizeof t))) {
            loads_free(pl, n);
            return drv_err_internal(err, "out of memory");
        }
        if (has)
            *pl[i].tot = t;
    }
    qsort(pl, n, sizeof *pl, load_cmp);
    for (i = 1; i < n; i++)
        if (strcmp(pl[i - 1].key, pl[i].key) == 0) {
            drv_err_invalid(err, "deployments", "deployment '%s' is reported twice", pl[i].key);
            loads_free(pl, n);
            return -1;
        }
    *out = pl;
    *nout = n;
    return 0;
}

/* Where key is (or goes) in the sorted sums. */
static size_t sum_pos(const drv_gw_peers_t *g, const char *key, bool *found)
{
    size_t lo = 0, hi = g->n_sums;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->sums[mid]->key, key);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

/* Fold peer p's new report (pl, n; with totals) into the sums: each entry's
 * difference from p's last report. The sums array and new sums are made
 * first, so a failure (-1, OOM) changes nothing. Under peers_mu. */
static int fold_totals(drv_gw_peers_t *g, const gw_peer_t *p, const peer_load_t *pl, size_t n)
{
    size_t fresh = 0;
    for (size_t i = 0; i < n; i++) {
        bool found;
        if (pl[i].tot && (sum_pos(g, pl[i].key, &found), !found))
            fresh++;
    }
    if (g->n_sums + fresh > SUMS_MAX)
        fresh = SUMS_MAX > g->n_sums ? SUMS_MAX - g->n_sums : 0;   /* the rest: not summed */
    dep_sum_t **made = fresh ? calloc(fresh, sizeof *made) : NULL;
    bool ok = !fresh || made;
    for (size_t i = 0; ok && i < fresh; i++)
        ok = (made[i] = calloc(1, sizeof **made)) != NULL;
    dep_sum_t **ns = ok && fresh ? realloc(g->sums, (g->n_sums + fresh) * sizeof *ns) : g->sums;
    if (!ok || (fresh && !ns)) {
        for (size_t i = 0; made && i < fresh; i++)
            free(made[i]);
        free(made);
        return -1;
    }
    g->sums = ns;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (!pl[i].tot)
            continue;
        bool found;
        size_t at = sum_pos(g, pl[i].key, &found);
        if (!found) {
            if (used == fresh)
                continue;   /* past SUMS_MAX */
            dep_sum_t *e = made[used++];
            snprintf(e->key, sizeof e->key, "%s", pl[i].key);
            memmove(&g->sums[at + 1], &g->sums[at], (g->n_sums - at) * sizeof *g->sums);
            g->sums[at] = e;
            g->n_sums++;
        }
        const peer_load_t *old = p->v ? bsearch(&pl[i], p->v, p->n, sizeof *p->v, load_cmp)
                                      : NULL;
        drv_gw_totals_add_delta(&g->sums[at]->t, old ? old->tot : NULL, pl[i].tot);
    }
    free(made);
    return 0;
}

/* The slot of gateway name (made when new; NULL when the slots are full):
 * forgets gateways silent GW_PEER_FORGET_MS, and takes the slot of the
 * longest silent past GW_PEER_GONE_MS when none is free. Under peers_mu. */
static gw_peer_t *peer_slot(drv_gw_peers_t *g, const char *name, int64_t now)
{
    gw_peer_t *p = NULL;
    size_t live = 0;
    for (size_t j = 0; j < g->n_peers; j++) {
        gw_peer_t q = g->peers[j];
        bool mine = strcmp(q.name, name) == 0;
        if (!mine && now - q.at_ms > GW_PEER_FORGET_MS) {
            loads_free(q.v, q.n);
            continue;
        }
        g->peers[live] = q;
        if (mine)
            p = &g->peers[live];
        live++;
    }
    g->n_peers = live;
    if (p)
        return p;
    if (g->n_peers >= PEERS_MAX) {
        gw_peer_t *old = NULL;
        for (size_t j = 0; j < g->n_peers; j++)
            if (now - g->peers[j].at_ms > GW_PEER_GONE_MS &&
                (!old || g->peers[j].at_ms < old->at_ms))
                old = &g->peers[j];
        if (!old)
            return NULL;
        loads_free(old->v, old->n);   /* its share stays in the sums */
        memset(old, 0, sizeof *old);
        snprintf(old->name, sizeof old->name, "%s", name);
        return old;
    }
    gw_peer_t *np = realloc(g->peers, (g->n_peers + 1) * sizeof *np);
    if (!np)
        return NULL;
    g->peers = np;
    p = &g->peers[g->n_peers++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    return p;
}

int drv_gw_peers_report_at(drv_gw_peers_t *g, drv_head_t *head, const json_t *body,
                           int64_t now, drv_error_t *err)
{
    const char *name;
    peer_load_t *pl;
    size_t n;
    bool waiting;
    if (parse_report(body, &name, &pl, &n, &waiting, err) < 0)
        return -1;
    pthread_mutex_lock(&g->peers_mu);
    gw_peer_t *p = peer_slot(g, name, now);
    if (!p) {
        pthread_mutex_unlock(&g->peers_mu);
        loads_free(pl, n);
        return drv_err(err, 429, "resource_exhausted", "gateway",
                       "too many gateways report to this head (at most %d)", PEERS_MAX);
    }
    if (fold_totals(g, p, pl, n) < 0) {
        pthread_mutex_unlock(&g->peers_mu);
        loads_free(pl, n);
        return drv_err_internal(err, "out of memory");
    }
    loads_free(p->v, p->n);
    p->v = pl;
    p->n = n;
    p->at_ms = now;
    pthread_mutex_unlock(&g->peers_mu);
    if (waiting && head)
        drv_head_kick(head);   /* scale from zero now, not at the next pass */
    return 0;
}

int drv_gw_peers_report(drv_gw_peers_t *g, drv_head_t *head, const json_t *body,
                        drv_error_t *err)
{
    return drv_gw_peers_report_at(g, head, body, drv_mono_ms(), err);
}

bool drv_gw_peers_service(drv_gw_peers_t *g, const char *key, drv_gw_demand_t *d)
{
    pthread_mutex_lock(&g->peers_mu);
    bool found;
    size_t at = sum_pos(g, key, &found);
    if (found)
        drv_gw_totals_add_delta(d, NULL, &g->sums[at]->t);   /* d += the sums */
    pthread_mutex_unlock(&g->peers_mu);
    return found;
}

void drv_gw_peers_load(drv_gw_peers_t *g, const char *key, double *load, bool *waiting)
{
    int64_t now = drv_mono_ms();
    peer_load_t probe;
    snprintf(probe.key, sizeof probe.key, "%s", key);
    pthread_mutex_lock(&g->peers_mu);
    for (size_t j = 0; j < g->n_peers; j++) {
        gw_peer_t *p = &g->peers[j];
        if (now - p->at_ms > GW_PEER_LIVE_MS)
            continue;
        peer_load_t *e = bsearch(&probe, p->v, p->n, sizeof *p->v, load_cmp);
        if (!e)
            continue;
        *load += (double)e->in_flight + (double)e->queued;
        *waiting = *waiting || (e->cold && e->queued > 0);
    }
    pthread_mutex_unlock(&g->peers_mu);
}

void drv_gw_peers_metrics(drv_gw_peers_t *g, const char *owner, char **buf, size_t *len,
                          size_t *cap)
{
    static const char *const names[2] = {"drover_gateway_peer_in_flight",
                                         "drover_gateway_peer_queued"};
    int64_t now = drv_mono_ms();
    size_t olen = owner ? strlen(owner) : 0;
    pthread_mutex_lock(&g->peers_mu);
    for (int f = 0; f < 2; f++) {
        drv_appendf(buf, len, cap, "# HELP %s Requests %s a standalone gateway (drover-gateway), "
                    "as it last reported.\n# TYPE %s gauge\n", names[f],
                    f ? "waiting in" : "running through", names[f]);
        for (size_t j = 0; j < g->n_peers; j++) {
            const gw_peer_t *p = &g->peers[j];
            if (now - p->at_ms > GW_PEER_LIVE_MS)
                continue;
            for (size_t i = 0; i < p->n; i++) {
                const char *key = p->v[i].key, *slash = strchr(key, '/');
                if (owner && (strncmp(key, owner, olen) != 0 || key[olen] != '/'))
                    continue;
                drv_appendf(buf, len, cap,
                            "%s{gateway=\"%s\",owner=\"%.*s\",deployment=\"%s\"} %u\n",
                            names[f], p->name, (int)(slash - key), key, slash + 1,
                            f ? p->v[i].queued : p->v[i].in_flight);
            }
        }
    }
    static const char routed[] = "drover_gateway_peer_routed_total";
    drv_appendf(buf, len, cap, "# HELP %s Requests routed by the standalone gateways "
                "(drover-gateway), summed over them since this head started (the SLO model's "
                "arrivals).\n# TYPE %s counter\n", routed, routed);
    for (size_t i = 0; i < g->n_sums; i++) {
        const char *key = g->sums[i]->key, *slash = strchr(key, '/');
        if (owner && (strncmp(key, owner, olen) != 0 || key[olen] != '/'))
            continue;
        drv_appendf(buf, len, cap, "%s{owner=\"%.*s\",deployment=\"%s\"} %llu\n", routed,
                    (int)(slash - key), key, slash + 1,
                    (unsigned long long)g->sums[i]->t.arrivals);
    }
    pthread_mutex_unlock(&g->peers_mu);
}

void drv_gw_peers_destroy(drv_gw_peers_t *g)
{
    if (!g)
        return;
    for (size_t j = 0; j < g->n_peers; j++)
        loads_free(g->peers[j].v, g->peers[j].n);
    free(g->peers);
    for (size_t i = 0; i < g->n_sums; i++)
        free(g->sums[i]);
    free(g->sums);
    free(g->routes_doc);
    pthread_mutex_destroy(&g->peers_mu);
    free(g);
}
