/* presets.h — runtimes for the standard model servers (issue 16):
 * `runtime.preset: vllm | sglang | tgi | llama-cpp | triton | ollama` names
 * the server's published image, its command line (the model directory,
 * the port, tensor parallelism from gpu.count, a memory fraction from a GPU
 * share), its health, OpenAI and metrics paths, each from that server's
 * own documentation (docs/runtimes.md cites them). A table and pure
 * functions: the head renders a replica's image, command, args and env
 * with them (state/nodes.c); the API fills the paths (api/kinds.c).
 *
 * Arguments may hold $(PORT) and $(DROVER_DEPLOYMENT): the agent replaces
 * them in a container replica's arguments and environment with the
 * replica's values (agent/container.h), as Kubernetes expands $(VAR). */
#ifndef DRV_PRESETS_H
#define DRV_PRESETS_H

#include <jansson.h>
#include <stdbool.h>

typedef struct drv_preset_in {
    int gpu_count;             /* resources.gpu.count (0: the server's own default) */
    double memory_fraction;    /* a GPU share's memory / the GPU's, in (0, 1); 0: whole */
} drv_preset_in_t;

typedef struct drv_preset drv_preset_t;
struct drv_preset {
    const char *name;          /* "vllm" */
    const char *image;         /* the published image */
    const char *health_path;   /* answers 200 once the model is loaded */
    const char *predict_path;  /* where drover's /predict forwards (NULL: not set) */
    const char *metrics_path;  /* Prometheus text on PORT (NULL: none there) */
    bool metrics_port;         /* metrics_path is on a second port, $(METRICS_PORT) */
    bool openai;               /* serves /v1/chat/completions and /v1/completions */
    bool ipc_host;             /* the container shares the node's IPC (PyTorch shm) */
    int shm_mib;               /* --shm-size (0: the engine's default) */
    const char *doc;           /* the documentation the flags come from */
    /* The entrypoint to use (NULL-terminated; NULL: the image's own), and
     * the arguments after the image into args (a JSON array) and the
     * environment into env (a JSON object). */
    const char *const *command;
    void (*build)(const drv_preset_in_t *in, json_t *args, json_t *env);
};

/* The preset named name, or NULL. */
const drv_preset_t *drv_preset_find(const char *name);

/* The names, NULL-terminated (the schema's enum of runtime.preset). */
extern const char *const drv_preset_names[];

/* A model runtime's image: runtime.image, else its preset's; NULL: a
 * command on the node. */
const char *drv_runtime_image(const json_t *runtime);

/* Render preset p for in: {"command": [...] (absent: the image's own),
 * "args": [...], "env": {...}}. Never NULL. */
json_t *drv_preset_render(const drv_preset_t *p, const drv_preset_in_t *in);

#endif
