/* Host functions and stream callbacks of the emulated HIP runtime.
 *
 * HIP runs every host function (hipLaunchHostFunc) and stream callback
 * (hipStreamAddCallback) of a process on one runtime thread, one at a time,
 * so a host function that blocks holds back the host functions of every other
 * stream. This runtime does the same: when a stream's worker reaches such an
 * operation it appends it to one queue, in the order the streams reach them,
 * and waits until the host-function thread (the dispatcher) has run it, so
 * the stream's later work still waits for its host function.
 *
 * The dispatcher is started by the first host function (and again in a
 * forked child, where the parent's thread does not exist), takes no signals,
 * and calls each function with the runtime's lock released and with
 * emu_tls_worker pointing at the stream it came from, so that calls which
 * would wait for streams return hipErrorNotSupported there. At unload it is
 * stopped and joined with the workers' deadline: queued functions are
 * dropped, a function that never returns is given up on. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>

#include "emu_hip.h"

/* All under emu_lock. The queue links operations through host_next; an
 * operation stays owned by its stream's worker, which waits until it is done
 * (or takes it back out of the queue when its stream is discarded). */
static struct emu_op *emu_host_head = NULL;
static struct emu_op *emu_host_tail = NULL;
static pthread_cond_t emu_host_work = PTHREAD_COND_INITIALIZER;
static pthread_t emu_host_thread;
static int emu_host_started = 0;  /* the dispatcher exists in this process */
static int emu_host_stopping = 0; /* unloading: the dispatcher exits */

void emu_call_host_op(struct emu_op *op) {
  if (op->kind == EMU_OP_HOST_FN) op->fn(op->user_data);
  else op->callback(op->handle, hipSuccess, op->user_data);
}

static void *emu_host_main(void *arg) {
  (void)arg;
  emu_lock_acquire();
  for (;;) {
    while (emu_host_head == NULL && !emu_host_stopping)
      pthread_cond_wait(&emu_host_work, &emu_lock);
    if (emu_host_stopping) break;
    struct emu_op *op = emu_host_head;
    emu_host_head = op->host_next;
    if (emu_host_head == NULL) emu_host_tail = NULL;
    op->host_next = NULL;
    op->host_state = EMU_HOST_RUNNING;
    /* The stream's worker waits for this operation, so the stream outlives
     * the call; emu_tls_worker is only ever compared with NULL. */
    emu_tls_worker = op->host_stream;
    emu_set_current_device(op->host_stream->device);
    emu_lock_release();
    emu_call_host_op(op);
    emu_lock_acquire();
    emu_tls_worker = NULL;
    op->host_state = EMU_HOST_DONE; /* the worker owns op again from here */
    pthread_cond_broadcast(&emu_progress);
  }
  emu_lock_release();
  return NULL;
}

/* Starts the dispatcher unless it runs. Returns 0, or -1 when no thread
 * could be created. */
static int emu_host_start_locked(void) {
  if (emu_host_started) return 0;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&emu_host_thread, NULL, emu_host_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) return -1;
  emu_host_started = 1;
  return 0;
}

static void emu_host_unqueue_locked(struct emu_op *op) {
  struct emu_op *prev = NULL;
  for (struct emu_op *o = emu_host_head; o != NULL; prev = o, o = o->host_next) {
    if (o != op) continue;
    if (prev != NULL) prev->host_next = o->host_next;
    else emu_host_head = o->host_next;
    if (emu_host_tail == o) emu_host_tail = prev;
    o->host_next = NULL;
    return;
  }
}

void emu_run_host_op_locked(struct ihipStream_t *s, struct emu_op *op) {
  if (emu_host_stopping) return; /* unloading: queued work is dropped */
  if (emu_host_start_locked() != 0) {
    /* No thread for the dispatcher: run the function on the stream's own
     * worker rather than never (stream order still holds). */
    emu_lock_release();
    emu_call_host_op(op);
    emu_lock_acquire();
    return;
  }
  op->host_stream = s;
  op->host_state = EMU_HOST_QUEUED;
  EMU_QUEUE_APPEND(emu_host_head, emu_host_tail, op, host_next);
  pthread_cond_signal(&emu_host_work);
  while (op->host_state != EMU_HOST_DONE) {
    if (op->host_state == EMU_HOST_QUEUED && (s->discard || emu_host_stopping)) {
      emu_host_unqueue_locked(op); /* never started: dropped */
      break;
    }
    pthread_cond_wait(&emu_progress, &emu_lock);
  }
}

int emu_host_dispatcher_stop_locked(pthread_t *thread) {
  emu_host_stopping = 1;
  pthread_cond_signal(&emu_host_work);
  if (!emu_host_started) return 0;
  *thread = emu_host_thread;
  return 1;
}

/* The child of fork() has no dispatcher (only the forking thread exists
 * there) and has forgotten the parent's streams, so nothing in the queue can
 * be waited for: start from scratch; the next host function starts a new
 * dispatcher. */
static void emu_hostfn_fork_child(void) {
  emu_host_head = NULL;
  emu_host_tail = NULL;
  emu_host_started = 0;
  emu_host_stopping = 0;
  pthread_cond_init(&emu_host_work, NULL);
}

__attribute__((constructor)) static void emu_hostfn_load(void) {
  pthread_atfork(NULL, NULL, emu_hostfn_fork_child);
}
