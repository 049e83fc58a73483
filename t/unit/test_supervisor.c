/* test_supervisor.c — unit tests of the replica supervisor
 * (src/agent/supervisor.c, replica_proc.c, replica_log.c) with real processes:
 * drover-demo-model replicas (found next to this binary) and small
 * /bin/sh commands. Covers: start to ready and /health answering,
 * idempotent apply (same pids), stopping (SIGTERM honoured, SIGKILL after
 * the grace for a replica ignoring SIGTERM, the replica's own children
 * killed with its process group), the environment contract, crash at start
 * with growing backoff, giving up after max restarts, exec failure, never
 * healthy -> failed with reason and log tail, restart after failed health
 * checks of a ready replica, an id listed again while terminating, log
 * rotation and offset reads, input validation, and destroy leaving no
 * process behind.
 *
 * Waits poll the status every 20 ms for up to 20 s and fail otherwise; no
 * test depends on an upper wall-clock bound tighter than that.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/cache.h"
#include "agent/replica_log.h"
#include "agent/supervisor.h"
#include "common/util.h"

#define WAIT_MS 20000

static char tmp[PATH_MAX];      /* per-binary temp dir */
static char demo[PATH_MAX];     /* drover-demo-model */
static char weights[PATH_MAX];  /* a 1 MiB weights file */
static int test_no;

/* --- helpers ----------------------------------------------------------------- */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* A process is gone when it does not exist or is a zombie (an orphaned
 * grandchild may linger as a zombie under an init that does not reap). */
static bool alive(int pid)
{
    if (pid <= 0)
        return false;
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

static bool wait_dead(int pid)
{
    for (int t = 0; t < WAIT_MS; t += 20) {
        if (!alive(pid))
            return true;
        sleep_ms(20);
    }
    return false;
}

static drv_supervisor_t *sup_new(drv_supervisor_opts_t o)
{
    static char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/t%d", tmp, ++test_no);
    o.data_dir = dir;
    if (!o.stop_grace_ms)
        o.stop_grace_ms = 300;
    if (!o.backoff_initial_ms)
        o.backoff_initial_ms = 50;
    if (!o.backoff_max_ms)
        o.backoff_max_ms = 400;
    if (!o.health_interval_ms)
        o.health_interval_ms = 100;
    drv_error_t err = {0};
    drv_supervisor_t *s = drv_supervisor_create(&o, &err);
    if (!s)
        fail_msg("create: %s", err.message);
    return s;
}

/* Status of id into *st; false when the supervisor does not know it. */
static bool get(drv_supervisor_t *s, const char *id, drv_replica_status_t *st)
{
    drv_replica_status_t *all;
    size_t n = drv_supervisor_status(s, &all);
    bool found = false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(all[i].id, id) == 0) {
            if (found)
                fail_msg("id %s listed twice in status", id);
            *st = all[i];
            found = true;
        }
    free(all);
    return found;
}

static size_t count(drv_supervisor_t *s)
{
    drv_replica_status_t *all;
    size_t n = drv_supervisor_status(s, &all);
    free(all);
    return n;
}

static void wait_state(drv_supervisor_t *s, const char *id, drv_rs_state_t want,
                       drv_replica_status_t *st)
{
    drv_replica_status_t tmpst;
    if (!st)
        st = &tmpst;
    for (int t = 0; t < WAIT_MS; t += 20) {
        if (get(s, id, st) && st->state == want)
            return;
        sleep_ms(20);
    }
    fail_msg("replica %s: state %s, wanted %s (reason: %s; last exit: %s)", id,
             get(s, id, st) ? drv_rs_state_name(st->state) : "(gone)", drv_rs_state_name(want),
             st->reason, st->last_exit);
}

static void wait_gone(drv_supervisor_t *s, const char *id)
{
    drv_replica_status_t st;
    for (int t = 0; t < WAIT_MS; t += 20) {
        if (!get(s, id, &st))
            return;
        sleep_ms(20);
    }
    fail_msg("replica %s still known, state %s", id, drv_rs_state_name(st.state));
}

/* The whole current log of id, NUL-terminated (caller frees). */
static char *read_log(drv_supervisor_t *s, const char *id)
{
    size_t cap = 1 << 20;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    drv_error_t err = {0};
    int64_t next = 0;
    ssize_t n = drv_supervisor_log_read(s, id, 0, buf, cap, &next, &err);
    if (n < 0)
        fail_msg("log read %s: %s", id, err.message);
    buf[n] = '\0';
    return buf;
}

/* Wait until id's log contains needle; returns the log (caller frees). */
static char *wait_log(drv_supervisor_t *s, const char *id, const char *needle)
{
    for (int t = 0; t < WAIT_MS; t += 20) {
        char *log = read_log(s, id);
        if (strstr(log, needle))
            return log;
        free(log);
        sleep_ms(20);
    }
    char *log = read_log(s, id);
    print_error("log of %s:\n%s\n", id, log);
    free(log);
    fail_msg("log of %s never contained \"%s\"", id, needle);
    return NULL;
}

