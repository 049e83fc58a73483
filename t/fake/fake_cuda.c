/* fake_cuda.c — a test double of libcuda.so.1 (the CUDA driver), for
 * testing libdrover-gpushare.so (src/gpushare) on machines without a GPU.
 *
 * It exports, with C linkage and the driver API's ABI (src/gpushare/cuda_api.h),
 * the entry points the preload library interposes plus cuInit,
 * cuDriverGetVersion, cuDeviceGetCount and cuDeviceGet: one device whose
 * memory is host memory. Configuration (environment, read at first use):
 *   FAKE_CUDA_DEVICE_MIB     the device's size (default 8192): allocations
 *                            past it fail with CUDA_ERROR_OUT_OF_MEMORY, as
 *                            the real driver's would;
 *   FAKE_CUDA_NO_BACKING=1   hand out addresses without mapping memory
 *                            (for measuring the interposer's overhead);
 *                            otherwise every allocation is an anonymous
 *                            MAP_NORESERVE mapping (untouched pages cost
 *                            nothing, touched ones are real memory);
 *   FAKE_CUDA_DRIVER_VERSION  what cuDriverGetVersion says (default 12040);
 *   FAKE_CUDA_TRACE=1         log every cuGetProcAddress lookup on stderr;
 *   FAKE_CUDA_PROC_INTERNAL=1  cuGetProcAddress answers with internal
 *                            functions whose addresses differ from the
 *                            exported symbols (as a real driver may), so the
 *                            interposer's by-name mapping is exercised.
 * cuGetProcAddress follows the driver's versioning: "X_ptsz" when the flags
 * ask for the per-thread default stream and it exists, else "X_v2" from
 * cudaVersion 3020 on (cuGetProcAddress_v2 from 12000), else "X". This fake
 * exports no cuGetProcAddress_v2_ptsz (a name the interposer must report
 * missing through dlsym).
 *
 * Observability for tests (exported): fake_cuda_calls(name) counts the calls
 * that reached the fake per entry point (so a test can tell that a refused
 * allocation never touched the "device"); fake_cuda_used() is the bytes
 * allocated on the device.
 *
 * Threads: calls may come from any thread (a mutex guards the allocation
 * table; counters are atomics). Not a complete driver: no contexts, streams
 * or kernels.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gpushare/cuda_api.h"

#define EXPORT __attribute__((visibility("default")))

/* --- configuration and counters -------------------------------------------- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t device_bytes;
static bool no_backing, proc_internal;
static _Atomic uint64_t used;
static _Atomic uint64_t next_fake_addr = 0x100000000000ULL;
static _Atomic uint64_t next_handle = 1;

static const char *const counted[] = {
    "cuMemAlloc_v2", "cuMemAllocPitch_v2", "cuMemAllocManaged", "cuMemFree_v2",
    "cuMemGetInfo_v2", "cuDeviceTotalMem_v2", "cuArrayCreate_v2", "cuArray3DCreate_v2",
    "cuArrayDestroy", "cuMipmappedArrayCreate", "cuMipmappedArrayDestroy", "cuMemCreate",
    "cuMemRelease", "cuMemAllocAsync", "cuMemAllocAsync_ptsz", "cuMemFreeAsync",
    "cuMemFreeAsync_ptsz", "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz",
    "cuGetProcAddress", "cuGetProcAddress_v2",
};
#define N_COUNTED (sizeof counted / sizeof *counted)
static _Atomic uint64_t calls[N_COUNTED];

static void configure(void)
{
    const char *s = getenv("FAKE_CUDA_DEVICE_MIB");
    long long mib = s && *s ? atoll(s) : 8192;
    device_bytes = (uint64_t)(mib > 0 ? mib : 8192) << 20;
    s = getenv("FAKE_CUDA_NO_BACKING");
    no_backing = s && *s == '1';
    s = getenv("FAKE_CUDA_PROC_INTERNAL");
    proc_internal = s && *s == '1';
}

static void count(const char *name)
{
    pthread_once(&once, configure);
    for (size_t i = 0; i < N_COUNTED; i++)
        if (strcmp(counted[i], name) == 0) {
            atomic_fetch_add_explicit(&calls[i], 1, memory_order_relaxed);
            return;
        }
}

EXPORT unsigned long long fake_cuda_calls(const char *name)
{
    for (size_t i = 0; i < N_COUNTED; i++)
        if (strcmp(counted[i], name) == 0)
            return atomic_load(&calls[i]);
    return 0;
}

EXPORT unsigned long long fake_cuda_used(void)
{
    return atomic_load(&used);
}

/* --- the allocation table ---------------------------------------------------- */

enum kind { K_PTR, K_VMM, K_ARRAY };

