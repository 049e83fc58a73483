/* replica_proc.c — one replica's life, for the supervisor thread: start
 * (port, output pipe, fork and exec through replica_spec.c, the GPU share's
 * enforcement record), exit and reaping, stop (SIGTERM, then SIGKILL to
 * the process group after the grace period), restarts with back-off or
 * giving up, health checks (health.c) and the timers of all of these.
 * The records and their invariants are in supervisor_int.h; the loop that
 * drives them, the table and the public functions are supervisor.c.
 */
#define _GNU_SOURCE
#include "agent/supervisor_int.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/cache.h"
#include "agent/container.h"
#include "agent/checkpoint.h"
#include "common/log.h"
#include "common/manifest.h"
#include "common/util.h"
#include "gpushare/region.h"

#define HEALTH_FAILS_TO_RESTART 3
#define BACKOFF_RESET_MS 60000   /* ready this long: the next crash backs off from the start */
#define TAIL_LINES 20
#define REAP_TICK_MS 100         /* only without pidfd */
#define READ_BUDGET (256 * 1024) /* per replica per wake-up, for fairness */
#define FETCH_POLL_MS 50         /* progress of a replica's artifact fetch (its fetch.seconds is measured to this) */

/* --- process control (supervisor thread) -------------------------------------- */

static void signal_group(struct replica *r, int sig)
{
    assert(r->pid > 0);
    /* ESRCH: the child has not called setsid() yet; the signal stays pending
     * (blocked) until it resets its mask, then acts with the default action. */
    if (kill(-r->pid, sig) < 0 && errno == ESRCH)
        kill(r->pid, sig);
}

static void stop_check(drv_supervisor_t *s, struct replica *r)
{
    if (r->checking) {
        drv_probe_cancel(&r->probe);
        r->checking = false;
    }
}

static void begin_kill(drv_supervisor_t *s, struct replica *r, enum kill_why why, int64_t now)
{
    assert(r->pid > 0 && why != KILL_NONE);
    if (r->kill_why == KILL_NONE) {
        signal_group(r, SIGTERM);
        r->kill_at = now + s->o.stop_grace_ms;
        drv_rlog_note(&r->log, "stopping process group %d: SIGTERM, SIGKILL after %d ms",
                      (int)r->pid, s->o.stop_grace_ms);
    }
    r->kill_why = why;
    stop_check(s, r);
}

static void fmt_ms(char *buf, size_t len, int ms)
{
    if (ms < 1000)
        snprintf(buf, len, "%d ms", ms);
    else if (ms % 1000 == 0)
        snprintf(buf, len, "%d s", ms / 1000);
    else
        snprintf(buf, len, "%.1f s", ms / 1000.0);
}

static void set_failed(struct replica *r, const char *why)
{
    r->state = DRV_RS_FAILED;
    snprintf(r->reason, sizeof r->reason, "%s", why);
    drv_rlog_note(&r->log, "replica failed: %s", why);
    drv_rlog_tail(r->log.path, TAIL_LINES, r->log_tail, sizeof r->log_tail);
    drv_warn("replica %s failed: %s", r->sp.id, why);
}

/* The process is gone (or never started) for `cause`: back off, or give up. */
static void schedule_restart(drv_supervisor_t *s, struct replica *r, const char *cause,
                             int64_t now)
{
    if (r->ready_mono && now - r->ready_mono >= BACKOFF_RESET_MS)
        r->backoff_step = 0;
    r->ready_mono = 0;
    char why[256];
    if (s->o.max_restarts_before_failed > 0 && r->restarts >= s->o.max_restarts_before_failed) {
        snprintf(why, sizeof why, "gave up after %d restarts; last: %s", r->restarts, cause);
        set_failed(r, why);
        return;
    }
    int64_t delay = s->o.backoff_initial_ms;
    for (int k = 0; k < r->backoff_step && delay < s->o.backoff_max_ms; k++)
        delay *= 2;
    if (delay > s->o.backoff_max_ms)
        delay = s->o.backoff_max_ms;
    if (delay < s->o.backoff_max_ms)
        r->backoff_step++;
    r->backoff_ms = (int)delay;
    r->restarts++;
    r->state = DRV_RS_BACKOFF;
    r->next_start = now + delay;
    char d[32];
    fmt_ms(d, sizeof d, (int)delay);
    snprintf(why, sizeof why, "%s; restarting in %s", cause, d);
    snprintf(r->reason, sizeof r->reason, "%s", why);
    drv_rlog_note(&r->log, "%s (restart %d)", why, r->restarts);
    drv_rlog_tail(r->log.path, TAIL_LINES, r->log_tail, sizeof r->log_tail);
    drv_info("replica %s: %s", r->sp.id, why);
}

static bool port_taken(const drv_supervisor_t *s, int port)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->r[i]->pid > 0 && (s->r[i]->port == port || s->r[i]->sp.mport == port))
            return true;
    return false;
}

