/* Streams, events and host functions of the emulated HIP runtime.
 *
 * Every stream, and the null stream of each device, has a worker thread that
 * runs its queue in order; host functions and callbacks it reaches run on the
 * process's one host-function thread while it waits (hostfn.c). A position
 * in a queue is a sequence number: the stream has finished position n once
 * `completed >= n`.
 *
 * The null stream is HIP's legacy default stream: an operation enqueued on it
 * first waits for everything already enqueued on the blocking streams of its
 * device, and an operation enqueued on a blocking stream first waits for
 * everything already enqueued on the null stream (streams created with
 * hipStreamNonBlocking are exempt). These waits are queued as WAIT_STREAM
 * operations; since every wait names work enqueued earlier, waits never form
 * a cycle.
 *
 * Streams and events are reference counted: a queued operation or a waiting
 * thread that points at one keeps its memory alive after the user destroyed
 * the handle. Handles are only ever compared against the live lists, never
 * dereferenced before they are found there. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu_hip.h"

static hipError_t emu_submit(hipStream_t stream, struct emu_op *op);
static hipError_t emu_unlocked_emu_submit(hipStream_t stream, struct emu_op *op);
static hipError_t emu_unlocked_hipEventQuery(hipEvent_t event);
static hipError_t emu_unlocked_hipEventRecordWithFlags(hipEvent_t event, hipStream_t stream, unsigned int flags);
EMU_EXPORT hipError_t hipEventRecordWithFlags(hipEvent_t event, hipStream_t stream, unsigned int flags);
static hipError_t emu_unlocked_hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags);
static hipError_t emu_unlocked_hipStreamQuery(hipStream_t stream);

static struct ihipStream_t *emu_streams = NULL; /* every stream with a worker */
static struct ihipStream_t *emu_null_streams[EMU_MAX_DEVICES];
static struct ihipEvent_t *emu_events = NULL;   /* live events */
static long long emu_live_streams = 0;
static long long emu_live_events = 0;

long long emu_stream_count_locked(void) { return emu_live_streams; }
long long emu_event_count_locked(void) { return emu_live_events; }

struct emu_op *emu_op_new(enum emu_op_kind kind) {
  struct emu_op *op = calloc(1, sizeof(*op));
  if (op != NULL) op->kind = kind;
  return op;
}

static void emu_stream_unref_locked(struct ihipStream_t *s) {
  if (--s->refs == 0) {
    pthread_cond_destroy(&s->work);
    free(s);
  }
}

static void emu_event_unref_locked(struct ihipEvent_t *e) {
  if (--e->refs == 0) free(e);
}

static void emu_op_release_locked(struct emu_op *op) {
  if (op->kind == EMU_OP_WAIT_VALUE) emu_wait_value_released_locked();
  if (op->event != NULL) emu_event_unref_locked(op->event);
  if (op->target != NULL) emu_stream_unref_locked(op->target);
  free(op);
}

/* ---- worker threads ------------------------------------------------------ */

static void emu_fill(void *dst, uint32_t pattern, unsigned elem_size, size_t count) {
  unsigned char *p = dst;
  if (elem_size == 1) {
    memset(p, (int)(pattern & 0xffu), count);
  } else if (elem_size == 2) {
    uint16_t v = (uint16_t)pattern;
    for (size_t i = 0; i < count; ++i) memcpy(p + 2 * i, &v, 2);
  } else {
    for (size_t i = 0; i < count; ++i) memcpy(p + 4 * i, &pattern, 4);
  }
}

/* Runs one operation; called and returns with the lock held, drops it while
 * touching user memory or running user code. */
