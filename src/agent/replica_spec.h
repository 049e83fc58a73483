/* replica_spec.h — one replica as the supervisor keeps it: the checked,
 * owned copy of a drv_replica_spec_t, the environment its process gets
 * (the replica contract of supervisor.h) and the exec in the forked child.
 * Pure data and functions, no state: the supervisor thread owns every
 * drv_rspec_t (supervisor.c, replica_proc.c); drv_rspec_check runs in apply()'s caller. */
#ifndef DRV_REPLICA_SPEC_H
#define DRV_REPLICA_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/isolate.h"
#include "agent/supervisor.h"
#include "common/error.h"

#define DRV_RSPEC_DEFAULT_STARTUP_S 300

typedef struct drv_rspec {
    char *id, *deployment, *health_path, *model_dir, *gpu_uuids;
    char **argv;                 /* argc entries + NULL */
    size_t argc;
    char **env;
    size_t envc;
    int startup_timeout_s;
    int64_t mem_mib;
    int compute_pct;
    char *mps_pipe;              /* GPU shares: NULL = time-slicing */
    bool strict;
    char *art_manifest, *art_origin, *art_bearer;   /* storage layer: NULL = no artifact */
    char *image, *pull_policy;   /* containers: NULL = a process (agent/container.h) */
    bool entrypoint;
    int64_t cpu_millis, memory_mib;
    bool ipc_host;
    int shm_mib;
    char *registry, *registry_user, *registry_password;   /* NULL = no login */
    char *job;                   /* a job's worker (runs once); NULL = a replica */
    int check_port;              /* rank 0's MASTER_PORT to check; 0 = none */
    char *ckpt_scope;            /* checkpoints: NULL = none */
    int ckpt_keep;
    char *ckpt_dir;              /* DROVER_CHECKPOINT_DIR once acquired; NULL before */
    char *home;                  /* isolation: HOME (the private working directory of a replica
                                    run as the replica user); NULL = the agent's */
    char *metrics_path;          /* LLM-aware load: NULL = none */
    bool metrics_port;           /* a second port, METRICS_PORT, where metrics_path is served */
    int mport;                   /* that port for the current process (0: none; replica_proc.c) */
} drv_rspec_t;

/* A replica id usable as a directory name: [A-Za-z0-9._-], not starting
 * with ".", shorter than drv_replica_status_t.id. */
bool drv_rspec_id_ok(const char *id);

/* Spec number i of an apply(): a valid id, a command, KEY=VALUE env, a
 * health path starting with "/", a sane GPU share. 0/-1. */
int drv_rspec_check(const drv_replica_spec_t *sp, size_t i, drv_error_t *err);
void drv_rspec_copy(drv_rspec_t *d, const drv_replica_spec_t *sp);   /* aborts on OOM */
void drv_rspec_free(drv_rspec_t *d);             /* the fields; d itself stays */
void drv_rspec_drop(drv_rspec_t **d);            /* free a heap copy and NULL it */

/* The process environment of a replica listening on port: the agent's own
 * (less DROVER_*), the spec's env, then the contract (PORT, DROVER_*,
 * METRICS_PORT when sp->mport > 0, CUDA_VISIBLE_DEVICES, GPU share variables; gpushare, when not NULL, is
 * preloaded into replicas with a memory share). NULL-terminated, malloc'd
 * strings; never NULL. */
char **drv_rspec_env(const char *gpushare, const drv_rspec_t *sp, int port);
/* Free a NULL-terminated vector of malloc'd strings (NULL is fine). */
void drv_rspec_strv_free(char **v);

/* In the forked child: its own session, its cgroups, working directory and
 * user (iso, NULL-able: agent/isolate.h), PDEATHSIG, stdin from /dev/null,
 * stdout and stderr to wfd, other fds closed, signals reset, then exec.
 * Only async-signal-safe calls. Never returns (126: the parent is gone,
 * 125: isolation failed, 127: exec failed, the reason written to wfd). */
void drv_rspec_exec(char *const *argv, char *const *envp, int wfd, pid_t parent,
                    const drv_iso_proc_t *iso) __attribute__((noreturn));

#endif
