/* The CUDA driver functions this platform calls (stream memory operations,
 * 32-bit fills, device attributes and allocation ranges), declared from the
 * driver's documented ABI (names, signatures, numbers), and the table they
 * are resolved into at run time from libcuda.so.1. No CUDA header is
 * needed to build. */
#ifndef HIPFILE_CUDA_CUDADRV_ABI_H
#define HIPFILE_CUDA_CUDADRV_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUstream_st *CUstream;

enum {
    CUDA_SUCCESS = 0,
};

/* CUstreamWaitValue_flags: the compare operations have HIP's numbers
 * (hipStreamWaitValueGte/Eq/And/Nor are 0/1/2/3). */
enum {
    CU_STREAM_WAIT_VALUE_GEQ = 0x0,
    CU_STREAM_WAIT_VALUE_EQ = 0x1,
    CU_STREAM_WAIT_VALUE_AND = 0x2,
    CU_STREAM_WAIT_VALUE_NOR = 0x3,
};

/* CUstreamWriteValue_flags */
enum {
    CU_STREAM_WRITE_VALUE_DEFAULT = 0x0,
};

/* CUdevice_attribute: the v1 memory-operation numbers (drivers before the
 * v2 API) and the v2 ones (CUDA 12 and later). The v2 API supports 32-bit
 * operations on every device. */
enum {
    CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1 = 92,
    CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1 = 93,
    CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1 = 94,
    CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 122,
    CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR = 123,
};

/* The stream memory operations cuStream{Wait,Write}Value{32,64}, all of one
 * signature: HFC_STREAM_MEMOPS(X, _v2) gives the _v2 names,
 * HFC_STREAM_MEMOPS(X, ) the original ones. All are optional. */
#define HFC_STREAM_MEMOP(X, op, bits, suffix)                                              \
    X(cuStream##op##Value##bits##suffix, CUresult,                                         \
      (CUstream s, CUdeviceptr addr, uint##bits##_t value, unsigned flags), 0)
#define HFC_STREAM_MEMOPS(X, suffix)                                                       \
    HFC_STREAM_MEMOP(X, Wait, 32, suffix) HFC_STREAM_MEMOP(X, Wait, 64, suffix)            \
    HFC_STREAM_MEMOP(X, Write, 32, suffix) HFC_STREAM_MEMOP(X, Write, 64, suffix)

/* X(name, return type, parameter list, required) */
#define HFC_CUDA_DRIVER_FUNCS(X)                                                           \
    X(cuInit, CUresult, (unsigned flags), 1)                                               \
    X(cuDeviceGet, CUresult, (CUdevice *device, int ordinal), 1)                           \
    X(cuDeviceGetAttribute, CUresult, (int *value, int attribute, CUdevice device), 1)     \
    X(cuMemGetAddressRange_v2, CUresult, (CUdeviceptr * base, size_t *size, CUdeviceptr ptr), \
      0)                                                                                   \
    X(cuMemsetD32Async, CUresult, (CUdeviceptr dst, unsigned value, size_t n, CUstream s), 0) \
    HFC_STREAM_MEMOPS(X, _v2)                                                              \
    HFC_STREAM_MEMOPS(X, )

#define HFC_DECLARE_FN(name, ret, params, required) typedef ret(*hfc_##name##_fn) params;
HFC_CUDA_DRIVER_FUNCS(HFC_DECLARE_FN)
#undef HFC_DECLARE_FN

struct hfc_cudadrv {
#define HFC_MEMBER(name, ret, params, required) hfc_##name##_fn name;
    HFC_CUDA_DRIVER_FUNCS(HFC_MEMBER)
#undef HFC_MEMBER
};

#endif
