/* The types, numbers and layouts of the hipFile C ABI (header version
 * 0.2.0), shared by both test platforms' libhipfile.so. Layouts are those of
 * Linux x86-64 (LP64); the static assertions below pin every size and offset
 * that crosses the ABI. The function declarations and what only one platform
 * needs stay in that platform's hipfile_abi.h. Private to the test platforms. */
#ifndef HIPFILE_PLATFORMS_HIPFILE_ABI_TYPES_H
#define HIPFILE_PLATFORMS_HIPFILE_ABI_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hip_abi_types.h"

#define HIPFILE_BASE_ERR 5000

typedef off_t hoff_t;

typedef enum hipFileOpError {
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
    hipFileIOMaxError = 5039
} hipFileOpError_t;

typedef struct hipFileError {
    hipFileOpError_t err;
    hipError_t hip_drv_err; /* meaningful when err == hipFileHipDriverError */
} hipFileError_t;

/* Driver properties. */
typedef enum hipFileDriverStatusFlags {
    hipFileLustreSupported = 0,
    hipFileWekaFSSupported = 1,
    hipFileNFSSupported = 2,
    hipFileGPFSSupported = 3,
    hipFileNVMeSupported = 4,
    hipFileNVMeoFSupported = 5,
    hipFileSCSISupported = 6,
    hipFileScaleFluxCSDSupported = 7,
    hipFileNVMeshSupported = 8,
    hipFileBeeGFSSupported = 9,
    hipFileNVMeP2PSupported = 11,
    hipFileScatefsSupported = 12
} hipFileDriverStatusFlags_t;

typedef enum hipFileDriverControlFlags {
    hipFileUsePollMode = 0,
    hipFileAllowCompatMode = 1
} hipFileDriverControlFlags_t;

typedef enum hipFileFeatureFlags {
    hipFileDynRoutingSupported = 0,
    hipFileBatchIOSupported = 1,
    hipFileStreamsSupported = 2,
    hipFileParallelIOSupported = 3
} hipFileFeatureFlags_t;

