/* Driver life cycle, properties, configuration parameters, version and
 * error strings of the emulated libhipfile.so. */
#define _GNU_SOURCE
#include <string.h>

#include "hipfile_internal.h"

pthread_mutex_t emu_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t emu_cond = PTHREAD_COND_INITIALIZER;
hipfileEmuCounters_t emu_counters;
int64_t emu_use_count;
int emu_closing;

#define BIT(n) (1u << (n))

/* Defaults: the values of a stock cuFile/hipFile configuration. */
hipFileDriverProps_t emu_props = {
    .nvfs = {
        .major_version = HIPFILE_VERSION_MAJOR,
        .minor_version = HIPFILE_VERSION_MINOR,
        .poll_thresh_size = 4,            /* KiB */
        .max_direct_io_size = 16384,      /* KiB */
        .driver_status_flags = BIT(hipFileNVMeSupported),
        .driver_control_flags = BIT(hipFileAllowCompatMode),
    },
    .feature_flags = BIT(hipFileBatchIOSupported) | BIT(hipFileStreamsSupported),
    .max_device_cache_size = 131072,      /* KiB */
    .per_buffer_cache_size = 1024,        /* KiB */
    .max_device_pinned_mem_size = 33554432, /* KiB */
    .max_batch_io_count = 128,
    .max_batch_io_timeout_msecs = 5000,
};

/* Size parameters that are not mirrored in emu_props. */
static size_t sizet_params[HIPFILE_PARAM_SIZE_T_COUNT] = {
    [hipFileParamProfileStats] = 0,
    [hipFileParamExecutionMaxIOQueueDepth] = 128,
    [hipFileParamExecutionMaxIOThreads] = 4,
    [hipFileParamExecutionMinIOThresholdSizeKB] = 8192,
    [hipFileParamExecutionMaxRequestParallelism] = 4,
};

/* Bool parameters that are not mirrored in emu_props. */
static bool bool_params[HIPFILE_PARAM_BOOL_COUNT] = {
    [hipFileParamFsMiscApiCheckAggressive] = false,
    [hipFileParamExecutionParallelIO] = true,
    [hipFileParamSkipTopologyDetection] = true,
};

#define EMU_STRING_MAX 1024
static char string_params[HIPFILE_PARAM_STRING_COUNT][EMU_STRING_MAX] = {
    [hipFileParamLoggingLevel] = "ERROR",
    [hipFileParamEnvLogfilePath] = "",
    [hipFileParamLogDir] = "",
};

/* fork(): the locks are taken around it so that the child gets them in a
 * known state; the child keeps its registrations, but the threads that ran
 * stream-ordered operations and batch entries did not follow it. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&emu_lock);
    emu_hooks_lock();
}

static void fork_parent(void)
{
    emu_hooks_unlock();
    pthread_mutex_unlock(&emu_lock);
}

static void fork_child(void)
{
    emu_hooks_unlock();
    emu_batches_after_fork_locked();
    emu_handles_after_fork_locked();
    emu_counters.inflight = 0;
    pthread_mutex_unlock(&emu_lock);
}

__attribute__((constructor)) static void emu_library_init(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

int emu_driver_is_open_locked(void) { return emu_use_count > 0 && !emu_closing; }

void emu_driver_implicit_open_locked(void)
{
    if (emu_use_count == 0)
        emu_use_count = 1;
}

int emu_driver_implicit_open(void)
{
    pthread_mutex_lock(&emu_lock);
    int closing = emu_closing;
    if (!closing)
        emu_driver_implicit_open_locked();
    pthread_mutex_unlock(&emu_lock);
    return closing ? -1 : 0;
}

EMU_EXPORT hipFileError_t hipFileDriverOpen(void)
{
    pthread_mutex_lock(&emu_lock);
    hipFileOpError_t e = hipFileSuccess;
    if (emu_closing)
        e = hipFileDriverClosing;
    else
        emu_use_count++;
    pthread_mutex_unlock(&emu_lock);
    return emu_err(e);
}

EMU_EXPORT hipFileError_t hipFileDriverClose(void)
{
    pthread_mutex_lock(&emu_lock);
    hipFileOpError_t e = hipFileSuccess;
    if (emu_closing) {
        e = hipFileDriverClosing;
    } else if (emu_use_count <= 0) {
        e = hipFileDriverNotInitialized;
    } else if (--emu_use_count == 0) {
        /* New registrations and opens are refused while the state is torn
         * down: batches first (they hold handles), then handles and
         * buffers, each waiting for the operations that still use it. */
        emu_closing = 1;
        emu_batches_drop_all_locked();
        emu_handles_drop_all_locked();
        emu_closing = 0;
    }
    pthread_mutex_unlock(&emu_lock);
    return emu_err(e);
}

