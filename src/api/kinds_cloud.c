/* kinds_cloud.c — the cluster and credential kinds (kinds.c has the
 * others): where nodes come from (a provider and region, and for the cloud
 * providers the settings nodes are made with) and the cloud or registry
 * credentials clusters and images sign with; their schemas, cross-object
 * checks and delete rules. Runs under the state write lock, no I/O. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api/resource.h"
#include "catalog/catalog.h"
#include "common/util.h"
#include "provider/gce.h"
#include "provider/oci_sign.h"
#include "provider/slurm.h"
#include "state/head.h"
#include "common/json.h"

#define END {NULL, 0, false, 0, 0, NULL, NULL, NULL}

/* --- schemas ---------------------------------------------------------------- */

static const drv_field_t cluster_fields[] = {
    {"id", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"provider", DRV_F_STRING, true, 1, 64, NULL, NULL, NULL},
    {"region", DRV_F_STRING, true, 1, 64, NULL, NULL, NULL},
    {"description", DRV_F_STRING, false, 0, 1024, NULL, NULL, "\"\""},
    /* cloud providers (aws): where and how nodes are made */
    {"credential", DRV_F_ID, false, 0, 0, NULL, NULL, NULL},
    {"endpoint", DRV_F_STRING, false, 8, 255, NULL, NULL, NULL},
    {"image", DRV_F_STRING, false, 1, 127, NULL, NULL, NULL},
    {"subnet", DRV_F_STRING, false, 1, 127, NULL, NULL, NULL},
    {"security_group", DRV_F_STRING, false, 1, 127, NULL, NULL, NULL},
    {"head_url", DRV_F_STRING, false, 8, 255, NULL, NULL, NULL},
    {"orphan_grace_seconds", DRV_F_INT, false, 0, 86400, NULL, NULL, NULL},
    /* gcp */
    {"project", DRV_F_STRING, false, 1, 127, NULL, NULL, NULL},
    {"zones", DRV_F_STRLIST, false, 1, 8, NULL, NULL, NULL},
    /* oracle */
    {"compartment", DRV_F_STRING, false, 1, 127, NULL, NULL, NULL},
    {"availability_domains", DRV_F_STRLIST, false, 1, 8, NULL, NULL, NULL},
    /* slurm: the slurm.conf of its commands (else SLURM_CONF of droverd's environment) */
    {"slurm_conf", DRV_F_STRING, false, 1, 511, NULL, NULL, NULL},
    END,
};

static const drv_field_t credential_fields[] = {
    {"id", DRV_F_ID, true, 0, 0, NULL, NULL, NULL},
    {"provider", DRV_F_STRING, false, 1, 64, NULL, NULL, "\"aws\""},
    {"access_key_id", DRV_F_STRING, false, 1, 127, NULL, NULL, NULL},
    {"secret_access_key", DRV_F_STRING, false, 1, 255, NULL, NULL, NULL},
    {"profile", DRV_F_STRING, false, 1, 127, NULL, NULL, NULL},
    /* provider registry (containers, issue 16): a container registry's login */
    {"registry", DRV_F_STRING, false, 1, 255, NULL, NULL, NULL},
    {"username", DRV_F_STRING, false, 1, 255, NULL, NULL, NULL},
    {"password", DRV_F_STRING, false, 1, 4096, NULL, NULL, NULL},
    {"service_account_key", DRV_F_STRING, false, 2, 8191, NULL, NULL, NULL},   /* gcp */
    {"api_key", DRV_F_STRING, false, 8, 127, NULL, NULL, NULL},                /* vultr */
    {"tenancy", DRV_F_STRING, false, 1, 127, NULL, NULL, NULL},                /* oracle */
    {"user", DRV_F_STRING, false, 1, 127, NULL, NULL, NULL},
    {"fingerprint", DRV_F_STRING, false, 47, 47, NULL, NULL, NULL},
    {"private_key", DRV_F_STRING, false, 64, 4095, NULL, NULL, NULL},
    {"description", DRV_F_STRING, false, 0, 1024, NULL, NULL, "\"\""},
    END,
};

static drv_head_t *head_of(drv_req_t *req) { return req->head; }

/* --- cluster -------------------------------------------------------------- */

