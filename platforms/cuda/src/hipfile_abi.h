/* The hipFile C ABI as this platform implements it: the types, numbers and
 * layouts both platforms share (platforms/include/hipfile_abi_types.h), and
 * the flag bits this platform checks. Private to the platform. */
#ifndef HIPFILE_CUDA_HIPFILE_ABI_H
#define HIPFILE_CUDA_HIPFILE_ABI_H

#include "../../include/hipfile_abi_types.h"
#include "hip_abi.h"

/* Bits of hipFileDriverProps_t that hipFile defines. */
#define HIPFILE_STATUS_FLAGS_KNOWN 0x1bffu /* bits 0..9, 11, 12 */
#define HIPFILE_CONTROL_FLAGS_KNOWN 0x3u   /* poll mode, compat mode */
#define HIPFILE_FEATURE_FLAGS_KNOWN 0xfu   /* dyn routing, batch, streams, parallel */

#endif
