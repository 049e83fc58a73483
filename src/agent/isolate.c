/* isolate.c — see isolate.h: cgroups (v2 or v1) per replica under the
 * agent's parent, the replica user and its private working directory, and
 * the OOM count that tells a cgroup OOM kill from any other SIGKILL.
 *
 * Hierarchies: /proc/self/mountinfo names the cgroup2 mount (its
 * cgroup.controllers says which controllers it has) and the v1 mounts
 * (their mount options name their controllers). Each of memory, cpu and
 * pids is taken from v2 when v2 has it, else from the v1 mount that has it;
 * a replica joins every hierarchy that holds one of them (on a v1 host:
 * three). A replica's cgroup is created afresh at each start (so its OOM
 * count starts at zero) and removed when its process is reaped.
 *
 * Every cgroupfs mkdir, rmdir and write goes through cg_mkdir, cg_rmdir and
 * put, so that a unit test can run all of this on a fake tree
 * (drv_iso_opts_t.fs); reads are plain file reads either way.
 */
#define _GNU_SOURCE
#include "agent/isolate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#define DEFAULT_USER "drover-replica"
#define DEFAULT_PIDS_MAX 4096
#define CPU_PERIOD_US 100000
#define STALE_WAIT_MS 1000       /* at start: stale cgroups' processes to die */
#define EXIT_WAIT_MS 50          /* after a reap: the rest of the group (SIGKILLed) to die */

enum { C_MEM, C_CPU, C_PIDS, C_N };
static const char *const ctrl_names[C_N] = {"memory", "cpu", "pids"};

struct hier {
    int ver;                     /* 1 or 2 */
    char mnt[256];
    unsigned ctrls;              /* the controllers taken from it (1 << C_*) */
    char parent[320];            /* mnt/cgroup_parent */
    bool ok;                     /* parent exists */
    char ctl_why[C_N][256];      /* v2: why the controller could not be enabled on the way
                                    to the parent (its replicas' limit: not enforced) */
};

struct drv_iso {
    struct hier h[DRV_ISO_MAXH];
    int nh;
    int of[C_N];                 /* index into h, -1: none */
    char why[C_N][256];          /* of[c] < 0 or !h[of[c]].ok: why */
    char parent_rel[256];
    bool sweep;                  /* the default parent: empty siblings under drover/ are
                                    dead agents' (never done under a parent one names) */
    int pids_max;
    bool user_on;
    uid_t uid;
    gid_t gid;
    char user[64], user_why[256];
    char data_dir[4096];
    char summary[1024];
};

const char *drv_iso_name(int limit)
{
    static const char *const names[DRV_ISO_N] = {"memory", "cpu", "pids", "user", "workdir"};
    return limit >= 0 && limit < DRV_ISO_N ? names[limit] : "?";
}

json_t *drv_iso_report_json(const drv_iso_report_t *r)
{
    json_t *o = json_object();
    if (r->cgroup[0])
        json_object_set_new(o, "cgroup", json_string(r->cgroup));
    for (int l = 0; l < DRV_ISO_N; l++) {
        const drv_iso_limit_t *m = &r->lim[l];
        json_t *e = m->enforced ? json_pack("{s:b, s:s}", "enforced", 1, "value", m->value)
                                : json_pack("{s:b, s:s}", "enforced", 0, "reason", m->reason);
        if (m->enforced && m->file[0])
            json_object_set_new(e, l == DRV_ISO_WORKDIR ? "path" : "file", json_string(m->file));
        json_object_set_new(o, drv_iso_name(l), e);
    }
    return o;
}

/* --- small file helpers ---------------------------------------------------- */

/* The cgroupfs: the kernel's, or a test's fake (drv_iso_opts_t.fs). */
static const drv_iso_fs_t *fs;

static int cg_mkdir(const char *path, mode_t mode)
{
    return fs && fs->mkdir ? fs->mkdir(path, mode) : mkdir(path, mode);
}

static int cg_rmdir(const char *path)
{
    return fs && fs->rmdir ? fs->rmdir(path) : rmdir(path);
}

/* Write text to dir/name: 0, or -1 with errno. */
static int put(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (fs && fs->write)
        return fs->write(p, text);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int e = errno;
    close(fd);
    if (w != (ssize_t)n) {
        errno = w < 0 ? e : EIO;
        return -1;
    }
    return 0;
}

