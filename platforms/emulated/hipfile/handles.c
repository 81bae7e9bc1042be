/* File handle and buffer registries of the emulated libhipfile.so. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hipfile_internal.h"

static emu_handle_t *handles;

typedef struct emu_buffer {
    struct emu_buffer *next;
    uintptr_t base;
    size_t length;
} emu_buffer_t;

static emu_buffer_t *buffers;

/* HIPFILE_ALLOW_COMPAT_MODE / HIPFILE_FORCE_COMPAT_MODE win over the
 * configuration parameters when they are set to a recognised value. */
static int env_bool(const char *name, int fallback)
{
    const char *v = getenv(name);
    if (v == NULL)
        return fallback;
    if (!strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
        return 1;
    if (!strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "off"))
        return 0;
    return fallback;
}

/* Only the address is compared: a token is never dereferenced. */
static emu_handle_t *handle_find_locked(hipFileHandle_t fh)
{
    for (emu_handle_t *h = handles; h != NULL; h = h->next)
        if (h->token == (uintptr_t)fh)
            return h;
    return NULL;
}

emu_handle_t *emu_handle_acquire_locked(hipFileHandle_t fh)
{
    if (fh == NULL || !emu_driver_is_open_locked())
        return NULL;
    emu_handle_t *h = handle_find_locked(fh);
    if (h != NULL)
        h->users++;
    return h;
}

void emu_handle_release_locked(emu_handle_t *h)
{
    if (--h->users == 0)
        pthread_cond_broadcast(&emu_cond);
}

void emu_handle_release(emu_handle_t *h)
{
    pthread_mutex_lock(&emu_lock);
    emu_handle_release_locked(h);
    pthread_mutex_unlock(&emu_lock);
}

/* Accounts for a file handle (buffer 0) or buffer (buffer 1) registration
 * that has just been added to its list: live counter, statistics, and the
 * implicit driver open that a registration implies. */
static void emu_registered_locked(long long *live, int buffer)
{
    (*live)++;
    emu_stats_record_registration(buffer);
    emu_driver_implicit_open_locked();
}

EMU_EXPORT hipFileError_t hipFileHandleRegister(hipFileHandle_t *fh, hipFileDescr_t *descr)
{
    if (fh == NULL || descr == NULL)
        return emu_err(hipFileInvalidValue);
    switch ((int)descr->type) {
    case hipFileHandleTypeOpaqueFD:
        break;
    case hipFileHandleTypeOpaqueWin32:
    case hipFileHandleTypeUserspaceFS:
        return emu_err(hipFileIONotSupported);
    default:
        return emu_err(hipFileInvalidFileType);
    }
    int fd = descr->handle.fd;
    if (fd < 0)
        return emu_err(hipFileInvalidValue);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return emu_err(hipFileInvalidValue);
    /* pwrite ignores the offset on O_APPEND descriptors; O_PATH ones move
     * no data. */
    if (fl & (O_APPEND | O_PATH))
        return emu_err(hipFileInvalidFileOpenFlag);
    struct stat st;
    if (fstat(fd, &st) != 0)
        return emu_err(hipFileInvalidValue);
    if (!S_ISREG(st.st_mode))
        return emu_err(hipFileInvalidFileType);

    int has_direct = (fl & O_DIRECT) != 0;
    int force = env_bool("HIPFILE_FORCE_COMPAT_MODE", emu_param_bool(hipFileParamForceCompatMode));
    int allow = env_bool("HIPFILE_ALLOW_COMPAT_MODE",
                         emu_param_bool(hipFileParamPropertiesAllowCompatMode));
    if (!has_direct && !force && !allow)
        return emu_err(hipFileDIONotSet);

    emu_handle_t *rec = calloc(1, sizeof(*rec));
    if (rec == NULL)
        return emu_err(hipFileInternalError);
    rec->fd = fd;
    rec->buffered_fd = fd;
    rec->direct = has_direct && !force;

    hipFileOpError_t e = hipFileSuccess;
    pthread_mutex_lock(&emu_lock);
    if (emu_closing)
        e = hipFileDriverClosing;
    for (emu_handle_t *h = handles; h != NULL && e == hipFileSuccess; h = h->next)
        if (h->fd == fd)
            e = hipFileHandleAlreadyRegistered;
    int fault = emu_register_fault(e);
    if (e == hipFileSuccess && !fault && has_direct) {
        /* The buffered path (unaligned I/O, compat mode) reads and writes
         * through a second descriptor of the same file, opened without
         * O_DIRECT; the caller's descriptor is never modified. */
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        rec->buffered_fd = open(path, (fl & O_ACCMODE) | O_CLOEXEC);
        rec->own_buffered = rec->buffered_fd >= 0;
        if (rec->buffered_fd < 0)
            e = hipFileGetNewFDFailed;
    }
    if (e == hipFileSuccess && !fault) {
        rec->token = emu_new_token(EMU_TAG_HANDLE);
        rec->next = handles;
        handles = rec;
        emu_registered_locked(&emu_counters.handles, 0);
        *fh = (hipFileHandle_t)rec->token;
    }
    pthread_mutex_unlock(&emu_lock);
    return emu_register_result(e, fault, rec);
}

