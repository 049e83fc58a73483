/* test_container.c — unit tests of src/agent/container.c: the arguments of
 * a container replica's `run -d` (the contract's environment by key, the
 * model dir read-only at /models, host networking, labels, --cpus and
 * --memory, GPUs by UUID through CDI for podman and --gpus for docker, the
 * command as entrypoint or as arguments), the refusal when GPUs are wanted
 * and no CDI spec names nvidia.com/gpu, the script's phases and exit
 * statuses, and the saved port. The script itself runs in t/containers.sh.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/container.h"

static char tmpdir[] = "/tmp/test_container.XXXXXX";

static drv_rspec_t spec(const char *image, const char *uuids, bool entrypoint,
                        const char *const *argv, size_t argc)
{
    static const char *env[] = {"HF_HOME=/cache", "MODE=fast"};
    drv_replica_spec_t sp = {.id = "d1-abc", .deployment = "d1", .argv = argv, .argc = argc,
                             .env = env, .envc = 2, .health_path = "/health",
                             .model_dir = "/data/models/m", .gpu_uuids = uuids,
                             .image = image, .pull_policy = "never", .entrypoint = entrypoint,
                             .cpu_millis = 1500, .memory_mib = 256};
    drv_rspec_t r;
    drv_rspec_copy(&r, &sp);
    return r;
}

static bool has(char **v, const char *s)
{
    for (; *v; v++)
        if (strcmp(*v, s) == 0)
            return true;
    return false;
}

static int index_of(char **v, const char *s)
{
    for (int i = 0; v[i]; i++)
        if (strcmp(v[i], s) == 0)
            return i;
    return -1;
}

static void test_podman_args(void **state)
{
    (void)state;
    const char *argv[] = {"serve", "--port", "8000"};
    drv_rspec_t sp = spec("localhost/m:1", "", true, argv, 3);
    sp.ckpt_dir = strdup("/data/checkpoints/deployment:d1:0");   /* checkpoints: acquired */
    drv_ctr_run_t cr = {.engine = "podman", .node = "n1", .state_dir = tmpdir, .grace_ms = 5000};
    char why[512] = "";
    char **v = drv_ctr_argv(&cr, &sp, 4321, why, sizeof why);
    assert_non_null(v);
    assert_string_equal(v[0], "/bin/sh");
    assert_string_equal(v[1], "-c");
    assert_string_equal(v[4], "podman");
    assert_string_equal(v[5], "drover-d1-abc");
    assert_string_equal(v[6], "localhost/m:1");
    assert_string_equal(v[7], "never");
    assert_string_equal(v[8], "4");   /* grace 5 s: stop -t 4, before the SIGKILL */
    char pf[256];
    snprintf(pf, sizeof pf, "%s/d1-abc.port", tmpdir);
    assert_string_equal(v[9], pf);
    assert_string_equal(v[10], "0");   /* no saved port: nothing to adopt */
    assert_true(has(v, "--network=host"));
    assert_true(has(v, "--label=drover.replica=d1-abc"));
    assert_true(has(v, "--label=drover.deployment=d1"));
    assert_true(has(v, "--label=drover.node=n1"));
    assert_true(has(v, "--label=drover.port=4321"));
    assert_true(has(v, "--cpus=1.500"));
    assert_true(has(v, "--memory=256m"));
    assert_true(has(v, "--mount=type=bind,source=/data/models/m,destination=/models,readonly"));
    assert_true(has(v, "--env=DROVER_MODEL_DIR=/models"));
    assert_false(has(v, "--env=DROVER_MODEL_DIR"));   /* never the host's path */
    assert_true(has(v, "--env=PORT"));
    assert_true(has(v, "--env=DROVER_REPLICA_ID"));
    assert_true(has(v, "--env=DROVER_DEPLOYMENT"));
    assert_true(has(v, "--env=CUDA_VISIBLE_DEVICES"));
    assert_true(has(v, "--env=HF_HOME"));
    assert_true(has(v, "--env=MODE"));
    assert_false(has(v, "--env=PATH"));   /* the agent's environment stays outside */
    assert_true(has(v, "--mount=type=bind,source=/data/checkpoints/deployment:d1:0,"
                       "destination=/checkpoints"));   /* read-write at the fixed path */
    assert_true(has(v, "--env=DROVER_CHECKPOINT_DIR=/checkpoints"));
    assert_false(has(v, "--env=DROVER_CHECKPOINT_DIR"));   /* never the host's path */
    /* the command replaces the entrypoint: --entrypoint=serve IMAGE --port 8000, at the end */
    int e = index_of(v, "--entrypoint=serve"), im = index_of(v + 11, "localhost/m:1");
    assert_true(e > 0 && im > 0 && e < im + 11);
    assert_string_equal(v[im + 11 + 1], "--port");
    assert_string_equal(v[im + 11 + 2], "8000");
    assert_null(v[im + 11 + 3]);
    drv_rspec_strv_free(v);
    drv_rspec_free(&sp);
}