typedef struct hipFileDriverProps {
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

/* Configuration parameters. */
typedef enum hipFileSizeTConfigParameter {
    hipFileParamProfileStats = 0,
    hipFileParamExecutionMaxIOQueueDepth,
    hipFileParamExecutionMaxIOThreads,
    hipFileParamExecutionMinIOThresholdSizeKB,
    hipFileParamExecutionMaxRequestParallelism,
    hipFileParamPropertiesMaxDirectIOSizeKB,
    hipFileParamPropertiesMaxDeviceCacheSizeKB,
    hipFileParamPropertiesPerBufferCacheSizeKB,
    hipFileParamPropertiesMaxDevicePinnedMemSizeKB,
    hipFileParamPropertiesIOBatchsize,
    hipFileParamPollthresholdSizeKB,
    hipFileParamPropertiesBatchIOTimeoutMs,
    HIPFILE_PARAM_SIZE_T_COUNT /* count, not part of the ABI */
} hipFileSizeTConfigParameter_t;

typedef enum hipFileBoolConfigParameter {
    hipFileParamPropertiesUsePollMode = 0,
    hipFileParamPropertiesAllowCompatMode,
    hipFileParamForceCompatMode,
    hipFileParamFsMiscApiCheckAggressive,
    hipFileParamExecutionParallelIO,
    hipFileParamProfileNvtx,
    hipFileParamPropertiesAllowSystemMemory,
    hipFileParamUsePcip2pdma,
    hipFileParamPreferIOUring,
    hipFileParamForceOdirectMode,
    hipFileParamSkipTopologyDetection,
    hipFileParamStreamMemopsBypass,
    HIPFILE_PARAM_BOOL_COUNT /* count, not part of the ABI */
} hipFileBoolConfigParameter_t;

typedef enum hipFileStringConfigParameter {
    hipFileParamLoggingLevel = 0,
    hipFileParamEnvLogfilePath,
    hipFileParamLogDir,
    HIPFILE_PARAM_STRING_COUNT /* count, not part of the ABI */
} hipFileStringConfigParameter_t;

/* File handles. */
typedef enum hipFileFileHandleType {
    hipFileHandleTypeOpaqueFD = 1,
    hipFileHandleTypeOpaqueWin32 = 2,
    hipFileHandleTypeUserspaceFS = 3
} hipFileFileHandleType_t;

typedef struct hipFileFSOps hipFileFSOps_t; /* never dereferenced here */

typedef struct hipFileDescr {
    hipFileFileHandleType_t type;
    union {
        int fd;
        void *hFile;
    } handle;
    const hipFileFSOps_t *fs_ops;
} hipFileDescr_t;

typedef void *hipFileHandle_t;

/* Stream registration flags. */
#define HIPFILE_STREAM_FIXED_BUF_OFFSET 1u
#define HIPFILE_STREAM_FIXED_FILE_OFFSET 2u
#define HIPFILE_STREAM_FIXED_FILE_SIZE 4u
#define HIPFILE_STREAM_PAGE_ALIGNED_INPUTS 8u
#define HIPFILE_STREAM_FLAGS_MASK 0xfu

/* Batch I/O. */
typedef enum hipFileOpcode { hipFileBatchRead = 0, hipFileBatchWrite = 1 } hipFileOpcode_t;

typedef enum hipFileStatus {
    hipFileWaiting = 1 << 0,
    hipFilePending = 1 << 1,
    hipFileInvalid = 1 << 2,
    hipFileCanceled = 1 << 3,
    hipFileComplete = 1 << 4,
    hipFileTimeout = 1 << 5,
    hipFileFailed = 1 << 6
} hipFileStatus_t;

typedef enum hipFileBatchMode { hipFileBatch = 1 } hipFileBatchMode_t;

typedef struct hipFileIOParams {
    hipFileBatchMode_t mode;
    union {
        struct {
            void *devPtr_base;
            int64_t file_offset;
            int64_t devPtr_offset;
            size_t size;
        } batch;
    } u;
    hipFileHandle_t fh;
    hipFileOpcode_t opcode;
    void *cookie;
} hipFileIOParams_t;

typedef struct hipFileIOEvents {
    void *cookie;
    hipFileStatus_t status;
    size_t ret;
} hipFileIOEvents_t;

typedef void *hipFileBatchHandle_t;

/* Layout checks (Linux x86-64). */
_Static_assert(sizeof(hoff_t) == 8, "hoff_t is 64-bit");
_Static_assert(sizeof(hipFileOpError_t) == 4, "C enums are 4 bytes");
_Static_assert(sizeof(hipFileError_t) == 8, "hipFileError_t is 8 bytes");
_Static_assert(offsetof(hipFileError_t, hip_drv_err) == 4, "hipFileError_t layout");
_Static_assert(sizeof(hipFileDescr_t) == 24, "hipFileDescr_t is 24 bytes");
_Static_assert(offsetof(hipFileDescr_t, handle) == 8, "hipFileDescr_t.handle");
_Static_assert(offsetof(hipFileDescr_t, fs_ops) == 16, "hipFileDescr_t.fs_ops");
_Static_assert(sizeof(hipFileIOParams_t) == 64, "hipFileIOParams_t is 64 bytes");
_Static_assert(offsetof(hipFileIOParams_t, u) == 8, "hipFileIOParams_t.u");
_Static_assert(offsetof(hipFileIOParams_t, u.batch.file_offset) == 16, "file_offset");
_Static_assert(offsetof(hipFileIOParams_t, u.batch.devPtr_offset) == 24, "devPtr_offset");
_Static_assert(offsetof(hipFileIOParams_t, u.batch.size) == 32, "size");
_Static_assert(offsetof(hipFileIOParams_t, fh) == 40, "hipFileIOParams_t.fh");
_Static_assert(offsetof(hipFileIOParams_t, opcode) == 48, "hipFileIOParams_t.opcode");
_Static_assert(offsetof(hipFileIOParams_t, cookie) == 56, "hipFileIOParams_t.cookie");
_Static_assert(sizeof(hipFileIOEvents_t) == 24, "hipFileIOEvents_t is 24 bytes");
_Static_assert(offsetof(hipFileIOEvents_t, status) == 8, "hipFileIOEvents_t.status");
_Static_assert(offsetof(hipFileIOEvents_t, ret) == 16, "hipFileIOEvents_t.ret");
_Static_assert(offsetof(hipFileDriverProps_t, nvfs.poll_thresh_size) == 8, "props");
_Static_assert(offsetof(hipFileDriverProps_t, nvfs.driver_status_flags) == 24, "props");
_Static_assert(offsetof(hipFileDriverProps_t, feature_flags) == 32, "props");
_Static_assert(offsetof(hipFileDriverProps_t, max_device_cache_size) == 40, "props");
_Static_assert(offsetof(hipFileDriverProps_t, max_device_pinned_mem_size) == 56, "props");
_Static_assert(offsetof(hipFileDriverProps_t, max_batch_io_count) == 64, "props");
_Static_assert(sizeof(hipFileDriverProps_t) == 72, "hipFileDriverProps_t is 72 bytes");

#endif