static long http_get(const char *url)
{
    CURL *c = curl_easy_init();
    assert_non_null(c);
    FILE *devnull = fopen("/dev/null", "w");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, devnull);
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    fclose(devnull);
    return code;
}

/* Specs: argv arrays must outlive the apply call only. */
static const char *demo_ready[] = {demo, "--weights", weights, "--weights-mib", "1", NULL};
static const char *demo_fail[] = {demo, "--weights", weights, "--fail-start", NULL};
static const char *demo_never[] = {demo, "--weights", weights, "--never-ready", NULL};

static size_t argc_of(const char *const *v)
{
    size_t n = 0;
    while (v[n])
        n++;
    return n;
}

static drv_replica_spec_t spec(const char *id, const char *const *argv, const char *health)
{
    return (drv_replica_spec_t){
        .id = id, .deployment = "dep", .argv = argv, .argc = argc_of(argv),
        .health_path = health, .startup_timeout_s = 20, .model_dir = "", .gpu_uuids = "",
    };
}

static drv_replica_spec_t sh(const char *id, const char *const *argv)
{
    return spec(id, argv, NULL);
}

static void apply(drv_supervisor_t *s, const drv_replica_spec_t *specs, size_t n)
{
    drv_error_t err = {0};
    if (drv_supervisor_apply(s, specs, n, &err) < 0)
        fail_msg("apply: %s", err.message);
}

/* --- tests ------------------------------------------------------------------------ */

static void test_start_ready_idempotent_stop(void **state)
{
    drv_supervisor_t *s = sup_new((drv_supervisor_opts_t){.advertise_host = "127.0.0.1"});
    drv_replica_spec_t sp[3] = {spec("a", demo_ready, "/health"), spec("b", demo_ready, "/health"),
                                spec("c", demo_ready, "/health")};
    apply(s, sp, 3);
    assert_int_equal(count(s), 3);
    drv_replica_status_t st[3];
    for (int i = 0; i < 3; i++) {
        wait_state(s, sp[i].id, DRV_RS_READY, &st[i]);
        assert_true(st[i].pid > 0);
        assert_true(st[i].port > 0);
        assert_int_equal(st[i].restarts, 0);
        assert_true(st[i].ready_at_ms >= st[i].started_at_ms && st[i].started_at_ms > 0);
        assert_string_equal(st[i].deployment, "dep");
        char want[64], url[200];
        snprintf(want, sizeof want, "http://127.0.0.1:%d", st[i].port);
        assert_string_equal(st[i].endpoint, want);
        snprintf(url, sizeof url, "%s/health", st[i].endpoint);
        assert_int_equal(http_get(url), 200);
    }
    assert_int_not_equal(st[0].port, st[1].port);
    assert_int_not_equal(st[1].port, st[2].port);
    assert_int_not_equal(st[0].port, st[2].port);

    /* Same set again: nothing restarts. */
    apply(s, sp, 3);
    sleep_ms(500);
    for (int i = 0; i < 3; i++) {
        drv_replica_status_t now;
        assert_true(get(s, sp[i].id, &now));
        assert_int_equal(now.pid, st[i].pid);
        assert_int_equal(now.state, DRV_RS_READY);
        assert_int_equal(now.restarts, 0);
    }

    /* Without b: b stops (the demo honours SIGTERM), its logs go. */
    char logpath[PATH_MAX];
    assert_int_equal(drv_supervisor_log_path(s, "b", logpath, sizeof logpath), 0);
    assert_int_equal(access(logpath, F_OK), 0);
    drv_replica_spec_t ac[2] = {sp[0], sp[2]};
    apply(s, ac, 2);
    drv_replica_status_t bs;
    if (get(s, "b", &bs))
        assert_int_equal(bs.state, DRV_RS_STOPPING);
    wait_gone(s, "b");
    assert_true(wait_dead(st[1].pid));
    assert_int_not_equal(access(logpath, F_OK), 0);
    assert_true(alive(st[0].pid) && alive(st[2].pid));

    drv_supervisor_destroy(s);
    assert_false(alive(st[0].pid));
    assert_false(alive(st[2].pid));
}