static void test_args_only(void **state)
{
    (void)state;
    const char *argv[] = {"--model", "/models"};
    drv_rspec_t sp = spec("vllm/vllm-openai:v0.6.0", "", false, argv, 2);
    drv_ctr_run_t cr = {.engine = "podman", .node = "n1", .state_dir = tmpdir, .grace_ms = 500};
    char why[512];
    char **v = drv_ctr_argv(&cr, &sp, 1, why, sizeof why);
    assert_non_null(v);
    assert_string_equal(v[8], "0");   /* grace under 1 s: stop -t 0 */
    for (char **p = v; *p; p++)
        assert_null(strstr(*p, "--entrypoint"));
    int im = index_of(v + 11, "vllm/vllm-openai:v0.6.0") + 11;
    assert_string_equal(v[im + 1], "--model");
    assert_string_equal(v[im + 2], "/models");
    assert_null(v[im + 3]);
    drv_rspec_strv_free(v);
    drv_rspec_free(&sp);
}

/* A job's worker: its local checkpoint dir comes in the spec's env (the
 * torchrun variables too); the dir is mounted at /checkpoints, the torchrun
 * variables pass by key, there is no model dir. */
static void test_job_worker(void **state)
{
    (void)state;
    static const char *env[] = {"DROVER_CHECKPOINT_DIR=/data/job-checkpoints/j1/rank-1",
                                "MASTER_ADDR=10.0.0.5", "MASTER_PORT=29517", "RANK=1",
                                "WORLD_SIZE=2"};
    const char *argv[] = {"/bin/drover-demo-train", "--steps", "3"};
    drv_replica_spec_t in = {.id = "j1-a1-r1", .deployment = "", .argv = argv, .argc = 3,
                             .env = env, .envc = 5, .health_path = "", .model_dir = "",
                             .gpu_uuids = "GPU-aaa", .image = "localhost/t:1",
                             .entrypoint = true, .job = "j1"};
    drv_rspec_t sp;
    drv_rspec_copy(&sp, &in);
    drv_ctr_run_t cr = {.engine = "docker", .node = "n1", .state_dir = tmpdir, .grace_ms = 3000};
    char why[512] = "";
    char **v = drv_ctr_argv(&cr, &sp, 4000, why, sizeof why);
    assert_non_null(v);
    assert_true(has(v, "--network=host"));   /* MASTER_ADDR:MASTER_PORT on the node's address */
    assert_true(has(v, "--mount=type=bind,source=/data/job-checkpoints/j1/rank-1,"
                       "destination=/checkpoints"));
    assert_true(has(v, "--env=DROVER_CHECKPOINT_DIR=/checkpoints"));
    assert_false(has(v, "--env=DROVER_CHECKPOINT_DIR"));
    assert_true(has(v, "--env=MASTER_ADDR") && has(v, "--env=MASTER_PORT"));
    assert_true(has(v, "--env=RANK") && has(v, "--env=WORLD_SIZE"));
    assert_true(has(v, "--gpus=\"device=GPU-aaa\""));
    assert_true(has(v, "--entrypoint=/bin/drover-demo-train"));
    for (char **p = v; *p; p++)
        assert_null(strstr(*p, "/models"));   /* a worker has no model dir */
    drv_rspec_strv_free(v);
    drv_rspec_free(&sp);
}

