/* cloudw.h — the worker every cloud provider (aws, gcp, vultr, oracle, slurm) runs on: one thread
 * that makes every cloud call through a backend (a table of three calls:
 * create, terminate, list), so a slow cloud never stalls the controller.
 *
 * The controller (under no lock) queues launches and terminations through
 * the provider ops (provider.h); the worker runs them, lists this head's
 * machines (labelled or tagged with the head id) every few seconds per
 * account, terminates orphans (a machine whose node does not exist) after
 * the cluster's grace period, and hands finished calls back (ops->results).
 * Everything here is guarded by the worker's own mutex, never by the state
 * lock. A backend is called from the worker thread only, one call at a
 * time, so its context needs no lock of its own. */
#ifndef DRV_CLOUDW_H
#define DRV_CLOUDW_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "provider/ec2.h"
#include "provider/provider.h"

typedef struct drv_cloudw drv_cloudw_t;

/* A cloud's calls. Machines are described by drv_ec2_instance_t (its
 * fields are the cloud-neutral ones: id, state in EC2's words — pending,
 * running, stopping, stopped, shutting-down, terminated —, zone, type,
 * spot, and drover's tags or labels). Each call adds the API requests it
 * made to *calls. */
typedef struct drv_cloud_backend {
    const char *name;          /* "aws": log lines, messages */
    void *ctx;                 /* the backend's own (token caches); NULL: none */
    /* Do a and b name the same account (listed once)? */
    bool (*same_account)(const drv_cloud_settings_t *a, const drv_cloud_settings_t *b);
    /* Make one machine for launch l of head head_id; *out describes it.
     * 0, or -1 with *cls and err. */
    int (*create)(void *ctx, const char *head_id, const drv_node_launch_t *l,
                  drv_ec2_instance_t *out, drv_prov_class_t *cls, unsigned *calls,
                  drv_error_t *err);
    /* Terminate machines v[0..n) of account s (n <= 100). A machine the
     * cloud does not know is not an error. */
    int (*terminate)(void *ctx, const drv_cloud_settings_t *s, const drv_ec2_instance_t *v,
                     size_t n, unsigned *calls, drv_error_t *err);
    /* The machines of account s made by head head_id (every page); *out
     * malloc'd (caller frees). */
    int (*list)(void *ctx, const drv_cloud_settings_t *s, const char *head_id,
                drv_ec2_instance_t **out, size_t *n, unsigned *calls, drv_error_t *err);
} drv_cloud_backend_t;

/* Start a worker for backend be (copied; be->ctx stays the caller's). The
 * head id (the head tag or label) is kept in data_dir/head-id, shared by
 * all providers, so a restarted head recognizes its machines. */
drv_cloudw_t *drv_cloudw_create(const char *data_dir, const drv_cloud_backend_t *be,
                                drv_error_t *err);
void drv_cloudw_destroy(drv_cloudw_t *w);

const char *drv_cloudw_head_id(const drv_cloudw_t *w);
/* The backend context given at create (be->ctx). */
void *drv_cloudw_ctx(const drv_cloudw_t *w);
/* Cloud API calls made so far (for /metrics and tests). */
unsigned long long drv_cloudw_calls(drv_cloudw_t *w);

/* The provider ops' bodies (provider.h), on worker w (NULL: not running). */
int drv_cloudw_create_node(drv_cloudw_t *w, const drv_node_launch_t *l, drv_error_t *err);
int drv_cloudw_delete_node(drv_cloudw_t *w, const char *owner, const char *id,
                           drv_error_t *err);
bool drv_cloudw_alive(drv_cloudw_t *w, const char *owner, const char *id);
bool drv_cloudw_gone(drv_cloudw_t *w, const char *owner, const char *id);
void drv_cloudw_known(drv_cloudw_t *w, const drv_node_ref_t *nodes, size_t n,
                      const drv_cloud_settings_t *accounts, size_t n_accounts);
size_t drv_cloudw_results(drv_cloudw_t *w, drv_prov_result_t *out, size_t max);
bool drv_cloudw_instance_of(drv_cloudw_t *w, const char *owner, const char *node, char *id,
                            size_t len);

/* The provider ops (provider.h) of a backend whose worker droverd keeps in
 * env->FIELD, defined as `const drv_provider_ops_t SYM`: each op forwards
 * to the drv_cloudw_* body above; without a worker (droverd did not start
 * it) a create fails "not running" and the other ops see nothing. */
#define DRV_CLOUDW_PROVIDER_OPS(SYM, NAME, FIELD)                                            \
    static int SYM##_create(const drv_prov_env_t *env, const drv_node_launch_t *l,           \
                            drv_error_t *err)                                                \
    {                                                                                        \
        if (!env->FIELD)                                                                     \
            return drv_err_internal(err, "the " NAME " provider is not running");            \
        return drv_cloudw_create_node(env->FIELD, l, err);                                   \
    }                                                                                        \
    static int SYM##_delete(const drv_prov_env_t *env, const char *owner, const char *id,    \
                            drv_error_t *err)                                                \
    {                                                                                        \
        return env->FIELD ? drv_cloudw_delete_node(env->FIELD, owner, id, err) : 0;          \
    }                                                                                        \
    static bool SYM##_alive(const drv_prov_env_t *env, const char *owner, const char *id)    \
    {                                                                                        \
        return env->FIELD && drv_cloudw_alive(env->FIELD, owner, id);                        \
    }                                                                                        \
    static bool SYM##_gone(const drv_prov_env_t *env, const char *owner, const char *id)     \
    {                                                                                        \
        return env->FIELD && drv_cloudw_gone(env->FIELD, owner, id);                         \
    }                                                                                        \
    static void SYM##_known(const drv_prov_env_t *env, const drv_node_ref_t *nodes,          \
                            size_t n, const drv_cloud_settings_t *accounts,                  \
                            size_t n_accounts)                                               \
    {                                                                                        \
        if (env->FIELD)                                                                      \
            drv_cloudw_known(env->FIELD, nodes, n, accounts, n_accounts);                    \
    }                                                                                        \
    static size_t SYM##_results(const drv_prov_env_t *env, drv_prov_result_t *out,           \
                                size_t max)                                                  \
    {                                                                                        \
        return env->FIELD ? drv_cloudw_results(env->FIELD, out, max) : 0;                    \
    }                                                                                        \
    static bool SYM##_instance_of(const drv_prov_env_t *env, const char *owner,              \
                                  const char *node, char *id, size_t len)                    \
    {                                                                                        \
        return env->FIELD && drv_cloudw_instance_of(env->FIELD, owner, node, id, len);       \
    }                                                                                        \
    const drv_provider_ops_t SYM = {                                                         \
        .name = NAME,                                                                        \
        .provisions = true,                                                                  \
        .create_node = SYM##_create,                                                         \
        .delete_node = SYM##_delete,                                                         \
        .alive = SYM##_alive,                                                                \
        .gone = SYM##_gone,                                                                  \
        .known_nodes = SYM##_known,                                                          \
        .results = SYM##_results,                                                            \
        .instance_of = SYM##_instance_of,                                                    \
    }

/* The boot script a new machine runs (user-data, startup-script): starts
 * drover-agent with the head URL and the node's join token; installs
 * nothing. NULL when a value would break the script's quoting. Caller
 * frees. */
char *drv_cloud_boot_script(const drv_node_launch_t *l);

#endif