static void test_env_contract(void **state)
{
    setenv("DROVER_TEST_SECRET", "leak", 1);
    setenv("CUDA_VISIBLE_DEVICES", "GPU-from-the-agent", 1);
    drv_supervisor_t *s = sup_new((drv_supervisor_opts_t){
        .gpushare_lib = "/nonexistent/libdrover-gpushare.so"});
    static const char *printenv[] = {"/bin/sh", "-c", "env | sort; echo END-OF-ENV; sleep 100",
                                     NULL};
    static const char *model_env[] = {"MODEL_FLAVOUR=vanilla", "PORT=1"};
    drv_replica_spec_t sp[2] = {sh("gpu-1", printenv), sh("cpu-1", printenv)};
    sp[0].gpu_uuids = "GPU-aaaa,GPU-bbbb";
    sp[0].gpu_memory_limit_mib = 2048;
    sp[0].gpu_compute_percent = 25;
    sp[0].model_dir = "/models/m1";
    sp[0].env = model_env;
    sp[0].envc = 2;
    sp[1].deployment = "cpu-dep";
    apply(s, sp, 2);
    drv_replica_status_t g, c;
    wait_state(s, "gpu-1", DRV_RS_READY, &g);
    wait_state(s, "cpu-1", DRV_RS_READY, &c);

    char want[128];
    char *log = wait_log(s, "gpu-1", "\nEND-OF-ENV\n");
    snprintf(want, sizeof want, "\nPORT=%d\n", g.port);
    assert_non_null(strstr(log, want));
    assert_non_null(strstr(log, "\nDROVER_REPLICA_ID=gpu-1\n"));
    assert_non_null(strstr(log, "\nDROVER_DEPLOYMENT=dep\n"));
    assert_non_null(strstr(log, "\nDROVER_MODEL_DIR=/models/m1\n"));
    assert_non_null(strstr(log, "\nCUDA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb\n"));
    assert_non_null(strstr(log, "\nDROVER_GPU_MEMORY_LIMIT_MIB=2048\n"));
    assert_non_null(strstr(log, "\nDROVER_GPU_COMPUTE_PERCENT=25\n"));
    assert_non_null(strstr(log, "\nLD_PRELOAD=/nonexistent/libdrover-gpushare.so\n"));
    assert_non_null(strstr(log, "\nMODEL_FLAVOUR=vanilla\n"));
    assert_null(strstr(log, "PORT=1\n"));             /* the contract wins */
    assert_null(strstr(log, "DROVER_TEST_SECRET"));   /* agent config is not inherited */
    assert_non_null(strstr(log, "\nPATH="));          /* the rest is */
    free(log);

    log = wait_log(s, "cpu-1", "\nEND-OF-ENV\n");
    snprintf(want, sizeof want, "\nPORT=%d\n", c.port);
    assert_non_null(strstr(log, want));
    assert_non_null(strstr(log, "\nDROVER_REPLICA_ID=cpu-1\n"));
    assert_non_null(strstr(log, "\nDROVER_DEPLOYMENT=cpu-dep\n"));
    assert_non_null(strstr(log, "\nCUDA_VISIBLE_DEVICES=\n"));   /* CPU-only: sees no GPU */
    assert_null(strstr(log, "GPU-from-the-agent"));
    assert_null(strstr(log, "DROVER_GPU_MEMORY_LIMIT_MIB"));
    assert_null(strstr(log, "DROVER_GPU_COMPUTE_PERCENT"));
    assert_null(strstr(log, "DROVER_MODEL_DIR"));
    assert_null(strstr(log, "LD_PRELOAD=/nonexistent"));
    free(log);
    drv_supervisor_destroy(s);
    unsetenv("DROVER_TEST_SECRET");
    unsetenv("CUDA_VISIBLE_DEVICES");
}

static void test_stop_sigkill_and_group(void **state)
{
    drv_supervisor_t *s = sup_new((drv_supervisor_opts_t){.stop_grace_ms = 300});
    static const char *stubborn[] = {"/bin/sh", "-c", "trap '' TERM; echo started; sleep 100; "
                                     "echo survived", NULL};
    static const char *family[] = {"/bin/sh", "-c", "sleep 100 & echo child=$!; wait", NULL};
    drv_replica_spec_t sp[2] = {sh("stubborn", stubborn), sh("family", family)};
    apply(s, sp, 2);
    drv_replica_status_t a, b;
    wait_state(s, "stubborn", DRV_RS_READY, &a);
    wait_state(s, "family", DRV_RS_READY, &b);
    free(wait_log(s, "stubborn", "\nstarted\n"));
    char *log = wait_log(s, "family", "\nchild=");
    int child = atoi(strstr(log, "\nchild=") + 7);
    free(log);
    assert_true(child > 0 && child != b.pid);
    assert_true(alive(child));

    /* Only the family goes: its main process and its child. */
    apply(s, &sp[0], 1);
    wait_gone(s, "family");
    assert_true(wait_dead(b.pid));
    assert_true(wait_dead(child));

    /* The stubborn one ignores SIGTERM: SIGKILL after the grace. */
    int64_t t0 = drv_mono_ms();
    apply(s, NULL, 0);
    wait_gone(s, "stubborn");
    assert_true(drv_mono_ms() - t0 >= 300);
    assert_true(wait_dead(a.pid));
    drv_supervisor_destroy(s);
}

