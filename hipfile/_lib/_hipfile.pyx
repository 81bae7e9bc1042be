# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: embedsignature=True
"""Private layer over the hipFile C ABI: 1:1 wrappers, and the C cores of
the public objects.

libhipfile is found and ``dlopen``-ed on first use (``HIPFILE_LIBRARY``, then
``$ROCM_PATH/lib``, ``/opt/rocm/lib``, then the system loader), and all its
symbols are bound then, under a lock (a function the library lacks raises
when called). Every C call runs with the GIL released and ``errno`` is
captured inside the call. Failures raise the exceptions of
:mod:`hipfile.errors`. Pointers and handles are passed as integers.
"""

cimport cython
cimport libc.errno
from libc.stdint cimport int64_t, uint64_t, uintptr_t
from libc.string cimport memset
from libc.stdlib cimport malloc, calloc, free, realloc
from posix.dlfcn cimport dlopen, dlsym, dlerror, RTLD_NOW, RTLD_LOCAL
from posix.time cimport timespec

from hipfile._lib.chipfile cimport *

import os
import threading
from operator import index as _operator_index

from cpython.ref cimport PyObject
import time as _time

from hipfile.enums import OpError
from hipfile.errors import (
    ClosedFileError,
    HandleNotRegisteredError,
    HipFileLibraryNotFound,
    HipFileSymbolNotFound,
    HipRuntimeError,
    ForkedProcessError,
    InFlightError,
    InvalidValueError,
    raise_result,
    raise_status,
)

#: One hipFileRead/hipFileWrite call moves at most this many bytes.
MAX_IO_CHUNK = 0x7ffff000
SIZEOF_IO_PARAMS = sizeof(hipFileIOParams_t)
SIZEOF_IO_EVENTS = sizeof(hipFileIOEvents_t)
SIZEOF_DESCR = sizeof(hipFileDescr_t)
SIZEOF_DRIVER_PROPS = sizeof(hipFileDriverProps_t)

include "_loader.pxi"


# The library's functions, bound all at once when the library is opened
# (_bind_symbols); one the library lacks stays NULL, and calling its wrapper
# raises HipFileSymbolNotFound (_need). The statistics functions
# (hipfile-stats.h) are optional.
cdef fn_get_version_t _p_get_version = NULL
cdef fn_error_string_t _p_error_string = NULL
cdef fn_void_t _p_driver_open = NULL
cdef fn_void_t _p_driver_close = NULL
cdef fn_use_count_t _p_use_count = NULL
cdef fn_get_props_t _p_get_props = NULL
cdef fn_set_poll_t _p_set_poll = NULL
cdef fn_set_size_t _p_set_max_dio = NULL
cdef fn_set_size_t _p_set_max_cache = NULL
cdef fn_set_size_t _p_set_max_pinned = NULL
cdef fn_get_param_size_t _p_get_param_size = NULL
cdef fn_get_param_bool_t _p_get_param_bool = NULL
cdef fn_get_param_str_t _p_get_param_str = NULL
cdef fn_set_param_size_t _p_set_param_size = NULL
cdef fn_set_param_bool_t _p_set_param_bool = NULL
cdef fn_set_param_str_t _p_set_param_str = NULL
cdef fn_handle_register_t _p_handle_register = NULL
cdef fn_handle_deregister_t _p_handle_deregister = NULL
cdef fn_buf_register_t _p_buf_register = NULL
cdef fn_buf_deregister_t _p_buf_deregister = NULL
cdef fn_io_t _p_read = NULL
cdef fn_io_t _p_write = NULL
cdef fn_io_async_t _p_read_async = NULL
cdef fn_io_async_t _p_write_async = NULL
cdef fn_stream_register_t _p_stream_register = NULL
cdef fn_stream_deregister_t _p_stream_deregister = NULL
cdef fn_batch_setup_t _p_batch_setup = NULL
cdef fn_batch_submit_t _p_batch_submit = NULL
cdef fn_batch_status_t _p_batch_status = NULL
cdef fn_batch_cancel_t _p_batch_cancel = NULL
cdef fn_batch_destroy_t _p_batch_destroy = NULL
cdef fn_stats_create_t _p_stats_create = NULL
cdef fn_stats_close_t _p_stats_close = NULL
cdef fn_stats_connect_t _p_stats_connect = NULL
cdef fn_stats_poll_t _p_stats_poll = NULL
cdef fn_stats_report_t _p_stats_report = NULL


