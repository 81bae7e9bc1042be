/* Memory of the emulated HIP runtime: the allocation table, hipMalloc and
 * pinned host memory, copies, fills and pointer attributes.
 *
 * "Device" memory is ordinary host memory (page aligned, as ROCm's
 * allocator gives it, so O_DIRECT-eligible transfers are eligible here) that the table
 * marks as belonging to a device; freed memory becomes inaccessible and is
 * not handed out again soon (backing.c); pinned host memory (page aligned) and
 * registered host ranges are marked as pinned host memory. The table is a
 * sorted array, so interior pointers resolve to their allocation. Copies and
 * fills run on a stream's worker thread; their arguments are checked against
 * the table when they are submitted. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "emu_hip.h"

static hipError_t emu_allocate(void **ptr, size_t size, int kind, unsigned flags);
static hipError_t emu_unlocked_emu_allocate(void **ptr, size_t size, int kind, unsigned flags);

#define EMU_DEVICE_ALIGNMENT 4096
#define EMU_HOST_ALIGNMENT 4096

struct emu_alloc {
  uintptr_t base;
  size_t size;
  int kind;      /* EMU_MEM_DEVICE or EMU_MEM_PINNED_HOST */
  int device;
  unsigned flags;
  int owned;     /* 0: a hipHostRegister range (the user owns the memory) */
};

static struct emu_alloc *emu_table = NULL;
static size_t emu_table_len = 0;
static size_t emu_table_cap = 0;
static size_t emu_device_used[EMU_MAX_DEVICES];

/* ---- the table (all under emu_lock) --------------------------------------- */