static void emu_run_op_locked(struct ihipStream_t *s, struct emu_op *op) {
  switch (op->kind) {
    case EMU_OP_COPY:
      emu_lock_release();
      memmove(op->dst, op->src, op->bytes);
      emu_lock_acquire();
      break;
    case EMU_OP_FILL:
      emu_lock_release();
      emu_fill(op->dst, op->pattern, op->elem_size, op->bytes);
      emu_lock_acquire();
      break;
    case EMU_OP_HOST_FN:
    case EMU_OP_CALLBACK:
      /* On the process's one host-function thread (hostfn.c); the stream
       * waits here until it has run. */
      emu_run_host_op_locked(s, op);
      break;
    case EMU_OP_RECORD:
      if (op->gen > op->event->done_gen) {
        op->event->done_gen = op->gen;
        op->event->stamp_ns = emu_now_ns();
      }
      break;
    case EMU_OP_WAIT_EVENT:
      while (op->event->done_gen < op->gen && !s->discard)
        pthread_cond_wait(&emu_progress, &emu_lock);
      break;
    case EMU_OP_WAIT_STREAM:
      while (op->target->completed < op->target_seq && !s->discard)
        pthread_cond_wait(&emu_progress, &emu_lock);
      break;
    case EMU_OP_WAIT_VALUE:
      emu_run_wait_value_locked(s, op);
      break;
    case EMU_OP_WRITE_VALUE:
      emu_run_write_value(op);
      break;
  }
}

static void emu_stream_unlink_locked(struct ihipStream_t *s);
static int emu_detached_workers = 0; /* detached workers still running */

static void *emu_worker_main(void *arg) {
  struct ihipStream_t *s = arg;
  emu_tls_worker = s;
  emu_set_current_device(s->device);
  emu_lock_acquire();
  for (;;) {
    while (s->head == NULL && !s->stopping) pthread_cond_wait(&s->work, &emu_lock);
    struct emu_op *op = s->head;
    if (op == NULL) break;
    if (!s->discard) emu_run_op_locked(s, op);
    s->head = op->next;
    if (s->head == NULL) s->tail = NULL;
    s->completed = op->seq;
    emu_op_release_locked(op);
    pthread_cond_broadcast(&emu_progress);
  }
  /* A stream destroyed while blocked in a stream wait was left to finish on
   * its own: its worker unlinks and frees it (unless the library is
   * unloading, when nothing is freed). */
  if (s->detached) {
    emu_detached_workers--;
    pthread_cond_broadcast(&emu_progress);
    if (!emu_shutdown) {
      emu_stream_unlink_locked(s);
      emu_stream_unref_locked(s);
    }
  }
  emu_lock_release();
  return NULL;
}

