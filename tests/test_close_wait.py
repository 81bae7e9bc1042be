"""``FileHandle.close(wait=True, timeout=...)``: the public wait for a file's
operations in flight before an explicit close (dropped handles included),
the ``Executor.shutdown(wait=True)`` of a file; ``close()`` alone never
waits and its InFlightError names the way to wait."""

from __future__ import annotations

import numpy as np
import pytest
from _util import device_array, emu, from_device, hip_stream

from hipfile import FileHandle, InFlightError

pytestmark = pytest.mark.emulated

N = 1 << 14


def test_close_wait_waits_for_dropped_operations(driver, data_file):
    path, data = data_file
    emu().set_completion_delay(150_000)
    with device_array(2 * N) as dev, hip_stream() as s:
        fh = FileHandle(path).open()
        fh.read_async(dev, N, 0, 0, s)            # dropped at once: parked
        fh.pread_async(dev, N, 0, N, s)           # a stream-engine range, dropped too
        with pytest.raises(InFlightError, match=r"close\(wait=True\)"):
            fh.close()
        assert not fh.closed
        with pytest.raises(InFlightError):        # the timeout passes first
            fh.close(wait=True, timeout=0.001)
        assert not fh.closed                      # nothing changed
        fh.close(wait=True)
        assert fh.closed
        assert np.array_equal(from_device(dev, N), data[:N])
        assert np.array_equal(from_device(dev, N, N), data[:N])
        fh.close(wait=True)                       # idempotent


def test_close_wait_with_nothing_in_flight_and_bad_arguments(driver, data_file):
    path, _ = data_file
    fh = FileHandle(path).open()
    with pytest.raises(TypeError, match="wait=True"):
        fh.close(timeout=1.0)                     # a timeout means nothing without wait
    with pytest.raises(TypeError):
        fh.close(wait=1)                          # type: ignore[arg-type]
    with pytest.raises(ValueError):
        fh.close(wait=True, timeout=-1)
    assert not fh.closed
    fh.close(wait=True, timeout=0)
    assert fh.closed
