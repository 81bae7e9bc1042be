"""Stream-ordered I/O: :class:`AsyncIOHandle`, capability checks, and the
one completion protocol of every handle of an operation in flight."""

from __future__ import annotations

from typing import Protocol, TypeVar, runtime_checkable

from hipfile._lib import _hipfile
from hipfile._lib._hipfile import (
    AsyncIOHandle,
    pending_handles,
    pool_stats,
    reserve_pool,
    trim_pool,
)

__all__ = ["AsyncIOHandle", "Completion", "pending_handles", "pool_stats", "reserve_pool",
           "supports_async", "trim_pool"]

T_co = TypeVar("T_co", covariant=True)


@runtime_checkable
class Completion(Protocol[T_co]):
    """What every handle of an operation in flight answers, whichever path
    runs it: :class:`AsyncIOHandle` (stream-ordered), :class:`StreamIOHandle`
    (the stream engine), :class:`~hipfile.parallel.IOFuture` (the thread
    pool) and :class:`~hipfile.BatchIO` (a batch's entries in flight).

    ``isinstance(obj, Completion)`` checks that the four methods exist.
    """

    def done(self) -> bool:
        """Whether the operation has completed; never blocks."""
        ...

    def wait(self, timeout: float | None = None) -> T_co:
        """Block until it completes (at most ``timeout`` seconds, None: no
        limit) and return its result; raise ``TimeoutError`` when the time
        passed first, and the operation's error when it failed."""
        ...

    def result(self, timeout: float | None = None) -> T_co:
        """The same as :meth:`wait` (the ``concurrent.futures`` name)."""
        ...

    def get(self, timeout: float | None = None) -> T_co:
        """The same as :meth:`wait` (KvikIO's name)."""
        ...

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
