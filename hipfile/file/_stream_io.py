"""The stream-ordered calls of :class:`~hipfile.FileHandle`: the parallel
engine's reads and writes of one file, in stream order."""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING, Any

from hipfile._interop import io_range_or_host
from hipfile._lib import _hipfile
from hipfile.enums import FileHandleType
from hipfile.errors import ClosedFileError
from hipfile.file._append import AppendPlacement
from hipfile.file._args import O_DIRECT, TWIN_LOCK, Ranges, buffered_twin, is_direct, one_group
from hipfile.file._residency import cached_fraction

if TYPE_CHECKING:
    from hipfile.engine import StreamIOHandle

__all__ = ["StreamOrderedIO"]

class StreamOrderedIO(AppendPlacement):
    """The engine's calls on an open file: the base of
    :class:`~hipfile.FileHandle`, which provides the descriptors and the
    append bookkeeping they use."""

    _handle_type: FileHandleType
    _buffered_fd: int | None
    _direct_fd: int | None
    _flags: int

    _plain_fd: int

    if TYPE_CHECKING:
        def fileno(self) -> int: ...
        def _closed_reason(self) -> str: ...
        def _refuse_read_only(self) -> None: ...

    def _host_fd(self) -> int:
        """The descriptor for POSIX I/O on host buffers: the file's own, or,
        when it was opened with ``O_DIRECT`` (which needs aligned buffers),
        a second descriptor of the same file without it, opened on first use
        through ``/proc/self/fd`` and closed by :meth:`close`.

        Raises
        ------
        TypeError
            ``hipfile.defaults`` ``allow_host_buffers`` is False.
        ClosedFileError
            The file is closed.
        """
        from hipfile._interop import check_host_buffers_allowed

        check_host_buffers_allowed()
        return self._posix_fd()

    def _posix_fd(self) -> int:
        """The descriptor for POSIX I/O on this file, without ``O_DIRECT``
        (see :meth:`_host_fd`); the stream-ordered engine's staged path
        reads and writes through it.

        Raises
        ------
        ClosedFileError
            The file is closed.
        """
        if self._buffered_fd is None:
            fd = self.fileno()
            if fd == self._plain_fd:
                return fd      # its flags were read once (no fcntl per submission)
            if not is_direct(fd):
                self._plain_fd = fd
                return fd
            with TWIN_LOCK:
                if self._buffered_fd is None:
                    self._buffered_fd = buffered_twin(fd)
        return self._buffered_fd

    def pread_async(self, buffer: Any, size: int | None = None, file_offset: int = 0,
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

    def pwrite_async(self, buffer: Any, size: int | None = None,
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
        if not self._appends:
            return self._engine_write([(size, 0 if file_offset is None else file_offset,
                                        buffer_offset)], buffer, stream, task_size, ordered)
        _, _, _, n, given, _, _ = io_range_or_host(
            buffer, size, 0 if file_offset is None else file_offset, buffer_offset)
        start = self._reserve_append(None if file_offset is None else given, n)
        try:
            return self._engine_write([(n, start, buffer_offset)], buffer, stream, task_size,
                                      ordered)
        except BaseException:
            self._append_failed(start, n)
            raise

    def _engine_write(self, ranges: Ranges, buffer: Any, stream: Any, task_size: int | None,
                      ordered: bool) -> StreamIOHandle:
        handles = _hipfile.engine_submit(self, buffer, ranges, stream, write=True,
                                        task_size=task_size, fd=self._engine_fd(),
                                        ordered=ordered)
        return one_group(list(handles), "pwrite_async")

    def pread_async_ranges(self, buffer: Any, ranges: Ranges,
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

    def pwrite_async_ranges(self, buffer: Any, ranges: Ranges,
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

    def pread_async_scatter(self, buffer: Any, ranges: Ranges,
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

    def pwrite_async_gather(self, buffer: Any, ranges: Ranges,
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

    def _engine_fd(self) -> int:
        """The POSIX descriptor the engine's staged path uses, or -1 when
        the handle has none (its threads then call hipFile)."""
        if self._handle_type != FileHandleType.OPAQUE_FD:
            return -1
        try:
            return self._posix_fd()
        except OSError as exc:
            # closed by another thread between fileno() and the descriptor's
            # use here: the submission is refused as any on a closed file
            if exc.errno == errno.EBADF and not self._open:
                raise ClosedFileError(self._closed_reason()) from None
            raise

    def _engine_direct_fd(self, large: bool) -> int:
        """The ``O_DIRECT`` descriptor for an engine read, or -1 for the
        buffered one: the file's own when it was opened with ``O_DIRECT``;
        for a ``large`` read of a file the page cache mostly lacks (a
        sample of its pages, ``mincore``), a second descriptor with
        ``O_DIRECT``, opened on first use and closed by :meth:`close`
        (-1 where the file system refuses ``O_DIRECT``)."""
        fd = self.fileno()
        if self._buffered_fd is not None:
            return fd    # opened with O_DIRECT: _posix_fd (the engine's fd) made its twin
        if not large or self._direct_fd == -1 or not O_DIRECT:
            return -1
        if is_direct(fd):
            return fd
        if cached_fraction(fd, sample_pages=256) >= 0.5:
            return -1
        with TWIN_LOCK:
            if self._direct_fd is None:
                try:
                    self._direct_fd = os.open(f"/proc/self/fd/{fd}",
                                              (self._flags & os.O_ACCMODE) | O_DIRECT
                                              | os.O_CLOEXEC)
                except OSError:
                    self._direct_fd = -1     # no O_DIRECT here (tmpfs): never again
        return self._direct_fd