static bool exists(const char *dir, const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* "oom_kill N" of memory.events (v2) or memory.oom_control (v1); -1: none */
static long long read_oom(const char *file)
{
    FILE *f = file[0] ? fopen(file, "re") : NULL;
    if (!f)
        return -1;
    char line[128];
    long long n = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "oom_kill ", 9) == 0)
            n = atoll(line + 9);
    fclose(f);
    return n;
}

/* fn(child, arg) for each child cgroup (directory) of dir but skip. */
static void each_child(const char *dir, const char *skip, void (*fn)(const char *, void *),
                       void *arg)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.' || (skip && strcmp(e->d_name, skip) == 0))
            continue;
        char sub[512];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        fn(sub, arg);
    }
    if (d)
        closedir(d);
}

static int kill_remove(const char *dir, int wait_ms);

static void kill_remove_child(const char *dir, void *wait_ms)
{
    kill_remove(dir, *(int *)wait_ms);
}

/* Kill every process in the cgroup dir (and in its children), then remove
 * it, waiting up to wait_ms for them to go. 0, or -1 (it stays). */
static int kill_remove(const char *dir, int wait_ms)
{
    if (access(dir, F_OK) < 0)
        return errno == ENOENT ? 0 : -1;
    each_child(dir, NULL, kill_remove_child, &wait_ms);
    for (int waited = 0;; waited += 5) {
        if (exists(dir, "cgroup.kill"))
            put(dir, "cgroup.kill", "1");
        char p[512];
        snprintf(p, sizeof p, "%s/cgroup.procs", dir);
        FILE *f = fopen(p, "re");
        if (f) {
            long pid;
            while (fscanf(f, "%ld", &pid) == 1)
                if (pid > 1 && pid != (long)getpid())
                    kill((pid_t)pid, SIGKILL);
            fclose(f);
        }
        if (cg_rmdir(dir) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY || waited >= wait_ms)
            return -1;
        sleep_ms(5);
    }
}

static int mkdirs(const char *path, mode_t mode)
{
    char p[512];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (cg_mkdir(p, mode) < 0 && errno != EEXIST)
                return -1;
            *s = '/';
        }
    return cg_mkdir(p, mode) < 0 && errno != EEXIST ? -1 : 0;
}

/* --- hierarchies ------------------------------------------------------------- */

static bool has_token(const char *list, const char *tok, const char *seps)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *t = strtok_r(buf, seps, &save); t; t = strtok_r(NULL, seps, &save))
        if (strcmp(t, tok) == 0)
            return true;
    return false;
}

static int add_hier(drv_iso_t *iso, int ver, const char *mnt)
{
    for (int i = 0; i < iso->nh; i++)
        if (strcmp(iso->h[i].mnt, mnt) == 0)
            return i;
    if (iso->nh == DRV_ISO_MAXH)
        return -1;
    struct hier *h = &iso->h[iso->nh];
    h->ver = ver;
    snprintf(h->mnt, sizeof h->mnt, "%s", mnt);
    return iso->nh++;
}

/* Fill iso->of from /proc/self/mountinfo (or a test's). */
static void find_hierarchies(drv_iso_t *iso, const char *sysfs)
{
    char v2[256] = "", v1[C_N][256] = {"", "", ""}, v2ctl[512] = "";
    FILE *f = fopen(fs && fs->mountinfo ? fs->mountinfo : "/proc/self/mountinfo", "re");
    char line[2048];
    while (f && fgets(line, sizeof line, f)) {
        char *sep = strstr(line, " - ");
        if (!sep)
            continue;
        char mnt[256], fstype[32], src[64], opts[512] = "";
        if (sscanf(line, "%*s %*s %*s %*s %255s", mnt) != 1 ||
            sscanf(sep + 3, "%31s %63s %511s", fstype, src, opts) < 2)
            continue;
        if (sysfs && strncmp(mnt, sysfs, strlen(sysfs)) != 0)
            continue;
        if (strcmp(fstype, "cgroup2") == 0 && !v2[0]) {
            snprintf(v2, sizeof v2, "%s", mnt);
            char p[300];
            snprintf(p, sizeof p, "%s/cgroup.controllers", mnt);
            FILE *c = fopen(p, "re");
            if (c) {
                if (!fgets(v2ctl, sizeof v2ctl, c))
                    v2ctl[0] = '\0';
                v2ctl[strcspn(v2ctl, "\n")] = '\0';
                fclose(c);
            }
        } else if (strcmp(fstype, "cgroup") == 0) {
            for (int c = 0; c < C_N; c++)
                if (!v1[c][0] && has_token(opts, ctrl_names[c], ","))
                    snprintf(v1[c], sizeof v1[c], "%s", mnt);
        }
    }
    if (f)
        fclose(f);
    for (int c = 0; c < C_N; c++) {
        iso->of[c] = -1;
        if (v2[0] && has_token(v2ctl, ctrl_names[c], " "))
            iso->of[c] = add_hier(iso, 2, v2);
        else if (v1[c][0])
            iso->of[c] = add_hier(iso, 1, v1[c]);
        if (iso->of[c] >= 0)
            iso->h[iso->of[c]].ctrls |= 1u << c;
        else
            snprintf(iso->why[c], sizeof iso->why[c], "this host has no %s cgroup controller "
                     "(neither in cgroup v2%s%s nor mounted as v1)", ctrl_names[c],
                     v2[0] ? " at " : "", v2);
    }
}

