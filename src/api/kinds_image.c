/* kinds_image.c — runtime.image (containers, issue 16) for the kinds that
 * run a program, models (kinds.c) and jobs (h_jobs.c): the pull policies
 * and the cross-object check of a runtime object (a command or an image;
 * args, pull_policy and image_credential only with an image (a model's
 * runtime.preset names one); the
 * credential a registry's; an image reference the engines take). Runs
 * under the state write lock, no I/O. */
#include <stdio.h>
#include <string.h>

#include "api/resource.h"
#include "catalog/presets.h"
#include "state/head.h"
#include "common/json.h"

const char *const drv_pull_policies[] = {"if_not_present", "always", "never", NULL};

int drv_runtime_image_check(drv_req_t *req, const char *owner, const json_t *rt,
                            drv_error_t *err)
{
    const char *image = drv_json_str(rt, "image"), *given = image;
    if (!image)   /* a preset's published image (models) */
        image = drv_runtime_image(rt);
    if (!image && !json_object_get(rt, "command"))
        return drv_err_invalid(err, "runtime.command", "runtime.command is required (the "
                               "program to run, e.g. [\"python3\", \"serve.py\"]) unless "
                               "runtime.image names a container image (or runtime.preset a "
                               "model server)");
    if (!image && (json_object_get(rt, "args") || json_object_get(rt, "pull_policy")))
        return drv_err_invalid(err, json_object_get(rt, "args") ? "runtime.args"
                                                                : "runtime.pull_policy",
                               "runtime.%s needs runtime.image (a container image); for a "
                               "command on the node put its arguments in runtime.command",
                               json_object_get(rt, "args") ? "args" : "pull_policy");
    const char *icred = drv_json_str(rt, "image_credential");
    if (icred && !image)
        return drv_err_invalid(err, "runtime.image_credential", "runtime.image_credential "
                               "needs runtime.image (a container image)");
    if (icred) {
        char ckey[192];
        snprintf(ckey, sizeof ckey, "%s/%s", owner, icred);
        const drv_obj_t *c = drv_state_get(req->head->state, DRV_K_CREDENTIAL, ckey);
        if (!c)
            return drv_err_invalid(err, "runtime.image_credential", "credential '%s' not found "
                                   "(create it: POST /v1/credentials {id, provider: registry, "
                                   "registry, username, password})", icred);
        if (strcmp(drv_json_str(c->spec, "provider"), "registry") != 0)
            return drv_err_invalid(err, "runtime.image_credential", "credential '%s' is for "
                                   "provider '%s', not a registry's", icred,
                                   drv_json_str(c->spec, "provider"));
    }
    for (const char *p = given; p && *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f || *p == '"' || *p == '\\' ||
            (p == given && (*p == '-' || *p == ':' || *p == '/' || *p == '@')))
            return drv_err_invalid(err, "runtime.image", "runtime.image '%s' is not an image "
                                   "reference (e.g. docker.io/vllm/vllm-openai:v0.6.0 or "
                                   "localhost/my-model:1): no spaces, quotes or control "
                                   "characters, not starting with '-', ':', '/' or '@'", image);
    return 0;
}
