/* interpose.c — libdrover-gpushare.so: enforces a replica's GPU memory share
 * by interposing the CUDA driver API (design §3, §6). Preloaded
 * (LD_PRELOAD) into fractional replicas by the agent; configured only by the
 * replica contract's environment (config.h).
 *
 * What it interposes (exported with default visibility; everything else in
 * the library is hidden):
 *   allocations  cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocManaged,
 *                cuArrayCreate_v2, cuArray3DCreate_v2, cuMipmappedArrayCreate,
 *                cuMemCreate (device locations only), cuMemAllocAsync,
 *                cuMemAllocFromPoolAsync (and their _ptsz variants)
 *   frees        cuMemFree_v2, cuMemFreeAsync(_ptsz), cuArrayDestroy,
 *                cuMipmappedArrayDestroy, cuMemRelease
 *   queries      cuMemGetInfo_v2 (total = the share, free = what is left of
 *                it, never more than the device really has free),
 *                cuDeviceTotalMem_v2 (the share)
 *   lookups      cuGetProcAddress, cuGetProcAddress_v2(_ptsz): the driver's
 *                answer is replaced by our wrapper when it is one of the
 *                functions above; dlsym: see below.
 * An allocation that would take the replica past its share returns
 * CUDA_ERROR_OUT_OF_MEMORY without calling the driver and logs one line on
 * stderr (at most 20 a second; the rest are counted and summarised). Nothing
 * else changes: the driver's own errors pass through, and with no limit set
 * every call is one indirect call to the driver (dlsym and cuGetProcAddress
 * answers are then left alone).
 *
 * How entry points are caught. Programs reach the driver three ways:
 *   1. linking against libcuda.so.1: symbol interposition does it (we are
 *      first in the global scope);
 *   2. dlopen("libcuda.so.1") + dlsym(handle, "cuX"): dlsym on a handle
 *      searches that library, not the global scope, so we define dlsym
 *      itself. Ours forwards to glibc's, found with
 *      dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34") (glibc >= 2.34, where dlsym
 *      moved into libc), else the older "GLIBC_2.2.5" (x86_64) /
 *      "GLIBC_2.17" (aarch64) versions, and swaps in our wrapper when the
 *      name is one we interpose. dlvsym is not interposed, so there is no
 *      recursion. RTLD_NEXT is relative to the *caller* of dlsym: glibc
 *      reads it from the return address, so the forwarding call is a tail
 *      call (this file is built with -O2 -foptimize-sibling-calls, and
 *      t/gpushare.sh checks RTLD_NEXT still resolves from the caller);
 *   3. cuGetProcAddress (how CUDA 11.3+ runtimes and PyTorch reach every
 *      driver function, after getting cuGetProcAddress itself through
 *      dlsym): we call the driver's and map its answer. A pointer equal to
 *      a driver function we resolved ourselves maps to our wrapper of it;
 *      otherwise the name decides with the driver's versioning rules: the
 *      "_v2" entry point from cudaVersion 3020 on, the "_ptsz" one when the
 *      flags ask for the per-thread default stream, cuGetProcAddress_v2
 *      from 12000 on. The legacy 32-bit "_v1" entry points
 *      (cudaVersion < 3020) are not interposed.
 *
 * Accounting: sizes are charged per config.h's rules against the replica's
 * shared region (region.h); three size maps (sizemap.h) remember what each
 * live device pointer, cuMemCreate handle and array was charged so the free
 * gives exactly that back. A pointer the driver hands out again while we
 * still hold an entry for it (its memory went away without a free we saw,
 * e.g. with cuCtxDestroy) gives the stale charge back first.
 *
 * Known approximations (src/gpushare/README.md): the CUDA context's
 * own memory (a few hundred MiB per process) and memory kept by stream-ordered
 * pools past their live allocations are not counted; cuMemFreeAsync and
 * cuMemRelease give the budget back when called, not when the driver frees
 * in stream order / on unmap; memory freed by destroying a context without
 * freeing it stays counted until the pointer is reused or the process exits.
 *
 * Threads: the configuration is written once (pthread_once) and read-only
 * after; driver pointers are atomics written once; the maps lock; the
 * region is lock-free. fork(): the child forgets the parent's allocations
 * and its slot (pthread_atfork). Normal exit releases this process's slot
 * (destructor); after that, calls pass straight through.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpushare/config.h"
#include "gpushare/cuda_api.h"
#include "gpushare/region.h"
#include "gpushare/sizemap.h"

#define EXPORT __attribute__((visibility("default")))
#define LOG_PER_SECOND 20
#define RECLAIM_QUERY_MS 100

/* --- the interposed entry points ---------------------------------------------- */

