/* gateway_peers.h — the head's side of standalone gateways (drover-gateway;
 * docs/api.md "Standalone gateways"): the routes document they follow and
 * the load and running service totals they report (gateway_peers.c). Made by droverd's gateway
 * embedding (head/gateway_link.c) as head->gw_peers; the API's gateway
 * handlers (h_gateway.c, h_predict.c's /metrics) and the embedding's
 * controller hooks reach it there.
 */
#ifndef DRV_API_GATEWAY_PEERS_H
#define DRV_API_GATEWAY_PEERS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "gateway/gateway.h"
#include "gateway/table.h"
#include "state/head.h"

typedef struct drv_gw_peers drv_gw_peers_t;

#define DRV_GW_ROUTES_KEY 0x6777726f75746573ULL   /* drv_head_wake key of route long polls */

/* NULL on OOM. */
drv_gw_peers_t *drv_gw_peers_create(void);
void drv_gw_peers_destroy(drv_gw_peers_t *p);   /* accepts NULL */
/* Controller, under the state lock: refresh the routes document from t
 * when a gateway follows it; wakes the long polls when it changed. */
void drv_gw_peers_publish(drv_gw_peers_t *p, drv_head_t *head, const drv_gw_table_t *t);
/* GET /v1/gateway/routes: the routes document (malloc'd copy) and its
 * version; *hold true when it equals wait (the caller long-polls on
 * DRV_GW_ROUTES_KEY and asks again). Takes the state lock itself for the
 * first document. -1 on OOM. */
int drv_gw_peers_routes(drv_gw_peers_t *p, drv_head_t *head, const char *wait, char **doc,
                        size_t *len, bool *hold, drv_error_t *err);
/* POST /v1/gateway/load: a standalone gateway's report; replaces its last
 * one (a cold start in it kicks the controller) and adds its totals' growth
 * since its last report to the per-deployment sums (gateway/totals.h). -1
 * with a 400 naming the field on a malformed report (nothing kept), 429
 * past the number of gateways kept. */
int drv_gw_peers_report(drv_gw_peers_t *p, drv_head_t *head, const json_t *body,
                        drv_error_t *err);
/* The same at drv_mono_ms() now (unit tests); head may be NULL (no kick). */
int drv_gw_peers_report_at(drv_gw_peers_t *p, drv_head_t *head, const json_t *body,
                           int64_t now, drv_error_t *err);
/* The SLO model's input: the standalone gateways' running totals on
 * deployment key, summed over them (only grows; gone gateways' shares
 * stay), added to d's totals. False when none reported totals for it. */
bool drv_gw_peers_service(drv_gw_peers_t *p, const char *key, drv_gw_demand_t *d);
/* Standalone gateways' load on deployment key (live reports only), added
 * to *load and *waiting. */
void drv_gw_peers_load(drv_gw_peers_t *p, const char *key, double *load, bool *waiting);
/* GET /metrics: their last reports and the sums of their arrivals
 * (owner: only that user's deployments, NULL: all) appended in Prometheus
 * text format to *buf. */
void drv_gw_peers_metrics(drv_gw_peers_t *p, const char *owner, char **buf, size_t *len,
                          size_t *cap);

#endif