/* Number of entries whose base is <= p. */
static size_t emu_table_upper_locked(uintptr_t p) {
  size_t lo = 0, hi = emu_table_len;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (emu_table[mid].base <= p) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static struct emu_alloc *emu_find_locked(const void *ptr) {
  uintptr_t p = (uintptr_t)ptr;
  size_t n = emu_table_upper_locked(p);
  if (n == 0) return NULL;
  struct emu_alloc *a = &emu_table[n - 1];
  return p - a->base < a->size ? a : NULL;
}

static int emu_table_insert_locked(const struct emu_alloc *entry) {
  if (emu_table_len == emu_table_cap) {
    size_t cap = emu_table_cap ? emu_table_cap * 2 : 64;
    struct emu_alloc *grown = realloc(emu_table, cap * sizeof(*grown));
    if (grown == NULL) return -1;
    emu_table = grown;
    emu_table_cap = cap;
  }
  size_t at = emu_table_upper_locked(entry->base);
  memmove(&emu_table[at + 1], &emu_table[at], (emu_table_len - at) * sizeof(*emu_table));
  emu_table[at] = *entry;
  emu_table_len++;
  return 0;
}

static void emu_table_remove_locked(struct emu_alloc *a) {
  size_t at = (size_t)(a - emu_table);
  memmove(&emu_table[at], &emu_table[at + 1], (emu_table_len - at - 1) * sizeof(*emu_table));
  emu_table_len--;
}

long long emu_alloc_count_locked(int pinned) {
  long long n = 0;
  int kind = pinned ? EMU_MEM_PINNED_HOST : EMU_MEM_DEVICE;
  for (size_t i = 0; i < emu_table_len; ++i) n += emu_table[i].kind == kind;
  return n;
}

long long emu_release_allocations_locked(int device) {
  long long released = 0;
  size_t i = 0;
  while (i < emu_table_len) {
    struct emu_alloc *a = &emu_table[i];
    if (device >= 0 && a->device != device) {
      ++i;
      continue;
    }
    if (a->kind == EMU_MEM_DEVICE) emu_device_used[a->device] -= a->size;
    if (a->owned) emu_backing_retire_locked((void *)a->base, a->size);
    emu_table_remove_locked(a);
    released++;
  }
  return released;
}

EMU_EXPORT int hipEmuPointerInfo(const void *ptr, void **base, size_t *size, int *kind,
                                 int *device) {
  if (ptr == NULL) return -1;
  emu_lock_acquire();
  struct emu_alloc *a = emu_find_locked(ptr);
  if (a != NULL) {
    if (base != NULL) *base = (void *)a->base;
    if (size != NULL) *size = a->size;
    if (kind != NULL) *kind = a->kind;
    if (device != NULL) *device = a->device;
  }
  emu_lock_release();
  return a != NULL ? 0 : -1;
}

/* ---- allocation ----------------------------------------------------------- */

static hipError_t emu_unlocked_emu_allocate(void **ptr, size_t size, int kind, unsigned flags) {
  if (ptr == NULL) return hipErrorInvalidValue;
  int device;
  hipError_t status = emu_current_device(&device);
  if (status != hipSuccess) return status;
  if (size == 0) {
    *ptr = NULL;
    return hipSuccess;
  }
  size_t alignment = kind == EMU_MEM_DEVICE ? EMU_DEVICE_ALIGNMENT : EMU_HOST_ALIGNMENT;
  if (size > SIZE_MAX - alignment) return hipErrorOutOfMemory;
  if (kind == EMU_MEM_DEVICE) {
    /* Reserve the bytes against the device's capacity first. */
    emu_lock_acquire();
    size_t total = emu_device_memory_total();
    int fits = emu_device_used[device] <= total && size <= total - emu_device_used[device];
    if (fits) emu_device_used[device] += size;
    emu_lock_release();
    if (!fits) return hipErrorOutOfMemory;
  }
  void *mem = emu_backing_map(size); /* page aligned (alignment or more) */
  emu_lock_acquire();
  struct emu_alloc entry = {(uintptr_t)mem, size, kind, device, flags, 1};
  if (mem == NULL || emu_table_insert_locked(&entry) != 0) {
    if (kind == EMU_MEM_DEVICE) emu_device_used[device] -= size;
    emu_lock_release();
    emu_backing_unmap(mem, size);
    return hipErrorOutOfMemory;
  }
  emu_lock_release();
  *ptr = mem;
  return hipSuccess;
}

/* Frees an allocation of the given kind that starts at ptr, after waiting
 * for the work queued on its device (HIP frees with an implicit device
 * synchronization). owned 0: a registration, nothing to free. */
static hipError_t emu_release(void *ptr, int kind, int owned, hipError_t unknown) {
  emu_lock_acquire();
  struct emu_alloc *a = emu_find_locked(ptr);
  if (a == NULL || a->base != (uintptr_t)ptr || a->kind != kind || a->owned != owned) {
    emu_lock_release();
    return unknown;
  }
  hipError_t status = emu_sync_device_locked(a->device, 0);
  if (status != hipSuccess) {
    emu_lock_release();
    return status;
  }
  /* The lock was dropped while waiting: look again. */
  a = emu_find_locked(ptr);
  if (a == NULL || a->base != (uintptr_t)ptr || a->kind != kind || a->owned != owned) {
    emu_lock_release();
    return unknown;
  }
  if (kind == EMU_MEM_DEVICE) emu_device_used[a->device] -= a->size;
  size_t bytes = a->size;
  emu_table_remove_locked(a);
  emu_lock_release();
  if (owned) emu_backing_retire(ptr, bytes);
  return hipSuccess;
}

EMU_EXPORT hipError_t hipMalloc(void **ptr, size_t size) {
  return emu_ret(emu_allocate(ptr, size, EMU_MEM_DEVICE, 0));
}

EMU_EXPORT hipError_t hipFree(void *ptr) {
  if (ptr == NULL) return hipSuccess;
  /* The device-wide wait holds the runtime lock, as HIP's and CUDA's do:
   * other threads entering the runtime block until the device drains. */
  emu_api_enter_exclusive();
  hipError_t status = emu_release(ptr, EMU_MEM_DEVICE, 1, hipErrorInvalidValue);
  emu_api_leave();
  return emu_ret(status);
}

static const unsigned emu_host_malloc_flags = hipHostMallocPortable | hipHostMallocMapped |
                                              hipHostMallocWriteCombined | hipHostMallocNumaUser |
                                              hipHostMallocCoherent | hipHostMallocNonCoherent;

EMU_EXPORT hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags) {
  if ((flags & ~emu_host_malloc_flags) != 0 ||
      ((flags & hipHostMallocCoherent) && (flags & hipHostMallocNonCoherent)))
    return emu_ret(hipErrorInvalidValue);
  return emu_ret(emu_allocate(ptr, size, EMU_MEM_PINNED_HOST, flags));
}

EMU_EXPORT hipError_t hipHostAlloc(void **ptr, size_t size, unsigned int flags) {
  return hipHostMalloc(ptr, size, flags);
}

EMU_EXPORT hipError_t hipMallocHost(void **ptr, size_t size) {
  return emu_ret(emu_allocate(ptr, size, EMU_MEM_PINNED_HOST, 0));
}

