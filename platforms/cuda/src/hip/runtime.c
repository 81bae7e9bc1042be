/* libamdhip64.so of the cuda test platform: loading the CUDA runtime, the
 * last error, initialisation, devices and their attributes, error names. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hip_private.h"

/* ---- loading the CUDA runtime ------------------------------------------ */

int hfc_load_table(const struct hfc_search *search, void *table, const struct hfc_field *fields,
                   size_t n, int (*ready)(const void *table), const char *message)
{
    char path[4096];
    void *lib = hfc_open(search, path, sizeof path);
    if (lib == NULL)
        return 0;
    for (size_t i = 0; i < n; i++) {
        void *slot = (char *)table + fields[i].offset, *p;
        hfc_sym(lib, fields[i].name, slot);
        memcpy(&p, slot, sizeof p);
        if (fields[i].required && p == NULL)
            hfc_say("%s lacks %s; hip functions that need it return hipErrorNotSupported",
                    path, fields[i].name);
    }
    if (ready != NULL && !ready(table))
        return 0;
    if (hfc_verbose())
        hfc_say(message, path);
    return 1;
}

static const char *const rt_sonames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so",
                                          NULL};
static const struct hfc_search rt_search = {"the CUDA runtime (libcudart)",
                                            "HIPFILE_CUDART_LIBRARY", rt_sonames,
                                            "cudaGetDeviceCount"};
#define HFC_RT_FIELD(name, ret, params, required) HFC_FIELD(hfc_cudart, name, required)
static const struct hfc_field rt_fields[] = {HFC_CUDART_FUNCS(HFC_RT_FIELD)};
#undef HFC_RT_FIELD

HFC_LIBRARY_TABLE(hfc_cudart, rt, rt_search, rt_fields, NULL,
                  "libamdhip64 uses the CUDA runtime %s")

/* ---- last error, per thread, as HIP keeps it --------------------------- */

_Thread_local hipError_t last_error = hipSuccess;

hipError_t missing(const char *name)
{
    static int told;
    hfc_say_once(&told, "the CUDA runtime lacks %s (first missing function)", name);
    return record(hipErrorNotSupported);
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
    return hip_error_name(error);
}

HFC_EXPORT const char *hipGetErrorString(hipError_t error)
{
    return hip_error_string(error);
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

HFC_HIDDEN void clear_cuda_error(void)
{
    const struct hfc_cudart *R = rt();
    if (R && R->cudaGetLastError)
        R->cudaGetLastError();
}
