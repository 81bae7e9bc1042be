/* The stream API of the emulated HIP runtime: creating, destroying,
 * synchronizing and querying streams, and enqueuing host functions,
 * callbacks and memory operations (queue.c runs them). */
#define _GNU_SOURCE
#include <pthread.h>

#include "emu_hip.h"

static hipError_t emu_submit(hipStream_t stream, struct emu_op *op);
static hipError_t emu_unlocked_hipStreamQuery(hipStream_t stream);

static hipError_t emu_stream_create(hipStream_t *stream, unsigned flags, int priority) {
  if (stream == NULL) return hipErrorInvalidValue;
  if (flags != hipStreamDefault && flags != hipStreamNonBlocking) return hipErrorInvalidValue;
  int device;
  hipError_t status = emu_current_device(&device);
  if (status != hipSuccess) return status;
  if (priority < -1) priority = -1;
  if (priority > 0) priority = 0;
  emu_lock_acquire();
  struct ihipStream_t *s = NULL;
  if (emu_shutdown) {
    status = hipErrorDeinitialized;
  } else {
    status = emu_stream_new_locked(device, flags, priority, 0, &s);
    if (status == hipSuccess) emu_live_streams++;
  }
  emu_lock_release();
  if (status == hipSuccess) *stream = s;
  return status;
}

EMU_EXPORT hipError_t hipStreamCreate(hipStream_t *stream) {
  return emu_ret(emu_stream_create(stream, hipStreamDefault, 0));
}

EMU_EXPORT hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags) {
  return emu_ret(emu_stream_create(stream, flags, 0));
}

EMU_EXPORT hipError_t hipStreamCreateWithPriority(hipStream_t *stream, unsigned int flags,
                                                  int priority) {
  return emu_ret(emu_stream_create(stream, flags, priority));
}

EMU_EXPORT hipError_t hipStreamDestroy(hipStream_t stream) {
  if (stream == NULL) return emu_ret(hipErrorInvalidHandle);
  if (stream == EMU_STREAM_LEGACY || stream == EMU_STREAM_PER_THREAD)
    return emu_ret(hipErrorInvalidResourceHandle);
  emu_lock_acquire();
  struct ihipStream_t *s = emu_find_user_stream_locked(stream);
  if (s == NULL) {
    emu_lock_release();
    return emu_ret(hipErrorContextIsDestroyed);
  }
  if (emu_tls_worker != NULL) {
    /* From a host function: waiting for the stream could wait for itself. */
    emu_lock_release();
    return emu_ret(hipErrorNotSupported);
  }
  if (emu_stream_has_wait_value_locked(s)) {
    /* A stream wait may block until some other party writes memory, which
     * may never happen: the handle is released now, the queued work still
     * runs in order once the wait is satisfied, and the worker frees the
     * stream when its queue is empty (as CUDA and HIP may do). */
    s->live = 0;
    emu_live_streams--;
    s->detached = 1;
    emu_detached_workers++;
    s->stopping = 1;
    pthread_detach(s->thread);
    pthread_cond_signal(&s->work);
    emu_lock_release();
    return hipSuccess;
  }
  emu_stream_retire_locked(s);
  emu_stream_join_and_drop_locked(s);
  emu_lock_release();
  return hipSuccess;
}

EMU_EXPORT hipError_t hipStreamSynchronize(hipStream_t stream) {
  emu_lock_acquire();
  struct ihipStream_t *s = NULL;
  hipError_t status = emu_stream_resolve_locked(stream, &s);
  if (status == hipSuccess) {
    if (s->is_null) status = emu_sync_device_locked(s->device, 1);
    else if (s->completed >= s->enqueued) status = hipSuccess;
    else if (emu_tls_worker != NULL) status = hipErrorNotSupported; /* could wait for itself */
    else emu_wait_seq_locked(s, s->enqueued);
  }
  emu_lock_release();
  return emu_ret(status);
}

static hipError_t emu_unlocked_hipStreamQuery(hipStream_t stream) {
  emu_lock_acquire();
  struct ihipStream_t *s = NULL;
  hipError_t status = emu_stream_resolve_locked(stream, &s);
  int busy = 0;
  if (status == hipSuccess) {
    if (s->is_null) {
      for (struct ihipStream_t *t = emu_streams; t != NULL; t = t->next) {
        if (t->device == s->device && (t->is_null || !(t->flags & hipStreamNonBlocking)) &&
            t->completed < t->enqueued)
          busy = 1;
      }
    } else {
      busy = s->completed < s->enqueued;
    }
  }
  emu_lock_release();
  if (status != hipSuccess) return emu_ret(status);
  return busy ? hipErrorNotReady : hipSuccess;
}

/* What the stream getters report of a user stream, copied under the lock. */
struct emu_stream_info {
  unsigned flags;
  int priority;
  int device;
};

