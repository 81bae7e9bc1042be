"""The engine's staged data path: stream order on the submitting stream,
paged (scattered) blocks as one operation, the staging ring wrapping, and
failures that still release every stream."""

from __future__ import annotations

import ctypes
import errno
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import (
    assert_ranges_equal,
    check,
    device_array,
    from_device,
    held_stream,
    random_bytes,
    random_file,
    run_threads,
    scattered_blocks,
    to_device,
)
from hip import hip

import hipfile
from hipfile import FileHandle
from hipfile._lib import _hipfile

N = 1 << 20
BLOCK = 16 << 10


@pytest.fixture(autouse=True)
def staged() -> Iterator[None]:
    if hipfile.engine.mechanism() != "stream-memory-operations":
        pytest.skip("the staged path needs stream waits")
    yield
    _hipfile.engine_inject_faults()


@pytest.fixture
def stream(nb_stream: object) -> object:
    return nb_stream


@pytest.fixture
def data_file(tmp_path: Path) -> tuple[Path, np.ndarray]:
    path = tmp_path / "data.bin"
    data = random_file(path, N, seed=23)
    return path, data


def _copy_back_on(stream: object, dev: object, nbytes: int) -> np.ndarray:
    """Enqueue a copy of ``dev`` into pinned host memory on ``stream``,
    synchronize the stream, and return what the copy saw."""
    host = check(hip.hipHostMalloc(nbytes, 0))
    try:
        check(hip.hipMemcpyAsync(host, dev, nbytes, hip.hipMemcpyKind.hipMemcpyDeviceToHost,
                                 stream))
        check(hip.hipStreamSynchronize(stream))
        return np.frombuffer((ctypes.c_uint8 * nbytes).from_address(int(host)),
                             np.uint8).copy()
    finally:
        check(hip.hipHostFree(host))


def test_later_work_on_the_stream_sees_the_bytes(data_file, stream):
    """As after read_async: a copy enqueued on the submitting stream after
    pread_async sees the bytes, even when the file I/O is slow."""
    path, data = data_file
    _hipfile.engine_inject_faults(short_max=4096)     # many small calls: a slow read
    with device_array(N) as dev, FileHandle(path) as fh:
        check(hip.hipMemset(dev, 0, N))
        h = fh.pread_async(dev, N, 0, 0, stream)
        assert h.data_path == "staged"
        got = _copy_back_on(stream, dev, N)
        assert np.array_equal(got, data)
        assert h.wait(timeout=30) == N


def test_later_work_may_reuse_a_written_buffer(tmp_path, stream):
    """After pwrite_async, work on the same stream may overwrite the buffer:
    the file holds what the buffer held at the submit point."""
    data = random_bytes(N, seed=29)
    path = tmp_path / "w.bin"
    _hipfile.engine_inject_faults(short_max=4096)
    with device_array(N) as dev, FileHandle(path, os.O_RDWR | os.O_CREAT) as fh:
        to_device(dev, data)
        h = fh.pwrite_async(dev, N, 0, 0, stream)
        check(hip.hipMemsetAsync(dev, 0, N, stream))      # reuse at once, in stream order
        assert h.wait(timeout=30) == N
    assert path.read_bytes() == data.tobytes()


def test_a_read_after_a_write_in_stream_order_sees_it(tmp_path, stream):
    """A write that extends a new file, then a read of the same bytes on the
    same stream: the read sees what the write wrote (its size is not cut at
    the file's size when it was submitted)."""
    data = random_bytes(N, seed=47)
    path = tmp_path / "new.bin"
    _hipfile.engine_inject_faults(short_max=4096)      # the write takes a while
    with device_array(N) as src, device_array(N) as dst, \
            FileHandle(path, os.O_RDWR | os.O_CREAT) as fh:
        to_device(src, data)
        w = fh.pwrite_async(src, N, 0, 0, stream)
        r = fh.pread_async(dst, N, 0, 0, stream)
        assert w.wait(timeout=30) == N
        assert r.wait(timeout=30) == N
        assert np.array_equal(from_device(dst, N), data)


def test_unordered_leaves_the_stream_free(data_file, stream):
    """ordered=False: the submitting stream goes on at once; the bytes are
    there for streams that wait_on the handle."""
    path, data = data_file
    other = check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    ev = check(hip.hipEventCreateWithFlags(hip.hipEventDisableTiming))
    try:
        with device_array(N) as dev, FileHandle(path) as fh:
            _hipfile.engine_inject_faults(short_max=1)    # a read that crawls
            h = fh.pread_async(dev, N, 0, 0, stream, ordered=False)
            check(hip.hipEventRecord(ev, stream))
            deadline = time.monotonic() + 10
            while hip.hipEventQuery(ev)[0] != hip.hipError_t.hipSuccess:
                assert time.monotonic() < deadline, "the stream waited for the read"
                time.sleep(0.005)
            assert not h.done()
            _hipfile.engine_inject_faults()
            h.wait_on(other)
            got = _copy_back_on(other, dev, N)
            assert np.array_equal(got, data)
            assert h.wait(timeout=30) == N
    finally:
        check(hip.hipEventDestroy(ev))
        check(hip.hipStreamDestroy(other))


