/* gpu.c — GPU discovery and health for the worker agent (see gpu.h).
 *
 * NVML is loaded at run time with dlopen(); the few functions used are
 * declared here (opaque handles as pointers, nvmlReturn_t as int), so the
 * agent builds and runs on machines without the NVIDIA driver. Functions
 * that are missing or answer NVML_ERROR_NOT_SUPPORTED leave the value
 * unknown; only nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2 and
 * nvmlDeviceGetHandleByIndex_v2 are required, and without them "auto" falls
 * back to no GPUs with the reason in drv_gpus_message().
 *
 * Health (a GPU once unhealthy stays so until the agent restarts; the first
 * cause is kept):
 *   - an XID critical-error event whose XID is in critical_xids below;
 *   - a double-bit ECC event, or a non-zero volatile double-bit ECC counter
 *     (nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE): errors since the
 *     driver loaded; ECC off or unsupported counts as no errors);
 *   - NVML answering NVML_ERROR_GPU_IS_LOST for the device, or not giving a
 *     handle for it at discovery.
 * Events are drained with nvmlEventSetWait_v2 and a zero timeout, so refresh
 * never blocks on them.
 *
 * Threading: the agent's main thread owns a drv_gpus_t; nothing here locks.
 */
#include "agent/gpu.h"

#include <assert.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

/* --- NVML, declared by hand (values from the NVML API reference) ----------- */

typedef int nvml_return_t;
typedef struct nvml_device_st *nvml_device_t;
typedef struct nvml_event_set_st *nvml_event_set_t;

typedef struct {
    unsigned long long total, free, used;   /* bytes */
} nvml_memory_t;

typedef struct {
    unsigned int gpu, memory;               /* percent */
} nvml_utilization_t;

typedef struct {
    nvml_device_t device;
    unsigned long long event_type;
    unsigned long long event_data;          /* the XID for XID events */
    unsigned int gpu_instance_id;
    unsigned int compute_instance_id;
} nvml_event_data_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
};
#define NVML_EVENT_DOUBLE_BIT_ECC 0x2ULL     /* nvmlEventTypeDoubleBitEccError */
#define NVML_EVENT_XID_CRITICAL 0x8ULL       /* nvmlEventTypeXidCriticalError */
#define NVML_TEMPERATURE_GPU 0               /* nvmlTemperatureSensors_t */
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1 /* nvmlMemoryErrorType_t */
#define NVML_VOLATILE_ECC 0                  /* nvmlEccCounterType_t */
#define NVML_NAME_BUFFER 96                  /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define NVML_UUID_BUFFER 96                  /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
#define NVML_DRIVER_VERSION_BUFFER 80        /* NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE */
#define NVML_EVENTS_PER_REFRESH 1024         /* bound on one drain of the event set */

struct nvml_api {
    nvml_return_t (*init)(void);
    nvml_return_t (*shutdown)(void);
    nvml_return_t (*get_count)(unsigned int *count);
    nvml_return_t (*get_handle)(unsigned int index, nvml_device_t *dev);
    nvml_return_t (*get_name)(nvml_device_t dev, char *name, unsigned int len);
    nvml_return_t (*get_uuid)(nvml_device_t dev, char *uuid, unsigned int len);
    nvml_return_t (*get_memory)(nvml_device_t dev, nvml_memory_t *mem);
    nvml_return_t (*get_utilization)(nvml_device_t dev, nvml_utilization_t *util);
    nvml_return_t (*get_temperature)(nvml_device_t dev, int sensor, unsigned int *temp);
    nvml_return_t (*event_set_create)(nvml_event_set_t *set);
    nvml_return_t (*register_events)(nvml_device_t dev, unsigned long long types,
                                     nvml_event_set_t set);
    nvml_return_t (*event_set_wait)(nvml_event_set_t set, nvml_event_data_t *data,
                                    unsigned int timeout_ms);
    nvml_return_t (*event_set_free)(nvml_event_set_t set);
    nvml_return_t (*get_total_ecc)(nvml_device_t dev, int error_type, int counter_type,
                                   unsigned long long *count);
    nvml_return_t (*get_driver_version)(char *version, unsigned int len);
    const char *(*error_string)(nvml_return_t rc);
};

