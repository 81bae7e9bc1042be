# cython: language_level=3
# Declarations of the hipFile C ABI (libhipfile.so.0), written from the ABI
# facts: Linux x86-64, LP64, C enums are 4-byte ints, hoff_t is off_t.
# Nothing is linked: every function is resolved with dlsym at run time, so
# this file declares function pointer types rather than extern functions:
# ``<name>_t`` for the function ``<name>``, with its parameter names (a name
# ending in ``_out`` is an output). tools/gen_bindings.py generates the 1:1
# layer (_bindings.pxd/.pyx/.pyi) from these declarations.

from libc.stdint cimport int64_t, uint64_t
from posix.types cimport off_t
from posix.time cimport timespec

cdef extern from *:
    ctypedef long ssize_t

ctypedef off_t hoff_t
ctypedef int hipFileOpError_t
ctypedef int hipError_t
ctypedef void *hipStream_t
ctypedef void *hipFileHandle_t
ctypedef void *hipFileBatchHandle_t

ctypedef struct hipFileError_t:
    hipFileOpError_t err
    hipError_t hip_drv_err

ctypedef union hipFileDescrHandle:
    int fd
    void *hFile

ctypedef struct hipFileDescr_t:
    int type
    hipFileDescrHandle handle
    const void *fs_ops

ctypedef struct hipFileNvfsProps:
    unsigned major_version
    unsigned minor_version
    uint64_t poll_thresh_size
    uint64_t max_direct_io_size
    unsigned driver_status_flags
    unsigned driver_control_flags

ctypedef struct hipFileDriverProps_t:
    hipFileNvfsProps nvfs
    unsigned feature_flags
    uint64_t max_device_cache_size
    uint64_t per_buffer_cache_size
    uint64_t max_device_pinned_mem_size
    unsigned max_batch_io_count
    unsigned max_batch_io_timeout_msecs

ctypedef struct hipFileBatchParams:
    void *devPtr_base
    int64_t file_offset
    int64_t devPtr_offset
    size_t size

ctypedef union hipFileIOParamsUnion:
    hipFileBatchParams batch

ctypedef struct hipFileIOParams_t:
    int mode
    hipFileIOParamsUnion u
    hipFileHandle_t fh
    int opcode
    void *cookie

ctypedef struct hipFileIOEvents_t:
    void *cookie
    int status
    size_t ret

# Functions of hipfile.h
ctypedef hipFileError_t (*hipFileGetVersion_t)(unsigned *major_out, unsigned *minor_out, unsigned *patch_out) noexcept nogil
ctypedef const char *(*hipFileGetOpErrorString_t)(hipFileOpError_t status) noexcept nogil
ctypedef hipFileError_t (*hipFileDriverOpen_t)() noexcept nogil
ctypedef hipFileError_t (*hipFileDriverClose_t)() noexcept nogil
ctypedef int64_t (*hipFileUseCount_t)() noexcept nogil
ctypedef hipFileError_t (*hipFileDriverGetProperties_t)(hipFileDriverProps_t *props) noexcept nogil
ctypedef hipFileError_t (*hipFileDriverSetPollMode_t)(bint poll, size_t poll_threshold_size) noexcept nogil
ctypedef hipFileError_t (*hipFileDriverSetMaxDirectIOSize_t)(size_t kib) noexcept nogil
ctypedef hipFileError_t (*hipFileDriverSetMaxCacheSize_t)(size_t kib) noexcept nogil
ctypedef hipFileError_t (*hipFileDriverSetMaxPinnedMemSize_t)(size_t kib) noexcept nogil
ctypedef hipFileError_t (*hipFileGetParameterSizeT_t)(int param, size_t *value_out) noexcept nogil
ctypedef hipFileError_t (*hipFileGetParameterBool_t)(int param, bint *value_out) noexcept nogil
ctypedef hipFileError_t (*hipFileGetParameterString_t)(int param, char *value, int capacity) noexcept nogil
ctypedef hipFileError_t (*hipFileSetParameterSizeT_t)(int param, size_t value) noexcept nogil
ctypedef hipFileError_t (*hipFileSetParameterBool_t)(int param, bint value) noexcept nogil
ctypedef hipFileError_t (*hipFileSetParameterString_t)(int param, const char *value) noexcept nogil
ctypedef hipFileError_t (*hipFileHandleRegister_t)(hipFileHandle_t *handle_out, hipFileDescr_t *descr) noexcept nogil
ctypedef void (*hipFileHandleDeregister_t)(hipFileHandle_t handle) noexcept nogil
ctypedef hipFileError_t (*hipFileBufRegister_t)(const void *base, size_t length, int flags) noexcept nogil
ctypedef hipFileError_t (*hipFileBufDeregister_t)(const void *base) noexcept nogil
ctypedef ssize_t (*hipFileRead_t)(hipFileHandle_t handle, void *base, size_t size, hoff_t file_offset, hoff_t buffer_offset) noexcept nogil
ctypedef ssize_t (*hipFileWrite_t)(hipFileHandle_t handle, void *base, size_t size, hoff_t file_offset, hoff_t buffer_offset) noexcept nogil
ctypedef hipFileError_t (*hipFileReadAsync_t)(hipFileHandle_t handle, void *base, size_t *size_p, hoff_t *file_offset_p, hoff_t *buffer_offset_p, ssize_t *bytes_read_p, hipStream_t stream) noexcept nogil
ctypedef hipFileError_t (*hipFileWriteAsync_t)(hipFileHandle_t handle, void *base, size_t *size_p, hoff_t *file_offset_p, hoff_t *buffer_offset_p, ssize_t *bytes_written_p, hipStream_t stream) noexcept nogil
ctypedef hipFileError_t (*hipFileStreamRegister_t)(hipStream_t stream, unsigned flags) noexcept nogil
ctypedef hipFileError_t (*hipFileStreamDeregister_t)(hipStream_t stream) noexcept nogil
ctypedef hipFileError_t (*hipFileBatchIOSetUp_t)(hipFileBatchHandle_t *batch_out, unsigned max_nr) noexcept nogil
ctypedef hipFileError_t (*hipFileBatchIOSubmit_t)(hipFileBatchHandle_t batch, unsigned nr, hipFileIOParams_t *params, unsigned flags) noexcept nogil
ctypedef hipFileError_t (*hipFileBatchIOGetStatus_t)(hipFileBatchHandle_t batch, unsigned min_nr, unsigned *nr, hipFileIOEvents_t *events, timespec *timeout) noexcept nogil
ctypedef hipFileError_t (*hipFileBatchIOCancel_t)(hipFileBatchHandle_t batch) noexcept nogil
ctypedef void (*hipFileBatchIODestroy_t)(hipFileBatchHandle_t batch) noexcept nogil

# Functions of hipfile-stats.h (cross-process statistics). Optional: a
# library without them raises HipFileSymbolNotFound when one is called.
ctypedef int hipFileStatsError_t
ctypedef void *hipFileStatsContext_p
ctypedef hipFileStatsError_t (*hipFileStatsCreateContext_t)(hipFileStatsContext_p *context_out, int pid) noexcept nogil
ctypedef void (*hipFileStatsCloseContext_t)(hipFileStatsContext_p context) noexcept nogil
ctypedef hipFileStatsError_t (*hipFileStatsConnectToTargetProcess_t)(hipFileStatsContext_p context) noexcept nogil
ctypedef hipFileStatsError_t (*hipFileStatsPollTargetProcess_t)(const void *context, bint block) noexcept nogil
ctypedef hipFileStatsError_t (*hipFileStatsGenerateReport_t)(const void *context, int fd) noexcept nogil
