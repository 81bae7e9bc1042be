"""Parallel reads and writes: one range split into tasks, run on other threads.

:func:`pread` and :func:`pwrite` split ``size`` bytes into tasks and return
an :class:`IOFuture` at once::

    fut = hipfile.pread(fh, device_array)          # or fh.pread(device_array)
    ...                                            # overlap other work
    nbytes = fut.result()

Where the tasks run:

* **device memory** (no ``executor`` given): on the threads of the
  package's one I/O runtime, the engine of :mod:`hipfile.engine`: through
  its pinned staging ring (POSIX reads and writes, ``O_DIRECT`` for a large
  read of a file the page cache lacks, and copies on the device's own
  stream), or ``hipFileRead``/``hipFileWrite`` on its threads for a file
  opened with ``O_DIRECT`` (hipFile's direct path: P2P DMA where the
  platform has it), a handle without a POSIX descriptor, or the
  ``engine_data_path`` setting ``"hipfile"``. No Python thread is involved.
  The file side starts at once; the ring's copies follow the work enqueued
  on the null stream before the call, as hipFile's fallback copies through
  the null stream do (a buffer a kernel there still writes is written to the
  file after it). ``engine_threads`` and ``engine_task_size`` apply (a lone
  range below one task per thread is cut into one part per thread).
* **host memory**, memory hipFile does not know as device memory, an append
  handle's writes, or a given ``executor``: tasks of ``task_size`` bytes
  (``HIPFILE_TASK_SIZE``, 4 MiB) on a :class:`concurrent.futures` pool
  (default: the module's, of ``num_threads`` threads, ``HIPFILE_NTHREADS``,
  ``min(8, os.cpu_count())``), each a ``hipFileRead``/``hipFileWrite`` or
  POSIX ``preadv``/``pwritev`` loop (the calls release the GIL). These two
  settings are read at the first call and again after every
  ``defaults.set``/``reset``, not at each call: a change of their
  environment variables alone is seen after ``defaults.reset()``.
* one task of at most ``INLINE_MAX`` bytes (256 KiB): in the calling thread; the
  future is done on return.

The file and buffer are kept alive until the request has ended; closing the
file or deregistering the :class:`~hipfile.Buffer` meanwhile raises
:class:`~hipfile.InFlightError`.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

from hipfile import defaults
from hipfile._interop import as_positive, check_writable, io_range_or_host
from hipfile._lib import _hipfile
from hipfile._lib._hipfile import BufferCore, FileCore
from hipfile.parallel._future import IOFuture, _EngineFuture, _Job

__all__ = [
    "IOFuture",
    "default_task_size",
    "get_num_threads",
    "pread",
    "pwrite",
    "set_num_threads",
    "shutdown",
]

DEFAULT_TASK_SIZE = 4 << 20


def default_task_size() -> int:
    """Bytes per task of a pool when ``task_size`` is not given:
    ``hipfile.defaults.task_size()`` (``HIPFILE_TASK_SIZE``, else 4 MiB).
    (Device memory on the engine's threads takes ``engine_task_size``.)

    Raises
    ------
    ValueError
        ``HIPFILE_TASK_SIZE`` is not a positive byte count.
    """
    return defaults.task_size()


# --------------------------------------------------------------------------
# The default pool
# --------------------------------------------------------------------------

_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def get_num_threads() -> int:
    """Threads of the default pool: ``hipfile.defaults.num_threads()`` (the
    last ``defaults.set("num_threads", n)``, else
    ``HIPFILE_NTHREADS``, else ``min(8, os.cpu_count())``).

    Raises
    ------
    ValueError
        ``HIPFILE_NTHREADS`` is not a positive integer.
    """
    return defaults.num_threads()


def set_num_threads(n: int) -> None:
    """Use ``n`` threads in the default pool from now on.

    .. deprecated:: 0.1.0
        Use ``hipfile.defaults.set("num_threads", n)``, the one way to change
        a setting; this function does that, after a
        :class:`DeprecationWarning`.

    Work already queued on the current pool still runs to its end there;
    that pool is then shut down, and later calls use a new pool of ``n``
    threads (created on first use).

    Raises
    ------
    TypeError, ValueError
        ``n`` is not a positive int.

    Warns
    -----
    DeprecationWarning
        At every call.
    """
    warnings.warn('hipfile.set_num_threads() is deprecated; use '
                  'hipfile.defaults.set("num_threads", n)', DeprecationWarning, stacklevel=2)
    defaults.set("num_threads", as_positive(n, "n"))
    shutdown(wait=False)


def shutdown(wait: bool = True) -> None:
    """Shut the default pool down (a later call creates a new one).

    Parameters
    ----------
    wait
        Wait for the work queued on it to finish.
    """
    global _pool
    with _pool_lock:
        old, _pool = _pool, None
    if old is not None:
        old.shutdown(wait=wait)


# ``num_threads`` and ``task_size`` as the pool's calls use them: read at the
# first call and again after every ``defaults.set``/``reset`` (which notify),
# not from the environment at each call.
_settings: tuple[int, int] | None = None


def _pool_settings() -> tuple[int, int]:
    """``(num_threads, task_size)`` for the pool's calls."""
    global _settings
    s = _settings
    if s is None:
        s = _settings = (get_num_threads(), default_task_size())
    return s


def _settings_changed() -> None:
    global _settings
    _settings = None


defaults._watch(_settings_changed)


def _default_executor() -> ThreadPoolExecutor:
    """The default pool, replaced when ``num_threads`` has changed."""
    global _pool
    n = _pool_settings()[0]
    old = None
    with _pool_lock:
        if _pool is not None and _pool._max_workers != n:
            old, _pool = _pool, None
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="hipfile-io")
        pool = _pool
    if old is not None:
        old.shutdown(wait=False)
    return pool