/* A port free right now (bind to :0, read it, close), not one of ours. */
static int pick_port(const drv_supervisor_t *s)
{
    for (int tries = 0; tries < 32; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
        socklen_t al = sizeof a;
        int rc = bind(fd, (struct sockaddr *)&a, sizeof a);
        if (rc == 0)
            rc = getsockname(fd, (struct sockaddr *)&a, &al);
        int e = errno;
        close(fd);
        if (rc < 0) {
            errno = e;
            return -1;
        }
        int port = ntohs(a.sin_port);
        if (!port_taken(s, port))
            return port;
    }
    errno = EADDRINUSE;
    return -1;
}

/* The second port of a replica whose metrics_port is set (METRICS_PORT):
 * for an adopted container the one it was started with (saved beside the
 * containers' state as <id>.mport), else a fresh one other than port. */
static int metrics_port(const drv_supervisor_t *s, const char *ctr_dir, const drv_rspec_t *sp,
                        int port, bool adopt)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.mport", ctr_dir, sp->id);
    int mport = 0;
    if (adopt) {
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%d", &mport) != 1 || mport <= 0 || mport > 65535)
                mport = 0;
            fclose(f);
        }
        return mport;
    }
    for (int tries = 0; tries < 8 && (mport <= 0 || mport == port); tries++)
        mport = pick_port(s);
    if (mport == port)
        errno = EADDRINUSE;   /* (pick_port's own failures set errno) */
    if (mport <= 0 || mport == port)
        return -1;
    if (sp->image) {   /* a restarted agent adopts the container with it */
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%d\n", mport);
            fclose(f);
        }
    }
    return mport;
}

/* Whether a TCP port can be bound on every interface right now (a job's
 * MASTER_PORT, checked before rank 0 starts). */
static bool port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return true;   /* cannot tell: let the program find out */
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* --- the artifact (state fetching, see supervisor.h) ---------------------------- */

static void unpin(drv_supervisor_t *s, struct replica *r)
{
    drv_error_t e;
    if (r->pinned && drv_cache_unpin(s->o.cache, r->man->digest, &e) < 0)
        drv_warn("replica %s: unpinning artifact %s: %s", r->sp.id, r->man->digest, e.message);
    r->pinned = false;
}

static void fetch_failed(drv_supervisor_t *s, struct replica *r, const char *fmt, const char *a)
{
    char why[sizeof r->reason];
    snprintf(why, sizeof why, fmt, a);
    unpin(s, r);
    set_failed(r, why);
}

/* Begin the fetch: parse the manifest, ensure it in the cache (non-blocking:
 * the cache's threads download), pin it. 0, or -1 when r failed. */
static int begin_fetch(drv_supervisor_t *s, struct replica *r, int64_t now)
{
    drv_error_t e = {0};
    if (!s->o.cache) {
        fetch_failed(s, r, "its model has an artifact but this agent has no node cache%s", "");
        return -1;
    }
    if (drv_manifest_parse(r->sp.art_manifest, strlen(r->sp.art_manifest), &r->man, &e) < 0) {
        r->man = NULL;
        fetch_failed(s, r, "the artifact's manifest from the head does not parse: %s", e.message);
        return -1;
    }
    drv_cache_origin_t o = {.base_url = r->sp.art_origin ? r->sp.art_origin : "",
                            .bearer = r->sp.art_bearer};
    if (drv_cache_ensure(s->o.cache, r->man, &o, &e) < 0) {
        fetch_failed(s, r, "cannot fetch the artifact into the node cache: %s", e.message);
        return -1;
    }
    if (drv_cache_pin(s->o.cache, r->man->digest, &e) < 0) {
        fetch_failed(s, r, "cannot pin the artifact in the node cache: %s", e.message);
        return -1;
    }
    r->pinned = true;
    r->fetch_begin = now;
    r->fetch_total = r->man->total_size;
    drv_rlog_note(&r->log, "fetching artifact %s (%llu bytes in %zu files) into the node cache",
                  r->man->digest, (unsigned long long)r->man->total_size, r->man->nfiles);
    return 0;
}

/* Poll the fetch; when the snapshot is ready, it becomes the model dir:
 * 1. 0 while fetching, -1 when r failed. */
