"""Careless lifetimes: destroyed streams, dropped objects, cycles, two
threads, fork, interpreter exit, and with-blocks that never mask errors."""

from __future__ import annotations

import gc
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import (
    check,
    delayed_io,
    device_array,
    emu,
    from_device,
    gated_stream,
    held_stream,
    hip_stream,
)
from hip import hip

import hipfile
from hipfile import Buffer, FileHandle, Stream
from hipfile._lib import _hipfile

pytestmark = pytest.mark.emulated

N = 1 << 14


def _read_then_destroy_stream(path: Path, dev: Any) -> tuple[FileHandle, Stream, Any]:
    """Open ``path``, start a read of N bytes into ``dev`` on a new registered
    stream, then destroy that stream behind the binding (with the completion
    delay set, the read is still in flight)."""
    s = check(hip.hipStreamCreate())
    fh = FileHandle(path).open()
    stream = Stream(s)
    stream.register()
    h = fh.read_async(dev, N, 0, 0, stream)
    check(hip.hipStreamDestroy(s))
    return fh, stream, h


def test_stream_destroyed_behind_the_binding(driver, data_file):
    path, data = data_file
    emu().set_completion_delay(200_000)
    with device_array(N) as dev:
        fh, stream, h = _read_then_destroy_stream(path, dev)
        assert h.done()  # ended as lost, never raises
        assert h.bytes_done is None  # not proven yet
        assert "lost" in repr(h)
        # wait() proves completion with a device synchronise: the count is final
        assert h.wait() == N
        assert h.bytes_done == N
        assert np.array_equal(from_device(dev, N), data)
        # nothing stays unclosable; deregistration raises at most once
        try:
            stream.deregister()
        except hipfile.HipFileException:
            pass
        stream.deregister()
        assert not stream.registered
        fh.close()
        del h
        gc.collect()
        assert _hipfile.pool_stats()["parked"] == 0  # proven: the slot went back


def test_completed_before_its_stream_was_destroyed(driver, data_file):
    """A wait on an operation that completed before its stream was destroyed
    returns the count: with an event recorded behind it (it answers after
    the stream is gone), and without one (a device synchronise proves it)."""
    path, data = data_file
    for record in (True, False):
        with device_array(N) as dev, FileHandle(path) as fh:
            s = check(hip.hipStreamCreate())
            h = fh.read_async(dev, N, 0, 0, s)
            if record:
                h.record_event()
            check(hip.hipStreamSynchronize(s))
            check(hip.hipStreamDestroy(s))
            assert h.wait() == N
            assert h.bytes_done == N
            assert "done" in repr(h)
            assert np.array_equal(from_device(dev, N), data)


def test_handle_dropped_after_its_stream_was_destroyed(driver, data_file):
    path, _ = data_file
    emu().set_completion_delay(100_000)
    with device_array(N) as dev:
        fh, stream, h = _read_then_destroy_stream(path, dev)
        del h  # no marker can follow it: the slot is lost, the objects released
        gc.collect()
        assert fh.pending == 0 and stream.pending == 0
        fh.close()
        try:
            stream.deregister()
        except hipfile.HipFileException:
            pass
        assert not stream.registered
        assert _hipfile.pool_stats()["parked"] == 1
        _hipfile.trim_pool()
        assert _hipfile.pool_stats()["parked"] == 0


def test_done_from_two_threads_records_one_event(driver, data_file):
    import sys

    path, _ = data_file
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        with device_array(2 * N) as dev, hip_stream() as s, FileHandle(path) as fh:
            for _ in range(10):
                # the stream waits at a flag while the threads poll: h is in
                # flight for all of them, however late they start
                with held_stream(s) as release:
                    h = fh.read_async(dev, N, 0, 0, s)
                    fh.read_async(dev, N, 0, N, s)  # keeps the stream busy behind h
                    barrier = threading.Barrier(8)

                    def poll(h=h, barrier=barrier) -> None:
                        barrier.wait()
                        h.done()

                    threads = [threading.Thread(target=poll) for _ in range(8)]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
                    assert emu().counters()["events"] == 1
                    release()
                    assert h.wait() == N
                _hipfile.wait_for(fh)
    finally:
        sys.setswitchinterval(interval)


def test_dropped_stream_with_work_in_flight_is_deregistered_later(driver, data_file):
    path, _ = data_file
    # the stream is held at a flag, not by a delay: however long the
    # collection takes, the read is still in flight when the Stream goes
    with device_array(N) as dev, gated_stream() as (s, release), FileHandle(path) as fh:
        st = Stream(s)
        st.register()
        fh.read_async(dev, N, 0, 0, st)  # handle dropped: parked
        with pytest.warns(ResourceWarning, match="in flight"):
            del st
            gc.collect()
        assert emu().counters()["streams_registered"] == 1
        release()
        check(hip.hipStreamSynchronize(s))
        _hipfile.pool_stats()  # sweeps: the deferred deregistration runs
        assert emu().counters()["streams_registered"] == 0
        again = Stream(s)
        again.register()  # the same hipStream_t registers again
        again.deregister()


def test_cycle_through_a_pending_handle_is_collected(driver, data_file):
    path, _ = data_file
    emu().set_completion_delay(100_000)
    with device_array(N) as dev, hip_stream() as s:
        fh = FileHandle(path).open()
        buf = Buffer(dev)
        buf.register()
        fh.h = fh.read_async(buf, N, 0, 0, s)  # fh -> handle -> fh
        buf.h = fh.h
        del fh, buf
        check(hip.hipStreamSynchronize(s))
        with pytest.warns(ResourceWarning):
            gc.collect()
            gc.collect()
        left = emu().counters()
        assert left["handles"] == 0 and left["buffers"] == 0


