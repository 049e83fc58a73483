/* vultr.c — the `vultr` provider (see vultr.h): Vultr instances as drover
 * nodes, the Vultr backend of the cloud worker (cloudw.h). The API key
 * never reaches a log line. */
#define _GNU_SOURCE
#include "provider/vultr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "provider/cloudw.h"
#include "provider/vultr_api.h"

static bool same_account(const drv_cloud_settings_t *a, const drv_cloud_settings_t *b)
{
    return strcmp(a->endpoint, b->endpoint) == 0 && strcmp(a->region, b->region) == 0 &&
           strcmp(a->api_key, b->api_key) == 0;
}

static drv_vultr_account_t account_of(const drv_cloud_settings_t *s)
{
    const char *pp = getenv("DROVER_VULTR_PAGE_SIZE");   /* tests: listings of several pages */
    return (drv_vultr_account_t){.endpoint = s->endpoint, .api_key = s->api_key,
                                 .per_page = pp ? atoi(pp) : 0};
}

static int vultr_create(void *ctx, const char *head_id, const drv_node_launch_t *l,
                        drv_ec2_instance_t *out, drv_prov_class_t *cls, unsigned *calls,
                        drv_error_t *err)
{
    (void)ctx;
    *cls = DRV_PROV_GIVE_UP;
    if (!l->cloud.api_key[0])
        return drv_err_invalid(err, "api_key", "the credential has no api_key");
    if (!l->cloud.image[0])
        return drv_err_invalid(err, "image", "no image: set image on the cluster or the "
                               "nodepool (a snapshot id with drover-agent installed, or an "
                               "os_id)");
    if (strcmp(l->capacity, "on_demand") != 0)
        return drv_err_unprocessable(err, "capacity_type", "Vultr has no spot capacity");
    drv_vultr_account_t a = account_of(&l->cloud);
    bool yes;
    if (drv_vultr_available(&a, l->cloud.region, l->instance_type, &yes, cls, calls, err) < 0)
        return -1;
    if (!yes) {
        *cls = DRV_PROV_FALLBACK;
        return drv_err(err, 503, "vultr", "", "Vultr: plan %s is not available in region %s "
                       "now (region availability)", l->instance_type, l->cloud.region);
    }
    char *script = drv_cloud_boot_script(l);
    if (!script)
        return drv_err_invalid(err, "", "cannot build the user-data script (a quote or "
                               "newline in the head URL?)");
    char label[96], t[5][160];
    snprintf(label, sizeof label, "drover-%s", l->node_id);
    snprintf(t[0], sizeof t[0], "drover-head=%s", head_id);
    snprintf(t[1], sizeof t[1], "drover-owner=%s", l->owner);
    snprintf(t[2], sizeof t[2], "drover-cluster=%s", l->cluster);
    snprintf(t[3], sizeof t[3], "drover-nodepool=%s", l->nodepool);
    snprintf(t[4], sizeof t[4], "drover-node=%s", l->node_id);
    drv_vultr_create_t c = {
        .region = l->cloud.region, .plan = l->instance_type, .image = l->cloud.image,
        .label = label, .vpc = l->cloud.subnet, .firewall_group = l->cloud.security_group,
        .user_data = script, .tags = {t[0], t[1], t[2], t[3], t[4]}, .n_tags = 5,
    };
    int rc = drv_vultr_create(&a, &c, out, cls, calls, err);
    free(script);
    return rc;
}

static int vultr_terminate(void *ctx, const drv_cloud_settings_t *s, const drv_ec2_instance_t *v,
                           size_t n, unsigned *calls, drv_error_t *err)
{
    (void)ctx;
    drv_vultr_account_t a = account_of(s);
    for (size_t i = 0; i < n; i++) {
        drv_prov_class_t cls;
        if (drv_vultr_delete(&a, v[i].id, &cls, calls, err) < 0)
            return -1;
    }
    return 0;
}

static int vultr_list(void *ctx, const drv_cloud_settings_t *s, const char *head_id,
                      drv_ec2_instance_t **out, size_t *n, unsigned *calls, drv_error_t *err)
{
    (void)ctx;
    drv_vultr_account_t a = account_of(s);
    drv_prov_class_t cls;
    char tag[96];
    snprintf(tag, sizeof tag, "drover-head=%s", head_id);
    return drv_vultr_list(&a, s->region, tag, out, n, &cls, calls, err);
}

struct drv_cloudw *drv_vultr_create_worker(const char *data_dir, drv_error_t *err)
{
    drv_cloud_backend_t be = {
        .name = "vultr", .same_account = same_account, .create = vultr_create,
        .terminate = vultr_terminate, .list = vultr_list,
    };
    return drv_cloudw_create(data_dir, &be, err);
}

void drv_vultr_destroy(struct drv_cloudw *w)
{
    drv_cloudw_destroy(w);
}

unsigned long long drv_vultr_calls(struct drv_cloudw *w)
{
    return drv_cloudw_calls(w);
}

/* --- provider ops (controller thread, no state lock) ------------------------ */

DRV_CLOUDW_PROVIDER_OPS(drv_vultr_ops, "vultr", vultr);
