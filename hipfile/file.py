"""Files registered with hipFile: synchronous and stream-ordered I/O."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Any

from hipfile._interop import io_range
from hipfile._lib import _hipfile
from hipfile._lib._hipfile import _FileCore
from hipfile._lifetime import ClosesWhenCollected
from hipfile._transfer import transfer
from hipfile.enums import FileHandleType

if TYPE_CHECKING:
    from collections.abc import Iterable
    from concurrent.futures import Executor

    from hipfile.engine import StreamIOHandle
    from hipfile.parallel import IOFuture

__all__ = ["FileHandle"]


class FileHandle(_FileCore, ClosesWhenCollected):
    """A file opened with ``os.open`` and registered with hipFile.

    Parameters
    ----------
    path
        File to open (ignored when ``fd`` is given).
    flags
        ``os.open`` flags, e.g. ``os.O_RDONLY | os.O_DIRECT``. ``O_DIRECT``
        enables the GPU-direct path; without it hipFile uses its buffered
        fallback (compat mode).
    mode
        Permission bits for a created file (``0o644``).
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

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        flags: int = os.O_RDONLY,
        mode: int = DEFAULT_MODE,
        handle_type: FileHandleType = FileHandleType.OPAQUE_FD,
        *,
        fd: int | None = None,
    ) -> None:
        self._path = path
        self._flags = int(flags)
        self._mode = int(mode)
        self._fd: int | None = None
        self._owns_fd = fd is None
        self._given_fd = fd
        self._handle_type = FileHandleType.OPAQUE_FD
        self.handle_type = handle_type
        if path is None and fd is None:
            raise ValueError("give a path or an fd")

    @classmethod
    def from_fd(cls, fd: int,
                handle_type: FileHandleType = FileHandleType.OPAQUE_FD) -> FileHandle:
        """Register a caller-owned file descriptor; returns an open handle.

        ``close()`` deregisters it and leaves the descriptor open.
        """
        fh = cls(None, os.O_RDONLY, handle_type=handle_type, fd=fd)
        fh.open()
        return fh

    # -- properties (upstream names) -----------------------------------

    @property
    def flags(self) -> int:
        """Flags passed to ``os.open``."""
        return self._flags

    @property
    def mode(self) -> int:
        """Permission bits for a created file."""
        return self._mode

    @property
    def path(self) -> str | os.PathLike[str] | None:
        """The file's path (None for a wrapped descriptor)."""
        return self._path

    @property
    def fd(self) -> int | None:
        """The open file descriptor, or None."""
        return self._fd

    @property
    def closed(self) -> bool:
        """Whether the handle is closed."""
        return self.handle is None

    @property
    def handle_type(self) -> FileHandleType:
        """Handle type used for registration."""
        return self._handle_type

    @handle_type.setter
    def handle_type(self, value: FileHandleType) -> None:
        if self.handle is not None:
            raise RuntimeError("Cannot modify handle_type while FileHandle is open")
        if value not in FileHandleType.__members__.values():
            raise ValueError(f"'{value}' is not a member of enum FileHandleType")
        if value != FileHandleType.OPAQUE_FD:
            raise NotImplementedError(f"{FileHandleType(value).name} handles are not supported")
        self._handle_type = FileHandleType(value)

    # -- lifetime -------------------------------------------------------

    def open(self) -> FileHandle:
        """Open the file and register it (idempotent); returns ``self``.

        Raises
        ------
        OSError
            ``os.open`` failed.
        HipFileException
            Registration failed (the descriptor is closed again).
        """
        if self.handle is not None:
            return self
        if self._owns_fd:
            assert self._path is not None
            fd = os.open(self._path, self._flags, self._mode)
        else:
            assert self._given_fd is not None
            fd = self._given_fd
        try:
            handle = _hipfile.handle_register(fd, int(self._handle_type))
        except BaseException:
            if self._owns_fd:
                os.close(fd)
            raise
        self._fd = fd
        self._attach(handle)
        return self

    def close(self) -> None:
        """Deregister the handle and close the descriptor (idempotent).

        Raises
        ------
        InFlightError
            Asynchronous operations on this file are still in flight.
        """
        handle = self._detach()
        if handle is not None:
            _hipfile.handle_deregister(handle)
        if self._fd is not None:
            fd, self._fd = self._fd, None
            if self._owns_fd:
                os.close(fd)

    def __enter__(self) -> FileHandle:
        return self.open()

    def _left_open(self) -> bool:
        return self.handle is not None

    def __repr__(self) -> str:
        state = "closed" if self.handle is None else f"fd={self._fd}"
        return f"<hipfile.FileHandle path={self._path!r} {state}>"

    # -- synchronous I/O -----------------------------------------------

    def _io(self, write: bool, buffer: Any, size: int | None, file_offset: int,
            buffer_offset: int) -> int:
        self._check_registered()
        ptr, _, _, size, file_offset, buffer_offset = io_range(
            buffer, size, file_offset, buffer_offset)
        handle = self.handle
        assert handle is not None
        return transfer(write, handle, ptr, size, file_offset, buffer_offset)

    def read(self, buffer: Any, size: int | None = None, file_offset: int = 0,
             buffer_offset: int = 0) -> int:
        """Read ``size`` bytes at ``file_offset`` into ``buffer`` at ``buffer_offset``.

        ``buffer`` is a :class:`~hipfile.Buffer` or anything it accepts
        (HIP-Python ``DeviceArray``, PyTorch/CuPy arrays). ``size`` defaults
        to the rest of the buffer.

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
        ValueError
            Negative offsets, a range that overruns the buffer, or a closed file.
        OSError
            A system error (subclass chosen by errno).
        HipFileException
            A hipFile error.

        See Also
        --------
        hipFileRead
        """
        return self._io(False, buffer, size, file_offset, buffer_offset)

    def write(self, buffer: Any, size: int | None = None, file_offset: int = 0,
              buffer_offset: int = 0) -> int:
        """Write ``size`` bytes from ``buffer`` at ``buffer_offset`` to the
        file at ``file_offset``. See :meth:`read`.

        Short transfers: ``hipFileWrite`` is called again for the rest until
        ``size`` bytes are written; a call that writes 0 bytes raises.

        Returns
        -------
        int
            Bytes written (always ``size``).

        Raises
        ------
        OSError
            A system error, or a call that wrote 0 bytes (``EIO``).

        See Also
        --------
        hipFileWrite
        """
        return self._io(True, buffer, size, file_offset, buffer_offset)

    # -- parallel I/O ----------------------------------------------------

    def pread(self, buffer: Any, size: int | None = None, file_offset: int = 0,
              buffer_offset: int = 0, *, task_size: int | None = None,
              executor: Executor | None = None) -> IOFuture:
        """Read in parallel tasks on a thread pool; returns an
        :class:`~hipfile.IOFuture` whose ``result()`` is the bytes read.

        Same as :func:`hipfile.pread` with this file, including its
        short-transfer rule (that of :meth:`read`). The file cannot be
        closed until every task has ended.

        See Also
        --------
        hipFileRead
        """
        from hipfile.parallel import pread

        return pread(self, buffer, size, file_offset, buffer_offset, task_size=task_size,
                     executor=executor)

    def pwrite(self, buffer: Any, size: int | None = None, file_offset: int = 0,
               buffer_offset: int = 0, *, task_size: int | None = None,
               executor: Executor | None = None) -> IOFuture:
        """Write in parallel tasks on a thread pool; returns an
        :class:`~hipfile.IOFuture` whose ``result()`` is the bytes written.

        Same as :func:`hipfile.pwrite` with this file, including its
        short-transfer rule (that of :meth:`write`).

        See Also
        --------
        hipFileWrite
        """
        from hipfile.parallel import pwrite

        return pwrite(self, buffer, size, file_offset, buffer_offset, task_size=task_size,
                      executor=executor)

    # -- stream-ordered parallel I/O (the engine) -------------------------

    def pread_async(self, buffer: Any, size: int | None = None, file_offset: int = 0,
                    buffer_offset: int = 0, stream: Any = 0, *,
                    task_size: int | None = None) -> StreamIOHandle:
        """Read ``size`` bytes (None: the rest of the buffer) at
        ``file_offset`` into ``buffer`` at ``buffer_offset``, in stream order
        on ``stream``, with the parallel engine; returns a
        :class:`~hipfile.StreamIOHandle` at once.

        The read starts once ``stream`` has passed this point and runs in
        ``task_size`` chunks on the engine's threads; ``handle.wait_on(s)``
        makes another stream wait for it without blocking the host. A read
        that reaches the end of the file moves fewer bytes; a short count in
        the middle of the file is retried, never taken for the end.

        Raises
        ------
        TypeError, ValueError
            A bad buffer, stream, range or task size (nothing is submitted).
        ClosedFileError
            The file is closed.

        See Also
        --------
        hipFileRead, hipStreamWriteValue32, hipStreamWaitValue32
        """
        return self.pread_async_ranges(buffer, [(size, file_offset, buffer_offset)], stream,
                                       task_size=task_size)[0]

    def pwrite_async(self, buffer: Any, size: int | None = None, file_offset: int = 0,
                     buffer_offset: int = 0, stream: Any = 0, *,
                     task_size: int | None = None) -> StreamIOHandle:
        """Write ``size`` bytes of ``buffer`` at ``buffer_offset`` to the file
        at ``file_offset``, in stream order on ``stream``, with the parallel
        engine: the buffer is read only after the work enqueued on
        ``stream`` before this call has finished. See :meth:`pread_async`.

        See Also
        --------
        hipFileWrite, hipStreamWriteValue32, hipStreamWaitValue32
        """
        return self.pwrite_async_ranges(buffer, [(size, file_offset, buffer_offset)], stream,
                                        task_size=task_size)[0]

    def pread_async_ranges(self, buffer: Any, ranges: Iterable[tuple[int | None, int, int]],
                           stream: Any = 0, *,
                           task_size: int | None = None) -> list[StreamIOHandle]:
        """Read many ``(size, file_offset, buffer_offset)`` ranges of one
        buffer in stream order; returns one handle per range.

        All ranges start together once ``stream`` has passed this point;
        each completes on its own (oldest range first), so layer *i* is
        usable as soon as its own bytes have landed. Every range is checked
        before anything is submitted.

        See Also
        --------
        hipFileRead
        """
        return list(_hipfile.engine_submit(self, 0, buffer, _ranges(ranges), stream,
                                           task_size))

    def pwrite_async_ranges(self, buffer: Any, ranges: Iterable[tuple[int | None, int, int]],
                            stream: Any = 0, *,
                            task_size: int | None = None) -> list[StreamIOHandle]:
        """Write many ``(size, file_offset, buffer_offset)`` ranges of one
        buffer in stream order; returns one handle per range. See
        :meth:`pread_async_ranges`.

        See Also
        --------
        hipFileWrite
        """
        return list(_hipfile.engine_submit(self, 1, buffer, _ranges(ranges), stream,
                                           task_size))


