/* aws.c — the `aws` provider (see aws.h): EC2 instances as drover nodes.
 * The EC2 backend of the cloud worker (cloudw.h): account keys (given, or
 * a profile of the head's shared credentials file), RunInstances with the
 * drover tags and the boot script as user-data, TerminateInstances,
 * DescribeInstances by the head tag; and the provider ops over the worker.
 * Secrets are never logged. */
#define _GNU_SOURCE
#include "provider/aws.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "provider/cloudw.h"
#include "provider/ec2.h"

static bool same_account(const drv_cloud_settings_t *a, const drv_cloud_settings_t *b)
{
    return strcmp(a->endpoint, b->endpoint) == 0 && strcmp(a->region, b->region) == 0 &&
           strcmp(a->access_key_id, b->access_key_id) == 0 &&
           strcmp(a->profile, b->profile) == 0;   /* two profiles: two accounts */
}

/* Keys of a profile from the head's shared credentials file
 * ($AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials; INI sections). */
static int profile_keys(const char *profile, drv_ec2_account_t *e, drv_error_t *err)
{
    char path[600];
    const char *env = getenv("AWS_SHARED_CREDENTIALS_FILE"), *home = getenv("HOME");
    if (env && *env)
        snprintf(path, sizeof path, "%s", env);
    else
        snprintf(path, sizeof path, "%s/.aws/credentials", home ? home : "");
    FILE *f = fopen(path, "r");
    if (!f)
        return drv_err_invalid(err, "profile", "credential profile '%s': cannot read %s: %s",
                               profile, path, strerror(errno));
    char line[512];
    bool in = false;
    while (fgets(line, sizeof line, f)) {
        char *p = line + strspn(line, " \t");
        p[strcspn(p, "\r\n")] = '\0';
        if (*p == '[') {
            char *end = strchr(p, ']');
            if (end)
                *end = '\0';
            in = strcmp(p + 1, profile) == 0;
            continue;
        }
        char *eq = strchr(p, '=');
        if (!in || !eq)
            continue;
        char *v = eq + 1 + strspn(eq + 1, " \t");
        while (eq > p && (eq[-1] == ' ' || eq[-1] == '\t'))
            eq--;
        *eq = '\0';
        if (strcmp(p, "aws_access_key_id") == 0)
            snprintf(e->access_key_id, sizeof e->access_key_id, "%s", v);
        else if (strcmp(p, "aws_secret_access_key") == 0)
            snprintf(e->secret_access_key, sizeof e->secret_access_key, "%s", v);
    }
    explicit_bzero(line, sizeof line);
    fclose(f);
    if (!e->access_key_id[0] || !e->secret_access_key[0])
        return drv_err_invalid(err, "profile", "credential profile '%s': no aws_access_key_id "
                               "and aws_secret_access_key in %s", profile, path);
    return 0;
}

static int page_size(void)
{
    const char *ps = getenv("DROVER_AWS_PAGE_SIZE");   /* tests: listings of several pages */
    return ps ? atoi(ps) : 0;
}

static int to_ec2(const drv_cloud_settings_t *s, drv_ec2_account_t *e, drv_error_t *err)
{
    memset(e, 0, sizeof *e);
    snprintf(e->endpoint, sizeof e->endpoint, "%s", s->endpoint);
    snprintf(e->region, sizeof e->region, "%s", s->region);
    snprintf(e->access_key_id, sizeof e->access_key_id, "%s", s->access_key_id);
    snprintf(e->secret_access_key, sizeof e->secret_access_key, "%s", s->secret_access_key);
    e->page_size = page_size();
    if (!e->access_key_id[0] && s->profile[0])
        return profile_keys(s->profile, e, err);
    return 0;
}

char *drv_aws_user_data(const drv_node_launch_t *l)
{
    return drv_cloud_boot_script(l);
}

static int ec2_create(void *ctx, const char *head_id, const drv_node_launch_t *l,
                      drv_ec2_instance_t *out, drv_prov_class_t *cls, unsigned *calls,
                      drv_error_t *err)
{
    (void)ctx;
    drv_ec2_account_t acct;
    *cls = DRV_PROV_GIVE_UP;
    if (to_ec2(&l->cloud, &acct, err) < 0)
        return -1;
    int rc = -1;
    char *ud = drv_cloud_boot_script(l), name[96];
    snprintf(name, sizeof name, "drover-%s", l->node_id);
    drv_ec2_run_t run = {
        .image = l->cloud.image, .type = l->instance_type, .subnet = l->cloud.subnet,
        .security_group = l->cloud.security_group,
        .spot = strcmp(l->capacity, "spot") == 0, .user_data = ud,
        .tags = {{"Name", name}, {"drover:head", head_id}, {"drover:owner", l->owner},
                 {"drover:cluster", l->cluster}, {"drover:nodepool", l->nodepool},
                 {"drover:node", l->node_id}},
        .n_tags = 6,
    };
    if (!ud) {
        drv_err_invalid(err, "", "cannot build the user-data script (a quote or newline in "
                        "the head URL?)");
    } else if (!l->cloud.image[0]) {
        drv_err_invalid(err, "image", "no image (AMI) for region %s: set image on the cluster "
                        "or the nodepool", l->cloud.region);
    } else {
        (*calls)++;
        rc = drv_ec2_run_instance(&acct, &run, out->id, cls, err);
        out->spot = run.spot;
    }
    free(ud);
    explicit_bzero(&acct, sizeof acct);
    return rc;
}

static int ec2_terminate(void *ctx, const drv_cloud_settings_t *s, const drv_ec2_instance_t *v,
                         size_t n, unsigned *calls, drv_error_t *err)
{
    (void)ctx;
    drv_ec2_account_t acct;
    drv_prov_class_t cls;
    const char *ids[100];
    for (size_t i = 0; i < n && i < 100; i++)
        ids[i] = v[i].id;
    int rc = to_ec2(s, &acct, err);
    if (rc == 0) {
        (*calls)++;
        rc = drv_ec2_terminate(&acct, ids, n < 100 ? n : 100, &cls, err);
    }
    explicit_bzero(&acct, sizeof acct);
    return rc;
}

static int ec2_list(void *ctx, const drv_cloud_settings_t *s, const char *head_id,
                    drv_ec2_instance_t **out, size_t *n, unsigned *calls, drv_error_t *err)
{
    (void)ctx;
    drv_ec2_account_t acct;
    drv_prov_class_t cls;
    (*calls)++;   /* counted like before the worker was shared: one per listing */
    int rc = to_ec2(s, &acct, err);
    if (rc == 0)
        rc = drv_ec2_describe(&acct, head_id, out, n, &cls, err);
    explicit_bzero(&acct, sizeof acct);
    return rc;
}

drv_aws_t *drv_aws_create(const char *data_dir, drv_error_t *err)
{
    drv_cloud_backend_t be = {
        .name = "aws", .same_account = same_account, .create = ec2_create,
        .terminate = ec2_terminate, .list = ec2_list,
    };
    return drv_cloudw_create(data_dir, &be, err);
}

void drv_aws_destroy(drv_aws_t *a)
{
    drv_cloudw_destroy(a);
}

unsigned long long drv_aws_calls(drv_aws_t *a)
{
    return drv_cloudw_calls(a);
}

/* --- provider ops (controller thread, no state lock) ------------------------ */

DRV_CLOUDW_PROVIDER_OPS(drv_aws_ops, "aws", aws);
