/* libhipfile.so of the cuda test platform: file handles, buffers,
 * synchronous I/O and stream-ordered I/O. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hipfile_private.h"

/* ---- tables keyed by pointer ------------------------------------------- */

/* A small table from a pointer (a file handle, a buffer's base) to what
 * the platform keeps for it, with its own lock: the descriptor of each
 * handle registered from one, the last operation on each buffer. */
struct ptr_map_entry {
    const void *key;
    union {
        int fd;
        hipEvent_t event;
    } v;
};
struct ptr_map {
    pthread_mutex_t lock;
    struct ptr_map_entry *entries;
    size_t count, cap;
};
#define PTR_MAP_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0}

/* The entry of `key`, or NULL; the caller holds m->lock (and an entry is
 * valid only while it does: adding may move the entries). */
static struct ptr_map_entry *map_find(struct ptr_map *m, const void *key)
{
    for (size_t i = 0; i < m->count; i++)
        if (m->entries[i].key == key)
            return &m->entries[i];
    return NULL;
}

/* A new entry of `key` (the caller has found none), its value zeroed, or
 * NULL when the table cannot grow; the caller holds m->lock. */
static struct ptr_map_entry *map_add(struct ptr_map *m, const void *key)
{
    struct ptr_map_entry *entries = hfc_grow(m->entries, m->count, &m->cap, sizeof *entries);
    if (entries == NULL)
        return NULL;
    m->entries = entries;
    struct ptr_map_entry *e = &m->entries[m->count++];
    memset(e, 0, sizeof *e);
    e->key = key;
    return e;
}

/* Removes an entry found by map_find; the caller holds m->lock. */
static void map_remove(struct ptr_map *m, struct ptr_map_entry *e)
{
    *e = m->entries[--m->count];
}

/* ---- file handles ------------------------------------------------------ */

/* The descriptor of each handle registered from one (for the end-of-file
 * cut of synchronous reads). */
static struct ptr_map handle_fds = PTR_MAP_INIT;

static void fd_remember(const void *fh, int fd)
{
    pthread_mutex_lock(&handle_fds.lock);
    struct ptr_map_entry *e = map_find(&handle_fds, fh);   /* found: a handle value used again */
    if (e == NULL)
        e = map_add(&handle_fds, fh);   /* NULL: no cut for this handle, cuFile's own result */
    if (e != NULL)
        e->v.fd = fd;
    pthread_mutex_unlock(&handle_fds.lock);
}

static void fd_forget(const void *fh)
{
    pthread_mutex_lock(&handle_fds.lock);
    struct ptr_map_entry *e = map_find(&handle_fds, fh);
    if (e != NULL)
        map_remove(&handle_fds, e);
    pthread_mutex_unlock(&handle_fds.lock);
}

/* The handle's file size, or -1 when it is not known. */
static off_t fd_file_size(const void *fh)
{
    struct stat st;
    pthread_mutex_lock(&handle_fds.lock);
    struct ptr_map_entry *e = map_find(&handle_fds, fh);
    int fd = e != NULL ? e->v.fd : -1;
    pthread_mutex_unlock(&handle_fds.lock);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    return st.st_size;
}