struct alloc {
    uint64_t key, size;
    enum kind kind;
    bool on_device;   /* counted in `used` */
    bool mapped;      /* key is an mmap'd address of `size` bytes */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct alloc *tab;
static size_t n_tab, cap_tab;

/* Reserve n bytes of the device; false when it is full. */
static bool reserve(uint64_t n)
{
    uint64_t u = atomic_load(&used);
    do {
        if (n > device_bytes || u > device_bytes - n)
            return false;
    } while (!atomic_compare_exchange_weak(&used, &u, u + n));
    return true;
}

static void remember(uint64_t key, uint64_t size, enum kind k, bool on_device, bool mapped)
{
    pthread_mutex_lock(&mu);
    if (n_tab == cap_tab) {
        cap_tab = cap_tab ? 2 * cap_tab : 1024;
        tab = realloc(tab, cap_tab * sizeof *tab);
        if (!tab)
            abort();
    }
    tab[n_tab++] = (struct alloc){key, size, k, on_device, mapped};
    pthread_mutex_unlock(&mu);
}

/* Remove key of kind k; false when unknown. */
static bool forget(uint64_t key, enum kind k, struct alloc *out)
{
    pthread_mutex_lock(&mu);
    for (size_t i = n_tab; i-- > 0;)   /* newest first: frees are mostly LIFO */
        if (tab[i].key == key && tab[i].kind == k) {
            *out = tab[i];
            tab[i] = tab[--n_tab];
            pthread_mutex_unlock(&mu);
            return true;
        }
    pthread_mutex_unlock(&mu);
    return false;
}

static CUresult dev_alloc(CUdeviceptr *dptr, size_t n)
{
    if (!dptr || n == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!reserve(n))
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t addr;
    if (no_backing) {
        addr = atomic_fetch_add(&next_fake_addr, (n + 4095) / 4096 * 4096);
    } else {
        void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (p == MAP_FAILED) {
            atomic_fetch_sub(&used, n);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        addr = (uint64_t)(uintptr_t)p;
    }
    remember(addr, n, K_PTR, true, !no_backing);
    *dptr = addr;
    return CUDA_SUCCESS;
}

static CUresult dev_free(CUdeviceptr p)
{
    struct alloc a;
    if (!forget(p, K_PTR, &a))
        return CUDA_ERROR_INVALID_VALUE;
    if (a.mapped)
        munmap((void *)(uintptr_t)a.key, a.size);
    atomic_fetch_sub(&used, a.size);
    return CUDA_SUCCESS;
}

static uint64_t elem_size(int format, unsigned channels)
{
    uint64_t e = format == CU_AD_FORMAT_UNSIGNED_INT8 || format == CU_AD_FORMAT_SIGNED_INT8 ? 1
                 : format == CU_AD_FORMAT_UNSIGNED_INT16 || format == CU_AD_FORMAT_SIGNED_INT16 ||
                         format == CU_AD_FORMAT_HALF
                     ? 2
                     : 4;
    return e * (channels ? channels : 1);
}

static CUresult array_alloc(void **handle, uint64_t bytes)
{
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    if (!reserve(bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *h = malloc(16);
    if (!h)
        abort();
    remember((uint64_t)(uintptr_t)h, bytes, K_ARRAY, true, false);
    *handle = h;
    return CUDA_SUCCESS;
}

static CUresult array_free(void *h)
{
    struct alloc a;
    if (!forget((uint64_t)(uintptr_t)h, K_ARRAY, &a))
        return CUDA_ERROR_INVALID_VALUE;
    free(h);
    atomic_fetch_sub(&used, a.size);
    return CUDA_SUCCESS;
}

/* --- the implementations (static: internal calls never go through the PLT) --- */

static CUresult i_cuMemAlloc_v2(CUdeviceptr *dptr, size_t n)
{
    count("cuMemAlloc_v2");
    return dev_alloc(dptr, n);
}

static CUresult i_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t w, size_t h,
                                     unsigned int elem)
{
    count("cuMemAllocPitch_v2");
    if (!pitch || w == 0 || h == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (w + 511) / 512 * 512;
    CUresult rc = dev_alloc(dptr, p * h);
    if (rc == CUDA_SUCCESS)
        *pitch = p;
    return rc;
}

static CUresult i_cuMemAllocManaged(CUdeviceptr *dptr, size_t n, unsigned int flags)
{
    count("cuMemAllocManaged");
    return dev_alloc(dptr, n);
}

static CUresult i_cuMemFree_v2(CUdeviceptr p)
{
    count("cuMemFree_v2");
    return dev_free(p);
}

static CUresult i_cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
    count("cuMemGetInfo_v2");
    if (!free_b || !total_b)
        return CUDA_ERROR_INVALID_VALUE;
    *total_b = device_bytes;
    *free_b = device_bytes - atomic_load(&used);
    return CUDA_SUCCESS;
}

static CUresult i_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    count("cuDeviceTotalMem_v2");
    if (!bytes || dev != 0)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = device_bytes;
    return CUDA_SUCCESS;
}

static CUresult i_cuArrayCreate_v2(CUarray *h, const CUDA_ARRAY_DESCRIPTOR *d)
{
    count("cuArrayCreate_v2");
    if (!d || d->Width == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return array_alloc((void **)h, d->Width * (d->Height ? d->Height : 1) *
                                       elem_size(d->Format, d->NumChannels));
}

static CUresult i_cuArray3DCreate_v2(CUarray *h, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    count("cuArray3DCreate_v2");
    if (!d || d->Width == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return array_alloc((void **)h, d->Width * (d->Height ? d->Height : 1) *
                                       (d->Depth ? d->Depth : 1) *
                                       elem_size(d->Format, d->NumChannels));
}

static CUresult i_cuArrayDestroy(CUarray h)
{
    count("cuArrayDestroy");
    return array_free(h);
}

static CUresult i_cuMipmappedArrayCreate(CUmipmappedArray *h, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                         unsigned int levels)
{
    count("cuMipmappedArrayCreate");
    if (!d || d->Width == 0 || levels == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t total = 0;
    for (unsigned l = 0; l < levels; l++) {
        uint64_t w = d->Width >> l ? d->Width >> l : 1, hh = d->Height >> l ? d->Height >> l : 1,
                 dd = d->Depth >> l ? d->Depth >> l : 1;
        total += w * hh * dd * elem_size(d->Format, d->NumChannels);
    }
    return array_alloc((void **)h, total);
}

static CUresult i_cuMipmappedArrayDestroy(CUmipmappedArray h)
{
    count("cuMipmappedArrayDestroy");
    return array_free(h);
}

static CUresult i_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                              const CUmemAllocationProp *prop, unsigned long long flags)
{
    count("cuMemCreate");
    if (!handle || !prop || size == 0 || size % (2u << 20) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    bool dev = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
    if (dev && !reserve(size))
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t h = atomic_fetch_add(&next_handle, 1);
    remember(h, size, K_VMM, dev, false);
    *handle = h;
    return CUDA_SUCCESS;
}

static CUresult i_cuMemRelease(CUmemGenericAllocationHandle handle)
{
    count("cuMemRelease");
    struct alloc a;
    if (!forget(handle, K_VMM, &a))
        return CUDA_ERROR_INVALID_VALUE;
    if (a.on_device)
        atomic_fetch_sub(&used, a.size);
    return CUDA_SUCCESS;
}

static CUresult i_cuMemAllocAsync(CUdeviceptr *dptr, size_t n, CUstream s)
{
    count("cuMemAllocAsync");
    return dev_alloc(dptr, n);
}

static CUresult i_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s)
{
    count("cuMemAllocAsync_ptsz");
    return dev_alloc(dptr, n);
}

static CUresult i_cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
    count("cuMemFreeAsync");
    return dev_free(p);
}

static CUresult i_cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s)
{
    count("cuMemFreeAsync_ptsz");
    return dev_free(p);
}

static CUresult i_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t n, CUmemoryPool pool,
                                          CUstream s)
{
    count("cuMemAllocFromPoolAsync");
    return dev_alloc(dptr, n);
}

static CUresult i_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t n, CUmemoryPool pool,
                                               CUstream s)
{
    count("cuMemAllocFromPoolAsync_ptsz");
    return dev_alloc(dptr, n);
}

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags);

