"""A failed load's cleanup (``_load._abandon``): the memory a read may still
land in is never freed before the read ends, and a Ctrl-C during the
cleanup's own wait reaches the caller."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import numpy as np
import pytest
from _util import from_device, held_stream, hip_stream, random_file

import hipfile
from hipfile._lib import _hipfile
from hipfile.safetensors import _load
from hipfile.safetensors._read import DeviceAllocation

N = 1 << 16


def _pending(owner: DeviceAllocation, wait: _load.Wait) -> _load._Pending:
    # only the owner and the wait matter to the cleanup. (No memory is
    # freed while the test holds the stream: hipFree waits for the device.)
    return _load._Pending("f", None, None, [], owner, owner.ptr, 0, 0,  # type: ignore[arg-type]
                          [], wait, N)


def test_ctrl_c_during_the_cleanup_keeps_memory_with_reads_in_flight(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    data = random_file(path, N, seed=71)
    owner = DeviceAllocation(N)
    with hip_stream() as s, hipfile.open(path) as fh:
        with held_stream(s) as go:
            handles = fh.pread_async_ranges(hipfile.Buffer(owner.ptr, N), [(N, 0, 0)], s)
            reads = [_load.ReadRange(0, N, 0)]
            wait = _load._waiter(reads, [h.wait for h in handles])
            # a real SIGINT while the cleanup waits for the held read; the
            # stream goes on after 10 s whatever happens (a cleanup that lost
            # the Ctrl-C and freed the memory at once would wait in hipFree)
            timer = threading.Timer(0.3, signal.raise_signal, (signal.SIGINT,))
            watchdog = threading.Timer(10, go)
            timer.start()
            watchdog.start()
            try:
                with pytest.raises(KeyboardInterrupt):
                    _load._abandon([_pending(owner, wait)])
            finally:
                timer.cancel()
                watchdog.cancel()
                watchdog.join()
            assert not owner.freed, "freed while its read was in flight"
            assert any(getattr(o, "owner", None) is owner for o in _hipfile.deferred_releases())
            hipfile.pool_stats()                     # a sweep of the deferred releases
            assert not owner.freed                   # still in flight
            go()
            assert [h.wait(30) for h in handles] == [N]
        assert np.array_equal(from_device(owner.ptr, N), data)
        hipfile.pool_stats()                         # the sweep that finds the reads ended
    assert owner.freed
    assert not any(getattr(o, "owner", None) is owner for o in _hipfile.deferred_releases())
