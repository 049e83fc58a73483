/* mps.c — one MPS control daemon per GPU, for compute shares (see mps.h).
 *
 * Invariants of a GPU record g: g->pid > 0 iff its daemon was started and
 * not yet reaped; g->up iff MPS is in force there (pid > 0 and its control
 * pipe appeared); g->why says why not, once it is not. Built into the agent
 * (drvagent), never into libdrover-gpushare.so.
 */
#define _GNU_SOURCE
#include "agent/mps.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

extern char **environ;

#define POLL_MS 20
#define MAX_SOCK_DIR 80   /* leaves room for MPS's socket names under 108 bytes */

struct gpu {
    char uuid[96];
    char base[512], pipe[600], log[600], out[600];
    pid_t pid;
    bool up;
    char why[200];
};

struct drv_mps {
    drv_mps_opts_t o;
    char control[512];
    char tmpdir[64];          /* "" unless the /tmp fallback was used */
    struct gpu *g;
    size_t n;
    char message[512];
};

int drv_mps_which(const char *name, char *buf, size_t len)
{
    if (strchr(name, '/')) {
        snprintf(buf, len, "%s", name);
        return access(buf, X_OK) == 0 ? 0 : -1;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    const char *p = path;
    while (*p) {
        const char *colon = strchr(p, ':');
        size_t dl = colon ? (size_t)(colon - p) : strlen(p);
        if (dl > 0 && snprintf(buf, len, "%.*s/%s", (int)dl, p, name) < (int)len) {
            struct stat st;
            if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
                return 0;
        }
        p += dl + (colon ? 1 : 0);
    }
    return -1;
}

static int mkdirs(const char *path)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(tmp, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

/* The environment for a control program on g: ours plus the three variables. */
static char **daemon_env(const struct gpu *g)
{
    size_t n = 0;
    for (char **p = environ; p && *p; p++)
        n++;
    char **v = drv_xmalloc((n + 4) * sizeof *v);
    size_t k = 0;
    for (char **p = environ; p && *p; p++)
        if (strncmp(*p, "CUDA_VISIBLE_DEVICES=", 21) != 0 &&
            strncmp(*p, "CUDA_MPS_PIPE_DIRECTORY=", 24) != 0 &&
            strncmp(*p, "CUDA_MPS_LOG_DIRECTORY=", 23) != 0)
            v[k++] = *p;   /* borrowed */
    static __thread char a[160], b[640], c[640];
    snprintf(a, sizeof a, "CUDA_VISIBLE_DEVICES=%s", g->uuid);
    snprintf(b, sizeof b, "CUDA_MPS_PIPE_DIRECTORY=%s", g->pipe);
    snprintf(c, sizeof c, "CUDA_MPS_LOG_DIRECTORY=%s", g->log);
    v[k++] = a;
    v[k++] = b;
    v[k++] = c;
    v[k] = NULL;
    return v;
}

/* fork/exec control with args; stdin from in_fd (-1: /dev/null), output to
 * g->out. In the child: only async-signal-safe calls. */
static pid_t spawn(const char *control, const char *const *args, char **envp, const char *out,
                   int in_fd, bool daemon)
{
    int ofd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        if (daemon && (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent))
            _exit(126);
        dup2(in_fd >= 0 ? in_fd : nul, 0);
        if (ofd >= 0) {
            dup2(ofd, 1);
            dup2(ofd, 2);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(control, (char *const *)args, envp);
        _exit(127);
    }
    if (ofd >= 0)
        close(ofd);
    if (nul >= 0)
        close(nul);
    return pid;
}

static void first_line(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(buf, (int)len, f))
        buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

/* g's daemon has exited (reaped with status wst): mark it down. */
static void gone(struct gpu *g, int wst, const char *when)
{
    char line[120];
    first_line(g->out, line, sizeof line);
    if (WIFEXITED(wst))
        snprintf(g->why, sizeof g->why, "control daemon %s with status %d%s%s", when,
                 WEXITSTATUS(wst), line[0] ? ": " : "", line);
    else
        snprintf(g->why, sizeof g->why, "control daemon %s (signal %d)", when,
                 WIFSIGNALED(wst) ? WTERMSIG(wst) : 0);
    g->pid = 0;
    g->up = false;
}

static void summarize(drv_mps_t *m)
{
    size_t up = 0;
    for (size_t i = 0; i < m->n; i++)
        up += m->g[i].up;
    size_t off = (size_t)snprintf(m->message, sizeof m->message, "MPS on %zu of %zu GPU%s", up,
                                  m->n, m->n == 1 ? "" : "s");
    for (size_t i = 0; i < m->n && off < sizeof m->message; i++)
        if (!m->g[i].up)
            off += (size_t)snprintf(m->message + off, sizeof m->message - off, "; %s: %s",
                                    m->g[i].uuid, m->g[i].why);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    remove(path);
    return 0;
}

drv_mps_t *drv_mps_create(const drv_mps_opts_t *o, const char *const *uuids, size_t n,
                          drv_error_t *err)
{
    if (!o || !o->dir || !*o->dir || (n && !uuids)) {
        drv_err_invalid(err, "mps", "mps: a directory is required");
        return NULL;
    }
    drv_mps_t *m = calloc(1, sizeof *m);
    if (!m)
        abort();
    m->o = *o;
    if (!m->o.start_timeout_ms)
        m->o.start_timeout_ms = 5000;
    if (!m->o.stop_timeout_ms)
        m->o.stop_timeout_ms = 5000;
    if (drv_mps_which(o->control ? o->control : "nvidia-cuda-mps-control", m->control,
                      sizeof m->control) < 0) {
        drv_err_not_found(err, "%s not found%s", o->control ? o->control : "nvidia-cuda-mps-control",
                          o->control ? "" : " in PATH");
        free(m);
        return NULL;
    }
    const char *base = o->dir;
    if (strlen(base) > MAX_SOCK_DIR - 12) {
        snprintf(m->tmpdir, sizeof m->tmpdir, "/tmp/drover-mps-XXXXXX");
        if (!mkdtemp(m->tmpdir)) {
            drv_err_internal(err, "mps: cannot create a directory in /tmp: %s", strerror(errno));
            free(m);
            return NULL;
        }
        base = m->tmpdir;
    }
    m->n = n;
    m->g = calloc(n ? n : 1, sizeof *m->g);
    if (!m->g)
        abort();
    int64_t now = drv_mono_ms();
    for (size_t i = 0; i < n; i++) {
        struct gpu *g = &m->g[i];
        snprintf(g->uuid, sizeof g->uuid, "%s", uuids[i]);
        snprintf(g->base, sizeof g->base, "%s/%zu", base, i);
        snprintf(g->pipe, sizeof g->pipe, "%s/pipe", g->base);
        snprintf(g->log, sizeof g->log, "%s/log", g->base);
        snprintf(g->out, sizeof g->out, "%s/control.out", g->base);
        if (mkdirs(g->pipe) < 0 || mkdirs(g->log) < 0) {
            snprintf(g->why, sizeof g->why, "cannot create %s: %s", g->base, strerror(errno));
            continue;
        }
        char control[640];
        snprintf(control, sizeof control, "%s/control", g->pipe);
        unlink(control);   /* a stale pipe must not look like a live daemon */
        char **envp = daemon_env(g);
        const char *args[] = {m->control, "-f", NULL};
        g->pid = spawn(m->control, args, envp, g->out, -1, true);
        free(envp);
        if (g->pid < 0) {
            snprintf(g->why, sizeof g->why, "fork: %s", strerror(errno));
            g->pid = 0;
        }
    }
    /* Wait for every daemon's control pipe (or its exit), all at once. */
    for (;;) {
        bool waiting = false;
        for (size_t i = 0; i < n; i++) {
            struct gpu *g = &m->g[i];
            if (g->pid <= 0 || g->up)
                continue;
            int wst;
            if (waitpid(g->pid, &wst, WNOHANG) == g->pid) {
                gone(g, wst, "exited at start");
                continue;
            }
            char control[640];
            snprintf(control, sizeof control, "%s/control", g->pipe);
            if (access(control, F_OK) == 0) {
                g->up = true;
                g->why[0] = '\0';
            } else {
                waiting = true;
            }
        }
        if (!waiting)
            break;
        if (drv_mono_ms() - now >= m->o.start_timeout_ms) {
            for (size_t i = 0; i < n; i++) {
                struct gpu *g = &m->g[i];
                if (g->pid > 0 && !g->up) {
                    kill(-g->pid, SIGKILL);
                    while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                    g->pid = 0;
                    snprintf(g->why, sizeof g->why, "control daemon made no control pipe "
                             "within %d ms", m->o.start_timeout_ms);
                }
            }
            break;
        }
        struct timespec ts = {0, POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    summarize(m);
    return m;
}

static struct gpu *find(drv_mps_t *m, const char *uuid)
{
    if (!m || !uuid)
        return NULL;
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->g[i].uuid, uuid) == 0)
            return &m->g[i];
    return NULL;
}

const char *drv_mps_pipe_dir(drv_mps_t *m, const char *uuid)
{
    struct gpu *g = find(m, uuid);
    if (!g || !g->up)
        return NULL;
    int wst;
    if (waitpid(g->pid, &wst, WNOHANG) == g->pid) {
        gone(g, wst, "exited");
        drv_warn("MPS on %s: %s; its replicas time-slice from now on", g->uuid, g->why);
        summarize(m);
        return NULL;
    }
    return g->pipe;
}

const char *drv_mps_mode(drv_mps_t *m, const char *uuid)
{
    return drv_mps_pipe_dir(m, uuid) ? "mps" : "time-slicing";
}

const char *drv_mps_message(const drv_mps_t *m)
{
    return m ? m->message : "MPS off";
}

void drv_mps_destroy(drv_mps_t *m)
{
    if (!m)
        return;
    /* "quit" to every live daemon, through its own control program */
    for (size_t i = 0; i < m->n; i++) {
        struct gpu *g = &m->g[i];
        if (g->pid <= 0)
            continue;
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
            continue;
        char **envp = daemon_env(g);
        const char *args[] = {m->control, NULL};
        pid_t q = spawn(m->control, args, envp, g->out, p[0], false);
        free(envp);
        close(p[0]);
        if (write(p[1], "quit\n", 5) < 0) {
            /* the control program is gone already: the kill below does it */
        }
        close(p[1]);
        if (q > 0)
            while (waitpid(q, NULL, 0) < 0 && errno == EINTR)
                ;
    }
    int64_t deadline = drv_mono_ms() + m->o.stop_timeout_ms;
    for (size_t i = 0; i < m->n; i++) {
        struct gpu *g = &m->g[i];
        while (g->pid > 0) {
            int wst;
            if (waitpid(g->pid, &wst, WNOHANG) == g->pid) {
                kill(-g->pid, SIGKILL);   /* servers it left behind */
                g->pid = 0;
                break;
            }
            if (drv_mono_ms() >= deadline) {
                drv_warn("MPS on %s: the control daemon did not quit; killing it", g->uuid);
                kill(-g->pid, SIGKILL);
                while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR)
                    ;
                g->pid = 0;
                break;
            }
            struct timespec ts = {0, POLL_MS * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    if (m->tmpdir[0])
        nftw(m->tmpdir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
    free(m->g);
    free(m);
}
