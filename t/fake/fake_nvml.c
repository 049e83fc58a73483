/* fake_nvml.c — a test double of libnvidia-ml.so.1 (NVML), for testing the
 * agent's GPU discovery (src/agent/gpu.c) on machines without a GPU.
 *
 * It exports, with C linkage and NVML's ABI, the functions gpu.c uses. The
 * machine it pretends to be is described by the JSON file named by the
 * environment variable FAKE_NVML_CONFIG (no variable or no file: a machine
 * with no GPUs):
 *
 *   {"init_error": 0,                  nvmlInit_v2's answer (9: driver not loaded)
 *    "driver_version": "550.54.15",
 *    "gpus": [{"name": "NVIDIA L4", "uuid": "GPU-...",
 *              "memory_total_mib": 23034, "memory_used_mib": 100,
 *              "utilization": 7, "temperature": 41,
 *              "ecc_double_bit": 0,        volatile uncorrected ECC counter
 *              "xid_events": [79],         XIDs delivered through event sets
 *              "unsupported": ["temperature"],  answer NOT_SUPPORTED for:
 *                  name uuid memory utilization temperature
 *                  ecc (the counter), ecc_events (the double-bit ECC
 *                  event type), events (all event registration)
 *              "lost": false,              every device call answers GPU_IS_LOST
 *              "handle_error": 0}]}        nvmlDeviceGetHandleByIndex_v2's answer
 *
 * The GPU count and init_error are read at nvmlInit_v2; everything else is
 * re-read from the file on every call, so a test can change telemetry or
 * inject events while the agent runs. Events: each event set remembers, per
 * device, how many entries of xid_events it has delivered (all of them are
 * pending at registration) and the last ecc_double_bit value it reported;
 * nvmlEventSetWait_v2 returns the next pending XID event, then a double-bit
 * ECC event when the counter grew, else NVML_ERROR_TIMEOUT without waiting.
 *
 * Threading: none; one test thread calls it. Not a complete NVML.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef struct fake_device *nvmlDevice_t;
typedef struct fake_event_set *nvmlEventSet_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_UNKNOWN = 999,
};
#define EVENT_DBE 0x2ULL
#define EVENT_XID 0x8ULL
#define MAX_DEVICES 64

struct fake_device {
    unsigned int index;
};

struct fake_event_set {
    unsigned long long mask[MAX_DEVICES];
    size_t xid_delivered[MAX_DEVICES];
    unsigned long long dbe_reported[MAX_DEVICES];
};

static struct fake_device devices[MAX_DEVICES];
static unsigned int device_count;
static int init_count;

/* --- configuration -------------------------------------------------------- */

static json_t *load_config(void)
{
    const char *path = getenv("FAKE_NVML_CONFIG");
    if (!path || !*path)
        return NULL;
    return json_load_file(path, 0, NULL);
}

static json_t *gpu_config(json_t *cfg, unsigned int index)
{
    return json_array_get(json_object_get(cfg, "gpus"), index);
}

static long long int_field(json_t *obj, const char *key, long long dflt)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

static const char *str_field(json_t *obj, const char *key, const char *dflt)
{
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

static bool unsupported(json_t *gpu, const char *what)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(gpu, "unsupported"), i, v)
        if (json_is_string(v) && !strcmp(json_string_value(v), what))
            return true;
    return false;
}

static bool valid_device(nvmlDevice_t dev)
{
    return dev >= devices && dev < devices + device_count;
}

/* Common entry of per-device queries: *cfg and *gpu for the device (the
 * caller json_decref()s *cfg), or an error code. */
static nvmlReturn_t enter(nvmlDevice_t dev, const char *feature, json_t **cfg, json_t **gpu)
{
    *cfg = NULL;
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!valid_device(dev))
        return NVML_ERROR_INVALID_ARGUMENT;
    *cfg = load_config();
    *gpu = gpu_config(*cfg, dev->index);
    if (!*gpu)
        return NVML_ERROR_GPU_IS_LOST;    /* removed from the file since init */
    if (json_is_true(json_object_get(*gpu, "lost")))
        return NVML_ERROR_GPU_IS_LOST;
    if (feature && unsupported(*gpu, feature))
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_string(const char *s, char *out, unsigned int len)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

/* --- init and system ------------------------------------------------------ */

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    json_t *cfg = load_config();
    nvmlReturn_t rc = (nvmlReturn_t)int_field(cfg, "init_error", 0);
    if (rc == NVML_SUCCESS) {
        if (init_count++ == 0) {
            size_t n = json_array_size(json_object_get(cfg, "gpus"));
            device_count = n > MAX_DEVICES ? MAX_DEVICES : (unsigned int)n;
            for (unsigned int i = 0; i < device_count; i++)
                devices[i].index = i;
        }
    }
    json_decref(cfg);
    return rc;
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (--init_count == 0)
        device_count = 0;
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t rc)
{
    switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int len)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    json_t *cfg = load_config();
    nvmlReturn_t rc = copy_string(str_field(cfg, "driver_version", "550.54.15"), version, len);
    json_decref(cfg);
    return rc;
}