static const struct nvml_symbol {
    const char *name;
    size_t offset;
    bool required;
} nvml_symbols[] = {
    {"nvmlInit_v2", offsetof(struct nvml_api, init), true},
    {"nvmlShutdown", offsetof(struct nvml_api, shutdown), true},
    {"nvmlDeviceGetCount_v2", offsetof(struct nvml_api, get_count), true},
    {"nvmlDeviceGetHandleByIndex_v2", offsetof(struct nvml_api, get_handle), true},
    {"nvmlDeviceGetName", offsetof(struct nvml_api, get_name), false},
    {"nvmlDeviceGetUUID", offsetof(struct nvml_api, get_uuid), false},
    {"nvmlDeviceGetMemoryInfo", offsetof(struct nvml_api, get_memory), false},
    {"nvmlDeviceGetUtilizationRates", offsetof(struct nvml_api, get_utilization), false},
    {"nvmlDeviceGetTemperature", offsetof(struct nvml_api, get_temperature), false},
    {"nvmlEventSetCreate", offsetof(struct nvml_api, event_set_create), false},
    {"nvmlDeviceRegisterEvents", offsetof(struct nvml_api, register_events), false},
    {"nvmlEventSetWait_v2", offsetof(struct nvml_api, event_set_wait), false},
    {"nvmlEventSetFree", offsetof(struct nvml_api, event_set_free), false},
    {"nvmlDeviceGetTotalEccErrors", offsetof(struct nvml_api, get_total_ecc), false},
    {"nvmlSystemGetDriverVersion", offsetof(struct nvml_api, get_driver_version), false},
    {"nvmlErrorString", offsetof(struct nvml_api, error_string), false},
};

/* --- critical XIDs -----------------------------------------------------------
 * XIDs after which NVIDIA's XID catalog asks for a GPU reset, node reboot or
 * hardware service: the GPU takes no new replicas. XIDs caused by
 * applications (13 graphics engine exception, 31 memory page fault,
 * 43 GPU stopped processing, 45 preemptive cleanup, ...) are not listed: the
 * replica fails, the GPU stays healthy. */
static const struct {
    unsigned long long xid;
    const char *what;
} critical_xids[] = {
    {48, "double-bit ECC error"},
    {62, "internal micro-controller halt"},
    {63, "ECC page retirement or row remapping event"},
    {64, "ECC page retirement or row remapping failure"},
    {74, "NVLink error"},
    {79, "GPU has fallen off the bus"},
    {92, "high single-bit ECC error rate"},
    {94, "contained ECC error"},
    {95, "uncontained ECC error"},
    {119, "GSP RPC timeout"},
    {120, "GSP error"},
    {140, "unrecovered ECC error"},
};

const char *drv_gpu_xid_description(unsigned long long xid)
{
    for (size_t i = 0; i < sizeof critical_xids / sizeof critical_xids[0]; i++)
        if (critical_xids[i].xid == xid)
            return critical_xids[i].what;
    return NULL;
}

bool drv_gpu_xid_is_critical(unsigned long long xid)
{
    return drv_gpu_xid_description(xid) != NULL;
}

/* --- the context ------------------------------------------------------------ */

struct drv_gpus {
    const char *source;                 /* "nvml", "declared", "none" */
    char message[320];
    char driver_version[NVML_DRIVER_VERSION_BUFFER];
    size_t n;
    drv_gpu_info_t gpus[DRV_GPUS_MAX];

    /* NVML, when source is "nvml" (dl, up) or while trying it */
    void *dl;
    bool nvml_up;                       /* nvmlInit_v2 succeeded */
    struct nvml_api api;
    nvml_device_t handles[DRV_GPUS_MAX];  /* NULL: no handle for that GPU */
    nvml_event_set_t events;            /* NULL: no event set */
};

