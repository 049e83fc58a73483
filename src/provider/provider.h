/* provider.h — where nodes come from (design §2). A provider turns a node
 * record into a machine running drover-agent and releases it again.
 *
 * Calls happen on the controller thread, never under the state lock
 * (starting a process or calling a cloud API is slow). A cloud provider
 * (aws, gcp, vultr, oracle, slurm) only queues the work there: its own worker thread makes the calls
 * and hands results back through drv_provider_results(), which the
 * controller drains each pass. Failures are classified (drv_prov_class_t)
 * so the node autoscaler knows whether to retry, fall back to another
 * capacity or type, or give up until a person acts. */
#ifndef DRV_PROVIDER_H
#define DRV_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

struct drv_cloudw;

/* How to react to a failed provider call. */
typedef enum drv_prov_class {
    DRV_PROV_OK = 0,
    DRV_PROV_RETRY,          /* throttled, 5xx, network: the same call later */
    DRV_PROV_FALLBACK,       /* no capacity, spot unavailable, quota: another capacity/type */
    DRV_PROV_GIVE_UP,        /* bad credentials, bad image or parameters: a person must act */
} drv_prov_class_t;

const char *drv_prov_class_name(drv_prov_class_t c);

/* What the providers know of the head: their whole context, filled by
 * droverd before the controller starts and read-only after (the aws field
 * is set once the aws worker exists). Providers never see the head's state. */
typedef struct drv_prov_env {
    char data_dir[512];       /* local nodes' directories; the aws head id */
    char server_url[256];     /* how local agents reach the head */
    char agent_bin[512];      /* drover-agent for the local provider */
    char ca_file[600];        /* the CA local agents trust ("": the head speaks plain http) */
    /* Several heads (NULL: one): every head's URL for a local agent's
     * --server, comma-separated, this head's (server_url) first. */
    void (*head_urls)(void *ctx, char *out, size_t n);
    void *head_urls_ctx;
    struct drv_cloudw *aws;   /* the aws provider's worker (provider/aws.h; NULL: none) */
    struct drv_cloudw *gcp;   /* the gcp provider's worker (provider/gcp.h; NULL: none) */
    struct drv_cloudw *vultr; /* the vultr provider's worker (provider/vultr.h; NULL: none) */
    struct drv_cloudw *oracle; /* the oracle provider's worker (provider/oci.h; NULL: none) */
    struct drv_cloudw *slurm; /* the slurm provider's worker (provider/slurm.h; NULL: none) */
} drv_prov_env_t;

/* Where a cloud node is made (resolved from the cluster, its credential and
 * the nodepool by the controller, under the state lock). Memory only: the
 * secret is never logged. */
typedef struct drv_cloud_settings {
    char endpoint[256];
    char region[64];
    char access_key_id[128];
    char secret_access_key[256];
    char image[128];
    char subnet[128];
    char security_group[128];
    char profile[128];        /* keys from this ~/.aws/credentials section (when no keys) */
    char project[128];        /* gcp: the project (default: the key's project_id) */
    char zones[256];          /* gcp: zones to try in order, comma-separated ("": REGION-a,b,c) */
    char sa_key[8192];        /* gcp: the service-account JSON key */
    char api_key[128];        /* vultr: the API key */
    char tenancy[128];        /* oracle: the API key's tenancy OCID */
    char user[128];           /* oracle: its user OCID */
    char fingerprint[64];     /* oracle: its public half's fingerprint */
    char private_key[4096];   /* oracle: the API signing key (PEM) */
    char compartment[128];    /* oracle: where instances are made and listed */
    char ads[512];            /* oracle: availability domains to try, comma-separated */
    char slurm_conf[512];     /* slurm: SLURM_CONF for its commands ("": droverd's own) */
    char partition[64];       /* slurm: the nodepool's partition ("": the default one) */
    char account[64];         /* slurm: its account ("": the user's default) */
    char time_limit[32];      /* slurm: its --time ("": the partition's default) */
    char head_url[256];       /* how the new machine reaches the head */
    char ca_hash[80];         /* the pin its agent checks ("sha256:HEX"; "": none, plain http) */
    int orphan_grace_s;       /* an instance with no node is terminated after this */
} drv_cloud_settings_t;

typedef struct drv_node_launch {
    char node_id[64];
    char owner[64];
    char secret[80];          /* the node credential, handed to the agent */
    char gpus[128];           /* --gpus spec from the instance type ("none", "2xL4:24576") */
    int cpus;
    long long memory_mib;
    /* cloud providers */
    char cluster[64], nodepool[64];
    char instance_type[64];
    char capacity[16];        /* "on_demand" | "spot" */
    char join_token[96];      /* single-use, bound to this node, short TTL */
    drv_cloud_settings_t cloud;
} drv_node_launch_t;

typedef struct drv_node_ref {
    char owner[64], node_id[64];
} drv_node_ref_t;

/* A finished provider call, for the controller. */
typedef struct drv_prov_result {
    char owner[64], node_id[64];
    char cluster[64], nodepool[64];
    char instance_type[64], capacity[16];
    bool create;              /* a create (else a delete) */
    drv_prov_class_t cls;     /* DRV_PROV_OK: it worked */
    char instance_id[128];    /* created: the machine's id (an OCI OCID is ~90) */
    char message[384];
} drv_prov_result_t;

typedef struct drv_provider_ops {
    const char *name;
    bool provisions;          /* false: self-managed, the operator starts agents */
    int (*create_node)(const drv_prov_env_t *env, const drv_node_launch_t *l, drv_error_t *err);
    /* Ask the machine to go away (gracefully). */
    int (*delete_node)(const drv_prov_env_t *env, const char *owner, const char *node_id,
                       drv_error_t *err);
    /* Is the machine still there (a local agent process alive)? */
    bool (*alive)(const drv_prov_env_t *env, const char *owner, const char *node_id);
    /* Is the node's machine known to be gone (listed by the provider, not
     * found, no call in flight)? NULL: never known. */
    bool (*gone)(const drv_prov_env_t *env, const char *owner, const char *node_id);
    /* Tell the provider which of its nodes exist (after each full pass):
     * machines of other nodes are orphans. NULL: not needed. */
    void (*known_nodes)(const drv_prov_env_t *env, const drv_node_ref_t *nodes, size_t n,
                        const drv_cloud_settings_t *accounts, size_t n_accounts);
    /* Move up to max finished calls to out; returns how many. NULL: none. */
    size_t (*results)(const drv_prov_env_t *env, drv_prov_result_t *out, size_t max);
    /* Which node owns this provider's machine (NULL when unknown). */
    bool (*instance_of)(const drv_prov_env_t *env, const char *owner, const char *node_id, char *id,
                        size_t len);
} drv_provider_ops_t;

/* Ops for a provider id ("local", "self-managed", "aws", ...). Providers
 * without an implementation yet get the self-managed ops (nothing is
 * provisioned; agents join with join tokens). */
const drv_provider_ops_t *drv_provider_ops(const char *provider);

#endif
