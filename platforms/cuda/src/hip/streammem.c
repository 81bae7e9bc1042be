/* libamdhip64.so of the cuda test platform: what needs the CUDA driver API
 * (libcuda), loaded on first use: the stream memory operations and the
 * 32-bit fill here, and the address ranges of memory.c. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "hip_private.h"

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

static const char *const drv_sonames[] = {"libcuda.so.1", "libcuda.so", NULL};
static const struct hfc_search drv_search = {"the CUDA driver (libcuda)",
                                             "HIPFILE_LIBCUDA_LIBRARY", drv_sonames, "cuInit"};
#define HFC_DRV_FIELD(name, ret, params, required) HFC_FIELD(hfc_cudadrv, name, required)
static const struct hfc_field drv_fields[] = {HFC_CUDA_DRIVER_FUNCS(HFC_DRV_FIELD)};
#undef HFC_DRV_FIELD

/* The driver API is used once cuInit has succeeded. */
static int drv_ready(const void *table)
{
    const struct hfc_cudadrv *D = table;
    return D->cuInit != NULL && D->cuInit(0) == CUDA_SUCCESS;
}

HFC_LIBRARY_TABLE(hfc_cudadrv, drv, drv_search, drv_fields, drv_ready,
                  "libamdhip64 uses the CUDA driver %s for stream memory operations")

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

hipError_t drv_enter(hipStream_t stream, int *previous)
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

void drv_leave(int previous)
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
    /* The operation's function of libcuda: the _v2 symbol where the driver
     * has it, else the original; the 32- and 64-bit ones differ in the type
     * of the value, a wait and a write of one width share their signature. */
#define HFC_NEWEST(name) (D->name##_v2 != NULL ? D->name##_v2 : D->name)
    if (wide) {
        hfc_cuStreamWaitValue64_fn fn = wait ? HFC_NEWEST(cuStreamWaitValue64)
                                             : HFC_NEWEST(cuStreamWriteValue64);
        if (fn != NULL)
            r = fn((CUstream)stream, (CUdeviceptr)(uintptr_t)ptr, value, flags);
        else
            status = missing(wait ? "cuStreamWaitValue64_v2" : "cuStreamWriteValue64_v2");
    } else {
        hfc_cuStreamWaitValue32_fn fn = wait ? HFC_NEWEST(cuStreamWaitValue32)
                                             : HFC_NEWEST(cuStreamWriteValue32);
        if (fn != NULL)
            r = fn((CUstream)stream, (CUdeviceptr)(uintptr_t)ptr, (uint32_t)value, flags);
        else
            status = missing(wait ? "cuStreamWaitValue32_v2" : "cuStreamWriteValue32_v2");
    }
#undef HFC_NEWEST
    drv_leave(previous);
    if (status != hipSuccess)
        return status;
    return from_cu(r);
}

/* The four exports, hipStream{Wait,Write}Value{32,64}: a write takes no mask. */
#define HFC_WAIT_VALUE(bits)                                                               \
    HFC_EXPORT hipError_t hipStreamWaitValue##bits(hipStream_t stream, void *ptr,          \
                                                   uint##bits##_t value, unsigned flags,   \
                                                   uint##bits##_t mask)                    \
    {                                                                                      \
        return stream_mem(OP_WAIT##bits, stream, ptr, value, flags, mask);                 \
    }
#define HFC_WRITE_VALUE(bits)                                                              \
    HFC_EXPORT hipError_t hipStreamWriteValue##bits(hipStream_t stream, void *ptr,         \
                                                    uint##bits##_t value, unsigned flags)  \
    {                                                                                      \
        return stream_mem(OP_WRITE##bits, stream, ptr, value, flags, 0);                   \
    }
HFC_WAIT_VALUE(32)
HFC_WAIT_VALUE(64)
HFC_WRITE_VALUE(32)
HFC_WRITE_VALUE(64)
#undef HFC_WAIT_VALUE
#undef HFC_WRITE_VALUE

/* hipMemsetD32Async: cuMemsetD32Async of libcuda (the runtime API has no
 * 32-bit fill), on the stream's device. */
HFC_EXPORT hipError_t hipMemsetD32Async(void *dst, int value, size_t count, hipStream_t stream)
{
    const struct hfc_cudadrv *D;
    int previous = 0;
    hipError_t status;
    CUresult r;
    if (count == 0)
        return hipSuccess;
    if (dst == NULL || ((uintptr_t)dst & 3u) != 0)
        return record(hipErrorInvalidValue);
    D = drv();
    if (D == NULL || D->cuMemsetD32Async == NULL)
        return record(hipErrorNotSupported);
    status = drv_enter(stream, &previous);
    if (status != hipSuccess)
        return record(status);
    r = D->cuMemsetD32Async((CUdeviceptr)(uintptr_t)dst, (unsigned)value, count, (CUstream)stream);
    drv_leave(previous);
    return from_cu(r);
}
