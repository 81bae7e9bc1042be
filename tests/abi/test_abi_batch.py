"""The C ABI: batch I/O."""

from __future__ import annotations

import ctypes
import os
import threading
import time
import warnings

import pytest
from _abi_calls import *  # noqa: F403

from hipfile.platforms import emulated

# --------------------------------------------------------------------------
# Batch I/O.


@pytest.mark.emulated
def test_batch_setup_rules(lib: ctypes.CDLL, driver: None, batches: Alloc) -> None:
    batch = P()
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), 0)) == INVALID_VALUE
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), 129)) == INVALID_VALUE
    assert code(lib.hipFileBatchIOSetUp(None, 4)) == INVALID_VALUE
    b = batches(128)
    assert counters()["batches"] == 1
    lib.hipFileBatchIODestroy(b)
    assert counters()["batches"] == 0
    lib.hipFileBatchIODestroy(b)  # unknown now: a no-op
    lib.hipFileBatchIODestroy(0x5555)
    assert code(lib.hipFileBatchIOCancel(b)) == INVALID_VALUE
    assert status(lib, b, 0, 4)[0] == INVALID_VALUE


@pytest.mark.needs("hipFileBatchIOGetStatus")
def test_batch_reads_and_writes(
    lib: ctypes.CDLL, opened_fd: OpenedFd, batches: Alloc,
) -> None:
    data = pattern(10000)
    fd, fh, buf = opened_fd(data, 16384)
    batch = batches(8)
    arr = params(
        [
            (READ, fh, buf, 0, 0, 4000),
            (READ, fh, buf, 4000, 4000, 4000),
            (READ, fh, buf, 8000, 8000, 4000),  # 2000 bytes left in the file
            (READ, fh, buf, 12000, 20000, 100),  # past the end
        ]
    )
    assert code(lib.hipFileBatchIOSubmit(batch, 4, arr, 0)) == SUCCESS
    rc, events = status(lib, batch, 4, 8)
    assert rc == SUCCESS
    assert sorted(events) == [(1, COMPLETE, 4000), (2, COMPLETE, 4000), (3, COMPLETE, 2000),
                              (4, COMPLETE, 0)]  # fmt: skip
    assert get(buf, 10000) == data
    # Each completion is reported once.
    assert status(lib, batch, 0, 8, timeout=0) == (SUCCESS, [])

    put(buf, pattern(3000, seed=5))
    arr = params([(WRITE, fh, buf, 0, 20000, 3000)])
    assert code(lib.hipFileBatchIOSubmit(batch, 1, arr, 0)) == SUCCESS
    assert status(lib, batch, 1, 1) == (SUCCESS, [(1, COMPLETE, 3000)])
    assert os.pread(fd, 3000, 20000) == pattern(3000, seed=5)