/* A scale-down then a scale-up onto the same GPU: the new replica's start
 * waits (state waiting) while the old one (no longer listed) still runs
 * there — it ignores SIGTERM here, so until the grace's SIGKILL — with the
 * GPU and the holder in its reason; one on another GPU starts at once. */
static void test_gpu_wait_for_stopping(void **state)
{
    drv_supervisor_t *s = sup_new((drv_supervisor_opts_t){.stop_grace_ms = 1500});
    static const char *stubborn[] = {"/bin/sh", "-c", "trap '' TERM; echo started; sleep 100",
                                     NULL};
    static const char *plain[] = {"/bin/sh", "-c", "echo up; sleep 100", NULL};
    drv_replica_spec_t old = sh("old", stubborn);
    old.gpu_uuids = "GPU-aaaa,GPU-bbbb";
    apply(s, &old, 1);
    drv_replica_status_t o;
    wait_state(s, "old", DRV_RS_READY, &o);
    free(wait_log(s, "old", "\nstarted\n"));

    drv_replica_spec_t sp[2] = {sh("new", plain), sh("other", plain)};
    sp[0].gpu_uuids = "GPU-cccc,GPU-bbbb";   /* shares GPU-bbbb with old */
    sp[1].gpu_uuids = "GPU-bb";              /* a prefix of it is another GPU */
    int64_t t0 = drv_mono_ms();
    apply(s, sp, 2);
    drv_replica_status_t other, nw;
    wait_state(s, "other", DRV_RS_READY, &other);
    sleep_ms(300);
    assert_true(get(s, "new", &nw));
    assert_int_equal(nw.pid, 0);
    assert_int_equal(nw.state, DRV_RS_WAITING);
    assert_string_equal(drv_rs_state_name(nw.state), "waiting");
    assert_non_null(strstr(nw.reason, "waiting for GPU GPU-bbbb: replica old is stopping"));
    assert_true(alive(o.pid));

    /* the SIGKILL after the grace: old exits, new starts (no timer: the exit wakes it) */
    wait_gone(s, "old");
    wait_state(s, "new", DRV_RS_READY, &nw);
    assert_true(drv_mono_ms() - t0 >= 1500);
    assert_true(nw.pid > 0);
    assert_string_equal(nw.reason, "");
    drv_supervisor_destroy(s);
}

/* The node lease's stop: job workers fail with the reason, SIGKILL after
 * the grace given (far shorter than the stop grace here); a replica goes
 * on. A worker dropped from the set keeps its log (DATA_DIR/job-logs). */
static void test_fail_jobs_and_kept_log(void **state)
{
    drv_supervisor_t *s = sup_new((drv_supervisor_opts_t){.stop_grace_ms = 600000});
    static const char *stubborn[] = {"/bin/sh", "-c", "trap '' TERM; echo started; sleep 100", NULL};
    static const char *idle[] = {"/bin/sh", "-c", "sleep 100", NULL};
    drv_replica_spec_t sp[2] = {sh("w-a1-r0", stubborn), sh("rep", idle)};
    sp[0].job = "w";
    sp[0].deployment = NULL;
    apply(s, sp, 2);
    drv_replica_status_t w, r;
    wait_state(s, "w-a1-r0", DRV_RS_READY, &w);
    wait_state(s, "rep", DRV_RS_READY, &r);
    free(wait_log(s, "w-a1-r0", "\nstarted\n"));
    drv_supervisor_fail_jobs(s, "the node's lease ran out: test", 100);
    wait_state(s, "w-a1-r0", DRV_RS_FAILED, &w);
    assert_string_equal(w.reason, "the node's lease ran out: test");
    assert_true(wait_dead(w.pid));   /* SIGKILL after 100 ms, not the 600 s stop grace */
    get(s, "rep", &r);
    assert_int_equal(r.state, DRV_RS_READY);
    assert_true(alive(r.pid));
    apply(s, sp, 2);   /* listed again: it stays failed */
    sleep_ms(100);
    get(s, "w-a1-r0", &w);
    assert_int_equal(w.state, DRV_RS_FAILED);
    apply(s, &sp[1], 1);   /* dropped: its log is kept */
    wait_gone(s, "w-a1-r0");
    char buf[4096];
    int64_t next = 0;
    drv_error_t err = {0};
    ssize_t n = drv_supervisor_log_read(s, "w-a1-r0", 0, buf, sizeof buf - 1, &next, &err);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "\nstarted\n"));
    assert_non_null(strstr(buf, "the node's lease ran out: test"));
    char path[PATH_MAX + 64];
    assert_int_equal(drv_supervisor_log_path(s, "w-a1-r0", path, sizeof path), 0);
    assert_non_null(strstr(path, "/job-logs/w-a1-r0/stdout.log"));
    drv_supervisor_destroy(s);
}