cdef void _bind_symbols(void *lib) noexcept:
    """Bind every pointer above from ``lib`` (called once, under ``_lock``)."""
    global _p_get_version, _p_error_string, _p_driver_open, _p_driver_close
    global _p_use_count, _p_get_props, _p_set_poll, _p_set_max_dio, _p_set_max_cache
    global _p_set_max_pinned, _p_get_param_size, _p_get_param_bool, _p_get_param_str
    global _p_set_param_size, _p_set_param_bool, _p_set_param_str, _p_handle_register
    global _p_handle_deregister, _p_buf_register, _p_buf_deregister, _p_read, _p_write
    global _p_read_async, _p_write_async, _p_stream_register, _p_stream_deregister
    global _p_batch_setup, _p_batch_submit, _p_batch_status, _p_batch_cancel
    global _p_batch_destroy, _p_stats_create, _p_stats_close, _p_stats_connect
    global _p_stats_poll, _p_stats_report
    _p_get_version = <fn_get_version_t>dlsym(lib, b"hipFileGetVersion")
    _p_error_string = <fn_error_string_t>dlsym(lib, b"hipFileGetOpErrorString")
    _p_driver_open = <fn_void_t>dlsym(lib, b"hipFileDriverOpen")
    _p_driver_close = <fn_void_t>dlsym(lib, b"hipFileDriverClose")
    _p_use_count = <fn_use_count_t>dlsym(lib, b"hipFileUseCount")
    _p_get_props = <fn_get_props_t>dlsym(lib, b"hipFileDriverGetProperties")
    _p_set_poll = <fn_set_poll_t>dlsym(lib, b"hipFileDriverSetPollMode")
    _p_set_max_dio = <fn_set_size_t>dlsym(lib, b"hipFileDriverSetMaxDirectIOSize")
    _p_set_max_cache = <fn_set_size_t>dlsym(lib, b"hipFileDriverSetMaxCacheSize")
    _p_set_max_pinned = <fn_set_size_t>dlsym(lib, b"hipFileDriverSetMaxPinnedMemSize")
    _p_get_param_size = <fn_get_param_size_t>dlsym(lib, b"hipFileGetParameterSizeT")
    _p_get_param_bool = <fn_get_param_bool_t>dlsym(lib, b"hipFileGetParameterBool")
    _p_get_param_str = <fn_get_param_str_t>dlsym(lib, b"hipFileGetParameterString")
    _p_set_param_size = <fn_set_param_size_t>dlsym(lib, b"hipFileSetParameterSizeT")
    _p_set_param_bool = <fn_set_param_bool_t>dlsym(lib, b"hipFileSetParameterBool")
    _p_set_param_str = <fn_set_param_str_t>dlsym(lib, b"hipFileSetParameterString")
    _p_handle_register = <fn_handle_register_t>dlsym(lib, b"hipFileHandleRegister")
    _p_handle_deregister = <fn_handle_deregister_t>dlsym(lib, b"hipFileHandleDeregister")
    _p_buf_register = <fn_buf_register_t>dlsym(lib, b"hipFileBufRegister")
    _p_buf_deregister = <fn_buf_deregister_t>dlsym(lib, b"hipFileBufDeregister")
    _p_read = <fn_io_t>dlsym(lib, b"hipFileRead")
    _p_write = <fn_io_t>dlsym(lib, b"hipFileWrite")
    _p_read_async = <fn_io_async_t>dlsym(lib, b"hipFileReadAsync")
    _p_write_async = <fn_io_async_t>dlsym(lib, b"hipFileWriteAsync")
    _p_stream_register = <fn_stream_register_t>dlsym(lib, b"hipFileStreamRegister")
    _p_stream_deregister = <fn_stream_deregister_t>dlsym(lib, b"hipFileStreamDeregister")
    _p_batch_setup = <fn_batch_setup_t>dlsym(lib, b"hipFileBatchIOSetUp")
    _p_batch_submit = <fn_batch_submit_t>dlsym(lib, b"hipFileBatchIOSubmit")
    _p_batch_status = <fn_batch_status_t>dlsym(lib, b"hipFileBatchIOGetStatus")
    _p_batch_cancel = <fn_batch_cancel_t>dlsym(lib, b"hipFileBatchIOCancel")
    _p_batch_destroy = <fn_batch_destroy_t>dlsym(lib, b"hipFileBatchIODestroy")
    _p_stats_create = <fn_stats_create_t>dlsym(lib, b"hipFileStatsCreateContext")
    _p_stats_close = <fn_stats_close_t>dlsym(lib, b"hipFileStatsCloseContext")
    _p_stats_connect = <fn_stats_connect_t>dlsym(lib, b"hipFileStatsConnectToTargetProcess")
    _p_stats_poll = <fn_stats_poll_t>dlsym(lib, b"hipFileStatsPollTargetProcess")
    _p_stats_report = <fn_stats_report_t>dlsym(lib, b"hipFileStatsGenerateReport")


