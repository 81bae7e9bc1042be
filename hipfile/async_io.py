"""Stream-ordered I/O: :class:`AsyncIOHandle` and capability checks."""

from __future__ import annotations

from hipfile._lib import _hipfile
from hipfile._lib._hipfile import AsyncIOHandle, pending_handles, pool_stats, trim_pool

__all__ = ["AsyncIOHandle", "pending_handles", "pool_stats", "supports_async", "trim_pool"]

_ASYNC_SYMBOLS = (
    "hipFileReadAsync",
    "hipFileWriteAsync",
    "hipFileStreamRegister",
    "hipFileStreamDeregister",
)


def supports_async() -> bool:
    """Whether the loaded libhipfile offers stream-ordered I/O.

    Answers from the exported symbols and the version (0.2.0 and later);
    registers nothing and starts no runtime. False when no library is found.
    """
    from hipfile.errors import HipFileLibraryError

    try:
        if not all(_hipfile.has_symbol(name) for name in _ASYNC_SYMBOLS):
            return False
        if not _hipfile.has_symbol("hipFileGetVersion"):
            return False
        return tuple(_hipfile.get_version()) >= (0, 2, 0)
    except HipFileLibraryError:
        return False
