"""Stream-ordered I/O: AsyncIOHandle, Stream, read_async/write_async."""

from __future__ import annotations

import ctypes
import errno
import gc
import os
import threading
import time

import numpy as np
import pytest
from _util import (
    check,
    check_chunks,
    delayed_io,
    delayed_read,
    device_array,
    emu,
    from_device,
    gated_stream,
    hip_stream,
    lost_first_write,
    random_bytes,
    random_file,
    to_device,
)
from hip import hip

import hipfile
from hipfile import AsyncIOHandle, Buffer, FileHandle, Stream, StreamFlags

N = 1 << 16


def test_read_async_round_trip(driver, data_file):
    path, data = data_file
    with device_array(N) as dev, hip_stream() as s, FileHandle(path, os.O_RDONLY) as fh, \
            Stream(s) as st:
        h = fh.read_async(dev, N, 0, 0, st)
        assert isinstance(h, AsyncIOHandle)
        assert h.wait() == N
        assert h.bytes_done == N
        assert h.done()
        assert np.array_equal(from_device(dev, N), data)


def test_write_async_round_trip(driver, tmp_path):
    data = random_bytes(N, seed=2)
    path = tmp_path / "out.bin"
    with device_array(N) as dev, hip_stream() as s, \
            FileHandle(path, os.O_RDWR | os.O_CREAT) as fh:
        to_device(dev, data)
        h = fh.write_async(Buffer(dev), N, 0, 0, s)
        got = h.result(timeout=10)
        if got != N:
            lost_first_write(got, (h.size, h.file_offset, h.buffer_offset), (N, 0, 0),
                             path.read_bytes(),
                             lambda: fh.write_async(Buffer(dev), N, 0, 0, s).result(timeout=10),
                             path, data.tobytes())
    assert path.read_bytes() == data.tobytes()


def test_null_stream_and_defaults(driver, data_file):
    path, data = data_file
    with device_array(N) as dev, FileHandle(path) as fh:
        h = fh.read_async(dev)  # whole buffer, offset 0, null stream
        assert h.wait() == N
        assert h.stream == 0
        assert np.array_equal(from_device(dev, N), data)


@pytest.mark.emulated
def test_completion_is_deferred(driver, data_file):
    path, data = data_file
    with delayed_read(path, N, 100_000) as (h, dev, _):
        assert h.bytes_done is None  # not yet valid
        assert not h.done()
        assert "pending" in repr(h)
        assert h.wait() == N
        assert "done" in repr(h)
        assert np.array_equal(from_device(dev, N), data)


@pytest.mark.emulated
def test_wait_timeout(driver, data_file):
    path, _ = data_file
    with delayed_read(path, N, 300_000) as (h, _, _):
        with pytest.raises(TimeoutError):
            h.wait(timeout=0.01)
        assert h.wait(timeout=30) == N


@pytest.mark.emulated
def test_dropped_handles_park_their_slots(driver, data_file):
    """Drop every handle before completion, collect, allocate more: no slot
    is reused while the library may still write it, and the data is right."""
    path, data = data_file
    chunk = 4096
    count = N // chunk  # 8 operations a stream
    # both streams wait at a flag until the checks are done: the operations
    # stay in flight however long the collection takes
    with device_array(N) as dev1, device_array(N) as dev2, gated_stream() as (s1, go1), \
            gated_stream() as (s2, go2), FileHandle(path) as fh, Stream(s1) as st1, \
            Stream(s2) as st2:
        handles = [
            fh.read_async(dev1 if i % 2 else dev2, chunk, i * chunk, i * chunk,
                          st1 if i % 2 else st2)
            for i in range(count)
        ]
        dropped = {int(h.slots) for h in handles}
        del handles
        gc.collect()
        stats = hipfile.pool_stats()
        assert stats["parked"] > 0, stats
        # new submissions while the old ones are in flight get other slots
        fresh = [fh.read_async(dev1, chunk, 0, 0, st1) for _ in range(64)]
        assert dropped.isdisjoint(int(h.slots) for h in fresh)
        assert fh.pending >= len(fresh)
        go1()
        go2()
        check(hip.hipStreamSynchronize(s1))
        check(hip.hipStreamSynchronize(s2))
        assert all(h.wait() == chunk for h in fresh)
        del fresh
        assert hipfile.async_io.pool_stats()["parked"] == 0
        got1, got2 = from_device(dev1, N), from_device(dev2, N)
        for i in range(count):
            got = got1 if i % 2 else got2
            sl = slice(i * chunk, (i + 1) * chunk)
            if i % 2 and i != 0:
                assert np.array_equal(got[sl], data[sl]), i
            elif not i % 2:
                assert np.array_equal(got[sl], data[sl]), i


