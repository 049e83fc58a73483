/* test_slurm.c — unit tests of the slurm provider's pure parts
 * (src/provider/slurm.c: names, time limits, error classes, the squeue
 * parse) and of its command runner (src/provider/slurm_cmd.c: stdin,
 * stdout, stderr, exit status, a program not found, the time limit, the
 * child's SLURM_CONF). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "provider/slurm.h"
#include "provider/slurm_cmd.h"

static void test_names_and_times(void **state)
{
    (void)state;
    assert_true(drv_slurm_name_ok("gpu"));
    assert_true(drv_slurm_name_ok("ml-team_2.a"));
    assert_false(drv_slurm_name_ok(""));
    assert_false(drv_slurm_name_ok("a b"));
    assert_false(drv_slurm_name_ok("a;b"));
    assert_false(drv_slurm_name_ok("a=b"));
    assert_false(drv_slurm_name_ok("p123456789012345678901234567890123456789012345678901234567890123"));
    const char *good[] = {"30", "30:00", "1:30:00", "2-00", "2-12:30", "2-12:30:15",
                          "UNLIMITED", "infinite", NULL};
    const char *bad[] = {"", "soon", "1:2:3:4", "2-", "-5", "1:", ":30", "1:300",
                         "2-1:2:3:4", "1.5", "30 ", NULL};
    for (int i = 0; good[i]; i++)
        assert_true(drv_slurm_time_ok(good[i]));
    for (int i = 0; bad[i]; i++)
        assert_false(drv_slurm_time_ok(bad[i]));
}

static void test_classify(void **state)
{
    (void)state;
    assert_int_equal(drv_slurm_classify("sbatch: error: Batch job submission failed: Invalid "
                                        "partition name specified"),
                     DRV_PROV_GIVE_UP);
    assert_int_equal(drv_slurm_classify("sbatch: error: Batch job submission failed: Invalid "
                                        "account or account/partition combination specified"),
                     DRV_PROV_GIVE_UP);
    assert_int_equal(drv_slurm_classify("sbatch: error: Batch job submission failed: Requested "
                                        "node configuration is not available"),
                     DRV_PROV_FALLBACK);
    assert_int_equal(drv_slurm_classify("sbatch: error: Batch job submission failed: Resource "
                                        "temporarily unavailable"),
                     DRV_PROV_RETRY);
    assert_int_equal(drv_slurm_classify("sbatch: error: Batch job submission failed: Socket "
                                        "timed out on send/recv operation"),
                     DRV_PROV_RETRY);
    assert_int_equal(drv_slurm_classify(""), DRV_PROV_RETRY);
}

static void test_parse_squeue(void **state)
{
    (void)state;
    char text[] =
        "12|RUNNING|gpu|drover-head=h-1 drover-owner=alice drover-cluster=sc "
        "drover-nodepool=gpu drover-node=n-1 drover-type=slurm-gpu-1\n"
        "13|PENDING|gpu|drover-head=h-1 drover-owner=alice drover-node=n-2 a|b in it\n"
        "14|RUNNING|gpu|drover-head=h-2 drover-node=n-3\n"       /* another head's */
        "15|RUNNING|gpu|(null)\n"                                 /* not drover's */
        "16_1|RUNNING|gpu|drover-head=h-1 drover-node=n-4\n"     /* an array task: not ours */
        "17|CANCELLED|debug|xdrover-head=h-1 drover-head=h-1 drover-node=n-5\n"
        "18|COMPLETING|gpu|drover-head=h-1 drover-node=n-6\n"
        "garbage\n";
    drv_ec2_instance_t *v = NULL;
    size_t n = 0;
    drv_error_t err = {0};
    assert_int_equal(drv_slurm_parse_squeue(text, "h-1", &v, &n, &err), 0);
    assert_int_equal(n, 4);
    assert_string_equal(v[0].id, "12");
    assert_string_equal(v[0].state, "running");
    assert_string_equal(v[0].zone, "gpu");
    assert_string_equal(v[0].owner, "alice");
    assert_string_equal(v[0].cluster, "sc");
    assert_string_equal(v[0].nodepool, "gpu");
    assert_string_equal(v[0].node, "n-1");
    assert_string_equal(v[0].type, "slurm-gpu-1");
    assert_string_equal(v[1].id, "13");
    assert_string_equal(v[1].state, "pending");
    assert_string_equal(v[1].node, "n-2");
    assert_string_equal(v[1].cluster, "");
    assert_string_equal(v[2].id, "17");
    assert_string_equal(v[2].state, "terminated");
    assert_string_equal(v[2].node, "n-5");
    assert_string_equal(v[3].state, "shutting-down");
    free(v);
}

static void test_run(void **state)
{
    (void)state;
    drv_slurm_out_t *o = malloc(sizeof *o);
    drv_error_t err = {0};
    char *cat[] = {"cat", NULL};
    assert_int_equal(drv_slurm_run(cat, "", "#!/bin/sh\necho hi\n", 10000, o, &err), 0);
    assert_int_equal(o->status, 0);
    assert_string_equal(o->out, "#!/bin/sh\necho hi\n");
    char *sh[] = {"sh", "-c", "echo \"$SLURM_CONF\"; echo 'bad thing' >&2; exit 3", NULL};
    assert_int_equal(drv_slurm_run(sh, "/x/slurm.conf", NULL, 10000, o, &err), 0);
    assert_int_equal(o->status, 3);
    assert_string_equal(o->out, "/x/slurm.conf\n");
    assert_string_equal(o->err, "bad thing");
    char *none[] = {"drover-no-such-command-here", NULL};
    assert_int_equal(drv_slurm_run(none, "", NULL, 10000, o, &err), 0);
    assert_int_equal(o->exec_errno, ENOENT);
    char *slow[] = {"sleep", "30", NULL};
    assert_int_equal(drv_slurm_run(slow, "", NULL, 200, o, &err), 0);
    assert_int_equal(o->status, -1);
    assert_non_null(strstr(o->err, "no answer"));
    free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_times),
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_parse_squeue),
        cmocka_unit_test(test_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