static void test_crash_backoff(void **state)
{
    drv_supervisor_t *s = sup_new((drv_supervisor_opts_t){.backoff_initial_ms = 50,
                                                          .backoff_max_ms = 400});
    static const char *crash[] = {"/bin/sh", "-c", "echo crashing; exit 3", NULL};
    drv_replica_spec_t sp = sh("crashy", crash);
    apply(s, &sp, 1);
    int last_backoff = 0, seen = 0;
    drv_replica_status_t st;
    for (int t = 0; t < WAIT_MS; t += 5) {
        assert_true(get(s, "crashy", &st));
        if (st.backoff_ms) {
            assert_true(st.backoff_ms >= last_backoff);   /* grows, never shrinks */
            if (st.backoff_ms > last_backoff)
                seen++;
            last_backoff = st.backoff_ms;
        }
        if (st.restarts >= 6)
            break;
        sleep_ms(5);
    }
    assert_true(st.restarts >= 6);
    assert_int_equal(last_backoff, 400);   /* 50, 100, 200, 400 (capped) */
    assert_true(seen >= 2);
    assert_true(st.state == DRV_RS_BACKOFF || st.state == DRV_RS_STARTING ||
                st.state == DRV_RS_READY);   /* briefly "ready": no health path */
    assert_string_equal(st.last_exit, "exited with status 3");
    assert_non_null(strstr(st.reason, "exited with status 3; restarting in"));
    assert_non_null(strstr(st.log_tail, "crashing"));
    drv_supervisor_destroy(s);
}

static void test_fail_start_gives_up(void **state)
{
    drv_supervisor_t *s = sup_new((drv_supervisor_opts_t){.max_restarts_before_failed = 2});
    drv_replica_spec_t sp = spec("failer", demo_fail, "/health");
    apply(s, &sp, 1);
    drv_replica_status_t st;
    wait_state(s, "failer", DRV_RS_FAILED, &st);
    assert_int_equal(st.restarts, 2);
    assert_int_equal(st.pid, 0);
    assert_string_equal(st.last_exit, "exited with status 1");
    assert_string_equal(st.reason, "gave up after 2 restarts; last: exited with status 1");
    assert_non_null(strstr(st.log_tail, "failing at start as asked"));
    /* Listed again: a failed replica stays failed. */
    apply(s, &sp, 1);
    sleep_ms(300);
    assert_true(get(s, "failer", &st));
    assert_int_equal(st.state, DRV_RS_FAILED);
    assert_int_equal(st.restarts, 2);
    /* Left out: it goes. */
    apply(s, NULL, 0);
    wait_gone(s, "failer");
    drv_supervisor_destroy(s);
}

static void test_exec_failure(void **state)
{
    drv_supervisor_t *s = sup_new((drv_supervisor_opts_t){0});
    static const char *nope[] = {"/nonexistent/prog", "--flag", NULL};
    drv_replica_spec_t sp = spec("nope", nope, "/health");
    apply(s, &sp, 1);
    drv_replica_status_t st;
    for (int t = 0; t < WAIT_MS; t += 20) {
        assert_true(get(s, "nope", &st));
        if (st.restarts >= 1)
            break;
        sleep_ms(20);
    }
    assert_true(st.restarts >= 1);
    assert_string_equal(st.last_exit, "exited with status 127");
    assert_non_null(strstr(st.log_tail, "exec /nonexistent/prog: No such file or directory"));
    free(wait_log(s, "nope", "exec /nonexistent/prog: No such file or directory\n"));
    drv_supervisor_destroy(s);
}

static void test_never_ready_fails(void **state)
{
    drv_supervisor_t *s = sup_new((drv_supervisor_opts_t){0});
    drv_replica_spec_t sp = spec("slow", demo_never, "/health");
    sp.startup_timeout_s = 2;
    apply(s, &sp, 1);
    drv_replica_status_t st;
    wait_state(s, "slow", DRV_RS_STARTING, &st);
    int pid = st.pid;
    wait_state(s, "slow", DRV_RS_FAILED, &st);
    assert_string_equal(st.reason, "never became healthy within 2 s");
    assert_non_null(strstr(st.log_tail, "listening on port"));
    assert_int_equal(st.restarts, 0);
    assert_true(wait_dead(pid));
    for (int t = 0; t < WAIT_MS && st.pid; t += 20) {
        sleep_ms(20);
        get(s, "slow", &st);
    }
    assert_int_equal(st.pid, 0);
    sleep_ms(300);   /* not restarted */
    assert_true(get(s, "slow", &st));
    assert_int_equal(st.state, DRV_RS_FAILED);
    assert_int_equal(st.restarts, 0);
    drv_supervisor_destroy(s);
}