static int step_artifact(drv_supervisor_t *s, struct replica *r, int64_t now)
{
    if (!r->man && begin_fetch(s, r, now) < 0)
        return -1;
    drv_cache_progress_t p;
    drv_cache_state_t cs = drv_cache_progress(s->o.cache, r->man->digest, &p);
    r->fetch_done = p.done;
    r->fetch_total = p.total ? p.total : r->fetch_total;
    r->fetch_rate = p.rate;
    r->fetch_ms = now - r->fetch_begin;
    if (cs == DRV_CACHE_FAILED) {
        fetch_failed(s, r, "fetching the artifact failed: %s", p.error);
        return -1;
    }
    if (cs == DRV_CACHE_UNKNOWN) {
        fetch_failed(s, r, "the node cache lost artifact %s while fetching it", r->man->digest);
        return -1;
    }
    if (cs != DRV_CACHE_READY) {
        r->next_fetch_poll = now + FETCH_POLL_MS;
        return 0;
    }
    char path[4096];
    drv_error_t e;
    if (drv_cache_snapshot_path(s->o.cache, r->man->digest, path, sizeof path, &e) < 0) {
        fetch_failed(s, r, "the artifact's snapshot: %s", e.message);
        return -1;
    }
    free(r->sp.model_dir);
    r->sp.model_dir = drv_strdup(path);
    drv_rlog_note(&r->log, "artifact %s ready after %lld ms: %s", r->man->digest,
                  (long long)r->fetch_ms, path);
    drv_info("replica %s: artifact %.12s ready after %lld ms", r->sp.id, r->man->digest,
             (long long)r->fetch_ms);
    return 1;
}

/* The artifact first (when there is one), then the checkpoint directory
 * (agent/checkpoint.h: the committed checkpoints it lacks are restored); then
 * the replica starts (state starting, at once). */
static void step_fetch(drv_supervisor_t *s, struct replica *r, int64_t now)
{
    if (r->sp.art_manifest && !r->art_ready) {
        if (step_artifact(s, r, now) <= 0)
            return;
        r->art_ready = true;
    }
    if (r->sp.ckpt_scope && !r->ckpt_held) {
        char why[256] = "this agent keeps no checkpoints";
        int k = s->o.ckpt ? drv_ckpt_acquire(s->o.ckpt, r->sp.ckpt_scope, r->sp.ckpt_keep, why,
                                             sizeof why)
                          : -1;
        if (k < 0) {
            fetch_failed(s, r, "checkpoints: %s", why);
            return;
        }
        if (k == 0) {
            r->next_fetch_poll = now + FETCH_POLL_MS;
            return;
        }
        r->ckpt_held = true;
        char dir[2048];
        drv_ckpt_dir(s->o.ckpt, r->sp.ckpt_scope, dir, sizeof dir);
        free(r->sp.ckpt_dir);
        r->sp.ckpt_dir = drv_strdup(dir);
        drv_rlog_note(&r->log, "checkpoint directory ready (scope %s): %s", r->sp.ckpt_scope, dir);
    }
    r->state = DRV_RS_STARTING;
    r->next_start = now;
}

/* Forget the fetch (the record goes away or starts afresh). */
static void drop_fetch(drv_supervisor_t *s, struct replica *r)
{
    if (r->man)
        unpin(s, r);
    drv_manifest_free(r->man);
    r->man = NULL;
    r->fetch_begin = r->next_fetch_poll = r->fetch_ms = 0;
    r->fetch_done = r->fetch_total = 0;
    r->fetch_rate = 0;
    r->art_ready = false;
    if (r->ckpt_held)
        drv_ckpt_release(s->o.ckpt, r->sp.ckpt_scope);
    r->ckpt_held = false;
}

/* --- GPU shares: enforcement (see supervisor.h) ------------------------------- */

/* Record what enforces r's share; returns false (with why) when strict
 * isolation is asked for and the share cannot be enforced. */
static bool check_enforcement(const drv_supervisor_t *s, struct replica *r, char *why, size_t wl)
{
    const drv_rspec_t *sp = &r->sp;
    r->enf_mem[0] = r->enf_cpu[0] = '\0';
    if (!*sp->gpu_uuids)
        return true;   /* CPU-only */
    if (sp->mem_mib <= 0) {
        snprintf(r->enf_mem, sizeof r->enf_mem, "whole-gpu");
        snprintf(r->enf_cpu, sizeof r->enf_cpu, "whole-gpu");
        return true;
    }
    char mem_why[200] = "";
    if (!s->gpushare || !*s->gpushare)
        snprintf(mem_why, sizeof mem_why, "this agent has no libdrover-gpushare.so");
    else if (access(s->gpushare, R_OK) < 0)
        snprintf(mem_why, sizeof mem_why, "%s: %s", s->gpushare, strerror(errno));
    snprintf(r->enf_mem, sizeof r->enf_mem, "%s", mem_why[0] ? "not-enforced" : "enforced");
    snprintf(r->enf_cpu, sizeof r->enf_cpu, "%s", sp->mps_pipe ? "mps" : "time-slicing");
    if (!sp->strict)
        return true;
    if (mem_why[0]) {
        snprintf(why, wl, "strict isolation: its GPU memory share cannot be enforced (%s)",
                 mem_why);
        return false;
    }
    if (!sp->mps_pipe && sp->compute_pct > 0 && sp->compute_pct < 100) {
        snprintf(why, wl, "strict isolation: its compute share of %d %% cannot be enforced: MPS "
                 "does not run on GPU %s (replicas there time-slice)", sp->compute_pct,
                 sp->gpu_uuids);
        return false;
    }
    return true;
}