@pytest.mark.needs("hipFileBatchIOGetStatus")
@pytest.mark.cufile_differs("a bad entry fails the submit with BatchSubmitFailed (5035)")
def test_batch_submit_validation(
    lib: ctypes.CDLL, opened: Opened, hostmem: Alloc, batches: Alloc,
) -> None:
    fh, buf = opened(pattern(100), 4096)
    batch = batches(2)
    good = (READ, fh, buf, 0, 0, 10)

    def submit(entries: list[tuple[int, int, int, int, int, int]], nr: int | None = None) -> int:
        arr = params(entries)
        return code(lib.hipFileBatchIOSubmit(batch, len(entries) if nr is None else nr, arr, 0))

    assert submit([good] * 3) == INVALID_VALUE  # more than max_nr
    assert submit([good], nr=0) == INVALID_VALUE
    assert submit([(2, fh, buf, 0, 0, 10)]) == INVALID_VALUE
    assert submit([(READ, fh, buf, 0, -1, 10)]) == INVALID_VALUE
    assert submit([(READ, fh, buf, -1, 0, 10)]) == INVALID_VALUE
    assert submit([good, (READ, 0x999, buf, 0, 0, 10)]) == HANDLE_NOT_REGISTERED
    assert submit([(READ, fh, buf, 0, 0, 4097)]) == HIP_POINTER_RANGE_ERROR
    assert submit([(READ, fh, hostmem(64), 0, 0, 10)]) == HIP_MEMORY_TYPE_INVALID
    arr = params([good])
    arr[0].mode = 0
    assert code(lib.hipFileBatchIOSubmit(batch, 1, arr, 0)) == INVALID_VALUE
    assert code(lib.hipFileBatchIOSubmit(batch, 1, params([good]), 1)) == INVALID_VALUE
    assert code(lib.hipFileBatchIOSubmit(batch, 1, None, 0)) == INVALID_VALUE
    assert code(lib.hipFileBatchIOSubmit(0x777, 1, params([good]), 0)) == INVALID_VALUE
    # Nothing was queued by the rejected calls.
    assert status(lib, batch, 0, 2, timeout=0.05) == (SUCCESS, [])

    # Capacity: slots come back when their completion is reported.
    assert submit([good, good]) == SUCCESS
    assert submit([good]) == BATCH_FULL
    rc, events = status(lib, batch, 1, 1)
    assert rc == SUCCESS and len(events) == 1
    assert submit([good]) == SUCCESS
    rc, events = status(lib, batch, 2, 2)
    assert rc == SUCCESS and [e[1:] for e in events] == [(COMPLETE, 10)] * 2

    nr = ctypes.c_uint(1)
    events_arr = (IOEvent * 1)()
    assert code(lib.hipFileBatchIOGetStatus(batch, 2, ctypes.byref(nr), events_arr, None)) == (
        INVALID_VALUE
    )
    assert code(lib.hipFileBatchIOGetStatus(batch, 0, None, events_arr, None)) == INVALID_VALUE
    assert code(lib.hipFileBatchIOGetStatus(batch, 0, ctypes.byref(nr), None, None)) == (
        INVALID_VALUE
    )
    bad_ts = Timespec(0, 2_000_000_000)
    assert (
        code(
            lib.hipFileBatchIOGetStatus(
                batch, 0, ctypes.byref(nr), events_arr, ctypes.byref(bad_ts)
            )
        )
        == INVALID_VALUE
    )


@pytest.mark.emulated
def test_batch_min_nr_and_timeouts(lib: ctypes.CDLL, file_8k: File8k, batches: Alloc) -> None:
    _, fh, buf = file_8k
    batch = batches(4)
    emulated.set_completion_delay(300_000)
    arr = params([(READ, fh, buf, 0, 0, 100), (READ, fh, buf, 100, 100, 100)])
    assert code(lib.hipFileBatchIOSubmit(batch, 2, arr, 0)) == SUCCESS
    start = time.monotonic()
    assert status(lib, batch, 0, 4, timeout=0) == (SUCCESS, [])
    assert status(lib, batch, 1, 4, timeout=0.05) == (SUCCESS, [])
    assert time.monotonic() - start >= 0.04
    rc, events = status(lib, batch, 2, 4)  # no timeout: waits for both
    assert time.monotonic() - start >= 0.25
    assert rc == SUCCESS and sorted(events) == [(1, COMPLETE, 100), (2, COMPLETE, 100)]
    # min_nr above what is outstanding does not wait for ever.
    assert status(lib, batch, 3, 4) == (SUCCESS, [])


@pytest.mark.emulated
def test_batch_parameters_are_copied_at_submit(
    lib: ctypes.CDLL, file_8k: File8k, batches: Alloc,
) -> None:
    data, fh, buf = file_8k
    batch = batches(1)
    emulated.set_completion_delay(100_000)
    arr = params([(READ, fh, buf, 0, 1000, 500)])
    assert code(lib.hipFileBatchIOSubmit(batch, 1, arr, 0)) == SUCCESS
    arr[0].size = 7
    arr[0].file_offset = 0
    arr[0].cookie = 99
    assert status(lib, batch, 1, 1) == (SUCCESS, [(1, COMPLETE, 500)])
    assert get(buf, 500) == data[1000:1500]