@pytest.mark.emulated
def test_dropped_handle_keeps_file_alive(driver, data_file):
    path, data = data_file
    emu().set_completion_delay(50_000)
    with device_array(N) as dev, hip_stream() as s:
        fh = FileHandle(path).open()
        fh.read_async(dev, N, 0, 0, s)  # handle dropped at once
        with pytest.raises(hipfile.InFlightError):
            fh.close()
        check(hip.hipStreamSynchronize(s))
        fh.close()
        assert fh.closed
        assert np.array_equal(from_device(dev, N), data)


@pytest.mark.emulated
def test_close_and_deregister_refused_in_flight(driver, data_file):
    path, _ = data_file
    with delayed_io(path, N, 100_000) as (dev, s, fh):
        buf = Buffer(dev)
        buf.register()
        st = Stream(s)
        st.register()
        h = fh.read_async(buf, N, 0, 0, st)
        with pytest.raises(hipfile.InFlightError):
            fh.close()
        with pytest.raises(hipfile.InFlightError):
            buf.deregister()
        with pytest.raises(hipfile.InFlightError, match="in flight"):
            st.deregister()
        assert not fh.closed and buf.registered and st.registered
        assert h.wait() == N
        buf.deregister()
        st.deregister()
        assert fh.pending == 0 and buf.pending == 0


@pytest.mark.emulated
def test_slots_reread_at_execution(driver, data_file):
    """Non-FIXED slots changed after submit are used when the op runs."""
    path, data = data_file
    emu().set_completion_delay(100_000)
    with device_array(N) as dev, hip_stream() as s, FileHandle(path) as fh, Stream(s) as st:
        check(hip.hipMemset(dev, 0, N))
        h = fh.read_async(dev, 8192, 0, 0, st)
        h.size = 4096
        h.file_offset = 1000
        h.buffer_offset = 512
        with pytest.raises(ValueError, match="only shrink"):
            h.size = 8193
        assert h.wait() == 4096
        got = from_device(dev, N)
        assert np.array_equal(got[512:512 + 4096], data[1000:1000 + 4096])
        assert not got[:512].any() and not got[512 + 4096:].any()
        with pytest.raises(ValueError, match="completed"):
            h.size = 1


@pytest.mark.emulated
def test_fixed_slots_refused(driver, data_file):
    path, data = data_file
    emu().set_completion_delay(50_000)
    flags = StreamFlags.FIXED_FILE_SIZE | StreamFlags.FIXED_FILE_OFFSET
    with device_array(N) as dev, hip_stream() as s, FileHandle(path) as fh, \
            Stream(s, flags) as st:
        assert st.stream_flags == flags
        h = fh.read_async(dev, 4096, 4096, 0, st)
        assert h.stream_flags == int(flags)
        with pytest.raises(ValueError, match="FIXED"):
            h.size = 100
        with pytest.raises(ValueError, match="FIXED"):
            h.file_offset = 0
        h.buffer_offset = 4096  # not fixed: allowed
        assert h.wait() == 4096
        assert np.array_equal(from_device(dev, 4096, 4096), data[4096:8192])


@pytest.mark.emulated
def test_fixed_flags_found_for_int_streams(driver, data_file):
    path, _ = data_file
    emu().set_completion_delay(20_000)
    with device_array(N) as dev, hip_stream() as s, FileHandle(path) as fh, \
            Stream(s, StreamFlags.FIXED_BUF_OFFSET) as st:
        h = fh.read_async(dev, 4096, 0, 0, st.handle)  # upstream style: int handle
        with pytest.raises(ValueError, match="FIXED"):
            h.buffer_offset = 8
        assert h.wait() == 4096


