"""The stream-ordered parallel engine: FileHandle.pread_async/pwrite_async
and their _ranges forms, run on the active platform."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import faulthandler
import gc
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import _util
import numpy as np
import pytest
from _util import (
    check,
    device_array,
    from_device,
    malloc_on,
    random_bytes,
    random_file,
    run_threads,
    to_device,
)
from hip import hip

import hipfile
from hipfile import Buffer, FileHandle, StreamIOHandle
from hipfile._lib import _hipfile

N = 1 << 20
LAYERS = 32
LAYER = 64 << 10

_HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@pytest.fixture
def drv() -> Iterator[hipfile.Driver]:
    with hipfile.Driver() as d:
        yield d


@pytest.fixture
def layers_file(tmp_path: Path) -> tuple[Path, np.ndarray]:
    path = tmp_path / "layers.bin"
    data = random_file(path, LAYERS * LAYER, seed=7)
    return path, data


@pytest.fixture(params=["stream-memory-operations", "host-waits"])
def mechanism(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run a test with each way of releasing streams (stream waits on a flag,
    the default where the device supports them, and waits on the host, by the
    ``engine_release`` setting)."""
    if request.param == "stream-memory-operations" and hipfile.engine.mechanism() != request.param:
        pytest.skip("this device cannot use stream waits")
    release = "host-waits" if request.param == "host-waits" else "auto"
    with hipfile.defaults.set("engine_release", release):
        yield request.param
        _wait_idle()
    hipfile.trim_pool()


