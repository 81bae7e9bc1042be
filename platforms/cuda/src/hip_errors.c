/* The translation of CUDA runtime and driver error numbers into hipError_t
 * (names and descriptions: platforms/common/hip_error_table.c). HIP numbers
 * most errors as CUDA does; the few that differ are translated explicitly,
 * and a number HIP does not define becomes hipErrorUnknown. */
#include "hip_errors.h"

#include "cudart_abi.h"
#include "hip_abi.h"

int hfc_hip_from_cuda(int err)
{
    switch (err) {
    case cudaErrorCudartUnloading:
        return hipErrorDeinitialized;
    case cudaErrorInvalidHostPointer:
        return hipErrorInvalidValue;
    case cudaErrorInvalidTexture:
    case cudaErrorInvalidTextureBinding:
        return hipErrorInvalidTexture;
    case cudaErrorInvalidChannelDescriptor:
        return hipErrorInvalidChannelDescriptor;
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
        return hipErrorInsufficientDriver;
    case cudaErrorStartupFailure:
    case cudaErrorSystemNotReady:
        return hipErrorNotInitialized;
    case cudaErrorNotPermitted:
        return hipErrorNotSupported;
    case cudaErrorExternalDevice:
        return hipErrorUnknown;
    case cudaErrorInvalidClusterSize:
        return hipErrorInvalidClusterSize;
    case cudaErrorStreamDetached:
        return hipErrorStreamDetached;
    default:
        break;
    }
    /* Every other CUDA runtime number that HIP defines means the same there. */
    if (err >= 0 && err < 1000 && hip_error_info(err) != NULL)
        return err;
    return hipErrorUnknown;
}

int hfc_hip_from_cu_result(int err)
{
    /* The driver API numbers its errors as HIP does wherever HIP defines
     * the number. */
    if (err >= 0 && hip_error_info(err) != NULL)
        return err;
    return hipErrorUnknown;
}
