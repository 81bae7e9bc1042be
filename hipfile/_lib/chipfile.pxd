# cython: language_level=3
# Declarations of the hipFile C ABI (libhipfile.so.0), written from the ABI
# facts: Linux x86-64, LP64, C enums are 4-byte ints, hoff_t is off_t.
# Nothing is linked: every function is resolved with dlsym at run time, so
# this file declares function pointer types rather than extern functions.

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

# Function pointer types, one per ABI function.
ctypedef hipFileError_t (*fn_void_t)() noexcept nogil
ctypedef int64_t (*fn_use_count_t)() noexcept nogil
ctypedef hipFileError_t (*fn_get_props_t)(hipFileDriverProps_t *) noexcept nogil
ctypedef hipFileError_t (*fn_set_poll_t)(bint, size_t) noexcept nogil
ctypedef hipFileError_t (*fn_set_size_t)(size_t) noexcept nogil
ctypedef hipFileError_t (*fn_get_param_size_t)(int, size_t *) noexcept nogil
ctypedef hipFileError_t (*fn_get_param_bool_t)(int, bint *) noexcept nogil
ctypedef hipFileError_t (*fn_get_param_str_t)(int, char *, int) noexcept nogil
ctypedef hipFileError_t (*fn_set_param_size_t)(int, size_t) noexcept nogil
ctypedef hipFileError_t (*fn_set_param_bool_t)(int, bint) noexcept nogil
ctypedef hipFileError_t (*fn_set_param_str_t)(int, const char *) noexcept nogil
ctypedef hipFileError_t (*fn_handle_register_t)(hipFileHandle_t *, hipFileDescr_t *) noexcept nogil
ctypedef void (*fn_handle_deregister_t)(hipFileHandle_t) noexcept nogil
ctypedef hipFileError_t (*fn_buf_register_t)(const void *, size_t, int) noexcept nogil
ctypedef hipFileError_t (*fn_buf_deregister_t)(const void *) noexcept nogil
ctypedef ssize_t (*fn_io_t)(hipFileHandle_t, void *, size_t, hoff_t, hoff_t) noexcept nogil
ctypedef hipFileError_t (*fn_io_async_t)(hipFileHandle_t, void *, size_t *, hoff_t *,
                                         hoff_t *, ssize_t *, hipStream_t) noexcept nogil
ctypedef hipFileError_t (*fn_stream_register_t)(hipStream_t, unsigned) noexcept nogil
ctypedef hipFileError_t (*fn_stream_deregister_t)(hipStream_t) noexcept nogil
ctypedef hipFileError_t (*fn_batch_setup_t)(hipFileBatchHandle_t *, unsigned) noexcept nogil
ctypedef hipFileError_t (*fn_batch_submit_t)(hipFileBatchHandle_t, unsigned,
                                             hipFileIOParams_t *, unsigned) noexcept nogil
ctypedef hipFileError_t (*fn_batch_status_t)(hipFileBatchHandle_t, unsigned, unsigned *,
                                             hipFileIOEvents_t *, timespec *) noexcept nogil
ctypedef hipFileError_t (*fn_batch_cancel_t)(hipFileBatchHandle_t) noexcept nogil
ctypedef void (*fn_batch_destroy_t)(hipFileBatchHandle_t) noexcept nogil
ctypedef hipFileError_t (*fn_get_version_t)(unsigned *, unsigned *, unsigned *) noexcept nogil
ctypedef const char *(*fn_error_string_t)(hipFileOpError_t) noexcept nogil

# Cross-process statistics API (hipfile-stats.h). Optional: resolved on first
# use; a library without it raises HipFileSymbolNotFound.
ctypedef int hipFileStatsError_t
ctypedef void *hipFileStatsContext_p
ctypedef hipFileStatsError_t (*fn_stats_create_t)(hipFileStatsContext_p *, int) noexcept nogil
ctypedef void (*fn_stats_close_t)(hipFileStatsContext_p) noexcept nogil
ctypedef hipFileStatsError_t (*fn_stats_connect_t)(hipFileStatsContext_p) noexcept nogil
ctypedef hipFileStatsError_t (*fn_stats_poll_t)(const void *, bint) noexcept nogil
ctypedef hipFileStatsError_t (*fn_stats_report_t)(const void *, int) noexcept nogil
