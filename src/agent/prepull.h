/* prepull.h — images pulled ahead of any replica (issue 16): the head lists,
 * for a node of a nodepool with `prefetch: true`, the images its
 * deployments' models run (api/agent_peers.c); the agent pulls each with
 * the node's engine in a child process of its own (`image inspect`, else
 * `pull`, with the image's registry login) and reports per image
 * `pulling`, `ready` or `failed` (with the engine's last words) under
 * container_runtime.images. The sync thread owns the context: set when a
 * list arrives, report before each sync (which also reaps finished pulls).
 * A pull never blocks the sync; an image dropped from the list keeps its
 * pull running to its end, then is forgotten. */
#ifndef DRV_PREPULL_H
#define DRV_PREPULL_H

#include <jansson.h>

typedef struct drv_prepull drv_prepull_t;

/* engine "podman" | "docker"; state_dir DATA_DIR/containers (logins and
 * logs go there). NULL on OOM. */
drv_prepull_t *drv_prepull_create(const char *engine, const char *state_dir);
void drv_prepull_destroy(drv_prepull_t *p);   /* waits for no pull: they end on their own */

/* The list the head sent: [{image, registry_auth?: {registry, username,
 * password}}]; starts the pull of each image it does not have yet. */
void drv_prepull_set(drv_prepull_t *p, const json_t *list);

/* [{image, state, error?}] of the listed images; NULL before any list. */
json_t *drv_prepull_report(drv_prepull_t *p);

#endif
