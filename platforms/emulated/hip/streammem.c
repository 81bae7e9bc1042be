/* Stream memory operations of the emulated HIP runtime: hipStreamWaitValue32/64,
 * hipStreamWriteValue32/64 and hipExtMallocWithFlags (signal memory).
 *
 * A wait is an operation in its stream's queue. When the worker reaches it,
 * it loads the word with acquire semantics and, while the condition does not
 * hold, sleeps on emu_progress with a short timeout: a WriteValue on another
 * stream (or any other completed operation) wakes it at once, a plain store
 * by the host is seen within EMU_WAIT_VALUE_POLL_MAX_NS. A write is a release
 * store run in stream order.
 *
 * Arguments are checked as AMD's runtime checks them: a NULL ptr, memory the
 * runtime did not allocate or register, and an unknown compare operation give
 * hipErrorInvalidValue; an unknown stream hipErrorContextIsDestroyed. Like
 * AMD's runtime by default, a wait accepts any memory the runtime knows; with
 * GPU_STREAMOPS_CP_WAIT set (or the hipEmuStreamMemRequireSignal hook) it
 * accepts only signal memory, as AMD's runtime then does. The word must be
 * naturally aligned (4 or 8 bytes): an unaligned atomic is not possible. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "emu_hip.h"

static hipError_t emu_stream_mem_op(hipStream_t stream, void *ptr, uint64_t value, uint64_t mask, unsigned flags, unsigned width, int wait);
static hipError_t emu_unlocked_emu_stream_mem_op(hipStream_t stream, void *ptr, uint64_t value, uint64_t mask, unsigned flags, unsigned width, int wait);

#define EMU_WAIT_VALUE_POLL_MIN_NS 10000ull  /* first re-check of a blocked wait */
#define EMU_WAIT_VALUE_POLL_MAX_NS 500000ull /* latency bound for host stores */

enum { EMU_SMOP_WAIT = 0, EMU_SMOP_WRITE = 1, EMU_SMOP_COUNT = 2 };

/* All under emu_lock. */
static long long emu_pending_waits = 0; /* WAIT_VALUE operations queued or running */
static long long emu_blocked_waits = 0; /* ... of which a worker is blocked in */
static hipError_t emu_fault_error[EMU_SMOP_COUNT];
static unsigned emu_fault_count[EMU_SMOP_COUNT];
static int emu_require_signal = -1;     /* -1: not yet read from the environment */

static int emu_require_signal_locked(void) {
  if (emu_require_signal < 0) {
    const char *v = getenv("GPU_STREAMOPS_CP_WAIT");
    emu_require_signal = v != NULL && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0);
  }
  return emu_require_signal;
}

/* ---- the worker side ------------------------------------------------------ */

static uint64_t emu_load_value(const struct emu_op *op) {
  if (op->elem_size == 4) return __atomic_load_n((const uint32_t *)op->dst, __ATOMIC_ACQUIRE);
  return __atomic_load_n((const uint64_t *)op->dst, __ATOMIC_ACQUIRE);
}

static int emu_condition_holds(const struct emu_op *op) {
  const uint64_t width = op->elem_size == 4 ? 0xffffffffull : ~0ull;
  const uint64_t v = emu_load_value(op) & op->mask;
  switch (op->cmp) {
    case hipStreamWaitValueGte: return v >= op->value;
    case hipStreamWaitValueEq: return v == op->value;
    case hipStreamWaitValueAnd: return (v & op->value) != 0;
    case hipStreamWaitValueNor: return (~(v | (op->value & op->mask)) & width) != 0;
    default: return 1; /* refused at submission */
  }
}

void emu_run_wait_value_locked(struct ihipStream_t *s, struct emu_op *op) {
  if (emu_condition_holds(op)) return;
  emu_blocked_waits++;
  uint64_t poll_ns = EMU_WAIT_VALUE_POLL_MIN_NS;
  while (!s->discard && !emu_condition_holds(op)) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    uint64_t ns = (uint64_t)deadline.tv_nsec + poll_ns;
    deadline.tv_sec += (time_t)(ns / 1000000000ull);
    deadline.tv_nsec = (long)(ns % 1000000000ull);
    pthread_cond_timedwait(&emu_progress, &emu_lock, &deadline);
    if (poll_ns < EMU_WAIT_VALUE_POLL_MAX_NS) poll_ns *= 2;
    if (poll_ns > EMU_WAIT_VALUE_POLL_MAX_NS) poll_ns = EMU_WAIT_VALUE_POLL_MAX_NS;
  }
  emu_blocked_waits--;
}

void emu_run_write_value(struct emu_op *op) {
  if (op->elem_size == 4)
    __atomic_store_n((uint32_t *)op->dst, (uint32_t)op->value, __ATOMIC_RELEASE);
  else
    __atomic_store_n((uint64_t *)op->dst, op->value, __ATOMIC_RELEASE);
}

void emu_wait_value_released_locked(void) { emu_pending_waits--; }

int emu_stream_has_wait_value_locked(const struct ihipStream_t *s) {
  for (const struct emu_op *op = s->head; op != NULL; op = op->next) {
    if (op->kind == EMU_OP_WAIT_VALUE) return 1;
  }
  return 0;
}

/* ---- submission ------------------------------------------------------------ */

