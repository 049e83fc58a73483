/* test_gpushare_agent.c — unit tests of the agent's side of GPU shares:
 * the supervisor's enforcement record, strict-isolation refusal, the MPS
 * environment of fractional replicas and the removal of their accounting
 * regions (src/agent/replica_proc.c), and the per-GPU MPS control daemons
 * (src/agent/mps.c) driven against a fake nvidia-cuda-mps-control (a
 * shell script written here that behaves like the real one: -f runs in the
 * foreground and makes $CUDA_MPS_PIPE_DIRECTORY/control; without -f it
 * reads commands such as "quit" on stdin).
 *
 * Replicas are /bin/sh commands that print their environment. Waits poll
 * every 20 ms for up to 20 s.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/supervisor.h"
#include "agent/mps.h"

#define WAIT_MS 20000

static char tmp[PATH_MAX];
static char lib[PATH_MAX];        /* libdrover-gpushare.so next to this binary, or a stand-in */
static char fake_mps[PATH_MAX];   /* a working fake control program */
static char bad_mps[PATH_MAX];    /* one that exits at once */
static char slow_mps[PATH_MAX];   /* one that never makes its control pipe */
static int test_no;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static bool alive(int pid)
{
    char p[64], buf[512];
    snprintf(p, sizeof p, "/proc/%d/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

static void write_script(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    remove(path);
    return 0;
}

static int group_setup(void **state)
{
    snprintf(tmp, sizeof tmp, "%s/drover-gs-agent-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp))
        return -1;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *dir = dirname(exe);
    snprintf(lib, sizeof lib, "%s/libdrover-gpushare.so", dir);
    if (access(lib, R_OK) != 0)   /* the sanitizer tree keeps it in lib/ */
        snprintf(lib, sizeof lib, "%s/lib/libdrover-gpushare.so", dir);
    if (access(lib, R_OK) != 0) {   /* not built: any readable file stands in */
        snprintf(lib, sizeof lib, "%s/stand-in.so", tmp);
        write_script(lib, "");
    }
    snprintf(fake_mps, sizeof fake_mps, "%s/nvidia-cuda-mps-control", tmp);
    write_script(fake_mps,
                 "#!/bin/sh\n"
                 "d=\"$CUDA_MPS_PIPE_DIRECTORY\"\n"
                 "if [ \"$1\" = -f ]; then\n"
                 "  echo \"$CUDA_VISIBLE_DEVICES\" > \"$d/../visible\"\n"
                 "  echo \"$CUDA_MPS_LOG_DIRECTORY\" > \"$d/../logdir\"\n"
                 "  echo $$ > \"$d/../pid\"\n"
                 "  mkfifo \"$d/control\" || exit 1\n"
                 "  exec sleep 1000\n"
                 "fi\n"
                 "read cmd\n"
                 "echo \"$cmd\" >> \"$d/../commands\"\n"
                 "[ \"$cmd\" = quit ] && kill \"$(cat \"$d/../pid\")\"\n"
                 "exit 0\n");
    snprintf(bad_mps, sizeof bad_mps, "%s/bad-mps-control", tmp);
    write_script(bad_mps, "#!/bin/sh\necho \"no NVIDIA GPU here\" >&2\nexit 3\n");
    snprintf(slow_mps, sizeof slow_mps, "%s/slow-mps-control", tmp);
    write_script(slow_mps, "#!/bin/sh\n[ \"$1\" = -f ] && exec sleep 1000\nexit 0\n");
    return 0;
}

static int group_teardown(void **state)
{
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* --- supervisor -------------------------------------------------------------------------- */

static drv_supervisor_t *sup_new(const char *gpushare)
{
    static char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/sup%d", tmp, ++test_no);
    drv_supervisor_opts_t o = {.data_dir = dir, .gpushare_lib = gpushare, .stop_grace_ms = 300,
                               .backoff_initial_ms = 50, .backoff_max_ms = 400};
    drv_error_t err = {0};
    drv_supervisor_t *s = drv_supervisor_create(&o, &err);
    if (!s)
        fail_msg("create: %s", err.message);
    return s;
}

static bool get(drv_supervisor_t *s, const char *id, drv_replica_status_t *st)
{
    drv_replica_status_t *all;
    size_t n = drv_supervisor_status(s, &all);
    bool found = false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(all[i].id, id) == 0) {
            *st = all[i];
            found = true;
        }
    free(all);
    return found;
}

static void wait_state(drv_supervisor_t *s, const char *id, drv_rs_state_t want,
                       drv_replica_status_t *st)
{
    for (int t = 0; t < WAIT_MS; t += 20) {
        if (get(s, id, st) && st->state == want)
            return;
        sleep_ms(20);
    }
    fail_msg("replica %s: state %s, wanted %s (%s)", id, drv_rs_state_name(st->state),
             drv_rs_state_name(want), st->reason);
}

static char *wait_log(drv_supervisor_t *s, const char *id, const char *needle)
{
    size_t cap = 1 << 20;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    for (int t = 0; t < WAIT_MS; t += 20) {
        int64_t next = 0;
        ssize_t n = drv_supervisor_log_read(s, id, 0, buf, cap, &next, NULL);
        buf[n > 0 ? n : 0] = '\0';
        if (strstr(buf, needle))
            return buf;
        sleep_ms(20);
    }
    print_error("log of %s:\n%s\n", id, buf);
    free(buf);
    fail_msg("log of %s never contained \"%s\"", id, needle);
    return NULL;
}

static const char *printenv[] = {"/bin/sh", "-c", "env | sort; echo END-OF-ENV; sleep 100", NULL};

static drv_replica_spec_t share(const char *id, int64_t mib, int pct, const char *mps, bool strict)
{
    return (drv_replica_spec_t){
        .id = id, .deployment = "dep", .argv = printenv, .argc = 3, .startup_timeout_s = 20,
        .model_dir = "", .gpu_uuids = "GPU-1111", .gpu_memory_limit_mib = mib,
        .gpu_compute_percent = pct, .mps_pipe_dir = mps, .strict_isolation = strict,
    };
}

static void apply(drv_supervisor_t *s, const drv_replica_spec_t *sp, size_t n)
{
    drv_error_t err = {0};
    if (drv_supervisor_apply(s, sp, n, &err) < 0)
        fail_msg("apply: %s", err.message);
}

static void test_enforced_with_mps(void **state)
{
    drv_supervisor_t *s = sup_new(lib);
    drv_replica_spec_t sp[3] = {share("frac", 4096, 25, "/run/mps/0/pipe", true),
                                share("whole", 0, 0, "/run/mps/0/pipe", true),
                                share("cpu", 0, 0, NULL, true)};
    sp[2].gpu_uuids = "";
    apply(s, sp, 3);
    drv_replica_status_t st;
    wait_state(s, "frac", DRV_RS_READY, &st);
    assert_string_equal(st.enforce_memory, "enforced");
    assert_string_equal(st.enforce_compute, "mps");
    char want[PATH_MAX + 32];
    char *log = wait_log(s, "frac", "\nEND-OF-ENV\n");
    snprintf(want, sizeof want, "\nLD_PRELOAD=%s\n", lib);
    assert_non_null(strstr(log, want));
    assert_non_null(strstr(log, "\nDROVER_GPU_MEMORY_LIMIT_MIB=4096\n"));
    assert_non_null(strstr(log, "\nDROVER_GPU_COMPUTE_PERCENT=25\n"));
    assert_non_null(strstr(log, "\nCUDA_MPS_PIPE_DIRECTORY=/run/mps/0/pipe\n"));
    assert_non_null(strstr(log, "\nCUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25\n"));
    free(log);
    wait_state(s, "whole", DRV_RS_READY, &st);
    assert_string_equal(st.enforce_memory, "whole-gpu");
    assert_string_equal(st.enforce_compute, "whole-gpu");
    log = wait_log(s, "whole", "\nEND-OF-ENV\n");
    assert_null(strstr(log, "CUDA_MPS_"));   /* whole GPUs are not MPS clients */
    assert_null(strstr(log, "LD_PRELOAD="));
    free(log);
    wait_state(s, "cpu", DRV_RS_READY, &st);
    assert_string_equal(st.enforce_memory, "");
    assert_string_equal(st.enforce_compute, "");
    drv_supervisor_destroy(s);
}

static void test_time_slicing(void **state)
{
    drv_supervisor_t *s = sup_new(lib);
    /* no MPS: a fractional replica without a compute share still runs strictly;
     * one with 100 % needs no MPS either */
    drv_replica_spec_t sp[2] = {share("mem-only", 2048, 0, NULL, true),
                                share("full", 2048, 100, NULL, true)};
    apply(s, sp, 2);
    drv_replica_status_t st;
    wait_state(s, "mem-only", DRV_RS_READY, &st);
    assert_string_equal(st.enforce_memory, "enforced");
    assert_string_equal(st.enforce_compute, "time-slicing");
    char *log = wait_log(s, "mem-only", "\nEND-OF-ENV\n");
    assert_null(strstr(log, "CUDA_MPS_"));
    free(log);
    wait_state(s, "full", DRV_RS_READY, &st);
    drv_supervisor_destroy(s);
}

static void test_strict_refusals(void **state)
{
    /* compute share without MPS */
    drv_supervisor_t *s = sup_new(lib);
    drv_replica_spec_t sp[2] = {share("strict", 2048, 25, NULL, true),
                                share("lenient", 2048, 25, NULL, false)};
    apply(s, sp, 2);
    drv_replica_status_t st;
    wait_state(s, "strict", DRV_RS_FAILED, &st);
    assert_int_equal(st.pid, 0);
    assert_non_null(strstr(st.reason, "strict isolation"));
    assert_non_null(strstr(st.reason, "compute share of 25 %"));
    assert_non_null(strstr(st.reason, "GPU-1111"));
    char *log = wait_log(s, "strict", "strict isolation");
    assert_null(strstr(log, "END-OF-ENV"));   /* never started */
    free(log);
    wait_state(s, "lenient", DRV_RS_READY, &st);   /* without strict: runs, time-slicing */
    assert_string_equal(st.enforce_compute, "time-slicing");
    drv_supervisor_destroy(s);

    /* memory share without the library */
    char missing[PATH_MAX + 32];
    snprintf(missing, sizeof missing, "%s/nope/libdrover-gpushare.so", tmp);
    const char *libs[] = {NULL, missing};
    for (int i = 0; i < 2; i++) {
        s = sup_new(libs[i]);
        drv_replica_spec_t m[2] = {share("strict", 2048, 25, "/run/mps", true),
                                   share("lenient", 2048, 25, "/run/mps", false)};
        apply(s, m, 2);
        wait_state(s, "strict", DRV_RS_FAILED, &st);
        assert_non_null(strstr(st.reason, "GPU memory share cannot be enforced"));
        if (libs[i])
            assert_non_null(strstr(st.reason, "No such file"));
        wait_state(s, "lenient", DRV_RS_READY, &st);
        assert_string_equal(st.enforce_memory, "not-enforced");
        assert_string_equal(st.enforce_compute, "mps");
        drv_supervisor_destroy(s);
    }
}

static bool shm_exists(const char *id)
{
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/drover-gpushare-%s", id);
    return access(path, F_OK) == 0;
}

static void test_region_removed(void **state)
{
    char id[64], name[128];
    snprintf(id, sizeof id, "gs-unit-%d", (int)getpid());
    snprintf(name, sizeof name, "/drover-gpushare-%s", id);
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);   /* a stale region */
    assert_true(fd >= 0);
    close(fd);
    assert_true(shm_exists(id));
    drv_supervisor_t *s = sup_new(lib);
    drv_replica_spec_t sp = share(id, 1024, 0, NULL, false);
    apply(s, &sp, 1);
    drv_replica_status_t st;
    wait_state(s, id, DRV_RS_READY, &st);
    assert_false(shm_exists(id));   /* a fresh start counts from zero */
    fd = shm_open(name, O_RDWR | O_CREAT, 0600);   /* as the replica's library would */
    close(fd);
    apply(s, NULL, 0);
    for (int t = 0; t < WAIT_MS && get(s, id, &st); t += 20)
        sleep_ms(20);
    assert_false(shm_exists(id));   /* and it goes with the replica */
    drv_supervisor_destroy(s);
}

/* --- MPS ------------------------------------------------------------------------------------ */

static char *slurp(const char *path)
{
    static char buf[4096];
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        fclose(f);
    }
    return buf;
}

static void test_mps_daemons(void **state)
{
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/mps1", tmp);
    const char *uuids[] = {"GPU-aaaa", "GPU-bbbb"};
    drv_error_t err = {0};
    drv_mps_t *m = drv_mps_create(&(drv_mps_opts_t){.control = fake_mps, .dir = dir}, uuids, 2,
                                  &err);
    assert_non_null(m);
    assert_string_equal(drv_mps_message(m), "MPS on 2 of 2 GPUs");
    const char *p0 = drv_mps_pipe_dir(m, "GPU-aaaa"), *p1 = drv_mps_pipe_dir(m, "GPU-bbbb");
    assert_non_null(p0);
    assert_non_null(p1);
    assert_string_not_equal(p0, p1);
    assert_string_equal(drv_mps_mode(m, "GPU-aaaa"), "mps");
    assert_string_equal(drv_mps_mode(m, "GPU-cccc"), "time-slicing");   /* not ours */
    assert_null(drv_mps_pipe_dir(m, NULL));
    char path[PATH_MAX + 64];
    int pids[2];
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%d/visible", dir, i);
        assert_string_equal(slurp(path), uuids[i]);   /* each daemon sees its GPU only */
        snprintf(path, sizeof path, "%s/%d/logdir", dir, i);
        assert_non_null(strstr(slurp(path), "/log"));
        snprintf(path, sizeof path, "%s/%d/pid", dir, i);
        pids[i] = atoi(slurp(path));
        assert_true(alive(pids[i]));
    }
    /* a daemon that dies: its GPU time-slices from then on */
    kill(pids[1], SIGKILL);
    for (int t = 0; t < WAIT_MS && drv_mps_pipe_dir(m, "GPU-bbbb"); t += 20)
        sleep_ms(20);
    assert_null(drv_mps_pipe_dir(m, "GPU-bbbb"));
    assert_string_equal(drv_mps_mode(m, "GPU-bbbb"), "time-slicing");
    assert_non_null(strstr(drv_mps_message(m), "MPS on 1 of 2 GPUs; GPU-bbbb: control daemon"));
    assert_string_equal(drv_mps_mode(m, "GPU-aaaa"), "mps");
    drv_mps_destroy(m);
    assert_false(alive(pids[0]));
    snprintf(path, sizeof path, "%s/0/commands", dir);
    assert_string_equal(slurp(path), "quit");   /* asked to quit, the documented way */
    drv_mps_destroy(NULL);
    assert_string_equal(drv_mps_mode(NULL, "GPU-aaaa"), "time-slicing");
}

