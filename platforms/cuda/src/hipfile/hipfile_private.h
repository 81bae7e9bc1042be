/* libhipfile.so of the cuda test platform: the hipFile C ABI implemented
 * over NVIDIA's cuFile (GPUDirect Storage), which is opened at run time.
 *
 * This is not AMD's hipFile. hipFile handles are cuFile handles, hipStream_t
 * is a CUDA stream, and hipFile's error numbers equal cuFile's up to 5038;
 * newer cuFile codes are folded into the nearest hipFile code.
 *
 * The platform keeps its own record of registered file handles, buffers,
 * batches and streams, so that a stale or foreign handle gives an error code
 * instead of reaching cuFile, and so that the last hipFileDriverClose drops
 * every registration as hipFile does. Unlike cuFile, which opens itself at
 * the first call, every call that needs the driver reports
 * hipFileDriverNotInitialized until hipFileDriverOpen has succeeded.
 *
 * The library's sources, by concern:
 *   cufile.c   loading cuFile, error numbers, versions and messages
 *   driver.c   records of live registrations, the driver, parameters
 *   io.c       file handles, buffers, synchronous and stream-ordered I/O
 *   batch.c    batch I/O
 * This header is what they share; it is private to the platform. */
#ifndef HIPFILE_CUDA_HIPFILE_PRIVATE_H
#define HIPFILE_CUDA_HIPFILE_PRIVATE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "../cufile_abi.h"
#include "../hip_errors.h"
#include "../hipfile_abi.h"
#include "../loader.h"

/* The version of the hipFile ABI this library provides: every function of
 * hipFile 0.2.0 (the Stats functions of 0.5.0 are absent). */
#define HFC_VERSION_MAJOR 0u
#define HFC_VERSION_MINOR 2u
#define HFC_VERSION_PATCH 0u

/* One synchronous call moves at most this many bytes, as hipFile does. */
#define HFC_MAX_IO 0x7ffff000ul

HFC_EXPORT hipFileError_t hipFileDriverOpen(void);

/* ---- cufile.c ------------------------------------------------------------ */

/* cuFile's function table, loaded on first use; NULL when cuFile cannot be
 * used here (the reason was printed on stderr). */
HFC_HIDDEN const struct hfc_cufile *cf(void);
/* The file cuFile was loaded from, and the configuration it was pointed at. */
extern HFC_HIDDEN char cf_path[4096];
extern HFC_HIDDEN char cf_json[4096];

static inline hipFileError_t make_error(int err)
{
    hipFileError_t r = {err, hipSuccess};
    return r;
}

static const hipFileError_t ok = {hipFileSuccess, hipSuccess};

/* cuFile's error numbers as hipFile's: an operation code, a CUfileError_t,
 * and an ssize_t count (errno is left as cuFile set it for -1). */
HFC_HIDDEN int op_from_cufile(int e);
HFC_HIDDEN hipFileError_t from_cufile(CUfileError_t e);
HFC_HIDDEN ssize_t from_cufile_count(ssize_t r);
/* hipFilePlatformNotSupported: cuFile could not be loaded. */
HFC_HIDDEN hipFileError_t not_loaded(void);
/* hipFileInternalError, saying once that cuFile lacks `name`. */
HFC_HIDDEN hipFileError_t missing(const char *name);

/* Fetch cuFile's table as F and check that it has `fn`, or return the error. */
#define NEED(fn)                                                                           \
    const struct hfc_cufile *F = cf();                                                     \
    if (F == NULL)                                                                         \
        return not_loaded();                                                               \
    if (F->fn == NULL)                                                                     \
    return missing(#fn)

/* NEED, and an explicit hipFileDriverOpen. */
#define NEED_OPEN(fn)                                                                      \
    NEED(fn);                                                                              \
    if (!driver_is_open())                                                                 \
    return make_error(hipFileDriverNotInitialized)

/* ---- driver.c ------------------------------------------------------------ */

struct ptr_set {
    void **items;
    size_t count, cap;
};

/* reg_lock guards the four sets. */
extern HFC_HIDDEN pthread_mutex_t reg_lock;
extern HFC_HIDDEN struct ptr_set handles, batches, streams, buffers;

/* hipFileDriverOpen/Close reference count of this process is above 0. */
HFC_HIDDEN int driver_is_open(void);
/* Room for one more item of `size` bytes in `items`, an array of `count`
 * items and capacity *cap: the array itself, or one moved and grown
 * (doubling *cap, 16 at first), or NULL (no memory; `items` is as it was). */
HFC_HIDDEN void *hfc_grow(void *items, size_t count, size_t *cap, size_t size);
/* Set operations; the caller holds reg_lock. set_find gives the index or
 * -1, set_add 0 or -1 (no memory), set_remove whether p was there. */
HFC_HIDDEN int set_find(const struct ptr_set *s, const void *p);
HFC_HIDDEN int set_add(struct ptr_set *s, void *p);
/* Whether p is in s (takes reg_lock). */
HFC_HIDDEN int is_registered(struct ptr_set *s, const void *p);
/* Ends in cuFile one registration of the kind that set `s` holds. */
HFC_HIDDEN void cufile_release(const struct hfc_cufile *F, const struct ptr_set *s, void *p);
/* Records a registration that cuFile has just accepted: 0, or -1 (after
 * ending the registration in cuFile again) when the set cannot grow. */
HFC_HIDDEN int track(const struct hfc_cufile *F, struct ptr_set *s, void *p);
/* Forgets a registration; returns whether it was known. */
HFC_HIDDEN int forget(struct ptr_set *s, const void *p);
/* The first handle or buffer registration opens the driver implicitly. */
HFC_HIDDEN hipFileError_t implicit_open(const struct hfc_cufile *F);

#define NEED_IMPLICIT_OPEN(fn)                                                             \
    NEED(fn);                                                                              \
    do {                                                                                   \
        hipFileError_t opened = implicit_open(F);                                          \
        if (opened.err != hipFileSuccess)                                                  \
            return opened;                                                                 \
    } while (0)

/* ---- io.c ---------------------------------------------------------------- */

/* Forget a deregistered buffer's ordering of stream-ordered operations. */
HFC_HIDDEN void order_forget(const void *base);

#endif