static CUresult i_cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    count("cuGetProcAddress");
    return lookup(symbol, pfn, version, flags);
}

static CUresult i_cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                      cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    count("cuGetProcAddress_v2");
    CUresult rc = lookup(symbol, pfn, version, flags);
    if (status)
        *status = rc == CUDA_SUCCESS ? CU_GET_PROC_ADDRESS_SUCCESS
                                     : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return rc;
}

static CUresult i_cuInit(unsigned int flags)
{
    pthread_once(&once, configure);
    return CUDA_SUCCESS;
}

static CUresult i_cuDriverGetVersion(int *v)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    const char *s = getenv("FAKE_CUDA_DRIVER_VERSION");
    *v = s && *s ? atoi(s) : 12040;
    return CUDA_SUCCESS;
}

static CUresult i_cuDeviceGetCount(int *n)
{
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    *n = 1;
    return CUDA_SUCCESS;
}

static CUresult i_cuDeviceGet(CUdevice *d, int ordinal)
{
    if (!d || ordinal != 0)
        return CUDA_ERROR_INVALID_VALUE;
    *d = 0;
    return CUDA_SUCCESS;
}

/* --- exported symbols, and the "internal" twins cuGetProcAddress may return --- */

#define EACH(X)                                                                            \
    X(cuMemAlloc_v2, (CUdeviceptr * a, size_t b), (a, b))                                  \
    X(cuMemAllocPitch_v2, (CUdeviceptr * a, size_t *b, size_t c, size_t d, unsigned int e), \
      (a, b, c, d, e))                                                                     \
    X(cuMemAllocManaged, (CUdeviceptr * a, size_t b, unsigned int c), (a, b, c))           \
    X(cuMemFree_v2, (CUdeviceptr a), (a))                                                  \
    X(cuMemGetInfo_v2, (size_t *a, size_t *b), (a, b))                                     \
    X(cuDeviceTotalMem_v2, (size_t *a, CUdevice b), (a, b))                                \
    X(cuArrayCreate_v2, (CUarray * a, const CUDA_ARRAY_DESCRIPTOR *b), (a, b))             \
    X(cuArray3DCreate_v2, (CUarray * a, const CUDA_ARRAY3D_DESCRIPTOR *b), (a, b))         \
    X(cuArrayDestroy, (CUarray a), (a))                                                    \
    X(cuMipmappedArrayCreate,                                                              \
      (CUmipmappedArray * a, const CUDA_ARRAY3D_DESCRIPTOR *b, unsigned int c), (a, b, c)) \
    X(cuMipmappedArrayDestroy, (CUmipmappedArray a), (a))                                  \
    X(cuMemCreate,                                                                         \
      (CUmemGenericAllocationHandle * a, size_t b, const CUmemAllocationProp *c,           \
       unsigned long long d),                                                              \
      (a, b, c, d))                                                                        \
    X(cuMemRelease, (CUmemGenericAllocationHandle a), (a))                                 \
    X(cuMemAllocAsync, (CUdeviceptr * a, size_t b, CUstream c), (a, b, c))                 \
    X(cuMemAllocAsync_ptsz, (CUdeviceptr * a, size_t b, CUstream c), (a, b, c))            \
    X(cuMemFreeAsync, (CUdeviceptr a, CUstream b), (a, b))                                 \
    X(cuMemFreeAsync_ptsz, (CUdeviceptr a, CUstream b), (a, b))                            \
    X(cuMemAllocFromPoolAsync, (CUdeviceptr * a, size_t b, CUmemoryPool c, CUstream d),    \
      (a, b, c, d))                                                                        \
    X(cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr * a, size_t b, CUmemoryPool c, CUstream d), \
      (a, b, c, d))                                                                        \
    X(cuGetProcAddress, (const char *a, void **b, int c, cuuint64_t d), (a, b, c, d))      \
    X(cuGetProcAddress_v2,                                                                 \
      (const char *a, void **b, int c, cuuint64_t d, CUdriverProcAddressQueryResult *e),   \
      (a, b, c, d, e))                                                                     \
    X(cuInit, (unsigned int a), (a))                                                       \
    X(cuDriverGetVersion, (int *a), (a))                                                   \
    X(cuDeviceGetCount, (int *a), (a))                                                     \
    X(cuDeviceGet, (CUdevice * a, int b), (a, b))

