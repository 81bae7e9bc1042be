/* Events of the emulated HIP runtime: an event is a position in a stream's
 * queue (its latest record), reached when the stream's worker gets there. */
#include <pthread.h>
#include <stdlib.h>

#include "emu_hip.h"

static hipError_t emu_unlocked_hipEventQuery(hipEvent_t event);
static hipError_t emu_unlocked_hipEventRecordWithFlags(hipEvent_t event, hipStream_t stream, unsigned int flags);
EMU_EXPORT hipError_t hipEventRecordWithFlags(hipEvent_t event, hipStream_t stream, unsigned int flags);
static hipError_t emu_unlocked_hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags);

static struct ihipEvent_t *emu_find_event_locked(hipEvent_t handle) {
  for (struct ihipEvent_t *e = emu_events; e != NULL; e = e->next) {
    if (e == handle) return e;
  }
  return NULL;
}

void emu_event_unlink_locked(struct ihipEvent_t *e) {
  EMU_LIST_UNLINK(emu_events, e);
  e->live = 0;
  emu_live_events--;
}

EMU_EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned int flags) {
  if (event == NULL) return emu_ret(hipErrorInvalidValue);
  const unsigned supported = hipEventBlockingSync | hipEventDisableTiming | hipEventInterprocess |
                             hipEventDisableSystemFence | hipEventReleaseToDevice |
                             hipEventReleaseToSystem;
  const unsigned release = flags & (hipEventDisableSystemFence | hipEventReleaseToDevice |
                                    hipEventReleaseToSystem);
  if ((flags & ~supported) != 0 || (release & (release - 1)) != 0 ||
      ((flags & hipEventInterprocess) && !(flags & hipEventDisableTiming)))
    return emu_ret(hipErrorInvalidValue);
  int device;
  hipError_t status = emu_current_device(&device);
  if (status != hipSuccess) return emu_ret(status);
  struct ihipEvent_t *e = calloc(1, sizeof(*e));
  if (e == NULL) return emu_ret(hipErrorOutOfMemory);
  e->device = device;
  e->flags = flags;
  e->live = 1;
  e->refs = 1;
  emu_lock_acquire();
  e->next = emu_events;
  if (emu_events != NULL) emu_events->prev = e;
  emu_events = e;
  emu_live_events++;
  emu_lock_release();
  *event = e;
  return hipSuccess;
}

EMU_EXPORT hipError_t hipEventCreate(hipEvent_t *event) {
  return hipEventCreateWithFlags(event, hipEventDefault);
}

EMU_EXPORT hipError_t hipEventDestroy(hipEvent_t event) {
  if (event == NULL) return emu_ret(hipErrorInvalidHandle);
  emu_lock_acquire();
  struct ihipEvent_t *e = emu_find_event_locked(event);
  if (e != NULL) {
    emu_event_unlink_locked(e);
    emu_event_unref_locked(e);
  }
  emu_lock_release();
  return e != NULL ? hipSuccess : emu_ret(hipErrorContextIsDestroyed);
}

static hipError_t emu_unlocked_hipEventRecordWithFlags(hipEvent_t event, hipStream_t stream,
                                              unsigned int flags) {
  if (flags > 1) return emu_ret(hipErrorInvalidValue); /* Default or External */
  if (event == NULL) return emu_ret(hipErrorInvalidHandle);
  struct emu_op *op = emu_op_new(EMU_OP_RECORD);
  if (op == NULL) return emu_ret(hipErrorOutOfMemory);
  emu_lock_acquire();
  hipError_t status = hipSuccess;
  struct ihipStream_t *s = NULL;
  struct ihipEvent_t *e = emu_find_event_locked(event);
  if (e == NULL) status = hipErrorInvalidHandle;
  if (status == hipSuccess) status = emu_stream_resolve_locked(stream, &s);
  if (status == hipSuccess && s->device != e->device) status = hipErrorInvalidResourceHandle;
  if (status != hipSuccess) {
    free(op);
    emu_lock_release();
    return emu_ret(status);
  }
  op->event = e;
  e->refs++;
  op->gen = ++e->gen;
  status = emu_enqueue_locked(s, op);
  if (status != hipSuccess) e->gen--; /* the record never made it into the queue */
  emu_lock_release();
  return emu_ret(status);
}

