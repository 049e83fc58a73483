/* gpushare_probe.c — a small CUDA driver API client for the tests and the
 * benchmark of libdrover-gpushare.so (t/gpushare.sh, bench/gpushare/run).
 *
 * It is linked against libcuda.so.1 — in the tests, the test double
 * t/fake/fake_cuda.c (found through the build's RPATH) — and runs the
 * operations given as arguments, in order, printing one line per operation
 * on stdout (flushed), so a shell script can drive it and grep the answers:
 *
 *   via=direct|dlsym|dlsym_default|proc|proc_v2|proc_ptsz|proc_rt
 *                   how later operations reach the driver: the linked
 *                   symbols; dlopen("libcuda.so.1") + dlsym; dlsym(RTLD_DEFAULT);
 *                   cuGetProcAddress (cudaVersion 12040); cuGetProcAddress_v2;
 *                   cuGetProcAddress_v2 with the per-thread default stream
 *                   flag; cuGetProcAddress_v2 with the per-symbol versions a
 *                   CUDA 13 runtime asks for (3020 for cuMemAlloc, ...)
 *                                                             -> "via NAME ok"
 *   alloc=MIB  allocb=BYTES  managed=MIB  async=MIB  pool=MIB  vmm=MIB
 *   vmmhost=MIB  pitch=WBYTES,ROWS  array=W,H  array3d=W,H,D  mipmap=W,H,LEVELS
 *                   one allocation (arrays of floats)       -> "OP ARG rc=N"
 *   free / freeasync   the newest allocation, with its free (freeasync:
 *                   cuMemFreeAsync for pointers)             -> "free rc=N"
 *   freeall         every allocation                        -> "freeall n=K rc=N"
 *   fill=MIB        cuMemAlloc_v2 chunks until one fails   -> "fill n=K mib=M rc=N"
 *   info            cuMemGetInfo_v2 and cuDeviceTotalMem_v2 (MiB)
 *                                             -> "info free=F total=T devtotal=D"
 *   calls=NAME      the fake's count of calls of NAME      -> "calls NAME=N"
 *   used            the fake's device memory in use        -> "used mib=N"
 *   region=ID       reads /drover-gpushare-ID directly
 *                                  -> "region used_mib=U limit_mib=L procs=P"
 *   missing=NAME    dlsym(libcuda handle, NAME) is NULL    -> "missing NAME yes|no"
 *   rtldnext        dlsym(RTLD_NEXT, "dlsym") from here is the dlsym this
 *                   program links to (true unless a preloaded dlsym breaks
 *                   RTLD_NEXT)                              -> "rtldnext ok|bad"
 *   wait            prints "waiting", then blocks until stdin ends
 *   sleep=MS
 *   fork ... join   the operations between run in a child process; the parent
 *                   waits for it at join                    -> "join status=S"
 *   bench=N         N cuMemGetInfo_v2 calls, then N cuMemAlloc_v2(1 MiB) +
 *                   cuMemFree_v2 pairs          -> "bench getinfo_ns=X pair_ns=Y"
 * Exit status: 0, or 2 for an unknown operation or a failed "via".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpushare/cuda_api.h"
#include "gpushare/region.h"

/* the driver, as linked */
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned int);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuDeviceTotalMem_v2(size_t *, CUdevice);
CUresult cuArrayCreate_v2(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
CUresult cuArray3DCreate_v2(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
CUresult cuArrayDestroy(CUarray);
CUresult cuMipmappedArrayCreate(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray);
CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                     unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuGetProcAddress(const char *, void **, int, cuuint64_t);
CUresult cuGetProcAddress_v2(const char *, void **, int, cuuint64_t,
                             CUdriverProcAddressQueryResult *);
CUresult cuInit(unsigned int);

static struct api {
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*pitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
    CUresult (*managed)(CUdeviceptr *, size_t, unsigned int);
    CUresult (*free)(CUdeviceptr);
    CUresult (*info)(size_t *, size_t *);
    CUresult (*total)(size_t *, CUdevice);
    CUresult (*array)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
    CUresult (*array3d)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
    CUresult (*array_destroy)(CUarray);
    CUresult (*mipmap)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int);
    CUresult (*mipmap_destroy)(CUmipmappedArray);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                       unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*async)(CUdeviceptr *, size_t, CUstream);
    CUresult (*free_async)(CUdeviceptr, CUstream);
    CUresult (*pool)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
} api;

/* field offset, the name for cuGetProcAddress, the exported name, and the
 * cudaVersion a CUDA 13 runtime asks it for (via=proc_rt) */
