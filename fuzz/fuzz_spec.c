/* fuzz_spec.c — libFuzzer target: the spec validation behind every POST and
 * PATCH of a resource kind (api/h_objects.c): the kind's normalize step,
 * then drv_schema_validate() against its field table (api/kinds.c,
 * kinds_cloud.c, kinds_store.c, h_jobs.c). The first input byte picks the kind; the rest
 * is the request body as JSON. A validated spec must validate again
 * unchanged (defaults are filled once, idempotently). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "api/resource.h"

static const drv_kind_desc_t *const kinds[] = {
    &drv_kind_cluster, &drv_kind_nodepool, &drv_kind_model, &drv_kind_deployment,
    &drv_kind_credential, &drv_kind_artifact, &drv_kind_store, &drv_kind_job,
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const drv_kind_desc_t *d = kinds[data[0] % NKINDS];
    json_t *spec = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(spec)) {
        json_decref(spec);
        return 0;
    }
    if (d->normalize)
        d->normalize(spec);
    drv_error_t err;
    if (drv_schema_validate(spec, d->schema, "", &err) == 0) {
        json_t *again = json_deep_copy(spec);
        if (!again || drv_schema_validate(again, d->schema, "", &err) < 0 ||
            !json_equal(again, spec))
            abort();   /* a valid spec must stay valid and unchanged */
        json_decref(again);
    }
    json_decref(spec);
    return 0;
}
