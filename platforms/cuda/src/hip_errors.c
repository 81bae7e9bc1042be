/* hipError_t names and descriptions, and the translation of CUDA runtime and
 * driver error numbers into hipError_t. HIP numbers most errors as CUDA
 * does; the few that differ are translated explicitly, and a number HIP does
 * not define becomes hipErrorUnknown. */
#include "hip_errors.h"

#include "cudart_abi.h"
#include "hip_abi.h"

struct hip_error_entry {
    int code;
    const char *name;
    const char *text;
};

static const struct hip_error_entry hip_errors[] = {
    {0, "hipSuccess", "no error"},
    {1, "hipErrorInvalidValue", "invalid argument"},
    {2, "hipErrorOutOfMemory", "out of memory"},
    {3, "hipErrorNotInitialized", "the runtime is not initialized"},
    {4, "hipErrorDeinitialized", "the runtime is shutting down"},
    {5, "hipErrorProfilerDisabled", "profiler disabled"},
    {6, "hipErrorProfilerNotInitialized", "profiler not initialized"},
    {7, "hipErrorProfilerAlreadyStarted", "profiler already started"},
    {8, "hipErrorProfilerAlreadyStopped", "profiler already stopped"},
    {9, "hipErrorInvalidConfiguration", "invalid launch configuration"},
    {12, "hipErrorInvalidPitchValue", "invalid pitch"},
    {13, "hipErrorInvalidSymbol", "invalid symbol"},
    {17, "hipErrorInvalidDevicePointer", "invalid device pointer"},
    {21, "hipErrorInvalidMemcpyDirection", "invalid copy direction"},
    {35, "hipErrorInsufficientDriver", "the driver is older than the runtime"},
    {52, "hipErrorMissingConfiguration", "missing launch configuration"},
    {53, "hipErrorPriorLaunchFailure", "an earlier launch failed"},
    {98, "hipErrorInvalidDeviceFunction", "invalid device function"},
    {100, "hipErrorNoDevice", "no GPU is available"},
    {101, "hipErrorInvalidDevice", "invalid device ordinal"},
    {200, "hipErrorInvalidImage", "invalid code object"},
    {201, "hipErrorInvalidContext", "invalid context"},
    {202, "hipErrorContextAlreadyCurrent", "context already current"},
    {205, "hipErrorMapFailed", "mapping failed"},
    {206, "hipErrorUnmapFailed", "unmapping failed"},
    {207, "hipErrorArrayIsMapped", "array is mapped"},
    {208, "hipErrorAlreadyMapped", "already mapped"},
    {209, "hipErrorNoBinaryForGpu", "no code for this GPU"},
    {210, "hipErrorAlreadyAcquired", "already acquired"},
    {211, "hipErrorNotMapped", "not mapped"},
    {212, "hipErrorNotMappedAsArray", "not mapped as an array"},
    {213, "hipErrorNotMappedAsPointer", "not mapped as a pointer"},
    {214, "hipErrorECCNotCorrectable", "uncorrectable ECC error"},
    {215, "hipErrorUnsupportedLimit", "unsupported limit"},
    {216, "hipErrorContextAlreadyInUse", "context already in use"},
    {217, "hipErrorPeerAccessUnsupported", "peer access unsupported"},
    {218, "hipErrorInvalidKernelFile", "invalid kernel file"},
    {219, "hipErrorInvalidGraphicsContext", "invalid graphics context"},
    {300, "hipErrorInvalidSource", "invalid source"},
    {301, "hipErrorFileNotFound", "file not found"},
    {302, "hipErrorSharedObjectSymbolNotFound", "shared object symbol not found"},
    {303, "hipErrorSharedObjectInitFailed", "shared object initialization failed"},
    {304, "hipErrorOperatingSystem", "operating system call failed"},
    {400, "hipErrorInvalidHandle", "invalid resource handle"},
    {401, "hipErrorIllegalState", "operation not valid in the current state"},
    {500, "hipErrorNotFound", "not found"},
    {600, "hipErrorNotReady", "work not yet complete"},
    {700, "hipErrorIllegalAddress", "illegal memory access"},
    {701, "hipErrorLaunchOutOfResources", "too many resources requested for launch"},
    {702, "hipErrorLaunchTimeOut", "launch timed out"},
    {704, "hipErrorPeerAccessAlreadyEnabled", "peer access already enabled"},
    {705, "hipErrorPeerAccessNotEnabled", "peer access not enabled"},
    {708, "hipErrorSetOnActiveProcess", "cannot set while the process is active"},
    {709, "hipErrorContextIsDestroyed", "context is destroyed"},
    {710, "hipErrorAssert", "device-side assertion failed"},
    {712, "hipErrorHostMemoryAlreadyRegistered", "host memory already registered"},
    {713, "hipErrorHostMemoryNotRegistered", "host memory not registered"},
    {719, "hipErrorLaunchFailure", "launch failed"},
    {720, "hipErrorCooperativeLaunchTooLarge", "cooperative launch too large"},
    {801, "hipErrorNotSupported", "operation not supported"},
    {900, "hipErrorStreamCaptureUnsupported", "not allowed while capturing a stream"},
    {901, "hipErrorStreamCaptureInvalidated", "stream capture invalidated"},
    {902, "hipErrorStreamCaptureMerge", "stream capture merge not allowed"},
    {903, "hipErrorStreamCaptureUnmatched", "stream capture unmatched"},
    {904, "hipErrorStreamCaptureUnjoined", "stream capture unjoined"},
    {905, "hipErrorStreamCaptureIsolation", "stream capture isolation violated"},
    {906, "hipErrorStreamCaptureImplicit", "implicit stream in capture"},
    {907, "hipErrorCapturedEvent", "operation not allowed on a captured event"},
    {908, "hipErrorStreamCaptureWrongThread", "stream capture from another thread"},
    {910, "hipErrorGraphExecUpdateFailure", "graph update failed"},
    {911, "hipErrorInvalidChannelDescriptor", "invalid channel descriptor"},
    {912, "hipErrorInvalidTexture", "invalid texture"},
    {914, "hipErrorInvalidResourceType", "invalid resource type"},
    {915, "hipErrorInvalidResourceConfiguration", "invalid resource configuration"},
    {916, "hipErrorStreamDetached", "stream detached"},
    {999, "hipErrorUnknown", "unknown error"},
    {1052, "hipErrorRuntimeMemory", "runtime memory error"},
    {1053, "hipErrorRuntimeOther", "runtime error"},
    {1054, "hipErrorInvalidClusterSize", "invalid cluster size"},
    {1055, "hipErrorTbd", "placeholder error"},
};

static const struct hip_error_entry *find(int code)
{
    for (size_t i = 0; i < sizeof hip_errors / sizeof hip_errors[0]; i++)
        if (hip_errors[i].code == code)
            return &hip_errors[i];
    return NULL;
}

const char *hfc_hip_error_name(int code)
{
    const struct hip_error_entry *e = find(code);
    return e ? e->name : "hipErrorUnknown";
}

const char *hfc_hip_error_text(int code)
{
    const struct hip_error_entry *e = find(code);
    return e ? e->text : "unknown error";
}

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
    if (err >= 0 && err < 1000 && find(err) != NULL)
        return err;
    return hipErrorUnknown;
}

int hfc_hip_from_cu_result(int err)
{
    /* The driver API numbers its errors as HIP does wherever HIP defines
     * the number. */
    if (err >= 0 && find(err) != NULL)
        return err;
    return hipErrorUnknown;
}
