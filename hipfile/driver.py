"""The hipFile driver: open/close, reference count and driver settings.

Two kinds of reference keep the driver open:

* :class:`Driver` objects, opened and closed by the caller (``with
  hipfile.Driver(): ...``);
* the **process reference** (:func:`process_driver`), taken by the entry
  points that need the driver without being given one
  (:mod:`hipfile.safetensors`, :mod:`hipfile.compat.cufile`): opened once,
  at the first such call, and kept until the interpreter exits, so that a
  loop of bare ``load_file`` calls pays the driver's open (hundreds of
  milliseconds with cuFile) once per process, not once per call.

With the process reference held, ``with hipfile.Driver():`` still adds and
drops one reference of its own; its exit then never brings the count to
zero, so it neither waits for the engine nor drops registrations. Code that
wants the driver closed before exit calls :func:`release_process_driver`.
A child made by ``fork`` does not inherit the reference: its first implicit
use opens the driver in the child.
"""

from __future__ import annotations

import atexit
import threading
from types import TracebackType

from hipfile import _lifetime
from hipfile._interop import as_size, as_timeout
from hipfile._lib import _hipfile
from hipfile._lifetime import Closes, drain, exit_block
from hipfile.errors import InFlightTimeoutError

__all__ = ["Driver", "process_driver", "release_process_driver", "use_count"]


def use_count() -> int:
    """The driver's process-wide open count. Wraps ``hipFileUseCount``."""
    return int(_hipfile.use_count())