/* Whether v2 cgroup dir already enables ctrl for its children. */
static bool enabled(const char *dir, const char *ctrl)
{
    char p[512], line[512] = "";
    snprintf(p, sizeof p, "%s/cgroup.subtree_control", dir);
    FILE *f = fopen(p, "re");
    if (!f)
        return false;
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f);
    return has_token(line, ctrl, " \n");
}

/* Create h's parent (again, when another agent's sweep took it while it
 * was empty); on v2 enable its controllers from the root down. 0, or -1
 * with why. */
static int ensure_parent(const drv_iso_t *iso, struct hier *h, char *why, size_t wl)
{
    if (mkdirs(h->parent, 0755) < 0) {
        snprintf(why, wl, "cannot create cgroup %s: %s%s", h->parent, strerror(errno),
                 geteuid() ? " (the agent is not root)" : "");
        return -1;
    }
    if (h->ver != 2)
        return 0;
    char lvl[512], bad[256] = "";
    snprintf(lvl, sizeof lvl, "%s", h->mnt);
    memset(h->ctl_why, 0, sizeof h->ctl_why);
    const char *rest = iso->parent_rel;
    for (;;) {   /* each level from the root to the parent: +ctrl in its subtree_control */
        for (int c = 0; c < C_N; c++) {
            char tok[16];
            snprintf(tok, sizeof tok, "+%s", ctrl_names[c]);
            if (!(h->ctrls & (1u << c)) || h->ctl_why[c][0] ||
                put(lvl, "cgroup.subtree_control", tok) == 0)
                continue;
            int e = errno;
            if (enabled(lvl, ctrl_names[c]))
                continue;   /* refused (read-only, delegated) but already on: fine */
            snprintf(h->ctl_why[c], sizeof h->ctl_why[c], "cannot enable %s in "
                     "%s/cgroup.subtree_control: %s%s", ctrl_names[c], lvl, strerror(e),
                     e == EBUSY ? " (that cgroup holds processes: cgroup v2 lets only a "
                     "cgroup without processes hand controllers to its children)" : "");
            if (!bad[0])
                snprintf(bad, sizeof bad, "%s", h->ctl_why[c]);
        }
        if (!*rest)
            break;
        size_t k = strcspn(rest, "/");
        size_t l = strlen(lvl);
        snprintf(lvl + l, sizeof lvl - l, "/%.*s", (int)k, rest);
        rest += k + (rest[k] == '/');
    }
    if (bad[0])   /* the children lack the controller's files: reported per replica */
        drv_warn("isolation: %s", bad);
    return 0;
}

/* Remove dir and the cgroups under it when no process is in any (rmdir
 * refuses one that has processes): never kills. A cgroup made less than
 * SWEEP_MIN_AGE_S ago stays (and so its parents): it may be a live agent's
 * replica between its mkdir and its process joining, an empty cgroup whose
 * removal would fail that start ("isolation: joining its cgroup", exit 125;
 * seen with agents of two suites starting beside each other). */
#define SWEEP_MIN_AGE_S 60

static void remove_empty(const char *dir, void *unused)
{
    struct stat sb;
    if (stat(dir, &sb) == 0 && time(NULL) - sb.st_mtime < SWEEP_MIN_AGE_S)
        return;
    each_child(dir, NULL, remove_empty, unused);
    cg_rmdir(dir);
}