@pytest.mark.emulated
def test_batch_cancel(lib: ctypes.CDLL, file_8k: File8k, batches: Alloc) -> None:
    _, fh, buf = file_8k
    batch = batches(16)
    emulated.set_completion_delay(100_000)
    arr = params([(READ, fh, buf, i * 100, i * 100, 100) for i in range(16)])
    assert code(lib.hipFileBatchIOSubmit(batch, 16, arr, 0)) == SUCCESS
    time.sleep(0.02)
    assert code(lib.hipFileBatchIOCancel(batch)) == SUCCESS
    # Cancel waited for the running entries: everything is reported now.
    rc, events = status(lib, batch, 0, 16, timeout=0)
    assert rc == SUCCESS and len(events) == 16
    assert sorted(e[0] for e in events) == list(range(1, 17))
    canceled = [e for e in events if e[1] == CANCELED]
    complete = [e for e in events if e[1] == COMPLETE]
    assert len(canceled) >= 1 and len(canceled) + len(complete) == 16
    assert all(e[2] == 0 for e in canceled) and all(e[2] == 100 for e in complete)
    # The batch is usable again.
    emulated.reset()
    assert code(lib.hipFileBatchIOSubmit(batch, 1, params([(READ, fh, buf, 0, 0, 10)]), 0)) == 0
    assert status(lib, batch, 1, 1) == (SUCCESS, [(1, COMPLETE, 10)])


def submitted(lib: ctypes.CDLL, files: Files, devmem: Alloc, max_nr: int, delay_us: int,
              reads: list[tuple[int, int, int]]) -> tuple[int, int, ctypes.c_void_p]:
    """A registered file, device memory and a batch (file and batch released by
    the test); ``reads``
    (buffer_offset, file_offset, size) are submitted, delayed by ``delay_us``."""
    rc, fh = register(lib, files(pattern(8192)))
    assert rc == SUCCESS
    buf = devmem(8192)
    batch = P()
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), max_nr)) == SUCCESS
    emulated.set_completion_delay(delay_us)
    arr = params([(READ, fh, buf, boff, foff, size) for boff, foff, size in reads])
    assert code(lib.hipFileBatchIOSubmit(batch, len(reads), arr, 0)) == SUCCESS
    return fh, buf, batch


@pytest.mark.emulated
def test_batch_destroy_with_entries_in_flight(
    lib: ctypes.CDLL, driver: None, files: Files, devmem: Alloc,
) -> None:
    reads = [(i * 100, 0, 100) for i in range(8)]
    fh, _, batch = submitted(lib, files, devmem, 8, 100_000, reads)
    waiter_result: list[int] = []

    def wait_all() -> None:
        waiter_result.append(status(lib, batch.value or 0, 8, 8)[0])

    t = threading.Thread(target=wait_all)
    t.start()
    time.sleep(0.02)
    lib.hipFileBatchIODestroy(batch)
    t.join(timeout=5)
    assert not t.is_alive()
    assert waiter_result in ([INVALID_VALUE], [SUCCESS])
    assert counters()["batches"] == 0
    lib.hipFileHandleDeregister(fh)


@pytest.mark.emulated
def test_forked_child_sees_nothing_in_flight(
    lib: ctypes.CDLL, driver: None, files: Files, devmem: Alloc,
) -> None:
    fh, buf, batch = submitted(lib, files, devmem, 4, 300_000, [(0, 0, 100), (100, 100, 100)])
    time.sleep(0.02)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: only hipFile calls, then leave at once
        result = 1
        try:
            rc, events = status(lib, batch.value or 0, 2, 4, timeout=2)
            ok = rc == SUCCESS and sorted(e[1] for e in events) == [CANCELED, CANCELED]
            lib.hipfileEmuReset()
            one = params([(READ, fh, buf, 0, 0, 10)])
            ok = ok and code(lib.hipFileBatchIOSubmit(batch, 1, one, 0)) == SUCCESS
            ok = ok and status(lib, batch.value or 0, 1, 1, timeout=2) == (
                SUCCESS,
                [(1, COMPLETE, 10)],
            )
            lib.hipFileBatchIODestroy(batch)
            lib.hipFileHandleDeregister(fh)  # would wait for ever if a user were left
            result = 0 if ok else 3
        finally:
            os._exit(result)
    deadline = time.monotonic() + 20
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(wait_status) == 0
    # The parent's entries were not disturbed.
    rc, events = status(lib, batch.value or 0, 2, 4)
    assert rc == SUCCESS and sorted(events) == [(1, COMPLETE, 100), (2, COMPLETE, 100)]
    lib.hipFileBatchIODestroy(batch)
    lib.hipFileHandleDeregister(fh)