HFC_EXPORT hipFileError_t hipFileHandleRegister(hipFileHandle_t *fh, hipFileDescr_t *descr)
{
    CUfileDescr_t d;
    CUfileHandle_t h = NULL;
    CUfileError_t e;
    if (fh == NULL || descr == NULL)
        return make_error(hipFileInvalidValue);
    if (descr->type < hipFileHandleTypeOpaqueFD || descr->type > hipFileHandleTypeUserspaceFS)
        return make_error(hipFileInvalidValue);
    NEED_IMPLICIT_OPEN(cuFileHandleRegister);
    memset(&d, 0, sizeof d);
    d.type = descr->type; /* the same numbers */
    if (descr->type == hipFileHandleTypeOpaqueFD)
        d.handle.fd = descr->handle.fd;
    else
        d.handle.handle = descr->handle.hFile;
    d.fs_ops = descr->fs_ops;
    e = F->cuFileHandleRegister(&h, &d);
    if (e.err != CU_FILE_SUCCESS) {
        static int told;
        /* cuFile looks each file's block device up in udev's database; a
         * machine where udev does not run has none. */
        if (e.err == hipFileHandleNotRegistered && access("/run/udev/data", F_OK) != 0)
            hfc_say_once(&told, "cuFile could not register a file, and this machine has no "
                                "udev database (/run/udev/data), which cuFile reads; "
                                "platforms/cuda/udev-stub.sh (as root) provides the entries "
                                "it needs");
        return from_cufile(e);
    }
    if (track(F, &handles, h) != 0)
        return make_error(hipFileInternalError);
    if (descr->type == hipFileHandleTypeOpaqueFD)
        fd_remember(h, descr->handle.fd);
    *fh = h;
    return ok;
}

HFC_EXPORT void hipFileHandleDeregister(hipFileHandle_t fh)
{
    const struct hfc_cufile *F = cf();
    if (F != NULL && fh != NULL && forget(&handles, fh)) {
        fd_forget(fh);
        cufile_release(F, &handles, fh);
    }
}

/* ---- buffers and synchronous I/O -------------------------------------- */

HFC_EXPORT hipFileError_t hipFileBufRegister(const void *base, size_t length, int flags)
{
    if (base == NULL || length == 0)
        return make_error(hipFileInvalidValue);
    CUfileError_t e;
    NEED_IMPLICIT_OPEN(cuFileBufRegister);
    e = F->cuFileBufRegister(base, length, flags);
    if (e.err == CU_FILE_SUCCESS && track(F, &buffers, (void *)base) != 0)
        return make_error(hipFileInternalError);
    return from_cufile(e);
}

HFC_EXPORT hipFileError_t hipFileBufDeregister(const void *base)
{
    if (base == NULL)
        return make_error(hipFileInvalidValue);
    CUfileError_t e;
    NEED_OPEN(cuFileBufDeregister);
    e = F->cuFileBufDeregister(base);
    if (e.err == CU_FILE_SUCCESS) {
        forget(&buffers, base);
        order_forget(base);
    }
    return from_cufile(e);
}

/* hipFileRead and hipFileWrite: the checks they share, then one cuFileRead or
 * cuFileWrite of at most HFC_MAX_IO bytes (a write only reads buffer_base). */
static ssize_t sync_io(int is_write, hipFileHandle_t fh, void *buffer_base, size_t size,
                       hoff_t file_offset, hoff_t buffer_offset)
{
    const struct hfc_cufile *F = cf();
    if (F == NULL)
        return -(ssize_t)hipFilePlatformNotSupported;
    if (is_write ? F->cuFileWrite == NULL : F->cuFileRead == NULL)
        return -(ssize_t)missing(is_write ? "cuFileWrite" : "cuFileRead").err;
    if (!driver_is_open())
        return -(ssize_t)hipFileDriverNotInitialized;
    if (file_offset < 0 || buffer_offset < 0) {
        errno = EINVAL;
        return -1;
    }
    if (buffer_base == NULL)
        return -(ssize_t)hipFileInvalidValue;
    if (fh == NULL || !is_registered(&handles, fh))
        return -(ssize_t)hipFileHandleNotRegistered;
    if (size == 0)
        return 0;
    if (size > HFC_MAX_IO)
        size = HFC_MAX_IO;
    if (!is_write) {
        /* A read that crosses the end of the file: cuFile's compatibility
         * mode fills the whole request in device memory (bytes past the end
         * included); AMD's hipFile writes only the bytes it read. */
        off_t end = fd_file_size(fh);
        if (end >= 0 && file_offset >= end)
            return 0;
        if (end >= 0 && (uint64_t)file_offset + size > (uint64_t)end)
            size = (size_t)(end - file_offset);
    }
    /* An unregistered buffer: fold the offset into the base, as for the
     * stream-ordered calls (cuFile's compatibility mode mishandles a nonzero
     * devPtr_offset on memory it has no registration for). */
    if (buffer_offset != 0 && !is_registered(&buffers, buffer_base)) {
        buffer_base = (char *)buffer_base + buffer_offset;
        buffer_offset = 0;
    }
    return from_cufile_count(
        is_write ? F->cuFileWrite(fh, buffer_base, size, (off_t)file_offset, (off_t)buffer_offset)
                 : F->cuFileRead(fh, buffer_base, size, (off_t)file_offset, (off_t)buffer_offset));
}

