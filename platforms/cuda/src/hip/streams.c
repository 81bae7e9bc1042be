/* libamdhip64.so of the cuda test platform: streams, host functions and
 * events; a hipStream_t is a cudaStream_t, a hipEvent_t a cudaEvent_t. */
#define _GNU_SOURCE
#include <stdlib.h>

#include "hip_private.h"

/* ---- streams ------------------------------------------------------------- */

HFC_FORWARD_CHECKED(hipStreamCreate, (hipStream_t *stream), stream, hipErrorInvalidValue,
                    cudaStreamCreate, ((cudaStream_t *)stream))
/* hipStreamDefault 0 / hipStreamNonBlocking 1 are CUDA's numbers. */
HFC_FORWARD_CHECKED(hipStreamCreateWithFlags, (hipStream_t *stream, unsigned flags), stream,
                    hipErrorInvalidValue, cudaStreamCreateWithFlags,
                    ((cudaStream_t *)stream, flags))
HFC_FORWARD_CHECKED(hipStreamCreateWithPriority,
                    (hipStream_t *stream, unsigned flags, int priority), stream,
                    hipErrorInvalidValue, cudaStreamCreateWithPriority,
                    ((cudaStream_t *)stream, flags, priority))
HFC_FORWARD(hipDeviceGetStreamPriorityRange, (int *least, int *greatest),
            cudaDeviceGetStreamPriorityRange, (least, greatest))
HFC_FORWARD_CHECKED(hipStreamDestroy, (hipStream_t stream), stream, hipErrorInvalidHandle,
                    cudaStreamDestroy, ((cudaStream_t)stream))
HFC_FORWARD(hipStreamSynchronize, (hipStream_t stream), cudaStreamSynchronize,
            ((cudaStream_t)stream))
HFC_FORWARD(hipStreamQuery, (hipStream_t stream), cudaStreamQuery, ((cudaStream_t)stream))
HFC_FORWARD_CHECKED(hipStreamWaitEvent, (hipStream_t stream, hipEvent_t event, unsigned flags),
                    event, hipErrorInvalidHandle, cudaStreamWaitEvent,
                    ((cudaStream_t)stream, (cudaEvent_t)event, flags))

HFC_EXPORT hipError_t hipStreamGetDevice(hipStream_t stream, int *device)
{
    if (device == NULL)
        return record(hipErrorInvalidValue);
    {
        const struct hfc_cudart *R = rt();
        if (R == NULL)
            return record(hipErrorNotInitialized);
        if (R->cudaStreamGetDevice)
            return from_cuda(R->cudaStreamGetDevice((cudaStream_t)stream, device));
        /* Runtimes before CUDA 12.8 cannot say; the current device is right
         * for the null stream and for single-GPU programs. */
        if (R->cudaGetDevice == NULL)
            return missing("cudaGetDevice");
        return from_cuda(R->cudaGetDevice(device));
    }
}

HFC_FORWARD_CHECKED(hipStreamGetFlags, (hipStream_t stream, unsigned *flags), flags,
                    hipErrorInvalidValue, cudaStreamGetFlags, ((cudaStream_t)stream, flags))
HFC_FORWARD_CHECKED(hipStreamGetPriority, (hipStream_t stream, int *priority), priority,
                    hipErrorInvalidValue, cudaStreamGetPriority, ((cudaStream_t)stream, priority))
HFC_FORWARD_CHECKED(hipLaunchHostFunc, (hipStream_t stream, hipHostFn_t fn, void *user_data), fn,
                    hipErrorInvalidValue, cudaLaunchHostFunc,
                    ((cudaStream_t)stream, fn, user_data))

/* A stream callback receives a hipError_t, so CUDA's status is translated
 * on the way through. */
struct callback_call {
    hipStreamCallback_t fn;
    void *user_data;
};

static void callback_trampoline(cudaStream_t stream, cudaError_t status, void *arg)
{
    struct callback_call call = *(struct callback_call *)arg;
    free(arg);
    call.fn((hipStream_t)stream, hfc_hip_from_cuda(status), call.user_data);
}

HFC_EXPORT hipError_t hipStreamAddCallback(hipStream_t stream, hipStreamCallback_t fn,
                                           void *user_data, unsigned flags)
{
    struct callback_call *call;
    cudaError_t e;
    if (fn == NULL || flags != 0)
        return record(hipErrorInvalidValue);
    NEED(cudaStreamAddCallback);
    call = malloc(sizeof *call);
    if (call == NULL)
        return record(hipErrorOutOfMemory);
    call->fn = fn;
    call->user_data = user_data;
    e = R->cudaStreamAddCallback((cudaStream_t)stream, callback_trampoline, call, 0);
    if (e != cudaSuccess)
        free(call);
    return from_cuda(e);
}

/* ---- events -------------------------------------------------------------- */

HFC_FORWARD_CHECKED(hipEventCreate, (hipEvent_t *event), event, hipErrorInvalidValue,
                    cudaEventCreate, ((cudaEvent_t *)event))

HFC_EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned flags)
{
    if (event == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaEventCreateWithFlags);
    /* Default 0, blocking sync 1, disable timing 2, interprocess 4 are
     * CUDA's numbers; HIP's release-scope flags have no CUDA meaning. */
    flags &= ~(hipEventReleaseToDevice | hipEventReleaseToSystem);
    return from_cuda(R->cudaEventCreateWithFlags((cudaEvent_t *)event, flags));
}

HFC_FORWARD_CHECKED(hipEventRecord, (hipEvent_t event, hipStream_t stream), event,
                    hipErrorInvalidHandle, cudaEventRecord,
                    ((cudaEvent_t)event, (cudaStream_t)stream))
HFC_FORWARD_CHECKED(hipEventRecordWithFlags,
                    (hipEvent_t event, hipStream_t stream, unsigned flags), event,
                    hipErrorInvalidHandle, cudaEventRecordWithFlags,
                    ((cudaEvent_t)event, (cudaStream_t)stream, flags))
HFC_FORWARD_CHECKED(hipEventSynchronize, (hipEvent_t event), event, hipErrorInvalidHandle,
                    cudaEventSynchronize, ((cudaEvent_t)event))
HFC_FORWARD_CHECKED(hipEventQuery, (hipEvent_t event), event, hipErrorInvalidHandle,
                    cudaEventQuery, ((cudaEvent_t)event))

HFC_EXPORT hipError_t hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop)
{
    if (ms == NULL)
        return record(hipErrorInvalidValue);
    if (start == NULL || stop == NULL)
        return record(hipErrorInvalidHandle);
    NEED(cudaEventElapsedTime);
    return from_cuda(R->cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)stop));
}

HFC_FORWARD_CHECKED(hipEventDestroy, (hipEvent_t event), event, hipErrorInvalidHandle,
                    cudaEventDestroy, ((cudaEvent_t)event))
