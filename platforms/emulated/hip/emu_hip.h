/* Internal declarations of the emulated HIP runtime (libamdhip64.so).
 *
 * The emulated runtime implements the subset of HIP that HIP-Python and the
 * hipfile package use, on the CPU: "device" memory is host memory kept in an
 * allocation table, every stream is a worker thread that runs its queue in
 * order, events are positions in those queues, and one host-function thread
 * runs the host functions of every stream, one at a time (as HIP does).
 *
 * Locking: one global mutex (emu_lock) protects every table, queue and
 * counter. Worker threads drop it while they copy memory, the host-function
 * thread while it runs a user host function. Anyone waiting for progress waits on emu_progress, which is
 * broadcast whenever any queued operation finishes. */
#ifndef HIPFILE_EMU_HIP_H
#define HIPFILE_EMU_HIP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "emu_private.h"

/* ---- HIP types and flags: platforms/include/hip_abi_types.h (via
 * emu_private.h) ------------------------------------------------------- */
typedef int hipDevice_t;

#define hipHostRegisterPortable 0x1u
#define hipHostRegisterMapped 0x2u
#define hipHostRegisterIoMemory 0x4u
#define hipHostRegisterReadOnly 0x8u

/* Special stream handles of HIP's headers: both name the legacy default
 * stream here (the per-thread default stream is served by the null stream,
 * which synchronizes more, never less). */
#define EMU_STREAM_LEGACY ((hipStream_t)(uintptr_t)1)
#define EMU_STREAM_PER_THREAD ((hipStream_t)(uintptr_t)2)

#define EMU_MAX_DEVICES 64

/* ---- queued work --------------------------------------------------------- */
enum emu_op_kind {
  EMU_OP_COPY,        /* memmove(dst, src, bytes) */
  EMU_OP_FILL,        /* fill count elements of elem_size bytes at dst */
  EMU_OP_HOST_FN,     /* fn(user_data) */
  EMU_OP_CALLBACK,    /* callback(stream handle, hipSuccess, user_data) */
  EMU_OP_RECORD,      /* event reaches this position: timestamp */
  EMU_OP_WAIT_EVENT,  /* wait until event generation gen is reached */
  EMU_OP_WAIT_STREAM, /* wait until another stream completes position seq */
  EMU_OP_WAIT_VALUE,  /* hipStreamWaitValue32/64: wait until *dst meets a condition */
  EMU_OP_WRITE_VALUE  /* hipStreamWriteValue32/64: store a value at dst */
};

struct emu_op {
  struct emu_op *next;
  enum emu_op_kind kind;
  uint64_t seq;            /* position in its stream, set by enqueue */
  void *dst;
  const void *src;
  size_t bytes;            /* COPY: bytes; FILL: element count */
  uint32_t pattern;        /* FILL value */
  unsigned elem_size;      /* FILL: 1, 2 or 4 */
  hipHostFn_t fn;
  hipStreamCallback_t callback;
  hipStream_t handle;      /* CALLBACK: the handle the user passed */
  void *user_data;
  struct ihipEvent_t *event;   /* RECORD, WAIT_EVENT (holds a reference) */
  uint64_t gen;
  struct ihipStream_t *target; /* WAIT_STREAM (holds a reference) */
  uint64_t target_seq;
  uint64_t value;          /* WAIT_VALUE, WRITE_VALUE (width in elem_size: 4 or 8) */
  uint64_t mask;           /* WAIT_VALUE */
  unsigned cmp;            /* WAIT_VALUE: hipStreamWaitValueGte/Eq/And/Nor */
  struct emu_op *host_next; /* HOST_FN, CALLBACK: next in the dispatcher's queue */
  struct ihipStream_t *host_stream; /* HOST_FN, CALLBACK: the stream that reached it */
  int host_state;          /* HOST_FN, CALLBACK: EMU_HOST_QUEUED/RUNNING/DONE */
};

