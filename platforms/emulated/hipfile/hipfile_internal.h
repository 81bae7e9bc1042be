/* State shared by the source files of the emulated libhipfile.so.
 *
 * One process-wide mutex (emu_lock) guards every registry and counter; the
 * condition variable emu_cond is broadcast whenever a user of a handle goes
 * away, a stream-ordered operation finishes or a batch entry changes state.
 * No HIP function is ever called with emu_lock held. */
#ifndef HIPFILE_EMU_INTERNAL_H
#define HIPFILE_EMU_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "hipfile_abi.h"

#define EMU_HIDDEN __attribute__((visibility("hidden")))

/* One call moves at most this many bytes (2 GiB - 4 KiB, as Linux). */
#define EMU_MAX_IO_SIZE ((size_t)0x7ffff000)
/* Alignment the O_DIRECT path needs for addresses, offsets and sizes. */
#define EMU_DIRECT_ALIGN 4096u

extern EMU_HIDDEN pthread_mutex_t emu_lock;
extern EMU_HIDDEN pthread_cond_t emu_cond;

/* Counters (under emu_lock). */
extern EMU_HIDDEN hipfileEmuCounters_t emu_counters;

/* Driver state (under emu_lock). */
extern EMU_HIDDEN int64_t emu_use_count;
extern EMU_HIDDEN int emu_closing;
extern EMU_HIDDEN hipFileDriverProps_t emu_props;

/* Returns 1 when the driver is open (count > 0 and not closing). */
EMU_HIDDEN int emu_driver_is_open_locked(void);
/* Implicit initialisation by a registration: 0 -> 1. */
EMU_HIDDEN void emu_driver_implicit_open_locked(void);
/* Opens the driver implicitly (0 -> 1); -1 while it is being closed. */
EMU_HIDDEN int emu_driver_implicit_open(void);
EMU_HIDDEN int emu_param_bool(hipFileBoolConfigParameter_t which);

static inline hipFileError_t emu_err(hipFileOpError_t e)
{
    hipFileError_t r = {e, 0};
    return r;
}

/* A registered file. The value handed out as hipFileHandle_t is `token`, not
 * the address of this record, so stale handles never alias a newer one. */
typedef struct emu_handle {
    struct emu_handle *next;
    uintptr_t token;
    int fd;          /* the caller's descriptor */
    int buffered_fd; /* a descriptor without O_DIRECT (may equal fd) */
    int own_buffered;
    int direct;      /* fd has O_DIRECT and compat mode is not forced */
    unsigned users;  /* running calls and queued operations using it */
} emu_handle_t;

/* Looks a handle up and counts one user; NULL if not registered. */
EMU_HIDDEN emu_handle_t *emu_handle_acquire_locked(hipFileHandle_t fh);
EMU_HIDDEN void emu_handle_release_locked(emu_handle_t *h);
EMU_HIDDEN void emu_handle_release(emu_handle_t *h);
/* Drops every handle and buffer registration (driver close to 0). */
EMU_HIDDEN void emu_handles_drop_all_locked(void);
EMU_HIDDEN void emu_batches_drop_all_locked(void);
/* In a forked child: nothing is in flight any more (see driver.c). */
EMU_HIDDEN void emu_handles_after_fork_locked(void);
EMU_HIDDEN void emu_batches_after_fork_locked(void);
EMU_HIDDEN void emu_hooks_lock(void);
EMU_HIDDEN void emu_hooks_unlock(void);

EMU_HIDDEN uintptr_t emu_new_token(uintptr_t tag);
#define EMU_TAG_HANDLE ((uintptr_t)0x4846u << 48) /* non-canonical address */
#define EMU_TAG_BATCH ((uintptr_t)0x4842u << 48)

/* Fault injection and the other hooks. */
/* Consumes one call of `op`: returns the injected error or 0. */
EMU_HIDDEN int emu_fault_take(int op);
/* The error injected into a registration whose own checks gave `e` (0 if
 * none): a registration already refused consumes no fault. */
EMU_HIDDEN int emu_register_fault(hipFileOpError_t e);
/* What a registration returns, called after emu_lock is released: success
 * when `e` is hipFileSuccess and no error was injected; otherwise `rec` (the
 * record that was not linked) is freed and the injected error (the hipFile
 * code itself, or InternalError with errno set) or `e` is returned. */
EMU_HIDDEN hipFileError_t emu_register_result(hipFileOpError_t e, int fault, void *rec);
EMU_HIDDEN size_t emu_short_transfer(void);
EMU_HIDDEN unsigned long long emu_completion_delay(void);
EMU_HIDDEN void emu_sleep_us(unsigned long long us);

/* Checks that [base + offset, + size) lies inside one device allocation.
 * On success fills the allocation bounds and device. Returns 0 or a
 * hipFile error code. */
EMU_HIDDEN hipFileOpError_t emu_check_device_range(const void *base, int64_t offset, size_t size,
                                                   uintptr_t *alloc_lo, uintptr_t *alloc_hi,
                                                   int *device);

/* Moves up to `size` bytes between the file and `buf`: loops over partial
 * transfers and EINTR unless short_max caps it to one transfer. Returns the
 * bytes moved, or -1 with *err set (no byte moved). */
/* Statistics (stats.c): one transfer by the fast path (O_DIRECT on the
 * caller's descriptor) or the fallback, and one registration. */
EMU_HIDDEN uint64_t emu_stats_clock(void);
EMU_HIDDEN void emu_stats_record_io(int is_write, int fast, const void *buf, size_t size,
                                    off_t off, ssize_t result, uint64_t ns);
EMU_HIDDEN void emu_stats_record_registration(int buffer);

/* The emulated runtime's model of a library copy entering the runtime. */
void hipEmuRuntimeEnter(void);
void hipEmuRuntimeLeave(void);
EMU_HIDDEN ssize_t emu_do_io(emu_handle_t *h, int is_write, char *buf, size_t size, off_t off,
                             size_t short_max, int *err);

/* Result of a failed operation as an ssize_t count. */
static inline ssize_t emu_fault_result(int fault, int *err)
{
    if (fault >= HIPFILE_BASE_ERR) {
        *err = 0;
        return -(ssize_t)fault;
    }
    *err = fault;
    return -1;
}

/* Removes from the singly linked list at `head` (nodes of `type` chained by
 * `next`) the first node whose `field` equals `key`, frees it and sets
 * `removed` to 1; `removed` stays 0 when no node matches. Caller holds the
 * lock of the list. */
#define EMU_SLIST_REMOVE(type, head, field, key, removed)                    \
    do {                                                                     \
        for (type **pp_ = &(head); *pp_ != NULL; pp_ = &(*pp_)->next) {      \
            if ((*pp_)->field == (key)) {                                    \
                type *gone_ = *pp_;                                          \
                *pp_ = gone_->next;                                          \
                free(gone_);                                                 \
                (removed) = 1;                                               \
                break;                                                       \
            }                                                                \
        }                                                                    \
    } while (0)

#endif
