"""Cross-process I/O statistics: is the fast path being used?

A process that uses hipFile keeps statistics of its I/O when it runs with
``HIPFILE_STATS_LEVEL`` (AMD's library and the emulated platform record at
level 1 when the variable is unset; ``0`` turns recording off). Another
process, knowing its pid, reads them with a :class:`StatsContext`::

    with hipfile.StatsContext(pid) as stats:
        report = stats.report()
        print(report.fastpath_read.bytes, report.fallback_read.bytes)
        print(report.text)

The statistics API is declared in AMD's ``hipfile-stats.h``; a library
without it raises :class:`~hipfile.HipFileSymbolNotFound` naming the function.

They count what goes through hipFile's own data path only: the bytes that
the engine's staging ring moves (``pread_async*``, the safetensors loader,
and ``pread``/``pwrite`` of device memory from files opened without
``O_DIRECT``) are POSIX reads and copies of the package's own, which
hipFile never sees; ``engine_data_path="hipfile"`` sends them through it.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import re
import tempfile
import threading
import warnings
from types import TracebackType
from typing import Any

from hipfile._interop import as_int, as_timeout, wait_event
from hipfile._lib import _hipfile
from hipfile._lib._enums import member_or_int
from hipfile._lib._errors import ClosedError, HipFileException
from hipfile._lifetime import guarded_del

__all__ = [
    "PathStats",
    "StatsContext",
    "StatsError",
    "StatsInvalidArgumentError",
    "StatsReport",
    "StatsReportError",
    "StatsStatus",
    "StatsTargetNotAccessibleError",
    "StatsTargetNotFoundError",
    "report",
]


class StatsStatus(enum.IntEnum):
    """``hipFileStatsError_t``."""

    SUCCESS = 0
    INVALID_ARGUMENT = 1
    TARGET_PROCESS_NOT_FOUND = 2
    TARGET_PROCESS_NOT_ACCESSIBLE = 3
    REPORT_GENERATION_FAILED = 4


class StatsError(HipFileException):
    """A statistics call failed with a ``hipFileStatsError_t`` status.

    A :class:`~hipfile.HipFileException` (the package's one hierarchy): its
    ``hipfile_err`` is 0, as the statistics calls report a
    ``hipFileStatsError_t`` (:attr:`status`) rather than a
    ``hipFileOpError_t``.

    Parameters
    ----------
    status
        The status code (see :class:`StatsStatus`).
    func
        The C function that reported it.
    detail
        Extra context for the message.
    """

    def __init__(self, status: int, func: str, detail: str = "") -> None:
        super().__init__(0, 0, func, detail)
        self._status = int(status)
        self.args = (status, func)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._status, self._func, self._detail))

    @property
    def status(self) -> StatsStatus | int:
        """The status as a :class:`StatsStatus` where it is one."""
        return member_or_int(StatsStatus, self._status)

    @property
    def func(self) -> str:
        """The C function that failed."""
        return str(self._func)

    def __str__(self) -> str:
        st = self.status
        name = st.name if isinstance(st, StatsStatus) else str(st)
        msg = f"{self._func}: {name} ({self._status})"
        return f"{msg}: {self._detail}" if self._detail else msg


class StatsInvalidArgumentError(StatsError, ValueError):
    """An argument was refused (``hipFileStatsInvalidArgument``)."""


class StatsTargetNotFoundError(StatsError, ProcessLookupError):
    """No process has that pid (``hipFileStatsTargetProcessNotFound``)."""


class StatsTargetNotAccessibleError(StatsError):
    """The target process keeps no statistics this library can read: it does
    not use hipFile (yet), or uses another implementation
    (``hipFileStatsTargetProcessNotAccessible``)."""


class StatsReportError(StatsError):
    """The report could not be generated or written
    (``hipFileStatsReportGenerationFailed``); also raised before connecting."""


_BY_STATUS: dict[int, type[StatsError]] = {
    StatsStatus.INVALID_ARGUMENT: StatsInvalidArgumentError,
    StatsStatus.TARGET_PROCESS_NOT_FOUND: StatsTargetNotFoundError,
    StatsStatus.TARGET_PROCESS_NOT_ACCESSIBLE: StatsTargetNotAccessibleError,
    StatsStatus.REPORT_GENERATION_FAILED: StatsReportError,
}


def _check(status: int, func: str, detail: str = "") -> None:
    if status != StatsStatus.SUCCESS:
        raise _BY_STATUS.get(int(status), StatsError)(status, func, detail)


class _BlockingCall:
    """A library call that may block for long (connecting to a target, waiting
    for it to exit), run in a daemon thread so that the caller's wait can time
    out or be interrupted (Ctrl-C) without losing the call: the next wait
    picks up the same call and its outcome. The thread holds the context as
    a user until the call returns (see ``StatsContext._enter``)."""

    def __init__(self, owner: StatsContext, call: Any) -> None:
        self._done = threading.Event()
        self._status = 0
        self._error: BaseException | None = None
        ctx = owner._enter()

        def run() -> None:
            try:
                self._status = int(call(ctx))
            except BaseException as e:  # handed to the waiter
                self._error = e
            finally:
                owner._leave()
                self._done.set()

        threading.Thread(target=run, name=f"hipfile-stats-{owner.pid}", daemon=True).start()

    def wait(self, timeout: float | None) -> int | None:
        """The call's status, or None when ``timeout`` seconds passed first."""
        if not wait_event(self._done, timeout):
            return None
        if self._error is not None:
            raise self._error
        return self._status


# -- the report -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PathStats:
    """Totals of one path (fast path or fallback) and direction."""

    bytes: int
    """Bytes moved."""
    bandwidth_gib_s: float
    """Average bandwidth, GiB/s (bytes over the time spent)."""
    latency_us: float
    """Average time per transfer, microseconds."""
    errors: int
    """Transfers that failed."""
    unaligned: int
    """Transfers not aligned for direct I/O."""
    count: int | None = None
    """Transfers, where the library reports it (the emulated platform does)."""


_ZERO = PathStats(0, 0.0, 0.0, 0, 0)
_TOTAL = re.compile(
    r"^(?:Total|Average) (Fastpath|Fallback) (Read|Write) "
    r"(Size \(B\)|Bandwidth \(GiB/s\)|Latency \(us\)|Errors|Unaligned|Count): (\S+)$")
_FIELD = {"Size (B)": "bytes", "Bandwidth (GiB/s)": "bandwidth_gib_s",
          "Latency (us)": "latency_us", "Errors": "errors", "Unaligned": "unaligned",
          "Count": "count"}
_HEADER = {"AIS-STATS Version": "version", "HipFile Stats Level": "level",
           "File Handle Registrations": "handle_registrations",
           "Buffer Registrations": "buffer_registrations",
           "Fastpath Rejections": "fastpath_rejections"}


@dataclasses.dataclass(frozen=True)
class StatsReport:
    """A statistics report: its text and the totals parsed from it.

    Histograms (by transfer size) stay in :attr:`text`.
    """

    text: str
    version: int
    level: int
    handle_registrations: int
    buffer_registrations: int
    fastpath_rejections: int
    """Transfers that could not take the fast path."""
    fastpath_read: PathStats
    fastpath_write: PathStats
    fallback_read: PathStats
    fallback_write: PathStats

    @property
    def fastpath_bytes(self) -> int:
        """Bytes moved by the fast path, both directions."""
        return self.fastpath_read.bytes + self.fastpath_write.bytes

    @property
    def fallback_bytes(self) -> int:
        """Bytes moved by the fallback (bounce buffer or buffered I/O)."""
        return self.fallback_read.bytes + self.fallback_write.bytes

    @classmethod
    def parse(cls, text: str) -> StatsReport:
        """Parse the text of ``hipFileStatsGenerateReport``.

        Raises
        ------
        ValueError
            The text is not a statistics report.
        """
        header: dict[str, int] = {}
        paths: dict[tuple[str, str], dict[str, Any]] = {}
        for line in text.splitlines():
            line = line.strip()
            m = _TOTAL.match(line)
            if m:
                kind, direction, field, value = m.groups()
                name = _FIELD[field]
                number: float | int = (float(value) if name in ("bandwidth_gib_s", "latency_us")
                                       else int(value))
                paths.setdefault((kind, direction), {})[name] = number
                continue
            key, sep, value = line.partition(": ")
            if sep and key in _HEADER and value.strip().lstrip("-").isdigit():
                header[_HEADER[key]] = int(value)
        if "version" not in header or "level" not in header:
            raise ValueError("not a hipFile statistics report (no version and level lines)")

        def path(kind: str, direction: str) -> PathStats:
            fields = paths.get((kind, direction))
            return dataclasses.replace(_ZERO, **fields) if fields else _ZERO

        return cls(
            text=text,
            version=header["version"],
            level=header["level"],
            handle_registrations=header.get("handle_registrations", 0),
            buffer_registrations=header.get("buffer_registrations", 0),
            fastpath_rejections=header.get("fastpath_rejections", 0),
            fastpath_read=path("Fastpath", "Read"),
            fastpath_write=path("Fastpath", "Write"),
            fallback_read=path("Fallback", "Read"),
            fallback_write=path("Fallback", "Write"),
        )


# -- the context ------------------------------------------------------------------


class StatsContext:
    """Reads the I/O statistics of another process that uses hipFile.

    Parameters
    ----------
    pid
        The target process.
    connect
        Connect at once (the default); otherwise call :meth:`connect`.
    timeout
        Seconds to wait for that connection at most, or None for no limit.

    Raises
    ------
    TypeError
        ``pid`` is not an int.
    TimeoutError
        (when connecting) not connected within ``timeout``.
    StatsInvalidArgumentError
        ``pid`` is not positive.
    StatsTargetNotFoundError
        No process has that pid.
    StatsTargetNotAccessibleError
        (when connecting) the target keeps no statistics this library reads.
    HipFileSymbolNotFound
        The loaded libhipfile lacks the statistics API.

    See Also
    --------
    hipFileStatsCreateContext, hipFileStatsConnectToTargetProcess,
    hipFileStatsCloseContext

    Notes
    -----
    A context manager; :meth:`close` is idempotent. The counters stay
    readable after the target exits.
    """

    def __init__(self, pid: int, *, connect: bool = True,
                 timeout: float | None = None) -> None:
        pid = as_int(pid, "pid")
        timeout = as_timeout(timeout)
        self._pid = pid
        self._ctx = 0
        self._lock = threading.Lock()
        self._users = 0
        self._closing = False
        self._connected = False
        self._calls: dict[str, _BlockingCall] = {}
        self._calls_lock = threading.Lock()
        status, ctx = _hipfile.stats_create_context(pid)
        _check(status, "hipFileStatsCreateContext", f"pid {pid}")
        self._ctx = ctx
        if connect:
            try:
                self.connect(timeout)
            except BaseException:
                self.close()
                raise

    @property
    def pid(self) -> int:
        """The target process."""
        return self._pid

    @property
    def closed(self) -> bool:
        """Whether the context is closed."""
        return self._ctx == 0 or self._closing

    @property
    def connected(self) -> bool:
        """Whether :meth:`connect` succeeded."""
        return self._connected

    def _enter(self) -> int:
        with self._lock:
            if self._ctx == 0 or self._closing:
                raise ClosedError("the StatsContext is closed")
            self._users += 1
            return self._ctx

    def _leave(self) -> None:
        ctx = 0
        with self._lock:
            self._users -= 1
            if self._closing and self._users == 0:
                ctx, self._ctx = self._ctx, 0
        if ctx:
            _hipfile.stats_close_context(ctx)

    def _blocking(self, name: str, call: Any, timeout: float | None) -> int | None:
        """Wait for the blocking library call ``name`` (started now, or by an
        earlier wait that timed out or was interrupted); its status, or None
        on timeout (the call goes on)."""
        with self._calls_lock:  # one library call per kind at a time
            pending = self._calls.get(name)
            if pending is None:
                pending = self._calls[name] = _BlockingCall(self, call)
        status = pending.wait(timeout)
        if status is not None:
            with self._calls_lock:
                if self._calls.get(name) is pending:
                    del self._calls[name]
        return status

    def connect(self, timeout: float | None = None) -> None:
        """Connect to the target process (idempotent).

        Waits until the target serves its statistics (it may not have
        loaded hipFile yet) or exits, as AMD's library does. The wait can be
        interrupted (Ctrl-C) or time out; the connection attempt goes on and
        the next call waits for the same attempt.

        Parameters
        ----------
        timeout
            Seconds to wait at most, or None for no limit.

        Raises
        ------
        ValueError
            The context is closed, or ``timeout`` is negative.
        TimeoutError
            The target neither served statistics nor exited in time.
        StatsTargetNotAccessibleError
            The target exited without serving statistics this library can
            read.

        See Also
        --------
        hipFileStatsConnectToTargetProcess
        """
        timeout = as_timeout(timeout)
        if self._connected:
            self._enter()  # a closed context still refuses
            self._leave()
            return
        status = self._blocking("connect", _hipfile.stats_connect_to_target_process, timeout)
        if status is None:
            raise TimeoutError(f"pid {self._pid} served no statistics within {timeout} s "
                               "(the connection attempt goes on; connect() again waits for it)")
        _check(status, "hipFileStatsConnectToTargetProcess", f"pid {self._pid}")
        self._connected = True

    def poll(self, block: bool = False, timeout: float | None = None) -> bool:
        """Whether the target process has exited; ``block`` waits for it.

        Parameters
        ----------
        block
            Wait until the target exits (interruptible with Ctrl-C; the
            next blocking call waits for the same library call).
        timeout
            With ``block``: seconds to wait at most, or None for no limit.

        Returns
        -------
        bool
            True once the target has exited, False while it runs (or when
            a blocking wait timed out).

        Raises
        ------
        ValueError
            The context is closed, or ``timeout`` is negative.
        StatsError
            The library failed otherwise.

        See Also
        --------
        hipFileStatsPollTargetProcess
        """
        timeout = as_timeout(timeout)
        if block:
            status = self._blocking(
                "wait", lambda ctx: _hipfile.stats_poll_target_process(ctx, True), timeout)
            if status is None:
                return False
        else:
            ctx = self._enter()
            try:
                status = _hipfile.stats_poll_target_process(ctx, False)
            finally:
                self._leave()
            if status == StatsStatus.TARGET_PROCESS_NOT_ACCESSIBLE:
                return False  # still running: the libraries answer so
        _check(status, "hipFileStatsPollTargetProcess", f"pid {self._pid}")
        return True

    def wait(self, timeout: float | None = None) -> None:
        """Block until the target process exits (``poll(block=True)``).

        Raises
        ------
        TimeoutError
            The target still runs after ``timeout`` seconds.
        ValueError, StatsError
            As :meth:`poll`.
        """
        if not self.poll(block=True, timeout=timeout):
            raise TimeoutError(f"pid {self._pid} still runs after {timeout} s")

    def report_text(self) -> str:
        """The statistics report, as the library writes it.

        Raises
        ------
        ValueError
            The context is closed.
        StatsReportError
            Not connected, or the library could not write the report.

        See Also
        --------
        hipFileStatsGenerateReport
        """
        ctx = self._enter()
        try:
            with _scratch_file() as f:
                status = _hipfile.stats_generate_report(ctx, f.fileno())
                f.seek(0)
                data = f.read()
        finally:
            self._leave()
        detail = "" if self._connected else "not connected: call connect() first"
        _check(status, "hipFileStatsGenerateReport", detail)
        return bytes(data).decode(errors="replace")

    def report(self) -> StatsReport:
        """The statistics report, parsed (:class:`StatsReport`).

        Raises
        ------
        ValueError
            The context is closed, or the text is not a report.
        StatsReportError
            As :meth:`report_text`.
        """
        return StatsReport.parse(self.report_text())

    def close(self) -> None:
        """Release the context (idempotent; waits for no call: the context is
        freed when the last call using it returns, including a connection
        attempt or a wait left running by a timeout or Ctrl-C, which returns
        when the target serves statistics or exits).

        See Also
        --------
        hipFileStatsCloseContext
        """
        with self._lock:
            if self._ctx == 0 or self._closing:
                return
            self._closing = True
            release = self._users == 0
            ctx = self._ctx
            if release:
                self._ctx = 0
        if release:
            _hipfile.stats_close_context(ctx)

    def __enter__(self) -> StatsContext:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _collected(self) -> None:
        if getattr(self, "_ctx", 0) == 0 or getattr(self, "_closing", True):
            return
        self.close()
        warnings.warn(f"{self!r} was not closed", ResourceWarning, stacklevel=1)

    __del__ = guarded_del(_collected)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "connected" if self._connected else "open"
        return f"<hipfile.StatsContext pid={self._pid} {state}>"


def report(pid: int, timeout: float | None = None) -> str:
    """The statistics report of process ``pid``, as the library writes it.

    Connects to the target (waiting, as :meth:`StatsContext.connect` does,
    until it serves its statistics or exits), reads the report and closes
    the context. This is what ``hipfile stats PID`` prints.

    Parameters
    ----------
    pid
        The target process.
    timeout
        Seconds to wait for the connection at most, or None for no limit.

    Returns
    -------
    str
        The report text (:meth:`StatsReport.parse` reads it).

    Raises
    ------
    TypeError, StatsInvalidArgumentError, StatsTargetNotFoundError
        As :class:`StatsContext`.
    StatsTargetNotAccessibleError, HipFileSymbolNotFound
        As :class:`StatsContext` (when connecting).
    TimeoutError
        Not connected within ``timeout``.
    StatsReportError
        The library could not write the report.

    See Also
    --------
    StatsContext.report_text, hipFileStatsGenerateReport
    """
    with StatsContext(pid, timeout=timeout) as stats:
        return stats.report_text()


def _scratch_file() -> Any:
    """An anonymous file for the report (a pipe could fill up and block)."""
    try:
        fd = os.memfd_create("hipfile-stats-report", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        return tempfile.TemporaryFile()
    return os.fdopen(fd, "w+b")