struct ihipStream_t {
  int device;
  unsigned flags;
  int priority;
  int is_null;          /* the legacy default stream of its device */
  int live;             /* a valid handle (not destroyed) */
  int stopping;         /* worker must exit once the queue is empty */
  int discard;          /* drop queued work without running it (unload) */
  int thread_started;
  int detached;         /* destroyed while blocked: the worker frees itself */
  uint64_t enqueued;    /* seq of the last operation enqueued */
  uint64_t completed;   /* seq of the last operation finished */
  struct emu_op *head, *tail;
  pthread_t thread;
  pthread_cond_t work;
  int refs;             /* owner + operations and waiters that point here */
  struct ihipStream_t *prev, *next; /* list of streams with a worker */
};

struct ihipEvent_t {
  int device;
  unsigned flags;
  int live;
  uint64_t gen;         /* generation of the latest record (0: never) */
  uint64_t done_gen;    /* highest generation reached by its stream */
  uint64_t stamp_ns;    /* time the latest reached record was processed */
  int refs;
  struct ihipEvent_t *prev, *next;
};

/* ---- runtime.c ----------------------------------------------------------- */
extern pthread_mutex_t emu_lock;
extern pthread_cond_t emu_progress;
extern int emu_shutdown;                      /* library is unloading */
/* Set on worker threads, and on the host-function thread while it runs a host
 * function: calls that would wait for streams refuse to from there. */
extern __thread struct ihipStream_t *emu_tls_worker;

int emu_device_count(void);
hipError_t emu_current_device(int *device);
void emu_set_current_device(int device);
hipError_t emu_ret(hipError_t status);        /* records failures, returns status */
uint64_t emu_now_ns(void);
size_t emu_device_memory_total(void);
void emu_lock_acquire(void);
void emu_lock_release(void);
/* The runtime lock (runtime.c): held shared by calls that enqueue, copy,
 * allocate or query, exclusively by hipFree's device-wide wait. Never taken
 * on stream workers or the host-function thread; nests on one thread. */
void emu_api_enter(void);
void emu_api_enter_exclusive(void);
void emu_api_leave(void);
/* Defines `decl name params` as emu_unlocked_<name> called with `args` under
 * the runtime lock (held shared). */
#define EMU_LOCKED_ENTRY(decl, name, params, args) \
  decl name params {                                \
    emu_api_enter();                                \
    hipError_t status = emu_unlocked_##name args;   \
    emu_api_leave();                                \
    return status;                                  \
  }

/* ---- queue.c ------------------------------------------------------------- */
extern struct ihipStream_t *emu_streams; /* every stream with a worker */
extern struct ihipStream_t *emu_null_streams[EMU_MAX_DEVICES];
extern struct ihipEvent_t *emu_events;   /* live events */
extern long long emu_live_streams;
extern long long emu_live_events;
extern int emu_detached_workers;         /* detached workers still running */

/* Takes node out of the doubly linked list (prev/next) that starts at head. */
#define EMU_LIST_UNLINK(head, node)                              \
  do {                                                           \
    if ((node)->prev != NULL) (node)->prev->next = (node)->next; \
    else if ((head) == (node)) (head) = (node)->next;            \
    if ((node)->next != NULL) (node)->next->prev = (node)->prev; \
    (node)->prev = (node)->next = NULL;                          \
  } while (0)

struct emu_op *emu_op_new(enum emu_op_kind kind);
/* Drop one reference; the last frees the stream, event or operation (an
 * operation releases the references it holds). */
void emu_stream_unref_locked(struct ihipStream_t *s);
void emu_event_unref_locked(struct ihipEvent_t *e);
void emu_op_release_locked(struct emu_op *op);
/* A new stream with its worker thread, linked into emu_streams. */
hipError_t emu_stream_new_locked(int device, unsigned flags, int priority, int is_null,
                                 struct ihipStream_t **out);
void emu_stream_unlink_locked(struct ihipStream_t *s);
/* NULL, hipStreamLegacy or hipStreamPerThread. */
int emu_is_null_handle(hipStream_t handle);
/* The live user stream of a handle, or NULL. */
struct ihipStream_t *emu_find_user_stream_locked(hipStream_t handle);
/* Marks s destroyed, waits for its work, and stops its worker. The caller
 * then calls emu_stream_join_and_drop_locked, which joins the thread with the
 * lock released and drops the reference. */
void emu_stream_retire_locked(struct ihipStream_t *s);
void emu_stream_join_and_drop_locked(struct ihipStream_t *s);
/* Resolves a user handle to a live stream (NULL and the special handles give
 * the current device's null stream). Returns hipSuccess or an error. */
