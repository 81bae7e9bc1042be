/* libamdhip64.so of the cuda test platform: a subset of the HIP runtime API
 * implemented over NVIDIA's CUDA runtime, which is opened at run time.
 *
 * This is not AMD's HIP runtime. Handles are shared with CUDA: a hipStream_t
 * is a cudaStream_t, a hipEvent_t a cudaEvent_t, device pointers are CUDA
 * device pointers. Errors come back as hipError_t numbers. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cudadrv_abi.h"
#include "cudart_abi.h"
#include "hip_abi.h"
#include "hip_errors.h"
#include "loader.h"

/* ---- loading the CUDA runtime ------------------------------------------ */

static struct hfc_cudart rt_table;
static const struct hfc_cudart *rt_loaded;
static pthread_once_t rt_once = PTHREAD_ONCE_INIT;

/* Resolves `name` of `lib` (opened from `path`) into *slot (a function
 * pointer); a `required` function that is missing is named on stderr. */
static void resolve(void *lib, const char *path, const char *name, void *slot, int required)
{
    void *p;
    hfc_sym(lib, name, slot);
    memcpy(&p, slot, sizeof p);
    if (required && p == NULL)
        hfc_say("%s lacks %s; hip functions that need it return hipErrorNotSupported", path,
                name);
}

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
    resolve(lib, path, #name, &rt_table.name, required);
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

/* A HIP function whose only check of its own is that `arg` is not NULL (else
 * it returns `err`), and which then calls the CUDA runtime's cuda_fn: the
 * flags and enums it passes have the same numbers in CUDA. */
#define HFC_FORWARD_CHECKED(hip_fn, params, arg, err, cuda_fn, args)                       \
    HFC_EXPORT hipError_t hip_fn params                                                    \
    {                                                                                      \
        if (arg == NULL)                                                                   \
            return record(err);                                                            \
        NEED(cuda_fn);                                                                     \
        return from_cuda(R->cuda_fn args);                                                 \
    }

/* A HIP function that calls the CUDA runtime's cuda_fn with no check of its
 * own. */
#define HFC_FORWARD(hip_fn, params, cuda_fn, args)                                         \
    HFC_EXPORT hipError_t hip_fn params                                                    \
    {                                                                                      \
        NEED(cuda_fn);                                                                     \
        return from_cuda(R->cuda_fn args);                                                 \
    }

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

HFC_FORWARD_CHECKED(hipDriverGetVersion, (int *version), version, hipErrorInvalidValue,
                    cudaDriverGetVersion, (version))
HFC_FORWARD_CHECKED(hipRuntimeGetVersion, (int *version), version, hipErrorInvalidValue,
                    cudaRuntimeGetVersion, (version))

HFC_EXPORT hipError_t hipGetDeviceCount(int *count)
{
    if (count == NULL)
        return record(hipErrorInvalidValue);
    *count = 0;
    NEED(cudaGetDeviceCount);
    return from_cuda(R->cudaGetDeviceCount(count));
}

HFC_FORWARD_CHECKED(hipGetDevice, (int *device), device, hipErrorInvalidValue, cudaGetDevice,
                    (device))
HFC_FORWARD(hipSetDevice, (int device), cudaSetDevice, (device))
HFC_FORWARD(hipDeviceSynchronize, (void), cudaDeviceSynchronize, ())
HFC_FORWARD(hipDeviceReset, (void), cudaDeviceReset, ())

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
    const unsigned known = hipHostMallocPortable | hipHostMallocMapped |
                           hipHostMallocWriteCombined | hipHostMallocNumaUser |
                           hipHostMallocCoherent | hipHostMallocNonCoherent;
    const unsigned both = hipHostMallocCoherent | hipHostMallocNonCoherent;
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
        flags & (hipHostMallocPortable | hipHostMallocMapped |
                 hipHostMallocWriteCombined)));
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

/* Default 0, portable 1, mapped 2, I/O memory 4, read-only 8: CUDA's. */
HFC_FORWARD(hipHostRegister, (void *ptr, size_t size, unsigned flags), cudaHostRegister,
            (ptr, size, flags))
