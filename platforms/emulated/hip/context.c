/* Contexts of the emulated HIP runtime: the primary context of each device
 * and the context stack of each thread, the driver-API entry points that
 * HIP keeps for code written against CUDA's driver API (hip-python-interop
 * maps cuda.bindings.driver onto them).
 *
 * As in ROCm, a context is its device: hipCtx_t names one device's
 * primary context, making a context current makes its device the thread's
 * current device, and hipCtxCreate gives the device's context again rather
 * than a separate one. Each thread has a stack of contexts
 * (hipCtxPushCurrent/hipCtxPopCurrent); hipCtxSetCurrent replaces its top,
 * and hipCtxSetCurrent(NULL) pops it. The primary context counts its
 * retains: hipDevicePrimaryCtxGetState reports it active while retained. */
#define _GNU_SOURCE
#include <stdlib.h>

#include "emu_hip.h"

/* HIP's hipErrorContextAlreadyInUse (errors.c names it). */
#define EMU_CONTEXT_ALREADY_IN_USE 216
#define EMU_CTX_STACK_DEPTH 64
#define EMU_CTX_API_VERSION 3020 /* what ROCm's hipCtxGetApiVersion reports */

struct ihipCtx_t {
  int device;
  int retains; /* hipDevicePrimaryCtxRetain minus Release (under emu_lock) */
  unsigned flags;
};
typedef struct ihipCtx_t *hipCtx_t;

hipError_t hipDeviceReset(void);
hipError_t hipDeviceSynchronize(void);

static struct ihipCtx_t emu_primary[EMU_MAX_DEVICES];
static __thread hipCtx_t emu_ctx_stack[EMU_CTX_STACK_DEPTH];
static __thread int emu_ctx_depth = 0;

static int emu_ctx_valid_device(int device) {
  return device >= 0 && device < emu_device_count() && device < EMU_MAX_DEVICES;
}

static hipCtx_t emu_primary_ctx(int device) {
  emu_primary[device].device = device;
  return &emu_primary[device];
}

/* A context handle this runtime gave out, or NULL. */
static hipCtx_t emu_ctx_check(hipCtx_t ctx) {
  if (ctx == NULL) return NULL;
  uintptr_t p = (uintptr_t)ctx, lo = (uintptr_t)&emu_primary[0];
  if (p < lo || p >= (uintptr_t)&emu_primary[EMU_MAX_DEVICES]) return NULL;
  if ((p - lo) % sizeof(struct ihipCtx_t) != 0) return NULL;
  return emu_ctx_valid_device(ctx->device) && ctx == &emu_primary[ctx->device] ? ctx : NULL;
}

/* ---- primary contexts ----------------------------------------------------- */

EMU_EXPORT hipError_t hipDevicePrimaryCtxRetain(hipCtx_t *pctx, hipDevice_t device) {
  if (!emu_ctx_valid_device(device)) return emu_ret(hipErrorInvalidDevice);
  if (pctx == NULL) return emu_ret(hipErrorInvalidValue);
  emu_lock_acquire();
  hipCtx_t ctx = emu_primary_ctx(device);
  ctx->retains++;
  emu_lock_release();
  *pctx = ctx;
  return hipSuccess;
}

EMU_EXPORT hipError_t hipDevicePrimaryCtxRelease(hipDevice_t device) {
  if (!emu_ctx_valid_device(device)) return emu_ret(hipErrorInvalidDevice);
  emu_lock_acquire();
  hipCtx_t ctx = emu_primary_ctx(device);
  if (ctx->retains > 0) ctx->retains--;
  emu_lock_release();
  return hipSuccess;
}

EMU_EXPORT hipError_t hipDevicePrimaryCtxGetState(hipDevice_t device, unsigned int *flags,
                                                  int *active) {
  if (!emu_ctx_valid_device(device)) return emu_ret(hipErrorInvalidDevice);
  if (flags == NULL || active == NULL) return emu_ret(hipErrorInvalidValue);
  emu_lock_acquire();
  hipCtx_t ctx = emu_primary_ctx(device);
  *flags = ctx->flags;
  *active = ctx->retains > 0;
  emu_lock_release();
  return hipSuccess;
}

EMU_EXPORT hipError_t hipDevicePrimaryCtxSetFlags(hipDevice_t device, unsigned int flags) {
  if (!emu_ctx_valid_device(device)) return emu_ret(hipErrorInvalidDevice);
  emu_lock_acquire();
  hipCtx_t ctx = emu_primary_ctx(device);
  int active = ctx->retains > 0;
  if (!active) ctx->flags = flags;
  emu_lock_release();
  /* CUDA and ROCm refuse new flags while the primary context is active. */
  return active ? emu_ret(EMU_CONTEXT_ALREADY_IN_USE) : hipSuccess;
}

/* Resets the device (hipDeviceReset on it): its work is waited for and its
 * streams, events and memory are released. */