cdef inline int _need(const void *fn, const char *name) except -1:
    """Return 0 when ``fn``, the pointer bound for ``name``, is set; otherwise
    load the library (binding every pointer) and raise HipFileSymbolNotFound
    if it does not export ``name``."""
    if fn == NULL:
        _resolve(name)
    return 0


cdef inline int _check(hipFileError_t e, const char *func) except -1 nogil:
    """Raise the exception for a failed hipFileError_t (takes the GIL only then)."""
    if e.err != 0:
        with gil:
            raise_status(e.err, e.hip_drv_err, func.decode())
    return 0


# --------------------------------------------------------------------------
# Version and error strings
# --------------------------------------------------------------------------

def get_version():
    """Version of the loaded library as ``(major, minor, patch)``.

    Wraps ``hipFileGetVersion``.
    """
    _need(_p_get_version, b"hipFileGetVersion")
    cdef unsigned major = 0, minor = 0, patch = 0
    with nogil:
        _check(_p_get_version(&major, &minor, &patch), b"hipFileGetVersion")
    return (major, minor, patch)


cdef str _version_text():
    if _lib == NULL:
        return "not loaded"
    cdef unsigned major = 0, minor = 0, patch = 0
    if _p_get_version == NULL or _p_get_version(&major, &minor, &patch).err != 0:
        return "version unknown"
    return f"{major}.{minor}.{patch}"


def get_op_error_string(int code):
    """Text for a ``hipFileOpError_t``. Wraps ``hipFileGetOpErrorString``."""
    _need(_p_error_string, b"hipFileGetOpErrorString")
    cdef const char *s
    with nogil:
        s = _p_error_string(code)
    if s == NULL:
        return f"unknown hipFile error {code}"
    return s.decode(errors="replace")


# --------------------------------------------------------------------------
# Driver, properties and configuration
# --------------------------------------------------------------------------

def driver_open():
    """Wraps ``hipFileDriverOpen``."""
    _need(_p_driver_open, b"hipFileDriverOpen")
    with nogil:
        _check(_p_driver_open(), b"hipFileDriverOpen")


def driver_close():
    """Wraps ``hipFileDriverClose``."""
    _need(_p_driver_close, b"hipFileDriverClose")
    with nogil:
        _check(_p_driver_close(), b"hipFileDriverClose")
    _note_driver_close()


# Incremented whenever a close brings the driver's count to 0: the library
# then drops every handle and buffer registration, so objects registered in
# an older epoch must neither use nor deregister their (stale) registration.
cdef unsigned long _driver_epoch = 0


cdef void _note_driver_close():
    global _driver_epoch
    try:
        if use_count() == 0:
            _driver_epoch += 1
    except Exception:
        _driver_epoch += 1


