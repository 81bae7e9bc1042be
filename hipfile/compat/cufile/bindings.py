"""cufile-python's ``cufile.bindings`` functions, over hipFile.

Code that calls cufile-python's thin layer directly::

    from cufile.bindings import cuFileDriverOpen, cuFileHandleRegister, cuFileRead

runs on hipFile with the import changed to
``from hipfile.compat.cufile.bindings import ...``. Each function calls the
hipFile function of the same name (``cuFileRead`` is ``hipFileRead``), once,
with the GIL released, through this package's 1:1 layer.

Differences from cufile-python, all stricter:

* a failed call raises the :class:`hipfile.HipFileException` subclass for
  its code, which is also a :class:`RuntimeError` (cufile-python raises
  ``RuntimeError``) and whose message ends in cufile-python's text, e.g.
  ``[cuFileHandleRegister failed (cuFile err=5019, cuda_err=0)]``
  (hipFile's codes are cuFile's);
* ``cuFileRead``/``cuFileWrite`` raise for an error where cufile-python
  returns the negative ``ssize_t`` as a huge ``size_t``: an :class:`OSError`
  for ``errno``, a :class:`hipfile.HipFileException` (also a
  ``RuntimeError``) for a hipFile code;
* arguments are checked: sizes and offsets are ints (``>= 0`` for the
  offsets), buffers and handles non-NULL.

Handles are ``ctypes.c_void_p`` as in cufile-python (``CUfileHandle_t``);
buffers are ``ctypes.c_void_p`` or ints. Nothing here keeps objects alive
or tracks registrations: as with cuFile, deregister before closing the file
descriptor or freeing the memory.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from hipfile._interop import as_int
from hipfile._lib import _hipfile
from hipfile.compat._errors import also
from hipfile.errors import HipFileException

__all__ = [
    "CUfileHandle_t",
    "cuFileBufDeregister",
    "cuFileBufRegister",
    "cuFileDriverClose",
    "cuFileDriverOpen",
    "cuFileHandleDeregister",
    "cuFileHandleRegister",
    "cuFileRead",
    "cuFileWrite",
]

#: A registered file's handle, as cufile-python types it.
CUfileHandle_t = ctypes.c_void_p

T = TypeVar("T")


@contextmanager
def _failing_as(name: str) -> Iterator[None]:
    """A :class:`HipFileException` raised inside becomes also a
    :class:`RuntimeError` carrying cufile-python's text for ``name``."""
    try:
        yield
    except HipFileException as e:
        text = f"{name} failed (cuFile err={e.hipfile_err}, cuda_err={e.hip_err})"
        e._detail = f"{e._detail}; {text}" if e._detail else text
        also(e, RuntimeError)  # in place: a class defined in Python
        raise


def _call(name: str, fn: Callable[..., T], *args: Any) -> T:
    with _failing_as(name):
        return fn(*args)


def _address(value: Any, what: str) -> int:
    """An int address from a ``ctypes.c_void_p`` or an int; NULL refused."""
    if isinstance(value, ctypes.c_void_p):
        address = value.value or 0
    elif isinstance(value, int) and not isinstance(value, bool):
        address = value
    else:
        raise TypeError(f"{what} must be a ctypes.c_void_p or an int, "
                        f"not {type(value).__name__}")
    if address == 0:
        raise ValueError(f"{what} is a NULL pointer")
    if address < 0 or address >= 1 << 64:
        raise ValueError(f"{what} {address:#x} is not an address")
    return address


def _driver_call(name: str, fn: Callable[[], None], summary: str) -> Callable[[], None]:
    """cuFile's driver call ``name`` over ``fn`` (hipFile's call of the same
    name), with its docstring."""

    def call() -> None:
        _call(name, fn)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"""{summary}

    Raises
    ------
    HipFileException
        Also a :class:`RuntimeError`.

    See Also
    --------
    {name.replace("cuFile", "hipFile")}
    """
    return call


cuFileDriverOpen = _driver_call("cuFileDriverOpen", lambda: _hipfile.driver_open(),
                                "Open the driver (one reference per call, as in cuFile).")
