"""Loose inputs on every path, and property-based sequences over the public
entry points (the autouse fixture checks the emulated counters after each
test; the properties check them after each example)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from _util import device_array, emu, from_device, hip_stream, random_bytes
from hypothesis import given
from hypothesis import strategies as st

import hipfile
from hipfile import AsyncIOHandle, BatchIO, Buffer, FileHandle, Stream

pytestmark = pytest.mark.emulated

N = 1 << 13
LOOSE = [1.5, 2.0, True, False, "8"]


@pytest.fixture(scope="module")
def data_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rel") / "data.bin"
    path.write_bytes(random_bytes(N, seed=31).tobytes())
    return path


@pytest.mark.parametrize("value", LOOSE)
def test_loose_numbers_are_refused_everywhere(value, data_path):
    with hipfile.Driver(), device_array(N) as dev, FileHandle(data_path) as fh:
        calls = [
            lambda: fh.read_async(dev, value, 0, 0, 0),
            lambda: fh.read_async(dev, 8, value, 0, 0),
            lambda: fh.read_async(dev, 8, 0, value, 0),
            lambda: Buffer(int(dev), value),
            lambda: AsyncIOHandle(value),
            lambda: AsyncIOHandle(8, value),
            lambda: fh.pread(dev, value),
            lambda: fh.pread(dev, 8, value),
        ]
        with BatchIO(2) as batch:
            calls += [lambda: batch.read(fh, dev, value), lambda: batch.read(fh, dev, 8, value)]
            h = AsyncIOHandle(8, 0, 0)
            for name in ("size", "file_offset", "buffer_offset"):
                calls.append(lambda name=name: setattr(h, name, value))
            for i, call in enumerate(calls):
                with pytest.raises(TypeError):
                    call()
                    print("accepted", i)
        assert emu().counters()["inflight"] == 0


def test_numpy_integers_are_accepted(data_path):
    data = np.fromfile(data_path, dtype=np.uint8)
    with hipfile.Driver(), device_array(N) as dev, FileHandle(data_path) as fh:
        h = fh.read_async(dev, np.int64(N), np.uint32(0), np.int16(0), 0)
        assert h.wait() == N
        h2 = AsyncIOHandle(np.int32(4), np.int64(1), np.uint8(2))
        h2.size = np.int64(3)
        assert (h2.size, h2.file_offset, h2.buffer_offset) == (3, 1, 2)
        assert len(Buffer(int(dev), np.uint64(N))) == N
        assert np.array_equal(from_device(dev, N), data)


def test_short_transfers_on_the_async_path_report_the_count(data_path):
    """The stream-ordered path makes one library call: a transfer cap shows
    as a short count in the result, never as end of file for the rest."""
    with hipfile.Driver(), device_array(N) as dev, FileHandle(data_path) as fh:
        emu().set_short_transfer(100)
        try:
            h = fh.read_async(dev, N, 1000, 0, 0)
            assert h.wait() == 100
        finally:
            emu().set_short_transfer(None)


sizes = st.integers(min_value=0, max_value=N)
offsets = st.integers(min_value=0, max_value=2 * N)


@given(size=sizes, foff=offsets, boff=st.integers(min_value=0, max_value=N + 8),
       write=st.booleans(), stream=st.sampled_from(["null", "own", "registered"]))
def test_property_async_ranges(size, foff, boff, write, stream, tmp_path_factory):
    path = tmp_path_factory.mktemp("p") / "f.bin"
    data = random_bytes(2 * N, seed=size % 7)
    path.write_bytes(data.tobytes())
    fits = boff + size <= N
    with hipfile.Driver(), device_array(N) as dev, hip_stream() as s, \
            FileHandle(path, os.O_RDWR) as fh:
        target: object = 0 if stream == "null" else s
        reg = Stream(s) if stream == "registered" else None
        if reg is not None:
            reg.register()
            target = reg
        try:
            op = fh.write_async if write else fh.read_async
            if not fits:
                with pytest.raises(ValueError):
                    op(dev, size, foff, boff, target)
            else:
                n = op(dev, size, foff, boff, target).wait(timeout=30)
                expect = size if write else max(0, min(size, 2 * N - foff))
                assert n == expect
        finally:
            if reg is not None:
                reg.deregister()
    assert_clean()


def assert_clean() -> None:
    import gc

    from hipfile import async_io

    gc.collect()
    async_io.trim_pool()
    assert not {k: v for k, v in emu().counters().items() if v}


def _wait_all(handles: list[AsyncIOHandle]) -> None:
    for h in handles:
        h.wait(timeout=30)


@given(ops=st.lists(st.sampled_from(["open", "close", "reg_buf", "dereg_buf", "reg_st",
                                     "dereg_st", "submit", "drop_handle", "wait_all",
                                     "drop_file"]), max_size=14))
def test_property_open_close_drop_sequences(ops, tmp_path_factory):
    import warnings

    path = tmp_path_factory.mktemp("s") / "f.bin"
    path.write_bytes(bytes(N))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # dropping is the point
        _sequence(ops, path)
    assert_clean()


def _sequence(ops: list[str], path: Path) -> None:
    with hipfile.Driver(), device_array(N) as dev, hip_stream() as s:
        fh: FileHandle | None = None
        buf = Buffer(dev)
        stream = Stream(s)
        handles: list[AsyncIOHandle] = []
        for op in ops:
            try:
                if op == "open":
                    fh = fh or FileHandle(path)
                    fh.open()
                elif op == "close" and fh is not None:
                    fh.close()
                elif op == "reg_buf":
                    buf.register()
                elif op == "dereg_buf":
                    buf.deregister()
                elif op == "reg_st":
                    stream.register()
                elif op == "dereg_st":
                    stream.deregister()
                elif op == "submit" and fh is not None:
                    handles.append(fh.read_async(buf, 64, 0, 0, stream))
                elif op == "drop_handle" and handles:
                    handles.pop()
                elif op == "wait_all":
                    _wait_all(handles)
                elif op == "drop_file":
                    fh = None
            except (hipfile.InFlightError, hipfile.ClosedFileError):
                pass
        _wait_all(handles)
        handles.clear()
        hipfile._lib._hipfile.wait_for(None)
        if fh is not None:
            fh.close()
        del fh
        buf.deregister()
        stream.deregister()
        import gc

        gc.collect()