EMU_EXPORT hipError_t hipDevicePrimaryCtxReset(hipDevice_t device) {
  if (!emu_ctx_valid_device(device)) return emu_ret(hipErrorInvalidDevice);
  int current;
  hipError_t status = emu_current_device(&current);
  if (status != hipSuccess) return emu_ret(status);
  emu_set_current_device(device);
  status = hipDeviceReset();
  emu_set_current_device(current);
  return status;
}

/* ---- the thread's context stack ------------------------------------------- */

EMU_EXPORT hipError_t hipCtxGetCurrent(hipCtx_t *ctx) {
  if (ctx == NULL) return emu_ret(hipErrorInvalidValue);
  if (emu_ctx_depth > 0) {
    *ctx = emu_ctx_stack[emu_ctx_depth - 1];
    return hipSuccess;
  }
  /* No context made current: the current device's primary context, as
   * ROCm answers (its runtime makes one current implicitly). */
  int device;
  hipError_t status = emu_current_device(&device);
  if (status != hipSuccess) return emu_ret(status);
  *ctx = emu_primary_ctx(device);
  return hipSuccess;
}

EMU_EXPORT hipError_t hipCtxSetCurrent(hipCtx_t ctx) {
  if (ctx == NULL) {
    if (emu_ctx_depth > 0) emu_ctx_depth--;
    if (emu_ctx_depth > 0) emu_set_current_device(emu_ctx_stack[emu_ctx_depth - 1]->device);
    return hipSuccess;
  }
  if (emu_ctx_check(ctx) == NULL) return emu_ret(hipErrorInvalidContext);
  if (emu_ctx_depth == 0) emu_ctx_depth = 1;
  emu_ctx_stack[emu_ctx_depth - 1] = ctx;
  emu_set_current_device(ctx->device);
  return hipSuccess;
}

EMU_EXPORT hipError_t hipCtxPushCurrent(hipCtx_t ctx) {
  if (emu_ctx_check(ctx) == NULL) return emu_ret(hipErrorInvalidContext);
  if (emu_ctx_depth == EMU_CTX_STACK_DEPTH) return emu_ret(hipErrorOutOfMemory);
  emu_ctx_stack[emu_ctx_depth++] = ctx;
  emu_set_current_device(ctx->device);
  return hipSuccess;
}

EMU_EXPORT hipError_t hipCtxPopCurrent(hipCtx_t *ctx) {
  if (emu_ctx_depth == 0) return emu_ret(hipErrorInvalidContext);
  hipCtx_t top = emu_ctx_stack[--emu_ctx_depth];
  if (ctx != NULL) *ctx = top;
  if (emu_ctx_depth > 0) emu_set_current_device(emu_ctx_stack[emu_ctx_depth - 1]->device);
  return hipSuccess;
}

EMU_EXPORT hipError_t hipCtxCreate(hipCtx_t *ctx, unsigned int flags, hipDevice_t device) {
  if (ctx == NULL) return emu_ret(hipErrorInvalidValue);
  if (!emu_ctx_valid_device(device)) return emu_ret(hipErrorInvalidDevice);
  hipCtx_t created = emu_primary_ctx(device);
  hipError_t status = hipCtxPushCurrent(created);
  if (status == hipSuccess) *ctx = created;
  return status;
}

EMU_EXPORT hipError_t hipCtxDestroy(hipCtx_t ctx) {
  if (emu_ctx_check(ctx) == NULL) return emu_ret(hipErrorInvalidContext);
  /* The device's context outlives this handle; it leaves the stack top. */
  if (emu_ctx_depth > 0 && emu_ctx_stack[emu_ctx_depth - 1] == ctx) emu_ctx_depth--;
  return hipSuccess;
}

EMU_EXPORT hipError_t hipCtxGetDevice(hipDevice_t *device) {
  if (device == NULL) return emu_ret(hipErrorInvalidValue);
  hipCtx_t ctx;
  hipError_t status = hipCtxGetCurrent(&ctx);
  if (status != hipSuccess) return status;
  *device = ctx->device;
  return hipSuccess;
}

EMU_EXPORT hipError_t hipCtxSynchronize(void) { return hipDeviceSynchronize(); }

EMU_EXPORT hipError_t hipCtxGetApiVersion(hipCtx_t ctx, unsigned int *version) {
  if (version == NULL) return emu_ret(hipErrorInvalidValue);
  if (ctx != NULL && emu_ctx_check(ctx) == NULL) return emu_ret(hipErrorInvalidContext);
  *version = EMU_CTX_API_VERSION;
  return hipSuccess;
}

EMU_EXPORT hipError_t hipCtxGetFlags(unsigned int *flags) {
  if (flags == NULL) return emu_ret(hipErrorInvalidValue);
  hipCtx_t ctx;
  hipError_t status = hipCtxGetCurrent(&ctx);
  if (status != hipSuccess) return status;
  *flags = ctx->flags;
  return hipSuccess;
}
