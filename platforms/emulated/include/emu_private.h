/* Private interface between the emulated libamdhip64.so and libhipfile.so.
 * Neither is AMD's library: this is the emulated test platform of the
 * hipfile Python package. Only these functions cross between the two
 * libraries besides HIP's public API. */
#ifndef HIPFILE_EMU_PRIVATE_H
#define HIPFILE_EMU_PRIVATE_H

#include <stddef.h>

/* HIP's types, shared by both test platforms. */
#include "../../include/hip_abi_types.h"

#define EMU_EXPORT __attribute__((visibility("default")))

/* Appends node to the singly linked queue head .. tail whose nodes link
 * through their member `link` (a helper both libraries use). */
#define EMU_QUEUE_APPEND(head, tail, node, link) \
  do {                                           \
    (node)->link = NULL;                         \
    if ((tail) != NULL) (tail)->link = (node);   \
    else (head) = (node);                        \
    (tail) = (node);                             \
  } while (0)

/* Memory kinds returned by hipEmuPointerInfo. */
enum { EMU_MEM_DEVICE = 1, EMU_MEM_PINNED_HOST = 2 };

/* Look up the allocation that contains ptr. Returns 0 and fills the outputs
 * (any may be NULL) if ptr lies inside a live allocation of the emulated
 * runtime, -1 otherwise. */
EMU_EXPORT int hipEmuPointerInfo(const void *ptr, void **base, size_t *size,
                                 int *kind, int *device);

/* Device that owns a stream (NULL: the current device's null stream).
 * Returns 0, or -1 for an unknown stream. */
EMU_EXPORT int hipEmuStreamDevice(hipStream_t stream, int *device);

/* Live resources of the emulated runtime, for the test hooks: device
 * allocations (hipMalloc), pinned host allocations and registrations
 * (hipHostMalloc, hipHostAlloc, hipMallocHost, hipHostRegister), streams
 * created by the user (null streams excluded) and events not yet destroyed.
 * Any output may be NULL. Returns 0. */
EMU_EXPORT int hipEmuCounters(long long *allocations, long long *host_allocations,
                              long long *streams, long long *events);

/* Clears the calling thread's last HIP error. Touches no live resource, so it
 * is safe to call between tests that share long-lived allocations. */
EMU_EXPORT void hipEmuReset(void);

/* Destructive recovery after a leak: waits for all queued work, then destroys
 * every user stream and event and frees every allocation and registration.
 * Returns how many resources were released (-1 from inside a host function,
 * where waiting is refused). Handles and pointers held by the caller become
 * invalid. */
EMU_EXPORT long long hipEmuReleaseAll(void);

/* Stream memory operations (hipStreamWaitValue32/64, hipStreamWriteValue32/64):
 * WaitValue operations queued or running, and those a stream is blocked in.
 * Any output may be NULL. Returns 0. */
EMU_EXPORT int hipEmuStreamMemCounters(long long *pending_waits, long long *blocked_waits);
/* The next `count` calls of hipStreamWaitValue32/64 (op 0) or
 * hipStreamWriteValue32/64 (op 1) that pass the argument checks fail with the
 * hipError_t `error` and enqueue nothing. count 0 clears. Returns 0, or -1
 * for a bad op or a zero error with a count. */
EMU_EXPORT int hipEmuStreamMemInjectFault(int op, int error, unsigned count);
/* 1: waits accept only signal memory (as AMD's runtime with
 * GPU_STREAMOPS_CP_WAIT=1); 0: any memory the runtime knows; -1: follow
 * GPU_STREAMOPS_CP_WAIT (the default). */
EMU_EXPORT void hipEmuStreamMemRequireSignal(int on);
/* Clears the stream memory faults and the signal-memory requirement. */
EMU_EXPORT void hipEmuStreamMemReset(void);

/* Public HIP functions that libhipfile uses. */
hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn,
                                 void *user_data);
hipError_t hipGetDevice(int *device);
hipError_t hipStreamSynchronize(hipStream_t stream);

/* Test hooks exported by libhipfile.so (the emulated hipFile library). */
enum {
    HIPFILE_EMU_OP_READ = 0,        /* hipFileRead */
    HIPFILE_EMU_OP_WRITE = 1,       /* hipFileWrite */
    HIPFILE_EMU_OP_READ_ASYNC = 2,  /* hipFileReadAsync */
    HIPFILE_EMU_OP_WRITE_ASYNC = 3, /* hipFileWriteAsync */
    HIPFILE_EMU_OP_BATCH = 4,       /* each entry of hipFileBatchIOSubmit */
    HIPFILE_EMU_OP_REGISTER = 5,    /* hipFileHandle/Buf/StreamRegister */
    HIPFILE_EMU_OP_COUNT = 6
};

/* Live resources of libhipfile.so. */
typedef struct hipfileEmuCounters {
    long long handles;            /* file handle records alive */
    long long buffers;            /* buffer registrations */
    long long streams_registered; /* stream registrations */
    long long inflight;           /* stream-ordered operations not yet run */
    long long batches;            /* batch contexts alive */
} hipfileEmuCounters_t;

/* The next `count` calls of `op`, after `after` calls that pass, fail with
 * `err`: an errno value (1..4999) or a hipFile error code (5001..5039).
 * count 0 clears the fault of `op`. Returns 0, or -1 for a bad argument. */
EMU_EXPORT int hipfileEmuInjectFault(int op, int err, unsigned count, unsigned after);
/* Every read/write moves at most max_bytes in one transfer and the call
 * returns that count (0: off). */
EMU_EXPORT void hipfileEmuSetShortTransfer(size_t max_bytes);
/* Stream-ordered operations and batch entries sleep this long before they
 * run and before their result is written. */
EMU_EXPORT void hipfileEmuSetCompletionDelay(unsigned long long microseconds);
EMU_EXPORT void hipfileEmuGetCounters(hipfileEmuCounters_t *out);
/* Clears faults, short transfers and the delay; counters stay as they are. */
EMU_EXPORT void hipfileEmuReset(void);

#endif
