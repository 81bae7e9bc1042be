"""Batch I/O: BatchIO and BatchEvent over hipFileBatchIO*."""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import gc
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import check_range_errors, device_array, emu, from_device, random_bytes, to_device

import hipfile
from hipfile import BatchEvent, BatchIO, Buffer, FileHandle, Opcode, Status
from hipfile._lib import _hipfile

N = 1 << 16
CHUNK = N // 8


# -- round trips ----------------------------------------------------------------


@contextlib.contextmanager
def _chunk_reads(path: Path, count: int, capacity: int) -> Iterator[tuple[BatchIO, Any]]:
    """A batch of ``capacity`` entries with reads of the first ``count`` chunks
    of ``path`` submitted (cookie ``i`` for chunk ``i``, each to the same place
    in new device memory): yields (batch, device memory)."""
    with device_array(N) as dev, FileHandle(path) as fh, BatchIO(capacity) as batch:
        for i in range(count):
            batch.read(fh, dev, CHUNK, i * CHUNK, i * CHUNK, cookie=i)
        batch.submit()
        yield batch, dev


@pytest.mark.needs("hipFileBatchIOGetStatus")
def test_write_then_read_round_trip_with_cookies(driver, tmp_path):
    data = random_bytes(N, seed=3)
    path = tmp_path / "out.bin"
    with device_array(N) as src, device_array(N) as dst, \
            FileHandle(path, os.O_RDWR | os.O_CREAT) as fh, BatchIO(8) as batch:
        to_device(src, data)
        # write the chunks in reverse order, each with its own cookie object
        cookies = [("w", i) for i in range(8)]
        ids = [batch.write(fh, src, CHUNK, (7 - i) * CHUNK, i * CHUNK, cookie=cookies[i])
               for i in range(8)]
        assert batch.queued == 8
        assert batch.submit() == ids
        assert batch.queued == 0
        events = batch.wait(timeout=30)
        assert batch.inflight == 0
        assert sorted(e.cookie for e in events) == sorted(cookies)
        for e in events:
            assert isinstance(e, BatchEvent)
            assert e.status == Status.COMPLETE and e.ok and e.final
            assert e.result == CHUNK
            assert e.error() is None
            assert e.opcode == Opcode.WRITE
            assert e.entry == ids[e.cookie[1]]
        on_disk = np.frombuffer(path.read_bytes(), dtype=np.uint8)
        for i in range(8):
            want = data[i * CHUNK:(i + 1) * CHUNK]
            assert np.array_equal(on_disk[(7 - i) * CHUNK:(8 - i) * CHUNK], want), i

        # read it back in the original order
        for i in range(8):
            batch.read(fh, dst, CHUNK, (7 - i) * CHUNK, i * CHUNK, cookie=i)
        batch.submit()
        events = batch.wait(timeout=30)
        assert sorted(e.cookie for e in events) == list(range(8))
        assert all(e.ok and e.opcode == Opcode.READ for e in events)
        assert np.array_equal(from_device(dst, N), data)


@pytest.mark.needs("hipFileBatchIOGetStatus")
def test_default_cookie_is_the_entry_id(driver, data_file):
    path, data = data_file
    with device_array(N) as dev, FileHandle(path) as fh, BatchIO(4) as batch:
        a = batch.read(fh, dev, CHUNK, 0, 0)
        b = batch.read(fh, dev, np.int64(CHUNK), np.int64(CHUNK), np.uint32(CHUNK))
        assert a != b
        assert batch.submit() == [a, b]
        events = batch.wait(timeout=30)
        assert sorted(e.cookie for e in events) == sorted([a, b])
        assert all(e.cookie == e.entry for e in events)
        assert np.array_equal(from_device(dev, 2 * CHUNK), data[:2 * CHUNK])


@pytest.mark.needs("hipFileBatchIOGetStatus")
def test_registered_buffer_and_several_submits(driver, data_file):
    path, data = data_file
    with device_array(N) as dev, FileHandle(path) as fh, Buffer(dev) as buf, \
            BatchIO(8) as batch:
        batch.read(fh, buf, CHUNK, 0, 0, cookie="a")
        batch.read(fh, buf, CHUNK, CHUNK, CHUNK, cookie="b")
        batch.submit()
        batch.read(fh, buf, size=None, file_offset=2 * CHUNK, buffer_offset=2 * CHUNK,
                   cookie="rest")
        batch.submit()
        events = {e.cookie: e for e in batch.wait(timeout=30)}
        assert set(events) == {"a", "b", "rest"}
        assert events["rest"].result == N - 2 * CHUNK
        assert np.array_equal(from_device(dev, N), data)


