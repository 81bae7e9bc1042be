/* Initialization, versions, devices and test hooks of the emulated HIP
 * runtime. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu_hip.h"

/* The HIP version this runtime reports (HIP_VERSION encoding:
 * major * 10000000 + minor * 100000 + patch). */
#define EMU_HIP_VERSION_MAJOR 7
#define EMU_HIP_VERSION_MINOR 2
#define EMU_HIP_VERSION_PATCH 0
#define EMU_HIP_VERSION \
  (EMU_HIP_VERSION_MAJOR * 10000000 + EMU_HIP_VERSION_MINOR * 100000 + EMU_HIP_VERSION_PATCH)

#define EMU_DEFAULT_DEVICE_MEMORY ((size_t)16 << 30)

pthread_mutex_t emu_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t emu_progress = PTHREAD_COND_INITIALIZER;
int emu_shutdown = 0;
__thread struct ihipStream_t *emu_tls_worker = NULL;

static pthread_once_t emu_config_once = PTHREAD_ONCE_INIT;
static int emu_devices = 1;
static size_t emu_memory_total = EMU_DEFAULT_DEVICE_MEMORY;
static __thread int emu_tls_device = 0;

void emu_lock_acquire(void) { pthread_mutex_lock(&emu_lock); }
void emu_lock_release(void) { pthread_mutex_unlock(&emu_lock); }

/* ---- the runtime lock ------------------------------------------------------
 * CUDA's cudaFree and ROCm's hipFree synchronise the device while holding a
 * lock of the runtime, so a thread entering the runtime meanwhile (a copy, an
 * enqueue, an allocation, a query) blocks until every stream of the device
 * has drained. The emulated runtime models it with a readers-writer lock:
 * hipFree of device memory holds it exclusively for its device-wide wait;
 * the calls that enqueue, copy, allocate or query hold it shared while they
 * do so (not while they wait for streams). Stream workers and the
 * host-function thread are the device: they never take it. A library whose
 * host thread must enter the runtime before a stream it feeds can move on
 * therefore deadlocks here exactly as it would on a GPU. */
static pthread_rwlock_t emu_api_lock;
static pthread_once_t emu_api_once = PTHREAD_ONCE_INIT;
static __thread int emu_api_depth = 0;

static void emu_api_init(void) {
  pthread_rwlockattr_t attr;
  pthread_rwlockattr_init(&attr);
  /* A waiting hipFree holds back new entries, as a runtime lock does. */
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&emu_api_lock, &attr);
  pthread_rwlockattr_destroy(&attr);
}

static void emu_api_fork_child(void) {
  emu_api_init();
  emu_api_depth = 0;
}

static void emu_api_once_init(void) {
  emu_api_init();
  pthread_atfork(NULL, NULL, emu_api_fork_child);
}

void emu_api_enter(void) {
  if (emu_tls_worker != NULL || emu_api_depth++ > 0) return;
  pthread_once(&emu_api_once, emu_api_once_init);
  pthread_rwlock_rdlock(&emu_api_lock);
}

void emu_api_enter_exclusive(void) {
  if (emu_tls_worker != NULL || emu_api_depth++ > 0) return;
  pthread_once(&emu_api_once, emu_api_once_init);
  pthread_rwlock_wrlock(&emu_api_lock);
}

void emu_api_leave(void) {
  if (emu_tls_worker != NULL || --emu_api_depth > 0) return;
  pthread_rwlock_unlock(&emu_api_lock);
}

/* Not HIP entry points: the emulated libhipfile's synchronous transfers into
 * device memory enter the runtime through these for their copy, as hipFile's
 * fallback (a bounce buffer and hipMemcpy) and its fast path
 * (hipAmdFileRead/Write) do, and cuFile's compatibility mode likewise. */
EMU_EXPORT void hipEmuRuntimeEnter(void) { emu_api_enter(); }
EMU_EXPORT void hipEmuRuntimeLeave(void) { emu_api_leave(); }

