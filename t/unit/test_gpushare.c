/* test_gpushare.c — unit tests of the pure parts of libdrover-gpushare.so
 * (src/gpushare/sizemap.c, config.c, region.c), linked statically and run
 * in both build trees (ASan+UBSan included). The interposer itself runs
 * preloaded into a probe program against the fake driver in t/gpushare.sh.
 *
 * Covers: the size map (put/take/replace, growth, tombstones against a
 * reference model, fork reset); the configuration (limits, malformed values
 * failing closed, replica ids, compute percent) and the charging rules
 * (rounding, array estimates, saturation); the shared region (exact
 * admission at the limit, named regions seen by two attachments, a version
 * mismatch refused, concurrent charging from threads, a killed process's
 * bytes reclaimed — also while it is a zombie and when its pid is reused —,
 * reclaim before refusing, a forked child's own slot).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpushare/config.h"
#include "gpushare/cuda_api.h"
#include "gpushare/region.h"
#include "gpushare/sizemap.h"

#define MIB (1LL << 20)

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* A region name private to this test run. */
static const char *rname(const char *what)
{
    static char buf[4][128];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "/drover-gpushare-unit-%d-%s", (int)getpid(), what);
    return b;
}

/* --- size map ---------------------------------------------------------------------- */

static void test_sizemap_basic(void **state)
{
    drv_gs_sizemap_t m;
    drv_gs_sizemap_init(&m);
    assert_int_equal(drv_gs_sizemap_take(&m, 42), 0);
    assert_int_equal(drv_gs_sizemap_count(&m), 0);
    uint64_t old = 99;
    assert_int_equal(drv_gs_sizemap_put(&m, 0x7f0000000000ULL, 4096, &old), 0);
    assert_int_equal(old, 0);
    assert_int_equal(drv_gs_sizemap_put(&m, 0, 512, NULL), 0);   /* key 0 is a key like any */
    assert_int_equal(drv_gs_sizemap_get(&m, 0x7f0000000000ULL), 4096);
    assert_int_equal(drv_gs_sizemap_put(&m, 0x7f0000000000ULL, 8192, &old), 0);
    assert_int_equal(old, 4096);   /* replaced: the old size comes back */
    assert_int_equal(drv_gs_sizemap_count(&m), 2);
    assert_int_equal(drv_gs_sizemap_total(&m), 8192 + 512);
    assert_int_equal(drv_gs_sizemap_take(&m, 0x7f0000000000ULL), 8192);
    assert_int_equal(drv_gs_sizemap_take(&m, 0x7f0000000000ULL), 0);
    assert_int_equal(drv_gs_sizemap_take(&m, 0), 512);
    assert_int_equal(drv_gs_sizemap_total(&m), 0);
    drv_gs_sizemap_fini(&m);
    drv_gs_sizemap_fini(NULL);
}

static void test_sizemap_growth(void **state)
{
    drv_gs_sizemap_t m;
    drv_gs_sizemap_init(&m);
    const uint64_t base = 0x7f1200000000ULL, n = 100000;
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {   /* 2 MiB-aligned keys: the hash must mix */
        assert_int_equal(drv_gs_sizemap_put(&m, base + i * (2 << 20), i + 1, NULL), 0);
        total += i + 1;
    }
    assert_int_equal(drv_gs_sizemap_count(&m), n);
    assert_int_equal(drv_gs_sizemap_total(&m), total);
    assert_true(m.cap >= n * 10 / 7);
    for (uint64_t i = 0; i < n; i += 2)
        assert_int_equal(drv_gs_sizemap_take(&m, base + i * (2 << 20)), i + 1);
    for (uint64_t i = 1; i < n; i += 2)
        assert_int_equal(drv_gs_sizemap_get(&m, base + i * (2 << 20)), i + 1);
    assert_int_equal(drv_gs_sizemap_count(&m), n / 2);
    drv_gs_sizemap_fini(&m);
}