static hipError_t emu_unlocked_emu_stream_mem_op(hipStream_t stream, void *ptr, uint64_t value, uint64_t mask,
                                    unsigned flags, unsigned width, int wait) {
  if (ptr == NULL) return hipErrorInvalidValue;
  if (wait && flags > hipStreamWaitValueNor) return hipErrorInvalidValue;
  struct emu_op *op = emu_op_new(wait ? EMU_OP_WAIT_VALUE : EMU_OP_WRITE_VALUE);
  if (op == NULL) return hipErrorOutOfMemory;
  op->dst = ptr;
  op->elem_size = width;
  op->value = value;
  op->mask = mask;
  op->cmp = flags;
  emu_lock_acquire();
  struct ihipStream_t *s = NULL;
  hipError_t status = emu_stream_resolve_locked(stream, &s);
  uintptr_t base = 0;
  size_t size = 0;
  int kind = 0;
  unsigned alloc_flags = 0;
  if (status == hipSuccess) {
    uintptr_t p = (uintptr_t)ptr;
    if (emu_lookup_locked(ptr, &base, &size, &kind, &alloc_flags) != 0 ||
        size - (p - base) < width || (p & (width - 1)) != 0)
      status = hipErrorInvalidValue;
    else if (wait && emu_require_signal_locked() &&
             !(kind == EMU_MEM_DEVICE && alloc_flags == hipMallocSignalMemory))
      status = hipErrorInvalidValue;
  }
  const int which = wait ? EMU_SMOP_WAIT : EMU_SMOP_WRITE;
  if (status == hipSuccess && emu_fault_count[which] > 0) {
    emu_fault_count[which]--;
    status = emu_fault_error[which];
  }
  if (status != hipSuccess) {
    free(op);
    emu_lock_release();
    return status;
  }
  if (wait) emu_pending_waits++; /* the release of the op counts it down */
  status = emu_enqueue_locked(s, op);
  emu_lock_release();
  return status;
}

EMU_EXPORT hipError_t hipStreamWaitValue32(hipStream_t stream, void *ptr, uint32_t value,
                                           unsigned int flags, uint32_t mask) {
  return emu_ret(emu_stream_mem_op(stream, ptr, value, mask, flags, 4, 1));
}

EMU_EXPORT hipError_t hipStreamWaitValue64(hipStream_t stream, void *ptr, uint64_t value,
                                           unsigned int flags, uint64_t mask) {
  return emu_ret(emu_stream_mem_op(stream, ptr, value, mask, flags, 8, 1));
}

/* flags: "reserved, ignored for now" in HIP's documentation; ignored. */
EMU_EXPORT hipError_t hipStreamWriteValue32(hipStream_t stream, void *ptr, uint32_t value,
                                            unsigned int flags) {
  return emu_ret(emu_stream_mem_op(stream, ptr, value, 0, 0, 4, 0));
}

EMU_EXPORT hipError_t hipStreamWriteValue64(hipStream_t stream, void *ptr, uint64_t value,
                                            unsigned int flags) {
  return emu_ret(emu_stream_mem_op(stream, ptr, value, 0, 0, 8, 0));
}

/* ---- hipExtMallocWithFlags ------------------------------------------------- */

/* Default, fine-grained and uncached device memory are all plain device
 * memory here (host memory is coherent); the flag is kept as the
 * allocation's flags. Signal memory must be 8 bytes, as on AMD's runtime,
 * and starts at zero. All of them count as device allocations and are freed
 * by hipFree. */
EMU_EXPORT hipError_t hipExtMallocWithFlags(void **ptr, size_t size, unsigned int flags) {
  if (ptr == NULL) return emu_ret(hipErrorInvalidValue);
  switch (flags) {
    case hipDeviceMallocDefault:
    case hipDeviceMallocFinegrained:
    case hipDeviceMallocUncached:
      break;
    case hipMallocSignalMemory:
      if (size != 8) return emu_ret(hipErrorInvalidValue);
      break;
    default:
      return emu_ret(hipErrorInvalidValue);
  }
  hipError_t status = emu_allocate_device(ptr, size, flags);
  if (status == hipSuccess && flags == hipMallocSignalMemory)
    __atomic_store_n((uint64_t *)*ptr, 0, __ATOMIC_RELEASE);
  return emu_ret(status);
}

/* ---- test hooks ------------------------------------------------------------ */

EMU_EXPORT int hipEmuStreamMemCounters(long long *pending_waits, long long *blocked_waits) {
  emu_lock_acquire();
  if (pending_waits != NULL) *pending_waits = emu_pending_waits;
  if (blocked_waits != NULL) *blocked_waits = emu_blocked_waits;
  emu_lock_release();
  return 0;
}

EMU_EXPORT int hipEmuStreamMemInjectFault(int op, int error, unsigned count) {
  if (op < 0 || op >= EMU_SMOP_COUNT || (count > 0 && error == hipSuccess)) return -1;
  emu_lock_acquire();
  emu_fault_error[op] = error;
  emu_fault_count[op] = count;
  emu_lock_release();
  return 0;
}

EMU_EXPORT void hipEmuStreamMemRequireSignal(int on) {
  emu_lock_acquire();
  emu_require_signal = on < 0 ? -1 : on != 0;
  emu_lock_release();
}

EMU_EXPORT void hipEmuStreamMemReset(void) {
  emu_lock_acquire();
  memset(emu_fault_count, 0, sizeof(emu_fault_count));
  emu_require_signal = -1;
  emu_lock_release();
}

/* A forked child forgets the parent's streams (lifecycle.c), and with them
 * their queued and blocked waits. */
static void emu_streammem_fork_child(void) {
  emu_pending_waits = 0;
  emu_blocked_waits = 0;
}

__attribute__((constructor)) static void emu_streammem_load(void) {
  pthread_atfork(NULL, NULL, emu_streammem_fork_child);
}

/* ---- entries that hold the runtime lock (runtime.c) ---------------------- */
EMU_LOCKED_ENTRY(static hipError_t, emu_stream_mem_op,
                 (hipStream_t stream, void *ptr, uint64_t value, uint64_t mask, unsigned flags, unsigned width, int wait),
                 (stream, ptr, value, mask, flags, width, wait))
