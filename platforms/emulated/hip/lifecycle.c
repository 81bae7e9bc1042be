/* The life cycle of the emulated runtime's streams and events as a whole:
 * bulk release (hipDeviceReset, hipEmuReleaseAll), stopping the workers
 * when the library is unloaded, and the state a forked child starts with. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu_hip.h"

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
