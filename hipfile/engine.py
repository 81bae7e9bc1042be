"""The stream-ordered parallel engine: layer-wise loads at the machine's
bandwidth.

``hipFileReadAsync``/``hipFileWriteAsync`` run as host functions, and HIP
runs a process's host functions on one thread, so stream-ordered I/O through
the library stops near 5 GB/s however many streams are used. The engine keeps
the stream order and moves the bytes with the binding's own C threads:

* **start**: an operation waits, off the caller's thread, until the stream
  given at submit has passed the submit point (the stream writes a gate flag
  with ``hipStreamWriteValue32``; an idle stream starts it at once);
* **data**: worker threads run synchronous ``hipFileRead``/``hipFileWrite``
  chunks (``task_size`` bytes each) with no GIL, oldest range first, each
  thread making the buffer's device current;
* **completion**: each range has its own flag; :meth:`StreamIOHandle.wait_on`
  makes any stream wait for it with ``hipStreamWaitValue32`` (no host
  function, no host block), and :meth:`StreamIOHandle.wait` observes it on
  the host.

Use :meth:`FileHandle.pread_async` / :meth:`FileHandle.pwrite_async` for one
range and :meth:`FileHandle.pread_async_ranges` /
:meth:`FileHandle.pwrite_async_ranges` for many (one per layer)::

    handles = fh.pread_async_ranges(kv, [(n, i * n, i * n) for i in range(32)], copy)
    for i, h in enumerate(handles):
        h.wait_on(compute)          # layer i's kernels wait for layer i only
        run_layer(i, stream=compute)

Where a device cannot use stream waits (``hipDeviceAttributeCanUseStreamWaitValue``
is 0) the engine releases streams with a host function instead;
:func:`mechanism` says which is in use. ``HIPFILE_ENGINE_RELEASE=host`` forces
host functions.

Settings: ``engine_threads`` (worker threads, default
``half the CPUs, 4 to 16``) and ``engine_task_size`` (bytes per chunk,
default 8 MiB) of :mod:`hipfile.defaults`, read at every submission: set
them with ``hipfile.defaults.set``, the variables ``HIPFILE_ENGINE_THREADS``
and ``HIPFILE_ENGINE_TASK_SIZE``, or :func:`configure`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hipfile._lib import _hipfile
from hipfile._lib._hipfile import StreamIOHandle

__all__ = ["StreamIOHandle", "configure", "info", "mechanism", "settings", "shutdown"]


def configure(threads: int | None = None, task_size: int | None = None) -> None:
    """Set the worker thread count and the default task size (bytes); None
    keeps a value.

    The same as ``hipfile.defaults.set(engine_threads=threads,
    engine_task_size=task_size)``: the values hold for the process and take
    effect at the next submission (a new thread count once the engine is
    idle); ``hipfile.defaults.reset`` undoes them.

    Raises
    ------
    TypeError, ValueError
        A value that is not a positive integer (nothing is changed).
    """
    _hipfile.engine_configure(threads, task_size)


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
    """Threads running, outstanding operations, parked handles, and per
    device the release mechanism and the flags allocated."""
    return dict(_hipfile.engine_info())


def mechanism(device: int = -1) -> str:
    """``"stream-memory-operations"`` or ``"host-functions"``: how completion
    reaches GPU streams on ``device`` (-1: the current device).

    See Also
    --------
    hipDeviceGetAttribute
    """
    return str(_hipfile.engine_mechanism(device))


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
