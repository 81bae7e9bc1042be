# cython: language_level=3, boundscheck=False, wraparound=False
"""The hand-written Python forms of the hipFile functions that are not 1:1
(a struct to fill, a string buffer, a timeout; see HAND_WRITTEN in
tools/gen_bindings.py), the raising forms of ``hipFileRead`` and
``hipFileWrite``, the ABI's sizes as compiled here, and the core's buffer,
stream and range checks as the Python layer calls them.
"""

from libc.stdint cimport uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset
from posix.time cimport timespec

from hipfile._lib.chipfile cimport *
from hipfile._lib._loader cimport check_status
from hipfile._lib._bindings cimport (
    bind, p_hipFileBatchIOGetStatus, p_hipFileDriverGetProperties, p_hipFileGetParameterString,
    p_hipFileHandleRegister)
from hipfile._lib._core cimport (
    c_as_index, c_as_positive, c_as_size, c_buffer_info, io_range)
from hipfile._lib._streams cimport StreamCore
from hipfile._lib._wait cimport c_as_timeout

from hipfile._lib import _bindings
from hipfile._lib._decode import stream_info as decode_stream_info
from hipfile._lib._errors import raise_result

#: One hipFileRead/hipFileWrite call moves at most this many bytes.
MAX_IO_CHUNK = 0x7ffff000
SIZEOF_IO_PARAMS = sizeof(hipFileIOParams_t)
SIZEOF_IO_EVENTS = sizeof(hipFileIOEvents_t)
SIZEOF_DESCR = sizeof(hipFileDescr_t)
SIZEOF_DRIVER_PROPS = sizeof(hipFileDriverProps_t)


def driver_get_properties():
    """Wraps ``hipFileDriverGetProperties``; returns the fields as a dict."""
    cdef hipFileDriverProps_t p
    memset(&p, 0, sizeof(p))
    if p_hipFileDriverGetProperties == NULL:
        bind(b"hipFileDriverGetProperties")
    with nogil:
        check_status(p_hipFileDriverGetProperties(&p), b"hipFileDriverGetProperties")
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


def get_parameter_string(int param, int capacity=4096):
    """Wraps ``hipFileGetParameterString`` with a buffer of ``capacity`` bytes."""
    if p_hipFileGetParameterString == NULL:
        bind(b"hipFileGetParameterString")
    if capacity <= 0:
        raise ValueError("capacity must be positive")
    cdef char *buf = <char *>malloc(capacity)
    if buf == NULL:
        raise MemoryError()
    try:
        memset(buf, 0, capacity)
        with nogil:
            check_status(p_hipFileGetParameterString(param, buf, capacity),
                         b"hipFileGetParameterString")
        buf[capacity - 1] = 0
        return (<bytes>buf).decode(errors="replace")
    finally:
        free(buf)


def handle_register(int fd, int handle_type=1):
    """Wraps ``hipFileHandleRegister`` for a file descriptor; returns the handle."""
    cdef hipFileDescr_t d
    cdef hipFileHandle_t fh = NULL
    if p_hipFileHandleRegister == NULL:
        bind(b"hipFileHandleRegister")
    memset(&d, 0, sizeof(d))
    d.type = handle_type
    d.handle.fd = fd
    with nogil:
        check_status(p_hipFileHandleRegister(&fh, &d), b"hipFileHandleRegister")
    return <uintptr_t>fh


def batch_io_get_status(uintptr_t batch, unsigned min_nr, unsigned capacity,
                        uintptr_t events, timeout=None, uintptr_t nr_out=0):
    """Wraps ``hipFileBatchIOGetStatus``; fills up to ``capacity`` events at
    ``events`` and returns how many. ``timeout`` in seconds, None waits.
    ``nr_out``, if not 0, is the address of an ``unsigned`` that receives the
    count before this function returns, so that a signal handler raising on
    return (Ctrl-C) cannot lose the events the library handed over."""
    if p_hipFileBatchIOGetStatus == NULL:
        bind(b"hipFileBatchIOGetStatus")
    cdef unsigned nr = capacity
    cdef timespec ts
    cdef timespec *tsp = NULL
    cdef hipFileError_t e
    cdef double t = c_as_timeout(timeout)
    if t >= 0:
        ts.tv_sec = <long>t
        ts.tv_nsec = <long>((t - <long>t) * 1e9)
        tsp = &ts
    with nogil:
        e = p_hipFileBatchIOGetStatus(<hipFileBatchHandle_t>batch, min_nr, &nr,
                                      <hipFileIOEvents_t *>events, tsp)
    if e.err == 0 and nr_out != 0:
        (<unsigned *>nr_out)[0] = nr
    check_status(e, b"hipFileBatchIOGetStatus")
    return nr


