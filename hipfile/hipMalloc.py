"""Upstream's device-memory helpers: ``from hipfile.hipMalloc import
hipFree, hipMalloc`` (AMD's ``hipfile`` 0.4 package and its example)
works here unchanged.

:func:`hipMalloc` returns the device address as a ``ctypes.c_void_p``
(what :meth:`hipfile.Buffer.from_ctypes_void_p` takes) and :func:`hipFree`
frees it. Both call the HIP runtime through HIP-Python. New code should
allocate with HIP-Python, PyTorch or CuPy and pass those objects to hipfile
directly.
"""

from __future__ import annotations

import ctypes

from hipfile._interop import as_size
from hipfile._lib._hip import check, hip
from hipfile.compat._errors import also
from hipfile.errors import HipFileException

__all__ = ["hipFree", "hipMalloc"]


def hipMalloc(size_bytes: int) -> ctypes.c_void_p:
    """Allocate ``size_bytes`` of device memory on the current device.

    Returns
    -------
    ctypes.c_void_p
        The device address; free it with :func:`hipFree`.

    Raises
    ------
    TypeError
        ``size_bytes`` is not an int.
    ValueError
        ``size_bytes`` is negative.
    HipRuntimeError
        The runtime refused (also a :class:`RuntimeError`, as upstream
        raises).

    See Also
    --------
    hipMalloc
    """
    size_bytes = as_size(size_bytes, "size_bytes")
    hip_any: object = hip
    try:
        ptr = check(hip_any.hipMalloc(size_bytes), "hipMalloc")  # type: ignore[attr-defined]
    except HipFileException as e:
        raise also(e, RuntimeError) from None
    return ctypes.c_void_p(int(ptr))


def hipFree(ptr: ctypes.c_void_p | int | None) -> None:
    """Free device memory that :func:`hipMalloc` allocated (None or a NULL
    pointer does nothing).

    Raises
    ------
    TypeError
        ``ptr`` is not a ``ctypes.c_void_p`` or an int.
    HipRuntimeError
        The runtime refused (also a :class:`RuntimeError`).

    See Also
    --------
    hipFree
    """
    if isinstance(ptr, ctypes.c_void_p):
        address = ptr.value or 0
    elif ptr is None:
        address = 0
    elif isinstance(ptr, int) and not isinstance(ptr, bool):
        address = ptr
    else:
        raise TypeError(f"ptr must be a ctypes.c_void_p or an int, not {type(ptr).__name__}")
    if address == 0:
        return
    hip_any: object = hip
    try:
        check(hip_any.hipFree(address), "hipFree")  # type: ignore[attr-defined]
    except HipFileException as e:
        raise also(e, RuntimeError) from None