static int head_url_check(const json_t *spec, drv_error_t *err)
{
    const char *hu = drv_json_str(spec, "head_url");
    if (hu && ((strncmp(hu, "http://", 7) != 0 && strncmp(hu, "https://", 8) != 0) ||
               strpbrk(hu, "'\"\\ \n")))
        return drv_err_invalid(err, "head_url", "head_url must be an http:// or https:// URL "
                               "without quotes or spaces");
    return 0;
}

static int cluster_check(drv_req_t *req, const char *owner, json_t *spec, const drv_obj_t *old,
                         drv_error_t *err)
{
    const drv_catalog_t *cat = head_of(req)->catalog;
    const char *prov = drv_json_str(spec, "provider"), *region = drv_json_str(spec, "region");
    const drv_provider_t *p = drv_catalog_provider(cat, prov);
    if (!p) {
        char known[256] = "";
        for (size_t i = 0; i < drv_catalog_n_providers(cat); i++) {
            size_t n = strlen(known);
            snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "",
                     drv_catalog_provider_at(cat, i)->id);
        }
        return drv_err_unprocessable(err, "provider", "unknown provider '%s' (known: %s)", prov,
                                     known);
    }
    bool slurm = strcmp(prov, "slurm") == 0;
    if (slurm && !drv_slurm_name_ok(region))
        return drv_err_invalid(err, "region", "a slurm cluster's region is the Slurm cluster's "
                               "name (letters, digits, '_', '-', '.'), not '%s'", region);
    if (!slurm && !drv_catalog_region(cat, prov, region))
        return drv_err_unprocessable(err, "region",
                                     "provider '%s' has no region '%s' (see GET "
                                     "/v1/providers/%s/regions)", prov, region, prov);
    const char *cred = drv_json_str(spec, "credential"), *ep = drv_json_str(spec, "endpoint");
    bool gcp = strcmp(prov, "gcp") == 0, oracle = strcmp(prov, "oracle") == 0;
    const char *sc = drv_json_str(spec, "slurm_conf");
    if (slurm) {
        static const char *const not_slurm[] = {"credential", "endpoint", "image", "subnet",
                                                "security_group", "project", "zones",
                                                "compartment", "availability_domains", NULL};
        for (size_t i = 0; not_slurm[i]; i++)
            if (json_object_get(spec, not_slurm[i]))
                return drv_err_invalid(err, not_slurm[i], "%s is not a field of slurm clusters "
                                       "(droverd submits jobs as its own user: no credential)",
                                       not_slurm[i]);
        if (sc && (sc[0] != '/' || strpbrk(sc, "\n\r")))
            return drv_err_invalid(err, "slurm_conf", "slurm_conf must be an absolute path (the "
                                   "slurm.conf the head's Slurm commands read)");
        return head_url_check(spec, err);
    }
    if (sc)
        return drv_err_invalid(err, "slurm_conf", "slurm_conf is for clusters on slurm, not %s",
                               prov);
    if (strcmp(prov, "aws") != 0 && !gcp && strcmp(prov, "vultr") != 0 && !oracle) {
        static const char *const cloud_only[] = {"credential", "endpoint", "image", "subnet",
                                                 "security_group", "head_url",
                                                 "orphan_grace_seconds", "project", "zones",
                                                 "compartment", "availability_domains", NULL};
        for (size_t i = 0; cloud_only[i]; i++)
            if (json_object_get(spec, cloud_only[i]))
                return drv_err_invalid(err, cloud_only[i], "%s is for clusters on a cloud "
                                       "provider (aws, gcp, vultr, oracle), not '%s'",
                                       cloud_only[i], prov);
        return 0;
    }
    if (!oracle && (json_object_get(spec, "compartment") ||
                    json_object_get(spec, "availability_domains")))
        return drv_err_invalid(err, json_object_get(spec, "compartment") ? "compartment"
                                                                         : "availability_domains",
                               "compartment and availability_domains are for clusters on "
                               "oracle, not %s", prov);
    const char *comp = drv_json_str(spec, "compartment");
    if (comp && strncmp(comp, "ocid1.compartment.", 18) != 0 &&
        strncmp(comp, "ocid1.tenancy.", 14) != 0)
        return drv_err_invalid(err, "compartment", "compartment must be a compartment OCID "
                               "(ocid1.compartment...., or the tenancy's OCID for the root)");
    const json_t *ads = json_object_get(spec, "availability_domains");
    for (size_t i = 0; i < json_array_size(ads); i++) {
        const char *ad = json_string_value(json_array_get(ads, i));
        if (strlen(ad) > 63 || strpbrk(ad, ", \n"))
            return drv_err_invalid(err, "availability_domains", "'%s' is not an availability "
                                   "domain name (\"Uocm:PHX-AD-1\")", ad);
    }
    if (!gcp && (json_object_get(spec, "project") || json_object_get(spec, "zones")))
        return drv_err_invalid(err, json_object_get(spec, "project") ? "project" : "zones",
                               "project and zones are for clusters on gcp, not %s", prov);
    const json_t *zs = json_object_get(spec, "zones");
    for (size_t i = 0; i < json_array_size(zs); i++) {
        const char *z = json_string_value(json_array_get(zs, i));
        size_t rl = strlen(region);
        if (strncmp(z, region, rl) != 0 || z[rl] != '-' || !z[rl + 1] || strlen(z) > 31)
            return drv_err_invalid(err, "zones", "zone '%s' is not a zone of region %s "
                                   "(%s-a, %s-b, ...)", z, region, region, region);
    }
    if (ep && strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0)
        return drv_err_invalid(err, "endpoint", "endpoint must be an http:// or https:// URL");
    if (head_url_check(spec, err) < 0)
        return -1;
    if (!cred)
        return 0;   /* fine for planning; its nodepools cannot make nodes until it has one */
    char key[192];
    snprintf(key, sizeof key, "%s/%s", owner, cred);
    const drv_obj_t *c = drv_state_get(head_of(req)->state, DRV_K_CREDENTIAL, key);
    if (!c)
        return drv_err_unprocessable(err, "credential", "credential '%s' not found", cred);
    if (strcmp(drv_json_str(c->spec, "provider"), prov) != 0)
        return drv_err_unprocessable(err, "credential", "credential '%s' is for provider '%s', "
                                     "not '%s'", cred, drv_json_str(c->spec, "provider"), prov);
    return 0;
}