/* --- spec parsing ------------------------------------------------------------ */

#define SPEC_FORMAT "--gpus: expected NxTYPE:MEMORY_MIB like 2xL4:24576, got '%.*s'"

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_type_char(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}

/* Decimal digits p[0..len) as a value saturated at limit + 1; -1 if empty or
 * not all digits. */
static int64_t parse_bounded(const char *p, size_t len, int64_t limit)
{
    if (len == 0)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit(p[i]))
            return -1;
        if (v <= limit)
            v = v * 10 + (p[i] - '0');
    }
    return v > limit ? limit + 1 : v;
}

static int parse_entry(const char *e, size_t len, drv_gpu_decl_t *d, drv_error_t *err)
{
    int shown = len > 100 ? 100 : (int)len;
    size_t i = 0;
    while (i < len && is_digit(e[i]))
        i++;
    size_t count_len = i;
    if (count_len == 0 || i >= len || e[i] != 'x')
        return drv_err_invalid(err, "gpus", SPEC_FORMAT, shown, e);
    const char *type = e + i + 1;
    const char *colon = memchr(type, ':', len - (size_t)(type - e));
    if (!colon)
        return drv_err_invalid(err, "gpus", SPEC_FORMAT, shown, e);
    size_t type_len = (size_t)(colon - type);
    const char *mem = colon + 1;
    size_t mem_len = len - (size_t)(mem - e);
    int64_t memory = parse_bounded(mem, mem_len, DRV_GPU_MEMORY_MAX_MIB);
    if (memory < 0)
        return drv_err_invalid(err, "gpus", SPEC_FORMAT, shown, e);

    int64_t count = parse_bounded(e, count_len, DRV_GPUS_MAX);
    if (count < 1 || count > DRV_GPUS_MAX)
        return drv_err_invalid(err, "gpus", "--gpus: GPU count %.*s in '%.*s' is out of range 1..%d",
                               count_len > 20 ? 20 : (int)count_len, e, shown, e, DRV_GPUS_MAX);
    bool type_ok = type_len >= 1 && type_len <= DRV_GPU_TYPE_MAX;
    for (size_t k = 0; type_ok && k < type_len; k++)
        type_ok = is_type_char(type[k]);
    if (!type_ok)
        return drv_err_invalid(err, "gpus",
                               "--gpus: GPU type '%.*s' in '%.*s' must be 1 to %d characters of "
                               "A-Z a-z 0-9 -",
                               type_len > 40 ? 40 : (int)type_len, type, shown, e, DRV_GPU_TYPE_MAX);
    if (memory < 1 || memory > DRV_GPU_MEMORY_MAX_MIB)
        return drv_err_invalid(err, "gpus",
                               "--gpus: GPU memory %.*s MiB in '%.*s' is out of range 1..%d",
                               mem_len > 20 ? 20 : (int)mem_len, mem, shown, e,
                               DRV_GPU_MEMORY_MAX_MIB);
    d->count = (int)count;
    memcpy(d->type, type, type_len);
    d->type[type_len] = '\0';
    d->memory_mib = memory;
    return 0;
}

int drv_gpus_parse_spec(const char *spec, drv_gpu_decl_t *out, size_t cap, size_t *n,
                        drv_error_t *err)
{
    assert(out && n);
    *n = 0;
    if (!spec)
        spec = "";
    int total = 0;
    const char *p = spec;
    for (;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        drv_gpu_decl_t d;
        if (parse_entry(p, (size_t)(end - p), &d, err) < 0)
            return -1;
        if (*n >= cap)
            return drv_err_invalid(err, "gpus", "--gpus: too many entries (at most %zu)", cap);
        total += d.count;
        if (total > DRV_GPUS_MAX)
            return drv_err_invalid(err, "gpus", "--gpus: more than %d GPUs declared for one node",
                                   DRV_GPUS_MAX);
        out[(*n)++] = d;
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
}

/* --- helpers ------------------------------------------------------------------ */

void drv_gpu_declared_uuid(const char *seed, int index, char *out, size_t len)
{
    if (!seed)
        seed = "";
    char small[256], hex[65];
    size_t need = strlen(seed) + 32;
    char *buf = need <= sizeof small ? small : drv_xmalloc(need);
    int n = snprintf(buf, need, "drover-gpu\n%s\n%d", seed, index);
    drv_sha256_hex(buf, n > 0 ? (size_t)n : 0, hex);
    if (buf != small)
        free(buf);
    snprintf(out, len, "GPU-%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16,
             hex + 20);
}

/* Copy an NVML string, keeping printable ASCII only (the JSON must be UTF-8). */
static void copy_clean(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < cap; i++)
        dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
    dst[i] = '\0';
}