/* A cgroup of this agent's previous run. */
static void remove_stale(const char *dir, void *unused)
{
    (void)unused;
    if (kill_remove(dir, STALE_WAIT_MS) == 0)
        drv_info("isolation: removed stale cgroup %s", dir);
    else
        drv_warn("isolation: cannot remove stale cgroup %s: %s", dir, strerror(errno));
}

/* Create h's parent, kill what a previous run of this agent left in it, and
 * remove the empty parents of agents that died without removing theirs. */
static void make_parent(drv_iso_t *iso, struct hier *h)
{
    char parent[sizeof h->parent];   /* built apart: gcc -O1 -fsanitize=address
                                        cannot tell h->parent from h->mnt (-Wrestrict) */
    snprintf(parent, sizeof parent, "%s/%s", h->mnt, iso->parent_rel);
    memcpy(h->parent, parent, sizeof parent);
    char why[256] = "";
    ensure_parent(iso, h, why, sizeof why);
    h->ok = !why[0];
    for (int c = 0; c < C_N && !h->ok; c++)
        if (h->ctrls & (1u << c))
            snprintf(iso->why[c], sizeof iso->why[c], "%s", why);
    if (!h->ok)
        return;
    /* a previous run's replicas (they die with their agent; what they started may not have) */
    each_child(h->parent, NULL, remove_stale, NULL);
    char up[512];   /* siblings: other agents' parents; only the empty ones go */
    snprintf(up, sizeof up, "%s", h->parent);
    char *slash = strrchr(up, '/');
    if (!iso->sweep || !slash || slash <= up + strlen(h->mnt))
        return;
    *slash = '\0';
    each_child(up, slash + 1, remove_empty, NULL);
}

/* --- the replica user ----------------------------------------------------------- */

static bool lookup(const char *name, uid_t *uid, gid_t *gid)
{
    char buf[4096];
    struct passwd pw, *res = NULL;
    if (getpwnam_r(name, &pw, buf, sizeof buf, &res) != 0 || !res)
        return false;
    *uid = pw.pw_uid;
    *gid = pw.pw_gid;
    return true;
}

/* useradd --system NAME; true when NAME exists afterwards. */
static bool create_user(const char *name, uid_t *uid, gid_t *gid)
{
    for (int attempt = 0; attempt < 5; attempt++) {   /* agents starting at once race on
                                                         /etc/passwd's lock */
        pid_t pid = fork();
        if (pid == 0) {
            int nul = open("/dev/null", O_RDWR);
            if (nul >= 0) {
                dup2(nul, 1);
                dup2(nul, 2);
            }
            execlp("useradd", "useradd", "--system", "--no-create-home", "--home-dir",
                   "/nonexistent", "--shell", "/usr/sbin/nologin", "--user-group", name,
                   (char *)NULL);
            _exit(127);
        }
        int st = 0;
        if (pid > 0)
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (lookup(name, uid, gid))
            return true;
        if (pid < 0 || (WIFEXITED(st) && WEXITSTATUS(st) == 127))
            return false;   /* no useradd */
        sleep_ms(100);
    }
    return false;
}

/* Whether uid/gid can search every directory down to (and including) dir;
 * false with the first one that stops it in why. */
static bool reachable(const char *dir, uid_t uid, gid_t gid, char *why, size_t wl)
{
    char real[PATH_MAX];
    if (!realpath(dir, real)) {
        snprintf(why, wl, "%s: %s", dir, strerror(errno));
        return false;
    }
    size_t n = strlen(real);
    for (size_t i = 1; i <= n; i++) {
        if (real[i] != '/' && real[i] != '\0')
            continue;
        char c = real[i];
        real[i] = '\0';
        struct stat sb;
        bool ok = stat(real, &sb) == 0 &&
                  ((sb.st_uid == uid && (sb.st_mode & S_IXUSR)) ||
                   (sb.st_gid == gid && (sb.st_mode & S_IXGRP)) || (sb.st_mode & S_IXOTH));
        if (!ok) {
            snprintf(why, wl, "%s (mode %04o, owner uid %d) is closed to it", real,
                     (unsigned)(sb.st_mode & 07777), (int)sb.st_uid);
            return false;
        }
        real[i] = c;
    }
    return true;
}

