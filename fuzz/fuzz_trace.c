/* fuzz_trace.c — libFuzzer target: drover-sim's trace CSV readers
 * (sim/trace.c: the node and pod lists of the Alibaba GPU trace;
 * sim/serve_input.c: the serving request trace). The first input byte
 * picks the reader; the rest is the file's content. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/serve.h"
#include "sim/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;
    drv_error_t err;
    switch (data[0] % 3) {
    case 0: {
        drv_trace_t t;
        if (drv_trace_parse_nodes(&t, buf, len, "nodes.csv", &err) == 0) {
            for (size_t i = 0; i < t.n_nodes; i++)
                if (!t.nodes[i].name || t.nodes[i].gpus < 0 ||
                    t.nodes[i].gpus > DRV_TRACE_MAX_GPUS)
                    abort();
        }
        drv_trace_free(&t);
        break;
    }
    case 1: {
        drv_trace_t t;
        if (drv_trace_parse_pods(&t, buf, len, "pods.csv", &err) == 0) {
            for (size_t i = 0; i < t.n_pods; i++)
                if (!t.pods[i].name || t.pods[i].gpu_milli < 0 || t.pods[i].gpu_milli > 1000)
                    abort();
        }
        drv_trace_free(&t);
        break;
    }
    default: {
        sim_serve_trace_t t;
        memset(&t, 0, sizeof t);
        if (sim_serve_trace_parse(&t, buf, len, "trace.csv", &err) == 0)
            sim_serve_trace_free(&t);
        break;
    }
    }
    return 0;
}
