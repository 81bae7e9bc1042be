/* The CUDA driver functions this platform calls (stream memory operations
 * and device attributes), declared from the driver's documented ABI (names,
 * signatures, numbers), and the table they are resolved into at run time
 * from libcuda.so.1. No CUDA header is needed to build. */
#ifndef HIPFILE_CUDA_CUDADRV_ABI_H
#define HIPFILE_CUDA_CUDADRV_ABI_H

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

/* X(name, return type, parameter list, required) */
#define HFC_CUDA_DRIVER_FUNCS(X)                                                           \
    X(cuInit, CUresult, (unsigned flags), 1)                                               \
    X(cuDeviceGet, CUresult, (CUdevice *device, int ordinal), 1)                           \
    X(cuDeviceGetAttribute, CUresult, (int *value, int attribute, CUdevice device), 1)     \
    X(cuStreamWaitValue32_v2, CUresult,                                                    \
      (CUstream s, CUdeviceptr addr, uint32_t value, unsigned flags), 0)                   \
    X(cuStreamWaitValue64_v2, CUresult,                                                    \
      (CUstream s, CUdeviceptr addr, uint64_t value, unsigned flags), 0)                   \
    X(cuStreamWriteValue32_v2, CUresult,                                                   \
      (CUstream s, CUdeviceptr addr, uint32_t value, unsigned flags), 0)                   \
    X(cuStreamWriteValue64_v2, CUresult,                                                   \
      (CUstream s, CUdeviceptr addr, uint64_t value, unsigned flags), 0)                   \
    X(cuStreamWaitValue32, CUresult,                                                       \
      (CUstream s, CUdeviceptr addr, uint32_t value, unsigned flags), 0)                   \
    X(cuStreamWaitValue64, CUresult,                                                       \
      (CUstream s, CUdeviceptr addr, uint64_t value, unsigned flags), 0)                   \
    X(cuStreamWriteValue32, CUresult,                                                      \
      (CUstream s, CUdeviceptr addr, uint32_t value, unsigned flags), 0)                   \
    X(cuStreamWriteValue64, CUresult,                                                      \
      (CUstream s, CUdeviceptr addr, uint64_t value, unsigned flags), 0)

#define HFC_DECLARE_FN(name, ret, params, required) typedef ret(*hfc_##name##_fn) params;
HFC_CUDA_DRIVER_FUNCS(HFC_DECLARE_FN)
#undef HFC_DECLARE_FN

struct hfc_cudadrv {
#define HFC_MEMBER(name, ret, params, required) hfc_##name##_fn name;
    HFC_CUDA_DRIVER_FUNCS(HFC_MEMBER)
#undef HFC_MEMBER
};

#endif
