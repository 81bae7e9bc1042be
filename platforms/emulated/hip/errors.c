/* Error names and descriptions of the emulated HIP runtime (the table both
 * platforms share, platforms/common/hip_error_table.c), and the per-thread
 * "last error" of HIP's error model. */
#include <stddef.h>

#include "../../include/hip_error_table.h"
#include "emu_hip.h"

static __thread hipError_t emu_tls_last_error = hipSuccess;

hipError_t emu_ret(hipError_t status) {
  if (status != hipSuccess) emu_tls_last_error = status;
  return status;
}

EMU_EXPORT hipError_t hipGetLastError(void) {
  hipError_t last = emu_tls_last_error;
  emu_tls_last_error = hipSuccess;
  return last;
}

EMU_EXPORT hipError_t hipPeekAtLastError(void) { return emu_tls_last_error; }

EMU_EXPORT void hipEmuReset(void) { emu_tls_last_error = hipSuccess; }

EMU_EXPORT const char *hipGetErrorName(hipError_t code) { return hip_error_name(code); }

EMU_EXPORT const char *hipGetErrorString(hipError_t code) { return hip_error_string(code); }

/* hipDrvGetErrorName and hipDrvGetErrorString: one field of the table entry,
 * or NULL and hipErrorInvalidValue for a number HIP does not define. */
static hipError_t emu_drv_error_text(hipError_t code, int want_name, const char **out) {
  if (out == NULL) return emu_ret(hipErrorInvalidValue);
  const struct hip_error_info *e = hip_error_info(code);
  if (e == NULL) {
    *out = NULL;
    return emu_ret(hipErrorInvalidValue);
  }
  *out = want_name ? e->name : e->text;
  return hipSuccess;
}

EMU_EXPORT hipError_t hipDrvGetErrorName(hipError_t code, const char **name) {
  return emu_drv_error_text(code, 1, name);
}

EMU_EXPORT hipError_t hipDrvGetErrorString(hipError_t code, const char **text) {
  return emu_drv_error_text(code, 0, text);
}
