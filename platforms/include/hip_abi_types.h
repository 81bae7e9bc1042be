/* The part of the HIP runtime ABI that both test platforms implement: types,
 * error numbers, flags, memory kinds and the pointer attribute layout, as HIP defines
 * them (checked against HIP-Python's declarations). Each platform's own
 * header adds what only it uses. Private to the test platforms. */
#ifndef HIPFILE_PLATFORMS_HIP_ABI_TYPES_H
#define HIPFILE_PLATFORMS_HIP_ABI_TYPES_H

#include <stddef.h>

typedef int hipError_t;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;
typedef void *hipDeviceptr_t;
typedef void (*hipHostFn_t)(void *user_data);
typedef void (*hipStreamCallback_t)(hipStream_t stream, hipError_t status, void *user_data);

/* hipError_t values that the platforms return or check (HIP's numbering;
 * the full list of names is platforms/common/hip_error_table.c). */
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
    hipErrorInvalidHandle = 400,
    hipErrorInvalidResourceHandle = 400,
    hipErrorNotFound = 500,
    hipErrorNotReady = 600,
    hipErrorPeerAccessAlreadyEnabled = 704,
    hipErrorPeerAccessNotEnabled = 705,
    hipErrorContextIsDestroyed = 709,
    hipErrorHostMemoryAlreadyRegistered = 712,
    hipErrorHostMemoryNotRegistered = 713,
    hipErrorNotSupported = 801,
    hipErrorInvalidChannelDescriptor = 911,
    hipErrorInvalidTexture = 912,
    hipErrorStreamDetached = 916,
    hipErrorUnknown = 999,
    hipErrorInvalidClusterSize = 1054,
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

/* hipMemoryType */
enum {
    hipMemoryTypeUnregistered = 0,
    hipMemoryTypeHost = 1,
    hipMemoryTypeDevice = 2,
    hipMemoryTypeManaged = 3,
};

/* Stream, event and host-memory flags */
#define hipStreamDefault 0x0u
#define hipStreamNonBlocking 0x1u
#define hipEventDefault 0x0u
#define hipEventBlockingSync 0x1u
#define hipEventDisableTiming 0x2u
#define hipEventInterprocess 0x4u
#define hipEventDisableSystemFence 0x20000000u
#define hipEventReleaseToDevice 0x40000000u
#define hipEventReleaseToSystem 0x80000000u
#define hipHostMallocPortable 0x1u
#define hipHostMallocMapped 0x2u
#define hipHostMallocWriteCombined 0x4u
#define hipHostMallocNumaUser 0x20000000u
#define hipHostMallocCoherent 0x40000000u
#define hipHostMallocNonCoherent 0x80000000u

/* Stream memory operations: compare operations of hipStreamWaitValue32/64,
 * and the hipExtMallocWithFlags flags */
#define hipStreamWaitValueGte 0x0u
#define hipStreamWaitValueEq 0x1u
#define hipStreamWaitValueAnd 0x2u
#define hipStreamWaitValueNor 0x3u
#define hipDeviceMallocDefault 0x0u
#define hipDeviceMallocFinegrained 0x1u
#define hipMallocSignalMemory 0x2u
#define hipDeviceMallocUncached 0x3u

/* hipPointerAttribute_t (the layout hipPointerGetAttributes fills) */
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