@pytest.mark.needs("hipFileBatchIOGetStatus")
def test_read_past_end_of_file_is_short(driver, data_file):
    path, data = data_file
    with device_array(N) as dev, FileHandle(path) as fh, BatchIO(2) as batch:
        batch.read(fh, dev, N, N - 100, 0, cookie="tail")
        batch.read(fh, dev, 10, N + 5, N - 10, cookie="past")
        batch.submit()
        events = {e.cookie: e for e in batch.wait(timeout=30)}
        assert events["tail"].ok and events["tail"].result == 100
        assert events["past"].ok and events["past"].result == 0
        assert np.array_equal(from_device(dev, 100), data[-100:])


@pytest.mark.needs("hipFileBatchIOGetStatus")
def test_empty_submit_and_repr(driver):
    with BatchIO(3) as batch:
        assert batch.submit() == []
        assert batch.get_status() == []
        assert batch.wait() == []
        assert "max_nr=3" in repr(batch)
        assert batch.max_nr == 3
        assert batch.handle is not None and not batch.closed
    assert batch.closed and batch.handle is None
    assert "closed" in repr(batch)
    batch.close()  # idempotent
    with pytest.raises(hipfile.ClosedError, match="closed BatchIO") as info:
        batch.submit()
    assert isinstance(info.value, ValueError) and not isinstance(info.value,
                                                                 hipfile.ClosedFileError)


# -- status, min_nr, timeouts ---------------------------------------------------


@pytest.mark.emulated
def test_get_status_polls_waits_for_min_nr_and_times_out(driver, data_file):
    path, data = data_file
    emu().set_completion_delay(500_000)
    with _chunk_reads(path, 3, 4) as (batch, dev):
        assert batch.inflight == 3
        t0 = time.monotonic()
        assert batch.get_status() == []  # a poll returns at once
        assert batch.get_status(min_nr=1, timeout=0.02) == []
        assert time.monotonic() - t0 < 0.4
        got = batch.get_status(min_nr=3, timeout=30)
        assert sorted(e.cookie for e in got) == [0, 1, 2]
        assert all(e.ok for e in got)
        assert batch.inflight == 0
        # min_nr above what is in flight cannot hang
        assert batch.get_status(min_nr=4, timeout=None) == []
        assert np.array_equal(from_device(dev, 3 * CHUNK), data[:3 * CHUNK])


@pytest.mark.emulated
def test_wait_timeout_keeps_the_events(driver, data_file):
    path, _ = data_file
    emu().set_completion_delay(50_000)
    with _chunk_reads(path, 8, 8) as (batch, _):
        with pytest.raises(TimeoutError, match="still in flight"):
            batch.wait(timeout=0.01)
        events = batch.wait(timeout=30)
        # every entry reported exactly once, including any seen before the timeout
        assert sorted(e.cookie for e in events) == list(range(8))


def test_status_argument_checks(driver):
    with BatchIO(2) as batch:
        with pytest.raises(ValueError, match="min_nr"):
            batch.get_status(min_nr=3)
        with pytest.raises(ValueError, match="min_nr"):
            batch.get_status(min_nr=-1)
        with pytest.raises(TypeError):
            batch.get_status(min_nr=1.5)
        with pytest.raises(ValueError, match="timeout"):
            batch.get_status(timeout=-1)
        with pytest.raises(TypeError, match="timeout"):
            batch.get_status(timeout="1")
        with pytest.raises(ValueError, match="timeout"):
            batch.wait(timeout=-0.5)
        with pytest.raises(ValueError, match="flags"):
            batch.submit(flags=-1)


# -- cancel, errors -------------------------------------------------------------


