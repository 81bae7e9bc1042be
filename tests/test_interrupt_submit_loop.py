"""Ctrl-C landing anywhere inside a tight ``read_async`` submit loop leaves
every pinned allocation with an owner: after ``gc.collect()`` and
``trim_pool()`` the emulated runtime counts no host allocation left."""

from __future__ import annotations

import gc
import random
import signal
import threading
import time
from pathlib import Path

import pytest
from _util import device_array, emu, hip_stream, random_bytes

from hipfile import FileHandle, async_io

pytestmark = pytest.mark.emulated

N = 1 << 12
ROUNDS = 300


@pytest.fixture(scope="module")
def small_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("interrupt") / "data.bin"
    path.write_bytes(random_bytes(N, seed=7).tobytes())
    return path


class _Interrupts:
    """A SIGINT handler that raises KeyboardInterrupt only while armed, so
    that a signal arriving after the loop has ended is dropped."""

    def __init__(self) -> None:
        self.armed = False
        self.landed = 0

    def __call__(self, signum: int, frame: object) -> None:
        if self.armed:
            self.armed = False
            self.landed += 1
            raise KeyboardInterrupt


def _submit_until_interrupted(fh: FileHandle, dev: object, stream: object,
                              delay: float, interrupts: _Interrupts) -> None:
    """Submit, wait, drop and trim in a tight loop (every submit takes a new
    pinned page, every trim frees it) until a SIGINT raised from another
    thread after ``delay`` seconds lands somewhere inside it."""
    timer = threading.Timer(delay, signal.raise_signal, args=(signal.SIGINT,))
    try:
        interrupts.armed = True
        timer.start()
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            h = fh.read_async(dev, 64, 0, 0, stream)
            if random.random() < 0.5:
                h = fh.read_async(dev, 64, 64, 64, stream)   # dropped in flight: parked
            h.wait()
            del h
            async_io.trim_pool()
    except KeyboardInterrupt:
        pass
    finally:
        interrupts.armed = False
        timer.cancel()
        timer.join()


def test_interrupted_submit_loop_leaks_no_pinned_memory(driver, small_file):
    rng = random.Random(20)
    interrupts = _Interrupts()
    previous = signal.signal(signal.SIGINT, interrupts)
    try:
        with device_array(N) as dev, hip_stream() as s, FileHandle(small_file) as fh:
            for _ in range(ROUNDS):
                _submit_until_interrupted(fh, dev, s, rng.uniform(0.0, 0.004), interrupts)
            fh.close(wait=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert interrupts.landed > ROUNDS // 2
    gc.collect()
    async_io.trim_pool()
    counters = emu().counters()
    assert counters["host_allocations"] == 0, counters
    assert counters["events"] == 0, counters
