"""Ranges by device address: hipfile.pread_async_addresses and
hipfile.pwrite_async_addresses over (file index, file offset, device
address, size) rows of several files and several device allocations."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import check, device_array, from_device, hip_stream, malloc_on, opened_files, to_device
from hip import hip
from test_engine import StreamBlocker

import hipfile
from hipfile import InFlightError
from hipfile._lib import _hipfile

BLOCK = 4096


@pytest.fixture(autouse=True)
def _stream_waits() -> None:
    if hipfile.engine.mechanism() != "stream-memory-operations":
        pytest.skip("ranges by address take the staging path, which needs stream waits")


@contextlib.contextmanager
def _allocations(sizes: list[int]) -> Iterator[list[int]]:
    """Separate device allocations of these sizes (their addresses)."""
    with contextlib.ExitStack() as stack:
        yield [int(stack.enter_context(device_array(n))) for n in sizes]


def _rows(nblocks: int, nfiles: int, blocks_per_file: int, bases: list[int],
          per_alloc: int, seed: int) -> np.ndarray:
    """One row per block: block i goes to file i % nfiles at slot
    i // nfiles, and from a shuffled place among the allocations."""
    order = np.random.default_rng(seed).permutation(len(bases) * per_alloc)[:nblocks]
    rows = np.empty((nblocks, 4), dtype=np.int64)
    for i in range(nblocks):
        rows[i] = (i % nfiles, (i // nfiles) * BLOCK,
                   bases[order[i] // per_alloc] + (order[i] % per_alloc) * BLOCK, BLOCK)
    assert (i // nfiles) < blocks_per_file
    return rows


def _fill(bases: list[int], per_alloc: int, value: int | None, seed: int = 0
          ) -> list[np.ndarray]:
    """Each allocation filled with ``value``, or random bytes (returned)."""
    rng = np.random.default_rng(seed)
    out = []
    for b in bases:
        d = (np.full(per_alloc * BLOCK, value, dtype=np.uint8) if value is not None
             else rng.integers(0, 256, per_alloc * BLOCK, dtype=np.uint8))
        to_device(b, d)
        out.append(d)
    return out


def _block_at(bases: list[int], data: list[np.ndarray], per_alloc: int, addr: int
              ) -> np.ndarray:
    for b, d in zip(bases, data, strict=True):
        if b <= addr < b + per_alloc * BLOCK:
            return d[addr - b:addr - b + BLOCK]
    raise AssertionError(f"{addr:#x} is in no allocation")


def _assert_blocks_reversed(got: np.ndarray, data: Any, n: int = 4) -> None:
    """``got`` holds the first ``n`` blocks of ``data`` in reverse order."""
    for i in range(n):
        np.testing.assert_array_equal(got[(n - 1 - i) * BLOCK:(n - i) * BLOCK],
                                      data[i * BLOCK:(i + 1) * BLOCK])


@pytest.mark.parametrize("form", ["int64", "uint64", "tuples"])
@pytest.mark.parametrize("prefetch", [False, True])
def test_round_trip_between_allocations_and_files(tmp_path: Path, form: str,
                                                  prefetch: bool) -> None:
    """Blocks of four allocations written to five files with one
    operation, then read back with one operation into three other
    allocations at other addresses: every byte where it belongs."""
    nfiles, nblocks, per = 5, 40, 16
    paths = [tmp_path / f"kv{i}.bin" for i in range(nfiles)]
    with _allocations([per * BLOCK] * 4) as src, _allocations([per * BLOCK] * 3) as dst, \
            hip_stream() as s, opened_files(paths, "w+") as fhs:
        src_data = _fill(src, per, None, seed=1)
        _fill(dst, per, 0xEE)
        wrows = _rows(nblocks, nfiles, 8, src, per, seed=2)
        rrows = _rows(nblocks, nfiles, 8, dst, per, seed=3)
        convert = {"int64": lambda r: r, "uint64": lambda r: r.astype(np.uint64),
                   "tuples": lambda r: [tuple(int(x) for x in row) for row in r]}[form]
        w = hipfile.pwrite_async_addresses(fhs, convert(wrows), s)
        assert isinstance(w, hipfile.StreamIOHandle) and w.ranges == nblocks
        if prefetch:      # a prefetch reads the files at once: after the write only
            assert w.wait(timeout=30) == nblocks * BLOCK
        r = hipfile.pread_async_addresses(fhs, convert(rrows), s, prefetch=prefetch)
        assert w.wait(timeout=30) == nblocks * BLOCK
        assert r.wait(timeout=30) == nblocks * BLOCK
        for i in range(nfiles):
            got = np.frombuffer(paths[i].read_bytes(), dtype=np.uint8)
            assert got.size == 8 * BLOCK
        dst_data = [from_device(b, per * BLOCK) for b in dst]
        for i in range(nblocks):
            want = _block_at(src, src_data, per, int(wrows[i, 2]))
            on_disk = np.frombuffer(paths[i % nfiles].read_bytes(), dtype=np.uint8)
            np.testing.assert_array_equal(on_disk[wrows[i, 1]:wrows[i, 1] + BLOCK], want,
                                          err_msg=f"file block {i}")
            np.testing.assert_array_equal(_block_at(dst, dst_data, per, int(rrows[i, 2])),
                                          want, err_msg=f"device block {i}")
        used = {int(a) for a in rrows[:, 2]}
        for b, d in zip(dst, dst_data, strict=True):      # what no row names is left as it was
            for k in range(per):
                if b + k * BLOCK not in used:
                    assert (d[k * BLOCK:(k + 1) * BLOCK] == 0xEE).all()


def test_a_thousand_ranges_over_many_files_and_allocations(tmp_path: Path) -> None:
    """1,000 rows over 40 files and 64 allocations: one handle, one
    completion, the allocations asked of the runtime at most once each."""
    nfiles, nallocs, per, n = 40, 64, 16, 1000
    paths = [tmp_path / f"c{i:02d}.bin" for i in range(nfiles)]
    rng = np.random.default_rng(7)
    file_data = [rng.integers(0, 256, 25 * BLOCK, dtype=np.uint8) for _ in range(nfiles)]
    for p, d in zip(paths, file_data, strict=True):
        p.write_bytes(d.tobytes())
    with _allocations([per * BLOCK] * nallocs) as dst, hip_stream() as s, \
            opened_files(paths, "r") as fhs:
        _fill(dst, per, 0)
        rows = _rows(n, nfiles, 25, dst, per, seed=8)
        before = _hipfile.engine_address_queries()
        h = hipfile.pread_async_addresses(fhs, rows, s)
        assert _hipfile.engine_address_queries() - before <= nallocs
        assert h.ranges == n and h.size == n * BLOCK
        assert h.wait(timeout=60) == n * BLOCK
        got = [from_device(b, per * BLOCK) for b in dst]
        for i in range(n):
            f, off = i % nfiles, int(rows[i, 1])
            np.testing.assert_array_equal(_block_at(dst, got, per, int(rows[i, 2])),
                                          file_data[f][off:off + BLOCK], err_msg=f"row {i}")


def _adjacent_pair(bases: list[int], size: int) -> tuple[int, int] | None:
    """Two of these allocations of ``size`` bytes where one ends exactly
    where the other starts, or None."""
    starts = set(bases)
    for b in bases:
        if b + size in starts:
            return b, b + size
    return None


@pytest.mark.parametrize("write", [False, True])
def test_rows_continuing_across_two_adjacent_allocations_stay_two_copies(
        tmp_path: Path, write: bool) -> None:
    """The last block of one allocation and the first of another that
    starts where it ends, consecutive in the file: the engine joins copies
    where device memory continues, and must not join these (one copy over
    two allocations, which the runtime refuses)."""
    size = 16 * BLOCK
    with _allocations([size] * 64) as bases:
        pair = _adjacent_pair(bases, size)
        if pair is None:
            pytest.skip("no two allocations of this runtime lie side by side")
        a, b = pair
        path = tmp_path / "pair.bin"
        data = np.random.default_rng(6).integers(0, 256, 2 * BLOCK, dtype=np.uint8)
        rows = [(0, 0, a + size - BLOCK, BLOCK), (0, BLOCK, b, BLOCK)]
        with hip_stream() as s:
            if write:
                to_device(a + size - BLOCK, data[:BLOCK])
                to_device(b, data[BLOCK:])
                with hipfile.open(path, "w") as fh:
                    assert hipfile.pwrite_async_addresses([fh], rows, s).wait(timeout=30) \
                        == 2 * BLOCK
                assert path.read_bytes() == data.tobytes()
            else:
                path.write_bytes(data.tobytes())
                with hipfile.open(path) as fh:
                    assert hipfile.pread_async_addresses([fh], rows, s).wait(timeout=30) \
                        == 2 * BLOCK
                np.testing.assert_array_equal(from_device(a + size - BLOCK, BLOCK), data[:BLOCK])
                np.testing.assert_array_equal(from_device(b, BLOCK), data[BLOCK:])


def test_a_read_stops_at_each_files_end_and_zero_size_rows_move_nothing(
        tmp_path: Path) -> None:
    """The result is the bytes read in all: a row past its file's end reads
    up to it; the bytes after stay as they were; a row of size 0 moves
    nothing, whatever its address."""
    short, full = tmp_path / "short.bin", tmp_path / "full.bin"
    sdata = np.arange(3000, dtype=np.uint8)
    fdata = np.random.default_rng(4).integers(0, 256, 2 * BLOCK, dtype=np.uint8)
    short.write_bytes(sdata.tobytes())
    full.write_bytes(fdata.tobytes())
    with _allocations([2 * BLOCK, 2 * BLOCK]) as (a, b), hip_stream() as s, \
            opened_files([short, full], "r") as fhs:
        _fill([a, b], 2, 0x11)
        rows = [(0, 0, b + BLOCK, BLOCK), (1, 0, a, 2 * BLOCK), (0, 0, 0, 0),
                (1, 5000, b, BLOCK)]     # 3000 bytes, the whole file, none, 3192 bytes
        h = hipfile.pread_async_addresses(fhs, rows, s)
        assert h.wait(timeout=30) == 3000 + 2 * BLOCK + (2 * BLOCK - 5000)
        got_a, got_b = from_device(a, 2 * BLOCK), from_device(b, 2 * BLOCK)
        np.testing.assert_array_equal(got_a, fdata)
        np.testing.assert_array_equal(got_b[BLOCK:BLOCK + 3000], sdata)
        assert (got_b[BLOCK + 3000:] == 0x11).all()
        np.testing.assert_array_equal(got_b[:2 * BLOCK - 5000], fdata[5000:])
        assert (got_b[2 * BLOCK - 5000:BLOCK] == 0x11).all()


def test_zero_size_rows_alone_and_an_unordered_job(tmp_path: Path) -> None:
    """A job of rows of size 0 (any address) completes with 0 bytes and
    writes nothing; ``ordered=False`` returns the same bytes."""
    path = tmp_path / "z.bin"
    data = np.random.default_rng(14).integers(0, 256, BLOCK, dtype=np.uint8)
    path.write_bytes(data.tobytes())
    with _allocations([BLOCK]) as (a,), hip_stream() as s, opened_files([path], "r+") as fhs:
        _fill([a], 1, 0)
        assert hipfile.pread_async_addresses(fhs, [(0, 0, 0, 0)], s).wait(timeout=30) == 0
        assert hipfile.pwrite_async_addresses(fhs, [(0, 0, 0, 0), (0, 2 * BLOCK, 8, 0)],
                                              s).wait(timeout=30) == 0
        assert path.read_bytes() == data.tobytes()
        h = hipfile.pread_async_addresses(fhs, [(0, 0, a, BLOCK)], s, ordered=False)
        assert h.wait(timeout=30) == BLOCK
        np.testing.assert_array_equal(from_device(a, BLOCK), data)


def test_write_then_read_in_stream_order(tmp_path: Path) -> None:
    """A write then a read of the same files on one stream: the read sees
    the bytes written (the written length counts as each file's end)."""
    paths = [tmp_path / "w0.bin", tmp_path / "w1.bin"]
    src = np.random.default_rng(5).integers(0, 256, 4 * BLOCK, dtype=np.uint8)
    with _allocations([4 * BLOCK, 4 * BLOCK]) as (a, b), hip_stream() as s, \
            opened_files(paths, "w+") as fhs:
        to_device(a, src)
        _fill([b], 4, 0)
        rows = np.array([[i % 2, (i // 2) * BLOCK, a + i * BLOCK, BLOCK] for i in range(4)])
        w = hipfile.pwrite_async_addresses(fhs, rows, s)
        back = rows.copy()
        back[:, 2] = b + (3 - np.arange(4)) * BLOCK
        r = hipfile.pread_async_addresses(fhs, back, s)
        assert r.wait(timeout=30) == 4 * BLOCK and w.wait(timeout=30) == 4 * BLOCK
        _assert_blocks_reversed(from_device(b, 4 * BLOCK), src)


def test_every_file_is_held_until_completion_is_observed(tmp_path: Path) -> None:
    paths = [tmp_path / f"h{i}.bin" for i in range(3)]
    for p in paths:
        p.write_bytes(bytes(BLOCK))
    with device_array(3 * BLOCK) as dev, hip_stream() as s:
        fhs = [hipfile.open(p) for p in paths]
        try:
            blocker = StreamBlocker(s)
            try:
                h = hipfile.pread_async_addresses(
                    fhs, [(i, 0, int(dev) + i * BLOCK, BLOCK) for i in range(3)], s)
                for fh in fhs:
                    with pytest.raises(InFlightError):
                        fh.close()
            finally:
                blocker.release()
            assert h.wait(timeout=30) == 3 * BLOCK
            for fh in fhs:
                fh.close()
                assert fh.closed
        finally:
            for fh in fhs:
                fh.close()


@pytest.mark.parametrize("layout", ["fortran", "strided", "strided-uint64"])
def test_other_integer_arrays_are_converted_once(tmp_path: Path, layout: str) -> None:
    """A Fortran-ordered array and strided views (int64, uint64) are read
    as the same rows (converted to one C-contiguous array)."""
    path = tmp_path / "f.bin"
    data = np.random.default_rng(12).integers(0, 256, 4 * BLOCK, dtype=np.uint8)
    path.write_bytes(data.tobytes())
    with _allocations([4 * BLOCK]) as (a,), hip_stream() as s, opened_files([path], "r") as fhs:
        _fill([a], 4, 0)
        rows = np.array([[0, i * BLOCK, a + (3 - i) * BLOCK, BLOCK] for i in range(4)])
        given = {"fortran": np.asfortranarray(rows),
                 "strided": np.repeat(rows, 2, axis=0)[::2],
                 "strided-uint64": np.repeat(rows.astype(np.uint64), 2, axis=0)[::2]}[layout]
        assert not given.flags.c_contiguous
        assert hipfile.pread_async_addresses(fhs, given, s).wait(timeout=30) == 4 * BLOCK
        _assert_blocks_reversed(from_device(a, 4 * BLOCK), data)


def test_a_dropped_handle_releases_every_file_once_done(tmp_path: Path) -> None:
    import gc

    paths = [tmp_path / f"d{i}.bin" for i in range(3)]
    for p in paths:
        p.write_bytes(bytes(BLOCK))
    fhs = [hipfile.open(p) for p in paths]
    with device_array(3 * BLOCK) as dev, hip_stream() as s:
        hipfile.pread_async_addresses(fhs, [(i, 0, int(dev) + i * BLOCK, BLOCK)
                                            for i in range(3)], s)
        gc.collect()
        check(hip.hipStreamSynchronize(s))
        for fh in fhs:
            fh.close(wait=True, timeout=30)
            assert fh.closed


def test_memory_and_stream_of_another_device(tmp_path: Path) -> None:
    """The rows are checked against the stream's device, not the current
    one: a round trip on device 1 while device 0 is current."""
    if check(hip.hipGetDeviceCount()) < 2:
        pytest.skip("one device")
    path = tmp_path / "dev1.bin"
    src = np.random.default_rng(13).integers(0, 256, 2 * BLOCK, dtype=np.uint8)
    check(hip.hipSetDevice(1))
    try:
        mem = check(hip.hipMalloc(4 * BLOCK))
        s1 = check(hip.hipStreamCreate())
    finally:
        check(hip.hipSetDevice(0))
    try:
        a = int(mem)
        to_device(a, src)
        with hipfile.open(path, "w+") as fh:
            w = hipfile.pwrite_async_addresses([fh], [(0, 0, a, 2 * BLOCK)], s1)
            r = hipfile.pread_async_addresses([fh], [(0, BLOCK, a + 2 * BLOCK, BLOCK),
                                                     (0, 0, a + 3 * BLOCK, BLOCK)], s1)
            assert w.wait(timeout=30) == 2 * BLOCK and r.wait(timeout=30) == 2 * BLOCK
            assert r.device == 1
        got = from_device(a, 4 * BLOCK)
        np.testing.assert_array_equal(got[2 * BLOCK:3 * BLOCK], src[BLOCK:])
        np.testing.assert_array_equal(got[3 * BLOCK:], src[:BLOCK])
    finally:
        check(hip.hipStreamDestroy(s1))
        check(hip.hipFree(mem))


@pytest.fixture
def two_files(tmp_path: Path) -> Iterator[tuple[list[hipfile.FileHandle], list[Path]]]:
    paths = [tmp_path / "a.bin", tmp_path / "b.bin"]
    for i, p in enumerate(paths):
        p.write_bytes(bytes([i + 1]) * (4 * BLOCK))
    with opened_files(paths, "r+") as fhs:
        yield fhs, paths


def _refused(fhs: list[hipfile.FileHandle], paths: list[Path], dev: int, nbytes: int,
             exc: type[BaseException], match: str, call: Any, *args: Any, **kw: Any
             ) -> BaseException:
    """``call`` raises ``exc`` matching ``match`` and submits nothing: no
    operation outstanding, no file held, every file and the device memory
    as they were."""
    files_before = [p.read_bytes() for p in paths]
    to_device(dev, np.full(nbytes, 0x5A, dtype=np.uint8))
    with pytest.raises(exc, match=match) as ei:
        call(*args, **kw)
    check(hip.hipDeviceSynchronize())
    assert hipfile.engine.info()["outstanding"] == 0
    for fh in fhs:
        assert fh.pending == 0 and fh._held_count() == 0
    assert [p.read_bytes() for p in paths] == files_before
    assert (from_device(dev, nbytes) == 0x5A).all()
    return ei.value


def test_rows_outside_one_allocation_are_refused_naming_them(two_files: Any) -> None:
    fhs, paths = two_files
    n = 4 * BLOCK
    with _allocations([n, n]) as (a, b), hip_stream() as s:
        good = [(0, 0, a, BLOCK), (1, 0, b, BLOCK)]
        for op in (hipfile.pread_async_addresses, hipfile.pwrite_async_addresses):
            e = _refused(fhs, paths, a, n, ValueError,
                         r"row 2: the address range \[.*\) runs past the end of the device "
                         r"allocation \[.*\) .* that holds its start",
                         op, fhs, [*good, (0, BLOCK, a + n - 100, 200)], s)
            assert f"{a + n - 100:#x}" in str(e) and f"{a:#x}, {a + n:#x}" in str(e)
            e = _refused(fhs, paths, a, n, ValueError,
                         r"row 1: the address range .* lies in no device allocation",
                         op, fhs, [good[0], (0, 0, 4096, BLOCK)], s)
            # a range spanning two allocations (even adjacent ones) is refused
            lo, hi = sorted((a, b))
            _refused(fhs, paths, a, n, ValueError, "row 0: .* runs past the end", op, fhs,
                     [(0, 0, lo + n - BLOCK, hi - lo + BLOCK)], s)


def test_host_memory_and_another_devices_memory_are_refused(two_files: Any) -> None:
    fhs, paths = two_files
    n = 4 * BLOCK
    host = check(hip.hipHostMalloc(n, 0))
    try:
        with device_array(n) as dev, hip_stream() as s:
            _refused(fhs, paths, int(dev), n, ValueError, r"row 1: .*(not device memory|"
                     r"no device allocation)", hipfile.pread_async_addresses, fhs,
                     [(0, 0, int(dev), BLOCK), (0, 0, int(host), BLOCK)], s)
            if check(hip.hipGetDeviceCount()) < 2:
                return
            other = malloc_on(1, n)
            try:
                _refused(fhs, paths, int(dev), n, ValueError,
                         r"row 0: .* of device 1, not of the stream's device 0",
                         hipfile.pread_async_addresses, fhs, [(1, 0, int(other), BLOCK)], s)
            finally:
                check(hip.hipFree(other))
    finally:
        check(hip.hipHostFree(host))


def test_bad_rows_and_files_are_refused_before_anything_is_submitted(
        two_files: Any, tmp_path: Path) -> None:
    fhs, paths = two_files
    n = 4 * BLOCK
    rd, wr = hipfile.pread_async_addresses, hipfile.pwrite_async_addresses
    with device_array(n) as dev, hip_stream() as s:
        a = int(dev)
        good = (0, 0, a, BLOCK)

        def refused(exc: type[BaseException], match: str, call: Any, *args: Any,
                    **kw: Any) -> BaseException:
            return _refused(fhs, paths, a, n, exc, match, call, *args, **kw)

        for op in (rd, wr):
            refused(ValueError, "at least one", op, fhs, np.empty((0, 4), dtype=np.int64), s)
            refused(ValueError, "at least one", op, fhs, [], s)
            refused(ValueError, "at least one file", op, [], [good], s)
            refused(TypeError, "sequence of open", op, fhs[0], [good], s)
            refused(TypeError, "FileHandle", op, [fhs[0], str(paths[1])], [good], s)
            refused(ValueError, r"shape \(N, 4\)", op, fhs, np.zeros((2, 3), np.int64), s)
            refused(TypeError, "integers", op, fhs, np.zeros((2, 4), np.float64), s)
            refused(TypeError, "must be an int", op, fhs, [good, (0, 0.5, a, 8)], s)
            refused(TypeError, "must be an int, not bool", op, fhs, [good, (True, 0, a, 8)], s)
            refused(TypeError, r"\(file index, file offset", op, fhs, [good, (0, 0, a)], s)
            refused(ValueError, "row 1: file index 2 names none of the 2",
                    op, fhs, [good, (2, 0, a, 8)], s)
            refused(ValueError, "row 1: file index -1", op, fhs, [good, (-1, 0, a, 8)], s)
            refused(ValueError, "row 1: file offset -8 must be >= 0",
                    op, fhs, np.array([good, (1, -8, a, 8)]), s)
            refused(ValueError, "row 0: size -1 must be >= 0", op, fhs, [(0, 0, a, -1)], s)
            refused(ValueError, r"row 0: file offset 9223372036854775807 \+ size 8",
                    op, fhs, [(0, (1 << 63) - 1, a, 8)], s)
            refused(ValueError, r"row 1: size 9223372036854775808 must be >= 0 and below 2\*\*63",
                    op, fhs, np.array([good, (1, 0, a, 1 << 63)], dtype=np.uint64), s)
            refused(ValueError, "task_size", op, fhs, [good], s, task_size=0)
        closed = hipfile.open(paths[1])
        closed.close()
        refused(hipfile.ClosedFileError, "closed", rd, [fhs[0], closed], [good], s)
        (tmp_path / "wo.bin").touch()
        wo = hipfile.FileHandle(tmp_path / "wo.bin", os.O_WRONLY).open()
        ro = hipfile.open(paths[1], "r")
        ap = hipfile.open(tmp_path / "ap.bin", "a")
        try:
            e = refused(OSError, "write-only", rd, [fhs[0], wo], [good], s)
            assert e.errno == errno.EBADF        # type: ignore[attr-defined]
            e = refused(OSError, "read-only", wr, [fhs[0], ro], [good], s)
            assert e.errno == errno.EBADF        # type: ignore[attr-defined]
            refused(ValueError, "appends", wr, [fhs[0], ap], [good], s)
        finally:
            for fh in (wo, ro, ap):
                fh.close()
        assert os.path.getsize(tmp_path / "wo.bin") == 0
        assert os.path.getsize(tmp_path / "ap.bin") == 0


def test_the_hipfile_data_path_setting_is_refused(two_files: Any) -> None:
    fhs, paths = two_files
    with device_array(BLOCK) as dev, hip_stream() as s, \
            hipfile.defaults.set("engine_data_path", "hipfile"):
        _refused(fhs, paths, int(dev), BLOCK, NotImplementedError, "staging path",
                 hipfile.pread_async_addresses, fhs, [(0, 0, int(dev), BLOCK)], s)