def _ranges(ranges: Any) -> list[tuple[Any, Any, Any]]:
    out = []
    for r in ranges:
        t = tuple(r)
        if len(t) != 3:
            raise TypeError(f"each range must be (size, file_offset, buffer_offset), got {r!r}")
        out.append(t)
    return out


def open(
    path: str | os.PathLike[str], flags: int | str = "r", mode: int = FileHandle.DEFAULT_MODE,
    *, direct: bool = False,
) -> FileHandle:
    """Open and register a file; returns an open :class:`FileHandle`.

    ``flags`` is ``os.open`` flags or one of ``"r"``, ``"w"`` (create,
    truncate), ``"a"`` (create), ``"r+"``; ``direct=True`` adds ``O_DIRECT``.
    """
    if isinstance(flags, str):
        table = {
            "r": os.O_RDONLY,
            "r+": os.O_RDWR,
            "w": os.O_RDWR | os.O_CREAT | os.O_TRUNC,
            "a": os.O_RDWR | os.O_CREAT,
        }
        if flags not in table:
            raise ValueError(f"flags must be one of {sorted(table)} or an int, got {flags!r}")
        flags = table[flags]
    if direct:
        flags |= getattr(os, "O_DIRECT", 0)
    return FileHandle(path, flags, mode).open()


__all__ += ["open"]
