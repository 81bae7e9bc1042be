"""The emulated platform's hooks: fault injection, short transfers, counters."""

from __future__ import annotations

import ctypes
import errno

import pytest
from _abi_calls import *  # noqa: F403

from hipfile import platforms
from hipfile.platforms import emulated

# --------------------------------------------------------------------------
# Fault injection and short transfers.


@pytest.mark.emulated
def test_hooks_refuse_another_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platforms, "_active", "rocm")
    for call in (
        emulated.counters,
        emulated.reset,
        lambda: emulated.set_completion_delay(1),
        lambda: emulated.set_short_transfer(1),
        lambda: emulated.inject_fault("read", errno.EIO),
    ):
        with pytest.raises(RuntimeError, match="emulated platform is not active"):
            call()


@pytest.mark.emulated
def test_inject_fault_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown fault op"):
        emulated.inject_fault("open", errno.EIO)
    with pytest.raises(ValueError, match="bad errno"):
        emulated.inject_fault("read", 0)
    with pytest.raises(ValueError, match="bad errno"):
        emulated.inject_fault("read", 5000)
    with pytest.raises(ValueError):
        emulated.inject_fault("read", errno.EIO, count=-1)


@pytest.mark.emulated
def test_sync_faults(lib: ctypes.CDLL, opened: Opened) -> None:
    fh, buf = opened(pattern(1000), 4096)
    emulated.inject_fault("read", errno.EIO, count=2, after=1)
    assert lib.hipFileRead(fh, buf, 100, 0, 0) == 100
    for _ in range(2):
        ctypes.set_errno(0)
        assert lib.hipFileRead(fh, buf, 100, 0, 0) == -1
        assert ctypes.get_errno() == errno.EIO
    assert lib.hipFileRead(fh, buf, 100, 0, 0) == 100
    # Bad calls do not consume a fault.
    emulated.inject_fault("write", errno.ENOSPC)
    assert lib.hipFileWrite(fh, buf, 10, -1, 0) == -INVALID_VALUE
    ctypes.set_errno(0)
    assert lib.hipFileWrite(fh, buf, 10, 0, 0) == -1
    assert ctypes.get_errno() == errno.ENOSPC
    assert lib.hipFileWrite(fh, buf, 10, 0, 0) == 10
    # A hipFile code instead of an errno.
    emulated.inject_fault("read", INTERNAL_ERROR)
    assert lib.hipFileRead(fh, buf, 10, 0, 0) == -INTERNAL_ERROR
    # reset clears pending faults.
    emulated.inject_fault("read", errno.EIO, count=5)
    emulated.reset()
    assert lib.hipFileRead(fh, buf, 10, 0, 0) == 10


@pytest.mark.emulated
def test_async_faults(lib: ctypes.CDLL, opened: Opened, stream: int) -> None:
    fh, buf = opened(pattern(1000), 4096)
    emulated.inject_fault("read_async", errno.EIO, after=1)
    emulated.inject_fault("write_async", INTERNAL_ERROR)
    first, second, third, write = Slots(100), Slots(100), Slots(100), Slots(100)
    assert read_async(lib, fh, buf, first, stream) == SUCCESS
    assert read_async(lib, fh, buf, second, stream) == SUCCESS  # the submit still succeeds
    assert read_async(lib, fh, buf, third, stream) == SUCCESS
    assert write_async(lib, fh, buf, write, stream) == SUCCESS
    sync(stream)
    assert (first.bytes.value, second.bytes.value, third.bytes.value) == (100, -1, 100)
    assert write.bytes.value == -INTERNAL_ERROR


@pytest.mark.emulated
def test_register_faults(
    lib: ctypes.CDLL, driver: None, files: Files, devmem: Alloc, stream: int,
) -> None:
    fd = files(b"abc")
    buf = devmem(4096)
    emulated.inject_fault("register", errno.ENOMEM, count=3)
    assert register(lib, fd)[0] == INTERNAL_ERROR
    assert code(lib.hipFileBufRegister(buf, 4096, 0)) == INTERNAL_ERROR
    assert code(lib.hipFileStreamRegister(stream, 0)) == INTERNAL_ERROR
    live = counters()
    assert (live["handles"], live["buffers"], live["streams_registered"]) == (0, 0, 0)
    emulated.inject_fault("register", HANDLE_ALREADY_REGISTERED)
    assert register(lib, fd)[0] == HANDLE_ALREADY_REGISTERED
    rc, fh = register(lib, fd)
    assert rc == SUCCESS
    # A registration its own checks refuse takes no fault: the armed one
    # stays for the first that passes them.
    assert code(lib.hipFileBufRegister(buf, 4096, 0)) == SUCCESS
    with stream_registered(lib, stream, 0):
        emulated.inject_fault("register", errno.ENOMEM, count=1)
        assert code(lib.hipFileStreamRegister(stream, 0)) == INVALID_VALUE
        assert register(lib, fd)[0] == HANDLE_ALREADY_REGISTERED
        assert code(lib.hipFileBufRegister(buf + 1024, 1024, 0)) == MEMORY_ALREADY_REGISTERED
        assert code(lib.hipFileBufRegister(devmem(4096), 4096, 0)) == INTERNAL_ERROR
    assert code(lib.hipFileBufDeregister(buf)) == SUCCESS
    lib.hipFileHandleDeregister(fh)