def driver_epoch():
    """How many times the driver's open count has dropped to 0 through
    :func:`driver_close` in this process."""
    return _driver_epoch


def use_count():
    """Wraps ``hipFileUseCount``."""
    _need(_p_use_count, b"hipFileUseCount")
    cdef int64_t n
    with nogil:
        n = _p_use_count()
    return n


def driver_get_properties():
    """Wraps ``hipFileDriverGetProperties``; returns the fields as a dict."""
    _need(_p_get_props, b"hipFileDriverGetProperties")
    cdef hipFileDriverProps_t p
    memset(&p, 0, sizeof(p))
    with nogil:
        _check(_p_get_props(&p), b"hipFileDriverGetProperties")
    return {
        "nvfs_major_version": p.nvfs.major_version,
        "nvfs_minor_version": p.nvfs.minor_version,
        "nvfs_poll_thresh_size": p.nvfs.poll_thresh_size,
        "nvfs_max_direct_io_size": p.nvfs.max_direct_io_size,
        "nvfs_driver_status_flags": p.nvfs.driver_status_flags,
        "nvfs_driver_control_flags": p.nvfs.driver_control_flags,
        "feature_flags": p.feature_flags,
        "max_device_cache_size": p.max_device_cache_size,
        "per_buffer_cache_size": p.per_buffer_cache_size,
        "max_device_pinned_mem_size": p.max_device_pinned_mem_size,
        "max_batch_io_count": p.max_batch_io_count,
        "max_batch_io_timeout_msecs": p.max_batch_io_timeout_msecs,
    }


def driver_set_poll_mode(bint poll, size_t poll_threshold_size):
    """Wraps ``hipFileDriverSetPollMode`` (threshold in KiB)."""
    _need(_p_set_poll, b"hipFileDriverSetPollMode")
    with nogil:
        _check(_p_set_poll(poll, poll_threshold_size), b"hipFileDriverSetPollMode")


def driver_set_max_direct_io_size(size_t kib):
    """Wraps ``hipFileDriverSetMaxDirectIOSize`` (KiB)."""
    _need(_p_set_max_dio, b"hipFileDriverSetMaxDirectIOSize")
    with nogil:
        _check(_p_set_max_dio(kib), b"hipFileDriverSetMaxDirectIOSize")


def driver_set_max_cache_size(size_t kib):
    """Wraps ``hipFileDriverSetMaxCacheSize`` (KiB)."""
    _need(_p_set_max_cache, b"hipFileDriverSetMaxCacheSize")
    with nogil:
        _check(_p_set_max_cache(kib), b"hipFileDriverSetMaxCacheSize")


def driver_set_max_pinned_mem_size(size_t kib):
    """Wraps ``hipFileDriverSetMaxPinnedMemSize`` (KiB)."""
    _need(_p_set_max_pinned, b"hipFileDriverSetMaxPinnedMemSize")
    with nogil:
        _check(_p_set_max_pinned(kib), b"hipFileDriverSetMaxPinnedMemSize")


def get_parameter_size_t(int param):
    """Wraps ``hipFileGetParameterSizeT``."""
    _need(_p_get_param_size, b"hipFileGetParameterSizeT")
    cdef size_t v = 0
    with nogil:
        _check(_p_get_param_size(param, &v), b"hipFileGetParameterSizeT")
    return v


def get_parameter_bool(int param):
    """Wraps ``hipFileGetParameterBool``."""
    _need(_p_get_param_bool, b"hipFileGetParameterBool")
    cdef bint v = 0
    with nogil:
        _check(_p_get_param_bool(param, &v), b"hipFileGetParameterBool")
    return bool(v)


def get_parameter_string(int param, int capacity=4096):
    """Wraps ``hipFileGetParameterString`` with a buffer of ``capacity`` bytes."""
    _need(_p_get_param_str, b"hipFileGetParameterString")
    if capacity <= 0:
        raise ValueError("capacity must be positive")
    cdef char *buf = <char *>malloc(capacity)
    if buf == NULL:
        raise MemoryError()
    try:
        memset(buf, 0, capacity)
        with nogil:
            _check(_p_get_param_str(param, buf, capacity), b"hipFileGetParameterString")
        buf[capacity - 1] = 0
        return (<bytes>buf).decode(errors="replace")
    finally:
        free(buf)


