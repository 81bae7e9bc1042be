/* The CUDA runtime functions this platform calls, declared from the runtime's
 * documented ABI (names, signatures, numbers), and the table they are
 * resolved into at run time. No CUDA header is needed to build. */
#ifndef HIPFILE_CUDA_CUDART_ABI_H
#define HIPFILE_CUDA_CUDART_ABI_H

#include <stddef.h>

typedef int cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef void (*cudaHostFn_t)(void *user_data);
typedef void (*cudaStreamCallback_t)(cudaStream_t stream, cudaError_t status, void *user_data);

/* cudaError_t values that need translating into hipError_t. */
enum {
    cudaSuccess = 0,
    cudaErrorCudartUnloading = 4,
    cudaErrorInvalidHostPointer = 16,
    cudaErrorInvalidTexture = 18,
    cudaErrorInvalidTextureBinding = 19,
    cudaErrorInvalidChannelDescriptor = 20,
    cudaErrorStubLibrary = 34,
    cudaErrorCallRequiresNewerDriver = 36,
    cudaErrorStartupFailure = 127,
    cudaErrorNotPermitted = 800,
    cudaErrorSystemNotReady = 802,
    cudaErrorSystemDriverMismatch = 803,
    cudaErrorCompatNotSupportedOnDevice = 804,
    cudaErrorExternalDevice = 911,
    cudaErrorInvalidClusterSize = 912,
    cudaErrorStreamDetached = 917,
};

/* cudaMemoryType */
enum {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3,
};

/* The leading fields of struct cudaPointerAttributes. Newer runtimes append
 * fields, so the platform passes a larger zeroed buffer and reads these. */
struct hfc_cuda_pointer_attributes {
    int type;
    int device;
    void *devicePointer;
    void *hostPointer;
};

/* X(name, return type, parameter list, required) */
#define HFC_CUDART_FUNCS(X)                                                                \
    X(cudaGetDeviceCount, cudaError_t, (int *count), 1)                                    \
    X(cudaGetDevice, cudaError_t, (int *device), 1)                                        \
    X(cudaSetDevice, cudaError_t, (int device), 1)                                         \
    X(cudaDeviceSynchronize, cudaError_t, (void), 1)                                       \
    X(cudaDeviceReset, cudaError_t, (void), 1)                                             \
    X(cudaDriverGetVersion, cudaError_t, (int *version), 1)                                \
    X(cudaRuntimeGetVersion, cudaError_t, (int *version), 1)                               \
    X(cudaMalloc, cudaError_t, (void **ptr, size_t size), 1)                               \
    X(cudaFree, cudaError_t, (void *ptr), 1)                                               \
    X(cudaMallocHost, cudaError_t, (void **ptr, size_t size), 1)                           \
    X(cudaHostAlloc, cudaError_t, (void **ptr, size_t size, unsigned flags), 1)            \
    X(cudaFreeHost, cudaError_t, (void *ptr), 1)                                           \
    X(cudaMallocManaged, cudaError_t, (void **ptr, size_t size, unsigned flags), 1)        \
    X(cudaHostRegister, cudaError_t, (void *ptr, size_t size, unsigned flags), 1)          \
    X(cudaHostUnregister, cudaError_t, (void *ptr), 1)                                     \
    X(cudaHostGetDevicePointer, cudaError_t, (void **dev, void *host, unsigned flags), 1)  \
    X(cudaHostGetFlags, cudaError_t, (unsigned *flags, void *host), 1)                     \
    X(cudaMemcpy, cudaError_t, (void *dst, const void *src, size_t n, int kind), 1)        \
    X(cudaMemcpyAsync, cudaError_t,                                                        \
      (void *dst, const void *src, size_t n, int kind, cudaStream_t stream), 1)            \
    X(cudaMemcpyBatchAsync, cudaError_t,                                                   \
      (void **dsts, void **srcs, size_t *sizes, size_t count, void *attrs,                 \
       size_t *attrs_idxs, size_t num_attrs, size_t *fail_idx, cudaStream_t stream), 0)    \
    X(cudaMemset, cudaError_t, (void *dst, int value, size_t n), 1)                        \
    X(cudaMemsetAsync, cudaError_t, (void *dst, int value, size_t n, cudaStream_t s), 1)   \
    X(cudaMemGetInfo, cudaError_t, (size_t *free_bytes, size_t *total_bytes), 1)           \
    X(cudaStreamCreate, cudaError_t, (cudaStream_t *stream), 1)                            \
    X(cudaStreamCreateWithFlags, cudaError_t, (cudaStream_t *stream, unsigned flags), 1)   \
    X(cudaStreamCreateWithPriority, cudaError_t,                                           \
      (cudaStream_t *stream, unsigned flags, int priority), 1)                             \
    X(cudaStreamDestroy, cudaError_t, (cudaStream_t stream), 1)                            \
    X(cudaStreamSynchronize, cudaError_t, (cudaStream_t stream), 1)                        \
    X(cudaStreamQuery, cudaError_t, (cudaStream_t stream), 1)                              \
    X(cudaStreamWaitEvent, cudaError_t, (cudaStream_t s, cudaEvent_t e, unsigned flags), 1) \
    X(cudaStreamGetDevice, cudaError_t, (cudaStream_t stream, int *device), 0)             \
    X(cudaStreamGetFlags, cudaError_t, (cudaStream_t stream, unsigned *flags), 1)          \
    X(cudaStreamGetPriority, cudaError_t, (cudaStream_t stream, int *priority), 1)         \
    X(cudaDeviceGetStreamPriorityRange, cudaError_t, (int *least, int *greatest), 1)       \
    X(cudaLaunchHostFunc, cudaError_t, (cudaStream_t s, cudaHostFn_t fn, void *data), 1)   \
    X(cudaStreamAddCallback, cudaError_t,                                                  \
      (cudaStream_t s, cudaStreamCallback_t cb, void *data, unsigned flags), 1)            \
    X(cudaEventCreate, cudaError_t, (cudaEvent_t *event), 1)                               \
    X(cudaEventCreateWithFlags, cudaError_t, (cudaEvent_t *event, unsigned flags), 1)      \
    X(cudaEventRecord, cudaError_t, (cudaEvent_t event, cudaStream_t stream), 1)           \
    X(cudaEventRecordWithFlags, cudaError_t,                                               \
      (cudaEvent_t event, cudaStream_t stream, unsigned flags), 0)                         \
    X(cudaEventSynchronize, cudaError_t, (cudaEvent_t event), 1)                           \
    X(cudaEventQuery, cudaError_t, (cudaEvent_t event), 1)                                 \
    X(cudaEventElapsedTime, cudaError_t, (float *ms, cudaEvent_t start, cudaEvent_t end), 1) \
    X(cudaEventDestroy, cudaError_t, (cudaEvent_t event), 1)                               \
    X(cudaPointerGetAttributes, cudaError_t, (void *attributes, const void *ptr), 1)       \
    X(cudaGetLastError, cudaError_t, (void), 1)                                            \
    X(cudaPeekAtLastError, cudaError_t, (void), 1)

#define HFC_DECLARE_FN(name, ret, params, required) typedef ret(*hfc_##name##_fn) params;
HFC_CUDART_FUNCS(HFC_DECLARE_FN)
#undef HFC_DECLARE_FN

struct hfc_cudart {
#define HFC_MEMBER(name, ret, params, required) hfc_##name##_fn name;
    HFC_CUDART_FUNCS(HFC_MEMBER)
#undef HFC_MEMBER
};

#endif
