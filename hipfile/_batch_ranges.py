"""Any number of ranges of one file and buffer, run as successive batches."""

from __future__ import annotations

import errno as _errno
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from hipfile._interop import as_int, as_timeout
from hipfile._lib import _hipfile
from hipfile._lib._hipfile import _FileCore
from hipfile.batch import _MAX_ENTRY, BatchIO
from hipfile.enums import Opcode


def _run_batches(opcode: Opcode, fh: Any, buffer: Any,
                 ranges: Iterable[tuple[int | None, int, int]], batch_size: int | None,
                 timeout: float | None) -> list[int]:
    from hipfile import defaults

    write = opcode == Opcode.WRITE
    if not isinstance(fh, _FileCore):
        raise TypeError(f"fh must be a hipfile.FileHandle, not {type(fh).__name__}")
    fh._check_registered()
    if batch_size is None:
        per_batch = defaults.batch_max_entries()
    else:
        per_batch = as_int(batch_size, "batch_size")
        if per_batch <= 0:
            raise ValueError(f"batch_size must be positive, got {per_batch}")
    timeout = as_timeout(timeout)
    _, length, owner = _hipfile.buffer_info(buffer)
    # Every range is checked before anything is submitted; ranges above one
    # entry's limit become several entries.
    pending: deque[tuple[int, int, int, int]] = deque()
    count = 0
    for r in ranges:
        t: tuple[Any, ...] = tuple(r)
        if len(t) != 3:
            raise TypeError(f"each range must be (size, file_offset, buffer_offset), got {r!r}")
        size, foff, boff = _hipfile.io_range_check(length, *t, owner)
        for start in range(0, size, _MAX_ENTRY):
            pending.append((count, min(_MAX_ENTRY, size - start), foff + start, boff + start))
        count += 1
    moved = [0] * count
    if not pending:
        return moved
    deadline = None if timeout is None else time.monotonic() + timeout
    failure: tuple[int, BaseException] | None = None
    with BatchIO(min(per_batch, len(pending))) as batch:
        while pending and failure is None:
            round_ = [pending.popleft() for _ in range(min(batch.max_nr, len(pending)))]
            for k, (_, size, foff, boff) in enumerate(round_):
                batch._add(opcode, fh, buffer, size, foff, boff, k)
            batch.submit()
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            for event in batch.wait(left):
                index, size, foff, boff = round_[event.cookie]
                error = event.error()
                if error is None:
                    n = event.result
                    moved[index] += n
                    if n == size:
                        continue
                    if n > 0:
                        # a short count is not the end: the rest goes in a later batch
                        pending.append((index, size - n, foff + n, boff + n))
                        continue
                    if not write:
                        continue  # a read of 0 bytes: end of file
                    error = OSError(_errno.EIO, f"batch write entry moved 0 of {size} bytes "
                                                f"at file offset {foff}")
                if failure is None or index < failure[0]:
                    failure = (index, error)
    if failure is not None:
        raise failure[1]
    return moved


def batch_read(fh: Any, buffer: Any, ranges: Iterable[tuple[int | None, int, int]], *,
               batch_size: int | None = None, timeout: float | None = None) -> list[int]:
    """Read any number of ``(size, file_offset, buffer_offset)`` ranges of
    ``fh`` into ``buffer`` as successive batches; returns the bytes read per
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

    The ranges run in batches of ``batch_size`` entries, one batch after
    the other, in one :class:`BatchIO`. An entry that moves fewer bytes than
    asked is not taken for end of file: the rest is submitted again in a
    later batch, until it is done or a read returns 0 (end of file).

    Returns
    -------
    list[int]
        Bytes read per range, in the order of ``ranges``; fewer than asked
        only at end of file.

    Raises
    ------
    TypeError, ValueError
        A bad file, buffer (host memory included), range, ``batch_size``
        or ``timeout`` (nothing is submitted).
    OSError, HipFileException
        The error of the first failing range (in the order of ``ranges``);
        batches after the one that failed are not submitted.
    TimeoutError
        ``timeout`` passed (what is in flight is canceled).

    See Also
    --------
    hipFileBatchIOSetUp, hipFileBatchIOSubmit, hipFileBatchIOGetStatus
    """
    return _run_batches(Opcode.READ, fh, buffer, ranges, batch_size, timeout)


def batch_write(fh: Any, buffer: Any, ranges: Iterable[tuple[int | None, int, int]], *,
                batch_size: int | None = None, timeout: float | None = None) -> list[int]:
    """Write any number of ``(size, file_offset, buffer_offset)`` ranges of
    ``buffer`` to ``fh`` as successive batches; returns the bytes written
    per range (always the sizes asked). See :func:`batch_read`.

    A short write is submitted again for the rest; an entry that writes 0
    bytes fails with :class:`OSError` (``EIO``).

    See Also
    --------
    hipFileBatchIOSetUp, hipFileBatchIOSubmit, hipFileBatchIOGetStatus
    """
    return _run_batches(Opcode.WRITE, fh, buffer, ranges, batch_size, timeout)
