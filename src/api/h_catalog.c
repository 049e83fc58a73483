/* h_catalog.c — read-only catalog routes: providers, their regions,
 * instance types (filtered) and GPU recommendations.
 *
 *   GET /v1/providers                    {"items": [provider, ...]}
 *   GET /v1/providers/{p}                provider
 *   GET /v1/providers/{p}/regions        {"items": [region, ...]}
 *   GET /v1/instance-types?provider=&region=&gpu_type=&min_gpu_memory_mib=
 *                          &min_gpus=&max_price_per_hour=&limit=
 *                                        {"items": [instance type, ...]}
 *   GET /v1/instance-types/{id}          instance type
 *   GET /v1/recommendations?params_b=&dtype=&context_tokens=&batch=&layers=
 *                           &kv_heads=&head_dim=&provider=&limit=
 *                                        see drv_recommend()
 *
 * The catalog is immutable (req->head->catalog), so these handlers take no
 * lock and touch no store. Each returns 0 with resp filled, errors included.
 */
#include "api/handlers.h"

#include <stdlib.h>

#include "catalog/catalog.h"
#include "catalog/recommend.h"
#include "state/head.h"

static int fail(drv_resp_t *resp, const drv_error_t *e)
{
    drv_resp_error(resp, e);
    return 0;
}

static int oom(drv_resp_t *resp)
{
    drv_error_t e;
    drv_err_internal(&e, "out of memory");
    return fail(resp, &e);
}

/* {"items": items}; steals items. */
static int reply_items(drv_resp_t *resp, json_t *items)
{
    json_t *doc = items ? json_pack("{s:o}", "items", items) : NULL;
    if (!doc)
        return oom(resp);
    drv_resp_json(resp, 200, doc);
    return 0;
}

static const drv_provider_t *provider_param(drv_req_t *req, drv_error_t *e)
{
    const char *id = req->n_params > 0 ? req->params[0] : NULL;
    const drv_provider_t *p = drv_catalog_provider(req->head->catalog, id);
    if (!p)
        drv_err_not_found(e, "provider '%s' not found", id ? id : "");
    return p;
}

int drv_h_providers_list(drv_req_t *req, drv_resp_t *resp)
{
    static const char *const allowed[] = {NULL};
    const drv_catalog_t *cat = req->head->catalog;
    drv_error_t e;

    if (drv_req_check_query(req, allowed, &e) < 0)
        return fail(resp, &e);
    json_t *items = json_array();
    if (!items)
        return oom(resp);
    for (size_t i = 0; i < drv_catalog_n_providers(cat); i++)
        if (json_array_append_new(items, drv_provider_to_json(drv_catalog_provider_at(cat, i))) < 0) {
            json_decref(items);
            return oom(resp);
        }
    return reply_items(resp, items);
}

int drv_h_provider_get(drv_req_t *req, drv_resp_t *resp)
{
    static const char *const allowed[] = {NULL};
    drv_error_t e;

    if (drv_req_check_query(req, allowed, &e) < 0)
        return fail(resp, &e);
    const drv_provider_t *p = provider_param(req, &e);
    if (!p)
        return fail(resp, &e);
    json_t *doc = drv_provider_to_json(p);
    if (!doc)
        return oom(resp);
    drv_resp_json(resp, 200, doc);
    return 0;
}

int drv_h_regions_list(drv_req_t *req, drv_resp_t *resp)
{
    static const char *const allowed[] = {NULL};
    drv_error_t e;

    if (drv_req_check_query(req, allowed, &e) < 0)
        return fail(resp, &e);
    const drv_provider_t *p = provider_param(req, &e);
    if (!p)
        return fail(resp, &e);
    json_t *items = json_array();
    if (!items)
        return oom(resp);
    for (size_t i = 0; i < p->n_regions; i++)
        if (json_array_append_new(items, drv_region_to_json(&p->regions[i])) < 0) {
            json_decref(items);
            return oom(resp);
        }
    return reply_items(resp, items);
}

/* True when some provider (or the given one) has this region. */
static bool region_known(const drv_catalog_t *cat, const char *provider, const char *region)
{
    if (provider)
        return drv_catalog_region(cat, provider, region) != NULL;
    for (size_t i = 0; i < drv_catalog_n_providers(cat); i++)
        if (drv_catalog_region(cat, drv_catalog_provider_at(cat, i)->id, region))
            return true;
    return false;
}

