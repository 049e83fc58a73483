/* container.h — replicas in OCI containers (issue 16): which container
 * engine the node has (podman preferred, docker), and the command that runs
 * one replica's container under the supervisor with the replica contract
 * inside it. Pure functions and short-lived helper processes; no state.
 *
 * How a container replica runs. The supervisor starts, as the replica's
 * process, a small POSIX sh script (drv_ctr_argv) that:
 *   1. adopts the container "drover-<replica id>" when the agent saved a
 *      port for it and it is running (or has exited: a job's worker that
 *      ended meanwhile reports its status, it is not run again) with the
 *      label drover.port equal to $PORT (a restarted agent after a crash:
 *      the container outlived it, nothing is restarted);
 *   2. else pulls first with pull_policy always, and starts it detached
 *      (`run -d --pull=never`); only when that fails does it remove a stale
 *      container of the name and look for the image (missing and never:
 *      exit DRV_CTR_EXIT_NO_IMAGE, failed at once; missing: pull; a failed
 *      pull: DRV_CTR_EXIT_PULL, backed off like a crash) and run again;
 *      then prints DRV_CTR_STARTED_MARK. The container runs with host
 *      networking, the contract's environment, the model dir at
 *      DRV_CTR_MODEL_DIR read-only, a checkpoint dir (DROVER_CHECKPOINT_DIR:
 *      a job worker's, or a deployment's with checkpoints) at
 *      DRV_CTR_CKPT_DIR read-write, GPUs by UUID, --cpus/--memory, labels;
 *      for a GPU memory share libdrover-gpushare.so bind-mounted and
 *      preloaded, its accounting region in a directory shared with the host
 *      (DROVER_GPUSHARE_DIR), and with MPS the pipe directory and the
 *      node's IPC namespace;
 *   3. follows its output (`logs -f`) into the replica log, and when it
 *      ends exits with the container's status (after removing it);
 *   4. on SIGTERM (a stop) stops it with the grace period and removes it.
 * The replica's port is kept in DATA_DIR/containers/<id>.port so that a
 * restarted agent starts the script with the same PORT and adopts.
 */
#ifndef DRV_CONTAINER_H
#define DRV_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>

#include "agent/replica_spec.h"

#define DRV_CTR_MODEL_DIR "/models"    /* where DROVER_MODEL_DIR points inside */
#define DRV_CTR_CKPT_DIR "/checkpoints" /* where DROVER_CHECKPOINT_DIR points inside */
/* GPU shares: the preloaded library and the accounting region's directory
 * inside (the host's is STATE_DIR/<id>.gpushare: gpushare/region.h) */
#define DRV_CTR_GPUSHARE_LIB "/usr/lib/drover/libdrover-gpushare.so"
#define DRV_CTR_GPUSHARE_DIR "/run/drover-gpushare"
#define DRV_CTR_EXIT_NO_IMAGE 86       /* pull_policy never and no such image */
#define DRV_CTR_EXIT_PULL 87           /* the pull failed */
#define DRV_CTR_EXIT_RUN 88            /* `run -d` refused the container */
#define DRV_CTR_STARTED_MARK "drover: container started"

typedef struct drv_ctr_engine {
    char name[16];                     /* "podman" | "docker" | "" (none) */
    char version[64];                  /* "4.3.1" */
    char why[256];                     /* none: why not (shown in the node's status) */
} drv_ctr_engine_t;

/* Find the engine: want is "auto" (podman, then docker), "podman",
 * "docker" or "none". Always fills out; returns 0 when one is usable. Runs
 * `ENGINE --version` (and `docker version` for the daemon): call at start,
 * before threads. */
int drv_ctr_detect(const char *want, drv_ctr_engine_t *out);

typedef struct drv_ctr_run {
    const char *engine;                /* "podman" | "docker" */
    const char *node;                  /* label drover.node */
    const char *state_dir;             /* DATA_DIR/containers */
    int grace_ms;                      /* the supervisor's stop grace */
    const char *cdi_dirs;              /* ":"-separated; NULL: /etc/cdi:/var/run/cdi */
    const char *gpushare;              /* libdrover-gpushare.so on the host; NULL: none */
    bool adopt;                        /* port is a saved one: a container may be running */
} drv_ctr_run_t;

/* The script's argv for sp (sp->image set) listening on port; NULL with why
 * when it cannot run (GPUs wanted and no CDI spec names nvidia.com/gpu). */
char **drv_ctr_argv(const drv_ctr_run_t *cr, const drv_rspec_t *sp, int port, char *why,
                    size_t wl);

/* Kubernetes' $(VAR) in a container's arguments and environment values: a
 * variable the container gets (the contract's, e.g. $(PORT),
 * $(DROVER_DEPLOYMENT), and the model's env) is replaced by its value
 * inside (DROVER_MODEL_DIR and DROVER_CHECKPOINT_DIR: the paths inside);
 * $$(X) is a literal $(X); anything else stays as it is. env is
 * drv_rspec_env's vector. drv_ctr_expand returns a malloc'd string;
 * drv_ctr_expand_env replaces env's values in place (the script's
 * environment, which `--env=KEY` passes on). */
char *drv_ctr_expand(const drv_rspec_t *sp, char *const *env, const char *s);
void drv_ctr_expand_env(const drv_rspec_t *sp, char **env);

/* The port a container of replica id was started with (an adoption
 * candidate), or 0. */
int drv_ctr_saved_port(const char *state_dir, const char *id);

/* Exit status `code` of the script: true when it means the replica failed
 * for good (why filled), false for a crash to back off from (why filled
 * when the status is one of the script's, else untouched). */
bool drv_ctr_exit_fatal(const drv_rspec_t *sp, int code, char *why, size_t wl);

/* What the script's output (before the container starts) says: bit 0 a
 * pull began, bit 1 the container is being started (DRV_CTR_STARTED_MARK);
 * *blobs += the layers the pull copied in buf (podman's "Copying blob",
 * docker's "…: Pull complete" lines). A
 * marker split across two reads is missed (only a phase shown late). */
#define DRV_CTR_PHASE_PULLING 1
#define DRV_CTR_PHASE_STARTED 2
int drv_ctr_phase(const char *buf, size_t n, int *blobs);

/* A pull's login as an engine auth file, STATE_DIR/<name>.auth/config.json
 * (mode 0600 in a 0700 directory, dir gets the directory: {"auths":
 * {REGISTRY: {"auth": base64(user:password)}}}, the format of podman's
 * auth.json and docker's config.json; REGISTRY_AUTH_FILE / DOCKER_CONFIG
 * point the engine at it). 0/-1 with why. */
int drv_ctr_write_auth(const char *state_dir, const char *name, const char *registry,
                       const char *user, const char *password, char *dir, size_t dl, char *why,
                       size_t wl);

/* Remove replica id's container (force, no grace) in a detached process:
 * the safety net after a stop whose script was SIGKILLed. */
void drv_ctr_remove(const char *engine, const char *id);

/* Remove the containers of node (label drover.node) whose replica is not
 * among ids (the head dropped it while the agent was down), and their port
 * files. Runs `ENGINE ps` (blocking): call once, after the first desired
 * set. Returns how many it removes. */
int drv_ctr_sweep(const char *engine, const char *node, const char *state_dir,
                  const char *const *ids, size_t n);

/* Whether a CDI spec in dirs names nvidia.com/gpu. */
bool drv_ctr_cdi_has_gpus(const char *dirs);

#endif
