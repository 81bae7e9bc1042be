"""KvikIO's page-cache tools: ``get_page_cache_info``,
``drop_file_page_cache``, ``drop_system_page_cache`` and the older
``clear_page_cache`` (exported by :mod:`hipfile.compat.kvikio` and
:mod:`hipfile.compat.kvikio.cufile`, as KvikIO exports them).

``file`` is a path (``str`` or path-like), a file descriptor or a file
object with ``fileno()``; anything else raises :class:`ValueError`, as in
KvikIO. A file that cannot be opened raises its :class:`OSError`
subclass, which is also a :class:`RuntimeError` (KvikIO's type).
"""

from __future__ import annotations

import ctypes
import io
import mmap
import os
import warnings
from typing import Any

from hipfile.compat._errors import also
from hipfile.compat.kvikio._args import size_t
from hipfile.file._residency import libc

__all__ = ["clear_page_cache", "drop_file_page_cache", "drop_system_page_cache",
           "get_page_cache_info"]

#: Where the kernel takes a request to drop its caches (Linux).
DROP_CACHES = "/proc/sys/vm/drop_caches"

File = str | os.PathLike[str] | int | io.IOBase


_count = size_t


class _Opened:
    """The descriptor of ``file``, opened here (and closed on exit) for a
    path."""

    def __init__(self, file: Any) -> None:
        self._own = False
        if isinstance(file, str | os.PathLike):
            path = os.fspath(file)
            try:
                self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError as e:
                raise also(OSError(e.errno, f"Unable to open file. {e.strerror}", path),
                           RuntimeError) from e
            self._own = True
        elif isinstance(file, int) and not isinstance(file, bool):
            self.fd = file
        elif isinstance(file, io.IOBase):
            self.fd = file.fileno()
        else:
            raise ValueError("The type of `file` must be `os.PathLike`, `str`, `int`, "
                             f"or `io.IOBase`, not {type(file).__name__}")

    def __enter__(self) -> int:
        return self.fd

    def __exit__(self, *exc: object) -> None:
        if self._own:
            os.close(self.fd)


def get_page_cache_info(file: File, offset: int = 0, length: int = 0) -> tuple[int, int]:
    """Pages of ``file`` in the page cache: ``(cached, total)`` over the
    bytes ``[offset, offset + length)`` (``length`` 0: to the end of the
    file), in whole pages; ``(0, 0)`` from an offset at or past the end.

    Raises
    ------
    RuntimeError
        The file cannot be opened (also its :class:`OSError`).
    OSError
        ``mmap`` or ``mincore`` failed.
    ValueError
        ``file`` is not a path, descriptor or file object.
    OverflowError
        A negative ``offset`` or ``length`` (also a :class:`ValueError`).

    See Also
    --------
    mincore
    """
    off = _count("offset", offset)
    n = _count("length", length)
    with _Opened(file) as fd:
        size = os.fstat(fd).st_size
        if off >= size:
            return (0, 0)
        end = size if n == 0 else min(size, off + n)
        page = mmap.PAGESIZE
        start = off - off % page
        span = end - start
        npages = (span + page - 1) // page
        m = mmap.mmap(fd, span, access=mmap.ACCESS_READ, offset=start)
        try:
            import numpy as np

            exported = np.frombuffer(m, dtype=np.uint8)
            vec = (ctypes.c_ubyte * npages)()
            rc = libc().mincore(exported.ctypes.data, span, vec)
            del exported
            if rc != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"mincore: {os.strerror(err)}")
        finally:
            m.close()
        return (sum(v & 1 for v in vec), npages)


def drop_file_page_cache(file: File, offset: int = 0, length: int = 0,
                         sync_first: bool = True) -> None:
    """Ask the kernel to drop the cached pages of ``[offset, offset +
    length)`` of ``file`` (``length`` 0: to the end), after writing dirty
    pages back (``fdatasync``) when ``sync_first``; pages only partly in
    the range are kept. Needs no privileges.

    Raises
    ------
    RuntimeError, ValueError, OverflowError
        As :func:`get_page_cache_info`.
    OSError
        ``fdatasync`` or ``posix_fadvise`` failed.

    See Also
    --------
    posix_fadvise, fdatasync
    """
    off = _count("offset", offset)
    n = _count("length", length)
    with _Opened(file) as fd:
        if sync_first:
            os.fdatasync(fd)
        os.posix_fadvise(fd, off, n, os.POSIX_FADV_DONTNEED)


def drop_system_page_cache(reclaim_dentries_and_inodes: bool = True,
                           sync_first: bool = True) -> bool:
    """Drop the whole system's page cache (``vm.drop_caches`` 3, or 1
    without ``reclaim_dentries_and_inodes``), after ``sync()`` when
    ``sync_first``; returns whether the kernel took the request.

    This needs the privilege to write ``/proc/sys/vm/drop_caches``: without
    it (an unprivileged user, a container whose ``/proc/sys`` is read-only)
    it returns False and issues a :class:`RuntimeWarning` that says why.
    Unlike KvikIO it never runs ``sudo`` (which could wait for a password);
    :func:`drop_file_page_cache` needs no privileges.

    See Also
    --------
    sync
    """
    if sync_first:
        os.sync()
    value = "3" if reclaim_dentries_and_inodes else "1"
    try:
        with open(DROP_CACHES, "w") as f:
            f.write(value)
    except OSError as e:
        warnings.warn(f"cannot drop the system page cache: writing {value} to {DROP_CACHES} "
                      f"failed ({e.strerror or e}); it needs root and a writable /proc/sys. "
                      "drop_file_page_cache(file) needs no privileges.",
                      RuntimeWarning, stacklevel=2)
        return False
    return True


def clear_page_cache(reclaim_dentries_and_inodes: bool = True,
                     clear_dirty_pages: bool = True) -> bool:
    """:func:`drop_system_page_cache` under its older name (deprecated in
    KvikIO 26.04): emits a :class:`DeprecationWarning`."""
    warnings.warn("clear_page_cache is deprecated; use drop_system_page_cache",
                  DeprecationWarning, stacklevel=2)
    return drop_system_page_cache(reclaim_dentries_and_inodes, clear_dirty_pages)