EMU_EXPORT hipError_t hipHostFree(void *ptr) {
  if (ptr == NULL) return hipSuccess;
  return emu_ret(emu_release(ptr, EMU_MEM_PINNED_HOST, 1, hipErrorInvalidValue));
}

EMU_EXPORT hipError_t hipFreeHost(void *ptr) { return hipHostFree(ptr); }

EMU_EXPORT hipError_t hipHostRegister(void *ptr, size_t size, unsigned int flags) {
  const unsigned supported = hipHostRegisterPortable | hipHostRegisterMapped |
                             hipHostRegisterIoMemory | hipHostRegisterReadOnly;
  if (ptr == NULL || size == 0 || (flags & ~supported) != 0) return emu_ret(hipErrorInvalidValue);
  uintptr_t p = (uintptr_t)ptr;
  if (p + size < p) return emu_ret(hipErrorInvalidValue);
  int device;
  hipError_t status = emu_current_device(&device);
  if (status != hipSuccess) return emu_ret(status);
  emu_lock_acquire();
  /* Any overlap with a known range is refused. */
  size_t n = emu_table_upper_locked(p + size - 1);
  if (n > 0 && emu_table[n - 1].base + emu_table[n - 1].size > p) {
    status = hipErrorHostMemoryAlreadyRegistered;
  } else {
    struct emu_alloc entry = {p, size, EMU_MEM_PINNED_HOST, device, flags, 0};
    if (emu_table_insert_locked(&entry) != 0) status = hipErrorOutOfMemory;
  }
  emu_lock_release();
  return emu_ret(status);
}

EMU_EXPORT hipError_t hipHostUnregister(void *ptr) {
  if (ptr == NULL) return emu_ret(hipErrorInvalidValue);
  return emu_ret(emu_release(ptr, EMU_MEM_PINNED_HOST, 0, hipErrorHostMemoryNotRegistered));
}

EMU_EXPORT hipError_t hipHostGetDevicePointer(void **device_ptr, void *host_ptr,
                                              unsigned int flags) {
  if (device_ptr == NULL || host_ptr == NULL || flags != 0) return emu_ret(hipErrorInvalidValue);
  emu_lock_acquire();
  struct emu_alloc *a = emu_find_locked(host_ptr);
  int ok = a != NULL && a->kind == EMU_MEM_PINNED_HOST;
  emu_lock_release();
  if (!ok) return emu_ret(hipErrorInvalidValue);
  *device_ptr = host_ptr; /* unified addressing: the same address */
  return hipSuccess;
}

EMU_EXPORT hipError_t hipHostGetFlags(unsigned int *flags, void *host_ptr) {
  if (flags == NULL || host_ptr == NULL) return emu_ret(hipErrorInvalidValue);
  emu_lock_acquire();
  struct emu_alloc *a = emu_find_locked(host_ptr);
  int ok = a != NULL && a->kind == EMU_MEM_PINNED_HOST;
  if (ok) *flags = a->flags;
  emu_lock_release();
  return ok ? hipSuccess : emu_ret(hipErrorInvalidValue);
}

EMU_EXPORT hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  if (free_bytes == NULL || total_bytes == NULL) return emu_ret(hipErrorInvalidValue);
  int device;
  hipError_t status = emu_current_device(&device);
  if (status != hipSuccess) return emu_ret(status);
  size_t total = emu_device_memory_total();
  emu_lock_acquire();
  size_t used = emu_device_used[device];
  emu_lock_release();
  *total_bytes = total;
  *free_bytes = used < total ? total - used : 0;
  return hipSuccess;
}

EMU_EXPORT hipError_t hipMemPtrGetInfo(void *ptr, size_t *size) {
  if (ptr == NULL || size == NULL) return emu_ret(hipErrorInvalidValue);
  emu_lock_acquire();
  struct emu_alloc *a = emu_find_locked(ptr);
  if (a != NULL) *size = a->size;
  emu_lock_release();
  return a != NULL ? hipSuccess : emu_ret(hipErrorInvalidValue);
}

EMU_EXPORT hipError_t hipMemGetAddressRange(void **base, size_t *size, void *ptr) {
  if (ptr == NULL || (base == NULL && size == NULL)) return emu_ret(hipErrorInvalidValue);
  emu_lock_acquire();
  struct emu_alloc *a = emu_find_locked(ptr);
  if (a != NULL) {
    if (base != NULL) *base = (void *)a->base;
    if (size != NULL) *size = a->size;
  }
  emu_lock_release();
  return a != NULL ? hipSuccess : emu_ret(hipErrorNotFound);
}