/* Remove the replica's accounting region: a fresh start counts from zero
 * (a container's is in DATA_DIR/containers/<id>.gpushare: agent/container.h). */
static void remove_region(const drv_supervisor_t *s, const struct replica *r)
{
    char name[4400];
    if (r->sp.mem_mib > 0 &&
        snprintf(name, sizeof name, "%s%s", DRV_GS_REGION_PREFIX, r->sp.id) < (int)sizeof name)
        shm_unlink(name);
    if (r->sp.mem_mib > 0 && r->sp.image &&
        snprintf(name, sizeof name, "%s/containers/%s.gpushare%s%s", s->data_dir, r->sp.id,
                 DRV_GS_REGION_PREFIX, r->sp.id) < (int)sizeof name)
        unlink(name);
}

/* --- isolation (agent/isolate.h) ------------------------------------------------- */

/* The start's cgroups, working directory and user; the model dir (unless
 * it is an artifact's read-only snapshot) and the checkpoint dir become
 * the replica user's. */
static void isolate(drv_supervisor_t *s, struct replica *r)
{
    drv_iso_prepare(s->o.iso, r->sp.id, r->sp.memory_mib, r->sp.cpu_millis, &r->iso);
    if (*r->sp.model_dir && !r->art_ready)
        drv_iso_grant(s->o.iso, r->sp.model_dir, false);
    if (r->sp.ckpt_dir)
        drv_iso_grant(s->o.iso, r->sp.ckpt_dir, true);
    if (r->sp.mps_pipe)
        drv_iso_reach(s->o.iso, r->sp.mps_pipe);   /* GPU shares: its MPS daemon's pipes */
    free(r->sp.home);
    r->sp.home = r->iso.set_user && r->iso.workdir[0] ? drv_strdup(r->iso.workdir) : NULL;
    for (int l = 0; l < DRV_ISO_N; l++) {
        const drv_iso_limit_t *lm = &r->iso.rep.lim[l];
        if (lm->enforced)
            drv_rlog_note(&r->log, "isolation: %s %s%s%s", drv_iso_name(l), lm->value,
                          lm->file[0] ? " in " : "", lm->file);
        else
            drv_rlog_note(&r->log, "isolation: %s not enforced: %s", drv_iso_name(l), lm->reason);
    }
}

/* The process was reaped: its cgroup's OOM kills turn "killed by signal 9"
 * into what happened. */
static void isolation_exit(drv_supervisor_t *s, struct replica *r, char *how, size_t hl)
{
    if (!s->o.iso || r->iso.ndirs == 0)
        return;
    int ooms = drv_iso_exited(s->o.iso, &r->iso);
    if (ooms <= 0)
        return;
    r->oom_kills++;
    const drv_iso_limit_t *m = &r->iso.rep.lim[DRV_ISO_MEMORY];
    char was[128];
    snprintf(was, sizeof was, "%s", how);
    snprintf(how, hl, "killed by the OOM killer (over its memory limit of %s; %s)",
             m->enforced ? m->value : "its cgroup", was);
    drv_warn("replica %s: %s", r->sp.id, how);
}

