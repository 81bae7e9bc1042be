"""Turn foreign objects into what the C layer needs.

Buffers become ``(address, nbytes, owner)`` and streams ``(handle, owner)``;
``owner`` is the object to keep alive while the library may use the memory
or stream. All knowledge of the protocols lives here:

* HIP-Python ``Pointer``/``DeviceArray``, ``hipStream_t``;
* ``__cuda_array_interface__`` (PyTorch, CuPy, Numba, HIP-Python arrays);
* ``__dlpack__`` (DLPack capsules, device memory only);
* ``__cuda_stream__`` (version 0), PyTorch streams (``.cuda_stream``),
  CuPy streams (``.ptr``), and plain integers.
"""

from __future__ import annotations

import ctypes
import math
import numbers
import operator
import re
import struct
import threading
import time
from typing import Any

__all__ = [
    "as_int",
    "buffer_info",
    "check_host_buffers_allowed",
    "check_writable",
    "host_view",
    "io_range",
    "io_range_or_host",
    "pointer_view",
    "protocol_buffer_info",
    "stream_info",
]

#: Where a refusal of host memory points the caller.
HOST_BUFFERS_HINT = ("host buffers are accepted by FileHandle.read/write/pread/pwrite "
                     "(POSIX I/O), not by this call")

# DLPack device types that hold GPU memory hipFile can use.
_DL_DEVICE_GPU = {2, 10}  # kDLCUDA, kDLROCM
_DL_DEVICE_HOST_PINNED = {3, 11}  # kDLCUDAHost, kDLROCMHost
_DL_DEVICE_CPU = 1  # kDLCPU