static void test_unhealthy_ready_restarts(void **state)
{
    drv_supervisor_t *s = sup_new((drv_supervisor_opts_t){
        .health_ready_interval_ms = 100, .health_timeout_ms = 300, .stop_grace_ms = 300});
    drv_replica_spec_t sp = spec("frozen", demo_ready, "/health");
    apply(s, &sp, 1);
    drv_replica_status_t st;
    wait_state(s, "frozen", DRV_RS_READY, &st);
    int pid = st.pid;
    assert_int_equal(kill(pid, SIGSTOP), 0);   /* health checks now time out */
    for (int t = 0; t < WAIT_MS; t += 20) {
        assert_true(get(s, "frozen", &st));
        if (st.state == DRV_RS_READY && st.pid != pid)
            break;
        sleep_ms(20);
    }
    assert_int_equal(st.state, DRV_RS_READY);
    assert_int_not_equal(st.pid, pid);
    assert_int_equal(st.restarts, 1);
    assert_string_equal(st.last_exit, "killed by signal 9");   /* stopped: SIGTERM pends */
    assert_true(wait_dead(pid));
    free(wait_log(s, "frozen", "health check failed 3 times in a row"));
    drv_supervisor_destroy(s);
}

static void test_relisted_while_terminating(void **state)
{
    drv_supervisor_t *s = sup_new((drv_supervisor_opts_t){.stop_grace_ms = 300});
    static const char *stubborn[] = {"/bin/sh", "-c", "trap '' TERM; sleep 100", NULL};
    drv_replica_spec_t sp = sh("again", stubborn);
    apply(s, &sp, 1);
    drv_replica_status_t st;
    wait_state(s, "again", DRV_RS_READY, &st);
    int pid = st.pid;
    apply(s, NULL, 0);
    assert_true(get(s, "again", &st));
    assert_int_equal(st.state, DRV_RS_STOPPING);
    apply(s, &sp, 1);
    for (int t = 0; t < WAIT_MS; t += 20) {
        assert_true(get(s, "again", &st));
        if (st.state == DRV_RS_READY && st.pid != pid)
            break;
        sleep_ms(20);
    }
    assert_int_equal(st.state, DRV_RS_READY);
    assert_int_not_equal(st.pid, pid);
    assert_int_equal(st.restarts, 0);
    assert_int_equal(count(s), 1);
    assert_true(wait_dead(pid));
    drv_supervisor_destroy(s);
    assert_false(alive(st.pid));
}

static void test_log_rotation_and_reads(void **state)
{
    drv_supervisor_t *s = sup_new((drv_supervisor_opts_t){.log_max_bytes = 4096, .log_files = 2});
    static const char *chatty[] = {
        "/bin/sh", "-c",
        "i=0; while [ $i -lt 2000 ]; do echo \"line $i: the quick brown fox jumps over the lazy "
        "dog\"; i=$((i+1)); done; echo done-writing; sleep 100", NULL};
    drv_replica_spec_t sp = sh("chatty", chatty);
    apply(s, &sp, 1);
    wait_state(s, "chatty", DRV_RS_READY, NULL);
    free(wait_log(s, "chatty", "\ndone-writing\n"));

    char path[PATH_MAX], rot[PATH_MAX + 8];
    assert_int_equal(drv_supervisor_log_path(s, "chatty", path, sizeof path), 0);
    for (int i = 0; i <= 3; i++) {
        if (i)
            snprintf(rot, sizeof rot, "%s.%d", path, i);
        else
            snprintf(rot, sizeof rot, "%s", path);
        struct stat sb;
        if (i == 3) {   /* only log_files rotated files are kept */
            assert_int_not_equal(stat(rot, &sb), 0);
            continue;
        }
        if (stat(rot, &sb) != 0)
            fail_msg("%s missing", rot);
        assert_true(sb.st_size > 0 && sb.st_size <= 4096);
        /* Files hold whole lines. */
        char buf[4097];
        int fd = open(rot, O_RDONLY);
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        assert_true(n > 0);
        assert_int_equal(buf[n - 1], '\n');
        assert_true(strncmp(buf, "line ", 5) == 0 || strncmp(buf, "drover-agent ", 13) == 0 ||
                    strncmp(buf, "done-writing", 12) == 0);
    }

    /* Offset reads: from 0, then nothing new, then the tail. */
    char buf[8192];
    int64_t next = -1;
    drv_error_t err = {0};
    ssize_t n = drv_supervisor_log_read(s, "chatty", 0, buf, sizeof buf, &next, &err);
    assert_true(n > 0 && n <= 4096);
    assert_int_equal(next, n);
    assert_int_equal(drv_supervisor_log_read(s, "chatty", next, buf, sizeof buf, &next, &err), 0);
    n = drv_supervisor_log_read(s, "chatty", -13, buf, sizeof buf, &next, &err);
    assert_int_equal(n, 13);
    assert_memory_equal(buf, "done-writing\n", 13);
    /* Past the end (rotated since): starts over. */
    n = drv_supervisor_log_read(s, "chatty", 1 << 30, buf, 5, &next, &err);
    assert_int_equal(n, 5);
    assert_int_equal(next, 5);
    /* Unknown and invalid ids. */
    assert_int_equal(drv_supervisor_log_read(s, "nobody", 0, buf, sizeof buf, &next, &err), -1);
    assert_int_equal(err.status, 404);
    char other[PATH_MAX];
    assert_int_equal(drv_supervisor_log_path(s, "../etc", other, sizeof other), -1);
    drv_supervisor_destroy(s);
    /* destroy keeps the logs (the agent restarts replicas when it comes back) */
    assert_int_equal(access(path, F_OK), 0);
}

