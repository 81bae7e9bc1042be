"""What the Python layer needs of foreign objects, over the compiled core.

Buffers become ``(address, nbytes, owner)`` and streams ``(handle, owner)``;
``owner`` is the object to keep alive while the library may use the memory
or stream. The protocols themselves (HIP-Python objects,
``__cuda_array_interface__``, ``__dlpack__``, ``__cuda_stream__``, ...) are
decoded in C by :mod:`hipfile._lib._decode`; this module adds the host
(CPU) buffers of the POSIX paths, the range checks of the Python-level
calls, and the argument rules they share.
"""

from __future__ import annotations

import ctypes
import operator
import threading
from collections.abc import Callable
from typing import Any

from hipfile._lib import _hipfile
from hipfile._lib._hipfile import (
    HOST_BUFFERS_HINT,
    buffer_info,
    check_stream_handle,
    pointer_value,
    protocol_buffer_info,
    stream_info,
)

__all__ = [
    "HOST_BUFFERS_HINT",
    "as_int",
    "buffer_info",
    "check_host_buffers_allowed",
    "check_stream_handle",
    "check_writable",
    "host_view",
    "io_range",
    "io_range_or_host",
    "pointer_value",
    "pointer_view",
    "protocol_buffer_info",
    "stream_info",
]

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
    if obj is None or isinstance(obj, bool | int | _hipfile.BufferCore):
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
    if kind != _hipfile.DL_CPU and kind not in _hipfile.DL_HOST_PINNED:
        return None
    ptr, nbytes, _kind, owner = _hipfile.dlpack_info(obj)
    if nbytes == 0:
        return memoryview(bytearray())
    # The ctypes array keeps the capsule (which frees the tensor when it
    # dies) and the object alive for as long as the view exists.
    array = (ctypes.c_char * nbytes).from_address(ptr)
    array._hipfile_owner = owner  # type: ignore[attr-defined]
    return memoryview(array).cast("B")


def as_int(value: Any, name: str, expected: str | None = None) -> int:
    """``value`` as an int: an int or an object with ``__index__`` (numpy
    integers), below 2**63; the package's one rule for integer arguments
    (``_core.c_as_index``, which the compiled modules use; ``_api`` gives
    its Python forms). ``expected`` words what the argument takes where an
    int is one of several forms (``"a mode string or an int"``): the
    TypeError then reads ``{name} must be {expected}, not {type}``.

    Raises
    ------
    TypeError
        A bool, or not an integer.
    ValueError
        2**63 or more, or below -2**63.
    """
    try:
        return _hipfile.as_index(value, name)
    except TypeError:
        if expected is None:
            raise
        raise TypeError(f"{name} must be {expected}, not {type(value).__name__}") from None


def as_int_unbounded(value: Any, name: str, expected: str | None = None) -> int:
    """``value`` as an int by the type part of :func:`as_int`'s rule alone,
    for C types wider than its bound (``size_t``): the caller checks the
    range.

    Raises
    ------
    TypeError
        As :func:`as_int`.
    """
    try:
        return as_int(value, name, expected)
    except ValueError:        # the rule took the type; only its bound refused it
        return operator.index(value)


def as_size(value: Any, name: str) -> int:
    """``value`` as an int >= 0 (the rule of :func:`as_int`); ValueError
    names ``name`` and the value."""
    return _hipfile.as_size(value, name)


def as_positive(value: Any, name: str) -> int:
    """``value`` as an int > 0 (the rule of :func:`as_int`)."""
    return _hipfile.as_positive(value, name)


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
    return _hipfile.as_timeout(timeout, name)


#: The end of a wait (``Deadline(timeout)``; ``left(cap)``, ``passed()``):
#: how every wait of the package counts down.
Deadline = _hipfile.Deadline

#: Longest single blocking wait of :func:`wait_event`, so that signals are seen.
WAIT_SLICE = 0.05


def wait_event(event: threading.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set, in short slices: a signal delivered to
    another thread (Ctrl-C can land on any thread) is handled by the main
    thread between them. True once set, False when ``timeout`` seconds
    (None: no limit) passed first."""
    return wait_slices(event.wait, Deadline(timeout), WAIT_SLICE)


def wait_slices(wait_slice: Callable[[float], object], deadline: Deadline,
                slice_s: float) -> bool:
    """The package's one interruptible wait loop (``_wait.wait_sliced``):
    ``wait_slice(seconds)`` waits at most ``seconds`` (at most ``slice_s``)
    and returns true once the wait is over; called until it does (True) or
    ``deadline`` passed (False), signals handled between slices."""
    return bool(_hipfile.wait_slices(wait_slice, deadline, slice_s))


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
