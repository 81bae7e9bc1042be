"""What a :class:`~hipfile.FileHandle` may wrap: the files and descriptors
hipFile refuses to register, refused when the handle is opened.

The file is registered with hipFile only at the first call through hipFile's
own data path, and the engine and the POSIX paths move bytes without it; so
what hipFile's registration refuses is refused here, from ``fstat`` and
``fcntl`` (no driver), with the code hipFile gives, before any path can move
a byte:

* a pipe, FIFO, socket or character device: ``INVALID_FILE_TYPE`` (5018);
* a descriptor given to :meth:`~hipfile.FileHandle.from_fd` that was opened
  with ``O_APPEND`` (``pwrite`` ignores its offset) or ``O_PATH`` (it moves
  no bytes): ``INVALID_FILE_OPEN_FLAG`` (5019);
* a descriptor another open handle of this process wraps already:
  ``HANDLE_ALREADY_REGISTERED`` (5028), as a second
  ``hipFileHandleRegister`` of one descriptor is answered.

A directory raises :class:`IsADirectoryError`, as Python's ``open`` does.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading
import weakref
from typing import Any

from hipfile.enums import OpError
from hipfile.errors import HipFileException, exception_for

__all__ = ["check_descriptor", "check_path", "claim_descriptor", "release_descriptor"]

_REGISTER = "hipFileHandleRegister"

#: The descriptors of open handles: fd -> the handle (weakly).
_WRAPPED: dict[int, weakref.ref[Any]] = {}
# reentrant: the collector may run a FileHandle's finalizer (its close releases
# its descriptor) inside claim_descriptor, in the same thread
_WRAPPED_LOCK = threading.RLock()


def _kind(mode: int) -> str | None:
    """What a file of this ``st_mode`` is, when hipFile refuses it (None:
    a regular file or a block device, which it takes)."""
    if stat.S_ISREG(mode) or stat.S_ISBLK(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a pipe or FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    return "not a regular file"


def _refused_kind(kind: str, where: str) -> HipFileException:
    return exception_for(
        OpError.INVALID_FILE_TYPE, 0, _REGISTER,
        f"{where} is {kind}; hipfile moves the bytes of regular files and block devices")


def check_path(path: str | os.PathLike[str]) -> None:
    """Refuse an existing ``path`` that hipFile would refuse, before it is
    opened (opening a FIFO would block until another process opens it).
    A path that does not exist yet is left to ``os.open``.

    Raises
    ------
    HipFileException
        ``INVALID_FILE_TYPE`` (5018): a FIFO, socket or character device.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    kind = _kind(mode)
    if kind is not None and not stat.S_ISDIR(mode):
        raise _refused_kind(kind, repr(os.fspath(path)))


def check_descriptor(fd: int, path: str | os.PathLike[str] | None, given: bool) -> None:
    """Refuse the descriptor of a new handle where hipFile would refuse to
    register it; ``given``: the caller's own descriptor (``from_fd``),
    whose flags are checked too.

    Raises
    ------
    IsADirectoryError
        A directory.
    HipFileException
        ``INVALID_FILE_TYPE`` (5018): a pipe, FIFO, socket or character
        device; ``INVALID_FILE_OPEN_FLAG`` (5019): a given descriptor opened
        with ``O_APPEND`` or ``O_PATH``.
    OSError
        ``fstat`` or ``fcntl`` failed (``EBADF``: not an open descriptor).
    """
    where = repr(os.fspath(path)) if path is not None else f"descriptor {fd}"
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory: hipfile opens files",
                                os.fspath(path) if path is not None else f"<fd {fd}>")
    kind = _kind(mode)
    if kind is not None:
        raise _refused_kind(kind, where)
    if not given:
        return
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    o_path = getattr(os, "O_PATH", 0)
    if flags & os.O_APPEND or (o_path and flags & o_path == o_path):
        which = "O_APPEND" if flags & os.O_APPEND else "O_PATH"
        hint = ("pwrite ignores the offsets of its writes; to append, open the path with "
                "hipfile.open(path, 'a'), which places each write at the end itself"
                if which == "O_APPEND" else "it moves no bytes")
        raise exception_for(OpError.INVALID_FILE_OPEN_FLAG, 0, _REGISTER,
                            f"{where} was opened with {which}: {hint}")


def claim_descriptor(fd: int, fh: Any) -> None:
    """Note that the open handle ``fh`` wraps ``fd``.

    Raises
    ------
    HandleAlreadyRegisteredError
        Another open handle wraps ``fd`` (``HANDLE_ALREADY_REGISTERED``,
        5028); nothing is noted.
    """
    with _WRAPPED_LOCK:
        ref = _WRAPPED.get(fd)
        other = ref() if ref is not None else None
        if other is not None and other is not fh and other._open and other.fd == fd:
            raise exception_for(
                OpError.HANDLE_ALREADY_REGISTERED, 0, _REGISTER,
                f"descriptor {fd} is wrapped by another open FileHandle; close that one "
                f"first, or wrap a duplicate (os.dup)")
        _WRAPPED[fd] = weakref.ref(fh)


def release_descriptor(fd: int, fh: Any) -> None:
    """Forget that ``fh`` wraps ``fd`` (its close); never raises."""
    with _WRAPPED_LOCK:
        ref = _WRAPPED.get(fd)
        if ref is not None and ref() in (fh, None):
            del _WRAPPED[fd]
