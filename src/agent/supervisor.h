/* supervisor.h — the agent's replica supervisor (design §6): runs model
 * replicas as supervised processes with the replica contract's environment,
 * captures their output to rotated log files, health-checks them, restarts
 * crashed ones with exponential backoff and stops them (SIGTERM, grace,
 * SIGKILL) without leaving processes behind.
 *
 * Model: level-triggered. drv_supervisor_apply() says which replicas should
 * exist; one supervisor thread makes it so in the background and
 * drv_supervisor_status() reports what it sees.
 *
 * Life of a replica:
 *   fetching -> starting              a replica with an artifact (spec.artifact_manifest)
 *                                     first has it made available in the node cache
 *                                     (opts.cache, src/agent/cache.h: ensure, then
 *                                     polled); its snapshot is pinned until the record
 *                                     goes away and becomes DROVER_MODEL_DIR (read-only)
 *   fetching (checkpoint)             then, for a spec with a checkpoint scope, the
 *                                     newest committed checkpoint is restored into
 *                                     DROVER_CHECKPOINT_DIR (opts.ckpt, agent/checkpoint.h)
 *   fetching -> failed                the manifest does not parse, the agent has no
 *                                     cache, or the cache fails (no room, a chunk that
 *                                     never verifies: its message is the reason); no
 *                                     process is ever started
 *   starting -> pulling -> starting   a container replica (spec.image) whose image the
 *                                     engine pulls (agent/container.h): "pulling" with the
 *                                     layers copied so far in the reason; the startup
 *                                     deadline counts from when the container starts
 *   starting -> failed                a container replica whose image is not there with
 *                                     pull_policy never (a failed pull backs off)
 *   starting -> waiting -> starting   a start waits while a replica no longer listed
 *                                     (terminating) still runs on one of its GPUs
 *                                     (spec.gpu_uuids): the head's scale-down freed the
 *                                     GPU when it deleted that replica, and its server
 *                                     holds the GPU's memory until it has drained and
 *                                     exited (stop_grace_ms at most); the reason names
 *                                     the GPU and the replica. No timer: the holder's
 *                                     exit wakes the thread
 *   starting -> ready                 health GET answered 2xx
 *   starting -> failed                no 2xx within startup_timeout_s: the
 *                                     process is killed and NOT restarted
 *                                     (a model that never loads would only
 *                                     burn the GPU in a loop; the head
 *                                     decides what to do with a failed one)
 *   starting|ready -> backoff         the process exited (or, when ready,
 *                                     failed 3 health checks in a row and
 *                                     was killed); restarted after
 *                                     backoff_initial_ms * 2^k (capped at
 *                                     backoff_max_ms; k resets after 60 s
 *                                     of ready running)
 *   backoff -> failed                 only when max_restarts_before_failed > 0
 *                                     and that many restarts were spent
 *   any -> terminating -> (gone)      no longer listed by apply
 * A failed replica stays failed (and listed in status) until an apply
 * leaves it out; the head retries with a new replica id.
 *
 * A training job's worker (spec.job set) has no health check (ready =
 * running once started) and runs once: exit 0 -> succeeded, any other end
 * -> failed, never restarted here (the head restarts the whole gang under
 * new ids); with spec.check_port, a port that cannot be bound fails it
 * before the start.
 *
 * Process groups and orphans: each replica runs in its own session and
 * process group (setsid); stops and restarts signal the whole group, and
 * when a replica's main process exits the rest of its group is SIGKILLed, so
 * nothing it started survives it. Each replica also gets
 * PR_SET_PDEATHSIG=SIGKILL: replicas die with their agent (even when the
 * agent is SIGKILLed) and the agent starts them again when it comes back and
 * the head's desired set lists them. (A replica's own children are not
 * covered by PDEATHSIG when the agent dies hard; with opts.iso the agent
 * kills what is left in its replicas' cgroups when it starts again.)
 *
 * Environment of a replica: the agent's environment minus every DROVER_*
 * variable (agent configuration and secrets) and the contract's variables,
 * then the model's env, then the contract (which wins): PORT,
 * DROVER_REPLICA_ID, DROVER_DEPLOYMENT, DROVER_MODEL_DIR (when set),
 * DROVER_CHECKPOINT_DIR (with a checkpoint scope),
 * CUDA_VISIBLE_DEVICES (always; "" for CPU-only replicas),
 * DROVER_GPU_MEMORY_LIMIT_MIB and DROVER_GPU_COMPUTE_PERCENT (when > 0),
 * LD_PRELOAD=gpushare_lib[:previous] for fractional shares
 * (gpu_memory_limit_mib > 0) when gpushare_lib is set, and for fractional
 * shares on a GPU where MPS runs (mps_pipe_dir): CUDA_MPS_PIPE_DIRECTORY and,
 * when 0 < gpu_compute_percent < 100, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE.
 * Signal dispositions
 * and the signal mask are reset to the defaults; stdin is /dev/null; the
 * working directory is the agent's (with opts.iso: the replica's private
 * DATA_DIR/work/ID, and HOME is it when the replica runs as the replica user).
 *
 * Isolation (opts.iso, agent/isolate.h; not for container replicas, whose
 * engine gives them their own cgroup): each start of a command replica or
 * job worker creates its cgroup with the limits of spec.memory_mib,
 * spec.cpu_millis and the agent's process limit, and the child joins it and
 * drops to the replica user before exec; the model dir (when it is not an
 * artifact's read-only snapshot) and the checkpoint dir are handed to that
 * user. When the process is reaped, an OOM kill counted by its cgroup makes
 * the exit "killed by the OOM killer (over its memory limit of N MiB)" and
 * counts in oom_kills (the restart policy is that of any crash); then the
 * cgroup is removed. What is enforced is in the status' isolation report.
 *
 * Enforcement (GPU shares, design §3): at each start the supervisor records
 * what enforces a fractional replica's share: memory "enforced" when
 * gpushare_lib names a readable file (it is preloaded), else
 * "not-enforced"; compute "mps" when mps_pipe_dir is set, else
 * "time-slicing". Whole-GPU replicas (a GPU but no memory limit) are
 * "whole-gpu" for both. With strict_isolation, a fractional replica whose
 * memory share is not enforced, or whose compute share (0 < percent < 100)
 * would only time-slice, is not started: it is failed with the reason
 * (level-triggered like every failure: the head decides what follows).
 * The replica's shared accounting region (/dev/shm/drover-gpushare-<id>) is
 * removed before each start and when the replica goes away.
 *
 * Threads: the supervisor owns one thread, the only one that forks, reaps,
 * signals, writes logs and runs health checks (fork happens there because
 * PDEATHSIG fires when the forking *thread* exits). apply/status/log_* may be
 * called from any thread; they take the supervisor's mutex briefly. The
 * supervisor reaps its children with waitid on their own pids only: the
 * embedding program must not reap with waitpid(-1) nor set SIGCHLD to SIG_IGN.
 */
