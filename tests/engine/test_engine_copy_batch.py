"""The staged path's read chunks in batches (``engine_copy_batch`` > 1):
one stream wait per batch, and every byte still the file's."""

from __future__ import annotations

import errno
from collections.abc import Iterator

import numpy as np
import pytest
from _util import (
    assert_ranges_equal,
    check,
    device_array,
    from_device,
    random_file,
    scattered_blocks,
)
from hip import hip

import hipfile
from hipfile import FileHandle
from hipfile._lib import _hipfile

BLOCK = 16 << 10
TASK = 64 << 10


@pytest.fixture(autouse=True)
def staged() -> Iterator[None]:
    if hipfile.engine.mechanism() != "stream-memory-operations":
        pytest.skip("the staged path needs stream waits")
    yield
    _hipfile.engine_inject_faults()


@pytest.fixture(params=[(1, 1), (4, 1), (8, 1), (4, 3), (64, 1)],
                ids=["batch1", "batch4", "batch8", "batch4-streams3", "batch-half-ring"])
def batched(request) -> Iterator[int]:
    """A ring of 16 slots of 64 KiB whose read chunks go in batches."""
    batch, streams = request.param
    hipfile.trim_pool()
    with hipfile.defaults.set(engine_copy_batch=batch, engine_copy_streams=streams,
                              engine_task_size=TASK, engine_staging_size=1 << 20):
        hipfile.trim_pool()
        yield batch
        hipfile.trim_pool()


@pytest.fixture
def stream(nb_stream: object) -> object:
    return nb_stream


def _stream_waits() -> int:
    return sum(d["stream_waits"] for d in hipfile.engine.info()["devices"].values())


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
