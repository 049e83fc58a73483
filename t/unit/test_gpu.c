/* test_gpu.c — unit tests of the agent's GPU discovery (src/agent/gpu.c):
 * the --gpus spec parser (valid and each invalid form), declared GPUs and
 * their stable UUIDs, and NVML handling against the test double
 * t/fake/fake_nvml.c (built as t/fake/libnvidia-ml.so.1 under the build
 * folder that holds this binary): detection, telemetry, unsupported fields, XID and ECC health,
 * lost GPUs, init failure and missing libraries falling back to no GPUs,
 * an explicit spec winning over NVML, and the JSON rendering.
 *
 * The fake is configured through a JSON file (FAKE_NVML_CONFIG) that tests
 * rewrite between refreshes. Single-threaded, like the agent's main thread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/gpu.h"

/* --- fixtures ------------------------------------------------------------- */

static char tmp_dir[PATH_MAX];
static char config_path[PATH_MAX];
static char fake_path[PATH_MAX];

static void write_config(const char *text)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", config_path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, config_path), 0);
}

static int group_setup(void **state)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    snprintf(fake_path, sizeof fake_path, "%s/t/fake/libnvidia-ml.so.1", dirname(exe));
    if (access(fake_path, R_OK) != 0) {
        fprintf(stderr, "fake NVML not found at %s\n", fake_path);
        return -1;
    }
    snprintf(tmp_dir, sizeof tmp_dir, "%s/drover-test-gpu-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp_dir))
        return -1;
    snprintf(config_path, sizeof config_path, "%s/nvml.json", tmp_dir);
    return 0;
}

static int group_teardown(void **state)
{
    unlink(config_path);
    rmdir(tmp_dir);
    return 0;
}

/* Each NVML test starts with the fake library and no config file. */
static int nvml_setup(void **state)
{
    unlink(config_path);
    setenv("DROVER_NVML_LIBRARY", fake_path, 1);
    setenv("FAKE_NVML_CONFIG", config_path, 1);
    return 0;
}

static int nvml_teardown(void **state)
{
    drv_gpus_destroy(*state);
    *state = NULL;
    unsetenv("DROVER_NVML_LIBRARY");
    unsetenv("FAKE_NVML_CONFIG");
    unlink(config_path);
    return 0;
}

/* Create from spec (NULL: auto) and keep it in *state for the teardown. */
static drv_gpus_t *create(void **state, const char *spec)
{
    drv_error_t e = {0};
    drv_gpus_t *g = drv_gpus_create(spec, "node-1", &e);
    if (!g)
        fprintf(stderr, "drv_gpus_create: %s\n", e.message);
    assert_non_null(g);
    *state = g;
    return g;
}

static void refresh(drv_gpus_t *g)
{
    drv_error_t e = {0};
    assert_int_equal(drv_gpus_refresh(g, &e), 0);
}

#define L4 "\"name\": \"NVIDIA L4\", \"uuid\": \"GPU-11111111-2222-3333-4444-555555555555\""
#define H100 "\"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee\""

/* Two GPUs: an L4 with full telemetry, an H100 with extra fields. */
static void two_gpus(const char *l4_extra, const char *h100_extra)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\"init_error\": 0, \"driver_version\": \"550.54.15\", \"gpus\": ["
             "{" L4 ", \"memory_total_mib\": 23034, \"memory_used_mib\": 100,"
             " \"utilization\": 7, \"temperature\": 41, \"ecc_double_bit\": 0%s},"
             "{" H100 ", \"memory_total_mib\": 81559, \"memory_used_mib\": 2048,"
             " \"utilization\": 55, \"temperature\": 60%s}]}",
             l4_extra, h100_extra);
    write_config(text);
}

/* --- spec parsing ------------------------------------------------------------ */