static int cluster_before_delete(drv_state_t *st, const drv_obj_t *obj, bool cascade,
                                 uint64_t *seq, drv_error_t *err)
{
    char prefix[192];
    snprintf(prefix, sizeof prefix, "%s/%s/", obj->owner, obj->id);
    size_t plen = strlen(prefix);
    size_t i = drv_state_lower_bound(st, DRV_K_NODEPOOL, prefix);
    size_t n = 0;
    for (size_t j = i; j < drv_state_count(st, DRV_K_NODEPOOL); j++) {
        drv_obj_t *np = drv_state_at(st, DRV_K_NODEPOOL, j);
        if (strncmp(np->key, prefix, plen) != 0)
            break;
        if (drv_kind_nodepool.before_delete(st, np, false, seq, err) < 0)
            return -1;   /* a deployment uses it: even cascade stops here */
        n++;
    }
    if (n && !cascade)
        return drv_err_conflict(err, "cluster '%s' still has %zu nodepool(s); delete them "
                                "first or use ?cascade=true", obj->id, n);
    while (n--) {
        drv_obj_t *np = drv_state_at(st, DRV_K_NODEPOOL, i);
        *seq = drv_state_del(st, DRV_K_NODEPOOL, np->key);
    }
    return 0;
}

static const char *const cluster_immutable[] = {"provider", "region", NULL};

const drv_kind_desc_t drv_kind_cluster = {
    .kind = DRV_K_CLUSTER,
    .name = "cluster",
    .path = "/v1/clusters",
    .schema = cluster_fields,
    .immutable = cluster_immutable,
    .check = cluster_check,
    .before_delete = cluster_before_delete,
};

/* --- credential ------------------------------------------------------------ */

