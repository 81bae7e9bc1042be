"""KvikIO's ``CuFile`` on hipFile.

Code written for KvikIO's Python API runs with one changed import::

    from hipfile.compat import kvikio        # was: import kvikio

    with kvikio.CuFile(path, "r") as f:
        n = f.read(array)                     # blocking, split into tasks
        future = f.pread(array, size, file_offset, task_size)
        n = future.get()
        stream_future = f.raw_read_async(array, stream)
        n = stream_future.check_bytes_done()

Arguments keep KvikIO's names and order: ``read``/``write``/``pread``/
``pwrite(buf, size=None, file_offset=0, task_size=None)``,
``raw_read``/``raw_write(buf, size=None, file_offset=0, dev_offset=0)``,
``raw_read_async``/``raw_write_async(buf, raw_stream, size=None,
file_offset=0, dev_offset=0)``. ``buf`` is device memory (HIP-Python
``DeviceArray``, PyTorch or CuPy arrays, anything with
``__cuda_array_interface__`` or ``__dlpack__``) or, for the ``read``/
``write``/``pread``/``pwrite`` family, host memory (NumPy), as in KvikIO.

Errors are KvikIO's type, :class:`RuntimeError`, and ours: a failed hipFile
call raises its :class:`hipfile.HipFileException` subclass, a system error
its :class:`OSError` subclass, each also a :class:`RuntimeError`; a missing
file says ``Unable to open file``, a transfer against the file's open mode
``Operation not permitted``; host memory given to a ``raw_`` call raises
``ValueError("Non-CUDA buffers not supported")``.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from hipfile._interop import buffer_info, host_view, io_range_or_host
from hipfile.compat._errors import also
from hipfile.compat.kvikio._page_cache import (
    clear_page_cache,
    drop_file_page_cache,
    drop_system_page_cache,
    get_page_cache_info,
)
from hipfile.driver import Driver
from hipfile.errors import HipFileException
from hipfile.file import FileHandle
from hipfile.file._holder import QuietFileHolder
from hipfile.parallel import IOFuture as _Future

__all__ = ["CuFile", "IOFuture", "IOFutureStream", "clear_page_cache", "drop_file_page_cache",
           "drop_system_page_cache", "get_page_cache_info", "open_flags"]

T = TypeVar("T")


def open_flags(flags: str) -> int:
    """The ``os.open`` flags of a KvikIO flags string.

    ``"r"`` read, ``"w"`` write (created, truncated), and ``"+"`` for
    reading and writing (``"r+"``, ``"w+"``); a ``"b"`` is accepted and
    ignored. ``"a"`` is refused, as in KvikIO (hipFile refuses
    ``O_APPEND`` descriptors too).

    Raises
    ------
    ValueError
        Unknown or unsupported flags.
    TypeError
        ``flags`` is not a str.
    """
    if not isinstance(flags, str):
        raise TypeError(f"flags must be a str, not {type(flags).__name__}")
    if not flags:
        raise ValueError("Unknown file open flag ''")
    if flags[0] == "a":
        raise ValueError("Open flag 'a' isn't supported")
    if flags[0] not in "rw" or set(flags[1:]) - set("+b") or len(flags) > 3:
        raise ValueError(f"Unknown file open flag {flags!r} (expected 'r', 'w', 'r+' or 'w+')")
    rw = "+" in flags
    if flags[0] == "r":
        return (os.O_RDWR if rw else os.O_RDONLY) | os.O_CLOEXEC
    return (os.O_RDWR if rw else os.O_WRONLY) | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC


def _runtime(e: BaseException) -> BaseException:
    """KvikIO raises RuntimeError for library and system failures: ``e``
    as also a RuntimeError (raise what this returns)."""
    if isinstance(e, HipFileException | OSError):
        return also(e, RuntimeError)
    return e


def _deregister(table: dict[int, Any], lock: Any, key: int,
                missing: Callable[[], HipFileException]) -> None:
    """Deregister and forget ``table[key]``, a registration KvikIO's
    module-level calls keep (buffers by allocation, streams by handle),
    under ``lock``; not there: ``missing()``; failures as :func:`_runtime`
    makes them."""
    with lock:
        reg = table.get(key)
        if reg is None:
            raise _runtime(missing())
        try:
            reg.deregister()
        except HipFileException as e:
            raise _runtime(e) from None
        del table[key]


def _kvikio_result(wait: Callable[[], Any]) -> int:
    """``wait()`` as an int, a failure raised as KvikIO raises it (see
    :func:`_runtime`)."""
    try:
        return int(wait())
    except BaseException as e:
        raise _runtime(e) from None


class _Pending:
    """A KvikIO future over one of the binding's (``_inner``)."""

    __slots__ = ("_inner",)

    def __init__(self, inner: Any) -> None:
        self._inner = inner


