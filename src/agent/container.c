/* container.c — see container.h: the node's container engine, and the
 * script and arguments that run one replica's container with the replica
 * contract inside it. */
#define _GNU_SOURCE
#include "agent/container.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"

/* --- the engine ----------------------------------------------------------------- */

/* Run argv (looked up in PATH) with stdout into buf; its exit status, -1
 * when it could not run. */
static int capture(char *const *argv, char *buf, size_t len)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        dup2(p[1], 1);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 2);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    size_t off = 0;
    for (;;) {
        ssize_t k = read(p[0], buf + off, len - 1 - off);
        if (k > 0 && off + (size_t)k < len - 1)
            off += (size_t)k;
        else if (k > 0)
            off = len - 1;
        else if (k < 0 && errno == EINTR)
            continue;
        else
            break;
        if (off == len - 1)
            break;
    }
    buf[off] = '\0';
    close(p[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* "podman version 4.3.1" / "Docker version 28.2.2, build e6534b4": the
 * first word that starts with a digit. */
static void version_of(const char *out, char *v, size_t vl)
{
    const char *p = out;
    while (*p && !(*p >= '0' && *p <= '9' && (p == out || p[-1] == ' ')))
        p++;
    size_t n = strcspn(p, " ,\n");
    snprintf(v, vl, "%.*s", (int)(n < vl ? n : vl - 1), p);
}

static int try_engine(const char *name, drv_ctr_engine_t *out)
{
    char buf[512];
    char *ver[] = {(char *)name, "--version", NULL};
    int rc = capture(ver, buf, sizeof buf);
    if (rc != 0) {
        snprintf(out->why, sizeof out->why, rc == 127 || rc < 0 ? "%s is not installed"
                                                                : "`%s --version` failed",
                 name);
        return -1;
    }
    if (strcmp(name, "docker") == 0) {   /* the CLI alone is not enough: its daemon */
        char *info[] = {"docker", "version", "--format", "{{.Server.Version}}", NULL};
        char sv[128];
        if (capture(info, sv, sizeof sv) != 0) {
            snprintf(out->why, sizeof out->why, "docker is installed but its daemon does not "
                     "answer (`docker version`)");
            return -1;
        }
    }
    snprintf(out->name, sizeof out->name, "%s", name);
    version_of(buf, out->version, sizeof out->version);
    out->why[0] = '\0';
    return 0;
}

int drv_ctr_detect(const char *want, drv_ctr_engine_t *out)
{
    memset(out, 0, sizeof *out);
    if (!want || !*want)
        want = "auto";
    if (strcmp(want, "none") == 0) {
        snprintf(out->why, sizeof out->why, "container engines are off (--container-engine none)");
        return -1;
    }
    if (strcmp(want, "podman") == 0 || strcmp(want, "docker") == 0)
        return try_engine(want, out);
    if (try_engine("podman", out) == 0)
        return 0;
    char pw[256];
    snprintf(pw, sizeof pw, "%s", out->why);
    if (try_engine("docker", out) == 0)
        return 0;
    char dw[256];
    snprintf(dw, sizeof dw, "%s", out->why);
    snprintf(out->why, sizeof out->why, "no container engine: %s; %s", pw, dw);
    return -1;
}

/* --- CDI ------------------------------------------------------------------------- */

static bool file_names_gpu(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    char line[1024];
    bool yes = false;
    while (!yes && fgets(line, sizeof line, f))
        yes = strstr(line, "nvidia.com/gpu") != NULL;
    fclose(f);
    return yes;
}

bool drv_ctr_cdi_has_gpus(const char *dirs)
{
    char *copy = drv_strdup(dirs && *dirs ? dirs : "/etc/cdi:/var/run/cdi"), *save = NULL;
    bool yes = false;
    for (char *d = strtok_r(copy, ":", &save); d && !yes; d = strtok_r(NULL, ":", &save)) {
        DIR *dh = opendir(d);
        if (!dh)
            continue;
        struct dirent *de;
        while (!yes && (de = readdir(dh))) {
            size_t n = strlen(de->d_name);
            if (!((n > 5 && strcmp(de->d_name + n - 5, ".yaml") == 0) ||
                  (n > 5 && strcmp(de->d_name + n - 5, ".json") == 0)))
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", d, de->d_name);
            yes = file_names_gpu(path);
        }
        closedir(dh);
    }
    free(copy);
    return yes;
}

/* --- the script --------------------------------------------------------------------- */

/* $1 engine, $2 container name, $3 image, $4 pull policy, $5 stop grace (s),
 * $6 port file, $7 1 when a container may be there to adopt, $8 the
 * directory of the pull's login (config.json; "" none); the rest: the
 * arguments of `run -d --name NAME`. The common path (a new replica, the
 * image present) is one `run -d`: a stale container of the same name or a
 * missing image is looked into only when it fails. */
static const char script[] =
    "e=$1 n=$2 img=$3 pol=$4 g=$5 pf=$6 adopt=$7 ad=$8; shift 8\n"
    "[ -n \"$ad\" ] && export REGISTRY_AUTH_FILE=\"$ad/config.json\" DOCKER_CONFIG=\"$ad\"\n"
    "since=\n"
    "st=; [ \"$adopt\" = 1 ] && st=$(\"$e\" container inspect --format "
    "'{{.State.Status}} {{index .Config.Labels \"drover.port\"}}' \"$n\" 2>/dev/null)\n"
    "if [ \"$st\" = \"running $PORT\" ] || [ \"$st\" = \"exited $PORT\" ]; then\n"
    "  echo \"drover: adopting the ${st%% *} container $n\"\n"
    "  echo \"" DRV_CTR_STARTED_MARK " (adopted $n)\"\n"
    "  since=$(date -u +%Y-%m-%dT%H:%M:%SZ)\n"
    "else\n"
    "  pull() { echo \"drover: pulling image $img\"; \"$e\" pull \"$img\" || "
    "{ echo \"drover: pulling image $img failed\" >&2; exit 87; }; }\n"
    "  [ \"$pol\" = always ] && pull\n"
    "  if ! \"$e\" run -d --pull=never --name \"$n\" \"$@\" >/dev/null 2>&1; then\n"
    "    \"$e\" rm -f \"$n\" >/dev/null 2>&1\n"
    "    if ! \"$e\" image inspect \"$img\" >/dev/null 2>&1; then\n"
    "      [ \"$pol\" = never ] && { echo \"drover: image $img is not on this node and its "
    "pull_policy is never\" >&2; exit 86; }\n"
    "      pull\n"
    "    fi\n"
    "    \"$e\" run -d --pull=never --name \"$n\" \"$@\" >/dev/null || exit 88\n"
    "  fi\n"
    "  echo \"" DRV_CTR_STARTED_MARK " ($n)\"\n"
    "  echo \"$PORT\" >\"$pf\"\n"
    "fi\n"
    "stop() { trap '' TERM INT; \"$e\" stop -t \"$g\" \"$n\" >/dev/null 2>&1; "
    "\"$e\" rm -f \"$n\" >/dev/null 2>&1; rm -f \"$pf\"; [ -n \"$ad\" ] && rm -rf \"$ad\"; exit 0; }\n"
    "trap stop TERM INT\n"
    "if [ -n \"$since\" ]; then \"$e\" logs -f --since \"$since\" \"$n\" & else "
    "\"$e\" logs -f \"$n\" & fi\n"
    "wait $!\n"
    "code=$(\"$e\" wait \"$n\" 2>/dev/null)\n"
    "\"$e\" rm -f \"$n\" >/dev/null 2>&1; rm -f \"$pf\"; [ -n \"$ad\" ] && rm -rf \"$ad\"\n"
    "case $code in ''|*[!0-9]*) code=1 ;; esac\n"
    "[ \"$code\" -gt 255 ] && code=1\n"
    "exit \"$code\"\n";

struct argv_b {
    char **v;
    size_t n, cap;
};

static void add(struct argv_b *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct argv_b *b, const char *fmt, ...)
{
    if (b->n + 2 > b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        char **nv = realloc(b->v, b->cap * sizeof *nv);
        if (!nv)
            abort();
        b->v = nv;
    }
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        abort();
    va_end(ap);
    b->v[b->n++] = s;
    b->v[b->n] = NULL;
}

/* Open-files and processes limits no higher than the agent's own (an
 * engine's defaults may ask for more and be refused), and processes no
 * higher than half of pid_max (runc is refused above about pid_max here). */
static void ulimits(struct argv_b *b)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        add(b, "--ulimit=nofile=%llu:%llu", (unsigned long long)rl.rlim_cur,
            (unsigned long long)rl.rlim_cur);
    unsigned long long np = 0;
    if (getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        np = rl.rlim_cur;
    FILE *f = fopen("/proc/sys/kernel/pid_max", "re");
    unsigned long long pm = 0;
    if (f) {
        if (fscanf(f, "%llu", &pm) != 1)
            pm = 0;
        fclose(f);
    }
    if (pm / 2 > 0 && (np == 0 || np > pm / 2))
        np = pm / 2;
    if (np > 0)
        add(b, "--ulimit=nproc=%llu:%llu", np, np);
}

static void base64(const unsigned char *in, size_t n, char *out)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
}

int drv_ctr_write_auth(const char *state_dir, const char *name, const char *registry,
                       const char *user, const char *password, char *dir, size_t dl, char *why,
                       size_t wl)
{
    snprintf(dir, dl, "%s/%s.auth", state_dir, name);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        snprintf(why, wl, "cannot create %s for the registry login: %s", dir, strerror(errno));
        return -1;
    }
    size_t ul = strlen(user), pl = strlen(password);
    unsigned char *up = drv_xmalloc(ul + pl + 2);
    memcpy(up, user, ul);
    up[ul] = ':';
    memcpy(up + ul + 1, password, pl);
    char *b64 = drv_xmalloc(4 * ((ul + pl + 1) / 3 + 1) + 1);
    base64(up, ul + pl + 1, b64);
    explicit_bzero(up, ul + pl + 1);
    free(up);
    char path[4300];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = -1;
    if (fd >= 0) {
        FILE *f = fdopen(fd, "w");
        if (f) {
            /* registry and user were checked by the head: no quotes or backslashes */
            fprintf(f, "{\"auths\": {\"%s\": {\"auth\": \"%s\"}}}\n", registry, b64);
            rc = fclose(f) == 0 ? 0 : -1;
        } else {
            close(fd);
        }
    }
    if (rc < 0)
        snprintf(why, wl, "cannot write the registry login to %s: %s", path, strerror(errno));
    explicit_bzero(b64, strlen(b64));
    free(b64);
    return rc;
}