class Driver(Closes):
    """One reference to the hipFile driver.

    The library counts opens per process; each ``Driver`` object holds at
    most one of them, so :meth:`open` and :meth:`close` are idempotent per
    object. When the count drops to zero the library drops every handle and
    buffer registration. While the process reference (:func:`process_driver`)
    is held, closing a ``Driver`` never brings the count to zero: its
    ``with`` block then only adds and drops its own reference.

    Examples
    --------
    >>> with Driver():
    ...     ...

    See Also
    --------
    hipFileDriverOpen, hipFileDriverClose
    """

    def __init__(self) -> None:
        self._open = False

    @staticmethod
    def use_count() -> int:
        """The process-wide open count. Wraps ``hipFileUseCount``."""
        return use_count()

    @property
    def is_open(self) -> bool:
        """Whether this object holds an open reference."""
        return self._open

    def open(self) -> Driver:
        """Open the driver (idempotent per object); returns ``self``.

        Raises
        ------
        HipFileException
            The library could not open the driver.
        HipFileLibraryNotFound
            No libhipfile is installed.
        """
        if not self._open:
            _hipfile.driver_open()
            self._open = True
        return self

    def close(self, *, wait: bool = False, timeout: float | None = None) -> None:
        """Release this object's reference (idempotent per object).

        When this is the last reference, closing the driver drops every
        file and buffer registration. With ``wait=True`` that close is the
        ``concurrent.futures.Executor.shutdown(wait=True)`` of the driver:
        from the call on the driver is *closing*, and every file refuses
        new operations with :class:`~hipfile.ClosedFileError` (saying the
        driver is closing); the call waits for the operations in flight on
        every file (stream-ordered ones, dropped handles included; batch
        entries; synchronous, parallel and stream-engine reads and writes),
        at most ``timeout`` seconds, then closes. What was in flight
        completes normally. If the timeout passes first, or the wait is
        interrupted (Ctrl-C), nothing is closed and the files accept
        operations again. While other references are held (another
        ``Driver``, the process reference) the close drops nothing and
        does not wait.

        Parameters
        ----------
        wait
            Refuse new operations and wait for those in flight first, when
            this close drops the registrations (False: close at once).
        timeout
            With ``wait=True``: seconds to wait at most, None for no limit.

        Raises
        ------
        InFlightTimeoutError
            With ``wait=True``: operations were still in flight after
            ``timeout`` seconds (nothing is changed).
        KeyboardInterrupt
            The wait was interrupted (nothing is changed).
        TypeError, ValueError
            ``timeout`` is not a number >= 0 or None, or is given without
            ``wait=True`` (TypeError).
        HipFileException
            The library refused (e.g. ``DriverNotInitializedError``).

        See Also
        --------
        hipFileDriverClose
        """
        if not isinstance(wait, bool):
            raise TypeError(f"wait must be a bool, not {type(wait).__name__}")
        limit = as_timeout(timeout)
        if timeout is not None and not wait:
            raise TypeError("close(timeout=...) waits only with wait=True")
        if not self._open:
            return
        if not wait or use_count() > 1:
            self._close_now()
            return
        _hipfile.begin_driver_closing()
        try:
            if not _wait_idle(limit):
                raise InFlightTimeoutError(
                    f"cannot close the driver: {_in_flight()} operation(s) still in flight "
                    f"after {timeout} s; nothing was closed and the files accept operations "
                    "again")
            self._close_now()
        finally:
            _hipfile.end_driver_closing()

    def _close_now(self) -> None:
        if self._open:
            self._open = False
            _hipfile.driver_close()

    def __enter__(self) -> Driver:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Close; when this is the last reference (whose close drops every
        registration), first refuse new operations and wait for those in
        flight, as ``close(wait=True)``: with no limit for stream-ordered
        operations, and :data:`hipfile._lifetime.HELD_WAIT_TIMEOUT` seconds
        for the others (then the driver closes anyway).

        An exception raised in the block propagates unchanged; a failure
        while waiting or closing is attached to it as context.
        """
        if not (self._open and use_count() <= 1):
            exit_block(exc, lambda: None, self._close_now)
            return
        _hipfile.begin_driver_closing()
        try:
            exit_block(exc, lambda: _wait_idle(None, _lifetime.HELD_WAIT_TIMEOUT),
                       self._close_now)
        finally:
            _hipfile.end_driver_closing()

    def __repr__(self) -> str:
        return f"<hipfile.Driver {'open' if self._open else 'closed'}>"

    # settings -------------------------------------------------------------

    @staticmethod
    def set_poll_mode(poll: bool, poll_threshold_kib: int) -> None:
        """Use polling for I/O up to ``poll_threshold_kib`` KiB.
        Wraps ``hipFileDriverSetPollMode``."""
        _hipfile.driver_set_poll_mode(bool(poll), as_size(poll_threshold_kib,
                                                          "poll_threshold_kib"))

    @staticmethod
    def set_max_direct_io_size(kib: int) -> None:
        """Largest direct I/O in KiB. Wraps ``hipFileDriverSetMaxDirectIOSize``."""
        _hipfile.driver_set_max_direct_io_size(as_size(kib, "kib"))

    @staticmethod
    def set_max_cache_size(kib: int) -> None:
        """Device bounce-cache size in KiB. Wraps ``hipFileDriverSetMaxCacheSize``."""
        _hipfile.driver_set_max_cache_size(as_size(kib, "kib"))

    @staticmethod
    def set_max_pinned_mem_size(kib: int) -> None:
        """Pinned memory limit in KiB. Wraps ``hipFileDriverSetMaxPinnedMemSize``."""
        _hipfile.driver_set_max_pinned_mem_size(as_size(kib, "kib"))


def _in_flight() -> int:
    """Operations in flight on every file, of every kind."""
    return int(_hipfile.settle(None)) + int(_hipfile.files_held())


def _wait_idle(timeout: float | None, held_timeout: float | None = None) -> bool:
    """Wait until no operation is in flight on any file (see
    :func:`hipfile._lifetime.drain`); returns whether none is left."""
    return drain(lambda left: int(_hipfile.wait_for(None, left)), _hipfile.files_held,
                 timeout, held_timeout)


# --------------------------------------------------------------------------
# The process reference
# --------------------------------------------------------------------------

_process_lock = threading.Lock()
# (driver, fork generation, driver epoch) of the process reference, or None
_process_ref: tuple[Driver, int, int] | None = None


def _process_ref_valid(ref: tuple[Driver, int, int] | None) -> bool:
    return (ref is not None and ref[0].is_open and ref[1] == _hipfile.fork_generation()
            and ref[2] == _hipfile.driver_epoch())


def process_driver() -> Driver:
    """The process's own driver reference, opened at the first call and kept
    until the interpreter exits.

    Cheap after the first call (no library call). The reference is opened
    again when it was lost: in a child after ``fork``, or after the open
    count was brought to zero by ``hipFileDriverClose`` calls that were not
    this reference's (the library then dropped every registration).

    Returns
    -------
    Driver
        The reference (do not close it; see :func:`release_process_driver`).

    Raises
    ------
    HipFileException, HipFileLibraryNotFound
        As :meth:`Driver.open`.

    See Also
    --------
    hipFileDriverOpen
    """
    global _process_ref
    ref = _process_ref
    if _process_ref_valid(ref):
        assert ref is not None
        return ref[0]
    with _process_lock:
        ref = _process_ref
        if _process_ref_valid(ref):
            assert ref is not None
            return ref[0]
        # a stale reference (other generation or epoch) is forgotten, not
        # closed: its open belongs to the parent or was already undone
        drv = Driver().open()
        _process_ref = (drv, _hipfile.fork_generation(), _hipfile.driver_epoch())
        return drv


def release_process_driver() -> bool:
    """Drop the process reference now, if this process holds one.

    When it is the last reference, the stream-ordered operations in flight
    are waited for first (as ``Driver.__exit__`` does). The next implicit
    use opens the driver again.

    Returns
    -------
    bool
        Whether a reference was dropped.

    Raises
    ------
    HipFileException
        The library refused the close.

    See Also
    --------
    hipFileDriverClose
    """
    global _process_ref
    with _process_lock:
        ref, _process_ref = _process_ref, None
        if not _process_ref_valid(ref):
            return False
        assert ref is not None
        drv = ref[0]
        if use_count() <= 1:
            _hipfile.wait_for(None)
        drv.close()
        return True


def _after_fork_in_child() -> None:
    global _process_ref, _process_lock
    _process_lock = threading.Lock()   # a lock held at fork stays held in the child
    _process_ref = None                # the parent's open; the child opens its own


@atexit.register
def _release_at_exit() -> None:
    try:
        release_process_driver()
    except Exception:  # the runtime may be shutting down: nothing to report to
        pass


_hipfile.on_fork_child(_after_fork_in_child)   # the package's one fork hook