/* --- devices -------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = device_count;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (index >= device_count || !dev)
        return NVML_ERROR_INVALID_ARGUMENT;
    json_t *cfg = load_config();
    nvmlReturn_t rc = (nvmlReturn_t)int_field(gpu_config(cfg, index), "handle_error", 0);
    json_decref(cfg);
    if (rc == NVML_SUCCESS)
        *dev = &devices[index];
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int len)
{
    json_t *cfg, *gpu;
    nvmlReturn_t rc = enter(dev, "name", &cfg, &gpu);
    if (rc == NVML_SUCCESS)
        rc = copy_string(str_field(gpu, "name", "NVIDIA Fake GPU"), name, len);
    json_decref(cfg);
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int len)
{
    json_t *cfg, *gpu;
    nvmlReturn_t rc = enter(dev, "uuid", &cfg, &gpu);
    if (rc == NVML_SUCCESS) {
        char dflt[48];
        snprintf(dflt, sizeof dflt, "GPU-fa4e0000-0000-0000-0000-%012u", dev->index);
        rc = copy_string(str_field(gpu, "uuid", dflt), uuid, len);
    }
    json_decref(cfg);
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem)
{
    json_t *cfg, *gpu;
    nvmlReturn_t rc = enter(dev, "memory", &cfg, &gpu);
    if (rc == NVML_SUCCESS && !mem)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS) {
        unsigned long long total = (unsigned long long)int_field(gpu, "memory_total_mib", 0) << 20;
        unsigned long long used = (unsigned long long)int_field(gpu, "memory_used_mib", 0) << 20;
        mem->total = total;
        mem->used = used;
        mem->free = used <= total ? total - used : 0;
    }
    json_decref(cfg);
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *util)
{
    json_t *cfg, *gpu;
    nvmlReturn_t rc = enter(dev, "utilization", &cfg, &gpu);
    if (rc == NVML_SUCCESS && !util)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS) {
        util->gpu = (unsigned int)int_field(gpu, "utilization", 0);
        util->memory = (unsigned int)int_field(gpu, "memory_utilization", 0);
    }
    json_decref(cfg);
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned int *temp)
{
    json_t *cfg, *gpu;
    nvmlReturn_t rc = enter(dev, "temperature", &cfg, &gpu);
    if (rc == NVML_SUCCESS && (!temp || sensor != 0))
        rc = NVML_ERROR_INVALID_ARGUMENT;   /* only NVML_TEMPERATURE_GPU exists */
    if (rc == NVML_SUCCESS)
        *temp = (unsigned int)int_field(gpu, "temperature", 0);
    json_decref(cfg);
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int error_type, int counter_type,
                                                unsigned long long *count)
{
    json_t *cfg, *gpu;
    nvmlReturn_t rc = enter(dev, "ecc", &cfg, &gpu);
    if (rc == NVML_SUCCESS && (!count || error_type < 0 || error_type > 1 || counter_type < 0 ||
                               counter_type > 1))
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS)   /* uncorrected = double-bit; the same for volatile and aggregate */
        *count = error_type == 1 ? (unsigned long long)int_field(gpu, "ecc_double_bit", 0)
                                 : (unsigned long long)int_field(gpu, "ecc_single_bit", 0);
    json_decref(cfg);
    return rc;
}

/* --- events --------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    *set = calloc(1, sizeof **set);
    return *set ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    free(set);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types,
                                             nvmlEventSet_t set)
{
    json_t *cfg, *gpu;
    nvmlReturn_t rc = enter(dev, "events", &cfg, &gpu);
    if (rc == NVML_SUCCESS && !set)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS) {
        unsigned long long supported = EVENT_XID | (unsupported(gpu, "ecc_events") ? 0 : EVENT_DBE);
        if (types & ~supported)
            rc = NVML_ERROR_NOT_SUPPORTED;   /* like NVML: all requested types or none */
        else
            set->mask[dev->index] |= types;
    }
    json_decref(cfg);
    return rc;
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                        unsigned int timeout_ms)
{
    (void)timeout_ms;   /* never waits: tests drive time */
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!set || !data)
        return NVML_ERROR_INVALID_ARGUMENT;
    json_t *cfg = load_config();
    nvmlReturn_t rc = NVML_ERROR_TIMEOUT;
    for (unsigned int i = 0; i < device_count && rc == NVML_ERROR_TIMEOUT; i++) {
        json_t *gpu = gpu_config(cfg, i);
        if (set->mask[i] & EVENT_XID) {
            json_t *xids = json_object_get(gpu, "xid_events");
            if (set->xid_delivered[i] < json_array_size(xids)) {
                json_t *x = json_array_get(xids, set->xid_delivered[i]++);
                memset(data, 0, sizeof *data);
                data->device = &devices[i];
                data->eventType = EVENT_XID;
                data->eventData = (unsigned long long)json_integer_value(x);
                rc = NVML_SUCCESS;
                continue;
            }
        }
        if (set->mask[i] & EVENT_DBE) {
            unsigned long long dbe = (unsigned long long)int_field(gpu, "ecc_double_bit", 0);
            if (dbe > set->dbe_reported[i]) {
                set->dbe_reported[i] = dbe;
                memset(data, 0, sizeof *data);
                data->device = &devices[i];
                data->eventType = EVENT_DBE;
                rc = NVML_SUCCESS;
            }
        }
    }
    json_decref(cfg);
    return rc;
}