EMU_EXPORT int64_t hipFileUseCount(void)
{
    pthread_mutex_lock(&emu_lock);
    int64_t n = emu_use_count;
    pthread_mutex_unlock(&emu_lock);
    return n;
}

EMU_EXPORT hipFileError_t hipFileDriverGetProperties(hipFileDriverProps_t *props)
{
    if (props == NULL)
        return emu_err(hipFileInvalidValue);
    pthread_mutex_lock(&emu_lock);
    hipFileOpError_t e = hipFileDriverNotInitialized;
    if (emu_driver_is_open_locked()) {
        *props = emu_props;
        e = hipFileSuccess;
    }
    pthread_mutex_unlock(&emu_lock);
    return emu_err(e);
}

static void set_bit(unsigned *flags, unsigned bit, bool on)
{
    if (on)
        *flags |= BIT(bit);
    else
        *flags &= ~BIT(bit);
}

/* The four setters need an open driver, as cuFile's; sizes are in KiB.
 * poll < 0 leaves the poll mode bit alone. */
static hipFileError_t set_property(uint64_t *field, size_t value, int poll)
{
    pthread_mutex_lock(&emu_lock);
    hipFileOpError_t e = hipFileDriverNotInitialized;
    if (emu_driver_is_open_locked()) {
        *field = value;
        if (poll >= 0)
            set_bit(&emu_props.nvfs.driver_control_flags, hipFileUsePollMode, poll);
        e = hipFileSuccess;
    }
    pthread_mutex_unlock(&emu_lock);
    return emu_err(e);
}

EMU_EXPORT hipFileError_t hipFileDriverSetPollMode(bool poll, size_t poll_threshold_size)
{
    return set_property(&emu_props.nvfs.poll_thresh_size, poll_threshold_size, poll);
}

EMU_EXPORT hipFileError_t hipFileDriverSetMaxDirectIOSize(size_t max_direct_io_size)
{
    if (max_direct_io_size == 0)
        return emu_err(hipFileInvalidValue);
    return set_property(&emu_props.nvfs.max_direct_io_size, max_direct_io_size, -1);
}

EMU_EXPORT hipFileError_t hipFileDriverSetMaxCacheSize(size_t max_cache_size)
{
    return set_property(&emu_props.max_device_cache_size, max_cache_size, -1);
}

EMU_EXPORT hipFileError_t hipFileDriverSetMaxPinnedMemSize(size_t max_pinned_size)
{
    return set_property(&emu_props.max_device_pinned_mem_size, max_pinned_size, -1);
}

/* Configuration parameters: readable and writable at any time. The ones
 * that are driver properties read and write emu_props, so a setter and the
 * parameter always agree. */
static int sizet_valid(int p) { return p >= 0 && p < HIPFILE_PARAM_SIZE_T_COUNT; }
static int bool_valid(int p) { return p >= 0 && p < HIPFILE_PARAM_BOOL_COUNT; }
static int string_valid(int p) { return p >= 0 && p < HIPFILE_PARAM_STRING_COUNT; }

static size_t sizet_get_locked(hipFileSizeTConfigParameter_t p)
{
    switch (p) {
    case hipFileParamPropertiesMaxDirectIOSizeKB: return emu_props.nvfs.max_direct_io_size;
    case hipFileParamPropertiesMaxDeviceCacheSizeKB: return emu_props.max_device_cache_size;
    case hipFileParamPropertiesPerBufferCacheSizeKB: return emu_props.per_buffer_cache_size;
    case hipFileParamPropertiesMaxDevicePinnedMemSizeKB:
        return emu_props.max_device_pinned_mem_size;
    case hipFileParamPropertiesIOBatchsize: return emu_props.max_batch_io_count;
    case hipFileParamPollthresholdSizeKB: return emu_props.nvfs.poll_thresh_size;
    case hipFileParamPropertiesBatchIOTimeoutMs: return emu_props.max_batch_io_timeout_msecs;
    default: return sizet_params[p];
    }
}