/* Called with emu_lock held on an unlinked record: waits for its users,
 * then frees it (dropping the lock around close()). */
static void handle_destroy_locked(emu_handle_t *h)
{
    while (h->users > 0)
        pthread_cond_wait(&emu_cond, &emu_lock);
    emu_counters.handles--;
    pthread_mutex_unlock(&emu_lock);
    if (h->own_buffered)
        close(h->buffered_fd);
    free(h);
    pthread_mutex_lock(&emu_lock);
}

EMU_EXPORT void hipFileHandleDeregister(hipFileHandle_t fh)
{
    if (fh == NULL)
        return;
    pthread_mutex_lock(&emu_lock);
    for (emu_handle_t **pp = &handles; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->token == (uintptr_t)fh) {
            emu_handle_t *h = *pp;
            *pp = h->next;
            handle_destroy_locked(h);
            break;
        }
    }
    pthread_mutex_unlock(&emu_lock);
}

void emu_handles_after_fork_locked(void)
{
    for (emu_handle_t *h = handles; h != NULL; h = h->next)
        h->users = 0;
}

void emu_handles_drop_all_locked(void)
{
    while (handles != NULL) {
        emu_handle_t *h = handles;
        handles = h->next;
        handle_destroy_locked(h);
    }
    while (buffers != NULL) {
        emu_buffer_t *b = buffers;
        buffers = b->next;
        free(b);
        emu_counters.buffers--;
    }
}

hipFileOpError_t emu_check_device_range(const void *base, int64_t offset, size_t size,
                                        uintptr_t *alloc_lo, uintptr_t *alloc_hi, int *device)
{
    if (base == NULL || offset < 0)
        return hipFileInvalidValue;
    void *abase = NULL;
    size_t asize = 0;
    int kind = 0, dev = 0;
    /* Memory the runtime does not know is hipMemoryTypeUnregistered to ROCm:
     * a memory type hipFile refuses, as host and pinned memory. */
    if (hipEmuPointerInfo(base, &abase, &asize, &kind, &dev) != 0)
        return hipFileHipMemoryTypeInvalid;
    if (kind != EMU_MEM_DEVICE)
        return hipFileHipMemoryTypeInvalid;
    uintptr_t lo = (uintptr_t)abase, hi = lo + asize, b = (uintptr_t)base;
    if ((uint64_t)offset > hi - b || size > hi - b - (uint64_t)offset)
        return hipFileHipPointerRangeError;
    if (alloc_lo)
        *alloc_lo = lo;
    if (alloc_hi)
        *alloc_hi = hi;
    if (device)
        *device = dev;
    return hipFileSuccess;
}

EMU_EXPORT hipFileError_t hipFileBufRegister(const void *buffer_base, size_t length, int flags)
{
    /* The driver opens before the arguments are checked, as in AMD's library. */
    if (emu_driver_implicit_open() != 0)
        return emu_err(hipFileDriverClosing);
    if (buffer_base == NULL || length == 0)
        return emu_err(hipFileInvalidValue);
    hipFileOpError_t e = emu_check_device_range(buffer_base, 0, length, NULL, NULL, NULL);
    if (e != hipFileSuccess)
        return emu_err(e);
    uintptr_t lo = (uintptr_t)buffer_base;
    emu_buffer_t *rec = calloc(1, sizeof(*rec));
    if (rec == NULL)
        return emu_err(hipFileInternalError);
    rec->base = lo;
    rec->length = length;
    pthread_mutex_lock(&emu_lock);
    if (emu_closing)
        e = hipFileDriverClosing;
    for (emu_buffer_t *b = buffers; b != NULL && e == hipFileSuccess; b = b->next)
        if (lo < b->base + b->length && b->base < lo + length)
            e = hipFileMemoryAlreadyRegistered;
    int fault = emu_register_fault(e);
    if (e == hipFileSuccess && !fault) {
        rec->next = buffers;
        buffers = rec;
        emu_registered_locked(&emu_counters.buffers, 1);
    }
    pthread_mutex_unlock(&emu_lock);
    return emu_register_result(e, fault, rec);
}

EMU_EXPORT hipFileError_t hipFileBufDeregister(const void *buffer_base)
{
    if (buffer_base == NULL)
        return emu_err(hipFileInvalidValue);
    hipFileOpError_t e = hipFileMemoryNotRegistered;
    pthread_mutex_lock(&emu_lock);
    /* A closed driver has no registrations; AMD's library answers DriverClosing. */
    if (emu_use_count <= 0 || emu_closing)
        e = hipFileDriverClosing;
    if (e == hipFileMemoryNotRegistered) {
        int removed = 0;
        EMU_SLIST_REMOVE(emu_buffer_t, buffers, base, (uintptr_t)buffer_base, removed);
        if (removed) {
            emu_counters.buffers--;
            e = hipFileSuccess;
        }
    }
    pthread_mutex_unlock(&emu_lock);
    return emu_err(e);
}
