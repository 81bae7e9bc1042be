"""Any number of ranges of one file and buffer, run as overlapped batches.

The ranges become one parameter array, built in bulk; up to ``in_flight``
batch handles each run a slice of it, and a handle whose entries have all
reported is refilled at once with the next slice, so the library always has
work queued while the completions of earlier batches are collected. The
buffer is resolved once and the file and buffer are held once for the whole
call (closing either from another thread raises
:class:`~hipfile.InFlightError` meanwhile).
"""

from __future__ import annotations

import errno as _errno
from collections import deque
from collections.abc import Iterable
from typing import Any

import numpy as np

from hipfile._interop import Deadline, as_timeout, buffer_info, wait_slices
from hipfile._lib import _hipfile
from hipfile._lib._errors import name_file
from hipfile._lib._hipfile import BufferCore, FileCore
from hipfile.batch import _event as shared
from hipfile.batch._abi import IO_EVENTS, IO_PARAMS
from hipfile.batch._event import BatchEvent
from hipfile.enums import BatchMode, Opcode, Status
from hipfile.errors import ClosedFileError, HipFileException

#: Batches in flight at once by default.
IN_FLIGHT = 1


class _Slot:
    """One batch handle and the entries it runs."""

    __slots__ = ("array", "events", "handle", "inflight", "no", "nr")

    def __init__(self, no: int, handle: int, capacity: int) -> None:
        self.no = no                            # its place in _Run.slots
        self.handle = handle
        self.inflight = 0                       # entries submitted, not yet final
        self.array: np.ndarray | None = None    # the submitted parameters
        self.events = np.zeros(capacity, dtype=IO_EVENTS)
        self.nr = np.zeros(1, dtype=np.uint32)


class _Entries:
    """Per-entry bookkeeping in arrays: the range each entry belongs to, its
    size and offsets, and the slot running it (-1: none) (entry ``k`` has
    cookie ``k + 1``)."""

    def __init__(self, index: list[int], size: list[int], foff: list[int],
                 boff: list[int]) -> None:
        self.index = np.asarray(index, dtype=np.int64)
        self.size = np.asarray(size, dtype=np.int64)
        self.foff = np.asarray(foff, dtype=np.int64)
        self.boff = np.asarray(boff, dtype=np.int64)
        self.slot = np.full(len(self.index), -1, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.index)

    def add(self, index: int, size: int, foff: int, boff: int) -> int:
        """Append one entry (the rest of a short one); returns its number."""
        self.index = np.append(self.index, index)
        self.size = np.append(self.size, size)
        self.foff = np.append(self.foff, foff)
        self.boff = np.append(self.boff, boff)
        self.slot = np.append(self.slot, -1)
        return len(self.index) - 1

    def params(self, ids: np.ndarray, fh: int, ptr: int, opcode: int) -> np.ndarray:
        """A parameter array for entries ``ids``, built in bulk."""
        p = np.zeros(len(ids), dtype=IO_PARAMS)
        p["mode"] = int(BatchMode.BATCH)
        p["buffer"] = ptr
        p["file_offset"] = self.foff[ids]
        p["buffer_offset"] = self.boff[ids]
        p["size"] = self.size[ids]
        p["fh"] = fh
        p["opcode"] = opcode
        p["cookie"] = ids + 1
        return p


def _parse(ranges: Iterable[tuple[int | None, int, int]], length: int, owner: Any = None
           ) -> tuple[int, _Entries]:
    """Check every range against the buffer (``owner``: the buffer object,
    so that a bare address is checked against its allocation); ranges above
    one entry's limit become several entries, empty ones none."""
    index: list[int] = []
    size: list[int] = []
    foff: list[int] = []
    boff: list[int] = []
    check = _hipfile.io_range_check
    count = 0
    for r in ranges:
        t: tuple[Any, ...] = tuple(r)
        if len(t) != 3:
            raise TypeError(f"each range must be (size, file_offset, buffer_offset), got {r!r}")
        n, fo, bo = check(length, *t, owner)
        if n == 0:
            pass  # nothing to move: no entry
        elif n <= shared._MAX_ENTRY:
            index.append(count)
            size.append(n)
            foff.append(fo)
            boff.append(bo)
        else:
            for start in range(0, n, shared._MAX_ENTRY):
                index.append(count)
                size.append(min(shared._MAX_ENTRY, n - start))
                foff.append(fo + start)
                boff.append(bo + start)
        count += 1
    return count, _Entries(index, size, foff, boff)


