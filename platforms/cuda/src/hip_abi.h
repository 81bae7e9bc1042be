/* The part of the HIP runtime ABI that the cuda test platform implements:
 * the types and numbers both platforms share (platforms/include/
 * hip_abi_types.h), and what only this platform checks. Numbers as HIP
 * defines them (checked against HIP-Python's declarations). Private to the
 * platform. */
#ifndef HIPFILE_CUDA_HIP_ABI_H
#define HIPFILE_CUDA_HIP_ABI_H

#include "../../include/hip_abi_types.h"

/* hipDeviceAttribute_t values this platform answers */
#define HIP_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE 10013

#endif