EMU_EXPORT hipFileError_t hipFileGetParameterSizeT(hipFileSizeTConfigParameter_t param,
                                                   size_t *value)
{
    if (!sizet_valid((int)param) || value == NULL)
        return emu_err(hipFileInvalidValue);
    pthread_mutex_lock(&emu_lock);
    *value = sizet_get_locked(param);
    pthread_mutex_unlock(&emu_lock);
    return emu_err(hipFileSuccess);
}

EMU_EXPORT hipFileError_t hipFileSetParameterSizeT(hipFileSizeTConfigParameter_t param,
                                                   size_t value)
{
    if (!sizet_valid((int)param))
        return emu_err(hipFileInvalidValue);
    switch (param) {
    case hipFileParamPropertiesMaxDirectIOSizeKB:
    case hipFileParamPropertiesIOBatchsize:
    case hipFileParamExecutionMaxIOThreads:
    case hipFileParamExecutionMaxIOQueueDepth:
        if (value == 0)
            return emu_err(hipFileInvalidValue);
        break;
    default:
        break;
    }
    /* Fields held as unsigned in the properties. */
    if ((param == hipFileParamPropertiesIOBatchsize ||
         param == hipFileParamPropertiesBatchIOTimeoutMs) && value > UINT32_MAX)
        return emu_err(hipFileInvalidValue);
    pthread_mutex_lock(&emu_lock);
    switch (param) {
    case hipFileParamPropertiesMaxDirectIOSizeKB: emu_props.nvfs.max_direct_io_size = value; break;
    case hipFileParamPropertiesMaxDeviceCacheSizeKB: emu_props.max_device_cache_size = value; break;
    case hipFileParamPropertiesPerBufferCacheSizeKB: emu_props.per_buffer_cache_size = value; break;
    case hipFileParamPropertiesMaxDevicePinnedMemSizeKB:
        emu_props.max_device_pinned_mem_size = value;
        break;
    case hipFileParamPropertiesIOBatchsize: emu_props.max_batch_io_count = (unsigned)value; break;
    case hipFileParamPollthresholdSizeKB: emu_props.nvfs.poll_thresh_size = value; break;
    case hipFileParamPropertiesBatchIOTimeoutMs:
        emu_props.max_batch_io_timeout_msecs = (unsigned)value;
        break;
    default: sizet_params[param] = value; break;
    }
    pthread_mutex_unlock(&emu_lock);
    return emu_err(hipFileSuccess);
}

static bool bool_get_locked(hipFileBoolConfigParameter_t p)
{
    switch (p) {
    case hipFileParamPropertiesUsePollMode:
        return (emu_props.nvfs.driver_control_flags & BIT(hipFileUsePollMode)) != 0;
    case hipFileParamPropertiesAllowCompatMode:
        return (emu_props.nvfs.driver_control_flags & BIT(hipFileAllowCompatMode)) != 0;
    default: return bool_params[p];
    }
}

int emu_param_bool(hipFileBoolConfigParameter_t which)
{
    pthread_mutex_lock(&emu_lock);
    int v = bool_get_locked(which);
    pthread_mutex_unlock(&emu_lock);
    return v;
}

EMU_EXPORT hipFileError_t hipFileGetParameterBool(hipFileBoolConfigParameter_t param, bool *value)
{
    if (!bool_valid((int)param) || value == NULL)
        return emu_err(hipFileInvalidValue);
    pthread_mutex_lock(&emu_lock);
    *value = bool_get_locked(param);
    pthread_mutex_unlock(&emu_lock);
    return emu_err(hipFileSuccess);
}

EMU_EXPORT hipFileError_t hipFileSetParameterBool(hipFileBoolConfigParameter_t param, bool value)
{
    if (!bool_valid((int)param))
        return emu_err(hipFileInvalidValue);
    pthread_mutex_lock(&emu_lock);
    switch (param) {
    case hipFileParamPropertiesUsePollMode:
        set_bit(&emu_props.nvfs.driver_control_flags, hipFileUsePollMode, value);
        break;
    case hipFileParamPropertiesAllowCompatMode:
        set_bit(&emu_props.nvfs.driver_control_flags, hipFileAllowCompatMode, value);
        break;
    default: bool_params[param] = value; break;
    }
    pthread_mutex_unlock(&emu_lock);
    return emu_err(hipFileSuccess);
}

/* The value must fit with its terminating NUL in len bytes; otherwise the
 * call fails with InvalidValue and leaves desc_str untouched. */
