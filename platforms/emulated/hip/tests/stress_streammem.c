/* Thread stress of the emulated runtime's stream memory operations, meant for
 * ThreadSanitizer. Build it with the runtime's sources, from the repository
 * root:
 *
 *   gcc -O1 -g -fsanitize=thread -I platforms/emulated/include \
 *       $(ls platforms/emulated/hip/[a-z]*.c) platforms/common/hip_error_table.c \
 *       platforms/emulated/hip/tests/stress_streammem.c -o /tmp/emu-smstress -lpthread
 *   /tmp/emu-smstress
 *
 * Several threads at once chain waits and writes across two streams each
 * (a ping-pong on signal memory), release waits by host stores, and destroy
 * streams while they are blocked in a wait. Prints "stress OK" and exits 0
 * when every check held. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../emu_hip.h"

hipError_t hipFree(void *ptr);
hipError_t hipHostMalloc(void **ptr, size_t size, unsigned flags);
hipError_t hipHostFree(void *ptr);
hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned flags);
hipError_t hipStreamDestroy(hipStream_t stream);
hipError_t hipStreamSynchronize(hipStream_t stream);
hipError_t hipDeviceSynchronize(void);
hipError_t hipExtMallocWithFlags(void **ptr, size_t size, unsigned flags);
hipError_t hipStreamWaitValue32(hipStream_t s, void *p, uint32_t v, unsigned f, uint32_t m);
hipError_t hipStreamWaitValue64(hipStream_t s, void *p, uint64_t v, unsigned f, uint64_t m);
hipError_t hipStreamWriteValue32(hipStream_t s, void *p, uint32_t v, unsigned f);
hipError_t hipStreamWriteValue64(hipStream_t s, void *p, uint64_t v, unsigned f);
int hipEmuCounters(long long *a, long long *h, long long *s, long long *e);
int hipEmuStreamMemCounters(long long *pending, long long *blocked);

#define THREADS 6
#define ROUNDS 200

static int failures = 0;

#define CHECK(x)                                                             \
  do {                                                                       \
    if (!(x)) {                                                              \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #x);  \
      __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                    \
    }                                                                        \
  } while (0)

static void *worker(void *arg) {
  (void)arg;
  hipStream_t a = NULL, b = NULL;
  void *ping = NULL, *pong = NULL, *host = NULL;
  CHECK(hipStreamCreateWithFlags(&a, hipStreamNonBlocking) == hipSuccess);
  CHECK(hipStreamCreateWithFlags(&b, hipStreamDefault) == hipSuccess);
  CHECK(hipExtMallocWithFlags(&ping, 8, hipMallocSignalMemory) == hipSuccess);
  CHECK(hipExtMallocWithFlags(&pong, 8, hipMallocSignalMemory) == hipSuccess);
  CHECK(hipHostMalloc(&host, 64, hipHostMallocMapped) == hipSuccess);
  /* Ping-pong: a waits for ping >= i and writes pong = i; b the other way. */
  for (uint64_t i = 1; i <= ROUNDS; ++i) {
    CHECK(hipStreamWaitValue64(a, ping, i, hipStreamWaitValueGte, ~0ull) == hipSuccess);
    CHECK(hipStreamWriteValue64(a, pong, i, 0) == hipSuccess);
    CHECK(hipStreamWriteValue64(b, ping, i, 0) == hipSuccess);
    CHECK(hipStreamWaitValue64(b, pong, i, hipStreamWaitValueEq, ~0ull) == hipSuccess);
  }
  CHECK(hipStreamSynchronize(b) == hipSuccess);
  CHECK(hipStreamSynchronize(a) == hipSuccess);
  CHECK(__atomic_load_n((uint64_t *)pong, __ATOMIC_ACQUIRE) == ROUNDS);
  /* Host releases, and a stream destroyed while blocked. */
  for (int i = 0; i < 20; ++i) {
    hipStream_t c = NULL;
    uint32_t *flag = (uint32_t *)host, *after = (uint32_t *)host + 1;
    __atomic_store_n(flag, 0, __ATOMIC_RELEASE);
    __atomic_store_n(after, 0, __ATOMIC_RELEASE);
    CHECK(hipStreamCreateWithFlags(&c, hipStreamNonBlocking) == hipSuccess);
    CHECK(hipStreamWaitValue32(c, flag, 1, hipStreamWaitValueAnd, 0xffffffffu) == hipSuccess);
    CHECK(hipStreamWriteValue32(c, after, 7, 0) == hipSuccess);
    if (i % 2) CHECK(hipStreamDestroy(c) == hipSuccess);
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
    CHECK(__atomic_load_n(after, __ATOMIC_ACQUIRE) == 0);
    __atomic_store_n(flag, 3, __ATOMIC_RELEASE);
    if (i % 2 == 0) {
      CHECK(hipStreamSynchronize(c) == hipSuccess);
      CHECK(hipStreamDestroy(c) == hipSuccess);
    }
    while (__atomic_load_n(after, __ATOMIC_ACQUIRE) != 7) nanosleep(&ts, NULL);
  }
  CHECK(hipDeviceSynchronize() == hipSuccess);
  CHECK(hipStreamDestroy(a) == hipSuccess);
  CHECK(hipStreamDestroy(b) == hipSuccess);
  CHECK(hipFree(ping) == hipSuccess);
  CHECK(hipFree(pong) == hipSuccess);
  CHECK(hipHostFree(host) == hipSuccess);
  return NULL;
}

int main(void) {
  pthread_t threads[THREADS];
  for (int i = 0; i < THREADS; ++i) pthread_create(&threads[i], NULL, worker, NULL);
  for (int i = 0; i < THREADS; ++i) pthread_join(threads[i], NULL);
  long long allocations = -1, host = -1, streams = -1, events = -1, pending = -1, blocked = -1;
  hipEmuCounters(&allocations, &host, &streams, &events);
  /* Detached workers free their streams a moment after their last op. */
  for (int i = 0; i < 1000; ++i) {
    hipEmuStreamMemCounters(&pending, &blocked);
    if (pending == 0 && blocked == 0) break;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  CHECK(allocations == 0 && host == 0 && streams == 0 && events == 0);
  CHECK(pending == 0 && blocked == 0);
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  puts("stress OK");
  return 0;
}
