"""``FileHandle.close(wait=True, timeout=...)`` and ``Driver.close(wait=True,
timeout=...)``: the ``Executor.shutdown(wait=True)`` of a file and of the
driver. From the call on, new submissions are refused (ClosedFileError, "the
file is closing"); what was in flight completes normally; then the close. A
timeout or Ctrl-C closes nothing and the file accepts work again. ``close()``
alone never waits and its InFlightError names the way to wait.

Operations are held in flight deterministically by a stream waiting on a
host flag (``hipStreamWaitValue32``), so these tests also run over AMD's
library; those that delay completions with the emulated platform's hook are
marked ``emulated``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _platform import PLATFORM
from _util import (
    device_array,
    emu,
    from_device,
    gated_stream,
    hip_stream,
    random_file,
    to_device,
)

import hipfile
from hipfile import (
    BatchIO,
    ClosedFileError,
    FileHandle,
    HandleNotRegisteredError,
    InFlightError,
    InFlightTimeoutError,
)

N = 1 << 14
#: Generous bound for every wait: nothing here should take more than a few
#: seconds, even on a loaded machine.
LONG = 60.0


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

# cuFile 1.15's compatibility mode (the cuda platform) completed some of
# these read_async calls with hipErrorInvalidPitchValue (12): reads on
# several threads' own streams, and one queued behind a stream held by a
# stream wait (H200, 2026-12-04, two suites in a row); AMD's hipFile and the
# emulated platform complete them.
_CUFILE_ASYNC = pytest.mark.cufile_differs(
    "cuFile 1.15's compatibility mode fails some read_async calls of this shape with "
    "hipErrorInvalidPitchValue (12) (docs/platform-cuda.md)")
ASYNC = pytest.param("async", marks=_CUFILE_ASYNC)


def wait_until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LONG
    while not cond():
        assert time.monotonic() < deadline, f"not {what} after {LONG} s"
        time.sleep(0.002)


class InThread(threading.Thread):
    """Runs ``fn`` once; keeps its result or exception."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:  # kept for the test to look at
            self.error = exc

    def finish(self) -> Any:
        self.join(LONG)
        assert not self.is_alive(), "the thread did not end"
        if self.error is not None:
            raise self.error
        return self.result


def emulated_delay(us: int) -> None:
    """Delay completions where the platform can (the emulated one)."""
    if PLATFORM == "emulated":
        emu().set_completion_delay(us)


def assert_nothing_left() -> None:
    if PLATFORM == "emulated":
        left = emu().counters()
        assert left["handles"] == 0 and left["inflight"] == 0, left