EMU_EXPORT hipFileError_t hipFileGetParameterString(hipFileStringConfigParameter_t param,
                                                    char *desc_str, int len)
{
    if (!string_valid((int)param) || desc_str == NULL || len <= 0)
        return emu_err(hipFileInvalidValue);
    hipFileOpError_t e = hipFileSuccess;
    pthread_mutex_lock(&emu_lock);
    size_t n = strlen(string_params[param]);
    if (n >= (size_t)len)
        e = hipFileInvalidValue;
    else
        memcpy(desc_str, string_params[param], n + 1);
    pthread_mutex_unlock(&emu_lock);
    return emu_err(e);
}

EMU_EXPORT hipFileError_t hipFileSetParameterString(hipFileStringConfigParameter_t param,
                                                    const char *desc_str)
{
    if (!string_valid((int)param) || desc_str == NULL)
        return emu_err(hipFileInvalidValue);
    size_t n = strnlen(desc_str, EMU_STRING_MAX);
    if (n >= EMU_STRING_MAX)
        return emu_err(hipFileInvalidValue);
    pthread_mutex_lock(&emu_lock);
    memcpy(string_params[param], desc_str, n + 1);
    pthread_mutex_unlock(&emu_lock);
    return emu_err(hipFileSuccess);
}

EMU_EXPORT hipFileError_t hipFileGetVersion(unsigned *major, unsigned *minor, unsigned *patch)
{
    /* NULL outputs are skipped, as AMD's library does. */
    if (major != NULL)
        *major = HIPFILE_VERSION_MAJOR;
    if (minor != NULL)
        *minor = HIPFILE_VERSION_MINOR;
    if (patch != NULL)
        *patch = HIPFILE_VERSION_PATCH;
    return emu_err(hipFileSuccess);
}

EMU_EXPORT const char *hipFileGetOpErrorString(hipFileOpError_t status)
{
    switch ((int)status) {
    case hipFileSuccess: return "success";
    case hipFileDriverNotInitialized: return "driver is not initialized";
    case hipFileDriverInvalidProps: return "invalid driver properties";
    case hipFileDriverUnsupportedLimit: return "driver limit not supported";
    case hipFileDriverVersionMismatch: return "driver version mismatch";
    case hipFileDriverVersionReadError: return "driver version could not be read";
    case hipFileDriverClosing: return "driver is shutting down";
    case hipFilePlatformNotSupported: return "platform not supported";
    case hipFileIONotSupported: return "I/O not supported for this file";
    case hipFileDeviceNotSupported: return "device not supported";
    case hipFileDriverError: return "GPU I/O driver error";
    case hipFileHipDriverError: return "HIP runtime error (see hip_drv_err)";
    case hipFileHipPointerInvalid: return "invalid device pointer";
    case hipFileHipMemoryTypeInvalid: return "memory is not device memory";
    case hipFileHipPointerRangeError: return "range lies outside the device allocation";
    case hipFileHipContextMismatch: return "memory belongs to another device";
    case hipFileInvalidMappingSize: return "invalid mapping size";
    case hipFileInvalidMappingRange: return "invalid mapping range";
    case hipFileInvalidFileType: return "file type not supported";
    case hipFileInvalidFileOpenFlag: return "file opened with unsupported flags";
    case hipFileDIONotSet: return "file not opened with O_DIRECT and compat mode is off";
    case hipFileInvalidValue: return "invalid argument";
    case hipFileMemoryAlreadyRegistered: return "memory already registered";
    case hipFileMemoryNotRegistered: return "memory not registered";
    case hipFilePermissionDenied: return "permission denied";
    case hipFileDriverAlreadyOpen: return "driver is already open";
    case hipFileHandleNotRegistered: return "file handle not registered";
    case hipFileHandleAlreadyRegistered: return "file handle already registered";
    case hipFileDeviceNotFound: return "device not found";
    case hipFileInternalError: return "internal error";
    case hipFileGetNewFDFailed: return "could not open a new file descriptor";
    case hipFileDriverSetupError: return "driver setup error";
    case hipFileIODisabled: return "GPU direct I/O disabled by configuration";
    case hipFileBatchSubmitFailed: return "batch submission failed";
    case hipFileGPUMemoryPinningFailed: return "GPU memory pinning failed";
    case hipFileBatchFull: return "batch is full";
    case hipFileAsyncNotSupported: return "asynchronous I/O not supported";
    default: return "unknown error";
    }
}
