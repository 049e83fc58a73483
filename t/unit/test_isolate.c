/* test_isolate.c — unit tests of replica isolation (src/agent/isolate.c):
 * with cgroups off every cgroup limit is reported not enforced with the
 * reason and the private working directory is still made (and removed);
 * an unknown --replica-user is refused; and, as root on a host with a
 * memory controller, a replica's cgroup gets its limit files, a child that
 * joins it and allocates past its limit is OOM-killed and counted, and the
 * cgroups are removed after the exit and at destroy; a restarted agent
 * kills what its last run left in them; and, as root with
 * --replica-user nobody, the child becomes that user, and the directories
 * it is given or must reach are handed over or opened for search only.
 * On any host, against a fake cgroup v2 tree in a temp dir (a mountinfo
 * naming it, and mkdir/rmdir/write that answer as cgroupfs does): the
 * controllers are enabled in each subtree_control from the root down, the
 * limits land in memory.max, memory.swap.max, cpu.max and pids.max, an
 * oom_kill in memory.events is counted, the cgroups are removed; and under
 * a parent cgroup that holds processes (EBUSY on its subtree_control) the
 * limits are reported not enforced with that reason; a read-only root that
 * already enables them is fine, one that does not is reported.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/isolate.h"
#include "common/log.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/drover-iso-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_off(void **state)
{
    (void)state;
    drv_error_t err;
    drv_iso_opts_t o = {.cgroup_parent = "", .user = "", .data_dir = dir};
    drv_iso_t *iso = drv_iso_create(&o, &err);
    assert_non_null(iso);
    drv_iso_proc_t p;
    drv_iso_prepare(iso, "r1", 64, 250, &p);
    assert_true(p.rep.set);
    for (int l = DRV_ISO_MEMORY; l <= DRV_ISO_PIDS; l++) {
        assert_false(p.rep.lim[l].enforced);
        assert_non_null(strstr(p.rep.lim[l].reason, "cgroups are off"));
    }
    assert_false(p.rep.lim[DRV_ISO_USER].enforced);
    assert_true(p.rep.lim[DRV_ISO_USER].reason[0] != '\0');
    assert_false(p.set_user);
    assert_int_equal(p.nfds, 0);
    assert_string_equal(p.rep.cgroup, "");
    assert_true(p.rep.lim[DRV_ISO_WORKDIR].enforced);
    struct stat sb;
    assert_int_equal(stat(p.workdir, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0700);
    json_t *j = drv_iso_report_json(&p.rep);
    for (int l = 0; l < DRV_ISO_N; l++)
        assert_non_null(json_object_get(j, drv_iso_name(l)));
    assert_null(json_object_get(j, "cgroup"));
    assert_true(json_is_false(json_object_get(json_object_get(j, "memory"), "enforced")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "workdir"), "path")),
                        p.workdir);
    json_decref(j);
    drv_iso_forked(&p);
    assert_int_equal(drv_iso_exited(iso, &p), 0);
    drv_iso_forget(iso, "r1");
    assert_int_equal(stat(p.workdir, &sb), -1);
    drv_iso_destroy(iso);
}

static void test_unknown_user(void **state)
{
    (void)state;
    drv_error_t err;
    drv_iso_opts_t o = {.cgroup_parent = "", .user = "no-such-user-drover", .data_dir = dir};
    assert_null(drv_iso_create(&o, &err));
    assert_non_null(strstr(err.message, "no-such-user-drover"));
}

/* As root with a memory controller: limits in the files, an OOM kill counted. */
static void test_cgroup_oom(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip();
        return;
    }
    char parent[64];
    snprintf(parent, sizeof parent, "drover-unit-%d", (int)getpid());
    drv_error_t err;
    drv_iso_opts_t o = {.cgroup_parent = parent, .user = "", .data_dir = dir};
    drv_iso_t *iso = drv_iso_create(&o, &err);
    assert_non_null(iso);
    drv_iso_proc_t p;
    drv_iso_prepare(iso, "hog", 32, 100, &p);
    if (!p.rep.lim[DRV_ISO_MEMORY].enforced) {   /* no memory controller here */
        print_message("memory not enforced: %s\n", p.rep.lim[DRV_ISO_MEMORY].reason);
        drv_iso_forked(&p);
        drv_iso_exited(iso, &p);
        drv_iso_destroy(iso);
        skip();
        return;
    }
    char want[64];
    snprintf(want, sizeof want, "%s/hog", parent);
    assert_string_equal(p.rep.cgroup, want);
    FILE *f = fopen(p.rep.lim[DRV_ISO_MEMORY].file, "r");
    assert_non_null(f);
    long long v = 0;
    assert_int_equal(fscanf(f, "%lld", &v), 1);
    fclose(f);
    assert_int_equal(v, 32ll << 20);
    pid_t pid = fork();
    if (pid == 0) {
        const char *what;
        if (drv_iso_enter(&p, &what) < 0)
            _exit(3);
        for (int k = 0; k < 256; k++) {   /* 256 MiB, touched: past the 32 MiB limit */
            char *m = malloc(1 << 20);
            if (!m)
                _exit(4);
            memset(m, k, 1 << 20);
        }
        _exit(0);
    }
    drv_iso_forked(&p);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    char cg[400];
    snprintf(cg, sizeof cg, "%s", p.dirs[0]);
    assert_true(drv_iso_exited(iso, &p) >= 1);
    struct stat sb;
    assert_int_equal(stat(cg, &sb), -1);   /* removed after the exit */
    char par[400];
    snprintf(par, sizeof par, "%s", cg);
    *strrchr(par, '/') = '\0';
    assert_int_equal(stat(par, &sb), 0);
    drv_iso_destroy(iso);
    assert_int_equal(stat(par, &sb), -1);   /* and the parent at destroy */
}