/* Random puts and takes on a small key space, checked against a plain array. */
static void test_sizemap_model(void **state)
{
    enum { KEYS = 3000, OPS = 300000 };
    static uint64_t model[KEYS];
    memset(model, 0, sizeof model);
    drv_gs_sizemap_t m;
    drv_gs_sizemap_init(&m);
    uint64_t x = 88172645463325252ULL, total = 0;
    size_t live = 0;
    for (int op = 0; op < OPS; op++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t k = x % KEYS, key = 0x10000 + k * 512;
        if ((x >> 20) % 3) {
            uint64_t size = (x >> 32) % 1000000 + 1, old;
            assert_int_equal(drv_gs_sizemap_put(&m, key, size, &old), 0);
            assert_int_equal(old, model[k]);
            live += model[k] == 0;
            total += size - model[k];
            model[k] = size;
        } else {
            assert_int_equal(drv_gs_sizemap_take(&m, key), model[k]);
            live -= model[k] != 0;
            total -= model[k];
            model[k] = 0;
        }
    }
    assert_int_equal(drv_gs_sizemap_count(&m), live);
    assert_int_equal(drv_gs_sizemap_total(&m), total);
    for (uint64_t k = 0; k < KEYS; k++)
        assert_int_equal(drv_gs_sizemap_get(&m, 0x10000 + k * 512), model[k]);
    drv_gs_sizemap_fini(&m);
}

static void test_sizemap_fork_reset(void **state)
{
    drv_gs_sizemap_t m;
    drv_gs_sizemap_init(&m);
    assert_int_equal(drv_gs_sizemap_put(&m, 1, 2, NULL), 0);
    drv_gs_sizemap_reset_after_fork(&m);
    assert_int_equal(drv_gs_sizemap_count(&m), 0);
    assert_int_equal(drv_gs_sizemap_get(&m, 1), 0);
    assert_int_equal(drv_gs_sizemap_put(&m, 1, 3, NULL), 0);
    assert_int_equal(drv_gs_sizemap_take(&m, 1), 3);
    drv_gs_sizemap_fini(&m);
}

/* --- configuration and charging -------------------------------------------------------- */

static void test_config_limits(void **state)
{
    drv_gs_config_t c;
    const char *off[] = {NULL, "", "0"};
    for (size_t i = 0; i < 3; i++) {
        drv_gs_config_parse(off[i], "r1", NULL, &c);
        assert_false(c.limited);
        assert_false(c.refuse_all);
    }
    drv_gs_config_parse("4096", "r1", "25", &c);
    assert_true(c.limited);
    assert_false(c.refuse_all);
    assert_int_equal(c.limit_mib, 4096);
    assert_int_equal(c.limit_bytes, 4096 * MIB);
    assert_int_equal(c.compute_percent, 25);
    assert_string_equal(c.replica, "r1");
    assert_string_equal(c.region, "/drover-gpushare-r1");
    assert_string_equal(c.warning, "");
    drv_gs_config_parse("16777216", "r1", NULL, &c);
    assert_true(c.limited && !c.refuse_all);
    assert_int_equal(c.limit_bytes, 16777216LL * MIB);
    /* malformed: fail closed, with the reason */
    const char *bad[] = {"abc", "-1", "12a", " 5", "5 ", "16777217", "99999999999999999999999",
                         "0x10", "1.5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        drv_gs_config_parse(bad[i], "r1", NULL, &c);
        assert_true(c.limited);
        assert_true(c.refuse_all);
        assert_non_null(strstr(c.error, "DROVER_GPU_MEMORY_LIMIT_MIB"));
    }
}

static void test_config_ids(void **state)
{
    drv_gs_config_t c;
    drv_gs_config_parse("100", "demo-1a2b3c.x_y", NULL, &c);
    assert_string_equal(c.region, "/drover-gpushare-demo-1a2b3c.x_y");
    const char *bad[] = {"a/b", ".hidden", "sp ace", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        drv_gs_config_parse("100", bad[i], NULL, &c);
        assert_true(c.limited && !c.refuse_all);
        assert_string_equal(c.region, "");   /* anonymous */
        assert_string_equal(c.replica, "");
        assert_non_null(strstr(c.warning, "DROVER_REPLICA_ID"));
    }
    drv_gs_config_parse("100", NULL, NULL, &c);
    assert_non_null(strstr(c.warning, "not set"));
    char longid[200];
    memset(longid, 'a', 128);
    longid[128] = '\0';
    drv_gs_config_parse("100", longid, NULL, &c);
    assert_string_equal(c.region, "");
    drv_gs_config_parse(NULL, NULL, NULL, &c);   /* no limit: no warning either */
    assert_string_equal(c.warning, "");
    const char *pct[][2] = {{"25", "25"}, {"100", "100"}, {"101", "0"}, {"x", "0"}, {"", "0"}};
    for (size_t i = 0; i < 5; i++) {
        drv_gs_config_parse("1", "r", pct[i][0], &c);
        assert_int_equal(c.compute_percent, atoi(pct[i][1]));
    }
}