static void test_spec_valid(void **state)
{
    drv_gpu_decl_t d[8];
    size_t n = 0;
    drv_error_t e = {0};
    assert_int_equal(drv_gpus_parse_spec("2xL4:24576,1xH100:81559", d, 8, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_int_equal(d[0].count, 2);
    assert_string_equal(d[0].type, "L4");
    assert_int_equal(d[0].memory_mib, 24576);
    assert_int_equal(d[1].count, 1);
    assert_string_equal(d[1].type, "H100");
    assert_int_equal(d[1].memory_mib, 81559);

    /* spaces around entries, the limits themselves */
    assert_int_equal(drv_gpus_parse_spec(" 1xT4:15360 , 3xA10G:23028 ", d, 8, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_string_equal(d[0].type, "T4");
    assert_string_equal(d[1].type, "A10G");
    assert_int_equal(d[1].count, 3);
    assert_int_equal(drv_gpus_parse_spec("64xabcdefghijklmnopqrstuvwxyz-12345:1048576", d, 8, &n,
                                         &e), 0);
    assert_int_equal(d[0].count, 64);
    assert_int_equal(strlen(d[0].type), 32);
    assert_int_equal(d[0].memory_mib, 1048576);
    assert_int_equal(drv_gpus_parse_spec("32xL4:1,32xT4:1", d, 8, &n, &e), 0);
    assert_int_equal(drv_gpus_parse_spec("1xL40S:46068", d, 8, &n, &e), 0);
    assert_string_equal(d[0].type, "L40S");
}

static void expect_bad_spec(const char *spec, const char *needle)
{
    drv_gpu_decl_t d[DRV_GPUS_MAX];
    size_t n = 0;
    drv_error_t e = {0};
    if (drv_gpus_parse_spec(spec, d, DRV_GPUS_MAX, &n, &e) != -1)
        fail_msg("spec '%s' was accepted", spec ? spec : "(null)");
    if (!strstr(e.message, needle))
        fail_msg("spec '%s': message '%s' lacks '%s'", spec ? spec : "(null)", e.message, needle);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.code, "invalid_argument");
    assert_string_equal(e.field, "gpus");
    /* drv_gpus_create refuses it the same way, leaving nothing behind */
    drv_error_t e2 = {0};
    assert_null(drv_gpus_create(spec, "seed", &e2));
    assert_string_equal(e2.message, e.message);
}

static void test_spec_invalid(void **state)
{
    expect_bad_spec("xyz", "--gpus: expected NxTYPE:MEMORY_MIB like 2xL4:24576, got 'xyz'");
    expect_bad_spec("", "got ''");
    expect_bad_spec("2L4:24576", "got '2L4:24576'");
    expect_bad_spec("2XL4:24576", "got '2XL4:24576'");
    expect_bad_spec("2xL4", "got '2xL4'");
    expect_bad_spec("2xL4:", "got '2xL4:'");
    expect_bad_spec("2xL4:24k", "got '2xL4:24k'");
    expect_bad_spec("2xL4:-1", "got '2xL4:-1'");
    expect_bad_spec("xL4:24576", "got 'xL4:24576'");
    expect_bad_spec("-1xL4:24576", "got '-1xL4:24576'");
    expect_bad_spec("2xL4:24576,", "got ''");
    expect_bad_spec("2xL4:24576,,1xT4:15360", "got ''");
    expect_bad_spec("2xL4:24576;1xT4:15360", "got '2xL4:24576;1xT4:15360'");
    expect_bad_spec("0xL4:24576", "--gpus: GPU count 0 in '0xL4:24576' is out of range 1..64");
    expect_bad_spec("65xL4:24576", "GPU count 65 in '65xL4:24576' is out of range 1..64");
    expect_bad_spec("99999999999999999999999xL4:1", "is out of range 1..64");
    expect_bad_spec("2x:24576", "--gpus: GPU type '' in '2x:24576' must be 1 to 32 characters");
    expect_bad_spec("2xL4_PCIe:24576", "GPU type 'L4_PCIe'");
    expect_bad_spec("2xL 4:24576", "GPU type 'L 4'");
    expect_bad_spec("2xabcdefghijklmnopqrstuvwxyz-123456:1", "must be 1 to 32 characters");
    expect_bad_spec("2xL4:0", "--gpus: GPU memory 0 MiB in '2xL4:0' is out of range 1..1048576");
    expect_bad_spec("2xL4:1048577", "GPU memory 1048577 MiB");
    expect_bad_spec("2xL4:99999999999999999999999", "is out of range 1..1048576");
    expect_bad_spec("40xL4:24576,25xT4:15360", "--gpus: more than 64 GPUs declared");
    expect_bad_spec("1xT4:15360,zzz", "got 'zzz'");
}

static void test_spec_cap(void **state)
{
    drv_gpu_decl_t d[1];
    size_t n = 0;
    drv_error_t e = {0};
    assert_int_equal(drv_gpus_parse_spec("1xL4:1,1xT4:1", d, 1, &n, &e), -1);
    assert_non_null(strstr(e.message, "too many entries"));
    assert_int_equal(drv_gpus_parse_spec(NULL, d, 1, &n, &e), -1);
}

/* --- declared GPUs ------------------------------------------------------------ */

static bool uuid_shaped(const char *u)
{
    static const char shape[] = "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
    if (strlen(u) != sizeof shape - 1)
        return false;
    for (size_t i = 0; shape[i]; i++) {
        if (shape[i] == 'x' ? !strchr("0123456789abcdef", u[i]) || !u[i] : u[i] != shape[i])
            return false;
    }
    return true;
}

static void test_declared(void **state)
{
    /* NVML would find GPUs, but an explicit spec never loads it */
    two_gpus("", "");
    drv_gpus_t *g = create(state, "2xL4:24576,1xH100:81559");
    assert_string_equal(drv_gpus_source(g), "declared");
    assert_string_equal(drv_gpus_driver_version(g), "");
    assert_non_null(strstr(drv_gpus_message(g), "declared by --gpus 2xL4:24576,1xH100:81559"));
    assert_int_equal(drv_gpus_count(g), 3);
    static const char *names[] = {"L4", "L4", "H100"};
    static const int64_t mem[] = {24576, 24576, 81559};
    for (size_t i = 0; i < 3; i++) {
        const drv_gpu_info_t *gi = drv_gpus_at(g, i);
        assert_non_null(gi);
        assert_int_equal(gi->index, (int)i);
        assert_string_equal(gi->name, names[i]);
        assert_int_equal(gi->memory_total_mib, mem[i]);
        assert_int_equal(gi->memory_used_mib, 0);
        assert_int_equal(gi->utilization_percent, -1);
        assert_int_equal(gi->temperature_c, -1);
        assert_true(gi->healthy);
        assert_string_equal(gi->health_reason, "");
        assert_false(gi->detected);
        assert_true(uuid_shaped(gi->uuid));
    }
    assert_null(drv_gpus_at(g, 3));
    assert_string_not_equal(drv_gpus_at(g, 0)->uuid, drv_gpus_at(g, 1)->uuid);
    assert_string_not_equal(drv_gpus_at(g, 1)->uuid, drv_gpus_at(g, 2)->uuid);
    refresh(g);   /* nothing to refresh */
    assert_true(drv_gpus_at(g, 0)->healthy);
}

static void test_declared_uuid_stable(void **state)
{
    drv_error_t e = {0};
    drv_gpus_t *a = drv_gpus_create("2xL4:24576", "node-a", &e);
    drv_gpus_t *a2 = drv_gpus_create("2xL4:24576", "node-a", &e);
    drv_gpus_t *b = drv_gpus_create("2xL4:24576", "node-b", &e);
    drv_gpus_t *nul = drv_gpus_create("1xL4:24576", NULL, &e);
    assert_non_null(a);
    assert_non_null(a2);
    assert_non_null(b);
    assert_non_null(nul);
    for (size_t i = 0; i < 2; i++) {
        assert_string_equal(drv_gpus_at(a, i)->uuid, drv_gpus_at(a2, i)->uuid);
        assert_string_not_equal(drv_gpus_at(a, i)->uuid, drv_gpus_at(b, i)->uuid);
    }
    char u[41];
    drv_gpu_declared_uuid("node-a", 1, u, sizeof u);
    assert_string_equal(u, drv_gpus_at(a, 1)->uuid);
    drv_gpu_declared_uuid("", 0, u, sizeof u);
    assert_string_equal(u, drv_gpus_at(nul, 0)->uuid);
    /* a long seed is hashed whole */
    char seed1[1000], seed2[1000];
    memset(seed1, 'a', sizeof seed1 - 1);
    seed1[sizeof seed1 - 1] = '\0';
    memcpy(seed2, seed1, sizeof seed1);
    seed2[900] = 'b';
    char u1[41], u2[41];
    drv_gpu_declared_uuid(seed1, 0, u1, sizeof u1);
    drv_gpu_declared_uuid(seed2, 0, u2, sizeof u2);
    assert_true(uuid_shaped(u1));
    assert_string_not_equal(u1, u2);
    drv_gpus_destroy(a);
    drv_gpus_destroy(a2);
    drv_gpus_destroy(b);
    drv_gpus_destroy(nul);
}

static void test_none(void **state)
{
    drv_gpus_t *g = create(state, "none");
    assert_string_equal(drv_gpus_source(g), "none");
    assert_string_equal(drv_gpus_message(g), "--gpus none");
    assert_int_equal(drv_gpus_count(g), 0);
    assert_null(drv_gpus_at(g, 0));
    refresh(g);
    json_t *j = drv_gpus_to_json(g);
    assert_true(json_is_array(j));
    assert_int_equal(json_array_size(j), 0);
    json_decref(j);
    drv_gpus_destroy(g);
    *state = NULL;

    /* NULL-safety of the accessors */
    drv_gpus_destroy(NULL);
    assert_int_equal(drv_gpus_count(NULL), 0);
    assert_null(drv_gpus_at(NULL, 0));
    assert_string_equal(drv_gpus_source(NULL), "none");
}

/* --- NVML through the fake ------------------------------------------------------ */

static void test_nvml_detect(void **state)
{
    two_gpus("", "");
    drv_gpus_t *g = create(state, NULL);
    assert_string_equal(drv_gpus_source(g), "nvml");
    assert_string_equal(drv_gpus_driver_version(g), "550.54.15");
    assert_string_equal(drv_gpus_message(g), "NVML 550.54.15: 2 GPUs");
    assert_int_equal(drv_gpus_count(g), 2);

    const drv_gpu_info_t *a = drv_gpus_at(g, 0), *b = drv_gpus_at(g, 1);
    assert_int_equal(a->index, 0);
    assert_string_equal(a->name, "NVIDIA L4");
    assert_string_equal(a->uuid, "GPU-11111111-2222-3333-4444-555555555555");
    assert_int_equal(a->memory_total_mib, 23034);
    assert_int_equal(a->memory_used_mib, 100);
    assert_int_equal(a->utilization_percent, 7);
    assert_int_equal(a->temperature_c, 41);
    assert_true(a->healthy);
    assert_true(a->detected);
    assert_int_equal(b->index, 1);
    assert_string_equal(b->name, "NVIDIA H100 80GB HBM3");
    assert_int_equal(b->memory_total_mib, 81559);
    assert_int_equal(b->utilization_percent, 55);
    assert_true(b->detected);

    /* "auto" is the same as NULL */
    drv_error_t e = {0};
    drv_gpus_t *g2 = drv_gpus_create("auto", "x", &e);
    assert_non_null(g2);
    assert_string_equal(drv_gpus_source(g2), "nvml");
    assert_int_equal(drv_gpus_count(g2), 2);
    drv_gpus_destroy(g2);
}

static void test_nvml_telemetry_refresh(void **state)
{
    two_gpus("", "");
    drv_gpus_t *g = create(state, NULL);
    write_config("{\"driver_version\": \"550.54.15\", \"gpus\": ["
                 "{" L4 ", \"memory_total_mib\": 23034, \"memory_used_mib\": 20000,"
                 " \"utilization\": 93, \"temperature\": 77},"
                 "{" H100 ", \"memory_total_mib\": 81559, \"memory_used_mib\": 0,"
                 " \"utilization\": 0, \"temperature\": 30}]}");
    refresh(g);
    const drv_gpu_info_t *a = drv_gpus_at(g, 0), *b = drv_gpus_at(g, 1);
    assert_int_equal(a->memory_used_mib, 20000);
    assert_int_equal(a->utilization_percent, 93);
    assert_int_equal(a->temperature_c, 77);
    assert_int_equal(b->memory_used_mib, 0);
    assert_int_equal(b->utilization_percent, 0);
    assert_int_equal(b->temperature_c, 30);
    assert_true(a->healthy);
    assert_true(b->healthy);
}

static void test_nvml_unsupported(void **state)
{
    /* everything optional unsupported on the H100: still discovered */
    two_gpus(", \"unsupported\": [\"temperature\"]",
             ", \"unsupported\": [\"name\", \"uuid\", \"memory\", \"utilization\","
             " \"temperature\", \"ecc\", \"events\"]");
    drv_gpus_t *g = create(state, NULL);
    assert_int_equal(drv_gpus_count(g), 2);
    const drv_gpu_info_t *a = drv_gpus_at(g, 0), *b = drv_gpus_at(g, 1);
    assert_int_equal(a->temperature_c, -1);
    assert_int_equal(a->utilization_percent, 7);
    assert_string_equal(b->name, "NVIDIA GPU");
    assert_true(uuid_shaped(b->uuid));   /* derived from the seed */
    assert_int_equal(b->memory_total_mib, 0);
    assert_int_equal(b->utilization_percent, -1);
    assert_int_equal(b->temperature_c, -1);
    assert_true(b->healthy);
    refresh(g);
    assert_int_equal(a->temperature_c, -1);
    assert_int_equal(b->utilization_percent, -1);
    assert_true(b->healthy);

    json_t *j = drv_gpus_to_json(g);
    assert_true(json_is_null(json_object_get(json_array_get(j, 0), "temperature_c")));
    assert_int_equal(json_integer_value(json_object_get(json_array_get(j, 0),
                                                        "utilization_percent")), 7);
    assert_true(json_is_null(json_object_get(json_array_get(j, 1), "utilization_percent")));
    assert_true(json_is_null(json_object_get(json_array_get(j, 1), "temperature_c")));
    json_decref(j);
}

static void test_nvml_xid(void **state)
{
    two_gpus(", \"xid_events\": []", "");
    drv_gpus_t *g = create(state, NULL);
    const drv_gpu_info_t *a = drv_gpus_at(g, 0), *b = drv_gpus_at(g, 1);
    refresh(g);
    assert_true(a->healthy);

    /* application errors leave the GPU healthy */
    two_gpus(", \"xid_events\": [13, 31, 43]", "");
    refresh(g);
    assert_true(a->healthy);
    assert_string_equal(a->health_reason, "");

    /* XID 79 injected after start: unhealthy, the other GPU is not */
    two_gpus(", \"xid_events\": [13, 31, 43, 79]", "");
    refresh(g);
    assert_false(a->healthy);
    assert_string_equal(a->health_reason, "XID 79: GPU has fallen off the bus");
    assert_true(b->healthy);

    /* stays unhealthy, first cause kept */
    two_gpus(", \"xid_events\": [13, 31, 43, 79, 48]", "");
    refresh(g);
    refresh(g);
    assert_false(a->healthy);
    assert_string_equal(a->health_reason, "XID 79: GPU has fallen off the bus");

    json_t *j = drv_gpus_to_json(g);
    json_t *o = json_array_get(j, 0);
    assert_true(json_is_false(json_object_get(o, "healthy")));
    assert_string_equal(json_string_value(json_object_get(o, "health_reason")),
                        "XID 79: GPU has fallen off the bus");
    assert_true(json_is_true(json_object_get(json_array_get(j, 1), "healthy")));
    json_decref(j);
}

static void test_nvml_xid_at_start(void **state)
{
    /* events pending when the agent starts are seen on the first refresh */
    two_gpus("", ", \"xid_events\": [94]");
    drv_gpus_t *g = create(state, NULL);
    refresh(g);
    assert_true(drv_gpus_at(g, 0)->healthy);
    assert_false(drv_gpus_at(g, 1)->healthy);
    assert_string_equal(drv_gpus_at(g, 1)->health_reason, "XID 94: contained ECC error");
}

static void test_nvml_ecc_counter(void **state)
{
    /* no events at all: the volatile double-bit counter is the signal */
    two_gpus(", \"unsupported\": [\"events\"]", "");
    drv_gpus_t *g = create(state, NULL);
    const drv_gpu_info_t *a = drv_gpus_at(g, 0);
    refresh(g);
    assert_true(a->healthy);
    two_gpus(", \"unsupported\": [\"events\"], \"ecc_double_bit\": 1", "");
    refresh(g);
    assert_false(a->healthy);
    assert_string_equal(a->health_reason, "1 double-bit ECC error since the driver loaded");
    assert_true(drv_gpus_at(g, 1)->healthy);
}

static void test_nvml_ecc_event(void **state)
{
    /* the counter unsupported, the double-bit ECC event delivered */
    two_gpus(", \"unsupported\": [\"ecc\"]", "");
    drv_gpus_t *g = create(state, NULL);
    const drv_gpu_info_t *a = drv_gpus_at(g, 0);
    refresh(g);
    assert_true(a->healthy);
    two_gpus(", \"unsupported\": [\"ecc\"], \"ecc_double_bit\": 3", "");
    refresh(g);
    assert_false(a->healthy);
    assert_string_equal(a->health_reason, "double-bit ECC error event");
}

static void test_nvml_ecc_at_start(void **state)
{
    /* double-bit ECC events type unsupported (XIDs still registered);
     * a counter already non-zero at start makes the GPU unhealthy at once */
    two_gpus(", \"unsupported\": [\"ecc_events\"], \"ecc_double_bit\": 2", "");
    drv_gpus_t *g = create(state, NULL);
    assert_false(drv_gpus_at(g, 0)->healthy);
    assert_string_equal(drv_gpus_at(g, 0)->health_reason,
                        "2 double-bit ECC errors since the driver loaded");
    /* XID events still arrive through the XID-only registration */
    two_gpus(", \"unsupported\": [\"ecc_events\"], \"ecc_double_bit\": 2",
             ", \"xid_events\": [119]");
    refresh(g);
    assert_string_equal(drv_gpus_at(g, 1)->health_reason, "XID 119: GSP RPC timeout");
}

static void test_nvml_lost(void **state)
{
    two_gpus("", ", \"handle_error\": 15");
    drv_gpus_t *g = create(state, NULL);
    assert_int_equal(drv_gpus_count(g), 2);
    const drv_gpu_info_t *a = drv_gpus_at(g, 0), *b = drv_gpus_at(g, 1);
    assert_true(a->healthy);
    assert_false(b->healthy);
    assert_string_equal(b->health_reason, "NVML cannot open the GPU: GPU is lost");
    assert_true(uuid_shaped(b->uuid));
    assert_true(b->detected);

    two_gpus(", \"lost\": true", ", \"handle_error\": 15");
    refresh(g);
    assert_false(a->healthy);
    assert_non_null(strstr(a->health_reason, "lost"));
    assert_int_equal(a->memory_total_mib, 23034);   /* last known */
    assert_int_equal(a->utilization_percent, -1);
    assert_int_equal(a->temperature_c, -1);
}

static void test_nvml_init_error(void **state)
{
    write_config("{\"init_error\": 9, \"gpus\": [{\"name\": \"NVIDIA L4\"}]}");
    drv_gpus_t *g = create(state, "auto");
    assert_string_equal(drv_gpus_source(g), "none");
    assert_int_equal(drv_gpus_count(g), 0);
    assert_string_equal(drv_gpus_message(g), "NVML init failed: Driver Not Loaded");
    assert_string_equal(drv_gpus_driver_version(g), "");
    refresh(g);
    assert_int_equal(drv_gpus_count(g), 0);
}

static void test_nvml_no_gpus(void **state)
{
    /* no config file: a machine with a driver and no GPUs */
    drv_gpus_t *g = create(state, NULL);
    assert_string_equal(drv_gpus_source(g), "none");
    assert_int_equal(drv_gpus_count(g), 0);
    assert_string_equal(drv_gpus_message(g), "NVML found no GPUs");
}

static void test_nvml_missing_library(void **state)
{
    setenv("DROVER_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    drv_gpus_t *g = create(state, NULL);
    assert_string_equal(drv_gpus_source(g), "none");
    assert_int_equal(drv_gpus_count(g), 0);
    assert_non_null(strstr(drv_gpus_message(g), "NVML unavailable: "));
    assert_non_null(strstr(drv_gpus_message(g), "/nonexistent/libnvidia-ml.so.1"));
    drv_gpus_destroy(g);

    /* a library that loads but is not NVML */
    setenv("DROVER_NVML_LIBRARY", "libm.so.6", 1);
    g = create(state, NULL);
    assert_string_equal(drv_gpus_source(g), "none");
    assert_string_equal(drv_gpus_message(g), "NVML unavailable: libm.so.6 lacks nvmlInit_v2");
}

static void test_spec_wins(void **state)
{
    two_gpus("", "");
    drv_gpus_t *g = create(state, "1xT4:15360");
    assert_string_equal(drv_gpus_source(g), "declared");
    assert_int_equal(drv_gpus_count(g), 1);
    assert_false(drv_gpus_at(g, 0)->detected);
    assert_string_equal(drv_gpus_at(g, 0)->name, "T4");
    drv_gpus_destroy(g);
    g = create(state, "none");
    assert_string_equal(drv_gpus_source(g), "none");
    assert_int_equal(drv_gpus_count(g), 0);
}

static void test_json(void **state)
{
    two_gpus(", \"unsupported\": [\"temperature\"]", "");
    drv_gpus_t *g = create(state, NULL);
    json_t *j = drv_gpus_to_json(g);
    assert_true(json_is_array(j));
    assert_int_equal(json_array_size(j), 2);
    json_t *o = json_array_get(j, 0);
    assert_int_equal(json_object_size(o), 10);
    assert_int_equal(json_integer_value(json_object_get(o, "index")), 0);
    assert_string_equal(json_string_value(json_object_get(o, "uuid")),
                        "GPU-11111111-2222-3333-4444-555555555555");
    assert_string_equal(json_string_value(json_object_get(o, "name")), "NVIDIA L4");
    assert_int_equal(json_integer_value(json_object_get(o, "memory_mib")), 23034);
    assert_int_equal(json_integer_value(json_object_get(o, "memory_used_mib")), 100);
    assert_int_equal(json_integer_value(json_object_get(o, "utilization_percent")), 7);
    assert_true(json_is_null(json_object_get(o, "temperature_c")));
    assert_true(json_is_true(json_object_get(o, "healthy")));
    assert_string_equal(json_string_value(json_object_get(o, "health_reason")), "");
    assert_string_equal(json_string_value(json_object_get(o, "source")), "detected");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(j, 1), "temperature_c")),
                     60);
    json_decref(j);
    drv_gpus_destroy(g);

    g = create(state, "1xL4:24576");
    j = drv_gpus_to_json(g);
    o = json_array_get(j, 0);
    assert_string_equal(json_string_value(json_object_get(o, "source")), "declared");
    assert_string_equal(json_string_value(json_object_get(o, "name")), "L4");
    assert_int_equal(json_integer_value(json_object_get(o, "memory_mib")), 24576);
    assert_int_equal(json_integer_value(json_object_get(o, "memory_used_mib")), 0);
    assert_true(json_is_null(json_object_get(o, "utilization_percent")));
    assert_true(json_is_null(json_object_get(o, "temperature_c")));
    assert_true(json_is_true(json_object_get(o, "healthy")));
    json_decref(j);
}

static void test_xid_list(void **state)
{
    static const unsigned long long critical[] = {48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120};
    for (size_t i = 0; i < sizeof critical / sizeof critical[0]; i++) {
        assert_true(drv_gpu_xid_is_critical(critical[i]));
        assert_non_null(drv_gpu_xid_description(critical[i]));
    }
    static const unsigned long long benign[] = {0, 13, 31, 43, 45, 68, 999};
    for (size_t i = 0; i < sizeof benign / sizeof benign[0]; i++) {
        assert_false(drv_gpu_xid_is_critical(benign[i]));
        assert_null(drv_gpu_xid_description(benign[i]));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_valid),
        cmocka_unit_test(test_spec_invalid),
        cmocka_unit_test(test_spec_cap),
        cmocka_unit_test_setup_teardown(test_declared, nvml_setup, nvml_teardown),
        cmocka_unit_test(test_declared_uuid_stable),
        cmocka_unit_test(test_none),
        cmocka_unit_test(test_xid_list),
        cmocka_unit_test_setup_teardown(test_nvml_detect, nvml_setup, nvml_teardown),
        cmocka_unit_test_setup_teardown(test_nvml_telemetry_refresh, nvml_setup, nvml_teardown),
        cmocka_unit_test_setup_teardown(test_nvml_unsupported, nvml_setup, nvml_teardown),
        cmocka_unit_test_setup_teardown(test_nvml_xid, nvml_setup, nvml_teardown),
        cmocka_unit_test_setup_teardown(test_nvml_xid_at_start, nvml_setup, nvml_teardown),
        cmocka_unit_test_setup_teardown(test_nvml_ecc_counter, nvml_setup, nvml_teardown),
        cmocka_unit_test_setup_teardown(test_nvml_ecc_event, nvml_setup, nvml_teardown),
        cmocka_unit_test_setup_teardown(test_nvml_ecc_at_start, nvml_setup, nvml_teardown),
        cmocka_unit_test_setup_teardown(test_nvml_lost, nvml_setup, nvml_teardown),
        cmocka_unit_test_setup_teardown(test_nvml_init_error, nvml_setup, nvml_teardown),
        cmocka_unit_test_setup_teardown(test_nvml_no_gpus, nvml_setup, nvml_teardown),
        cmocka_unit_test_setup_teardown(test_nvml_missing_library, nvml_setup, nvml_teardown),
        cmocka_unit_test_setup_teardown(test_spec_wins, nvml_setup, nvml_teardown),
        cmocka_unit_test_setup_teardown(test_json, nvml_setup, nvml_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