def _after_fork_in_child() -> None:
    # The pool's threads do not exist in a forked child.
    global _pool, _pool_lock
    _pool_lock = threading.Lock()
    _pool = None


_hipfile.on_fork_child(_after_fork_in_child)   # the package's one fork hook


#: A request of at most this many bytes, one task, runs in the calling
#: thread (no hand-off to the pool, whose cost is several such reads).
INLINE_MAX = 256 << 10


def _submit(write: bool, fh: Any, buffer: Any, size: int | None, file_offset: int | None,
            buffer_offset: int, task_size: int | None, executor: Executor | None) -> IOFuture:
    if not isinstance(fh, FileCore):
        raise TypeError(f"fh must be a hipfile.FileHandle, not {type(fh).__name__}")
    tsize = INLINE_MAX if task_size is None else as_positive(task_size, "task_size")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise TypeError(f"executor must be a concurrent.futures.Executor, not "
                        f"{type(executor).__name__}")
    given = file_offset
    ptr, _, owner, size, file_offset, buffer_offset, view = io_range_or_host(
        buffer, size, 0 if file_offset is None else file_offset, buffer_offset)
    refuse = getattr(fh, "_refuse_read_only", None) if write else None
    if refuse is not None:
        refuse()         # after the arguments' checks, before any byte moves
    appends = write and getattr(fh, "appends", False)
    host_fd: Callable[[], int] | None = getattr(fh, "_host_fd", None)
    if view is not None:
        check_writable(view, write, buffer)
        if host_fd is None:
            raise TypeError(f"{type(fh).__name__} does not support host buffers")

    if (executor is None and view is None and not appends
            and size > min(tsize, INLINE_MAX)):
        # device memory on the default pool: the engine's threads move it,
        # through its staging ring, or with hipFile's own calls for a file
        # opened with O_DIRECT (hipFile's direct path, P2P DMA where the
        # platform has it) or without a POSIX descriptor (fd -1)
        fd = fh._engine_fd() if hasattr(fh, "_engine_fd") else -1
        if fh._descriptors is not None and fh._descriptors.buffered is not None:
            fd = -1              # the descriptor has O_DIRECT (see Descriptors.posix)
        on_engine = _hipfile.engine_transfer(
            fh, buffer, size, file_offset, buffer_offset, write=write, task_size=task_size,
            fd=fd)
        if on_engine is not None:
            return _EngineFuture(size, write, on_engine, _default_executor)

    core = owner if isinstance(owner, BufferCore) else None
    # Check and hold in one step, so that a close racing with this call
    # either waits for it or refuses it (a closing file: ClosedFileError).
    fh._hold_open()
    try:
        # hipFile moves device memory (the file registers at its first such
        # call); host memory moves with POSIX calls
        handle = fh.handle if view is None else 0
    except BaseException:
        fh._hold(-1)
        raise
    assert handle is not None
    appender: Any = fh
    if appends:
        # an append handle: take the range at the end of the file now
        try:
            file_offset = appender._reserve_append(None if given is None else file_offset,
                                                   size)
        except BaseException:
            fh._hold(-1)
            raise
    if core is not None:
        core._hold(+1)

    keep: list[Any] = [fh, owner]
    start_offset = file_offset

    def release(failed: bool) -> None:
        if appends and failed:
            appender._append_failed(start_offset, size)
        fh._hold(-1)
        if core is not None:
            core._hold(-1)
        keep.clear()

    job = _Job(write, handle, ptr, file_offset, buffer_offset, view, host_fd,
               getattr(fh, "_path", None))
    if executor is None and size <= min(tsize, INLINE_MAX):
        # one small task: in this thread (no hand-off, no lookup of the
        # default task size, which it is below)
        return IOFuture._run_inline(size, write, job, (0, size), release)
    if task_size is None:
        tsize = _pool_settings()[1]
    spans = [(start, min(tsize, size - start)) for start in range(0, size, tsize)]
    future = IOFuture(size, write)
    future._start(executor if executor is not None else _default_executor(), job, spans,
                  release)
    return future