def set_parameter_size_t(int param, size_t value):
    """Wraps ``hipFileSetParameterSizeT``."""
    _need(_p_set_param_size, b"hipFileSetParameterSizeT")
    with nogil:
        _check(_p_set_param_size(param, value), b"hipFileSetParameterSizeT")


def set_parameter_bool(int param, bint value):
    """Wraps ``hipFileSetParameterBool``."""
    _need(_p_set_param_bool, b"hipFileSetParameterBool")
    with nogil:
        _check(_p_set_param_bool(param, value), b"hipFileSetParameterBool")


def set_parameter_string(int param, str value):
    """Wraps ``hipFileSetParameterString``."""
    _need(_p_set_param_str, b"hipFileSetParameterString")
    cdef bytes b = value.encode()
    if b"\0" in b:
        raise ValueError("value must not contain NUL characters")
    cdef const char *s = b
    with nogil:
        _check(_p_set_param_str(param, s), b"hipFileSetParameterString")


# --------------------------------------------------------------------------
# File handles and buffers
# --------------------------------------------------------------------------

def handle_register(int fd, int handle_type=1):
    """Wraps ``hipFileHandleRegister`` for a file descriptor; returns the handle."""
    _need(_p_handle_register, b"hipFileHandleRegister")
    cdef hipFileDescr_t d
    cdef hipFileHandle_t fh = NULL
    memset(&d, 0, sizeof(d))
    d.type = handle_type
    d.handle.fd = fd
    with nogil:
        _check(_p_handle_register(&fh, &d), b"hipFileHandleRegister")
    return <uintptr_t>fh


def handle_deregister(uintptr_t handle):
    """Wraps ``hipFileHandleDeregister``."""
    _need(_p_handle_deregister, b"hipFileHandleDeregister")
    with nogil:
        _p_handle_deregister(<hipFileHandle_t>handle)


def buf_register(uintptr_t base, size_t length, int flags=0):
    """Wraps ``hipFileBufRegister``."""
    _need(_p_buf_register, b"hipFileBufRegister")
    with nogil:
        _check(_p_buf_register(<const void *>base, length, flags), b"hipFileBufRegister")


def buf_deregister(uintptr_t base):
    """Wraps ``hipFileBufDeregister``."""
    _need(_p_buf_deregister, b"hipFileBufDeregister")
    with nogil:
        _check(_p_buf_deregister(<const void *>base), b"hipFileBufDeregister")


# --------------------------------------------------------------------------
# Synchronous I/O
# --------------------------------------------------------------------------

cdef fn_io_t _get_io(int opcode) except NULL:
    if opcode == 0:
        _need(_p_read, b"hipFileRead")
        return _p_read
    _need(_p_write, b"hipFileWrite")
    return _p_write


cdef tuple _io_raw(fn_io_t fn, uintptr_t handle, uintptr_t base, size_t size,
                   hoff_t file_offset, hoff_t buffer_offset):
    cdef ssize_t r
    cdef int err = 0
    with nogil:
        libc.errno.errno = 0
        r = fn(<hipFileHandle_t>handle, <void *>base, size, file_offset, buffer_offset)
        if r < 0:
            err = libc.errno.errno
    return (r, err)


def read_raw(uintptr_t handle, uintptr_t base, size_t size, hoff_t file_offset,
             hoff_t buffer_offset):
    """Wraps ``hipFileRead``; returns ``(result, errno)`` without raising."""
    return _io_raw(_get_io(0), handle, base, size, file_offset, buffer_offset)


def write_raw(uintptr_t handle, uintptr_t base, size_t size, hoff_t file_offset,
              hoff_t buffer_offset):
    """Wraps ``hipFileWrite``; returns ``(result, errno)`` without raising."""
    return _io_raw(_get_io(1), handle, base, size, file_offset, buffer_offset)


