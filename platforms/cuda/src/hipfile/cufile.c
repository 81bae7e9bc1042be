/* libhipfile.so of the cuda test platform: loading cuFile, its error
 * numbers as hipFile's, and hipFile's versions and messages. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hipfile_private.h"

#ifndef HIPFILE_CUDA_JSON
#define HIPFILE_CUDA_JSON ""
#endif

/* ---- loading cuFile ---------------------------------------------------- */

static struct hfc_cufile cf_table;
static const struct hfc_cufile *cf_loaded;
static pthread_once_t cf_once = PTHREAD_ONCE_INIT;
char cf_path[4096];
char cf_json[4096];

/* Point cuFile at the platform's configuration (compatibility mode allowed)
 * unless the user chose one. Done before cuFile is loaded, since it reads
 * the variable when it starts. */
static void choose_config(void)
{
    const char *user = getenv("CUFILE_ENV_PATH_JSON");
    Dl_info info;
    if (user && *user) {
        snprintf(cf_json, sizeof cf_json, "%s (from CUFILE_ENV_PATH_JSON)", user);
        return;
    }
    cf_json[0] = '\0';
    if (dladdr((void *)&hipFileDriverOpen, &info) && info.dli_fname) {
        char candidate[4096];
        const char *slash = strrchr(info.dli_fname, '/');
        int dir_len = slash ? (int)(slash - info.dli_fname) : 1;
        const char *dir = slash ? info.dli_fname : ".";
        snprintf(candidate, sizeof candidate, "%.*s/../share/hipfile-cuda/cufile.json", dir_len,
                 dir);
        if (access(candidate, R_OK) == 0)
            snprintf(cf_json, sizeof cf_json, "%s", candidate);
    }
    if (cf_json[0] == '\0' && HIPFILE_CUDA_JSON[0] && access(HIPFILE_CUDA_JSON, R_OK) == 0)
        snprintf(cf_json, sizeof cf_json, "%s", HIPFILE_CUDA_JSON);
    if (cf_json[0] == '\0') {
        snprintf(cf_json, sizeof cf_json, "cuFile's default (/etc/cufile.json)");
        return;
    }
    setenv("CUFILE_ENV_PATH_JSON", cf_json, 0);
}

/* cuFile reads /proc/modules when its driver opens and, where the file
 * cannot be opened (sandboxed kernels such as gVisor), loops forever. Refuse
 * to use cuFile there, so that every call returns an error instead. */
static int system_supported(void)
{
    if (hfc_env_bool("HIPFILE_CUDA_SKIP_SYSTEM_CHECK") == 1)
        return 1;
    if (access("/proc/modules", R_OK) != 0) {
        hfc_say("/proc/modules is not readable on this system, and cuFile stops responding "
                "without it; cuFile is not used and hipFile calls return "
                "hipFilePlatformNotSupported (HIPFILE_CUDA_SKIP_SYSTEM_CHECK=1 overrides)");
        return 0;
    }
    return 1;
}

static void cf_load(void)
{
    static const char *const sonames[] = {"libcufile.so.0", "libcufile.so", NULL};
    static const struct hfc_search search = {"cuFile (libcufile)", "HIPFILE_CUFILE_LIBRARY",
                                             sonames, "cuFileDriverOpen"};
    void *lib;
    if (!system_supported())
        return;
    choose_config();
    lib = hfc_open(&search, cf_path, sizeof cf_path);
    if (lib == NULL)
        return;
#define HFC_RESOLVE(name, ret, params) hfc_sym(lib, #name, &cf_table.name);
    HFC_CUFILE_FUNCS(HFC_RESOLVE)
#undef HFC_RESOLVE
    /* cuFile's header maps cuFileDriverClose onto the _v2 entry point. */
    if (cf_table.cuFileDriverClose_v2)
        cf_table.cuFileDriverClose = cf_table.cuFileDriverClose_v2;
    __atomic_store_n(&cf_loaded, &cf_table, __ATOMIC_RELEASE);
}

const struct hfc_cufile *cf(void)
{
    pthread_once(&cf_once, cf_load);
    return __atomic_load_n(&cf_loaded, __ATOMIC_ACQUIRE);
}

/* ---- errors -------------------------------------------------------------- */

int op_from_cufile(int e)
{
    if (e == CU_FILE_SUCCESS)
        return hipFileSuccess;
    if (e > 5000 && e < hipFileIOMaxError)
        return e; /* the same numbers and meanings */
    switch (e) {
    case CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR:
        return hipFileBatchSubmitFailed;
    case CU_FILE_INVALID_CONTEXT_ERROR:
        return hipFileHipContextMismatch;
    case CU_FILE_NVFS_INTERNAL_DRIVER_ERROR:
        return hipFileDriverError;
    case CU_FILE_BATCH_NOCOMPAT_ERROR:
        return hipFileIONotSupported;
    default:
        return hipFileInternalError;
    }
}

