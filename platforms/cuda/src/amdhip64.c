/* libamdhip64.so of the cuda test platform: a subset of the HIP runtime API
 * implemented over NVIDIA's CUDA runtime, which is opened at run time.
 *
 * This is not AMD's HIP runtime. Handles are shared with CUDA: a hipStream_t
 * is a cudaStream_t, a hipEvent_t a cudaEvent_t, device pointers are CUDA
 * device pointers. Errors come back as hipError_t numbers. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cudart_abi.h"
#include "hip_abi.h"
#include "hip_errors.h"
#include "loader.h"

/* ---- loading the CUDA runtime ------------------------------------------ */

static struct hfc_cudart rt_table;
static const struct hfc_cudart *rt_loaded;
static pthread_once_t rt_once = PTHREAD_ONCE_INIT;

static void rt_load(void)
{
    static const char *const sonames[] = {"libcudart.so.13", "libcudart.so.12",
                                          "libcudart.so", NULL};
    static const struct hfc_search search = {
        "the CUDA runtime (libcudart)", "HIPFILE_CUDART_LIBRARY", sonames,
        "cudaGetDeviceCount"};
    char path[4096];
    void *lib = hfc_open(&search, path, sizeof path);
    if (lib == NULL)
        return;
#define HFC_RESOLVE(name, ret, params, required)                                           \
    hfc_sym(lib, #name, &rt_table.name);                                                   \
    if (required && rt_table.name == NULL)                                                 \
        hfc_say("%s lacks %s; hip functions that need it return hipErrorNotSupported", path, \
                #name);
    HFC_CUDART_FUNCS(HFC_RESOLVE)
#undef HFC_RESOLVE
    if (hfc_verbose())
        hfc_say("libamdhip64 uses the CUDA runtime %s", path);
    __atomic_store_n(&rt_loaded, &rt_table, __ATOMIC_RELEASE);
}

static const struct hfc_cudart *rt(void)
{
    pthread_once(&rt_once, rt_load);
    return __atomic_load_n(&rt_loaded, __ATOMIC_ACQUIRE);
}

/* ---- last error, per thread, as HIP keeps it --------------------------- */

static _Thread_local hipError_t last_error = hipSuccess;

static hipError_t record(hipError_t e)
{
    if (e != hipSuccess && e != hipErrorNotReady)
        last_error = e;
    return e;
}

static hipError_t from_cuda(cudaError_t e)
{
    return record(hfc_hip_from_cuda(e));
}

static hipError_t missing(const char *name)
{
    static int told;
    hfc_say_once(&told, "the CUDA runtime lacks %s (first missing function)", name);
    return record(hipErrorNotSupported);
}

/* Fetch the runtime table and the function, or return the HIP error. */
#define NEED(fn)                                                                           \
    const struct hfc_cudart *R = rt();                                                     \
    if (R == NULL)                                                                         \
        return record(hipErrorNotInitialized);                                             \
    if (R->fn == NULL)                                                                     \
    return missing(#fn)

/* ---- initialisation, versions, devices --------------------------------- */

HFC_EXPORT hipError_t hipInit(unsigned flags)
{
    int count = 0;
    cudaError_t e;
    if (flags != 0)
        return record(hipErrorInvalidValue);
    NEED(cudaGetDeviceCount);
    e = R->cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return from_cuda(e);
    return count > 0 ? hipSuccess : record(hipErrorNoDevice);
}

HFC_EXPORT hipError_t hipDriverGetVersion(int *version)
{
    if (version == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaDriverGetVersion);
    return from_cuda(R->cudaDriverGetVersion(version));
}

HFC_EXPORT hipError_t hipRuntimeGetVersion(int *version)
{
    if (version == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaRuntimeGetVersion);
    return from_cuda(R->cudaRuntimeGetVersion(version));
}

HFC_EXPORT hipError_t hipGetDeviceCount(int *count)
{
    if (count == NULL)
        return record(hipErrorInvalidValue);
    *count = 0;
    NEED(cudaGetDeviceCount);
    return from_cuda(R->cudaGetDeviceCount(count));
}

HFC_EXPORT hipError_t hipGetDevice(int *device)
{
    if (device == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaGetDevice);
    return from_cuda(R->cudaGetDevice(device));
}

HFC_EXPORT hipError_t hipSetDevice(int device)
{
    NEED(cudaSetDevice);
    return from_cuda(R->cudaSetDevice(device));
}

HFC_EXPORT hipError_t hipDeviceSynchronize(void)
{
    NEED(cudaDeviceSynchronize);
    return from_cuda(R->cudaDeviceSynchronize());
}

HFC_EXPORT hipError_t hipDeviceReset(void)
{
    NEED(cudaDeviceReset);
    return from_cuda(R->cudaDeviceReset());
}

/* ---- memory ------------------------------------------------------------ */

HFC_EXPORT hipError_t hipMalloc(void **ptr, size_t size)
{
    if (ptr == NULL)
        return record(hipErrorInvalidValue);
    *ptr = NULL;
    if (size == 0)
        return hipSuccess;
    NEED(cudaMalloc);
    return from_cuda(R->cudaMalloc(ptr, size));
}

HFC_EXPORT hipError_t hipFree(void *ptr)
{
    if (ptr == NULL)
        return hipSuccess;
    NEED(cudaFree);
    return from_cuda(R->cudaFree(ptr));
}

HFC_EXPORT hipError_t hipHostMalloc(void **ptr, size_t size, unsigned flags)
{
    const unsigned known = HIP_HOST_MALLOC_PORTABLE | HIP_HOST_MALLOC_MAPPED |
                           HIP_HOST_MALLOC_WRITE_COMBINED | HIP_HOST_MALLOC_NUMA_USER |
                           HIP_HOST_MALLOC_COHERENT | HIP_HOST_MALLOC_NON_COHERENT;
    const unsigned both = HIP_HOST_MALLOC_COHERENT | HIP_HOST_MALLOC_NON_COHERENT;
    if (ptr == NULL || (flags & ~known) || (flags & both) == both)
        return record(hipErrorInvalidValue);
    *ptr = NULL;
    if (size == 0)
        return hipSuccess;
    NEED(cudaHostAlloc);
    /* Portable, mapped and write-combined have CUDA's numbers; coherence and
     * NUMA placement have no CUDA counterpart (CUDA's pinned memory is
     * coherent) and are accepted and ignored. */
    return from_cuda(R->cudaHostAlloc(
        ptr, size,
        flags & (HIP_HOST_MALLOC_PORTABLE | HIP_HOST_MALLOC_MAPPED |
                 HIP_HOST_MALLOC_WRITE_COMBINED)));
}

HFC_EXPORT hipError_t hipHostAlloc(void **ptr, size_t size, unsigned flags)
{
    return hipHostMalloc(ptr, size, flags);
}

HFC_EXPORT hipError_t hipMallocHost(void **ptr, size_t size)
{
    return hipHostMalloc(ptr, size, 0);
}

HFC_EXPORT hipError_t hipHostFree(void *ptr)
{
    if (ptr == NULL)
        return hipSuccess;
    NEED(cudaFreeHost);
    return from_cuda(R->cudaFreeHost(ptr));
}

HFC_EXPORT hipError_t hipFreeHost(void *ptr)
{
    return hipHostFree(ptr);
}

HFC_EXPORT hipError_t hipMallocManaged(void **ptr, size_t size, unsigned flags)
{
    if (ptr == NULL)
        return record(hipErrorInvalidValue);
    *ptr = NULL;
    NEED(cudaMallocManaged);
    /* hipMemAttachGlobal 1 / hipMemAttachHost 2 are CUDA's numbers. */
    return from_cuda(R->cudaMallocManaged(ptr, size, flags));
}

HFC_EXPORT hipError_t hipHostRegister(void *ptr, size_t size, unsigned flags)
{
    NEED(cudaHostRegister);
    /* Default 0, portable 1, mapped 2, I/O memory 4, read-only 8: CUDA's. */
    return from_cuda(R->cudaHostRegister(ptr, size, flags));
}

HFC_EXPORT hipError_t hipHostUnregister(void *ptr)
{
    NEED(cudaHostUnregister);
    return from_cuda(R->cudaHostUnregister(ptr));
}

HFC_EXPORT hipError_t hipHostGetDevicePointer(void **dev, void *host, unsigned flags)
{
    if (dev == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaHostGetDevicePointer);
    return from_cuda(R->cudaHostGetDevicePointer(dev, host, flags));
}

HFC_EXPORT hipError_t hipHostGetFlags(unsigned *flags, void *host)
{
    if (flags == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaHostGetFlags);
    return from_cuda(R->cudaHostGetFlags(flags, host));
}

static int memcpy_kind(int kind)
{
    if (kind == hipMemcpyDeviceToDeviceNoCU)
        return hipMemcpyDeviceToDevice;
    if (kind < hipMemcpyHostToHost || kind > hipMemcpyDefault)
        return -1;
    return kind; /* CUDA numbers its copy kinds as HIP does */
}

HFC_EXPORT hipError_t hipMemcpy(void *dst, const void *src, size_t size, int kind)
{
    int k = memcpy_kind(kind);
    if (k < 0)
        return record(hipErrorInvalidMemcpyDirection);
    if (size == 0)
        return hipSuccess;
    NEED(cudaMemcpy);
    return from_cuda(R->cudaMemcpy(dst, src, size, k));
}

HFC_EXPORT hipError_t hipMemcpyAsync(void *dst, const void *src, size_t size, int kind,
                                     hipStream_t stream)
{
    int k = memcpy_kind(kind);
    if (k < 0)
        return record(hipErrorInvalidMemcpyDirection);
    NEED(cudaMemcpyAsync);
    return from_cuda(R->cudaMemcpyAsync(dst, src, size, k, (cudaStream_t)stream));
}

HFC_EXPORT hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, const void *src, size_t size)
{
    return hipMemcpy(dst, src, size, hipMemcpyHostToDevice);
}

HFC_EXPORT hipError_t hipMemcpyDtoH(void *dst, hipDeviceptr_t src, size_t size)
{
    return hipMemcpy(dst, src, size, hipMemcpyDeviceToHost);
}

HFC_EXPORT hipError_t hipMemcpyDtoD(hipDeviceptr_t dst, hipDeviceptr_t src, size_t size)
{
    return hipMemcpy(dst, src, size, hipMemcpyDeviceToDevice);
}

HFC_EXPORT hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, const void *src, size_t size,
                                         hipStream_t stream)
{
    return hipMemcpyAsync(dst, src, size, hipMemcpyHostToDevice, stream);
}

HFC_EXPORT hipError_t hipMemcpyDtoHAsync(void *dst, hipDeviceptr_t src, size_t size,
                                         hipStream_t stream)
{
    return hipMemcpyAsync(dst, src, size, hipMemcpyDeviceToHost, stream);
}

HFC_EXPORT hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t size,
                                         hipStream_t stream)
{
    return hipMemcpyAsync(dst, src, size, hipMemcpyDeviceToDevice, stream);
}