class _DLDevice(ctypes.Structure):
    _fields_ = (("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32))


class _DLDataType(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16))


class _DLTensor(ctypes.Structure):
    _fields_ = (
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    )


_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = (ctypes.py_object, ctypes.c_char_p)
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = (ctypes.py_object, ctypes.c_char_p)


def _from_cai(obj: Any, cai: dict[str, Any]) -> tuple[int, int, Any]:
    shape = tuple(int(n) for n in cai.get("shape", ()))
    itemsize = _itemsize(str(cai.get("typestr", "|u1")))
    data = cai.get("data")
    if not data:
        raise TypeError("__cuda_array_interface__ has no 'data'")
    ptr = int(data[0] or 0)
    strides = cai.get("strides")
    if strides is not None and not _contiguous(shape, tuple(strides), itemsize):
        raise ValueError("array is not C-contiguous; hipFile needs one contiguous range")
    nbytes = itemsize * math.prod(shape)
    if ptr == 0 and nbytes:
        raise ValueError("array has a NULL data pointer")
    return ptr, nbytes, obj


def _itemsize(typestr: str) -> int:
    """Bytes per element of a typestr: the array-interface form (``"<f4"``,
    ``"|u1"``), without its byte-order mark (``"f4"``, as HIP-Python writes
    it), or a one-letter ``struct`` code (``"B"``)."""
    digits = re.search(r"(\d+)$", typestr)
    if digits:
        return int(digits.group(1))
    try:
        return struct.calcsize("=" + typestr)
    except struct.error:
        raise TypeError(f"unsupported __cuda_array_interface__ typestr {typestr!r}") from None


def _contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides), strict=True):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def _from_dlpack(obj: Any) -> tuple[int, int, Any]:
    capsule = obj.__dlpack__()
    if not _capsule_is_valid(capsule, b"dltensor"):
        raise TypeError("__dlpack__ did not return an unconsumed DLPack capsule")
    addr = _capsule_get_pointer(capsule, b"dltensor")
    # DLManagedTensor starts with its DLTensor.
    t = _DLTensor.from_address(addr)
    kind = t.device.device_type
    if kind not in _DL_DEVICE_GPU:
        if kind in _DL_DEVICE_HOST_PINNED:
            where = "pinned host"
        elif kind == _DL_DEVICE_CPU:
            where = "host (CPU)"
        else:
            where = f"DLPack device type {kind}"
        raise ValueError(f"{type(obj).__name__} is in {where} memory; "
                         f"hipFile needs device memory ({HOST_BUFFERS_HINT})")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    itemsize = max(1, (t.dtype.bits * t.dtype.lanes) // 8)
    if t.strides:
        strides = tuple(t.strides[i] * itemsize for i in range(t.ndim))
        if not _contiguous(shape, strides, itemsize):
            raise ValueError("tensor is not C-contiguous; hipFile needs one contiguous range")
    ptr = int(t.data or 0) + int(t.byte_offset)
    # The capsule (unconsumed) frees the tensor when it dies: keep it with obj.
    return ptr, itemsize * math.prod(shape), (obj, capsule)


def buffer_info(obj: Any) -> tuple[int, int, Any]:
    """``(address, nbytes, owner)`` of a buffer object: :class:`Buffer` and
    HIP-Python arrays are read in C by the core, everything else through the
    protocols here (:func:`protocol_buffer_info`).

    Raises
    ------
    TypeError, ValueError
        As :func:`protocol_buffer_info`.
    """
    from hipfile._lib import _hipfile

    return _hipfile.buffer_info(obj)  # type: ignore[no-any-return]


def protocol_buffer_info(obj: Any) -> tuple[int, int, Any]:
    """``(address, nbytes, owner)`` of a device buffer object.

    Raises
    ------
    TypeError
        The object exposes no size (pass ``Buffer(ptr, length)``) or is of an
        unsupported kind.
    ValueError
        The memory is not one contiguous device range.
    """
    if obj is None:
        raise TypeError("the buffer is None: pass device memory (hipfile.Buffer, a HIP-Python "
                        "DeviceArray, a PyTorch or CuPy array) or a host buffer")
    if isinstance(obj, bool):
        raise TypeError("a bool is not a buffer")
    if isinstance(obj, int):
        raise TypeError(
            "a bare address has no size (an int gives no buffer length, and a size "
            "argument is the transfer's size, not the buffer's): wrap it as "
            "hipfile.Buffer(ptr, length) with the allocation's length")
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(obj, cai)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _from_dlpack(obj)
    if _has_buffer_protocol(obj):
        raise TypeError(f"{type(obj).__name__} is not a device buffer: it is host memory, "
                        f"and hipFile needs device memory ({HOST_BUFFERS_HINT})")
    raise TypeError(
        f"{type(obj).__name__} is not a device buffer: expected hipfile.Buffer, a HIP-Python "
        "DeviceArray, or an object with __cuda_array_interface__ or __dlpack__ "
        "(a bare pointer needs hipfile.Buffer(ptr, length))"
    )


def _has_buffer_protocol(obj: Any) -> bool:
    try:
        memoryview(obj).release()
    except TypeError:
        return False
    return True


def _flat(view: memoryview, what: str) -> memoryview:
    if not view.c_contiguous:
        view.release()
        raise ValueError(f"{what} is not C-contiguous; the transfer needs one contiguous range")
    if view.format == "B" and view.ndim == 1:
        return view
    try:
        flat = view.cast("B")
    except TypeError:
        # a format cast() refuses (structured or non-native types): read the
        # same bytes through NumPy, which exports them as plain bytes
        import numpy as np

        return np.frombuffer(view, dtype=np.uint8).data
    view.release()
    return flat


def pointer_view(ptr: int, nbytes: int) -> memoryview:
    """A writable flat byte view of ``nbytes`` of host memory at ``ptr``
    (the caller keeps the memory alive)."""
    return memoryview((ctypes.c_char * nbytes).from_address(ptr)).cast("B")


def host_view(obj: Any) -> memoryview | None:
    """A flat byte view (format ``"B"``) of a host (CPU) buffer, or None
    when ``obj`` is not host memory by its kind.

    Host memory is an object with the buffer protocol (NumPy arrays,
    ``bytearray``, ``memoryview``, ``mmap``, ...) that exposes no
    ``__cuda_array_interface__`` (HIP-Python's ``DeviceArray`` exposes
    both, and is device memory), or a DLPack tensor on the CPU or in pinned
    host memory. The view keeps the object's memory alive and, for objects
    with the buffer protocol, fixed in place (a ``bytearray`` cannot be
    resized while it exists).

    Raises
    ------
    ValueError
        The memory is not one contiguous range.
    """
    from hipfile._lib import _hipfile

    if obj is None or isinstance(obj, bool | int | _hipfile._BufferCore):
        return None
    if getattr(obj, "__cuda_array_interface__", None) is not None:
        return None
    try:
        view = memoryview(obj)
    except TypeError:
        view = None
    if view is not None:
        return _flat(view, f"{type(obj).__name__} buffer")
    device = getattr(obj, "__dlpack_device__", None)
    if device is None or not hasattr(obj, "__dlpack__"):
        return None
    kind = int(device()[0])
    if kind != _DL_DEVICE_CPU and kind not in _DL_DEVICE_HOST_PINNED:
        return None
    capsule = obj.__dlpack__()
    if not _capsule_is_valid(capsule, b"dltensor"):
        raise TypeError("__dlpack__ did not return an unconsumed DLPack capsule")
    t = _DLTensor.from_address(_capsule_get_pointer(capsule, b"dltensor"))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    itemsize = max(1, (t.dtype.bits * t.dtype.lanes) // 8)
    if t.strides:
        strides = tuple(t.strides[i] * itemsize for i in range(t.ndim))
        if not _contiguous(shape, strides, itemsize):
            raise ValueError("tensor is not C-contiguous; the transfer needs one contiguous "
                             "range")
    nbytes = itemsize * math.prod(shape)
    ptr = int(t.data or 0) + int(t.byte_offset)
    if nbytes == 0:
        return memoryview(bytearray())
    # The ctypes array keeps the capsule (which frees the tensor when it
    # dies) and the object alive for as long as the view exists.
    array = (ctypes.c_char * nbytes).from_address(ptr)
    array._hipfile_owner = (obj, capsule)  # type: ignore[attr-defined]
    return memoryview(array).cast("B")


def pointer_value(obj: Any) -> int:
    """The integer address of a pointer-like object (int, HIP-Python
    ``Pointer``, ``ctypes.c_void_p``, or anything with ``__int__``)."""
    if isinstance(obj, bool) or (
        isinstance(obj, numbers.Number) and not isinstance(obj, numbers.Integral)
    ):
        raise TypeError(f"a {type(obj).__name__} is not a pointer")
    if isinstance(obj, int):
        value = obj
    elif isinstance(obj, ctypes.c_void_p):
        value = obj.value or 0
    elif hasattr(obj, "__int__"):
        value = int(obj)
    else:
        raise TypeError(f"{type(obj).__name__} is not a pointer")
    if value < 0 or value >= 1 << 64:
        raise ValueError(f"address {value:#x} out of range")
    return value


def check_stream_handle(handle: int) -> None:
    """Refuse an int that is not a stream HIP knows, where HIP can tell:
    ``hipStreamQuery`` answers ``hipSuccess`` or ``hipErrorNotReady`` for a
    live stream (ROCm looks handles up; so does the emulated platform).

    Raises
    ------
    ValueError
        HIP refused the handle as a stream.
    """
    if handle == 0:
        return  # the null stream
    from hipfile import _hip

    hip: Any = _hip.hip
    err = int(hip.hipStreamQuery(handle)[0])
    if err not in (0, int(hip.hipError_t.hipErrorNotReady)):
        raise ValueError(f"{handle:#x} is not a stream HIP knows (hipStreamQuery: "
                         f"{_hip.error_name(err)}); pass the stream object or its handle")


def stream_info(obj: Any) -> tuple[int, Any]:
    """``(handle, owner)`` of a stream object.

    Accepts ``None``/0 (the null stream), ints, HIP-Python ``hipStream_t``,
    objects with ``__cuda_stream__`` (version 0), PyTorch streams
    (``cuda_stream``) and CuPy streams (``ptr``).

    Raises
    ------
    TypeError
        Unsupported object.
    ValueError
        An unsupported ``__cuda_stream__`` version or an out-of-range handle.
    """
    from hipfile._lib import _hipfile

    if obj is None:
        return 0, None
    if isinstance(obj, _hipfile._StreamCore):
        return obj.handle, obj
    if isinstance(obj, bool):
        raise TypeError("a bool is not a stream")
    if isinstance(obj, int):
        return _check_handle(obj), None
    proto = getattr(obj, "__cuda_stream__", None)
    if proto is not None:
        value = proto() if callable(proto) else proto
        if not isinstance(value, tuple) or len(value) != 2:
            raise TypeError("__cuda_stream__ must return (version, handle)")
        version, handle = value
        if version != 0:
            raise ValueError(f"unsupported __cuda_stream__ version {version} (expected 0)")
        return _check_handle(int(handle)), obj
    for attr in ("cuda_stream", "hip_stream"):
        handle = getattr(obj, attr, None)
        if isinstance(handle, int) and not isinstance(handle, bool):
            return _check_handle(handle), obj
    ptr = getattr(obj, "ptr", None)
    if isinstance(ptr, int) and not isinstance(ptr, bool) and type(obj).__module__.startswith(
        "cupy"
    ):
        return _check_handle(ptr), obj
    from hipfile import _hip

    if isinstance(obj, _hip.Pointer):
        return _check_handle(pointer_value(obj)), obj
    raise TypeError(
        f"{type(obj).__name__} is not a stream: expected hipfile.Stream, a HIP-Python "
        "hipStream_t, an int, or an object with __cuda_stream__, .cuda_stream or (CuPy) .ptr"
    )


def _check_handle(value: int) -> int:
    if value < 0 or value >= 1 << 64:
        raise ValueError(f"stream handle {value:#x} out of range")
    return value


def as_int(value: Any, name: str) -> int:
    """``value`` as an int (``__index__``); bools and non-integers raise TypeError."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None


def as_timeout(timeout: Any, name: str = "timeout") -> float | None:
    """A wait's ``timeout``: None (no limit, also for infinity) or seconds
    >= 0 as a float; the one rule of every wait (``_hipfile.as_timeout``).

    Raises
    ------
    TypeError
        Neither a real number nor None (bools and strings are refused).
    ValueError
        Negative (or NaN).
    """
    from hipfile._lib import _hipfile

    value: float | None = _hipfile.as_timeout(timeout, name)
    return value


#: Longest single blocking wait of :func:`wait_event`, so that signals are seen.
WAIT_SLICE = 0.05


def wait_event(event: threading.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set, in short slices: a signal delivered to
    another thread (Ctrl-C can land on any thread) is handled by the main
    thread between them. True once set, False when ``timeout`` seconds
    (None: no limit) passed first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not event.wait(WAIT_SLICE if deadline is None
                         else max(0.0, min(WAIT_SLICE, deadline - time.monotonic()))):
        if deadline is not None and time.monotonic() >= deadline:
            return False
    return True


def io_range(buffer: Any, size: Any, file_offset: Any,
             buffer_offset: Any) -> tuple[int, int, Any, int, int, int]:
    """Check one transfer against its buffer.

    Returns ``(address, length, owner, size, file_offset, buffer_offset)``
    with ``size`` defaulting to the rest of the buffer.

    Raises
    ------
    TypeError
        Non-integer arguments or an unsupported buffer.
    ValueError
        Negative offsets or sizes, or a range that overruns the buffer: the
        library is never asked to touch memory outside it.
    """
    from hipfile._lib import _hipfile

    ptr, length, owner = buffer_info(buffer)
    size, file_offset, buffer_offset = _hipfile.io_range_check(
        length, size, file_offset, buffer_offset, owner)
    return ptr, length, owner, size, file_offset, buffer_offset


def io_range_or_host(buffer: Any, size: Any, file_offset: Any, buffer_offset: Any
                     ) -> tuple[int, int, Any, int, int, int, memoryview | None]:
    """:func:`io_range` for the calls that also take host buffers.

    Returns ``(address, length, owner, size, file_offset, buffer_offset,
    view)``: ``view`` is None for device memory, else the host buffer's
    flat byte view (its ``address`` is 0 and ``owner`` the view).

    Raises
    ------
    TypeError
        As :func:`io_range`, or a host buffer while
        ``hipfile.defaults`` ``allow_host_buffers`` is False.
    ValueError
        As :func:`io_range`.
    """
    from hipfile._lib import _hipfile

    view: memoryview | None = None
    try:
        ptr, length, owner = buffer_info(buffer)
    except (TypeError, ValueError, BufferError):
        # BufferError: NumPy refuses to export a read-only array by DLPack
        view = host_view(buffer)
        if view is None:
            raise
        check_host_buffers_allowed(type(buffer).__name__)
        ptr, length, owner = 0, view.nbytes, view
    size, file_offset, buffer_offset = _hipfile.io_range_check(
        length, size, file_offset, buffer_offset, owner)
    return ptr, length, owner, size, file_offset, buffer_offset, view


def check_writable(view: memoryview, write: bool, obj: Any) -> None:
    """Raise :class:`TypeError` for a read into a read-only host buffer."""
    if not write and view.readonly:
        raise TypeError(f"cannot read into a read-only {type(obj).__name__}")


def check_host_buffers_allowed(what: str = "a host buffer") -> None:
    """Raise :class:`TypeError` unless ``hipfile.defaults``
    ``allow_host_buffers`` is True."""
    from hipfile import defaults

    if not defaults.allow_host_buffers():
        raise TypeError(
            f"{what} is host (CPU) memory and host buffers are turned off "
            "(hipfile.defaults 'allow_host_buffers' is False, environment variable "
            "HIPFILE_ALLOW_HOST_BUFFERS); pass device memory or turn the setting on")