#ifndef DRV_SUPERVISOR_H
#define DRV_SUPERVISOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/isolate.h"
#include "common/error.h"

typedef struct drv_replica_spec {
    const char *id;              /* replica id, unique; the same id is never restarted by apply;
                                    [A-Za-z0-9._-], not starting with '.', < 128 bytes */
    const char *deployment;      /* NULL-able */
    const char *const *argv;     /* command, argv[0] looked up in PATH (execvp) */
    size_t argc;                 /* >= 1 */
    const char *const *env;      /* extra "KEY=VALUE" strings (model env); NULL-able */
    size_t envc;
    const char *health_path;     /* e.g. "/health"; NULL or "" = no check: ready once started */
    int startup_timeout_s;       /* <= 0: 300 */
    const char *model_dir;       /* "" or NULL if none */
    const char *gpu_uuids;       /* comma-separated for CUDA_VISIBLE_DEVICES; "" = none (CPU-only:
                                    CUDA_VISIBLE_DEVICES="" so a CPU replica cannot see GPUs) */
    int64_t gpu_memory_limit_mib;/* 0 = none */
    int gpu_compute_percent;     /* 0 = none */
    /* GPU shares (src/gpushare): */
    const char *mps_pipe_dir;    /* MPS runs on the replica's GPU: its clients'
                                    CUDA_MPS_PIPE_DIRECTORY; NULL = time-slicing */
    bool strict_isolation;       /* refuse to start a fractional replica whose share
                                    cannot be enforced (see "Enforcement" above) */
    /* storage layer: the model's artifact (NULL = none) */
    const char *artifact_manifest; /* its manifest, JSON (common/manifest.h) */
    const char *artifact_origin; /* blobs at ORIGIN/HEX (http://HOST:PORT/v1/blobs/sha256) */
    const char *artifact_bearer; /* credential for the origin; NULL = none */
    /* containers (agent/container.h): run in this OCI image through the node's
     * engine (opts.container_engine); argv is then the container's command and
     * may be empty (argc 0: the image's own) */
    const char *image;           /* NULL = a process on the node */
    const char *pull_policy;     /* "if_not_present" (NULL) | "always" | "never" */
    bool entrypoint;             /* argv[0] replaces the image's entrypoint (runtime.command);
                                    false: argv are arguments to it (runtime.args) */
    int64_t cpu_millis, memory_mib; /* the container's --cpus and --memory; 0 = none */
    bool ipc_host;               /* --ipc=host (a preset's server shares memory, PyTorch) */
    int shm_mib;                 /* --shm-size; 0 = the engine's default */
    const char *registry, *registry_user, *registry_password; /* the pull's login; NULL = none */
    /* training jobs (issue 15): a job's worker runs once: no health check
     * (ready = running once started), never restarted; exit 0 ->
     * succeeded, anything else -> failed (the head restarts the gang) */
    const char *job;             /* its job's id; NULL = a replica */
    int check_port;              /* > 0: fail before the start when this TCP port
                                    (rank 0's MASTER_PORT) cannot be bound here */
    /* checkpoints (agent/checkpoint.h): NULL = none */
    const char *checkpoint_scope;/* e.g. "deployment:web:0"; DROVER_CHECKPOINT_DIR is its dir */
    int checkpoint_keep;         /* committed checkpoints kept; 0 = all */
    /* LLM-aware load: a ready replica's Prometheus text (GET, every 2 s); NULL = none */
    const char *metrics_path;
    bool metrics_port;           /* metrics_path on a second port: METRICS_PORT, $(METRICS_PORT) */
} drv_replica_spec_t;