static hipError_t emu_stream_new_locked(int device, unsigned flags, int priority, int is_null,
                                        struct ihipStream_t **out) {
  struct ihipStream_t *s = calloc(1, sizeof(*s));
  if (s == NULL) return hipErrorOutOfMemory;
  s->device = device;
  s->flags = flags;
  s->priority = priority;
  s->is_null = is_null;
  s->live = 1;
  s->refs = 1;
  if (pthread_cond_init(&s->work, NULL) != 0) {
    free(s);
    return hipErrorOutOfMemory;
  }
  /* Workers take no signals: they belong to the application's threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&s->thread, NULL, emu_worker_main, s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    pthread_cond_destroy(&s->work);
    free(s);
    return hipErrorOutOfMemory;
  }
  s->thread_started = 1;
  s->next = emu_streams;
  if (emu_streams != NULL) emu_streams->prev = s;
  emu_streams = s;
  *out = s;
  return hipSuccess;
}

/* Takes node out of the doubly linked list (prev/next) that starts at head. */
#define EMU_LIST_UNLINK(head, node)                          \
  do {                                                       \
    if ((node)->prev != NULL) (node)->prev->next = (node)->next; \
    else if ((head) == (node)) (head) = (node)->next;        \
    if ((node)->next != NULL) (node)->next->prev = (node)->prev; \
    (node)->prev = (node)->next = NULL;                      \
  } while (0)

static void emu_stream_unlink_locked(struct ihipStream_t *s) { EMU_LIST_UNLINK(emu_streams, s); }

static int emu_is_null_handle(hipStream_t handle) {
  return handle == NULL || handle == EMU_STREAM_LEGACY || handle == EMU_STREAM_PER_THREAD;
}

static struct ihipStream_t *emu_find_user_stream_locked(hipStream_t handle) {
  for (struct ihipStream_t *s = emu_streams; s != NULL; s = s->next) {
    if (s == handle && s->live && !s->is_null) return s;
  }
  return NULL;
}

hipError_t emu_stream_resolve_locked(hipStream_t handle, struct ihipStream_t **out) {
  if (emu_shutdown) return hipErrorDeinitialized;
  if (emu_is_null_handle(handle)) {
    int device;
    hipError_t status = emu_current_device(&device);
    if (status != hipSuccess) return status;
    if (emu_null_streams[device] == NULL) {
      status = emu_stream_new_locked(device, hipStreamDefault, 0, 1, &emu_null_streams[device]);
      if (status != hipSuccess) return status;
    }
    *out = emu_null_streams[device];
    return hipSuccess;
  }
  struct ihipStream_t *s = emu_find_user_stream_locked(handle);
  if (s == NULL) return hipErrorContextIsDestroyed;
  *out = s;
  return hipSuccess;
}

static void emu_push_locked(struct ihipStream_t *s, struct emu_op *op) {
  op->seq = ++s->enqueued;
  op->next = NULL;
  if (s->tail != NULL) s->tail->next = op;
  else s->head = op;
  s->tail = op;
}

/* Makes s wait for all work enqueued so far on t. */
static hipError_t emu_push_wait_locked(struct ihipStream_t *s, struct ihipStream_t *t) {
  if (t == s || t->completed >= t->enqueued) return hipSuccess;
  struct emu_op *op = emu_op_new(EMU_OP_WAIT_STREAM);
  if (op == NULL) return hipErrorOutOfMemory;
  op->target = t;
  op->target_seq = t->enqueued;
  t->refs++;
  emu_push_locked(s, op);
  return hipSuccess;
}

hipError_t emu_enqueue_locked(struct ihipStream_t *s, struct emu_op *op) {
  hipError_t status = hipSuccess;
  if (s->is_null) {
    for (struct ihipStream_t *t = emu_streams; t != NULL && status == hipSuccess; t = t->next) {
      if (t->device == s->device && !t->is_null && !(t->flags & hipStreamNonBlocking))
        status = emu_push_wait_locked(s, t);
    }
  } else if (!(s->flags & hipStreamNonBlocking) && emu_null_streams[s->device] != NULL) {
    status = emu_push_wait_locked(s, emu_null_streams[s->device]);
  }
  if (status != hipSuccess) {
    emu_op_release_locked(op);
    pthread_cond_signal(&s->work);
    return status;
  }
  emu_push_locked(s, op);
  pthread_cond_signal(&s->work);
  return hipSuccess;
}

void emu_wait_seq_locked(struct ihipStream_t *s, uint64_t seq) {
  s->refs++;
  while (s->completed < seq && !emu_shutdown) pthread_cond_wait(&emu_progress, &emu_lock);
  emu_stream_unref_locked(s);
}

hipError_t emu_sync_device_locked(int device, int blocking_only) {
  /* A host function waiting for streams could wait for itself. */
  if (emu_tls_worker != NULL) return hipErrorNotSupported;
  size_t n = 0;
  for (struct ihipStream_t *s = emu_streams; s != NULL; s = s->next) ++n;
  if (n == 0) return hipSuccess;
  struct ihipStream_t **targets = malloc(n * sizeof(*targets));
  uint64_t *seqs = malloc(n * sizeof(*seqs));
  if (targets == NULL || seqs == NULL) {
    free(targets);
    free(seqs);
    return hipErrorOutOfMemory;
  }
  size_t k = 0;
  for (struct ihipStream_t *s = emu_streams; s != NULL; s = s->next) {
    if (device >= 0 && s->device != device) continue;
    if (blocking_only && !s->is_null && (s->flags & hipStreamNonBlocking)) continue;
    s->refs++;
    targets[k] = s;
    seqs[k] = s->enqueued;
    ++k;
  }
  for (size_t i = 0; i < k; ++i) {
    struct ihipStream_t *s = targets[i];
    while (s->completed < seqs[i] && !emu_shutdown) pthread_cond_wait(&emu_progress, &emu_lock);
    emu_stream_unref_locked(s);
  }
  free(targets);
  free(seqs);
  return hipSuccess;
}

/* Marks s destroyed, waits for its work, and stops its worker. The caller
 * joins the thread with the lock released and then drops the reference. */
static void emu_stream_retire_locked(struct ihipStream_t *s) {
  s->live = 0;
  emu_live_streams--;
  emu_wait_seq_locked(s, s->enqueued);
  emu_stream_unlink_locked(s);
  s->stopping = 1;
  pthread_cond_signal(&s->work);
}

static void emu_stream_join_and_drop_locked(struct ihipStream_t *s) {
  /* Once unloading has begun the worker may already be joined, or still be
   * stuck in a host function: leave both the thread and the memory alone. */
  if (emu_shutdown) return;
  emu_lock_release();
  pthread_join(s->thread, NULL);
  emu_lock_acquire();
  emu_stream_unref_locked(s);
}

/* ---- stream API ---------------------------------------------------------- */

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
  if (status != hipSuccess) {
    emu_op_release_locked(op);
    emu_lock_release();
    emu_api_leave();
    return status;
  }
  status = emu_enqueue_locked(s, op);
  emu_api_leave();
  if (status == hipSuccess && wait) emu_wait_seq_locked(s, s->enqueued);
  emu_lock_release();
  return status;
}

