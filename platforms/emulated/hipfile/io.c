/* Synchronous and stream-ordered I/O, and stream registration, of the
 * emulated libhipfile.so. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "hipfile_internal.h"

static int aligned(uintptr_t v) { return v % EMU_DIRECT_ALIGN == 0; }

static ssize_t do_io(emu_handle_t *h, int is_write, char *buf, size_t size, off_t off,
                     size_t short_max, int *err, int *fast);

ssize_t emu_do_io(emu_handle_t *h, int is_write, char *buf, size_t size, off_t off,
                  size_t short_max, int *err)
{
    int fast = 0;
    uint64_t t0 = emu_stats_clock();
    ssize_t r = do_io(h, is_write, buf, size, off, short_max, err, &fast);
    emu_stats_record_io(is_write, fast, buf, size, off, r, emu_stats_clock() - t0);
    return r;
}

/* *fast: the transfer went by O_DIRECT on the caller's descriptor. */
static ssize_t do_io(emu_handle_t *h, int is_write, char *buf, size_t size, off_t off,
                     size_t short_max, int *err, int *fast)
{
    /* O_DIRECT wants aligned addresses, offsets and sizes; everything else
     * takes the buffered descriptor, as does a direct transfer that the
     * file system refuses with EINVAL. */
    int use_direct = h->direct && aligned((uintptr_t)buf) && aligned((uintptr_t)off) &&
                     aligned(size);
    size_t done = 0;
    *fast = use_direct;
    while (done < size) {
        size_t chunk = size - done;
        if (short_max != 0 && chunk > short_max)
            chunk = short_max;
        int fd = use_direct ? h->fd : h->buffered_fd;
        ssize_t n = is_write ? pwrite(fd, buf + done, chunk, off + (off_t)done)
                             : pread(fd, buf + done, chunk, off + (off_t)done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (use_direct && errno == EINVAL) {
                use_direct = 0;
                *fast = 0;
                continue;
            }
            if (done > 0)
                break;
            *err = errno;
            return -1;
        }
        if (n == 0)
            break; /* end of file */
        done += (size_t)n;
        if (short_max != 0)
            break; /* one transfer only: the caller sees a short count */
    }
    return (ssize_t)done;
}

/* Offsets and sizes that fit: non-negative and no overflow of the end. */
static int offsets_ok(hoff_t file_offset, hoff_t buffer_offset, size_t size)
{
    return file_offset >= 0 && buffer_offset >= 0 && size <= (uint64_t)(INT64_MAX - file_offset);
}

static ssize_t sync_io(int is_write, hipFileHandle_t fh, const void *buffer_base, size_t size,
                       hoff_t file_offset, hoff_t buffer_offset)
{
    pthread_mutex_lock(&emu_lock);
    int open = emu_driver_is_open_locked();
    emu_handle_t *h = open ? emu_handle_acquire_locked(fh) : NULL;
    pthread_mutex_unlock(&emu_lock);
    if (!open) {
        errno = EINVAL;
        return -1;
    }
    if (h == NULL)
        return -(ssize_t)hipFileHandleNotRegistered;

    ssize_t r;
    int err = 0;
    if (size > EMU_MAX_IO_SIZE)
        size = EMU_MAX_IO_SIZE;
    if (file_offset < 0 || buffer_offset < 0) {
        r = -(ssize_t)hipFileInvalidValue; /* as AMD's library answers */
    } else if (!offsets_ok(file_offset, buffer_offset, size)) {
        r = -1;
        err = EINVAL;
    } else {
        hipFileOpError_t e =
            emu_check_device_range(buffer_base, buffer_offset, size, NULL, NULL, NULL);
        int fault;
        if (e == hipFileHipPointerRangeError)
            e = hipFileInvalidValue; /* a bad size or offset, as AMD's library answers */
        if (e != hipFileSuccess)
            r = -(ssize_t)e;
        else if ((fault = emu_fault_take(is_write ? HIPFILE_EMU_OP_WRITE : HIPFILE_EMU_OP_READ)))
            r = emu_fault_result(fault, &err);
        else {
            /* The copy into device memory goes through the runtime: it
             * waits while a hipFree holds the runtime for its device-wide
             * synchronisation (hipEmuRuntimeEnter). */
            hipEmuRuntimeEnter();
            r = emu_do_io(h, is_write, (char *)buffer_base + buffer_offset, size, file_offset,
                          emu_short_transfer(), &err);
            hipEmuRuntimeLeave();
        }
    }
    emu_handle_release(h);
    if (r == -1)
        errno = err;
    return r;
}

EMU_EXPORT ssize_t hipFileRead(hipFileHandle_t fh, void *buffer_base, size_t size,
                               hoff_t file_offset, hoff_t buffer_offset)
{
    return sync_io(0, fh, buffer_base, size, file_offset, buffer_offset);
}

