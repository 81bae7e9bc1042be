/* libamdhip64.so of the cuda test platform: allocation, copies, fills and
 * pointer queries over the CUDA runtime (and libcuda for address ranges). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hip_private.h"

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
    static int version = -1;   /* the runtime's, asked once */
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
    if (__atomic_load_n(&version, __ATOMIC_ACQUIRE) < 0) {
        int v = 0;
        if (R->cudaRuntimeGetVersion(&v) != 0)
            v = 0;
        __atomic_store_n(&version, v, __ATOMIC_RELEASE);
    }
    if (__atomic_load_n(&version, __ATOMIC_ACQUIRE) >= 13000)
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

