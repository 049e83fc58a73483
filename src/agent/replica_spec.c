/* replica_spec.c — see replica_spec.h: checking and copying replica specs,
 * building a replica's environment, and the child's side of fork/exec. */
#define _GNU_SOURCE
#include "agent/replica_spec.h"
#include "agent/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/util.h"

extern char **environ;

/* --- specs --------------------------------------------------------------- */

bool drv_rspec_id_ok(const char *id)
{
    if (!id || !*id || id[0] == '.' || strlen(id) >= sizeof(((drv_replica_status_t *)0)->id))
        return false;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.'))
            return false;
    return true;
}

int drv_rspec_check(const drv_replica_spec_t *sp, size_t i, drv_error_t *err)
{
    if (!drv_rspec_id_ok(sp->id))
        return drv_err_invalid(err, "id", "replica %zu: invalid id \"%s\"", i,
                               sp->id ? sp->id : "(null)");
    if ((sp->argc < 1 && !sp->image) || (sp->argc > 0 && !sp->argv))
        return drv_err_invalid(err, "argv", "replica %s: empty command", sp->id);
    if (sp->image && !*sp->image)
        return drv_err_invalid(err, "image", "replica %s: empty image", sp->id);
    for (size_t k = 0; k < sp->argc; k++)
        if (!sp->argv[k])
            return drv_err_invalid(err, "argv", "replica %s: NULL argument %zu", sp->id, k);
    if (sp->argc > 0 && !*sp->argv[0])
        return drv_err_invalid(err, "argv", "replica %s: empty program name", sp->id);
    for (size_t k = 0; k < sp->envc; k++)
        if (!sp->env || !sp->env[k] || !strchr(sp->env[k], '=') || sp->env[k][0] == '=')
            return drv_err_invalid(err, "env", "replica %s: env entry %zu is not KEY=VALUE",
                                   sp->id, k);
    if (sp->health_path && *sp->health_path && sp->health_path[0] != '/')
        return drv_err_invalid(err, "health_path", "replica %s: health path must start with /",
                               sp->id);
    if (sp->gpu_memory_limit_mib < 0 || sp->gpu_compute_percent < 0 ||
        sp->gpu_compute_percent > 100)
        return drv_err_invalid(err, "resources", "replica %s: invalid GPU share", sp->id);
    if (sp->checkpoint_scope && !drv_ckpt_scope_valid(sp->checkpoint_scope))
        return drv_err_invalid(err, "checkpoint", "replica %s: checkpoint scope '%.130s' is not "
                               "valid (1-127 of [A-Za-z0-9._:-])", sp->id, sp->checkpoint_scope);
    if (sp->checkpoint_keep < 0 || sp->checkpoint_keep > 100)
        return drv_err_invalid(err, "checkpoint", "replica %s: checkpoint keep must be 0-100",
                               sp->id);
    return 0;
}

static char **strv_dup(const char *const *v, size_t n)
{
    char **out = drv_xmalloc((n + 1) * sizeof *out);
    for (size_t i = 0; i < n; i++)
        out[i] = drv_strdup(v[i]);
    out[n] = NULL;
    return out;
}

