/* Private interface between the emulated libamdhip64.so and libhipfile.so.
 * Neither is AMD's library: this is the emulated test platform of the
 * hipfile Python package. Only these functions cross between the two
 * libraries besides HIP's public API. */
#ifndef HIPFILE_EMU_PRIVATE_H
#define HIPFILE_EMU_PRIVATE_H

#include <stddef.h>

#define EMU_EXPORT __attribute__((visibility("default")))

/* HIP types as the emulated runtime defines them (ABI-compatible with HIP). */
typedef int emu_hipError_t;                 /* hipError_t */
typedef struct ihipStream_t *emu_hipStream_t; /* hipStream_t */
typedef void (*emu_hipHostFn_t)(void *user_data);

/* Memory kinds returned by hipEmuPointerInfo. */
enum { EMU_MEM_DEVICE = 1, EMU_MEM_PINNED_HOST = 2 };

/* Look up the allocation that contains ptr. Returns 0 and fills the outputs
 * (any may be NULL) if ptr lies inside a live allocation of the emulated
 * runtime, -1 otherwise. */
EMU_EXPORT int hipEmuPointerInfo(const void *ptr, void **base, size_t *size,
                                 int *kind, int *device);

/* Device that owns a stream (NULL: the current device's null stream).
 * Returns 0, or -1 for an unknown stream. */
EMU_EXPORT int hipEmuStreamDevice(emu_hipStream_t stream, int *device);

/* Public HIP functions that libhipfile uses. */
emu_hipError_t hipLaunchHostFunc(emu_hipStream_t stream, emu_hipHostFn_t fn,
                                 void *user_data);
emu_hipError_t hipGetDevice(int *device);
emu_hipError_t hipStreamSynchronize(emu_hipStream_t stream);

#endif
