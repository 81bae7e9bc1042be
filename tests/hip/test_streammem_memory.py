"""Stream memory operations: the wait-value attribute, signal memory, device memory
kinds and mapped pinned memory."""

from __future__ import annotations

import ctypes

import pytest
from _streammem_calls import *  # noqa: F403

pytestmark = NEEDS_HIP_PYTHON_10


# ------------------------------------------------------ attribute and memory


def test_device_reports_stream_wait_value_support() -> None:
    attr = hip.hipDeviceAttribute_t.hipDeviceAttributeCanUseStreamWaitValue
    assert int(attr) == 10013  # HIP's number: the runtime sees this value
    for device in range(ok(hip.hipGetDeviceCount())):  # type: ignore[call-overload]
        assert ok(hip.hipDeviceGetAttribute(attr, device)) == 1
    count = ok(hip.hipGetDeviceCount())
    assert err(hip.hipDeviceGetAttribute(attr, count)) == E.hipErrorInvalidDevice


def test_signal_memory_is_eight_zeroed_bytes_of_device_memory() -> None:
    ptr = ok(hip.hipExtMallocWithFlags(8, SIGNAL))
    try:
        attrs = ok(hip.hipPointerGetAttributes(ptr))
        assert attrs.type == hip.hipMemoryType.hipMemoryTypeDevice  # type: ignore[attr-defined]
        out = (ctypes.c_uint64 * 1)(0xDEAD)
        ok(hip.hipMemcpy(out, ptr, 8, K.hipMemcpyDeviceToHost))
        assert out[0] == 0
    finally:
        ok(hip.hipFree(ptr))


@pytest.mark.parametrize("size", [0, 4, 16, 4096])
def test_signal_memory_must_be_eight_bytes(size: int) -> None:
    assert err(hip.hipExtMallocWithFlags(size, SIGNAL)) == E.hipErrorInvalidValue


@pytest.mark.parametrize(
    "flags", [hip.hipDeviceMallocDefault, hip.hipDeviceMallocFinegrained, UNCACHED]
)
def test_ext_malloc_device_memory_kinds(flags: int) -> None:
    ptr = ok(hip.hipExtMallocWithFlags(4096, flags))
    try:
        src = (ctypes.c_ubyte * 4096)(*range(256), *range(256), *([7] * 3584))
        dst = (ctypes.c_ubyte * 4096)()
        ok(hip.hipMemcpy(ptr, src, 4096, K.hipMemcpyHostToDevice))
        ok(hip.hipMemcpy(dst, ptr, 4096, K.hipMemcpyDeviceToHost))
        assert bytes(dst) == bytes(src)
    finally:
        ok(hip.hipFree(ptr))


@pytest.mark.parametrize("flags", [0x5, 0x10, 0x80000000])
def test_ext_malloc_rejects_unknown_flags(flags: int) -> None:
    assert err(hip.hipExtMallocWithFlags(64, flags)) == E.hipErrorInvalidValue


@pytest.mark.emulated
def test_signal_memory_counts_as_a_device_allocation() -> None:
    before = emu_counters()["allocations"]
    ptr = ok(hip.hipExtMallocWithFlags(8, SIGNAL))
    assert emu_counters()["allocations"] == before + 1
    ok(hip.hipFree(ptr))
    assert emu_counters()["allocations"] == before
    assert err(hip.hipHostFree(ptr)) == E.hipErrorInvalidValue  # not host memory, gone


def test_mapped_host_memory_and_device_pointer(mapped: Mapped) -> None:
    flags = ok(hip.hipHostGetFlags(mapped.ptr))
    assert flags & hip.hipHostMallocMapped  # type: ignore[operator]
    src = (ctypes.c_ubyte * 64)(*range(64))
    ok(hip.hipMemcpy(mapped.dev, src, 64, K.hipMemcpyHostToDevice))
    assert bytes((ctypes.c_ubyte * 64).from_address(mapped.host)) == bytes(src)
    assert err(hip.hipHostGetDevicePointer(mapped.ptr, 1)) == E.hipErrorInvalidValue


def test_host_malloc_flag_combinations() -> None:
    flags = (
        hip.hipHostMallocMapped
        | hip.hipHostMallocPortable
        | hip.hipHostMallocCoherent
    )
    ptr = ok(hip.hipHostMalloc(256, flags))
    try:
        assert addr(ok(hip.hipHostGetDevicePointer(ptr, 0)))
    finally:
        ok(hip.hipHostFree(ptr))
    ptr = ok(hip.hipHostMalloc(256, hip.hipHostMallocMapped | NON_COHERENT))
    ok(hip.hipHostFree(ptr))
    both = hip.hipHostMallocCoherent | NON_COHERENT
    assert err(hip.hipHostMalloc(256, both)) == E.hipErrorInvalidValue


@pytest.mark.emulated  # the emulated runtime maps at the same address
def test_emulated_device_pointer_of_mapped_memory_is_the_host_address(mapped: Mapped) -> None:
    assert mapped.dev == mapped.host
    assert err(hip.hipHostGetDevicePointer(None, 0)) == E.hipErrorInvalidValue


def test_memset_d32_of_mapped_memory_follows_a_stream_wait(mapped: Mapped, stream: object) -> None:
    """hipMemsetD32Async through the device address of mapped pinned memory,
    held back by a stream wait until the host writes the flag: how the
    engine hands a batch of staging slots back with one call."""
    flag_host, flag_dev = mapped.word(0)
    first_host, first_dev = mapped.word(4)
    assert wait_value(32, stream, flag_dev, 1, GTE, ALL32) == E.hipSuccess
    assert err(hip.hipMemsetD32Async(first_dev, 0x7EADBEEF, 8, stream)) == E.hipSuccess
    assert stays_blocked(stream)
    assert [load(first_host + 4 * i) for i in range(8)] == [0] * 8
    store(flag_host, 1, 32)
    assert until(lambda: idle(stream))
    got = [load(first_host + 4 * i) for i in range(10)]
    assert got == [0x7EADBEEF] * 8 + [0, 0]     # exactly count words
    assert load(first_host - 4) == 0