/* $(VAR) in a container's arguments and environment (a preset's command line) */
static void test_expand(void **state)
{
    (void)state;
    const char *argv[] = {"--port", "$(PORT)", "--served-model-name", "$(DROVER_DEPLOYMENT)",
                          "--dir=$(DROVER_MODEL_DIR)/x", "$(MODE)$(PATH)$(NOPE)$$(PORT)$(",
                          "$PORT"};
    drv_rspec_t sp = spec("localhost/m:1", "", false, argv, 7);
    sp.ipc_host = true;
    sp.shm_mib = 1024;
    drv_ctr_run_t cr = {.engine = "podman", .node = "n1", .state_dir = tmpdir, .grace_ms = 5000};
    char why[512] = "";
    char **v = drv_ctr_argv(&cr, &sp, 4321, why, sizeof why);
    assert_non_null(v);
    int im = index_of(v + 11, "localhost/m:1") + 11;
    assert_string_equal(v[im + 1], "--port");
    assert_string_equal(v[im + 2], "4321");
    assert_string_equal(v[im + 4], "d1");
    assert_string_equal(v[im + 5], "--dir=/models/x");   /* the path inside */
    /* the model's env expands; the agent's own (PATH) and unknown names stay; $$( is literal */
    assert_string_equal(v[im + 6], "fast$(PATH)$(NOPE)$(PORT)$(");
    assert_string_equal(v[im + 7], "$PORT");
    assert_true(has(v, "--ipc=host") && has(v, "--shm-size=1024m"));
    drv_rspec_strv_free(v);
    char **env = drv_rspec_env(NULL, &sp, 4321);
    size_t n = 0;
    while (env[n])
        n++;
    char **e2 = calloc(n + 2, sizeof *e2);
    for (size_t i = 0; i < n; i++)
        e2[i] = env[i];
    e2[n] = strdup("OLLAMA_HOST=0.0.0.0:$(PORT)");
    free(env);
    drv_ctr_expand_env(&sp, e2);
    assert_string_equal(e2[n], "OLLAMA_HOST=0.0.0.0:4321");
    drv_rspec_strv_free(e2);
    drv_rspec_free(&sp);
}

/* runtime.metrics_port: METRICS_PORT in the container's environment and in
 * $(METRICS_PORT) (Triton's --metrics-port); without a second port none. */
static void test_metrics_port(void **state)
{
    (void)state;
    const char *argv[] = {"--http-port=$(PORT)", "--metrics-port=$(METRICS_PORT)"};
    drv_rspec_t sp = spec("localhost/t:1", "", false, argv, 2);
    sp.mport = 5432;
    drv_ctr_run_t cr = {.engine = "podman", .node = "n1", .state_dir = tmpdir, .grace_ms = 5000};
    char why[512] = "";
    char **v = drv_ctr_argv(&cr, &sp, 4321, why, sizeof why);
    assert_non_null(v);
    int im = index_of(v + 11, "localhost/t:1") + 11;
    assert_string_equal(v[im + 1], "--http-port=4321");
    assert_string_equal(v[im + 2], "--metrics-port=5432");
    assert_true(has(v, "--env=METRICS_PORT"));
    drv_rspec_strv_free(v);
    sp.mport = 0;
    v = drv_ctr_argv(&cr, &sp, 4321, why, sizeof why);
    assert_non_null(v);
    im = index_of(v + 11, "localhost/t:1") + 11;
    assert_string_equal(v[im + 2], "--metrics-port=$(METRICS_PORT)");   /* no such port: kept */
    assert_false(has(v, "--env=METRICS_PORT"));
    drv_rspec_strv_free(v);
    drv_rspec_free(&sp);
}

/* A fractional GPU share: the library mounted and preloaded, the region's
 * directory shared with the host; with MPS its pipe directory and the IPC
 * namespace. Without the library: none of it. */
