"""Batch entries: the completion event a batch reports, the bookkeeping of
one entry, and what BatchIO and batch_read/batch_write share (limits,
set-up, parameter arrays kept after their batch)."""

from __future__ import annotations

import concurrent.futures
import errno as _errno
from dataclasses import dataclass
from typing import Any

import numpy as np

from hipfile import defaults
from hipfile._lib import _hipfile
from hipfile._lib._errors import error_for_result
from hipfile._lib._hipfile import BufferCore, FileCore
from hipfile.enums import BASE_ERR, Opcode, OpError, Status
from hipfile.errors import HipFileException, InvalidValueError
from hipfile.properties import driver_get_properties

#: Final states: the library no longer uses the entry's memory.
_FINAL = Status.COMPLETE | Status.FAILED | Status.CANCELED | Status.INVALID | Status.TIMEOUT


@dataclass(frozen=True)
class BatchEvent:
    """The completion of one batch entry.

    Attributes
    ----------
    cookie
        The entry's cookie: the object given to :meth:`BatchIO.read` /
        :meth:`BatchIO.write`, or the entry's id when none was given.
    status
        The entry's :class:`~hipfile.Status` (``COMPLETE``, ``FAILED``,
        ``CANCELED``, ...).
    result
        Bytes moved, or a negative error code (``-errno`` for a system
        error, ``-code`` for a hipFile error).
    entry
        The entry's id, as returned by :meth:`BatchIO.read` /
        :meth:`BatchIO.write` and :meth:`BatchIO.submit`.
    opcode
        :class:`~hipfile.Opcode` of the entry.
    """

    cookie: Any
    status: Status
    result: int
    entry: int = -1
    opcode: Opcode = Opcode.READ

    @property
    def ok(self) -> bool:
        """Whether the entry completed without error."""
        return self.status == Status.COMPLETE and self.result >= 0

    @property
    def final(self) -> bool:
        """Whether the entry has reached a final state."""
        return bool(self.status & _FINAL)

    def error(self) -> BaseException | None:
        """The entry's error as an exception (not raised), or None if :attr:`ok`.

        A negative :attr:`result` is decoded with
        :func:`hipfile.errors.error_for_result`: ``-errno`` (1..4999) gives an
        :class:`OSError` subclass, ``-code`` a
        :class:`~hipfile.HipFileException` subclass. A canceled entry gives
        :class:`concurrent.futures.CancelledError`, a timed out one
        :class:`TimeoutError`, and a failed or invalid entry without a
        negative result an :class:`~hipfile.HipFileException`
        (``BATCH_SUBMIT_FAILED`` / ``INVALID_VALUE``).
        """
        if self.ok:
            return None
        func = "hipFileBatchIOGetStatus"
        r = self.result
        if r < 0:
            code = -r
            if code < BASE_ERR:
                # a system error: the library stores -errno
                return error_for_result(-1, code, func)
            return error_for_result(r, 0, func)
        if self.status & Status.CANCELED:
            return concurrent.futures.CancelledError(f"batch entry {self.entry} was canceled")
        if self.status & Status.TIMEOUT:
            return TimeoutError(_errno.ETIMEDOUT, f"batch entry {self.entry} timed out")
        if self.status & Status.INVALID:
            return HipFileException(OpError.INVALID_VALUE, 0, func,
                                    f"batch entry {self.entry} was rejected as invalid")
        if self.status & Status.FAILED:
            return HipFileException(OpError.BATCH_SUBMIT_FAILED, 0, func,
                                    f"batch entry {self.entry} failed")
        return HipFileException(OpError.INVALID_VALUE, 0, func,
                                f"batch entry {self.entry} has not completed "
                                f"(status {self.status!r})")


class _Submission:
    """One parameter array and how many of its entries are not final yet."""

    __slots__ = ("array", "remaining")

    def __init__(self, array: np.ndarray, remaining: int) -> None:
        self.array = array
        self.remaining = remaining


class _Entry:
    __slots__ = (
        "buffer_core",
        "buffer_offset",
        "cookie",
        "fh",
        "file_offset",
        "id",
        "opcode",
        "owner",
        "ptr",
        "size",
        "submission",
    )

    def __init__(self, id: int, opcode: Opcode, fh: FileCore, ptr: int, owner: Any,
                 size: int, file_offset: int, buffer_offset: int, cookie: Any) -> None:
        self.id = id
        self.opcode = opcode
        self.fh = fh
        self.ptr = ptr
        self.owner = owner
        self.buffer_core = owner if isinstance(owner, BufferCore) else None
        self.size = size
        self.file_offset = file_offset
        self.buffer_offset = buffer_offset
        self.cookie = id if cookie is None else cookie
        self.submission: _Submission | None = None

    def hold(self, delta: int) -> None:
        self.fh._hold(delta)
        if self.buffer_core is not None:
            self.buffer_core._hold(delta)

    def hold_open(self) -> None:
        """``hold(+1)``, the file checked and held in one step
        (ClosedFileError when it is closed or closing)."""
        self.fh._hold_open()
        if self.buffer_core is not None:
            self.buffer_core._hold(+1)


_MAX_ENTRY: int = _hipfile.MAX_IO_CHUNK
#: Longest single wait inside the library, so that signals and close() are
#: seen between waits.
_SLICE = 0.1
#: How long close() waits for canceled entries to report before destroying.
CLOSE_TIMEOUT = 10.0

# Parameter arrays whose entries never reported a final state before their
# batch was destroyed: never freed, in case the library still reads them.
_abandoned: list[np.ndarray] = []


def _set_up(max_nr: int) -> int:
    """``hipFileBatchIOSetUp``; a refusal of ``max_nr`` names the cap."""
    try:
        return int(_hipfile.batch_io_set_up(max_nr))
    except InvalidValueError as exc:
        try:
            cap = f"at most {driver_get_properties().max_batch_io_count} entries " \
                  "(DriverProperties.max_batch_io_count)"
        except Exception:
            cap = (f"at most {defaults.BATCH_MAX_ENTRIES_CAP} entries by default "
                   "(DriverProperties.max_batch_io_count, which this library does not report)")
        raise InvalidValueError(
            exc.hipfile_err, exc.hip_err, exc.func,
            f"BatchIO({max_nr}): a batch holds {cap}; for more entries use "
            "hipfile.batch_read/batch_write, which submit successive batches") from exc