static int credential_check(drv_req_t *req, const char *owner, json_t *spec,
                            const drv_obj_t *old, drv_error_t *err)
{
    static const char *const reg_fields[] = {"registry", "username", "password", NULL};
    static const char *const not_reg[] = {"access_key_id", "secret_access_key", "profile",
                                          "service_account_key", "api_key", "tenancy", "user",
                                          "fingerprint", "private_key", NULL};
    bool registry = strcmp(drv_json_str(spec, "provider"), "registry") == 0;
    for (size_t i = 0; !registry && reg_fields[i]; i++)
        if (json_object_get(spec, reg_fields[i]))
            return drv_err_invalid(err, reg_fields[i], "%s is a field of registry credentials "
                                   "(provider: registry), not of cloud ones", reg_fields[i]);
    if (registry) {
        for (size_t i = 0; not_reg[i]; i++)
            if (json_object_get(spec, not_reg[i]))
                return drv_err_invalid(err, not_reg[i], "%s is a field of cloud credentials, "
                                       "not of registry ones", not_reg[i]);
        for (size_t i = 0; reg_fields[i]; i++)
            if (!json_object_get(spec, reg_fields[i]))
                return drv_err_invalid(err, reg_fields[i], "a registry credential needs "
                                       "registry (e.g. ghcr.io or registry.example.com:5000), "
                                       "username and password");
        const char *reg = drv_json_str(spec, "registry"), *user = drv_json_str(spec, "username");
        for (const char *p = reg; *p; p++)
            if ((unsigned char)*p <= ' ' || *p == '/' || *p == '"' || *p == '\\')
                return drv_err_invalid(err, "registry", "registry '%s' is a host[:port] "
                                       "(no scheme, path, spaces or quotes)", reg);
        if (strchr(user, ':') || strchr(user, '"') || strchr(user, '\\'))
            return drv_err_invalid(err, "username", "username must not hold ':', '\"' or '\\'");
        return 0;
    }
    const char *prov = drv_json_str(spec, "provider");
    static const char *const by_prov[][4] = {
        {"aws", "service_account_key", "api_key", NULL},
        {"gcp", "access_key_id", "secret_access_key", "profile"},
        {"vultr", "access_key_id", "secret_access_key", "profile"},
        {"oracle", "access_key_id", "secret_access_key", "profile"},
    };
    static const char *const oci_fields[] = {"tenancy", "user", "fingerprint", "private_key",
                                             NULL};
    if (strcmp(prov, "oracle") != 0)
        for (size_t i = 0; oci_fields[i]; i++)
            if (json_object_get(spec, oci_fields[i]))
                return drv_err_invalid(err, oci_fields[i], "%s is a field of oracle "
                                       "credentials, not %s", oci_fields[i], prov);
    if (strcmp(prov, "oracle") == 0) {
        static const char *const other[] = {"service_account_key", "api_key", NULL};
        for (size_t i = 0; other[i]; i++)
            if (json_object_get(spec, other[i]))
                return drv_err_invalid(err, other[i], "%s is not a field of oracle credentials",
                                       other[i]);
        for (size_t i = 0; oci_fields[i]; i++)
            if (!drv_json_str(spec, oci_fields[i]))
                return drv_err_invalid(err, oci_fields[i], "an oracle credential needs tenancy, "
                                       "user, fingerprint and private_key (an API signing key)");
        if (strncmp(drv_json_str(spec, "tenancy"), "ocid1.tenancy.", 14) != 0)
            return drv_err_invalid(err, "tenancy", "tenancy must be the tenancy's OCID "
                                   "(ocid1.tenancy....)");
        if (strncmp(drv_json_str(spec, "user"), "ocid1.user.", 11) != 0)
            return drv_err_invalid(err, "user", "user must be the user's OCID (ocid1.user....)");
        char fp[48];
        if (drv_oci_fingerprint(drv_json_str(spec, "private_key"), fp, err) < 0)
            return -1;
        if (strcasecmp(fp, drv_json_str(spec, "fingerprint")) != 0)
            return drv_err_invalid(err, "fingerprint", "fingerprint %s is not that of "
                                   "private_key's public half (%s)", drv_json_str(spec, "fingerprint"),
                                   fp);
        /* it can sign: say so now, not at the first launch */
        char *auth = drv_oci_authorization(drv_json_str(spec, "private_key"), "t/u/f", "GET", "/",
                                           "localhost", "Thu, 01 Jan 1970 00:00:00 GMT", NULL,
                                           NULL, NULL, err);
        if (!auth)
            return -1;
        free(auth);
        return 0;
    }
    for (size_t p = 0; p < sizeof by_prov / sizeof *by_prov; p++)
        for (size_t i = 1; i < 4 && strcmp(prov, by_prov[p][0]) == 0; i++)
            if (by_prov[p][i] && json_object_get(spec, by_prov[p][i]))
                return drv_err_invalid(err, by_prov[p][i], "%s is not a field of %s "
                                       "credentials", by_prov[p][i], prov);
    if (strcmp(prov, "vultr") == 0) {
        if (json_object_get(spec, "service_account_key"))
            return drv_err_invalid(err, "service_account_key", "service_account_key is not a "
                                   "field of vultr credentials");
        if (!drv_json_str(spec, "api_key"))
            return drv_err_invalid(err, "api_key", "a vultr credential needs api_key (a Vultr "
                                   "API key)");
        return 0;
    }
    if (strcmp(prov, "gcp") == 0) {
        if (json_object_get(spec, "api_key"))
            return drv_err_invalid(err, "api_key", "api_key is not a field of gcp credentials");
        static const char *const aws_only[] = {"access_key_id", "secret_access_key", "profile",
                                               NULL};
        for (size_t i = 0; aws_only[i]; i++)
            if (json_object_get(spec, aws_only[i]))
                return drv_err_invalid(err, aws_only[i], "%s is for aws credentials; a gcp "
                                       "credential has service_account_key", aws_only[i]);
        const char *text = drv_json_str(spec, "service_account_key");
        if (!text)
            return drv_err_invalid(err, "service_account_key", "a gcp credential needs "
                                   "service_account_key (the service account's JSON key)");
        drv_gce_key_t *k = malloc(sizeof *k);
        if (!k)
            return drv_err_internal(err, "out of memory");
        int rc = drv_gce_parse_key(text, k, err);
        char *jwt = rc == 0 ? drv_gce_jwt(k, DRV_GCE_SCOPE, 0, err) : NULL;
        if (rc == 0 && !jwt)
            rc = -1;   /* its private key cannot sign: say so now, not at the first launch */
        free(jwt);
        explicit_bzero(k, sizeof *k);
        free(k);
        return rc;
    }
    if (strcmp(prov, "aws") != 0)
        return drv_err_unprocessable(err, "provider", "credentials are for the cloud providers "
                                     "'aws', 'gcp', 'vultr' and 'oracle', or a container "
                                     "registry ('registry'), not '%s'", prov);
    bool key = json_object_get(spec, "access_key_id") != NULL;
    bool secret = json_object_get(spec, "secret_access_key") != NULL;
    if (key != secret)
        return drv_err_invalid(err, key ? "secret_access_key" : "access_key_id",
                               "access_key_id and secret_access_key go together");
    if (!key && !json_object_get(spec, "profile"))
        return drv_err_invalid(err, "access_key_id", "a credential needs access_key_id and "
                               "secret_access_key, or profile (a section of the head's "
                               "~/.aws/credentials)");
    return 0;
}

