"""One argument discipline: every public entry point refuses the same bad
value with the same exception type.

A table of entry points (each a small adapter that passes one argument of
one kind: a size, an offset, a timeout, a stream or a buffer) crossed with
a table of bad values and the exception type every entry point must raise
for it. A new entry point joins by adding one row; a new bad value by
adding one entry. The rules mirror the standard library's:

* sizes and offsets are integers (``operator.index``; bools refused, as
  ``os.pread`` refuses floats): TypeError; negative, or 2**63 and more
  (beyond ``off_t``): ValueError;
* timeouts are real numbers or None (``threading.Event.wait``,
  ``concurrent.futures.Future.result``): bools and strings TypeError,
  negative numbers and NaN ValueError;
* streams and buffers of a type nobody can decode: TypeError; a stream
  handle outside 0..2**64-1: ValueError;
* device numbers are integers (bools refused): TypeError; one that names no
  device (-1 is the current one): ValueError.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from _capability import implemented
from _util import device_array, emu, hip_stream, random_bytes

import hipfile
from hipfile import AsyncIOHandle, BatchIO, FileHandle, defaults, engine, parallel

N = 1 << 12

#: bad sizes and offsets -> the one exception type
BAD_INTS: list[tuple[Any, type[Exception]]] = [
    (-1, ValueError),
    (-(2**63) - 1, ValueError),
    (2**63, ValueError),
    (2**64, ValueError),
    (10**30, ValueError),
    (1.0, TypeError),
    (True, TypeError),
    ("8", TypeError),
    (b"8", TypeError),
    (object(), TypeError),
]

#: bad timeouts -> the one exception type
BAD_TIMEOUTS: list[tuple[Any, type[Exception]]] = [
    (-1, ValueError),
    (-0.5, ValueError),
    (-math.inf, ValueError),
    (math.nan, ValueError),
    ("1", TypeError),
    (True, TypeError),
    (False, TypeError),
    ([], TypeError),
    (object(), TypeError),
]

#: bad streams -> the one exception type
BAD_STREAMS: list[tuple[Any, type[Exception]]] = [
    ("0", TypeError),
    (1.5, TypeError),
    (object(), TypeError),
    (-1, ValueError),
    (2**64, ValueError),
]

#: bad device numbers -> the one exception type (-1: the current device)
BAD_DEVICES: list[tuple[Any, type[Exception]]] = [
    (-2, ValueError),
    (1 << 20, ValueError),
    (2**64, ValueError),
    (True, TypeError),
    (0.0, TypeError),
    ("0", TypeError),
    (None, TypeError),
]

#: bad buffers -> the one exception type
BAD_BUFFERS: list[tuple[Any, type[Exception]]] = [
    (None, TypeError),
    (object(), TypeError),
    (1.5, TypeError),
    ("abc", TypeError),
]


class Env:
    """What the adapters need: an open file, device memory, a stream, and
    one operation of every kind already completed (for the waits)."""

    def __init__(self, stack: ExitStack, path: Path) -> None:
        stack.enter_context(hipfile.Driver())
        self.dev = stack.enter_context(device_array(N))
        self.stream = stack.enter_context(hip_stream())
        self.fh = stack.enter_context(FileHandle(path, "r+"))
        self._batch: BatchIO | None = None
        if implemented("hipFileBatchIOGetStatus"):
            self._batch = stack.enter_context(BatchIO(4))
        self.aio = self.fh.read_async(self.dev, 8, 0, 0, self.stream)
        self.aio.wait()
        self.eng = self.fh.pread_async(self.dev, 8, 0, 0, self.stream)
        self.eng.wait()
        self.fut = self.fh.pread(self.dev, 8)
        self.fut.result()
        if self._batch is not None:
            self._batch.read(self.fh, self.dev, 8)
            self._batch.submit()
            self._batch.wait()
        self._stats: hipfile.stats.StatsContext | None = None
        if implemented("hipFileStatsCreateContext"):
            self._stats = stack.enter_context(
                hipfile.stats.StatsContext(os.getpid(), connect=False))

    @property
    def stats(self) -> hipfile.stats.StatsContext:
        """The statistics context, or :class:`Unavailable` where the library
        exports no statistics API (hipFile before 0.5.0)."""
        if self._stats is None:
            raise Unavailable("hipFileStatsCreateContext")
        return self._stats

    @property
    def batch(self) -> BatchIO:
        """The batch, or :class:`Unavailable` where the library has none."""
        if self._batch is None:
            raise Unavailable("hipFileBatchIOGetStatus")
        return self._batch


class Unavailable(Exception):
    """An entry point the loaded library does not implement (AMD's
    library has no batch API): its rows are left out there."""


Call = Callable[[Env, Any], object]


def _range(pos: int) -> Callable[[Any], tuple[Any, Any, Any]]:
    """(size, file_offset, buffer_offset) with ``value`` at ``pos``."""
    def make(value: Any) -> tuple[Any, Any, Any]:
        args: list[Any] = [8, 0, 0]
        args[pos] = value
        return args[0], args[1], args[2]
    return make


def _io_calls(r: Callable[[Any], tuple[Any, Any, Any]]) -> dict[str, Call]:
    """Every entry point that takes a transfer, with one argument replaced."""
    return {
        "FileHandle.read": lambda e, v: e.fh.read(e.dev, *r(v)),
        "FileHandle.write": lambda e, v: e.fh.write(e.dev, *r(v)),
        "FileHandle.pread": lambda e, v: e.fh.pread(
            e.dev, r(v)[0], r(v)[1], buffer_offset=r(v)[2]),
        "FileHandle.pwrite": lambda e, v: e.fh.pwrite(
            e.dev, r(v)[0], r(v)[1], buffer_offset=r(v)[2]),
        "parallel.pread": lambda e, v: parallel.pread(
            e.fh, e.dev, r(v)[0], r(v)[1], buffer_offset=r(v)[2]),
        "parallel.pwrite": lambda e, v: parallel.pwrite(
            e.fh, e.dev, r(v)[0], r(v)[1], buffer_offset=r(v)[2]),
        "FileHandle.read_async": lambda e, v: e.fh.read_async(e.dev, *r(v), e.stream),
        "FileHandle.write_async": lambda e, v: e.fh.write_async(e.dev, *r(v), e.stream),
        "FileHandle.pread_async": lambda e, v: e.fh.pread_async(e.dev, *r(v), e.stream),
        "FileHandle.pwrite_async": lambda e, v: e.fh.pwrite_async(e.dev, *r(v), e.stream),
        "FileHandle.pread_async_ranges": lambda e, v: e.fh.pread_async_ranges(
            e.dev, [r(v)], e.stream),
        "FileHandle.pwrite_async_ranges": lambda e, v: e.fh.pwrite_async_ranges(
            e.dev, [r(v)], e.stream),
        "FileHandle.pread_async_scatter": lambda e, v: e.fh.pread_async_scatter(
            e.dev, [(8, 0, 8), r(v)], e.stream),
        "FileHandle.pwrite_async_gather": lambda e, v: e.fh.pwrite_async_gather(
            e.dev, [(8, 0, 8), r(v)], e.stream),
        "batch_read": lambda e, v: hipfile.batch_read(e.fh, e.dev, [r(v)]),
        "batch_write": lambda e, v: hipfile.batch_write(e.fh, e.dev, [r(v)]),
        "BatchIO.read": lambda e, v: e.batch.read(e.fh, e.dev, *r(v)),
        "BatchIO.write": lambda e, v: e.batch.write(e.fh, e.dev, *r(v)),
        "AsyncIOHandle()": lambda e, v: AsyncIOHandle(*r(v)),
    }


def _set_slot(name: str) -> Call:
    def call(e: Env, v: Any) -> object:
        h = AsyncIOHandle(8, 0, 0)
        setattr(h, name, v)
        return h
    return call


SIZE_CALLS = _io_calls(_range(0)) | {"AsyncIOHandle.size=": _set_slot("size"),
                                     "reserve_pool": lambda e, v: hipfile.reserve_pool(v)}
FILE_OFFSET_CALLS = _io_calls(_range(1)) | {
    "AsyncIOHandle.file_offset=": _set_slot("file_offset")}
BUFFER_OFFSET_CALLS = _io_calls(_range(2)) | {
    "AsyncIOHandle.buffer_offset=": _set_slot("buffer_offset")}


def _close_wait(e: Env, v: Any) -> object:
    fh = FileHandle(e.fh.path)
    fh.open()
    try:
        return fh.close(wait=True, timeout=v)
    finally:
        fh.close()


TIMEOUT_CALLS: dict[str, Call] = {
    "AsyncIOHandle.wait": lambda e, v: e.aio.wait(v),
    "AsyncIOHandle.result": lambda e, v: e.aio.result(timeout=v),
    "StreamIOHandle.wait": lambda e, v: e.eng.wait(v),
    "StreamIOHandle.result": lambda e, v: e.eng.result(timeout=v),
    "AsyncIOHandle.get": lambda e, v: e.aio.get(v),
    "StreamIOHandle.get": lambda e, v: e.eng.get(v),
    "IOFuture.wait": lambda e, v: e.fut.wait(v),
    "BatchIO.result": lambda e, v: e.batch.result(v),
    "BatchIO.get": lambda e, v: e.batch.get(v),
    "IOFuture.result": lambda e, v: e.fut.result(v),
    "IOFuture.get": lambda e, v: e.fut.get(v),
    "IOFuture.exception": lambda e, v: e.fut.exception(v),
    "BatchIO.wait": lambda e, v: e.batch.wait(v),
    "BatchIO.get_status": lambda e, v: e.batch.get_status(0, v),
    "batch_read(timeout=)": lambda e, v: hipfile.batch_read(
        e.fh, e.dev, [(8, 0, 0)], timeout=v),
    "batch_write(timeout=)": lambda e, v: hipfile.batch_write(
        e.fh, e.dev, [(8, 0, 0)], timeout=v),
    "engine.shutdown": lambda e, v: engine.shutdown(v),
    "FileHandle.close(wait=True)": _close_wait,
    "StatsContext(timeout=)": lambda e, v: e.stats and hipfile.stats.StatsContext(
        os.getpid(), connect=False, timeout=v),
    "StatsContext.connect": lambda e, v: e.stats.connect(v),
    "StatsContext.poll": lambda e, v: e.stats.poll(block=True, timeout=v),
    "StatsContext.wait": lambda e, v: e.stats.wait(v),
    "defaults.set(wait_timeout)": lambda e, v: defaults.set(wait_timeout=v),
    "defaults.set(close_timeout)": lambda e, v: defaults.set(close_timeout=v),
}

STREAM_CALLS: dict[str, Call] = {
    "FileHandle.read_async": lambda e, v: e.fh.read_async(e.dev, 8, 0, 0, v),
    "FileHandle.write_async": lambda e, v: e.fh.write_async(e.dev, 8, 0, 0, v),
    "FileHandle.pread_async": lambda e, v: e.fh.pread_async(e.dev, 8, 0, 0, v),
    "FileHandle.pwrite_async": lambda e, v: e.fh.pwrite_async(e.dev, 8, 0, 0, v),
    "FileHandle.pread_async_ranges": lambda e, v: e.fh.pread_async_ranges(
        e.dev, [(8, 0, 0)], v),
    "FileHandle.pwrite_async_ranges": lambda e, v: e.fh.pwrite_async_ranges(
        e.dev, [(8, 0, 0)], v),
    "FileHandle.pread_async_scatter": lambda e, v: e.fh.pread_async_scatter(
        e.dev, [(8, 0, 0)], v),
    "FileHandle.pwrite_async_gather": lambda e, v: e.fh.pwrite_async_gather(
        e.dev, [(8, 0, 0)], v),
    "StreamIOHandle.wait_on": lambda e, v: e.eng.wait_on(v),
    "Stream()": lambda e, v: hipfile.Stream(v),
}

BUFFER_CALLS: dict[str, Call] = {
    name: call for name, call in {
        "FileHandle.read": lambda e, v: e.fh.read(v, 8),
        "FileHandle.write": lambda e, v: e.fh.write(v, 8),
        "FileHandle.pread": lambda e, v: e.fh.pread(v, 8),
        "FileHandle.pwrite": lambda e, v: e.fh.pwrite(v, 8),
        "parallel.pread": lambda e, v: parallel.pread(e.fh, v, 8),
        "parallel.pwrite": lambda e, v: parallel.pwrite(e.fh, v, 8),
        "FileHandle.read_async": lambda e, v: e.fh.read_async(v, 8, 0, 0, e.stream),
        "FileHandle.write_async": lambda e, v: e.fh.write_async(v, 8, 0, 0, e.stream),
        "FileHandle.pread_async": lambda e, v: e.fh.pread_async(v, 8, 0, 0, e.stream),
        "FileHandle.pwrite_async": lambda e, v: e.fh.pwrite_async(v, 8, 0, 0, e.stream),
        "FileHandle.pread_async_ranges": lambda e, v: e.fh.pread_async_ranges(
            v, [(8, 0, 0)], e.stream),
        "FileHandle.pwrite_async_ranges": lambda e, v: e.fh.pwrite_async_ranges(
            v, [(8, 0, 0)], e.stream),
        "FileHandle.pread_async_scatter": lambda e, v: e.fh.pread_async_scatter(
            v, [(8, 0, 0)], e.stream),
        "FileHandle.pwrite_async_gather": lambda e, v: e.fh.pwrite_async_gather(
            v, [(8, 0, 0)], e.stream),
        "batch_read": lambda e, v: hipfile.batch_read(e.fh, v, [(8, 0, 0)]),
        "batch_write": lambda e, v: hipfile.batch_write(e.fh, v, [(8, 0, 0)]),
        "BatchIO.read": lambda e, v: e.batch.read(e.fh, v, 8),
        "BatchIO.write": lambda e, v: e.batch.write(e.fh, v, 8),
        "Buffer()": lambda e, v: hipfile.Buffer(v),
    }.items()
}

DEVICE_CALLS: dict[str, Call] = {
    "engine.mechanism": lambda e, v: engine.mechanism(v),
    "engine.prepare": lambda e, v: engine.prepare(v),
}

TABLE: list[tuple[str, dict[str, Call], list[tuple[Any, type[Exception]]]]] = [
    ("size", SIZE_CALLS, BAD_INTS),
    ("file_offset", FILE_OFFSET_CALLS, BAD_INTS),
    ("buffer_offset", BUFFER_OFFSET_CALLS, BAD_INTS),
    ("timeout", TIMEOUT_CALLS, BAD_TIMEOUTS),
    ("stream", STREAM_CALLS, BAD_STREAMS),
    ("buffer", BUFFER_CALLS, BAD_BUFFERS),
    ("device", DEVICE_CALLS, BAD_DEVICES),
]


@pytest.fixture(scope="module")
def data_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("discipline") / "data.bin"
    path.write_bytes(random_bytes(N, seed=20).tobytes())
    return path


@pytest.fixture
def env(data_path: Path) -> Iterator[Env]:
    with ExitStack() as stack:
        e = Env(stack, data_path)
        yield e
    e.__dict__.clear()   # the handles give their pinned slots back before the leak check


@pytest.mark.parametrize(("kind", "calls", "values"), TABLE, ids=[row[0] for row in TABLE])
def test_same_bad_value_same_exception_everywhere(kind, calls, values, env,
                                                  platform) -> None:
    """Every entry point x every bad value of its kind -> the expected type;
    every disagreement is collected, so one run shows the whole table."""
    wrong = []
    left_out: set[str] = set()
    for name, call in calls.items():
        for value, expected in values:
            try:
                result = call(env, value)
            except Unavailable:
                left_out.add(name)
                continue
            except expected:
                continue
            except Exception as err:
                wrong.append(f"{name}({kind}={value!r}): {type(err).__name__}: {err}"
                             f" (expected {expected.__name__})")
                continue
            wrong.append(f"{name}({kind}={value!r}): accepted, returned {result!r}"
                         f" (expected {expected.__name__})")
    assert not wrong, "\n".join(wrong)
    assert len(left_out) < len(calls) // 2, left_out
    if platform == "emulated":
        assert emu().counters()["inflight"] == 0


def test_the_rules_accept_what_they_should(env) -> None:
    """The other side of the table: numpy scalars, integral floats for
    timeouts, 0, infinity and None are accepted by the same entry points."""
    import numpy as np

    for t in (None, 0, 0.0, 5, 2.5, np.float64(1.0), np.int64(1), math.inf):
        assert env.aio.wait(t) == 8
        assert env.eng.wait(t) == 8
        assert env.fut.result(t) == 8
        if env._batch is not None:
            env._batch.wait(t)
    big = (1 << 63) - 1
    with pytest.raises(ValueError, match="past the"):
        env.fh.read_async(env.dev, 8, 0, big, env.stream)   # in range, outside the buffer
    assert env.fh.read_async(env.dev, np.int64(8), np.uint32(0), 0, env.stream).wait() == 8
    assert engine.mechanism(np.int64(0)) == engine.mechanism(-1)   # device 0 is current