/* ---- events -------------------------------------------------------------- */

static struct ihipEvent_t *emu_find_event_locked(hipEvent_t handle) {
  for (struct ihipEvent_t *e = emu_events; e != NULL; e = e->next) {
    if (e == handle) return e;
  }
  return NULL;
}

static void emu_event_unlink_locked(struct ihipEvent_t *e) {
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

/* ---- bulk release (hipDeviceReset, hipEmuReleaseAll) ---------------------- */

long long emu_release_streams_events_locked(int device) {
  long long released = 0;
  struct ihipStream_t **retired = NULL;
  size_t n_retired = 0;
  for (;;) {
    struct ihipStream_t *victim = NULL;
    for (struct ihipStream_t *s = emu_streams; s != NULL; s = s->next) {
      if (s->live && !s->is_null && (device < 0 || s->device == device)) {
        victim = s;
        break;
      }
    }
    if (victim == NULL) break;
    struct ihipStream_t **grown = realloc(retired, (n_retired + 1) * sizeof(*retired));
    if (grown == NULL) break;
    retired = grown;
    emu_stream_retire_locked(victim);
    retired[n_retired++] = victim;
  }
  for (size_t i = 0; i < n_retired; ++i) emu_stream_join_and_drop_locked(retired[i]);
  free(retired);
  released += (long long)n_retired;

  struct ihipEvent_t *e = emu_events;
  while (e != NULL) {
    struct ihipEvent_t *next = e->next;
    if (device < 0 || e->device == device) {
      emu_event_unlink_locked(e);
      emu_event_unref_locked(e);
      released++;
    }
    e = next;
  }
  return released;
}

/* ---- unload ------------------------------------------------------------- */

/* Stops every worker and the host-function thread when the library is
 * unloaded (normally at process exit): queued work that has not started is
 * dropped, a running operation is allowed to finish. A host function that
 * does not return (and the worker waiting for it) is given up on after a
 * timeout so that exit never hangs. Nothing is freed: other
 * threads may still hold handles. */
__attribute__((destructor)) static void emu_unload(void) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 2;
  if (pthread_mutex_timedlock(&emu_lock, &deadline) != 0) return;
  emu_shutdown = 1;
  size_t n = 0;
  for (struct ihipStream_t *s = emu_streams; s != NULL; s = s->next) ++n;
  pthread_t *threads = n ? malloc(n * sizeof(*threads)) : NULL;
  size_t k = 0;
  for (struct ihipStream_t *s = emu_streams; s != NULL; s = s->next) {
    s->stopping = 1;
    s->discard = 1;
    pthread_cond_signal(&s->work);
    if (threads != NULL && s->thread_started && !s->detached) threads[k++] = s->thread;
  }
  pthread_t host_thread;
  int join_host = emu_host_dispatcher_stop_locked(&host_thread);
  pthread_cond_broadcast(&emu_progress);
  pthread_mutex_unlock(&emu_lock);
  /* One deadline for all workers and the host-function thread together. */
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 2;
  for (size_t i = 0; i < k; ++i) pthread_timedjoin_np(threads[i], NULL, &deadline);
  free(threads);
  if (join_host) pthread_timedjoin_np(host_thread, NULL, &deadline);
  /* Detached workers (streams destroyed while blocked in a stream wait)
   * cannot be joined: wait, within the same deadline, until they are out. */
  if (pthread_mutex_timedlock(&emu_lock, &deadline) == 0) {
    while (emu_detached_workers > 0 &&
           pthread_cond_timedwait(&emu_progress, &emu_lock, &deadline) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&emu_lock);
  }
}