class IOFuture(_Pending):
    """The future of :meth:`CuFile.pread`/:meth:`CuFile.pwrite` (KvikIO's
    ``IOFuture``): :meth:`get` waits and returns the bytes moved,
    :meth:`done` tells without waiting."""

    __slots__ = ()
    _inner: _Future | Future[int]     # Future: a compatibility-mode transfer

    def get(self) -> int:
        """Wait for every task; returns the bytes moved.

        Raises
        ------
        RuntimeError
            A task failed: the :class:`hipfile.HipFileException` or
            :class:`OSError` it raised, which is also a ``RuntimeError``.
        """
        return _kvikio_result(self._inner.result)

    def done(self) -> bool:
        """Whether every task has ended."""
        return self._inner.done()

    def __repr__(self) -> str:
        return f"<hipfile.compat.kvikio.IOFuture {'done' if self.done() else 'running'}>"


class IOFutureStream(_Pending):
    """The future of :meth:`CuFile.raw_read_async`/:meth:`CuFile.raw_write_async`
    (KvikIO's ``IOFutureStream``). Keep it until :meth:`check_bytes_done`
    has returned; dropping it early is safe (the binding parks its state
    until the stream has passed the operation)."""

    __slots__ = ()

    def check_bytes_done(self) -> int:
        """Synchronise the stream; returns the bytes moved.

        Raises
        ------
        RuntimeError
            The operation failed (its :class:`hipfile.HipFileException` or
            :class:`OSError`, also a ``RuntimeError``).

        See Also
        --------
        hipStreamSynchronize
        """
        return _kvikio_result(self._inner.wait)

    def __repr__(self) -> str:
        return f"<hipfile.compat.kvikio.IOFutureStream {self._inner!r}>"