def read(uintptr_t handle, uintptr_t base, size_t size, hoff_t file_offset,
         hoff_t buffer_offset):
    """Wraps ``hipFileRead``: one call, bytes read (may be short)."""
    return _count(_bindings.read_raw(handle, base, size, file_offset, buffer_offset),
                  "hipFileRead")


def write(uintptr_t handle, uintptr_t base, size_t size, hoff_t file_offset,
          hoff_t buffer_offset):
    """Wraps ``hipFileWrite``: one call, bytes written (may be short)."""
    return _count(_bindings.write_raw(handle, base, size, file_offset, buffer_offset),
                  "hipFileWrite")


cdef object _count(tuple result, str func):
    # (result, errno) of an I/O call: the byte count, or its exception
    if result[0] < 0:
        raise_result(result[0], result[1], func)
    return result[0]


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


# --------------------------------------------------------------------------
# Buffers, streams and ranges, for the Python layer
# --------------------------------------------------------------------------

def buffer_info(obj):
    """``(address, nbytes, owner)`` of a buffer object: a Buffer's own
    fields, else what :mod:`hipfile._lib._decode` reads of it.

    Raises
    ------
    TypeError, ValueError
        As :func:`hipfile._lib._decode.protocol_buffer_info`.
    """
    cdef uintptr_t base = 0
    cdef size_t length = 0
    owner = c_buffer_info(obj, &base, &length)
    return base, length, owner


def stream_info(obj):
    """``(handle, owner)`` of a stream object (see
    :func:`hipfile._lib._decode.stream_info`; a Stream is its own owner)."""
    if isinstance(obj, StreamCore):
        return (<StreamCore>obj)._handle, obj
    return decode_stream_info(obj)


def io_range_check(size_t length, size, file_offset, buffer_offset, buf=None):
    """Check a transfer of ``size`` bytes (None: the rest of the buffer) at
    ``file_offset`` and ``buffer_offset`` against a buffer of ``length``
    bytes; returns ``(size, file_offset, buffer_offset)`` as ints.

    ``buf`` is the buffer object, when known: a :class:`~hipfile.Buffer`
    made from a bare address is checked against the device allocation
    holding it (``hipMemGetAddressRange``) rather than ``length``.

    Raises
    ------
    TypeError
        A value is not an integer (bools and floats are refused).
    ValueError
        A negative value, or a range that overruns the buffer.
    """
    cdef size_t n
    cdef hoff_t f, b
    io_range(length, size, file_offset, buffer_offset, &n, &f, &b, buf)
    return n, f, b


def as_index(value, str name):
    """``value`` as an int, by the package's one rule for integer arguments
    (``_core.c_as_index``): an int or an object with ``__index__`` (numpy
    integers), below 2**63.

    Raises
    ------
    TypeError
        Not an integer (bools and floats refused).
    ValueError
        2**63 and more, or below -2**63.
    """
    return c_as_index(value, name)


def as_size(value, str name):
    """``value`` as an int >= 0, by the rule of :func:`as_index`.

    Raises
    ------
    TypeError
        Not an integer (bools and floats refused).
    ValueError
        Negative, or 2**63 and more (the message names ``name`` and the
        value).
    """
    return c_as_size(value, name)


def as_positive(value, str name):
    """``value`` as a positive int, by the rule of every size and offset
    (ints and ``__index__`` only, below 2**63).

    Raises
    ------
    TypeError
        Not an integer (bools and floats refused).
    ValueError
        0, negative, or 2**63 and more.
    """
    return c_as_positive(value, name)