/* Memory the runtime does not know is hipMemoryTypeUnregistered with
 * hipSuccess, as ROCm's runtime answers (and CUDA since 11.0): no device
 * (hipInvalidDeviceId), no aliases. */
EMU_EXPORT hipError_t hipPointerGetAttributes(hipPointerAttribute_t *attributes, const void *ptr) {
  if (attributes == NULL || ptr == NULL) return emu_ret(hipErrorInvalidValue);
  emu_lock_acquire();
  struct emu_alloc *a = emu_find_locked(ptr);
  if (a != NULL) {
    memset(attributes, 0, sizeof(*attributes));
    attributes->type = a->kind == EMU_MEM_DEVICE ? hipMemoryTypeDevice : hipMemoryTypeHost;
    attributes->device = a->device;
    attributes->devicePointer = (void *)ptr;
    attributes->hostPointer = a->kind == EMU_MEM_DEVICE ? NULL : (void *)ptr;
    attributes->isManaged = 0;
    attributes->allocationFlags = a->flags;
  } else {
    memset(attributes, 0, sizeof(*attributes));
    attributes->type = hipMemoryTypeUnregistered;
    attributes->device = -1;
  }
  emu_lock_release();
  return hipSuccess;
}

/* ---- copies and fills ----------------------------------------------------- */

/* A span that starts inside a known allocation must end inside it. */
static int emu_span_ok(const struct emu_alloc *a, const void *ptr, size_t bytes) {
  uintptr_t p = (uintptr_t)ptr;
  if (a == NULL) return p + bytes >= p;
  return bytes <= a->size - (p - a->base);
}

/* Whether a copy of `bytes` may run: each operand inside the allocation it
 * starts in, and device memory (or pinned host memory, which devices can
 * address) where an operand is declared as device memory. */
static hipError_t emu_copy_ok(void *dst, const void *src, size_t bytes, int dst_device,
                              int src_device) {
  if (bytes == 0) return hipSuccess;
  if (dst == NULL || src == NULL) return hipErrorInvalidValue;
  emu_lock_acquire();
  struct emu_alloc *d = emu_find_locked(dst);
  struct emu_alloc *s = emu_find_locked(src);
  int ok = emu_span_ok(d, dst, bytes) && emu_span_ok(s, src, bytes) &&
           (!dst_device || d != NULL) && (!src_device || s != NULL);
  emu_lock_release();
  return ok ? hipSuccess : hipErrorInvalidValue;
}

/* The operation of a copy or fill whose operands were checked (ok): a new
 * operation of `kind` on `bytes` (a fill's element count) at dst in *out, or
 * hipErrorInvalidValue when the check failed, hipErrorOutOfMemory. */
static hipError_t emu_new_memory_op(int ok, enum emu_op_kind kind, void *dst, size_t bytes,
                                    struct emu_op **out) {
  if (!ok) return hipErrorInvalidValue;
  struct emu_op *op = emu_op_new(kind);
  if (op == NULL) return hipErrorOutOfMemory;
  op->dst = dst;
  op->bytes = bytes;
  *out = op;
  return hipSuccess;
}

static hipError_t emu_prepare_copy(void *dst, const void *src, size_t bytes, int kind,
                                   struct emu_op **out) {
  *out = NULL;
  int dst_device, src_device;
  switch (kind) {
    case hipMemcpyHostToHost: dst_device = 0; src_device = 0; break;
    case hipMemcpyHostToDevice: dst_device = 1; src_device = 0; break;
    case hipMemcpyDeviceToHost: dst_device = 0; src_device = 1; break;
    case hipMemcpyDeviceToDevice:
    case hipMemcpyDeviceToDeviceNoCU: dst_device = 1; src_device = 1; break;
    case hipMemcpyDefault: dst_device = 0; src_device = 0; break;
    default: return hipErrorInvalidMemcpyDirection;
  }
  hipError_t status = emu_copy_ok(dst, src, bytes, dst_device, src_device);
  if (status != hipSuccess || bytes == 0) return status;
  status = emu_new_memory_op(1, EMU_OP_COPY, dst, bytes, out);
  if (status == hipSuccess) (*out)->src = src;
  return status;
}

static hipError_t emu_copy(void *dst, const void *src, size_t bytes, int kind,
                           hipStream_t stream, int wait) {
  struct emu_op *op = NULL;
  hipError_t status = emu_prepare_copy(dst, src, bytes, kind, &op);
  if (status != hipSuccess || op == NULL) return status;
  return emu_submit_memory_op(stream, op, wait);
}

