/* The hipFile C ABI as this platform implements it (names, numbers and
 * layouts from the project's ABI notes). Private to the platform. */
#ifndef HIPFILE_CUDA_HIPFILE_ABI_H
#define HIPFILE_CUDA_HIPFILE_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hip_abi.h"

typedef int64_t hoff_t;

/* hipFileOpError_t */
enum {
    hipFileSuccess = 0,
    hipFileDriverNotInitialized = 5001,
    hipFileDriverInvalidProps = 5002,
    hipFileDriverUnsupportedLimit = 5003,
    hipFileDriverVersionMismatch = 5004,
    hipFileDriverVersionReadError = 5005,
    hipFileDriverClosing = 5006,
    hipFilePlatformNotSupported = 5007,
    hipFileIONotSupported = 5008,
    hipFileDeviceNotSupported = 5009,
    hipFileDriverError = 5010,
    hipFileHipDriverError = 5011,
    hipFileHipPointerInvalid = 5012,
    hipFileHipMemoryTypeInvalid = 5013,
    hipFileHipPointerRangeError = 5014,
    hipFileHipContextMismatch = 5015,
    hipFileInvalidMappingSize = 5016,
    hipFileInvalidMappingRange = 5017,
    hipFileInvalidFileType = 5018,
    hipFileInvalidFileOpenFlag = 5019,
    hipFileDIONotSet = 5020,
    hipFileInvalidValue = 5022,
    hipFileMemoryAlreadyRegistered = 5023,
    hipFileMemoryNotRegistered = 5024,
    hipFilePermissionDenied = 5025,
    hipFileDriverAlreadyOpen = 5026,
    hipFileHandleNotRegistered = 5027,
    hipFileHandleAlreadyRegistered = 5028,
    hipFileDeviceNotFound = 5029,
    hipFileInternalError = 5030,
    hipFileGetNewFDFailed = 5031,
    hipFileDriverSetupError = 5033,
    hipFileIODisabled = 5034,
    hipFileBatchSubmitFailed = 5035,
    hipFileGPUMemoryPinningFailed = 5036,
    hipFileBatchFull = 5037,
    hipFileAsyncNotSupported = 5038,
    hipFileIOMaxError = 5039,
};

typedef struct hipFileError_t {
    int err;         /* hipFileOpError_t */
    hipError_t hip_drv_err; /* meaningful when err == hipFileHipDriverError */
} hipFileError_t;

typedef void *hipFileHandle_t;
typedef void *hipFileBatchHandle_t;

/* hipFileFileHandleType_t */
enum { hipFileHandleTypeOpaqueFD = 1, hipFileHandleTypeOpaqueWin32 = 2, hipFileHandleTypeUserspaceFS = 3 };

typedef struct hipFileDescr_t {
    int type;
    union {
        int fd;
        void *hFile;
    } handle;
    const void *fs_ops;
} hipFileDescr_t;

typedef struct hipFileDriverProps_t {
    struct {
        unsigned major_version;
        unsigned minor_version;
        uint64_t poll_thresh_size;
        uint64_t max_direct_io_size;
        unsigned driver_status_flags;
        unsigned driver_control_flags;
    } nvfs;
    unsigned feature_flags;
    uint64_t max_device_cache_size;
    uint64_t per_buffer_cache_size;
    uint64_t max_device_pinned_mem_size;
    unsigned max_batch_io_count;
    unsigned max_batch_io_timeout_msecs;
} hipFileDriverProps_t;

/* Bits of hipFileDriverProps_t that hipFile defines. */
#define HIPFILE_STATUS_FLAGS_KNOWN 0x1bffu /* bits 0..9, 11, 12 */
#define HIPFILE_CONTROL_FLAGS_KNOWN 0x3u   /* poll mode, compat mode */
#define HIPFILE_FEATURE_FLAGS_KNOWN 0xfu   /* dyn routing, batch, streams, parallel */

/* Stream registration flags. */
#define HIPFILE_STREAM_FLAGS_MASK 0xfu

/* hipFileBatchMode_t, hipFileOpcode_t, hipFileStatus_t */
enum { hipFileBatch = 1 };
enum { hipFileBatchRead = 0, hipFileBatchWrite = 1 };
enum {
    hipFileWaiting = 1,
    hipFilePending = 2,
    hipFileInvalid = 4,
    hipFileCanceled = 8,
    hipFileComplete = 16,
    hipFileTimeout = 32,
    hipFileFailed = 64,
};

typedef struct hipFileIOParams_t {
    int mode;
    union {
        struct {
            void *devPtr_base;
            int64_t file_offset;
            int64_t devPtr_offset;
            size_t size;
        } batch;
    } u;
    hipFileHandle_t fh;
    int opcode;
    void *cookie;
} hipFileIOParams_t;

typedef struct hipFileIOEvents_t {
    void *cookie;
    int status;
    size_t ret;
} hipFileIOEvents_t;

/* Config parameter enums: SizeT 0..11, Bool 0..11, String 0..2. */
#define HIPFILE_PARAM_SIZE_T_COUNT 12
#define HIPFILE_PARAM_BOOL_COUNT 12
#define HIPFILE_PARAM_STRING_COUNT 3

_Static_assert(sizeof(hipFileError_t) == 8, "hipFileError_t layout");
_Static_assert(sizeof(hipFileDescr_t) == 24, "hipFileDescr_t layout");
_Static_assert(sizeof(hipFileIOParams_t) == 64, "hipFileIOParams_t layout");
_Static_assert(sizeof(hipFileIOEvents_t) == 24, "hipFileIOEvents_t layout");
_Static_assert(sizeof(hipFileDriverProps_t) == 72, "hipFileDriverProps_t layout");

#endif
