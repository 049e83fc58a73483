/* cuda_api.h — the few CUDA driver API types and constants that
 * libdrover-gpushare.so interposes, declared by hand so nothing here needs
 * the CUDA toolkit to build (the agent and the preload library build on
 * machines without it).
 *
 * Every layout and value is the one of cuda.h (CUDA 11.x/12.x, LP64):
 * CUresult and the other enums are C enums, i.e. 4-byte ints in registers
 * and in structs; CUdeviceptr is unsigned long long on 64-bit platforms;
 * CUmemGenericAllocationHandle is unsigned long long; streams, pools and
 * arrays are opaque pointers. The versioned entry points (the "_v2" names
 * that cuda.h #defines the plain names to since CUDA 3.2, and the "_ptsz"
 * per-thread-default-stream variants of the stream-ordered allocator) are
 * separate exported symbols of libcuda.so.1 with the same signatures.
 *
 * Used by the preload library (src/gpushare/interpose.c), its test double
 * of the driver (t/fake/fake_cuda.c) and the probe program (t/gpushare_probe.c).
 */
#ifndef DRV_GPUSHARE_CUDA_API_H
#define DRV_GPUSHARE_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;                           /* enum cudaError_enum */
typedef unsigned long long CUdeviceptr;         /* CUdeviceptr_v2 on LP64 */
typedef int CUdevice;
typedef uint64_t cuuint64_t;
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef int CUdriverProcAddressQueryResult;     /* enum */

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_SUPPORTED = 801,
};

/* CUdriverProcAddress_flags */
#define CU_GET_PROC_ADDRESS_DEFAULT 0x0
#define CU_GET_PROC_ADDRESS_LEGACY_STREAM 0x1
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 0x2

/* CUdriverProcAddressQueryResult */
#define CU_GET_PROC_ADDRESS_SUCCESS 0
#define CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND 1
#define CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT 2

/* CUarray_format (the classic ones; newer formats exist, see array_bytes) */
#define CU_AD_FORMAT_UNSIGNED_INT8 0x01
#define CU_AD_FORMAT_UNSIGNED_INT16 0x02
#define CU_AD_FORMAT_UNSIGNED_INT32 0x03
#define CU_AD_FORMAT_SIGNED_INT8 0x08
#define CU_AD_FORMAT_SIGNED_INT16 0x09
#define CU_AD_FORMAT_SIGNED_INT32 0x0a
#define CU_AD_FORMAT_HALF 0x10
#define CU_AD_FORMAT_FLOAT 0x20

typedef struct CUDA_ARRAY_DESCRIPTOR_st {
    size_t Width;
    size_t Height;
    int Format;                 /* CUarray_format */
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
    size_t Width;
    size_t Height;
    size_t Depth;
    int Format;                 /* CUarray_format */
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

/* CUmemLocationType */
#define CU_MEM_LOCATION_TYPE_INVALID 0x0
#define CU_MEM_LOCATION_TYPE_DEVICE 0x1
#define CU_MEM_LOCATION_TYPE_HOST 0x2
#define CU_MEM_LOCATION_TYPE_HOST_NUMA 0x3
#define CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT 0x4
/* CUmemAllocationType */
#define CU_MEM_ALLOCATION_TYPE_PINNED 0x1

typedef struct CUmemLocation_st {
    int type;                   /* CUmemLocationType */
    int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
    int type;                   /* CUmemAllocationType */
    int requestedHandleTypes;   /* CUmemAllocationHandleType */
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;

/* CUmemAttach_flags (cuMemAllocManaged) */
#define CU_MEM_ATTACH_GLOBAL 0x1

/* cudaVersion from which cuGetProcAddress("cuMemAlloc", ...) returns the
 * _v2 entry point (the 64-bit API of CUDA 3.2), and from which
 * cuGetProcAddress("cuGetProcAddress", ...) returns cuGetProcAddress_v2. */
#define DRV_CUDA_V2_SINCE 3020
#define DRV_CUDA_PROC_V2_SINCE 12000

#endif