static hipError_t emu_prepare_fill(void *dst, uint32_t pattern, unsigned elem_size, size_t count,
                                   struct emu_op **out) {
  *out = NULL;
  if (count == 0) return hipSuccess;
  if (dst == NULL || count > SIZE_MAX / elem_size) return hipErrorInvalidValue;
  emu_lock_acquire();
  struct emu_alloc *a = emu_find_locked(dst);
  int ok = a != NULL && emu_span_ok(a, dst, count * elem_size);
  emu_lock_release();
  hipError_t status = emu_new_memory_op(ok, EMU_OP_FILL, dst, count, out);
  if (status == hipSuccess) {
    (*out)->pattern = pattern;
    (*out)->elem_size = elem_size;
  }
  return status;
}

static hipError_t emu_fill_submit(void *dst, uint32_t pattern, unsigned elem_size, size_t count,
                                  hipStream_t stream, int wait) {
  struct emu_op *op = NULL;
  hipError_t status = emu_prepare_fill(dst, pattern, elem_size, count, &op);
  if (status != hipSuccess || op == NULL) return status;
  return emu_submit_memory_op(stream, op, wait);
}

EMU_EXPORT hipError_t hipMemcpy(void *dst, const void *src, size_t bytes, int kind) {
  return emu_ret(emu_copy(dst, src, bytes, kind, NULL, 1));
}

EMU_EXPORT hipError_t hipMemcpyAsync(void *dst, const void *src, size_t bytes, int kind,
                                     hipStream_t stream) {
  return emu_ret(emu_copy(dst, src, bytes, kind, stream, 0));
}

/* A batch of 1D copies (hipMemcpyBatchAsync): in stream order as a whole,
 * in no order among themselves, the direction taken from the pointers.
 * Each copy is checked once, as its operation is made; the operations are
 * queued only once all of them are made, so a copy refused anywhere refuses
 * the whole batch with nothing queued. *fail_idx names the first copy
 * refused (SIZE_MAX: none in particular). The attributes are accepted and
 * not used, as on ROCm. */
EMU_EXPORT hipError_t hipMemcpyBatchAsync(void **dsts, void **srcs, size_t *sizes, size_t count,
                                          void *attrs, size_t *attrs_idxs, size_t num_attrs,
                                          size_t *fail_idx, hipStream_t stream) {
  (void)attrs;
  (void)attrs_idxs;
  (void)num_attrs;
  if (fail_idx != NULL) *fail_idx = SIZE_MAX;
  if (count == 0 || dsts == NULL || srcs == NULL || sizes == NULL)
    return emu_ret(hipErrorInvalidValue);
  struct emu_op *first = NULL, **tail = &first;
  hipError_t status = hipSuccess;
  for (size_t i = 0; i < count && status == hipSuccess; i++) {
    struct emu_op *op = NULL;
    status = emu_prepare_copy(dsts[i], srcs[i], sizes[i], hipMemcpyDefault, &op);
    if (status != hipSuccess && fail_idx != NULL) *fail_idx = i;
    if (op != NULL) {     /* NULL: nothing to copy */
      *tail = op;
      tail = &op->next;
    }
  }
  if (status != hipSuccess) {
    emu_lock_acquire();
    while (first != NULL) {
      struct emu_op *next = first->next;
      emu_op_release_locked(first);
      first = next;
    }
    emu_lock_release();
    return emu_ret(status);
  }
  if (first == NULL) return emu_ret(hipSuccess);
  return emu_ret(emu_submit_memory_op(stream, first, 0));
}

EMU_EXPORT hipError_t hipMemcpyWithStream(void *dst, const void *src, size_t bytes, int kind,
                                          hipStream_t stream) {
  return emu_ret(emu_copy(dst, src, bytes, kind, stream, 1));
}

EMU_EXPORT hipError_t hipMemcpyHtoD(void *dst, const void *src, size_t bytes) {
  return emu_ret(emu_copy(dst, src, bytes, hipMemcpyHostToDevice, NULL, 1));
}

EMU_EXPORT hipError_t hipMemcpyDtoH(void *dst, void *src, size_t bytes) {
  return emu_ret(emu_copy(dst, src, bytes, hipMemcpyDeviceToHost, NULL, 1));
}

EMU_EXPORT hipError_t hipMemcpyDtoD(void *dst, void *src, size_t bytes) {
  return emu_ret(emu_copy(dst, src, bytes, hipMemcpyDeviceToDevice, NULL, 1));
}

