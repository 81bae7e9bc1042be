"""Append handles: where the writes of a handle opened to append go."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from hipfile._lib._hipfile import FileCore

__all__ = ["AppendPlacement"]


class AppendPlacement(FileCore):
    """The end-of-file bookkeeping of an append handle (a base of
    :class:`~hipfile.FileHandle`, which sets ``_appends``, ``_append_lock``
    and ``_append_end`` when it is made)."""

    _append_lock: threading.Lock
    _append_end: int

    if TYPE_CHECKING:
        @property
        def mode(self) -> str: ...
        def fileno(self) -> int: ...

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
        return self._appends

    def _append_at(self, file_offset: int | None, size: int, *, reserve: bool = True) -> int:
        """The file offset of an append of ``size`` bytes on this append
        handle: the end of the file, or of the appends still in flight
        through it. With ``reserve`` the range is taken (an operation that
        finishes later); without, the caller holds ``_append_lock`` while
        it writes.

        Raises
        ------
        ValueError
            ``file_offset`` is given and is not that end.
        ClosedFileError
            The handle is closed.
        """
        end = max(os.fstat(self.fileno()).st_size, self._append_end)
        if file_offset is not None and file_offset != end:
            raise ValueError(
                f"this handle appends (mode {self.mode!r}): its writes go to the end of the "
                f"file, offset {end}, not to file_offset={file_offset}; leave file_offset "
                f"out, or open the file with 'r+' to write at an offset")
        if reserve:
            self._append_end = end + size
        return end

    def _reserve_append(self, file_offset: int | None, size: int) -> int:
        """:meth:`_append_at` under the handle's append lock, reserving the
        range; returns its offset."""
        with self._append_lock:
            return self._append_at(file_offset, size)

    def _append_failed(self, start: int, size: int) -> None:
        """A reserved append of ``size`` bytes at ``start`` failed: give
        its range back when no later append was placed after it."""
        with self._append_lock:
            if self._append_end == start + size:
                self._append_end = start

    def _refuse_ranges_on_append(self, call: str) -> None:
        """Raise ValueError: ``call`` writes at explicit offsets, which an
        append handle does not take."""
        if self._appends:
            raise ValueError(
                f"{call} writes at explicit file offsets, and this handle appends (mode "
                f"{self.mode!r}); write with pwrite_async (file_offset left out) to append, "
                f"or open the file with 'r+' to write ranges")
