/* oci_api.h — a small client of the OCI Core Services API (20160918):
 * LaunchInstance (with an opc-retry-token), TerminateInstance and
 * ListInstances (every page, opc-next-page), each request signed with the
 * API key (oci_sign.h), over libcurl.
 *
 * Blocking and slow: called from the oracle provider's worker thread only.
 * Failures are classified for the node autoscaler (provider.h): 500 "Out
 * of host capacity" is *fallback* and told apart (*next_ad: try the
 * cluster's next availability domain); LimitExceeded and QuotaExceeded
 * *fallback* (another shape or capacity); 429 TooManyRequests and other
 * 5xx are retried in the call with backoff (the same retry token, so a
 * launch runs once) and then *retry*; 401 NotAuthenticated and other
 * refusals *give up* with the service's message. The private key never
 * appears in a message or a log line. */
#ifndef DRV_OCI_API_H
#define DRV_OCI_API_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "provider/ec2.h"
#include "provider/provider.h"

#define DRV_OCI_API_VERSION "20160918"

typedef struct drv_oci_account {
    const char *endpoint;            /* "https://iaas.REGION.oraclecloud.com" (no version) */
    const char *tenancy, *user, *fingerprint;
    const char *private_key;         /* PEM */
    const char *compartment;
    int page_size;                   /* ListInstances limit (1..1000); 0: 100 */
} drv_oci_account_t;

typedef struct drv_oci_launch {
    const char *availability_domain, *shape, *image, *subnet, *display_name;
    const char *nsg;                 /* a network security group OCID; NULL or "": none */
    int ocpus;                       /* > 0: shapeConfig (flex shapes) */
    long long memory_gb;
    bool preemptible;                /* preemptibleInstanceConfig, TERMINATE */
    const char *user_data;           /* the script; sent base64 in metadata.user_data */
    const char *tags[8][2];          /* freeformTags */
    size_t n_tags;
} drv_oci_launch_t;

/* POST /20160918/instances; out gets id, state, AD, shape. 0, or -1 with
 * *cls, *next_ad and err. */
int drv_oci_launch(const drv_oci_account_t *a, const drv_oci_launch_t *l,
                   drv_ec2_instance_t *out, drv_prov_class_t *cls, bool *next_ad,
                   unsigned *calls, drv_error_t *err);

/* DELETE /20160918/instances/{id}?preserveBootVolume=false; 404 is not an
 * error (already gone). */
int drv_oci_terminate(const drv_oci_account_t *a, const char *id, drv_prov_class_t *cls,
                      unsigned *calls, drv_error_t *err);

/* GET /20160918/instances?compartmentId=C, every page; the instances whose
 * freeformTags say drover-head=head (filtered here: the API has no tag
 * filter), TERMINATED ones left out; *out malloc'd. */
int drv_oci_list(const drv_oci_account_t *a, const char *head, drv_ec2_instance_t **out,
                 size_t *n, drv_prov_class_t *cls, unsigned *calls, drv_error_t *err);

/* --- pure parts (exposed for tests) --- */
drv_prov_class_t drv_oci_classify(long status, const char *code, const char *message,
                                  bool *next_ad);
/* Append one ListInstances page (a JSON array) of head's instances to *out. */
int drv_oci_parse_list(const char *body, const char *head, drv_ec2_instance_t **out, size_t *n,
                       size_t *cap, drv_error_t *err);

#endif
