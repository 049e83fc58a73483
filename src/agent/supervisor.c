/* supervisor.c — the agent's replica supervisor (see supervisor.h for the
 * life of a replica, the environment contract and the orphan policy).
 *
 * One thread (run()) owns every process: it forks, reaps, signals, drains
 * the output pipes into the logs (replica_log.c) and runs the health checks
 * (health.c, one non-blocking probe per replica). It sleeps in poll() on
 * the output pipes, each child's pidfd (exit notification), the probes'
 * sockets and an eventfd, with a timeout set by the next timer (start,
 * health check and its deadline, startup deadline, kill deadline); apply()
 * and destroy() wake it through the eventfd. Where pidfd_open is unavailable it also ticks every
 * 100 ms while a child runs. Nothing spins: idle replicas cost one health
 * check every health_ready_interval_ms.
 *
 * Locking: s->mu guards the replica table and every field of it. The
 * thread holds it while it works and drops it only to sleep; apply(),
 * status() and the log functions take it briefly. apply() never touches a
 * process: it records the desired set (new records, `desired` flags) and
 * wakes the thread, which alone creates and removes processes and frees
 * records (a record may have a health check in flight).
 *
 * The spec of a replica, its environment and the exec in the child are
 * replica_spec.c.
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
#define _GNU_SOURCE
#include "agent/supervisor.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/health.h"
#include "agent/replica_log.h"
#include "agent/replica_spec.h"
#include "common/log.h"
#include "common/util.h"
#include "gpushare/region.h"


#define HEALTH_FAILS_TO_RESTART 3
#define BACKOFF_RESET_MS 60000   /* ready this long: the next crash backs off from the start */
#define TAIL_LINES 20
#define REAP_TICK_MS 100         /* only without pidfd */
#define READ_BUDGET (256 * 1024) /* per replica per wake-up, for fairness */
#define IDLE_WAIT_MS 60000

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
};

struct drv_supervisor {
    drv_supervisor_opts_t o;     /* defaults filled; strings point at the copies below */
    char *data_dir, *host, *gpushare;
    pthread_mutex_t mu;
    pthread_t thread;
    bool quit;
    int wakefd;                  /* eventfd: apply() and destroy() wake the thread */
    struct replica **r;          /* in order of first apply */
    size_t n, cap;
    struct pollfd *fds;          /* thread-owned scratch */
    size_t fds_cap;
    char iobuf[65536];           /* thread-owned scratch */
};