static void do_start(drv_supervisor_t *s, struct replica *r, int64_t now)
{
    assert(r->pid == 0 && r->desired);
    drv_error_t e = {0};
    char why[300];
    if (drv_rlog_open(&r->log, &e) < 0) {
        schedule_restart(s, r, e.message, now);
        return;
    }
    if (!check_enforcement(s, r, why, sizeof why)) {
        set_failed(r, why);
        return;
    }
    char ctr_dir[4200];
    snprintf(ctr_dir, sizeof ctr_dir, "%s/containers", s->data_dir);
    int port = 0;
    bool adopt = false;
    if (r->sp.image) {   /* containers: a first start adopts a running one on its port */
        if (!s->engine) {
            set_failed(r, r->sp.job ? "the job runs an image and this node has no container engine"
                                : "its model runs an image and this node has no container engine");
            return;
        }
        mkdir(ctr_dir, 0700);
        port = r->restarts == 0 ? drv_ctr_saved_port(ctr_dir, r->sp.id) : 0;
        if (port && port_taken(s, port))
            port = 0;
        adopt = port > 0;
    }
    /* what a fresh start resets; a container that may be adopted still runs with them */
    if (!adopt)
        remove_region(s, r);
    if (!adopt && r->sp.check_port > 0 && !port_free(r->sp.check_port)) {
        snprintf(why, sizeof why, "MASTER_PORT %d is in use on this node", r->sp.check_port);
        set_failed(r, why);   /* the head restarts the gang with another port */
        return;
    }
    if (!adopt && r->sp.ckpt_dir)
        drv_ckpt_clean_dir(r->sp.ckpt_dir);   /* a restart: no half-written checkpoint */
    if (port <= 0)
        port = pick_port(s);
    if (port < 0) {
        snprintf(why, sizeof why, "cannot find a free port: %s", strerror(errno));
        schedule_restart(s, r, why, now);
        return;
    }
    r->sp.mport = 0;
    if (r->sp.metrics_port) {
        int mport = metrics_port(s, ctr_dir, &r->sp, port, adopt);
        if (mport < 0) {
            snprintf(why, sizeof why, "cannot find a free metrics port: %s", strerror(errno));
            schedule_restart(s, r, why, now);
            return;
        }
        r->sp.mport = mport;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(why, sizeof why, "cannot create a pipe: %s", strerror(errno));
        schedule_restart(s, r, why, now);
        return;
    }
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    char cmd[512];
    size_t off = 0;
    cmd[0] = '\0';
    for (size_t i = 0; i < r->sp.argc && off + 1 < sizeof cmd; i++)
        off += (size_t)snprintf(cmd + off, sizeof cmd - off, "%s%s", i ? " " : "", r->sp.argv[i]);
    char **cargv = NULL;
    if (r->sp.image) {
        drv_ctr_run_t cr = {.engine = s->engine, .node = s->node, .state_dir = ctr_dir,
                            .grace_ms = s->o.stop_grace_ms, .cdi_dirs = getenv("DROVER_CDI_DIRS"),
                            .gpushare = s->gpushare,
                            .adopt = adopt};
        if (!(cargv = drv_ctr_argv(&cr, &r->sp, port, why, sizeof why))) {
            close(p[0]);
            close(p[1]);
            set_failed(r, why);
            return;
        }
        drv_rlog_note(&r->log, "starting on port %d: %s image %s %s", port, s->engine,
                      r->sp.image, cmd);
    } else {
        drv_rlog_note(&r->log, "starting on port %d: %s", port, cmd);
    }
    if (r->sp.mport > 0)
        drv_rlog_note(&r->log, "metrics on port %d (METRICS_PORT)", r->sp.mport);
    bool iso = s->o.iso && !r->sp.image;   /* a container's engine gives it its cgroup */
    if (iso)
        isolate(s, r);
    char **envp = drv_rspec_env(s->gpushare, &r->sp, port);
    if (r->sp.image)
        drv_ctr_expand_env(&r->sp, envp);   /* $(PORT) in a preset's environment */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        drv_rspec_exec(cargv ? cargv : r->sp.argv, envp, p[1], parent, iso ? &r->iso : NULL);
    int fork_errno = errno;
    close(p[1]);
    drv_iso_forked(&r->iso);
    drv_rspec_strv_free(envp);
    drv_rspec_strv_free(cargv);
    if (pid < 0) {
        if (iso)
            drv_iso_exited(s->o.iso, &r->iso);
        close(p[0]);
        snprintf(why, sizeof why, "fork: %s", strerror(fork_errno));
        schedule_restart(s, r, why, now);
        return;
    }
    r->pid = pid;
    r->out_fd = p[0];
#ifdef SYS_pidfd_open
    r->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);   /* -1 without pidfd: we tick */
#else
    r->pidfd = -1;
#endif
    r->port = port;
    r->state = DRV_RS_STARTING;
    r->started_at_ms = drv_now_ms();
    r->ready_at_ms = 0;
    r->ready_mono = 0;
    r->deadline = now + (int64_t)r->sp.startup_timeout_s * 1000;
    r->next_health = now + s->o.health_interval_ms;
    r->health_fails = 0;
    r->kill_why = KILL_NONE;
    r->sigkilled = false;
    r->ctr_started = !r->sp.image;
    r->pull_blobs = 0;
    drv_info("replica %s: started pid %d on port %d", r->sp.id, (int)pid, port);
}

/* containers: the script said it pulls (state pulling, the layers so far
 * in the reason) or starts the container (starting; the startup deadline
 * counts from now). */
static void container_phase(drv_supervisor_t *s, struct replica *r, size_t k)
{
    int phase = drv_ctr_phase(s->iobuf, k, &r->pull_blobs);
    if (r->pid == 0 || r->kill_why != KILL_NONE || !r->desired)
        return;
    if (phase & DRV_CTR_PHASE_STARTED) {
        r->ctr_started = true;
        if (r->state == DRV_RS_PULLING) {
            r->state = DRV_RS_STARTING;
            r->reason[0] = '\0';
        }
        int64_t now = drv_mono_ms();
        r->deadline = now + (int64_t)r->sp.startup_timeout_s * 1000;
        r->next_health = now + s->o.health_interval_ms;
    } else if ((phase & DRV_CTR_PHASE_PULLING) || r->state == DRV_RS_PULLING) {
        if (r->state != DRV_RS_PULLING)
            drv_info("replica %s: pulling image %s", r->sp.id, r->sp.image);
        r->state = DRV_RS_PULLING;
        snprintf(r->reason, sizeof r->reason, "pulling image %s: %d layer(s) copied", r->sp.image,
                 r->pull_blobs);
    }
}

