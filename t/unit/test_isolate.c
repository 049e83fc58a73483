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

int main(void)
{
    drv_log_init("test_isolate", DRV_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_user, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cgroup_oom, setup, teardown),
        cmocka_unit_test_setup_teardown(test_user_grant, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_swept, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