/* Parses "<digits>[K|M|G|T]" (binary multiples). Returns 0 on success. */
static int emu_parse_size(const char *text, size_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long value = strtoull(text, &end, 10);
  if (errno != 0 || end == text) return -1;
  unsigned shift = 0;
  switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; ++end; break;
    case 'm': case 'M': shift = 20; ++end; break;
    case 'g': case 'G': shift = 30; ++end; break;
    case 't': case 'T': shift = 40; ++end; break;
    default: return -1;
  }
  if (*end != '\0' || value == 0) return -1;
  if (shift && value > (~0ULL >> shift)) return -1;
  *out = (size_t)(value << shift);
  return 0;
}

static void emu_read_config(void) {
  const char *devices = getenv("HIPFILE_EMU_DEVICES");
  if (devices != NULL && *devices != '\0') {
    char *end = NULL;
    errno = 0;
    long value = strtol(devices, &end, 10);
    if (errno == 0 && end != devices && *end == '\0' && value >= 0 && value <= EMU_MAX_DEVICES) {
      emu_devices = (int)value;
    } else {
      fprintf(stderr,
              "emulated HIP runtime: ignoring HIPFILE_EMU_DEVICES=%s (expected 0..%d); "
              "using 1 device\n",
              devices, EMU_MAX_DEVICES);
    }
  }
  const char *memory = getenv("HIPFILE_EMU_DEVICE_MEMORY");
  if (memory != NULL && *memory != '\0') {
    size_t total = 0;
    if (emu_parse_size(memory, &total) == 0) {
      emu_memory_total = total;
    } else {
      fprintf(stderr,
              "emulated HIP runtime: ignoring HIPFILE_EMU_DEVICE_MEMORY=%s "
              "(expected bytes with an optional K, M, G or T suffix)\n",
              memory);
    }
  }
}

int emu_device_count(void) {
  pthread_once(&emu_config_once, emu_read_config);
  return emu_devices;
}

size_t emu_device_memory_total(void) {
  pthread_once(&emu_config_once, emu_read_config);
  return emu_memory_total;
}

hipError_t emu_current_device(int *device) {
  int count = emu_device_count();
  if (count == 0) return hipErrorNoDevice;
  if (emu_tls_device < 0 || emu_tls_device >= count) emu_tls_device = 0;
  *device = emu_tls_device;
  return hipSuccess;
}

void emu_set_current_device(int device) { emu_tls_device = device; }

uint64_t emu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- initialization and versions ----------------------------------------- */

EMU_EXPORT hipError_t hipInit(unsigned int flags) {
  if (flags != 0) return emu_ret(hipErrorInvalidValue);
  if (emu_device_count() == 0) return emu_ret(hipErrorNoDevice);
  return hipSuccess;
}

EMU_EXPORT hipError_t hipDriverGetVersion(int *version) {
  if (version == NULL) return emu_ret(hipErrorInvalidValue);
  *version = EMU_HIP_VERSION;
  return hipSuccess;
}

EMU_EXPORT hipError_t hipRuntimeGetVersion(int *version) {
  if (version == NULL) return emu_ret(hipErrorInvalidValue);
  *version = EMU_HIP_VERSION;
  return hipSuccess;
}

/* ---- devices ------------------------------------------------------------- */

EMU_EXPORT hipError_t hipGetDeviceCount(int *count) {
  if (count == NULL) return emu_ret(hipErrorInvalidValue);
  *count = emu_device_count();
  return *count == 0 ? emu_ret(hipErrorNoDevice) : hipSuccess;
}

EMU_EXPORT hipError_t hipGetDevice(int *device) {
  if (device == NULL) return emu_ret(hipErrorInvalidValue);
  return emu_ret(emu_current_device(device));
}

EMU_EXPORT hipError_t hipSetDevice(int device) {
  int count = emu_device_count();
  if (count == 0) return emu_ret(hipErrorNoDevice);
  if (device < 0 || device >= count) return emu_ret(hipErrorInvalidDevice);
  emu_tls_device = device;
  return hipSuccess;
}