void drv_sup_drain(drv_supervisor_t *s, struct replica *r)
{
    size_t total = 0;
    while (r->out_fd >= 0 && total < READ_BUDGET) {
        ssize_t k = read(r->out_fd, s->iobuf, sizeof s->iobuf);
        if (k > 0) {
            drv_rlog_write(&r->log, s->iobuf, (size_t)k);
            total += (size_t)k;
            if (r->sp.image && !r->ctr_started)
                container_phase(s, r, (size_t)k);
        } else if (k < 0 && errno == EINTR) {
            continue;
        } else {
            if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                close(r->out_fd);   /* EOF: every writer is gone */
                r->out_fd = -1;
            }
            break;
        }
    }
}

static void describe_status(int wst, char *buf, size_t len)
{
    if (WIFEXITED(wst))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(wst));
    else if (WIFSIGNALED(wst))
        snprintf(buf, len, "killed by signal %d", WTERMSIG(wst));
    else
        snprintf(buf, len, "ended with wait status %d", wst);
}

void drv_sup_check_exit(drv_supervisor_t *s, struct replica *r, int64_t now)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int rc = waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT);
    if (rc == 0 && si.si_pid == 0)
        return;   /* still running */
    /* The leader is a zombie (its pid, hence the group id, cannot be reused
     * yet): kill what is left of its group, then reap it. */
    kill(-r->pid, SIGKILL);
    char how[128], ctr_why[256] = "";
    bool ctr_fatal = false;
    if (rc < 0) {
        snprintf(how, sizeof how, "exited (status lost: %s)", strerror(errno));
    } else {
        int wst = 0;
        while (waitpid(r->pid, &wst, 0) < 0 && errno == EINTR)
            ;
        describe_status(wst, how, sizeof how);
        if (WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL)
            isolation_exit(s, r, how, sizeof how);
        if (r->sp.image && WIFEXITED(wst))
            ctr_fatal = drv_ctr_exit_fatal(&r->sp, WEXITSTATUS(wst), ctr_why, sizeof ctr_why);
    }
    if (s->o.iso && r->iso.ndirs)
        drv_iso_exited(s->o.iso, &r->iso);   /* not an OOM kill: remove the cgroups */
    if (r->sp.image && (r->kill_why == KILL_FAILED || !r->desired) && s->engine)
        drv_ctr_remove(s->engine, r->sp.id);   /* a stop whose script may not have finished */
    drv_sup_drain(s, r);
    if (r->out_fd >= 0) {
        close(r->out_fd);
        r->out_fd = -1;
    }
    if (r->pidfd >= 0) {
        close(r->pidfd);
        r->pidfd = -1;
    }
    stop_check(s, r);
    drv_rlog_note(&r->log, "process %d %s", (int)r->pid, how);
    snprintf(r->last_exit, sizeof r->last_exit, "%s", how);
    r->pid = 0;
    enum kill_why why = r->kill_why;
    r->kill_why = KILL_NONE;
    r->sigkilled = false;
    if (!r->desired || r->state == DRV_RS_FAILED)
        return;   /* terminating (tick removes it), or killed after failing */
    if (ctr_fatal) {
        set_failed(r, ctr_why);
        return;
    }
    if (r->sp.job) {   /* a job's worker runs once */
        if (strcmp(how, "exited with status 0") == 0) {
            r->state = DRV_RS_SUCCEEDED;
            r->reason[0] = '\0';
            drv_info("worker %s of job %s: succeeded", r->sp.id, r->sp.job);
        } else {
            set_failed(r, how);
        }
        return;
    }
    char cause[300];
    snprintf(cause, sizeof cause, "%s", why == KILL_UNHEALTHY ? r->reason : ctr_why[0] ? ctr_why : how);
    schedule_restart(s, r, cause, now);
}

static void become_ready(drv_supervisor_t *s, struct replica *r, int64_t now)
{
    r->state = DRV_RS_READY;
    r->ready_mono = now;
    r->ready_at_ms = drv_now_ms();
    r->health_fails = 0;
    r->reason[0] = '\0';
    r->next_health = now + s->o.health_ready_interval_ms;
    drv_rlog_note(&r->log, "ready after %lld ms",
                  (long long)(r->ready_at_ms - r->started_at_ms));
    drv_info("replica %s: ready on port %d", r->sp.id, r->port);
}

static void start_check(drv_supervisor_t *s, struct replica *r, int64_t now)
{
    assert(!r->checking && r->pid > 0);
    char why[300];
    if (drv_probe_start(&r->probe, r->port, r->sp.health_path, s->o.health_timeout_ms, now, why,
                        sizeof why) == 0)
        r->checking = true;
    else
        drv_sup_finish_check(s, r, 0, why, now);   /* failed at once: a failed check */
}