cuFileDriverClose = _driver_call(
    "cuFileDriverClose", lambda: _hipfile.driver_close(),
    "Drop one driver reference; at 0 the library drops every registration.")


def cuFileHandleRegister(fd: int) -> ctypes.c_void_p:
    """Register an open file descriptor; returns its handle.

    Raises
    ------
    TypeError
        ``fd`` is not an int.
    HipFileException
        Also a :class:`RuntimeError` (e.g. ``O_APPEND`` descriptors:
        ``InvalidFileOpenFlag``, 5019).

    See Also
    --------
    hipFileHandleRegister
    """
    fd = as_int(fd, "fd")
    return CUfileHandle_t(_call("cuFileHandleRegister", _hipfile.handle_register, fd, 1))


def cuFileHandleDeregister(handle: ctypes.c_void_p | int) -> None:
    """Deregister a file handle (before closing its descriptor). Never
    reuse the handle afterwards.

    Raises
    ------
    TypeError, ValueError
        ``handle`` is not a ``ctypes.c_void_p`` or int, or is NULL.

    See Also
    --------
    hipFileHandleDeregister
    """
    _hipfile.handle_deregister(_address(handle, "handle"))


def cuFileBufRegister(buf: ctypes.c_void_p | int, size: int, flags: int) -> None:
    """Register ``size`` bytes of device memory at ``buf``.

    Raises
    ------
    HipFileException
        Also a :class:`RuntimeError` (e.g. host memory, which AMD's hipFile
        refuses with ``HipMemoryTypeInvalid``, 5013).

    See Also
    --------
    hipFileBufRegister
    """
    base = _address(buf, "buf")
    _call("cuFileBufRegister", _hipfile.buf_register, base, as_int(size, "size"),
          as_int(flags, "flags"))


def cuFileBufDeregister(buf: ctypes.c_void_p | int) -> None:
    """Deregister memory registered by :func:`cuFileBufRegister`.

    Raises
    ------
    HipFileException
        Also a :class:`RuntimeError` (``MemoryNotRegistered``, 5024).

    See Also
    --------
    hipFileBufDeregister
    """
    _call("cuFileBufDeregister", _hipfile.buf_deregister, _address(buf, "buf"))


def _io(name: str, fn: Callable[..., int], handle: Any, buf: Any, size: Any,
        file_offset: Any, dev_offset: Any) -> int:
    h = _address(handle, "handle")
    base = _address(buf, "buf")
    size = as_int(size, "size")
    file_offset = as_int(file_offset, "file_offset")
    dev_offset = as_int(dev_offset, "dev_offset")
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    if file_offset < 0 or dev_offset < 0:
        raise ValueError(f"file_offset and dev_offset must be >= 0, got "
                         f"{file_offset} and {dev_offset}")
    return _call(name, fn, h, base, size, file_offset, dev_offset)


def cuFileRead(handle: ctypes.c_void_p | int, buf: ctypes.c_void_p | int, size: int,
               file_offset: int, dev_offset: int) -> int:
    """One ``hipFileRead`` of ``size`` bytes at ``file_offset`` into
    ``buf + dev_offset``; returns the bytes read (fewer at end of file, or
    a short count the caller repeats).

    Raises
    ------
    OSError
        A system error (by errno).
    HipFileException
        A hipFile error; also a :class:`RuntimeError`.
    TypeError, ValueError
        Bad argument types, negative values or NULL pointers.

    See Also
    --------
    hipFileRead
    """
    return _io("cuFileRead", _hipfile.read, handle, buf, size, file_offset, dev_offset)


def cuFileWrite(handle: ctypes.c_void_p | int, buf: ctypes.c_void_p | int, size: int,
                file_offset: int, dev_offset: int) -> int:
    """One ``hipFileWrite`` of ``size`` bytes from ``buf + dev_offset`` to
    the file at ``file_offset``; returns the bytes written. Raises as
    :func:`cuFileRead`.

    See Also
    --------
    hipFileWrite
    """
    return _io("cuFileWrite", _hipfile.write, handle, buf, size, file_offset, dev_offset)