HFC_EXPORT hipError_t hipMemset(void *dst, int value, size_t size)
{
    if (size == 0)
        return hipSuccess;
    NEED(cudaMemset);
    return from_cuda(R->cudaMemset(dst, value, size));
}

HFC_EXPORT hipError_t hipMemsetAsync(void *dst, int value, size_t size, hipStream_t stream)
{
    NEED(cudaMemsetAsync);
    return from_cuda(R->cudaMemsetAsync(dst, value, size, (cudaStream_t)stream));
}

HFC_EXPORT hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    if (free_bytes == NULL || total_bytes == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaMemGetInfo);
    return from_cuda(R->cudaMemGetInfo(free_bytes, total_bytes));
}

static int memory_type(int cuda_type)
{
    switch (cuda_type) {
    case cudaMemoryTypeHost:
        return hipMemoryTypeHost;
    case cudaMemoryTypeDevice:
        return hipMemoryTypeDevice;
    case cudaMemoryTypeManaged:
        return hipMemoryTypeManaged;
    default:
        return hipMemoryTypeUnregistered;
    }
}

HFC_EXPORT hipError_t hipPointerGetAttributes(hipPointerAttribute_t *attributes,
                                              const void *ptr)
{
    /* Room for the fields that newer runtimes append. */
    union {
        struct hfc_cuda_pointer_attributes head;
        long pad[64];
    } a;
    unsigned flags = 0;
    cudaError_t e;
    if (attributes == NULL || ptr == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaPointerGetAttributes);
    memset(&a, 0, sizeof a);
    e = R->cudaPointerGetAttributes(&a, ptr);
    if (e != cudaSuccess)
        return from_cuda(e);
    memset(attributes, 0, sizeof *attributes);
    attributes->type = memory_type(a.head.type);
    attributes->device = a.head.device;
    attributes->devicePointer = a.head.devicePointer;
    attributes->hostPointer = a.head.hostPointer;
    attributes->isManaged = a.head.type == cudaMemoryTypeManaged;
    if (a.head.type == cudaMemoryTypeHost && R->cudaHostGetFlags &&
        R->cudaHostGetFlags(&flags, (void *)ptr) == cudaSuccess)
        attributes->allocationFlags = flags;
    return hipSuccess;
}