HFC_EXPORT ssize_t hipFileRead(hipFileHandle_t fh, void *buffer_base, size_t size,
                               hoff_t file_offset, hoff_t buffer_offset)
{
    return sync_io(0, fh, buffer_base, size, file_offset, buffer_offset);
}

HFC_EXPORT ssize_t hipFileWrite(hipFileHandle_t fh, const void *buffer_base, size_t size,
                                hoff_t file_offset, hoff_t buffer_offset)
{
    return sync_io(1, fh, (void *)buffer_base, size, file_offset, buffer_offset);
}

/* ---- stream-ordered I/O -------------------------------------------------- */

HFC_EXPORT hipFileError_t hipFileStreamRegister(hipStream_t stream, unsigned flags)
{
    CUfileError_t e;
    if (flags & ~HIPFILE_STREAM_FLAGS_MASK)
        return make_error(hipFileInvalidValue);
    NEED_OPEN(cuFileStreamRegister);
    pthread_mutex_lock(&reg_lock);
    if (set_find(&streams, stream) >= 0) {
        pthread_mutex_unlock(&reg_lock);
        return make_error(hipFileInvalidValue);
    }
    e = F->cuFileStreamRegister((CUstream)stream, flags);
    if (e.err == CU_FILE_SUCCESS && set_add(&streams, stream) != 0) {
        pthread_mutex_unlock(&reg_lock);
        cufile_release(F, &streams, stream);
        return make_error(hipFileInternalError);
    }
    pthread_mutex_unlock(&reg_lock);
    return from_cufile(e);
}

HFC_EXPORT hipFileError_t hipFileStreamDeregister(hipStream_t stream)
{
    NEED_OPEN(cuFileStreamDeregister);
    if (!forget(&streams, stream))
        return make_error(hipFileInvalidValue);
    return from_cufile(F->cuFileStreamDeregister((CUstream)stream));
}

/* ---- stream-ordered I/O ------------------------------------------------
 *
 * Two behaviours of cuFile 1.15's compatibility mode that AMD's hipFile does
 * not share are hidden here (measured on an H200, see docs/platform-cuda.md):
 * - an operation on a buffer that is not registered fails when it runs
 *   (*bytes_p = -5) unless its buffer offset is 0: the platform folds the
 *   offset into the base at submit (the offset is then fixed at submit on
 *   this platform, whatever the stream's flags);
 * - operations on one registered buffer from several streams at once share
 *   cuFile's bounce buffer for that registration: they report full counts and
 *   move the wrong bytes. The platform orders them: each operation on a
 *   registered buffer waits for the previous one on that buffer (an event
 *   recorded behind it), so they run one at a time, as on one stream. */

/* From this platform's libamdhip64.so (linked). */
hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned flags);
hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream);
hipError_t hipEventDestroy(hipEvent_t event);
hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned flags);
hipError_t hipStreamGetDevice(hipStream_t stream, int *device);
hipError_t hipGetDevice(int *device);
hipError_t hipSetDevice(int device);

/* The last operation submitted on each registered buffer: an event
 * recorded behind it (under orders.lock). */
static struct ptr_map orders = PTR_MAP_INIT;

/* Forget a buffer's order (on deregistration); its event may still be
 * pending, which hipEventDestroy allows. */