hipFileError_t from_cufile(CUfileError_t e)
{
    hipFileError_t r;
    r.err = op_from_cufile(e.err);
    r.hip_drv_err = r.err == hipFileHipDriverError ? hfc_hip_from_cu_result(e.cu_err) : 0;
    return r;
}

/* A cuFile ssize_t result as hipFile reports it. errno is left as cuFile set
 * it for -1. */
ssize_t from_cufile_count(ssize_t r)
{
    ssize_t code;
    if (r >= -1)
        return r;
    code = -r;
    if (code > 5000 && code <= CU_FILE_IO_MAX_ERROR) {
        if (code == CU_FILE_IO_ERROR) {
            errno = EIO;
            return -1;
        }
        return -(ssize_t)op_from_cufile((int)code);
    }
    if (code < 4096) { /* a negated errno */
        errno = (int)code;
        return -1;
    }
    return -(ssize_t)hipFileInternalError;
}

hipFileError_t not_loaded(void)
{
    /* hfc_open has said why on stderr. */
    return make_error(hipFilePlatformNotSupported);
}

hipFileError_t missing(const char *name)
{
    static int told;
    hfc_say_once(&told, "cuFile at %s lacks %s (first missing function); it returns "
                        "hipFileInternalError",
                 cf_path, name);
    return make_error(hipFileInternalError);
}

/* ---- versions and messages ------------------------------------------------ */

HFC_EXPORT hipFileError_t hipFileGetVersion(unsigned *major, unsigned *minor, unsigned *patch)
{
    if (major == NULL || minor == NULL || patch == NULL)
        return make_error(hipFileInvalidValue);
    *major = HFC_VERSION_MAJOR;
    *minor = HFC_VERSION_MINOR;
    *patch = HFC_VERSION_PATCH;
    return ok;
}

struct op_message {
    int code;
    const char *text;
};

static const struct op_message op_messages[] = {
    {hipFileSuccess, "success"},
    {hipFileDriverNotInitialized, "the hipFile driver is not initialized"},
    {hipFileDriverInvalidProps, "invalid driver property"},
    {hipFileDriverUnsupportedLimit, "driver property out of range"},
    {hipFileDriverVersionMismatch, "driver version mismatch"},
    {hipFileDriverVersionReadError, "cannot read the driver version"},
    {hipFileDriverClosing, "the driver is shutting down"},
    {hipFilePlatformNotSupported, "direct GPU file I/O is not supported on this platform"},
    {hipFileIONotSupported, "direct GPU file I/O is not supported for this file"},
    {hipFileDeviceNotSupported, "direct GPU file I/O is not supported on this GPU"},
    {hipFileDriverError, "kernel driver error"},
    {hipFileHipDriverError, "GPU driver error (see hip_drv_err)"},
    {hipFileHipPointerInvalid, "invalid device pointer"},
    {hipFileHipMemoryTypeInvalid, "unsupported memory type"},
    {hipFileHipPointerRangeError, "range exceeds the allocation"},
    {hipFileHipContextMismatch, "GPU context mismatch"},
    {hipFileInvalidMappingSize, "access beyond the pinned size"},
    {hipFileInvalidMappingRange, "access beyond the mapped range"},
    {hipFileInvalidFileType, "unsupported file type"},
    {hipFileInvalidFileOpenFlag, "unsupported file open flags"},
    {hipFileDIONotSet, "the file is not open with O_DIRECT"},
    {hipFileInvalidValue, "invalid argument"},
    {hipFileMemoryAlreadyRegistered, "buffer already registered"},
    {hipFileMemoryNotRegistered, "buffer not registered"},
    {hipFilePermissionDenied, "permission denied"},
    {hipFileDriverAlreadyOpen, "the driver is already open"},
    {hipFileHandleNotRegistered, "file handle not registered"},
    {hipFileHandleAlreadyRegistered, "file handle already registered"},
    {hipFileDeviceNotFound, "GPU not found"},
    {hipFileInternalError, "internal error"},
    {hipFileGetNewFDFailed, "cannot obtain a new file descriptor"},
    {hipFileDriverSetupError, "driver setup error"},
    {hipFileIODisabled, "direct GPU file I/O disabled by configuration"},
    {hipFileBatchSubmitFailed, "batch submission failed"},
    {hipFileGPUMemoryPinningFailed, "cannot pin GPU memory"},
    {hipFileBatchFull, "batch queue full"},
    {hipFileAsyncNotSupported, "stream-ordered I/O not supported"},
    {hipFileIOMaxError, "largest hipFile error number"},
};

HFC_EXPORT const char *hipFileGetOpErrorString(int status)
{
    int code = status < 0 && status != INT_MIN ? -status : status;
    for (size_t i = 0; i < sizeof op_messages / sizeof op_messages[0]; i++)
        if (op_messages[i].code == code)
            return op_messages[i].text;
    return "unknown hipFile error";
}