/* ---- streams ------------------------------------------------------------- */

HFC_EXPORT hipError_t hipStreamCreate(hipStream_t *stream)
{
    if (stream == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaStreamCreate);
    return from_cuda(R->cudaStreamCreate((cudaStream_t *)stream));
}

HFC_EXPORT hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned flags)
{
    if (stream == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaStreamCreateWithFlags);
    /* hipStreamDefault 0 / hipStreamNonBlocking 1 are CUDA's numbers. */
    return from_cuda(R->cudaStreamCreateWithFlags((cudaStream_t *)stream, flags));
}

HFC_EXPORT hipError_t hipStreamCreateWithPriority(hipStream_t *stream, unsigned flags,
                                                  int priority)
{
    if (stream == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaStreamCreateWithPriority);
    return from_cuda(
        R->cudaStreamCreateWithPriority((cudaStream_t *)stream, flags, priority));
}

HFC_EXPORT hipError_t hipDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    NEED(cudaDeviceGetStreamPriorityRange);
    return from_cuda(R->cudaDeviceGetStreamPriorityRange(least, greatest));
}

HFC_EXPORT hipError_t hipStreamDestroy(hipStream_t stream)
{
    if (stream == NULL)
        return record(hipErrorInvalidHandle);
    NEED(cudaStreamDestroy);
    return from_cuda(R->cudaStreamDestroy((cudaStream_t)stream));
}