static void test_gpu_share(void **state)
{
    (void)state;
    char lib[300], dir[300];
    snprintf(lib, sizeof lib, "%s/libdrover-gpushare.so", tmpdir);
    FILE *f = fopen(lib, "w");
    assert_non_null(f);
    fclose(f);
    static const char *env[] = {"MODE=fast"};
    drv_replica_spec_t in = {.id = "d1-share", .deployment = "d1", .env = env, .envc = 1,
                             .health_path = "/health", .model_dir = "", .gpu_uuids = "GPU-aaa",
                             .gpu_memory_limit_mib = 8192, .gpu_compute_percent = 50,
                             .mps_pipe_dir = "/run/drover/mps/GPU-aaa", .image = "localhost/m:1"};
    drv_rspec_t sp;
    drv_rspec_copy(&sp, &in);
    drv_ctr_run_t cr = {.engine = "docker", .node = "n1", .state_dir = tmpdir, .grace_ms = 5000,
                        .gpushare = lib};
    char why[512] = "", want[700];
    char **v = drv_ctr_argv(&cr, &sp, 4000, why, sizeof why);
    assert_non_null(v);
    snprintf(want, sizeof want, "--mount=type=bind,source=%s,destination=" DRV_CTR_GPUSHARE_LIB
             ",readonly", lib);
    assert_true(has(v, want));
    assert_true(has(v, "--env=LD_PRELOAD=" DRV_CTR_GPUSHARE_LIB));
    snprintf(dir, sizeof dir, "%s/d1-share.gpushare", tmpdir);
    snprintf(want, sizeof want, "--mount=type=bind,source=%s,destination=" DRV_CTR_GPUSHARE_DIR,
             dir);
    assert_true(has(v, want));
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);   /* made for it, private */
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_true(has(v, "--env=DROVER_GPUSHARE_DIR=" DRV_CTR_GPUSHARE_DIR));
    assert_true(has(v, "--env=DROVER_GPU_MEMORY_LIMIT_MIB"));   /* the share, by name */
    assert_true(has(v, "--ipc=host"));
    assert_true(has(v, "--mount=type=bind,source=/run/drover/mps/GPU-aaa,"
                       "destination=/run/drover/mps/GPU-aaa"));
    assert_true(has(v, "--env=CUDA_MPS_PIPE_DIRECTORY=/run/drover/mps/GPU-aaa"));
    assert_true(has(v, "--env=CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"));
    drv_rspec_strv_free(v);
    cr.gpushare = NULL;   /* no library: no preload (the enforcement says not-enforced) */
    v = drv_ctr_argv(&cr, &sp, 4000, why, sizeof why);
    assert_non_null(v);
    for (char **p = v; *p; p++)
        assert_null(strstr(*p, "gpushare"));
    drv_rspec_strv_free(v);
    rmdir(dir);
    unlink(lib);
    drv_rspec_free(&sp);
}

static void test_gpus(void **state)
{
    (void)state;
    drv_rspec_t sp = spec("localhost/m:1", "GPU-aaa,GPU-bbb", false, NULL, 0);
    char empty[300], cdi[300];
    snprintf(empty, sizeof empty, "%s/nocdi", tmpdir);
    snprintf(cdi, sizeof cdi, "%s/cdi", tmpdir);
    mkdir(empty, 0700);
    mkdir(cdi, 0700);
    drv_ctr_run_t cr = {.engine = "podman", .node = "n1", .state_dir = tmpdir, .grace_ms = 10000,
                        .cdi_dirs = empty};
    char why[512] = "";
    assert_null(drv_ctr_argv(&cr, &sp, 1, why, sizeof why));
    assert_non_null(strstr(why, "no CDI spec names nvidia.com/gpu"));
    assert_non_null(strstr(why, "nvidia-ctk cdi generate"));
    char path[400];
    snprintf(path, sizeof path, "%s/nvidia.yaml", cdi);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n", f);
    fclose(f);
    cr.cdi_dirs = cdi;
    char **v = drv_ctr_argv(&cr, &sp, 1, why, sizeof why);
    assert_non_null(v);
    assert_true(has(v, "--device=nvidia.com/gpu=GPU-aaa"));
    assert_true(has(v, "--device=nvidia.com/gpu=GPU-bbb"));
    drv_rspec_strv_free(v);
    cr.engine = "docker";   /* docker: --gpus, no CDI needed */
    cr.cdi_dirs = empty;
    v = drv_ctr_argv(&cr, &sp, 1, why, sizeof why);
    assert_non_null(v);
    assert_true(has(v, "--gpus=\"device=GPU-aaa,GPU-bbb\""));
    assert_false(has(v, "--log-driver=k8s-file"));
    drv_rspec_strv_free(v);
    drv_rspec_free(&sp);
}

