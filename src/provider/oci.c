/* oci.c — the `oracle` provider (see oci.h): OCI compute instances as
 * drover nodes, the OCI backend of the cloud worker (cloudw.h). The API
 * signing key never reaches a log line. */
#define _GNU_SOURCE
#include "provider/oci.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "provider/cloudw.h"
#include "provider/oci_api.h"

static bool same_account(const drv_cloud_settings_t *a, const drv_cloud_settings_t *b)
{
    return strcmp(a->endpoint, b->endpoint) == 0 && strcmp(a->region, b->region) == 0 &&
           strcmp(a->tenancy, b->tenancy) == 0 && strcmp(a->user, b->user) == 0 &&
           strcmp(a->fingerprint, b->fingerprint) == 0 &&
           strcmp(a->compartment, b->compartment) == 0 &&
           strcmp(a->private_key, b->private_key) == 0;
}

static drv_oci_account_t account_of(const drv_cloud_settings_t *s)
{
    const char *ps = getenv("DROVER_OCI_PAGE_SIZE");   /* tests: listings of several pages */
    return (drv_oci_account_t){
        .endpoint = s->endpoint, .tenancy = s->tenancy, .user = s->user,
        .fingerprint = s->fingerprint, .private_key = s->private_key,
        .compartment = s->compartment, .page_size = ps ? atoi(ps) : 0,
    };
}

static size_t ads_of(const drv_cloud_settings_t *s, char ads[8][64])
{
    size_t n = 0;
    char copy[512];
    snprintf(copy, sizeof copy, "%s", s->ads);
    char *save = NULL;
    for (char *z = strtok_r(copy, ",", &save); z && n < 8; z = strtok_r(NULL, ",", &save))
        snprintf(ads[n++], 64, "%s", z);
    return n;
}

static int oci_create(void *ctx, const char *head_id, const drv_node_launch_t *l,
                      drv_ec2_instance_t *out, drv_prov_class_t *cls, unsigned *calls,
                      drv_error_t *err)
{
    (void)ctx;
    *cls = DRV_PROV_GIVE_UP;
    const drv_cloud_settings_t *s = &l->cloud;
    if (!s->tenancy[0] || !s->private_key[0])
        return drv_err_invalid(err, "credential", "the credential has no OCI API key");
    if (!s->compartment[0])
        return drv_err_invalid(err, "compartment", "no compartment: set compartment on the "
                               "cluster (a compartment OCID, or the tenancy's for the root)");
    if (!s->image[0] || !s->subnet[0])
        return drv_err_invalid(err, s->image[0] ? "subnet" : "image", "no %s: set %s on the "
                               "cluster (%s)", s->image[0] ? "subnet" : "image",
                               s->image[0] ? "subnet" : "image",
                               s->image[0] ? "a subnet OCID" : "an image OCID with drover-agent "
                               "installed");
    char ads[8][64];
    size_t nad = ads_of(s, ads);
    if (!nad)
        return drv_err_invalid(err, "availability_domains", "no availability domain: set "
                               "availability_domains on the cluster (\"Uocm:PHX-AD-1\", ...)");
    bool spot = strcmp(l->capacity, "spot") == 0;
    if (spot && strncmp(l->instance_type, "BM.", 3) == 0) {
        *cls = DRV_PROV_FALLBACK;
        return drv_err(err, 422, "oracle", "", "OCI: bare-metal shape %s has no preemptible "
                       "capacity (preemptibleInstanceConfig is for VM shapes)", l->instance_type);
    }
    char *script = drv_cloud_boot_script(l);
    if (!script)
        return drv_err_invalid(err, "", "cannot build the user_data script (a quote or newline "
                               "in the head URL?)");
    char name[96];
    snprintf(name, sizeof name, "drover-%s", l->node_id);
    bool flex = strstr(l->instance_type, ".Flex") != NULL;
    drv_oci_launch_t in = {
        .shape = l->instance_type, .image = s->image, .subnet = s->subnet,
        .display_name = name, .preemptible = spot, .user_data = script,
        .nsg = s->security_group,
        .ocpus = flex && l->cpus > 1 ? l->cpus / 2 : 0,   /* an OCPU is 2 vCPUs (x86) */
        .memory_gb = l->memory_mib / 1024,
        .tags = {{"drover-head", head_id}, {"drover-owner", l->owner},
                 {"drover-cluster", l->cluster}, {"drover-nodepool", l->nodepool},
                 {"drover-node", l->node_id}},
        .n_tags = 5,
    };
    drv_oci_account_t a = account_of(s);
    char tried[600] = "";
    int rc = -1;
    for (size_t i = 0; i < nad; i++) {
        bool next_ad = false;
        in.availability_domain = ads[i];
        drv_err_clear(err);
        rc = drv_oci_launch(&a, &in, out, cls, &next_ad, calls, err);
        if (rc == 0) {
            if (!out->zone[0])
                snprintf(out->zone, sizeof out->zone, "%s", ads[i]);
            out->spot = spot;
            break;
        }
        size_t tl = strlen(tried);
        snprintf(tried + tl, sizeof tried - tl, "%s%s", tl ? ", " : "", ads[i]);
        if (!next_ad)
            break;
        if (i + 1 < nad)
            drv_info("oracle: node %s/%s: %s has no %s %s capacity; trying the next "
                     "availability domain", l->owner, l->node_id, ads[i], l->instance_type,
                     l->capacity);
        else
            drv_err_prefix(err, "every availability domain tried (%s) is out of capacity; "
                           "last: ", tried);
    }
    free(script);
    return rc;
}

static int oci_terminate(void *ctx, const drv_cloud_settings_t *s, const drv_ec2_instance_t *v,
                         size_t n, unsigned *calls, drv_error_t *err)
{
    (void)ctx;
    drv_oci_account_t a = account_of(s);
    for (size_t i = 0; i < n; i++) {
        drv_prov_class_t cls;
        if (drv_oci_terminate(&a, v[i].id, &cls, calls, err) < 0)
            return -1;
    }
    return 0;
}

static int oci_list(void *ctx, const drv_cloud_settings_t *s, const char *head_id,
                    drv_ec2_instance_t **out, size_t *n, unsigned *calls, drv_error_t *err)
{
    (void)ctx;
    drv_oci_account_t a = account_of(s);
    drv_prov_class_t cls;
    if (!s->compartment[0])
        return drv_err_invalid(err, "compartment", "no compartment to list");
    return drv_oci_list(&a, head_id, out, n, &cls, calls, err);
}

struct drv_cloudw *drv_oci_create_worker(const char *data_dir, drv_error_t *err)
{
    drv_cloud_backend_t be = {
        .name = "oracle", .same_account = same_account, .create = oci_create,
        .terminate = oci_terminate, .list = oci_list,
    };
    return drv_cloudw_create(data_dir, &be, err);
}

void drv_oci_destroy(struct drv_cloudw *w)
{
    drv_cloudw_destroy(w);
}

unsigned long long drv_oci_calls(struct drv_cloudw *w)
{
    return drv_cloudw_calls(w);
}

/* --- provider ops (controller thread, no state lock) ------------------------ */

DRV_CLOUDW_PROVIDER_OPS(drv_oci_ops, "oracle", oracle);
