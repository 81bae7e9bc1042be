/* The part of the HIP runtime ABI that the cuda test platform implements:
 * the types and numbers both platforms share (platforms/include/
 * hip_abi_types.h), and the flags only this platform checks. Numbers as HIP
 * defines them (checked against HIP-Python's declarations). Private to the
 * platform. */
#ifndef HIPFILE_CUDA_HIP_ABI_H
#define HIPFILE_CUDA_HIP_ABI_H

#include "../../include/hip_abi_types.h"

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

#endif