static void test_phase_and_exits(void **state)
{
    (void)state;
    int blobs = 0;
    const char out[] = "drover: pulling image x\nTrying to pull x...\nGetting image source "
                       "signatures\nCopying blob sha256:aa\nCopying blob sha256:bb\n";
    assert_int_equal(drv_ctr_phase(out, sizeof out - 1, &blobs), DRV_CTR_PHASE_PULLING);
    assert_int_equal(blobs, 2);
    const char st[] = "Copying config sha256:cc\nWriting manifest\n" DRV_CTR_STARTED_MARK
                      " (drover-x)\n";
    assert_int_equal(drv_ctr_phase(st, sizeof st - 1, &blobs), DRV_CTR_PHASE_STARTED);
    assert_int_equal(drv_ctr_phase("hello\n", 6, &blobs), 0);
    const char dk[] = "t: Pulling from d\n3775: Pulling fs layer\n3775: Pull complete\n";
    blobs = 0;
    assert_int_equal(drv_ctr_phase(dk, sizeof dk - 1, &blobs), 0);
    assert_int_equal(blobs, 1);   /* docker's layer lines */
    drv_rspec_t sp = spec("localhost/m:1", "", false, NULL, 0);
    char why[256] = "";
    assert_true(drv_ctr_exit_fatal(&sp, DRV_CTR_EXIT_NO_IMAGE, why, sizeof why));
    assert_string_equal(why, "image localhost/m:1 is not on this node and its pull_policy is never");
    assert_false(drv_ctr_exit_fatal(&sp, DRV_CTR_EXIT_PULL, why, sizeof why));
    assert_non_null(strstr(why, "pulling image localhost/m:1 failed"));
    why[0] = '\0';
    assert_false(drv_ctr_exit_fatal(&sp, 1, why, sizeof why));
    assert_string_equal(why, "");
    drv_rspec_free(&sp);
}

static void test_saved_port(void **state)
{
    (void)state;
    assert_int_equal(drv_ctr_saved_port(tmpdir, "r1"), 0);
    char path[300];
    snprintf(path, sizeof path, "%s/r1.port", tmpdir);
    FILE *f = fopen(path, "w");
    fputs("4321\n", f);
    fclose(f);
    assert_int_equal(drv_ctr_saved_port(tmpdir, "r1"), 4321);
    f = fopen(path, "w");
    fputs("99999\n", f);
    fclose(f);
    assert_int_equal(drv_ctr_saved_port(tmpdir, "r1"), 0);
}

static void test_detect_none(void **state)
{
    (void)state;
    drv_ctr_engine_t e;
    assert_int_equal(drv_ctr_detect("none", &e), -1);
    assert_string_equal(e.name, "");
    assert_non_null(strstr(e.why, "--container-engine none"));
}

int main(void)
{
    if (!mkdtemp(tmpdir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_podman_args),   cmocka_unit_test(test_args_only),
        cmocka_unit_test(test_gpus),          cmocka_unit_test(test_phase_and_exits),
        cmocka_unit_test(test_job_worker),    cmocka_unit_test(test_expand),
        cmocka_unit_test(test_metrics_port),  cmocka_unit_test(test_gpu_share),
        cmocka_unit_test(test_saved_port),    cmocka_unit_test(test_detect_none),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
}
