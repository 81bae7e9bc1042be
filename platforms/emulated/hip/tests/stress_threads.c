/* Thread stress of the emulated HIP runtime, meant for ThreadSanitizer.
 * Build it together with the runtime's sources (every .c file directly in
 * platforms/emulated/hip, and the shared hipError_t table), for example from the repository root:
 *
 *   gcc -O1 -g -fsanitize=thread -I platforms/emulated/include \
 *       $(ls platforms/emulated/hip/[a-z]*.c) platforms/common/hip_error_table.c \
 *       platforms/emulated/hip/tests/stress_threads.c -o /tmp/emu-stress -lpthread
 *   /tmp/emu-stress
 *
 * Several threads at once create blocking and non-blocking streams, allocate,
 * queue fills, copies, host functions, event records and cross-stream waits
 * (on an event shared by all threads), use the null stream, then tear
 * everything down. Prints "stress OK" and exits 0 when every check held. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "../emu_hip.h"

hipError_t hipMalloc(void **ptr, size_t size);
hipError_t hipFree(void *ptr);
hipError_t hipHostMalloc(void **ptr, size_t size, unsigned flags);
hipError_t hipHostFree(void *ptr);
hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned flags);
hipError_t hipStreamDestroy(hipStream_t stream);
hipError_t hipMemcpyAsync(void *dst, const void *src, size_t bytes, int kind, hipStream_t stream);
hipError_t hipMemsetAsync(void *dst, int value, size_t bytes, hipStream_t stream);
hipError_t hipEventCreate(hipEvent_t *event);
hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream);
hipError_t hipEventDestroy(hipEvent_t event);
hipError_t hipEventQuery(hipEvent_t event);
hipError_t hipEventSynchronize(hipEvent_t event);
hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned flags);
hipError_t hipDeviceSynchronize(void);

#define THREADS 4
#define ROUNDS 30
#define OPS 10
#define BYTES 4096

#define CHECK(call)                                                              \
  do {                                                                           \
    int status_ = (call);                                                        \
    if (status_ != 0) {                                                          \
      fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, status_); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

static hipEvent_t shared_event;

static void count_call(void *counter) { ++*(int *)counter; }

static void *stress(void *arg) {
  long id = (long)arg;
  for (int round = 0; round < ROUNDS; ++round) {
    int blocking = round % 2;
    hipStream_t s;
    CHECK(hipStreamCreateWithFlags(&s, blocking ? hipStreamDefault : hipStreamNonBlocking));
    void *dev;
    unsigned char *host;
    hipEvent_t done;
    CHECK(hipMalloc(&dev, BYTES));
    CHECK(hipHostMalloc((void **)&host, BYTES, 0));
    CHECK(hipEventCreate(&done));
    int calls = 0;
    int last = 0;
    for (int i = 0; i < OPS; ++i) {
      last = (int)((id * 31 + round * OPS + i) & 0xff);
      CHECK(hipMemsetAsync(dev, last, BYTES, s));
      CHECK(hipMemcpyAsync(host, dev, BYTES, hipMemcpyDeviceToHost, s));
      CHECK(hipLaunchHostFunc(s, count_call, &calls));
      CHECK(hipEventRecord(done, s));
      (void)hipEventQuery(shared_event);
      CHECK(hipStreamWaitEvent(s, shared_event, 0));
      if (i % 3 == 0) CHECK(hipEventRecord(shared_event, s));
      /* The null stream orders with blocking streams only. */
      if (blocking && i % 4 == 0) CHECK(hipMemsetAsync(dev, 1, 16, NULL));
    }
    CHECK(hipEventSynchronize(done));
    CHECK(hipStreamSynchronize(s));
    if (calls != OPS || host[BYTES - 1] != (unsigned char)last) {
      fprintf(stderr, "thread %ld round %d: calls %d, last byte %d (want %d)\n", id, round,
              calls, host[BYTES - 1], last);
      exit(1);
    }
    CHECK(hipEventDestroy(done));
    CHECK(hipStreamDestroy(s));
    CHECK(hipHostFree(host));
    CHECK(hipFree(dev));
  }
  return NULL;
}

int main(void) {
  CHECK(hipEventCreate(&shared_event));
  pthread_t threads[THREADS];
  for (long i = 0; i < THREADS; ++i) pthread_create(&threads[i], NULL, stress, (void *)i);
  for (int i = 0; i < THREADS; ++i) pthread_join(threads[i], NULL);
  CHECK(hipDeviceSynchronize());
  CHECK(hipEventDestroy(shared_event));
  long long counts[4];
  hipEmuCounters(&counts[0], &counts[1], &counts[2], &counts[3]);
  for (int i = 0; i < 4; ++i) {
    if (counts[i] != 0) {
      fprintf(stderr, "counter %d left at %lld\n", i, counts[i]);
      return 1;
    }
  }
  puts("stress OK");
  return 0;
}
