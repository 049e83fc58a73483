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
 * This file is the supervision loop, the replica table and the public
 * functions; one replica's life (start, exit, stop, back-off, health
 * checks, its timers) is replica_proc.c, and the records and their
 * invariants are in supervisor_int.h. The spec of a replica, its
 * environment and the exec in the child are replica_spec.c.
 */
#define _GNU_SOURCE
#include "agent/supervisor_int.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/log.h"
#include "common/manifest.h"
#include "common/util.h"

#define IDLE_WAIT_MS 60000

const char *drv_rs_state_name(drv_rs_state_t s)
{
    static const char *names[] = {"starting", "ready", "backoff", "failed", "terminating",
                                  "fetching", "pulling", "succeeded", "waiting"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown";
}

/* --- the supervision loop (supervisor thread) ------------------------------------ */

static struct replica *find(const drv_supervisor_t *s, const char *id)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->r[i]->sp.id, id) == 0)
            return s->r[i];
    return NULL;
}

/* When the thread must look again, as a poll timeout from now. */
static int next_timeout(const drv_supervisor_t *s, int64_t now)
{
    int64_t next = now + IDLE_WAIT_MS;
    for (size_t i = 0; i < s->n; i++)
        next = drv_sup_metrics_due(s->r[i], drv_sup_next_due(s->r[i], now, next));
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
    if (s->fail_jobs[0]) {   /* drv_supervisor_fail_jobs */
        for (size_t i = 0; i < s->n; i++)
            drv_sup_fail_worker(s, s->r[i], s->fail_jobs, s->fail_jobs_grace_ms, now);
        s->fail_jobs[0] = '\0';
    }
    for (size_t i = 0; i < s->n; i++)
        if (s->r[i]->out_fd >= 0)
            drv_sup_drain(s, s->r[i]);
    for (size_t i = 0; i < s->n; i++)
        if (s->r[i]->pid > 0)
            drv_sup_check_exit(s, s->r[i], now);
    for (size_t i = 0; i < s->n; i++) {
        struct replica *r = s->r[i];
        long code;
        char why[300];
        if (r->checking && drv_probe_step(&r->probe, now, &code, why, sizeof why) == 1)
            drv_sup_finish_check(s, r, code, why, now);
        drv_sup_metrics_service(s, r, now);   /* LLM-aware load */
    }
    for (size_t i = 0; i < s->n;) {
        if (!drv_sup_tick(s, s->r[i], now)) {
            i++;
            continue;
        }
        memmove(&s->r[i], &s->r[i + 1], (s->n - i - 1) * sizeof *s->r);   /* freed */
        s->n--;
    }
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
        if (s->fds_cap < 4 * s->n + 1) {
            s->fds_cap = 4 * s->n + 16;
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
            if (r->mchecking)
                s->fds[nf++] = (struct pollfd){.fd = drv_probe_fd(&r->mprobe),
                                               .events = drv_probe_events(&r->mprobe)};
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
    s->engine = o->container_engine && *o->container_engine ? drv_strdup(o->container_engine) : NULL;
    s->node = drv_strdup(o->node_name ? o->node_name : "");
    s->o.container_engine = s->engine;
    s->o.node_name = s->node;
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
    free(s->engine);
    free(s->node);
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
    free(s->engine);
    free(s->node);
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
        s->r[s->n++] = drv_sup_replica_new(s, &specs[j]);
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
        snprintf(st->job, sizeof st->job, "%s", r->sp.job ? r->sp.job : "");
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
        st->isolation = r->iso.rep;
        st->oom_kills = r->oom_kills;
        if (r->man) {
            snprintf(st->artifact, sizeof st->artifact, "%s", r->man->digest);
            st->fetch_done = r->fetch_done;
            st->fetch_total = r->fetch_total;
            st->fetch_rate = r->fetch_rate;
            st->fetch_ms = r->fetch_ms;
        }
        st->llm_load = r->load_known;   /* LLM-aware load (replica_metrics.c) */
        if (r->load_known) {
            st->llm_running = r->load.running;
            st->llm_waiting = r->load.waiting;
            st->llm_kv_cache = r->load.kv_cache;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

void drv_supervisor_fail_jobs(drv_supervisor_t *s, const char *reason, int grace_ms)
{
    pthread_mutex_lock(&s->mu);
    snprintf(s->fail_jobs, sizeof s->fail_jobs, "%s", reason && *reason ? reason : "stopped");
    s->fail_jobs_grace_ms = grace_ms;
    pthread_mutex_unlock(&s->mu);
    wake(s);
}

void drv_supervisor_set_node(drv_supervisor_t *s, const char *node)
{
    char *copy = drv_strdup(node ? node : "");
    pthread_mutex_lock(&s->mu);
    free(s->node);
    s->node = copy;
    s->o.node_name = s->node;
    pthread_mutex_unlock(&s->mu);
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
    if (known || access(buf, F_OK) == 0)
        return 0;
    /* a finished job worker's kept log */
    if (snprintf(buf, len, "%s/%s/%s/%s", s->data_dir, DRV_SUP_JOB_LOGS, id, DRV_RLOG_NAME) >=
        (int)len)
        return -1;
    return access(buf, F_OK) == 0 ? 0 : -1;
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