class StreamBlocker:
    """Holds a stream in a host function until released, at the latest on
    leaving its with-block (an earlier, slow operation on the caller's stream).

    While it holds, the main thread must not enter a runtime call that waits
    for the device (``hipFree``, ``hipHostFree``, a synchronisation): that
    call would wait for this host function, which waits for the main thread.
    For diagnosis it records the collector's runs during the hold (a
    finalizer may free memory) and, if the hold lasts 5 s, every thread's
    stack: :meth:`diagnosis` says both."""

    def __init__(self, stream: object) -> None:
        self.release_event = threading.Event()
        self.entered = threading.Event()
        # for diagnosis: (released, seconds held) once the hold has ended
        self.hold: tuple[bool, float] | None = None
        self.collections: list[int] = []
        self._stacks = tempfile.TemporaryFile("w+")
        self._stacks_text = ""
        self._lock = threading.Lock()

        def body(_arg: int | None) -> None:
            self.entered.set()
            t0 = time.monotonic()
            released = self.release_event.wait(30)
            self.hold = (released, time.monotonic() - t0)

        def collected(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                self.collections.append(info["generation"])

        self._collected = collected
        gc.collect()          # a finalizer run during the hold could wait for the device
        gc.callbacks.append(collected)
        faulthandler.dump_traceback_later(5, file=self._stacks)
        self._fn = _HOST_FN(body)
        addr = ctypes.cast(self._fn, ctypes.c_void_p).value
        check(hip.hipLaunchHostFunc(stream, addr, 0))
        assert self.entered.wait(10), "the host function never ran"

    def release(self) -> None:
        """Let the stream go (from any thread; again is a no-op)."""
        self.release_event.set()
        with self._lock:
            if self._stacks.closed:
                return
            faulthandler.cancel_dump_traceback_later()
            with contextlib.suppress(ValueError):
                gc.callbacks.remove(self._collected)
            self._read_stacks()
            self._stacks.close()

    def _read_stacks(self) -> None:
        """What faulthandler dumped so far (under the lock, file open)."""
        self._stacks.seek(0)
        self._stacks_text = self._stacks.read()

    def diagnosis(self) -> str:
        """The hold's record, the collector's runs during it, and the
        stacks dumped if it lasted 5 s."""
        with self._lock:
            if not self._stacks.closed:
                self._read_stacks()
        return (f"host function still holding: {self.hold is None}, "
                f"its wait (released, seconds): {self.hold}, "
                f"collections during the hold (generation): {self.collections}"
                + (f", stacks after 5 s:\n{self._stacks_text}" if self._stacks_text else ""))

    def __enter__(self) -> StreamBlocker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@pytest.mark.parametrize("write", [False, True])
def test_pread_and_pwrite_follow_the_null_streams_work(drv, layers_file, tmp_path, write):
    """``pread``/``pwrite`` of device memory copy after the work enqueued on
    the null stream before them, as hipFile's own copies through the null
    stream do: a memset queued behind a held null stream lands before a
    read's bytes, and in a write's file."""
    if hipfile.engine.mechanism() != "stream-memory-operations":
        pytest.skip("the staging ring needs stream waits")
    path, data = layers_file
    out = tmp_path / "out.bin"
    out.write_bytes(bytes(N))
    with device_array(N) as dev, FileHandle(out if write else path, os.O_RDWR) as fh:
        check(hip.hipMemset(dev, 0, N))
        with StreamBlocker(0):
            check(hip.hipMemsetAsync(dev, 0xAB, N, 0))        # behind the hold
            fut = (fh.pwrite if write else fh.pread)(dev, N, 0, task_size=N // 4)
            time.sleep(0.1)
            assert not fut.done(), "the copies did not wait for the null stream"
        assert fut.result(timeout=30) == N
        got = np.frombuffer(out.read_bytes(), np.uint8) if write else from_device(dev, N)
    assert np.array_equal(got, np.full(N, 0xAB, np.uint8) if write else data[:N])


def test_pread_into_another_devices_memory(drv, layers_file):
    """``pread`` into device memory of a device other than the current one
    (its copies then follow that device's null stream): the bytes are the
    file's, and the current device stays."""
    if check(hip.hipGetDeviceCount()) < 2:
        pytest.skip("needs two devices")
    path, data = layers_file
    dev = malloc_on(1, N)
    try:
        with FileHandle(path) as fh:
            assert fh.pread(hipfile.Buffer(dev, N), N, 0, task_size=N // 4).result(30) == N
        assert check(hip.hipGetDevice()) == 0
        out = np.empty(N, np.uint8)
        check(hip.hipMemcpy(out, dev, N, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
        assert np.array_equal(out, data[:N])
    finally:
        check(hip.hipFree(dev))


@contextlib.contextmanager
def blocked_read(path: Path, stream: object) -> Iterator[StreamIOHandle]:
    """An engine read of the first N bytes of ``path``,
    submitted on ``stream`` while a StreamBlocker holds it. On leaving, the
    stream runs again and the read must complete with N bytes."""
    with device_array(N) as dev, FileHandle(path) as fh:
        with StreamBlocker(stream):
            h = fh.pread_async(dev, N, 0, 0, stream)
            yield h
        assert h.wait(timeout=30) == N


def _busy() -> bool:
    """Operations outstanding in the engine, or dropped handles not yet
    released (a staged read is complete once its stream's copies are)."""
    info = hipfile.engine.info()          # sweeps the parked handles
    return bool(info["outstanding"] or info["parked"])


def _wait_idle(timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while _busy() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _busy()


def test_read_ranges_byte_for_byte(drv, layers_file, nb_stream, mechanism):
    path, data = layers_file
    with device_array(LAYERS * LAYER) as dev, FileHandle(path) as fh:
        buf = Buffer(dev, LAYERS * LAYER)
        ranges = [(LAYER, i * LAYER, (LAYERS - 1 - i) * LAYER) for i in range(LAYERS)]
        handles = fh.pread_async_ranges(buf, ranges, nb_stream, task_size=16 << 10)
        assert len(handles) == LAYERS
        assert all(isinstance(h, StreamIOHandle) for h in handles)
        assert [h.wait(timeout=30) for h in handles] == [LAYER] * LAYERS
        got = from_device(dev, LAYERS * LAYER)
        for i in range(LAYERS):
            j = LAYERS - 1 - i
            assert np.array_equal(got[j * LAYER:(j + 1) * LAYER],
                                  data[i * LAYER:(i + 1) * LAYER]), f"range {i}"
        assert handles[0].calls == LAYER // (16 << 10)
        assert handles[0].size == LAYER and handles[0].opcode == 0
        assert handles[0].bytes_done == LAYER


def test_single_read_defaults_and_repr(drv, layers_file):
    path, data = layers_file
    with device_array(N) as dev, FileHandle(path) as fh:
        h = fh.pread_async(dev)        # whole buffer, offset 0, null stream
        assert h.result(timeout=30) == N
        assert "done" in repr(h)
        assert np.array_equal(from_device(dev, N), data[:N])


def test_read_past_end_of_file_is_short(drv, layers_file):
    path, data = layers_file
    size = LAYERS * LAYER
    with device_array(N) as dev, FileHandle(path) as fh:
        h = fh.pread_async(dev, N, size - 1000, 0, task_size=256)
        assert h.wait(timeout=30) == 1000
        h2 = fh.pread_async(dev, 10, size + 5, 0)
        assert h2.wait(timeout=30) == 0
        assert np.array_equal(from_device(dev, 1000), data[size - 1000:])


def test_write_then_read_back(drv, tmp_path, nb_stream):
    data = random_bytes(N, seed=3)
    path = tmp_path / "out.bin"
    with device_array(N) as dev, FileHandle(path, os.O_RDWR | os.O_CREAT) as fh:
        to_device(dev, data)
        hs = fh.pwrite_async_ranges(dev, [(N // 4, i * N // 4, i * N // 4) for i in range(4)],
                                    nb_stream, task_size=64 << 10)
        assert sum(h.wait(timeout=30) for h in hs) == N
    assert path.read_bytes() == data.tobytes()


def test_start_waits_for_the_callers_stream(drv, layers_file, nb_stream, mechanism):
    path, data = layers_file
    with device_array(N) as dev, FileHandle(path) as fh:
        # the first submission after trim_pool() allocates pinned memory,
        # which CUDA may make wait for the device, so for the held stream
        hipfile.engine.prepare()
        with StreamBlocker(nb_stream) as blocker:
            t0 = time.monotonic()
            h = fh.pread_async(dev, N, 0, 0, nb_stream, ordered=False)
            submit_s = time.monotonic() - t0
            time.sleep(0.2)
            flags = h._flag_values()     # before done(), which gives them back
            query = hip.hipStreamQuery(nb_stream)[0]
            assert not h.done(), (f"done before the stream passed (flags: {flags}, "
                                  f"submit took {submit_s:.3f} s, "
                                  f"hipStreamQuery: {query!r}, {blocker.diagnosis()})")
            assert h.bytes_done is None
            assert h.calls == 0, "the engine touched the file before the stream passed"
        assert h.wait(timeout=30) == N
        assert np.array_equal(from_device(dev, N), data[:N])


@pytest.mark.parametrize("ordered", [True, False])
def test_prefetch_reads_the_file_before_the_stream_passes(drv, layers_file, nb_stream,
                                                          mechanism, ordered):
    """``prefetch=True``: the file is read at once into staging; the copies
    into the buffer still wait for the stream (``ordered=False``: on the
    engine's own stream, made to wait for the caller's busy one), so
    nothing lands before it passes."""
    if mechanism == "host-waits":
        pytest.skip("the staged path needs stream waits")
    path, data = layers_file
    with device_array(N) as dev, FileHandle(path) as fh:
        check(hip.hipMemset(dev, 0, N))
        with StreamBlocker(nb_stream):
            h = fh.pread_async(dev, N, 0, 0, nb_stream, prefetch=True, ordered=ordered)
            deadline = time.monotonic() + 10
            while h.calls == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert h.calls > 0, "a prefetch waited for the stream to read the file"
            assert not h.done()
            assert not from_device(dev, N).any(), "bytes landed before the stream passed"
        assert h.wait(timeout=30) == N
        assert np.array_equal(from_device(dev, N), data[:N])


def test_prefetch_on_hipfiles_path_waits_for_the_stream(drv, layers_file, nb_stream):
    """Where hipFile's own calls move the bytes (``engine_data_path``
    "hipfile"), hipFile writes into the buffer itself: a prefetch cannot
    read early, so it starts once the stream has passed, as any read, and
    nothing lands before."""
    path, data = layers_file
    with hipfile.defaults.set("engine_data_path", "hipfile"), device_array(N) as dev, \
            FileHandle(path) as fh:
        check(hip.hipMemset(dev, 0, N))
        with StreamBlocker(nb_stream):
            h = fh.pread_async(dev, N, 0, 0, nb_stream, prefetch=True)
            time.sleep(0.1)
            assert h.calls == 0 and not h.done()
            assert not from_device(dev, N).any(), "bytes landed before the stream passed"
        assert h.wait(timeout=30) == N
        assert np.array_equal(from_device(dev, N), data[:N])


def test_write_waits_for_the_callers_stream(drv, tmp_path, nb_stream, mechanism):
    """The write must read the buffer only after earlier work on the stream
    (here: a copy that fills it) has run."""
    data = random_bytes(N, seed=11)
    path = tmp_path / "w.bin"
    host = check(hip.hipHostMalloc(N, 0))
    try:
        ctypes.memmove(int(host), data.ctypes.data, N)
        with device_array(N) as dev, FileHandle(path, os.O_RDWR | os.O_CREAT) as fh:
            with StreamBlocker(nb_stream):
                check(hip.hipMemcpyAsync(dev, host, N, hip.hipMemcpyKind.hipMemcpyHostToDevice,
                                         nb_stream))
                h = fh.pwrite_async(dev, N, 0, 0, nb_stream, ordered=False)
                time.sleep(0.1)
                assert h.calls == 0
            assert h.wait(timeout=30) == N
        assert path.read_bytes() == data.tobytes()
    finally:
        check(hip.hipHostFree(host))


def test_wait_on_releases_another_stream(drv, layers_file, nb_stream, mechanism):
    if mechanism == "host-waits":
        pytest.skip("wait_on waits on the host there (test_host_waits_wait_on_blocks)")
    path, data = layers_file
    other = check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    before = check(hip.hipEventCreateWithFlags(hip.hipEventDisableTiming))
    after = check(hip.hipEventCreateWithFlags(hip.hipEventDisableTiming))
    host = np.zeros(N, np.uint8)
    try:
        with device_array(N) as dev, FileHandle(path) as fh:
            with StreamBlocker(nb_stream):
                h = fh.pread_async(dev, N, 0, 0, nb_stream)
                check(hip.hipEventRecord(before, other))    # work before wait_on
                h.wait_on(other)
                check(hip.hipEventRecord(after, other))     # work after wait_on
                deadline = time.monotonic() + 10
                while hip.hipEventQuery(before)[0] != hip.hipError_t.hipSuccess:
                    assert time.monotonic() < deadline, "work before wait_on was delayed"
                    time.sleep(0.005)
                time.sleep(0.1)
                assert hip.hipEventQuery(after)[0] == hip.hipError_t.hipErrorNotReady
            check(hip.hipStreamSynchronize(other))
            # the bytes are in once `other` has passed the wait; the engine's
            # own count of the operation may end a moment later (seen under
            # the sanitizers on a loaded machine), so done() is waited for
            check(hip.hipMemcpy(host, dev, N, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
            assert h.wait(timeout=30) == N
            assert np.array_equal(host, data[:N])
            h.wait_on(other)          # already done: nothing to wait for
    finally:
        check(hip.hipEventDestroy(before))
        check(hip.hipEventDestroy(after))
        check(hip.hipStreamDestroy(other))


def test_host_waits_wait_on_blocks(drv, layers_file, nb_stream):
    """Without stream waits, wait_on waits on the host (no host function is
    enqueued) and an ordered submission returns once its data has landed."""
    restore = hipfile.defaults.set("engine_release", "host")
    path, data = layers_file
    other = check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    try:
        with device_array(N) as dev, FileHandle(path) as fh:
            h = fh.pread_async(dev, N, 0, 0, nb_stream)        # ordered: waits
            assert h.mechanism == "host-waits" and h.done()
            with StreamBlocker(nb_stream) as blocker:
                h2 = fh.pread_async(dev, N, 0, 0, nb_stream, ordered=False)
                assert not h2.done()
                threading.Timer(0.2, blocker.release).start()
                t0 = time.monotonic()
                h2.wait_on(other)                               # returns once done
                assert h2.done() and time.monotonic() - t0 >= 0.1
            assert np.array_equal(from_device(dev, N), data[:N])
    finally:
        check(hip.hipStreamDestroy(other))
        _wait_idle()
        restore.__exit__(None, None, None)
        hipfile.trim_pool()


def test_record_event(drv, layers_file, nb_stream, mechanism):
    path, _ = layers_file
    with device_array(N) as dev, FileHandle(path) as fh:
        h = fh.pread_async(dev, N, 0, 0, nb_stream)
        ev = h.record_event()
        assert h.record_event() is ev
        check(hip.hipEventSynchronize(ev))
        assert h.done() and h.wait() == N


def test_mechanism_is_reported(drv, layers_file, mechanism):
    path, _ = layers_file
    mech = hipfile.engine.mechanism()
    assert mech == mechanism
    assert mech in ("stream-memory-operations", "host-waits")
    with device_array(N) as dev, FileHandle(path) as fh:
        h = fh.pread_async(dev, N)
        assert h.mechanism == mech
        h.wait(timeout=30)
    assert hipfile.engine.info()["devices"][0]["mechanism"] == mech


@pytest.fixture(params=["staged", "hipfile"])
def data_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each data path of the engine (the ``engine_data_path`` setting), with
    a fault injector for its file calls: the staged path's own POSIX calls,
    or (emulated) the library's."""
    if request.param == "hipfile":
        if hipfile.platforms.active() != "emulated":
            pytest.skip("faults of the library are injected on the emulated platform")
    elif hipfile.engine.mechanism() != "stream-memory-operations":
        pytest.skip("the staged path needs stream waits")
    with hipfile.defaults.set("engine_data_path", "auto" if request.param == "staged"
                              else "hipfile"):
        yield request.param
    _hipfile.engine_inject_faults()


def _inject(data_path: str, err: int = 0, count: int = 0, short: int = 0) -> None:
    if data_path == "staged":
        _hipfile.engine_inject_faults(err, count, short)
        return
    from hipfile.platforms import emulated

    if count:
        emulated.inject_fault("read", err, count=count)
    if short:
        emulated.set_short_transfer(short)


def test_a_failed_chunk_fails_its_range_only(drv, layers_file, data_path):
    path, data = layers_file
    with device_array(LAYERS * LAYER) as dev, FileHandle(path) as fh:
        _inject(data_path, errno.EIO, count=1)
        hs = fh.pread_async_ranges(dev, [(LAYER, i * LAYER, i * LAYER) for i in range(LAYERS)],
                                   task_size=LAYER)
        assert {h.data_path for h in hs} == {data_path}
        failed = []
        for i, h in enumerate(hs):
            try:
                assert h.wait(timeout=30) == LAYER
            except OSError as e:
                assert e.errno == errno.EIO
                failed.append(i)
        assert len(failed) == 1
        got = from_device(dev, LAYERS * LAYER)
        for i in range(LAYERS):
            if i not in failed:
                assert np.array_equal(got[i * LAYER:(i + 1) * LAYER],
                                      data[i * LAYER:(i + 1) * LAYER])


def test_short_transfers_are_not_end_of_file(drv, layers_file, data_path):
    path, data = layers_file
    _inject(data_path, short=1000)
    with device_array(N) as dev, FileHandle(path) as fh:
        h = fh.pread_async(dev, N, 4096, 0, task_size=300_000)
        assert h.wait(timeout=30) == N
        assert h.calls > N // 1000
        assert np.array_equal(from_device(dev, N), data[4096:4096 + N])


def test_dropped_handles_are_parked_then_released(drv, layers_file, nb_stream, mechanism):
    path, _ = layers_file
    with device_array(N) as dev:
        fh = FileHandle(path).open()
        buf = Buffer(dev, N)
        with StreamBlocker(nb_stream):
            hs = fh.pread_async_ranges(buf, [(N // 4, 0, i * N // 4) for i in range(4)],
                                       nb_stream, ordered=False)
            del hs
            assert hipfile.engine.info()["parked"] == 4
            with pytest.raises(hipfile.InFlightError):
                fh.close()
            with pytest.raises(hipfile.InFlightError):
                buf.deregister() if buf.registered else fh.close()
        _wait_idle()
        fh.close()            # the sweep released the parked holds
        assert hipfile.engine.info()["parked"] == 0


def test_bad_input_submits_nothing(drv, layers_file):
    path, _ = layers_file
    with device_array(N) as dev, FileHandle(path) as fh:
        before = hipfile.engine.info()["outstanding"]
        with pytest.raises(ValueError):
            fh.pread_async_ranges(dev, [(N // 2, 0, 0), (N, 0, N // 2)])   # overruns
        with pytest.raises(TypeError):
            fh.pread_async(dev, 1.5)
        with pytest.raises(TypeError):
            fh.pread_async(dev, True)
        with pytest.raises(TypeError):
            fh.pread_async_ranges(dev, [(1, 2)])
        with pytest.raises(ValueError):
            fh.pread_async(dev, 16, task_size=0)
        with pytest.raises(TypeError):
            fh.pread_async(dev, 16, stream="s")
        with pytest.raises(TypeError):
            StreamIOHandle()
        assert fh.pread_async_ranges(dev, []) == []
        assert hipfile.engine.info()["outstanding"] == before
    with pytest.raises(hipfile.ClosedFileError):
        fh.pread_async(dev, 16)


def test_zero_byte_range_completes(drv, layers_file, nb_stream):
    path, _ = layers_file
    with device_array(N) as dev, FileHandle(path) as fh:
        assert fh.pread_async(dev, 0, 0, 0, nb_stream).wait(timeout=30) == 0


def test_wait_timeout_then_result(drv, layers_file, nb_stream):
    with blocked_read(layers_file[0], nb_stream) as h:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            h.wait(timeout=0.12)
        assert time.monotonic() - t0 < 2
    assert h.result(timeout=0) == N


def test_many_threads_submitting_to_their_own_streams(drv, layers_file, mechanism):
    """Six threads load layers on their own streams, each allocating and
    freeing its device memory every round (hipFree synchronises the device
    while ranges of the other threads are in flight), as threads of a
    serving process do."""
    path, data = layers_file
    errors: list[BaseException] = []
    streams = [check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking)) for _ in range(6)]

    def worker(k: int) -> None:
        try:
            s = streams[k]
            for _ in range(3):
                dev = check(hip.hipMalloc(LAYERS * LAYER))
                try:
                    hs = fh.pread_async_ranges(
                        dev, [(LAYER, i * LAYER, i * LAYER) for i in range(LAYERS)], s,
                        task_size=32 << 10)
                    for h in hs:
                        h.wait_on(s)
                    check(hip.hipStreamSynchronize(s))
                    assert all(h.done() for h in hs)
                    assert sum(h.wait() for h in hs) == LAYERS * LAYER
                    assert np.array_equal(from_device(dev, LAYERS * LAYER), data)
                finally:
                    check(hip.hipFree(dev))
        except BaseException as e:
            errors.append(e)

    with FileHandle(path) as fh:
        run_threads(worker, 6, 60)
    for s in streams:
        check(hip.hipStreamDestroy(s))
    assert not errors, errors


@pytest.fixture
def engine_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The engine's settings from their defaults, restored afterwards."""
    from hipfile import defaults

    for var in ("HIPFILE_ENGINE_THREADS", "HIPFILE_ENGINE_TASK_SIZE"):
        monkeypatch.delenv(var, raising=False)
    defaults.reset("engine_threads", "engine_task_size")
    yield
    defaults.reset("engine_threads", "engine_task_size")


def test_engine_settings_are_validated(engine_settings):
    before = hipfile.engine.settings()
    with pytest.raises(ValueError):
        hipfile.defaults.set(engine_threads=0)
    with pytest.raises(TypeError):
        hipfile.defaults.set(engine_task_size=1.0)
    with pytest.raises(TypeError):
        hipfile.defaults.set(engine_threads=4, engine_task_size=True)   # nothing applied
    assert before == hipfile.engine.settings()
    assert before == {"threads": hipfile.defaults.engine_threads(),
                      "task_size": hipfile.defaults.engine_task_size()}


def test_configure_is_deprecated(engine_settings):
    """engine.configure still sets the two settings through hipfile.defaults
    (None keeps a value; a bad value changes nothing), with a
    DeprecationWarning that names the replacement."""
    with pytest.warns(DeprecationWarning, match=r"hipfile\.defaults\.set\(engine_threads"):
        hipfile.engine.configure(threads=3, task_size=8192)
    assert hipfile.defaults.get("engine_threads") == 3
    assert hipfile.defaults.get("engine_task_size") == 8192
    with pytest.warns(DeprecationWarning):
        hipfile.engine.configure(task_size=16384)
    assert hipfile.engine.settings() == {"threads": 3, "task_size": 16384}
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError):
        hipfile.engine.configure(threads=4, task_size=True)
    assert hipfile.engine.settings() == {"threads": 3, "task_size": 16384}


def test_settings_come_from_hipfile_defaults(engine_settings, monkeypatch, drv, layers_file):
    from hipfile import defaults

    path, _ = layers_file
    defaults.set(engine_threads=3, engine_task_size=8192)
    assert defaults.get("engine_threads") == 3 and defaults.get("engine_task_size") == 8192
    assert hipfile.engine.settings() == {"threads": 3, "task_size": 8192}
    with device_array(N) as dev, FileHandle(path) as fh:
        h = fh.pread_async(dev, 65536)
        assert h.wait(timeout=30) == 65536
        assert h.calls == 65536 // 8192, "the default task size was not used"
        assert hipfile.engine.info()["threads"] == 3
        # defaults.set takes effect at the next submission (the engine is idle)
        _wait_idle()
        with defaults.set(engine_threads=5, engine_task_size=16384):
            assert hipfile.engine.settings() == {"threads": 5, "task_size": 16384}
            h = fh.pread_async(dev, 65536)
            assert h.wait(timeout=30) == 65536 and h.calls == 4
            assert hipfile.engine.info()["threads"] == 5
            _wait_idle()
        # the environment applies once nothing is set, units included
        monkeypatch.setenv("HIPFILE_ENGINE_THREADS", "2")
        monkeypatch.setenv("HIPFILE_ENGINE_TASK_SIZE", "32K")
        # the engine is told of changes, not polling the environment: the
        # variables reach it at the next reset()
        assert hipfile.engine.settings() == {"threads": 3, "task_size": 8192}
        defaults.reset("engine_threads", "engine_task_size")
        assert hipfile.engine.settings() == {"threads": 2, "task_size": 32 << 10}
        h = fh.pread_async(dev, 65536)
        assert h.wait(timeout=30) == 65536 and h.calls == 2
        assert hipfile.engine.info()["threads"] == 2
        # a bad variable is refused at the submission, which submits nothing
        monkeypatch.setenv("HIPFILE_ENGINE_TASK_SIZE", "0")
        defaults.reset("engine_task_size")
        with pytest.raises(ValueError, match="HIPFILE_ENGINE_TASK_SIZE"):
            fh.pread_async(dev, 4096)
        with pytest.raises(ValueError, match="HIPFILE_ENGINE_TASK_SIZE"):
            hipfile.engine.settings()
        # an explicit value wins over the environment
        defaults.set("engine_task_size", 4096)
        h = fh.pread_async(dev, 65536)
        assert h.wait(timeout=30) == 65536 and h.calls == 16


@pytest.fixture
def engine_options() -> Iterator[None]:
    """The three options the engine reads once, at their defaults
    (environment included) before and after."""
    names = ("engine_batch_copies", "engine_release", "engine_data_path")
    with hipfile.defaults.set(engine_batch_copies=True, engine_release="auto",
                              engine_data_path="auto"):
        yield
    hipfile.defaults.reset(*names)


def test_set_changes_engine_batch_copies(engine_options):
    # the hook reports what the staged path will do: set() turns it off at once
    has_batch = _hipfile.engine_batch_copies()
    with hipfile.defaults.set("engine_batch_copies", False):
        assert _hipfile.engine_batch_copies() is False
    assert _hipfile.engine_batch_copies() is has_batch
    hipfile.defaults.set("engine_batch_copies", False)
    assert _hipfile.engine_batch_copies() is False
    hipfile.defaults.reset("engine_batch_copies")   # back to the environment or True
    if os.environ.get("HIPFILE_ENGINE_BATCH_COPIES", "").strip() in ("", "1"):
        assert _hipfile.engine_batch_copies() is has_batch


def test_set_changes_engine_release(engine_options, drv, layers_file):
    """engine_release reaches the next submission without trim_pool; an
    operation submitted before keeps the mechanism it was submitted with."""
    path, _ = layers_file
    if hipfile.engine.mechanism() != "stream-memory-operations":
        pytest.skip("this device cannot use stream waits")
    with device_array(N) as dev, FileHandle(path) as fh:
        before = fh.pread_async(dev, 4096)
        with hipfile.defaults.set("engine_release", "host-functions"):
            assert hipfile.engine.mechanism() == "host-waits"
            h = fh.pread_async(dev, 4096)
            assert h.mechanism == "host-waits"
            assert h.wait(timeout=30) == 4096
            assert before.mechanism == "stream-memory-operations"
            assert hipfile.engine.info()["devices"][0]["mechanism"] == "host-waits"
        assert hipfile.engine.mechanism() == "stream-memory-operations"
        h = fh.pread_async(dev, 4096)
        assert h.mechanism == "stream-memory-operations"
        assert h.wait(timeout=30) == 4096 and before.wait(timeout=30) == 4096
    _wait_idle()


def test_set_changes_engine_data_path(engine_options, drv, layers_file):
    """engine_data_path="hipfile" takes the next submission off the staged
    path: a fault injected into the staged path's file calls is not met."""
    path, data = layers_file
    if hipfile.platforms.active() != "emulated":
        # hipFile's data path enters the runtime from the engine's threads,
        # which a later hipFree can deadlock with (see the stream-engine
        # guide); the emulated library's does not
        pytest.skip("hipFile's data path is exercised on the emulated platform")
    if hipfile.engine.mechanism() != "stream-memory-operations":
        pytest.skip("the staged path needs stream waits")
    with device_array(N) as dev, FileHandle(path) as fh:
        try:
            _hipfile.engine_inject_faults(errno.EIO, 1)
            with hipfile.defaults.set("engine_data_path", "hipfile"):
                assert fh.pread_async(dev, 65536).wait(timeout=30) == 65536
            assert np.array_equal(from_device(dev, 65536), data[:65536])
            with pytest.raises(OSError) as err:     # the staged path meets it
                fh.pread_async(dev, 65536).wait(timeout=30)
            assert err.value.errno == errno.EIO
        finally:
            _hipfile.engine_inject_faults()
    _wait_idle()


ENGINE_OPTIONS_SCRIPT = r"""
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import hipfile
from hipfile._lib import _hipfile
print(_hipfile.engine_batch_copies(), hipfile.engine.mechanism(),
      hipfile.defaults.engine_data_path())
hipfile.defaults.set(engine_batch_copies=True, engine_release="auto")
print(hipfile.engine.mechanism())
"""


def test_engine_options_from_the_environment():
    """The environment variables still choose, in a new process (set()
    wins over them); a bad value is refused naming the setting."""
    from _util import run_python

    proc = run_python(ENGINE_OPTIONS_SCRIPT, HIPFILE_ENGINE_BATCH_COPIES="0",
                      HIPFILE_ENGINE_RELEASE="host", HIPFILE_ENGINE_DATA_PATH="hipfile")
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.splitlines()
    assert first == "False host-waits hipfile"
    assert second in ("stream-memory-operations", "host-waits")
    proc = run_python(ENGINE_OPTIONS_SCRIPT, HIPFILE_ENGINE_RELEASE="device")
    assert proc.returncode != 0
    assert "HIPFILE_ENGINE_RELEASE='device' is not a valid engine_release" in proc.stderr
    assert "ValueError" in proc.stderr


NO_RUNTIME_SCRIPT = r"""
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import hipfile
from hipfile._lib import _hipfile
_hipfile.engine_batch_copies()
"""


def test_engine_without_a_hip_runtime_raises_the_load_error(tmp_path):
    """Where HIP-Python cannot load the HIP runtime, the engine's lookup of
    its C functions raises HIP-Python's error (not a SystemError for an
    exception left pending)."""
    from _util import run_python

    proc = run_python(NO_RUNTIME_SCRIPT, clear=("HIPFILE_PLATFORM", "HIPFILE_LIBRARY",
                                                "LD_LIBRARY_PATH", "HIPFILE_EMULATED_PREFIX"),
                      ROCM_PATH=str(tmp_path))
    if proc.returncode == 0:
        pytest.skip("this machine has a HIP runtime of its own")
    assert "SystemError" not in proc.stderr, proc.stderr
    assert "RuntimeError" in proc.stderr and "libamdhip64" in proc.stderr, proc.stderr


def test_shutdown_and_restart(drv, layers_file):
    path, _data = layers_file
    with device_array(N) as dev, FileHandle(path) as fh:
        fh.pread_async(dev, N).wait(timeout=30)
        hipfile.engine.shutdown(timeout=10)
        assert hipfile.engine.info()["threads"] == 0
        assert fh.pread_async(dev, N).wait(timeout=30) == N
        assert hipfile.engine.info()["threads"] > 0


TWO_DEVICE_SCRIPT = r"""
import numpy as np, os, sys, hipfile
from hip import hip

def ok(r):
    assert r[0] == hip.hipError_t.hipSuccess, r
    return r[1] if len(r) == 2 else None

path = sys.argv[1]
data = np.fromfile(path, np.uint8)
ok(hip.hipSetDevice(1))
dev = ok(hip.hipMalloc(data.nbytes))
s = ok(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
ok(hip.hipSetDevice(0))
with hipfile.Driver(), hipfile.open(path) as fh:
    hs = fh.pread_async_ranges(hipfile.Buffer(dev, data.nbytes),
                               [(4096, i * 4096, i * 4096) for i in range(data.nbytes // 4096)],
                               s, task_size=1024)
    assert {h.device for h in hs} == {1}, {h.device for h in hs}
    for h in hs:
        h.wait_on(s)
    ok(hip.hipStreamSynchronize(s))
    assert sum(h.wait() for h in hs) == data.nbytes
    out = np.empty_like(data)
    ok(hip.hipMemcpy(out, dev, data.nbytes, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
    assert (out == data).all()
    assert ok(hip.hipGetDevice()) == 0, "the caller's device changed"
    del hs
hipfile.trim_pool()
ok(hip.hipStreamDestroy(s))
ok(hip.hipFree(dev))
print("two-device engine ok")
"""


@pytest.mark.emulated
def test_buffer_and_stream_on_device_1(layers_file, tmp_path):
    path, _ = layers_file
    script = tmp_path / "two.py"
    script.write_text(TWO_DEVICE_SCRIPT)
    env = dict(os.environ, HIPFILE_EMU_DEVICES="2", HIPFILE_PLATFORM="emulated",
               PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, str(script), str(path)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "two-device engine ok" in proc.stdout


@pytest.mark.emulated
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")  # threads exist here
def test_inherited_operation_raises_in_a_forked_child(drv, layers_file, nb_stream):
    with blocked_read(layers_file[0], nb_stream) as h:
        pid = os.fork()
        if pid == 0:  # the child: the parent's operation never runs here
            code = 1
            try:
                h.wait(timeout=5)
            except hipfile.ForkedProcessError:
                code = 0
            except BaseException:
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.parametrize("setting", [{}, {"engine_release": "host-waits"},
                                     {"engine_data_path": "hipfile"}],
                         ids=["auto", "host-waits", "hipfile-data-path"])
def test_scatter_and_gather_on_every_data_path(drv, tmp_path, nb_stream, setting):
    """pread_async_scatter and pwrite_async_gather are one operation on
    every data path: the staged path, and the worker path (hipFile's calls)
    where stream waits are not used or the hipfile data path is asked for.
    Scattered blocks land where they belong; a range past the end of the
    file moves nothing and one across it moves what is there, on both
    paths alike; a gather writes every block."""
    nblocks, block = 64, 4096
    path = tmp_path / "blocks.bin"
    data = random_file(path, nblocks * block, seed=31)
    ranges = _util.scattered_blocks(nblocks, block, seed=13)
    with hipfile.defaults.set(**setting), device_array(nblocks * block) as dev, \
            FileHandle(path) as fh:
        check(hip.hipMemset(dev, 0, nblocks * block))
        h = fh.pread_async_scatter(dev, ranges, nb_stream, task_size=3 * block + 100)
        assert isinstance(h, StreamIOHandle)
        assert (h.ranges, h.size) == (nblocks, nblocks * block)
        if setting:
            assert h.data_path == "hipfile"
        assert h.wait(timeout=30) == nblocks * block
        _util.assert_ranges_equal(from_device(dev, nblocks * block), data, ranges)
        end = nblocks * block
        edge = fh.pread_async_scatter(dev, [(block, end - 100, 0), (block, end + 10, block),
                                            (block, 0, 2 * block)], nb_stream)
        assert edge.wait(timeout=30) == 100 + block
        out = tmp_path / "gathered.bin"
        with FileHandle(out, "w") as fw:
            g = fw.pwrite_async_gather(dev, [(b, f, f) for b, f, _ in ranges][::-1], nb_stream)
            assert g.wait(timeout=30) == nblocks * block
        written = np.frombuffer(out.read_bytes(), np.uint8)
        assert np.array_equal(written, from_device(dev, nblocks * block))
        with FileHandle(path) as ro, pytest.raises(OSError):
            # waiting on the host (host-waits), an ordered submission
            # returns once done, so the error may come from the call itself
            ro.pwrite_async_gather(dev, ranges[:4], nb_stream).wait(timeout=30)


def test_an_ordered_submission_failing_in_its_wait_still_owns_its_handle(drv, tmp_path,
                                                                          nb_stream):
    """Waiting on the host (``host-waits``), an ordered submission returns
    once its ranges are done, so their error comes from the call itself.
    The handle still owns the operation then: dropped, it gives its flag
    back, and ``trim_pool()`` frees the engine's memory."""
    path = tmp_path / "read-only.bin"
    path.write_bytes(bytes(N))
    with hipfile.defaults.set("engine_release", "host-waits"), device_array(N) as dev, \
            FileHandle(path) as ro:
        blocker = StreamBlocker(nb_stream)     # the write starts once released
        timer = threading.Timer(0.3, blocker.release)
        timer.start()
        try:
            with pytest.raises(OSError):
                ro.pwrite_async(dev, N, 0, 0, nb_stream)
        finally:
            blocker.release()
            timer.join()
    gc.collect()
    _wait_idle()
    hipfile.trim_pool()
    assert not hipfile.engine.info()["devices"], "the failed submission kept a flag"


def test_info_times_the_making_of_a_device_runtime():
    """``setup_s``: the seconds the device's flag pool and staging ring took
    to make, measured once (a later look gives the same figure)."""
    _wait_idle()
    hipfile.trim_pool()
    t0 = time.perf_counter()
    hipfile.engine.prepare()
    took = time.perf_counter() - t0
    device = check(hip.hipGetDevice())
    setup = hipfile.engine.info()["devices"][device]["setup_s"]
    assert isinstance(setup, float)
    assert 0 < setup <= took
    assert hipfile.engine.info()["devices"][device]["setup_s"] == setup
    _wait_idle()
    hipfile.trim_pool()


def test_prepare_allocates_what_the_first_submission_would(drv, layers_file, nb_stream):
    path, data = layers_file
    _wait_idle()
    hipfile.trim_pool()
    assert not hipfile.engine.info()["devices"]
    hipfile.engine.prepare()
    made = hipfile.engine.info()["devices"]
    device = check(hip.hipGetDevice())
    assert made[device]["flags"] > 0
    if hipfile.engine.mechanism() == "stream-memory-operations":
        assert made[device]["staging_bytes"] == hipfile.defaults.get("engine_staging_size")
    hipfile.engine.prepare(device)          # again: nothing more
    assert hipfile.engine.info()["devices"] == made
    with device_array(N) as dev, FileHandle(path) as fh:
        assert fh.pread_async(dev, N, 0, 0, nb_stream).wait(timeout=30) == N
        assert np.array_equal(from_device(dev, N), data[:N])
    after = hipfile.engine.info()["devices"]
    for d in (after, made):
        for v in d.values():
            v.pop("stream_waits", None)         # counts of calls, not memory
            v.pop("stream_calls", None)
    assert after == made, "the submission allocated more"
    _wait_idle()
    hipfile.trim_pool()
    assert not hipfile.engine.info()["devices"]


def _mappings_with(flags: set[str]) -> list[tuple[int, int]]:
    """``(start, end)`` of this process's mappings whose VmFlags include
    every one of ``flags`` (/proc/self/smaps)."""
    out, span = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                a, b = head.split("-")
                span = (int(a, 16), int(b, 16))
            elif head == "VmFlags:" and span is not None and flags <= set(line.split()[1:]):
                out.append(span)
    return out


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs /proc/self/smaps")
def test_staging_ring_is_registered_huge_pages_a_child_does_not_inherit(drv, layers_file,
                                                                         nb_stream):
    """The staging ring is anonymous memory advised for transparent huge
    pages and registered (hipHostRegister), not hipHostMalloc's 4 KiB
    pages; a forked child does not inherit it (MADV_DONTFORK: a
    copy-on-write page would leave the device reading a page the parent no
    longer writes), and the parent's reads stay right after a fork."""
    path, data = layers_file
    _wait_idle()
    hipfile.trim_pool()
    before = _mappings_with({"dc", "hg"})
    hipfile.engine.prepare()
    device = check(hip.hipGetDevice())
    info = hipfile.engine.info()["devices"][device]
    if hipfile.engine.mechanism() != "stream-memory-operations":
        pytest.skip("no staging ring without stream waits")
    assert info["staging_pinned_by"] == "hipHostRegister"
    made = [m for m in _mappings_with({"dc", "hg"}) if m not in before]
    assert [b - a >= info["staging_bytes"] for a, b in made] == [True]
    pid = os.fork()
    if pid == 0:
        os._exit(0 if not [m for m in _mappings_with(set()) if m in made] else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child inherited the staging ring"
    with device_array(N) as dev, FileHandle(path) as fh:
        assert fh.pread_async(dev, N, 0, 0, nb_stream).wait(timeout=30) == N
        assert np.array_equal(from_device(dev, N), data[:N])
    _wait_idle()
    hipfile.trim_pool()
    assert _mappings_with({"dc", "hg"}) == before, "trim_pool left the ring mapped"
