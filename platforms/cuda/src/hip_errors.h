/* CUDA-to-HIP error translation (private); hipError_t names are
 * platforms/include/hip_error_table.h. */
#ifndef HIPFILE_CUDA_HIP_ERRORS_H
#define HIPFILE_CUDA_HIP_ERRORS_H

#include "../../include/hip_error_table.h"
#include "loader.h"

/* cudaError_t (runtime API) -> hipError_t. */
HFC_HIDDEN int hfc_hip_from_cuda(int err);

/* CUresult (driver API, as cuFile reports it) -> hipError_t. */
HFC_HIDDEN int hfc_hip_from_cu_result(int err);

#endif
