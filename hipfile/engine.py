"""The stream-ordered parallel engine: layer-wise loads at the machine's
bandwidth.

``hipFileReadAsync``/``hipFileWriteAsync`` run as host functions, and HIP
runs a process's host functions on one thread, so stream-ordered I/O through
the library stops near 5 GB/s however many streams are used. The engine keeps
the stream order and moves the bytes with the binding's own C threads:

* **start**: an operation waits, off the caller's thread, until the stream
  given at submit has passed the submit point (the stream writes a gate flag
  with ``hipStreamWriteValue32``; an idle stream starts it at once);
* **data**: worker threads (C threads, no GIL) read and write the file with
  POSIX calls through a ring of pinned staging slots, and the copies between
  the slots and device memory are enqueued on the stream at submit, behind
  stream waits on the slots' flags: after submit no engine thread calls the
  HIP runtime, so a ``hipFree`` in another thread (a device-wide
  synchronisation) can never deadlock with a load in flight;
* **completion**: each operation has its own flag; work enqueued on the
  submitting stream afterwards sees the bytes (``ordered=True``, the
  default), :meth:`StreamIOHandle.wait_on` makes any other stream wait for
  it with ``hipStreamWaitValue32`` (no host function, no host block), and
  :meth:`StreamIOHandle.wait` observes it on the host.

Use :meth:`FileHandle.pread_async` / :meth:`FileHandle.pwrite_async` for one
range, :meth:`FileHandle.pread_async_ranges` /
:meth:`FileHandle.pwrite_async_ranges` for many (one per layer),
:meth:`FileHandle.pread_async_scatter` / :meth:`FileHandle.pwrite_async_gather`
for many small ranges that complete together (the blocks of one layer of a
paged KV cache), :func:`pread_async_scatter` / :func:`pwrite_async_gather`
for ranges of many files, and :func:`pread_async_addresses` /
:func:`pwrite_async_addresses` for ranges of many files at raw device
addresses over many allocations (an offload worker's block addresses, an
(N, 4) array)::

    handles = fh.pread_async_ranges(kv, [(n, i * n, i * n) for i in range(32)], copy)
    for i, h in enumerate(handles):
        h.wait_on(compute)          # layer i's kernels wait for layer i only
        run_layer(i, stream=compute)

Where a device cannot use stream waits (``hipDeviceAttributeCanUseStreamWaitValue``
is 0) the engine's threads call ``hipFileRead``/``hipFileWrite`` and streams
are released by waiting on the host; :func:`mechanism` says which is in use.
The ``engine_release`` setting ``"host-waits"`` of :mod:`hipfile.defaults`
(``HIPFILE_ENGINE_RELEASE=host``) forces it.

Settings, all in :mod:`hipfile.defaults` (set them with
``hipfile.defaults.set``; each has its ``HIPFILE_ENGINE_*`` variable, which
``hipfile.defaults`` reads): ``engine_threads`` (worker threads, default
half the CPUs, 4 to 16) and ``engine_task_size`` (bytes per chunk, default
2 MiB), read at the first submission and after each change;
``engine_staging_size`` (pinned staging per device, default 64 MiB, in slots
of ``engine_task_size``) and ``engine_copy_streams``, read when a device's
staging ring is made; ``engine_batch_copies``, ``engine_release``
and ``engine_data_path``, read once and again after each change made by
``set``/``reset`` (and after :func:`hipfile.trim_pool`). :func:`configure`
is deprecated.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from hipfile import defaults
from hipfile._lib import _hipfile
from hipfile._lib._hipfile import StreamIOHandle

__all__ = [
    "StreamIOHandle",
    "configure",
    "info",
    "mechanism",
    "pread_async_addresses",
    "pread_async_scatter",
    "prepare",
    "pwrite_async_addresses",
    "pwrite_async_gather",
    "settings",
    "shutdown",
]

#: A range of a many-file operation: ``(file, size, file_offset, buffer_offset)``.
FileRange = tuple[Any, "int | None", int, int]

#: Ranges by device address: an integer array of shape (N, 4), or a sequence
#: of ``(file index, file offset, device address, size)`` rows.
AddressRanges = Any


def pread_async_scatter(buffer: Any, ranges: Iterable[FileRange], stream: Any = 0, *,
                        task_size: int | None = None, ordered: bool = True,
                        prefetch: bool = False) -> StreamIOHandle:
    """Read ranges of several open files into one buffer, in stream order,
    as one operation; returns its one :class:`StreamIOHandle`.

    ``ranges`` holds ``(file, size, file_offset, buffer_offset)`` tuples,
    ``file`` an open :class:`~hipfile.FileHandle` (one file may appear in
    many ranges). It is :meth:`FileHandle.pread_async_scatter
    <hipfile.FileHandle.pread_async_scatter>` over many files: the chunk
    files of a KV cache stored one file per chunk land in their scattered
    slots of one device buffer with one handle, one completion flag and
    the engine's threads reading all the files at once. ``ordered`` and
    ``prefetch`` as in :meth:`FileHandle.pread_async
    <hipfile.FileHandle.pread_async>`; a read stops at the end of its file.
    Every file is held until completion is observed: closing one meanwhile
    raises :class:`~hipfile.InFlightError`.

    Raises
    ------
    TypeError, ValueError
        A bad buffer, stream, range or task size, or no range (nothing is
        submitted).
    ClosedFileError, HandleNotRegisteredError
        A file is closed, or its registration was dropped.
    OSError
        ``EBADF``: a file was not opened for reading.
    NotImplementedError
        The staging path cannot serve the buffer (host memory, a device
        without stream waits, or the ``engine_data_path`` setting
        ``"hipfile"``).

    See Also
    --------
    hipStreamWaitValue32, hipMemcpyAsync
    """
    return _hipfile.engine_submit_files(buffer, ranges, stream, task_size=task_size,
                                        ordered=ordered, prefetch=prefetch)


def pwrite_async_gather(buffer: Any, ranges: Iterable[FileRange], stream: Any = 0, *,
                        task_size: int | None = None, ordered: bool = True) -> StreamIOHandle:
    """Write ranges of one buffer to several open files, in stream order, as
    one operation (the counterpart of :func:`pread_async_scatter`: one
    file per KV chunk saved with one handle). ``ranges`` holds ``(file,
    size, file_offset, buffer_offset)`` tuples; with ``ordered``, work
    enqueued on ``stream`` afterwards runs once every byte is in its file.

    Raises
    ------
    TypeError, ClosedFileError, HandleNotRegisteredError, NotImplementedError
        As :func:`pread_async_scatter`.
    ValueError
        As :func:`pread_async_scatter`, or a file is an append handle
        (:attr:`FileHandle.appends <hipfile.FileHandle.appends>`), whose
        writes go to the end of the file, not to the ranges' offsets
        (nothing is submitted).
    OSError
        ``EBADF``: a file was not opened for writing.

    See Also
    --------
    hipStreamWaitValue32, hipMemcpyAsync
    """
    return _hipfile.engine_submit_files(buffer, ranges, stream, write=True, task_size=task_size,
                                        ordered=ordered)


def pread_async_addresses(files: Sequence[Any], ranges: AddressRanges, stream: Any = 0, *,
                          task_size: int | None = None, ordered: bool = True,
                          prefetch: bool = False) -> StreamIOHandle:
    """Read ranges of several open files to device addresses, in stream
    order, as one operation; returns its one :class:`StreamIOHandle`.

    ``ranges`` holds ``(file index, file offset, device address, size)``
    rows: ``size`` bytes of ``files[file index]`` from ``file offset`` land
    at ``device address``. It is an integer array of shape (N, 4) (a
    C-contiguous ``int64`` or ``uint64`` NumPy array is read in place,
    without a Python object per row; other integer arrays are converted
    once) or a sequence of 4-tuples of ints. This is the shape of the
    block addresses a KV-cache offload hands over (vLLM's
    ``DevicePointers``): the blocks of the 2 x layers KV tensors, separate
    allocations, moved with one handle, one completion flag and the
    engine's threads reading every file at once. The addresses stay the
    caller's: keep the memory allocated until the operation completes.

    Every address range ``[address, address + size)`` must lie inside one
    device allocation of the stream's device, as the runtime reports it
    (``hipMemGetAddressRange``, asked once per allocation in a call); a
    range that does not is refused with a :class:`ValueError` naming its
    row, the range and the allocation found, and nothing is submitted. A
    row of size 0 moves nothing and its address is not checked.
    ``ordered`` and ``prefetch`` as in :func:`pread_async_scatter`; a read
    stops at the end of its file, and the handle's result is the bytes
    read in all. Every file is held until completion is observed: closing
    one meanwhile raises :class:`~hipfile.InFlightError`.

    Raises
    ------
    TypeError
        ``files`` is not a sequence of :class:`~hipfile.FileHandle`, or
        ``ranges`` holds something other than integers.
    ValueError
        No file, no row, a shape other than (N, 4), a file index out of
        range, a negative offset or size, an address range outside one
        device allocation of the stream's device, or a bad task size or
        stream (nothing is submitted).
    ClosedFileError, HandleNotRegisteredError
        A file is closed, or its registration was dropped.
    OSError
        ``EBADF``: a file was not opened for reading.
    NotImplementedError
        The staging path cannot serve the stream's device (a device
        without stream waits, or the ``engine_data_path`` setting
        ``"hipfile"``).

    See Also
    --------
    hipMemGetAddressRange, hipStreamWaitValue32, hipMemcpyAsync
    """
    return _hipfile.engine_submit_addresses(files, ranges, stream, task_size=task_size,
                                            ordered=ordered, prefetch=prefetch)


def pwrite_async_addresses(files: Sequence[Any], ranges: AddressRanges, stream: Any = 0, *,
                           task_size: int | None = None, ordered: bool = True
                           ) -> StreamIOHandle:
    """Write ranges at device addresses to several open files, in stream
    order, as one operation (the counterpart of
    :func:`pread_async_addresses`); returns its one
    :class:`StreamIOHandle`. ``ranges`` holds ``(file index, file offset,
    device address, size)`` rows, checked as there; with ``ordered``, work
    enqueued on ``stream`` afterwards runs once every byte is in its file.

    Raises
    ------
    TypeError, ValueError, ClosedFileError, HandleNotRegisteredError, NotImplementedError
        As :func:`pread_async_addresses`; ValueError also for an append
        handle (:attr:`FileHandle.appends <hipfile.FileHandle.appends>`),
        whose writes go to the end of its file.
    OSError
        ``EBADF``: a file was not opened for writing.

    See Also
    --------
    hipMemGetAddressRange, hipStreamWaitValue32, hipMemcpyAsync
    """
    return _hipfile.engine_submit_addresses(files, ranges, stream, write=True,
                                            task_size=task_size, ordered=ordered)


def configure(threads: int | None = None, task_size: int | None = None) -> None:
    """Set the worker thread count and the default task size (bytes); None
    keeps a value.

    .. deprecated:: 0.1.0
        Use ``hipfile.defaults.set(engine_threads=threads,
        engine_task_size=task_size)``, the one way to change a setting; this
        function does exactly that, after a :class:`DeprecationWarning`.

    The values hold for the process and take effect at the next submission
    (a new thread count once the engine is idle); ``hipfile.defaults.reset``
    undoes them.

    Raises
    ------
    TypeError, ValueError
        A value that is not a positive integer (nothing is changed).

    Warns
    -----
    DeprecationWarning
        At every call.
    """
    warnings.warn("hipfile.engine.configure() is deprecated; use hipfile.defaults.set("
                  "engine_threads=..., engine_task_size=...)", DeprecationWarning, stacklevel=2)
    values: dict[str, Any] = {}
    if threads is not None:
        values["engine_threads"] = threads
    if task_size is not None:
        values["engine_task_size"] = task_size
    if values:
        defaults.set(values)


def settings() -> dict[str, int]:
    """The thread count and default task size the next submission uses:
    ``hipfile.defaults.engine_threads()`` and
    ``hipfile.defaults.engine_task_size()``.

    Raises
    ------
    ValueError
        ``HIPFILE_ENGINE_THREADS`` or ``HIPFILE_ENGINE_TASK_SIZE`` holds a
        bad value.
    """
    return dict(_hipfile.engine_settings())


def info() -> dict[str, Any]:
    """The runtime: threads running (``threads``, ``threads_configured``),
    the task size, outstanding operations, parked handles (dropped before
    completion), ``requests`` (:func:`hipfile.pread`/:func:`hipfile.pwrite`
    requests of device memory not yet ended), and per device the release
    mechanism, the flags allocated, the staging ring's bytes and slot size,
    ``staging_pinned_by`` (``"hipHostRegister"``: anonymous memory in
    transparent huge pages, registered; ``"hipHostMalloc"`` where the
    runtime cannot register; None before the ring is made),
    ``direct_io_bytes`` (the bytes one request reads through an ``O_DIRECT``
    descriptor: ``engine_direct_io_size`` in whole slots; 0 before the ring
    is made), ``setup_s``
    (the seconds that making the device's flag pool and staging ring, its
    pinned memory and streams, took), ``stream_calls`` (the
    runtime calls that submissions made to enqueue their stream side since
    the ring was made: waits, copies, flag writes, events) and
    ``stream_waits`` (the stream waits among them: one per chunk, or per
    batch with ``engine_copy_batch``)."""
    return dict(_hipfile.engine_info())


def mechanism(device: int = -1) -> str:
    """``"stream-memory-operations"`` or ``"host-waits"``: how completion
    reaches GPU streams on ``device`` (-1: the current device).

    Raises
    ------
    TypeError, ValueError
        ``device`` is not an int (bools refused), or names no device.

    See Also
    --------
    hipDeviceGetAttribute
    """
    return str(_hipfile.engine_mechanism(device))


def prepare(device: int = -1) -> None:
    """Allocate now what the engine's first submission on ``device`` (-1:
    the current device) would: its threads, a page of completion flags, its
    internal stream and its staging ring (``engine_staging_size`` of pinned
    memory, where submissions take the staged path). What is already there
    is kept; :func:`hipfile.trim_pool` frees it.

    CUDA counts page-locking host memory among the operations that
    synchronise the device implicitly, so a first submission that allocates
    may wait for all the work in flight on the GPU. A serving process calls
    this once at start-up, before its first load.

    Raises
    ------
    TypeError
        ``device`` is not an int (bools refused).
    ValueError
        No such device.
    HipRuntimeError
        The runtime refused an allocation.

    See Also
    --------
    hipHostRegister, hipHostMalloc, hipStreamCreateWithFlags
    """
    _hipfile.engine_prepare(device)


def shutdown(timeout: float | None = None) -> None:
    """Stop the engine's threads once its outstanding operations finish
    (they restart on the next submission).

    Raises
    ------
    TimeoutError
        Operations were still outstanding after ``timeout`` seconds.
    """
    _hipfile.engine_shutdown(timeout)


def _wait_all(handles: Iterable[StreamIOHandle]) -> int:
    """Wait for every handle, then return the bytes they moved or raise the
    first failure (in the handles' order): nothing is still running when an
    error is raised.

    Raises
    ------
    Exception
        The first exception raised by :meth:`StreamIOHandle.wait`.
    """
    total = 0
    first: BaseException | None = None
    for h in handles:
        try:
            total += int(h.wait())
        except Exception as e:
            if first is None:
                first = e
    if first is not None:
        raise first
    return total