class CuFile(QuietFileHolder):
    """A file opened and registered for GPU-direct I/O (KvikIO's ``CuFile``).

    Parameters
    ----------
    file
        The path.
    flags
        ``"r"`` (default), ``"w"``, ``"r+"`` or ``"w+"`` (see
        :func:`open_flags`).

    The file is open once constructed; :meth:`close` (or leaving a ``with``
    block) deregisters and closes it.

    Raises
    ------
    RuntimeError
        ``Unable to open file`` (also the :class:`OSError` subclass for the
        errno, e.g. :class:`FileNotFoundError`), or registration failed
        (also the :class:`hipfile.HipFileException`).
    ValueError
        Unknown or unsupported ``flags``.

    See Also
    --------
    hipFileDriverOpen, hipFileHandleRegister
    """

    def __init__(self, file: str | os.PathLike[str], flags: str = "r") -> None:
        self._flags = flags
        self._fh: FileHandle | None = None
        self._driver: Driver | None = None
        os_flags = open_flags(flags)
        path = os.fspath(file)
        try:
            driver = Driver().open()
        except HipFileException as e:
            raise _runtime(e) from None
        try:
            self._fh = FileHandle(path, os_flags).open()
        except OSError as e:
            driver.close()
            err = OSError(e.errno, f"Unable to open file. {e.strerror}", e.filename)
            raise also(err, RuntimeError) from e
        except BaseException as e:
            driver.close()
            raise _runtime(e) from None
        self._driver = driver

    # -- state ---------------------------------------------------------------------------

    def close(self) -> None:
        """Deregister and close the file (idempotent).

        Raises
        ------
        InFlightError
            ``pread``/``pwrite`` tasks or async reads on it are still running.

        See Also
        --------
        hipFileHandleDeregister, hipFileDriverClose
        """
        if not self._close_fh():
            return
        driver, self._driver = self._driver, None
        if driver is not None:
            driver.close()

    @property
    def closed(self) -> bool:
        """Whether the file is closed."""
        return self._fh is None

    def fileno(self) -> int:
        """The file descriptor.

        Raises
        ------
        ValueError
            The file is closed (``ClosedFileError``).
        """
        return self._file().fileno()

    def open_flags(self) -> int:
        """The descriptor's flags (``fcntl(F_GETFL)``, as ``open(2)`` takes them)."""
        return fcntl.fcntl(self.fileno(), fcntl.F_GETFL)

    def nbytes(self) -> int:
        """The file's size in bytes."""
        return self._file().size()

    def is_direct_io_supported(self) -> bool:
        """Whether Direct I/O (``O_DIRECT``) can be used on this file, as
        KvikIO answers it: False when ``defaults`` ``compat_mode`` prefers
        POSIX I/O and neither ``auto_direct_io_read`` nor
        ``auto_direct_io_write`` is set, else whether the file system
        accepts an ``O_DIRECT`` open of the file. The settings are read at
        the call (KvikIO reads them when the file is opened).

        Raises
        ------
        ValueError
            The file is closed (``ClosedFileError``).

        See Also
        --------
        open
        """
        from hipfile.compat.kvikio import defaults

        fh = self._file()
        if (defaults.is_compat_mode_preferred() and not defaults.get("auto_direct_io_read")
                and not defaults.get("auto_direct_io_write")):
            return False
        direct = getattr(os, "O_DIRECT", 0)
        if not direct or fh.path is None:
            return False
        try:
            fd = os.open(os.fspath(fh.path), os.O_RDONLY | direct | os.O_CLOEXEC)
        except OSError:
            return False
        os.close(fd)
        return True

    def __enter__(self) -> CuFile:
        return self

    def __repr__(self) -> str:
        state = "closed" if self._fh is None else f"fd={self._fh.fd}"
        return f"<hipfile.compat.kvikio.CuFile flags={self._flags!r} {state}>"

    def _file(self) -> FileHandle:
        fh = self._fh
        if fh is None:
            from hipfile.errors import ClosedFileError

            raise ClosedFileError("the CuFile is closed")
        return fh

    def _for(self, write: bool) -> FileHandle:
        """The open file, after checking that its mode allows the transfer."""
        fh = self._file()
        mode = fcntl.fcntl(fh.fileno(), fcntl.F_GETFL) & os.O_ACCMODE
        if mode == (os.O_RDONLY if write else os.O_WRONLY):
            opened = "read-only" if write else "write-only"
            err = OSError(errno.EBADF, f"Operation not permitted: the file was opened "
                          f"{opened} (flags {self._flags!r})", fh.path)
            raise also(err, RuntimeError)
        return fh

    # -- parallel I/O (device or host memory) -----------------------------------------------

    def pread(self, buf: Any, size: int | None = None, file_offset: int = 0,
              task_size: int | None = None) -> IOFuture:
        """Read ``size`` bytes (None: the whole buffer) at ``file_offset``
        into ``buf`` in tasks of ``task_size`` bytes on the thread pool;
        returns at once an :class:`IOFuture`.

        Raises
        ------
        RuntimeError
            The file's mode does not allow reading ("Operation not
            permitted").
        TypeError, ValueError
            Bad arguments (nothing is submitted).

        See Also
        --------
        hipFileRead, preadv
        """
        fh = self._for(False)
        return IOFuture(self._compat(fh, False, buf, size, file_offset)
                        or fh.pread(buf, size, file_offset, task_size=task_size))

    def pwrite(self, buf: Any, size: int | None = None, file_offset: int = 0,
               task_size: int | None = None) -> IOFuture:
        """Write ``size`` bytes (None: the whole buffer) of ``buf`` to the
        file at ``file_offset`` in tasks; returns at once an
        :class:`IOFuture`. Raises as :meth:`pread`.

        See Also
        --------
        hipFileWrite, pwritev
        """
        fh = self._for(True)
        return IOFuture(self._compat(fh, True, buf, size, file_offset)
                        or fh.pwrite(buf, size, file_offset, task_size=task_size))

    def _compat(self, fh: FileHandle, write: bool, buf: Any, size: int | None,
                file_offset: int) -> Any:
        """With ``defaults`` ``compat_mode`` ON, the future of a transfer of
        device memory through pinned bounce buffers of ``bounce_buffer_size``
        bytes with POSIX calls, as KvikIO's compatibility mode moves it;
        None otherwise (host memory, or another mode)."""
        from hipfile.compat.kvikio import _bounce, defaults
        from hipfile.parallel import _default_executor

        if defaults.get("compat_mode") != defaults.CompatMode.ON:
            return None
        ptr, _, _, nbytes, foff, _, view = io_range_or_host(buf, size, file_offset, 0)
        if view is not None:
            return None       # host memory: POSIX calls in any mode
        return _bounce.submit(fh, write, ptr, nbytes, foff,
                              int(defaults.get("bounce_buffer_size")), _default_executor())

    def read(self, buf: Any, size: int | None = None, file_offset: int = 0,
             task_size: int | None = None) -> int:
        """:meth:`pread` and wait: returns the bytes read (fewer at end of file).

        See Also
        --------
        hipFileRead
        """
        return self.pread(buf, size, file_offset, task_size).get()

    def write(self, buf: Any, size: int | None = None, file_offset: int = 0,
              task_size: int | None = None) -> int:
        """:meth:`pwrite` and wait: returns the bytes written.

        See Also
        --------
        hipFileWrite
        """
        return self.pwrite(buf, size, file_offset, task_size).get()

    # -- single calls (device memory only) -------------------------------------------------

    def _raw(self, write: bool, buf: Any, call: Callable[[FileHandle], T]) -> T:
        """One of the single calls: the file must be open for reading (or
        ``write``), ``buf`` device memory ("Non-CUDA buffers not supported");
        a hipFile or system failure of ``call(file handle)`` is raised as
        KvikIO raises it."""
        fh = self._for(write)
        try:
            buffer_info(buf)
        except (TypeError, ValueError, BufferError):
            if host_view(buf) is not None:
                raise ValueError("Non-CUDA buffers not supported") from None
            raise
        try:
            return call(fh)
        except (HipFileException, OSError) as e:
            raise _runtime(e) from None

    def raw_read(self, buf: Any, size: int | None = None, file_offset: int = 0,
                 dev_offset: int = 0) -> int:
        """Read with one ``hipFileRead`` (repeated only for a short count),
        on the calling thread, into device memory at ``dev_offset``.

        Raises
        ------
        ValueError
            Host memory ("Non-CUDA buffers not supported"), or a range
            outside ``buf``.
        RuntimeError
            As :meth:`pread`, or a hipFile or system error.

        See Also
        --------
        hipFileRead
        """
        return self._raw(False, buf, lambda fh: fh.read(buf, size, file_offset, dev_offset))

    def raw_write(self, buf: Any, size: int | None = None, file_offset: int = 0,
                  dev_offset: int = 0) -> int:
        """Write from device memory at ``dev_offset`` with ``hipFileWrite`` on
        the calling thread. Raises as :meth:`raw_read`.

        See Also
        --------
        hipFileWrite
        """
        return self._raw(True, buf, lambda fh: fh.write(buf, size, file_offset, dev_offset))

    def raw_read_async(self, buf: Any, raw_stream: Any, size: int | None = None,
                       file_offset: int = 0, dev_offset: int = 0) -> IOFutureStream:
        """Enqueue a read on ``raw_stream`` (an int handle, a HIP-Python
        ``hipStream_t``, a PyTorch or CuPy stream) with ``hipFileReadAsync``;
        returns at once an :class:`IOFutureStream`.

        Raises
        ------
        ValueError
            Host memory, or a range outside ``buf``.
        RuntimeError
            As :meth:`raw_read` (at submission).

        See Also
        --------
        hipFileReadAsync
        """
        return IOFutureStream(self._raw(False, buf, lambda fh: fh.read_async(
            buf, size, file_offset, dev_offset, raw_stream)))

    def raw_write_async(self, buf: Any, raw_stream: Any, size: int | None = None,
                        file_offset: int = 0, dev_offset: int = 0) -> IOFutureStream:
        """Enqueue a write on ``raw_stream`` with ``hipFileWriteAsync``;
        returns at once an :class:`IOFutureStream`. Raises as
        :meth:`raw_read_async`.

        See Also
        --------
        hipFileWriteAsync
        """
        return IOFutureStream(self._raw(True, buf, lambda fh: fh.write_async(
            buf, size, file_offset, dev_offset, raw_stream)))

