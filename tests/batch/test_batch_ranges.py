"""batch_read / batch_write: several batches in flight, one hold of the file
and buffer for the whole call, and bounded waits.

Peer behaviour mirrored: the workflow KvikIO documents for its
``BatchHandle`` (``cpp/include/kvikio/batch.hpp``: one submission per handle
at a time, status until every operation has reported, then the handle takes
the next submission), and cuda-python's
``cuda_bindings/tests/test_cufile.py::test_batch_io_large_operations``
(every cookie reported once, bytes as asked).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import device_array, emu, from_device, random_bytes, random_file, scattered_blocks
from test_conveniences import _require_batch_status

import hipfile
from hipfile._lib import _hipfile

BLOCK = 4096
BLOCKS = 96


@pytest.fixture
def batch_status() -> None:
    _require_batch_status()


@pytest.fixture
def blocks(tmp_path: Path) -> tuple[Path, np.ndarray]:
    path = tmp_path / "blocks.bin"
    data = random_file(path, BLOCK * BLOCKS, seed=23)
    return path, data


def _scattered() -> list[tuple[int, int, int]]:
    return scattered_blocks(BLOCKS, BLOCK, seed=5)


def _expected(data: np.ndarray, ranges: list[tuple[int, int, int]]) -> np.ndarray:
    out = np.zeros_like(data)
    for size, foff, boff in ranges:
        out[boff:boff + size] = data[foff:foff + size]
    return out


@pytest.fixture
def submitted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The entry counts of the batches submitted during the test, in order."""
    counts: list[int] = []
    real = _hipfile.batch_io_submit

    def submit(batch: int, nr: int, params: int, flags: int = 0) -> None:
        counts.append(nr)
        real(batch, nr, params, flags)

    monkeypatch.setattr(_hipfile, "batch_io_submit", submit)
    return counts


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[], None]], None]]:
    """Run a callback inside every hipFileBatchIOGetStatus call of the shim."""
    hooks: list[Callable[[], None]] = []
    real = _hipfile.batch_io_get_status

    def get_status(*args: Any) -> Any:
        for hook in hooks:
            hook()
        return real(*args)

    monkeypatch.setattr(_hipfile, "batch_io_get_status", get_status)
    yield hooks.append


#: cuFile's compatibility mode (the cuda platform) never returns from the
#: submission of a second batch while one is in flight.
_SECOND_BATCH_HANGS = pytest.mark.cufile_differs(
    "cuFile 1.15's compatibility mode hangs in cuFileBatchIOSubmit with a second batch "
    "in flight")


@pytest.mark.parametrize("in_flight", [None, 1, pytest.param(3, marks=_SECOND_BATCH_HANGS)])
def test_scattered_blocks_land_in_their_slots(batch_status: None, driver: hipfile.Driver,
                                              blocks: tuple[Path, np.ndarray],
                                              in_flight: int | None) -> None:
    path, data = blocks
    ranges = _scattered()
    with device_array(data.nbytes) as dev, hipfile.open(path) as fh:
        got = hipfile.batch_read(fh, dev, ranges, batch_size=16, in_flight=in_flight,
                                 timeout=60)
        out = from_device(dev, data.nbytes)
    assert got == [BLOCK] * BLOCKS
    assert np.array_equal(out, _expected(data, ranges))


@_SECOND_BATCH_HANGS
def test_write_scattered_then_read_back(batch_status: None, driver: hipfile.Driver,
                                        tmp_path: Path) -> None:
    data = random_bytes(BLOCK * BLOCKS, seed=24)
    path = tmp_path / "w.bin"
    ranges = _scattered()
    src = _expected(data, ranges)  # block i of the file sits at slot i of the buffer
    with device_array(data.nbytes) as dev, hipfile.open(path, "w") as fh:
        from _util import to_device

        to_device(dev, src)
        assert hipfile.batch_write(fh, dev, ranges, batch_size=8, in_flight=4) == \
            [BLOCK] * BLOCKS
    assert path.read_bytes() == data.tobytes()


@pytest.mark.emulated
@pytest.mark.parametrize("in_flight", [1, 3])
def test_batches_overlap_up_to_in_flight(batch_status: None, driver: hipfile.Driver,
                                         blocks: tuple[Path, np.ndarray],
                                         spy: Callable[[Callable[[], None]], None],
                                         in_flight: int) -> None:
    """Several batch handles run at once, never more than asked, and all are
    destroyed by the end."""
    path, _ = blocks
    seen: list[int] = []
    spy(lambda: seen.append(emu().counters()["batches"]))
    emu().set_completion_delay(2000)
    with device_array(BLOCK * BLOCKS) as dev, hipfile.open(path) as fh:
        hipfile.batch_read(fh, dev, _scattered(), batch_size=8, in_flight=in_flight,
                           timeout=60)
    assert max(seen) == in_flight
    assert emu().counters()["batches"] == 0


@pytest.mark.emulated
def test_file_is_held_while_batches_run(batch_status: None, driver: hipfile.Driver,
                                        blocks: tuple[Path, np.ndarray],
                                        spy: Callable[[Callable[[], None]], None]) -> None:
    path, _ = blocks
    refused: list[BaseException] = []
    with device_array(BLOCK * BLOCKS) as dev, hipfile.open(path) as fh, \
            hipfile.Buffer(dev, BLOCK * BLOCKS) as buf:

        def close_both() -> None:
            for release in (fh.close, buf.deregister):
                try:
                    release()
                except hipfile.InFlightError as exc:
                    refused.append(exc)

        spy(close_both)
        assert hipfile.batch_read(fh, buf, _scattered(), batch_size=32) == [BLOCK] * BLOCKS
        assert len(refused) >= 2 and not fh.closed and buf.registered
        fh.close()  # released once the call returned
        assert fh.closed