static void resolve_user(drv_iso_t *iso, const char *want)
{
    iso->user_on = false;
    if (geteuid() != 0) {
        snprintf(iso->user_why, sizeof iso->user_why, "the agent is not root (uid %d): replicas "
                 "run as its user", (int)geteuid());
        return;
    }
    if (want && (!*want || strcmp(want, "root") == 0)) {
        snprintf(iso->user_why, sizeof iso->user_why, "--replica-user '%s': replicas run as "
                 "root", want);
        drv_warn("isolation: replicas run as root (--replica-user '%s')", want);
        return;
    }
    const char *name = want ? want : DEFAULT_USER;
    bool found = lookup(name, &iso->uid, &iso->gid);
    if (!found && !want && create_user(name, &iso->uid, &iso->gid)) {
        drv_info("isolation: created the system user %s (uid %d)", name, (int)iso->uid);
        found = true;
    }
    if (!found && !want && lookup("nobody", &iso->uid, &iso->gid)) {
        name = "nobody";
        found = true;
    }
    if (!found || iso->uid == 0) {
        snprintf(iso->user_why, sizeof iso->user_why, "%s: replicas run as root",
                 found ? "the replica user is uid 0" : "no drover-replica user (useradd failed) "
                 "and no nobody");
        return;
    }
    snprintf(iso->user, sizeof iso->user, "%s", name);
    /* the data dir: searchable by others (no listing; its secrets are 0600 files) */
    struct stat sb;
    if (stat(iso->data_dir, &sb) == 0 && !(sb.st_mode & S_IXOTH))
        chmod(iso->data_dir, (sb.st_mode & 07777) | S_IXOTH);
    char why[200];
    if (!reachable(iso->data_dir, iso->uid, iso->gid, why, sizeof why)) {
        snprintf(iso->user_why, sizeof iso->user_why, "user %s cannot reach the data dir: %s; "
                 "replicas run as root", name, why);
        drv_warn("isolation: %s", iso->user_why);
        return;
    }
    iso->user_on = true;
}

/* --- the context --------------------------------------------------------------- */

drv_iso_t *drv_iso_create(const drv_iso_opts_t *o, drv_error_t *err)
{
    drv_iso_t *iso = calloc(1, sizeof *iso);
    if (!iso)
        abort();
    fs = o->fs;
    iso->pids_max = o->pids_max ? o->pids_max : DEFAULT_PIDS_MAX;
    snprintf(iso->data_dir, sizeof iso->data_dir, "%s", o->data_dir ? o->data_dir : ".");
    if (o->user && *o->user && strcmp(o->user, "root") != 0) {
        uid_t u;
        gid_t g;
        if (!lookup(o->user, &u, &g)) {
            drv_err_invalid(err, "replica-user", "--replica-user: there is no user '%s'",
                            o->user);
            free(iso);
            return NULL;
        }
    }
    char defp[256], real[PATH_MAX], hash[65];
    if (!o->cgroup_parent) {
        const char *dd = realpath(iso->data_dir, real) ? real : iso->data_dir;
        drv_sha256_hex(dd, strlen(dd), hash);
        snprintf(defp, sizeof defp, "drover/%s.%.8s",
                 o->node_id && *o->node_id ? o->node_id : "node", hash);
    }
    const char *rel = o->cgroup_parent ? o->cgroup_parent : defp;
    iso->sweep = !o->cgroup_parent;
    while (*rel == '/')
        rel++;
    snprintf(iso->parent_rel, sizeof iso->parent_rel, "%s", rel);
    size_t l = strlen(iso->parent_rel);
    while (l && iso->parent_rel[l - 1] == '/')
        iso->parent_rel[--l] = '\0';
    if (!iso->parent_rel[0]) {
        for (int c = 0; c < C_N; c++) {
            iso->of[c] = -1;
            snprintf(iso->why[c], sizeof iso->why[c], "cgroups are off (--cgroup-parent '')");
        }
    } else {
        find_hierarchies(iso, o->sysfs);
        for (int i = 0; i < iso->nh; i++)
            make_parent(iso, &iso->h[i]);
    }
    resolve_user(iso, o->user);
    size_t off = 0;
    off += (size_t)snprintf(iso->summary, sizeof iso->summary, "isolation:");
    for (int c = 0; c < C_N && off < sizeof iso->summary; c++) {
        const struct hier *h = iso->of[c] >= 0 ? &iso->h[iso->of[c]] : NULL;
        if (h && h->ok)
            off += (size_t)snprintf(iso->summary + off, sizeof iso->summary - off,
                                    " %s in cgroup v%d %s;", ctrl_names[c], h->ver, h->parent);
        else
            off += (size_t)snprintf(iso->summary + off, sizeof iso->summary - off,
                                    " %s not enforced (%s);", ctrl_names[c], iso->why[c]);
    }
    if (off < sizeof iso->summary) {
        if (iso->user_on)
            snprintf(iso->summary + off, sizeof iso->summary - off, " replicas run as %s "
                     "(uid %d)", iso->user, (int)iso->uid);
        else
            snprintf(iso->summary + off, sizeof iso->summary - off, " user not enforced (%s)",
                     iso->user_why);
    }
    return iso;
}

