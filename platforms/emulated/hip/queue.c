/* Stream queues of the emulated HIP runtime: operations, worker threads,
 * the ordering of the null stream, and waits for queued work.
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
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "emu_hip.h"

struct ihipStream_t *emu_streams = NULL; /* every stream with a worker */
struct ihipStream_t *emu_null_streams[EMU_MAX_DEVICES];
struct ihipEvent_t *emu_events = NULL;   /* live events */
long long emu_live_streams = 0;
long long emu_live_events = 0;
int emu_detached_workers = 0; /* detached workers still running */

long long emu_stream_count_locked(void) { return emu_live_streams; }
long long emu_event_count_locked(void) { return emu_live_events; }

struct emu_op *emu_op_new(enum emu_op_kind kind) {
  struct emu_op *op = calloc(1, sizeof(*op));
  if (op != NULL) op->kind = kind;
  return op;
}

void emu_stream_unref_locked(struct ihipStream_t *s) {
  if (--s->refs == 0) {
    pthread_cond_destroy(&s->work);
    free(s);
  }
}

void emu_event_unref_locked(struct ihipEvent_t *e) {
  if (--e->refs == 0) free(e);
}

void emu_op_release_locked(struct emu_op *op) {
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

hipError_t emu_stream_new_locked(int device, unsigned flags, int priority, int is_null,
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

void emu_stream_unlink_locked(struct ihipStream_t *s) { EMU_LIST_UNLINK(emu_streams, s); }

int emu_is_null_handle(hipStream_t handle) {
  return handle == NULL || handle == EMU_STREAM_LEGACY || handle == EMU_STREAM_PER_THREAD;
}

struct ihipStream_t *emu_find_user_stream_locked(hipStream_t handle) {
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
  EMU_QUEUE_APPEND(s->head, s->tail, op, next);
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
void emu_stream_retire_locked(struct ihipStream_t *s) {
  s->live = 0;
  emu_live_streams--;
  emu_wait_seq_locked(s, s->enqueued);
  emu_stream_unlink_locked(s);
  s->stopping = 1;
  pthread_cond_signal(&s->work);
}

void emu_stream_join_and_drop_locked(struct ihipStream_t *s) {
  /* Once unloading has begun the worker may already be joined, or still be
   * stuck in a host function: leave both the thread and the memory alone. */
  if (emu_shutdown) return;
  emu_lock_release();
  pthread_join(s->thread, NULL);
  emu_lock_acquire();
  emu_stream_unref_locked(s);
}