enum {
    F_cuMemAlloc_v2,
    F_cuMemAllocPitch_v2,
    F_cuMemAllocManaged,
    F_cuMemFree_v2,
    F_cuMemGetInfo_v2,
    F_cuDeviceTotalMem_v2,
    F_cuArrayCreate_v2,
    F_cuArray3DCreate_v2,
    F_cuArrayDestroy,
    F_cuMipmappedArrayCreate,
    F_cuMipmappedArrayDestroy,
    F_cuMemCreate,
    F_cuMemRelease,
    F_cuMemAllocAsync,
    F_cuMemAllocAsync_ptsz,
    F_cuMemFreeAsync,
    F_cuMemFreeAsync_ptsz,
    F_cuMemAllocFromPoolAsync,
    F_cuMemAllocFromPoolAsync_ptsz,
    F_cuGetProcAddress,
    F_cuGetProcAddress_v2,
    F_cuGetProcAddress_v2_ptsz,
    F_COUNT
};

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*pitch_fn)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
typedef CUresult (*managed_fn)(CUdeviceptr *, size_t, unsigned int);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*info_fn)(size_t *, size_t *);
typedef CUresult (*total_fn)(size_t *, CUdevice);
typedef CUresult (*array_fn)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
typedef CUresult (*array3d_fn)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
typedef CUresult (*array_destroy_fn)(CUarray);
typedef CUresult (*mipmap_fn)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int);
typedef CUresult (*mipmap_destroy_fn)(CUmipmappedArray);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*free_async_fn)(CUdeviceptr, CUstream);
typedef CUresult (*pool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*proc_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*proc2_fn)(const char *, void **, int, cuuint64_t,
                             CUdriverProcAddressQueryResult *);
typedef void *(*dlsym_fn)(void *, const char *);

/* Our wrappers, declared so the table below can point at them. */
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned int);
EXPORT CUresult cuMemFree_v2(CUdeviceptr);
EXPORT CUresult cuMemGetInfo_v2(size_t *, size_t *);
EXPORT CUresult cuDeviceTotalMem_v2(size_t *, CUdevice);
EXPORT CUresult cuArrayCreate_v2(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
EXPORT CUresult cuArray3DCreate_v2(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
EXPORT CUresult cuArrayDestroy(CUarray);
EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *,
                                       unsigned int);
EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray);
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                            unsigned long long);
EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle);
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, CUstream);
EXPORT CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
EXPORT CUresult cuGetProcAddress(const char *, void **, int, cuuint64_t);
EXPORT CUresult cuGetProcAddress_v2(const char *, void **, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult *);
EXPORT CUresult cuGetProcAddress_v2_ptsz(const char *, void **, int, cuuint64_t,
                                         CUdriverProcAddressQueryResult *);
EXPORT void *dlsym(void *handle, const char *name);

/* name: the exported symbol; base: the name cuGetProcAddress is asked for;
 * since: the cudaVersion from which that base name means this entry point;
 * ptsz: the per-thread-default-stream variant. */
