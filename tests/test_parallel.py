"""Parallel pread/pwrite with futures, and the default thread pool."""

from __future__ import annotations

import concurrent.futures
import errno
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from _util import (
    check,
    check_range_errors,
    device_array,
    direct_io_supported,
    emu,
    from_device,
    random_bytes,
    random_file,
    to_device,
)
from hip import hip

import hipfile
from hipfile import Buffer, FileHandle, IOFuture, parallel
from hipfile._lib import _hipfile

N = 1 << 18


@pytest.fixture(autouse=True)
def _no_idle_pool() -> Iterator[None]:
    """Leave no pool threads behind for later tests (forking tests among them)."""
    yield
    parallel.shutdown()


class CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    """A pool that counts the tasks given to it."""

    def __init__(self, workers: int = 2) -> None:
        super().__init__(max_workers=workers)
        self.submitted = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


@pytest.fixture
def blocked() -> Iterator[tuple[CountingExecutor, threading.Event]]:
    """A one-thread pool whose thread waits on an event: tasks stay queued."""
    gate = threading.Event()
    pool = CountingExecutor(1)
    pool.submit(gate.wait, 30)
    try:
        yield pool, gate
    finally:
        gate.set()
        pool.shutdown(wait=True)


# -- round trips ----------------------------------------------------------------