/* ---- fork --------------------------------------------------------------- */

/* HIP does not support using the runtime in a child that was forked after
 * the parent initialized it. Here the child at least never hangs: the
 * parent's workers do not exist in the child, so its streams are forgotten
 * (their handles become invalid), pending event records count as reached,
 * and null streams are recreated on first use. Allocations stay valid: the
 * child has a copy of the memory. */
static void emu_fork_prepare(void) { pthread_mutex_lock(&emu_lock); }

static void emu_fork_parent(void) { pthread_mutex_unlock(&emu_lock); }

static void emu_fork_child(void) {
  pthread_mutex_init(&emu_lock, NULL);
  pthread_cond_init(&emu_progress, NULL);
  emu_streams = NULL;
  memset(emu_null_streams, 0, sizeof(emu_null_streams));
  emu_live_streams = 0;
  emu_detached_workers = 0;
  emu_tls_worker = NULL;
  for (struct ihipEvent_t *e = emu_events; e != NULL; e = e->next) {
    if (e->done_gen < e->gen) {
      e->done_gen = e->gen;
      e->stamp_ns = emu_now_ns();
    }
  }
}

__attribute__((constructor)) static void emu_load(void) {
  pthread_atfork(emu_fork_prepare, emu_fork_parent, emu_fork_child);
}

/* ---- entries that hold the runtime lock (runtime.c) ---------------------- */
EMU_LOCKED_ENTRY(static hipError_t, emu_submit,
                 (hipStream_t stream, struct emu_op *op),
                 (stream, op))
EMU_LOCKED_ENTRY(EMU_EXPORT hipError_t, hipEventQuery, (hipEvent_t event), (event))
EMU_LOCKED_ENTRY(EMU_EXPORT hipError_t, hipEventRecordWithFlags,
                 (hipEvent_t event, hipStream_t stream, unsigned int flags),
                 (event, stream, flags))
EMU_LOCKED_ENTRY(EMU_EXPORT hipError_t, hipStreamWaitEvent,
                 (hipStream_t stream, hipEvent_t event, unsigned int flags),
                 (stream, event, flags))
EMU_LOCKED_ENTRY(EMU_EXPORT hipError_t, hipStreamQuery, (hipStream_t stream), (stream))