@pytest.fixture(params=["batched", "one-by-one"])
def copy_calls(request):
    """The staged path's copies as one hipMemcpyBatchAsync per chunk (where
    the runtime has it) and as one hipMemcpyAsync per block."""
    with hipfile.defaults.set("engine_batch_copies", request.param == "batched"):
        if request.param == "batched" and not _hipfile.engine_batch_copies():
            pytest.skip("the runtime has no hipMemcpyBatchAsync")
        yield request.param


def test_scatter_reads_paged_blocks_as_one_operation(tmp_path, stream, copy_calls):
    """A layer of a paged KV cache: 256 blocks, contiguous in the file,
    scattered (permuted) over the device buffer; one handle, one wait."""
    nblocks = 256
    path = tmp_path / "kv.bin"
    data = random_file(path, nblocks * BLOCK, seed=31)
    ranges = scattered_blocks(nblocks, BLOCK, seed=5)
    with device_array(nblocks * BLOCK) as dev, FileHandle(path) as fh:
        h = fh.pread_async_scatter(dev, ranges, stream)
        assert h.ranges == nblocks and h.size == nblocks * BLOCK
        assert h.calls <= 1 + (nblocks * BLOCK) // hipfile.defaults.engine_task_size()
        got = _copy_back_on(stream, dev, nblocks * BLOCK)
        assert h.wait(timeout=30) == nblocks * BLOCK
        assert_ranges_equal(got, data, ranges)
        task = hipfile.defaults.engine_task_size()
        assert h.calls == -(-nblocks * BLOCK // task), \
            "blocks contiguous in the file take one read per chunk"


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32])
def test_ranges_as_an_integer_array(tmp_path, stream, dtype):
    """A block table as numpy computes it: an (N, 3) integer array of
    ``(size, file_offset, buffer_offset)`` rows, for the scatter form and
    the one-handle-per-range form alike."""
    nblocks = 64
    path = tmp_path / "kv.bin"
    data = random_file(path, nblocks * BLOCK, seed=41)
    ranges = scattered_blocks(nblocks, BLOCK, seed=9)
    table = np.array(ranges, dtype=dtype)
    with device_array(nblocks * BLOCK) as dev, FileHandle(path) as fh:
        h = fh.pread_async_scatter(dev, table, stream)
        assert h.ranges == nblocks
        assert h.wait(timeout=30) == nblocks * BLOCK
        assert_ranges_equal(from_device(dev, nblocks * BLOCK), data, ranges)
        check(hip.hipMemset(dev, 0, nblocks * BLOCK))
        hs = fh.pread_async_ranges(dev, table[:8], stream)
        assert [x.wait(timeout=30) for x in hs] == [BLOCK] * 8
        assert [(x.size, x.file_offset, x.buffer_offset) for x in hs] == ranges[:8]
        assert_ranges_equal(from_device(dev, nblocks * BLOCK), data, ranges[:8])


def test_an_array_of_ranges_is_checked_as_tuples_are(data_file, stream):
    """Every row is checked before anything is submitted, with the message a
    tuple gets; an array of another kind or shape is refused by name."""
    path, _ = data_file
    good = [(4096, 0, 0), (4096, 4096, 8192)]
    with device_array(N) as dev, FileHandle(path) as fh:
        cases = [
            (np.array([*good, (4096, -1, 0)]), ValueError, "file_offset must be >= 0"),
            (np.array([*good, (-5, 0, 0)]), ValueError, "size must be >= 0"),
            (np.array([*good, (8192, 0, N - 4096)]), ValueError, "overruns the"),
            (np.array([*good, (1, 0, N + 1)]), ValueError, "is past the"),
            (np.array([(1 << 63, 0, 0)], dtype=np.uint64), ValueError, "below 2\\*\\*63"),
            (np.array(good, dtype=np.float64), TypeError, "must hold integers"),
            (np.array(good, dtype=bool), TypeError, "must hold integers"),
            (np.zeros((2, 2), dtype=np.int64), ValueError, "shape \\(N, 3\\)"),
            (np.zeros(6, dtype=np.int64), ValueError, "shape \\(N, 3\\)"),
        ]
        for table, exc, message in cases:
            with pytest.raises(exc, match=message):
                fh.pread_async_scatter(dev, table, stream)
            with pytest.raises(exc, match=message):
                fh.pread_async_ranges(dev, table, stream)
        # tuples: the same words, and other 3-sequences and integer types pass
        with pytest.raises(ValueError, match="file_offset must be >= 0"):
            fh.pread_async_scatter(dev, [*good, (4096, -1, 0)], stream)
        with pytest.raises(TypeError, match="each range must be a"):
            fh.pread_async_scatter(dev, [*good, (4096, 0)], stream)
        h = fh.pread_async_scatter(dev, iter([[4096, 0, 0], (np.int32(4096), 4096, 8192),
                                              (None, N - 4096, N - 4096)]), stream)
        assert h.wait(timeout=30) == 3 * 4096
        assert fh.pread_async_ranges(dev, np.zeros((0, 3), np.int64), stream) == []
        with pytest.raises(ValueError, match="at least one range"):
            fh.pread_async_scatter(dev, np.zeros((0, 3), np.int64), stream)
        with pytest.raises(ValueError, match="at least one range"):
            fh.pwrite_async_gather(dev, [], stream)