int drv_h_instance_types_list(drv_req_t *req, drv_resp_t *resp)
{
    static const char *const allowed[] = {"provider", "region", "gpu_type", "min_gpu_memory_mib",
                                          "min_gpus", "max_price_per_hour", "limit", NULL};
    const drv_catalog_t *cat = req->head->catalog;
    drv_it_filter_t f = {.min_gpu_memory_mib = -1, .min_gpus = -1, .max_price_per_hour = -1};
    int64_t min_gpus = -1, limit = -1;
    drv_error_t e;

    if (drv_req_check_query(req, allowed, &e) < 0 ||
        drv_req_query_int(req, "min_gpu_memory_mib", 0, INT64_C(1) << 40, &f.min_gpu_memory_mib,
                          &e) < 0 ||
        drv_req_query_int(req, "min_gpus", 0, 1024, &min_gpus, &e) < 0 ||
        drv_req_query_double(req, "max_price_per_hour", 0, 1e9, &f.max_price_per_hour, &e) < 0 ||
        drv_req_query_int(req, "limit", 1, 100000, &limit, &e) < 0)
        return fail(resp, &e);
    f.min_gpus = (int)min_gpus;
    f.provider = drv_req_query(req, "provider");
    f.region = drv_req_query(req, "region");
    f.gpu_type = drv_req_query(req, "gpu_type");
    if (f.provider && !drv_catalog_provider(cat, f.provider)) {
        drv_err_invalid(&e, "provider", "unknown provider '%s'", f.provider);
        return fail(resp, &e);
    }
    if (f.region && !region_known(cat, f.provider, f.region)) {
        drv_err_invalid(&e, "region", "unknown region '%s'%s%s", f.region,
                        f.provider ? " of provider " : "", f.provider ? f.provider : "");
        return fail(resp, &e);
    }

    size_t n = drv_catalog_query(cat, &f, NULL, 0);
    if (limit > 0 && (size_t)limit < n)
        n = (size_t)limit;
    const drv_instance_type_t **types = calloc(n ? n : 1, sizeof *types);
    json_t *items = json_array();
    if (!types || !items)
        goto nomem;
    drv_catalog_query(cat, &f, types, n);
    for (size_t i = 0; i < n; i++)
        if (json_array_append_new(items, drv_instance_type_to_json(types[i])) < 0)
            goto nomem;
    free(types);
    return reply_items(resp, items);
nomem:
    free(types);
    json_decref(items);
    return oom(resp);
}

int drv_h_instance_type_get(drv_req_t *req, drv_resp_t *resp)
{
    static const char *const allowed[] = {NULL};
    drv_error_t e;

    if (drv_req_check_query(req, allowed, &e) < 0)
        return fail(resp, &e);
    const char *id = req->n_params > 0 ? req->params[0] : NULL;
    const drv_instance_type_t *t = drv_catalog_instance_type(req->head->catalog, id);
    if (!t) {
        drv_err_not_found(&e, "instance type '%s' not found", id ? id : "");
        return fail(resp, &e);
    }
    json_t *doc = drv_instance_type_to_json(t);
    if (!doc)
        return oom(resp);
    drv_resp_json(resp, 200, doc);
    return 0;
}

int drv_h_recommendations(drv_req_t *req, drv_resp_t *resp)
{
    static const char *const allowed[] = {"params_b", "dtype", "context_tokens", "batch",
                                          "layers", "kv_heads", "head_dim", "provider",
                                          "limit", NULL};
    drv_vram_input_t in = {.params_b = -1};
    int64_t limit = DRV_REC_DEFAULT_LIMIT;
    drv_error_t e;

    if (drv_req_check_query(req, allowed, &e) < 0)
        return fail(resp, &e);
    if (!drv_req_query(req, "params_b")) {
        drv_err_invalid(&e, "params_b",
                        "params_b (billions of parameters, e.g. params_b=7) is required");
        return fail(resp, &e);
    }
    if (drv_req_query_double(req, "params_b", 0, DRV_REC_MAX_PARAMS_B, &in.params_b, &e) < 0 ||
        drv_req_query_int(req, "context_tokens", 1, DRV_REC_MAX_CONTEXT, &in.context_tokens,
                          &e) < 0 ||
        drv_req_query_int(req, "batch", 1, DRV_REC_MAX_BATCH, &in.batch, &e) < 0 ||
        drv_req_query_int(req, "layers", 1, DRV_REC_MAX_LAYERS, &in.layers, &e) < 0 ||
        drv_req_query_int(req, "kv_heads", 1, DRV_REC_MAX_KV_HEADS, &in.kv_heads, &e) < 0 ||
        drv_req_query_int(req, "head_dim", 1, DRV_REC_MAX_HEAD_DIM, &in.head_dim, &e) < 0 ||
        drv_req_query_int(req, "limit", 1, DRV_REC_MAX_LIMIT, &limit, &e) < 0)
        return fail(resp, &e);
    in.dtype = drv_req_query(req, "dtype");

    json_t *doc = drv_recommend(req->head->catalog, &in, drv_req_query(req, "provider"),
                                (int)limit, &e);
    if (!doc)
        return fail(resp, &e);
    drv_resp_json(resp, 200, doc);
    return 0;
}