typedef enum {
    DRV_RS_STARTING,
    DRV_RS_READY,
    DRV_RS_BACKOFF,
    DRV_RS_FAILED,
    DRV_RS_STOPPING,
    DRV_RS_FETCHING,
    DRV_RS_PULLING,
    DRV_RS_SUCCEEDED,            /* a job's worker that exited 0 */
    DRV_RS_WAITING,              /* its start waits for a GPU a terminating one holds */
} drv_rs_state_t;

/* "starting", "ready", "backoff", "failed", "terminating", "fetching", "pulling",
 * "succeeded", "waiting" */
const char *drv_rs_state_name(drv_rs_state_t s);

typedef struct drv_replica_status {
    char id[128];
    char deployment[64];
    char job[64];                /* a job's worker: its job ("" for replicas) */
    drv_rs_state_t state;
    int pid;                     /* 0 when no process runs */
    int port;                    /* of the current (or last) process */
    char endpoint[128];          /* "http://HOST:PORT" using the advertise host */
    int restarts;
    char last_exit[128];         /* "exited with status 1" / "killed by signal 9" / "" */
    char reason[256];            /* why failed / backoff: "never became healthy within 30 s", ... */
    char log_tail[2048];         /* last lines of the log (valid UTF-8), filled when failed or
                                    after a crash */
    int64_t started_at_ms, ready_at_ms; /* wall clock, ms since the epoch; 0 = not yet */
    int backoff_ms;              /* the delay before the pending (or last) restart; 0 = none yet */
    /* GPU shares: what enforces the replica's share, as of its last start
     * ("" before the first start and for CPU-only replicas) */
    char enforce_memory[16];     /* "enforced" | "not-enforced" | "whole-gpu" */
    char enforce_compute[16];    /* "mps" | "time-slicing" | "whole-gpu" */
    /* storage layer: the artifact's fetch ("" digest: none) */
    char artifact[65];           /* its manifest digest */
    uint64_t fetch_done, fetch_total; /* bytes verified / of the artifact's distinct blobs */
    double fetch_rate;           /* bytes/s since the fetch began */
    int64_t fetch_ms;            /* how long the fetch took (so far, while fetching) */
    /* isolation on the node (agent/isolate.h), as of the last start; .set false: none */
    drv_iso_report_t isolation;
    int oom_kills;               /* starts that ended in a cgroup OOM kill */
    /* LLM-aware load: what its metrics_path said last (llm_metrics.h) */
    bool llm_load;               /* false: no metrics_path, not ready, or unreadable */
    double llm_running, llm_waiting, llm_kv_cache;   /* kv_cache < 0: not reported */
} drv_replica_status_t;