@pytest.mark.emulated
def test_cancel_reports_canceled_entries(driver, data_file):
    path, _ = data_file
    emu().set_completion_delay(100_000)
    n = 16
    with device_array(N) as dev, FileHandle(path) as fh, BatchIO(n) as batch:
        for i in range(n):
            batch.read(fh, dev, N // n, i * (N // n), i * (N // n), cookie=i)
        batch.submit()
        batch.cancel()
        events = batch.wait(timeout=30)
        assert sorted(e.cookie for e in events) == list(range(n))
        canceled = [e for e in events if e.status == Status.CANCELED]
        completed = [e for e in events if e.status == Status.COMPLETE]
        assert len(canceled) + len(completed) == n
        assert canceled, "the emulated library runs 4 entries at a time"
        for e in canceled:
            assert not e.ok and e.final
            assert isinstance(e.error(), concurrent.futures.CancelledError)
        fh.close()  # nothing held any more


@pytest.mark.emulated
def test_injected_errno_fails_one_entry(driver, data_file):
    path, data = data_file
    emu().inject_fault("batch", errno.EIO, count=1, after=1)
    with _chunk_reads(path, 3, 3) as (batch, dev):
        events = {e.cookie: e for e in batch.wait(timeout=30)}
        assert events[0].ok and events[2].ok
        bad = events[1]
        assert bad.status == Status.FAILED and not bad.ok
        assert bad.result == -errno.EIO
        err = bad.error()
        assert isinstance(err, OSError) and err.errno == errno.EIO
        assert np.array_equal(from_device(dev, CHUNK), data[:CHUNK])


@pytest.mark.emulated
def test_injected_hipfile_code_decodes_to_its_exception(driver, data_file):
    path, _ = data_file
    emu().inject_fault("batch", int(hipfile.OpError.INVALID_VALUE), count=1)
    with device_array(N) as dev, FileHandle(path) as fh, BatchIO(1) as batch:
        batch.read(fh, dev, CHUNK)
        batch.submit()
        (event,) = batch.wait(timeout=30)
        assert event.status == Status.FAILED
        assert event.result == -int(hipfile.OpError.INVALID_VALUE)
        assert isinstance(event.error(), hipfile.InvalidValueError)


def test_event_error_decoding_without_a_library_result():
    ok = BatchEvent("c", Status.COMPLETE, 10)
    assert ok.ok and ok.error() is None
    assert isinstance(BatchEvent("c", Status.CANCELED, 0).error(),
                      concurrent.futures.CancelledError)
    assert isinstance(BatchEvent("c", Status.TIMEOUT, 0).error(), TimeoutError)
    assert isinstance(BatchEvent("c", Status.FAILED, -errno.ENOSPC).error(), OSError)
    assert BatchEvent("c", Status.FAILED, -errno.ENOSPC).error().errno == errno.ENOSPC
    failed = BatchEvent("c", Status.FAILED, 0).error()
    assert isinstance(failed, hipfile.HipFileException)
    assert failed.err == hipfile.OpError.BATCH_SUBMIT_FAILED
    assert not BatchEvent("c", Status.PENDING, 0).final
    with pytest.raises(AttributeError):
        ok.result = 3  # frozen


@pytest.mark.emulated  # AMD's checks; cuFile ignores unknown submit flags
def test_library_rejects_bad_flags_and_entries_stay_queued(driver, data_file):
    path, _ = data_file
    with device_array(N) as dev, FileHandle(path) as fh, BatchIO(2) as batch:
        batch.read(fh, dev, CHUNK)
        with pytest.raises(hipfile.HipFileException):
            batch.submit(flags=0x40000000)
        assert batch.queued == 1 and batch.inflight == 0
        fh.close()  # nothing was held
        assert batch.clear() == 1
        assert batch.queued == 0


# -- lifetime and holds ---------------------------------------------------------


@pytest.mark.emulated
def test_closing_a_file_with_entries_in_flight_raises(driver, data_file):
    path, data = data_file
    emu().set_completion_delay(100_000)
    with device_array(N) as dev, BatchIO(2) as batch:
        fh = FileHandle(path).open()
        buf = Buffer(dev)
        buf.register()
        batch.read(fh, buf, CHUNK)
        batch.submit()
        with pytest.raises(hipfile.InFlightError, match="in flight"):
            fh.close()
        with pytest.raises(hipfile.InFlightError, match="in flight"):
            buf.deregister()
        assert not fh.closed and buf.registered
        (event,) = batch.wait(timeout=30)
        assert event.ok
        fh.close()
        buf.deregister()
        assert np.array_equal(from_device(dev, CHUNK), data[:CHUNK])


@pytest.mark.emulated
def test_close_cancels_waits_and_releases(driver, data_file):
    path, _ = data_file
    emu().set_completion_delay(50_000)
    with device_array(N) as dev, FileHandle(path) as fh:
        batch = BatchIO(8)
        for i in range(8):
            batch.read(fh, dev, CHUNK, i * CHUNK, i * CHUNK)
        batch.submit()
        with pytest.raises(hipfile.InFlightError):
            fh.close()
        batch.close()
        assert batch.closed and batch.inflight == 0
        assert emu().counters()["batches"] == 0
        fh.close()  # released by close()


def test_file_closed_before_submit(driver, data_file):
    path, _ = data_file
    with device_array(N) as dev, BatchIO(2) as batch:
        fh = FileHandle(path).open()
        batch.read(fh, dev, CHUNK)
        fh.close()
        with pytest.raises(hipfile.ClosedFileError):
            batch.submit()
        with pytest.raises(hipfile.ClosedFileError):
            batch.read(fh, dev, CHUNK)
        assert batch.clear() == 1


def test_unclosed_batch_warns_and_is_destroyed(driver):
    batch = BatchIO(2)
    with pytest.warns(ResourceWarning, match="not closed"):
        del batch
        gc.collect()


def test_use_after_close_raises_value_error(driver, data_file):
    path, _ = data_file
    with device_array(N) as dev, FileHandle(path) as fh:
        batch = BatchIO(2)
        batch.close()
        for call in (lambda: batch.read(fh, dev), lambda: batch.write(fh, dev),
                     batch.submit, batch.get_status, batch.wait, batch.cancel,
                     batch.clear):
            with pytest.raises(ValueError, match="closed"):
                call()
        with pytest.raises(ValueError, match="closed"), batch:
            pass


# -- bad input ------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, 2**32])
def test_max_nr_range(driver, bad):
    with pytest.raises(ValueError, match="max_nr"):
        BatchIO(bad)


@pytest.mark.parametrize("bad", ["4", 4.0, None, True])
def test_max_nr_type(driver, bad):
    with pytest.raises(TypeError, match="max_nr"):
        BatchIO(bad)


def test_entry_argument_checks(driver, data_file):
    path, _ = data_file
    with device_array(N) as dev, FileHandle(path) as fh, BatchIO(2) as batch:
        with pytest.raises(TypeError, match="FileHandle"):
            batch.read(3, dev)
        with pytest.raises(TypeError):
            batch.read(fh, int(dev))  # a bare address has no size
        with pytest.raises(TypeError):
            batch.read(fh, object())
        with pytest.raises(ValueError, match="overruns"):
            batch.read(fh, dev, 10, 0, N - 5)
        check_range_errors(batch.read, batch.write, fh, dev, N)
        with pytest.raises(ValueError, match="at most"):
            batch.read(fh, Buffer(int(dev), _hipfile.MAX_IO_CHUNK + 1))
        assert batch.queued == 0
        batch.read(fh, dev, 10)
        batch.read(fh, dev, 10)
        with pytest.raises(ValueError, match="at most 2 entries"):
            batch.read(fh, dev, 10)
        assert batch.queued == 2
        assert batch.clear() == 2


@pytest.mark.emulated
def test_batch_full_with_entries_in_flight(driver, data_file):
    path, _ = data_file
    emu().set_completion_delay(50_000)
    with device_array(N) as dev, FileHandle(path) as fh, BatchIO(2) as batch:
        batch.read(fh, dev, CHUNK)
        batch.read(fh, dev, CHUNK)
        batch.submit()
        batch.read(fh, dev, CHUNK, cookie="late")
        with pytest.raises(hipfile.BatchFullError):
            batch.submit()
        assert len(batch.wait(timeout=30)) == 2
        assert batch.submit()
        (event,) = batch.wait(timeout=30)
        assert event.cookie == "late" and event.ok


@pytest.mark.emulated
def test_library_errors_at_set_up(data_file):
    # as AMD's library: set-up needs no open driver and leaves the use count
    with BatchIO(2):
        assert hipfile.use_count() == 0
    with hipfile.Driver():
        cap = hipfile.driver_get_properties().max_batch_io_count
        with pytest.raises(hipfile.InvalidValueError):
            BatchIO(cap + 1)