EMU_EXPORT ssize_t hipFileWrite(hipFileHandle_t fh, const void *buffer_base, size_t size,
                                hoff_t file_offset, hoff_t buffer_offset)
{
    return sync_io(1, fh, buffer_base, size, file_offset, buffer_offset);
}

/* Stream registrations. */
typedef struct emu_stream_reg {
    struct emu_stream_reg *next;
    hipStream_t stream;
    unsigned flags;
} emu_stream_reg_t;

static emu_stream_reg_t *streams;

static emu_stream_reg_t *stream_find_locked(hipStream_t stream)
{
    for (emu_stream_reg_t *s = streams; s != NULL; s = s->next)
        if (s->stream == stream)
            return s;
    return NULL;
}

EMU_EXPORT hipFileError_t hipFileStreamRegister(hipStream_t stream, unsigned flags)
{
    int device;
    if ((flags & ~HIPFILE_STREAM_FLAGS_MASK) != 0 || hipEmuStreamDevice(stream, &device) != 0)
        return emu_err(hipFileInvalidValue);
    emu_stream_reg_t *rec = calloc(1, sizeof(*rec));
    if (rec == NULL)
        return emu_err(hipFileInternalError);
    rec->stream = stream;
    rec->flags = flags;
    pthread_mutex_lock(&emu_lock);
    hipFileOpError_t e = stream_find_locked(stream) != NULL ? hipFileInvalidValue : hipFileSuccess;
    int fault = emu_register_fault(e);
    if (e == hipFileSuccess && !fault) {
        rec->next = streams;
        streams = rec;
        emu_counters.streams_registered++;
    }
    pthread_mutex_unlock(&emu_lock);
    return emu_register_result(e, fault, rec);
}

EMU_EXPORT hipFileError_t hipFileStreamDeregister(hipStream_t stream)
{
    int removed = 0;
    pthread_mutex_lock(&emu_lock);
    EMU_SLIST_REMOVE(emu_stream_reg_t, streams, stream, stream, removed);
    if (removed)
        emu_counters.streams_registered--;
    pthread_mutex_unlock(&emu_lock);
    return emu_err(removed ? hipFileSuccess : hipFileInvalidValue);
}

/* One stream-ordered operation, from submit until its host function ran. */
typedef struct emu_async_op {
    emu_handle_t *h;
    int is_write;
    char *base;
    uintptr_t alloc_hi; /* end of the allocation found at submit */
    unsigned flags;               /* of the stream registration, 0 if none */
    size_t *size_p;
    hoff_t *file_offset_p;
    hoff_t *buffer_offset_p;
    ssize_t *bytes_p;
    size_t size0; /* values read at submit */
    hoff_t file_offset0;
    hoff_t buffer_offset0;
    int fault;
    size_t short_max;
    unsigned long long delay_us;
} emu_async_op_t;

static int page_aligned_inputs(size_t size, hoff_t file_offset, hoff_t buffer_offset)
{
    return aligned(size) && aligned((uintptr_t)file_offset) && aligned((uintptr_t)buffer_offset);
}

/* Runs on the stream's worker, in stream order. Slots without a FIXED flag
 * are read now; the result is written last, after the completion delay. */
static void async_run(void *arg)
{
    emu_async_op_t *op = arg;
    emu_sleep_us(op->delay_us);
    size_t size = (op->flags & HIPFILE_STREAM_FIXED_FILE_SIZE) ? op->size0 : *op->size_p;
    hoff_t foff = (op->flags & HIPFILE_STREAM_FIXED_FILE_OFFSET) ? op->file_offset0
                                                                  : *op->file_offset_p;
    hoff_t boff = (op->flags & HIPFILE_STREAM_FIXED_BUF_OFFSET) ? op->buffer_offset0
                                                                 : *op->buffer_offset_p;
    ssize_t r;
    int err = 0;
    if (size > op->size0)
        size = SIZE_MAX; /* grew after submit: rejected below */
    else if (size > EMU_MAX_IO_SIZE)
        size = EMU_MAX_IO_SIZE;
    uintptr_t start = (uintptr_t)op->base + (uintptr_t)boff;
    if (size == SIZE_MAX || !offsets_ok(foff, boff, size) ||
        ((op->flags & HIPFILE_STREAM_PAGE_ALIGNED_INPUTS) &&
         !page_aligned_inputs(size, foff, boff)) ||
        (uint64_t)boff > op->alloc_hi - (uintptr_t)op->base || size > op->alloc_hi - start) {
        r = -(ssize_t)hipFileInvalidValue;
    } else if (op->fault) {
        r = emu_fault_result(op->fault, &err);
    } else {
        r = emu_do_io(op->h, op->is_write, (char *)start, size, foff, op->short_max, &err);
    }
    *op->bytes_p = r;
    pthread_mutex_lock(&emu_lock);
    emu_handle_release_locked(op->h);
    emu_counters.inflight--;
    pthread_cond_broadcast(&emu_cond);
    pthread_mutex_unlock(&emu_lock);
    free(op);
}

