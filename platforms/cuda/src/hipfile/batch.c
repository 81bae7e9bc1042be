/* libhipfile.so of the cuda test platform: batch I/O over cuFile's batch
 * API, with a bounded wait the platform paces itself. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hipfile_private.h"

/* ---- batch I/O ----------------------------------------------------------- */

_Static_assert(sizeof(hipFileIOParams_t) == sizeof(CUfileIOParams_t), "batch params");
_Static_assert(offsetof(hipFileIOParams_t, fh) == offsetof(CUfileIOParams_t, fh), "params.fh");
_Static_assert(offsetof(hipFileIOParams_t, opcode) == offsetof(CUfileIOParams_t, opcode),
               "params.opcode");
_Static_assert(offsetof(hipFileIOParams_t, cookie) == offsetof(CUfileIOParams_t, cookie),
               "params.cookie");
_Static_assert(offsetof(hipFileIOParams_t, u.batch.size) ==
                   offsetof(CUfileIOParams_t, u.batch.size),
               "params.size");
_Static_assert(sizeof(hipFileIOEvents_t) == sizeof(CUfileIOEvents_t), "batch events");
_Static_assert(offsetof(hipFileIOEvents_t, ret) == offsetof(CUfileIOEvents_t, ret),
               "events.ret");

HFC_EXPORT hipFileError_t hipFileBatchIOSetUp(hipFileBatchHandle_t *batch, unsigned max_nr)
{
    CUfileBatchHandle_t b = NULL;
    CUfileError_t e;
    if (batch == NULL || max_nr == 0)
        return make_error(hipFileInvalidValue);
    NEED_OPEN(cuFileBatchIOSetUp);
    e = F->cuFileBatchIOSetUp(&b, max_nr);
    if (e.err != CU_FILE_SUCCESS)
        return from_cufile(e);
    if (track(F, &batches, b) != 0)
        return make_error(hipFileInternalError);
    *batch = b;
    return ok;
}

HFC_EXPORT hipFileError_t hipFileBatchIOSubmit(hipFileBatchHandle_t batch, unsigned nr,
                                               hipFileIOParams_t *params, unsigned flags)
{
    NEED_OPEN(cuFileBatchIOSubmit);
    if (batch == NULL || !is_registered(&batches, batch))
        return make_error(hipFileInvalidValue);
    if (nr > 0 && params == NULL)
        return make_error(hipFileInvalidValue);
    for (unsigned i = 0; i < nr; i++) {
        const hipFileIOParams_t *p = &params[i];
        if (p->mode != hipFileBatch ||
            (p->opcode != hipFileBatchRead && p->opcode != hipFileBatchWrite) ||
            p->u.batch.devPtr_base == NULL || p->u.batch.file_offset < 0 ||
            p->u.batch.devPtr_offset < 0)
            return make_error(hipFileInvalidValue);
        if (p->fh == NULL || !is_registered(&handles, p->fh))
            return make_error(hipFileHandleNotRegistered);
    }
    /* hipFile's parameter array has cuFile's layout, and a hipFile handle is
     * a cuFile handle: cuFile reads the caller's array itself, which must
     * stay valid until the entries complete, as hipFile requires. */
    return from_cufile(
        F->cuFileBatchIOSubmit(batch, nr, (CUfileIOParams_t *)(void *)params, flags));
}

/* Whether a bounded wait is left to cuFile (HIPFILE_CUDA_BATCH_WAIT=cufile)
 * rather than done here by polling. */
static int batch_wait_in_cufile(void)
{
    static int cached = -1;
    if (cached < 0) {
        const char *v = getenv("HIPFILE_CUDA_BATCH_WAIT");
        cached = v != NULL && strcmp(v, "cufile") == 0;
    }
    return cached;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A bounded wait for min_nr events: cuFile is only asked for what has
 * completed (min_nr 0, no timeout), and the platform paces the polls itself
 * (again at once while events arrive, else after 16 us doubling to 1 ms)
 * until min_nr events are gathered, the array is full or the deadline
 * passes. cuFile's own handling of a timeout is not relied upon. Events
 * already gathered are returned even if a later poll fails; the failure
 * shows at the next call. */
static CUfileError_t poll_status(const struct hfc_cufile *F, hipFileBatchHandle_t batch,
                                 unsigned min_nr, unsigned *nr, hipFileIOEvents_t *events,
                                 const struct timespec *timeout)
{
    const double deadline = now_s() + (double)timeout->tv_sec + (double)timeout->tv_nsec * 1e-9;
    const unsigned cap = *nr;
    unsigned got = 0;
    long pause_us = 16;
    CUfileError_t e = {CU_FILE_SUCCESS, 0};
    for (;;) {
        unsigned n = cap - got;
        e = F->cuFileBatchIOGetStatus(batch, 0, &n, (CUfileIOEvents_t *)(void *)(events + got),
                                      NULL);
        if (e.err != CU_FILE_SUCCESS) {
            if (got > 0)
                e.err = CU_FILE_SUCCESS;
            break;
        }
        got += n <= cap - got ? n : cap - got;
        if (got >= min_nr || got == cap)
            break;
        double left = deadline - now_s();
        if (left <= 0)
            break;
        if (n > 0) { /* progress: ask again at once */
            pause_us = 16;
            continue;
        }
        long us = (double)pause_us * 1e-6 < left ? pause_us : (long)(left * 1e6) + 1;
        struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
        nanosleep(&ts, NULL);
        if (pause_us < 1000)
            pause_us *= 2;
    }
    *nr = got;
    return e;
}

HFC_EXPORT hipFileError_t hipFileBatchIOGetStatus(hipFileBatchHandle_t batch, unsigned min_nr,
                                                  unsigned *nr, hipFileIOEvents_t *events,
                                                  struct timespec *timeout)
{
    CUfileError_t e;
    NEED_OPEN(cuFileBatchIOGetStatus);
    if (batch == NULL || !is_registered(&batches, batch) || nr == NULL)
        return make_error(hipFileInvalidValue);
    if ((*nr > 0 && events == NULL) || min_nr > *nr)
        return make_error(hipFileInvalidValue);
    if (timeout != NULL && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
                            timeout->tv_nsec >= 1000000000L))
        return make_error(hipFileInvalidValue);
    if (timeout != NULL && *nr > 0 && !batch_wait_in_cufile())
        e = poll_status(F, batch, min_nr, nr, events, timeout);
    else
        e = F->cuFileBatchIOGetStatus(batch, min_nr, nr, (CUfileIOEvents_t *)(void *)events,
                                      timeout);
    if (e.err != CU_FILE_SUCCESS)
        return from_cufile(e);
    for (unsigned i = 0; i < *nr; i++) {
        ssize_t r = (ssize_t)events[i].ret;
        if (r < -1 && -r > 5000 && -r <= CU_FILE_IO_MAX_ERROR)
            events[i].ret = (size_t)(-(ssize_t)op_from_cufile((int)-r));
    }
    return ok;
}

HFC_EXPORT hipFileError_t hipFileBatchIOCancel(hipFileBatchHandle_t batch)
{
    NEED_OPEN(cuFileBatchIOCancel);
    if (batch == NULL || !is_registered(&batches, batch))
        return make_error(hipFileInvalidValue);
    return from_cufile(F->cuFileBatchIOCancel(batch));
}

HFC_EXPORT void hipFileBatchIODestroy(hipFileBatchHandle_t batch)
{
    const struct hfc_cufile *F = cf();
    if (F != NULL && batch != NULL && forget(&batches, batch))
        cufile_release(F, &batches, batch);
}