HFC_EXPORT hipError_t hipStreamSynchronize(hipStream_t stream)
{
    NEED(cudaStreamSynchronize);
    return from_cuda(R->cudaStreamSynchronize((cudaStream_t)stream));
}

HFC_EXPORT hipError_t hipStreamQuery(hipStream_t stream)
{
    NEED(cudaStreamQuery);
    return from_cuda(R->cudaStreamQuery((cudaStream_t)stream));
}

HFC_EXPORT hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned flags)
{
    if (event == NULL)
        return record(hipErrorInvalidHandle);
    NEED(cudaStreamWaitEvent);
    return from_cuda(R->cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, flags));
}

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

HFC_EXPORT hipError_t hipStreamGetFlags(hipStream_t stream, unsigned *flags)
{
    if (flags == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaStreamGetFlags);
    return from_cuda(R->cudaStreamGetFlags((cudaStream_t)stream, flags));
}

HFC_EXPORT hipError_t hipStreamGetPriority(hipStream_t stream, int *priority)
{
    if (priority == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaStreamGetPriority);
    return from_cuda(R->cudaStreamGetPriority((cudaStream_t)stream, priority));
}

HFC_EXPORT hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void *user_data)
{
    if (fn == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaLaunchHostFunc);
    return from_cuda(R->cudaLaunchHostFunc((cudaStream_t)stream, fn, user_data));
}

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

