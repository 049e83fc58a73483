/* gcp.c — the `gcp` provider (see gcp.h): Compute Engine instances as
 * drover nodes. The Compute Engine backend of the cloud worker (cloudw.h):
 * a launch tries the cluster's zones in order (ZONE_RESOURCE_POOL_EXHAUSTED
 * moves to the next), a release deletes the instance, a listing is the
 * project's aggregatedList by the head's label, restricted to the region.
 * The service-account key and the tokens never reach a log line. */
#define _GNU_SOURCE
#include "provider/gcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "provider/cloudw.h"
#include "provider/gce.h"

typedef struct gcp_ctx {
    drv_gce_t *gce;   /* token cache: the worker thread's alone */
} gcp_ctx_t;

static bool same_account(const drv_cloud_settings_t *a, const drv_cloud_settings_t *b)
{
    return strcmp(a->endpoint, b->endpoint) == 0 && strcmp(a->region, b->region) == 0 &&
           strcmp(a->project, b->project) == 0 && strcmp(a->sa_key, b->sa_key) == 0;
}

void drv_gcp_instance_name(const char *head_id, const char *owner, const char *node,
                           char out[32])
{
    char buf[256], hex[65];
    int n = snprintf(buf, sizeof buf, "%s/%s/%s", head_id, owner, node);
    drv_sha256_hex(buf, n > 0 && (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1, hex);
    snprintf(out, 32, "drover-%.16s", hex);
}

/* The key and the account of settings s: -1 with err (GIVE_UP). */
static int account_of(const drv_cloud_settings_t *s, drv_gce_key_t *k, drv_gce_account_t *a,
                      drv_error_t *err)
{
    if (drv_gce_parse_key(s->sa_key, k, err) < 0)
        return -1;
    const char *ps = getenv("DROVER_GCP_PAGE_SIZE");   /* tests: listings of several pages */
    *a = (drv_gce_account_t){
        .endpoint = s->endpoint, .project = s->project[0] ? s->project : k->project_id,
        .key = k, .page_size = ps ? atoi(ps) : 0,
    };
    if (!a->project[0])
        return drv_err_invalid(err, "project", "no GCP project: set project on the cluster "
                               "(the service-account key names none)");
    return 0;
}

/* The zones to try: the cluster's list, else REGION-a, -b, -c. */
static size_t zones_of(const drv_cloud_settings_t *s, char zones[8][32])
{
    size_t n = 0;
    if (s->zones[0]) {
        char copy[256];
        snprintf(copy, sizeof copy, "%s", s->zones);
        char *save = NULL;
        for (char *z = strtok_r(copy, ", ", &save); z && n < 8; z = strtok_r(NULL, ", ", &save))
            snprintf(zones[n++], 32, "%s", z);
        return n;
    }
    for (const char *suf = "abc"; *suf && n < 3; suf++)
        snprintf(zones[n++], 32, "%.29s-%c", s->region, *suf);
    return n;
}

static int gcp_create(void *ctx, const char *head_id, const drv_node_launch_t *l,
                      drv_ec2_instance_t *out, drv_prov_class_t *cls, unsigned *calls,
                      drv_error_t *err)
{
    gcp_ctx_t *g = ctx;
    drv_gce_key_t *key = malloc(sizeof *key);
    drv_gce_account_t acct;
    *cls = DRV_PROV_GIVE_UP;
    if (!key) {
        *cls = DRV_PROV_RETRY;
        return drv_err_internal(err, "out of memory");
    }
    int rc = account_of(&l->cloud, key, &acct, err);
    char *script = rc == 0 ? drv_cloud_boot_script(l) : NULL;
    if (rc == 0 && !script)
        rc = drv_err_invalid(err, "", "cannot build the startup script (a quote or newline in "
                             "the head URL?)");
    if (rc == 0 && !l->cloud.image[0])
        rc = drv_err_invalid(err, "image", "no image for the instances: set image on the "
                             "cluster or the nodepool (projects/P/global/images/NAME or "
                             "…/images/family/F)");
    if (rc < 0)
        goto done;
    char name[32], zones[8][32], tried[300] = "";
    drv_gcp_instance_name(head_id, l->owner, l->node_id, name);
    size_t nz = zones_of(&l->cloud, zones);
    bool spot = strcmp(l->capacity, "spot") == 0;
    drv_gce_insert_t in = {
        .name = name, .machine_type = l->instance_type, .image = l->cloud.image,
        .subnet = l->cloud.subnet, .region = l->cloud.region,
        .network_tag = l->cloud.security_group, .spot = spot, .startup_script = script,
        .labels = {{"drover-head", head_id}, {"drover-owner", l->owner},
                   {"drover-cluster", l->cluster}, {"drover-nodepool", l->nodepool},
                   {"drover-node", l->node_id}},
        .n_labels = 5,
    };
    rc = -1;
    for (size_t i = 0; i < nz; i++) {
        bool next_zone = false;
        in.zone = zones[i];
        drv_err_clear(err);
        rc = drv_gce_insert(g->gce, &acct, &in, cls, &next_zone, calls, err);
        if (rc == 0) {
            snprintf(out->id, sizeof out->id, "%s", name);
            snprintf(out->zone, sizeof out->zone, "%s", zones[i]);
            snprintf(out->state, sizeof out->state, "pending");
            out->spot = spot;
            break;
        }
        size_t tl = strlen(tried);
        snprintf(tried + tl, sizeof tried - tl, "%s%s", tl ? ", " : "", zones[i]);
        if (!next_zone)
            break;
        drv_info("gcp: node %s/%s: zone %s has no %s %s capacity; trying the next zone",
                 l->owner, l->node_id, zones[i], l->instance_type, l->capacity);
        if (i + 1 == nz)
            drv_err_prefix(err, "every zone tried (%s) is out of capacity; last: ", tried);
    }
done:
    free(script);
    explicit_bzero(key, sizeof *key);
    free(key);
    return rc;
}

static int gcp_terminate(void *ctx, const drv_cloud_settings_t *s, const drv_ec2_instance_t *v,
                         size_t n, unsigned *calls, drv_error_t *err)
{
    gcp_ctx_t *g = ctx;
    drv_gce_key_t *key = malloc(sizeof *key);
    drv_gce_account_t acct;
    if (!key)
        return drv_err_internal(err, "out of memory");
    int rc = account_of(s, key, &acct, err);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        drv_prov_class_t cls;
        if (!v[i].zone[0]) {
            rc = drv_err_internal(err, "instance %s: zone unknown", v[i].id);
            break;
        }
        rc = drv_gce_delete(g->gce, &acct, v[i].zone, v[i].id, &cls, calls, err);
    }
    explicit_bzero(key, sizeof *key);
    free(key);
    return rc;
}