/* As root: an agent starting under the default parent removes the empty
 * parents of dead agents beside its own, but not a cgroup made moments ago
 * (a live agent's replica between its mkdir and its process joining). */
static void test_sweep_spares_young(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip();
        return;
    }
    drv_error_t err;
    drv_iso_opts_t o = {.cgroup_parent = NULL, .node_id = "unit-sweeper", .user = "",
                        .data_dir = dir};
    drv_iso_t *iso = drv_iso_create(&o, &err);   /* makes drover/unit-sweeper.HASH */
    assert_non_null(iso);
    drv_iso_proc_t p;
    drv_iso_prepare(iso, "probe", 0, 0, &p);
    if (p.ndirs == 0) {   /* no cgroup controller here */
        drv_iso_destroy(iso);
        skip();
        return;
    }
    /* a sibling "agent" with one replica cgroup made just now, still empty */
    char sib[512], child[600];
    snprintf(sib, sizeof sib, "%s", p.dirs[0]);
    char *cut = strrchr(sib, '/');
    assert_non_null(cut);
    *cut = '\0';
    cut = strrchr(sib, '/');
    assert_non_null(cut);
    snprintf(cut + 1, sizeof sib - (size_t)(cut + 1 - sib), "unit-sib-%d", (int)getpid());
    snprintf(child, sizeof child, "%s/young", sib);
    assert_int_equal(mkdir(sib, 0755), 0);
    assert_int_equal(mkdir(child, 0755), 0);
    drv_iso_forked(&p);
    drv_iso_t *again = drv_iso_create(&o, &err);   /* another start: the sweep runs */
    assert_non_null(again);
    struct stat sb;
    assert_int_equal(stat(child, &sb), 0);   /* spared: it is young */
    rmdir(child);
    rmdir(sib);
    drv_iso_destroy(again);
    drv_iso_destroy(iso);
}

/* As root: a restarted agent (a second context on the same parent) kills
 * what its last run left in its replicas' cgroups and removes them. */
