/* gateway_link.c — droverd's embedding of the inference gateway (see
 * gateway_link.h): the controller's hooks (publish: a routing table built
 * from the state, handed to the gateway thread, to the standalone
 * gateways' routes document and to the inference listener's token set;
 * load: the gateway's and the standalone gateways' load for the replica
 * autoscaler; service: their running totals for its SLO model), the kick of a cold start, and the inference listener.
 *
 * publish and load run on the controller thread under the state write
 * lock (no I/O: building a table, swapping pointers); create, listen, stop
 * and destroy on main.
 */
#include "head/gateway_link.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/gateway_peers.h"
#include "api/gateway_state.h"
#include "common/log.h"
#include "gateway/creds.h"
#include "gateway/gateway.h"
#include "gateway/serve.h"
#include "head/scaling.h"
#include "state/state.h"

struct drv_gateway_link {
    drv_head_t *head;
    drv_gateway_t *g;
    drv_gw_peers_t *peers;           /* standalone gateways (also head->gw_peers) */
    drv_gw_serve_t *local_sv;        /* the inference listener (NULL: none) */
    drv_gw_creds_t *local_creds;     /* its tokens (also head->gw_creds) */
};

static void publish(void *ctx)
{
    drv_gateway_link_t *l = ctx;
    drv_gw_table_t *t = drv_gw_table_build(l->head->state);
    if (!t)
        return;
    drv_gw_peers_publish(l->peers, l->head, t);   /* standalone gateways' copy, when one follows */
    if (l->local_creds) {         /* the inference listener's tokens */
        drv_gw_tokens_t *toks = drv_gw_tokens_build(l->head->state, time(NULL));
        if (!toks)
            drv_warn("gateway: out of memory building the inference listener's tokens; "
                     "it refuses every token until the next pass");
        drv_gw_creds_set(l->local_creds, toks, t);
    }
    drv_gateway_set_table(l->g, t);
}

/* The replica autoscaler's input: requests in flight and queued; a cold
 * start (requests waiting with no ready replica) asks for one at once.
 * Standalone gateways' reports add theirs. */
static void gw_load(void *ctx, const char *key, double *load, bool *waiting)
{
    drv_gateway_link_t *l = ctx;
    drv_gw_demand_t d;
    *load = 0;
    *waiting = false;
    if (drv_gateway_demand(l->g, key, &d)) {
        *load = (double)d.in_flight + (double)d.queued;
        *waiting = d.cold && d.queued > 0;
    }
    double pl = 0;
    bool pw = false;
    drv_gw_peers_load(l->peers, key, &pl, &pw);
    *load += pl;
    *waiting = *waiting || pw;
}

/* The SLO model's input: the embedded gateway's running totals plus the
 * standalone gateways' (their reports' sums, api/gateway_peers.c). */
static bool gw_service(void *ctx, const char *key, drv_head_service_t *out)
{
    drv_gateway_link_t *l = ctx;
    drv_gw_demand_t d;
    memset(out, 0, sizeof *out);
    bool seen = drv_gateway_demand(l->g, key, &d);
    if (!drv_gw_peers_service(l->peers, key, &d) && !seen)   /* d += the peers' sums */
        return false;
    out->arrivals = d.arrivals;
    out->served = d.served;
    out->first_s = (double)d.served_first_us / 1e6;
    out->first_sq_s2 = (double)d.served_first_sq_ms2 / 1e6;
    out->service_s = (double)d.served_us / 1e6;
    out->slots = d.max_concurrency;
    out->prompted = d.prompted;
    out->prompt_tokens = (double)d.prompt_tokens;
    for (size_t b = 0; b < DRV_PROMPTLEN_BINS; b++)
        out->prompt_hist[b] = (double)d.prompt_hist[b];
    out->tail_n = d.served_prompted;
    out->tail_p = (double)d.served_p;
    out->tail_f_s = (double)d.served_p_first_us / 1e6;
    out->tail_pp = (double)d.served_pp;
    out->tail_pf = (double)d.served_pf_ms / 1e3;
    out->service_sq_s2 = (double)d.served_sq_ms2 / 1e6;
    out->gen_n = d.served_gen;
    out->gen_tokens = (double)d.gen_tokens;
    out->batch_n = d.batch_n;   /* (the gateway's integer units: gateway.h) */
    out->batch_x = (double)d.batch_x_milli / 1e3;
    out->batch_xx = (double)d.batch_xx_centi / 1e2;
    out->batch_y = (double)d.batch_y_10ns / 1e8;
    out->batch_xy = (double)d.batch_xy_us / 1e6;
    return true;
}

