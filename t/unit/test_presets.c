/* test_presets.c — unit tests of src/catalog/presets.c: for each standard
 * model server, the image, the command line drover generates (against the
 * flags its documentation names, docs/runtimes.md), the environment, and
 * the paths; tensor parallelism from gpu.count and the memory fraction of
 * a GPU share; drv_runtime_image's choice (runtime.image over the preset's).
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

#include "catalog/presets.h"

/* The rendering's "args" joined by spaces (and "command" before them, "|"
 * between), for exact comparisons of whole command lines. */
static char *line(const char *name, int gpus, double frac)
{
    const drv_preset_t *p = drv_preset_find(name);
    assert_non_null(p);
    drv_preset_in_t in = {.gpu_count = gpus, .memory_fraction = frac};
    json_t *r = drv_preset_render(p, &in);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(r, "command"), i, a)
        fprintf(f, "%s%s", i ? " " : "", json_string_value(a));
    if (json_object_get(r, "command"))
        fputs(" | ", f);
    json_array_foreach(json_object_get(r, "args"), i, a)
        fprintf(f, "%s%s", i ? " " : "", json_string_value(a));
    fclose(f);
    json_decref(r);
    return out;
}

static void expect(const char *name, int gpus, double frac, const char *want)
{
    char *got = line(name, gpus, frac);
    assert_string_equal(got, want);
    free(got);
}

static void test_vllm(void **state)
{
    (void)state;
    const drv_preset_t *p = drv_preset_find("vllm");
    assert_string_equal(p->image, "docker.io/vllm/vllm-openai:latest");
    assert_string_equal(p->health_path, "/health");
    assert_string_equal(p->metrics_path, "/metrics");
    assert_true(p->openai && p->ipc_host);
    assert_null(p->command);   /* the image's entrypoint is the OpenAI server */
    expect("vllm", 1, 0,
           "--model /models --served-model-name $(DROVER_DEPLOYMENT) --host 0.0.0.0 --port "
           "$(PORT) --tensor-parallel-size 1");
    expect("vllm", 4, 0,
           "--model /models --served-model-name $(DROVER_DEPLOYMENT) --host 0.0.0.0 --port "
           "$(PORT) --tensor-parallel-size 4");
    /* a 12 GiB share of a 24 GiB GPU; a third is rounded down, never above */
    expect("vllm", 1, 0.5,
           "--model /models --served-model-name $(DROVER_DEPLOYMENT) --host 0.0.0.0 --port "
           "$(PORT) --tensor-parallel-size 1 --gpu-memory-utilization 0.50");
    expect("vllm", 1, 1.0 / 3.0,
           "--model /models --served-model-name $(DROVER_DEPLOYMENT) --host 0.0.0.0 --port "
           "$(PORT) --tensor-parallel-size 1 --gpu-memory-utilization 0.33");
}

static void test_sglang(void **state)
{
    (void)state;
    const drv_preset_t *p = drv_preset_find("sglang");
    assert_string_equal(p->image, "docker.io/lmsysorg/sglang:latest");
    assert_string_equal(p->health_path, "/health");
    assert_string_equal(p->metrics_path, "/metrics");
    expect("sglang", 2, 0.4,
           "python3 -m sglang.launch_server | --model-path /models --served-model-name "
           "$(DROVER_DEPLOYMENT) --host 0.0.0.0 --port $(PORT) --tp 2 --enable-metrics "
           "--mem-fraction-static 0.40");
}

static void test_tgi(void **state)
{
    (void)state;
    const drv_preset_t *p = drv_preset_find("tgi");
    assert_string_equal(p->image, "ghcr.io/huggingface/text-generation-inference:latest");
    assert_int_equal(p->shm_mib, 1024);   /* its docs run it with --shm-size 1g */
    expect("tgi", 1, 0, "--model-id /models --hostname 0.0.0.0 --port $(PORT)");
    expect("tgi", 2, 0, "--model-id /models --hostname 0.0.0.0 --port $(PORT) --num-shard 2");
    expect("tgi", 1, 0.25,
           "--model-id /models --hostname 0.0.0.0 --port $(PORT) --cuda-memory-fraction 0.25");
}

static void test_llama_cpp(void **state)
{
    (void)state;
    const drv_preset_t *p = drv_preset_find("llama-cpp");
    assert_string_equal(p->image, "ghcr.io/ggml-org/llama.cpp:server-cuda");
    assert_string_equal(p->health_path, "/health");
    expect("llama-cpp", 0, 0,
           "--model /models/model.gguf --alias $(DROVER_DEPLOYMENT) --host 0.0.0.0 --port "
           "$(PORT) --metrics");
    expect("llama-cpp", 2, 0,
           "--model /models/model.gguf --alias $(DROVER_DEPLOYMENT) --host 0.0.0.0 --port "
           "$(PORT) --metrics --n-gpu-layers all");
}

static void test_triton(void **state)
{
    (void)state;
    const drv_preset_t *p = drv_preset_find("triton");
    assert_string_equal(p->health_path, "/v2/health/ready");
    assert_string_equal(p->metrics_path, "/metrics");   /* on its own port: METRICS_PORT */
    assert_true(p->metrics_port);
    assert_null(p->predict_path);
    assert_false(p->openai);
    expect("triton", 1, 0,
           "tritonserver --model-repository=/models --http-port=$(PORT) --allow-grpc=false "
           "--allow-metrics=true --metrics-port=$(METRICS_PORT)");
}

static void test_ollama(void **state)
{
    (void)state;
    const drv_preset_t *p = drv_preset_find("ollama");
    assert_string_equal(p->image, "docker.io/ollama/ollama:latest");
    assert_string_equal(p->health_path, "/api/version");
    expect("ollama", 1, 0, "serve");
    drv_preset_in_t in = {.gpu_count = 1};
    json_t *r = drv_preset_render(p, &in);
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "env"),
                                                          "OLLAMA_HOST")),
                        "0.0.0.0:$(PORT)");
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "env"),
                                                          "OLLAMA_MODELS")),
                        "/models");
    json_decref(r);
}

static void test_names_and_image(void **state)
{
    (void)state;
    size_t n = 0;
    for (const char *const *p = drv_preset_names; *p; p++, n++)
        assert_non_null(drv_preset_find(*p));
    assert_int_equal(n, 6);
    assert_null(drv_preset_find("vllm2"));
    assert_null(drv_preset_find(NULL));
    json_t *rt = json_pack("{s:s}", "preset", "vllm");
    assert_string_equal(drv_runtime_image(rt), "docker.io/vllm/vllm-openai:latest");
    json_object_set_new(rt, "image", json_string("registry.local/vllm:v0.6.0"));
    assert_string_equal(drv_runtime_image(rt), "registry.local/vllm:v0.6.0");   /* overrides */
    json_decref(rt);
    rt = json_pack("{s:[s]}", "command", "serve");
    assert_null(drv_runtime_image(rt));   /* a command on the node */
    json_decref(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm),       cmocka_unit_test(test_sglang),
        cmocka_unit_test(test_tgi),        cmocka_unit_test(test_llama_cpp),
        cmocka_unit_test(test_triton),     cmocka_unit_test(test_ollama),
        cmocka_unit_test(test_names_and_image),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