@pytest.mark.emulated
def test_timeout_cancels_and_destroys(batch_status: None, driver: hipfile.Driver,
                                      blocks: tuple[Path, np.ndarray]) -> None:
    path, _ = blocks
    emu().set_completion_delay(200_000)
    with device_array(BLOCK * BLOCKS) as dev, hipfile.open(path) as fh:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="still in flight"):
            hipfile.batch_read(fh, dev, _scattered(), batch_size=8, in_flight=2,
                               timeout=0.05)
        assert time.monotonic() - t0 < 10
        assert emu().counters()["batches"] == 0
        emu().set_completion_delay(0)
        fh.close()  # nothing holds it any more


@pytest.mark.emulated
def test_failure_stops_new_batches(batch_status: None, driver: hipfile.Driver,
                                   blocks: tuple[Path, np.ndarray],
                                   submitted: list[int]) -> None:
    """After an entry fails no batch is submitted; the error of the first
    failing range is raised."""
    path, _ = blocks
    emu().inject_fault("batch", 5, 1, 2)  # EIO, the third entry
    with device_array(BLOCK * BLOCKS) as dev, hipfile.open(path) as fh, \
            pytest.raises(OSError) as info:
        hipfile.batch_read(fh, dev, _scattered(), batch_size=8, in_flight=2)
    assert info.value.errno == 5
    assert sum(submitted) < BLOCKS


def test_in_flight_is_checked(driver: hipfile.Driver, blocks: tuple[Path, np.ndarray]) -> None:
    path, _ = blocks
    with device_array(BLOCK) as dev, hipfile.open(path) as fh:
        with pytest.raises(ValueError, match="in_flight must be positive"):
            hipfile.batch_read(fh, dev, [(BLOCK, 0, 0)], in_flight=0)
        with pytest.raises(TypeError):
            hipfile.batch_read(fh, dev, [(BLOCK, 0, 0)], in_flight=1.5)  # type: ignore[arg-type]


@pytest.mark.emulated
def test_an_event_reported_twice_counts_once(batch_status: None, driver: hipfile.Driver,
                                             blocks: tuple[Path, np.ndarray],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A library that hands over an entry's event again (or a cookie that
    is not in flight) changes nothing: each entry counts once, in the slot
    that runs it. Mirrors the old per-entry table, which skipped cookies it
    no longer held."""
    import ctypes

    path, data = blocks
    real = _hipfile.batch_io_get_status
    row = np.dtype(hipfile.batch._abi.IO_EVENTS).itemsize

    def get_status(batch: int, min_nr: int, capacity: int, events: int,
                   timeout: Any = None, nr_out: int = 0) -> int:
        half = max(1, capacity // 2)  # room to hand every event over twice
        n = int(real(batch, min(min_nr, half), half, events, timeout, nr_out))
        extra = min(n, capacity - n)
        if extra:
            ctypes.memmove(events + n * row, events, extra * row)
            if nr_out:
                ctypes.c_uint.from_address(nr_out).value = n + extra
        return n + extra

    monkeypatch.setattr(_hipfile, "batch_io_get_status", get_status)
    ranges = _scattered()
    with device_array(data.nbytes) as dev, hipfile.open(path) as fh:
        got = hipfile.batch_read(fh, dev, ranges, batch_size=16, in_flight=2, timeout=60)
        out = from_device(dev, data.nbytes)
    assert got == [BLOCK] * BLOCKS
    assert np.array_equal(out, _expected(data, ranges))


@pytest.mark.emulated
def test_ctrl_c_cancels_and_releases(batch_status: None, driver: hipfile.Driver,
                                     blocks: tuple[Path, np.ndarray]) -> None:
    """Ctrl-C while batch_read waits: KeyboardInterrupt soon after, every
    batch canceled and destroyed, the file free to close."""
    import signal
    import threading

    path, _ = blocks
    emu().set_completion_delay(300_000)
    with device_array(BLOCK * BLOCKS) as dev, hipfile.open(path) as fh:
        timer = threading.Timer(0.1, signal.raise_signal, args=(signal.SIGINT,))
        timer.start()
        t0 = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                hipfile.batch_read(fh, dev, _scattered(), batch_size=8, in_flight=3)
        finally:
            timer.cancel()
            timer.join()
        assert time.monotonic() - t0 < 2.0
        assert emu().counters()["batches"] == 0
        emu().set_completion_delay(0)
        fh.close()
        assert fh.closed


def test_empty_ranges_submit_nothing(batch_status: None, driver: hipfile.Driver,
                                     blocks: tuple[Path, np.ndarray],
                                     submitted: list[int]) -> None:
    path, data = blocks
    with device_array(2 * BLOCK) as dev, hipfile.open(path) as fh:
        assert hipfile.batch_read(fh, dev, [(0, 0, 0), (BLOCK, BLOCK, BLOCK), (0, 0, BLOCK)]) \
            == [0, BLOCK, 0]
        assert hipfile.batch_read(fh, dev, [(0, 0, 0)]) == [0]
        out = from_device(dev, 2 * BLOCK)
    assert submitted == [1]
    assert np.array_equal(out[BLOCK:], data[BLOCK:2 * BLOCK])