@pytest.mark.emulated
def test_batch_faults(lib: ctypes.CDLL, opened: Opened, batches: Alloc) -> None:
    fh, buf = opened(pattern(1000), 4096)
    batch = batches(4)
    emulated.inject_fault("batch", errno.EIO, count=1, after=1)
    arr = params(
        [(READ, fh, buf, 0, 0, 10), (READ, fh, buf, 10, 0, 10), (READ, fh, buf, 20, 0, 10)]
    )
    assert code(lib.hipFileBatchIOSubmit(batch, 3, arr, 0)) == SUCCESS
    rc, events = status(lib, batch, 3, 4)
    assert rc == SUCCESS
    by_cookie = {c: (s, signed(r)) for c, s, r in events}
    assert by_cookie == {1: (COMPLETE, 10), 2: (FAILED, -errno.EIO), 3: (COMPLETE, 10)}
    emulated.inject_fault("batch", INTERNAL_ERROR)
    assert code(lib.hipFileBatchIOSubmit(batch, 1, params([(READ, fh, buf, 0, 0, 10)]), 0)) == 0
    rc, events = status(lib, batch, 1, 4)
    assert [(s, signed(r)) for _, s, r in events] == [(FAILED, -INTERNAL_ERROR)]


@pytest.mark.emulated
def test_short_transfers(lib: ctypes.CDLL, opened: Opened, stream: int, batches: Alloc) -> None:
    data = pattern(10000)
    fh, buf = opened(data, 10000)
    emulated.set_short_transfer(4096)
    assert lib.hipFileRead(fh, buf, 10000, 0, 0) == 4096
    assert get(buf, 4096) == data[:4096]
    slots = Slots(10000)
    assert read_async(lib, fh, buf, slots, stream) == SUCCESS
    sync(stream)
    assert slots.bytes.value == 4096
    batch = batches(1)
    assert code(lib.hipFileBatchIOSubmit(batch, 1, params([(READ, fh, buf, 0, 0, 10000)]), 0)) == 0
    assert status(lib, batch, 1, 1) == (SUCCESS, [(1, COMPLETE, 4096)])
    # A caller that loops gets everything.
    done = 0
    while done < len(data):
        n = lib.hipFileRead(fh, buf, len(data) - done, done, done)
        assert 0 < n <= 4096
        done += n
    assert get(buf, len(data)) == data
    emulated.set_short_transfer(None)
    assert lib.hipFileRead(fh, buf, 10000, 0, 0) == 10000


@pytest.mark.emulated
def test_counters_track_resources_and_reset_keeps_them(
    lib: ctypes.CDLL, driver: None, files: Files, devmem: Alloc, stream: int,
) -> None:
    base = counters()
    assert set(base) >= {
        "handles", "buffers", "streams_registered", "inflight", "batches",
        "allocations", "host_allocations", "streams", "events",
    }  # fmt: skip
    buf = devmem(4096)
    rc, fh = register(lib, files(b"x"))
    assert rc == SUCCESS
    assert code(lib.hipFileBufRegister(buf, 4096, 0)) == SUCCESS
    assert code(lib.hipFileStreamRegister(stream, 0)) == SUCCESS
    batch = P()
    assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), 1)) == SUCCESS
    emulated.reset()
    live = counters()
    for key in ("handles", "buffers", "streams_registered", "batches"):
        assert live[key] == base[key] + 1, key
    assert live["allocations"] >= 1 and live["streams"] >= 1
    lib.hipFileBatchIODestroy(batch)
    assert code(lib.hipFileStreamDeregister(stream)) == SUCCESS
    assert code(lib.hipFileBufDeregister(buf)) == SUCCESS
    lib.hipFileHandleDeregister(fh)
    live = counters()
    for key in ("handles", "buffers", "streams_registered", "batches", "inflight"):
        assert live[key] == base[key], key