static void test_apply_validation(void **state)
{
    drv_supervisor_t *s = sup_new((drv_supervisor_opts_t){0});
    static const char *ok[] = {"/bin/true", NULL};
    static const char *bad_env[] = {"NOEQUALS"};
    drv_error_t err = {0};
    drv_replica_spec_t sp[2] = {sh("x", ok), sh("x", ok)};
    assert_int_equal(drv_supervisor_apply(s, sp, 2, &err), -1);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.message, "listed twice"));
    sp[1].id = "../etc";
    assert_int_equal(drv_supervisor_apply(s, sp, 2, &err), -1);
    sp[1].id = "";
    assert_int_equal(drv_supervisor_apply(s, sp, 2, &err), -1);
    sp[1] = sh("y", ok);
    sp[1].argc = 0;
    assert_int_equal(drv_supervisor_apply(s, sp, 2, &err), -1);
    sp[1] = sh("y", ok);
    sp[1].env = bad_env;
    sp[1].envc = 1;
    assert_int_equal(drv_supervisor_apply(s, sp, 2, &err), -1);
    sp[1] = sh("y", ok);
    sp[1].health_path = "health";
    assert_int_equal(drv_supervisor_apply(s, sp, 2, &err), -1);
    assert_int_equal(count(s), 0);   /* failures have no effect */
    drv_supervisor_destroy(s);

    drv_supervisor_opts_t o = {0};
    assert_null(drv_supervisor_create(&o, &err));
    o.data_dir = tmp;
    o.stop_grace_ms = -1;
    assert_null(drv_supervisor_create(&o, &err));
    drv_supervisor_destroy(NULL);
    assert_string_equal(drv_rs_state_name(DRV_RS_STOPPING), "terminating");
    assert_string_equal(drv_rs_state_name(DRV_RS_BACKOFF), "backoff");
}

/* A replica with an artifact (state fetching): without a cache, with a
 * manifest that does not parse, and with an origin that does not answer,
 * it fails with the reason and its process never starts. */
static void test_artifact_fetch_fails(void **state)
{
    char marker[PATH_MAX + 16], cdir[PATH_MAX + 16], tree[PATH_MAX + 16], cmd[PATH_MAX + 64];
    snprintf(marker, sizeof marker, "%s/started", tmp);
    snprintf(cmd, sizeof cmd, "touch %s", marker);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    drv_replica_spec_t sp = spec("art", argv, NULL);
    sp.artifact_manifest = "{}";
    sp.artifact_origin = "http://127.0.0.1:1/v1/blobs/sha256";
    drv_replica_status_t st;
    /* no cache */
    drv_supervisor_t *s = sup_new((drv_supervisor_opts_t){0});
    apply(s, &sp, 1);
    wait_state(s, "art", DRV_RS_FAILED, &st);
    assert_non_null(strstr(st.reason, "no node cache"));
    drv_supervisor_destroy(s);
    /* a manifest that does not parse */
    snprintf(cdir, sizeof cdir, "%s/cache", tmp);
    drv_error_t err = {0};
    drv_cache_t *c = drv_cache_create(cdir, 1 << 20, &(drv_cache_opts_t){.retries = -1}, &err);
    assert_non_null(c);
    s = sup_new((drv_supervisor_opts_t){.cache = c});
    apply(s, &sp, 1);
    wait_state(s, "art", DRV_RS_FAILED, &st);
    assert_non_null(strstr(st.reason, "manifest from the head does not parse"));
    assert_string_equal(drv_rs_state_name(DRV_RS_FETCHING), "fetching");
    /* a real manifest, an origin that refuses connections */
    snprintf(tree, sizeof tree, "%s/tree", tmp);
    mkdir(tree, 0700);
    char file[PATH_MAX + 32];
    snprintf(file, sizeof file, "%s/w.bin", tree);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("some weights\n", f);
    fclose(f);
    drv_manifest_t *m = NULL;
    assert_int_equal(drv_manifest_build(tree, 4096, 1, &m, &err), 0);
    char *json = drv_manifest_to_json(m);
    sp.id = "art2";
    sp.artifact_manifest = json;
    apply(s, &sp, 1);
    wait_state(s, "art2", DRV_RS_FAILED, &st);
    assert_non_null(strstr(st.reason, "fetching the artifact failed"));
    assert_string_equal(st.artifact, m->digest);
    assert_int_equal(st.fetch_total, m->total_size);
    assert_int_equal(st.pid, 0);
    assert_int_not_equal(access(marker, F_OK), 0);   /* never started */
    apply(s, NULL, 0);
    wait_gone(s, "art2");
    drv_supervisor_destroy(s);
    drv_cache_destroy(c);
    free(json);
    drv_manifest_free(m);
}