const char *drv_rs_state_name(drv_rs_state_t s)
{
    static const char *names[] = {"starting", "ready", "backoff", "failed", "terminating"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown";
}

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
        if (s->r[i]->pid > 0 && s->r[i]->port == port)
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

/* Remove the replica's accounting region: a fresh start counts from zero. */
static void remove_region(const struct replica *r)
{
    char name[200];
    if (r->sp.mem_mib > 0 &&
        snprintf(name, sizeof name, "%s%s", DRV_GS_REGION_PREFIX, r->sp.id) < (int)sizeof name)
        shm_unlink(name);
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
    remove_region(r);
    int port = pick_port(s);
    if (port < 0) {
        snprintf(why, sizeof why, "cannot find a free port: %s", strerror(errno));
        schedule_restart(s, r, why, now);
        return;
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
    drv_rlog_note(&r->log, "starting on port %d: %s", port, cmd);
    char **envp = drv_rspec_env(s->gpushare, &r->sp, port);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        drv_rspec_exec(r->sp.argv, envp, p[1], parent);
    int fork_errno = errno;
    close(p[1]);
    drv_rspec_strv_free(envp);
    if (pid < 0) {
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
    drv_info("replica %s: started pid %d on port %d", r->sp.id, (int)pid, port);
}

static void drain(drv_supervisor_t *s, struct replica *r)
{
    size_t total = 0;
    while (r->out_fd >= 0 && total < READ_BUDGET) {
        ssize_t k = read(r->out_fd, s->iobuf, sizeof s->iobuf);
        if (k > 0) {
            drv_rlog_write(&r->log, s->iobuf, (size_t)k);
            total += (size_t)k;
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

/* Reap r's process if it has exited; then handle what that means. */
static void check_exit(drv_supervisor_t *s, struct replica *r, int64_t now)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int rc = waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT);
    if (rc == 0 && si.si_pid == 0)
        return;   /* still running */
    /* The leader is a zombie (its pid, hence the group id, cannot be reused
     * yet): kill what is left of its group, then reap it. */
    kill(-r->pid, SIGKILL);
    char how[128];
    if (rc < 0) {
        snprintf(how, sizeof how, "exited (status lost: %s)", strerror(errno));
    } else {
        int wst = 0;
        while (waitpid(r->pid, &wst, 0) < 0 && errno == EINTR)
            ;
        describe_status(wst, how, sizeof how);
    }
    drain(s, r);
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
    char cause[300];
    snprintf(cause, sizeof cause, "%s", why == KILL_UNHEALTHY ? r->reason : how);
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

static void finish_check(drv_supervisor_t *s, struct replica *r, long code, const char *detail,
                         int64_t now);

static void start_check(drv_supervisor_t *s, struct replica *r, int64_t now)
{
    assert(!r->checking && r->pid > 0);
    char why[300];
    if (drv_probe_start(&r->probe, r->port, r->sp.health_path, s->o.health_timeout_ms, now, why,
                        sizeof why) == 0)
        r->checking = true;
    else
        finish_check(s, r, 0, why, now);   /* failed at once: a failed check */
}

/* A check's result: the HTTP status (0: no answer) and what happened. */
static void finish_check(drv_supervisor_t *s, struct replica *r, long code, const char *detail,
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

/* --- records -------------------------------------------------------------------- */

static struct replica *replica_new(drv_supervisor_t *s, const drv_replica_spec_t *sp)
{
    struct replica *r = calloc(1, sizeof *r);
    if (!r)
        abort();
    drv_rspec_copy(&r->sp, sp);
    r->desired = true;
    r->state = DRV_RS_STARTING;
    r->pidfd = r->out_fd = -1;
    drv_probe_init(&r->probe);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/replicas/%s", s->data_dir, r->sp.id);
    drv_rlog_init(&r->log, dir, s->o.log_max_bytes, s->o.log_files);
    return r;
}

static void replica_free(drv_supervisor_t *s, struct replica *r, bool remove_logs)
{
    assert(r->pid == 0);
    stop_check(s, r);
    drv_rlog_close(&r->log);
    if (remove_logs) {
        drv_rlog_remove(r->log.dir);
        remove_region(r);
    }
    drv_rspec_free(&r->sp);
    drv_rspec_drop(&r->respec);
    free(r);
}

/* The id was listed again while terminating: start over with the new spec. */
static void restart_fresh(struct replica *r)
{
    drv_rspec_free(&r->sp);
    r->sp = *r->respec;
    free(r->respec);
    r->respec = NULL;
    r->desired = true;
    r->state = DRV_RS_STARTING;
    r->restarts = r->backoff_step = r->backoff_ms = r->health_fails = 0;
    r->next_start = 0;
    r->started_at_ms = r->ready_at_ms = r->ready_mono = 0;
    r->last_exit[0] = r->reason[0] = r->log_tail[0] = '\0';
    drv_rlog_note(&r->log, "listed again: starting afresh");
}

static struct replica *find(const drv_supervisor_t *s, const char *id)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->r[i]->sp.id, id) == 0)
            return s->r[i];
    return NULL;
}

/* Timers of one record; returns true when it was removed. */
static bool tick(drv_supervisor_t *s, size_t idx, int64_t now)
{
    struct replica *r = s->r[idx];
    if (!r->desired) {
        if (r->pid > 0) {
            if (r->kill_why != KILL_STOP)
                begin_kill(s, r, KILL_STOP, now);
        } else if (r->respec) {
            restart_fresh(r);
        } else {
            drv_info("replica %s: stopped", r->sp.id);
            replica_free(s, r, !s->quit);
            memmove(&s->r[idx], &s->r[idx + 1], (s->n - idx - 1) * sizeof *s->r);
            s->n--;
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
    switch (r->state) {
    case DRV_RS_STARTING:
    case DRV_RS_BACKOFF:
        if (r->pid == 0 && now >= r->next_start)
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

/* When the thread must look again, as a poll timeout from now. */
static int next_timeout(const drv_supervisor_t *s, int64_t now)
{
    int64_t next = now + IDLE_WAIT_MS;
#define AT(t) do { if ((t) < next) next = (t); } while (0)
    for (size_t i = 0; i < s->n; i++) {
        const struct replica *r = s->r[i];
        if (r->pid > 0 && r->pidfd < 0)
            AT(now + REAP_TICK_MS);
        if (r->checking)
            AT(drv_probe_deadline(&r->probe));
        if (r->pid > 0 && r->kill_why != KILL_NONE) {
            if (!r->sigkilled)
                AT(r->kill_at);
            continue;
        }
        if (!r->desired)
            continue;
        if (r->pid == 0 && (r->state == DRV_RS_STARTING || r->state == DRV_RS_BACKOFF))
            AT(r->next_start);
        if (r->pid > 0 && r->state == DRV_RS_STARTING)
            AT(r->deadline);
        if (r->pid > 0 && !r->checking && r->sp.health_path[0] &&
            (r->state == DRV_RS_STARTING || r->state == DRV_RS_READY))
            AT(r->next_health);
    }
#undef AT
    return next <= now ? 0 : (int)(next - now);
}

static void service(drv_supervisor_t *s, int64_t now)
{
    if (s->quit)
        for (size_t i = 0; i < s->n; i++) {
            s->r[i]->desired = false;
            s->r[i]->state = DRV_RS_STOPPING;
            drv_rspec_drop(&s->r[i]->respec);
        }
    for (size_t i = 0; i < s->n; i++)
        if (s->r[i]->out_fd >= 0)
            drain(s, s->r[i]);
    for (size_t i = 0; i < s->n; i++)
        if (s->r[i]->pid > 0)
            check_exit(s, s->r[i], now);
    for (size_t i = 0; i < s->n; i++) {
        struct replica *r = s->r[i];
        long code;
        char why[300];
        if (r->checking && drv_probe_step(&r->probe, now, &code, why, sizeof why) == 1)
            finish_check(s, r, code, why, now);
    }
    for (size_t i = 0; i < s->n;)
        if (!tick(s, i, now))
            i++;
}

static void *run(void *arg)
{
    drv_supervisor_t *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int64_t now = drv_mono_ms();
        service(s, now);
        if (s->quit && s->n == 0)
            break;
        int timeout = next_timeout(s, drv_mono_ms());
        size_t nf = 0;
        if (s->fds_cap < 3 * s->n + 1) {
            s->fds_cap = 3 * s->n + 16;
            free(s->fds);
            s->fds = drv_xmalloc(s->fds_cap * sizeof *s->fds);
        }
        s->fds[nf++] = (struct pollfd){.fd = s->wakefd, .events = POLLIN};
        for (size_t i = 0; i < s->n; i++) {
            const struct replica *r = s->r[i];
            if (r->out_fd >= 0)
                s->fds[nf++] = (struct pollfd){.fd = r->out_fd, .events = POLLIN};
            if (r->pidfd >= 0)
                s->fds[nf++] = (struct pollfd){.fd = r->pidfd, .events = POLLIN};
            if (r->checking)
                s->fds[nf++] = (struct pollfd){.fd = drv_probe_fd(&r->probe),
                                               .events = drv_probe_events(&r->probe)};
        }
        pthread_mutex_unlock(&s->mu);
        /* Only this thread closes these fds, so they stay valid while unlocked. */
        if (poll(s->fds, nf, timeout) > 0 && s->fds[0].revents) {
            uint64_t v;
            while (read(s->wakefd, &v, sizeof v) < 0 && errno == EINTR)
                ;
        }
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* --- public -------------------------------------------------------------------- */

static void wake(drv_supervisor_t *s)
{
    uint64_t one = 1;
    while (write(s->wakefd, &one, sizeof one) < 0 && errno == EINTR)
        ;
}

drv_supervisor_t *drv_supervisor_create(const drv_supervisor_opts_t *o, drv_error_t *err)
{
    assert(o);
    if (!o->data_dir || !*o->data_dir) {
        drv_err_invalid(err, "data_dir", "supervisor: data_dir is required");
        return NULL;
    }
    if (o->stop_grace_ms < 0 || o->log_max_bytes < 0 || o->log_files < 0 ||
        o->backoff_initial_ms < 0 || o->backoff_max_ms < 0 || o->max_restarts_before_failed < 0 ||
        o->health_interval_ms < 0 || o->health_ready_interval_ms < 0 || o->health_timeout_ms < 0) {
        drv_err_invalid(err, "", "supervisor: negative option");
        return NULL;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/replicas", o->data_dir);
    if (drv_rlog_mkdirs(dir) < 0) {
        drv_err_internal(err, "cannot create %s: %s", dir, strerror(errno));
        return NULL;
    }
    drv_supervisor_t *s = calloc(1, sizeof *s);
    if (!s)
        abort();
    s->o = *o;
    s->data_dir = drv_strdup(o->data_dir);
    s->host = drv_strdup(o->advertise_host && *o->advertise_host ? o->advertise_host : "127.0.0.1");
    s->gpushare = o->gpushare_lib ? drv_strdup(o->gpushare_lib) : NULL;
    s->o.data_dir = s->data_dir;
    s->o.advertise_host = s->host;
    s->o.gpushare_lib = s->gpushare;
#define DEF(f, v) if (!s->o.f) s->o.f = (v)
    DEF(stop_grace_ms, 10000);
    DEF(log_max_bytes, 10 << 20);
    DEF(log_files, 3);
    DEF(backoff_initial_ms, 1000);
    DEF(backoff_max_ms, 60000);
    DEF(health_interval_ms, 500);
    DEF(health_ready_interval_ms, 5000);
    DEF(health_timeout_ms, 1000);
#undef DEF
    if (s->o.backoff_max_ms < s->o.backoff_initial_ms)
        s->o.backoff_max_ms = s->o.backoff_initial_ms;
    pthread_mutex_init(&s->mu, NULL);
    s->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->wakefd < 0) {
        drv_err_internal(err, "supervisor: eventfd: %s", strerror(errno));
        goto error;
    }
    /* The thread blocks every signal: the agent's signals go to its other
     * threads, and children start from a known mask (reset before exec). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, run, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        drv_err_internal(err, "supervisor: cannot start its thread: %s", strerror(rc));
        goto error;
    }
    return s;
error:
    if (s->wakefd >= 0)
        close(s->wakefd);
    pthread_mutex_destroy(&s->mu);
    free(s->data_dir);
    free(s->host);
    free(s->gpushare);
    free(s);
    return NULL;
}

void drv_supervisor_destroy(drv_supervisor_t *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->quit = true;
    pthread_mutex_unlock(&s->mu);
    wake(s);
    pthread_join(s->thread, NULL);
    assert(s->n == 0);
    close(s->wakefd);
    pthread_mutex_destroy(&s->mu);
    free(s->r);
    free(s->fds);
    free(s->data_dir);
    free(s->host);
    free(s->gpushare);
    free(s);
}

int drv_supervisor_apply(drv_supervisor_t *s, const drv_replica_spec_t *specs, size_t n,
                         drv_error_t *err)
{
    assert(s && (specs || n == 0));
    for (size_t i = 0; i < n; i++) {
        if (drv_rspec_check(&specs[i], i, err) < 0)
            return -1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(specs[i].id, specs[j].id) == 0)
                return drv_err_invalid(err, "id", "replica id \"%s\" listed twice", specs[i].id);
    }
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n; i++) {
        struct replica *r = s->r[i];
        const drv_replica_spec_t *sp = NULL;
        for (size_t j = 0; j < n && !sp; j++)
            if (strcmp(specs[j].id, r->sp.id) == 0)
                sp = &specs[j];
        drv_rspec_drop(&r->respec);   /* superseded by this apply either way */
        if (sp && !r->desired && !s->quit) {
            r->respec = drv_xmalloc(sizeof *r->respec);
            drv_rspec_copy(r->respec, sp);
        } else if (!sp && r->desired) {
            r->desired = false;
            r->state = DRV_RS_STOPPING;
        }
    }
    for (size_t j = 0; j < n; j++) {
        if (find(s, specs[j].id))
            continue;
        if (s->n == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 16;
            struct replica **nr = realloc(s->r, s->cap * sizeof *nr);
            if (!nr)
                abort();
            s->r = nr;
        }
        s->r[s->n++] = replica_new(s, &specs[j]);
    }
    pthread_mutex_unlock(&s->mu);
    wake(s);
    return 0;
}

size_t drv_supervisor_status(drv_supervisor_t *s, drv_replica_status_t **out)
{
    assert(s && out);
    pthread_mutex_lock(&s->mu);
    size_t n = s->n;
    *out = n ? calloc(n, sizeof **out) : NULL;
    if (n && !*out)
        abort();
    for (size_t i = 0; i < n; i++) {
        const struct replica *r = s->r[i];
        drv_replica_status_t *st = &(*out)[i];
        snprintf(st->id, sizeof st->id, "%s", r->sp.id);
        snprintf(st->deployment, sizeof st->deployment, "%s", r->sp.deployment);
        st->state = r->state;
        st->pid = (int)r->pid;
        st->port = r->port;
        if (r->port > 0)
            snprintf(st->endpoint, sizeof st->endpoint, strchr(s->host, ':') ? "http://[%s]:%d"
                                                                             : "http://%s:%d",
                     s->host, r->port);
        st->restarts = r->restarts;
        snprintf(st->last_exit, sizeof st->last_exit, "%s", r->last_exit);
        snprintf(st->reason, sizeof st->reason, "%s", r->reason);
        snprintf(st->log_tail, sizeof st->log_tail, "%s", r->log_tail);
        st->started_at_ms = r->started_at_ms;
        st->ready_at_ms = r->ready_at_ms;
        st->backoff_ms = r->backoff_ms;
        snprintf(st->enforce_memory, sizeof st->enforce_memory, "%s", r->enf_mem);
        snprintf(st->enforce_compute, sizeof st->enforce_compute, "%s", r->enf_cpu);
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

int drv_supervisor_log_path(drv_supervisor_t *s, const char *id, char *buf, size_t len)
{
    assert(s && buf && len > 0);
    if (!drv_rspec_id_ok(id))
        return -1;
    if (snprintf(buf, len, "%s/replicas/%s/%s", s->data_dir, id, DRV_RLOG_NAME) >= (int)len)
        return -1;
    pthread_mutex_lock(&s->mu);
    bool known = find(s, id) != NULL;
    pthread_mutex_unlock(&s->mu);
    return known || access(buf, F_OK) == 0 ? 0 : -1;
}

ssize_t drv_supervisor_log_read(drv_supervisor_t *s, const char *id, int64_t offset, void *buf,
                                size_t max, int64_t *next_offset, drv_error_t *err)
{
    char path[4400];
    if (drv_supervisor_log_path(s, id, path, sizeof path) < 0) {
        drv_err_not_found(err, "no log for replica \"%s\"", id ? id : "");
        return -1;
    }
    ssize_t n = drv_rlog_read(path, offset, buf, max, next_offset);
    if (n < 0) {
        if (errno == ENOENT) {   /* known but not started yet */
            if (next_offset)
                *next_offset = 0;
            return 0;
        }
        drv_err_internal(err, "reading %s: %s", path, strerror(errno));
    }
    return n;
}