/* Returns 0 and fills *info for a live user stream, -1 for any other handle. */
static int emu_user_stream_info(hipStream_t stream, struct emu_stream_info *info) {
  emu_lock_acquire();
  struct ihipStream_t *s = emu_find_user_stream_locked(stream);
  if (s != NULL) *info = (struct emu_stream_info){s->flags, s->priority, s->device};
  emu_lock_release();
  return s != NULL ? 0 : -1;
}

EMU_EXPORT hipError_t hipStreamGetFlags(hipStream_t stream, unsigned int *flags) {
  struct emu_stream_info info = {hipStreamDefault, 0, 0};
  if (flags == NULL || stream == NULL) return emu_ret(hipErrorInvalidValue);
  if (!emu_is_null_handle(stream) && emu_user_stream_info(stream, &info) != 0)
    return emu_ret(hipErrorInvalidResourceHandle);
  *flags = info.flags;
  return hipSuccess;
}

EMU_EXPORT hipError_t hipStreamGetPriority(hipStream_t stream, int *priority) {
  struct emu_stream_info info = {hipStreamDefault, 0, 0};
  if (priority == NULL) return emu_ret(hipErrorInvalidValue);
  if (!emu_is_null_handle(stream) && emu_user_stream_info(stream, &info) != 0)
    return emu_ret(hipErrorInvalidResourceHandle);
  *priority = info.priority;
  return hipSuccess;
}

EMU_EXPORT hipError_t hipStreamGetDevice(hipStream_t stream, hipDevice_t *device) {
  struct emu_stream_info info;
  if (device == NULL) return emu_ret(hipErrorInvalidValue);
  if (emu_is_null_handle(stream)) return emu_ret(emu_current_device(device));
  if (emu_user_stream_info(stream, &info) != 0) return emu_ret(hipErrorContextIsDestroyed);
  *device = info.device;
  return hipSuccess;
}

EMU_EXPORT int hipEmuStreamDevice(hipStream_t stream, int *device) {
  struct emu_stream_info info;
  if (emu_is_null_handle(stream)) {
    if (emu_current_device(&info.device) != hipSuccess) return -1;
  } else if (emu_user_stream_info(stream, &info) != 0) {
    return -1;
  }
  if (device != NULL) *device = info.device;
  return 0;
}

static hipError_t emu_unlocked_emu_submit(hipStream_t stream, struct emu_op *op) {
  emu_lock_acquire();
  struct ihipStream_t *s = NULL;
  hipError_t status = emu_stream_resolve_locked(stream, &s);
  if (status == hipSuccess) status = emu_enqueue_locked(s, op);
  else emu_op_release_locked(op);
  emu_lock_release();
  return status;
}

EMU_EXPORT hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void *user_data) {
  if (fn == NULL) return emu_ret(hipErrorInvalidValue);
  struct emu_op *op = emu_op_new(EMU_OP_HOST_FN);
  if (op == NULL) return emu_ret(hipErrorOutOfMemory);
  op->fn = fn;
  op->user_data = user_data;
  return emu_ret(emu_submit(stream, op));
}

EMU_EXPORT hipError_t hipStreamAddCallback(hipStream_t stream, hipStreamCallback_t callback,
                                           void *user_data, unsigned int flags) {
  if (callback == NULL || flags != 0) return emu_ret(hipErrorInvalidValue);
  struct emu_op *op = emu_op_new(EMU_OP_CALLBACK);
  if (op == NULL) return emu_ret(hipErrorOutOfMemory);
  op->callback = callback;
  op->handle = stream;
  op->user_data = user_data;
  return emu_ret(emu_submit(stream, op));
}

hipError_t emu_submit_memory_op(hipStream_t stream, struct emu_op *op, int wait) {
  /* The runtime lock is held for the enqueue, not for the wait. */
  emu_api_enter();
  emu_lock_acquire();
  struct ihipStream_t *s = NULL;
  hipError_t status = emu_stream_resolve_locked(stream, &s);
  if (status == hipSuccess && wait && emu_tls_worker != NULL) status = hipErrorNotSupported;
  while (op != NULL) {
    struct emu_op *next = op->next;
    op->next = NULL;
    if (status == hipSuccess) {
      status = emu_enqueue_locked(s, op);   /* releases op when it fails */
    } else {
      emu_op_release_locked(op);
    }
    op = next;
  }
  emu_api_leave();
  if (status == hipSuccess && wait) emu_wait_seq_locked(s, s->enqueued);
  emu_lock_release();
  return status;
}

/* ---- entries that hold the runtime lock (runtime.c) ---------------------- */
EMU_LOCKED_ENTRY(static hipError_t, emu_submit,
                 (hipStream_t stream, struct emu_op *op),
                 (stream, op))
EMU_LOCKED_ENTRY(EMU_EXPORT hipError_t, hipStreamQuery, (hipStream_t stream), (stream))