def test_with_block_waits_and_never_masks(driver, data_file):
    path, data = data_file
    emu().set_completion_delay(100_000)
    with device_array(N) as dev, hip_stream() as s:
        with pytest.raises(KeyError) as info:
            with FileHandle(path) as fh, Stream(s) as st, Buffer(dev) as buf:
                h = fh.read_async(buf, N, 0, 0, st)
                raise KeyError("user")
        assert info.value.args == ("user",)
        assert fh.closed and not st.registered and not buf.registered
        assert h.done() and h.wait() == N
        assert np.array_equal(from_device(dev, N), data)
        # without an exception the with block waits, then closes
        with FileHandle(path) as fh:
            h = fh.read_async(dev, N, 0, 0, s)
        assert fh.closed and h.done()
        # explicit close never waits
        fh = FileHandle(path).open()
        h = fh.read_async(dev, N, 0, 0, s)
        with pytest.raises(hipfile.InFlightError):
            fh.close()
        h.wait()
        fh.close()


def test_failure_while_leaving_is_attached_not_substituted(driver, data_file, monkeypatch):
    """A batch entry (never polled) holds the buffer: leaving the with block
    waits a bounded time, the deregistration fails, and that failure is
    attached to the block's exception, which propagates unchanged."""
    from hipfile import _lifetime

    monkeypatch.setattr(_lifetime, "HELD_WAIT_TIMEOUT", 0.2)
    path, _ = data_file
    with device_array(N) as dev, FileHandle(path) as fh, hipfile.BatchIO(2) as batch:
        buf = Buffer(dev)
        with pytest.raises(KeyError) as info:
            with buf:
                batch.read(fh, buf, N)
                batch.submit()
                raise KeyError("user")
        assert info.value.args == ("user",)
        assert isinstance(info.value.__context__, hipfile.InFlightError)
        assert any("while leaving the with block" in n
                   for n in getattr(info.value, "__notes__", ["while leaving the with block"]))
        assert buf.registered  # nothing was dropped under the entry
        (event,) = batch.wait(timeout=30)
        assert event.ok
        buf.deregister()
        # without an exception in the block, the failure propagates
        with pytest.raises(hipfile.InFlightError):
            with buf:
                batch.read(fh, buf, N)
                batch.submit()
        batch.wait(timeout=30)
        buf.deregister()


def _in_child(fn) -> int:
    """Run ``fn`` in a forked child; returns its exit status (0: passed)."""
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 1
        try:
            fn()
            code = 0
        except BaseException:
            import traceback

            traceback.print_exc()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_fork_inherited_objects_raise_and_drop_quietly(driver, data_file):
    path, _ = data_file
    emu().set_completion_delay(200_000)
    with device_array(N) as dev, hip_stream() as s, FileHandle(path) as fh, \
            Stream(s) as st, Buffer(dev) as buf:
        h = fh.read_async(buf, N, 0, 0, st)
        counts = emu().counters()

        def child() -> None:
            import warnings

            warnings.simplefilter("error")
            assert _hipfile.fork_generation() == 1
            for call in (h.wait, h.done, lambda: fh.read(buf),
                         lambda: fh.read_async(dev, N), st.register, buf.register):
                try:
                    call()
                except hipfile.ForkedProcessError:
                    continue
                raise AssertionError(f"{call} did not raise")
            assert isinstance(hipfile.ForkedProcessError(), hipfile.HipFileException)
            fh.close()
            st.deregister()
            buf.deregister()
            assert emu().counters()["handles"] == counts["handles"]  # nothing asked of it

        assert _in_child(child) == 0
        assert h.wait() == N  # the parent is unaffected
        assert fh.read(buf, N) == N


def test_fork_finalizers_do_not_call_the_library(driver, data_file):
    path, _ = data_file
    with device_array(N) as dev, FileHandle(path) as fh, Buffer(dev) as buf:

        def child() -> None:
            import warnings

            warnings.simplefilter("error")
            global _keep
            del _keep
            gc.collect()
            assert emu().counters()["handles"] == 2  # none deregistered by the child

        global _keep
        kept = FileHandle(path).open()
        # registered (at first need): the child must not deregister either
        assert kept.handle is not None and fh.handle is not None
        _keep = (kept, buf)
        del kept
        try:
            assert _in_child(child) == 0
        finally:
            _keep[0].close()
            del _keep
        assert fh.read(buf, N) == N


_keep: object = None


def test_exit_with_work_in_flight_is_safe(tmp_path: Path):
    import subprocess
    import sys

    path = tmp_path / "d.bin"
    path.write_bytes(bytes(N))
    code = f"""
import hipfile
from hipfile.platforms import emulated
from hip import hip
err, dev = hip.hipMalloc({N})
d = hipfile.Driver().open()
fh = hipfile.FileHandle({str(path)!r}).open()
emulated.set_completion_delay(300_000)
fh.h = fh.read_async(dev, {N})
st = hipfile.Stream(0)
print("exiting", flush=True)
"""
    env = dict(os.environ, HIPFILE_PLATFORM="emulated", PYTHONWARNINGS="ignore")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "exiting" in out.stdout


def test_wait_for_waits_for_parked_slots(driver, data_file):
    path, _ = data_file
    with delayed_io(path, N, 200_000) as (dev, s, fh):
        fh.read_async(dev, N, 0, 0, s)  # dropped at once: parked
        assert fh.pending == 1
        assert _hipfile.wait_for(fh) == 0
        assert fh.pending == 0