static void mark_unhealthy(drv_gpu_info_t *gi, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void mark_unhealthy(drv_gpu_info_t *gi, const char *fmt, ...)
{
    if (!gi->healthy)
        return;   /* the first cause stays */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(gi->health_reason, sizeof gi->health_reason, fmt, ap);
    va_end(ap);
    gi->healthy = false;
    drv_warn("GPU %d (%s) is unhealthy and takes no new replicas: %s", gi->index, gi->uuid,
             gi->health_reason);
}

static const char *nvml_error(const drv_gpus_t *g, nvml_return_t rc, char *buf, size_t len)
{
    const char *s = g->api.error_string ? g->api.error_string(rc) : NULL;
    if (s && *s)
        snprintf(buf, len, "%s", s);
    else
        snprintf(buf, len, "NVML error %d", rc);
    return buf;
}

static void nvml_close(drv_gpus_t *g)
{
    if (g->events && g->api.event_set_free)
        g->api.event_set_free(g->events);
    g->events = NULL;
    if (g->nvml_up)
        g->api.shutdown();
    g->nvml_up = false;
    if (g->dl)
        dlclose(g->dl);
    g->dl = NULL;
    memset(&g->api, 0, sizeof g->api);
    memset(g->handles, 0, sizeof g->handles);
}

/* --- NVML discovery and refresh ------------------------------------------------ */

static void read_telemetry(drv_gpus_t *g, size_t i)
{
    drv_gpu_info_t *gi = &g->gpus[i];
    nvml_device_t h = g->handles[i];
    nvml_return_t rc;
    bool lost = false;

    if (g->api.get_memory) {
        nvml_memory_t m = {0};
        rc = g->api.get_memory(h, &m);
        if (rc == NVML_SUCCESS) {
            gi->memory_total_mib = (int64_t)(m.total >> 20);
            gi->memory_used_mib = (int64_t)(m.used >> 20);
        }
        lost |= rc == NVML_ERROR_GPU_IS_LOST;
    }
    gi->utilization_percent = -1;
    if (g->api.get_utilization) {
        nvml_utilization_t u = {0};
        rc = g->api.get_utilization(h, &u);
        if (rc == NVML_SUCCESS && u.gpu <= 100)
            gi->utilization_percent = (int)u.gpu;
        lost |= rc == NVML_ERROR_GPU_IS_LOST;
    }
    gi->temperature_c = -1;
    if (g->api.get_temperature) {
        unsigned int t = 0;
        rc = g->api.get_temperature(h, NVML_TEMPERATURE_GPU, &t);
        if (rc == NVML_SUCCESS && t < 1000)
            gi->temperature_c = (int)t;
        lost |= rc == NVML_ERROR_GPU_IS_LOST;
    }
    if (g->api.get_total_ecc) {
        unsigned long long dbe = 0;
        rc = g->api.get_total_ecc(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &dbe);
        if (rc == NVML_SUCCESS && dbe > 0)
            mark_unhealthy(gi, "%llu double-bit ECC error%s since the driver loaded", dbe,
                           dbe == 1 ? "" : "s");
        lost |= rc == NVML_ERROR_GPU_IS_LOST;
    }
    if (lost)
        mark_unhealthy(gi, "NVML reports the GPU lost (fallen off the bus or inaccessible)");
}

static void handle_event(drv_gpus_t *g, const nvml_event_data_t *ev)
{
    /* Which GPU: the event's device; an event naming no known device
     * applies to all (as NVIDIA's device plugin does). */
    size_t first = 0, last = g->n;
    for (size_t i = 0; i < g->n; i++) {
        if (g->handles[i] && g->handles[i] == ev->device) {
            first = i;
            last = i + 1;
            break;
        }
    }
    for (size_t i = first; i < last; i++) {
        drv_gpu_info_t *gi = &g->gpus[i];
        if (ev->event_type & NVML_EVENT_XID_CRITICAL) {
            const char *what = drv_gpu_xid_description(ev->event_data);
            if (what)
                mark_unhealthy(gi, "XID %llu: %s", ev->event_data, what);
            else
                drv_info("GPU %d (%s): XID %llu (application error, GPU stays healthy)",
                         gi->index, gi->uuid, ev->event_data);
        }
        if (ev->event_type & NVML_EVENT_DOUBLE_BIT_ECC)
            mark_unhealthy(gi, "double-bit ECC error event");
    }
}

static void drain_events(drv_gpus_t *g)
{
    if (!g->events || !g->api.event_set_wait)
        return;
    for (int k = 0; k < NVML_EVENTS_PER_REFRESH; k++) {
        nvml_event_data_t ev;
        memset(&ev, 0, sizeof ev);
        nvml_return_t rc = g->api.event_set_wait(g->events, &ev, 0);
        if (rc != NVML_SUCCESS) {
            if (rc != NVML_ERROR_TIMEOUT) {
                char buf[96];
                drv_debug("NVML event wait: %s", nvml_error(g, rc, buf, sizeof buf));
            }
            return;
        }
        handle_event(g, &ev);
    }
}

static void register_events(drv_gpus_t *g)
{
    if (!g->api.event_set_create || !g->api.register_events || !g->api.event_set_wait ||
        !g->api.event_set_free)
        return;
    if (g->api.event_set_create(&g->events) != NVML_SUCCESS || !g->events) {
        g->events = NULL;
        return;
    }
    static const unsigned long long masks[] = {
        NVML_EVENT_XID_CRITICAL | NVML_EVENT_DOUBLE_BIT_ECC,
        NVML_EVENT_XID_CRITICAL,
        NVML_EVENT_DOUBLE_BIT_ECC,
    };
    size_t registered = 0;
    for (size_t i = 0; i < g->n; i++) {
        if (!g->handles[i])
            continue;
        /* NOT_SUPPORTED when the device lacks one of the types: try each alone */
        nvml_return_t rc = g->api.register_events(g->handles[i], masks[0], g->events);
        if (rc == NVML_ERROR_NOT_SUPPORTED) {
            bool any = false;
            for (size_t m = 1; m < sizeof masks / sizeof masks[0]; m++)
                any |= g->api.register_events(g->handles[i], masks[m], g->events) ==
                       NVML_SUCCESS;
            rc = any ? NVML_SUCCESS : rc;
        }
        if (rc == NVML_SUCCESS)
            registered++;
        else
            drv_debug("GPU %zu: no NVML health events (error %d)", i, rc);
    }
    if (registered == 0) {
        g->api.event_set_free(g->events);
        g->events = NULL;
    }
}

static void discover_one(drv_gpus_t *g, unsigned int i, const char *seed)
{
    drv_gpu_info_t *gi = &g->gpus[i];
    char buf[NVML_UUID_BUFFER > NVML_NAME_BUFFER ? NVML_UUID_BUFFER : NVML_NAME_BUFFER];
    char ebuf[96];

    gi->index = (int)i;
    gi->detected = true;
    gi->healthy = true;
    gi->utilization_percent = -1;
    gi->temperature_c = -1;
    snprintf(gi->name, sizeof gi->name, "NVIDIA GPU");
    drv_gpu_declared_uuid(seed, (int)i, gi->uuid, sizeof gi->uuid);

    nvml_device_t h = NULL;
    nvml_return_t rc = g->api.get_handle(i, &h);
    if (rc != NVML_SUCCESS || !h) {
        g->handles[i] = NULL;
        mark_unhealthy(gi, "NVML cannot open the GPU: %s", nvml_error(g, rc, ebuf, sizeof ebuf));
        return;
    }
    g->handles[i] = h;
    memset(buf, 0, sizeof buf);
    if (g->api.get_name && g->api.get_name(h, buf, NVML_NAME_BUFFER) == NVML_SUCCESS && buf[0]) {
        buf[sizeof buf - 1] = '\0';
        copy_clean(gi->name, sizeof gi->name, buf);
    }
    memset(buf, 0, sizeof buf);
    if (g->api.get_uuid && g->api.get_uuid(h, buf, NVML_UUID_BUFFER) == NVML_SUCCESS && buf[0]) {
        buf[sizeof buf - 1] = '\0';
        copy_clean(gi->uuid, sizeof gi->uuid, buf);
    }
}

/* 0 with g filled from NVML (>= 1 GPU), or -1 with g->message saying why
 * not and nothing left open. */
static int nvml_open(drv_gpus_t *g, const char *seed)
{
    const char *path = getenv("DROVER_NVML_LIBRARY");
    if (!path || !*path)
        path = "libnvidia-ml.so.1";
    char ebuf[96];

    dlerror();
    g->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!g->dl) {
        const char *why = dlerror();
        snprintf(g->message, sizeof g->message, "NVML unavailable: %s", why ? why : path);
        return -1;
    }
    for (size_t i = 0; i < sizeof nvml_symbols / sizeof nvml_symbols[0]; i++) {
        void *sym = dlsym(g->dl, nvml_symbols[i].name);
        if (!sym && nvml_symbols[i].required) {
            snprintf(g->message, sizeof g->message, "NVML unavailable: %s lacks %s", path,
                     nvml_symbols[i].name);
            goto error;
        }
        memcpy((char *)&g->api + nvml_symbols[i].offset, &sym, sizeof sym);
    }
    nvml_return_t rc = g->api.init();
    if (rc != NVML_SUCCESS) {
        snprintf(g->message, sizeof g->message, "NVML init failed: %s",
                 nvml_error(g, rc, ebuf, sizeof ebuf));
        goto error;
    }
    g->nvml_up = true;

    unsigned int count = 0;
    rc = g->api.get_count(&count);
    if (rc != NVML_SUCCESS) {
        snprintf(g->message, sizeof g->message, "NVML cannot count GPUs: %s",
                 nvml_error(g, rc, ebuf, sizeof ebuf));
        goto error;
    }
    if (count == 0) {
        snprintf(g->message, sizeof g->message, "NVML found no GPUs");
        goto error;
    }
    if (count > DRV_GPUS_MAX) {
        drv_warn("NVML reports %u GPUs; using the first %d", count, DRV_GPUS_MAX);
        count = DRV_GPUS_MAX;
    }
    if (g->api.get_driver_version) {
        char v[NVML_DRIVER_VERSION_BUFFER] = {0};
        if (g->api.get_driver_version(v, sizeof v) == NVML_SUCCESS) {
            v[sizeof v - 1] = '\0';
            copy_clean(g->driver_version, sizeof g->driver_version, v);
        }
    }
    g->n = count;
    for (unsigned int i = 0; i < count; i++)
        discover_one(g, i, seed);
    register_events(g);
    for (size_t i = 0; i < g->n; i++)
        if (g->handles[i])
            read_telemetry(g, i);
    g->source = "nvml";
    snprintf(g->message, sizeof g->message, "NVML%s%s: %zu GPU%s", g->driver_version[0] ? " " : "",
             g->driver_version, g->n, g->n == 1 ? "" : "s");
    return 0;

error:
    nvml_close(g);
    g->n = 0;
    memset(g->gpus, 0, sizeof g->gpus);
    g->driver_version[0] = '\0';
    return -1;
}

