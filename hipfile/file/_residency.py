"""Page-cache residency of a file, asked of the kernel with ``mincore``:
whether a read will be served from memory or from the disk (the engine's
and the safetensors loader's choice of ``O_DIRECT``)."""

from __future__ import annotations

import os
from typing import Any

from hipfile._interop import as_int

__all__ = ["cached_fraction"]


_LIBC: Any = None


def libc() -> Any:
    """libc's ``mmap``, ``munmap`` and ``mincore`` through ctypes (loaded once)."""
    global _LIBC
    if _LIBC is None:
        import ctypes

        lib = ctypes.CDLL(None, use_errno=True)
        lib.mmap.restype = ctypes.c_void_p
        lib.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                             ctypes.c_int, ctypes.c_long)
        lib.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
        lib.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
        _LIBC = lib
    return _LIBC


_WINDOW_PAGES = 16     # pages in one window of a sampled residency check


def cached_fraction(path: str | os.PathLike[str] | int, *,
                    sample_pages: int | None = None) -> float:
    """The fraction of a file's pages in the page cache.

    ``mincore`` over a read-only shared mapping of the file (nothing is
    read: the mapping is never touched). The kernel looks up every page it
    is asked about, about 25 ms for a 3.5 GB file; ``sample_pages`` bounds
    that: the pages asked about are that many at most, in windows of 16
    spread evenly over the file, and the fraction is theirs.

    Parameters
    ----------
    path
        The file, or an open descriptor of it.
    sample_pages
        Ask about at most this many pages (at least 16); None asks about
        every page.

    Returns
    -------
    float
        From 0.0 to 1.0; 1.0 for an empty file, 0.0 when it cannot be told
        (no such file, a file that cannot be mapped).

    Raises
    ------
    TypeError
        ``sample_pages`` is not an int or None.
    ValueError
        ``sample_pages`` is below 16.

    See Also
    --------
    mincore
    """
    import mmap

    import numpy as np

    if sample_pages is not None:
        sample_pages = as_int(sample_pages, "sample_pages", "an int or None")
        if sample_pages < _WINDOW_PAGES:
            raise ValueError(f"sample_pages must be >= {_WINDOW_PAGES}, got {sample_pages}")
    own = not isinstance(path, int)
    try:
        fd = os.open(path, os.O_RDONLY) if not isinstance(path, int) else path
    except OSError:
        return 0.0
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 1.0
        c = libc()
        page = mmap.PAGESIZE
        pages = (size + page - 1) // page
        addr = c.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == (1 << 64) - 1 or addr == -1:
            return 0.0
        try:
            if sample_pages is None or sample_pages >= pages:
                vec = np.empty(pages, np.uint8)
                if c.mincore(addr, size, vec.ctypes.data) != 0:
                    return 0.0
                return int(np.count_nonzero(vec & 1)) / pages
            windows = sample_pages // _WINDOW_PAGES
            vec = np.empty((windows, _WINDOW_PAGES), np.uint8)
            last = pages - _WINDOW_PAGES      # the last window ends at the last page
            for i in range(windows):
                first = last * i // max(windows - 1, 1)
                if c.mincore(addr + first * page, _WINDOW_PAGES * page,
                                vec[i].ctypes.data) != 0:
                    return 0.0
            return int(np.count_nonzero(vec & 1)) / vec.size
        finally:
            c.munmap(addr, size)
    except OSError:
        return 0.0
    finally:
        if own:
            os.close(fd)