static const struct fn_desc {
    const char *name, *base;
    int since;
    bool ptsz;
    void *wrapper;
} fns[F_COUNT] = {
#define V1(n) [F_##n] = {#n, #n, 0, false, (void *)n}
#define V2(n) [F_##n##_v2] = {#n "_v2", #n, DRV_CUDA_V2_SINCE, false, (void *)n##_v2}
#define PTSZ(n) [F_##n##_ptsz] = {#n "_ptsz", #n, 0, true, (void *)n##_ptsz}
    V2(cuMemAlloc),
    V2(cuMemAllocPitch),
    V1(cuMemAllocManaged),
    V2(cuMemFree),
    V2(cuMemGetInfo),
    V2(cuDeviceTotalMem),
    V2(cuArrayCreate),
    V2(cuArray3DCreate),
    V1(cuArrayDestroy),
    V1(cuMipmappedArrayCreate),
    V1(cuMipmappedArrayDestroy),
    V1(cuMemCreate),
    V1(cuMemRelease),
    V1(cuMemAllocAsync),
    PTSZ(cuMemAllocAsync),
    V1(cuMemFreeAsync),
    PTSZ(cuMemFreeAsync),
    V1(cuMemAllocFromPoolAsync),
    PTSZ(cuMemAllocFromPoolAsync),
    V1(cuGetProcAddress),
    [F_cuGetProcAddress_v2] = {"cuGetProcAddress_v2", "cuGetProcAddress", DRV_CUDA_PROC_V2_SINCE,
                               false, (void *)cuGetProcAddress_v2},
    [F_cuGetProcAddress_v2_ptsz] = {"cuGetProcAddress_v2_ptsz", "cuGetProcAddress",
                                    DRV_CUDA_PROC_V2_SINCE, true,
                                    (void *)cuGetProcAddress_v2_ptsz},
#undef V1
#undef V2
#undef PTSZ
};

/* --- state ---------------------------------------------------------------------- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_once_t region_once = PTHREAD_ONCE_INIT;
static drv_gs_config_t cfg;              /* written once by gs_init */
static drv_gs_region_t region;           /* attached once (attach_region), reset after fork */
static drv_gs_sizemap_t ptr_map, vmm_map, array_map;
static _Atomic(void *) real[F_COUNT];    /* the driver's entry points */
static _Atomic(dlsym_fn) real_dlsym;
static atomic_bool exiting;
static atomic_bool missing_said[F_COUNT];
static atomic_bool resolved;             /* libcuda.so.1 was found and read */
static _Atomic int64_t last_reclaim_ms;
static _Atomic int64_t log_window;       /* second of the current logging window */
static atomic_int log_count;             /* refusal lines in that second */
static _Atomic int64_t log_dropped;