static void declare(drv_gpus_t *g, const drv_gpu_decl_t *d, size_t nd, const char *seed)
{
    for (size_t k = 0; k < nd; k++) {
        for (int c = 0; c < d[k].count; c++) {
            assert(g->n < DRV_GPUS_MAX);
            drv_gpu_info_t *gi = &g->gpus[g->n];
            gi->index = (int)g->n;
            drv_gpu_declared_uuid(seed, gi->index, gi->uuid, sizeof gi->uuid);
            snprintf(gi->name, sizeof gi->name, "%s", d[k].type);
            gi->memory_total_mib = d[k].memory_mib;
            gi->memory_used_mib = 0;
            gi->utilization_percent = -1;
            gi->temperature_c = -1;
            gi->healthy = true;
            gi->detected = false;
            g->n++;
        }
    }
}

/* --- public ------------------------------------------------------------------ */

drv_gpus_t *drv_gpus_create(const char *spec, const char *seed, drv_error_t *err)
{
    drv_gpus_t *g = calloc(1, sizeof *g);
    if (!g) {
        drv_err_internal(err, "out of memory");
        return NULL;
    }
    g->source = "none";
    if (!spec || !strcmp(spec, "auto")) {
        if (nvml_open(g, seed) < 0)
            g->source = "none";   /* g->message says why */
    } else if (!strcmp(spec, "none")) {
        snprintf(g->message, sizeof g->message, "--gpus none");
    } else {
        drv_gpu_decl_t decl[DRV_GPUS_MAX];
        size_t nd = 0;
        if (drv_gpus_parse_spec(spec, decl, DRV_GPUS_MAX, &nd, err) < 0)
            goto error;
        declare(g, decl, nd, seed);
        g->source = "declared";
        snprintf(g->message, sizeof g->message, "declared by --gpus %.200s", spec);
    }
    return g;

error:
    drv_gpus_destroy(g);
    return NULL;
}