EMU_EXPORT hipError_t hipDeviceGet(hipDevice_t *device, int ordinal) {
  if (device == NULL) return emu_ret(hipErrorInvalidValue);
  int count = emu_device_count();
  if (count == 0) return emu_ret(hipErrorNoDevice);
  if (ordinal < 0 || ordinal >= count) return emu_ret(hipErrorInvalidDevice);
  *device = ordinal;
  return hipSuccess;
}

/* hipDeviceSynchronize and hipDeviceReset: waits for the current device's
 * work; with `reset`, then destroys its streams and events and frees its
 * allocations, as HIP does. */
static hipError_t emu_sync_current_device(int reset) {
  int device;
  hipError_t status = emu_current_device(&device);
  if (status != hipSuccess) return emu_ret(status);
  emu_lock_acquire();
  status = emu_sync_device_locked(device, 0);
  if (status == hipSuccess && reset) {
    emu_release_streams_events_locked(device);
    emu_release_allocations_locked(device);
  }
  emu_lock_release();
  return emu_ret(status);
}

EMU_EXPORT hipError_t hipDeviceSynchronize(void) { return emu_sync_current_device(0); }

EMU_EXPORT hipError_t hipDeviceReset(void) { return emu_sync_current_device(1); }

EMU_EXPORT hipError_t hipDeviceCanAccessPeer(int *can_access, int device, int peer) {
  if (can_access == NULL) return emu_ret(hipErrorInvalidValue);
  int count = emu_device_count();
  if (device < 0 || device >= count || peer < 0 || peer >= count)
    return emu_ret(hipErrorInvalidDevice);
  /* All emulated devices share host memory; a device is not its own peer. */
  *can_access = device != peer;
  return hipSuccess;
}

EMU_EXPORT hipError_t hipDeviceGetStreamPriorityRange(int *least, int *greatest) {
  if (least != NULL) *least = 0;
  if (greatest != NULL) *greatest = -1;
  return hipSuccess;
}

/* hipDriverProcAddressQueryResult */
enum {
  HIP_GET_PROC_ADDRESS_SUCCESS = 0,
  HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  HIP_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
};

/* Looks the name up among this library's own exports, as ROCm's runtime
 * does: an unknown name gives a NULL pointer, SYMBOL_NOT_FOUND and
 * hipErrorInvalidValue. hipVersion and flags are accepted and ignored. */
EMU_EXPORT hipError_t hipGetProcAddress(const char *symbol, void **pfn, int hipVersion,
                                        uint64_t flags, int *symbolStatus) {
  if (symbolStatus != NULL) *symbolStatus = HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (pfn != NULL) *pfn = NULL;
  if (symbol == NULL || symbol[0] == '\0' || pfn == NULL) return emu_ret(hipErrorInvalidValue);
  void *found = NULL;
  Dl_info self;
  if (dladdr((void *)hipGetProcAddress, &self) != 0 && self.dli_fname != NULL) {
    void *handle = dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (handle != NULL) {
      found = dlsym(handle, symbol);
      dlclose(handle);
    }
  }
  *pfn = found;
  if (symbolStatus != NULL)
    *symbolStatus = found != NULL ? HIP_GET_PROC_ADDRESS_SUCCESS
                                  : HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return found != NULL ? hipSuccess : emu_ret(hipErrorInvalidValue);
}

/* ---- test hooks ---------------------------------------------------------- */

EMU_EXPORT int hipEmuCounters(long long *allocations, long long *host_allocations,
                              long long *streams, long long *events) {
  emu_lock_acquire();
  if (allocations != NULL) *allocations = emu_alloc_count_locked(0);
  if (host_allocations != NULL) *host_allocations = emu_alloc_count_locked(1);
  if (streams != NULL) *streams = emu_stream_count_locked();
  if (events != NULL) *events = emu_event_count_locked();
  emu_lock_release();
  return 0;
}

EMU_EXPORT long long hipEmuReleaseAll(void) {
  long long released = 0;
  emu_lock_acquire();
  if (emu_sync_device_locked(-1, 0) == hipSuccess) {
    released += emu_release_streams_events_locked(-1);
    released += emu_release_allocations_locked(-1);
  } else {
    released = -1; /* called from a host function: refused */
  }
  emu_lock_release();
  return released;
}
