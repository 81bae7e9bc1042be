"""Many files, one operation: hipfile.pread_async_scatter and
hipfile.pwrite_async_gather over ranges of several open files."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _util import (
    device_array,
    direct_io_supported,
    from_device,
    hip_stream,
    opened_files,
    to_device,
)

import hipfile
from hipfile import InFlightError

CHUNK = 16 << 10
FILES = 24


def _chunk_files(tmp_path: Path, n: int = FILES, size: int = CHUNK,
                 seed: int = 3) -> tuple[list[Path], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    paths, data = [], []
    for i in range(n):
        p = tmp_path / f"chunk{i:03d}.bin"
        d = rng.integers(0, 256, size, dtype=np.uint8)
        p.write_bytes(d.tobytes())
        paths.append(p)
        data.append(d)
    return paths, data


def _slots(n: int, seed: int = 5) -> list[int]:
    order = list(range(n))
    np.random.default_rng(seed).shuffle(order)
    return order


@pytest.mark.parametrize("prefetch", [False, True])
def test_scatter_of_many_files_lands_each_file_in_its_slot(tmp_path: Path,
                                                           prefetch: bool) -> None:
    paths, data = _chunk_files(tmp_path)
    slots = _slots(FILES)
    with opened_files(paths) as fhs:
        with device_array(FILES * CHUNK) as dev, hip_stream() as s:
            to_device(dev, np.full(FILES * CHUNK, 0xEE, dtype=np.uint8))
            h = hipfile.pread_async_scatter(
                dev, [(fh, CHUNK, 0, slots[i] * CHUNK) for i, fh in enumerate(fhs)], s,
                prefetch=prefetch)
            assert isinstance(h, hipfile.StreamIOHandle)
            assert h.wait(timeout=30) == FILES * CHUNK
            got = from_device(dev, FILES * CHUNK).reshape(FILES, CHUNK)
            for i in range(FILES):
                np.testing.assert_array_equal(got[slots[i]], data[i], err_msg=f"file {i}")


def test_one_file_in_several_ranges_and_reads_stop_at_each_end(tmp_path: Path) -> None:
    """Ranges of one file may repeat; a range past a file's end reads up to
    it, and the bytes past it in the buffer are left as they were."""
    paths, data = _chunk_files(tmp_path, n=3)
    short = tmp_path / "short.bin"
    short_data = np.arange(1000, dtype=np.uint32).view(np.uint8)[:3000]
    short.write_bytes(short_data.tobytes())
    with opened_files([*paths, short]) as fhs:
        fs = fhs[-1]
        with device_array(5 * CHUNK) as dev, hip_stream() as s:
            to_device(dev, np.full(5 * CHUNK, 0x11, dtype=np.uint8))
            ranges = [(fhs[0], CHUNK // 2, CHUNK // 2, 0),        # second half of file 0
                      (fhs[0], CHUNK // 2, 0, CHUNK // 2),        # then its first half
                      (fhs[2], CHUNK, 0, CHUNK),
                      (fs, CHUNK, 0, 2 * CHUNK),                  # 3000 bytes, then its end
                      (fhs[1], CHUNK, 0, 3 * CHUNK)]
            h = hipfile.pread_async_scatter(dev, ranges, s)
            assert h.wait(timeout=30) == CHUNK + CHUNK + 3000 + CHUNK
            got = from_device(dev, 5 * CHUNK)
            np.testing.assert_array_equal(got[:CHUNK // 2], data[0][CHUNK // 2:])
            np.testing.assert_array_equal(got[CHUNK // 2:CHUNK], data[0][:CHUNK // 2])
            np.testing.assert_array_equal(got[CHUNK:2 * CHUNK], data[2])
            np.testing.assert_array_equal(got[2 * CHUNK:2 * CHUNK + 3000], short_data)
            assert (got[2 * CHUNK + 3000:3 * CHUNK] == 0x11).all()
            np.testing.assert_array_equal(got[3 * CHUNK:4 * CHUNK], data[1])
            assert (got[4 * CHUNK:] == 0x11).all()


def test_gather_writes_each_slot_to_its_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    src = rng.integers(0, 256, FILES * CHUNK, dtype=np.uint8)
    slots = _slots(FILES, seed=11)
    paths = [tmp_path / f"out{i:03d}.bin" for i in range(FILES)]
    with opened_files(paths, "w") as fhs:
        with device_array(FILES * CHUNK) as dev, hip_stream() as s:
            to_device(dev, src)
            h = hipfile.pwrite_async_gather(
                dev, [(fh, CHUNK, 0, slots[i] * CHUNK) for i, fh in enumerate(fhs)], s)
            assert h.wait(timeout=30) == FILES * CHUNK
    for i, p in enumerate(paths):
        assert p.read_bytes() == src[slots[i] * CHUNK:(slots[i] + 1) * CHUNK].tobytes(), i


def test_write_then_read_in_stream_order_across_files(tmp_path: Path) -> None:
    """A gather then a scatter of the same files on one stream: the read
    sees the bytes written (the written length counts as the files' end)."""
    rng = np.random.default_rng(2)
    src = rng.integers(0, 256, 4 * CHUNK, dtype=np.uint8)
    paths = [tmp_path / f"rw{i}.bin" for i in range(4)]
    with opened_files(paths, "w+") as fhs:
        with device_array(8 * CHUNK) as dev, hip_stream() as s:
            to_device(dev, src)
            w = hipfile.pwrite_async_gather(dev, [(fh, CHUNK, 0, i * CHUNK)
                                                  for i, fh in enumerate(fhs)], s)
            r = hipfile.pread_async_scatter(dev, [(fh, CHUNK, 0, (7 - i) * CHUNK)
                                                  for i, fh in enumerate(fhs)], s)
            assert w.wait(timeout=30) == 4 * CHUNK
            assert r.wait(timeout=30) == 4 * CHUNK
            got = from_device(dev, 8 * CHUNK)
            for i in range(4):
                np.testing.assert_array_equal(got[(7 - i) * CHUNK:(8 - i) * CHUNK],
                                              src[i * CHUNK:(i + 1) * CHUNK])


def test_every_file_is_held_until_completion_is_observed(tmp_path: Path) -> None:
    paths, _ = _chunk_files(tmp_path, n=4)
    with opened_files(paths) as fhs:
        with device_array(4 * CHUNK) as dev, hip_stream() as s:
            h = hipfile.pread_async_scatter(dev, [(fh, CHUNK, 0, i * CHUNK)
                                                  for i, fh in enumerate(fhs)], s)
            for fh in fhs:
                h_done = h.done()
                if not h_done:
                    with pytest.raises(InFlightError):
                        fh.close()
            assert h.wait(timeout=30) == 4 * CHUNK
            for fh in fhs:
                fh.close()           # observed: every file closes
                assert fh.closed


def test_dropped_handle_releases_every_file_once_done(tmp_path: Path) -> None:
    import gc

    paths, _ = _chunk_files(tmp_path, n=3)
    fhs = [hipfile.open(p) for p in paths]
    with device_array(3 * CHUNK) as dev, hip_stream() as s:
        hipfile.pread_async_scatter(dev, [(fh, CHUNK, 0, i * CHUNK)
                                          for i, fh in enumerate(fhs)], s)
        gc.collect()
        from _util import check
        from hip import hip

        check(hip.hipStreamSynchronize(s))
        for fh in fhs:
            fh.close(wait=True, timeout=30)
            assert fh.closed


def test_bad_entries_submit_nothing(tmp_path: Path) -> None:
    paths, _ = _chunk_files(tmp_path, n=2)
    a, b = hipfile.open(paths[0]), hipfile.open(paths[1])
    closed = hipfile.open(paths[1])
    closed.close()
    (tmp_path / "wo.bin").touch()
    wo = hipfile.FileHandle(tmp_path / "wo.bin", os.O_WRONLY).open()
    try:
        with device_array(2 * CHUNK) as dev:
            good = (a, CHUNK, 0, 0)
            with pytest.raises(ValueError, match="at least one range"):
                hipfile.pread_async_scatter(dev, [])
            with pytest.raises(ValueError, match="at least one range"):
                hipfile.pwrite_async_gather(dev, [])
            with pytest.raises(TypeError, match="FileHandle"):
                hipfile.pread_async_scatter(dev, [good, (str(paths[1]), CHUNK, 0, CHUNK)])
            with pytest.raises(TypeError, match=r"\(file, size, file_offset, buffer_offset\)"):
                hipfile.pread_async_scatter(dev, [good, (b, CHUNK, 0)])
            with pytest.raises(TypeError, match=r"\(file, size, file_offset, buffer_offset\)"):
                hipfile.pread_async_scatter(dev, [{"file": b}])
            with pytest.raises(hipfile.ClosedFileError):
                hipfile.pread_async_scatter(dev, [good, (closed, CHUNK, 0, CHUNK)])
            with pytest.raises(ValueError):
                hipfile.pread_async_scatter(dev, [good, (b, CHUNK, 0, CHUNK + 1)])  # overruns
            with pytest.raises(ValueError):
                hipfile.pread_async_scatter(dev, [good, (b, CHUNK, -1, CHUNK)])
            with pytest.raises(OSError) as ei:
                hipfile.pread_async_scatter(dev, [good, (wo, CHUNK, 0, CHUNK)])
            assert ei.value.errno == errno.EBADF
            with pytest.raises(OSError) as ei:
                hipfile.pwrite_async_gather(dev, [(wo, CHUNK, 0, CHUNK), (a, CHUNK, 0, 0)])
            assert ei.value.errno == errno.EBADF and "read-only" in str(ei.value)
            with pytest.raises(ValueError, match="task_size"):
                hipfile.pread_async_scatter(dev, [good], task_size=0)
            # an append handle's writes go to its end: ranges at offsets are refused
            ap = hipfile.open(tmp_path / "ap.bin", "a")
            try:
                with pytest.raises(ValueError, match="pwrite_async_gather writes at explicit"):
                    hipfile.pwrite_async_gather(dev, [(ap, CHUNK, 0, 0)])
            finally:
                ap.close()
            assert os.path.getsize(tmp_path / "ap.bin") == 0
            # nothing was submitted: every file closes at once
            assert a.pending == 0
        for fh in (a, b, wo):
            fh.close()
            assert fh.closed
        assert os.path.getsize(tmp_path / "wo.bin") == 0
    finally:
        for fh in (a, b, wo):
            fh.close()


@pytest.mark.parametrize("opened_direct", [False, True])
def test_cold_large_reads_go_through_o_direct_and_the_unaligned_end_buffered(
        tmp_path: Path, opened_direct: bool) -> None:
    """A read of >= 16 MiB of a file the page cache lacks, or any read of a
    file opened with O_DIRECT, goes through an O_DIRECT descriptor; the
    file's unaligned end, which O_DIRECT refuses, is read buffered."""
    if not direct_io_supported(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    size = (16 << 20) + 1000
    data = np.random.default_rng(4).integers(0, 256, size, dtype=np.uint8)
    path = tmp_path / "cold.bin"
    path.write_bytes(data.tobytes())
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    fh = hipfile.open(path, direct=True) if opened_direct else hipfile.open(path)
    try:
        with device_array(size + 4096) as dev, hip_stream() as s:
            h = fh.pread_async(dev, size + 4096, 0, 0, s)     # past the end: stops there
            assert h.wait(timeout=60) == size
            np.testing.assert_array_equal(from_device(dev, size), data)
            if not opened_direct:
                assert fh._descriptors.direct is not None and fh._descriptors.direct >= 0
        fds = len(os.listdir("/proc/self/fd"))
    finally:
        fh.close()
    assert len(os.listdir("/proc/self/fd")) < fds     # the O_DIRECT twin closed too


def _direct_file(tmp_path: Path, size: int, seed: int) -> tuple[Path, np.ndarray]:
    if not direct_io_supported(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    data = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)
    path = tmp_path / "direct.bin"
    path.write_bytes(data.tobytes())
    return path, data


@contextlib.contextmanager
def _ring_with(**settings: int) -> Iterator[None]:
    """The engine's staging ring made again with these settings (at the next
    submission), and freed again on leaving, inside them."""
    with hipfile.defaults.set(**settings):
        hipfile.trim_pool()
        try:
            yield
        finally:
            hipfile.trim_pool()


@pytest.mark.parametrize("io_size", [2 << 20, 4 << 20, 16 << 20])
def test_direct_reads_take_engine_direct_io_size_per_request(tmp_path: Path,
                                                             io_size: int) -> None:
    """Through an O_DIRECT descriptor, a worker reads consecutive chunks in
    consecutive slots with one request of ``engine_direct_io_size`` bytes
    (2 MiB: a slot, one request per chunk); where the ring wraps, the chunks
    on either side are read apart. The bytes are the file's every time."""
    size = 16 << 20
    path, data = _direct_file(tmp_path, size, 10)
    chunks = size // (2 << 20)
    with _ring_with(engine_task_size=2 << 20, engine_direct_io_size=io_size):
        with hipfile.open(path, direct=True) as fh, device_array(size) as dev, \
                hip_stream() as s:
            per = min(io_size, 16 << 20) // (2 << 20)
            for n in (chunks, 3, chunks, chunks, chunks, 5, chunks):   # slots wrap
                to_device(dev, np.zeros(size, dtype=np.uint8))
                h = fh.pread_async(dev, n << 21, 1 << 21, 0, s, task_size=2 << 20)
                want = min(n << 21, size - (1 << 21))
                assert h.wait(timeout=60) == want
                np.testing.assert_array_equal(from_device(dev, want),
                                              data[1 << 21:(1 << 21) + want])
                k = -(-want // (2 << 20))        # chunks of this read
                least = -(-k // per)
                assert least <= h.calls <= least + (1 if per > 1 else 0), (n, h.calls)
            ring = hipfile.engine.info()["devices"][0]
            assert ring["direct_io_bytes"] == per * (2 << 20)


def test_engine_direct_io_size_is_bounded_to_whole_slots() -> None:
    """Below a slot it is one slot; above 8 slots (or half the ring), that
    many, however large the setting (no wrap of the count into an int)."""
    for setting, slots in ((1, 1), (3 << 20, 1), (6 << 20, 3), (1 << 40, 8), (1 << 62, 8)):
        with _ring_with(engine_task_size=2 << 20, engine_direct_io_size=setting):
            hipfile.engine.prepare()
            assert hipfile.engine.info()["devices"][0]["direct_io_bytes"] == slots << 21, \
                setting


def test_a_direct_request_that_fails_fails_its_chunks_and_the_next_read_is_whole(
        tmp_path: Path) -> None:
    """A merged O_DIRECT request that fails is read again chunk by chunk: a
    failure that stays fails the operation with its errno, one that does
    not (the first call only) leaves the bytes whole; a request cut short
    goes on where it stopped."""
    if hipfile.engine.mechanism() != "stream-memory-operations":
        pytest.skip("the staged path needs stream waits")
    size = 16 << 20
    path, data = _direct_file(tmp_path, size, 11)
    from hipfile._lib import _hipfile

    with _ring_with(engine_task_size=2 << 20, engine_direct_io_size=8 << 20):
        try:
            with hipfile.open(path, direct=True) as fh, device_array(size) as dev, \
                    hip_stream() as s:
                _hipfile.engine_inject_faults(errno.EIO, 1 << 20)   # every call fails
                h = fh.pread_async(dev, size, 0, 0, s, task_size=2 << 20)
                with pytest.raises(OSError) as ei:
                    h.wait(timeout=60)
                assert ei.value.errno == errno.EIO
                _hipfile.engine_inject_faults(errno.EIO, 1)          # one call fails
                h = fh.pread_async(dev, size, 0, 0, s, task_size=2 << 20)
                assert h.wait(timeout=60) == size
                np.testing.assert_array_equal(from_device(dev, size), data)
                _hipfile.engine_inject_faults(0, 0, 1 << 20)      # each call: 1 MiB at most
                h = fh.pread_async(dev, size, 0, 0, s, task_size=2 << 20)
                assert h.wait(timeout=60) == size
                assert h.calls >= size // (1 << 20)
                _hipfile.engine_inject_faults()
                np.testing.assert_array_equal(from_device(dev, size), data)
                h = fh.pread_async(dev, size, 0, 0, s, task_size=2 << 20)
                assert h.wait(timeout=60) == size and h.calls <= 3
                np.testing.assert_array_equal(from_device(dev, size), data)
        finally:
            _hipfile.engine_inject_faults()


def test_a_failed_direct_request_fails_only_the_operation_it_failed_in(
        tmp_path: Path) -> None:
    """Two operations in one submission whose chunks one O_DIRECT request
    reads together (two ranges of 4 MiB, requests of 8 MiB): when the
    request fails and the re-read of the first operation's chunks fails too,
    the first raises and the second returns its bytes, whole."""
    if hipfile.engine.mechanism() != "stream-memory-operations":
        pytest.skip("the staged path needs stream waits")
    size = 8 << 20
    path, data = _direct_file(tmp_path, size, 13)
    from hipfile._lib import _hipfile

    half = size // 2
    with _ring_with(engine_task_size=2 << 20, engine_direct_io_size=8 << 20):
        try:
            with hipfile.open(path, direct=True) as fh, device_array(size) as dev, \
                    hip_stream() as s:
                # the merged request, then the first operation's first chunk
                # (its second is not read: the operation has failed)
                _hipfile.engine_inject_faults(errno.EIO, 2)
                first, second = fh.pread_async_ranges(
                    dev, [(half, 0, 0), (half, half, half)], s, task_size=2 << 20)
                assert second.wait(timeout=60) == half
                with pytest.raises(OSError) as ei:
                    first.wait(timeout=60)
                assert ei.value.errno == errno.EIO
                assert (first.calls, second.calls) == (2, 2)   # the request; then chunks
                got = from_device(dev, size)
                np.testing.assert_array_equal(got[half:], data[half:])
        finally:
            _hipfile.engine_inject_faults()


def test_a_direct_request_of_abandoned_chunks_reads_none_and_the_ring_comes_back(
        tmp_path: Path) -> None:
    """A stream operation the runtime refuses at submit abandons the chunks
    not yet enqueued: taken together for one request, each is then skipped
    (or, where a worker had read it already, released) on its own; the call
    raises, and every later read of the ring's slots is whole."""
    if hipfile.platforms.active() != "emulated":
        pytest.skip("stream operations fail on demand on the emulated platform")
    if hipfile.engine.mechanism() != "stream-memory-operations":
        pytest.skip("the staged path needs stream waits")
    from hip import hip

    from hipfile.platforms import emulated

    size = 16 << 20
    path, data = _direct_file(tmp_path, size, 12)
    with _ring_with(engine_task_size=2 << 20, engine_direct_io_size=8 << 20):
        try:
            with hipfile.open(path, direct=True) as fh, device_array(size) as dev, \
                    hip_stream() as s:
                hipfile.engine.prepare()
                for fail in ("wait_value", "write_value"):
                    emulated.inject_stream_mem_fault(
                        fail, int(hip.hipError_t.hipErrorOutOfMemory), count=1)
                    with pytest.raises(hipfile.HipRuntimeError):
                        fh.pread_async(dev, size, 0, 0, s, task_size=2 << 20).wait(timeout=60)
                    emulated.reset()
                    for _ in range(3):    # more than the ring's slots: they all came back
                        to_device(dev, np.zeros(size, dtype=np.uint8))
                        h = fh.pread_async(dev, size, 0, 0, s, task_size=2 << 20)
                        assert h.wait(timeout=60) == size
                        np.testing.assert_array_equal(from_device(dev, size), data)
        finally:
            emulated.reset()
    assert hipfile.engine.info()["outstanding"] == 0


def test_small_reads_read_at_submit_or_by_the_workers_alike(tmp_path: Path) -> None:
    """A lone small read whose bytes the page cache holds is read by the
    submitting thread; one whose bytes it lacks goes to the workers. The
    bytes and counts are the file's either way, for every size up to and
    past the limit of reads at submit (256 KiB), on an idle and a busy
    stream."""
    data = np.random.default_rng(8).integers(0, 256, 1 << 20, dtype=np.uint8)
    path = tmp_path / "small.bin"
    path.write_bytes(data.tobytes())
    sizes = [1, 4096, 65536 + 3, (256 << 10), (256 << 10) + 1]
    with hipfile.open(path) as fh, device_array(1 << 20) as dev, hip_stream() as s:
        for cold in (False, True):
            for size in sizes:
                if cold:
                    fd = os.open(path, os.O_RDONLY)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    os.close(fd)
                to_device(dev, np.full(size, 0x5A, dtype=np.uint8))
                h = fh.pread_async(dev, size, 1000, 0, s)
                assert h.wait(timeout=30) == size, (cold, size)
                np.testing.assert_array_equal(from_device(dev, size), data[1000:1000 + size])


def test_a_lone_medium_range_is_cut_over_the_threads(tmp_path: Path) -> None:
    """A lone range of less than one default task per thread is cut into
    chunks of at least 256 KiB (several file calls), and a lone range of at
    most 4 MiB into chunks of at most 512 KiB; an explicit task_size is
    kept as given."""
    data = np.random.default_rng(9).integers(0, 256, 1 << 20, dtype=np.uint8)
    path = tmp_path / "medium.bin"
    path.write_bytes(data.tobytes())
    threads = hipfile.engine.settings()["threads"]
    with hipfile.defaults.set(engine_task_size=2 << 20), hipfile.open(path) as fh, \
            device_array(1 << 20) as dev, hip_stream() as s:
        h = fh.pread_async(dev, 1 << 20, 0, 0, s)
        assert h.wait(timeout=30) == 1 << 20
        np.testing.assert_array_equal(from_device(dev, 1 << 20), data)
        # 1 MiB over the threads in pieces of 256 to 512 KiB
        assert h.calls == max(min(threads, 4), 2), (h.calls, threads)
        h = fh.pread_async(dev, 1 << 20, 0, 0, s, task_size=1 << 20)
        assert h.wait(timeout=30) == 1 << 20 and h.calls == 1