static void test_charge_size(void **state)
{
    assert_int_equal(drv_gs_charge_size(0), 0);
    assert_int_equal(drv_gs_charge_size(1), 512);
    assert_int_equal(drv_gs_charge_size(512), 512);
    assert_int_equal(drv_gs_charge_size(513), 1024);
    assert_int_equal(drv_gs_charge_size(MIB), MIB);
    assert_int_equal(drv_gs_charge_size(2 * MIB - 1), 2 * MIB);
    assert_int_equal(drv_gs_charge_size(2 * MIB), 2 * MIB);
    assert_int_equal(drv_gs_charge_size(2 * MIB + 1), 4 * MIB);
    assert_int_equal(drv_gs_charge_size(64 * MIB), 64 * MIB);
    assert_int_equal(drv_gs_charge_size(UINT64_MAX), UINT64_MAX >> 1);
    assert_true(drv_gs_charge_size((UINT64_MAX >> 1) - 1) <= UINT64_MAX >> 1);
}

static void test_array_bytes(void **state)
{
    assert_int_equal(drv_gs_array_bytes(1024, 1024, 1, CU_AD_FORMAT_FLOAT, 1, 1), 4 * MIB);
    assert_int_equal(drv_gs_array_bytes(1024, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0), 4096);
    assert_int_equal(drv_gs_array_bytes(64, 64, 64, CU_AD_FORMAT_HALF, 2, 1), 64 * 64 * 64 * 4);
    /* mip levels: 256^2 + 128^2 + 64^2 + 32^2 floats */
    assert_int_equal(drv_gs_array_bytes(256, 256, 1, CU_AD_FORMAT_FLOAT, 1, 4),
                     4 * (65536 + 16384 + 4096 + 1024));
    assert_int_equal(drv_gs_array_bytes(10, 1, 1, 0x99, 4, 1), 160);   /* unknown: 16 B */
    assert_int_equal(drv_gs_array_bytes(UINT64_MAX, UINT64_MAX, 2, CU_AD_FORMAT_FLOAT, 4, 1),
                     UINT64_MAX >> 1);
    char b[32];
    drv_gs_fmt_bytes(512, b, sizeof b);
    assert_string_equal(b, "512 B");
    drv_gs_fmt_bytes(3 * MIB / 2, b, sizeof b);
    assert_string_equal(b, "1.5 MiB");
    drv_gs_fmt_bytes(4096 * MIB, b, sizeof b);
    assert_string_equal(b, "4 GiB");
}

/* --- the shared region ----------------------------------------------------------------- */

static void test_region_names(void **state)
{
    char b[200];
    assert_int_equal(drv_gs_region_name("r-1.a_b", b, sizeof b), 0);
    assert_string_equal(b, "/drover-gpushare-r-1.a_b");
    assert_int_equal(drv_gs_region_name("a/b", b, sizeof b), -1);
    assert_int_equal(drv_gs_region_name(".a", b, sizeof b), -1);
    assert_int_equal(drv_gs_region_name("", b, sizeof b), -1);
    assert_int_equal(drv_gs_region_name(NULL, b, sizeof b), -1);
    assert_int_equal(drv_gs_region_name("abc", b, 10), -1);   /* does not fit */
}

static void test_region_anonymous_exact(void **state)
{
    drv_gs_region_t r;
    char why[256];
    assert_int_equal(drv_gs_region_attach(&r, NULL, "x", 10 * MIB, 16, why, sizeof why), 0);
    assert_false(r.shared);
    assert_true(r.slot >= 0);
    assert_int_equal(drv_gs_region_limit(&r), 10 * MIB);
    for (int i = 0; i < 10; i++)
        assert_true(drv_gs_region_charge(&r, MIB));
    assert_false(drv_gs_region_charge(&r, 1));            /* not one byte past the share */
    assert_false(drv_gs_region_charge(&r, INT64_MAX));    /* no overflow */
    assert_int_equal(drv_gs_region_used(&r), 10 * MIB);
    drv_gs_region_uncharge(&r, 3 * MIB);
    assert_false(drv_gs_region_charge(&r, 3 * MIB + 1));
    assert_true(drv_gs_region_charge(&r, 3 * MIB));
    assert_int_equal(r.sh->peak, 10 * MIB);
    assert_int_equal(r.sh->refusals, 3);
    assert_int_equal(drv_gs_region_processes(&r), 1);
    drv_gs_region_release_slot(&r);                       /* its bytes leave `used` */
    assert_int_equal(drv_gs_region_used(&r), 0);
    drv_gs_region_detach(&r);
    assert_null(r.sh);
    assert_int_equal(drv_gs_region_attach(&r, NULL, "x", 0, 16, why, sizeof why), -1);
}