/* --- logging ---------------------------------------------------------------------- */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char buf[768];
    int n = snprintf(buf, sizeof buf, "drover-gpushare[%d]: ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n += m < 0 ? 0 : m;
    if (n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    for (const char *p = buf; n > 0;) {
        ssize_t w = write(2, p, (size_t)n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        p += w;
        n -= (int)w;
    }
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* May this refusal be logged? (at most LOG_PER_SECOND a second) */
static bool log_slot(void)
{
    int64_t now = mono_ms() / 1000, w = atomic_load(&log_window);
    if (now != w && atomic_compare_exchange_strong(&log_window, &w, now)) {
        atomic_store(&log_count, 0);
        int64_t dropped = atomic_exchange(&log_dropped, 0);
        if (dropped > 0)
            say("%lld more refusals were not logged", (long long)dropped);
    }
    if (atomic_fetch_add(&log_count, 1) < LOG_PER_SECOND)
        return true;
    atomic_fetch_add(&log_dropped, 1);
    return false;
}

static const char *replica_name(void)
{
    return cfg.replica[0] ? cfg.replica : "(no DROVER_REPLICA_ID)";
}

static void log_refusal(const char *fn, uint64_t bytes)
{
    if (!log_slot())
        return;
    char want[32], used[32];
    drv_gs_fmt_bytes(bytes, want, sizeof want);
    if (cfg.refuse_all) {
        say("replica %s: refused %s of %s (CUDA_ERROR_OUT_OF_MEMORY): %s", replica_name(), fn, want,
            cfg.error);
        return;
    }
    drv_gs_fmt_bytes((uint64_t)drv_gs_region_used(&region), used, sizeof used);
    int procs = drv_gs_region_processes(&region);
    say("replica %s: refused %s of %s (CUDA_ERROR_OUT_OF_MEMORY): its GPU memory share is "
        "%lld MiB and %s of it is in use by %d process%s", replica_name(), fn, want,
        (long long)(drv_gs_region_limit(&region) >> 20), used, procs, procs == 1 ? "" : "es");
}

/* --- set-up ------------------------------------------------------------------------- */

static void after_fork_child(void)
{
    drv_gs_sizemap_reset_after_fork(&ptr_map);
    drv_gs_sizemap_reset_after_fork(&vmm_map);
    drv_gs_sizemap_reset_after_fork(&array_map);
    drv_gs_region_after_fork(&region);
}

static void gs_init(void)
{
    drv_gs_config_parse(getenv("DROVER_GPU_MEMORY_LIMIT_MIB"), getenv("DROVER_REPLICA_ID"),
                        getenv("DROVER_GPU_COMPUTE_PERCENT"), &cfg);
    const char *dir = getenv("DROVER_GPUSHARE_DIR");   /* a container's region, shared with the host */
    if (cfg.region[0] && dir && *dir && drv_gs_region_in_dir(dir, cfg.region, sizeof cfg.region) < 0)
        say("replica %s: DROVER_GPUSHARE_DIR=\"%.200s\" is not an absolute directory or too "
            "long; the region stays in /dev/shm", replica_name(), dir);
    drv_gs_sizemap_init(&ptr_map);
    drv_gs_sizemap_init(&vmm_map);
    drv_gs_sizemap_init(&array_map);
    if (cfg.limited)
        pthread_atfork(NULL, NULL, after_fork_child);
}

__attribute__((constructor)) static void gs_constructor(void)
{
    pthread_once(&init_once, gs_init);
}

__attribute__((destructor)) static void gs_destructor(void)
{
    if (!cfg.limited)
        return;
    atomic_store(&exiting, true);
    drv_gs_region_release_slot(&region);
}

/* Calls are accounted (false: straight through). */
static inline bool active(void)
{
    pthread_once(&init_once, gs_init);
    return cfg.limited && !atomic_load_explicit(&exiting, memory_order_relaxed);
}

static void attach_region(void)
{
    if (cfg.refuse_all) {
        say("replica %s: %s: every device memory allocation will be refused", replica_name(),
            cfg.error);
        return;
    }
    char why[256] = "";
    if (drv_gs_region_attach(&region, cfg.region, cfg.replica, cfg.limit_bytes, DRV_GS_SLOTS, why,
                             sizeof why) < 0) {
        say("replica %s: cannot share the GPU memory count with the replica's other processes "
            "(%s); counting this process alone", replica_name(), why);
        if (drv_gs_region_attach(&region, NULL, cfg.replica, cfg.limit_bytes, DRV_GS_SLOTS, why,
                                 sizeof why) < 0) {
            say("replica %s: %s: every device memory allocation will be refused", replica_name(),
                why);
            cfg.refuse_all = true;   /* under region_once: callers see it after pthread_once */
            snprintf(cfg.error, sizeof cfg.error, "no region to count in (%s)", why);
            return;
        }
    }
    if (cfg.warning[0])
        say("replica %s: %s", replica_name(), cfg.warning);
    if (drv_gs_region_limit(&region) != cfg.limit_bytes)
        say("replica %s: the region says the share is %lld MiB (DROVER_GPU_MEMORY_LIMIT_MIB=%lld): "
            "using the region's", replica_name(), (long long)(drv_gs_region_limit(&region) >> 20),
            (long long)cfg.limit_mib);
    char cp[32] = "";
    if (cfg.compute_percent > 0)
        snprintf(cp, sizeof cp, ", compute %d %%", cfg.compute_percent);
    say("replica %s: GPU memory share %lld MiB%s, counted in %s", replica_name(),
        (long long)(drv_gs_region_limit(&region) >> 20), cp,
        region.shared ? region.name : "this process tree");
}

static inline drv_gs_region_t *reg(void)
{
    pthread_once(&region_once, attach_region);
    return &region;
}

/* --- the driver's functions ------------------------------------------------------------ */

static dlsym_fn get_real_dlsym(void)
{
    dlsym_fn f = atomic_load_explicit(&real_dlsym, memory_order_acquire);
    if (__builtin_expect(f != NULL, 1))
        return f;
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
    for (size_t i = 0; i < sizeof versions / sizeof *versions && !f; i++)
        f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    if (!f) {
        say("cannot find glibc's dlsym (dlvsym(RTLD_NEXT, \"dlsym\", ...) failed): aborting");
        abort();
    }
    atomic_store_explicit(&real_dlsym, f, memory_order_release);
    return f;
}

/* Remember p as the driver's fn `id` unless we know one already. */
static void adopt(int id, void *p)
{
    void *none = NULL;
    if (p && p != fns[id].wrapper)
        atomic_compare_exchange_strong(&real[id], &none, p);
}

/* Read the driver's entry points from libcuda.so.1, if it is loaded. No
 * lock of ours is held around dlopen (a library constructor running under
 * the loader's lock may call our dlsym): threads racing here do the same
 * harmless work, and adopt() keeps the first answer. */
static void resolve(void)
{
    if (atomic_load(&resolved))
        return;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return;   /* not loaded (yet): tried again next time */
    dlsym_fn rd = get_real_dlsym();
    for (int i = 0; i < F_COUNT; i++)
        adopt(i, rd(h, fns[i].name));
    atomic_store(&resolved, true);
    dlclose(h);   /* NOLOAD took a reference; the library stays loaded */
}

static void *real_slow(int id)
{
    resolve();
    return atomic_load_explicit(&real[id], memory_order_acquire);
}

static inline void *real_fn(int id)
{
    void *p = atomic_load_explicit(&real[id], memory_order_acquire);
    return __builtin_expect(p != NULL, 1) ? p : real_slow(id);
}

static CUresult missing(int id)
{
    if (!atomic_exchange(&missing_said[id], true))
        say("the CUDA driver (libcuda.so.1) has no %s, or is not loaded", fns[id].name);
    return CUDA_ERROR_NOT_FOUND;
}

#define REAL(id, type)                                                                   \
    type f = (type)real_fn(F_##id);                                                      \
    if (__builtin_expect(f == NULL, 0))                                                  \
        return missing(F_##id)

/* --- accounting helpers ------------------------------------------------------------------ */

/* Charge `bytes` for fn; false (logged) when the share has no room. */
static bool admit(const char *fn, uint64_t bytes)
{
    drv_gs_region_t *r = reg();
    if (!cfg.refuse_all && bytes <= (uint64_t)INT64_MAX && drv_gs_region_charge(r, (int64_t)bytes))
        return true;
    log_refusal(fn, bytes);
    return false;
}

static void unadmit(uint64_t bytes)
{
    if (bytes)
        drv_gs_region_uncharge(reg(), (int64_t)bytes);
}

/* Remember key -> bytes; a stale entry for key is given back first. */
static void track(drv_gs_sizemap_t *m, uint64_t key, uint64_t bytes)
{
    uint64_t old = 0;
    if (drv_gs_sizemap_put(m, key, bytes, &old) < 0) {
        static atomic_bool said;
        if (!atomic_exchange(&said, true))
            say("out of memory recording an allocation: it stays counted until exit");
        return;
    }
    unadmit(old);
}

/* Give back what key was charged once free_rc says the driver freed it. */
static uint64_t untrack_begin(drv_gs_sizemap_t *m, uint64_t key)
{
    return drv_gs_sizemap_take(m, key);
}

static void untrack_end(drv_gs_sizemap_t *m, uint64_t key, uint64_t bytes, CUresult rc)
{
    if (rc == CUDA_SUCCESS)
        unadmit(bytes);
    else if (bytes)
        drv_gs_sizemap_put(m, key, bytes, NULL);   /* still allocated */
}

/* The common shape of a pointer allocation: charge, call, record. */
#define ALLOC_BODY(fn_name, dptr, nbytes, call)                                           \
    do {                                                                                  \
        uint64_t c_ = drv_gs_charge_size(nbytes);                                         \
        if (c_ == 0 || (dptr) == NULL)                                                    \
            return call; /* the driver answers invalid requests itself */                 \
        if (!admit(fn_name, c_))                                                          \
            return CUDA_ERROR_OUT_OF_MEMORY;                                              \
        CUresult rc_ = call;                                                              \
        if (rc_ != CUDA_SUCCESS)                                                          \
            unadmit(c_);                                                                  \
        else                                                                              \
            track(&ptr_map, *(dptr), c_);                                                 \
        return rc_;                                                                       \
    } while (0)

#define FREE_BODY(map, key, call)                                                         \
    do {                                                                                  \
        uint64_t c_ = untrack_begin(map, (uint64_t)(key));                                \
        CUresult rc_ = call;                                                              \
        untrack_end(map, (uint64_t)(key), c_, rc_);                                       \
        return rc_;                                                                       \
    } while (0)

/* --- allocations and frees ------------------------------------------------------------------ */

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    REAL(cuMemAlloc_v2, alloc_fn);
    if (!active())
        return f(dptr, bytesize);
    ALLOC_BODY("cuMemAlloc_v2", dptr, bytesize, f(dptr, bytesize));
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    REAL(cuMemAllocManaged, managed_fn);
    if (!active())
        return f(dptr, bytesize, flags);
    ALLOC_BODY("cuMemAllocManaged", dptr, bytesize, f(dptr, bytesize, flags));
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                   unsigned int elem)
{
    REAL(cuMemAllocPitch_v2, pitch_fn);
    if (!active() || !dptr || !pitch || width == 0 || height == 0)
        return f(dptr, pitch, width, height, elem);
    /* The pitch is known only afterwards: charge an estimate (rows padded to
     * 512 bytes), then settle on pitch x height. */
    uint64_t row = (width + 511) / 512 * 512, est;
    if (__builtin_mul_overflow(row, (uint64_t)height, &est))
        est = UINT64_MAX >> 1;
    est = drv_gs_charge_size(est);
    if (!admit("cuMemAllocPitch_v2", est))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = f(dptr, pitch, width, height, elem);
    if (rc != CUDA_SUCCESS) {
        unadmit(est);
        return rc;
    }
    uint64_t actual;
    if (__builtin_mul_overflow((uint64_t)*pitch, (uint64_t)height, &actual))
        actual = UINT64_MAX >> 1;
    actual = drv_gs_charge_size(actual);
    if (actual > est && !admit("cuMemAllocPitch_v2", actual - est)) {
        free_fn fr = (free_fn)real_fn(F_cuMemFree_v2);
        if (fr)
            fr(*dptr);
        unadmit(est);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (actual < est)
        unadmit(est - actual);
    track(&ptr_map, *dptr, actual);
    return rc;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    REAL(cuMemFree_v2, free_fn);
    if (!active())
        return f(dptr);
    FREE_BODY(&ptr_map, dptr, f(dptr));
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream s)
{
    REAL(cuMemAllocAsync, async_fn);
    if (!active())
        return f(dptr, bytesize, s);
    ALLOC_BODY("cuMemAllocAsync", dptr, bytesize, f(dptr, bytesize, s));
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream s)
{
    REAL(cuMemAllocAsync_ptsz, async_fn);
    if (!active())
        return f(dptr, bytesize, s);
    ALLOC_BODY("cuMemAllocAsync_ptsz", dptr, bytesize, f(dptr, bytesize, s));
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream s)
{
    REAL(cuMemAllocFromPoolAsync, pool_fn);
    if (!active())
        return f(dptr, bytesize, pool, s);
    ALLOC_BODY("cuMemAllocFromPoolAsync", dptr, bytesize, f(dptr, bytesize, pool, s));
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                             CUmemoryPool pool, CUstream s)
{
    REAL(cuMemAllocFromPoolAsync_ptsz, pool_fn);
    if (!active())
        return f(dptr, bytesize, pool, s);
    ALLOC_BODY("cuMemAllocFromPoolAsync_ptsz", dptr, bytesize, f(dptr, bytesize, pool, s));
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s)
{
    REAL(cuMemFreeAsync, free_async_fn);
    if (!active())
        return f(dptr, s);
    FREE_BODY(&ptr_map, dptr, f(dptr, s));
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s)
{
    REAL(cuMemFreeAsync_ptsz, free_async_fn);
    if (!active())
        return f(dptr, s);
    FREE_BODY(&ptr_map, dptr, f(dptr, s));
}

/* Arrays: charged an estimate from the descriptor, keyed by handle. */
static CUresult array_common(const char *fn, uint64_t bytes, void **handle, CUresult (*call)(void *),
                             void *ctx)
{
    uint64_t c = drv_gs_charge_size(bytes);
    if (!admit(fn, c))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = call(ctx);
    if (rc != CUDA_SUCCESS)
        unadmit(c);
    else
        track(&array_map, (uint64_t)(uintptr_t)*handle, c);
    return rc;
}

struct array_call {
    void *f;
    void *handle;
    const void *desc;
    unsigned int levels;
};

static CUresult call_array(void *p)
{
    struct array_call *a = p;
    return ((array_fn)a->f)((CUarray *)a->handle, a->desc);
}

static CUresult call_array3d(void *p)
{
    struct array_call *a = p;
    return ((array3d_fn)a->f)((CUarray *)a->handle, a->desc);
}

static CUresult call_mipmap(void *p)
{
    struct array_call *a = p;
    return ((mipmap_fn)a->f)((CUmipmappedArray *)a->handle, a->desc, a->levels);
}

EXPORT CUresult cuArrayCreate_v2(CUarray *h, const CUDA_ARRAY_DESCRIPTOR *d)
{
    REAL(cuArrayCreate_v2, array_fn);
    if (!active() || !h || !d)
        return f(h, d);
    struct array_call a = {(void *)f, h, d, 0};
    return array_common("cuArrayCreate_v2",
                        drv_gs_array_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels, 1),
                        (void **)h, call_array, &a);
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *h, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    REAL(cuArray3DCreate_v2, array3d_fn);
    if (!active() || !h || !d)
        return f(h, d);
    struct array_call a = {(void *)f, h, d, 0};
    return array_common("cuArray3DCreate_v2",
                        drv_gs_array_bytes(d->Width, d->Height, d->Depth, d->Format,
                                           d->NumChannels, 1),
                        (void **)h, call_array3d, &a);
}

EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *h, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                       unsigned int levels)
{
    REAL(cuMipmappedArrayCreate, mipmap_fn);
    if (!active() || !h || !d)
        return f(h, d, levels);
    struct array_call a = {(void *)f, h, d, levels};
    return array_common("cuMipmappedArrayCreate",
                        drv_gs_array_bytes(d->Width, d->Height, d->Depth, d->Format,
                                           d->NumChannels, levels),
                        (void **)h, call_mipmap, &a);
}

EXPORT CUresult cuArrayDestroy(CUarray h)
{
    REAL(cuArrayDestroy, array_destroy_fn);
    if (!active())
        return f(h);
    FREE_BODY(&array_map, (uintptr_t)h, f(h));
}

EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray h)
{
    REAL(cuMipmappedArrayDestroy, mipmap_destroy_fn);
    if (!active())
        return f(h);
    FREE_BODY(&array_map, (uintptr_t)h, f(h));
}

/* Virtual memory management: physical memory is created by cuMemCreate
 * (charged when it lives on a device) and freed by cuMemRelease. */
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    REAL(cuMemCreate, create_fn);
    if (!active() || !handle || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return f(handle, size, prop, flags);
    uint64_t c = drv_gs_charge_size(size);
    if (c == 0)
        return f(handle, size, prop, flags);
    if (!admit("cuMemCreate", c))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = f(handle, size, prop, flags);
    if (rc != CUDA_SUCCESS)
        unadmit(c);
    else
        track(&vmm_map, *handle, c);
    return rc;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    REAL(cuMemRelease, release_fn);
    if (!active())
        return f(handle);
    FREE_BODY(&vmm_map, handle, f(handle));
}

/* --- queries ---------------------------------------------------------------------------------- */

EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
    REAL(cuMemGetInfo_v2, info_fn);
    CUresult rc = f(free_b, total_b);
    if (rc != CUDA_SUCCESS || !active() || !free_b || !total_b)
        return rc;
    drv_gs_region_t *r = reg();
    if (cfg.refuse_all) {
        *free_b = 0;
        return rc;
    }
    int64_t now = mono_ms(), last = atomic_load(&last_reclaim_ms);
    if (now - last >= RECLAIM_QUERY_MS && atomic_compare_exchange_strong(&last_reclaim_ms, &last, now))
        drv_gs_region_reclaim(r);
    uint64_t limit = (uint64_t)drv_gs_region_limit(r), used = (uint64_t)drv_gs_region_used(r);
    uint64_t total = *total_b < limit ? *total_b : limit;
    uint64_t left = used < limit ? limit - used : 0;
    if (left > *free_b)
        left = *free_b;
    if (left > total)
        left = total;
    *total_b = (size_t)total;
    *free_b = (size_t)left;
    return rc;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    REAL(cuDeviceTotalMem_v2, total_fn);
    CUresult rc = f(bytes, dev);
    if (rc != CUDA_SUCCESS || !active() || !bytes)
        return rc;
    drv_gs_region_t *r = reg();
    if (cfg.refuse_all)
        return rc;
    uint64_t limit = (uint64_t)drv_gs_region_limit(r);
    if (*bytes > limit)
        *bytes = (size_t)limit;
    return rc;
}

/* --- lookups ------------------------------------------------------------------------------------ */

static int by_name(const char *name)
{
    for (int i = 0; i < F_COUNT; i++)
        if (strcmp(fns[i].name, name) == 0)
            return i;
    return -1;
}

/* Which of ours cuGetProcAddress(symbol, version, flags) means; -1 none. */
static int by_rule(const char *symbol, int version, cuuint64_t flags)
{
    bool ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    int best = -1;
    for (int i = 0; i < F_COUNT; i++) {
        const struct fn_desc *d = &fns[i];
        if (strcmp(d->base, symbol) != 0 || d->since > version || (d->ptsz && !ptds))
            continue;
        if (best < 0 || (d->ptsz && !fns[best].ptsz) ||
            (d->ptsz == fns[best].ptsz && d->since > fns[best].since))
            best = i;
    }
    return best >= 0 ? best : by_name(symbol);
}

static void *map_proc(const char *symbol, void *p, int version, cuuint64_t flags)
{
    for (int i = 0; i < F_COUNT; i++) {
        if (p == fns[i].wrapper)
            return p;
        if (p == atomic_load_explicit(&real[i], memory_order_acquire))
            return fns[i].wrapper;
    }
    int i = by_rule(symbol, version, flags);
    if (i < 0)
        return p;
    adopt(i, p);
    return fns[i].wrapper;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    REAL(cuGetProcAddress, proc_fn);
    CUresult rc = f(symbol, pfn, version, flags);
    if (rc == CUDA_SUCCESS && pfn && *pfn && symbol && active()) {
        resolve();
        *pfn = map_proc(symbol, *pfn, version, flags);
    }
    return rc;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status)
{
    REAL(cuGetProcAddress_v2, proc2_fn);
    CUresult rc = f(symbol, pfn, version, flags, status);
    if (rc == CUDA_SUCCESS && pfn && *pfn && symbol && active()) {
        resolve();
        *pfn = map_proc(symbol, *pfn, version, flags);
    }
    return rc;
}

EXPORT CUresult cuGetProcAddress_v2_ptsz(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    REAL(cuGetProcAddress_v2_ptsz, proc2_fn);
    CUresult rc = f(symbol, pfn, version, flags, status);
    if (rc == CUDA_SUCCESS && pfn && *pfn && symbol && active()) {
        resolve();
        *pfn = map_proc(symbol, *pfn, version, flags);
    }
    return rc;
}

/* A name we interpose, looked up through dlsym: answer with our wrapper
 * when the driver has the function (NULL when it does not: a program
 * probing for a newer entry point must still see it missing). */
static __attribute__((noinline)) void *hook_symbol(dlsym_fn rd, void *handle, const char *name,
                                                   int id)
{
    void *p = rd(handle, name);
    if (!p)
        return NULL;
    if (p != fns[id].wrapper)
        adopt(id, p);                 /* the driver's own */
    else if (!real_fn(id))
        return NULL;                  /* found only us: the driver lacks it */
    return fns[id].wrapper;
}

EXPORT void *dlsym(void *handle, const char *name)
{
    dlsym_fn rd = get_real_dlsym();
    if (name[0] == 'c' && name[1] == 'u' && active()) {
        int id = by_name(name);
        if (id >= 0)
            return hook_symbol(rd, handle, name, id);
    }
    return rd(handle, name);   /* a tail call: RTLD_NEXT stays relative to our caller */
}
