"""The hipFile driver: open/close, reference count and driver settings."""

from __future__ import annotations

import operator

from hipfile._lib import _hipfile
from hipfile._lifetime import Closes

__all__ = ["Driver", "use_count"]


def use_count() -> int:
    """The driver's process-wide open count. Wraps ``hipFileUseCount``."""
    return int(_hipfile.use_count())


class Driver(Closes):
    """One reference to the hipFile driver.

    The library counts opens per process; each ``Driver`` object holds at
    most one of them, so :meth:`open` and :meth:`close` are idempotent per
    object. When the count drops to zero the library drops every handle and
    buffer registration.

    Examples
    --------
    >>> with Driver():
    ...     ...

    See Also
    --------
    hipFileDriverOpen, hipFileDriverClose
    """

    def __init__(self) -> None:
        self._open = False

    @staticmethod
    def use_count() -> int:
        """The process-wide open count. Wraps ``hipFileUseCount``."""
        return use_count()

    @property
    def is_open(self) -> bool:
        """Whether this object holds an open reference."""
        return self._open

    def open(self) -> Driver:
        """Open the driver (idempotent per object); returns ``self``.

        Raises
        ------
        HipFileException
            The library could not open the driver.
        HipFileLibraryNotFound
            No libhipfile is installed.
        """
        if not self._open:
            _hipfile.driver_open()
            self._open = True
        return self

    def close(self) -> None:
        """Release this object's reference (idempotent per object).

        Raises
        ------
        HipFileException
            The library refused (e.g. ``DriverNotInitializedError``).
        """
        if self._open:
            self._open = False
            _hipfile.driver_close()

    def __enter__(self) -> Driver:
        return self.open()

    def __repr__(self) -> str:
        return f"<hipfile.Driver {'open' if self._open else 'closed'}>"

    # settings -------------------------------------------------------------

    @staticmethod
    def set_poll_mode(poll: bool, poll_threshold_kib: int) -> None:
        """Use polling for I/O up to ``poll_threshold_kib`` KiB.
        Wraps ``hipFileDriverSetPollMode``."""
        _hipfile.driver_set_poll_mode(bool(poll), _size(poll_threshold_kib))

    @staticmethod
    def set_max_direct_io_size(kib: int) -> None:
        """Largest direct I/O in KiB. Wraps ``hipFileDriverSetMaxDirectIOSize``."""
        _hipfile.driver_set_max_direct_io_size(_size(kib))

    @staticmethod
    def set_max_cache_size(kib: int) -> None:
        """Device bounce-cache size in KiB. Wraps ``hipFileDriverSetMaxCacheSize``."""
        _hipfile.driver_set_max_cache_size(_size(kib))

    @staticmethod
    def set_max_pinned_mem_size(kib: int) -> None:
        """Pinned memory limit in KiB. Wraps ``hipFileDriverSetMaxPinnedMemSize``."""
        _hipfile.driver_set_max_pinned_mem_size(_size(kib))


def _size(value: int) -> int:
    if isinstance(value, bool):
        raise TypeError("size must be an int, not bool")
    value = operator.index(value)  # TypeError for str, float and other non-integers
    if value < 0:
        raise ValueError(f"size must be >= 0, got {value}")
    return value