def read(uintptr_t handle, uintptr_t base, size_t size, hoff_t file_offset,
         hoff_t buffer_offset):
    """Wraps ``hipFileRead``: one call, bytes read (may be short)."""
    r, err = read_raw(handle, base, size, file_offset, buffer_offset)
    if r < 0:
        raise_result(r, err, "hipFileRead")
    return r


def write(uintptr_t handle, uintptr_t base, size_t size, hoff_t file_offset,
          hoff_t buffer_offset):
    """Wraps ``hipFileWrite``: one call, bytes written (may be short)."""
    r, err = write_raw(handle, base, size, file_offset, buffer_offset)
    if r < 0:
        raise_result(r, err, "hipFileWrite")
    return r


# --------------------------------------------------------------------------
# Stream-ordered I/O (raw) and stream registration
# --------------------------------------------------------------------------

cdef fn_io_async_t _get_async(int opcode) except NULL:
    if opcode == 0:
        _need(_p_read_async, b"hipFileReadAsync")
        return _p_read_async
    _need(_p_write_async, b"hipFileWriteAsync")
    return _p_write_async


cdef int _io_async(int opcode, uintptr_t handle, uintptr_t base, uintptr_t size_p,
                   uintptr_t file_offset_p, uintptr_t buffer_offset_p, uintptr_t bytes_p,
                   uintptr_t stream) except -1:
    cdef fn_io_async_t fn = _get_async(opcode)
    with nogil:
        _check(fn(<hipFileHandle_t>handle, <void *>base, <size_t *>size_p,
                  <hoff_t *>file_offset_p, <hoff_t *>buffer_offset_p, <ssize_t *>bytes_p,
                  <hipStream_t>stream),
               b"hipFileWriteAsync" if opcode else b"hipFileReadAsync")
    return 0


def read_async(uintptr_t handle, uintptr_t base, uintptr_t size_p, uintptr_t file_offset_p,
               uintptr_t buffer_offset_p, uintptr_t bytes_read_p, uintptr_t stream):
    """Wraps ``hipFileReadAsync`` with raw slot addresses (the caller keeps
    the four slots valid until the stream has run the operation)."""
    _io_async(0, handle, base, size_p, file_offset_p, buffer_offset_p, bytes_read_p, stream)


def write_async(uintptr_t handle, uintptr_t base, uintptr_t size_p, uintptr_t file_offset_p,
                uintptr_t buffer_offset_p, uintptr_t bytes_written_p, uintptr_t stream):
    """Wraps ``hipFileWriteAsync`` with raw slot addresses."""
    _io_async(1, handle, base, size_p, file_offset_p, buffer_offset_p, bytes_written_p, stream)


def stream_register(uintptr_t stream, unsigned flags=0):
    """Wraps ``hipFileStreamRegister``."""
    _need(_p_stream_register, b"hipFileStreamRegister")
    with nogil:
        _check(_p_stream_register(<hipStream_t>stream, flags), b"hipFileStreamRegister")


def stream_deregister(uintptr_t stream):
    """Wraps ``hipFileStreamDeregister``."""
    _need(_p_stream_deregister, b"hipFileStreamDeregister")
    with nogil:
        _check(_p_stream_deregister(<hipStream_t>stream), b"hipFileStreamDeregister")


# --------------------------------------------------------------------------
# Batch I/O
# --------------------------------------------------------------------------

def batch_io_set_up(unsigned max_nr):
    """Wraps ``hipFileBatchIOSetUp``; returns the batch handle."""
    _need(_p_batch_setup, b"hipFileBatchIOSetUp")
    cdef hipFileBatchHandle_t b = NULL
    with nogil:
        _check(_p_batch_setup(&b, max_nr), b"hipFileBatchIOSetUp")
    return <uintptr_t>b