static bool contract_key(const char *kv)
{
    return strncmp(kv, "PORT=", 5) == 0 || strncmp(kv, "METRICS_PORT=", 13) == 0 ||
           strncmp(kv, "CUDA_VISIBLE_DEVICES=", 21) == 0 ||
           (strncmp(kv, "DROVER_", 7) == 0 && strncmp(kv, "DROVER_MODEL_DIR=", 17) != 0);
}

/* A GPU memory share: the library read-only and preloaded, the region's
 * directory STATE_DIR/<id>.gpushare shared with the host. */
static int gpushare_args(struct argv_b *b, const drv_ctr_run_t *cr, const drv_rspec_t *sp,
                         char *why, size_t wl)
{
    char lib[PATH_MAX], dir[4200];
    if (!realpath(cr->gpushare, lib))
        return 0;   /* as for a process: not enforced (the replica's enforcement says so) */
    snprintf(dir, sizeof dir, "%s/%s.gpushare", cr->state_dir, sp->id);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        snprintf(why, wl, "cannot create %s for its GPU share's accounting: %s", dir,
                 strerror(errno));
        return -1;
    }
    add(b, "--mount=type=bind,source=%s,destination=" DRV_CTR_GPUSHARE_LIB ",readonly", lib);
    add(b, "--env=LD_PRELOAD=" DRV_CTR_GPUSHARE_LIB);
    add(b, "--mount=type=bind,source=%s,destination=" DRV_CTR_GPUSHARE_DIR, dir);
    add(b, "--env=DROVER_GPUSHARE_DIR=" DRV_CTR_GPUSHARE_DIR);
    return 0;
}