void drv_iso_destroy(drv_iso_t *iso)
{
    if (!iso)
        return;
    for (int i = 0; i < iso->nh; i++) {
        struct hier *h = &iso->h[i];
        if (!h->ok)
            continue;
        if (kill_remove(h->parent, EXIT_WAIT_MS) < 0)
            drv_warn("isolation: cannot remove cgroup %s: %s", h->parent, strerror(errno));
        /* the levels above (shared with other agents): only when empty */
        char p[512];
        snprintf(p, sizeof p, "%s", h->parent);
        for (char *s = strrchr(p, '/'); s && s > p + strlen(h->mnt); s = strrchr(p, '/')) {
            *s = '\0';
            if (cg_rmdir(p) < 0)
                break;
        }
    }
    free(iso);
}

const char *drv_iso_summary(const drv_iso_t *iso)
{
    return iso->summary;
}

/* --- one replica ------------------------------------------------------------------ */

static void not_enforced(drv_iso_limit_t *l, const char *fmt, const char *a)
{
    l->enforced = false;
    snprintf(l->reason, sizeof l->reason, fmt, a);
}

static void enforced(drv_iso_limit_t *l, const char *dir, const char *file)
{
    l->enforced = true;
    l->reason[0] = '\0';
    if (file)
        snprintf(l->file, sizeof l->file, "%s/%s", dir, file);
}

/* Write one limit file; false (the reason in l) when it is refused. */
static bool limit(drv_iso_limit_t *l, const char *dir, const char *file, const char *val)
{
    if (put(dir, file, val) == 0)
        return true;
    char what[400];
    snprintf(what, sizeof what, "writing '%s' to %s/%s: %s", val, dir, file, strerror(errno));
    not_enforced(l, "%s", what);
    return false;
}

static void set_memory(const struct hier *h, const char *dir, int64_t mib, drv_iso_limit_t *l)
{
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)mib << 20);
    const char *file = h->ver == 2 ? "memory.max" : "memory.limit_in_bytes";
    if (!limit(l, dir, file, v))
        return;
    const char *swap = h->ver == 2 ? "memory.swap.max" : "memory.memsw.limit_in_bytes";
    bool swap_off = exists(dir, swap) && put(dir, swap, h->ver == 2 ? "0" : v) == 0;
    if (h->ver == 2)
        put(dir, "memory.oom.group", "1");   /* an OOM kill takes the whole replica */
    enforced(l, dir, file);
    snprintf(l->value, sizeof l->value, "%lld MiB%s", (long long)mib,
             swap_off ? ", swap off" : " (swap not limited: this kernel has no swap accounting)");
}

static void set_cpu(const struct hier *h, const char *dir, int64_t millis, drv_iso_limit_t *l)
{
    long long quota = (long long)millis * CPU_PERIOD_US / 1000;
    if (quota < 1000)
        quota = 1000;   /* the kernel's least */
    char v[64];
    if (h->ver == 2) {
        snprintf(v, sizeof v, "%lld %d", quota, CPU_PERIOD_US);
        if (!limit(l, dir, "cpu.max", v))
            return;
        enforced(l, dir, "cpu.max");
    } else {
        snprintf(v, sizeof v, "%d", CPU_PERIOD_US);
        if (!limit(l, dir, "cpu.cfs_period_us", v))
            return;
        snprintf(v, sizeof v, "%lld", quota);
        if (!limit(l, dir, "cpu.cfs_quota_us", v))
            return;
        enforced(l, dir, "cpu.cfs_quota_us");
    }
    snprintf(l->value, sizeof l->value, "%lldm (%lld us per %d us)", (long long)millis, quota,
             CPU_PERIOD_US);
}

