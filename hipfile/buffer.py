"""Device memory registered with hipFile."""

from __future__ import annotations

import ctypes
from typing import Any

from hipfile._interop import as_int, buffer_info, pointer_value
from hipfile._lib._hipfile import BufferCore
from hipfile._lifetime import RegistrationLifetime

__all__ = ["Buffer"]


class Buffer(BufferCore, RegistrationLifetime):
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

    A buffer made from a bare address (an int, ``ctypes.c_void_p`` or a
    sizeless pointer, with ``length``) follows cuFile's convention: the
    address is a base and ``buffer_offset`` an offset from it, so a transfer
    may reach past ``length``, up to the end of the device allocation that
    holds the address (asked of ``hipMemGetAddressRange`` when a transfer goes
    past ``length``); beyond it, it is refused. Where the runtime knows no
    allocation at that address, ``length`` is the limit and the error says
    so. A registered buffer is held to ``length``, its registration, as
    hipFile holds it. A buffer made from an object with a size (a
    ``DeviceArray``, a tensor) is always held to that size.
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
    hipFileBufRegister, hipFileBufDeregister, hipMemGetAddressRange
    """

    def __init__(self, buffer_ptr: Any, length: int | None = None, flags: int = 0) -> None:
        bare = False
        if isinstance(buffer_ptr, BufferCore):
            ptr, size, owner = buffer_ptr.ptr, buffer_ptr.length, buffer_ptr
            bare = buffer_ptr.bare
        elif length is None:
            ptr, size, owner = buffer_info(buffer_ptr)
        else:
            try:
                ptr, size, owner = buffer_info(buffer_ptr)
            except TypeError:
                ptr, size, owner = pointer_value(buffer_ptr), None, buffer_ptr
                bare = True
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
        self._setup(ptr, size, flags, owner, bare)

    @classmethod
    def from_ctypes_void_p(cls, ctypes_void_p: ctypes.c_void_p, length: int,
                           flags: int = 0) -> Buffer:
        """A ``Buffer`` from a ``ctypes.c_void_p`` (upstream's constructor).

        The address is a base, as in cuFile: transfers may use any
        ``buffer_offset`` inside the device allocation that holds it (see
        :class:`Buffer`).

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