/* --- $(VAR) ---------------------------------------------------------------------- */

/* The value VAR (len n) has inside sp's container, from env (drv_rspec_env's):
 * the paths inside for the model and checkpoint dirs; only variables the
 * container gets (the contract's and the model's env). */
static const char *inside_value(const drv_rspec_t *sp, char *const *env, const char *var,
                                size_t n)
{
    if (n == 16 && memcmp(var, "DROVER_MODEL_DIR", 16) == 0)
        return *sp->model_dir ? DRV_CTR_MODEL_DIR : NULL;
    for (char *const *p = env; *p; p++) {
        if (strncmp(*p, var, n) != 0 || (*p)[n] != '=')
            continue;
        if (n == 21 && memcmp(var, "DROVER_CHECKPOINT_DIR", 21) == 0)
            return DRV_CTR_CKPT_DIR;
        bool model_key = false;
        for (size_t i = 0; i < sp->envc && !model_key; i++)
            model_key = strncmp(sp->env[i], var, n) == 0 && sp->env[i][n] == '=';
        return model_key || contract_key(*p) ? *p + n + 1 : NULL;
    }
    return NULL;
}

char *drv_ctr_expand(const drv_rspec_t *sp, char *const *env, const char *s)
{
    size_t cap = strlen(s) + 1, len = 0;
    char *out = drv_xmalloc(cap);
    for (const char *p = s; *p;) {
        const char *val = NULL;
        size_t skip = 1;
        if (p[0] == '$' && p[1] == '$' && p[2] == '(') {   /* $$(X): a literal $(X) */
            val = "$(";
            skip = 3;
        } else if (p[0] == '$' && p[1] == '(') {
            size_t n = strspn(p + 2, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                     "0123456789_");
            if (n > 0 && p[2 + n] == ')' && (val = inside_value(sp, env, p + 2, n)))
                skip = n + 3;
        }
        size_t vl = val ? strlen(val) : 1;
        if (len + vl + 1 > cap) {
            cap = 2 * (len + vl + 1);
            char *o2 = realloc(out, cap);
            if (!o2)
                abort();
            out = o2;
        }
        memcpy(out + len, val ? val : p, vl);
        len += vl;
        p += skip;
    }
    out[len] = '\0';
    return out;
}