static hipFileError_t async_submit(int is_write, hipFileHandle_t fh, void *buffer_base,
                                   size_t *size_p, hoff_t *file_offset_p,
                                   hoff_t *buffer_offset_p, ssize_t *bytes_p,
                                   hipStream_t stream)
{
    /* The driver opens before the arguments are checked, as in AMD's library. */
    if (emu_driver_implicit_open() != 0)
        return emu_err(hipFileDriverClosing);
    if (buffer_base == NULL || size_p == NULL || file_offset_p == NULL ||
        buffer_offset_p == NULL || bytes_p == NULL)
        return emu_err(hipFileInvalidValue);
    pthread_mutex_lock(&emu_lock);
    int open = emu_driver_is_open_locked();
    emu_handle_t *h = open ? emu_handle_acquire_locked(fh) : NULL;
    emu_stream_reg_t *reg = h ? stream_find_locked(stream) : NULL;
    unsigned flags = reg ? reg->flags : 0;
    pthread_mutex_unlock(&emu_lock);
    if (!open)
        return emu_err(hipFileDriverNotInitialized);
    if (h == NULL)
        return emu_err(hipFileHandleNotRegistered);

    size_t size = *size_p;
    hoff_t foff = *file_offset_p, boff = *buffer_offset_p;
    size_t csize = size > EMU_MAX_IO_SIZE ? EMU_MAX_IO_SIZE : size;
    uintptr_t hi = 0;
    int buf_dev = 0, stream_dev = 0;
    hipFileOpError_t e = hipFileSuccess;
    if (!offsets_ok(foff, boff, csize) ||
        ((flags & HIPFILE_STREAM_PAGE_ALIGNED_INPUTS) && !page_aligned_inputs(size, foff, boff)))
        e = hipFileInvalidValue;
    if (e == hipFileSuccess) {
        e = emu_check_device_range(buffer_base, boff, csize, NULL, &hi, &buf_dev);
        if (e == hipFileHipPointerRangeError)
            e = hipFileInvalidValue; /* a bad size or offset */
    }
    /* An unknown stream is left to hipLaunchHostFunc to report. */
    /* A buffer on another device than the stream: InvalidValue, as AMD's
     * library answers (seen with two devices). */
    if (e == hipFileSuccess && hipEmuStreamDevice(stream, &stream_dev) == 0 &&
        stream_dev != buf_dev)
        e = hipFileInvalidValue;
    emu_async_op_t *op = NULL;
    if (e == hipFileSuccess && (op = calloc(1, sizeof(*op))) == NULL)
        e = hipFileInternalError;
    if (e != hipFileSuccess) {
        emu_handle_release(h);
        return emu_err(e);
    }
    op->h = h;
    op->is_write = is_write;
    op->base = buffer_base;
    op->alloc_hi = hi;
    op->flags = flags;
    op->size_p = size_p;
    op->file_offset_p = file_offset_p;
    op->buffer_offset_p = buffer_offset_p;
    op->bytes_p = bytes_p;
    op->size0 = size;
    op->file_offset0 = foff;
    op->buffer_offset0 = boff;
    op->fault = emu_fault_take(is_write ? HIPFILE_EMU_OP_WRITE_ASYNC : HIPFILE_EMU_OP_READ_ASYNC);
    op->short_max = emu_short_transfer();
    op->delay_us = emu_completion_delay();
    *bytes_p = 0;

    pthread_mutex_lock(&emu_lock);
    emu_counters.inflight++;
    pthread_mutex_unlock(&emu_lock);
    hipError_t herr = hipLaunchHostFunc(stream, async_run, op);
    if (herr != 0) {
        pthread_mutex_lock(&emu_lock);
        emu_counters.inflight--;
        emu_handle_release_locked(h);
        pthread_mutex_unlock(&emu_lock);
        free(op);
        hipFileError_t r = {hipFileHipDriverError, herr};
        return r;
    }
    return emu_err(hipFileSuccess);
}

EMU_EXPORT hipFileError_t hipFileReadAsync(hipFileHandle_t fh, void *buffer_base, size_t *size_p,
                                           hoff_t *file_offset_p, hoff_t *buffer_offset_p,
                                           ssize_t *bytes_read_p, hipStream_t stream)
{
    return async_submit(0, fh, buffer_base, size_p, file_offset_p, buffer_offset_p, bytes_read_p,
                        stream);
}

EMU_EXPORT hipFileError_t hipFileWriteAsync(hipFileHandle_t fh, void *buffer_base, size_t *size_p,
                                            hoff_t *file_offset_p, hoff_t *buffer_offset_p,
                                            ssize_t *bytes_written_p, hipStream_t stream)
{
    return async_submit(1, fh, buffer_base, size_p, file_offset_p, buffer_offset_p,
                        bytes_written_p, stream);
}
