"""The C ABI: stream-ordered I/O and stream registration."""

from __future__ import annotations

import ctypes
import os
import time

import pytest
from _abi_calls import *  # noqa: F403

from hipfile import platforms
from hipfile.platforms import emulated

# --------------------------------------------------------------------------
# Stream-ordered I/O.


@pytest.mark.emulated
def test_async_round_trip_with_deferred_completion(
    lib: ctypes.CDLL, opened_fd: OpenedFd, stream: int,
) -> None:
    data = pattern(20000)
    fd, fh, buf = opened_fd(data, 20000)
    emulated.set_completion_delay(200_000)
    slots = Slots(20000)
    assert read_async(lib, fh, buf, slots, stream) == SUCCESS
    assert slots.bytes.value == 0  # written 0 at submit, the result comes later
    assert counters()["inflight"] == 1
    time.sleep(0.05)
    assert slots.bytes.value == 0
    sync(stream)
    assert slots.bytes.value == 20000
    assert counters()["inflight"] == 0
    assert get(buf, 20000) == data

    out = Slots(5000, file_offset=30000, buffer_offset=10)
    assert write_async(lib, fh, buf, out, stream) == SUCCESS
    assert out.bytes.value == 0
    sync(stream)
    assert out.bytes.value == 5000
    assert os.pread(fd, 5000, 30000) == data[10:5010]


def test_async_on_the_null_stream(lib: ctypes.CDLL, opened: Opened) -> None:
    data = pattern(3000)
    fh, buf = opened(data, 4096)
    slots = Slots(3000)
    assert read_async(lib, fh, buf, slots, None) == SUCCESS
    assert_landed(None, slots, buf, data)


@pytest.mark.emulated
def test_unfixed_slots_are_read_when_the_operation_runs(
    lib: ctypes.CDLL, file_8k: File8k, stream: int,
) -> None:
    data, fh, buf = file_8k
    put(buf, bytes(8192))
    emulated.set_completion_delay(150_000)
    slots = Slots(4096, file_offset=0, buffer_offset=0)
    assert read_async(lib, fh, buf, slots, stream) == SUCCESS
    slots.size.value = 100  # shrink
    slots.file_offset.value = 1000
    slots.buffer_offset.value = 8
    sync(stream)
    assert slots.bytes.value == 100
    assert get(buf, 108) == bytes(8) + data[1000:1100]


@pytest.mark.parametrize("flag", [FIXED_FILE_SIZE, FIXED_FILE_OFFSET, FIXED_BUF_OFFSET])
@pytest.mark.emulated
def test_fixed_slots_are_copied_at_submit(
    lib: ctypes.CDLL, file_8k: File8k, stream: int, flag: int,
) -> None:
    data, fh, buf = file_8k
    with stream_registered(lib, stream, flag):
        emulated.set_completion_delay(150_000)
        slots = Slots(2000, file_offset=100, buffer_offset=16)
        assert read_async(lib, fh, buf, slots, stream) == SUCCESS
        slots.size.value, slots.file_offset.value, slots.buffer_offset.value = 50, 3000, 40
        size = 2000 if flag == FIXED_FILE_SIZE else 50
        foff = 100 if flag == FIXED_FILE_OFFSET else 3000
        boff = 16 if flag == FIXED_BUF_OFFSET else 40
        assert_landed(stream, slots, buf + boff, data[foff : foff + size])


@pytest.mark.emulated
def test_all_fixed_flags_ignore_every_change(
    lib: ctypes.CDLL, file_8k: File8k, stream: int,
) -> None:
    data, fh, buf = file_8k
    with stream_registered(lib, stream, 7):
        emulated.set_completion_delay(100_000)
        slots = Slots(1000, file_offset=10, buffer_offset=20)
        assert read_async(lib, fh, buf, slots, stream) == SUCCESS
        slots.size.value = 10**9  # even growth is ignored: the value was copied
        slots.file_offset.value = -5
        slots.buffer_offset.value = -5
        assert_landed(stream, slots, buf + 20, data[10:1010])


@pytest.mark.emulated
def test_execution_errors_come_back_as_negative_counts(
    lib: ctypes.CDLL, file_8k: File8k, files: Files, handles: Alloc, stream: int,
) -> None:
    _, fh, buf = file_8k
    emulated.set_completion_delay(50_000)
    grow = Slots(100)
    negative = Slots(100)
    outside = Slots(100)
    assert read_async(lib, fh, buf, grow, stream) == SUCCESS
    assert read_async(lib, fh, buf, negative, stream) == SUCCESS
    assert read_async(lib, fh, buf, outside, stream) == SUCCESS
    grow.size.value = 101
    negative.file_offset.value = -1
    outside.buffer_offset.value = 8192 - 50
    sync(stream)
    assert grow.bytes.value == -INVALID_VALUE
    assert negative.bytes.value == -INVALID_VALUE
    assert outside.bytes.value == -INVALID_VALUE
    # A system error: reading through a write-only descriptor.
    wo = handles(files(b"x" * 100, os.O_WRONLY))
    slots = Slots(10)
    assert read_async(lib, wo, buf, slots, stream) == SUCCESS
    sync(stream)
    assert slots.bytes.value == -1


