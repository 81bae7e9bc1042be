/* libamdhip64.so of the cuda test platform: a subset of the HIP runtime API
 * implemented over NVIDIA's CUDA runtime, which is opened at run time.
 *
 * This is not AMD's HIP runtime. Handles are shared with CUDA: a hipStream_t
 * is a cudaStream_t, a hipEvent_t a cudaEvent_t, device pointers are CUDA Errors come back as hipError_t numbers.
 *
 * The library's sources, by concern:
 *   runtime.c    loading the CUDA runtime, the last error, initialisation,
 *                devices and their attributes, error names
 *   memory.c     allocation, copies, fills, pointer queries
 *   streams.c    streams, host functions and events
 *   streammem.c  the CUDA driver API (libcuda): stream memory operations
 *                and address ranges
 * This header is what they share; it is private to the platform. */
#ifndef HIPFILE_CUDA_HIP_PRIVATE_H
#define HIPFILE_CUDA_HIP_PRIVATE_H

#include <pthread.h>
#include <stddef.h>

#include "../cudadrv_abi.h"
#include "../cudart_abi.h"
#include "../hip_abi.h"
#include "../hip_errors.h"
#include "../loader.h"

/* ---- runtime.c ----------------------------------------------------------- */

/* One function of a library's function table: its name, its slot in the
 * table, and whether a missing one is named on stderr. */
struct hfc_field {
    const char *name;
    size_t offset;
    int required;
};
#define HFC_FIELD(table_type, name, required) {#name, offsetof(struct table_type, name), required},

/* Opens the library that `search` describes and resolves `fields` into
 * `table`; then, when `ready` (may be NULL) accepts the table, says
 * `message` (a format taking the library's path) when HIPFILE_CUDA_VERBOSE
 * is set. Returns whether the table can be used. */
HFC_HIDDEN int hfc_load_table(const struct hfc_search *search, void *table,
                              const struct hfc_field *fields, size_t n,
                              int (*ready)(const void *table), const char *message);

/* Defines `const struct TYPE *GETTER(void)`: the function table TYPE of a
 * library (hfc_load_table's arguments), loaded once, on first use; NULL
 * when it cannot be used. GETTER##_loaded is the table once loaded (NULL
 * before), for callers that must not load it. */
#define HFC_LIBRARY_TABLE(TYPE, GETTER, SEARCH, FIELDS, READY, MESSAGE)                    \
    static struct TYPE GETTER##_table;                                                     \
    static const struct TYPE *GETTER##_loaded;                                             \
    static pthread_once_t GETTER##_once = PTHREAD_ONCE_INIT;                               \
    static void GETTER##_load(void)                                                        \
    {                                                                                      \
        if (hfc_load_table(&(SEARCH), &GETTER##_table, FIELDS,                             \
                           sizeof(FIELDS) / sizeof((FIELDS)[0]), READY, MESSAGE))          \
            __atomic_store_n(&GETTER##_loaded, &GETTER##_table, __ATOMIC_RELEASE);         \
    }                                                                                      \
    const struct TYPE *GETTER(void)                                                        \
    {                                                                                      \
        pthread_once(&GETTER##_once, GETTER##_load);                                       \
        return __atomic_load_n(&GETTER##_loaded, __ATOMIC_ACQUIRE);                        \
    }

/* The CUDA runtime's function table, loaded on first use; NULL when it
 * cannot be loaded (the reason was printed on stderr). */
HFC_HIDDEN const struct hfc_cudart *rt(void);

/* The calling thread's last error, as HIP keeps it. */
extern HFC_HIDDEN _Thread_local hipError_t last_error;

static inline hipError_t record(hipError_t e)
{
    if (e != hipSuccess && e != hipErrorNotReady)
        last_error = e;
    return e;
}

/* Clear the CUDA runtime's own last error (this library keeps HIP's). */
HFC_HIDDEN void clear_cuda_error(void);

/* The HIP error of a CUDA result. A failed call's error is taken out of
 * the CUDA runtime's per-thread last error, so that other users of CUDA in
 * the process (PyTorch checks cudaGetLastError after its own calls) do not
 * find it later as theirs. */
static inline hipError_t from_cuda(cudaError_t e)
{
    if (e != 0)
        clear_cuda_error();
    return record(hfc_hip_from_cuda(e));
}

/* hipErrorNotSupported, saying once that the runtime lacks `name`. */
HFC_HIDDEN hipError_t missing(const char *name);

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

/* ---- streammem.c --------------------------------------------------------- */

/* libcuda's function table, loaded and initialised on first use; NULL when
 * the driver API is not available. */
HFC_HIDDEN const struct hfc_cudadrv *drv(void);

static inline hipError_t from_cu(CUresult e)
{
    return record(hfc_hip_from_cu_result(e));
}

/* Makes the stream's device current with its primary context for a driver
 * call, reporting the device that was current before in *previous; undone
 * by drv_leave. */
HFC_HIDDEN hipError_t drv_enter(hipStream_t stream, int *previous);
HFC_HIDDEN void drv_leave(int previous);

#endif
