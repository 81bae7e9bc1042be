"""Batch I/O: many reads and writes submitted in one call, polled for completion.

A :class:`BatchIO` is one ``hipFileBatchHandle_t``. Entries are added with
:meth:`BatchIO.read` / :meth:`BatchIO.write`, handed to the library together
by :meth:`BatchIO.submit`, and their completions collected with
:meth:`BatchIO.get_status` or :meth:`BatchIO.wait`::

    with hipfile.BatchIO(8) as batch:
        for i, fh in enumerate(files):
            batch.read(fh, buffers[i], cookie=i)
        batch.submit()
        for event in batch.wait():
            if not event.ok:
                raise event.error()

The parameter array of a submission is kept alive until every entry of it has
reached a final state (the ABI requires it), and so are the files and buffers
the entries use: closing such a file, or deregistering such a
:class:`~hipfile.Buffer`, raises :class:`~hipfile.InFlightError`.

One batch holds at most ``max_batch_io_count`` entries (128 by default).
:func:`batch_read` and :func:`batch_write` take any number of ranges of one
file and buffer and run them as batches, several in flight at once::

    nbytes = hipfile.batch_read(fh, dev, [(4096, i * 4096, i * 4096) for i in range(1000)])
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from hipfile._interop import Deadline, as_int, as_timeout, io_range, wait_slices
from hipfile._lib import _hipfile
from hipfile._lib._hipfile import FileCore
from hipfile._lifetime import ClosesWhenCollected
from hipfile.batch._abi import IO_EVENTS, IO_PARAMS
from hipfile.batch._event import (
    _FINAL,
    _MAX_ENTRY,
    _SLICE,
    CLOSE_TIMEOUT,
    BatchEvent,
    _abandoned,
    _Entry,
    _set_up,
    _Submission,
)
from hipfile.batch._ranges import batch_read, batch_write, refuse_append_writes
from hipfile.enums import BatchMode, Opcode, OpError, Status
from hipfile.errors import (
    BatchFullError,
    ClosedError,
    ClosedFileError,
)

__all__ = ["BatchEvent", "BatchIO", "batch_read", "batch_write"]

_MAX_NR = 2**32 - 1


class BatchIO(ClosesWhenCollected):
    """A batch context: up to ``max_nr`` entries in flight at once.

    Parameters
    ----------
    max_nr
        Most entries submitted and not yet reported final at any time (the
        library caps it; see ``DriverProperties.max_batch_io_count``).

    Raises
    ------
    TypeError, ValueError
        ``max_nr`` is not a positive int.
    HipFileException
        The library refused (e.g. ``InvalidValueError`` above the cap, with a
        message that names the cap and :func:`batch_read` / :func:`batch_write`
        for more entries; some libraries also ask for an open
        :class:`~hipfile.Driver`, with ``DriverNotInitializedError``).

    Notes
    -----
    An entry's id (an int) is returned by :meth:`read` / :meth:`write`; the
    library sees it as the entry's cookie, and events map it back to the
    caller's cookie object. The object is safe to use from several threads.

    See Also
    --------
    hipFileBatchIOSetUp, hipFileBatchIOSubmit, hipFileBatchIOGetStatus,
    hipFileBatchIOCancel, hipFileBatchIODestroy
    """

    def __init__(self, max_nr: int) -> None:
        self._handle: int | None = None
        n = as_int(max_nr, "max_nr")
        if not 0 < n <= _MAX_NR:
            raise ValueError(f"max_nr must be in 1..{_MAX_NR}, got {n}")
        self._max_nr = n
        self._lock = threading.RLock()          # entries and counts
        self._status_lock = threading.Lock()    # the events array and library waits
        self._queued: list[_Entry] = []
        self._inflight: dict[int, _Entry] = {}
        self._undelivered: list[BatchEvent] = []
        self._next_id = 1
        self._closing = False
        self._events = np.zeros(n, dtype=IO_EVENTS)
        # rows of _events the library handed over and not yet turned into
        # BatchEvents (written by the shim before it returns: an interrupt
        # right after the call loses nothing)
        self._nr = np.zeros(1, dtype=np.uint32)
        self._handle = _set_up(n)

    # -- state ------------------------------------------------------------

    @property
    def max_nr(self) -> int:
        """Capacity given at construction."""
        return self._max_nr

    @property
    def closed(self) -> bool:
        """Whether the batch has been destroyed."""
        return self._handle is None

    @property
    def handle(self) -> int | None:
        """The ``hipFileBatchHandle_t`` as an int, or None when closed."""
        return self._handle

    @property
    def queued(self) -> int:
        """Entries added and not yet submitted (``inflight`` counts the
        submitted ones)."""
        return len(self._queued)

    @property
    def inflight(self) -> int:
        """Entries submitted whose final state has not been seen yet."""
        return len(self._inflight)

    def _check_open(self) -> int:
        handle = self._handle
        if handle is None or self._closing:
            raise ClosedError("operation on a closed BatchIO")
        return handle

    # -- building -----------------------------------------------------------

    def _add(self, opcode: Opcode, fh: Any, buffer: Any, size: int | None,
             file_offset: int, buffer_offset: int, cookie: Any) -> int:
        self._check_open()
        if not isinstance(fh, FileCore):
            raise TypeError(f"fh must be a hipfile.FileHandle, not {type(fh).__name__}")
        fh._check_registered()
        if opcode == Opcode.WRITE:
            refuse_append_writes(fh)
        ptr, _, owner, size, file_offset, buffer_offset = io_range(
            buffer, size, file_offset, buffer_offset)
        if size > _MAX_ENTRY:
            raise ValueError(f"a batch entry moves at most {_MAX_ENTRY:#x} bytes; "
                             f"split the {size}-byte range into several entries")
        with self._lock:
            self._check_open()
            if len(self._queued) >= self._max_nr:
                raise ValueError(f"the batch holds at most {self._max_nr} entries; "
                                 "submit the queued ones first")
            entry = _Entry(self._next_id, opcode, fh, ptr, owner, size, file_offset,
                           buffer_offset, cookie)
            self._next_id += 1
            self._queued.append(entry)
        return entry.id

    def read(self, fh: Any, buffer: Any, size: int | None = None, file_offset: int = 0,
             buffer_offset: int = 0, cookie: Any = None) -> int:
        """Add a read of ``size`` bytes at ``file_offset`` into ``buffer`` at
        ``buffer_offset`` (not yet submitted).

        Parameters
        ----------
        fh, buffer
            The open :class:`~hipfile.FileHandle`, and the device memory: a
            :class:`~hipfile.Buffer` or anything it accepts.
        size
            Bytes to read (at most 0x7ffff000 per entry); defaults to the
            rest of the buffer.
        file_offset, buffer_offset
            Where in the file and in the buffer.
        cookie
            Any object, returned as :attr:`BatchEvent.cookie`; defaults to
            the entry's id.

        Returns
        -------
        int
            The entry's id.

        Raises
        ------
        TypeError
            ``fh`` is not a FileHandle, ``buffer`` is not a device buffer, or
            a size/offset is not an int.
        ValueError
            Negative offsets, a range that overruns the buffer or exceeds
            one entry, a closed file or batch, or ``max_nr`` entries queued.
        """
        return self._add(Opcode.READ, fh, buffer, size, file_offset, buffer_offset, cookie)

    def write(self, fh: Any, buffer: Any, size: int | None = None, file_offset: int = 0,
              buffer_offset: int = 0, cookie: Any = None) -> int:
        """Add a write of ``size`` bytes from ``buffer`` at ``buffer_offset``
        to the file at ``file_offset`` (not yet submitted); returns the
        entry's id. Arguments as :meth:`read`.

        Raises
        ------
        ValueError
            As :meth:`read`, or ``fh`` is an append handle
            (:attr:`FileHandle.appends`), whose writes go to the end of the
            file rather than to an offset.
        """
        return self._add(Opcode.WRITE, fh, buffer, size, file_offset, buffer_offset, cookie)

    # -- submitting -----------------------------------------------------------

    def submit(self, flags: int = 0) -> list[int]:
        """Submit every queued entry in one ``hipFileBatchIOSubmit`` call.

        Parameters
        ----------
        flags
            Submission flags (0; the library defines no others yet).

        Returns
        -------
        list[int]
            Ids of the submitted entries (empty if none was queued).

        Raises
        ------
        ValueError
            The batch is closed, or bad flags.
        ClosedFileError
            A file of a queued entry was closed since it was added, or is
            closing (``close(wait=True)`` in another thread; nothing is
            submitted).
        BatchFullError
            The entries would exceed ``max_nr`` together with those still in
            flight (nothing is submitted; collect completions first).
        HipFileException
            The library refused the submission.

        On any error nothing is submitted and the entries stay queued
        (:meth:`clear` drops them).

        See Also
        --------
        hipFileBatchIOSubmit
        """
        flags = as_int(flags, "flags")
        if not 0 <= flags <= _MAX_NR:
            raise ValueError(f"flags must be in 0..{_MAX_NR}, got {flags}")
        with self._lock:
            handle = self._check_open()
            entries = self._queued
            if not entries:
                return []
            if len(entries) + len(self._inflight) > self._max_nr:
                raise BatchFullError(OpError.BATCH_FULL, 0, "hipFileBatchIOSubmit",
                                     f"{len(entries)} queued + {len(self._inflight)} in flight "
                                     f"> max_nr {self._max_nr}")
            # Each entry's file is checked and held in one step (a closed or
            # closing file is refused, and a close that begins after waits
            # for the entry), before the submission and the bookkeeping.
            handles = []
            held: list[_Entry] = []
            try:
                for e in entries:
                    h = e.fh.handle
                    if h is None:
                        raise ClosedFileError(f"the file of batch entry {e.id} was closed "
                                              "before submit")
                    e.hold_open()
                    held.append(e)
                    handles.append(h)
                n = len(entries)
                params = np.zeros(n, dtype=IO_PARAMS)
                params["mode"] = int(BatchMode.BATCH)
                params["buffer"] = [e.ptr for e in entries]
                params["file_offset"] = [e.file_offset for e in entries]
                params["buffer_offset"] = [e.buffer_offset for e in entries]
                params["size"] = [e.size for e in entries]
                params["fh"] = handles
                params["opcode"] = [int(e.opcode) for e in entries]
                params["cookie"] = [e.id for e in entries]
                _hipfile.batch_io_submit(handle, n, params.ctypes.data, flags)
            except BaseException:
                for e in held:
                    e.hold(-1)
                raise
            submission = _Submission(params, n)
            for e in entries:
                e.submission = submission
                self._inflight[e.id] = e
            self._queued = []
            return [e.id for e in entries]

    def clear(self) -> int:
        """Drop the entries added and not yet submitted; returns how many.

        Raises
        ------
        ValueError
            The batch is closed.
        """
        with self._lock:
            self._check_open()
            n = len(self._queued)
            self._queued = []
        return n

    # -- completion -----------------------------------------------------------

    def _finish(self, entry: _Entry) -> None:
        """The entry reached a final state: release what it held."""
        del self._inflight[entry.id]
        entry.hold(-1)
        sub = entry.submission
        entry.submission = None
        if sub is not None:
            sub.remaining -= 1
            if sub.remaining == 0:
                sub.array = np.empty(0, dtype=IO_PARAMS)
        entry.owner = None
        entry.buffer_core = None

    def _poll(self, handle: int, min_nr: int, timeout: float | None) -> None:
        """One library call; the caller holds ``_status_lock``. Events go to
        ``_undelivered`` as they are decoded, so an interrupted wait (Ctrl-C)
        keeps them for the next call."""
        self._drain()
        with self._lock:
            min_nr = min(min_nr, len(self._inflight))
        _hipfile.batch_io_get_status(handle, min_nr, self._max_nr, self._events.ctypes.data,
                                     timeout, self._nr.ctypes.data)
        self._drain()

    def _drain(self) -> None:
        """Decode the rows the last library call handed over."""
        n = int(self._nr[0])
        if n == 0:
            return
        rows = self._events[:n]
        cookies = rows["cookie"].tolist()
        statuses = rows["status"].tolist()
        rets = rows["ret"].tolist()
        with self._lock:
            for token, st, ret in zip(cookies, statuses, rets, strict=True):
                entry = self._inflight.get(token)
                if entry is None:
                    continue  # decoded already (an interrupted drain), or not ours
                status = Status(st)
                self._undelivered.append(
                    BatchEvent(entry.cookie, status, int(ret), entry.id, entry.opcode))
                if status & _FINAL:
                    self._finish(entry)
            self._nr[0] = 0

    def _gather(self, need: Callable[[], int], deadline: Deadline) -> None:
        """Poll, in slices of :func:`~hipfile._interop.wait_slices`, until
        ``need()`` (how many more events to wait for) is 0, nothing is in
        flight, the batch is closed, or ``deadline`` passed; the caller
        holds ``_status_lock``."""
        first = True

        def one_slice(seconds: float) -> bool:
            nonlocal first
            handle = self._handle
            if handle is None or (self._closing and not first):
                return True
            n = need()
            self._poll(handle, n if seconds > 0 else 0, seconds if n else 0.0)
            first = False
            return need() == 0 or not self._inflight

        wait_slices(one_slice, deadline, _SLICE)

    def _collect(self, min_nr: int, timeout: float | None) -> list[BatchEvent]:
        """Events until ``min_nr`` of them arrived or ``timeout`` passed."""
        deadline = Deadline(timeout)
        with self._status_lock:
            self._gather(lambda: max(0, min_nr - len(self._undelivered)), deadline)
            out, self._undelivered = self._undelivered, []
            return out

    def get_status(self, min_nr: int = 0, timeout: float | None = None) -> list[BatchEvent]:
        """Collect completion events.

        Parameters
        ----------
        min_nr
            Wait until at least this many events are available (capped at the
            number of entries in flight, so the call cannot wait for ever).
            0 only polls.
        timeout
            Seconds to wait at most, or None for no limit. When it expires
            the events gathered so far are returned.

        Returns
        -------
        list[BatchEvent]
            Events in the order the library reported them (at most
            ``max_nr`` per library call).

        Raises
        ------
        ValueError
            The batch is closed, ``min_nr`` is outside ``0..max_nr``, or
            ``timeout`` is negative.
        RuntimeError
            ``min_nr`` > 0 while entries are queued and none is submitted.

        See Also
        --------
        hipFileBatchIOGetStatus
        """
        self._check_open()
        min_nr = as_int(min_nr, "min_nr")
        if not 0 <= min_nr <= self._max_nr:
            raise ValueError(f"min_nr must be in 0..{self._max_nr}, got {min_nr}")
        timeout = as_timeout(timeout)
        if min_nr:
            self._check_submitted("get_status(min_nr > 0)")
        return self._collect(min_nr, timeout)

    def _check_submitted(self, call: str) -> None:
        """Refuse to wait when entries are queued and none was submitted:
        the wait would return nothing at once and leave them unsent."""
        if self._queued and not self._inflight:
            raise RuntimeError(f"{call} before submit(): {len(self._queued)} entry(ies) are "
                               "queued but not submitted; call submit() first (or clear() "
                               "to drop them)")

    def done(self) -> bool:
        """Whether every submitted entry has reached a final state (never
        blocks: collects the events already available, which the next
        :meth:`wait` or :meth:`get_status` returns).

        Raises
        ------
        ValueError
            The batch is closed.
        """
        self._check_open()
        if self._inflight:
            with self._status_lock:
                self._gather(lambda: 0, Deadline(0))
        return not self._inflight

    def result(self, timeout: float | None = None) -> list[BatchEvent]:
        """Same as :meth:`wait` (the ``concurrent.futures`` name)."""
        return self.wait(timeout)

    def get(self, timeout: float | None = None) -> list[BatchEvent]:
        """Same as :meth:`wait` (KvikIO's name)."""
        return self.wait(timeout)

    def wait(self, timeout: float | None = None) -> list[BatchEvent]:
        """Collect events until every submitted entry has reached a final state.

        Parameters
        ----------
        timeout
            Seconds to wait at most, or None for no limit.

        Returns
        -------
        list[BatchEvent]
            The events collected (one final event per entry in flight).

        Raises
        ------
        TimeoutError
            Entries are still in flight after ``timeout``. The events
            collected so far are kept and returned by the next
            :meth:`get_status` or :meth:`wait`; so are they when the wait
            is interrupted (``KeyboardInterrupt``, seen within 0.1 s).
        ValueError
            The batch is closed or ``timeout`` is negative.
        RuntimeError
            Entries are queued and none is submitted (:meth:`submit` them
            first); with nothing queued or in flight it returns ``[]``.
        """
        self._check_open()
        self._check_submitted("wait()")
        timeout = as_timeout(timeout)
        deadline = Deadline(timeout)
        with self._status_lock:
            self._gather(lambda: len(self._inflight), deadline)
            if not self._inflight:
                out, self._undelivered = self._undelivered, []
                return out
            if self._handle is None or self._closing:
                raise ClosedError("the BatchIO was closed while waiting")
            raise TimeoutError(f"{len(self._inflight)} batch entry(ies) still in "
                               f"flight after {timeout} s")

    def cancel(self) -> None:
        """Cancel the entries in flight.

        Canceled entries report ``Status.CANCELED`` through
        :meth:`get_status`; entries already running may still complete.

        Raises
        ------
        ValueError
            The batch is closed.
        HipFileException
            The library refused.

        See Also
        --------
        hipFileBatchIOCancel
        """
        _hipfile.batch_io_cancel(self._check_open())

    # -- lifetime -------------------------------------------------------------

    def close(self) -> None:
        """Cancel what is in flight, wait (bounded) for it, destroy the batch.

        Idempotent. Events collected here are discarded. Files and buffers
        held by entries are released afterwards.

        See Also
        --------
        hipFileBatchIOCancel, hipFileBatchIODestroy
        """
        with self._lock:
            if self._handle is None or self._closing:
                return
            self._closing = True
            handle = self._handle
        try:
            with self._status_lock:
                if self._inflight:
                    try:
                        _hipfile.batch_io_cancel(handle)
                    except Exception:
                        pass
                    def drained(seconds: float) -> bool:
                        self._poll(handle, len(self._inflight), seconds)
                        return not self._inflight

                    try:
                        wait_slices(drained, Deadline(CLOSE_TIMEOUT), _SLICE)
                    except Exception:
                        pass
                self._undelivered = []
        finally:
            with self._status_lock, self._lock:
                self._handle = None
                _hipfile.batch_io_destroy(handle)
                for entry in list(self._inflight.values()):
                    sub = entry.submission
                    if sub is not None and sub.remaining and sub.array.size:
                        _abandoned.append(sub.array)
                        sub.array = np.empty(0, dtype=IO_PARAMS)
                    self._finish(entry)
                self._queued = []
                self._closing = False

    def __enter__(self) -> BatchIO:
        self._check_open()
        return self

    def _left_open(self) -> bool:
        return getattr(self, "_handle", None) is not None

    def __repr__(self) -> str:
        if self._handle is None:
            return f"<hipfile.BatchIO max_nr={self._max_nr} closed>"
        return (f"<hipfile.BatchIO max_nr={self._max_nr} queued={len(self._queued)} "
                f"inflight={len(self._inflight)}>")