void drv_rspec_strv_free(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

void drv_rspec_copy(drv_rspec_t *d, const drv_replica_spec_t *sp)
{
    d->id = drv_strdup(sp->id);
    d->deployment = drv_strdup(sp->deployment ? sp->deployment : "");
    d->health_path = drv_strdup(sp->health_path ? sp->health_path : "");
    d->model_dir = drv_strdup(sp->model_dir ? sp->model_dir : "");
    d->gpu_uuids = drv_strdup(sp->gpu_uuids ? sp->gpu_uuids : "");
    d->argv = strv_dup(sp->argv, sp->argc);
    d->argc = sp->argc;
    d->env = strv_dup(sp->env, sp->envc);
    d->envc = sp->envc;
    d->startup_timeout_s = sp->startup_timeout_s > 0 ? sp->startup_timeout_s : DRV_RSPEC_DEFAULT_STARTUP_S;
    d->mem_mib = sp->gpu_memory_limit_mib;
    d->compute_pct = sp->gpu_compute_percent;
    d->mps_pipe = sp->mps_pipe_dir && *sp->mps_pipe_dir ? drv_strdup(sp->mps_pipe_dir) : NULL;
    d->strict = sp->strict_isolation;
    d->art_manifest = sp->artifact_manifest ? drv_strdup(sp->artifact_manifest) : NULL;
    d->art_origin = sp->artifact_origin ? drv_strdup(sp->artifact_origin) : NULL;
    d->art_bearer = sp->artifact_bearer ? drv_strdup(sp->artifact_bearer) : NULL;
    d->image = sp->image ? drv_strdup(sp->image) : NULL;
    d->pull_policy = sp->pull_policy ? drv_strdup(sp->pull_policy) : NULL;
    d->entrypoint = sp->entrypoint;
    d->cpu_millis = sp->cpu_millis;
    d->memory_mib = sp->memory_mib;
    d->ipc_host = sp->ipc_host;
    d->shm_mib = sp->shm_mib > 0 && sp->shm_mib <= 1 << 20 ? sp->shm_mib : 0;
    bool login = sp->registry && sp->registry_user && sp->registry_password;
    d->registry = login ? drv_strdup(sp->registry) : NULL;
    d->registry_user = login ? drv_strdup(sp->registry_user) : NULL;
    d->registry_password = login ? drv_strdup(sp->registry_password) : NULL;
    d->job = sp->job && *sp->job ? drv_strdup(sp->job) : NULL;
    d->check_port = sp->check_port > 0 && sp->check_port < 65536 ? sp->check_port : 0;
    d->ckpt_scope = sp->checkpoint_scope ? drv_strdup(sp->checkpoint_scope) : NULL;
    d->ckpt_keep = sp->checkpoint_keep;
    d->ckpt_dir = NULL;
    d->home = NULL;
    d->metrics_path = sp->metrics_path && sp->metrics_path[0] == '/' &&
                              !strpbrk(sp->metrics_path, " \r\n")
                          ? drv_strdup(sp->metrics_path)
                          : NULL;
    d->metrics_port = d->metrics_path && sp->metrics_port;
    d->mport = 0;
}

void drv_rspec_free(drv_rspec_t *d)
{
    free(d->id);
    free(d->deployment);
    free(d->health_path);
    free(d->model_dir);
    free(d->gpu_uuids);
    drv_rspec_strv_free(d->argv);
    drv_rspec_strv_free(d->env);
    free(d->mps_pipe);
    free(d->art_manifest);
    free(d->art_origin);
    free(d->art_bearer);
    free(d->image);
    free(d->pull_policy);
    free(d->registry);
    free(d->registry_user);
    if (d->registry_password)   /* a secret: not left in freed memory */
        explicit_bzero(d->registry_password, strlen(d->registry_password));
    free(d->registry_password);
    free(d->job);
    free(d->ckpt_scope);
    free(d->ckpt_dir);
    free(d->home);
    free(d->metrics_path);
    memset(d, 0, sizeof *d);
}

void drv_rspec_drop(drv_rspec_t **d)
{
    if (*d) {
        drv_rspec_free(*d);
        free(*d);
        *d = NULL;
    }
}

/* --- the environment of a replica --------------------------------------------- */

struct envv {
    char **v;
    size_t n, cap;
};

/* Add "KEY=VALUE" (owned), replacing an entry with the same key. */
static void env_put(struct envv *e, char *kv)
{
    size_t kl = (size_t)(strchr(kv, '=') - kv);
    for (size_t i = 0; i < e->n; i++)
        if (strncmp(e->v[i], kv, kl + 1) == 0) {
            free(e->v[i]);
            e->v[i] = kv;
            return;
        }
    if (e->n + 2 > e->cap) {
        e->cap = e->cap ? 2 * e->cap : 64;
        char **nv = realloc(e->v, e->cap * sizeof *nv);
        if (!nv)
            abort();
        e->v = nv;
    }
    e->v[e->n++] = kv;
    e->v[e->n] = NULL;
}

static void env_set(struct envv *e, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void env_set(struct envv *e, const char *key, const char *fmt, ...)
{
    char val[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(val, sizeof val, fmt, ap);
    va_end(ap);
    size_t len = strlen(key) + strlen(val) + 2;
    char *kv = drv_xmalloc(len);
    snprintf(kv, len, "%s=%s", key, val);
    env_put(e, kv);
}

static const char *env_get(const struct envv *e, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i < e->n; i++)
        if (strncmp(e->v[i], key, kl) == 0 && e->v[i][kl] == '=')
            return e->v[i] + kl + 1;
    return NULL;
}

char **drv_rspec_env(const char *gpushare, const drv_rspec_t *sp, int port)
{
    struct envv e = {0};
    for (char **p = environ; p && *p; p++) {   /* the contract's keys are replaced below */
        const char *eq = strchr(*p, '=');
        if (eq && eq != *p && strncmp(*p, "DROVER_", 7) != 0)
            env_put(&e, drv_strdup(*p));
    }
    for (size_t i = 0; i < sp->envc; i++)
        env_put(&e, drv_strdup(sp->env[i]));
    env_set(&e, "PORT", "%d", port);
    if (sp->mport > 0)
        env_set(&e, "METRICS_PORT", "%d", sp->mport);
    env_set(&e, "DROVER_REPLICA_ID", "%s", sp->id);
    env_set(&e, "DROVER_DEPLOYMENT", "%s", sp->deployment);
    if (*sp->model_dir)
        env_set(&e, "DROVER_MODEL_DIR", "%s", sp->model_dir);
    if (sp->ckpt_dir)
        env_set(&e, "DROVER_CHECKPOINT_DIR", "%s", sp->ckpt_dir);
    if (sp->home)
        env_set(&e, "HOME", "%s", sp->home);
    env_set(&e, "CUDA_VISIBLE_DEVICES", "%s", sp->gpu_uuids);
    if (sp->mem_mib > 0)
        env_set(&e, "DROVER_GPU_MEMORY_LIMIT_MIB", "%lld", (long long)sp->mem_mib);
    if (sp->compute_pct > 0)
        env_set(&e, "DROVER_GPU_COMPUTE_PERCENT", "%d", sp->compute_pct);
    if (sp->mem_mib > 0 && gpushare && *gpushare) {
        const char *prev = env_get(&e, "LD_PRELOAD");
        char *was = prev && *prev ? drv_strdup(prev) : NULL;
        env_set(&e, "LD_PRELOAD", "%s%s%s", gpushare, was ? ":" : "", was ? was : "");
        free(was);
    }
    if (sp->mem_mib > 0 && sp->mps_pipe) {   /* GPU shares: a compute share through MPS */
        env_set(&e, "CUDA_MPS_PIPE_DIRECTORY", "%s", sp->mps_pipe);
        if (sp->compute_pct > 0 && sp->compute_pct < 100)
            env_set(&e, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "%d", sp->compute_pct);
    }
    return e.v;   /* never NULL: PORT is always set */
}

/* --- the child -------------------------------------------------------------- */

static void put(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

void drv_rspec_exec(char *const *argv, char *const *envp, int wfd, pid_t parent,
                    const drv_iso_proc_t *iso)
{
    setsid();                                   /* own session and process group */
    const char *what = NULL;
    if (iso && drv_iso_enter(iso, &what) < 0) {   /* before PDEATHSIG: setuid clears it */
        const char *desc = strerrordesc_np(errno);
        put(wfd, "isolation: ");
        put(wfd, what);
        put(wfd, ": ");
        put(wfd, desc ? desc : "failed");
        put(wfd, "\n");
        _exit(125);
    }
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
        _exit(126);                             /* the agent is already gone */
    if (wfd < 3) {
        int w = fcntl(wfd, F_DUPFD, 3);
        if (w >= 0)
            wfd = w;
    }
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0 && nul != 0)
        dup2(nul, 0);
    dup2(wfd, 1);
    dup2(wfd, 2);
    if (close_range(3, ~0U, 0) < 0) {
        struct rlimit rl;
        int max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (int)rl.rlim_cur
                                                                            : 65536;
        for (int fd = 3; fd < max; fd++)
            close(fd);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        sigaction(sig, &sa, NULL);              /* fails harmlessly for KILL, STOP, reserved */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvpe(argv[0], argv, envp);
    int e = errno;
    put(2, "exec ");
    put(2, argv[0]);
    put(2, ": ");
    const char *desc = strerrordesc_np(e);   /* a table lookup: no locale, no malloc */
    put(2, desc ? desc : "exec failed");
    put(2, "\n");
    _exit(127);
}