def test_gather_writes_paged_blocks_and_reads_them_back(tmp_path, stream, copy_calls):
    nblocks = 64
    data = random_bytes(nblocks * BLOCK, seed=37)
    ranges = scattered_blocks(nblocks, BLOCK, seed=7)
    path = tmp_path / "kv.bin"
    with device_array(nblocks * BLOCK) as dev, device_array(nblocks * BLOCK) as back, \
            FileHandle(path, os.O_RDWR | os.O_CREAT) as fh:
        to_device(dev, data)
        h = fh.pwrite_async_gather(dev, ranges, stream)
        assert h.wait(timeout=30) == nblocks * BLOCK
        file = np.frombuffer(path.read_bytes(), np.uint8)
        assert_ranges_equal(data, file, ranges)
        h2 = fh.pread_async_scatter(back, ranges, stream)
        assert h2.wait(timeout=30) == nblocks * BLOCK
        assert np.array_equal(from_device(back, nblocks * BLOCK), data)


@pytest.fixture
def small_ring() -> Iterator[None]:
    """A staging ring of 1 MiB (four slots), so that submissions wrap it."""
    hipfile.trim_pool()
    with hipfile.defaults.set(engine_staging_size=1 << 20):
        hipfile.trim_pool()
        yield
        hipfile.trim_pool()