HFC_FORWARD(hipHostUnregister, (void *ptr), cudaHostUnregister, (ptr))
HFC_FORWARD_CHECKED(hipHostGetDevicePointer, (void **dev, void *host, unsigned flags), dev,
                    hipErrorInvalidValue, cudaHostGetDevicePointer, (dev, host, flags))
HFC_FORWARD_CHECKED(hipHostGetFlags, (unsigned *flags, void *host), flags, hipErrorInvalidValue,
                    cudaHostGetFlags, (flags, host))

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

/* cudaMemcpyBatchAsync (CUDA 12.8) lost its fail_idx parameter in CUDA 13. */
typedef cudaError_t (*hfc_memcpy_batch13_fn)(void **dsts, void **srcs, size_t *sizes,
                                             size_t count, void *attrs, size_t *attrs_idxs,
                                             size_t num_attrs, cudaStream_t stream);

/* The attributes CUDA requires and ROCm does not use: sources read in
 * stream order (cudaMemcpySrcAccessOrderStream), no location hints. */
struct hfc_memcpy_attributes {
    int src_access_order;
    int src_loc_type, src_loc_id, dst_loc_type, dst_loc_id;
    unsigned flags;
};

HFC_EXPORT hipError_t hipMemcpyBatchAsync(void **dsts, void **srcs, size_t *sizes, size_t count,
                                          void *attrs, size_t *attrs_idxs, size_t num_attrs,
                                          size_t *fail_idx, hipStream_t stream)
{
    struct hfc_memcpy_attributes order = {1, 0, 0, 0, 0, 0};
    size_t order_idx = 0;
    int version = 0;
    if (fail_idx)
        *fail_idx = SIZE_MAX;
    if (count == 0 || !dsts || !srcs || !sizes)
        return record(hipErrorInvalidValue);
    NEED(cudaMemcpyBatchAsync);
    if (!attrs || !attrs_idxs || num_attrs == 0) {
        attrs = &order;
        attrs_idxs = &order_idx;
        num_attrs = 1;
    }
    if (R->cudaRuntimeGetVersion(&version) == 0 && version >= 13000)
        return from_cuda(((hfc_memcpy_batch13_fn)(void (*)(void))R->cudaMemcpyBatchAsync)(
            dsts, srcs, sizes, count, attrs, attrs_idxs, num_attrs, (cudaStream_t)stream));
    return from_cuda(R->cudaMemcpyBatchAsync(dsts, srcs, sizes, count, attrs, attrs_idxs,
                                             num_attrs, fail_idx, (cudaStream_t)stream));
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

HFC_FORWARD(hipMemsetAsync, (void *dst, int value, size_t size, hipStream_t stream),
            cudaMemsetAsync, (dst, value, size, (cudaStream_t)stream))

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

/* ---- stream memory operations (CUDA driver API) ------------------------- */

/* hipStreamWaitValue32/64 and hipStreamWriteValue32/64 become
 * cuStreamWaitValue32/64 and cuStreamWriteValue32/64 of libcuda (the _v2
 * symbols where the driver has them). The compare operations have the same
 * numbers. Differences that remain:
 *  - HIP's mask has no CUDA counterpart. All-ones (the default) maps
 *    directly; with another mask, hipStreamWaitValueAnd waits on
 *    (value & mask), which is the same condition, and hipStreamWaitValueNor is
 *    always true (the bits outside the mask are zero on both sides), so it
 *    enqueues nothing. hipStreamWaitValueGte and hipStreamWaitValueEq with a
 *    partial mask cannot be expressed and return hipErrorInvalidValue.
 *  - CUDA's GEQ is a cyclic compare, (int32_t)(*ptr - value) >= 0 (int64_t
 *    for 64 bits), where HIP documents *ptr >= value: the two agree while the
 *    two values are less than 2^31 (2^63) apart.
 *  - HIP's write flags are reserved and ignored; CUDA's default write (with
 *    its memory barrier) is used. */

static struct hfc_cudadrv drv_table;
static const struct hfc_cudadrv *drv_loaded;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void drv_load(void)
{
    static const char *const sonames[] = {"libcuda.so.1", "libcuda.so", NULL};
    static const struct hfc_search search = {"the CUDA driver (libcuda)",
                                             "HIPFILE_LIBCUDA_LIBRARY", sonames, "cuInit"};
    char path[4096];
    void *lib = hfc_open(&search, path, sizeof path);
    if (lib == NULL)
        return;
#define HFC_RESOLVE(name, ret, params, required)                                           \
    resolve(lib, path, #name, &drv_table.name, required);
    HFC_CUDA_DRIVER_FUNCS(HFC_RESOLVE)
#undef HFC_RESOLVE
    if (drv_table.cuInit == NULL || drv_table.cuInit(0) != CUDA_SUCCESS)
        return;
    if (hfc_verbose())
        hfc_say("libamdhip64 uses the CUDA driver %s for stream memory operations", path);
    __atomic_store_n(&drv_loaded, &drv_table, __ATOMIC_RELEASE);
}

static const struct hfc_cudadrv *drv(void)
{
    pthread_once(&drv_once, drv_load);
    return __atomic_load_n(&drv_loaded, __ATOMIC_ACQUIRE);
}

static hipError_t from_cu(CUresult e)
{
    return record(hfc_hip_from_cu_result(e));
}

static int is_special_stream(hipStream_t stream)
{
    /* NULL, hipStreamLegacy (1) and hipStreamPerThread (2) name the current
     * device's default streams (CUDA's numbers are the same). */
    return (uintptr_t)stream <= 2;
}

/* Driver calls act on the calling thread's current context. Make the
 * stream's device current with its primary context (cudaSetDevice, and
 * cudaFree(NULL) once per thread and device to initialise it) and report
 * the device that was current before, to be restored by drv_leave. */
static _Thread_local unsigned long long drv_ready_devices;

static hipError_t drv_enter(hipStream_t stream, int *previous)
{
    const struct hfc_cudart *R = rt();
    int device = 0;
    cudaError_t e;
    if (R == NULL)
        return hipErrorNotInitialized;
    if (R->cudaGetDevice == NULL || R->cudaSetDevice == NULL || R->cudaFree == NULL)
        return hipErrorNotSupported;
    e = R->cudaGetDevice(previous);
    if (e != cudaSuccess)
        return hfc_hip_from_cuda(e);
    device = *previous;
    if (!is_special_stream(stream) && R->cudaStreamGetDevice != NULL) {
        e = R->cudaStreamGetDevice((cudaStream_t)stream, &device);
        if (e != cudaSuccess)
            return hfc_hip_from_cuda(e);
    }
    e = R->cudaSetDevice(device);
    if (e == cudaSuccess && (device >= 64 || !(drv_ready_devices >> device & 1ull))) {
        e = R->cudaFree(NULL);
        if (e == cudaSuccess && device < 64)
            drv_ready_devices |= 1ull << device;
    }
    if (e != cudaSuccess) {
        R->cudaSetDevice(*previous);
        return hfc_hip_from_cuda(e);
    }
    return hipSuccess;
}

static void drv_leave(int previous)
{
    const struct hfc_cudart *R = rt();
    int device = previous;
    if (R != NULL && R->cudaGetDevice(&device) == cudaSuccess && device != previous)
        R->cudaSetDevice(previous);
}

enum stream_mem_op { OP_WAIT32, OP_WAIT64, OP_WRITE32, OP_WRITE64 };

static hipError_t stream_mem(enum stream_mem_op op, hipStream_t stream, void *ptr,
                             uint64_t value, unsigned flags, uint64_t mask)
{
    const int wide = op == OP_WAIT64 || op == OP_WRITE64;
    const int wait = op == OP_WAIT32 || op == OP_WAIT64;
    const uint64_t all = wide ? ~0ull : 0xffffffffull;
    const struct hfc_cudadrv *D;
    CUresult r = CUDA_SUCCESS;
    int previous = 0;
    hipError_t status;

    if (ptr == NULL || ((uintptr_t)ptr & (wide ? 7u : 3u)) != 0)
        return record(hipErrorInvalidValue);
    value &= all;
    mask &= all;
    if (wait) {
        if (flags > hipStreamWaitValueNor)
            return record(hipErrorInvalidValue);
        if (mask != all) {
            if (flags == hipStreamWaitValueNor)
                return hipSuccess; /* always true: nothing to wait for */
            if (flags != hipStreamWaitValueAnd)
                return record(hipErrorInvalidValue); /* not expressible in CUDA */
            value &= mask;
        }
    } else {
        flags = CU_STREAM_WRITE_VALUE_DEFAULT; /* HIP: reserved, ignored */
    }
    D = drv();
    if (D == NULL)
        return record(hipErrorNotSupported);
    status = drv_enter(stream, &previous);
    if (status != hipSuccess)
        return record(status);
#define HFC_CALL(v2, v1, type)                                                             \
    do {                                                                                   \
        if (D->v2 != NULL)                                                                 \
            r = D->v2((CUstream)stream, (CUdeviceptr)(uintptr_t)ptr, (type)value, flags);  \
        else if (D->v1 != NULL)                                                            \
            r = D->v1((CUstream)stream, (CUdeviceptr)(uintptr_t)ptr, (type)value, flags);  \
        else                                                                               \
            status = missing(#v2);                                                         \
    } while (0)
    switch (op) {
    case OP_WAIT32:
        HFC_CALL(cuStreamWaitValue32_v2, cuStreamWaitValue32, uint32_t);
        break;
    case OP_WAIT64:
        HFC_CALL(cuStreamWaitValue64_v2, cuStreamWaitValue64, uint64_t);
        break;
    case OP_WRITE32:
        HFC_CALL(cuStreamWriteValue32_v2, cuStreamWriteValue32, uint32_t);
        break;
    case OP_WRITE64:
        HFC_CALL(cuStreamWriteValue64_v2, cuStreamWriteValue64, uint64_t);
        break;
    }
#undef HFC_CALL
    drv_leave(previous);
    if (status != hipSuccess)
        return status;
    return from_cu(r);
}

HFC_EXPORT hipError_t hipStreamWaitValue32(hipStream_t stream, void *ptr, uint32_t value,
                                           unsigned flags, uint32_t mask)
{
    return stream_mem(OP_WAIT32, stream, ptr, value, flags, mask);
}

HFC_EXPORT hipError_t hipStreamWaitValue64(hipStream_t stream, void *ptr, uint64_t value,
                                           unsigned flags, uint64_t mask)
{
    return stream_mem(OP_WAIT64, stream, ptr, value, flags, mask);
}

HFC_EXPORT hipError_t hipStreamWriteValue32(hipStream_t stream, void *ptr, uint32_t value,
                                            unsigned flags)
{
    return stream_mem(OP_WRITE32, stream, ptr, value, flags, 0);
}

HFC_EXPORT hipError_t hipStreamWriteValue64(hipStream_t stream, void *ptr, uint64_t value,
                                            unsigned flags)
{
    return stream_mem(OP_WRITE64, stream, ptr, value, flags, 0);
}

/* hipMemGetAddressRange is cuMemGetAddressRange of libcuda (the runtime API
 * has no counterpart), called in the current device's primary context;
 * memory CUDA did not allocate answers CUDA_ERROR_NOT_FOUND, which is
 * hipErrorNotFound (500) as on ROCm. */
HFC_EXPORT hipError_t hipMemGetAddressRange(hipDeviceptr_t *base, size_t *size,
                                            hipDeviceptr_t ptr)
{
    const struct hfc_cudadrv *D;
    CUdeviceptr lo = 0;
    size_t bytes = 0;
    CUresult r;
    int previous = 0;
    hipError_t status;
    if (ptr == NULL || (base == NULL && size == NULL))
        return record(hipErrorInvalidValue);
    D = drv();
    if (D == NULL)
        return record(hipErrorNotSupported);
    if (D->cuMemGetAddressRange_v2 == NULL)
        return missing("cuMemGetAddressRange_v2");
    status = drv_enter(NULL, &previous);
    if (status != hipSuccess)
        return record(status);
    r = D->cuMemGetAddressRange_v2(&lo, &bytes, (CUdeviceptr)(uintptr_t)ptr);
    drv_leave(previous);
    if (r != CUDA_SUCCESS)
        return from_cu(r);
    if (base != NULL)
        *base = (hipDeviceptr_t)(uintptr_t)lo;
    if (size != NULL)
        *size = bytes;
    return hipSuccess;
}

/* Default, fine-grained and uncached memory are all cudaMalloc memory (CUDA
 * has no coarse/fine-grained distinction for device memory). Signal memory
 * is 8 bytes, as AMD's runtime requires, of cudaMalloc memory, which the
 * stream memory operations accept; it is zeroed on a private non-blocking
 * stream, so that streams blocked in waits never hold the allocation up. */
HFC_EXPORT hipError_t hipExtMallocWithFlags(void **ptr, size_t size, unsigned flags)
{
    cudaStream_t zero_stream = NULL;
    cudaError_t e;
    if (ptr == NULL)
        return record(hipErrorInvalidValue);
    *ptr = NULL;
    switch (flags) {
    case hipDeviceMallocDefault:
    case hipDeviceMallocFinegrained:
    case hipDeviceMallocUncached:
        return hipMalloc(ptr, size);
    case hipMallocSignalMemory:
        if (size != 8)
            return record(hipErrorInvalidValue);
        break;
    default:
        return record(hipErrorInvalidValue);
    }
    {
        NEED(cudaMalloc);
        if (R->cudaStreamCreateWithFlags == NULL || R->cudaMemsetAsync == NULL ||
            R->cudaStreamSynchronize == NULL || R->cudaStreamDestroy == NULL ||
            R->cudaFree == NULL)
            return missing("cudaMemsetAsync");
        e = R->cudaMalloc(ptr, size);
        if (e != cudaSuccess) {
            *ptr = NULL;
            return from_cuda(e);
        }
        e = R->cudaStreamCreateWithFlags(&zero_stream, 0x1 /* cudaStreamNonBlocking */);
        if (e == cudaSuccess) {
            e = R->cudaMemsetAsync(*ptr, 0, size, zero_stream);
            if (e == cudaSuccess)
                e = R->cudaStreamSynchronize(zero_stream);
            R->cudaStreamDestroy(zero_stream);
        }
        if (e != cudaSuccess) {
            R->cudaFree(*ptr);
            *ptr = NULL;
            return from_cuda(e);
        }
        return hipSuccess;
    }
}

/* ---- device attributes ---------------------------------------------------- */

/* Only the attributes the platform needs are answered; HIP's numbering
 * differs from CUDA's, so others are not passed through. */
HFC_EXPORT hipError_t hipDeviceGetAttribute(int *value, int attribute, int device)
{
    const struct hfc_cudadrv *D;
    CUdevice dev = 0;
    CUresult r;
    int count = 0, wide = 0, nor = 0, ops = 1;
    cudaError_t e;
    if (value == NULL)
        return record(hipErrorInvalidValue);
    {
        NEED(cudaGetDeviceCount);
        e = R->cudaGetDeviceCount(&count);
        if (e != cudaSuccess)
            return from_cuda(e);
    }
    if (device < 0 || device >= count)
        return record(hipErrorInvalidDevice);
    if (attribute != HIP_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE)
        return record(hipErrorNotSupported);
    /* 1 when 32- and 64-bit waits and every compare (NOR included) work. */
    *value = 0;
    D = drv();
    if (D == NULL)
        return hipSuccess; /* no driver API: no stream memory operations */
    r = D->cuDeviceGet(&dev, device);
    if (r != CUDA_SUCCESS)
        return from_cu(r);
    if (D->cuStreamWaitValue32_v2 != NULL && D->cuStreamWaitValue64_v2 != NULL) {
        r = D->cuDeviceGetAttribute(&wide, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                                    dev);
        if (r == CUDA_SUCCESS)
            r = D->cuDeviceGetAttribute(&nor, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR,
                                        dev);
    } else if (D->cuStreamWaitValue32 != NULL && D->cuStreamWaitValue64 != NULL) {
        r = D->cuDeviceGetAttribute(&ops, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, dev);
        if (r == CUDA_SUCCESS)
            r = D->cuDeviceGetAttribute(&wide,
                                        CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1, dev);
        if (r == CUDA_SUCCESS)
            r = D->cuDeviceGetAttribute(&nor,
                                        CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1, dev);
    } else {
        return hipSuccess;
    }
    if (r != CUDA_SUCCESS)
        return from_cu(r);
    *value = ops && wide && nor;
    return hipSuccess;
}
