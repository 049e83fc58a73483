/* trace.h — the Alibaba GPU-sharing trace (cluster-trace-gpu-v2023) as
 * published: node and pod lists in CSV, read strictly.
 *
 *   nodes: sn, cpu_milli, memory_mib, gpu, model
 *   pods:  name, cpu_milli, memory_mib, num_gpu, gpu_milli [, gpu_spec, ...]
 *
 * Columns are found by the header's names, in any order; other columns
 * are ignored. A file that does not follow the format is rejected with
 * "FILE:LINE: reason" (no quoting, integers only, a field per header
 * column, no duplicate names, requests that make sense: gpu_milli 1..1000
 * for GPU pods and 0 for CPU pods, whole GPUs (1000) when num_gpu >= 2).
 * Blank lines are skipped; CRLF is accepted. "nan" or "" for model or
 * gpu_spec means none. The parsers work on a buffer, so each is fuzzable
 * on its own.
 */
#ifndef DRV_SIM_TRACE_H
#define DRV_SIM_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define DRV_TRACE_MAX_GPUS 64      /* per node; = DRV_SCHED_MAX_GPUS */
#define DRV_TRACE_MAX_BYTES (1u << 30)

typedef struct drv_trace_node {
    const char *name;          /* sn */
    int64_t cpu_milli, memory_mib;
    int gpus;
    const char *model;         /* NULL = none */
    int line;
} drv_trace_node_t;

typedef struct drv_trace_pod {
    const char *name;
    int64_t cpu_milli, memory_mib;
    int num_gpu;
    int64_t gpu_milli;         /* per GPU, 0..1000 */
    const char *const *types;  /* gpu_spec split on '|', interned; NULL = any */
    size_t n_types;
    int line;
} drv_trace_pod_t;

/* One file's rows. Strings live in the trace's arena; type names are
 * interned (equal names, one pointer). */
typedef struct drv_trace {
    drv_trace_node_t *nodes;
    size_t n_nodes;
    drv_trace_pod_t *pods;
    size_t n_pods;
    struct drv_trace_arena *arena;
} drv_trace_t;

/* Parse buf (len bytes, named fname in messages) into t (zeroed first).
 * 0, or -1 with err = "FILE:LINE: reason" and t left empty. */
int drv_trace_parse_nodes(drv_trace_t *t, const char *buf, size_t len, const char *fname,
                          drv_error_t *err);
int drv_trace_parse_pods(drv_trace_t *t, const char *buf, size_t len, const char *fname,
                         drv_error_t *err);
/* The same from a file. */
int drv_trace_load_nodes(drv_trace_t *t, const char *path, drv_error_t *err);
int drv_trace_load_pods(drv_trace_t *t, const char *path, drv_error_t *err);
void drv_trace_free(drv_trace_t *t);

/* A whole regular file of at most DRV_TRACE_MAX_BYTES, malloc'd with one
 * spare byte; NULL with err = "PATH: reason". Shared by the trace readers. */
char *drv_trace_read_file(const char *path, size_t *len, drv_error_t *err);

#endif