/* replica_log.c on its own: rotation of over-long lines, tails reaching into
 * the rotated file, sanitizing of what a replica printed. */
static void test_rlog_unit(void **state)
{
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/rlog/x", tmp);
    drv_rlog_t l;
    drv_rlog_init(&l, dir, 100, 1);
    drv_error_t err = {0};
    assert_int_equal(drv_rlog_open(&l, &err), 0);
    char line[300];
    memset(line, 'a', 250);
    line[250] = '\n';
    drv_rlog_write(&l, line, 251);   /* longer than a file: split where full */
    assert_true(l.size <= 100);
    for (int i = 0; i < 30; i++) {
        int n = snprintf(line, sizeof line, "l%02d\n", i);
        drv_rlog_write(&l, line, (size_t)n);
        assert_true(l.size <= 100);
    }
    /* bad UTF-8, a control character, a valid 2-byte sequence, no final newline */
    drv_rlog_write(&l, "bad \xff\xfe ctl \x01 ok \xc3\xa9", 18);
    char buf[2048];
    size_t n = drv_rlog_tail(l.path, 3, buf, sizeof buf);
    assert_int_equal(n, strlen(buf));
    assert_string_equal(buf, "l28\nl29\nbad ?? ctl ? ok \xc3\xa9");
    /* only a few lines in the current file: the tail reaches into .1 */
    drv_rlog_write(&l, "\n", 1);
    for (int i = 0; i < 24; i++)
        drv_rlog_write(&l, "0123456789\n", 11);   /* rotates: the old file becomes .1 */
    drv_rlog_write(&l, "end\n", 4);
    int64_t cur_lines = l.size / 11 + 1;   /* 11-byte lines, then "end\n" */
    assert_true(cur_lines < 12);
    n = drv_rlog_tail(l.path, 12, buf, sizeof buf);
    assert_non_null(strstr(buf, "0123456789\nend"));
    int lines = 1;
    for (size_t i = 0; i < n; i++)
        lines += buf[i] == '\n';
    assert_int_equal(lines, 12);
    /* a small buffer keeps whole lines from the end */
    n = drv_rlog_tail(l.path, 20, buf, 30);
    assert_string_equal(buf, "0123456789\n0123456789\nend");
    drv_rlog_close(&l);
    char rot2[PATH_MAX + 40];
    snprintf(rot2, sizeof rot2, "%s.2", l.path);
    assert_int_not_equal(access(rot2, F_OK), 0);   /* log_files = 1 */
    drv_rlog_remove(dir);
    assert_int_not_equal(access(dir, F_OK), 0);
    assert_int_equal(drv_rlog_tail(l.path, 5, buf, sizeof buf), 0);
}

/* --- setup -------------------------------------------------------------------------- */

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    remove(p);
    return 0;
}

static int group_setup(void **state)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    snprintf(demo, sizeof demo, "%s/drover-demo-model", dirname(exe));
    if (access(demo, X_OK) != 0) {
        fprintf(stderr, "test_supervisor: %s not built\n", demo);
        return -1;
    }
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmp, sizeof tmp, "%s/drover-sup-XXXXXX", base);
    if (!mkdtemp(tmp))
        return -1;
    snprintf(weights, sizeof weights, "%s/weights.bin", tmp);
    FILE *f = fopen(weights, "wb");
    if (!f)
        return -1;
    static float block[4096];
    for (size_t i = 0; i < 4096; i++)
        block[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (int i = 0; i < 64; i++)   /* 1 MiB */
        fwrite(block, sizeof block, 1, f);
    fclose(f);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return 0;
}

static int group_teardown(void **state)
{
    curl_global_cleanup();
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_ready_idempotent_stop),
        cmocka_unit_test(test_env_contract),
        cmocka_unit_test(test_stop_sigkill_and_group),
        cmocka_unit_test(test_gpu_wait_for_stopping),
        cmocka_unit_test(test_crash_backoff),
        cmocka_unit_test(test_fail_start_gives_up),
        cmocka_unit_test(test_exec_failure),
        cmocka_unit_test(test_never_ready_fails),
        cmocka_unit_test(test_unhealthy_ready_restarts),
        cmocka_unit_test(test_relisted_while_terminating),
        cmocka_unit_test(test_fail_jobs_and_kept_log),
        cmocka_unit_test(test_log_rotation_and_reads),
        cmocka_unit_test(test_apply_validation),
        cmocka_unit_test(test_rlog_unit),
        cmocka_unit_test(test_artifact_fetch_fails),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
