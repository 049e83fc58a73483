/* cost.h — what nodes cost while they run (design §2, issue 8): each node's
 * price per hour from the catalog (its instance type at its capacity:
 * on-demand, or spot where the catalog knows a spot price) and what it has
 * cost since it was created; per nodepool and per cluster, the sum over
 * their nodes now (running cost per hour and accrued). Shown in the
 * objects' status.cost (the API, `drover describe`). Runs on the controller
 * thread under the state write lock, without I/O. */
#ifndef DRV_COST_H
#define DRV_COST_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "catalog/catalog.h"
#include "state/head.h"

/* Price per hour of one node of type t at capacity "on_demand" | "spot"
 * (an unknown spot price: the on-demand one). 0 for NULL t. */
double drv_cost_price(const drv_instance_type_t *t, const char *capacity);

/* USD a node at price_per_hour has cost from created_s to now_s (epoch s). */
double drv_cost_accrued(double price_per_hour, int64_t created_s, int64_t now_s);

/* A node's accrued cost is shown again at most this often (seconds). */
#define DRV_COST_RENDER_S 60

/* Whether a node's status.cost should become `want` now, when `shown` was
 * rendered at last_s (epoch s): never when they are equal; at once for the
 * first cost (shown NULL), a new price or capacity, or a node that ends
 * (ending: terminating, its final cost); a cost that only accrued, once
 * DRV_COST_RENDER_S passed since last_s (or the clock went back). Pure. */
bool drv_cost_render_due(const json_t *shown, const json_t *want, int64_t last_s, int64_t now_s,
                         bool ending);

/* Refresh status.cost of every node, nodepool and cluster (a re-render only
 * when a figure changed: accrued costs move in whole cents; a node's at
 * most every DRV_COST_RENDER_S, drv_cost_render_due). Nodepool and cluster
 * totals are summed from every node's cost now, whatever the node shows. */
void drv_cost_update(drv_head_t *head, int64_t now_s);

#endif
