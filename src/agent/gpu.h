/* gpu.h — GPU discovery and health for the worker agent.
 *
 * A drv_gpus_t is the agent's view of the GPUs of its node. It comes from one
 * of three sources:
 *   - "nvml":     detected through NVML, loaded at run time with
 *                 dlopen(DROVER_NVML_LIBRARY or "libnvidia-ml.so.1"); there is
 *                 no build-time dependency on the NVIDIA driver;
 *   - "declared": given by the operator as a spec, "--gpus 2xL4:24576";
 *   - "none":     no GPUs (spec "none", or "auto" without a usable NVML).
 * Every GPU says whether it was detected (NVML) or declared.
 *
 * Health: a detected GPU turns unhealthy on a critical XID event, a
 * double-bit ECC event, a non-zero volatile double-bit ECC counter, or NVML
 * reporting it lost; an unhealthy GPU takes no new replicas and stays
 * unhealthy until the agent restarts (the first cause is kept as the
 * reason). The critical XID list is in gpu.c (drv_gpu_xid_is_critical).
 * Application-caused XIDs (13, 31, 43, 45, ...) leave a GPU healthy.
 *
 * Threading: the agent's main thread owns a drv_gpus_t; nothing here locks.
 * drv_gpus_create and drv_gpus_refresh call NVML and may take a while: never
 * call them while holding a lock that other threads wait on.
 */
#ifndef DRV_AGENT_GPU_H
#define DRV_AGENT_GPU_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define DRV_GPUS_MAX 64                 /* GPUs per node, all entries together */
#define DRV_GPU_TYPE_MAX 32             /* characters of a declared TYPE */
#define DRV_GPU_MEMORY_MAX_MIB 1048576  /* 1 TiB per GPU */

typedef struct drv_gpu_info {
    int index;                 /* NVML index, or position among declared GPUs */
    char uuid[96];             /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
    char name[96];             /* "NVIDIA L4" (NVML) or the declared TYPE ("L4") */
    int64_t memory_total_mib;  /* 0 when NVML cannot tell */
    int64_t memory_used_mib;   /* 0 for declared GPUs */
    int utilization_percent;   /* -1 unknown */
    int temperature_c;         /* -1 unknown */
    bool healthy;
    char health_reason[160];   /* "" when healthy */
    bool detected;             /* true: NVML; false: declared */
} drv_gpu_info_t;

typedef struct drv_gpus drv_gpus_t;

/* One entry of a declared spec: "2xL4:24576" = {2, "L4", 24576}. */
typedef struct drv_gpu_decl {
    int count;                          /* 1..64 */
    char type[DRV_GPU_TYPE_MAX + 1];    /* [A-Za-z0-9-]{1,32} */
    int64_t memory_mib;                 /* 1..DRV_GPU_MEMORY_MAX_MIB */
} drv_gpu_decl_t;

/* Parse "NxTYPE:MIB[,NxTYPE:MIB...]" into out[0..cap); *n gets the number of
 * entries. The total GPU count is at most DRV_GPUS_MAX. 0, or -1 with err
 * (field "gpus") and *n, out unspecified. "auto"/"none" are not specs here. */
int drv_gpus_parse_spec(const char *spec, drv_gpu_decl_t *out, size_t cap, size_t *n,
                        drv_error_t *err);

/* spec: NULL or "auto" = NVML if it loads and sees >= 1 GPU, else no GPUs;
 * "none" = no GPUs; "NxTYPE:MIB[,...]" = declared (NVML is not loaded).
 * seed: stable per-node string from which declared UUIDs are derived (same
 * seed -> same UUIDs); NULL is taken as "".
 * NULL with err only for an invalid spec: NVML trouble never fails "auto". */
drv_gpus_t *drv_gpus_create(const char *spec, const char *seed, drv_error_t *err);
void drv_gpus_destroy(drv_gpus_t *g);   /* NULL is fine */

/* Re-read memory used, utilization and temperature; drain pending XID and
 * ECC events (no waiting) and read the double-bit ECC counters. Fields NVML
 * cannot report become unknown; nothing here fails discovery. Returns 0
 * (-1 with err is reserved for a future hard failure). No-op unless "nvml". */
int drv_gpus_refresh(drv_gpus_t *g, drv_error_t *err);

size_t drv_gpus_count(const drv_gpus_t *g);
const drv_gpu_info_t *drv_gpus_at(const drv_gpus_t *g, size_t i);   /* NULL past the end */
const char *drv_gpus_source(const drv_gpus_t *g);          /* "nvml", "declared", "none" */
/* Why the source is what it is, for the agent's log: "NVML 550.54.15: 2 GPUs",
 * "NVML unavailable: libnvidia-ml.so.1: cannot open ...", "NVML init failed:
 * Driver Not Loaded", "declared by --gpus 2xL4:24576", "--gpus none". */
const char *drv_gpus_message(const drv_gpus_t *g);
const char *drv_gpus_driver_version(const drv_gpus_t *g);  /* "" if unknown */

/* [{index, uuid, name, memory_mib, memory_used_mib, utilization_percent|null,
 *   temperature_c|null, healthy, health_reason, source: "detected"|"declared"}] */
json_t *drv_gpus_to_json(const drv_gpus_t *g);

/* The declared UUID of GPU `index` for seed (out >= 41 bytes). */
void drv_gpu_declared_uuid(const char *seed, int index, char *out, size_t len);

/* Whether an XID makes a GPU unhealthy, and its short description
 * ("GPU has fallen off the bus"); NULL description when not critical. */
bool drv_gpu_xid_is_critical(unsigned long long xid);
const char *drv_gpu_xid_description(unsigned long long xid);

#endif