HFC_EXPORT hipError_t hipEventCreate(hipEvent_t *event)
{
    if (event == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaEventCreate);
    return from_cuda(R->cudaEventCreate((cudaEvent_t *)event));
}

HFC_EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned flags)
{
    if (event == NULL)
        return record(hipErrorInvalidValue);
    NEED(cudaEventCreateWithFlags);
    /* Default 0, blocking sync 1, disable timing 2, interprocess 4 are
     * CUDA's numbers; HIP's release-scope flags have no CUDA meaning. */
    flags &= ~(HIP_EVENT_RELEASE_TO_DEVICE | HIP_EVENT_RELEASE_TO_SYSTEM);
    return from_cuda(R->cudaEventCreateWithFlags((cudaEvent_t *)event, flags));
}

HFC_EXPORT hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream)
{
    if (event == NULL)
        return record(hipErrorInvalidHandle);
    NEED(cudaEventRecord);
    return from_cuda(R->cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
}

HFC_EXPORT hipError_t hipEventRecordWithFlags(hipEvent_t event, hipStream_t stream,
                                              unsigned flags)
{
    if (event == NULL)
        return record(hipErrorInvalidHandle);
    NEED(cudaEventRecordWithFlags);
    return from_cuda(
        R->cudaEventRecordWithFlags((cudaEvent_t)event, (cudaStream_t)stream, flags));
}

HFC_EXPORT hipError_t hipEventSynchronize(hipEvent_t event)
{
    if (event == NULL)
        return record(hipErrorInvalidHandle);
    NEED(cudaEventSynchronize);
    return from_cuda(R->cudaEventSynchronize((cudaEvent_t)event));
}

HFC_EXPORT hipError_t hipEventQuery(hipEvent_t event)
{
    if (event == NULL)
        return record(hipErrorInvalidHandle);
    NEED(cudaEventQuery);
    return from_cuda(R->cudaEventQuery((cudaEvent_t)event));
}

HFC_EXPORT hipError_t hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop)
{
    if (ms == NULL)
        return record(hipErrorInvalidValue);
    if (start == NULL || stop == NULL)
        return record(hipErrorInvalidHandle);
    NEED(cudaEventElapsedTime);
    return from_cuda(R->cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)stop));
}

HFC_EXPORT hipError_t hipEventDestroy(hipEvent_t event)
{
    if (event == NULL)
        return record(hipErrorInvalidHandle);
    NEED(cudaEventDestroy);
    return from_cuda(R->cudaEventDestroy((cudaEvent_t)event));
}

/* ---- errors -------------------------------------------------------------- */

HFC_EXPORT hipError_t hipGetLastError(void)
{
    hipError_t e = last_error;
    /* Never load the runtime just to answer this. */
    const struct hfc_cudart *R = __atomic_load_n(&rt_loaded, __ATOMIC_ACQUIRE);
    cudaError_t c = cudaSuccess;
    last_error = hipSuccess;
    if (R && R->cudaGetLastError)
        c = R->cudaGetLastError(); /* clears the runtime's own copy too */
    if (e == hipSuccess && c != cudaSuccess)
        e = hfc_hip_from_cuda(c);
    return e;
}

HFC_EXPORT hipError_t hipPeekAtLastError(void)
{
    const struct hfc_cudart *R = __atomic_load_n(&rt_loaded, __ATOMIC_ACQUIRE);
    if (last_error != hipSuccess)
        return last_error;
    if (R && R->cudaPeekAtLastError)
        return hfc_hip_from_cuda(R->cudaPeekAtLastError());
    return hipSuccess;
}

HFC_EXPORT const char *hipGetErrorName(hipError_t error)
{
    return hfc_hip_error_name(error);
}

HFC_EXPORT const char *hipGetErrorString(hipError_t error)
{
    return hfc_hip_error_text(error);
}