def entry_points(fh: FileHandle, dev: Any, s: Any, batch: BatchIO
                 ) -> dict[str, Callable[[], object]]:
    """One submission through every entry point that names ``fh`` (bytes
    [N, 2N) of ``dev``, file bytes [0, N))."""
    ranges = [(N // 2, 0, N), (N // 2, N // 2, N + N // 2)]
    return {
        "read": lambda: fh.read(dev, N, 0, N),
        "write": lambda: fh.write(dev, N, 0, N),
        "read host buffer": lambda: fh.read(bytearray(N)),
        "read task_size": lambda: fh.read(dev, N, 0, N, task_size=N // 4),
        "pread": lambda: fh.pread(dev, N, 0, buffer_offset=N),
        "pwrite": lambda: fh.pwrite(dev, N, 0, buffer_offset=N),
        "parallel.pread": lambda: hipfile.pread(fh, dev, N, 0, buffer_offset=N),
        "read_async": lambda: fh.read_async(dev, N, 0, N, s),
        "write_async": lambda: fh.write_async(dev, N, 0, N, s),
        "pread_async": lambda: fh.pread_async(dev, N, 0, N, s),
        "pwrite_async": lambda: fh.pwrite_async(dev, N, 0, N, s),
        "pread_async_ranges": lambda: fh.pread_async_ranges(dev, ranges, s),
        "pwrite_async_ranges": lambda: fh.pwrite_async_ranges(dev, ranges, s),
        "pread_async_scatter": lambda: fh.pread_async_scatter(dev, ranges, s),
        "pwrite_async_gather": lambda: fh.pwrite_async_gather(dev, ranges, s),
        "pread_async_addresses": lambda: hipfile.pread_async_addresses(
            [fh], [(0, 0, int(dev) + N, N)], s),
        "pwrite_async_addresses": lambda: hipfile.pwrite_async_addresses(
            [fh], [(0, 0, int(dev) + N, N)], s),
        "BatchIO.read": lambda: batch.read(fh, dev, N, 0, N),
        "batch_read": lambda: hipfile.batch_read(fh, dev, [(N, 0, N)], timeout=LONG),
    }


@pytest.fixture
def rw_file(tmp_path: Path) -> tuple[Path, np.ndarray]:
    path = tmp_path / "data.bin"
    return path, random_file(path, 2 * N, seed=5)


# --------------------------------------------------------------------------
# one close, every entry point
# --------------------------------------------------------------------------

def test_closing_file_refuses_every_entry_point_and_drains(driver, rw_file):
    """While close(wait=True) waits for an operation held in flight, every
    entry point refuses with ClosedFileError "closing" (a batch entry added
    before the close is refused at submit); the operation then completes
    with its bytes, the file closes, and the entry points say "closed"."""
    path, data = rw_file
    with device_array(2 * N) as dev, gated_stream() as (gated, release), \
            hip_stream() as s, BatchIO(4) as batch:
        fh = FileHandle(path, "r+").open()
        batch.read(fh, dev, N, 0, N)                       # queued before the close
        blocker = fh.read_async(dev, N, 0, 0, gated)      # in flight until release()
        closer = InThread(lambda: fh.close(wait=True, timeout=LONG))
        wait_until(lambda: fh._is_closing, "closing")
        for name, call in entry_points(fh, dev, s, batch).items():
            with pytest.raises(ClosedFileError, match="the file is closing"):
                call()
                pytest.fail(f"{name} was accepted while the file was closing")
        with pytest.raises(ClosedFileError, match="the file is closing"):
            batch.submit()
        assert batch.clear() == 1
        assert closer.is_alive() and not fh.closed          # still waiting for blocker
        release()
        closer.finish()
        assert fh.closed
        assert blocker.wait(LONG) == N                      # completed normally
        assert np.array_equal(from_device(dev, N), data[:N])
        for call in entry_points(fh, dev, s, batch).values():
            with pytest.raises(ClosedFileError, match="closed"):
                call()
    assert_nothing_left()


def test_close_wait_timeout_leaves_the_file_open_and_accepting(driver, rw_file):
    path, data = rw_file
    with device_array(2 * N) as dev, gated_stream() as (gated, release), hip_stream() as s:
        fh = FileHandle(path).open()
        blocker = fh.read_async(dev, N, 0, 0, gated)
        with pytest.raises(InFlightTimeoutError, match="nothing was closed") as info:
            fh.close(wait=True, timeout=0.2)
        assert isinstance(info.value, TimeoutError) and isinstance(info.value, InFlightError)
        assert not fh.closed and not fh._is_closing
        # submissions accepted again, made on a thread of their own: AMD's
        # library runs them behind the gated one, and its submit call may
        # itself wait for the gated read (seen as a hang, about 1 run in 15,
        # when they were made here before the release)
        again: list[Any] = []

        def submit() -> None:
            again.extend([fh.read_async(dev, N, N, N, s), fh.pread_async(dev, N, N, N, s)])

        t = threading.Thread(target=submit)
        t.start()
        t.join(0.2)
        assert not blocker.done()
        release()
        t.join(LONG)
        assert not t.is_alive()
        assert [h.wait(LONG) for h in again] == [N, N]
        fh.close(wait=True, timeout=LONG)
        assert fh.closed
        assert blocker.wait(LONG) == N
        assert np.array_equal(from_device(dev, N), data[:N])
        assert np.array_equal(from_device(dev, N, N), data[N:])
    assert_nothing_left()


def test_close_wait_interrupted_closes_nothing_and_loses_nothing(driver, rw_file):
    """Ctrl-C (a real SIGINT, handled by the main thread) during the wait:
    KeyboardInterrupt, the file still open and accepting, the operation in
    flight completes later with its bytes."""
    path, data = rw_file
    with device_array(2 * N) as dev, gated_stream() as (gated, release):
        fh = FileHandle(path).open()
        blocker = fh.read_async(dev, N, 0, 0, gated)

        def interrupt() -> None:
            wait_until(lambda: fh._is_closing, "closing")
            signal.raise_signal(signal.SIGINT)

        sender = InThread(interrupt)
        with pytest.raises(KeyboardInterrupt):
            fh.close(wait=True)
            pytest.fail("close(wait=True) returned with the operation held in flight")
        sender.finish()
        assert not fh.closed and not fh._is_closing
        again = fh.read_async(dev, N, N, N, 0)           # accepted again
        release()
        assert blocker.wait(LONG) == N
        assert again.wait(LONG) == N
        assert np.array_equal(from_device(dev, N), data[:N])
        fh.close(wait=True, timeout=LONG)
        assert fh.closed
    assert_nothing_left()


def test_one_close_giving_up_does_not_reopen_under_another(driver, rw_file):
    """Two close(wait=True) at once: the one whose timeout passes raises,
    and the file stays closing for the other, which then closes it."""
    path, _ = rw_file
    with device_array(N) as dev, gated_stream() as (gated, release):
        fh = FileHandle(path).open()
        blocker = fh.read_async(dev, N, 0, 0, gated)
        patient = InThread(lambda: fh.close(wait=True, timeout=LONG))
        wait_until(lambda: fh._is_closing, "closing")
        with pytest.raises(InFlightTimeoutError):
            fh.close(wait=True, timeout=0.1)
        assert fh._is_closing
        with pytest.raises(ClosedFileError, match="the file is closing"):
            fh.read(dev, N, 0, 0)
        release()
        patient.finish()
        assert fh.closed
        assert blocker.wait(LONG) == N


@_CUFILE_ASYNC
def test_with_block_exit_refuses_new_work_and_drains(driver, rw_file):
    """Leaving a ``with`` block, in another thread, while an operation is
    held in flight: the file is closing (submissions refused) until it
    completes, then closed."""
    path, data = rw_file
    with device_array(2 * N) as dev, gated_stream() as (gated, release):
        fh = FileHandle(path)
        handles: list[Any] = []

        def block() -> None:
            with fh:
                handles.append(fh.read_async(dev, N, 0, 0, gated))

        leaving = InThread(block)
        wait_until(lambda: fh._is_closing, "closing")
        with pytest.raises(ClosedFileError, match="the file is closing"):
            fh.read(dev, N, 0, N)
        with pytest.raises(ClosedFileError, match="the file is closing"):
            fh.pread_async(dev, N, 0, N, 0)
        assert not fh.closed
        release()
        leaving.finish()
        assert fh.closed
        assert handles[0].wait(LONG) == N
        assert np.array_equal(from_device(dev, N), data[:N])
    assert_nothing_left()


# --------------------------------------------------------------------------
# many submitting threads, each I/O family
# --------------------------------------------------------------------------

THREADS = 8
CHUNK = 4096


def _op(family: str, fh: FileHandle, dev: Any, s: Any, i: int) -> int:
    """One read (even ``i``) or write (odd ``i``, of the bytes the file
    holds) of chunk ``i`` between the file and the same bytes of ``dev``;
    returns the bytes moved."""
    off = i * CHUNK
    write = i % 2 == 1
    if family == "sync":
        return fh.write(dev, CHUNK, off, off) if write else fh.read(dev, CHUNK, off, off)
    if family == "parallel":
        f = (fh.pwrite if write else fh.pread)(dev, CHUNK, off, buffer_offset=off,
                                               task_size=CHUNK // 4)
        return f.result(LONG)
    if family == "async":
        h = (fh.write_async if write else fh.read_async)(dev, CHUNK, off, off, s)
        return int(h.wait(LONG))
    if family == "engine":
        e = (fh.pwrite_async if write else fh.pread_async)(dev, CHUNK, off, off, s)
        return int(e.wait(LONG))
    assert family == "batch"
    run = hipfile.batch_write if write else hipfile.batch_read
    (moved,) = run(fh, dev, [(CHUNK, off, off)], timeout=LONG)
    return int(moved)


class Submitter(threading.Thread):
    """Submits chunk ``i`` in a loop until the file refuses; records every
    count and how it ended."""

    def __init__(self, family: str, fh: FileHandle, dev: Any, s: Any, i: int) -> None:
        super().__init__(daemon=True)
        self.args = (family, fh, dev, s, i)
        self.first = threading.Event()
        self.counts: list[int] = []
        self.end: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            while True:
                self.counts.append(_op(*self.args))
                self.first.set()
        except BaseException as exc:  # kept for the test to look at
            self.end = exc
            self.first.set()



FAMILIES = [
    "sync",
    "parallel",
    ASYNC,
    "engine",
    pytest.param("batch", marks=pytest.mark.needs("hipFileBatchIOGetStatus")),
]


def _start_submitters(family: str, fh: FileHandle, dev: Any, streams: list[Any]
                      ) -> list[Submitter]:
    subs = [Submitter(family, fh, dev, streams[i], i) for i in range(THREADS)]
    for t in subs:
        assert t.first.wait(LONG)
    return subs


def _check_submitters(subs: list[Submitter], accepted: tuple[type[BaseException], ...]
                      ) -> None:
    for t in subs:
        t.join(LONG)
        assert not t.is_alive()
        assert isinstance(t.end, accepted), f"thread ended with {t.end!r}"
        assert t.counts, f"thread failed at once: {t.end!r}"
        assert all(c == CHUNK for c in t.counts), t.counts


def _check_bytes(dev: Any, path: Path, data: np.ndarray) -> None:
    for i in range(0, THREADS, 2):       # the readers' chunks in device memory
        off = i * CHUNK
        assert np.array_equal(from_device(dev, CHUNK, off), data[off:off + CHUNK])
    assert np.array_equal(np.fromfile(path, dtype=np.uint8), data)   # and the writers'



@pytest.fixture
def threads_file(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """The bytes the threads end with: the file holds zeros in the writers'
    chunks until they write them (see :func:`_device_start`)."""
    path = tmp_path / "threads.bin"
    data = random_file(path, THREADS * CHUNK, seed=9)
    start = data.copy()
    for i in range(1, THREADS, 2):
        start[i * CHUNK:(i + 1) * CHUNK] = 0
    start.tofile(path)
    return path, data


def _device_start(dev: Any, data: np.ndarray) -> None:
    """Device memory holds the writers' chunks and zeros in the readers'
    (so a read or a write that moved nothing shows in the bytes)."""
    start = data.copy()
    for i in range(0, THREADS, 2):
        start[i * CHUNK:(i + 1) * CHUNK] = 0
    to_device(dev, start)


@contextlib.contextmanager
def streams(n: int) -> Iterator[list[Any]]:
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(hip_stream()) for _ in range(n)]


@pytest.mark.parametrize("family", FAMILIES)
def test_close_wait_while_threads_submit(driver, threads_file, family):
    """The issue's case for every I/O family: threads submit in a loop while
    the main thread calls close(wait=True, timeout=...). The close succeeds;
    every operation accepted moved its bytes; every thread ends with
    ClosedFileError (never InFlightError or a stale registration)."""
    path, data = threads_file
    emulated_delay(20_000)
    with device_array(THREADS * CHUNK) as dev, streams(THREADS) as ss:
        _device_start(dev, data)
        fh = FileHandle(path, "r+").open()
        subs = _start_submitters(family, fh, dev, ss)
        fh.close(wait=True, timeout=LONG)
        assert fh.closed
        _check_submitters(subs, (ClosedFileError,))
        for t in subs:
            assert "clos" in str(t.end)
        _check_bytes(dev, path, data)
    assert_nothing_left()


@pytest.mark.parametrize("family", ["sync", ASYNC, "engine"])
def test_with_block_exit_while_threads_submit(driver, threads_file, family):
    path, data = threads_file
    emulated_delay(20_000)
    with device_array(THREADS * CHUNK) as dev, streams(THREADS) as ss:
        _device_start(dev, data)
        with FileHandle(path, "r+") as fh:
            subs = _start_submitters(family, fh, dev, ss)
        assert fh.closed
        _check_submitters(subs, (ClosedFileError,))
        _check_bytes(dev, path, data)
    assert_nothing_left()


# --------------------------------------------------------------------------
# Driver.close(wait=True)
# --------------------------------------------------------------------------

@contextlib.contextmanager
def only_driver() -> Iterator[hipfile.Driver]:
    """A Driver that holds the process's only reference (no ``driver``
    fixture), so that its close drops the registrations."""
    hipfile.release_process_driver()
    drv = hipfile.Driver().open()
    try:
        if hipfile.use_count() != 1:
            pytest.skip(f"the driver has {hipfile.use_count()} references here")
        yield drv
    finally:
        drv.close()


def test_driver_close_wait_refuses_every_file_and_drains(rw_file, tmp_path):
    path, data = rw_file
    other = tmp_path / "other.bin"
    random_file(other, N, seed=3)
    with only_driver() as drv, device_array(2 * N) as dev, \
            gated_stream() as (gated, release), hip_stream() as s:
        fh = FileHandle(path).open()
        fh2 = FileHandle(other).open()
        blocker = fh.read_async(dev, N, 0, 0, gated)
        closer = InThread(lambda: drv.close(wait=True, timeout=LONG))

        accepted: list[Any] = []     # before the close began: waited for by it

        def refused() -> bool:
            try:
                accepted.append(fh2.read_async(dev, N, 0, N, s))
            except ClosedFileError as exc:
                assert "the driver is closing" in str(exc)
                return True
            return False

        wait_until(refused, "refused")
        with pytest.raises(ClosedFileError, match="the driver is closing"):
            fh.read_async(dev, N, 0, N, s)
        with pytest.raises(ClosedFileError, match="the driver is closing"):
            fh2.pread_async(dev, N, 0, N, s)
        assert closer.is_alive() and drv.is_open
        release()
        closer.finish()
        assert not drv.is_open
        assert blocker.wait(LONG) == N
        assert all(h.wait(LONG) == N for h in accepted)
        assert np.array_equal(from_device(dev, N), data[:N])
        with pytest.raises(HandleNotRegisteredError):   # dropped with the driver
            fh.read(dev, N, 0, N)
        fh.close()
        fh2.close()
    assert_nothing_left()


def test_driver_close_wait_timeout_changes_nothing(rw_file):
    path, data = rw_file
    with only_driver() as drv, device_array(2 * N) as dev, \
            gated_stream() as (gated, release):
        fh = FileHandle(path).open()
        blocker = fh.read_async(dev, N, 0, 0, gated)
        with pytest.raises(InFlightTimeoutError, match="cannot close the driver"):
            drv.close(wait=True, timeout=0.2)
        assert drv.is_open
        again = fh.read_async(dev, N, N, N, 0)    # files accept work again
        release()
        assert blocker.wait(LONG) == N
        assert again.wait(LONG) == N
        assert np.array_equal(from_device(dev, N), data[:N])
        fh.close()
        drv.close(wait=True, timeout=LONG)
        assert not drv.is_open


def test_driver_close_wait_arguments(driver):
    with pytest.raises(TypeError, match="wait=True"):
        driver.close(timeout=1.0)
    with pytest.raises(TypeError):
        driver.close(wait=1)                      # type: ignore[arg-type]
    with pytest.raises(ValueError):
        driver.close(wait=True, timeout=-1)
    assert driver.is_open


@pytest.mark.parametrize("family", ["sync", "async", "engine"])
def test_driver_with_block_exit_while_threads_submit(threads_file, family):
    """Leaving the last Driver's with block while threads submit on a file:
    the exit waits for what is in flight (refusing new work meanwhile), and
    operations accepted complete with their bytes; threads end refused
    (closing, or the registration dropped once the driver closed, or, on
    the engine's staged path, which needs no registration, the file's
    close)."""
    path, data = threads_file
    hipfile.release_process_driver()
    if hipfile.use_count() != 0:
        pytest.skip(f"the driver has {hipfile.use_count()} references here")
    emulated_delay(20_000)
    with device_array(THREADS * CHUNK) as dev, streams(THREADS) as ss:
        _device_start(dev, data)
        with hipfile.Driver():
            fh = FileHandle(path, "r+").open()
            subs = _start_submitters(family, fh, dev, ss)
        # the staged engine path needs no registration, and goes on after
        # the driver closed: closing the file ends it
        fh.close(wait=True, timeout=LONG)
        _check_submitters(subs, (ClosedFileError, HandleNotRegisteredError))
        _check_bytes(dev, path, data)
    assert_nothing_left()


# --------------------------------------------------------------------------
# earlier contract
# --------------------------------------------------------------------------

@pytest.mark.emulated
def test_close_wait_waits_for_dropped_operations(driver, data_file):
    path, data = data_file
    emu().set_completion_delay(150_000)
    with device_array(2 * N) as dev, hip_stream() as s:
        fh = FileHandle(path).open()
        fh.read_async(dev, N, 0, 0, s)            # dropped at once: parked
        fh.pread_async(dev, N, 0, N, s)           # a stream-engine range, dropped too
        with pytest.raises(InFlightError, match=r"close\(wait=True\)"):
            fh.close()
        assert not fh.closed
        with pytest.raises(InFlightError):        # the timeout passes first
            fh.close(wait=True, timeout=0.001)
        assert not fh.closed                      # nothing changed
        fh.close(wait=True)
        assert fh.closed
        assert np.array_equal(from_device(dev, N), data[:N])
        assert np.array_equal(from_device(dev, N, N), data[:N])
        fh.close(wait=True)                       # idempotent


def test_close_wait_with_nothing_in_flight_and_bad_arguments(driver, data_file):
    path, _ = data_file
    fh = FileHandle(path).open()
    with pytest.raises(TypeError, match="wait=True"):
        fh.close(timeout=1.0)                     # a timeout means nothing without wait
    with pytest.raises(TypeError):
        fh.close(wait=1)                          # type: ignore[arg-type]
    with pytest.raises(ValueError):
        fh.close(wait=True, timeout=-1)
    assert not fh.closed
    fh.close(wait=True, timeout=0)
    assert fh.closed


def test_deadline_counts_down_as_every_wait_does() -> None:
    """The package's waits count down with one Deadline: no end for None
    or infinity, left() capped and never negative, passed() once the end
    has come, and the timeout rule of every wait for bad values."""
    from hipfile._interop import Deadline

    none = Deadline(None)
    assert none.unlimited and not none.passed()
    assert none.left() is None and none.left(0.05) == 0.05
    assert Deadline(float("inf")).unlimited
    short = Deadline(0.02)
    assert not short.unlimited and 0 < short.left() <= 0.02
    assert short.left(0.001) == 0.001
    time.sleep(0.03)
    assert short.passed() and short.left() == 0.0 and short.left(0.05) == 0.0
    assert Deadline(0).passed()
    for bad, exc in ((True, TypeError), ("1", TypeError), (-1, ValueError),
                     (float("nan"), ValueError)):
        with pytest.raises(exc):
            Deadline(bad)