@pytest.mark.emulated
def test_execution_error_raises_from_wait(driver, data_file):
    path, _ = data_file
    emu().inject_fault("read_async", errno.EIO)
    with device_array(N) as dev, hip_stream() as s, FileHandle(path) as fh:
        h = fh.read_async(dev, N, 0, 0, s)
        with pytest.raises(OSError, match="when the operation ran"):
            h.wait()
        assert h.bytes_done == -1


def test_growing_past_buffer_refused_before_submit(driver, data_file):
    path, _ = data_file
    # A handle kept alive elsewhere (an xfailed test's traceback) holds its
    # slot: count from what is in use now.
    base = hipfile.pool_stats()["in_use"]
    with device_array(N) as dev, FileHandle(path) as fh:
        with pytest.raises(ValueError, match="overruns"):
            fh.read_async(dev, N + 1, 0, 0, 0)
        with pytest.raises(ValueError, match="overruns"):
            fh.read_async(dev, N, 0, 1, 0)
        with pytest.raises(ValueError, match=">= 0"):
            fh.read_async(dev, 10, -1, 0, 0)
        with pytest.raises(TypeError, match="Buffer"):
            fh.read_async(int(dev), 10, 0, 0, 0)
        with pytest.raises(TypeError, match="stream"):
            fh.read_async(dev, 10, 0, 0, "stream")
        assert fh.pending == 0
    assert hipfile.pool_stats()["in_use"] == base


def test_closed_file_refused(driver, data_file):
    path, _ = data_file
    fh = FileHandle(path)
    with device_array(N) as dev:
        with pytest.raises(hipfile.ClosedFileError):
            fh.read_async(dev, 10, 0, 0, 0)
        with pytest.raises(RuntimeError):  # upstream raised RuntimeError
            fh.write_async(dev, 10, 0, 0, 0)


@pytest.mark.emulated  # AMD accepts only device memory; cuFile takes pinned host memory too
def test_library_rejection_at_submit_raises(driver, data_file):
    """Rejected submissions raise and give their slots back."""
    path, _ = data_file
    with hip_stream() as s, FileHandle(path) as fh:
        check(hip.hipStreamSynchronize(s))
        host = check(hip.hipHostMalloc(4096, 0))  # pinned host: not device memory
        try:
            before = hipfile.pool_stats()["in_use"]
            with pytest.raises(hipfile.HipFileException):
                fh.read_async(Buffer(host, 4096), 4096, 0, 0, s)
            assert hipfile.pool_stats()["in_use"] == before
        finally:
            check(hip.hipHostFree(host))


def test_record_event_orders_another_stream(driver, data_file):
    path, data = data_file
    with device_array(N) as dev, device_array(N) as dev2, hip_stream() as io, \
            hip_stream() as compute, FileHandle(path) as fh:
        if hipfile.platforms.active() == "emulated":
            emu().set_completion_delay(50_000)
        h = fh.read_async(dev, N, 0, 0, io)
        ev = h.record_event()
        assert h.record_event() is ev
        check(hip.hipStreamWaitEvent(compute, ev, 0))
        check(hip.hipMemcpyAsync(dev2, dev, N, hip.hipMemcpyKind.hipMemcpyDeviceToDevice,
                                 compute))
        check(hip.hipStreamSynchronize(compute))
        assert np.array_equal(from_device(dev2, N), data)
        assert h.wait() == N


def test_slots_pointer_exposes_values(driver):
    h = AsyncIOHandle(123, 456, 789)
    assert not h.submitted and h.bytes_done == 0
    addr = int(h.slots)
    vals = (ctypes.c_int64 * 4).from_address(addr)
    assert list(vals) == [123, 456, 789, 0]
    h.size = 5
    h.file_offset = 6
    assert list(vals)[:2] == [5, 6]
    assert type(h.slots).__name__ == "Pointer"
    with pytest.raises(ValueError):
        h.record_event()


