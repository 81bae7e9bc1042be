"""examples/lmcache_gds_backend.py driven the way LMCache drives a GDS backend."""

from __future__ import annotations

import contextlib
import errno
import gc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _platform import PLATFORM
from _util import (
    check,
    device_array,
    from_device,
    held_stream,
    hip_stream,
    load_example,
    random_bytes,
    to_device,
)
from hip import hip

import hipfile

CHUNK = 16 << 10
CHUNKS = 48
TOTAL = CHUNK * CHUNKS


gds = load_example("lmcache_gds_backend")


@pytest.fixture
def bufs() -> Iterator[tuple[Any, Any]]:
    with device_array(TOTAL) as src, device_array(TOTAL) as dst:
        yield src, dst


@pytest.fixture
def streams() -> Iterator[list[Any]]:
    with hip_stream() as a, hip_stream() as b, hip_stream() as c:
        yield [a, b, c]


def _counters() -> dict[str, int]:
    """The emulated platform's live resources, after idle pool pages are
    given back (so that only what is held remains)."""
    if PLATFORM != "emulated":
        return {}
    from hipfile.platforms import emulated

    gc.collect()
    hipfile.trim_pool()

    return emulated.counters()


def test_put_and_get_many_chunks(tmp_path: Path, bufs: tuple[Any, Any],
                                 streams: list[Any]) -> None:
    src, dst = bufs
    data = random_bytes(TOTAL, seed=5)
    to_device(src, data)
    to_device(dst, np.zeros(TOTAL, np.uint8))
    order = np.random.default_rng(1).permutation(CHUNKS)
    base = _counters()
    with gds.HipFileGDSBackend() as backend:
        backend.register_buffer(hipfile.Buffer(src, TOTAL))
        backend.register_buffer(hipfile.Buffer(dst, TOTAL))
        for s in streams:
            backend.register_stream(int(s))
        if PLATFORM == "emulated":
            live = _counters()
            assert live["buffers"] == base["buffers"] + 2
            assert live["streams_registered"] == base["streams_registered"] + 3
        slab = backend.open_slab(str(tmp_path / "slab"), TOTAL, True)
        assert os.path.getsize(slab.path) == TOTAL
        ret = gds.Retirement()
        for i in range(CHUNKS):
            sub = slab.write_async(int(src), CHUNK, int(order[i]) * CHUNK, i * CHUNK,
                                   int(streams[i % 3]))
            assert sub.size == CHUNK
            ret.track(sub)
            del sub
            ret.poll()
        ret.drain()
        assert len(ret) == 0 and ret.retired == CHUNKS and ret.bytes == TOTAL
        for i in reversed(range(CHUNKS)):
            ret.track(slab.read_async(int(dst), CHUNK, int(order[i]) * CHUNK, i * CHUNK,
                                      int(streams[i % 3])))
        ret.drain()
        assert ret.bytes == 2 * TOTAL
    # the slab holds chunk i at slot order[i]
    slab_bytes = np.frombuffer(Path(slab.path).read_bytes(), np.uint8)
    for i in range(CHUNKS):
        s = int(order[i]) * CHUNK
        assert np.array_equal(slab_bytes[s:s + CHUNK], data[i * CHUNK:(i + 1) * CHUNK])
    assert np.array_equal(from_device(dst, TOTAL), data)
    assert slab.closed
    assert _counters() == base  # everything registered was released


def test_submissions_dropped_early(tmp_path: Path, bufs: tuple[Any, Any],
                                   streams: list[Any]) -> None:
    """LMCache may drop a submission before its event completes: the slots it
    owns stay parked, the bytes still arrive, nothing leaks."""
    src, dst = bufs
    data = random_bytes(TOTAL, seed=9)
    to_device(src, data)
    to_device(dst, np.zeros(TOTAL, np.uint8))
    with gds.HipFileGDSBackend() as backend, contextlib.ExitStack() as stack:
        backend.register_buffer(hipfile.Buffer(src, TOTAL))
        backend.register_buffer(hipfile.Buffer(dst, TOTAL))
        raw = int(streams[0])
        backend.register_stream(raw)
        slab = backend.open_slab(str(tmp_path), TOTAL, False)
        assert slab.direct_io is False
        release = None
        if PLATFORM == "emulated":
            # the stream waits at a flag: every submission below is still in
            # flight at the collections, however long they take
            release = stack.enter_context(held_stream(streams[0]))
        for i in range(CHUNKS):
            slab.write_async(int(src), CHUNK, i * CHUNK, i * CHUNK, raw)  # dropped
        gc.collect()
        for i in range(CHUNKS):
            slab.read_async(int(dst), CHUNK, i * CHUNK, i * CHUNK, raw)  # dropped
        gc.collect()
        if release is not None:
            assert hipfile.pool_stats()["parked"] > 0 or _counters()["inflight"] > 0
            # closing now would tear down memory in use: refused, state kept
            with pytest.raises(hipfile.InFlightError):
                slab.close()
            assert not slab.closed
            release()
        check(hip.hipStreamSynchronize(streams[0]))
    assert slab.closed
    assert np.array_equal(from_device(dst, TOTAL), data)


