"""Device memory registered with hipFile."""

from __future__ import annotations

import ctypes
from typing import Any

from hipfile._interop import as_int, buffer_info, pointer_value
from hipfile._lib._hipfile import _BufferCore
from hipfile._lifetime import RegistrationLifetime

__all__ = ["Buffer"]


class Buffer(_BufferCore, RegistrationLifetime):
    """A range of device memory, optionally registered with hipFile.

    ``Buffer`` never owns the allocation: it keeps the object it was made
    from alive and manages the registration. Registration only speeds up
    repeated I/O; unregistered buffers work too.

    Parameters
    ----------
    buffer_ptr
        The memory: an int address, a HIP-Python ``Pointer``/``DeviceArray``,
        a ``ctypes.c_void_p``, or (with ``length`` omitted) any object with
        ``__cuda_array_interface__`` or ``__dlpack__`` (PyTorch, CuPy).
    length
        Size in bytes; required for bare addresses, defaults to the object's
        size otherwise.
    flags
        Registration flags (0 for the default).

    Raises
    ------
    TypeError
        ``length`` is missing for a bare address, or the object is unsupported.
    ValueError
        Negative length, or a length larger than the object.

    Examples
    --------
    >>> with Buffer(device_array) as buf:      # registers, deregisters
    ...     fh.read(buf)

    See Also
    --------
    hipFileBufRegister, hipFileBufDeregister
    """

    def __init__(self, buffer_ptr: Any, length: int | None = None, flags: int = 0) -> None:
        if isinstance(buffer_ptr, _BufferCore):
            ptr, size, owner = buffer_ptr.ptr, buffer_ptr.length, buffer_ptr
        elif length is None:
            ptr, size, owner = buffer_info(buffer_ptr)
        else:
            try:
                ptr, size, owner = buffer_info(buffer_ptr)
            except TypeError:
                ptr, size, owner = pointer_value(buffer_ptr), None, buffer_ptr
        if length is not None:
            length = as_int(length, "length")
            if length < 0:
                raise ValueError(f"length must be >= 0, got {length}")
            if size is not None and length > size:
                raise ValueError(f"length {length} exceeds the object's {size} bytes")
            size = length
        if size is None:
            raise TypeError("length is required for a bare address")
        if ptr == 0 and size:
            raise ValueError("cannot use a NULL pointer")
        self._setup(ptr, size, flags, owner)

    @classmethod
    def from_ctypes_void_p(cls, ctypes_void_p: ctypes.c_void_p, length: int,
                           flags: int = 0) -> Buffer:
        """A ``Buffer`` from a ``ctypes.c_void_p`` (upstream's constructor).

        Raises
        ------
        ValueError
            If the pointer is NULL.
        """
        if ctypes_void_p.value is None:
            raise ValueError("Cannot pass in a null pointer.")
        return cls(ctypes_void_p.value, length, flags)

    def __len__(self) -> int:
        return int(self.length)

    def __repr__(self) -> str:
        state = "registered" if self.registered else "unregistered"
        return f"<hipfile.Buffer ptr={self.ptr:#x} length={self.length} {state}>"
