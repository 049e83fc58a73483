/* fuzz_yaml.c — libFuzzer target: the CLI's YAML reader (common/yaml.c,
 * drv_yaml_load: YAML text -> a JSON array of documents), and its writer on
 * what it read: drv_yaml_dump of each document must load back to the same
 * value (the round trip yaml.h promises). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    drv_error_t err;
    json_t *docs = drv_yaml_load((const char *)data, size, "<fuzz>", &err);
    if (!docs)
        return 0;
    size_t i;
    json_t *doc;
    json_array_foreach(docs, i, doc) {
        char *text = drv_yaml_dump(doc, &err);
        if (!text)
            continue;   /* a value the writer refuses (said in err) */
        json_t *back = drv_yaml_load(text, strlen(text), "<dump>", &err);
        if (!back || json_array_size(back) != 1 || !json_equal(json_array_get(back, 0), doc))
            abort();    /* dump(load(x)) does not read back as load(x) */
        json_decref(back);
        free(text);
    }
    json_decref(docs);
    return 0;
}