static void test_mps_failures(void **state)
{
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/mps2", tmp);
    const char *uuids[] = {"GPU-dddd"};
    drv_error_t err = {0};
    drv_mps_t *m = drv_mps_create(&(drv_mps_opts_t){.control = bad_mps, .dir = dir}, uuids, 1,
                                  &err);
    assert_non_null(m);
    assert_null(drv_mps_pipe_dir(m, "GPU-dddd"));
    assert_non_null(strstr(drv_mps_message(m), "MPS on 0 of 1 GPU; GPU-dddd: control daemon "
                                               "exited at start with status 3: no NVIDIA GPU here"));
    drv_mps_destroy(m);

    snprintf(dir, sizeof dir, "%s/mps3", tmp);
    m = drv_mps_create(&(drv_mps_opts_t){.control = slow_mps, .dir = dir, .start_timeout_ms = 300,
                                         .stop_timeout_ms = 300},
                       uuids, 1, &err);
    assert_non_null(m);
    assert_string_equal(drv_mps_mode(m, "GPU-dddd"), "time-slicing");
    assert_non_null(strstr(drv_mps_message(m), "no control pipe within 300 ms"));
    drv_mps_destroy(m);

    char nope[PATH_MAX + 32];
    snprintf(nope, sizeof nope, "%s/no-such-control", tmp);
    assert_null(drv_mps_create(&(drv_mps_opts_t){.control = nope, .dir = dir}, uuids, 1, &err));
    assert_non_null(strstr(err.message, "not found"));
    assert_null(drv_mps_create(&(drv_mps_opts_t){.control = fake_mps}, uuids, 1, &err));
    char buf[PATH_MAX];
    assert_int_equal(drv_mps_which("sh", buf, sizeof buf), 0);
    assert_non_null(strstr(buf, "/sh"));
    assert_int_equal(drv_mps_which("no-such-program-here", buf, sizeof buf), -1);
}