static void test_stale_swept(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip();
        return;
    }
    char parent[64];
    snprintf(parent, sizeof parent, "drover-unit-%d", (int)getpid());
    drv_error_t err;
    drv_iso_opts_t o = {.cgroup_parent = parent, .user = "", .data_dir = dir};
    drv_iso_t *iso = drv_iso_create(&o, &err);
    assert_non_null(iso);
    drv_iso_proc_t p;
    drv_iso_prepare(iso, "left", 0, 0, &p);
    if (p.ndirs == 0) {   /* no cgroup controller here */
        drv_iso_destroy(iso);
        skip();
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        const char *what;
        if (drv_iso_enter(&p, &what) < 0)
            _exit(3);
        execlp("sleep", "sleep", "100", (char *)NULL);
        _exit(4);
    }
    drv_iso_forked(&p);
    char procs[400];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", p.dirs[0]);
    for (int t = 0; t < 1000; t++) {   /* the child joined (polled, up to 10 s) */
        FILE *f = fopen(procs, "r");
        long v = 0;
        bool in = f && fscanf(f, "%ld", &v) == 1 && v == pid;
        if (f)
            fclose(f);
        if (in)
            break;
        usleep(10000);
    }
    drv_iso_t *again = drv_iso_create(&o, &err);   /* the agent "restarted" */
    assert_non_null(again);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    struct stat sb;
    assert_int_equal(stat(p.dirs[0], &sb), -1);
    drv_iso_destroy(again);
    drv_iso_destroy(iso);   /* its parent is gone already: a no-op */
}

/* As root, --replica-user nobody: the user is switched to, grant hands a
 * directory over (its parents only opened for search), reach opens one. */
