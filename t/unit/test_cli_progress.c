/* test_cli_progress.c — the line `drover predict` shows while a cold
 * deployment starts (src/cli/cli_progress.c, compiled in here: the CLI is
 * no library): no replica, pending with the placement's reason, placed but
 * not yet taken by the agent, waiting for its GPU, fetching (MiB of MiB, rate, ETA; the fetch
 * furthest along wins), starting, failed, ready first of all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "../../src/cli/cli_progress.c"

static drv_cli_phase_t line_of(const char *js, char *out, size_t n)
{
    json_t *reps = json_loads(js, 0, NULL);
    assert_non_null(reps);
    drv_cli_phase_t ph = drv_cli_cold_line(reps, out, n);
    json_decref(reps);
    return ph;
}

static void test_waiting(void **state)
{
    (void)state;
    char l[512];
    assert_int_equal(line_of("[]", l, sizeof l), DRV_PHASE_WAITING);
    assert_string_equal(l, "waiting for a node: no replica yet (scaling up from zero)");
    assert_int_equal(line_of("[{\"id\":\"r1\",\"node\":null,\"status\":{\"state\":\"pending\","
                             "\"reason\":\"no node fits 1 GPU\"}}]", l, sizeof l),
                     DRV_PHASE_WAITING);
    assert_string_equal(l, "waiting for a node: no node fits 1 GPU");
    assert_int_equal(line_of("[{\"id\":\"r1\",\"node\":\"n1\",\"status\":{\"state\":\"starting\","
                             "\"reason\":\"placed; waiting for the node's agent\"}}]", l, sizeof l),
                     DRV_PHASE_WAITING);
    assert_string_equal(l, "placed on node n1; waiting for its agent");
    assert_int_equal(line_of("[{\"id\":\"r1\",\"node\":\"n1\",\"status\":{\"state\":\"failed\","
                             "\"reason\":\"no room\"}}]", l, sizeof l),
                     DRV_PHASE_WAITING);
    assert_string_equal(l, "replica r1 failed (no room); waiting for the next one");
    /* placed where a replica scaled down still drains: the agent's reason */
    assert_int_equal(line_of("[{\"id\":\"r1\",\"node\":\"n1\",\"status\":{\"state\":\"waiting\","
                             "\"reason\":\"waiting for GPU GPU-1: replica r0 is stopping\"}}]",
                             l, sizeof l),
                     DRV_PHASE_WAITING);
    assert_string_equal(l, "placed on node n1; waiting for GPU GPU-1: replica r0 is stopping");
    assert_int_equal(drv_cli_cold_line(NULL, l, sizeof l), DRV_PHASE_UNKNOWN);
}

static void test_fetching(void **state)
{
    (void)state;
    char l[512];
    /* two fetches: the one furthest along is shown */
    assert_int_equal(
        line_of("[{\"id\":\"a\",\"node\":\"n1\",\"status\":{\"state\":\"fetching\",\"pid\":0,"
                "\"fetch\":{\"bytes\":1048576,\"total\":10485760}}},"
                "{\"id\":\"b\",\"node\":\"n2\",\"status\":{\"state\":\"fetching\",\"pid\":0,"
                "\"fetch\":{\"bytes\":5242880,\"total\":10485760,\"rate_bytes_per_s\":2097152,"
                "\"eta_seconds\":3}}}]",
                l, sizeof l),
        DRV_PHASE_FETCHING);
    assert_string_equal(l, "fetching the model on node n2: 5.0 of 10.0 MiB at 2.0 MiB/s, ETA 3s");
    /* no rate known yet: bytes only */
    line_of("[{\"id\":\"a\",\"node\":\"n1\",\"status\":{\"state\":\"fetching\",\"pid\":0,"
            "\"fetch\":{\"bytes\":0,\"total\":2147483648}}}]", l, sizeof l);
    assert_string_equal(l, "fetching the model on node n1: 0.0 of 2048.0 MiB");
    /* a fetch beats a replica waiting for a node */
    assert_int_equal(
        line_of("[{\"id\":\"p\",\"node\":null,\"status\":{\"state\":\"pending\"}},"
                "{\"id\":\"a\",\"node\":\"n1\",\"status\":{\"state\":\"fetching\",\"pid\":0,"
                "\"fetch\":{\"bytes\":0,\"total\":1}}}]", l, sizeof l),
        DRV_PHASE_FETCHING);
    /* fetching, reported before its first progress: still the fetch phase */
    assert_int_equal(line_of("[{\"id\":\"a\",\"node\":\"n1\",\"status\":{\"state\":\"fetching\"}}]",
                             l, sizeof l),
                     DRV_PHASE_FETCHING);
    assert_string_equal(l, "fetching the model on node n1");
    /* a short buffer is cut, never overrun */
    char small[16];
    line_of("[{\"id\":\"a\",\"node\":\"n1\",\"status\":{\"state\":\"fetching\",\"pid\":0,"
            "\"fetch\":{\"bytes\":5,\"total\":10,\"rate_bytes_per_s\":1,\"eta_seconds\":5}}}]",
            small, sizeof small);
    assert_int_equal(strlen(small), sizeof small - 1);
}

static void test_starting_ready(void **state)
{
    (void)state;
    char l[512];
    assert_int_equal(line_of("[{\"id\":\"a\",\"node\":\"n1\",\"status\":{\"state\":\"starting\","
                             "\"pid\":42}}]", l, sizeof l),
                     DRV_PHASE_STARTING);
    assert_string_equal(l, "starting the model on node n1");
    assert_int_equal(line_of("[{\"id\":\"a\",\"node\":\"n1\",\"status\":{\"state\":\"fetching\","
                             "\"fetch\":{\"bytes\":0,\"total\":1}}},"
                             "{\"id\":\"b\",\"node\":\"n2\",\"status\":{\"state\":\"ready\"}}]",
                             l, sizeof l),
                     DRV_PHASE_READY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waiting),
        cmocka_unit_test(test_fetching),
        cmocka_unit_test(test_starting_ready),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
