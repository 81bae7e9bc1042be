"""The POSIX descriptors of one :class:`~hipfile.FileHandle`: its own, and
the second ones it opens on first use (without ``O_DIRECT`` for host
buffers and the engine's staged path, with it for large engine reads).

A handle makes one :class:`Descriptors` when it is made and gives it to its
compiled core (``FileCore._descriptors``), which asks it for the descriptor
of a registration, of an engine submission, and for the message of a
closed handle; the object holds no reference to the handle.
"""

from __future__ import annotations

import errno
import os

from hipfile._lib._errors import read_only_error
from hipfile.enums import FileHandleType
from hipfile.errors import ClosedFileError
from hipfile.file._args import O_DIRECT, TWIN_LOCK, buffered_twin, is_direct, is_read_only
from hipfile.file._residency import cached_fraction

__all__ = ["Descriptors"]


class Descriptors:
    """The descriptors of one file handle, opened with ``flags`` (mode
    string ``mode``, for messages) on ``path``.

    ``fd`` is the handle's descriptor while it is open (None before the
    first open and after a close); ``buffered`` the twin without
    ``O_DIRECT`` of a descriptor that has it; ``direct`` the ``O_DIRECT``
    twin of a buffered one for large engine reads (-1: the file system
    refused it); ``plain`` a descriptor already seen without ``O_DIRECT``
    (its flags are read once per open)."""

    def __init__(self, flags: int, mode: str, path: str | os.PathLike[str] | None) -> None:
        self.flags = flags
        self.mode = mode
        self.path = path
        self.fd: int | None = None
        self.handle_type = FileHandleType.OPAQUE_FD
        self.opened_once = False
        self.buffered: int | None = None
        self.plain = -1
        self.direct: int | None = None

    def open(self, fd: int, handle_type: FileHandleType) -> None:
        """Record the handle's descriptor, opened now."""
        self.fd = fd
        self.handle_type = handle_type
        self.opened_once = True

    def closed_reason(self) -> str:
        """The message of :class:`ClosedFileError` for this handle."""
        if not self.opened_once:
            return ("I/O operation on a FileHandle that was never opened: call its open() "
                    "method, use it in a with statement, or get an open one from "
                    "hipfile.open(path)")
        return "I/O operation on a closed FileHandle"

    def fileno(self) -> int:
        """The handle's descriptor.

        Raises
        ------
        ClosedFileError
            The handle is closed.
        """
        fd = self.fd
        if fd is None:
            raise ClosedFileError(self.closed_reason())
        return fd

    def close(self) -> int | None:
        """Close the twins and forget the handle's descriptor; returns it
        (None when there was none), for the handle to close."""
        fd, self.fd = self.fd, None
        twin, self.buffered = self.buffered, None
        self.plain = -1
        if twin is not None:
            os.close(twin)
        direct, self.direct = self.direct, None
        if direct is not None and direct >= 0:
            os.close(direct)
        return fd

    def posix(self) -> int:
        """The descriptor for POSIX I/O on the file, without ``O_DIRECT``:
        the handle's own, or, when it was opened with ``O_DIRECT`` (which
        needs aligned buffers), a second descriptor of the same file
        without it, opened on first use through ``/proc/self/fd`` and
        closed by :meth:`close`.

        Raises
        ------
        ClosedFileError
            The handle is closed.
        """
        if self.buffered is None:
            fd = self.fileno()
            if fd == self.plain:
                return fd      # its flags were read once (no fcntl per submission)
            if not is_direct(fd):
                self.plain = fd
                return fd
            with TWIN_LOCK:
                if self.buffered is None:
                    self.buffered = buffered_twin(fd)
        return self.buffered

    def engine(self) -> int:
        """The POSIX descriptor the engine's staged path uses, or -1 when
        the handle has none (its threads then call hipFile).

        Raises
        ------
        ClosedFileError
            The handle is closed, or was closed by another thread while
            the descriptor was looked up.
        """
        if self.handle_type != FileHandleType.OPAQUE_FD:
            return -1
        try:
            return self.posix()
        except OSError as exc:
            # closed by another thread between fileno() and the descriptor's
            # use here: the submission is refused as any on a closed file
            if exc.errno == errno.EBADF and self.fd is None:
                raise ClosedFileError(self.closed_reason()) from None
            raise

    def engine_direct(self, large: bool) -> int:
        """The ``O_DIRECT`` descriptor for an engine read, or -1 for the
        buffered one: the handle's own when it was opened with
        ``O_DIRECT``; for a ``large`` read of a file the page cache mostly
        lacks (a sample of its pages, ``mincore``), a second descriptor
        with ``O_DIRECT``, opened on first use and closed by :meth:`close`
        (-1 where the file system refuses ``O_DIRECT``).

        Raises
        ------
        ClosedFileError
            The handle is closed.
        """
        fd = self.fileno()
        if self.buffered is not None:
            return fd    # opened with O_DIRECT: posix() (the engine's fd) made its twin
        if not large or self.direct == -1 or not O_DIRECT:
            return -1
        if is_direct(fd):
            return fd
        if cached_fraction(fd, sample_pages=256) >= 0.5:
            return -1
        with TWIN_LOCK:
            if self.direct is None:
                try:
                    self.direct = os.open(f"/proc/self/fd/{fd}",
                                          (self.flags & os.O_ACCMODE) | O_DIRECT
                                          | os.O_CLOEXEC)
                except OSError:
                    self.direct = -1     # no O_DIRECT here (tmpfs): never again
        return self.direct

    def refuse_read_only(self) -> None:
        """Raise the one error of a write through a read-only handle, before
        any byte moves (every write path calls it; nothing when closed)."""
        fd = self.fd
        if fd is not None and is_read_only(fd):
            raise read_only_error(self.mode, self.path)
