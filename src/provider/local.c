/* local.c — the `local` provider: each node is a drover-agent process on
 * the head's machine, in DATA_DIR/nodes/<owner>/<node>/, declaring the GPUs
 * of its instance type. Agents run in their own session, so they (and
 * their replicas) outlive a head crash; the head finds them again through
 * the pid file and /proc after a restart. Several heads (PostgreSQL): an
 * agent gets every head's URL, and a head that took over finds the agents
 * another head on this machine started (find_moved). Also the self-managed provider
 * (nothing to provision) and the table of providers (drv_provider_ops). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "provider/aws.h"
#include "provider/gcp.h"
#include "provider/oci.h"
#include "provider/slurm.h"
#include "provider/vultr.h"
#include "provider/provider.h"

static void node_dir(const drv_prov_env_t *env, const char *owner, const char *id, char *buf,
                     size_t len)
{
    snprintf(buf, len, "%s/nodes/%s/%s", env->data_dir, owner, id);
}

static int mkdirs(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    return mkdir(tmp, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

static int write_secret(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    int rc = (n == (ssize_t)strlen(text) && fsync(fd) == 0) ? 0 : -1;
    close(fd);
    return rc;
}

static int read_pid(const char *dir)
{
    char path[1100], buf[32];
    snprintf(path, sizeof path, "%s/agent.pid", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int pid = -1;
    if (fgets(buf, sizeof buf, f))
        pid = atoi(buf);
    fclose(f);
    return pid;
}

/* pid's command line (NUL-separated arguments) into cmd: its length, 0
 * when the process is gone (a zombie's is empty too). */
static size_t cmdline_of(int pid, char *cmd, size_t len)
{
    if (pid <= 0 || kill(pid, 0) < 0)
        return 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(cmd, 1, len - 1, f);
    fclose(f);
    cmd[n] = '\0';
    return n;
}

/* Is pid a drover-agent serving this node dir? (guards against pid reuse) */
static bool is_our_agent(int pid, const char *dir)
{
    char cmd[4096];
    size_t n = cmdline_of(pid, cmd, sizeof cmd);
    bool agent = false, ours = false;
    for (size_t i = 0; i < n; i += strlen(cmd + i) + 1) {
        if (strstr(cmd + i, "drover-agent"))
            agent = true;
        if (strcmp(cmd + i, dir) == 0)
            ours = true;
    }
    /* a zombie has an empty cmdline: not alive */
    return agent && ours;
}

