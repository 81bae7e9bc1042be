"""A close that waits (``close(wait=True)``, with or without a timeout, and
the exit of a ``with`` block) observes the stream engine's operations on
the file itself: it returns once their bytes are done, whether or not
anyone called ``done()`` or ``wait()`` on their handles, for every
submission form (``pread_async``, ``pwrite_async``, ``ordered=False``,
the ``_ranges`` forms, the file's and the module's scatter and gather).
The same holds for a :class:`hipfile.Buffer` left by its ``with`` block.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import check, from_device, hip_stream, returns_within, to_device
from hip import hip

import hipfile

N = 1 << 16
#: A close that does not see the operations end waits forever (or, leaving
#: a ``with`` block, 10 s and then raises): each close must return well
#: before this, which is generous for a loaded machine.
BOUND = 8


def _submit(form: str, fh: hipfile.FileHandle, dev: Any, st: Any) -> list[Any]:
    """Submit ``form`` on ``fh`` (N bytes); returns its handles."""
    half = N // 2
    ranges = [(half, 0, 0), (half, half, half)]
    if form == "pread_async":
        return [fh.pread_async(dev, N, 0, 0, st)]
    if form == "pread_async_unordered":
        return [fh.pread_async(dev, N, 0, 0, st, ordered=False)]
    if form == "pwrite_async":
        return [fh.pwrite_async(dev, N, 0, 0, st)]
    if form == "pread_async_ranges":
        return list(fh.pread_async_ranges(dev, ranges, st))
    if form == "pwrite_async_ranges":
        return list(fh.pwrite_async_ranges(dev, ranges, st))
    if form == "pread_async_scatter":
        return [fh.pread_async_scatter(dev, ranges, st)]
    if form == "pwrite_async_gather":
        return [fh.pwrite_async_gather(dev, ranges, st)]
    if form == "module_pread_async_scatter":
        return [hipfile.pread_async_scatter(dev, [(fh, half, 0, 0), (fh, half, half, half)], st)]
    if form == "module_pwrite_async_gather":
        return [hipfile.pwrite_async_gather(dev, [(fh, half, 0, 0), (fh, half, half, half)], st)]
    raise AssertionError(form)


FORMS = ["pread_async", "pread_async_unordered", "pwrite_async", "pread_async_ranges",
         "pwrite_async_ranges", "pread_async_scatter", "pwrite_async_gather",
         "module_pread_async_scatter", "module_pwrite_async_gather"]


def _close_wait(fh: hipfile.FileHandle, form: str, dev: Any, st: Any) -> list[Any]:
    handles = _submit(form, fh, dev, st)
    fh.close(wait=True)
    return handles


def _close_timeout(fh: hipfile.FileHandle, form: str, dev: Any, st: Any) -> list[Any]:
    handles = _submit(form, fh, dev, st)
    fh.close(wait=True, timeout=BOUND * 4)
    return handles


def _with_exit(fh: hipfile.FileHandle, form: str, dev: Any, st: Any) -> list[Any]:
    with fh:
        handles = _submit(form, fh, dev, st)
    return handles


CLOSES: dict[str, Callable[[hipfile.FileHandle, str, Any, Any], list[Any]]] = {
    "close_wait": _close_wait, "close_timeout": _close_timeout, "with_exit": _with_exit}


@pytest.mark.parametrize("close", sorted(CLOSES))
@pytest.mark.parametrize("form", FORMS)
def test_a_waiting_close_observes_unobserved_engine_handles(tmp_path: Path, form: str,
                                                            close: str) -> None:
    """No handle is looked at before the close: the close sees the bytes
    done by itself, returns within a few seconds, and the bytes are
    right."""
    path = tmp_path / "w.bin"
    data = np.random.default_rng(7).integers(0, 256, N, dtype=np.uint8)
    writes = "pwrite" in form
    path.write_bytes(b"\0" * N if writes else data.tobytes())
    dev = check(hip.hipMalloc(N))
    try:
        with hip_stream() as st:
            to_device(dev, data if writes else np.zeros(N, np.uint8))
            check(hip.hipDeviceSynchronize())
            fh = hipfile.open(path, "r+" if writes else "r")
            start = time.monotonic()
            with returns_within(BOUND, "the close"):
                handles = CLOSES[close](fh, form, dev, st)
            took = time.monotonic() - start
            assert fh.closed
            assert took < BOUND
            assert all(h.done() for h in handles)
            assert sum(h.wait() for h in handles) == N
            check(hip.hipStreamSynchronize(st))
            if writes:
                assert path.read_bytes() == data.tobytes()
            else:
                assert np.array_equal(from_device(dev, N), data)
            del handles
    finally:
        check(hip.hipFree(dev))


@pytest.mark.parametrize("form", ["pread_async", "pread_async_scatter"])
def test_leaving_a_buffer_block_observes_unobserved_engine_handles(tmp_path: Path,
                                                                   form: str) -> None:
    """A registered Buffer's ``with`` block ends as soon as the engine's
    operations into it are done, unobserved or not."""
    path = tmp_path / "b.bin"
    data = np.arange(N, dtype=np.uint8)
    path.write_bytes(data.tobytes())
    dev = check(hip.hipMalloc(N))
    try:
        with hip_stream() as st, hipfile.open(path) as fh:
            start = time.monotonic()
            with returns_within(BOUND, "the close"):
                with hipfile.Buffer(dev, N) as buf:
                    handles = _submit(form, fh, buf, st)
            assert time.monotonic() - start < BOUND
            assert not buf.registered
            assert all(h.done() for h in handles)
            check(hip.hipStreamSynchronize(st))
            assert np.array_equal(from_device(dev, N), data)
            del handles
    finally:
        check(hip.hipFree(dev))