class _Run:
    """One batch_read/batch_write call: its slots, queue and results."""

    def __init__(self, opcode: Opcode, handle: int, ptr: int, count: int,
                 entries: _Entries, per_batch: int, in_flight: int) -> None:
        self.write = opcode == Opcode.WRITE
        self.opcode = int(opcode)
        self.fh = handle
        self.ptr = ptr
        self.entries = entries
        self.per_batch = per_batch
        self.in_flight = in_flight
        self.moved = np.zeros(count, dtype=np.int64)
        self.queue: deque[np.ndarray] = deque(
            np.arange(a, min(a + per_batch, len(entries)), dtype=np.int64)
            for a in range(0, len(entries), per_batch))
        self.retry: list[int] = []      # rests of short entries, not queued yet
        self.slots: list[_Slot] = []
        self.busy: deque[_Slot] = deque()  # oldest submission first
        self.failure: tuple[int, BaseException] | None = None

    # -- submitting ----------------------------------------------------------

    def _next_ids(self) -> np.ndarray | None:
        if self.retry:
            ids = np.asarray(self.retry[:self.per_batch], dtype=np.int64)
            del self.retry[:self.per_batch]
            return ids
        return self.queue.popleft() if self.queue else None

    def fill(self) -> None:
        """Give every idle slot its next slice, setting up slots up to
        ``in_flight``; nothing new starts after a failure."""
        if self.failure is not None:
            return
        idle = [s for s in self.slots if s.inflight == 0]
        while self.queue or self.retry:
            if not idle:
                if len(self.slots) >= self.in_flight:
                    return
                try:
                    slot = _Slot(len(self.slots), shared._set_up(self.per_batch), self.per_batch)
                except HipFileException:
                    if not self.slots:
                        raise
                    self.in_flight = len(self.slots)  # the library has no more
                    return
                self.slots.append(slot)
                idle.append(slot)
            slot = idle.pop()
            ids = self._next_ids()
            assert ids is not None
            array = self.entries.params(ids, self.fh, self.ptr, self.opcode)
            try:
                _hipfile.batch_io_submit(slot.handle, len(ids), array.ctypes.data, 0)
            except HipFileException:
                if not self.busy:
                    raise
                # the library takes no more at once: run with the batches it has
                self.queue.appendleft(ids)
                self.in_flight = len(self.busy)
                return
            slot.array = array
            slot.inflight = len(ids)
            self.entries.slot[ids] = slot.no
            self.busy.append(slot)

    # -- collecting -----------------------------------------------------------

    def collect(self, seconds: float) -> bool:
        """One slice of the wait of :func:`_run_batches`: wait at most
        ``seconds`` on the oldest submission, decode what the library hands
        over, submit what fits; whether nothing is left in flight."""
        slot = self.busy[0]
        self._poll(slot, slot.inflight if seconds > 0 else 0, seconds)
        self.fill()
        return not self.busy

    def _poll(self, slot: _Slot, min_nr: int, wait: float | None) -> None:
        slot.nr[0] = 0
        _hipfile.batch_io_get_status(slot.handle, min(min_nr, slot.inflight), self.per_batch,
                                     slot.events.ctypes.data, wait, slot.nr.ctypes.data)
        self._decode(slot)

    def _decode(self, slot: _Slot) -> None:
        n = int(slot.nr[0])
        slot.nr[0] = 0
        if n == 0:
            return
        rows = slot.events[:n]
        status = rows["status"].astype(np.int64)
        final = (status & int(shared._FINAL)) != 0
        if not final.all():
            rows, status = rows[final], status[final]
        ids = rows["cookie"].astype(np.int64) - 1
        ret = rows["ret"].astype(np.int64)
        ent = self.entries
        # Only entries this slot runs, each once: a cookie reported twice or
        # not ours changes nothing.
        ours = (ids >= 0) & (ids < len(ent))
        ours[ours] = ent.slot[ids[ours]] == slot.no
        if not ours.all():
            ids, ret, status = ids[ours], ret[ours], status[ours]
        ids, first = np.unique(ids, return_index=True)
        ret, status = ret[first], status[first]
        ent.slot[ids] = -1
        size = ent.size[ids]
        whole = (status == int(Status.COMPLETE)) & (ret == size)
        np.add.at(self.moved, ent.index[ids[whole]], size[whole])
        if not whole.all():
            for k, st, r in zip(ids[~whole].tolist(), status[~whole].tolist(),
                                ret[~whole].tolist(), strict=True):
                self._odd(k, st, r)
        slot.inflight -= len(ids)
        if slot.inflight <= 0:
            slot.inflight = 0
            slot.array = None
            self.busy.remove(slot)

    def _odd(self, k: int, status: int, ret: int) -> None:
        """An entry that did not move all its bytes."""
        ent = self.entries
        index, size = int(ent.index[k]), int(ent.size[k])
        error: BaseException | None = None
        if status == int(Status.COMPLETE) and ret >= 0:
            self.moved[index] += ret
            if ret > 0:
                # a short count is not the end: the rest goes in a later batch
                self.retry.append(ent.add(index, size - ret, int(ent.foff[k]) + ret,
                                          int(ent.boff[k]) + ret))
                return
            if not self.write:
                return  # a read of 0 bytes: end of file
            error = OSError(_errno.EIO, f"batch write entry moved 0 of {size} bytes "
                                        f"at file offset {int(ent.foff[k])}")
        else:
            error = BatchEvent(k + 1, Status(status), ret, k + 1,
                               Opcode(self.opcode)).error()
        if error is not None and (self.failure is None or index < self.failure[0]):
            self.failure = (index, error)

    @property
    def inflight(self) -> int:
        return sum(s.inflight for s in self.slots)

    # -- tearing down ---------------------------------------------------------

    def close(self) -> None:
        """Cancel what is in flight, wait (bounded) for it, destroy every
        handle; parameter arrays never reported final are kept for ever."""
        busy = [s for s in self.slots if s.inflight]
        for slot in busy:
            try:
                _hipfile.batch_io_cancel(slot.handle)
            except Exception:
                pass
        deadline = Deadline(shared.CLOSE_TIMEOUT)
        for slot in busy:
            def drained(seconds: float, slot: _Slot = slot) -> bool:
                self._poll(slot, slot.inflight, seconds)
                return not slot.inflight

            try:
                if slot.inflight:
                    wait_slices(drained, deadline, shared._SLICE)
            except Exception:
                pass
        for slot in self.slots:
            if slot.inflight and slot.array is not None:
                shared._abandoned.append(slot.array)
            slot.array = None
            _hipfile.batch_io_destroy(slot.handle)
        self.slots = []
        self.busy.clear()



