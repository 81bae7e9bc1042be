/* hipError_t tables and CUDA-to-HIP error translation (private). */
#ifndef HIPFILE_CUDA_HIP_ERRORS_H
#define HIPFILE_CUDA_HIP_ERRORS_H

#include "loader.h"

/* Name ("hipErrorInvalidValue") and description of a hipError_t. */
HFC_HIDDEN const char *hfc_hip_error_name(int code);
HFC_HIDDEN const char *hfc_hip_error_text(int code);

/* cudaError_t (runtime API) -> hipError_t. */
HFC_HIDDEN int hfc_hip_from_cuda(int err);

/* CUresult (driver API, as cuFile reports it) -> hipError_t. */
HFC_HIDDEN int hfc_hip_from_cu_result(int err);

#endif