hipError_t emu_stream_resolve_locked(hipStream_t handle, struct ihipStream_t **out);
hipError_t emu_enqueue_locked(struct ihipStream_t *s, struct emu_op *op);
/* Waits (dropping the lock while waiting) until s has finished seq. */
void emu_wait_seq_locked(struct ihipStream_t *s, uint64_t seq);
/* Waits for all work enqueued so far on the device's streams; with
 * blocking_only, non-blocking streams are skipped. device -1: all devices. */
hipError_t emu_sync_device_locked(int device, int blocking_only);
long long emu_stream_count_locked(void);
long long emu_event_count_locked(void);

/* ---- streams.c ----------------------------------------------------------- */
/* Queues a copy or fill (memory.c has validated it) on a stream, with the
 * operations linked after it by `next` (a batch, queued under one hold of
 * the lock), and, with wait, returns once they have run. Takes the lock
 * itself; the operations are its to free, queued or not. */
hipError_t emu_submit_memory_op(hipStream_t stream, struct emu_op *op, int wait);

/* ---- events.c ------------------------------------------------------------ */
/* Takes a live event out of emu_events (the caller drops its reference). */
void emu_event_unlink_locked(struct ihipEvent_t *e);

/* ---- lifecycle.c --------------------------------------------------------- */
long long emu_release_streams_events_locked(int device);

/* ---- hostfn.c ------------------------------------------------------------ */
enum { EMU_HOST_QUEUED = 0, EMU_HOST_RUNNING = 1, EMU_HOST_DONE = 2 };
/* Runs a HOST_FN or CALLBACK operation that stream s has reached: hands it
 * to the process's one host-function thread, in the order the streams reach
 * them, and returns once it has run (or was dropped because s is being
 * discarded). Called and returns with the lock held. */
void emu_run_host_op_locked(struct ihipStream_t *s, struct emu_op *op);
/* Calls the operation's function (lock not held). */
void emu_call_host_op(struct emu_op *op);
/* Unload: stops the host-function thread; returns 1 and its id in *thread
 * when one must be joined. Called with the lock held. */
int emu_host_dispatcher_stop_locked(pthread_t *thread);

/* ---- backing.c ----------------------------------------------------------- */
/* A fresh page-aligned mapping for size bytes (NULL when size is 0 or on
 * failure), followed by a guard page. */
void *emu_backing_map(size_t size);
/* Gives back a mapping that was never handed out. */
void emu_backing_unmap(void *base, size_t size);
/* Frees an allocation's mapping: it becomes inaccessible and its addresses
 * stay reserved (a bounded quarantine), so use after free faults. The
 * _locked form is called with emu_lock held. */
void emu_backing_retire(void *base, size_t size);
void emu_backing_retire_locked(void *base, size_t size);

/* ---- memory.c ------------------------------------------------------------ */
long long emu_alloc_count_locked(int pinned);
long long emu_release_allocations_locked(int device);
/* Allocates device memory on the current device with the given allocation
 * flags (hipExtMallocWithFlags); freed by hipFree. */
hipError_t emu_allocate_device(void **ptr, size_t size, unsigned flags);
/* The allocation that contains ptr: returns 0 and fills the outputs (any
 * may be NULL), or -1 for memory the runtime does not know. */
int emu_lookup_locked(const void *ptr, uintptr_t *base, size_t *size, int *kind,
                      unsigned *flags);

/* ---- streammem.c --------------------------------------------------------- */
/* Runs a WAIT_VALUE operation on its worker: returns once the condition
 * holds or the stream is being discarded. Called and returns with the lock
 * held; waits on emu_progress with a short timeout, so a store by the host
 * is seen within EMU_WAIT_VALUE_POLL_NS and a stream write at once. */
void emu_run_wait_value_locked(struct ihipStream_t *s, struct emu_op *op);
/* Runs a WRITE_VALUE operation (release store). */
void emu_run_write_value(struct emu_op *op);
/* A WAIT_VALUE operation left the queue (run or discarded). */
void emu_wait_value_released_locked(void);
/* True when s has a WAIT_VALUE operation still queued or running. */
int emu_stream_has_wait_value_locked(const struct ihipStream_t *s);

#endif