void drv_sup_finish_check(drv_supervisor_t *s, struct replica *r, long code, const char *detail,
                          int64_t now)
{
    stop_check(s, r);
    if (r->pid == 0 || r->kill_why != KILL_NONE || !r->desired)
        return;
    bool ok = code >= 200 && code < 300;
    if (r->state == DRV_RS_STARTING) {
        if (ok)
            become_ready(s, r, now);
        else
            r->next_health = now + s->o.health_interval_ms;
    } else if (r->state == DRV_RS_READY) {
        if (ok) {
            r->health_fails = 0;
            r->next_health = now + s->o.health_ready_interval_ms;
            return;
        }
        if (++r->health_fails < HEALTH_FAILS_TO_RESTART) {
            /* re-check at the ready pace, not the startup one: a replica
             * busy with long predictions may answer /health late for a few
             * seconds, and killing it would fail the requests it serves */
            r->next_health = now + s->o.health_ready_interval_ms;
            return;
        }
        snprintf(r->reason, sizeof r->reason, "health check failed %d times in a row (last: %s)",
                 r->health_fails, detail);
        drv_warn("replica %s: %s; restarting", r->sp.id, r->reason);
        r->state = DRV_RS_BACKOFF;
        begin_kill(s, r, KILL_UNHEALTHY, now);
    }
}

void drv_sup_fail_worker(drv_supervisor_t *s, struct replica *r, const char *why, int grace_ms,
                         int64_t now)
{
    if (!r->sp.job || !r->desired || r->state == DRV_RS_FAILED ||
        r->state == DRV_RS_SUCCEEDED)
        return;
    set_failed(r, why);
    if (r->pid == 0)
        return;
    begin_kill(s, r, KILL_FAILED, now);
    if (grace_ms >= 0 && r->kill_at > now + grace_ms) {
        r->kill_at = now + grace_ms;
        drv_rlog_note(&r->log, "(this stop's grace: %d ms)", grace_ms);
    }
}

/* --- records -------------------------------------------------------------------- */

struct replica *drv_sup_replica_new(const drv_supervisor_t *s, const drv_replica_spec_t *sp)
{
    struct replica *r = calloc(1, sizeof *r);
    if (!r)
        abort();
    drv_rspec_copy(&r->sp, sp);
    r->desired = true;
    r->state = r->sp.art_manifest || r->sp.ckpt_scope ? DRV_RS_FETCHING : DRV_RS_STARTING;
    r->pidfd = r->out_fd = -1;
    drv_probe_init(&r->probe);
    drv_sup_metrics_init(r);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/replicas/%s", s->data_dir, r->sp.id);
    drv_rlog_init(&r->log, dir, s->o.log_max_bytes, s->o.log_files);
    return r;
}

static void replica_free(drv_supervisor_t *s, struct replica *r, bool remove_logs)
{
    assert(r->pid == 0);
    stop_check(s, r);
    drv_sup_metrics_cancel(r);
    drop_fetch(s, r);
    drv_rlog_close(&r->log);
    if (remove_logs && r->sp.job) {   /* a job's worker: its log outlives it, bounded */
        char kept[4400];
        snprintf(kept, sizeof kept, "%s/%s/%s", s->data_dir, DRV_SUP_JOB_LOGS, r->sp.id);
        if (drv_rlog_retire(r->log.dir, kept, DRV_SUP_JOB_LOG_BYTES) < 0)
            drv_warn("worker %s: cannot keep its log in %s: %s", r->sp.id, kept,
                     strerror(errno));
        snprintf(kept, sizeof kept, "%s/%s", s->data_dir, DRV_SUP_JOB_LOGS);
        drv_rlog_prune(kept, DRV_SUP_JOB_LOGS_KEPT);
    } else if (remove_logs) {
        drv_rlog_remove(r->log.dir);
    }
    if (remove_logs) {
        remove_region(s, r);
        if (s->o.iso)
            drv_iso_forget(s->o.iso, r->sp.id);
        if (r->sp.image && r->sp.mem_mib > 0) {   /* the container's region directory */
            char dir[4300];
            snprintf(dir, sizeof dir, "%s/containers/%s.gpushare", s->data_dir, r->sp.id);
            rmdir(dir);
        }
    }
    drv_rspec_free(&r->sp);
    drv_rspec_drop(&r->respec);
    free(r);
}

/* The id was listed again while terminating: start over with the new spec. */
static void restart_fresh(drv_supervisor_t *s, struct replica *r)
{
    drop_fetch(s, r);
    drv_rspec_free(&r->sp);
    r->sp = *r->respec;
    free(r->respec);
    r->respec = NULL;
    r->desired = true;
    r->state = r->sp.art_manifest || r->sp.ckpt_scope ? DRV_RS_FETCHING : DRV_RS_STARTING;
    r->restarts = r->backoff_step = r->backoff_ms = r->health_fails = 0;
    r->next_start = 0;
    r->started_at_ms = r->ready_at_ms = r->ready_mono = 0;
    r->last_exit[0] = r->reason[0] = r->log_tail[0] = '\0';
    drv_rlog_note(&r->log, "listed again: starting afresh");
}

/* A replica no longer listed that still runs on one of r's GPUs (its
 * process has not exited yet: it drains), and that GPU in uuid; NULL when
 * none. */
