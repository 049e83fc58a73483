/* cost.c — see cost.h. Accrued figures are rounded to cents, so an object's
 * status changes (and is rendered again) at most once per cent, not every
 * pass; a node's, at most once per DRV_COST_RENDER_S (its own soft.cost_s:
 * controller thread, under the state write lock). */
#include "head/cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/state.h"
#include "common/json.h"

double drv_cost_price(const drv_instance_type_t *t, const char *capacity)
{
    if (!t)
        return 0;
    if (capacity && strcmp(capacity, "spot") == 0 && t->spot_price_per_hour >= 0)
        return t->spot_price_per_hour;
    return t->price_per_hour;
}

double drv_cost_accrued(double price_per_hour, int64_t created_s, int64_t now_s)
{
    int64_t secs = now_s > created_s ? now_s - created_s : 0;
    return floor(price_per_hour * (double)secs / 36.0) / 100.0;   /* whole cents */
}

bool drv_cost_render_due(const json_t *shown, const json_t *want, int64_t last_s, int64_t now_s,
                         bool ending)
{
    if (json_equal(shown, want))
        return false;
    if (!shown || ending)
        return true;
    static const char *const fixed[] = {"price_per_hour", "capacity_type"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (!json_equal(json_object_get(shown, fixed[i]), json_object_get(want, fixed[i])))
            return true;
    return now_s - last_s >= DRV_COST_RENDER_S || now_s < last_s;
}

/* Set status.cost = cost (stolen) when it differs. */
static void set_cost(drv_state_t *st, drv_obj_t *o, json_t *cost)
{
    if (json_equal(json_object_get(o->status, "cost"), cost)) {
        json_decref(cost);
        return;
    }
    json_t *s = o->status ? json_deep_copy(o->status) : json_object();
    json_object_set_new(s, "cost", cost);
    drv_state_set_status(st, o, s);
}

typedef struct sum {
    int nodes;
    double per_hour, accrued;
} sum_t;

static json_t *sum_json(const sum_t *s)
{
    return json_pack("{s:i, s:f, s:f}", "nodes", s->nodes, "running_usd_per_hour",
                     round(s->per_hour * 10000) / 10000, "accrued_usd",
                     round(s->accrued * 100) / 100);
}

void drv_cost_update(drv_head_t *head, int64_t now_s)
{
    drv_state_t *st = head->state;
    size_t np = drv_state_count(st, DRV_K_NODEPOOL), nc = drv_state_count(st, DRV_K_CLUSTER);
    sum_t *pools = calloc(np ? np : 1, sizeof *pools), *clusters = calloc(nc ? nc : 1, sizeof *clusters);
    if (!pools || !clusters)
        abort();
    for (size_t i = 0; i < drv_state_count(st, DRV_K_NODE); i++) {
        drv_obj_t *n = drv_state_at(st, DRV_K_NODE, i);
        const char *cap = drv_json_str(n->spec, "capacity_type");
        double price = drv_cost_price(
            drv_catalog_instance_type(head->catalog, drv_json_str(n->spec, "instance_type")), cap);
        char key[256];
        snprintf(key, sizeof key, "%s/%s/%s", n->owner, drv_json_str(n->spec, "cluster"),
                 drv_json_str(n->spec, "nodepool"));
        size_t p = drv_state_lower_bound(st, DRV_K_NODEPOOL, key);
        drv_obj_t *pool = p < np && strcmp(drv_state_at(st, DRV_K_NODEPOOL, p)->key, key) == 0
                              ? drv_state_at(st, DRV_K_NODEPOOL, p)
                              : NULL;
        /* a slurm nodepool's operator-set price (the catalog's slurm types cost 0) */
        const json_t *set = pool ? json_object_get(json_object_get(pool->spec, "slurm"),
                                                   "price_per_hour")
                                 : NULL;
        if (json_is_number(set))
            price = json_number_value(set);
        double acc = drv_cost_accrued(price, n->created_at, now_s);
        json_t *cost = json_pack("{s:f, s:s, s:f}", "price_per_hour", price, "capacity_type",
                                 cap ? cap : "on_demand", "accrued_usd", acc);
        if (drv_cost_render_due(json_object_get(n->status, "cost"), cost, n->soft.cost_s, now_s,
                                json_is_true(json_object_get(n->spec, "terminating")))) {
            set_cost(st, n, cost);
            n->soft.cost_s = now_s;
        } else {
            json_decref(cost);
        }
        if (pool) {
            pools[p].nodes++;
            pools[p].per_hour += price;
            pools[p].accrued += acc;
        }
        snprintf(key, sizeof key, "%s/%s", n->owner, drv_json_str(n->spec, "cluster"));
        size_t c = drv_state_lower_bound(st, DRV_K_CLUSTER, key);
        if (c < nc && strcmp(drv_state_at(st, DRV_K_CLUSTER, c)->key, key) == 0) {
            clusters[c].nodes++;
            clusters[c].per_hour += price;
            clusters[c].accrued += acc;
        }
    }
    for (size_t p = 0; p < np; p++)
        set_cost(st, drv_state_at(st, DRV_K_NODEPOOL, p), sum_json(&pools[p]));
    for (size_t c = 0; c < nc; c++) {
        drv_obj_t *o = drv_state_at(st, DRV_K_CLUSTER, c);
        if (clusters[c].nodes == 0 && !json_object_get(o->status, "cost"))
            continue;   /* a cluster gets a status once it has had nodes */
        set_cost(st, o, sum_json(&clusters[c]));
    }
    free(pools);
    free(clusters);
}