def test_submissions_larger_than_the_ring(tmp_path, stream, small_ring):
    size = 6 << 20
    path = tmp_path / "big.bin"
    data = random_file(path, size, seed=41)
    out = tmp_path / "copy.bin"
    with device_array(size) as dev, FileHandle(path) as fh, \
            FileHandle(out, os.O_RDWR | os.O_CREAT) as fo:
        hs = fh.pread_async_ranges(dev, [(size // 3, i * size // 3, i * size // 3)
                                         for i in range(3)], stream, task_size=256 << 10)
        assert hipfile.engine.info()["devices"][0]["staging_bytes"] == 1 << 20
        w = fo.pwrite_async(dev, size, 0, 0, stream, task_size=300_000)
        assert sum(h.wait(timeout=60) for h in hs) == size
        assert w.wait(timeout=60) == size
    assert out.read_bytes() == data.tobytes()


@pytest.mark.parametrize(("total", "task", "layout"), [
    (64 << 20, 2 << 20, (2 << 20, 32)),        # the defaults: 32 slots of one task
    (64 << 20, 16 << 20, (8 << 20, 8)),        # at most 8 MiB a slot
    (64 << 20, 1000, (64 << 10, 1024)),        # at least 64 KiB, whole pages
    ((1 << 20) + 1, 2 << 20, (256 << 10, 4)),  # halved until 4 slots fit
    (1 << 20, 3 << 20, (192 << 10, 5)),
    (1 << 20, (1 << 20) + (12 << 10), (256 << 10, 4)),   # whole pages when halved
    (64 << 20, (1 << 20) + 1, ((1 << 20) + 4096, 63)),
])
def test_ring_layout(total, task, layout):
    assert _hipfile.ring_layout(total, task) == layout


def test_ring_slots_follow_the_engine_task_size(tmp_path, stream):
    """A ring is made in slots of engine_task_size; a call's larger
    task_size is cut to a slot, and the bytes are the file's."""
    size = 3 << 20
    path = tmp_path / "slots.bin"
    data = random_file(path, size, seed=43)
    hipfile.trim_pool()
    with hipfile.defaults.set(engine_task_size=512 << 10, engine_staging_size=4 << 20):
        hipfile.trim_pool()
        try:
            with device_array(size) as dev, FileHandle(path) as fh:
                h = fh.pread_async(dev, size, 0, 0, stream, task_size=2 << 20)
                made = hipfile.engine.info()["devices"][0]
                assert made["staging_slot_bytes"] == 512 << 10
                assert made["staging_bytes"] == 4 << 20
                assert h.wait(timeout=60) == size
                assert np.array_equal(from_device(dev, size), data)
        finally:
            hipfile.trim_pool()


def test_reads_stop_at_the_end_of_the_file(data_file, stream):
    path, data = data_file
    with device_array(2 * N) as dev, FileHandle(path) as fh:
        check(hip.hipMemset(dev, 0xAB, 2 * N))
        h = fh.pread_async(dev, 2 * N, 0, 0, stream)
        assert h.wait(timeout=30) == N
        got = from_device(dev, 2 * N)
        assert np.array_equal(got[:N], data)
        assert (got[N:] == 0xAB).all(), "bytes past the end of the file were written"


def test_a_failed_read_releases_its_streams_and_leaks_no_stale_bytes(data_file, stream):
    """Every chunk of a failed read is still released to the stream (no
    stream waits forever), and the device never receives another
    operation's staging bytes."""
    path, _ = data_file
    other = check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    try:
        with device_array(N) as dev, FileHandle(path) as fh:
            first = fh.pread_async(dev, N, 0, 0, stream)     # fills the staging slots
            assert first.wait(timeout=30) == N
            check(hip.hipMemset(dev, 0, N))
            _hipfile.engine_inject_faults(errno.EIO, count=1000)
            h = fh.pread_async(dev, N, 0, 0, stream)
            h.wait_on(other)
            check(hip.hipStreamSynchronize(other))
            with pytest.raises(OSError) as info:
                h.wait(timeout=30)
            assert info.value.errno == errno.EIO
            assert not from_device(dev, N).any(), "stale staging bytes reached the device"
    finally:
        check(hip.hipStreamDestroy(other))


def test_a_failed_write_reports_and_frees_the_ring(tmp_path, stream):
    data = random_bytes(N, seed=43)
    path = tmp_path / "w.bin"
    with device_array(N) as dev, FileHandle(path, os.O_RDWR | os.O_CREAT) as fh:
        to_device(dev, data)
        _hipfile.engine_inject_faults(errno.ENOSPC, count=1000)
        h = fh.pwrite_async(dev, N, 0, 0, stream)
        with pytest.raises(OSError) as info:
            h.wait(timeout=30)
        assert info.value.errno == errno.ENOSPC
        _hipfile.engine_inject_faults()
        # the ring goes on serving
        assert fh.pwrite_async(dev, N, 0, 0, stream).wait(timeout=30) == N
    assert path.read_bytes() == data.tobytes()


def test_wait_times_out_while_another_thread_is_inside_a_device_free(data_file, stream):
    """A wait polls host memory only: it returns at its timeout while
    another thread is blocked inside hipFree (a device-wide synchronisation,
    here held up by a stream that a host flag blocks)."""
    path, _ = data_file
    flag = check(hip.hipHostMalloc(4, 0))
    ctypes.c_uint32.from_address(int(flag)).value = 0
    blocker = check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    libhip = ctypes.CDLL(_runtime_path())
    libhip.hipFree.argtypes = [ctypes.c_void_p]
    victim = check(hip.hipMalloc(4096))
    try:
        with device_array(N) as dev, FileHandle(path) as fh:
            check(hip.hipStreamWaitValue32(blocker, flag, 1, 0, 0xFFFFFFFF))
            check(hip.hipStreamWaitValue32(stream, flag, 1, 0, 0xFFFFFFFF))
            h = fh.pread_async(dev, N, 0, 0, stream)       # gated behind the flag
            freeing = threading.Thread(target=libhip.hipFree, args=(int(victim),))
            freeing.start()                                # blocks: the device is busy
            time.sleep(0.2)
            assert freeing.is_alive()
            t0 = time.monotonic()
            with pytest.raises(TimeoutError):
                h.wait(timeout=0.3)
            assert time.monotonic() - t0 < 5
            ctypes.c_uint32.from_address(int(flag)).value = 1
            freeing.join(30)
            assert not freeing.is_alive()
            assert h.wait(timeout=30) == N
    finally:
        ctypes.c_uint32.from_address(int(flag)).value = 1
        check(hip.hipStreamSynchronize(blocker))
        check(hip.hipStreamDestroy(blocker))
        check(hip.hipHostFree(flag))


def _runtime_path() -> str:
    from hipfile import platforms

    active = platforms.active()
    if active is None:
        pytest.skip("needs a test platform's runtime")
    return str(platforms.prefix(active) / "lib" / "libamdhip64.so")


@pytest.fixture
def copy_streams() -> Iterator[None]:
    """The copies spread over three streams of the device."""
    hipfile.trim_pool()
    with hipfile.defaults.set(engine_copy_streams=3, engine_staging_size=2 << 20):
        hipfile.trim_pool()
        yield
        hipfile.trim_pool()


def test_copies_spread_over_several_streams(tmp_path, stream, copy_streams):
    """With several copy streams: scattered blocks, many ranges and a write
    all move the right bytes, later work on the stream sees them, and each
    range still completes on its own."""
    nblocks = 256
    path = tmp_path / "kv.bin"
    data = random_file(path, nblocks * BLOCK, seed=53)
    blocks = scattered_blocks(nblocks, BLOCK, seed=9)
    size = nblocks * BLOCK
    with device_array(size) as dev, device_array(size) as dev2, FileHandle(path) as fh:
        _hipfile.engine_inject_faults(short_max=8192)
        h = fh.pread_async_scatter(dev, blocks, stream, task_size=64 << 10)
        got = _copy_back_on(stream, dev, size)                 # ordered after the copies
        assert h.wait(timeout=30) == size
        assert_ranges_equal(got, data, blocks)
        _hipfile.engine_inject_faults()
        layers = [(size // 8, k * size // 8, (7 - k) * size // 8) for k in range(8)]
        hs = fh.pread_async_ranges(dev2, layers, stream, task_size=64 << 10)
        assert [x.wait(timeout=30) for x in hs] == [size // 8] * 8
        got2 = _copy_back_on(stream, dev2, size)
        for k in range(8):
            assert np.array_equal(got2[(7 - k) * size // 8:(8 - k) * size // 8],
                                  data[k * size // 8:(k + 1) * size // 8]), f"range {k}"
    out = tmp_path / "out.bin"
    with device_array(size) as src, FileHandle(out, os.O_RDWR | os.O_CREAT) as fo:
        to_device(src, data)
        assert fo.pwrite_async(src, size, 0, 0, stream, task_size=64 << 10).wait(30) == size
    assert out.read_bytes() == data.tobytes()


def test_trim_keeps_the_flags_of_live_handles(data_file, stream):
    """trim_pool() frees the engine's flag pages only when no handle holds a
    flag: a handle whose range finished but was not yet observed still reads
    its completion flag."""
    path, _ = data_file
    with device_array(N) as dev, FileHandle(path) as fh:
        h = fh.pread_async(dev, N, 0, 0, stream)
        check(hip.hipStreamSynchronize(stream))
        deadline = time.monotonic() + 10
        while hipfile.engine.info()["outstanding"] and time.monotonic() < deadline:
            time.sleep(0.01)
        hipfile.trim_pool()
        assert hipfile.engine.info()["devices"], "the flag pool was freed under a live handle"
        assert h.wait(timeout=30) == N


def test_trim_right_after_a_write_frees_no_slot_in_use(tmp_path, stream):
    """A staged write is done once its file writes are; the engine's thread
    releases the staging slot before that, so a trim_pool() right after the
    wait never frees ring memory a thread is about to store into. The
    emulated runtime maps freed pinned memory inaccessible, so such a store
    is a crash: before the fix, 6 of 6 runs of this loop crashed with other
    work on the machine's two cores."""
    data = random_bytes(64 << 10, seed=21)
    out = tmp_path / "w.bin"
    with device_array(64 << 10) as src, FileHandle(out, os.O_RDWR | os.O_CREAT) as fo, \
            hipfile.defaults.set("engine_staging_size", 1 << 20):   # a ring made quickly
        to_device(src, data)
        for _ in range(2000):
            assert fo.pwrite_async(src, 64 << 10, 0, 0, stream).wait(30) == 64 << 10
            hipfile.trim_pool()
            assert not hipfile.engine.info()["devices"], "trim_pool kept the engine's memory"
    assert out.read_bytes() == data.tobytes()


def test_a_descriptor_flags_are_read_once_per_open(driver, tmp_path, monkeypatch):
    """The staged path asks whether the file's descriptor has ``O_DIRECT``
    (an ``fcntl``) once per open, not at each submission; a reopen asks
    again."""
    from hipfile.file import _descriptors as _handle  # where Descriptors.posix asks

    calls = []
    real = _handle.is_direct

    def counting(fd: int) -> bool:
        calls.append(fd)
        return real(fd)

    monkeypatch.setattr(_handle, "is_direct", counting)
    path = tmp_path / "f.bin"
    data = random_file(path, 1 << 16, seed=3)
    fh = FileHandle(path)
    with device_array(1 << 16) as dev:
        for _ in range(2):
            fh.open()
            for i in range(3):
                assert fh.pread_async(dev, 4096, i * 4096, i * 4096).wait(30) == 4096
            fh.close()
        assert np.array_equal(from_device(dev, 3 * 4096), data[:3 * 4096])
    assert len(calls) == 2


# ---- read chunks in batches (engine_copy_batch > 1): one stream wait per
# batch, and every byte still the file's

TASK = 64 << 10


@pytest.fixture(params=[(1, 1), (4, 1), (6, 1), (8, 1), (4, 3), (64, 1)],
                ids=["batch1", "batch4", "batch6-wraps", "batch8", "batch4-streams3",
                     "batch-half-ring"])
def batched(request) -> Iterator[int]:
    """A ring of 16 slots of 64 KiB whose read chunks go in batches."""
    batch, streams = request.param
    hipfile.trim_pool()
    with hipfile.defaults.set(engine_copy_batch=batch, engine_copy_streams=streams,
                              engine_task_size=TASK, engine_staging_size=1 << 20):
        hipfile.trim_pool()
        yield batch
        hipfile.trim_pool()


def _stream_waits() -> int:
    return sum(d["stream_waits"] for d in hipfile.engine.info()["devices"].values())


def _stream_calls() -> int:
    return sum(d["stream_calls"] for d in hipfile.engine.info()["devices"].values())


@pytest.mark.parametrize(("batch", "batch_copies", "per_range"),
                         [(1, True, 25), (8, False, 18), (8, True, 4)],
                         ids=["one-by-one", "batch8-unbatched-calls", "batch8"])
def test_runtime_calls_per_layer(tmp_path, stream, batch, batch_copies, per_range):
    """The runtime calls that enqueue a layer's stream side (8 chunks and its
    completion): one by one, 3 per chunk; in a batch, one wait, then one copy
    and one slot write per chunk, or, where the runtime batches calls, one
    hipMemcpyBatchAsync and one hipMemsetD32Async for the batch."""
    size = 4 << 20
    path = tmp_path / "layers.bin"
    data = random_file(path, size, seed=79)
    hipfile.trim_pool()
    with hipfile.defaults.set(engine_copy_batch=batch, engine_copy_streams=1,
                              engine_batch_copies=batch_copies,
                              engine_task_size=TASK, engine_staging_size=1 << 20):
        hipfile.trim_pool()
        if batch_copies and not _hipfile.engine_batch_copies():
            pytest.skip("the runtime has no hipMemcpyBatchAsync")
        try:
            with device_array(size) as dev, FileHandle(path) as fh:
                layers = [(size // 8, k * size // 8, k * size // 8) for k in range(8)]
                for _ in range(2):      # the second time round, the ring has wrapped
                    calls = _stream_calls()
                    hs = fh.pread_async_ranges(dev, layers, stream)
                    assert [h.wait(timeout=60) for h in hs] == [size // 8] * 8
                    assert _stream_calls() - calls == 8 * per_range
                    assert np.array_equal(from_device(dev, size), data)
                    check(hip.hipMemset(dev, 0, size))
        finally:
            hipfile.trim_pool()


def test_layers_and_scattered_blocks(tmp_path, stream, batched):
    """Many ranges (a batch ends where a range does), scattered blocks and
    one range larger than the ring, each with short file calls, move the
    file's bytes, and later work on the stream sees them."""
    size = 4 << 20
    path = tmp_path / "kv.bin"
    data = random_file(path, size, seed=71)
    with device_array(size) as dev, FileHandle(path) as fh:
        _hipfile.engine_inject_faults(short_max=12288)
        layers = [(size // 8, k * size // 8, (7 - k) * size // 8) for k in range(8)]
        waits = _stream_waits()
        hs = fh.pread_async_ranges(dev, layers, stream)
        assert [h.wait(timeout=60) for h in hs] == [size // 8] * 8
        # each range is 8 chunks of the task size; the ring has 16 slots, so
        # batches hold at most 8
        per_range = -(-(size // 8 // TASK) // min(batched, 8))
        assert _stream_waits() - waits == 8 * per_range
        got = from_device(dev, size)
        for k in range(8):
            assert np.array_equal(got[(7 - k) * size // 8:(8 - k) * size // 8],
                                  data[k * size // 8:(k + 1) * size // 8]), f"range {k}"
        check(hip.hipMemset(dev, 0, size))
        blocks = scattered_blocks(size // BLOCK, BLOCK, seed=5)
        h = fh.pread_async_scatter(dev, blocks, stream)
        assert h.wait(timeout=60) == size
        assert_ranges_equal(from_device(dev, size), data, blocks)
        check(hip.hipMemset(dev, 0, size))
        assert fh.pread_async(dev, size, 0, 0, stream).wait(timeout=60) == size
        assert np.array_equal(from_device(dev, size), data)


def test_a_failed_batch_releases_its_stream_and_the_ring(tmp_path, stream, batched):
    """A read whose file calls fail reports the error, leaves no stale
    staging bytes in device memory and frees every slot: the next reads of
    the ring move the right bytes."""
    size = 2 << 20
    path = tmp_path / "d.bin"
    data = random_file(path, size, seed=73)
    with device_array(size) as dev, FileHandle(path) as fh:
        assert fh.pread_async(dev, size, 0, 0, stream).wait(timeout=60) == size
        check(hip.hipMemset(dev, 0, size))
        _hipfile.engine_inject_faults(errno.EIO, count=3, after=5)
        with pytest.raises(OSError) as info:
            fh.pread_async(dev, size, 0, 0, stream).wait(timeout=60)
        assert info.value.errno == errno.EIO
        _hipfile.engine_inject_faults()
        check(hip.hipStreamSynchronize(stream))
        got = from_device(dev, size)
        # every byte is the file's or still zero: no other chunk's staging bytes
        assert ((got == data) | (got == 0)).all(), "stale staging bytes reached the device"
        for _ in range(3):
            hs = fh.pread_async_ranges(dev, [(size // 2, 0, size // 2), (size // 2, size // 2, 0)],
                                       stream)
            assert [h.wait(timeout=60) for h in hs] == [size // 2] * 2
        got = from_device(dev, size)
        assert np.array_equal(got[size // 2:], data[:size // 2])
        assert np.array_equal(got[:size // 2], data[size // 2:])
    assert hipfile.engine.info()["outstanding"] == 0


def test_the_setting_is_checked():
    with pytest.raises(ValueError):
        with hipfile.defaults.set(engine_copy_batch=0):
            pass
    with pytest.raises(ValueError):
        with hipfile.defaults.set(engine_copy_batch=65):
            pass


@pytest.mark.parametrize("batch_copies", [True, False], ids=["batched-calls", "one-by-one"])
def test_a_lone_split_range_is_one_batch(tmp_path, stream, batch_copies):
    """A lone read range cut below the default task (one chunk per thread,
    read at once) on a busy stream shares one stream wait: with batched
    runtime calls its stream side is 4 calls (wait, copy batch, slot
    release, completion) instead of 3 per chunk and the completion; a range
    of default tasks, or one given a task size that cuts it into more
    chunks than the engine splits a lone range into, keeps one wait per
    chunk. The bytes are the file's either way."""
    size = 2 << 20
    path = tmp_path / "lone.bin"
    data = random_file(path, 4 * size, seed=83)
    hipfile.trim_pool()
    with hipfile.defaults.set(engine_copy_batch=1, engine_copy_streams=1, engine_threads=4,
                              engine_batch_copies=batch_copies, engine_task_size=size):
        hipfile.trim_pool()
        if batch_copies and not _hipfile.engine_batch_copies():
            pytest.skip("the runtime has no hipMemcpyBatchAsync")

        def read_held(length: int, offset: int = 0, **kw: Any) -> tuple[int, int]:
            with held_stream(stream) as release:   # a submission finds it busy
                calls, waits = _stream_calls(), _stream_waits()
                h = fh.pread_async(dev, length, offset, 0, stream, **kw)
                release()
            assert h.wait(timeout=60) == length
            return _stream_calls() - calls, _stream_waits() - waits

        try:
            with device_array(4 * size) as dev, FileHandle(path) as fh:
                for offset in (0, size + 4096):      # the second from an unaligned offset
                    calls, waits = read_held(size, offset)
                    assert waits == 1                # 4 chunks of 512 KiB, one wait
                    if batch_copies:
                        assert calls - 1 <= 4        # (and the gate's flag write)
                    assert np.array_equal(from_device(dev, size), data[offset:offset + size])
                    check(hip.hipMemset(dev, 0, size))
                assert read_held(4 * size)[1] == 4     # default tasks: one wait each
                assert read_held(size, task_size=128 << 10)[1] == 16   # more than a split
                assert np.array_equal(from_device(dev, 4 * size), data)
        finally:
            hipfile.trim_pool()


@pytest.mark.parametrize("size", [4 << 20, 2 << 20, 1 << 20])
def test_a_small_lone_read_on_an_idle_stream_is_read_first(tmp_path, stream, size):
    """A lone read of at most 4 MiB on an idle stream, handed to idle
    workers, is read before its copies are enqueued: no stream wait at all
    (its copies, its slots' release and its completion only), whatever the
    chunks; the bytes are the file's, and later work on the stream sees
    them; so is ``pread``'s (waited for at once). A read ahead
    (``ordered=False``), a larger one, or one on a busy stream waits on the
    stream as before."""
    path = tmp_path / "first.bin"
    data = random_file(path, 3 * (4 << 20), seed=89)
    # written back and read once: a page under writeback makes a no-wait
    # read of the page cache (RWF_NOWAIT) give up, and the read go the
    # workers' way, which waits on the stream
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        assert len(os.pread(fd, data.nbytes, 0)) == data.nbytes
    finally:
        os.close(fd)
    hipfile.trim_pool()
    with hipfile.defaults.set(engine_copy_streams=1, engine_threads=4):
        hipfile.trim_pool()
        try:
            with device_array(3 * (4 << 20)) as dev, FileHandle(path) as fh:
                for offset, task in ((0, None), (4096 + 8, None), (size, 128 << 10)):
                    check(hip.hipStreamSynchronize(stream))
                    waits = _stream_waits()
                    h = fh.pread_async(dev, size, offset, 0, stream, task_size=task)
                    got = _copy_back_on(stream, dev, size)
                    assert np.array_equal(got, data[offset:offset + size]), (offset, task)
                    assert h.wait(timeout=60) == size
                    assert _stream_waits() - waits == 0, (offset, task)
                    check(hip.hipMemset(dev, 0, size))
                waits = _stream_waits()
                assert fh.pread(dev, size, 0).result(timeout=60) == size
                assert _stream_waits() - waits == 0        # pread, waited for at once: the same
                assert np.array_equal(from_device(dev, size), data[:size])
                waits = _stream_waits()
                h = fh.pread_async(dev, size, 0, 0, stream, ordered=False)
                assert h.wait(timeout=60) == size
                assert _stream_waits() - waits >= 1        # a read ahead returns at once
                waits = _stream_waits()
                assert fh.pread_async(dev, 8 << 20, 0, 0, stream).wait(timeout=60) == 8 << 20
                assert _stream_waits() - waits >= 1        # over 4 MiB: waits on the stream
                with held_stream(stream) as release:
                    waits = _stream_waits()
                    h = fh.pread_async(dev, size, 0, 0, stream)
                    release()
                assert h.wait(timeout=60) == size
                assert _stream_waits() - waits >= 1        # a busy stream: the same
                assert np.array_equal(from_device(dev, size), data[:size])
                before = _hipfile.engine_read_first_max(0)   # the rule off (benchmarks)
                try:
                    waits = _stream_waits()
                    assert fh.pread_async(dev, size, 0, 0, stream).wait(timeout=60) == size
                    assert _stream_waits() - waits >= 1
                finally:
                    assert _hipfile.engine_read_first_max(before) == 0
                with pytest.raises(ValueError):
                    _hipfile.engine_read_first_max(-1)
                assert _hipfile.engine_read_first_max() == before == 4 << 20
        finally:
            hipfile.trim_pool()


def test_lone_reads_of_many_threads_share_a_small_ring(tmp_path):
    """Threads on their own streams each make lone reads of 1 to 4 MiB, the
    size read before their copies are enqueued when the workers are idle,
    ``pread`` (the engine's one stream, shared by the threads) and
    ``pread_async``, through a ring of 4 MiB that their slots wrap around
    many times: none waits for another forever (a read-first wait that let
    other submissions enqueue their stream sides meanwhile deadlocks here),
    every read gets its own bytes and nothing is left in flight."""
    path = tmp_path / "lone.bin"
    size = 24 << 20
    data = random_file(path, size, seed=97)
    errors: list[BaseException] = []
    hipfile.trim_pool()
    with hipfile.defaults.set(engine_staging_size=4 << 20, engine_task_size=512 << 10,
                              engine_threads=3):
        hipfile.trim_pool()
        try:
            with FileHandle(path) as fh:
                def worker(k: int) -> None:
                    s = check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
                    rng = np.random.default_rng(k)
                    try:
                        with device_array(4 << 20) as dev:
                            for _ in range(12):
                                n = int(rng.integers(1, 5)) << 20
                                n -= int(rng.integers(0, 2)) * 4100    # unaligned too
                                off = int(rng.integers(0, size - n))
                                if rng.integers(0, 2):
                                    assert fh.pread_async(dev, n, off, 0, s).wait(timeout=60) == n
                                else:
                                    assert fh.pread(dev, n, off).result(timeout=60) == n
                                got = _copy_back_on(s, dev, n)
                                assert np.array_equal(got, data[off:off + n]), (k, n, off)
                    except BaseException as e:
                        errors.append(e)
                    finally:
                        check(hip.hipStreamDestroy(s))

                run_threads(worker, 6, 120)
            assert not errors, errors
            assert hipfile.engine.info()["outstanding"] == 0
        finally:
            hipfile.trim_pool()
