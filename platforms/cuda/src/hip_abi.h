/* The part of the HIP runtime ABI that the cuda test platform implements:
 * types and numbers as HIP defines them (checked against HIP-Python's
 * declarations). Private to the platform. */
#ifndef HIPFILE_CUDA_HIP_ABI_H
#define HIPFILE_CUDA_HIP_ABI_H

#include <stddef.h>

typedef int hipError_t;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;
typedef void *hipDeviceptr_t;
typedef void (*hipHostFn_t)(void *user_data);
typedef void (*hipStreamCallback_t)(hipStream_t stream, hipError_t status, void *user_data);

/* hipError_t values used by this platform's own checks. */
enum {
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorNotInitialized = 3,
    hipErrorDeinitialized = 4,
    hipErrorInvalidDevicePointer = 17,
    hipErrorInvalidMemcpyDirection = 21,
    hipErrorInsufficientDriver = 35,
    hipErrorNoDevice = 100,
    hipErrorInvalidDevice = 101,
    hipErrorInvalidContext = 201,
    hipErrorInvalidChannelDescriptor = 911,
    hipErrorInvalidTexture = 912,
    hipErrorStreamDetached = 916,
    hipErrorInvalidHandle = 400,
    hipErrorNotFound = 500,
    hipErrorNotReady = 600,
    hipErrorNotSupported = 801,
    hipErrorUnknown = 999,
    hipErrorInvalidClusterSize = 1054,
};

/* hipMemoryType */
enum {
    hipMemoryTypeUnregistered = 0,
    hipMemoryTypeHost = 1,
    hipMemoryTypeDevice = 2,
    hipMemoryTypeManaged = 3,
};

/* hipMemcpyKind */
enum {
    hipMemcpyHostToHost = 0,
    hipMemcpyHostToDevice = 1,
    hipMemcpyDeviceToHost = 2,
    hipMemcpyDeviceToDevice = 3,
    hipMemcpyDefault = 4,
    hipMemcpyDeviceToDeviceNoCU = 1024,
};

/* hipHostMalloc flags */
#define HIP_HOST_MALLOC_PORTABLE 0x1u
#define HIP_HOST_MALLOC_MAPPED 0x2u
#define HIP_HOST_MALLOC_WRITE_COMBINED 0x4u
#define HIP_HOST_MALLOC_NUMA_USER 0x20000000u
#define HIP_HOST_MALLOC_COHERENT 0x40000000u
#define HIP_HOST_MALLOC_NON_COHERENT 0x80000000u

/* Stream memory operations: compare operations of hipStreamWaitValue32/64 */
#define HIP_STREAM_WAIT_VALUE_GTE 0x0u
#define HIP_STREAM_WAIT_VALUE_EQ 0x1u
#define HIP_STREAM_WAIT_VALUE_AND 0x2u
#define HIP_STREAM_WAIT_VALUE_NOR 0x3u

/* hipExtMallocWithFlags flags */
#define HIP_DEVICE_MALLOC_DEFAULT 0x0u
#define HIP_DEVICE_MALLOC_FINEGRAINED 0x1u
#define HIP_MALLOC_SIGNAL_MEMORY 0x2u
#define HIP_DEVICE_MALLOC_UNCACHED 0x3u

/* hipDeviceAttribute_t values this platform answers */
#define HIP_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE 10013

/* hipEvent flags that CUDA lacks */
#define HIP_EVENT_RELEASE_TO_DEVICE 0x40000000u
#define HIP_EVENT_RELEASE_TO_SYSTEM 0x80000000u

typedef struct hipPointerAttribute_t {
    int type; /* hipMemoryType */
    int device;
    void *devicePointer;
    void *hostPointer;
    int isManaged;
    unsigned allocationFlags;
} hipPointerAttribute_t;

_Static_assert(sizeof(hipPointerAttribute_t) == 32, "hipPointerAttribute_t layout");

#endif