static void test_region_named_shared(void **state)
{
    const char *name = rname("shared");
    shm_unlink(name);
    drv_gs_region_t a, b;
    char why[256];
    assert_int_equal(drv_gs_region_attach(&a, name, "rep", 8 * MIB, 64, why, sizeof why), 0);
    assert_true(a.shared);
    /* a second attachment (here: same process) sees the same count */
    assert_int_equal(drv_gs_region_attach(&b, name, "rep", 999 * MIB, 64, why, sizeof why), 0);
    assert_int_equal(drv_gs_region_limit(&b), 8 * MIB);   /* the creator's limit holds */
    assert_true(a.slot != b.slot);
    assert_true(drv_gs_region_charge(&a, 5 * MIB));
    assert_false(drv_gs_region_charge(&b, 4 * MIB));
    assert_true(drv_gs_region_charge(&b, 3 * MIB));
    assert_int_equal(drv_gs_region_used(&a), 8 * MIB);
    assert_string_equal(a.sh->replica, "rep");
    drv_gs_region_detach(&b);   /* gives b's 3 MiB back */
    assert_int_equal(drv_gs_region_used(&a), 5 * MIB);
    drv_gs_region_detach(&a);
    /* another slot count is another layout: refused, not misread */
    assert_int_equal(drv_gs_region_attach(&a, name, "rep", 8 * MIB, 32, why, sizeof why), -1);
    assert_non_null(strstr(why, "bytes"));
    shm_unlink(name);
}

static void test_region_bad_version(void **state)
{
    const char *name = rname("version");
    shm_unlink(name);
    drv_gs_region_t a;
    char why[256];
    assert_int_equal(drv_gs_region_attach(&a, name, "rep", 8 * MIB, 16, why, sizeof why), 0);
    a.sh->version = 99;
    drv_gs_region_detach(&a);
    assert_int_equal(drv_gs_region_attach(&a, name, "rep", 8 * MIB, 16, why, sizeof why), -1);
    assert_non_null(strstr(why, "not a drover-gpushare region"));
    shm_unlink(name);
}

struct hammer {
    drv_gs_region_t *r;
    long admitted;
};

static void *hammer(void *arg)
{
    struct hammer *h = arg;
    for (int i = 0; i < 20000; i++)
        if (drv_gs_region_charge(h->r, 1024))
            h->admitted++;
    return NULL;
}

static void test_region_threads(void **state)
{
    drv_gs_region_t r;
    char why[256];
    assert_int_equal(drv_gs_region_attach(&r, NULL, "t", 50000LL * 1024, 16, why, sizeof why), 0);
    pthread_t t[8];
    struct hammer h[8];
    for (int i = 0; i < 8; i++) {
        h[i] = (struct hammer){&r, 0};
        pthread_create(&t[i], NULL, hammer, &h[i]);
    }
    long total = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        total += h[i].admitted;
    }
    assert_int_equal(total, 50000);   /* exactly the share, never more */
    assert_int_equal(drv_gs_region_used(&r), 50000LL * 1024);
    assert_int_equal(r.sh->slots[r.slot].bytes, 50000LL * 1024);
    drv_gs_region_detach(&r);
}

