"""Every blocking wait is interruptible and loses nothing (Ctrl-C while
blocked behind a long completion delay, then a later wait), and Ctrl-C
in a tight submit loop leaks no pinned memory."""

from __future__ import annotations

import concurrent.futures
import gc
import os
import random
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from _util import delayed_read, device_array, emu, from_device, hip_stream, random_bytes

import hipfile
from hipfile import BatchIO, FileHandle, Stream, async_io

pytestmark = pytest.mark.emulated

N = 1 << 14
DELAY_US = 1_500_000


def interrupt_after(seconds: float) -> threading.Timer:
    """SIGINT to this process (the main thread handles it) after ``seconds``."""
    t = threading.Timer(seconds, signal.raise_signal, args=(signal.SIGINT,))
    t.start()
    return t


def blocked_until_interrupt(fn) -> float:
    """Run ``fn`` (which blocks) until a SIGINT 0.2 s later; returns the
    latency between the signal and the KeyboardInterrupt."""
    timer = interrupt_after(0.2)
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            fn()
    finally:
        if timer.is_alive():
            timer.cancel()
    timer.join()
    return time.monotonic() - start - 0.2


def test_async_wait_is_interruptible_and_keeps_the_result(driver, data_file):
    path, data = data_file
    emu().set_completion_delay(DELAY_US)
    with device_array(N) as dev, hip_stream() as s, FileHandle(path) as fh, Stream(s) as st:
        h = fh.read_async(dev, N, 0, 0, st)
        late = blocked_until_interrupt(h.wait)
        assert late < 0.5
        assert not h.done()
        late = blocked_until_interrupt(lambda: h.result(timeout=30))
        assert late < 0.5
        assert h.wait() == N  # nothing lost
        assert np.array_equal(from_device(dev, N), data)


def test_batch_wait_is_interruptible_and_keeps_the_events(driver, data_file):
    path, data = data_file
    with device_array(2 * N) as dev, FileHandle(path) as fh, BatchIO(4) as batch:
        batch.read(fh, dev, N, 0, 0, cookie="fast")
        batch.submit()
        time.sleep(0.05)
        emu().set_completion_delay(DELAY_US)
        batch.read(fh, dev, N, 0, N, cookie="slow")
        batch.submit()
        late = blocked_until_interrupt(batch.wait)
        assert late < 0.5
        events = batch.wait(timeout=30)
        assert sorted(e.cookie for e in events if e.final) == ["fast", "slow"]
        assert all(e.ok for e in events if e.final)
        assert batch.inflight == 0
        assert np.array_equal(from_device(dev, N), data)


@pytest.mark.parametrize("where", ["engine", "pool"])
def test_parallel_result_is_interruptible(driver, data_file, where):
    """``pread(...).result()`` on the engine's threads (device memory) and
    on a thread pool (an executor given)."""
    from hipfile._lib import _hipfile

    path, data = data_file
    big = np.tile(data, 256)
    path.write_bytes(big.tobytes())
    # one byte a call, through hipFile or the staged path: the read runs for seconds
    emu().set_short_transfer(1)
    _hipfile.engine_inject_faults(short_max=1)
    pool = concurrent.futures.ThreadPoolExecutor(1) if where == "pool" else None
    with device_array(big.nbytes) as dev, FileHandle(path) as fh:
        fut = fh.pread(dev, big.nbytes, task_size=big.nbytes, executor=pool)
        try:
            late = blocked_until_interrupt(fut.result)
            assert late < 0.5
            assert not fut.done()
        finally:
            emu().set_short_transfer(None)
            _hipfile.engine_inject_faults()
        assert fut.result(timeout=60) == big.nbytes
        assert np.array_equal(from_device(dev, big.nbytes), big)
    if pool is not None:
        pool.shutdown()


def test_with_block_wait_is_interruptible(driver, data_file):
    path, _ = data_file
    emu().set_completion_delay(DELAY_US)
    with device_array(N) as dev, hip_stream() as s:
        fh = FileHandle(path).open()
        h = fh.read_async(dev, N, 0, 0, s)

        def leave() -> None:
            fh.__exit__(None, None, None)

        late = blocked_until_interrupt(leave)
        assert late < 0.5
        assert not fh.closed  # nothing changed
        assert h.wait() == N
        fh.close()


def test_wait_helper_times_out_and_reports(driver, data_file):
    path, _ = data_file
    with delayed_read(path, N, 300_000) as (h, _, fh):
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            h.wait(timeout=0.05)
        assert time.monotonic() - start < 0.25
        assert hipfile._lib._hipfile.wait_for(fh, timeout=0.01) == 1
        assert hipfile._lib._hipfile.wait_for(fh) == 0
        assert h.done() and h.wait() == N


def test_ctrl_c_in_a_subprocess(tmp_path: Path):
    """A real SIGINT from outside while the main thread waits."""
    import signal
    import subprocess
    import sys

    script = tmp_path / "victim.py"
    script.write_text(f"""
import os, sys, time
import numpy as np
import hipfile
from hipfile.platforms import emulated
from hip import hip
path = {str(tmp_path / 'd.bin')!r}
open(path, 'wb').write(bytes({N}))
err, dev = hip.hipMalloc({N})
with hipfile.Driver(), hipfile.FileHandle(path) as fh:
    emulated.set_completion_delay(1_500_000)
    h = fh.read_async(dev, {N}, 0, 0, 0)
    print('ready', flush=True)
    t0 = time.monotonic()
    try:
        h.wait()
    except KeyboardInterrupt:
        print('interrupted', round(time.monotonic() - t0, 3), flush=True)
    print('result', h.wait(), flush=True)
hip.hipFree(dev)
""")
    env = dict(os.environ, HIPFILE_PLATFORM="emulated", PYTHONWARNINGS="ignore")
    with subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                          env=env) as p:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        line = p.stdout.readline()
        latency = time.monotonic() - sent
        rest = p.stdout.read()
        assert p.wait(timeout=30) == 0
    assert line.startswith("interrupted"), line
    assert latency < 0.5
    assert f"result {N}" in rest


# Ctrl-C landing anywhere inside a tight ``read_async`` submit loop leaves
# every pinned allocation with an owner: after ``gc.collect()`` and
# ``trim_pool()`` the emulated runtime counts no host allocation left.

SUBMIT_N = 1 << 12
ROUNDS = 300


@pytest.fixture(scope="module")
def submit_loop_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("interrupt") / "data.bin"
    path.write_bytes(random_bytes(SUBMIT_N, seed=7).tobytes())
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


def test_interrupted_submit_loop_leaks_no_pinned_memory(driver, submit_loop_file):
    rng = random.Random(20)
    interrupts = _Interrupts()
    previous = signal.signal(signal.SIGINT, interrupts)
    try:
        with device_array(SUBMIT_N) as dev, hip_stream() as s, FileHandle(submit_loop_file) as fh:
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
