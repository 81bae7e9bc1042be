"""Context manager and finalizer shared by objects that hold a registration.

One rule for every object that holds a hipFile resource (FileHandle, Buffer,
Stream, Driver):

* explicit ``close()`` / ``deregister()`` never wait: with operations in
  flight they raise :class:`~hipfile.InFlightError` and change nothing;
* leaving a ``with`` block waits for the object's stream-ordered operations
  (interruptibly, like ``ThreadPoolExecutor``), then closes; a FileHandle's
  (and the last Driver's) refuses new submissions meanwhile, as
  ``close(wait=True)`` does (see :func:`drain`). An exception
  raised in the block propagates unchanged; a failure while waiting or
  closing is attached to it (``__context__`` and a note), never substituted;
* a finalizer never raises and never drops a registration: an object
  collected with operations in flight is kept until they complete, then
  closed (with a ``ResourceWarning``); in a forked child or at interpreter
  exit it only drops references;
* a finalizer cannot be cut short by Ctrl-C: each ``__del__`` here is a
  compiled :func:`guarded_del`, which runs no Python code before it has
  deferred SIGINT (:func:`hipfile._lib._finalize.run_uninterrupted`); a Ctrl-C
  that arrives meanwhile reaches the code the finalizer interrupted once
  the cleanup is done, instead of being lost in the finalizer.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from hipfile._interop import Deadline, wait_slices
from hipfile._lib import _hipfile
from hipfile.errors import InFlightError

_T = TypeVar("_T", bound="RegistrationLifetime")

#: How long leaving a ``with`` block waits for batch entries and parallel
#: tasks (operations outside the stream-ordered path) before closing.
HELD_WAIT_TIMEOUT = 10.0


def wait_idle(obj: Any, state: Any) -> None:
    """Wait for the operations using ``obj``: stream-ordered ones without
    limit (interruptible), batch entries and parallel tasks (``_held``) for
    at most :data:`HELD_WAIT_TIMEOUT` seconds."""
    if state is not None:
        _hipfile.wait_for(state)
    held = getattr(obj, "_held_count", None)
    if held is not None:
        drain(lambda left: 0, held, None, HELD_WAIT_TIMEOUT)


def drain(streamed: Callable[[float | None], int], held: Callable[[], int],
          timeout: float | None, held_timeout: float | None = None) -> bool:
    """The wait of a close that waits (``close(wait=True)``, leaving a
    ``with`` block): until ``streamed(left)`` (wait at most ``left``
    seconds for the stream-ordered operations, None: no limit; return how
    many are still in flight) and ``held()`` (the other operations, and
    submissions under way) are both zero. The caller has made the object
    refuse new submissions first; submissions that raced with that are
    counted in ``held()`` while under way, and the handles they return are
    waited for on the next round.

    At most ``timeout`` seconds (None: no limit), and at most
    ``held_timeout`` seconds once only operations counted by ``held()``
    are left. Returns whether nothing is left. Interruptible: Ctrl-C raises
    KeyboardInterrupt (``streamed`` and the pauses between rounds both
    check for signals).
    """
    deadline = Deadline(timeout)
    held_deadline = Deadline(held_timeout)
    delay = 1e-4
    left_held = False

    def round_(seconds: float) -> bool:
        # one round, then a pause of at most `seconds` that doubles to 10 ms
        nonlocal delay, left_held
        still = streamed(deadline.left())
        if not still and not held():
            return True
        if not still and held_deadline.passed():
            left_held = True
            return True
        time.sleep(min(seconds, delay))
        delay = min(delay * 2, 0.01)
        return False

    return wait_slices(round_, deadline, 0.01) and not left_held


def exit_block(exc: BaseException | None, wait: Callable[[], object],
               close: Callable[[], None]) -> None:
    """Leave a ``with`` block: wait, then close. Without an exception from
    the block, failures propagate; with one, they are attached to it. An
    interrupted wait (``KeyboardInterrupt``) propagates and closes nothing."""
    if exc is None:
        wait()
        close()
        return
    try:
        wait()
    except Exception as err:  # attached, never substituted
        _attach(exc, err)
    try:
        close()
    except Exception as err:
        _attach(exc, err)


def _attach(exc: BaseException, err: BaseException) -> None:
    if exc.__context__ is None and err is not exc:
        exc.__context__ = err
    add_note = getattr(exc, "add_note", None)  # Python >= 3.11
    if add_note is not None:
        add_note(f"while leaving the with block: {type(err).__name__}: {err}")


#: ``__del__ = guarded_del(fn, live)``: ``fn(self)`` as a finalizer that
#: Ctrl-C does not cut short, skipped (without running Python code) while
#: the compiled attribute ``live`` is false.
guarded_del = _hipfile.guarded_del


def finalize(obj: Any, release: str, live: Callable[[], bool], message: str) -> None:
    """The finalizer: release quietly in a child or at exit, defer while
    operations are in flight, warn when something was left open."""
    if not live():
        return
    if _hipfile.finalizing():
        return
    if getattr(obj, "inherited", False):
        try:
            getattr(obj, release)()   # drops the inherited state only
        except Exception:
            pass
        return
    text = repr(obj)  # before releasing changes what it says
    try:
        getattr(obj, release)()
    except InFlightError:
        _hipfile.defer_release(obj, release)
        warnings.warn(f"{text} was collected with operations in flight; it is released "
                      "once they complete", ResourceWarning, stacklevel=2)
        return
    except Exception:
        return
    warnings.warn(f"{text} {message}", ResourceWarning, stacklevel=2)


class RegistrationLifetime:
    """``with obj:`` registers and deregisters; an object collected while still
    registered is deregistered and warns with ``ResourceWarning``.

    Mixed in after a core class that provides ``registered``, ``register()``
    and ``deregister()``.
    """

    if TYPE_CHECKING:

        @property
        def registered(self) -> bool: ...

        def register(self) -> None: ...

        def deregister(self) -> None: ...

    def _inflight_state(self) -> Any:
        return self

    def __enter__(self: _T) -> _T:
        self.register()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        exit_block(exc, lambda: wait_idle(self, self._inflight_state()), self.deregister)

    def _collected(self) -> None:
        finalize(self, "deregister", lambda: bool(self.registered),
                 "was still registered; deregistered it")

    __del__ = guarded_del(_collected, "registered")


class Closes:
    """``with obj:`` ends with ``close()``. Mixed in by classes that provide
    ``close()`` (their ``__enter__`` opens, or checks that they are open)."""

    if TYPE_CHECKING:

        def close(self) -> None: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        exit_block(exc, lambda: None, self.close)


class ClosesWhenCollected(Closes):
    """:class:`Closes`, and an object collected while still open is closed
    and warns with ``ResourceWarning`` (unless closing fails: a finalizer
    must not raise). Subclasses say whether they are open in ``_left_open``."""

    def _left_open(self) -> bool:
        raise NotImplementedError

    def _collected(self) -> None:
        finalize(self, "close", self._left_open, "was not closed")

    __del__ = guarded_del(_collected)
