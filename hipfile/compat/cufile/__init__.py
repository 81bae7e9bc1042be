"""The cufile-python API on hipFile.

Code written against cufile-python (``from cufile import CuFile,
CuFileDriver``) runs on hipFile with one changed import::

    from hipfile.compat.cufile import CuFile, CuFileDriver

    CuFileDriver()                                  # opens the driver once
    with CuFile("kv.bin", "r+", use_direct_io=True) as f:
        f.write(ctypes.c_void_p(base), nbytes, file_offset=0, dev_offset=off)
        n = f.read(ctypes.c_void_p(base), nbytes, 0, off)

The same names as cufile-python, with the same meanings:

* ``dest``/``src`` is the **base** address of device memory (a
  ``ctypes.c_void_p`` or an int) and ``dev_offset`` an offset from it, as in
  ``cuFileRead(handle, base, size, file_offset, dev_offset)``. The range
  ``[dev_offset, dev_offset + size)`` is handed to hipFile; a registered
  :class:`hipfile.Buffer` or any device array object is accepted too, and is
  then checked against its own length.
* ``mode`` is one of ``"r"``, ``"r+"``, ``"w"``, ``"w+"``, ``"a"``, ``"a+"``;
  ``use_direct_io=True`` adds ``O_DIRECT``.
* A bare address (``ctypes.c_void_p`` or int) carries no size: a transfer
  that runs past the end of its device allocation fails in hipFile with
  ``INVALID_VALUE`` (5022), and the error names the size, the offset and the
  allocation (``hipMemGetAddressRange``), as the core API does.
* The file is opened by :meth:`CuFile.open` or the context manager;
  :attr:`CuFile.is_open` tells, and :attr:`CuFile.handle` is ``None`` while
  closed.

Exceptions are cufile-python's types and ours at once:

* a failed hipFile call (driver open, file registration, a read or write the
  library refuses) raises the :class:`hipfile.HipFileException` subclass for
  its code, which is here also a :class:`RuntimeError`, as cufile-python
  raises ``RuntimeError("cuFileHandleRegister failed (cuFile err=..., ...)")``;
* an unknown ``mode`` raises :class:`InvalidModeError`, both a
  :class:`ValueError` and the :class:`KeyError` cufile-python's table lookup
  raises;
* I/O on a file that is not open raises ``OSError`` (``EBADF``) whose message
  holds cufile-python's ``File is not open.``;
* a system error (``os.open``, or ``errno`` from the library) is the
  :class:`OSError` subclass for its errno, as in cufile-python for
  ``os.open``.

Where this module differs, it is stricter: errors raise instead of returning
a negative or wrapped count (cufile-python returns hipFile's ``ssize_t`` as a
``size_t``), and ranges are checked before the library is called.

:mod:`hipfile.compat.cufile.bindings` has cufile-python's ``cufile.bindings``
functions (``cuFileDriverOpen``, ``cuFileHandleRegister``, ``cuFileRead``,
...) over hipFile's.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import os
import threading
from typing import Any

from hipfile._lifetime import guarded_del
from hipfile.buffer import Buffer
from hipfile.compat._errors import also
from hipfile.driver import Driver, process_driver
from hipfile.enums import OpError
from hipfile.errors import HipFileException
from hipfile.file import FileHandle
from hipfile.file._holder import QuietFileHolder

__all__ = ["MODES", "CuFile", "CuFileDriver", "InvalidModeError"]


def __dir__() -> list[str]:
    """The public names (cufile-python's), the submodule ``bindings`` and
    the module's own attributes: not the names this module imports for its
    own use (``os``, ``ctypes``, ``Any``, ...)."""
    own = [n for n in globals() if n.startswith("__") and n.endswith("__")]
    return sorted({*__all__, *own, *(["bindings"] if "bindings" in globals() else [])})


class InvalidModeError(ValueError, KeyError):
    """An unknown ``mode`` string: a :class:`ValueError`, and the
    :class:`KeyError` that cufile-python raises for it."""

    __str__ = BaseException.__str__



#: ``mode`` strings and their ``os.open`` flags (cufile-python's table).
MODES: dict[str, int] = {
    "r": os.O_RDONLY,
    "r+": os.O_RDWR,
    "w": os.O_CREAT | os.O_WRONLY | os.O_TRUNC,
    "w+": os.O_CREAT | os.O_RDWR | os.O_TRUNC,
    "a": os.O_CREAT | os.O_WRONLY | os.O_APPEND,
    "a+": os.O_CREAT | os.O_RDWR | os.O_APPEND,
}


class CuFileDriver:
    """The process's hipFile driver, as cufile-python's singleton.

    Every call ``CuFileDriver()`` returns the same object; the first opens the
    driver (one reference, held until :meth:`close` or interpreter exit).
    After :meth:`close`, the next ``CuFileDriver()`` opens it again.
    :class:`CuFile` does not need it (opening a file takes the process's
    driver reference, :func:`hipfile.process_driver`, held until exit), but
    code that creates one first keeps working.

    Raises
    ------
    HipFileLibraryNotFound
        No libhipfile is installed.
    HipFileException
        The driver could not be opened (also a :class:`RuntimeError`).

    See Also
    --------
    hipFileDriverOpen, hipFileDriverClose
    """

    _instance: CuFileDriver | None = None
    _lock = threading.Lock()
    _driver: Driver

    def __new__(cls) -> CuFileDriver:
        with cls._lock:
            inst = cls._instance
            if inst is None or not inst._driver.is_open:
                inst = super().__new__(cls)
                try:
                    inst._driver = Driver().open()
                except HipFileException as e:
                    also(e, RuntimeError)  # in place: a class defined in Python
                    raise
                cls._instance = inst
            return inst

    @property
    def is_open(self) -> bool:
        """Whether this object still holds its driver reference."""
        return self._driver.is_open

    def close(self) -> None:
        """Release the driver reference (idempotent).

        Raises
        ------
        InFlightError, HipFileException
            As :meth:`hipfile.Driver.close`.

        See Also
        --------
        hipFileDriverClose
        """
        with self._lock:
            if type(self)._instance is self:
                type(self)._instance = None
            self._driver.close()

    def _collected(self) -> None:
        try:
            self._driver.close()
        except Exception:
            pass

    __del__ = guarded_del(_collected)

    def __repr__(self) -> str:
        return f"<hipfile.compat.cufile.CuFileDriver {'open' if self.is_open else 'closed'}>"


@atexit.register
def _close_at_exit() -> None:
    inst = CuFileDriver._instance
    if inst is not None:
        try:
            inst.close()
        except Exception:
            pass


class CuFile(QuietFileHolder):
    """A file for GPU-direct I/O with cufile-python's ``CuFile`` interface.

    Parameters
    ----------
    path
        The file.
    mode
        ``"r"``, ``"r+"``, ``"w"``, ``"w+"``, ``"a"`` or ``"a+"`` (see
        :data:`MODES`).
    use_direct_io
        Open with ``O_DIRECT`` (the GPU-direct path; offsets, sizes and
        addresses should then be 4 KiB aligned).

    Raises
    ------
    InvalidModeError
        An unknown ``mode`` (a :class:`ValueError` and a :class:`KeyError`).
    NotImplementedError
        ``use_direct_io`` on a system without ``O_DIRECT``.

    See Also
    --------
    hipFileHandleRegister, hipFileRead, hipFileWrite
    """

    def __init__(self, path: str | os.PathLike[str], mode: str = "r",
                 use_direct_io: bool = False) -> None:
        if mode not in MODES:
            raise InvalidModeError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
        flags = MODES[mode]
        if use_direct_io:
            direct = getattr(os, "O_DIRECT", 0)
            if not direct:
                raise NotImplementedError("O_DIRECT is not available on this system")
            flags |= direct
        self._path = path
        self._mode = mode
        self._flags = flags
        self._use_direct_io = bool(use_direct_io)
        self._fh: FileHandle | None = None

    # -- state -----------------------------------------------------------

    @property
    def path(self) -> str | os.PathLike[str]:
        """The file's path."""
        return self._path

    @property
    def mode(self) -> str:
        """The mode string."""
        return self._mode

    @property
    def use_direct_io(self) -> bool:
        """Whether the file is opened with ``O_DIRECT``."""
        return self._use_direct_io

    @property
    def is_open(self) -> bool:
        """Whether the file is open and registered."""
        return self._fh is not None

    @property
    def handle(self) -> int | None:
        """The hipFile handle, or ``None`` while closed."""
        return None if self._fh is None else self._fh.handle

    @property
    def file_handle(self) -> FileHandle | None:
        """The underlying :class:`hipfile.FileHandle`, or ``None`` while closed."""
        return self._fh

    def get_handle(self) -> int | None:
        """The open file descriptor, or ``None`` while closed (cufile-python's
        ``get_handle``)."""
        return None if self._fh is None else self._fh.fd

    # -- lifetime --------------------------------------------------------

    def open(self) -> None:
        """Open the file and register it with hipFile (idempotent).

        Raises
        ------
        OSError
            ``os.open`` failed.
        HipFileException
            The driver could not be opened or the file not registered (also
            a :class:`RuntimeError`, as in cufile-python).

        See Also
        --------
        hipFileDriverOpen, hipFileHandleRegister
        """
        if self._fh is not None:
            return
        fh = None
        try:
            process_driver()      # the process's reference: opened once, kept until exit
            fh = FileHandle(self._path, self._flags).open()
            _ = fh.handle         # registered now, as cufile-python's open() does
        except HipFileException as e:
            if fh is not None:
                fh.close()
            also(e, RuntimeError)  # in place: a class defined in Python
            raise
        self._fh = fh

    def close(self) -> None:
        """Deregister and close the file (idempotent).

        Raises
        ------
        InFlightError
            Parallel I/O on this file is still running.

        See Also
        --------
        hipFileHandleDeregister, hipFileDriverClose
        """
        self._close_fh()

    def __enter__(self) -> CuFile:
        self.open()
        return self

    def __repr__(self) -> str:
        state = f"fd={self.get_handle()}" if self.is_open else "closed"
        return f"<hipfile.compat.cufile.CuFile path={self._path!r} mode={self._mode!r} {state}>"

    # -- I/O -------------------------------------------------------------

    def read(self, dest: Any, size: int, file_offset: int = 0, dev_offset: int = 0) -> int:
        """Read ``size`` bytes at ``file_offset`` into ``dest + dev_offset``.

        Parameters
        ----------
        dest
            Base of the device memory: ``ctypes.c_void_p``, an int address, a
            :class:`hipfile.Buffer` (registered or not) or a device array.
        size
            Bytes to read.
        file_offset
            Offset in the file.
        dev_offset
            Offset from ``dest``.

        Returns
        -------
        int
            Bytes read; fewer than ``size`` at end of file.

        Raises
        ------
        OSError
            The file is not open (``EBADF``, "File is not open."), or a
            system error.
        TypeError, ValueError
            Non-integer or negative sizes and offsets, a NULL pointer, or a
            range outside a sized ``dest``.
        HipFileException
            A hipFile error (also a :class:`RuntimeError`).

        See Also
        --------
        hipFileRead
        """
        return self._io(False, dest, size, file_offset, dev_offset)

    def write(self, src: Any, size: int, file_offset: int = 0, dev_offset: int = 0) -> int:
        """Write ``size`` bytes from ``src + dev_offset`` to the file at
        ``file_offset``. Arguments and exceptions as :meth:`read`.

        In mode ``"a"`` and ``"a+"`` the bytes go to the end of the file
        whatever ``file_offset`` says, as ``pwrite`` places them on an
        ``O_APPEND`` descriptor (the file is an append handle,
        :attr:`hipfile.FileHandle.appends`).

        Returns
        -------
        int
            Bytes written.

        See Also
        --------
        hipFileWrite
        """
        return self._io(True, src, size, file_offset, dev_offset)

    def _io(self, write: bool, target: Any, size: int, file_offset: int, dev_offset: int) -> int:
        fh = self._open_file()
        buf, size, file_offset, dev_offset = _target(target, size, file_offset, dev_offset)
        try:
            if write and fh.appends:   # O_APPEND: pwrite's offset is ignored
                return fh.write(buf, size, None, dev_offset)
            return (fh.write if write else fh.read)(buf, size, file_offset, dev_offset)
        except HipFileException as e:
            also(e, RuntimeError)  # in place: a class defined in Python
            if e.err == OpError.INVALID_VALUE and isinstance(buf, Buffer) and buf.bare:
                detail = _overrun(buf.ptr, size, dev_offset)
                if detail:
                    e._detail = detail
            raise

    def _open_file(self) -> FileHandle:
        fh = self._fh
        if fh is None:
            # cufile-python's message, with the errno and the path
            raise OSError(errno.EBADF, "File is not open.", os.fspath(self._path))
        return fh


def _overrun(ptr: int, size: int, dev_offset: int) -> str | None:
    """What is wrong when ``[dev_offset, dev_offset + size)`` from the bare
    address ``ptr`` overruns the device allocation holding it (as the core
    API says it for a :class:`hipfile.Buffer`), or None when it does not or
    the runtime cannot tell.

    See Also
    --------
    hipMemGetAddressRange
    """
    from hipfile._lib import _hip

    hip: Any = _hip.hip
    try:
        err, base, asize = hip.hipMemGetAddressRange(ptr)
    except Exception:               # a runtime without the function
        return None
    if err != hip.hipError_t.hipSuccess or base is None:
        return (f"size {size} at dev_offset {dev_offset} from the bare address {ptr:#x}: "
                "the address lies in no device allocation the HIP runtime knows")
    lo, asize = int(base), int(asize)
    if not lo <= ptr < lo + asize:
        return None
    room = lo + asize - ptr
    if dev_offset + size <= room:
        return None
    return (f"size {size} at dev_offset {dev_offset} overruns the device allocation: the "
            f"address {ptr:#x} lies in the {asize}-byte allocation at {lo:#x}, which ends "
            f"{room} bytes after it")


def _target(dest: Any, size: Any, file_offset: Any,
            dev_offset: Any) -> tuple[Any, int, int, int]:
    """The buffer, size and offsets for one transfer (``dest`` as a base)."""
    from hipfile._interop import as_int, buffer_info, pointer_value

    size = as_int(size, "size")
    file_offset = as_int(file_offset, "file_offset")
    dev_offset = as_int(dev_offset, "dev_offset")
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    if dev_offset < 0:
        raise ValueError(f"dev_offset must be >= 0, got {dev_offset}")
    if isinstance(dest, ctypes.c_void_p):
        if dest.value is None:
            raise ValueError("dest is a NULL pointer")
        return Buffer(dest.value, dev_offset + size), size, file_offset, dev_offset
    if isinstance(dest, int) and not isinstance(dest, bool):
        if dest == 0:
            raise ValueError("dest is a NULL pointer")
        return Buffer(dest, dev_offset + size), size, file_offset, dev_offset
    try:
        buffer_info(dest)
    except TypeError:
        # a sizeless pointer object (HIP-Python ``Pointer``): a base address
        return _target(pointer_value(dest), size, file_offset, dev_offset)
    return dest, size, file_offset, dev_offset
