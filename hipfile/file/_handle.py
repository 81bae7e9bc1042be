"""Files registered with hipFile: synchronous and stream-ordered I/O.

:class:`FileHandle` is one class over its compiled core
(``hipfile._lib._core.FileCore``: open state, registration, the counts of
operations in flight). What the core needs of the handle is given to it
when the handle is made, and the core never calls up into the class: the
handle's descriptors (:class:`~hipfile.file._descriptors.Descriptors`) and,
for an append handle, where its writes go
(:class:`~hipfile.file._append.AppendEnd`). The stream-ordered calls are
functions of :mod:`hipfile.file._stream_io` bound as its methods.
"""

from __future__ import annotations

import errno
import os
import stat
from types import TracebackType
from typing import TYPE_CHECKING, Any

from hipfile import _lifetime
from hipfile._interop import as_timeout, check_writable, io_range_or_host
from hipfile._lib import _hipfile
from hipfile._lib._errors import name_file
from hipfile._lib._hipfile import FileCore
from hipfile._lifetime import drain, exit_block, finalize, guarded_del
from hipfile.enums import FileHandleType
from hipfile.errors import ClosedFileError, InFlightTimeoutError
from hipfile.file import _stream_io
from hipfile.file._append import AppendEnd
from hipfile.file._args import fourth_argument, mode_string, parse_mode, raise_if_read_only
from hipfile.file._descriptors import Descriptors
from hipfile.file._kinds import (
    check_descriptor,
    check_path,
    claim_descriptor,
    release_descriptor,
)
from hipfile.file._transfer import host_transfer, transfer

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from hipfile.parallel import IOFuture

__all__ = ["FileHandle"]


