"""The futures of :func:`hipfile.pread`/:func:`hipfile.pwrite` and the
tasks behind them: :class:`IOFuture` (tasks on a pool, or one task run in
the calling thread) and its form for a request on the engine's threads."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

from hipfile._interop import as_timeout, wait_event
from hipfile._lib._errors import name_file
from hipfile.file._transfer import host_transfer, transfer

__all__ = ["IOFuture"]

_log = logging.getLogger("hipfile")


class _Stopped(Exception):
    """A task ended early because its future was canceled or another failed."""


class _Job:
    """What every task of one request shares."""

    __slots__ = ("buffer_offset", "file_offset", "handle", "host_fd", "path", "ptr", "stop",
                 "view", "write")

    def __init__(self, write: bool, handle: int, ptr: int, file_offset: int,
                 buffer_offset: int, view: memoryview | None = None,
                 host_fd: Callable[[], int] | None = None, path: Any = None) -> None:
        self.write = write
        self.path = path          # the file's, named by its errors
        self.handle = handle
        self.ptr = ptr
        self.file_offset = file_offset
        self.buffer_offset = buffer_offset
        self.view = view          # a host buffer, moved with POSIX calls
        self.host_fd = host_fd    # the descriptor for them (FileHandle._host_fd)
        self.stop = False


def _run_task(job: _Job, start: int, size: int) -> int:
    """Move ``size`` bytes at ``start`` (relative to the request); returns
    the bytes moved, fewer only at end of file (see :mod:`hipfile.file._transfer`)."""

    def check() -> None:
        if job.stop:
            raise _Stopped

    try:
        if job.view is not None:
            assert job.host_fd is not None
            return host_transfer(job.write, job.host_fd(), job.view, size,
                                 job.file_offset + start, job.buffer_offset + start, check)
        return transfer(job.write, job.handle, job.ptr, size, job.file_offset + start,
                        job.buffer_offset + start, check, job.host_fd)
    except OSError as exc:
        name_file(exc, job.path)
        raise


_DONE_LOCK = threading.RLock()
_DONE_EVENT = threading.Event()
_DONE_EVENT.set()


class IOFuture:
    """The outcome of a :func:`pread` / :func:`pwrite`.

    Follows the :class:`concurrent.futures.Future` interface: :meth:`result`,
    :meth:`exception`, :meth:`done`, :meth:`cancel`, :meth:`cancelled`,
    :meth:`add_done_callback`; :meth:`get` is :meth:`result` under KvikIO's
    name.
    """

    def __init__(self, nbytes: int, write: bool) -> None:
        self._nbytes = nbytes
        self._write = write
        self._lock = threading.RLock()
        self._event = threading.Event()
        self._tasks: list[Future[int]] = []
        self._remaining = 0
        self._expected = 0
        self._job: _Job | None = None
        self._release: Callable[[bool], None] | None = None
        self._callbacks: list[Callable[[IOFuture], Any]] = []
        self._cancel_requested = False
        self._cancelled = False
        self._result = 0
        self._exception: BaseException | None = None

    # -- set up by pread/pwrite ------------------------------------------

    def _start(self, executor: Executor, job: _Job, spans: list[tuple[int, int]],
               release: Callable[[bool], None]) -> None:
        self._job = job
        self._release = release
        self._remaining = self._expected = len(spans)
        if not spans:
            self._finish()
            return
        for i, (start, size) in enumerate(spans):
            try:
                fut = executor.submit(_run_task, job, start, size)
            except BaseException:
                # Tasks never submitted will not report; account for them
                # and stop the ones that were.
                job.stop = True
                with self._lock:
                    submitted = list(self._tasks)
                    self._remaining -= len(spans) - i
                    finished = self._remaining == 0
                for t in submitted:
                    t.cancel()
                if finished:
                    self._finish()
                raise
            with self._lock:
                self._tasks.append(fut)
            fut.add_done_callback(self._task_done)

    @classmethod
    def _run_inline(cls, nbytes: int, write: bool, job: _Job, span: tuple[int, int],
                    release: Callable[[bool], None]) -> IOFuture:
        """Run the one task of a small request in the calling thread and
        return its future, done: the outcome the pool gives (an exception
        from the task is its result, not raised here; Ctrl-C is raised).
        A done future shares one set event and lock: nothing waits on
        them."""
        self = cls.__new__(cls)
        self._nbytes = nbytes
        self._write = write
        self._lock = _DONE_LOCK
        self._event = _DONE_EVENT
        self._tasks = []
        self._remaining = self._expected = 0
        self._job = None
        self._release = None
        self._callbacks = []
        self._cancel_requested = False
        self._cancelled = False
        self._result = 0
        self._exception = None
        try:
            self._result = _run_task(job, *span)
        except Exception as exc:
            self._exception = exc
        except BaseException:
            release(True)
            raise
        release(self._exception is not None)
        return self

    def _task_done(self, fut: Future[int]) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            # fail fast: stop the other tasks
            self._stop_tasks()
        with self._lock:
            self._remaining -= 1
            finished = self._remaining == 0
        if finished:
            self._finish()

    def _stop_tasks(self) -> None:
        job = self._job
        if job is not None:
            job.stop = True
        with self._lock:
            tasks = list(self._tasks)
        for t in tasks:
            t.cancel()  # only queued tasks; runs callbacks in this thread

    def _finish(self) -> None:
        error: BaseException | None = None
        total = 0
        any_cancelled = False
        for t in self._tasks:
            if t.cancelled():
                any_cancelled = True
                continue
            exc = t.exception()
            if isinstance(exc, _Stopped):
                any_cancelled = True
            elif exc is not None:
                if error is None:
                    error = exc
            else:
                total += t.result()
        with self._lock:
            if self._cancel_requested:
                self._cancelled = True
            elif error is not None:
                self._exception = error
            elif any_cancelled or len(self._tasks) < self._expected:
                # canceled from outside (e.g. the executor was shut down)
                self._cancelled = True
            else:
                self._result = total
            release, self._release = self._release, None
            self._tasks = []
            self._job = None
            callbacks, self._callbacks = self._callbacks, []
        if release is not None:
            release(self._exception is not None or self._cancelled)
        self._event.set()
        for fn in callbacks:
            self._invoke(fn)

    def _invoke(self, fn: Callable[[IOFuture], Any]) -> None:
        try:
            fn(self)
        except Exception:
            _log.exception("exception calling callback for %r", self)

    # -- public ----------------------------------------------------------

    @property
    def nbytes(self) -> int:
        """Bytes requested."""
        return self._nbytes

    def done(self) -> bool:
        """Whether every task has ended (never blocks)."""
        return self._event.is_set()

    def cancelled(self) -> bool:
        """Whether the request was canceled."""
        return self._event.is_set() and self._cancelled

    def running(self) -> bool:
        """Whether the request has not ended yet."""
        return not self._event.is_set()

    def cancel(self) -> bool:
        """Cancel the request, best effort.

        On a pool, tasks not yet started are dropped and running ones stop
        at their next chunk; bytes already moved stay moved. A request of
        device memory on the engine's threads runs to its end once
        submitted, as a running :class:`concurrent.futures.Future` does.

        Returns
        -------
        bool
            False if the request had already ended or runs on the engine,
            True otherwise (it then ends as canceled: :meth:`result` raises
            ``CancelledError``).
        """
        with self._lock:
            if self._event.is_set():
                return self._cancelled
            self._cancel_requested = True
        self._stop_tasks()
        return True

    def result(self, timeout: float | None = None) -> int:
        """Wait for every task; return the total bytes moved.

        Parameters
        ----------
        timeout
            Seconds to wait, or None for no limit.

        Returns
        -------
        int
            Bytes moved; for a read, fewer than requested at end of file.

        Raises
        ------
        TimeoutError
            Not done within ``timeout``.
        TypeError, ValueError
            ``timeout`` is not a number >= 0 or None (bools refused).
        concurrent.futures.CancelledError
            The request was canceled.
        OSError, HipFileException
            The first failing task's error (in file order).
        """
        self._wait(timeout)
        if self._cancelled:
            raise concurrent.futures.CancelledError()
        if self._exception is not None:
            raise self._exception
        return self._result

    def wait(self, timeout: float | None = None) -> int:
        """Same as :meth:`result` (the name of the other handles, see
        :class:`~hipfile.async_io.Completion`).

        Raises
        ------
        TimeoutError, concurrent.futures.CancelledError, OSError, HipFileException
            As :meth:`result`.
        """
        return self.result(timeout)

    def get(self, timeout: float | None = None) -> int:
        """Same as :meth:`result` (KvikIO's name): wait for every task and
        return the total bytes moved.

        Raises
        ------
        TimeoutError, concurrent.futures.CancelledError, OSError, HipFileException
            As :meth:`result`.
        """
        return self.result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Wait like :meth:`result`; return the error instead of raising it
        (None on success)."""
        self._wait(timeout)
        if self._cancelled:
            raise concurrent.futures.CancelledError()
        return self._exception

    def _wait(self, timeout: float | None) -> None:
        if not wait_event(self._event, as_timeout(timeout)):
            raise TimeoutError(f"{self!r} not done after {timeout} s")

    def add_done_callback(self, fn: Callable[[IOFuture], Any]) -> None:
        """Call ``fn(self)`` once every task has ended (at once if already
        done). Runs in the thread that ended the last task (on the engine:
        the first thread to see the request end, a pool thread if nobody
        waits); exceptions are logged and ignored."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)
                return
        self._invoke(fn)

    def __repr__(self) -> str:
        kind = "pwrite" if self._write else "pread"
        if not self._event.is_set():
            state = "running"
        elif self._cancelled:
            state = "cancelled"
        elif self._exception is not None:
            state = f"raised {type(self._exception).__name__}"
        else:
            state = f"done result={self._result}"
        return f"<hipfile.IOFuture {kind} nbytes={self._nbytes} {state}>"


class _EngineFuture(IOFuture):
    """An :class:`IOFuture` whose bytes move on the engine's threads (a
    request of device memory on the default pool): its outcome is the
    engine handle's. The file and buffer are released when the request
    ends (the engine's sweeps observe it), as a pool task releases them."""

    def __init__(self, nbytes: int, write: bool, handle: Any,
                 pool: Callable[[], Executor]) -> None:
        super().__init__(nbytes, write)
        self._handle = handle
        self._pool = pool                 # where a waiter for the callbacks runs
        self._watcher: Future[None] | None = None

    def _poll(self) -> bool:
        """Whether the request has ended; records its outcome once it has."""
        if self._event.is_set():
            return True
        if not self._handle.done():
            return False
        self._conclude()
        return True

    def _conclude(self) -> None:
        # the handle has ended: its result or its error, recorded once;
        # then the callbacks run, in this thread
        try:
            result, error = self._handle.wait(0), None
        except Exception as exc:     # the request's own error
            result, error = 0, exc
        with self._lock:
            if self._event.is_set():
                return
            self._result = result
            self._exception = error
            callbacks, self._callbacks = self._callbacks, []
            self._event.set()
        for fn in callbacks:
            self._invoke(fn)

    def done(self) -> bool:
        return self._poll()

    def running(self) -> bool:
        return not self._poll()

    def cancel(self) -> bool:
        # the engine runs a request to its end once it has it
        return False

    def _wait(self, timeout: float | None) -> None:
        seconds = as_timeout(timeout)
        if self._poll():
            return
        try:
            self._handle.wait(seconds)
        except TimeoutError:
            if not self._handle.done():
                raise TimeoutError(f"{self!r} not done after {timeout} s") from None
        except Exception:
            pass                     # the request's error: _conclude records it
        self._conclude()

    def add_done_callback(self, fn: Callable[[IOFuture], Any]) -> None:
        if not self._poll():
            with self._lock:
                if not self._event.is_set():
                    self._callbacks.append(fn)
                    if self._watcher is None:
                        # a pool thread waits for the end, then runs them
                        self._watcher = self._pool().submit(self._wait, None)
                    return
        self._invoke(fn)

    def __repr__(self) -> str:
        self._poll()
        return super().__repr__()


IOFuture.__module__ = "hipfile.parallel"     # documented and imported from there
