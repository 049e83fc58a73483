/* ec2.h — a small client of the EC2 Query API (RunInstances,
 * TerminateInstances, DescribeInstances), signed with SigV4 (sigv4.h),
 * over libcurl; answers parsed with libxml2.
 *
 * Every call is blocking and slow (a cloud round trip): call it from the
 * aws provider's worker thread (aws.c), never under the state lock.
 * Stateless apart from the caller's account record; thread-safe.
 *
 * Failures are classified for the node autoscaler (provider.h):
 * retry (throttling, 5xx, transport), fallback (no capacity, spot
 * unavailable, quota: try another capacity or type) or give up (bad
 * credentials, bad image, bad parameters: a person must act). The secret
 * key never appears in an error message or a log line. */
#ifndef DRV_EC2_H
#define DRV_EC2_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "provider/provider.h"

typedef struct drv_ec2_account {
    char endpoint[256];              /* "https://ec2.REGION.amazonaws.com" or the emulator's */
    char region[64];
    char access_key_id[128];
    char secret_access_key[256];
    int page_size;                   /* DescribeInstances MaxResults (5..1000); 0: 100 */
} drv_ec2_account_t;

typedef struct drv_ec2_instance {
    char id[128];                    /* "i-0123…", a GCE name, a Vultr UUID, an OCI OCID */
    char state[24];                  /* pending | running | shutting-down | terminated | … */
    char type[64];
    bool spot;                       /* instanceLifecycle == spot */
    long long launched;              /* epoch seconds (0: unknown) */
    char zone[32];                   /* where it runs (gcp: needed to delete it) */
    /* tags drover puts on its instances (empty when absent) */
    char head[64], owner[64], cluster[64], nodepool[64], node[64];
} drv_ec2_instance_t;

#define DRV_EC2_MAX_TAGS 8

typedef struct drv_ec2_run {
    const char *image, *type;
    const char *subnet, *security_group;    /* NULL or "": not sent */
    bool spot;                              /* InstanceMarketOptions.MarketType=spot */
    const char *user_data;                  /* the script; sent base64-encoded */
    const char *tags[DRV_EC2_MAX_TAGS][2];  /* key, value */
    size_t n_tags;
    const char *client_token;               /* idempotency; NULL: none */
} drv_ec2_run_t;

/* RunInstances of one instance; id_out gets its id. 0, or -1 with *cls and err. */
int drv_ec2_run_instance(const drv_ec2_account_t *a, const drv_ec2_run_t *r, char id_out[32],
                         drv_prov_class_t *cls, drv_error_t *err);
/* TerminateInstances (n <= 100). An id EC2 does not know is not an error. */
int drv_ec2_terminate(const drv_ec2_account_t *a, const char *const *ids, size_t n,
                      drv_prov_class_t *cls, drv_error_t *err);
/* DescribeInstances of the instances tagged drover:head=head (every page,
 * NextToken); *out is malloc'd (caller frees), terminated ones included. */
int drv_ec2_describe(const drv_ec2_account_t *a, const char *head, drv_ec2_instance_t **out,
                     size_t *n, drv_prov_class_t *cls, drv_error_t *err);

/* --- pure parts (exposed for tests) --- */

/* Append the instances of one DescribeInstances or RunInstances answer to
 * *out (grown as needed); next_token gets NextToken ("" when last page). */
int drv_ec2_parse_instances(const char *xml, size_t len, drv_ec2_instance_t **out, size_t *n,
                            size_t *cap, char *next_token, size_t nt_len, drv_error_t *err);
/* The first <Error><Code>/<Message> of an error answer; -1 when none. */
int drv_ec2_parse_error(const char *xml, size_t len, char *code, size_t code_len, char *msg,
                        size_t msg_len);
/* How to react to an error answer (HTTP status, EC2 error code). */
drv_prov_class_t drv_ec2_classify(long http_status, const char *code);
/* RFC 3986 encoding for the Query API (unreserved kept); -1 when it does not fit. */
int drv_ec2_encode(const char *s, char *out, size_t n);

#endif