def test_supports_async_has_no_side_effects(driver):
    before = hipfile.use_count()
    assert hipfile.supports_async() is True
    assert hipfile.use_count() == before
    if hipfile.platforms.active() == "emulated":
        assert emu().counters()["streams_registered"] == 0


# cuFile's compat mode (the cuda platform) aborts when several threads submit
# stream-ordered I/O to one stream at once; see docs/platform-cuda.md.
concurrent_submitters = pytest.mark.skipif(
    hipfile.platforms.active() == "cuda",
    reason="cuFile's compat mode aborts with concurrent stream-ordered submitters "
           "on one stream (docs/platform-cuda.md)")


@pytest.mark.parametrize("shared", [pytest.param(True, marks=concurrent_submitters), False],
                         ids=["shared-stream", "own-streams"])
def test_threads_stress(driver, tmp_path, shared):
    """16 threads x 1000 operations: correct data, no deadlock."""
    threads, ops, chunk = 16, 1000, 256
    path = tmp_path / "stress.bin"
    data = random_file(path, ops * chunk, seed=3)
    errors: list[BaseException] = []
    with FileHandle(path) as fh, hip_stream() as shared_stream:
        def work(t: int) -> None:
            try:
                with device_array(ops * chunk) as dev:
                    own = None if shared else check(hip.hipStreamCreate())
                    # a thread's own stream is registered, and deregistered
                    # before it is destroyed, as the ABI asks
                    raw = shared_stream if shared else own
                    stream = shared_stream if shared else Stream(own)
                    try:
                        if not shared:
                            stream.register()
                        hs = [fh.read_async(dev, chunk, i * chunk, i * chunk, stream)
                              for i in range(ops)]
                        del hs[::7]  # drop some before they complete
                        if t == 0:
                            gc.collect()
                        check(hip.hipStreamSynchronize(raw))
                        assert all(h.wait() == chunk for h in hs)
                        assert np.array_equal(from_device(dev, ops * chunk), data)
                    finally:
                        if own is not None:
                            check(hip.hipStreamSynchronize(own))
                            stream.deregister()
                            check(hip.hipStreamDestroy(own))
            except BaseException as exc:
                errors.append(exc)

        pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for th in pool:
            th.start()
        for th in pool:
            th.join(timeout=300)
        assert not any(th.is_alive() for th in pool), "deadlock"
        check(hip.hipStreamSynchronize(shared_stream))
    assert not errors, errors[:3]


@pytest.mark.emulated
def test_gil_released_while_waiting(driver, data_file):
    path, _ = data_file
    with delayed_read(path, N, 300_000) as (h, _, _):
        t = threading.Thread(target=h.wait)
        t.start()
        spins = 0
        end = time.monotonic() + 0.1
        while time.monotonic() < end:
            spins += 1
        t.join()
        assert spins > 1000
        assert h.bytes_done == N


def test_upstream_contract(driver, data_file):
    """Code written for upstream hipfile 0.4.0 runs unchanged."""
    path, data = data_file
    with device_array(N) as dev, hip_stream() as s:
        stream_handle = int(s)
        buf = Buffer(int(dev), N, 0)
        buf.register()
        fh = FileHandle(str(path), os.O_RDONLY)
        fh.open()
        with Stream(stream_handle) as st:
            handle = fh.read_async(buf, N, 0, 0, st.handle)
            check(hip.hipStreamSynchronize(s))
            assert handle.bytes_done == N
        fh.close()
        buf.deregister()
        assert np.array_equal(from_device(dev, N), data)


@pytest.mark.cufile_differs(
    "cuFile 1.15's compatibility mode leaves a stream it registered and deregistered "
    "(and a new stream at its address) writing nothing for unregistered buffers "
    "(docs/platform-cuda.md)")
