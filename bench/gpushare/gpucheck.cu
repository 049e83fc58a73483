// gpucheck.cu — the GPU side of scripts/gpu-check.sh: a small CUDA program
// that exercises libdrover-gpushare.so on a real NVIDIA GPU. Built with nvcc
// by the script (nvcc -O2 gpucheck.cu -lcuda); not part of the CMake build
// (the project builds and tests without a CUDA toolkit).
//
//   gpucheck fill CHUNK_MIB GOFILE WORK
//       Allocate with cudaMalloc (the runtime, which reaches the driver
//       through cuGetProcAddress) in CHUNK_MIB chunks until refused, then in
//       1 MiB chunks until refused; then one cuMemAlloc_v2 of 1 MiB (the
//       driver API, linked); print what was allocated and what
//       cudaMemGetInfo says:
//         "filled mib=M chunks=N runtime_err=E driver_rc=R info_free_mib=F info_total_mib=T"
//       then "ready", wait until GOFILE exists, run a kernel that writes every
//       allocated byte and a compute kernel of WORK iterations, read back a
//       word of every chunk and print
//         "kernel ok=1 ms=X"          (ok=0 with the CUDA error otherwise)
//   gpucheck bench N
//       ns per call, N calls each: cuMemGetInfo_v2, cuMemAlloc_v2(1 MiB) +
//       cuMemFree_v2, cudaMemGetInfo, cudaMalloc(1 MiB) + cudaFree:
//         "bench drv_info_ns=A drv_pair_ns=B rt_info_ns=C rt_pair_ns=D"
//   gpucheck calibrate MS
//       the WORK for which the compute kernel takes about MS ms on the whole
//       GPU: "work=W ms=X sms=S"
//   gpucheck spin WORK
//       run the compute kernel (SMs x 8 blocks of 256 threads, WORK
//       dependent FMA iterations each, 4 chains): "spin ms=X sms=S"
// Exit status: 0, 1 on a CUDA error outside what is being measured, 2 usage.
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <vector>

static double now_ms()
{
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

#define CK(x)                                                                           \
    do {                                                                                \
        cudaError_t e_ = (x);                                                           \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "gpucheck: %s: %s\n", #x, cudaGetErrorString(e_));          \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

__global__ void touch(unsigned int *p, size_t words, unsigned int seed)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride)
        p[i] = (unsigned int)i ^ seed;
}

__global__ void compute(float *out, long long work)
{
    float a = threadIdx.x * 1e-3f, b = a + 1.f, c = a + 2.f, d = a + 3.f;
    for (long long i = 0; i < work; i++) {
        a = a * 0.999f + 0.001f;
        b = b * 0.999f + 0.002f;
        c = c * 0.999f + 0.003f;
        d = d * 0.999f + 0.004f;
    }
    out[(size_t)blockIdx.x * blockDim.x + threadIdx.x] = a + b + c + d;
}

static int sm_count()
{
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return sms;
}

/* Run the compute kernel; its time in ms. */
static double run_compute(long long work, int sms)
{
    int blocks = sms * 8, threads = 256;
    float *out = nullptr;
    CK(cudaMalloc(&out, (size_t)blocks * threads * sizeof(float)));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventRecord(a));
    compute<<<blocks, threads>>>(out, work);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    CK(cudaGetLastError());
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    CK(cudaFree(out));
    return ms;
}