/* A child attaches `name`, charges `mib`, tells the parent, then waits to be killed. */
static pid_t child_holding(const char *name, int64_t limit, int mib)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        drv_gs_region_t r;
        char why[256];
        char ok = drv_gs_region_attach(&r, name, "rep", limit, 64, why, sizeof why) == 0 &&
                          drv_gs_region_charge(&r, mib * MIB)
                      ? 'y'
                      : 'n';
        if (write(p[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    char ok = 0;
    assert_int_equal(read(p[0], &ok, 1), 1);
    close(p[0]);
    assert_int_equal(ok, 'y');
    return pid;
}

static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    return rp && rp[1] ? rp[2] : '?';
}

static void test_region_reclaim_killed(void **state)
{
    const char *name = rname("reclaim");
    shm_unlink(name);
    drv_gs_region_t r;
    char why[256];
    assert_int_equal(drv_gs_region_attach(&r, name, "rep", 10 * MIB, 64, why, sizeof why), 0);
    pid_t c = child_holding(name, 10 * MIB, 6);
    assert_int_equal(drv_gs_region_used(&r), 6 * MIB);
    assert_int_equal(drv_gs_region_processes(&r), 2);
    assert_int_equal(drv_gs_region_reclaim(&r), 0);        /* alive: nothing to take */
    assert_false(drv_gs_region_charge(&r, 5 * MIB));      /* and its bytes count */
    kill(c, SIGKILL);
    for (int i = 0; i < 500 && proc_state(c) != 'Z'; i++)
        sleep_ms(10);
    assert_int_equal(proc_state(c), 'Z');                 /* not reaped yet: a zombie */
    assert_int_equal(drv_gs_region_reclaim(&r), 6 * MIB); /* ... is dead all the same */
    assert_int_equal(drv_gs_region_used(&r), 0);
    assert_int_equal(drv_gs_region_processes(&r), 1);
    waitpid(c, NULL, 0);

    /* a refusal reclaims first: the dead child's bytes do not block us */
    c = child_holding(name, 10 * MIB, 10);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    assert_int_equal(drv_gs_region_used(&r), 10 * MIB);
    assert_true(drv_gs_region_charge(&r, 4 * MIB));
    assert_int_equal(drv_gs_region_used(&r), 4 * MIB);

    /* a live pid with another start time is a reused pid: its slot is dead */
    int s = r.slot == 0 ? 1 : 0;
    atomic_store(&r.sh->slots[s].start, 12345);
    atomic_store(&r.sh->slots[s].bytes, 2 * MIB);
    atomic_fetch_add(&r.sh->used, 2 * MIB);
    atomic_store(&r.sh->slots[s].pid, (int32_t)getppid());
    uint32_t hwm = atomic_load(&r.sh->slot_hwm);
    if (hwm < (uint32_t)s + 1)
        atomic_store(&r.sh->slot_hwm, (uint32_t)s + 1);
    assert_int_equal(drv_gs_region_reclaim(&r), 2 * MIB);
    assert_int_equal(drv_gs_region_used(&r), 4 * MIB);
    drv_gs_region_detach(&r);
    shm_unlink(name);
}

static void test_region_fork_child_slot(void **state)
{
    drv_gs_region_t r;
    char why[256];
    assert_int_equal(drv_gs_region_attach(&r, NULL, "f", 10 * MIB, 16, why, sizeof why), 0);
    assert_true(drv_gs_region_charge(&r, 2 * MIB));
    int parent_slot = r.slot;
    pid_t c = fork();
    if (c == 0) {   /* the anonymous mapping is shared with the child */
        drv_gs_region_after_fork(&r);
        bool ok = drv_gs_region_charge(&r, 3 * MIB) && r.slot >= 0 && r.slot != parent_slot &&
                  r.sh->slots[r.slot].bytes == 3 * MIB && !drv_gs_region_charge(&r, 6 * MIB);
        drv_gs_region_release_slot(&r);   /* a clean exit gives its bytes back */
        _exit(ok ? 0 : 1);
    }
    int st;
    waitpid(c, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(drv_gs_region_used(&r), 2 * MIB);
    assert_int_equal(r.sh->slots[parent_slot].bytes, 2 * MIB);
    drv_gs_region_detach(&r);
}

static void test_pid_alive(void **state)
{
    uint64_t start = drv_gs_pid_start(getpid());
    assert_true(start > 0);
    assert_true(drv_gs_pid_alive(getpid(), start));
    assert_true(drv_gs_pid_alive(getpid(), 0));
    assert_false(drv_gs_pid_alive(getpid(), start + 1));
    assert_false(drv_gs_pid_alive(0, 0));
    assert_false(drv_gs_pid_alive(-5, 0));
    pid_t c = fork();
    if (c == 0)
        _exit(0);
    waitpid(c, NULL, 0);
    assert_false(drv_gs_pid_alive(c, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizemap_basic),
        cmocka_unit_test(test_sizemap_growth),
        cmocka_unit_test(test_sizemap_model),
        cmocka_unit_test(test_sizemap_fork_reset),
        cmocka_unit_test(test_config_limits),
        cmocka_unit_test(test_config_ids),
        cmocka_unit_test(test_charge_size),
        cmocka_unit_test(test_array_bytes),
        cmocka_unit_test(test_region_names),
        cmocka_unit_test(test_region_anonymous_exact),
        cmocka_unit_test(test_region_named_shared),
        cmocka_unit_test(test_region_bad_version),
        cmocka_unit_test(test_region_threads),
        cmocka_unit_test(test_region_reclaim_killed),
        cmocka_unit_test(test_region_fork_child_slot),
        cmocka_unit_test(test_pid_alive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