class FileHandle(FileCore):
    """A file opened with ``os.open`` and registered with hipFile.

    Parameters
    ----------
    path
        File to open (ignored when ``fd`` is given).
    flags
        ``os.open`` flags, e.g. ``os.O_RDONLY | os.O_DIRECT``, or a mode
        string as :func:`hipfile.open` takes it (``"r"``, ``"rb"``,
        ``"r+b"``, ``"w+"``, ...). ``O_DIRECT`` enables the GPU-direct path;
        without it hipFile uses its buffered fallback (compat mode).
    mode
        Permission bits for a created file (``0o644``, upstream's
        argument), or a mode string when ``flags`` is left out.
    handle_type
        Only ``FileHandleType.OPAQUE_FD`` is supported on Linux.
    fd
        Register this caller-owned descriptor instead of opening ``path``;
        :meth:`close` then deregisters it but leaves it open.

    The file is opened by :meth:`open` or by entering the context manager
    (upstream's contract); ``FileHandle.from_fd`` and :func:`hipfile.open`
    return an open handle.

    See Also
    --------
    hipFileHandleRegister, hipFileHandleDeregister
    """

    DEFAULT_MODE = stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH  # 0o644

    # hipFileReadAsync/hipFileWriteAsync: compiled functions of _aio bound
    # as methods, so the submit path runs in C from the call on.
    read_async = _hipfile.aio_read_async
    write_async = _hipfile.aio_write_async

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        flags: int | str = os.O_RDONLY,
        mode: int | str = DEFAULT_MODE,
        handle_type: FileHandleType = FileHandleType.OPAQUE_FD,
        *,
        fd: int | None = None,
    ) -> None:
        text: str | None = None
        if isinstance(mode, str):
            if flags != os.O_RDONLY:
                raise TypeError("give the mode once: as flags or as a mode string in mode")
            flags, mode = mode, self.DEFAULT_MODE
        if isinstance(flags, str):
            text = flags
            flags = parse_mode(flags)
        self._path = path
        self._flags = int(flags)
        self._mode = int(mode)
        self._owns_fd = fd is None
        self._given_fd = fd
        self._handle_type = FileHandleType.OPAQUE_FD
        self.handle_type = handle_type
        # given to the core (see the module's docstring): the descriptors,
        # and for an append handle ("a", "ab", "a+", os.O_APPEND) where its
        # writes go: its descriptor is opened without O_APPEND (hipFile
        # refuses those), and writes whose offset is left out are placed at
        # the end of the file by the AppendEnd
        self._descriptors = Descriptors(self._flags, text or mode_string(self._flags), path)
        self._append = AppendEnd(self._descriptors) if self._flags & os.O_APPEND else None
        if path is None and fd is None:
            raise ValueError("give a path or an fd")

    @classmethod
    def from_fd(cls, fd: int,
                handle_type: FileHandleType = FileHandleType.OPAQUE_FD) -> FileHandle:
        """Register a caller-owned file descriptor; returns an open handle.

        ``close()`` deregisters it and leaves the descriptor open. The
        descriptor is refused as :meth:`open` says (a pipe, socket or
        character device; ``O_APPEND`` or ``O_PATH`` in its flags; one that
        another open handle wraps).

        Raises
        ------
        IsADirectoryError, HipFileException, HandleAlreadyRegisteredError, OSError
            As :meth:`open`; the descriptor is left open.
        """
        fh = cls(None, os.O_RDONLY, handle_type=handle_type, fd=fd)
        fh.open()
        return fh

    # -- properties (upstream names) -----------------------------------

    @property
    def flags(self) -> int:
        """Flags the file was opened with (``O_APPEND`` included: see
        :attr:`appends`)."""
        return self._flags

    @property
    def mode(self) -> str:
        """The mode, as Python's file objects give it: the mode string the
        file was opened with (``"rb"``, ``"r+"``, ...), or one that says
        what :attr:`flags` do (``"r"``, ``"r+"``, ``"w+"``, ``"a+"``,
        ``"x+"``)."""
        return self._descriptors.mode

    @property
    def permissions(self) -> int:
        """Permission bits for a created file (``0o644`` by default)."""
        return self._mode

    @property
    def path(self) -> str | os.PathLike[str] | None:
        """The file's path (None for a wrapped descriptor)."""
        return self._path

    @property
    def fd(self) -> int | None:
        """The open file descriptor, or None."""
        return self._descriptors.fd

    @property
    def appends(self) -> bool:
        """Whether this is an append handle (mode ``"a"``, ``"ab"``,
        ``"a+"``, or ``os.O_APPEND`` in the flags): its writes go to the end
        of the file, as ``O_APPEND`` places them.

        hipFile refuses descriptors opened with ``O_APPEND``, so the file is
        opened without it and the binding places each write itself: a write
        whose ``file_offset`` is left out (None) goes to the current end of
        the file (the end of earlier appends through this handle still in
        flight included); one given a ``file_offset`` must name that end,
        else :class:`ValueError` (Linux's ``pwrite`` on an ``O_APPEND``
        descriptor would silently append instead). Appends through one
        handle never overlap; unlike ``O_APPEND`` they are not atomic
        against other descriptors or processes writing the same file.
        """
        return self._append is not None

    @property
    def closed(self) -> bool:
        """Whether the handle is closed: True before :meth:`open` and after
        :meth:`close`, when :attr:`fd` and :attr:`handle` are None."""
        return not self._open

    def fileno(self) -> int:
        """The open file descriptor (as :meth:`io.IOBase.fileno`).

        Raises
        ------
        ClosedFileError
            The handle is closed (also a ValueError).
        """
        fd = self._descriptors.fd
        if fd is None or not self._open:
            raise ClosedFileError(self._descriptors.closed_reason())
        return fd

    def size(self) -> int:
        """The file's size in bytes now (``os.fstat(fh.fileno()).st_size``).

        Raises
        ------
        ClosedFileError
            The handle is closed (also a ValueError).
        OSError
            ``fstat`` failed.
        """
        return os.fstat(self.fileno()).st_size

    def nbytes(self) -> int:
        """Same as :meth:`size` (KvikIO's name): the file's size in bytes."""
        return self.size()

    @property
    def handle_type(self) -> FileHandleType:
        """Handle type used for registration."""
        return self._handle_type

    @handle_type.setter
    def handle_type(self, value: FileHandleType) -> None:
        if self._open:
            raise RuntimeError("Cannot modify handle_type while FileHandle is open")
        if value not in FileHandleType.__members__.values():
            raise ValueError(f"'{value}' is not a member of enum FileHandleType")
        if value != FileHandleType.OPAQUE_FD:
            raise NotImplementedError(f"{FileHandleType(value).name} handles are not supported")
        self._handle_type = FileHandleType(value)

    # -- lifetime -------------------------------------------------------

    def open(self) -> FileHandle:
        """Open the file (idempotent); returns ``self``.

        The file is registered with hipFile (``hipFileHandleRegister``,
        which opens the driver if it is not open) at the first call that
        goes through hipFile's own data path (:meth:`read`, :meth:`write`,
        :meth:`read_async`, :meth:`write_async`, batch I/O, :attr:`handle`),
        not here: a process that moves its bytes with the stream-ordered
        engine or the safetensors loader never waits for the driver.

        What hipFile's registration refuses is refused here, with its code,
        so that no path (the engine's and the POSIX ones included) moves a
        byte of such a file: see the exceptions below.

        Raises
        ------
        IsADirectoryError
            The path, or the descriptor given to :meth:`from_fd`, is a
            directory.
        HipFileException
            ``INVALID_FILE_TYPE`` (5018): a pipe, FIFO, socket or character
            device (checked before a path is opened, so a FIFO never
            blocks). ``INVALID_FILE_OPEN_FLAG`` (5019): a descriptor given
            to :meth:`from_fd` opened with ``O_APPEND`` or ``O_PATH``
            (open the path with mode ``"a"`` for an append handle).
        HandleAlreadyRegisteredError
            The descriptor given to :meth:`from_fd` is wrapped by another
            open handle (``HANDLE_ALREADY_REGISTERED``, 5028, as hipFile
            answers a second registration; wrap an ``os.dup`` of it).
        OSError
            ``os.open`` failed, or the given descriptor is not open.

        See Also
        --------
        hipFileHandleRegister
        """
        if self._open:
            return self
        # the descriptor opened and recorded in one step that Ctrl-C cannot cut
        _hipfile.run_uninterrupted(self._open_fd)
        return self

    def _open_fd(self) -> None:
        if self._owns_fd:
            assert self._path is not None
            check_path(self._path)
            fd = os.open(self._path, self._flags & ~os.O_APPEND, self._mode)
        else:
            assert self._given_fd is not None
            fd = self._given_fd
        try:
            # what hipFile's registration refuses, refused before any path moves a byte
            check_descriptor(fd, self._path, not self._owns_fd)
            claim_descriptor(fd, self)
        except BaseException:
            if self._owns_fd:
                os.close(fd)
            raise
        self._descriptors.open(fd, self._handle_type)
        self._attach_fd()

    def close(self, *, wait: bool = False, timeout: float | None = None) -> None:
        """Deregister the handle and close the descriptor (idempotent).

        By default never waits (leaving a ``with`` block does). With
        ``wait=True`` it is the ``concurrent.futures.Executor.shutdown(wait=True)``
        of a file: from the call on the file is *closing* and refuses new
        operations, then the call waits for this file's operations still in
        flight (stream-ordered ones, dropped handles included; batch
        entries; parallel and stream-engine reads and writes; synchronous
        reads and writes in other threads), at most ``timeout`` seconds,
        and closes.

        What another thread sees meanwhile: an operation submitted before
        the close began completes normally (its bytes and counts are
        right); one submitted after raises :class:`~hipfile.ClosedFileError`
        saying the file is closing (``read``/``write``, ``pread``/``pwrite``,
        ``read_async``/``write_async``, the ``pread_async*``/``pwrite_async*``
        family, and a :class:`~hipfile.BatchIO` submit with an entry on this
        file); once closed, they raise it saying the file is closed. A
        submission racing with the start of the close is either waited for
        or refused, never lost.

        If the timeout passes first, or the wait is interrupted (Ctrl-C),
        nothing is closed, nothing in flight is touched, and the file
        accepts operations again. In a forked child, an inherited handle is
        only dropped: the descriptor is closed and the parent's
        registration is left alone.

        Parameters
        ----------
        wait
            Refuse new operations and wait for those in flight first
            (False: raise :class:`~hipfile.InFlightError` while there are
            any).
        timeout
            With ``wait=True``: seconds to wait at most, None for no limit.

        Raises
        ------
        InFlightError
            Operations on this file are still in flight (``wait=False``;
            nothing is changed).
        InFlightTimeoutError
            With ``wait=True``: operations were still in flight after
            ``timeout`` seconds (an InFlightError and a TimeoutError;
            nothing is changed).
        KeyboardInterrupt
            The wait was interrupted (nothing is changed).
        TypeError, ValueError
            ``timeout`` is not a number >= 0 or None, or is given without
            ``wait=True`` (TypeError).

        See Also
        --------
        hipFileHandleDeregister
        """
        if not isinstance(wait, bool):
            raise TypeError(f"wait must be a bool, not {type(wait).__name__}")
        limit = as_timeout(timeout)
        if timeout is not None and not wait:
            raise TypeError("close(timeout=...) waits only with wait=True")
        if wait and self._open:
            self._begin_closing()
            try:
                if not self._wait_in_flight(limit):
                    raise InFlightTimeoutError(
                        f"cannot close the file: {self._in_flight()} operation(s) still in "
                        f"flight after {timeout} s; nothing was closed and the file "
                        "accepts operations again")
                self._close_now()
            finally:
                self._end_closing()
            return
        self._close_now()

    def _close_now(self) -> None:
        """Close without waiting: raise InFlightError (changing nothing)
        while operations are in flight. Ctrl-C cannot stop it half way (a
        registration or a descriptor forgotten before it is released)."""
        _hipfile.run_uninterrupted(self._release_now)

    def _release_now(self) -> None:
        handle = self._detach()
        if handle is not None:
            _hipfile.handle_deregister(handle)
        fd = self._descriptors.close()
        if fd is not None:
            release_descriptor(fd, self)
            if self._owns_fd:
                os.close(fd)

    def _in_flight(self) -> int:
        """Operations on this file not yet complete, of every kind."""
        return int(_hipfile.settle(self)) + self._held_count()

    def _wait_in_flight(self, timeout: float | None, held_timeout: float | None = None
                        ) -> bool:
        """Wait until no operation uses this file (stream-ordered ones,
        dropped handles included, and the others), at most ``timeout``
        seconds (None: no limit), see :func:`hipfile._lifetime.drain`.
        Returns whether none is left (close() refuses what is)."""
        return drain(lambda left: int(_hipfile.wait_for(self, left)), self._held_count,
                     timeout, held_timeout)

    def __enter__(self) -> FileHandle:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Refuse new operations, wait for this file's operations in flight,
        then close: as ``close(wait=True)``, with no limit for stream-ordered
        operations and :data:`hipfile._lifetime.HELD_WAIT_TIMEOUT` seconds
        for the others (what is still in flight then makes the close raise
        :class:`~hipfile.InFlightError`).

        An exception raised in the block propagates unchanged; a failure
        while waiting or closing is attached to it as context.
        """
        if not self._open:
            exit_block(exc, lambda: None, self.close)
            return
        self._begin_closing()
        try:
            exit_block(exc, lambda: self._wait_in_flight(None, _lifetime.HELD_WAIT_TIMEOUT),
                       self._close_now)
        finally:
            self._end_closing()

    def _collected(self) -> None:
        finalize(self, "close", lambda: bool(self._open), "was not closed")

    __del__ = guarded_del(_collected, "_open")

    def __repr__(self) -> str:
        state = "closed" if not self._open else f"fd={self.fd}"
        return f"<hipfile.FileHandle path={self._path!r} {state}>"

    def _io(self, write: bool, buffer: Any, size: int | None, file_offset: int | None,
            buffer_offset: int) -> int:
        # counted in flight for the whole call: a close waits for it, or
        # (when it began first) this call is refused here
        self._hold_open()
        try:
            if write and self._append is not None:
                # one append through this handle at a time, at the end
                with self._append.lock:
                    return self._io_at(write, buffer, size, file_offset, buffer_offset, True)
            return self._io_at(write, buffer, size,
                               0 if file_offset is None else file_offset, buffer_offset, False)
        finally:
            self._hold(-1)

    def _io_at(self, write: bool, buffer: Any, size: int | None, file_offset: int | None,
               buffer_offset: int, append: bool) -> int:
        try:
            return self._io_at_(write, buffer, size, file_offset, buffer_offset, append)
        except OSError as exc:
            name_file(exc, self._path)
            raise

    def _io_at_(self, write: bool, buffer: Any, size: int | None, file_offset: int | None,
                buffer_offset: int, append: bool) -> int:
        given = file_offset
        ptr, _, _, size, file_offset, buffer_offset, view = io_range_or_host(
            buffer, size, 0 if file_offset is None else file_offset, buffer_offset)
        if write:
            self._descriptors.refuse_read_only()     # after the arguments' checks
        if append:
            assert self._append is not None
            file_offset = self._append.at(None if given is None else file_offset, size,
                                          reserve=False)
        if view is not None:
            check_writable(view, write, buffer)
            try:
                return host_transfer(write, self._host_fd(), view, size, file_offset,
                                     buffer_offset)
            except OSError as exc:
                if write and exc.errno == errno.EBADF:
                    raise_if_read_only(self.fd, self.mode, self._path, exc)
                raise
        handle = self.handle
        assert handle is not None
        try:
            return transfer(write, handle, ptr, size, file_offset, buffer_offset,
                            host_fd=self._host_fd)
        except OSError as exc:
            # EBADF from POSIX; libraries answer otherwise (cuFile: EIO)
            if write:
                raise_if_read_only(self.fd, self.mode, self._path, exc)
            raise

    # -- descriptors and appends (the parallel, batch and compatibility paths) --

    def _host_fd(self) -> int:
        """The descriptor for POSIX I/O on host buffers (see :meth:`Descriptors.posix`).

        Raises
        ------
        TypeError
            ``hipfile.defaults`` ``allow_host_buffers`` is False.
        ClosedFileError
            The file is closed.
        """
        from hipfile._interop import check_host_buffers_allowed

        check_host_buffers_allowed()
        return self._descriptors.posix()

    def _engine_fd(self) -> int:
        """The POSIX descriptor of the engine's staged path, or -1 (see
        :meth:`Descriptors.engine`)."""
        return self._descriptors.engine()

    def _refuse_read_only(self) -> None:
        """Raise the one error of a write through a read-only handle, before
        any byte moves (every write path calls it)."""
        self._descriptors.refuse_read_only()

    def _reserve_append(self, file_offset: int | None, size: int) -> int:
        """Take the range of an append of ``size`` bytes at the end of the
        file (see :meth:`AppendEnd.reserve`); returns its offset."""
        assert self._append is not None
        return self._append.reserve(file_offset, size)

    def _append_failed(self, start: int, size: int) -> None:
        """Give back the range of a reserved append that failed."""
        if self._append is not None:
            self._append.failed(start, size)

    def _refuse_ranges_on_append(self, call: str) -> None:
        """Raise ValueError on an append handle: ``call`` writes at
        explicit file offsets."""
        if self._append is not None:
            self._append.refuse_ranges(call)

    # -- synchronous I/O ---------------------------------------------------

    def read(self, buffer: Any, size: int | None = None, file_offset: int = 0,
             buffer_offset: int = 0, *, task_size: int | None = None) -> int:
        """Read ``size`` bytes at ``file_offset`` into ``buffer`` at ``buffer_offset``.

        The positional order is upstream's ``(buffer, size, file_offset,
        buffer_offset)``. With ``task_size`` (KvikIO's keyword) the read is
        split into tasks of that many bytes on other threads, as
        ``pread(..., task_size=task_size).result()``.

        ``buffer`` is device memory (a :class:`~hipfile.Buffer` or anything
        it accepts: HIP-Python ``DeviceArray``, PyTorch/CuPy arrays) or host
        memory: a writable C-contiguous object with the buffer protocol
        (NumPy array, ``bytearray``, ``mmap``, ...), a DLPack tensor on the
        CPU, or a :class:`~hipfile.Buffer` over pinned host memory. ``size``
        defaults to the rest of the buffer.

        Host buffers: hipFile moves device memory only (it refuses host
        memory with ``hipFileHipMemoryTypeInvalid``), so the binding reads
        them itself with POSIX ``preadv`` on the file's descriptor (without
        ``O_DIRECT``), with the GIL released, under the same short-transfer
        rule. ``hipfile.defaults`` ``allow_host_buffers`` (True by default,
        ``HIPFILE_ALLOW_HOST_BUFFERS``) turns this off.

        Short transfers: ``hipFileRead`` is called again for the rest until
        ``size`` bytes are read or it returns 0 (end of file), so a short
        count in the middle of the file is never taken for end of file.
        Transfers above 0x7ffff000 bytes are split into several calls.

        Returns
        -------
        int
            Bytes read; fewer than ``size`` only at end of file.

        Raises
        ------
        TypeError
            An unsupported or read-only buffer, or a host buffer while
            ``allow_host_buffers`` is False.
        ValueError
            Negative offsets, a range that overruns the buffer, a
            non-positive ``task_size``, or a closed or closing file
            (:class:`~hipfile.ClosedFileError`, see :meth:`close`; a call
            that began before a ``close(wait=True)`` completes first).
        OSError
            A system error (subclass chosen by errno).
        HipFileException
            A hipFile error.

        See Also
        --------
        hipFileRead, preadv
        """
        if task_size is not None:
            return self.pread(buffer, size, file_offset, buffer_offset=buffer_offset,
                              task_size=task_size).result()
        return self._io(False, buffer, size, file_offset, buffer_offset)

    def write(self, buffer: Any, size: int | None = None, file_offset: int | None = None,
              buffer_offset: int = 0, *, task_size: int | None = None) -> int:
        """Write ``size`` bytes from ``buffer`` at ``buffer_offset`` to the
        file at ``file_offset``. See :meth:`read` (``task_size`` included).

        ``file_offset`` left out (None) is 0, or the end of the file on an
        append handle (mode ``"a"``: see :attr:`appends`), where a given
        ``file_offset`` must be that end.

        Short transfers: ``hipFileWrite`` is called again for the rest until
        ``size`` bytes are written; a call that writes 0 bytes raises. Host
        buffers (read-only ones too) are written with POSIX ``pwritev``, as
        :meth:`read` describes.

        Returns
        -------
        int
            Bytes written (always ``size``).

        Raises
        ------
        OSError
            A system error, or a call that wrote 0 bytes (``EIO``).
        ValueError
            As :meth:`read`, or on an append handle a ``file_offset`` that
            is not the end of the file.

        See Also
        --------
        hipFileWrite, pwritev
        """
        if task_size is not None:
            return self.pwrite(buffer, size, file_offset, buffer_offset=buffer_offset,
                               task_size=task_size).result()
        return self._io(True, buffer, size, file_offset, buffer_offset)

    # -- parallel I/O ----------------------------------------------------

    def pread(self, buffer: Any, size: int | None = None, file_offset: int = 0,
              *legacy: int, buffer_offset: int = 0, task_size: int | None = None,
              executor: Executor | None = None) -> IOFuture:
        """Read in parallel tasks on other threads (device memory: the
        engine's); returns an :class:`~hipfile.IOFuture` whose ``result()``
        is the bytes read.

        Same as :func:`hipfile.pread` with this file, including its
        short-transfer rule and host buffers (as :meth:`read`). The file
        cannot be closed until every task has ended.

        ``buffer_offset`` is keyword-only: KvikIO's
        ``pread(buf, size, file_offset, task_size)`` takes ``task_size``
        fourth, so a fourth positional argument is refused with
        :class:`TypeError` rather than taken for an offset into the buffer.

        Raises
        ------
        TypeError
            A fourth positional argument, or as :func:`hipfile.pread`.

        See Also
        --------
        hipFileRead
        """
        from hipfile.parallel import pread

        buffer_offset = fourth_argument("pread", legacy, buffer_offset)
        return pread(self, buffer, size, file_offset, buffer_offset=buffer_offset,
                     task_size=task_size, executor=executor)

    def pwrite(self, buffer: Any, size: int | None = None, file_offset: int | None = None,
               *legacy: int, buffer_offset: int = 0, task_size: int | None = None,
               executor: Executor | None = None) -> IOFuture:
        """Write in parallel tasks on other threads (device memory: the
        engine's); returns an :class:`~hipfile.IOFuture` whose ``result()``
        is the bytes written.

        Same as :func:`hipfile.pwrite` with this file, including its
        short-transfer rule and host buffers (as :meth:`write`).
        ``buffer_offset`` is keyword-only, as in :meth:`pread`. On an
        append handle (:attr:`appends`) the range at the end of the file is
        taken when the call is made, so later appends go after it.

        Raises
        ------
        TypeError
            A fourth positional argument, or as :func:`hipfile.pwrite`.

        See Also
        --------
        hipFileWrite
        """
        from hipfile.parallel import pwrite

        buffer_offset = fourth_argument("pwrite", legacy, buffer_offset)
        return pwrite(self, buffer, size, file_offset, buffer_offset=buffer_offset,
                      task_size=task_size, executor=executor)

    # -- stream-ordered I/O with the engine (functions of _stream_io) -------

    pread_async = _stream_io.pread_async
    pwrite_async = _stream_io.pwrite_async
    pread_async_ranges = _stream_io.pread_async_ranges
    pwrite_async_ranges = _stream_io.pwrite_async_ranges
    pread_async_scatter = _stream_io.pread_async_scatter
    pwrite_async_gather = _stream_io.pwrite_async_gather