static void test_user_grant(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip();
        return;
    }
    drv_error_t err;
    drv_iso_opts_t o = {.cgroup_parent = "", .user = "nobody", .data_dir = dir};
    drv_iso_t *iso = drv_iso_create(&o, &err);
    assert_non_null(iso);
    drv_iso_proc_t p;
    drv_iso_prepare(iso, "r2", 0, 0, &p);
    assert_true(p.rep.lim[DRV_ISO_USER].enforced);
    assert_true(p.set_user);
    assert_int_not_equal(p.uid, 0);
    struct stat sb;
    assert_int_equal(stat(p.workdir, &sb), 0);
    assert_int_equal(sb.st_uid, p.uid);
    char a[128], b[160], c[128];
    snprintf(a, sizeof a, "%s/models", dir);
    snprintf(b, sizeof b, "%s/models/m", dir);
    assert_int_equal(mkdir(a, 0700), 0);
    assert_int_equal(mkdir(b, 0700), 0);
    drv_iso_grant(iso, b, false);
    assert_int_equal(stat(a, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0701);   /* search only */
    assert_int_equal(sb.st_uid, 0);
    assert_int_equal(stat(b, &sb), 0);
    assert_int_equal(sb.st_uid, p.uid);
    snprintf(c, sizeof c, "%s/mps", dir);
    assert_int_equal(mkdir(c, 0700), 0);
    drv_iso_reach(iso, c);
    assert_int_equal(stat(c, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0701);
    assert_int_equal(sb.st_uid, 0);
    drv_iso_grant(iso, "/etc", false);   /* outside the data dir: left alone */
    assert_int_equal(stat("/etc", &sb), 0);
    assert_int_equal(sb.st_uid, 0);
    pid_t pid = fork();
    if (pid == 0) {
        const char *what;
        _exit(drv_iso_enter(&p, &what) == 0 && getuid() == p.uid && geteuid() == p.uid ? 0 : 1);
    }
    drv_iso_forked(&p);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    drv_iso_exited(iso, &p);
    drv_iso_destroy(iso);
}

/* --- a fake cgroup v2 tree: FAKE_ROOT under the temp dir ------------------------- */

static char cgroot[128];
static bool root_ro;   /* the root's subtree_control refuses writes */

static void fput(const char *d, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", d, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The file's text ("" when missing). */
static const char *fget(const char *d, const char *name)
{
    static char buf[512];
    char p[512];
    snprintf(p, sizeof p, "%s/%s", d, name);
    buf[0] = '\0';
    FILE *f = fopen(p, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

static bool has_word(const char *list, const char *w)
{
    size_t l = strlen(w);
    for (const char *s = strstr(list, w); s; s = strstr(s + 1, w))
        if ((s == list || s[-1] == ' ') && (s[l] == '\0' || s[l] == ' ' || s[l] == '\n'))
            return true;
    return false;
}

/* The controllers d may use: the root's, or what its parent enabled. */
static const char *avail(const char *d)
{
    if (strcmp(d, cgroot) == 0)
        return fget(d, "cgroup.controllers");
    char up[512];
    snprintf(up, sizeof up, "%s", d);
    *strrchr(up, '/') = '\0';
    return fget(up, "cgroup.subtree_control");
}

/* The interface files of controller c in cgroup d (when it has none yet). */
static void ctrl_files(const char *d, const char *c)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s.max", d, c);
    if (access(p, F_OK) == 0)
        return;
    if (strcmp(c, "memory") == 0) {
        fput(d, "memory.max", "max\n");
        fput(d, "memory.swap.max", "max\n");
        fput(d, "memory.oom.group", "0\n");
        fput(d, "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
    } else if (strcmp(c, "cpu") == 0) {
        fput(d, "cpu.max", "max 100000\n");
    } else if (strcmp(c, "pids") == 0) {
        fput(d, "pids.max", "max\n");
    }
}

/* mkdir: the new cgroup has the files of the controllers its parent enabled. */
static int fake_mkdir(const char *path, mode_t mode)
{
    if (mkdir(path, mode) < 0)
        return -1;
    fput(path, "cgroup.subtree_control", "");
    fput(path, "cgroup.procs", "");
    const char *const all[] = {"memory", "cpu", "pids"};
    char on[256];
    snprintf(on, sizeof on, "%s", avail(path));
    for (int i = 0; i < 3; i++)
        if (has_word(on, all[i]))
            ctrl_files(path, all[i]);
    return 0;
}

/* rmdir: EBUSY while it holds processes or child cgroups. */
static int fake_rmdir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    bool busy = fget(path, "cgroup.procs")[0] != '\0';
    while ((e = readdir(d)))
        if (e->d_type == DT_DIR && e->d_name[0] != '.')
            busy = true;
    rewinddir(d);
    while (!busy && (e = readdir(d)))
        if (e->d_type == DT_REG) {
            char p[600];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            unlink(p);
        }
    closedir(d);
    if (busy) {
        errno = EBUSY;
        return -1;
    }
    return rmdir(path);
}

/* write: no such file → ENOENT; "+ctrl" to subtree_control: the controller
 * must be available to the cgroup (else ENOENT), and a non-root cgroup must
 * hold no process (else EBUSY), as the kernel checks them; the children get
 * its files; any other file takes the text. */
static int fake_write(const char *path, const char *text)
{
    if (access(path, F_OK) < 0)
        return -1;
    char d[512];
    snprintf(d, sizeof d, "%s", path);
    char *name = strrchr(d, '/');
    *name++ = '\0';
    if (strcmp(name, "cgroup.subtree_control") != 0) {
        fput(d, name, text);
        return 0;
    }
    if (root_ro && strcmp(d, cgroot) == 0) {   /* a container's read-only root */
        errno = EROFS;
        return -1;
    }
    if (text[0] != '+') {
        errno = EINVAL;
        return -1;
    }
    if (!has_word(avail(d), text + 1)) {
        errno = ENOENT;
        return -1;
    }
    if (strcmp(d, cgroot) != 0 && fget(d, "cgroup.procs")[0]) {
        errno = EBUSY;
        return -1;
    }
    char now[256];
    snprintf(now, sizeof now, "%s", fget(d, name));
    now[strcspn(now, "\n")] = '\0';
    if (!has_word(now, text + 1)) {
        size_t l = strlen(now);
        snprintf(now + l, sizeof now - l, "%s%s", l ? " " : "", text + 1);
    }
    fput(d, name, now);
    DIR *dd = opendir(d);
    struct dirent *e;
    while (dd && (e = readdir(dd)))
        if (e->d_type == DT_DIR && e->d_name[0] != '.') {
            char sub[600];
            snprintf(sub, sizeof sub, "%s/%s", d, e->d_name);
            ctrl_files(sub, text + 1);
        }
    if (dd)
        closedir(dd);
    return 0;
}

static drv_iso_fs_t fake_fs = {.mkdir = fake_mkdir, .rmdir = fake_rmdir, .write = fake_write};
static char fake_mountinfo[128];

/* The fake root (cgroup2 with cpu, memory, pids) and a mountinfo naming it. */
static void fake_tree(void)
{
    root_ro = false;
    snprintf(cgroot, sizeof cgroot, "%s/cg", dir);
    assert_int_equal(mkdir(cgroot, 0755), 0);
    fput(cgroot, "cgroup.controllers", "cpuset cpu io memory hugetlb pids\n");
    fput(cgroot, "cgroup.subtree_control", "");
    fput(cgroot, "cgroup.procs", "1\n");
    snprintf(fake_mountinfo, sizeof fake_mountinfo, "%s/mountinfo", dir);
    char line[400];
    snprintf(line, sizeof line, "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
             "30 22 0:26 / %s rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 "
             "rw,nsdelegate\n", cgroot);
    fput(dir, "mountinfo", line);
    fake_fs.mountinfo = fake_mountinfo;
}

static bool isdir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* cgroup v2 (faked): controllers enabled, limits written, OOM counted, removed. */
static void test_v2_fake(void **state)
{
    (void)state;
    fake_tree();
    drv_error_t err;
    drv_iso_opts_t o = {.cgroup_parent = "drover/n1", .user = "", .data_dir = dir,
                        .fs = &fake_fs};
    drv_iso_t *iso = drv_iso_create(&o, &err);
    assert_non_null(iso);
    assert_non_null(strstr(drv_iso_summary(iso), "memory in cgroup v2"));
    char lvl[256];
    const char *levels[] = {"", "/drover", "/drover/n1"};
    for (int i = 0; i < 3; i++) {   /* enabled from the root down */
        snprintf(lvl, sizeof lvl, "%s%s", cgroot, levels[i]);
        const char *sc = fget(lvl, "cgroup.subtree_control");
        assert_true(has_word(sc, "memory") && has_word(sc, "cpu") && has_word(sc, "pids"));
        assert_false(has_word(sc, "io"));
    }
    drv_iso_proc_t p;
    drv_iso_prepare(iso, "r1", 64, 250, &p);
    assert_string_equal(p.rep.cgroup, "drover/n1/r1");
    char r1[256];
    snprintf(r1, sizeof r1, "%s/drover/n1/r1", cgroot);
    assert_string_equal(fget(r1, "memory.max"), "67108864");
    assert_string_equal(fget(r1, "memory.swap.max"), "0");
    assert_string_equal(fget(r1, "memory.oom.group"), "1");
    assert_string_equal(fget(r1, "cpu.max"), "25000 100000");
    assert_string_equal(fget(r1, "pids.max"), "4096");
    for (int l = DRV_ISO_MEMORY; l <= DRV_ISO_PIDS; l++)
        assert_true(p.rep.lim[l].enforced);
    assert_non_null(strstr(p.rep.lim[DRV_ISO_MEMORY].value, "64 MiB, swap off"));
    char want[300];
    snprintf(want, sizeof want, "%s/cpu.max", r1);
    assert_string_equal(p.rep.lim[DRV_ISO_CPU].file, want);
    snprintf(want, sizeof want, "%s/memory.events", r1);
    assert_string_equal(p.oom_file, want);
    drv_iso_forked(&p);
    fput(r1, "memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n");   /* the kernel's */
    assert_int_equal(drv_iso_exited(iso, &p), 1);
    assert_false(isdir(r1));
    drv_iso_prepare(iso, "r1", 64, 250, &p);   /* again: a fresh cgroup, no OOM */
    assert_true(isdir(r1));
    drv_iso_forked(&p);
    assert_int_equal(drv_iso_exited(iso, &p), 0);
    assert_false(isdir(r1));
    drv_iso_destroy(iso);
    snprintf(lvl, sizeof lvl, "%s/drover", cgroot);
    assert_false(isdir(lvl));
    assert_true(isdir(cgroot));
}

/* cgroup v2 (faked): the parent under a cgroup that holds processes. */
static void test_v2_ebusy(void **state)
{
    (void)state;
    fake_tree();
    char sc[256];
    snprintf(sc, sizeof sc, "%s/cgroup.subtree_control", cgroot);
    assert_int_equal(fake_write(sc, "+memory"), 0);   /* the service manager's */
    assert_int_equal(fake_write(sc, "+cpu"), 0);
    assert_int_equal(fake_write(sc, "+pids"), 0);
    char held[256];
    snprintf(held, sizeof held, "%s/svc", cgroot);
    assert_int_equal(fake_mkdir(held, 0755), 0);
    fput(held, "cgroup.procs", "1\n");   /* pid 1: never killed by the agent */
    drv_error_t err;
    drv_iso_opts_t o = {.cgroup_parent = "svc/agent", .user = "", .data_dir = dir,
                        .fs = &fake_fs};
    drv_iso_t *iso = drv_iso_create(&o, &err);
    assert_non_null(iso);
    drv_iso_proc_t p;
    drv_iso_prepare(iso, "r1", 64, 250, &p);
    for (int l = DRV_ISO_MEMORY; l <= DRV_ISO_PIDS; l++) {
        assert_false(p.rep.lim[l].enforced);
        assert_non_null(strstr(p.rep.lim[l].reason, "svc/cgroup.subtree_control"));
        assert_non_null(strstr(p.rep.lim[l].reason, "holds processes"));
    }
    assert_string_equal(p.oom_file, "");
    drv_iso_forked(&p);
    assert_int_equal(drv_iso_exited(iso, &p), 0);
    drv_iso_destroy(iso);
    char agent[300];
    snprintf(agent, sizeof agent, "%s/agent", held);
    assert_false(isdir(agent));
    assert_true(isdir(held));   /* not the agent's: it stays */
}

/* cgroup v2 (faked): the root's subtree_control is read-only but already
 * enables the controllers (a container's delegated tree): limits enforced. */
static void test_v2_root_ro(void **state)
{
    (void)state;
    fake_tree();
    fput(cgroot, "cgroup.subtree_control", "cpu memory pids\n");
    root_ro = true;
    drv_error_t err;
    drv_iso_opts_t o = {.cgroup_parent = "drover/n1", .user = "", .data_dir = dir,
                        .fs = &fake_fs};
    drv_iso_t *iso = drv_iso_create(&o, &err);
    assert_non_null(iso);
    drv_iso_proc_t p;
    drv_iso_prepare(iso, "r1", 64, 250, &p);
    for (int l = DRV_ISO_MEMORY; l <= DRV_ISO_PIDS; l++)
        assert_true(p.rep.lim[l].enforced);
    drv_iso_forked(&p);
    assert_int_equal(drv_iso_exited(iso, &p), 0);
    drv_iso_destroy(iso);
    root_ro = false;
    fput(cgroot, "cgroup.subtree_control", "");   /* a refused write must not hide behind it */
    root_ro = true;
    iso = drv_iso_create(&o, &err);
    assert_non_null(iso);
    drv_iso_prepare(iso, "r1", 64, 250, &p);
    assert_false(p.rep.lim[DRV_ISO_MEMORY].enforced);
    assert_non_null(strstr(p.rep.lim[DRV_ISO_MEMORY].reason, "Read-only file system"));
    drv_iso_forked(&p);
    drv_iso_exited(iso, &p);
    drv_iso_destroy(iso);
    root_ro = false;
}

int main(void)
{
    drv_log_init("test_isolate", DRV_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_user, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cgroup_oom, setup, teardown),
        cmocka_unit_test_setup_teardown(test_user_grant, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_swept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_spares_young, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v2_fake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v2_ebusy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v2_root_ro, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