static void test_mps_long_dir(void **state)
{
    char dir[PATH_MAX + 200];
    snprintf(dir, sizeof dir, "%s/a-directory-name-long-enough-that-unix-socket-paths-would-"
             "overflow-under-it", tmp);
    const char *uuids[] = {"GPU-eeee"};
    drv_error_t err = {0};
    drv_mps_t *m = drv_mps_create(&(drv_mps_opts_t){.control = fake_mps, .dir = dir}, uuids, 1,
                                  &err);
    assert_non_null(m);
    const char *p = drv_mps_pipe_dir(m, "GPU-eeee");
    assert_non_null(p);
    assert_true(strncmp(p, "/tmp/drover-mps-", 16) == 0);
    char base[PATH_MAX];
    snprintf(base, sizeof base, "%.22s", p);   /* /tmp/drover-mps-XXXXXX */
    drv_mps_destroy(m);
    assert_int_not_equal(access(base, F_OK), 0);   /* removed */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enforced_with_mps),
        cmocka_unit_test(test_time_slicing),
        cmocka_unit_test(test_strict_refusals),
        cmocka_unit_test(test_region_removed),
        cmocka_unit_test(test_mps_daemons),
        cmocka_unit_test(test_mps_failures),
        cmocka_unit_test(test_mps_long_dir),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