#define EXPORTED(name, params, args)                                                       \
    EXPORT CUresult name params { return i_##name args; }                                  \
    static __attribute__((noinline)) CUresult internal_##name params                       \
    {                                                                                      \
        CUresult rc = i_##name args;                                                       \
        __asm__ volatile("" ::: "memory"); /* keep it a distinct function */               \
        return rc;                                                                         \
    }
EACH(EXPORTED)

static const struct {
    const char *name;
    void *exported, *internal;
} table[] = {
#define ENTRY(name, params, args) {#name, (void *)name, (void *)internal_##name},
    EACH(ENTRY)
#undef ENTRY
};

static void *find(const char *name)
{
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcmp(table[i].name, name) == 0)
            return proc_internal ? table[i].internal : table[i].exported;
    return NULL;
}

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    char name[128];
    void *p = NULL;
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
        snprintf(name, sizeof name, "%s_ptsz", symbol);
        p = find(name);
    }
    if (!p && version >= DRV_CUDA_PROC_V2_SINCE && strcmp(symbol, "cuGetProcAddress") == 0)
        p = find("cuGetProcAddress_v2");
    if (!p && version >= DRV_CUDA_V2_SINCE && strcmp(symbol, "cuGetProcAddress") != 0) {
        snprintf(name, sizeof name, "%s_v2", symbol);
        p = find(name);
    }
    if (!p)
        p = find(symbol);
    if (getenv("FAKE_CUDA_TRACE"))
        fprintf(stderr, "fake_cuda: cuGetProcAddress(%s, %d, %llu) -> %s\n", symbol, version,
                (unsigned long long)flags, p ? "found" : "not found");
    *pfn = p;
    return p ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