static void workdir(const drv_iso_t *iso, const char *id, drv_iso_proc_t *p)
{
    drv_iso_limit_t *l = &p->rep.lim[DRV_ISO_WORKDIR];
    char base[4150];
    snprintf(base, sizeof base, "%s/work", iso->data_dir);
    snprintf(p->workdir, sizeof p->workdir, "%s/%s", base, id);
    if ((mkdir(base, 0711) < 0 && errno != EEXIST) || chmod(base, 0711) < 0 ||
        (mkdir(p->workdir, 0700) < 0 && errno != EEXIST) || chmod(p->workdir, 0700) < 0 ||
        (iso->user_on && chown(p->workdir, iso->uid, iso->gid) < 0)) {
        char what[300];
        snprintf(what, sizeof what, "%s: %s", p->workdir, strerror(errno));
        not_enforced(l, "cannot make the private working directory %s", what);
        p->workdir[0] = '\0';
        return;
    }
    enforced(l, "", NULL);
    snprintf(l->value, sizeof l->value, "%s", id);
    snprintf(l->file, sizeof l->file, "%s", p->workdir);
}

void drv_iso_prepare(drv_iso_t *iso, const char *id, int64_t memory_mib, int64_t cpu_millis,
                     drv_iso_proc_t *p)
{
    memset(p, 0, sizeof *p);
    snprintf(p->id, sizeof p->id, "%s", id);
    p->rep.set = true;
    drv_iso_limit_t *lim = p->rep.lim;
    if (iso->user_on) {
        p->set_user = true;
        p->uid = iso->uid;
        p->gid = iso->gid;
        enforced(&lim[DRV_ISO_USER], "", NULL);
        snprintf(lim[DRV_ISO_USER].value, sizeof lim[DRV_ISO_USER].value, "%s (uid %d, gid %d)",
                 iso->user, (int)iso->uid, (int)iso->gid);
    } else {
        not_enforced(&lim[DRV_ISO_USER], "%s", iso->user_why);
    }
    workdir(iso, id, p);
    for (int c = 0; c < C_N; c++)
        if (iso->of[c] < 0 || !iso->h[iso->of[c]].ok)
            not_enforced(&lim[c], "%s", iso->why[c]);
    for (int i = 0; i < iso->nh; i++) {
        struct hier *h = &iso->h[i];
        if (!h->ok)
            continue;
        char *dir = p->dirs[p->ndirs];
        snprintf(dir, sizeof p->dirs[0], "%s/%s", h->parent, id);
        if (kill_remove(dir, EXIT_WAIT_MS) < 0)   /* a leftover of the last start */
            drv_warn("isolation: cannot remove old cgroup %s: %s", dir, strerror(errno));
        int fd = -1;
        char pp[400];
        snprintf(pp, sizeof pp, "%s/cgroup.procs", dir);
        char why[256] = "";
        int rc = cg_mkdir(dir, 0755);
        if (rc < 0 && errno == ENOENT && ensure_parent(iso, h, why, sizeof why) == 0)
            rc = cg_mkdir(dir, 0755);   /* the parent was swept while this agent had no replica */
        if ((rc < 0 && errno != EEXIST) || (fd = open(pp, O_WRONLY | O_CLOEXEC)) < 0) {
            char what[400];
            snprintf(what, sizeof what, "cannot create cgroup %s: %s", dir, strerror(errno));
            for (int c = 0; c < C_N; c++)
                if (h->ctrls & (1u << c))
                    not_enforced(&lim[c], "%s", what);
            cg_rmdir(dir);
            continue;
        }
        p->ndirs++;
        p->fds[p->nfds++] = fd;
        unsigned on = h->ctrls;   /* the controllers its cgroup has */
        for (int c = 0; c < C_N; c++)
            if ((on & (1u << c)) && h->ctl_why[c][0]) {
                on &= ~(1u << c);
                not_enforced(&lim[c], "%s", h->ctl_why[c]);
            }
        if (on & (1u << C_MEM)) {
            snprintf(p->oom_file, sizeof p->oom_file, "%s/%s", dir,
                     h->ver == 2 ? "memory.events" : "memory.oom_control");
            p->oom_base = read_oom(p->oom_file);
            if (memory_mib > 0)
                set_memory(h, dir, memory_mib, &lim[DRV_ISO_MEMORY]);
            else
                not_enforced(&lim[DRV_ISO_MEMORY], "no memory limit asked (resources.memory_mib "
                             "is 0)%s", "");
        }
        if (on & (1u << C_CPU)) {
            if (cpu_millis > 0)
                set_cpu(h, dir, cpu_millis, &lim[DRV_ISO_CPU]);
            else
                not_enforced(&lim[DRV_ISO_CPU], "no CPU quota asked (resources.cpu_millis is "
                             "0)%s", "");
        }
        if (on & (1u << C_PIDS)) {
            drv_iso_limit_t *l = &lim[DRV_ISO_PIDS];
            char v[32];
            snprintf(v, sizeof v, "%d", iso->pids_max);
            if (iso->pids_max < 0) {
                not_enforced(l, "no process limit (--replica-pids-max %s)", "-1");
            } else if (limit(l, dir, "pids.max", v)) {
                enforced(l, dir, "pids.max");
                snprintf(l->value, sizeof l->value, "%d", iso->pids_max);
            }
        }
    }
    if (p->ndirs)
        snprintf(p->rep.cgroup, sizeof p->rep.cgroup, "%s/%s", iso->parent_rel, id);
}