static int gcp_list(void *ctx, const drv_cloud_settings_t *s, const char *head_id,
                    drv_ec2_instance_t **out, size_t *n, unsigned *calls, drv_error_t *err)
{
    gcp_ctx_t *g = ctx;
    drv_gce_key_t *key = malloc(sizeof *key);
    drv_gce_account_t acct;
    drv_prov_class_t cls;
    if (!key)
        return drv_err_internal(err, "out of memory");
    int rc = account_of(s, key, &acct, err);
    if (rc == 0)
        rc = drv_gce_list(g->gce, &acct, s->region, head_id, out, n, &cls, calls, err);
    explicit_bzero(key, sizeof *key);
    free(key);
    return rc;
}

struct drv_cloudw *drv_gcp_create(const char *data_dir, drv_error_t *err)
{
    gcp_ctx_t *g = calloc(1, sizeof *g);
    if (!g || !(g->gce = drv_gce_create())) {
        free(g);
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    drv_cloud_backend_t be = {
        .name = "gcp", .ctx = g, .same_account = same_account, .create = gcp_create,
        .terminate = gcp_terminate, .list = gcp_list,
    };
    struct drv_cloudw *w = drv_cloudw_create(data_dir, &be, err);
    if (!w) {
        drv_gce_destroy(g->gce);
        free(g);
        return NULL;
    }
    return w;
}

void drv_gcp_destroy(struct drv_cloudw *w)
{
    if (!w)
        return;
    gcp_ctx_t *g = drv_cloudw_ctx(w);
    drv_cloudw_destroy(w);   /* joins the worker: the context is free from here */
    drv_gce_destroy(g->gce);
    free(g);
}

unsigned long long drv_gcp_calls(struct drv_cloudw *w)
{
    return drv_cloudw_calls(w);
}

/* --- provider ops (controller thread, no state lock) ------------------------ */

DRV_CLOUDW_PROVIDER_OPS(drv_gcp_ops, "gcp", gcp);