EMU_EXPORT hipError_t hipMemcpyHtoDAsync(void *dst, const void *src, size_t bytes,
                                         hipStream_t stream) {
  return emu_ret(emu_copy(dst, src, bytes, hipMemcpyHostToDevice, stream, 0));
}

EMU_EXPORT hipError_t hipMemcpyDtoHAsync(void *dst, void *src, size_t bytes, hipStream_t stream) {
  return emu_ret(emu_copy(dst, src, bytes, hipMemcpyDeviceToHost, stream, 0));
}

EMU_EXPORT hipError_t hipMemcpyDtoDAsync(void *dst, void *src, size_t bytes, hipStream_t stream) {
  return emu_ret(emu_copy(dst, src, bytes, hipMemcpyDeviceToDevice, stream, 0));
}

static int emu_valid_device(int device) { return device >= 0 && device < emu_device_count(); }

EMU_EXPORT hipError_t hipMemcpyPeer(void *dst, int dst_device, const void *src, int src_device,
                                    size_t bytes) {
  if (!emu_valid_device(dst_device) || !emu_valid_device(src_device))
    return emu_ret(hipErrorInvalidDevice);
  return emu_ret(emu_copy(dst, src, bytes, hipMemcpyDeviceToDevice, NULL, 1));
}

EMU_EXPORT hipError_t hipMemcpyPeerAsync(void *dst, int dst_device, const void *src,
                                         int src_device, size_t bytes, hipStream_t stream) {
  if (!emu_valid_device(dst_device) || !emu_valid_device(src_device))
    return emu_ret(hipErrorInvalidDevice);
  return emu_ret(emu_copy(dst, src, bytes, hipMemcpyDeviceToDevice, stream, 0));
}

EMU_EXPORT hipError_t hipMemset(void *dst, int value, size_t bytes) {
  return emu_ret(emu_fill_submit(dst, (uint8_t)value, 1, bytes, NULL, 1));
}

EMU_EXPORT hipError_t hipMemsetAsync(void *dst, int value, size_t bytes, hipStream_t stream) {
  return emu_ret(emu_fill_submit(dst, (uint8_t)value, 1, bytes, stream, 0));
}

EMU_EXPORT hipError_t hipMemsetD8(void *dst, unsigned char value, size_t count) {
  return emu_ret(emu_fill_submit(dst, value, 1, count, NULL, 1));
}

EMU_EXPORT hipError_t hipMemsetD8Async(void *dst, unsigned char value, size_t count,
                                       hipStream_t stream) {
  return emu_ret(emu_fill_submit(dst, value, 1, count, stream, 0));
}

EMU_EXPORT hipError_t hipMemsetD16(void *dst, unsigned short value, size_t count) {
  return emu_ret(emu_fill_submit(dst, value, 2, count, NULL, 1));
}

EMU_EXPORT hipError_t hipMemsetD16Async(void *dst, unsigned short value, size_t count,
                                        hipStream_t stream) {
  return emu_ret(emu_fill_submit(dst, value, 2, count, stream, 0));
}

EMU_EXPORT hipError_t hipMemsetD32(void *dst, int value, size_t count) {
  return emu_ret(emu_fill_submit(dst, (uint32_t)value, 4, count, NULL, 1));
}

EMU_EXPORT hipError_t hipMemsetD32Async(void *dst, int value, size_t count, hipStream_t stream) {
  return emu_ret(emu_fill_submit(dst, (uint32_t)value, 4, count, stream, 0));
}

/* ---- for streammem.c (hipExtMallocWithFlags, stream memory operations) ---- */

hipError_t emu_allocate_device(void **ptr, size_t size, unsigned flags) {
  return emu_allocate(ptr, size, EMU_MEM_DEVICE, flags);
}

int emu_lookup_locked(const void *ptr, uintptr_t *base, size_t *size, int *kind,
                      unsigned *flags) {
  struct emu_alloc *a = emu_find_locked(ptr);
  if (a == NULL) return -1;
  if (base != NULL) *base = a->base;
  if (size != NULL) *size = a->size;
  if (kind != NULL) *kind = a->kind;
  if (flags != NULL) *flags = a->flags;
  return 0;
}

/* ---- entries that hold the runtime lock (runtime.c) ---------------------- */
EMU_LOCKED_ENTRY(static hipError_t, emu_allocate,
                 (void **ptr, size_t size, int kind, unsigned flags),
                 (ptr, size, kind, flags))