void drv_iso_forked(drv_iso_proc_t *p)
{
    for (int i = 0; i < p->nfds; i++)
        close(p->fds[i]);
    p->nfds = 0;
}

int drv_iso_enter(const drv_iso_proc_t *p, const char **what)
{
    for (int i = 0; i < p->nfds; i++)
        if (write(p->fds[i], "0", 1) != 1) {   /* "0": the writing process */
            *what = "joining its cgroup";
            return -1;
        }
    if (p->workdir[0] && chdir(p->workdir) < 0) {
        *what = "chdir to its working directory";
        return -1;
    }
    if (p->set_user && (setgroups(0, NULL) < 0 || setgid(p->gid) < 0 || setuid(p->uid) < 0)) {
        *what = "switching to the replica user";
        return -1;
    }
    return 0;
}

int drv_iso_exited(drv_iso_t *iso, drv_iso_proc_t *p)
{
    (void)iso;
    long long now = read_oom(p->oom_file);
    int ooms = now > 0 && now > p->oom_base ? (int)(now - (p->oom_base > 0 ? p->oom_base : 0))
                                            : 0;
    for (int i = 0; i < p->ndirs; i++)
        if (kill_remove(p->dirs[i], EXIT_WAIT_MS) < 0)   /* the next start or the agent's
                                                            exit tries again */
            drv_warn("isolation: cannot remove cgroup %s yet: %s", p->dirs[i], strerror(errno));
    p->ndirs = 0;
    p->oom_file[0] = '\0';
    return ooms;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

void drv_iso_forget(drv_iso_t *iso, const char *id)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/work/%s", iso->data_dir, id);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static __thread uid_t grant_uid;
static __thread gid_t grant_gid;

static int chown_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    if (lchown(path, grant_uid, grant_gid) < 0)
        drv_warn("isolation: chown %s: %s", path, strerror(errno));
    return 0;
}

/* o+x on every directory from the data dir down to path's parent (and path
 * itself when self); false when path is not in the data dir or there is no
 * replica user. */
static bool open_search(const drv_iso_t *iso, const char *path, bool self)
{
    if (!iso)
        return false;
    size_t dl = strlen(iso->data_dir);
    if (!iso->user_on || strncmp(path, iso->data_dir, dl) != 0 || path[dl] != '/')
        return false;
    char p[4200];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + dl;; s = strchr(s + 1, '/')) {   /* data dir .. path's parent */
        char c = s ? *s : '\0';
        if (!s && !self)
            break;
        if (s)
            *s = '\0';
        struct stat sb;
        if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode) && !(sb.st_mode & S_IXOTH))
            chmod(p, (sb.st_mode & 07777) | S_IXOTH);
        if (!s)
            break;
        *s = c;
    }
    return true;
}

void drv_iso_grant(const drv_iso_t *iso, const char *path, bool tree)
{
    if (!open_search(iso, path, false))
        return;
    grant_uid = iso->uid;
    grant_gid = iso->gid;
    if (tree)
        nftw(path, chown_one, 16, FTW_PHYS);
    else if (chown(path, iso->uid, iso->gid) < 0)
        drv_warn("isolation: chown %s: %s", path, strerror(errno));
}

void drv_iso_reach(const drv_iso_t *iso, const char *path)
{
    open_search(iso, path, true);
}