def _pread_host(fd: int, view: memoryview, size: int, file_offset: int, buffer_offset: int,
                task_size: int, inline_max: int = INLINE_MAX) -> IOFuture:
    """Read ``size`` bytes of the descriptor ``fd`` at ``file_offset`` into
    the host memory ``view`` at ``buffer_offset`` with POSIX ``preadv`` in
    tasks of ``task_size`` bytes on the thread pool; hipFile is not used (a
    host-memory load needs no GPU library). ``fd`` must stay open until the
    future is done; ``view`` must be a flat, writable byte view. One task
    of at most ``inline_max`` bytes (``INLINE_MAX`` unless the caller knows
    nothing else is read meanwhile) is read in the calling thread (the
    future is done on return), as :func:`pread` does: a small tensor's
    read costs one ``preadv``, not a hand-off to the pool.

    See Also
    --------
    preadv
    """
    job = _Job(False, 0, 0, file_offset, buffer_offset, view, lambda: fd)
    if size <= min(task_size, inline_max):
        return IOFuture._run_inline(size, False, job, (0, size), lambda failed: None)
    spans = [(start, min(task_size, size - start)) for start in range(0, size, task_size)]
    future = IOFuture(size, False)
    future._start(_default_executor(), job, spans, lambda failed: None)
    return future


def _positional_buffer_offset(name: str, legacy: tuple[Any, ...], buffer_offset: Any) -> Any:
    """``buffer_offset`` of :func:`pread`/:func:`pwrite`, keyword-only now: a
    fifth positional argument still works, with a :class:`DeprecationWarning`
    (``FileHandle.pread``/``pwrite`` take it by keyword, and the fourth
    positional of KvikIO's calls is ``task_size``)."""
    if not legacy:
        return buffer_offset
    if len(legacy) > 1:
        raise TypeError(f"{name}() takes at most 5 positional arguments "
                        f"({4 + len(legacy)} given)")
    if buffer_offset != 0:
        raise TypeError(f"{name}() got buffer_offset both by position and by keyword")
    warnings.warn(f"hipfile.{name}(fh, buffer, size, file_offset, buffer_offset): pass "
                  f"buffer_offset by keyword (buffer_offset={legacy[0]!r}); its place as the "
                  f"fifth positional argument is deprecated, as FileHandle.{name} takes it "
                  f"by keyword only", DeprecationWarning, stacklevel=3)
    return legacy[0]


