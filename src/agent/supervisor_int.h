/* supervisor_int.h — what the two files of the replica supervisor share
 * and nobody else sees: the supervisor and its replica records, and the
 * functions of one record's life (replica_proc.c) that the supervision
 * loop (supervisor.c) calls. Arrows point one way: replica_proc.c calls
 * nothing in supervisor.c.
 *
 * Every function here runs with s->mu held: on the supervisor thread
 * (drain, check_exit, finish_check, tick, next_due) or in apply()
 * (replica_new, which touches no process).
 *
 * Invariants of a record r:
 *   r->pid > 0 iff a child is running (not yet reaped); its process group
 *     id is r->pid (setsid in the child);
 *   r->kill_why != KILL_NONE only while r->pid > 0 (SIGTERM sent, SIGKILL
 *     at r->kill_at unless r->sigkilled);
 *   r->checking iff r->probe has a check in flight;
 *   !r->desired: the record is terminating; it is removed once r->pid == 0
 *     (or restarted from r->respec, when apply listed the id again).
 */
#ifndef DRV_SUPERVISOR_INT_H
#define DRV_SUPERVISOR_INT_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/health.h"
#include "agent/isolate.h"
#include "agent/llm_metrics.h"
#include "agent/replica_log.h"
#include "agent/replica_spec.h"
#include "agent/supervisor.h"

enum kill_why { KILL_NONE, KILL_STOP, KILL_UNHEALTHY, KILL_FAILED };

struct replica {
    drv_rspec_t sp;
    drv_rspec_t *respec;         /* listed again while terminating: start afresh with this */
    bool desired;
    drv_rs_state_t state;
    pid_t pid;
    int pidfd, out_fd, port;
    enum kill_why kill_why;
    bool sigkilled;
    int64_t kill_at;             /* monotonic ms: SIGKILL the group */
    int64_t deadline, ready_mono, next_start, next_health; /* monotonic ms */
    int backoff_step, backoff_ms, restarts, health_fails;
    drv_probe_t probe;
    bool checking;
    char last_exit[128], reason[256], log_tail[2048];
    int64_t started_at_ms, ready_at_ms;
    drv_rlog_t log;
    char enf_mem[16], enf_cpu[16];   /* GPU shares: what enforced the last start */
    /* storage layer: the artifact's fetch (state fetching) */
    struct drv_manifest *man;    /* parsed from sp.art_manifest when the fetch begins */
    bool pinned;                 /* man's snapshot is pinned in the cache */
    int64_t fetch_begin, next_fetch_poll, fetch_ms; /* monotonic ms; fetch_ms its length */
    uint64_t fetch_done, fetch_total;
    double fetch_rate;
    /* containers: the script's phase (agent/container.h) */
    bool ctr_started;            /* its container is being started: output is the container's */
    int pull_blobs;              /* layers the current pull copied */
    bool art_ready;              /* the artifact's snapshot is the model dir */
    bool ckpt_held;              /* checkpoints: drv_ckpt_acquire answered 1 (released in
                                    drop_fetch) */
    /* isolation (agent/isolate.h): the current (or last) start's cgroups and report */
    drv_iso_proc_t iso;
    int oom_kills;
    /* LLM-aware load (replica_metrics.c): a ready replica's metrics_path */
    drv_probe_t mprobe;
    bool mchecking, load_known;
    int64_t next_metrics;        /* monotonic ms */
    drv_llm_load_t load;
};

struct drv_supervisor {
    drv_supervisor_opts_t o;     /* defaults filled; strings point at the copies below */
    char *data_dir, *host, *gpushare;
    char *engine, *node;         /* containers: NULL = none (opts.container_engine) */
    pthread_mutex_t mu;
    pthread_t thread;
    bool quit;
    int wakefd;                  /* eventfd: apply() and destroy() wake the thread */
    struct replica **r;          /* in order of first apply */
    size_t n, cap;
    struct pollfd *fds;          /* thread-owned scratch */
    size_t fds_cap;
    char iobuf[65536];           /* thread-owned scratch */
    char fail_jobs[256];         /* drv_supervisor_fail_jobs's reason, until the thread acts */
    int fail_jobs_grace_ms;      /* and its grace (< 0: stop_grace_ms) */
};

/* --- one record's life (replica_proc.c) ------------------------------------ */

/* A new record for sp (a copy), to be started by the next tick. */
struct replica *drv_sup_replica_new(const drv_supervisor_t *s, const drv_replica_spec_t *sp);
/* Move what r's process wrote into its log (a bounded amount per call). */
void drv_sup_drain(drv_supervisor_t *s, struct replica *r);
/* Reap r's process if it has exited; then handle what that means (restart
 * with back-off, or nothing when it was stopping or failed). */
void drv_sup_check_exit(drv_supervisor_t *s, struct replica *r, int64_t now);
/* A health check's result: the HTTP status (0: no answer) and what
 * happened. */
void drv_sup_finish_check(drv_supervisor_t *s, struct replica *r, long code, const char *detail,
                          int64_t now);
/* r's timers: start, startup deadline, health checks, stop and SIGKILL.
 * Returns true when r is done (stopped and not listed again) and has been
 * freed: the caller drops it from the table. */
bool drv_sup_tick(drv_supervisor_t *s, struct replica *r, int64_t now);
/* A job's worker not yet ended fails for `why` (node lease): SIGTERM,
 * SIGKILL after grace_ms (< 0: the stop grace) when it runs; it stays
 * failed (reported so) until the desired set drops it. Other records are
 * left alone. */
void drv_sup_fail_worker(drv_supervisor_t *s, struct replica *r, const char *why, int grace_ms,
                         int64_t now);
/* The earlier of `next` and when r's timers want the thread (monotonic ms). */
int64_t drv_sup_next_due(const struct replica *r, int64_t now, int64_t next);

/* replica_metrics.c: scrape a ready replica's metrics_path every
 * DRV_SUP_METRICS_MS into r->load (llm_metrics.h), one probe at a time;
 * anything else (not ready, stopping, no path) cancels it and forgets the
 * load. init in drv_sup_replica_new, service each pass, due for the poll
 * timeout, cancel when the record goes. */
#define DRV_SUP_METRICS_MS 2000
#define DRV_SUP_METRICS_MAX_BODY (4 << 20)
void drv_sup_metrics_init(struct replica *r);
void drv_sup_metrics_service(drv_supervisor_t *s, struct replica *r, int64_t now);
int64_t drv_sup_metrics_due(const struct replica *r, int64_t next);
void drv_sup_metrics_cancel(struct replica *r);

#endif
