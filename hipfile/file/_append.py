"""Append handles: where the writes of a handle opened to append go.

A handle opened to append (mode ``"a"``, ``os.O_APPEND``) makes one
:class:`AppendEnd` and gives it to its compiled core
(``FileCore._append``, None for other handles), whose asynchronous writes
take their ranges from it; it holds no reference to the handle.
"""

from __future__ import annotations

import os
import threading

from hipfile.file._descriptors import Descriptors

__all__ = ["AppendEnd"]


class AppendEnd:
    """The end-of-file bookkeeping of one append handle, whose descriptors
    are ``descriptors``: the end of the appends in flight through it
    (reserved), and the lock that places one append at a time."""

    def __init__(self, descriptors: Descriptors) -> None:
        self.descriptors = descriptors
        self.lock = threading.Lock()
        self.end = 0

    def at(self, file_offset: int | None, size: int, *, reserve: bool = True) -> int:
        """The file offset of an append of ``size`` bytes: the end of the
        file, or of the appends still in flight through the handle. With
        ``reserve`` the range is taken (an operation that finishes later);
        without, the caller holds :attr:`lock` while it writes.

        Raises
        ------
        ValueError
            ``file_offset`` is given and is not that end.
        ClosedFileError
            The handle is closed.
        """
        end = max(os.fstat(self.descriptors.fileno()).st_size, self.end)
        if file_offset is not None and file_offset != end:
            raise ValueError(
                f"this handle appends (mode {self.descriptors.mode!r}): its writes go to the "
                f"end of the file, offset {end}, not to file_offset={file_offset}; leave "
                f"file_offset out, or open the file with 'r+' to write at an offset")
        if reserve:
            self.end = end + size
        return end

    def reserve(self, file_offset: int | None, size: int) -> int:
        """:meth:`at` under :attr:`lock`, reserving the range; returns its offset."""
        with self.lock:
            return self.at(file_offset, size)

    def failed(self, start: int, size: int) -> None:
        """A reserved append of ``size`` bytes at ``start`` failed: give
        its range back when no later append was placed after it."""
        with self.lock:
            if self.end == start + size:
                self.end = start

    def refuse_ranges(self, call: str) -> None:
        """Raise ValueError: ``call`` writes at explicit offsets, which an
        append handle does not take."""
        raise ValueError(
            f"{call} writes at explicit file offsets, and this handle appends (mode "
            f"{self.descriptors.mode!r}); write with pwrite_async (file_offset left out) to "
            f"append, or open the file with 'r+' to write ranges")