typedef struct drv_supervisor_opts {
    const char *data_dir;        /* logs in DATA_DIR/replicas/<id>/stdout.log (+ .1 .. .N) */
    const char *advertise_host;  /* for endpoints (NULL: 127.0.0.1); replicas listen on all
                                    interfaces via PORT */
    int stop_grace_ms;           /* default 10000 */
    int64_t log_max_bytes;       /* per file, default 10 MiB */
    int log_files;               /* rotated files kept, default 3 */
    int backoff_initial_ms;      /* default 1000 */
    int backoff_max_ms;          /* default 60000 */
    int max_restarts_before_failed; /* default 0 = never give up (keep backing off) */
    int health_interval_ms;      /* while starting, default 500 */
    const char *gpushare_lib;    /* path for LD_PRELOAD of fractional replicas, NULL = none */
    /* additions */
    int health_ready_interval_ms;/* between checks of a ready replica (failing or not:
                                    3 failures in a row, about 2 intervals apart from the
                                    first, restart it), default 5000 */
    int health_timeout_ms;       /* per health GET, default 1000 */
    struct drv_cache *cache;     /* the node cache for artifacts (not owned); NULL = none:
                                    a replica with an artifact fails */
    const char *container_engine;/* "podman" | "docker"; NULL = none: a replica with an
                                    image fails */
    const char *node_name;       /* the drover.node label of containers ("" until
                                    drv_supervisor_set_node) */
    struct drv_ckpt *ckpt;       /* checkpoints (not owned); NULL = none: a replica with a
                                    checkpoint scope fails */
    struct drv_iso *iso;         /* isolation (not owned, agent/isolate.h); NULL = none:
                                    replicas run in the agent's cgroup, as its user */
} drv_supervisor_opts_t;
/* Every numeric option: 0 = the default, negative = invalid. */

typedef struct drv_supervisor drv_supervisor_t;

drv_supervisor_t *drv_supervisor_create(const drv_supervisor_opts_t *o, drv_error_t *err);
/* Stops every replica (SIGTERM, grace, SIGKILL), waits for them, frees s.
 * Log files are kept (the agent restarts the replicas when it comes back).
 * Accepts NULL. */
void drv_supervisor_destroy(drv_supervisor_t *s);

/* Make the running set equal to specs (level-triggered, idempotent): start
 * ids not known, stop ids not listed (and delete their logs once they are
 * gone); ids already known are left alone whatever their spec says (a failed
 * one stays failed). An id listed again while it is still terminating is
 * started afresh once the old process is gone. Non-blocking. Invalid specs
 * (bad or duplicate id, empty argv) fail the whole call with no effect. */
int drv_supervisor_apply(drv_supervisor_t *s, const drv_replica_spec_t *specs, size_t n,
                         drv_error_t *err);

/* Snapshot of every replica the supervisor knows (including terminating
 * ones), in the order they were first applied; caller frees *out (NULL when
 * the count is 0). */
size_t drv_supervisor_status(drv_supervisor_t *s, drv_replica_status_t **out);

/* Every job worker (spec.job) that has not ended fails for `reason`: a
 * running one gets SIGTERM, then SIGKILL after grace_ms (< 0: the stop
 * grace period, when shorter: that). They stay failed (and are reported
 * so) while the desired set lists them; replicas are not touched. The
 * node lease (node_lease.c) calls it. Non-blocking. */
void drv_supervisor_fail_jobs(drv_supervisor_t *s, const char *reason, int grace_ms);

/* The node's id, once the head has named it: the drover.node label of the
 * containers started from now on. */
void drv_supervisor_set_node(drv_supervisor_t *s, const char *node);

/* A job's worker (spec.job) that is stopped keeps its log, bounded: the
 * last DRV_SUP_JOB_LOG_BYTES of it move to DATA_DIR/job-logs/ID/stdout.log,
 * and only the newest DRV_SUP_JOB_LOGS_KEPT such logs stay on the node (a
 * replica's log goes with it). */
#define DRV_SUP_JOB_LOGS "job-logs"
#define DRV_SUP_JOB_LOG_BYTES ((int64_t)1 << 20)
#define DRV_SUP_JOB_LOGS_KEPT 64

/* Path of a replica's current log file (DATA_DIR/replicas/ID/stdout.log,
 * or a finished job worker's kept one, DATA_DIR/job-logs/ID/stdout.log).
 * 0, or -1 when id is not a valid replica id or neither known nor on disk. */
int drv_supervisor_log_path(drv_supervisor_t *s, const char *id, char *buf, size_t len);

/* Read up to max bytes of a replica's current log file, for `drover logs`
 * and --follow: from offset when offset >= 0 (an offset past the end means
 * the file rotated since: reading starts over at 0; rotation may lose what
 * was written to the old file after the last read), or its last -offset
 * bytes when offset < 0. *next_offset (NULL-able) gets the offset for the
 * next call. Returns the bytes read (0: nothing new), -1 with err filled
 * (404 for an unknown replica). */
ssize_t drv_supervisor_log_read(drv_supervisor_t *s, const char *id, int64_t offset, void *buf,
                                size_t max, int64_t *next_offset, drv_error_t *err);

#endif