def test_a_stream_registered_before_serves_unregistered_buffers(driver, data_file):
    """A stream that was registered and deregistered again, and a new stream
    created after it was destroyed, still move the bytes of a read into a
    buffer that is not registered, at an offset into the allocation
    as AMD's hipFile does."""
    path, data = data_file
    chunk = N // 16
    s = check(hip.hipStreamCreate())
    try:
        with device_array(N) as dev, FileHandle(path) as fh:
            with Stream(s):
                h = fh.read_async(Buffer(dev), N, 0, 0, s)
                assert h.wait() == N
            for k, fresh in enumerate((False, True)):
                if fresh:
                    check(hip.hipStreamDestroy(s))
                    s = None
                    s = check(hip.hipStreamCreate())
                check(hip.hipMemset(dev, 0, N))
                h = fh.read_async(Buffer(int(dev), 16), chunk, chunk * (k + 1), 5 * chunk, s)
                assert h.wait() == chunk
                got = from_device(dev, N)
                assert np.array_equal(got[5 * chunk:6 * chunk],
                                      data[chunk * (k + 1):chunk * (k + 2)]), fresh
                assert np.count_nonzero(got[:5 * chunk]) == 0
    finally:
        if s is not None:
            check(hip.hipStreamDestroy(s))


def test_reserve_pool_grows_the_pool_before_submissions(driver, data_file):
    """reserve_pool allocates the pages a burst of submissions would, so the
    burst allocates none; trim_pool frees them again."""
    path, data = data_file
    hipfile.trim_pool()
    before = hipfile.pool_stats()
    per_page = before["slots_per_page"]
    want = before["free"] + per_page + 1          # two more pages
    assert hipfile.reserve_pool(want) == 2
    reserved = hipfile.pool_stats()
    assert reserved["pages"] == before["pages"] + 2
    assert reserved["free"] >= want
    assert hipfile.reserve_pool(want) == 0        # already there
    assert hipfile.reserve_pool(0) == 0
    with pytest.raises(ValueError, match=r"^slots \d+ is out of range \(it must be below 2"):
        hipfile.reserve_pool(2**70)
    with device_array(N) as dev, hip_stream() as s, FileHandle(path) as fh:
        check(hip.hipMemset(dev, 0, N))
        buf = Buffer(dev)
        handles = [fh.read_async(buf, 16, 16 * i, 16 * i, s) for i in range(per_page + 1)]
        assert hipfile.pool_stats()["pages"] == reserved["pages"], "the burst allocated"
        counts = [h.wait() for h in handles]

        def again() -> np.ndarray:
            fh.read_async(buf, 16, 0, 0, s).wait()
            return from_device(dev, 16)

        check_chunks(counts, from_device(dev, 16 * len(handles)), data[:16 * len(handles)],
                     16, again)
        handles.clear()
    gc.collect()
    assert hipfile.trim_pool() >= 2
    assert hipfile.pool_stats()["pages"] <= before["pages"]


@concurrent_submitters
def test_pool_grows_safely_under_threads(driver, data_file):
    """Threads that grow the slot pool at once never get the same slot."""
    path, _ = data_file
    hipfile.trim_pool()
    per_thread, threads = 2500, 8  # about 10 pages, grown concurrently
    base = hipfile.pool_stats()["in_use"]
    results: list[list[AsyncIOHandle]] = [[] for _ in range(threads)]
    with device_array(N) as dev, hip_stream() as s, FileHandle(path) as fh:
        buf = Buffer(dev)

        def work(t: int) -> None:
            results[t] = [fh.read_async(buf, 16, 0, 0, s) for _ in range(per_thread)]

        pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for th in pool:
            th.start()
        for th in pool:
            th.join(timeout=120)
        handles = [h for r in results for h in r]
        assert len(handles) == per_thread * threads
        assert len({int(h.slots) for h in handles}) == len(handles)
        stats = hipfile.pool_stats()
        assert stats["in_use"] == base + len(handles)
        assert stats["pages"] * stats["slots_per_page"] == stats["in_use"] + stats["free"]
        check(hip.hipStreamSynchronize(s))
        assert all(h.wait() == 16 for h in handles)
        handles.clear()
        results.clear()
    assert hipfile.pool_stats()["in_use"] == base


def test_stream_collected_while_registered_warns_and_deregisters(driver):
    with hip_stream() as s:
        st = Stream(s)
        st.register()
        with pytest.warns(ResourceWarning, match=r" registered> was still registered"):
            del st
            gc.collect()
        with Stream(s) as again:  # the registration is gone: it registers anew
            assert again.registered
