/* slurm_cmd.c — one Slurm command run with argv, captured, time-limited
 * (see slurm_cmd.h). fork + execvpe with an environment built before the
 * fork (the child only dups descriptors and execs); a close-on-exec pipe
 * carries execvpe's errno back when the program cannot start. */
#define _GNU_SOURCE
#include "provider/slurm_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"

extern char **environ;

/* environ without SLURM_CONF, plus SLURM_CONF=conf when conf is not "". */
static char **child_env(const char *conf, char **conf_var)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!conf[0] || strncmp(environ[i], "SLURM_CONF=", 11) != 0)
            env[k++] = environ[i];
    *conf_var = NULL;
    if (conf[0]) {
        if (asprintf(conf_var, "SLURM_CONF=%s", conf) < 0) {
            free(env);
            return NULL;
        }
        env[k++] = *conf_var;
    }
    env[k] = NULL;
    return env;
}

static void append(char *buf, size_t cap, size_t *len, const char *p, size_t n)
{
    if (*len + 1 >= cap)
        return;
    if (n > cap - 1 - *len)
        n = cap - 1 - *len;
    memcpy(buf + *len, p, n);
    *len += n;
    buf[*len] = '\0';
}

int drv_slurm_run(char *const argv[], const char *slurm_conf, const char *input, int timeout_ms,
                  drv_slurm_out_t *o, drv_error_t *err)
{
    memset(o, 0, sizeof *o);
    o->status = -1;
    int in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1}, ex[2] = {-1, -1};
    char *conf_var = NULL;
    char **env = child_env(slurm_conf ? slurm_conf : "", &conf_var);
    int rc = -1;
    if (!env) {
        drv_err_internal(err, "out of memory");
        goto out;
    }
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0 ||
        pipe2(ex, O_CLOEXEC) < 0) {
        drv_err_internal(err, "cannot run %s: pipe: %s", argv[0], strerror(errno));
        goto out;
    }
    pid_t pid = fork();
    if (pid < 0) {
        drv_err_internal(err, "cannot run %s: fork: %s", argv[0], strerror(errno));
        goto out;
    }
    if (pid == 0) {
        /* the child: only async-signal-safe calls until exec */
        setpgid(0, 0);
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(er[1], 2);
        execvpe(argv[0], argv, env);
        int e = errno;
        (void)!write(ex[1], &e, sizeof e);
        _exit(127);
    }
    setpgid(pid, pid);   /* as the child does: no race with a kill of the group */
    close(in[0]);
    close(out[1]);
    close(er[1]);
    close(ex[1]);
    in[0] = out[1] = er[1] = ex[1] = -1;
    int e = 0;
    if (read(ex[0], &e, sizeof e) == (ssize_t)sizeof e)
        o->exec_errno = e;
    size_t in_len = input && !e ? strlen(input) : 0, in_off = 0;
    if (!in_len) {
        close(in[1]);
        in[1] = -1;
    } else {
        fcntl(in[1], F_SETFL, O_NONBLOCK);
    }
    int64_t deadline = drv_mono_ms() + timeout_ms;
    size_t err_len = 0;
    bool timed_out = false;
    while (out[0] >= 0 || er[0] >= 0) {
        struct pollfd p[3] = {{out[0], POLLIN, 0}, {er[0], POLLIN, 0}, {in[1], POLLOUT, 0}};
        int64_t left = deadline - drv_mono_ms();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        int r = poll(p, 3, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        char buf[4096];
        for (int i = 0; i < 2; i++) {
            int *fd = i == 0 ? &out[0] : &er[0];
            if (*fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t k = read(*fd, buf, sizeof buf);
            if (k <= 0) {
                if (k < 0 && errno == EINTR)
                    continue;
                close(*fd);
                *fd = -1;
            } else if (i == 0) {
                append(o->out, sizeof o->out, &o->out_len, buf, (size_t)k);
            } else {
                append(o->err, sizeof o->err, &err_len, buf, (size_t)k);
            }
        }
        if (in[1] >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t k = write(in[1], input + in_off, in_len - in_off);
            if (k > 0)
                in_off += (size_t)k;
            if ((k < 0 && errno != EAGAIN && errno != EINTR) || in_off == in_len) {
                close(in[1]);
                in[1] = -1;
            }
        }
    }
    if (timed_out) {
        kill(-pid, SIGKILL);   /* the command and what it started */
        kill(pid, SIGKILL);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!timed_out && WIFEXITED(st))
        o->status = WEXITSTATUS(st);
    while (err_len > 0 && (o->err[err_len - 1] == '\n' || o->err[err_len - 1] == '\r'))
        o->err[--err_len] = '\0';
    if (timed_out)
        snprintf(o->err, sizeof o->err, "%s: no answer within %d s (killed)", argv[0],
                 timeout_ms / 1000);
    rc = 0;
out:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0)
            close(in[i]);
        if (out[i] >= 0)
            close(out[i]);
        if (er[i] >= 0)
            close(er[i]);
        if (ex[i] >= 0)
            close(ex[i]);
    }
    free(env);
    free(conf_var);
    return rc;
}