void drv_ctr_expand_env(const drv_rspec_t *sp, char **env)
{
    for (char **p = env; *p; p++) {
        if (!strstr(*p, "$("))
            continue;
        char *eq = strchr(*p, '=');
        if (!eq)
            continue;
        char *v = drv_ctr_expand(sp, env, eq + 1);
        char *kv = NULL;
        if (asprintf(&kv, "%.*s=%s", (int)(eq - *p), *p, v) < 0)
            abort();
        free(v);
        free(*p);
        *p = kv;
    }
}

char **drv_ctr_argv(const drv_ctr_run_t *cr, const drv_rspec_t *sp, int port, char *why,
                    size_t wl)
{
    bool podman = strcmp(cr->engine, "podman") == 0;
    if (*sp->gpu_uuids && podman && !drv_ctr_cdi_has_gpus(cr->cdi_dirs)) {
        snprintf(why, wl, "its container wants GPUs %s and no CDI spec names nvidia.com/gpu "
                 "(in %s; generate one with `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`)",
                 sp->gpu_uuids, cr->cdi_dirs && *cr->cdi_dirs ? cr->cdi_dirs : "/etc/cdi:/var/run/cdi");
        return NULL;
    }
    struct argv_b b = {0};
    int grace_s = cr->grace_ms / 1000 - 1;   /* the supervisor SIGKILLs the script at grace_ms */
    add(&b, "/bin/sh");
    add(&b, "-c");
    add(&b, "%s", script);
    add(&b, "drover-container");
    add(&b, "%s", cr->engine);
    add(&b, "drover-%s", sp->id);
    add(&b, "%s", sp->image);
    add(&b, "%s", sp->pull_policy && *sp->pull_policy ? sp->pull_policy : "if_not_present");
    add(&b, "%d", grace_s > 0 ? grace_s : 0);
    add(&b, "%s/%s.port", cr->state_dir, sp->id);
    add(&b, "%d", cr->adopt ? 1 : 0);
    char authdir[4200] = "";
    if (sp->registry && drv_ctr_write_auth(cr->state_dir, sp->id, sp->registry, sp->registry_user,
                                           sp->registry_password, authdir, sizeof authdir, why,
                                           wl) < 0) {
        drv_rspec_strv_free(b.v);
        return NULL;
    }
    add(&b, "%s", authdir);
    /* the arguments of run -d */
    add(&b, "--network=host");
    add(&b, "--label=drover.replica=%s", sp->id);
    if (sp->job)   /* a job's worker */
        add(&b, "--label=drover.job=%s", sp->job);
    else
        add(&b, "--label=drover.deployment=%s", sp->deployment);
    add(&b, "--label=drover.node=%s", cr->node ? cr->node : "");
    add(&b, "--label=drover.port=%d", port);
    if (podman)
        add(&b, "--log-driver=k8s-file");
    ulimits(&b);
    if (sp->cpu_millis > 0)
        add(&b, "--cpus=%lld.%03lld", (long long)sp->cpu_millis / 1000,
            (long long)sp->cpu_millis % 1000);
    if (sp->memory_mib > 0)
        add(&b, "--memory=%lldm", (long long)sp->memory_mib);
    if (sp->ipc_host || (sp->mem_mib > 0 && sp->mps_pipe))   /* MPS: its daemon's shared memory */
        add(&b, "--ipc=host");
    if (sp->shm_mib > 0)
        add(&b, "--shm-size=%dm", sp->shm_mib);
    /* the contract: values come from the script's own environment
     * (drv_rspec_env), so `-e KEY` passes them without putting them in argv */
    char **env = drv_rspec_env(NULL, sp, port);
    const char *ckpt = NULL;   /* the host's checkpoint directory: the storage layer's or local */
    for (char **p = env; *p && !ckpt; p++)
        if (strncmp(*p, "DROVER_CHECKPOINT_DIR=", 22) == 0 && (*p)[22])
            ckpt = *p + 22;
    for (char **p = env; *p; p++) {
        if (strncmp(*p, "DROVER_CHECKPOINT_DIR=", 22) == 0)
            continue;   /* its path inside is set below */
        bool model_key = false;
        for (size_t i = 0; i < sp->envc && !model_key; i++) {
            size_t kl = strcspn(sp->env[i], "=");
            model_key = strncmp(*p, sp->env[i], kl + 1) == 0;
        }
        if (model_key || contract_key(*p))
            add(&b, "--env=%.*s", (int)strcspn(*p, "="), *p);
    }
    if (ckpt) {   /* a job's (or a deployment's) checkpoints: read-write at a fixed path */
        add(&b, "--mount=type=bind,source=%s,destination=%s", ckpt, DRV_CTR_CKPT_DIR);
        add(&b, "--env=DROVER_CHECKPOINT_DIR=%s", DRV_CTR_CKPT_DIR);
    }
    if (sp->mem_mib > 0 && sp->mps_pipe) {   /* a compute share through the node's MPS daemon */
        add(&b, "--mount=type=bind,source=%s,destination=%s", sp->mps_pipe, sp->mps_pipe);
        add(&b, "--env=CUDA_MPS_PIPE_DIRECTORY=%s", sp->mps_pipe);
        if (sp->compute_pct > 0 && sp->compute_pct < 100)
            add(&b, "--env=CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d", sp->compute_pct);
    }
    drv_rspec_strv_free(env);
    if (sp->mem_mib > 0 && cr->gpushare && *cr->gpushare &&
        gpushare_args(&b, cr, sp, why, wl) < 0) {
        drv_rspec_strv_free(b.v);
        return NULL;
    }
    if (*sp->model_dir) {
        add(&b, "--mount=type=bind,source=%s,destination=%s,readonly", sp->model_dir,
            DRV_CTR_MODEL_DIR);   /* --mount: a path may hold ':' (not ',') */
        add(&b, "--env=DROVER_MODEL_DIR=%s", DRV_CTR_MODEL_DIR);
    }
    if (*sp->gpu_uuids) {
        char *u = drv_strdup(sp->gpu_uuids), *save = NULL;
        if (podman)
            for (char *t = strtok_r(u, ",", &save); t; t = strtok_r(NULL, ",", &save))
                add(&b, "--device=nvidia.com/gpu=%s", t);
        else
            add(&b, "--gpus=\"device=%s\"", sp->gpu_uuids);
        free(u);
    }
    char **inside = drv_rspec_env(NULL, sp, port);   /* $(VAR): the values inside */
    drv_ctr_expand_env(sp, inside);
    if (sp->entrypoint && sp->argc > 0) {
        char *e = drv_ctr_expand(sp, inside, sp->argv[0]);
        add(&b, "--entrypoint=%s", e);
        free(e);
    }
    add(&b, "%s", sp->image);
    for (size_t i = sp->entrypoint ? 1 : 0; i < sp->argc; i++) {
        char *e = drv_ctr_expand(sp, inside, sp->argv[i]);
        add(&b, "%s", e);
        free(e);
    }
    drv_rspec_strv_free(inside);
    return b.v;
}

