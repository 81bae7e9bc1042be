"""The engine's runtime changed under it: thread counts, task sizes and the
release mechanism set between submissions, the staging ring and flags
trimmed, the threads shut down and restarted, handles dropped before they
complete. Every read and write must still move the right bytes, and the
process must neither crash nor hang (the heap corruption seen on a GPU came
after such a sequence)."""

from __future__ import annotations

import gc
import os
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _util import device_array, from_device, random_bytes, to_device

import hipfile
from hipfile import FileHandle

N = 1 << 20

THREADS = (1, 2, 3, 5, 8)
TASKS = (8 << 10, 64 << 10, 1 << 20, 2 << 20)
RELEASES = ("auto", "host-waits")


@pytest.fixture
def drv() -> Iterator[hipfile.Driver]:
    with hipfile.Driver() as d:
        yield d


@pytest.fixture
def settings_restored() -> Iterator[None]:
    names = ("engine_threads", "engine_task_size", "engine_release")
    hipfile.defaults.reset(*names)
    yield
    hipfile.defaults.reset(*names)
    hipfile.trim_pool()


def _idle(timeout: float = 30.0) -> None:
    """Wait for the engine to have nothing outstanding or parked."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = hipfile.engine.info()
        if not info["outstanding"] and not info["parked"]:
            return
        gc.collect()
        time.sleep(0.005)
    raise AssertionError(f"the engine is still busy: {hipfile.engine.info()}")


def _one_round(rng: random.Random, fh: FileHandle, out: FileHandle, dev: object, dev2: object,
               stream: object, data: np.ndarray) -> None:
    """Reads on the null stream and on ``stream``, a write read back, a
    dropped handle, in 8 KiB to 1 MiB pieces."""
    size = rng.choice((8 << 10, 200 << 10, N))
    off = rng.randrange(0, N - size + 1, 4096)
    h = fh.pread_async(dev, size, off, 0)
    assert h.wait(timeout=30) == size
    assert np.array_equal(from_device(dev, size), data[off:off + size])
    h = fh.pread_async(dev2, size, off, 0, stream)
    dropped = fh.pread_async(dev, size, 0, 0, stream)
    assert h.wait(timeout=30) == size
    del dropped              # parked until its stream passes
    assert np.array_equal(from_device(dev2, size), data[off:off + size])
    w = out.pwrite_async(dev2, size, off, 0, stream)
    assert w.wait(timeout=30) == size
    written = np.frombuffer(os.pread(out.fileno(), size, off), np.uint8)
    assert np.array_equal(written, data[off:off + size])
    assert fh.pread(dev, size, off).result(timeout=30) == size
    assert np.array_equal(from_device(dev, size), data[off:off + size])


@pytest.mark.parametrize("seed", range(3))
def test_settings_trims_and_restarts_between_submissions(drv, settings_restored, tmp_path: Path,
                                                         nb_stream, seed: int) -> None:
    rng = random.Random(seed)
    data = random_bytes(N, seed=seed)
    path = tmp_path / "in.bin"
    data.tofile(path)
    (tmp_path / "out.bin").write_bytes(b"\0" * N)
    with device_array(N) as dev, device_array(N) as dev2, FileHandle(path) as fh, \
            FileHandle(tmp_path / "out.bin", "r+") as out:
        to_device(dev2, np.zeros(N, np.uint8))
        for _ in range(12):
            _one_round(rng, fh, out, dev, dev2, nb_stream, data)
            change = rng.choice(("threads", "task", "release", "trim", "shutdown", "none"))
            if change == "threads":
                hipfile.defaults.set(engine_threads=rng.choice(THREADS))
            elif change == "task":
                hipfile.defaults.set(engine_task_size=rng.choice(TASKS))
            elif change == "release":
                hipfile.defaults.set(engine_release=rng.choice(RELEASES))
            elif change == "trim":
                _idle()
                hipfile.trim_pool()
            elif change == "shutdown":
                _idle()
                hipfile.engine.shutdown(timeout=30)
            if rng.random() < 0.3:
                # both at once, as a test's fixture and the next test's set() do
                hipfile.defaults.set(engine_threads=rng.choice(THREADS),
                                     engine_task_size=rng.choice(TASKS))
        _idle()


def _worker_read(path: Path, dev: object, stream: object, data: np.ndarray) -> None:
    """A read on the engine's worker path (its threads call hipFileRead)."""
    with hipfile.defaults.set(engine_data_path="hipfile"), FileHandle(path) as fh:
        assert fh.pread_async(dev, N, 0, 0, stream).wait(timeout=30) == N
    assert np.array_equal(from_device(dev, N), data)


def test_threads_that_called_hipfile_stop_before_the_driver_closes(settings_restored,
                                                                   tmp_path: Path,
                                                                   nb_stream) -> None:
    """A thread that called hipFile must not exit after the driver closed
    (cuFile frees its per-thread state then: a heap corruption at the next
    submission on a GPU): closing the driver stops the engine's threads if
    one of them called hipFile, and the next submission starts new ones.
    Threads that only read through the staging ring are left running."""
    data = random_bytes(N, seed=11)
    path = tmp_path / "in.bin"
    data.tofile(path)
    with device_array(N) as dev:
        for threads in (3, 5, 2, 4):
            hipfile.defaults.set(engine_threads=threads)
            with hipfile.Driver():
                _worker_read(path, dev, nb_stream, data)
                assert hipfile.engine.info()["threads"] == threads
            assert hipfile.engine.info()["threads"] == 0, "a thread that called hipFile outlived " \
                                                          "the driver"
        # the staged path (POSIX calls on the ring) keeps its threads
        with hipfile.Driver(), FileHandle(path) as fh:
            assert fh.pread_async(dev, N, 0, 0, nb_stream).wait(timeout=30) == N
            running = hipfile.engine.info()["threads"]
            assert running > 0
        if hipfile.engine.mechanism() == "stream-memory-operations":
            assert hipfile.engine.info()["threads"] == running
        _worker_read(path, dev, nb_stream, data)      # the threads start again