static const struct replica *gpu_holder(const drv_supervisor_t *s, const struct replica *r,
                                        char *uuid, size_t ul)
{
    for (size_t i = 0; i < s->n; i++) {
        const struct replica *q = s->r[i];
        if (q == r || q->desired || q->pid <= 0 || !*q->sp.gpu_uuids)
            continue;
        for (const char *p = r->sp.gpu_uuids; *p;) {
            size_t n = strcspn(p, ",");
            if (drv_list_has(q->sp.gpu_uuids, p, n)) {
                snprintf(uuid, ul, "%.*s", (int)n, p);
                return q;
            }
            p += n + (p[n] == ',');
        }
    }
    return NULL;
}

/* Before a start: wait (true; state waiting) while a terminating replica
 * holds one of its GPUs (supervisor.h, "starting -> waiting -> starting");
 * the holder's exit wakes the thread (its pidfd, or the reap tick). */
static bool gpu_busy(drv_supervisor_t *s, struct replica *r)
{
    char uuid[128];
    const struct replica *q = *r->sp.gpu_uuids ? gpu_holder(s, r, uuid, sizeof uuid) : NULL;
    if (!q) {
        if (r->state == DRV_RS_WAITING) {
            r->state = DRV_RS_STARTING;
            r->reason[0] = '\0';
        }
        return false;
    }
    if (r->state != DRV_RS_WAITING) {
        drv_info("replica %s: waiting for GPU %s: replica %s is stopping", r->sp.id, uuid,
                 q->sp.id);
        drv_rlog_note(&r->log, "waiting for GPU %s: replica %s is stopping", uuid, q->sp.id);
    }
    r->state = DRV_RS_WAITING;
    snprintf(r->reason, sizeof r->reason, "waiting for GPU %s: replica %s is stopping", uuid,
             q->sp.id);
    return true;
}

bool drv_sup_tick(drv_supervisor_t *s, struct replica *r, int64_t now)
{
    if (!r->desired) {
        if (r->pid > 0) {
            if (r->kill_why != KILL_STOP)
                begin_kill(s, r, KILL_STOP, now);
        } else if (r->respec) {
            restart_fresh(s, r);
        } else {
            drv_info("replica %s: stopped", r->sp.id);
            replica_free(s, r, !s->quit);
            return true;
        }
    }
    if (r->pid > 0 && r->kill_why != KILL_NONE) {
        if (!r->sigkilled && now >= r->kill_at) {
            signal_group(r, SIGKILL);
            r->sigkilled = true;
            drv_rlog_note(&r->log, "grace period over: SIGKILL to process group %d",
                          (int)r->pid);
        }
        return false;
    }
    bool has_health = r->sp.health_path[0] != '\0';
    if (r->state == DRV_RS_FETCHING && now >= r->next_fetch_poll)
        step_fetch(s, r, now);
    switch (r->state) {
    case DRV_RS_STARTING:
    case DRV_RS_BACKOFF:
    case DRV_RS_WAITING:
        if (r->pid == 0 && now >= r->next_start && !gpu_busy(s, r))
            do_start(s, r, now);
        if (r->pid == 0 || r->state != DRV_RS_STARTING)
            break;
        if (now >= r->deadline) {
            char why[128];
            snprintf(why, sizeof why, "never became healthy within %d s",
                     r->sp.startup_timeout_s);
            set_failed(r, why);
            begin_kill(s, r, KILL_FAILED, now);
        } else if (!has_health) {
            become_ready(s, r, now);
        } else if (!r->checking && now >= r->next_health) {
            start_check(s, r, now);
        }
        break;
    case DRV_RS_READY:
        if (r->pid > 0 && has_health && !r->checking && now >= r->next_health)
            start_check(s, r, now);
        break;
    default:
        break;
    }
    return false;
}

int64_t drv_sup_next_due(const struct replica *r, int64_t now, int64_t next)
{
#define AT(t) do { if ((t) < next) next = (t); } while (0)
    if (r->pid > 0 && r->pidfd < 0)
        AT(now + REAP_TICK_MS);
    if (r->checking)
        AT(drv_probe_deadline(&r->probe));
    if (r->pid > 0 && r->kill_why != KILL_NONE) {
        if (!r->sigkilled)
            AT(r->kill_at);
        return next;
    }
    if (!r->desired)
        return next;
    if (r->pid == 0 && (r->state == DRV_RS_STARTING || r->state == DRV_RS_BACKOFF))
        AT(r->next_start);   /* waiting (for a GPU): the holder's exit wakes the thread */
    if (r->state == DRV_RS_FETCHING)
        AT(r->next_fetch_poll);
    if (r->pid > 0 && r->state == DRV_RS_STARTING)
        AT(r->deadline);
    if (r->pid > 0 && !r->checking && r->sp.health_path[0] &&
        (r->state == DRV_RS_STARTING || r->state == DRV_RS_READY))
        AT(r->next_health);
#undef AT
    return next;
}