void drv_gpus_destroy(drv_gpus_t *g)
{
    if (!g)
        return;
    nvml_close(g);
    free(g);
}

int drv_gpus_refresh(drv_gpus_t *g, drv_error_t *err)
{
    assert(g);
    (void)err;   /* nothing here fails yet */
    if (!g->nvml_up)
        return 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->handles[i])
            read_telemetry(g, i);
    drain_events(g);
    return 0;
}

size_t drv_gpus_count(const drv_gpus_t *g)
{
    return g ? g->n : 0;
}

const drv_gpu_info_t *drv_gpus_at(const drv_gpus_t *g, size_t i)
{
    return g && i < g->n ? &g->gpus[i] : NULL;
}

const char *drv_gpus_source(const drv_gpus_t *g)
{
    return g ? g->source : "none";
}

const char *drv_gpus_message(const drv_gpus_t *g)
{
    return g ? g->message : "";
}

const char *drv_gpus_driver_version(const drv_gpus_t *g)
{
    return g ? g->driver_version : "";
}

json_t *drv_gpus_to_json(const drv_gpus_t *g)
{
    json_t *arr = json_array();
    if (!arr)
        return NULL;
    for (size_t i = 0; g && i < g->n; i++) {
        const drv_gpu_info_t *gi = &g->gpus[i];
        json_t *o = json_pack(
            "{s:i, s:s, s:s, s:I, s:I, s:o, s:o, s:b, s:s, s:s}", "index", gi->index, "uuid",
            gi->uuid, "name", gi->name, "memory_mib", (json_int_t)gi->memory_total_mib,
            "memory_used_mib", (json_int_t)gi->memory_used_mib, "utilization_percent",
            gi->utilization_percent >= 0 ? json_integer(gi->utilization_percent) : json_null(),
            "temperature_c", gi->temperature_c >= 0 ? json_integer(gi->temperature_c) : json_null(),
            "healthy", gi->healthy, "health_reason", gi->health_reason, "source",
            gi->detected ? "detected" : "declared");
        if (!o || json_array_append_new(arr, o) < 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}