def refuse_append_writes(fh: Any) -> None:
    """Raise ValueError when ``fh`` is an append handle
    (:attr:`FileHandle.appends`): batch writes go to the offsets they name,
    which such a handle does not take (nothing is submitted)."""
    if getattr(fh, "appends", False):
        raise ValueError(
            f"batch writes go to explicit file offsets, and this handle appends (mode "
            f"{getattr(fh, 'mode', 'a')!r}); append with FileHandle.write or pwrite "
            f"(file_offset left out), or open the file with 'r+' to write in a batch")


def _run_batches(opcode: Opcode, fh: Any, buffer: Any,
                 ranges: Iterable[tuple[int | None, int, int]], batch_size: int | None,
                 timeout: float | None, in_flight: int | None) -> list[int]:
    from hipfile import defaults

    if not isinstance(fh, FileCore):
        raise TypeError(f"fh must be a hipfile.FileHandle, not {type(fh).__name__}")
    refuse = getattr(fh, "_refuse_read_only", None) if opcode == Opcode.WRITE else None
    if refuse is not None:
        refuse()
    fh._check_registered()
    if opcode == Opcode.WRITE:
        refuse_append_writes(fh)
    if batch_size is None:
        per_batch = defaults.batch_max_entries()
    else:
        per_batch = _hipfile.as_positive(batch_size, "batch_size")
    if in_flight is None:
        depth = IN_FLIGHT
    else:
        depth = _hipfile.as_positive(in_flight, "in_flight")
    timeout = as_timeout(timeout)
    # Every range is checked before anything is submitted.
    ptr, length, owner = buffer_info(buffer)
    count, entries = _parse(ranges, length, owner)
    if len(entries) == 0:
        return [0] * count
    per_batch = min(per_batch, len(entries))
    depth = min(depth, -(-len(entries) // per_batch))
    deadline = Deadline(timeout)
    core = owner if isinstance(owner, BufferCore) else None
    if fh.handle is None:
        raise ClosedFileError("the file was closed before the batches were submitted")
    fh._hold_open()   # checked and held in one step: a closing file is refused here
    if core is not None:
        core._hold(+1)
    try:
        handle = fh.handle
        run = _Run(opcode, int(handle), ptr, count, entries, per_batch, depth)
        try:
            run.fill()
            if run.busy and not wait_slices(run.collect, deadline, shared._SLICE):
                raise TimeoutError(f"{run.inflight} batch entry(ies) still in flight "
                                   f"after {timeout} s")
        finally:
            run.close()
    finally:
        fh._hold(-1)
        if core is not None:
            core._hold(-1)
        del owner
    if run.failure is not None:
        raise name_file(run.failure[1], getattr(fh, "_path", None))
    moved: list[int] = run.moved.tolist()
    return moved


def batch_read(fh: Any, buffer: Any, ranges: Iterable[tuple[int | None, int, int]], *,
               batch_size: int | None = None, timeout: float | None = None,
               in_flight: int | None = None) -> list[int]:
    """Read any number of ``(size, file_offset, buffer_offset)`` ranges of
    ``fh`` into ``buffer`` as overlapped batches; returns the bytes read per
    range.

    Parameters
    ----------
    fh
        An open :class:`~hipfile.FileHandle`.
    buffer
        Device memory: a :class:`~hipfile.Buffer` or anything it accepts.
    ranges
        ``(size, file_offset, buffer_offset)`` tuples, ``size`` None for the
        rest of the buffer; all are checked before anything is submitted.
    batch_size
        Entries per batch (default ``hipfile.defaults`` ``batch_max_entries``,
        128); a range above 0x7ffff000 bytes takes several entries.
    timeout
        Seconds for the whole call, or None for no limit.
    in_flight
        Batches (batch handles) in flight at once, default 1: with more, a
        handle whose entries have all reported gets the next ``batch_size``
        entries while the others run, where the library allows several
        batches in flight (the emulated platform does; cuFile 1.15's
        compatibility mode was seen to hang in ``cuFileBatchIOSubmit`` with a
        second batch in flight). Fewer are used where the library sets up no
        more.

    An entry that moves fewer bytes than asked is not taken for end of file:
    the rest is submitted again in a later batch, until it is done or a read
    returns 0 (end of file).

    Returns
    -------
    list[int]
        Bytes read per range, in the order of ``ranges``; fewer than asked
        only at end of file.

    Raises
    ------
    TypeError, ValueError
        A bad file, buffer (host memory included), range, ``batch_size``,
        ``in_flight`` or ``timeout`` (nothing is submitted).
    OSError, HipFileException
        The error of the first failing range (in the order of ``ranges``);
        no batch is submitted after a failure is seen, and those in flight
        are collected first.
    TimeoutError
        ``timeout`` passed (what is in flight is canceled).

    See Also
    --------
    hipFileBatchIOSetUp, hipFileBatchIOSubmit, hipFileBatchIOGetStatus,
    hipFileBatchIOCancel, hipFileBatchIODestroy
    """
    return _run_batches(Opcode.READ, fh, buffer, ranges, batch_size, timeout, in_flight)


def batch_write(fh: Any, buffer: Any, ranges: Iterable[tuple[int | None, int, int]], *,
                batch_size: int | None = None, timeout: float | None = None,
                in_flight: int | None = None) -> list[int]:
    """Write any number of ``(size, file_offset, buffer_offset)`` ranges of
    ``buffer`` to ``fh`` as overlapped batches; returns the bytes written
    per range (always the sizes asked). See :func:`batch_read`.

    A short write is submitted again for the rest; an entry that writes 0
    bytes fails with :class:`OSError` (``EIO``).

    Raises
    ------
    ValueError
        As :func:`batch_read`, or ``fh`` is an append handle
        (:attr:`FileHandle.appends`), whose writes go to the end of the
        file rather than to the offsets of ``ranges`` (nothing is written).

    See Also
    --------
    hipFileBatchIOSetUp, hipFileBatchIOSubmit, hipFileBatchIOGetStatus,
    hipFileBatchIOCancel, hipFileBatchIODestroy
    """
    return _run_batches(Opcode.WRITE, fh, buffer, ranges, batch_size, timeout, in_flight)