int drv_ctr_phase(const char *buf, size_t n, int *blobs)
{
    int phase = 0;
    /* a layer: podman's "Copying blob sha256:…", docker's "377560874aab: Pull complete" */
    static const char pulling[] = "drover: pulling image ", copying[] = "Copying blob ",
                      done[] = ": Pull complete";
    for (const char *p = buf, *end = buf + n; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = (size_t)((nl ? nl : end) - p);
        if (len >= sizeof pulling - 1 && memcmp(p, pulling, sizeof pulling - 1) == 0)
            phase |= DRV_CTR_PHASE_PULLING;
        else if (len >= sizeof DRV_CTR_STARTED_MARK - 1 &&
                 memcmp(p, DRV_CTR_STARTED_MARK, sizeof DRV_CTR_STARTED_MARK - 1) == 0)
            phase |= DRV_CTR_PHASE_STARTED;
        else if ((len >= sizeof copying - 1 && memcmp(p, copying, sizeof copying - 1) == 0) ||
                 (len >= sizeof done - 1 && memcmp(p + len - (sizeof done - 1), done,
                                                   sizeof done - 1) == 0))
            ++*blobs;
        p += len + 1;
    }
    return phase;
}

int drv_ctr_saved_port(const char *state_dir, const char *id)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.port", state_dir, id);
    FILE *f = fopen(path, "re");
    int port = 0;
    if (f) {
        if (fscanf(f, "%d", &port) != 1 || port <= 0 || port > 65535)
            port = 0;
        fclose(f);
    }
    return port;
}