EMU_EXPORT hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
  return hipEventRecordWithFlags(event, stream, 0);
}

static hipError_t emu_unlocked_hipEventQuery(hipEvent_t event) {
  if (event == NULL) return emu_ret(hipErrorInvalidHandle);
  emu_lock_acquire();
  struct ihipEvent_t *e = emu_find_event_locked(event);
  int ready = e != NULL && e->done_gen >= e->gen;
  emu_lock_release();
  if (e == NULL) return emu_ret(hipErrorInvalidHandle);
  return ready ? hipSuccess : hipErrorNotReady;
}

EMU_EXPORT hipError_t hipEventSynchronize(hipEvent_t event) {
  if (event == NULL) return emu_ret(hipErrorInvalidHandle);
  emu_lock_acquire();
  struct ihipEvent_t *e = emu_find_event_locked(event);
  hipError_t status = hipSuccess;
  if (e == NULL) {
    status = hipErrorInvalidHandle;
  } else if (e->done_gen < e->gen) {
    if (emu_tls_worker != NULL) {
      status = hipErrorNotSupported;
    } else {
      uint64_t gen = e->gen;
      e->refs++;
      while (e->done_gen < gen && !emu_shutdown) pthread_cond_wait(&emu_progress, &emu_lock);
      emu_event_unref_locked(e);
    }
  }
  emu_lock_release();
  return emu_ret(status);
}

EMU_EXPORT hipError_t hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop) {
  if (ms == NULL) return emu_ret(hipErrorInvalidValue);
  if (start == NULL || stop == NULL) return emu_ret(hipErrorInvalidHandle);
  emu_lock_acquire();
  struct ihipEvent_t *a = emu_find_event_locked(start);
  struct ihipEvent_t *b = emu_find_event_locked(stop);
  hipError_t status = hipSuccess;
  if (a == NULL || b == NULL || a->device != b->device) status = hipErrorInvalidHandle;
  else if (a->gen == 0 || b->gen == 0) status = hipErrorInvalidHandle;
  else if ((a->flags | b->flags) & hipEventDisableTiming) status = hipErrorInvalidHandle;
  else if (a->done_gen < a->gen || b->done_gen < b->gen) status = hipErrorNotReady;
  else *ms = (float)((double)((int64_t)b->stamp_ns - (int64_t)a->stamp_ns) / 1e6);
  emu_lock_release();
  if (status == hipErrorNotReady) return status;
  return emu_ret(status);
}

static hipError_t emu_unlocked_hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags) {
  if (flags > 1) return emu_ret(hipErrorInvalidValue); /* Default or External */
  if (event == NULL) return emu_ret(hipErrorInvalidHandle);
  struct emu_op *op = emu_op_new(EMU_OP_WAIT_EVENT);
  if (op == NULL) return emu_ret(hipErrorOutOfMemory);
  emu_lock_acquire();
  struct ihipStream_t *s = NULL;
  struct ihipEvent_t *e = emu_find_event_locked(event);
  hipError_t status = e == NULL ? hipErrorInvalidHandle : emu_stream_resolve_locked(stream, &s);
  if (status != hipSuccess || e->done_gen >= e->gen) {
    /* Unknown handles fail; an event never recorded, or already reached,
     * needs no wait. */
    free(op);
    emu_lock_release();
    return emu_ret(status);
  }
  op->event = e;
  e->refs++;
  op->gen = e->gen;
  status = emu_enqueue_locked(s, op);
  emu_lock_release();
  return emu_ret(status);
}

/* ---- entries that hold the runtime lock (runtime.c) ---------------------- */
EMU_LOCKED_ENTRY(EMU_EXPORT hipError_t, hipEventQuery, (hipEvent_t event), (event))
EMU_LOCKED_ENTRY(EMU_EXPORT hipError_t, hipEventRecordWithFlags,
                 (hipEvent_t event, hipStream_t stream, unsigned int flags),
                 (event, stream, flags))
EMU_LOCKED_ENTRY(EMU_EXPORT hipError_t, hipStreamWaitEvent,
                 (hipStream_t stream, hipEvent_t event, unsigned int flags),
                 (stream, event, flags))
