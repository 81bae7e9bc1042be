/* Backing memory of the emulated allocations (hipMalloc and pinned host
 * memory), so that use after free faults as it does on a GPU.
 *
 * Each allocation is its own anonymous mapping, page aligned. Freeing does not give the addresses back:
 * the range is mapped again as PROT_NONE (its pages return to the system)
 * and stays reserved in a quarantine of the EMU_QUARANTINE_RANGES most
 * recently freed ranges; only the oldest range leaves the quarantine
 * (munmap) when a new one enters. So a pointer kept after hipFree neither
 * reaches memory that a later allocation got, nor writes silently: the
 * kernel answers EFAULT to a read(2) into it, and the process faults on a
 * load or store, as a GPU faults on freed device memory.
 *
 * In the sanitizer build the bytes between the end of an allocation and
 * its page end are poisoned, so AddressSanitizer reports an overrun. */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu_hip.h"

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#define EMU_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define EMU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define EMU_POISON(p, n) ((void)(p), (void)(n))
#define EMU_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define EMU_QUARANTINE_RANGES 4096

struct emu_freed_range {
  void *base;
  size_t length;
};

/* A ring, under emu_lock: quarantine_next is the slot the next freed range
 * takes (holding the oldest range once the ring is full). */
static struct emu_freed_range quarantine[EMU_QUARANTINE_RANGES];
static size_t quarantine_next = 0;

static size_t emu_page_size(void) {
  long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? (size_t)page : 4096;
}

/* The mapping's length for size bytes: whole pages. 0 when that does not
 * fit a size_t. (No guard page: a PROT_NONE page after every allocation
 * would keep the kernel from merging neighbouring allocations into one
 * mapping, and a process holding tens of thousands of small allocations,
 * as hipFile's asynchronous path does under load, would run into the
 * kernel's limit on mappings.) */
static size_t emu_backing_length(size_t size) {
  size_t page = emu_page_size();
  if (size > SIZE_MAX - page) return 0;
  return (size + page - 1) / page * page;
}

void *emu_backing_map(size_t size) {
  size_t length = emu_backing_length(size);
  if (size == 0 || length == 0) return NULL;
  void *base = mmap(NULL, length, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return NULL;
  EMU_POISON((char *)base + size, length - size);
  return base;
}

void emu_backing_unmap(void *base, size_t size) {
  if (base == NULL) return;
  size_t length = emu_backing_length(size);
  EMU_UNPOISON(base, length);
  munmap(base, length);
}

void emu_backing_retire_locked(void *base, size_t size) {
  if (base == NULL) return;
  size_t length = emu_backing_length(size);
  EMU_UNPOISON(base, length);
  /* A fresh PROT_NONE mapping in place: the pages are dropped at once and
   * the addresses stay reserved. Should that fail, munmap at least makes
   * the range inaccessible (the addresses may then be handed out again). */
  if (mmap(base, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
           0) == MAP_FAILED) {
    munmap(base, length);
    return;
  }
  struct emu_freed_range *slot = &quarantine[quarantine_next];
  if (slot->base != NULL) munmap(slot->base, slot->length);
  slot->base = base;
  slot->length = length;
  quarantine_next = (quarantine_next + 1) % EMU_QUARANTINE_RANGES;
}

void emu_backing_retire(void *base, size_t size) {
  emu_lock_acquire();
  emu_backing_retire_locked(base, size);
  emu_lock_release();
}
