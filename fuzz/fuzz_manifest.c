/* fuzz_manifest.c — libFuzzer target: the artifact manifest's parser and
 * validator (common/manifest.c drv_manifest_parse), and on a manifest it
 * accepts, its writer: drv_manifest_to_json must parse back to the same
 * digest. The input is the manifest's JSON. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    drv_manifest_t *m = NULL;
    drv_error_t err;
    if (drv_manifest_parse((const char *)data, size, &m, &err) < 0)
        return 0;
    char *json = drv_manifest_to_json(m);
    drv_manifest_t *back = NULL;
    if (!json || drv_manifest_parse(json, strlen(json), &back, &err) < 0 ||
        strcmp(back->digest, m->digest) != 0)
        abort();   /* what the writer writes, the parser must take back */
    free(json);
    drv_manifest_free(back);
    drv_manifest_free(m);
    return 0;
}