@pytest.mark.parametrize("task_size", [4096, 10_000, 65_536, N, 4 * N])
def test_pwrite_then_pread_round_trip(driver, tmp_path, task_size):
    data = random_bytes(N, seed=task_size)
    path = tmp_path / "out.bin"
    with device_array(N) as src, device_array(N) as dst, \
            FileHandle(path, os.O_RDWR | os.O_CREAT) as fh:
        to_device(src, data)
        pool = CountingExecutor(3)
        try:
            wfut = hipfile.pwrite(fh, src, task_size=task_size, executor=pool)
            assert isinstance(wfut, IOFuture)
            assert wfut.result(timeout=30) == N
            assert wfut.done() and not wfut.cancelled() and wfut.exception() is None
            rfut = hipfile.pread(fh, dst, task_size=task_size, executor=pool)
            assert rfut.result(timeout=30) == N
            assert pool.submitted == 2 * -(-N // task_size)
        finally:
            pool.shutdown()
        assert rfut.nbytes == N
        assert "result=" in repr(rfut)
    assert path.read_bytes() == data.tobytes()
    with device_array(N) as dev, FileHandle(path) as fh:
        fh.pread(dev, task_size=task_size).result(timeout=30)
        assert np.array_equal(from_device(dev, N), data)


def test_offsets_with_the_default_pool(driver, data_file):
    path, data = data_file
    with device_array(N) as dev, FileHandle(path, os.O_RDWR) as fh:
        # 100_000 bytes of the file from 1234 into the buffer at 777
        fut = fh.pread(dev, np.int64(100_000), np.int64(1234), buffer_offset=777,
                       task_size=8192)
        assert fut.result(timeout=30) == 100_000
        got = from_device(dev, 100_000, 777)
        assert np.array_equal(got, data[1234:101_234])
        # write them back elsewhere in the file
        assert fh.pwrite(dev, 100_000, 150_000, buffer_offset=777,
                         task_size=30_000).result(30) == 100_000
    on_disk = np.frombuffer(path.read_bytes(), dtype=np.uint8)
    assert np.array_equal(on_disk[150_000:250_000], data[1234:101_234])
    assert np.array_equal(on_disk[:150_000], data[:150_000])


def test_many_requests_from_several_threads(driver, data_file):
    path, data = data_file
    parts = 8
    part = N // parts
    with device_array(N) as dev, FileHandle(path) as fh:
        futures: list[IOFuture] = []
        lock = threading.Lock()

        def start(i: int) -> None:
            f = fh.pread(dev, part, i * part, buffer_offset=i * part, task_size=4096)
            with lock:
                futures.append(f)

        threads = [threading.Thread(target=start, args=(i,)) for i in range(parts)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(f.result(timeout=30) for f in futures) == N
        assert np.array_equal(from_device(dev, N), data)


def test_registered_buffer(driver, data_file):
    path, data = data_file
    with device_array(N) as dev, FileHandle(path) as fh, Buffer(dev) as buf:
        assert hipfile.pread(fh, buf, task_size=1 << 16).result(timeout=30) == N
        assert np.array_equal(from_device(dev, N), data)


@pytest.mark.parametrize("write", [False, True])
def test_buffer_offset_by_position_is_deprecated(driver, tmp_path, write):
    """hipfile.pread/pwrite take buffer_offset by keyword, as FileHandle's
    do; the fifth positional argument still means it, with a warning."""
    path = tmp_path / "data.bin"
    data = random_file(path, N, seed=9)
    if write:
        path.write_bytes(bytes(N))      # a write that moves nothing is seen
    call = hipfile.pwrite if write else hipfile.pread
    with device_array(N) as dev, FileHandle(path, "r+") as fh:
        to_device(dev, np.zeros(N, np.uint8))
        if write:
            to_device(dev, data[:100], offset=8)
        with pytest.warns(DeprecationWarning, match="buffer_offset by keyword"):
            fut = call(fh, dev, 100, 0, 8)
        assert fut.result(30) == 100
        if write:
            assert path.read_bytes()[:100] == data[:100].tobytes()
        else:
            assert np.array_equal(from_device(dev, 108)[8:], data[:100])
        # by keyword: no warning (the suite turns warnings into errors)
        assert call(fh, dev, 100, 0, buffer_offset=8).result(30) == 100
        with pytest.raises(TypeError, match="at most 5 positional"):
            call(fh, dev, 100, 0, 8, 9)
        with pytest.raises(TypeError, match="both by position and by keyword"):
            call(fh, dev, 100, 0, 8, buffer_offset=8)


def test_short_read_at_end_of_file(driver, tmp_path):
    path = tmp_path / "short.bin"
    data = random_file(path, N - 1000, seed=5)
    with device_array(N) as dev, FileHandle(path) as fh:
        fut = hipfile.pread(fh, dev, task_size=4096)
        assert fut.result(timeout=30) == N - 1000
        assert np.array_equal(from_device(dev, N - 1000), data)
        # wholly past the end: nothing read
        assert hipfile.pread(fh, dev, 5000, N + 10, task_size=1024).result(30) == 0


def test_zero_size_completes_at_once(driver, data_file):
    path, _ = data_file
    with device_array(N) as dev, FileHandle(path) as fh:
        fut = hipfile.pread(fh, dev, 0)
        assert fut.done() and fut.result() == 0
        seen = []
        fut.add_done_callback(seen.append)
        assert seen == [fut]
        fh.close()


def assert_held(fut: IOFuture, fh: FileHandle, buf: Buffer) -> None:
    """While ``fut`` runs, its file and registered buffer refuse to close
    and a short wait times out."""
    with pytest.raises(hipfile.InFlightError):
        fh.close()
    with pytest.raises(hipfile.InFlightError):
        buf.deregister()
    with pytest.raises(TimeoutError):
        fut.result(timeout=0.01)


class Route:
    """Where a pread/pwrite of device memory runs: ``"pool"`` (an executor
    given: tasks of hipFile calls on it), or on the engine's threads by each
    of its data paths (``"staged"``, ``"hipfile"``); with a fault injector
    for the file calls of that route."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.pool = CountingExecutor(2) if name == "pool" else None

    @property
    def kwargs(self) -> dict[str, Any]:
        return {"executor": self.pool} if self.pool is not None else {}

    def inject(self, err: int = 0, *, count: int = 1, after: int = 0, short: int = 0,
               write: bool = False) -> None:
        if self.name == "staged":
            _hipfile.engine_inject_faults(err, count if err else 0, short, after)
            return
        if err:
            emu().inject_fault("write" if write else "read", err, count=count, after=after)
        if short:
            emu().set_short_transfer(short)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
        _hipfile.engine_inject_faults()
        emu().set_short_transfer(None)


@pytest.fixture(params=["pool", "staged", "hipfile"])
def route(request: pytest.FixtureRequest) -> Iterator[Route]:
    if hipfile.platforms.active() != "emulated":
        pytest.skip("faults are injected on the emulated platform")
    if request.param == "staged" and hipfile.engine.mechanism() != "stream-memory-operations":
        pytest.skip("the staged path needs stream waits")
    r = Route(request.param)
    with hipfile.defaults.set("engine_data_path", "hipfile" if r.name == "hipfile" else "auto"):
        try:
            yield r
        finally:
            r.close()


def test_short_transfers_are_looped(driver, data_file, route):
    path, data = data_file
    route.inject(short=1000)
    with device_array(N) as dev, FileHandle(path) as fh:
        assert hipfile.pread(fh, dev, task_size=50_000, **route.kwargs).result(30) == N
        assert np.array_equal(from_device(dev, N), data)


# -- errors ---------------------------------------------------------------------


def test_error_in_one_task_propagates(driver, data_file, route):
    path, _ = data_file
    route.inject(errno.EIO, count=1, after=3)
    with device_array(N) as dev, FileHandle(path) as fh:
        fut = hipfile.pread(fh, dev, task_size=4096, **route.kwargs)
        with pytest.raises(OSError) as info:
            fut.result(timeout=30)
        assert info.value.errno == errno.EIO
        assert isinstance(fut.exception(), OSError)
        assert "raised OSError" in repr(fut)
        fh.close()  # released although a task failed


def test_error_in_a_write_task(driver, tmp_path, route):
    """A failing write call fails the future: a hipFile error as its
    exception where hipFile moves the bytes, the system error on the
    staged path."""
    path = tmp_path / "w.bin"
    err = errno.ENOSPC if route.name == "staged" else int(hipfile.OpError.INTERNAL_ERROR)
    route.inject(err, count=1, write=True)
    with device_array(N) as dev, FileHandle(path, os.O_RDWR | os.O_CREAT) as fh:
        fut = fh.pwrite(dev, task_size=1 << 16, **route.kwargs)
        expected = OSError if route.name == "staged" else hipfile.InternalError
        with pytest.raises(expected) as info:
            fut.result(timeout=30)
        if route.name == "staged":     # the staging ring's own call is named
            assert info.value.errno == errno.ENOSPC and "(pwrite)" in str(info.value)
    assert fh.closed


# -- device memory on the engine --------------------------------------------------


def test_device_memory_moves_on_the_engine(driver, data_file, tmp_path):
    """pread/pwrite of device memory on the default pool, in more than one
    task, run on the engine's threads (one runtime): no thread of the
    module's pool starts, and the bytes are the file's, offsets and end of
    file included."""
    path, data = data_file
    parallel.shutdown()
    with device_array(N) as dev, FileHandle(path) as fh:
        check(hip.hipMemset(dev, 0, N))
        fut = fh.pread(dev, 100_000, 1234, buffer_offset=777, task_size=16384)
        assert isinstance(fut, IOFuture)
        assert fut.result(timeout=30) == 100_000
        assert fut.done() and not fut.running() and fut.exception() is None
        assert "result=100000" in repr(fut)
        host = from_device(dev, N)
        assert np.array_equal(host[777:100_777], data[1234:101_234])
        assert not host[:777].any() and not host[100_777:].any()
        assert fh.pread(dev, N, N - 50_000, task_size=16384).result(30) == 50_000  # the end
        assert fh.pread(dev, N, N + 10, task_size=16384).result(30) == 0          # past it
    out = tmp_path / "out.bin"
    with device_array(N) as dev, FileHandle(out, os.O_RDWR | os.O_CREAT) as fh:
        to_device(dev, data)
        assert fh.pwrite(dev, N - 3000, 3000, buffer_offset=3000,
                         task_size=16384).result(30) == N - 3000
    on_disk = np.frombuffer(out.read_bytes(), np.uint8)
    assert np.array_equal(on_disk[3000:], data[3000:])
    assert parallel._pool is None


def test_a_file_opened_with_o_direct_goes_through_hipfile(driver, tmp_path):
    """pread of device memory from a file opened with ``O_DIRECT`` runs
    hipFile's own calls on the engine's threads (hipFile's direct path, P2P
    DMA where the platform has it), not the staging ring: a fault injected
    into the ring's file calls is not met there, and is met by the same
    read of the file opened buffered."""
    if not direct_io_supported(tmp_path):
        pytest.skip("no O_DIRECT in the test folder")
    if hipfile.engine.mechanism() != "stream-memory-operations":
        pytest.skip("the staging ring needs stream waits")
    path = tmp_path / "direct.bin"
    data = random_file(path, N, seed=9)
    with device_array(N) as dev:
        _hipfile.engine_inject_faults(errno.EIO, 1000)
        try:
            with FileHandle(path, os.O_RDONLY | os.O_DIRECT) as fh:
                assert fh.pread(dev, N, task_size=1 << 16).result(30) == N
            assert np.array_equal(from_device(dev, N), data)
            with FileHandle(path) as fh, pytest.raises(OSError) as info:
                fh.pread(dev, N, task_size=1 << 16).result(30)
            assert info.value.errno == errno.EIO
        finally:
            _hipfile.engine_inject_faults()


def test_an_ended_request_releases_the_file_unobserved(driver, data_file):
    """A request on the engine releases its file and buffer when it ends,
    as a pool task does: a close after its end succeeds though nobody
    asked the future, which then still gives its result."""
    path, data = data_file
    with device_array(N) as dev, Buffer(dev) as buf:
        fh = FileHandle(path).open()
        fut = fh.pread(buf, N, task_size=16384)
        deadline = time.monotonic() + 30
        while True:          # each refused close changes nothing; one succeeds
            try:
                fh.close()
                break
            except hipfile.InFlightError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        buf.deregister()
        assert fut.result(timeout=0) == N
        assert np.array_equal(from_device(dev, N), data)


@pytest.mark.parametrize("route", ["staged", "hipfile"], indirect=True)
def test_a_request_on_the_engine_in_flight(driver, data_file, route):
    """While a request on the engine runs: the file and a registered buffer
    refuse to close (InFlightError), a wait times out, cancel() says no (the
    engine runs it to its end), and callbacks given meanwhile run once it
    ends, each once, in order; a later close succeeds."""
    path, data = data_file
    route.inject(short=1)                      # a read that crawls
    with device_array(N) as dev:
        fh = FileHandle(path).open()
        buf = Buffer(dev)
        buf.register()
        fut = hipfile.pread(fh, buf, task_size=1 << 16)
        calls: list[tuple[str, int]] = []
        ended = threading.Event()

        def broken(f: IOFuture) -> None:
            raise RuntimeError("ignored")

        def last(f: IOFuture) -> None:
            calls.append(("last", f.result()))
            ended.set()

        try:
            assert not fut.done() and fut.running() and "running" in repr(fut)
            assert hipfile.engine.info()["requests"] == 1
            fut.add_done_callback(lambda f: calls.append(("first", f.result())))
            fut.add_done_callback(broken)
            fut.add_done_callback(last)
            assert_held(fut, fh, buf)
            assert not fut.cancel() and not fut.cancelled()
        finally:
            route.close()
        assert fut.result(timeout=30) == N
        assert ended.wait(30)
        assert calls == [("first", N), ("last", N)]
        assert hipfile.engine.info()["requests"] == 0
        fh.close()
        buf.deregister()
        assert np.array_equal(from_device(dev, N), data)


def test_closing_mid_flight_raises(driver, data_file, blocked):
    path, data = data_file
    pool, gate = blocked
    with device_array(N) as dev:
        fh = FileHandle(path).open()
        buf = Buffer(dev)
        buf.register()
        fut = hipfile.pread(fh, buf, task_size=1 << 16, executor=pool)
        assert not fut.done() and fut.running()
        assert "running" in repr(fut)
        assert_held(fut, fh, buf)
        gate.set()
        assert fut.result(timeout=30) == N
        fh.close()
        buf.deregister()
        assert np.array_equal(from_device(dev, N), data)


def test_cancel_before_the_tasks_run(driver, data_file, blocked):
    path, _ = data_file
    pool, gate = blocked
    with device_array(N) as dev, FileHandle(path) as fh:
        fut = hipfile.pread(fh, dev, task_size=1 << 16, executor=pool)
        seen = []
        fut.add_done_callback(seen.append)
        assert fut.cancel()
        assert fut.done() and fut.cancelled()  # every task was still queued
        assert seen == [fut]
        with pytest.raises(concurrent.futures.CancelledError):
            fut.result()
        with pytest.raises(concurrent.futures.CancelledError):
            fut.exception()
        assert "cancelled" in repr(fut)
        gate.set()
        fh.close()  # nothing held


def test_cancel_after_done_returns_false(driver, data_file):
    path, _ = data_file
    with device_array(N) as dev, FileHandle(path) as fh:
        fut = hipfile.pread(fh, dev)
        assert fut.result(timeout=30) == N
        assert not fut.cancel()
        assert not fut.cancelled()


def test_done_callbacks(driver, data_file, blocked):
    path, _ = data_file
    pool, gate = blocked
    with device_array(N) as dev, FileHandle(path) as fh:
        fut = hipfile.pread(fh, dev, task_size=1 << 16, executor=pool)
        calls: list[tuple[str, int]] = []
        done = threading.Event()

        def first(f: IOFuture) -> None:
            calls.append(("first", f.result()))

        def broken(f: IOFuture) -> None:
            raise RuntimeError("ignored")

        def last(f: IOFuture) -> None:
            calls.append(("last", f.result()))
            done.set()

        fut.add_done_callback(first)
        fut.add_done_callback(broken)
        fut.add_done_callback(last)
        assert calls == []
        gate.set()
        assert done.wait(30)
        assert calls == [("first", N), ("last", N)]


def test_executor_that_refuses_work(driver, data_file):
    path, _ = data_file
    pool = concurrent.futures.ThreadPoolExecutor(1)
    pool.shutdown()
    with device_array(N) as dev, FileHandle(path) as fh:
        with pytest.raises(RuntimeError):
            hipfile.pread(fh, dev, executor=pool)
        fh.close()  # holds were released


def test_argument_checks(driver, data_file):
    path, _ = data_file
    with device_array(N) as dev, FileHandle(path) as fh:
        with pytest.raises(TypeError, match="FileHandle"):
            hipfile.pread("file", dev)
        with pytest.raises(TypeError):
            hipfile.pread(fh, int(dev))
        with pytest.raises(ValueError, match="task_size"):
            hipfile.pread(fh, dev, task_size=0)
        with pytest.raises(TypeError, match="task_size"):
            hipfile.pread(fh, dev, task_size=1.5)
        with pytest.raises(TypeError, match="executor"):
            hipfile.pread(fh, dev, executor=object())
        check_range_errors(hipfile.pread, hipfile.pwrite, fh, dev, N)
    with device_array(N) as dev, pytest.raises(hipfile.ClosedFileError):
        hipfile.pread(fh, dev)


# -- task size and threads --------------------------------------------------------


def test_task_size_from_the_environment(driver, data_file, monkeypatch):
    path, _ = data_file
    hipfile.defaults.reset("task_size")
    pool = CountingExecutor(2)
    try:
        with device_array(N) as dev, FileHandle(path) as fh:
            assert fh.pread(dev, executor=pool).result(timeout=30) == N    # one task
            monkeypatch.setenv("HIPFILE_TASK_SIZE", "8192")
            # the environment is read at import and by reset(), for the
            # getters and the pool's calls alike
            assert parallel.default_task_size() == 4 << 20
            assert fh.pread(dev, executor=pool).result(timeout=30) == N
            assert pool.submitted == 2
            hipfile.defaults.reset("task_size")
            assert parallel.default_task_size() == 8192
            assert fh.pread(dev, executor=pool).result(timeout=30) == N
        assert pool.submitted == 2 + N // 8192
    finally:
        pool.shutdown()
    monkeypatch.setenv("HIPFILE_TASK_SIZE", "lots")
    hipfile.defaults.reset("task_size")
    with pytest.raises(ValueError, match="HIPFILE_TASK_SIZE"):
        parallel.default_task_size()
    monkeypatch.setenv("HIPFILE_TASK_SIZE", "-4")
    hipfile.defaults.reset("task_size")
    with pytest.raises(ValueError, match="HIPFILE_TASK_SIZE"):
        parallel.default_task_size()
    monkeypatch.delenv("HIPFILE_TASK_SIZE")
    hipfile.defaults.reset("task_size")
    assert parallel.default_task_size() == 4 << 20


@pytest.fixture
def restore_threads() -> Iterator[None]:
    with hipfile.defaults.set("num_threads", 1):  # restores what was set before
        hipfile.defaults.reset("num_threads")
        yield
    parallel.shutdown()


def test_thread_count_settings(driver, data_file, restore_threads):
    path, data = data_file
    hipfile.defaults.set("num_threads", 3)
    assert hipfile.get_num_threads() == 3
    pool = parallel._default_executor()
    assert pool._max_workers == 3
    host = np.zeros(N, np.uint8)      # host memory: the pool's (device memory: the engine's)
    with FileHandle(path) as fh:
        assert fh.pread(host, task_size=4096).result(timeout=30) == N
        names = set()

        def note(_: IOFuture) -> None:
            names.add(threading.current_thread().name)

        fh.pread(host, task_size=4096).add_done_callback(note)
        hipfile.defaults.set("num_threads", 2)  # the old pool finishes its work
        assert parallel._default_executor() is not pool
        assert parallel._default_executor()._max_workers == 2
        assert fh.pread(host, task_size=4096).result(timeout=30) == N
        pool.shutdown(wait=True)
        assert names and all(n.startswith("hipfile-io") for n in names)
        assert np.array_equal(host, data)
    parallel.shutdown()
    assert parallel._pool is None
    for bad, exc in ((0, ValueError), (-2, ValueError), ("2", TypeError), (True, TypeError)):
        with pytest.raises(exc):
            hipfile.defaults.set("num_threads", bad)
    assert hipfile.get_num_threads() == 2


def test_set_num_threads_is_deprecated(restore_threads):
    """The older setter still sets ``num_threads`` (and checks its value),
    with a DeprecationWarning that names the replacement."""
    pool = parallel._default_executor()
    with pytest.warns(DeprecationWarning, match=r'defaults\.set\("num_threads"'):
        hipfile.set_num_threads(3)
    assert hipfile.defaults.num_threads() == 3
    assert parallel._pool is None and pool._shutdown  # the old pool was let go
    for bad, exc in ((0, ValueError), ("2", TypeError), (True, TypeError)):
        with pytest.warns(DeprecationWarning), pytest.raises(exc):
            hipfile.set_num_threads(bad)
    assert hipfile.defaults.num_threads() == 3


def test_thread_count_from_the_environment(monkeypatch, restore_threads):
    parallel.shutdown()
    monkeypatch.setenv("HIPFILE_NTHREADS", "5")
    hipfile.defaults.reset("num_threads")
    assert hipfile.get_num_threads() == 5
    monkeypatch.delenv("HIPFILE_NTHREADS")
    hipfile.defaults.reset("num_threads")
    assert hipfile.get_num_threads() == min(8, os.cpu_count() or 1)
    monkeypatch.setenv("HIPFILE_NTHREADS", "zero")
    hipfile.defaults.reset("num_threads")
    with pytest.raises(ValueError, match="HIPFILE_NTHREADS"):
        hipfile.get_num_threads()


# -- KvikIO's positional order ----------------------------------------------------------------


def test_a_fourth_positional_is_refused(driver, data_file):
    """KvikIO's ``CuFile.pread(buf, size, file_offset, task_size)`` takes
    ``task_size`` fourth; here ``buffer_offset`` is keyword-only, so that
    call is refused instead of reading into the buffer at that offset, also
    beside a ``task_size=`` keyword."""
    path, _ = data_file
    with device_array(N) as dev, FileHandle(path, os.O_RDWR) as fh:
        check(hip.hipMemset(dev, 0, N))
        for call in (fh.pread, fh.pwrite):
            with pytest.raises(TypeError, match="buffer_offset is keyword-only") as info:
                call(dev, 4096, 0, 1024)
            assert "task_size=1024" in str(info.value)
            with pytest.raises(TypeError, match="buffer_offset is keyword-only"):
                call(dev, 4096, 0, 1024, 5)
            with pytest.raises(TypeError, match="buffer_offset is keyword-only"):
                call(dev, 4096, 0, 8, task_size=1024)
        assert not from_device(dev, N).any()


def test_buffer_offset_by_keyword(driver, data_file):
    path, data = data_file
    with device_array(N) as dev, FileHandle(path) as fh:
        check(hip.hipMemset(dev, 0, N))
        assert fh.pread(dev, 5000, 100, buffer_offset=3000, task_size=1024).result(30) == 5000
        host = from_device(dev, N)
    assert np.array_equal(host[3000:8000], data[100:5100])
    assert not host[:3000].any() and not host[8000:].any()


@pytest.mark.parametrize("write", [False, True])
def test_read_and_write_take_task_size(driver, data_file, tmp_path, write):
    """``read``/``write(..., task_size=)`` as KvikIO's blocking ``read``/``write``:
    split into tasks on the pool; the positional order stays upstream's."""
    path, data = data_file
    with device_array(N) as dev:
        to_device(dev, data)
        if write:
            out = tmp_path / "out.bin"
            out.write_bytes(bytes(N))
            with FileHandle(out, os.O_RDWR) as fh:
                assert fh.write(dev, 50_000, 1000, 2000, task_size=4096) == 50_000
            on_disk = np.frombuffer(out.read_bytes(), np.uint8)
            assert np.array_equal(on_disk[1000:51_000], data[2000:52_000])
            assert not on_disk[:1000].any() and not on_disk[51_000:].any()
        else:
            check(hip.hipMemset(dev, 0, N))
            with FileHandle(path) as fh:
                assert fh.read(dev, 50_000, 1000, 2000, task_size=4096) == 50_000
                assert fh.read(dev, 10, N - 4, 0, task_size=4096) == 4   # end of file
                with pytest.raises(ValueError, match="task_size"):
                    fh.read(dev, 10, 0, 0, task_size=0)
                host = from_device(dev, N)
            assert np.array_equal(host[2000:52_000], data[1000:51_000])
            assert np.array_equal(host[:4], data[N - 4:])


@pytest.mark.emulated
def test_a_small_pread_is_done_on_return(driver, data_file):
    """A request of one task of at most 256 KiB runs in the calling thread:
    its future is done when pread returns, with the same outcome, errors
    included, as the pool gives."""
    path, data = data_file
    with device_array(N) as dev, FileHandle(path) as fh:
        fut = fh.pread(dev, 4096, 8192)
        assert fut.done() and not fut.running() and not fut.cancelled()
        assert fut.result(timeout=0) == 4096 and fut.exception() is None
        assert np.array_equal(from_device(dev, 4096), data[8192:8192 + 4096])
        called = []
        fut.add_done_callback(called.append)      # done: runs at once
        assert called == [fut] and not fut.cancel()
        # an error of the task is the future's outcome, not raised by pread
        emu().inject_fault("read", errno.EIO, count=1)
        bad = fh.pread(dev, 4096, 0)
        assert bad.done() and isinstance(bad.exception(), OSError)
        with pytest.raises(OSError):
            bad.result()
    assert fh.closed     # nothing held after either