@pytest.mark.emulated
def test_async_submit_validation(
    lib: ctypes.CDLL, opened: Opened, hostmem: Alloc, stream: int,
) -> None:
    fh, buf = opened(pattern(8192), 4096)
    ok = Slots(100)
    args = [fh, buf, *ok.args(), stream]
    for i in range(1, 6):  # each of the five pointers
        bad = list(args)
        bad[i] = None
        assert code(lib.hipFileReadAsync(*bad)) == INVALID_VALUE
        assert code(lib.hipFileWriteAsync(*bad)) == INVALID_VALUE
    for slots in (Slots(100, file_offset=-1), Slots(100, buffer_offset=-1), Slots(4097)):
        assert read_async(lib, fh, buf, slots, stream) == INVALID_VALUE
        assert slots.bytes.value == -12345  # untouched when rejected
    assert read_async(lib, fh, buf, Slots(10, buffer_offset=4090), stream) == INVALID_VALUE
    assert read_async(lib, fh, hostmem(4096), Slots(10), stream) == HIP_MEMORY_TYPE_INVALID
    plain = ctypes.create_string_buffer(64)
    assert read_async(lib, fh, ctypes.addressof(plain), Slots(10), stream) == (
        HIP_MEMORY_TYPE_INVALID)
    assert counters()["inflight"] == 0


@pytest.mark.emulated
def test_async_on_an_unknown_stream_reports_the_hip_error(lib: ctypes.CDLL, opened: Opened) -> None:
    fh, buf = opened(pattern(100), 4096)
    dead = hip_check(hip.hipStreamCreate())
    dead_addr = addr(dead)
    hip_check(hip.hipStreamDestroy(dead))
    slots = Slots(10)
    result = lib.hipFileReadAsync(fh, buf, *slots.args(), dead_addr)
    assert result.err == HIP_DRIVER_ERROR and result.hip_drv_err != 0
    assert counters()["inflight"] == 0


def test_buffer_must_live_on_the_stream_device(
    lib: ctypes.CDLL, driver: None, files: Files, handles: Alloc,
) -> None:
    count = hip_check(hip.hipGetDeviceCount())
    if count < 2:  # type: ignore[operator]
        pytest.skip("needs two devices (HIPFILE_EMU_DEVICES=2)")
    fh = handles(files(pattern(100)))
    hip_check(hip.hipSetDevice(1))
    try:
        other = hip_check(hip.hipMalloc(4096))
    finally:
        hip_check(hip.hipSetDevice(0))
    s = hip_check(hip.hipStreamCreate())
    try:
        # InvalidValue, as AMD's library answers
        assert read_async(lib, fh, addr(other), Slots(10), addr(s)) == INVALID_VALUE
    finally:
        hip_check(hip.hipStreamDestroy(s))
        hip_check(hip.hipFree(other))


@pytest.mark.emulated
def test_stream_registration_rules(lib: ctypes.CDLL, stream: int) -> None:
    assert code(lib.hipFileStreamRegister(stream, 0x10)) == INVALID_VALUE
    assert code(lib.hipFileStreamRegister(stream, 0xF)) == SUCCESS
    assert counters()["streams_registered"] == 1
    assert code(lib.hipFileStreamRegister(stream, 0)) == INVALID_VALUE
    assert code(lib.hipFileStreamDeregister(stream)) == SUCCESS
    assert code(lib.hipFileStreamDeregister(stream)) == INVALID_VALUE
    assert code(lib.hipFileStreamRegister(None, 0)) == SUCCESS
    assert code(lib.hipFileStreamDeregister(None)) == SUCCESS
    assert code(lib.hipFileStreamRegister(0xBAD0, 0)) == INVALID_VALUE
    assert counters()["streams_registered"] == 0


@pytest.mark.skipif(
    platforms.active() is None,
    reason="a ROCm libhipfile (AMD's 0.2.0) takes hipFileStreamPageAlignedInputs as a hint "
           "and does not refuse unaligned inputs (platforms/emulated/README.md)")
@pytest.mark.cufile_differs("PAGE_ALIGNED_INPUTS is not checked")
def test_page_aligned_inputs_are_checked(lib: ctypes.CDLL, opened: Opened, stream: int) -> None:
    data = pattern(16384)
    fh, buf = opened(data, 16384)
    with stream_registered(lib, stream, PAGE_ALIGNED_INPUTS):
        assert read_async(lib, fh, buf, Slots(100), stream) == INVALID_VALUE
        assert read_async(lib, fh, buf, Slots(4096, file_offset=10), stream) == INVALID_VALUE
        slots = Slots(4096, file_offset=8192, buffer_offset=4096)
        assert read_async(lib, fh, buf, slots, stream) == SUCCESS
        assert_landed(stream, slots, buf + 4096, data[8192:12288])


@pytest.mark.emulated
def test_deregister_waits_for_operations_in_flight(
    lib: ctypes.CDLL, driver: None, files: Files, devmem: Alloc, stream: int,
) -> None:
    data = pattern(4096)
    rc, fh = register(lib, files(data))
    assert rc == SUCCESS
    buf = devmem(4096)
    emulated.set_completion_delay(200_000)
    slots = Slots(4096)
    assert read_async(lib, fh, buf, slots, stream) == SUCCESS
    lib.hipFileHandleDeregister(fh)
    assert slots.bytes.value == 4096  # the operation ran before the handle went
    assert counters()["handles"] == 0
    sync(stream)
    assert get(buf, 4096) == data