@pytest.fixture
def one_stream_slab(tmp_path: Path, bufs: tuple[Any, Any],
                    streams: list[Any]) -> Iterator[tuple[Any, int, int]]:
    """(slab, src, raw): a backend with ``src`` (TOTAL bytes) and one raw
    stream registered, and a slab of TOTAL bytes opened in ``tmp_path``."""
    src, raw = int(bufs[0]), int(streams[0])
    with gds.HipFileGDSBackend() as backend:
        backend.register_buffer(hipfile.Buffer(src, TOTAL))
        backend.register_stream(raw)
        yield backend.open_slab(str(tmp_path), TOTAL, False), src, raw


def test_retirement_reports_errors(one_stream_slab: tuple[Any, int, int]) -> None:
    slab, src, raw = one_stream_slab
    ret = gds.Retirement()
    # a read past what was written is short: the slab is pre-allocated,
    # so shrink it behind the handle's back to provoke one
    os.truncate(slab.path, CHUNK // 2)
    ret.track(slab.read_async(src, CHUNK, 0, 0, raw))
    ret.track(slab.read_async(src, CHUNK, 0, CHUNK, raw))
    with pytest.raises(OSError, match="short transfer"):
        ret.drain()
    assert len(ret) == 0 and ret.retired == 2


@pytest.mark.emulated
def test_retirement_raises_the_library_error(one_stream_slab: tuple[Any, int, int]) -> None:
    from hipfile.platforms import emulated

    slab, src, raw = one_stream_slab
    ret = gds.Retirement()
    emulated.inject_fault("read_async", errno.EIO)
    ret.track(slab.read_async(src, CHUNK, 0, 0, raw))
    with pytest.raises(OSError, match="when the operation ran"):
        ret.drain()
    assert len(ret) == 0 and ret.retired == 1


def test_interface_errors(tmp_path: Path, bufs: tuple[Any, Any], streams: list[Any]) -> None:
    src, dst = bufs
    raw = int(streams[0])
    base = _counters()
    backend = gds.HipFileGDSBackend()
    try:
        with pytest.raises(ValueError, match="positive"):
            backend.open_slab(str(tmp_path), 0, True)
        backend.register_buffer(hipfile.Buffer(src, TOTAL))
        with pytest.raises(ValueError, match="already registered"):
            backend.register_buffer(hipfile.Buffer(src, TOTAL))
        backend.register_stream(raw)
        with pytest.raises(ValueError, match="already registered"):
            backend.register_stream(raw)
        slab = backend.open_slab(str(tmp_path), TOTAL, True)
        with pytest.raises(ValueError, match="was not registered"):
            slab.read_async(int(dst), CHUNK, 0, 0, raw)
        with pytest.raises(ValueError, match="was not registered"):
            slab.read_async(int(src), CHUNK, 0, 0, int(streams[1]))
        with pytest.raises(ValueError, match="outside"):
            slab.write_async(int(src), CHUNK, TOTAL - 1, 0, raw)
        with pytest.raises(ValueError, match="overruns"):
            slab.write_async(int(src), CHUNK, 0, TOTAL - 1, raw)
        with pytest.raises(KeyError):
            backend.deregister_buffer(hipfile.Buffer(dst, TOTAL))
        with pytest.raises(KeyError):
            backend.deregister_stream(int(streams[1]))
        backend.deregister_buffer(hipfile.Buffer(src, TOTAL))
        backend.deregister_stream(raw)
        slab.close()
        slab.close()  # idempotent
    finally:
        backend.close()
    backend.close()  # idempotent
    assert _counters() == base


def test_direct_io_refused_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      caplog: pytest.LogCaptureFixture) -> None:
    """A file system that refuses O_DIRECT (EINVAL at open) gets buffered I/O."""
    if not hasattr(os, "O_DIRECT"):
        pytest.skip("no O_DIRECT on this system")
    real_open = os.open

    def refusing_open(path: Any, flags: int, *args: Any) -> int:
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refusing_open)
    with gds.HipFileGDSBackend() as backend, caplog.at_level("WARNING"):
        slab = backend.open_slab(str(tmp_path), 4096, True)
        assert slab.direct_io is False
        assert not slab.closed
    assert "does not support O_DIRECT" in caplog.text


def test_exception_in_body_is_kept(tmp_path: Path, bufs: tuple[Any, Any]) -> None:
    src, _ = bufs
    base = _counters()
    with pytest.raises(KeyError, match="mine"), gds.HipFileGDSBackend() as backend:
        backend.register_buffer(hipfile.Buffer(src, TOTAL))
        backend.open_slab(str(tmp_path), TOTAL, False)
        raise KeyError("mine")
    assert _counters() == base


def test_demo_main(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gds.main(["--location", str(tmp_path), "--chunks", "12", "--chunk-kib", "8",
                     "--streams", "3"]) == 0
    out = capsys.readouterr().out
    assert "result=OK" in out and "retired=24" in out
    with pytest.raises(SystemExit):
        gds.main(["--chunks", "0"])