def batch_io_submit(uintptr_t batch, unsigned nr, uintptr_t params, unsigned flags=0):
    """Wraps ``hipFileBatchIOSubmit``; ``params`` is the address of ``nr``
    ``hipFileIOParams_t`` that must stay valid until the entries complete."""
    _need(_p_batch_submit, b"hipFileBatchIOSubmit")
    with nogil:
        _check(_p_batch_submit(<hipFileBatchHandle_t>batch, nr, <hipFileIOParams_t *>params,
                               flags), b"hipFileBatchIOSubmit")


def batch_io_get_status(uintptr_t batch, unsigned min_nr, unsigned capacity,
                        uintptr_t events, timeout=None, uintptr_t nr_out=0):
    """Wraps ``hipFileBatchIOGetStatus``; fills up to ``capacity`` events at
    ``events`` and returns how many. ``timeout`` in seconds, None waits.
    ``nr_out``, if not 0, is the address of an ``unsigned`` that receives the
    count before this function returns, so that a signal handler raising on
    return (Ctrl-C) cannot lose the events the library handed over."""
    _need(_p_batch_status, b"hipFileBatchIOGetStatus")
    cdef unsigned nr = capacity
    cdef timespec ts
    cdef timespec *tsp = NULL
    cdef hipFileError_t e
    cdef double t = _as_timeout(timeout)
    if t >= 0:
        ts.tv_sec = <long>t
        ts.tv_nsec = <long>((t - <long>t) * 1e9)
        tsp = &ts
    with nogil:
        e = _p_batch_status(<hipFileBatchHandle_t>batch, min_nr, &nr,
                            <hipFileIOEvents_t *>events, tsp)
    if e.err == 0 and nr_out != 0:
        (<unsigned *>nr_out)[0] = nr
    _check(e, b"hipFileBatchIOGetStatus")
    return nr


def batch_io_cancel(uintptr_t batch):
    """Wraps ``hipFileBatchIOCancel``."""
    _need(_p_batch_cancel, b"hipFileBatchIOCancel")
    with nogil:
        _check(_p_batch_cancel(<hipFileBatchHandle_t>batch), b"hipFileBatchIOCancel")


def batch_io_destroy(uintptr_t batch):
    """Wraps ``hipFileBatchIODestroy``."""
    _need(_p_batch_destroy, b"hipFileBatchIODestroy")
    with nogil:
        _p_batch_destroy(<hipFileBatchHandle_t>batch)


include "_stats.pxi"


def abi_layout():
    """Sizes and offsets of the ABI structs as compiled here (for checks)."""
    cdef hipFileIOParams_t p
    cdef hipFileIOEvents_t ev
    cdef hipFileDescr_t d
    base = <uintptr_t>&p
    return {
        "descr": (sizeof(hipFileDescr_t), <uintptr_t>&d.handle - <uintptr_t>&d,
                  <uintptr_t>&d.fs_ops - <uintptr_t>&d),
        "io_params": (sizeof(hipFileIOParams_t), {
            "mode": <uintptr_t>&p.mode - base,
            "buffer": <uintptr_t>&p.u.batch.devPtr_base - base,
            "file_offset": <uintptr_t>&p.u.batch.file_offset - base,
            "buffer_offset": <uintptr_t>&p.u.batch.devPtr_offset - base,
            "size": <uintptr_t>&p.u.batch.size - base,
            "fh": <uintptr_t>&p.fh - base,
            "opcode": <uintptr_t>&p.opcode - base,
            "cookie": <uintptr_t>&p.cookie - base}),
        "io_events": (sizeof(hipFileIOEvents_t), {
            "cookie": <uintptr_t>&ev.cookie - <uintptr_t>&ev,
            "status": <uintptr_t>&ev.status - <uintptr_t>&ev,
            "ret": <uintptr_t>&ev.ret - <uintptr_t>&ev}),
        "driver_props": sizeof(hipFileDriverProps_t),
    }


# Stream-ordered I/O with owned slots, one concern a file (in this order:
# each uses the ones before it).
include "_runtime.pxi"
include "_process.pxi"
include "_pool.pxi"
include "_cores.pxi"
include "_aio.pxi"
include "_observe.pxi"
include "_engine.pxi"