bool drv_ctr_exit_fatal(const drv_rspec_t *sp, int code, char *why, size_t wl)
{
    switch (code) {
    case DRV_CTR_EXIT_NO_IMAGE:
        snprintf(why, wl, "image %s is not on this node and its pull_policy is never", sp->image);
        return true;
    case DRV_CTR_EXIT_PULL:
        snprintf(why, wl, "pulling image %s failed (see drover logs)", sp->image);
        return false;
    case DRV_CTR_EXIT_RUN:
        snprintf(why, wl, "the container engine refused to run image %s (see drover logs)",
                 sp->image);
        return false;
    default:
        return false;
    }
}

int drv_ctr_sweep(const char *engine, const char *node, const char *state_dir,
                  const char *const *ids, size_t n)
{
    char filter[300], out[65536];
    snprintf(filter, sizeof filter, "label=drover.node=%s", node);
    char *argv[] = {(char *)engine, "ps", "-a", "--filter", filter, "--format", "{{.Names}}", NULL};
    if (capture(argv, out, sizeof out) != 0)
        return 0;
    int removed = 0;
    char *save = NULL;
    for (char *name = strtok_r(out, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
        if (strncmp(name, "drover-", 7) != 0)
            continue;
        const char *id = name + 7;
        bool keep = false;
        for (size_t i = 0; i < n && !keep; i++)
            keep = strcmp(ids[i], id) == 0;
        if (keep || !drv_rspec_id_ok(id))
            continue;
        drv_ctr_remove(engine, id);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.port", state_dir, id);
        unlink(path);
        removed++;
    }
    return removed;
}

void drv_ctr_remove(const char *engine, const char *id)
{
    char name[200];
    snprintf(name, sizeof name, "drover-%s", id);
    char *pargv[] = {(char *)engine, "rm", "-f", "-t", "0", name, NULL};   /* podman */
    char *dargv[] = {(char *)engine, "rm", "-f", name, NULL};              /* docker kills */
    char *const *use = strcmp(engine, "podman") == 0 ? pargv : dargv;
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        if (fork() != 0)
            _exit(0);   /* the grandchild is re-parented: nobody needs to reap it */
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
            dup2(nul, 2);
        }
        execvp(use[0], use);
        _exit(127);
    }
    if (pid > 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
}