void order_forget(const void *base)
{
    pthread_mutex_lock(&orders.lock);
    struct ptr_map_entry *e = map_find(&orders, base);
    if (e != NULL) {
        if (e->v.event != NULL)
            hipEventDestroy(e->v.event);
        map_remove(&orders, e);
    }
    pthread_mutex_unlock(&orders.lock);
}

/* Called with orders.lock held: the entry of `base`, created on first use
 * with its event on the device of `stream` (an event is recorded only on
 * streams of its own device; a buffer's streams share its device); NULL when
 * memory or an event cannot be had. */
static struct ptr_map_entry *order_get(const void *base, hipStream_t stream)
{
    struct ptr_map_entry *e = map_find(&orders, base);
    if (e != NULL)
        return e;
    e = map_add(&orders, base);
    if (e == NULL)
        return NULL;
    int device, current;
    int switched = hipStreamGetDevice(stream, &device) == 0 && hipGetDevice(&current) == 0 &&
                   device != current && hipSetDevice(device) == 0;
    hipError_t made = hipEventCreateWithFlags(&e->v.event, hipEventDisableTiming);
    if (switched)
        hipSetDevice(current);
    if (made != 0) {
        map_remove(&orders, e);
        return NULL;
    }
    return e;
}

static const off_t zero_offset = 0;

static hipFileError_t submit_async(hfc_cuFileReadAsync_fn fn, hipFileHandle_t fh, void *base,
                                   size_t *size_p, hoff_t *file_offset_p, hoff_t *buffer_offset_p,
                                   ssize_t *bytes_p, hipStream_t stream)
{
    if (base == NULL || size_p == NULL || file_offset_p == NULL || buffer_offset_p == NULL ||
        bytes_p == NULL)
        return make_error(hipFileInvalidValue);
    if (*file_offset_p < 0 || *buffer_offset_p < 0)
        return make_error(hipFileInvalidValue);
    if (fh == NULL || !is_registered(&handles, fh))
        return make_error(hipFileHandleNotRegistered);
    *bytes_p = 0;
    if (!is_registered(&buffers, base))
        return from_cufile(fn(fh, (char *)base + *buffer_offset_p, size_p,
                              (off_t *)file_offset_p, (off_t *)&zero_offset, bytes_p,
                              (CUstream)stream));
    pthread_mutex_lock(&orders.lock);
    struct ptr_map_entry *o = order_get(base, stream);
    if (o == NULL) {
        pthread_mutex_unlock(&orders.lock);
        return make_error(hipFileInternalError);
    }
    if (hipStreamWaitEvent(stream, o->v.event, 0) != 0) {
        pthread_mutex_unlock(&orders.lock);
        return make_error(hipFileHipDriverError);
    }
    hipFileError_t e = from_cufile(fn(fh, base, size_p, (off_t *)file_offset_p,
                                      (off_t *)buffer_offset_p, bytes_p, (CUstream)stream));
    if (e.err == hipFileSuccess && hipEventRecord(o->v.event, stream) != 0)
        e = make_error(hipFileHipDriverError);
    pthread_mutex_unlock(&orders.lock);
    return e;
}

/* hipFileReadAsync and hipFileWriteAsync: submit_async over cuFileReadAsync
 * or cuFileWriteAsync (same signature). */
#define HFC_ASYNC_IO(name, cufile_fn)                                                      \
    HFC_EXPORT hipFileError_t name(hipFileHandle_t fh, void *buffer_base, size_t *size_p,   \
                                   hoff_t *file_offset_p, hoff_t *buffer_offset_p,          \
                                   ssize_t *bytes_p, hipStream_t stream)                    \
    {                                                                                      \
        NEED_OPEN(cufile_fn);                                                              \
        return submit_async(F->cufile_fn, fh, buffer_base, size_p, file_offset_p,          \
                            buffer_offset_p, bytes_p, stream);                             \
    }

HFC_ASYNC_IO(hipFileReadAsync, cuFileReadAsync)
HFC_ASYNC_IO(hipFileWriteAsync, cuFileWriteAsync)