/* the gateway kicks at the first arrival after a quiet spell; the
 * controller's ticks must last until then (gateway.h) */
_Static_assert(DRV_GW_QUIET_KICK_MS <= DRV_SCALING_BUSY_MS, "a gap with neither kick nor tick");

static void head_kick(void *ctx)
{
    drv_head_kick(ctx);
}

drv_gateway_link_t *drv_gateway_link_create(drv_head_t *head, drv_error_t *err)
{
    drv_gateway_link_t *l = calloc(1, sizeof *l);
    if (!l || !(l->peers = drv_gw_peers_create())) {
        free(l);
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    drv_gw_hooks_t hooks = {head_kick, head};
    if (!(l->g = drv_gateway_new(&hooks, err))) {
        drv_gw_peers_destroy(l->peers);
        free(l);
        return NULL;
    }
    l->head = head;
    head->gateway = l->g;
    head->gw_peers = l->peers;
    head->publish = publish;
    head->publish_ctx = l;
    head->load = gw_load;
    head->service = gw_service;
    head->load_ctx = l;
    return l;
}

static json_t *local_health(void *ctx)
{
    (void)ctx;
    return json_pack("{s:s, s:b}", "status", "ok", "in_head", 1);
}

int drv_gateway_link_listen(drv_gateway_link_t *l, const char *addr, drv_error_t *err)
{
    return drv_gateway_link_listen_tls(l, addr, NULL, NULL, err);
}

int drv_gateway_link_listen_tls(drv_gateway_link_t *l, const char *addr, const char *cert_pem,
                                const char *key_pem, drv_error_t *err)
{
    if (l->local_sv)
        return drv_err_internal(err, "the inference listener is made once");
    if (!(l->local_creds = drv_gw_creds_create()))
        return drv_err_internal(err, "out of memory");
    drv_state_rdlock(l->head->state);   /* the tokens now; then at every publish */
    drv_gw_table_t *t = drv_gw_table_build(l->head->state);
    drv_gw_creds_set(l->local_creds, drv_gw_tokens_build(l->head->state, time(NULL)), t);
    drv_state_unlock(l->head->state);
    drv_gw_table_free(t);
    drv_gw_front_t front = {l->local_creds, local_health, l, l->head->cfg.auth_fail_rate,
                            l->head->cfg.auth_fail_burst, l->head->cfg.auth_fail_table};
    if (!(l->local_sv = drv_gw_serve_create_tls(l->g, &front, addr, cert_pem, key_pem, err))) {
        drv_gw_creds_destroy(l->local_creds);   /* nothing left behind */
        l->local_creds = NULL;
        return -1;
    }
    l->head->gw_creds = l->local_creds;   /* token changes reach it before the API answers */
    return drv_gw_serve_port(l->local_sv);
}

int drv_gateway_link_set_cert(drv_gateway_link_t *l, const char *cert_pem, const char *key_pem,
                              drv_error_t *err)
{
    return l->local_sv ? drv_gw_serve_set_cert(l->local_sv, cert_pem, key_pem, err) : 0;
}

void drv_gateway_link_stop(drv_gateway_link_t *l)
{
    if (l)
        drv_gateway_stop(l->g);
}

void drv_gateway_link_destroy(drv_gateway_link_t *l)
{
    if (!l)
        return;
    drv_gateway_stop(l->g);
    l->head->publish = NULL;
    l->head->load = NULL;
    l->head->service = NULL;
    drv_gateway_join(l->g);
    l->head->gateway = NULL;
    l->head->gw_peers = NULL;
    l->head->gw_creds = NULL;
    drv_gw_serve_destroy(l->local_sv);   /* join closed its connections */
    drv_gw_creds_destroy(l->local_creds);
    drv_gateway_destroy(l->g);
    drv_gw_peers_destroy(l->peers);
    free(l);
}
