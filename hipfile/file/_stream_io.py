"""The stream-ordered calls of :class:`~hipfile.FileHandle`: the parallel
engine's reads and writes of one file, in stream order. Functions whose
first argument is the handle, bound as its methods by the class (as
``read_async`` is bound from the compiled core)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hipfile._interop import io_range_or_host
from hipfile._lib import _hipfile
from hipfile.file._args import Ranges, one_group

if TYPE_CHECKING:
    from hipfile.engine import StreamIOHandle
    from hipfile.file._handle import FileHandle

__all__ = ["pread_async", "pread_async_ranges", "pread_async_scatter", "pwrite_async",
           "pwrite_async_gather", "pwrite_async_ranges"]


def pread_async(self: FileHandle, buffer: Any, size: int | None = None, file_offset: int = 0,
                buffer_offset: int = 0, stream: Any = 0, *, task_size: int | None = None,
                ordered: bool = True, prefetch: bool = False) -> StreamIOHandle:
    """Read ``size`` bytes (None: the rest of the buffer) at
    ``file_offset`` into ``buffer`` at ``buffer_offset``, in stream order
    on ``stream``, with the parallel engine; returns a
    :class:`~hipfile.StreamIOHandle` at once.

    The read starts once ``stream`` has passed this point; the engine's
    threads read the file into pinned staging memory and the copies into
    ``buffer`` run on ``stream``, so work enqueued on ``stream`` after
    this call sees the bytes, as after :meth:`read_async`.
    ``handle.wait_on(s)`` makes another stream wait for it without
    blocking the host. A read that reaches the end of the file moves
    fewer bytes; a short count in the middle of the file is retried,
    never taken for the end.

    Parameters
    ----------
    ordered
        True (the default): later work on ``stream`` waits for the
        read. False: the copies run on the engine's own stream of the
        device, and only streams given to ``wait_on`` (or waiting on
        ``record_event()``) wait; ``stream`` goes on at once (the
        layer-wise pattern, where ``stream`` is also the compute stream).
    prefetch
        True: the engine reads the file at once, before ``stream`` has
        passed this point; only the copies into ``buffer`` wait for it
        (layers submitted one by one then overlap). Not for bytes that
        work enqueued earlier on ``stream`` writes to the file. Where
        hipFile's own calls move the bytes (no staging path: see
        :mod:`hipfile.engine`), hipFile writes into ``buffer`` itself,
        so the read starts once ``stream`` has passed, as without it.

    Raises
    ------
    TypeError, ValueError
        A bad buffer, stream, range or task size (nothing is submitted).
    ClosedFileError
        The file is closed, or closing (see :meth:`close`).

    See Also
    --------
    hipStreamWriteValue32, hipStreamWaitValue32, hipMemcpyAsync
    """
    return _hipfile.engine_submit(self, buffer, ((size, file_offset, buffer_offset),),
                                  stream, task_size=task_size, fd=self._engine_fd(),
                                  ordered=ordered, prefetch=prefetch)[0]


def pwrite_async(self: FileHandle, buffer: Any, size: int | None = None,
                 file_offset: int | None = None, buffer_offset: int = 0,
                 stream: Any = 0, *, task_size: int | None = None,
                 ordered: bool = True) -> StreamIOHandle:
    """Write ``size`` bytes of ``buffer`` at ``buffer_offset`` to the file at
    ``file_offset`` in stream order with the engine: the buffer is read
    after the work enqueued on ``stream`` before, and (``ordered``) work
    enqueued after runs once the bytes are in the file, as after
    :meth:`write_async`. See :meth:`pread_async`.

    ``file_offset`` left out is 0, or on an append handle
    (:attr:`appends`) the end of the file, taken when the call is made
    (the end of earlier appends still in flight through the handle
    included), where a given ``file_offset`` must be that end.

    See Also
    --------
    hipStreamWriteValue32, hipStreamWaitValue32, hipMemcpyAsync
    """
    if self._append is None:
        return _engine_write(self, [(size, 0 if file_offset is None else file_offset,
                                    buffer_offset)], buffer, stream, task_size, ordered)
    _, _, _, n, given, _, _ = io_range_or_host(
        buffer, size, 0 if file_offset is None else file_offset, buffer_offset)
    start = self._reserve_append(None if file_offset is None else given, n)
    try:
        return _engine_write(self, [(n, start, buffer_offset)], buffer, stream, task_size,
                                  ordered)
    except BaseException:
        self._append_failed(start, n)
        raise


def _engine_write(self: FileHandle, ranges: Ranges, buffer: Any, stream: Any, task_size: int | None,
                  ordered: bool) -> StreamIOHandle:
    handles = _hipfile.engine_submit(self, buffer, ranges, stream, write=True,
                                    task_size=task_size, fd=self._engine_fd(),
                                    ordered=ordered)
    return one_group(list(handles), "pwrite_async")


def pread_async_ranges(self: FileHandle, buffer: Any, ranges: Ranges,
                       stream: Any = 0, *, task_size: int | None = None,
                       ordered: bool = True, prefetch: bool = False
                       ) -> list[StreamIOHandle]:
    """Read many ``(size, file_offset, buffer_offset)`` ranges of one
    buffer in stream order; returns one handle per range.

    All ranges start together once ``stream`` has passed this point;
    each completes on its own (oldest range first), so layer *i* is
    usable as soon as its own bytes have landed. Every range is checked
    before anything is submitted. ``ordered`` and ``prefetch`` as in
    :meth:`pread_async`. For many small ranges that complete together (the blocks of one
    layer of a paged KV cache), :meth:`pread_async_scatter` is cheaper.

    See Also
    --------
    hipStreamWaitValue32, hipMemcpyAsync
    """
    return list(_hipfile.engine_submit(self, buffer, ranges, stream, task_size=task_size,
                                       fd=self._engine_fd(), ordered=ordered,
                                       prefetch=prefetch))


def pwrite_async_ranges(self: FileHandle, buffer: Any, ranges: Ranges,
                        stream: Any = 0, *, task_size: int | None = None,
                        ordered: bool = True) -> list[StreamIOHandle]:
    """Write many ``(size, file_offset, buffer_offset)`` ranges of one
    buffer in stream order; returns one handle per range. See
    :meth:`pread_async_ranges`.

    Raises
    ------
    ValueError
        As :meth:`pread_async_ranges`, or an append handle
        (:attr:`appends`), whose writes go to the end of the file.

    See Also
    --------
    hipStreamWaitValue32, hipMemcpyAsync
    """
    self._refuse_ranges_on_append("pwrite_async_ranges")
    return list(_hipfile.engine_submit(self, buffer, ranges, stream, write=True,
                                       task_size=task_size, fd=self._engine_fd(),
                                       ordered=ordered))


def pread_async_scatter(self: FileHandle, buffer: Any, ranges: Ranges,
                        stream: Any = 0, *, task_size: int | None = None,
                        ordered: bool = True, prefetch: bool = False) -> StreamIOHandle:
    """Read many ``(size, file_offset, buffer_offset)`` ranges of one
    buffer in stream order as one operation: returns a single
    :class:`~hipfile.StreamIOHandle` that completes once every range has
    landed, and whose ``wait()`` is the total bytes read.

    Made for the blocks of one layer of a paged KV cache: hundreds of
    small blocks scattered over the buffer, needed together. Ranges
    adjacent in the file are read with one call and ranges adjacent in
    both file and buffer are copied with one copy; one completion flag
    releases the streams that ``wait_on`` the layer. ``ordered`` and
    ``prefetch`` as in :meth:`pread_async`. Where the staging path cannot
    serve (no POSIX descriptor, no stream waits, the ``engine_data_path``
    setting ``"hipfile"``) the ranges are one operation of
    ``hipFileRead`` calls on the engine's threads.

    Raises
    ------
    TypeError, ValueError
        A bad buffer, stream, range or task size, or no range (nothing is submitted).
    ClosedFileError
        The file is closed, or closing (see :meth:`close`).

    See Also
    --------
    hipStreamWaitValue32, hipMemcpyAsync, hipFileRead
    """
    return one_group(_hipfile.engine_submit(self, buffer, ranges, stream,
                                           task_size=task_size, fd=self._engine_fd(),
                                           ordered=ordered, grouped=True,
                                           prefetch=prefetch),
                     "pread_async_scatter")


def pwrite_async_gather(self: FileHandle, buffer: Any, ranges: Ranges,
                        stream: Any = 0, *, task_size: int | None = None,
                        ordered: bool = True) -> StreamIOHandle:
    """Write many ``(size, file_offset, buffer_offset)`` ranges of one
    buffer in stream order as one operation (one handle, the total bytes
    written): the counterpart of :meth:`pread_async_scatter` for saving
    a layer's KV blocks.

    Raises
    ------
    ValueError
        As :meth:`pread_async_scatter`, or an append handle
        (:attr:`appends`), whose writes go to the end of the file.

    See Also
    --------
    hipStreamWaitValue32, hipMemcpyAsync, hipFileWrite
    """
    self._refuse_ranges_on_append("pwrite_async_gather")
    return one_group(_hipfile.engine_submit(self, buffer, ranges, stream, write=True,
                                           task_size=task_size, fd=self._engine_fd(),
                                           ordered=ordered, grouped=True),
                     "pwrite_async_gather")