static int fill(size_t chunk_mib, const char *gofile, long long work)
{
    CK(cudaFree(nullptr));   // the context, before counting anything
    std::vector<void *> ptrs;
    std::vector<size_t> sizes;
    size_t total = 0;
    cudaError_t last = cudaSuccess;
    size_t chunks[2] = {chunk_mib << 20, (size_t)1 << 20};
    for (size_t chunk : chunks)
        for (;;) {
            void *p = nullptr;
            cudaError_t e = cudaMalloc(&p, chunk);
            if (e != cudaSuccess) {
                last = e;
                cudaGetLastError();   // allocation errors are not sticky: clear it
                break;
            }
            ptrs.push_back(p);
            sizes.push_back(chunk);
            total += chunk;
        }
    CUdeviceptr dp = 0;
    CUresult drc = cuMemAlloc(&dp, (size_t)1 << 20);
    if (drc == CUDA_SUCCESS) {
        total += (size_t)1 << 20;
        ptrs.push_back((void *)dp);
        sizes.push_back((size_t)1 << 20);
    }
    size_t f = 0, t = 0;
    CK(cudaMemGetInfo(&f, &t));
    printf("filled mib=%zu chunks=%zu runtime_err=%d driver_rc=%d info_free_mib=%zu "
           "info_total_mib=%zu\n", total >> 20, ptrs.size(), (int)last, (int)drc, f >> 20,
           t >> 20);
    printf("ready\n");
    fflush(stdout);
    while (access(gofile, F_OK) != 0)
        usleep(10000);
    double t0 = now_ms();
    for (size_t i = 0; i < ptrs.size(); i++)
        touch<<<1024, 256>>>((unsigned int *)ptrs[i], sizes[i] / 4, (unsigned int)i);
    run_compute(work, sm_count());
    cudaError_t e = cudaDeviceSynchronize();
    bool ok = e == cudaSuccess;
    for (size_t i = 0; ok && i < ptrs.size(); i++) {
        unsigned int w[2] = {0, 0};
        size_t last_word = sizes[i] / 4 - 1;
        ok = cudaMemcpy(&w[0], ptrs[i], 4, cudaMemcpyDeviceToHost) == cudaSuccess &&
             cudaMemcpy(&w[1], (unsigned int *)ptrs[i] + last_word, 4, cudaMemcpyDeviceToHost) ==
                 cudaSuccess &&
             w[0] == (0u ^ (unsigned int)i) && w[1] == ((unsigned int)last_word ^ (unsigned int)i);
    }
    printf("kernel ok=%d ms=%.1f%s%s\n", ok ? 1 : 0, now_ms() - t0, ok ? "" : " error=",
           ok ? "" : cudaGetErrorString(e != cudaSuccess ? e : cudaGetLastError()));
    fflush(stdout);
    for (size_t i = 0; i < ptrs.size(); i++)
        cudaFree(ptrs[i]);
    return ok ? 0 : 1;
}

static int bench(long n)
{
    CK(cudaFree(nullptr));
    size_t f, t;
    double t0 = now_ms();
    for (long i = 0; i < n; i++)
        cuMemGetInfo(&f, &t);
    double t1 = now_ms();
    for (long i = 0; i < n; i++) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, (size_t)1 << 20) == CUDA_SUCCESS)
            cuMemFree(p);
    }
    double t2 = now_ms();
    for (long i = 0; i < n; i++)
        cudaMemGetInfo(&f, &t);
    double t3 = now_ms();
    for (long i = 0; i < n; i++) {
        void *p;
        if (cudaMalloc(&p, (size_t)1 << 20) == cudaSuccess)
            cudaFree(p);
    }
    double t4 = now_ms();
    printf("bench drv_info_ns=%.1f drv_pair_ns=%.1f rt_info_ns=%.1f rt_pair_ns=%.1f\n",
           (t1 - t0) * 1e6 / n, (t2 - t1) * 1e6 / n, (t3 - t2) * 1e6 / n, (t4 - t3) * 1e6 / n);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && strcmp(argv[1], "fill") == 0)
        return fill((size_t)atoll(argv[2]), argv[3], atoll(argv[4]));
    if (argc >= 3 && strcmp(argv[1], "bench") == 0)
        return bench(atol(argv[2]));
    if (argc >= 3 && strcmp(argv[1], "calibrate") == 0) {
        double target = atof(argv[2]);
        int sms = sm_count();
        long long work = 1 << 16;
        run_compute(work, sms);   // warm-up
        double ms = run_compute(work, sms);
        while (ms < target / 8 && work < (1LL << 40)) {
            work *= 4;
            ms = run_compute(work, sms);
        }
        work = (long long)(work * (target / (ms > 0.01 ? ms : 0.01)));
        ms = run_compute(work, sms);
        printf("work=%lld ms=%.1f sms=%d\n", work, ms, sms);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "spin") == 0) {
        int sms = sm_count();
        run_compute(1024, sms);   // warm-up (module load, clocks)
        printf("spin ms=%.1f sms=%d\n", run_compute(atoll(argv[2]), sms), sms);
        return 0;
    }
    fprintf(stderr, "usage: gpucheck fill CHUNK_MIB GOFILE WORK | bench N | calibrate MS | "
                    "spin WORK\n");
    return 2;
}