static int local_create(const drv_prov_env_t *env, const drv_node_launch_t *l, drv_error_t *err)
{
    char dir[1024], path[1100], cpus[16], mem[32];
    node_dir(env, l->owner, l->node_id, dir, sizeof dir);
    if (mkdirs(dir) < 0)
        return drv_err_internal(err, "cannot create %s: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/credential", dir);
    if (write_secret(path, l->secret) < 0)
        return drv_err_internal(err, "cannot write %s", path);
    snprintf(path, sizeof path, "%s/node_id", dir);   /* the agent's cgroup parent's name */
    if (write_secret(path, l->node_id) < 0)
        return drv_err_internal(err, "cannot write %s", path);
    snprintf(path, sizeof path, "%s/agent.log", dir);
    int logfd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (logfd < 0)
        return drv_err_internal(err, "cannot open %s", path);
    snprintf(cpus, sizeof cpus, "%d", l->cpus);
    snprintf(mem, sizeof mem, "%lld", l->memory_mib);
    char servers[2048];   /* several heads: every one's, so that it outlives its head */
    snprintf(servers, sizeof servers, "%s", env->server_url);
    if (env->head_urls)
        env->head_urls(env->head_urls_ctx, servers, sizeof servers);
    const char *argv[] = {env->agent_bin, "--server", servers, "--data-dir", dir,
                          "--gpus", l->gpus, "--cpus", cpus, "--memory-mib", mem,
                          "--advertise-addr", "127.0.0.1",
                          env->ca_file[0] ? "--ca-file" : NULL, env->ca_file, NULL};
    pid_t pid = fork();
    if (pid < 0) {
        close(logfd);
        return drv_err_internal(err, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        /* child: only async-signal-safe calls until exec */
        setsid();
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(logfd, 1);
        dup2(logfd, 2);
        close_range(3, ~0U, 0);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(logfd);
    snprintf(path, sizeof path, "%s/agent.pid", dir);
    char pidtext[32];
    snprintf(pidtext, sizeof pidtext, "%d\n", (int)pid);
    write_secret(path, pidtext);
    drv_info("local provider: started drover-agent for node %s/%s (pid %d, gpus %s)", l->owner,
             l->node_id, (int)pid, l->gpus);
    return 0;
}

/* Is pid a drover-agent of a node dir ending in tail (another head's data
 * dir) given this head's URL among its --server list? */
static bool moved_agent(int pid, const drv_prov_env_t *env, const char *tail)
{
    char cmd[4096];
    size_t n = cmdline_of(pid, cmd, sizeof cmd), tl = strlen(tail);
    const char *prev = "";
    bool agent = false, node = false, server = false;
    for (size_t i = 0; i < n; i += strlen(cmd + i) + 1) {
        const char *a = cmd + i;
        size_t al = strlen(a);
        if (i == 0 && strstr(a, "drover-agent"))
            agent = true;
        if (strcmp(prev, "--data-dir") == 0 && al > tl && strcmp(a + al - tl, tail) == 0)
            node = true;
        if (strcmp(prev, "--server") == 0 && drv_list_has(a, env->server_url, strlen(env->server_url)))
            server = true;
        prev = a;
    }
    return agent && node && server;
}

/* Several heads on one machine: the agent of node owner/id another head
 * started (its node dir is under that head's data dir), given this head's
 * URL among its --server list. Its pid is kept in this head's node dir:
 * /proc is scanned once. -1: none. */
static int find_moved(const drv_prov_env_t *env, const char *owner, const char *id,
                      const char *dir)
{
    if (!env->head_urls)
        return -1;   /* one head: its agents are in its own data dir */
    char tail[300];
    snprintf(tail, sizeof tail, "/nodes/%s/%s", owner, id);
    int pid = read_pid(dir);
    if (moved_agent(pid, env, tail))
        return pid;
    DIR *d = opendir("/proc");
    struct dirent *e;
    int found = -1;
    while (d && found < 0 && (e = readdir(d))) {
        pid = atoi(e->d_name);
        if (moved_agent(pid, env, tail))
            found = pid;
    }
    if (d)
        closedir(d);
    if (found > 0 && mkdirs(dir) == 0) {
        char path[1100], pidtext[32];
        snprintf(path, sizeof path, "%s/agent.pid", dir);
        snprintf(pidtext, sizeof pidtext, "%d\n", found);
        write_secret(path, pidtext);
        drv_info("local provider: node %s/%s's drover-agent (pid %d) was started by another "
                 "head; adopted", owner, id, found);
    }
    return found;
}

/* The pid of node owner/id's agent, -1 when none runs. */
static int agent_of(const drv_prov_env_t *env, const char *owner, const char *id,
                    const char *dir)
{
    int pid = read_pid(dir);
    if (is_our_agent(pid, dir))
        return pid;
    return find_moved(env, owner, id, dir);
}

static int local_delete(const drv_prov_env_t *env, const char *owner, const char *id,
                        drv_error_t *err)
{
    char dir[1024];
    node_dir(env, owner, id, dir, sizeof dir);
    int pid = agent_of(env, owner, id, dir);
    if (pid > 0) {
        kill(pid, SIGTERM);
        drv_info("local provider: stopping drover-agent of node %s/%s (pid %d)", owner, id, pid);
    }
    return 0;
}

static bool local_alive(const drv_prov_env_t *env, const char *owner, const char *id)
{
    char dir[1024];
    node_dir(env, owner, id, dir, sizeof dir);
    return agent_of(env, owner, id, dir) > 0;
}

static const drv_provider_ops_t local_ops = {
    .name = "local",
    .provisions = true,
    .create_node = local_create,
    .delete_node = local_delete,
    .alive = local_alive,
};

static int sm_delete(const drv_prov_env_t *env, const char *owner, const char *id,
                     drv_error_t *err)
{
    return 0;   /* the operator owns the machine; its agent learns at its next sync */
}

static bool sm_alive(const drv_prov_env_t *env, const char *owner, const char *id)
{
    return false;   /* unknown: lifecycle goes by syncs alone */
}

static const drv_provider_ops_t self_managed_ops = {
    .name = "self-managed",
    .provisions = false,
    .delete_node = sm_delete,
    .alive = sm_alive,
};

const char *drv_prov_class_name(drv_prov_class_t c)
{
    static const char *const names[] = {"ok", "retry", "fallback", "give_up"};
    return (unsigned)c < 4 ? names[c] : "?";
}

const drv_provider_ops_t *drv_provider_ops(const char *provider)
{
    if (provider && strcmp(provider, "local") == 0)
        return &local_ops;
    if (provider && strcmp(provider, "aws") == 0)
        return &drv_aws_ops;
    if (provider && strcmp(provider, "gcp") == 0)
        return &drv_gcp_ops;
    if (provider && strcmp(provider, "vultr") == 0)
        return &drv_vultr_ops;
    if (provider && strcmp(provider, "oracle") == 0)
        return &drv_oci_ops;
    if (provider && strcmp(provider, "slurm") == 0)
        return &drv_slurm_ops;
    return &self_managed_ops;
}