static const struct {
    size_t off;
    const char *base, *exported;
    int rt_version;
} names[] = {
    {offsetof(struct api, alloc), "cuMemAlloc", "cuMemAlloc_v2", 3020},
    {offsetof(struct api, pitch), "cuMemAllocPitch", "cuMemAllocPitch_v2", 3020},
    {offsetof(struct api, managed), "cuMemAllocManaged", "cuMemAllocManaged", 6000},
    {offsetof(struct api, free), "cuMemFree", "cuMemFree_v2", 3020},
    {offsetof(struct api, info), "cuMemGetInfo", "cuMemGetInfo_v2", 3020},
    {offsetof(struct api, total), "cuDeviceTotalMem", "cuDeviceTotalMem_v2", 3020},
    {offsetof(struct api, array), "cuArrayCreate", "cuArrayCreate_v2", 3020},
    {offsetof(struct api, array3d), "cuArray3DCreate", "cuArray3DCreate_v2", 3020},
    {offsetof(struct api, array_destroy), "cuArrayDestroy", "cuArrayDestroy", 2000},
    {offsetof(struct api, mipmap), "cuMipmappedArrayCreate", "cuMipmappedArrayCreate", 5000},
    {offsetof(struct api, mipmap_destroy), "cuMipmappedArrayDestroy", "cuMipmappedArrayDestroy", 5000},
    {offsetof(struct api, create), "cuMemCreate", "cuMemCreate", 10020},
    {offsetof(struct api, release), "cuMemRelease", "cuMemRelease", 10020},
    {offsetof(struct api, async), "cuMemAllocAsync", "cuMemAllocAsync", 11020},
    {offsetof(struct api, free_async), "cuMemFreeAsync", "cuMemFreeAsync", 11020},
    {offsetof(struct api, pool), "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 11020},
};
#define N_NAMES (sizeof names / sizeof *names)

static void *cuda_handle(void)
{
    static void *h;
    if (!h && !(h = dlopen("libcuda.so.1", RTLD_NOW))) {
        fprintf(stderr, "probe: dlopen libcuda.so.1: %s\n", dlerror());
        exit(2);
    }
    return h;
}

static int set_via(const char *how)
{
    void **slot;
    if (strcmp(how, "direct") == 0) {
        api = (struct api){cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocManaged, cuMemFree_v2,
                           cuMemGetInfo_v2, cuDeviceTotalMem_v2, cuArrayCreate_v2,
                           cuArray3DCreate_v2, cuArrayDestroy, cuMipmappedArrayCreate,
                           cuMipmappedArrayDestroy, cuMemCreate, cuMemRelease, cuMemAllocAsync,
                           cuMemFreeAsync, cuMemAllocFromPoolAsync};
        return 0;
    }
    bool dl = strcmp(how, "dlsym") == 0, dflt = strcmp(how, "dlsym_default") == 0;
    bool proc = strcmp(how, "proc") == 0, proc2 = strcmp(how, "proc_v2") == 0,
         ptsz = strcmp(how, "proc_ptsz") == 0, rt = strcmp(how, "proc_rt") == 0;
    proc2 |= rt;
    if (!dl && !dflt && !proc && !proc2 && !ptsz)
        return -1;
    CUresult (*gpa)(const char *, void **, int, cuuint64_t) = NULL;
    CUresult (*gpa2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
        NULL;
    if (proc)
        *(void **)&gpa = dlsym(cuda_handle(), "cuGetProcAddress");
    if (proc2 || ptsz)
        *(void **)&gpa2 = dlsym(cuda_handle(), "cuGetProcAddress_v2");
    if ((proc && !gpa) || ((proc2 || ptsz) && !gpa2))
        return -1;
    for (size_t i = 0; i < N_NAMES; i++) {
        slot = (void **)((char *)&api + names[i].off);
        *slot = NULL;
        if (dl)
            *slot = dlsym(cuda_handle(), names[i].exported);
        else if (dflt)
            *slot = dlsym(RTLD_DEFAULT, names[i].exported);
        else if (proc)
            gpa(names[i].base, slot, 12040, CU_GET_PROC_ADDRESS_DEFAULT);
        else {
            CUdriverProcAddressQueryResult st = -1;
            gpa2(names[i].base, slot, rt ? names[i].rt_version : 12040,
                 ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT,
                 &st);
            if (st != CU_GET_PROC_ADDRESS_SUCCESS)
                *slot = NULL;
        }
        if (!*slot) {
            fprintf(stderr, "probe: no %s via %s\n", names[i].exported, how);
            return -1;
        }
    }
    return 0;
}

/* --- allocations ------------------------------------------------------------------ */

enum kind { K_PTR, K_VMM, K_ARRAY, K_MIPMAP };
static struct held {
    enum kind kind;
    uint64_t key;
} *held;
static size_t n_held, cap_held;

static void hold(enum kind k, uint64_t key)
{
    if (n_held == cap_held) {
        cap_held = cap_held ? 2 * cap_held : 256;
        held = realloc(held, cap_held * sizeof *held);
        if (!held)
            abort();
    }
    held[n_held++] = (struct held){k, key};
}

static CUresult release_one(const struct held *h, bool async)
{
    switch (h->kind) {
    case K_PTR: return async ? api.free_async(h->key, NULL) : api.free(h->key);
    case K_VMM: return api.release(h->key);
    case K_ARRAY: return api.array_destroy((CUarray)(uintptr_t)h->key);
    case K_MIPMAP: return api.mipmap_destroy((CUmipmappedArray)(uintptr_t)h->key);
    }
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult vmm(size_t bytes, int location)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = location;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h = 0;
    CUresult rc = api.create(&h, bytes, &prop, 0);
    if (rc == CUDA_SUCCESS)
        hold(K_VMM, h);
    return rc;
}

static void region_line(const char *id)
{
    char name[600];
    if (drv_gs_region_name(id, name, sizeof name) < 0 ||
        (getenv("DROVER_GPUSHARE_DIR") &&
         drv_gs_region_in_dir(getenv("DROVER_GPUSHARE_DIR"), name, sizeof name) < 0)) {
        printf("region invalid-id\n");
        return;
    }
    int fd = drv_gs_region_open(name, O_RDONLY, 0);
    if (fd < 0) {
        printf("region none\n");
        return;
    }
    size_t size = drv_gs_region_size(DRV_GS_SLOTS);
    struct drv_gs_shared *sh = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (sh == MAP_FAILED || sh->magic != DRV_GS_MAGIC) {
        printf("region bad\n");
        return;
    }
    int procs = 0;
    for (uint32_t i = 0; i < sh->slot_hwm && i < sh->nslots; i++)
        procs += sh->slots[i].pid > 0;
    printf("region used_mib=%lld limit_mib=%lld procs=%d\n", (long long)(sh->used >> 20),
           (long long)(sh->limit >> 20), procs);
    munmap(sh, size);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void bench(long n)
{
    size_t f, t;
    int64_t t0 = now_ns();
    for (long i = 0; i < n; i++)
        api.info(&f, &t);
    int64_t t1 = now_ns();
    for (long i = 0; i < n; i++) {
        CUdeviceptr p;
        if (api.alloc(&p, 1 << 20) == CUDA_SUCCESS)
            api.free(p);
    }
    int64_t t2 = now_ns();
    printf("bench getinfo_ns=%.1f pair_ns=%.1f\n", (double)(t1 - t0) / n, (double)(t2 - t1) / n);
}

/* --- the operations ---------------------------------------------------------------- */

static int run(int argc, char **argv, int from, int *next);

static int op(int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *eq = strchr(a, '=');
    char name[32];
    snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
    const char *v = eq ? eq + 1 : "";
    long long x = atoll(v), y = 0, z = 0;
    const char *c1 = strchr(v, ',');
    if (c1) {
        y = atoll(c1 + 1);
        const char *c2 = strchr(c1 + 1, ',');
        if (c2)
            z = atoll(c2 + 1);
    }
    CUdeviceptr p = 0;
    CUresult rc;
    size_t sz = (size_t)x << 20;
    if (strcmp(name, "via") == 0) {
        if (set_via(v) < 0) {
            printf("via %s failed\n", v);
            return 2;
        }
        printf("via %s ok\n", v);
    } else if (strcmp(name, "alloc") == 0 || strcmp(name, "allocb") == 0 ||
               strcmp(name, "managed") == 0 || strcmp(name, "async") == 0 ||
               strcmp(name, "pool") == 0) {
        if (strcmp(name, "allocb") == 0)
            sz = (size_t)x;
        rc = name[0] == 'm' ? api.managed(&p, sz, CU_MEM_ATTACH_GLOBAL)
             : name[0] == 'p' ? api.pool(&p, sz, NULL, NULL)
             : name[1] == 's' ? api.async(&p, sz, NULL)
                              : api.alloc(&p, sz);
        if (rc == CUDA_SUCCESS)
            hold(K_PTR, p);
        printf("%s %s rc=%d\n", name, v, rc);
    } else if (strcmp(name, "pitch") == 0) {
        size_t pitch = 0;
        rc = api.pitch(&p, &pitch, (size_t)x, (size_t)y, 4);
        if (rc == CUDA_SUCCESS)
            hold(K_PTR, p);
        printf("pitch %s rc=%d pitch=%zu\n", v, rc, pitch);
    } else if (strcmp(name, "vmm") == 0 || strcmp(name, "vmmhost") == 0) {
        rc = vmm(sz, name[3] ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE);
        printf("%s %s rc=%d\n", name, v, rc);
    } else if (strcmp(name, "array") == 0) {
        CUDA_ARRAY_DESCRIPTOR d = {(size_t)x, (size_t)y, CU_AD_FORMAT_FLOAT, 1};
        CUarray h = NULL;
        rc = api.array(&h, &d);
        if (rc == CUDA_SUCCESS)
            hold(K_ARRAY, (uintptr_t)h);
        printf("array %s rc=%d\n", v, rc);
    } else if (strcmp(name, "array3d") == 0 || strcmp(name, "mipmap") == 0) {
        bool mip = name[0] == 'm';
        CUDA_ARRAY3D_DESCRIPTOR d = {(size_t)x, (size_t)y, mip ? 1 : (size_t)z,
                                     CU_AD_FORMAT_FLOAT, 1, 0};
        if (mip) {
            CUmipmappedArray h = NULL;
            rc = api.mipmap(&h, &d, (unsigned)z);
            if (rc == CUDA_SUCCESS)
                hold(K_MIPMAP, (uintptr_t)h);
        } else {
            CUarray h = NULL;
            rc = api.array3d(&h, &d);
            if (rc == CUDA_SUCCESS)
                hold(K_ARRAY, (uintptr_t)h);
        }
        printf("%s %s rc=%d\n", name, v, rc);
    } else if (strcmp(name, "free") == 0 || strcmp(name, "freeasync") == 0) {
        rc = n_held ? release_one(&held[n_held - 1], name[4] == 'a') : CUDA_ERROR_INVALID_VALUE;
        if (rc == CUDA_SUCCESS)
            n_held--;
        printf("%s rc=%d\n", name, rc);
    } else if (strcmp(name, "freeall") == 0) {
        size_t n = n_held;
        rc = CUDA_SUCCESS;
        while (n_held > 0) {
            CUresult r = release_one(&held[--n_held], false);
            if (r != CUDA_SUCCESS)
                rc = r;
        }
        printf("freeall n=%zu rc=%d\n", n, rc);
    } else if (strcmp(name, "fill") == 0) {
        long k = 0;
        for (;;) {
            rc = api.alloc(&p, sz);
            if (rc != CUDA_SUCCESS)
                break;
            hold(K_PTR, p);
            k++;
        }
        printf("fill n=%ld mib=%lld rc=%d\n", k, k * x, rc);
    } else if (strcmp(name, "info") == 0) {
        size_t f = 0, t = 0, d = 0;
        CUresult r1 = api.info(&f, &t), r2 = api.total(&d, 0);
        printf("info free=%zu total=%zu devtotal=%zu rc=%d,%d\n", f >> 20, t >> 20, d >> 20, r1,
               r2);
    } else if (strcmp(name, "calls") == 0) {
        unsigned long long (*calls)(const char *);
        *(void **)&calls = dlsym(cuda_handle(), "fake_cuda_calls");
        printf("calls %s=%llu\n", v, calls ? calls(v) : 0ULL);
    } else if (strcmp(name, "used") == 0) {
        unsigned long long (*used)(void);
        *(void **)&used = dlsym(cuda_handle(), "fake_cuda_used");
        printf("used mib=%llu\n", used ? used() >> 20 : 0ULL);
    } else if (strcmp(name, "region") == 0) {
        region_line(v);
    } else if (strcmp(name, "missing") == 0) {
        printf("missing %s %s\n", v, dlsym(cuda_handle(), v) ? "no" : "yes");
    } else if (strcmp(name, "rtldnext") == 0) {
        void *next = dlsym(RTLD_NEXT, "dlsym");
        printf("rtldnext %s\n", next == (void *)dlsym ? "ok" : "bad");
    } else if (strcmp(name, "wait") == 0) {
        printf("waiting\n");
        fflush(stdout);
        char buf[256];
        while (read(0, buf, sizeof buf) > 0)
            ;
    } else if (strcmp(name, "sleep") == 0) {
        usleep((useconds_t)x * 1000);
    } else if (strcmp(name, "fork") == 0) {
        fflush(stdout);
        int end = *i + 1;
        while (end < argc && strcmp(argv[end], "join") != 0)
            end++;
        pid_t pid = fork();
        if (pid == 0) {
            int ignored;
            int code = run(end, argv, *i + 1, &ignored);
            fflush(stdout);
            _exit(code);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        printf("join status=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        *i = end;   /* the loop steps past "join" */
    } else if (strcmp(name, "bench") == 0) {
        bench(x > 0 ? x : 100000);
    } else {
        fprintf(stderr, "probe: unknown operation %s\n", a);
        return 2;
    }
    fflush(stdout);
    return 0;
}

/* Run argv[from..argc); 0 or the first failing op's status. */
static int run(int argc, char **argv, int from, int *next)
{
    for (int i = from; i < argc; i++) {
        int rc = op(argc, argv, &i);
        if (rc)
            return rc;
    }
    *next = argc;
    return 0;
}

int main(int argc, char **argv)
{
    cuInit(0);
    set_via("direct");
    int next;
    return run(argc, argv, 1, &next);
}
