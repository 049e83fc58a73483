/* presets.c — see presets.h: the table of the standard model servers and
 * the command line each gets. Every flag is the server's documented one
 * (docs/runtimes.md, with the pages); t/unit/test_presets.c checks each
 * generated line. Pure. */
#include "catalog/presets.h"

#include <stdio.h>
#include <string.h>

#define MODEL_DIR "/models"   /* agent/container.h's DRV_CTR_MODEL_DIR */

static void arg(json_t *args, const char *s)
{
    json_array_append_new(args, json_string(s));
}

static void arg_int(json_t *args, const char *flag, long long v)
{
    arg(args, flag);
    json_array_append_new(args, json_sprintf("%lld", v));
}

/* A fraction the servers take, rounded down to 2 decimals (never above the share). */
static void arg_fraction(json_t *args, const char *flag, double f)
{
    arg(args, flag);
    json_array_append_new(args, json_sprintf("%.2f", (double)(long)(f * 100.0) / 100.0));
}

static bool share(const drv_preset_in_t *in)
{
    return in->memory_fraction > 0 && in->memory_fraction < 1;
}

/* The flags the HTTP servers share: the model, the name it serves as (the
 * deployment: what the gateway's OpenAI routes put in "model"; NULL flag:
 * none), all addresses, the replica's PORT. */
static void serve_flags(json_t *args, const char *model_flag, const char *model,
                        const char *name_flag, const char *host_flag)
{
    arg(args, model_flag);
    arg(args, model);
    if (name_flag) {
        arg(args, name_flag);
        arg(args, "$(DROVER_DEPLOYMENT)");
    }
    arg(args, host_flag);
    arg(args, "0.0.0.0");
    arg(args, "--port");
    arg(args, "$(PORT)");
}

/* vLLM: the image's entrypoint is the OpenAI server (`vllm serve`) */
static void build_vllm(const drv_preset_in_t *in, json_t *args, json_t *env)
{
    (void)env;
    serve_flags(args, "--model", MODEL_DIR, "--served-model-name", "--host");
    arg_int(args, "--tensor-parallel-size", in->gpu_count > 1 ? in->gpu_count : 1);
    if (share(in))
        arg_fraction(args, "--gpu-memory-utilization", in->memory_fraction);
}

/* SGLang: python3 -m sglang.launch_server; metrics need --enable-metrics */
static void build_sglang(const drv_preset_in_t *in, json_t *args, json_t *env)
{
    (void)env;
    serve_flags(args, "--model-path", MODEL_DIR, "--served-model-name", "--host");
    arg_int(args, "--tp", in->gpu_count > 1 ? in->gpu_count : 1);
    arg(args, "--enable-metrics");
    if (share(in))
        arg_fraction(args, "--mem-fraction-static", in->memory_fraction);
}

/* TGI: the image's entrypoint is text-generation-launcher */
static void build_tgi(const drv_preset_in_t *in, json_t *args, json_t *env)
{
    (void)env;
    serve_flags(args, "--model-id", MODEL_DIR, NULL, "--hostname");
    if (in->gpu_count > 1)
        arg_int(args, "--num-shard", in->gpu_count);
    if (share(in))
        arg_fraction(args, "--cuda-memory-fraction", in->memory_fraction);
}

/* llama.cpp: the server-cuda image's entrypoint is llama-server; one GGUF file */
static void build_llama_cpp(const drv_preset_in_t *in, json_t *args, json_t *env)
{
    (void)env;
    serve_flags(args, "--model", MODEL_DIR "/model.gguf", "--alias", "--host");
    arg(args, "--metrics");
    if (in->gpu_count > 0) {   /* every layer on the GPUs; several: split by layer (its default) */
        arg(args, "--n-gpu-layers");
        arg(args, "all");
    }
}

/* Triton: tritonserver over the model repository, HTTP on PORT; gRPC off;
 * its metrics on a port of their own, the replica's METRICS_PORT */
static void build_triton(const drv_preset_in_t *in, json_t *args, json_t *env)
{
    (void)in;
    (void)env;
    arg(args, "tritonserver");
    arg(args, "--model-repository=" MODEL_DIR);
    arg(args, "--http-port=$(PORT)");
    arg(args, "--allow-grpc=false");
    arg(args, "--allow-metrics=true");
    arg(args, "--metrics-port=$(METRICS_PORT)");
}

/* Ollama: `ollama serve`, configured by its environment */
static void build_ollama(const drv_preset_in_t *in, json_t *args, json_t *env)
{
    (void)in;
    arg(args, "serve");
    json_object_set_new(env, "OLLAMA_HOST", json_string("0.0.0.0:$(PORT)"));
    json_object_set_new(env, "OLLAMA_MODELS", json_string(MODEL_DIR));
}

static const char *const sglang_cmd[] = {"python3", "-m", "sglang.launch_server", NULL};

static const drv_preset_t presets[] = {
    {.name = "vllm", .image = "docker.io/vllm/vllm-openai:latest", .health_path = "/health",
     .predict_path = "/v1/completions", .metrics_path = "/metrics", .openai = true,
     .ipc_host = true, .doc = "https://docs.vllm.ai/en/stable/deployment/docker.html",
     .build = build_vllm},
    {.name = "sglang", .image = "docker.io/lmsysorg/sglang:latest", .health_path = "/health",
     .predict_path = "/v1/completions", .metrics_path = "/metrics", .openai = true,
     .ipc_host = true, .doc = "https://docs.sglang.io/advanced_features/server_arguments.html",
     .command = sglang_cmd, .build = build_sglang},
    {.name = "tgi", .image = "ghcr.io/huggingface/text-generation-inference:latest",
     .health_path = "/health", .predict_path = "/v1/completions", .metrics_path = "/metrics",
     .openai = true, .shm_mib = 1024,
     .doc = "https://huggingface.co/docs/text-generation-inference/reference/launcher",
     .build = build_tgi},
    {.name = "llama-cpp", .image = "ghcr.io/ggml-org/llama.cpp:server-cuda",
     .health_path = "/health", .predict_path = "/v1/completions", .metrics_path = "/metrics",
     .openai = true,
     .doc = "https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md",
     .build = build_llama_cpp},
    {.name = "triton", .image = "nvcr.io/nvidia/tritonserver:25.04-py3",
     .health_path = "/v2/health/ready", .metrics_path = "/metrics", .metrics_port = true,
     .doc = "https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/"
            "getting_started/quickstart.html",
     .build = build_triton},
    {.name = "ollama", .image = "docker.io/ollama/ollama:latest", .health_path = "/api/version",
     .predict_path = "/v1/completions", .openai = true,
     .doc = "https://docs.ollama.com/faq", .build = build_ollama},
};

const char *const drv_preset_names[] = {"vllm", "sglang", "tgi", "llama-cpp", "triton", "ollama",
                                        NULL};

const drv_preset_t *drv_preset_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

const char *drv_runtime_image(const json_t *runtime)
{
    const char *image = json_string_value(json_object_get(runtime, "image"));
    if (image)
        return image;
    const drv_preset_t *p = drv_preset_find(json_string_value(json_object_get(runtime, "preset")));
    return p ? p->image : NULL;
}

json_t *drv_preset_render(const drv_preset_t *p, const drv_preset_in_t *in)
{
    json_t *args = json_array(), *env = json_object();
    p->build(in, args, env);
    json_t *out = json_pack("{s:o, s:o}", "args", args, "env", env);
    if (p->command) {
        json_t *cmd = json_array();
        for (const char *const *c = p->command; *c; c++)
            arg(cmd, *c);
        json_object_set_new(out, "command", cmd);
    }
    return out;
}
