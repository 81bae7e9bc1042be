"""The arguments of FileHandle and :func:`hipfile.open`: mode strings and
``os.open`` flags, descriptors, and the range type of the stream-ordered
calls."""

from __future__ import annotations

import fcntl
import os
import threading
from typing import TYPE_CHECKING, Any, Union

from hipfile._lib._errors import read_only_error

if TYPE_CHECKING:
    from collections.abc import Iterable

    import numpy as np
    from numpy.typing import NDArray

    from hipfile.engine import StreamIOHandle

__all__ = ["MODES", "O_DIRECT", "TWIN_LOCK", "Ranges", "buffered_twin", "fourth_argument",
           "is_direct", "is_read_only", "mode_string", "one_group", "parse_mode",
           "raise_if_read_only"]

#: ``os.O_DIRECT`` where the platform has it (0 elsewhere).
O_DIRECT: int = getattr(os, "O_DIRECT", 0)


def fourth_argument(name: str, legacy: tuple[Any, ...], buffer_offset: Any) -> Any:
    """``buffer_offset`` of ``pread``/``pwrite``, which is keyword-only: a
    fourth positional argument is refused, since it is ``task_size`` in
    KvikIO's ``pread``/``pwrite``."""
    if not legacy:
        return buffer_offset
    raise TypeError(
        f"{name}(buffer, size, file_offset, {legacy[0]!r}): buffer_offset is keyword-only, "
        f"and a fourth positional argument is task_size in KvikIO's {name}; pass "
        f"task_size={legacy[0]!r} or buffer_offset={legacy[0]!r} by keyword")


#: The ranges of the stream-ordered calls: ``(size, file_offset,
#: buffer_offset)`` tuples, or an integer array of shape (N, 3) (numpy),
#: which the engine reads without a Python object per range.
Ranges = Union["Iterable[tuple[int | None, int, int]]", "NDArray[np.integer[Any]]"]


#: ``hipfile.open`` mode strings and their flags. ``"a"`` carries
#: ``O_APPEND``, which makes an append handle (``FileHandle.appends``):
#: hipFile refuses ``O_APPEND`` descriptors (positional writes ignore their
#: offset under it), so the file is opened without it and the binding
#: places the writes at the end itself.
MODES: dict[str, int] = {
    "r": os.O_RDONLY,
    "r+": os.O_RDWR,
    "w": os.O_RDWR | os.O_CREAT | os.O_TRUNC,
    "a": os.O_RDWR | os.O_CREAT | os.O_APPEND,
}

_EXCLUSIVE = os.O_RDWR | os.O_CREAT | os.O_EXCL


def parse_mode(mode: str) -> int:
    """The ``os.open`` flags of a mode string as Python's :func:`open` and
    KvikIO take it.

    One of ``r``, ``w``, ``a`` and ``x`` (:data:`MODES`, and ``x``:
    ``O_RDWR | O_CREAT | O_EXCL``, the file must not exist), optionally with
    ``+`` and ``b`` in any order (``"rb"``, ``"wb"``, ``"r+b"``, ``"rb+"``,
    ``"w+"``, ``"ab"``, ``"x+b"``). ``b`` changes nothing (hipfile moves
    bytes) and ``+`` only adds writing to ``r``: writable modes open for
    reading too.

    Raises
    ------
    ValueError
        Any other string (text mode ``t`` included).
    """
    kinds = [c for c in mode if c in "rwax"]
    valid = (len(kinds) == 1 and not set(mode) - set("rwax+b")
             and mode.count("+") <= 1 and mode.count("b") <= 1)
    if not valid:
        raise ValueError(
            "mode must be one of 'r', 'r+', 'w', 'a' (or 'x'), optionally with '+' and 'b' "
            "as Python's open() and KvikIO take them ('rb', 'wb', 'r+b', 'w+', ...), or "
            f"os.open flags as an int; got {mode!r}")
    kind = kinds[0]
    if kind == "r":
        return MODES["r+"] if "+" in mode else MODES["r"]
    if kind == "x":
        return _EXCLUSIVE
    return MODES[kind]


def mode_string(flags: int) -> str:
    """The mode string that describes ``os.open`` flags (what
    :attr:`FileHandle.mode` says of a file opened with flags)."""
    access = flags & os.O_ACCMODE
    if flags & os.O_CREAT and flags & os.O_EXCL:
        kind = "x"
    elif flags & os.O_APPEND or (flags & os.O_CREAT and not flags & os.O_TRUNC):
        kind = "a"
    elif flags & os.O_TRUNC or access == os.O_WRONLY:
        kind = "w"
    else:
        kind = "r"
    return kind + ("+" if access == os.O_RDWR else "")


def is_direct(fd: int) -> bool:
    """Whether ``fd`` was opened with ``O_DIRECT``."""
    return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & O_DIRECT)


#: Held while a handle opens its second descriptor of a file (the buffered
#: twin of an ``O_DIRECT`` one, or the ``O_DIRECT`` one of a buffered
#: file), so that it is opened once.
TWIN_LOCK = threading.Lock()


def buffered_twin(fd: int) -> int:
    """A new descriptor of ``fd``'s file without ``O_DIRECT`` (same access
    mode, close on exec), opened through ``/proc/self/fd``; the caller
    closes it."""
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    return os.open(f"/proc/self/fd/{fd}", (flags & os.O_ACCMODE) | os.O_CLOEXEC)


def is_read_only(fd: int) -> bool:
    """Whether ``fd`` was opened for reading only (False when it cannot be
    asked: a closed descriptor)."""
    try:
        return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
    except OSError:
        return False


def raise_if_read_only(fd: int | None, mode: str, path: Any, exc: OSError) -> None:
    """A write failed with ``exc``: if ``fd`` is read-only, raise an
    ``EBADF`` :class:`OSError` that says so, with ``exc`` (the library's own
    error, which may be another errno) as its cause; else return."""
    if fd is not None and is_read_only(fd):
        raise read_only_error(mode, path) from exc


def one_group(handles: list[StreamIOHandle], name: str) -> StreamIOHandle:
    """The one handle of a grouped submission (none: no range was given)."""
    if not handles:
        raise ValueError(f"{name} needs at least one range")
    return handles[0]