def pread(fh: Any, buffer: Any, size: int | None = None, file_offset: int = 0,
          *legacy: int, buffer_offset: int = 0, task_size: int | None = None,
          executor: Executor | None = None) -> IOFuture:
    """Read ``size`` bytes at ``file_offset`` into ``buffer`` at
    ``buffer_offset`` in parallel tasks; returns an :class:`IOFuture`.

    Parameters
    ----------
    fh
        An open :class:`~hipfile.FileHandle`.
    buffer
        Device memory (a :class:`~hipfile.Buffer` or anything it accepts),
        or host memory as :meth:`hipfile.FileHandle.read` accepts it (moved
        with POSIX ``preadv`` on the thread pool; ``allow_host_buffers``).
    size
        Bytes to read; defaults to the rest of the buffer.
    file_offset, buffer_offset
        Where in the file and in the buffer. ``buffer_offset`` is
        keyword-only; as a fifth positional argument it still works, with a
        :class:`DeprecationWarning`.
    task_size
        Bytes per task (default: device memory, the engine's
        ``engine_task_size``, a lone range cut into one part per thread;
        otherwise ``hipfile.defaults.task_size()``).
    executor
        A :class:`concurrent.futures.Executor` to run the tasks on (default:
        device memory on the engine's threads, anything else on the
        module's thread pool of ``hipfile.defaults.num_threads()`` threads;
        see the module's text).

    Each task reads until its part is read or a call returns 0 (end of
    file): a short count in the middle of the file is read again, never
    taken for end of file. Parts past end of file read 0 bytes.

    Returns
    -------
    IOFuture
        ``result()`` is the total bytes read, fewer than ``size`` only at
        end of file.

    Raises
    ------
    TypeError
        Bad argument types, a read-only buffer, or a host buffer while
        ``hipfile.defaults`` ``allow_host_buffers`` is False.
    ValueError
        Negative offsets, a range that overruns the buffer, a non-positive
        ``task_size``, or a closed or closing file
        (:class:`~hipfile.ClosedFileError`; the tasks of a call accepted
        before a ``close(wait=True)`` all run before the file closes).
        ``TypeError`` too for more than five positional arguments, or
        ``buffer_offset`` given both by position and by keyword.

    Warns
    -----
    DeprecationWarning
        ``buffer_offset`` given as the fifth positional argument.

    See Also
    --------
    hipFileRead, preadv, hipMemcpyAsync
    """
    buffer_offset = _positional_buffer_offset("pread", legacy, buffer_offset)
    return _submit(False, fh, buffer, size, file_offset, buffer_offset, task_size, executor)


def pwrite(fh: Any, buffer: Any, size: int | None = None, file_offset: int | None = None,
           *legacy: int, buffer_offset: int = 0, task_size: int | None = None,
           executor: Executor | None = None) -> IOFuture:
    """Write ``size`` bytes from ``buffer`` at ``buffer_offset`` to the file
    at ``file_offset`` in parallel tasks; returns an :class:`IOFuture`. See
    :func:`pread`.

    ``file_offset`` left out (None) is 0, or on an append handle
    (:attr:`FileHandle.appends`) the end of the file: the range there is
    taken when the call is made, so later appends go after it (and a
    failed or cancelled write gives it back when it is still the last). On
    an append handle a given ``file_offset`` must be that end, else
    :class:`ValueError`.

    Each task writes until its part is written; a call that writes 0
    bytes fails the future with :class:`OSError` (``EIO``), so
    ``result()`` is always ``size``. Device memory is written on the
    engine's threads (``hipFileWrite``, or its staging ring: a copy to
    pinned memory on the device's own stream, then POSIX ``pwrite``); host
    buffers with POSIX ``pwritev`` on the pool.

    See Also
    --------
    hipFileWrite, pwritev, hipMemcpyAsync
    """
    buffer_offset = _positional_buffer_offset("pwrite", legacy, buffer_offset)
    return _submit(True, fh, buffer, size, file_offset, buffer_offset, task_size, executor)