static int credential_before_delete(drv_state_t *st, const drv_obj_t *obj, bool cascade,
                                    uint64_t *seq, drv_error_t *err)
{
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s/", obj->owner);
    for (size_t i = drv_state_lower_bound(st, DRV_K_CLUSTER, prefix);
         i < drv_state_count(st, DRV_K_CLUSTER); i++) {
        drv_obj_t *c = drv_state_at(st, DRV_K_CLUSTER, i);
        if (strncmp(c->key, prefix, strlen(prefix)) != 0)
            break;
        const char *cred = drv_json_str(c->spec, "credential");
        if (cred && strcmp(cred, obj->id) == 0)
            return drv_err_conflict(err, "credential '%s' is used by cluster '%s'; delete the "
                                    "cluster first", obj->id, c->id);
    }
    static const drv_kind_t users[] = {DRV_K_MODEL, DRV_K_JOB};   /* runtime.image_credential */
    for (size_t u = 0; u < 2; u++)
        for (size_t i = drv_state_lower_bound(st, users[u], prefix);
             i < drv_state_count(st, users[u]); i++) {
            drv_obj_t *m = drv_state_at(st, users[u], i);
            if (strncmp(m->key, prefix, strlen(prefix)) != 0)
                break;
            const char *cred = drv_json_str(json_object_get(m->spec, "runtime"), "image_credential");
            if (cred && strcmp(cred, obj->id) == 0)
                return drv_err_conflict(err, "credential '%s' is used by %s '%s' "
                                        "(runtime.image_credential); change or delete the %s "
                                        "first", obj->id, u ? "job" : "model", m->id,
                                        u ? "job" : "model");
        }
    return 0;
}

static const char *const credential_immutable[] = {"provider", NULL};

const drv_kind_desc_t drv_kind_credential = {
    .kind = DRV_K_CREDENTIAL,
    .name = "credential",
    .path = "/v1/credentials",
    .schema = credential_fields,
    .immutable = credential_immutable,
    .check = credential_check,
    .before_delete = credential_before_delete,
};
