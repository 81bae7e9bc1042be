"""Stream memory operations: bad arguments, and the emulated platform's hooks and counters."""

from __future__ import annotations

import ctypes

import pytest
from _streammem_calls import *  # noqa: F403

pytestmark = NEEDS_HIP_PYTHON_10


# ------------------------------------------------------------ bad arguments


@pytest.mark.parametrize("width", [32, 64])
def test_null_pointer_is_invalid(stream: object, width: int) -> None:
    assert wait_value(width, stream, 0, 1, EQ, ALL32) == E.hipErrorInvalidValue
    assert write_value(width, stream, 0, 1) == E.hipErrorInvalidValue
    assert err(hip.hipGetLastError()) == E.hipErrorInvalidValue


@pytest.mark.parametrize("flags", [4, 5, 0xFF, 0x80000000])
@pytest.mark.parametrize("width", [32, 64])
def test_unknown_compare_is_invalid(stream: object, mapped: Mapped, width: int, flags: int) -> None:
    _, dev = mapped.word(0, width)
    assert wait_value(width, stream, dev, 1, flags, ALL32) == E.hipErrorInvalidValue
    assert until(lambda: idle(stream))  # nothing was queued


@pytest.mark.emulated  # what other runtimes do with such pointers is undefined
@pytest.mark.parametrize("width", [32, 64])
def test_unknown_or_misaligned_memory_is_invalid(
    stream: object, mapped: Mapped, width: int
) -> None:
    plain = (ctypes.c_uint64 * 2)()
    assert wait_value(width, stream, ctypes.addressof(plain), 1, EQ, 1) == E.hipErrorInvalidValue
    assert write_value(width, stream, ctypes.addressof(plain), 1) == E.hipErrorInvalidValue
    assert wait_value(width, stream, mapped.dev + 2, 1, EQ, 1) == E.hipErrorInvalidValue
    assert write_value(width, stream, mapped.dev + 2, 1) == E.hipErrorInvalidValue
    # The last word of an allocation: a 64-bit access would run past its end.
    if width == 64:
        flag = ok(hip.hipExtMallocWithFlags(8, SIGNAL))
        try:
            assert wait_value(64, stream, addr(flag) + 4, 1, EQ, 1) == E.hipErrorInvalidValue
            assert wait_value(32, stream, addr(flag) + 4, 0, EQ, ALL32) == E.hipSuccess
        finally:
            assert until(lambda: idle(stream))
            free_settled(hip.hipFree, flag)


@pytest.mark.emulated  # a destroyed handle is undefined behaviour elsewhere
def test_destroyed_stream_is_reported(mapped: Mapped) -> None:
    s = ok(hip.hipStreamCreate())
    ok(hip.hipStreamDestroy(s))
    assert wait_value(32, s, mapped.dev, 0, EQ, ALL32) == E.hipErrorContextIsDestroyed
    assert write_value(32, s, mapped.dev, 0) == E.hipErrorContextIsDestroyed


# -------------------------------------------------- emulated hooks and counters


@pytest.mark.emulated
def test_counters_show_queued_and_blocked_waits(stream: object, mapped: Mapped) -> None:
    host, dev = mapped.word(0)
    gate_host, gate_dev = mapped.word(1)
    # A wait behind another wait: both queued, one blocked.
    assert wait_value(32, stream, gate_dev, 1, EQ, ALL32) == E.hipSuccess
    assert wait_value(32, stream, dev, 1, EQ, ALL32) == E.hipSuccess
    try:
        assert until(lambda: emu_counters()["blocked_waits"] == 1)
        assert emu_counters()["stream_waits"] == 2
        store(gate_host, 1, 32)
        assert until(lambda: emu_counters()["stream_waits"] == 1)
        assert emu_counters()["blocked_waits"] == 1
    finally:
        store(gate_host, 1, 32)
        store(host, 1, 32)
    assert until(lambda: idle(stream))
    counts = emu_counters()
    assert (counts["stream_waits"], counts["blocked_waits"]) == (0, 0)


@pytest.mark.emulated
@pytest.mark.parametrize("op", ["wait_value", "write_value"])
def test_injected_fault_fails_the_next_call_only(
    stream: object, mapped: Mapped, op: str
) -> None:
    from hipfile.platforms import emulated

    host, dev = mapped.word(0)

    def call() -> E:
        if op == "wait_value":
            return wait_value(32, stream, dev, 0, EQ, ALL32)
        return write_value(32, stream, dev, 4)

    emulated.inject_stream_mem_fault(op, int(E.hipErrorOutOfMemory), count=2)
    # A call rejected for its arguments does not use up the fault.
    assert wait_value(32, stream, 0, 0, EQ, ALL32) == E.hipErrorInvalidValue
    assert write_value(32, stream, 0, 0) == E.hipErrorInvalidValue
    assert call() == E.hipErrorOutOfMemory
    assert call() == E.hipErrorOutOfMemory
    assert err(hip.hipGetLastError()) == E.hipErrorOutOfMemory
    assert call() == E.hipSuccess
    assert until(lambda: idle(stream))
    assert load(host) == (4 if op == "write_value" else 0)
    emulated.inject_stream_mem_fault(op, int(E.hipErrorNotSupported), count=5)
    emulated.reset()
    assert call() == E.hipSuccess
    assert until(lambda: idle(stream))


@pytest.mark.emulated
def test_fault_hook_rejects_bad_arguments() -> None:
    from hipfile.platforms import emulated

    with pytest.raises(ValueError, match="unknown stream memory op"):
        emulated.inject_stream_mem_fault("read", 1)
    with pytest.raises(ValueError, match="bad error"):
        emulated.inject_stream_mem_fault("wait_value", 0)
    with pytest.raises(ValueError, match="count"):
        emulated.inject_stream_mem_fault("wait_value", 1, count=-1)


@pytest.mark.emulated
def test_signal_memory_requirement(stream: object, mapped: Mapped) -> None:
    from hipfile.platforms import emulated

    flag = ok(hip.hipExtMallocWithFlags(8, SIGNAL))
    plain = ok(hip.hipMalloc(64))
    try:
        emulated.require_signal_memory(True)
        assert wait_value(32, stream, mapped.dev, 0, EQ, ALL32) == E.hipErrorInvalidValue
        assert wait_value(32, stream, addr(plain), 0, EQ, ALL32) == E.hipErrorInvalidValue
        assert wait_value(64, stream, addr(flag), 0, EQ, ALL64) == E.hipSuccess
        # Writes go anywhere the device can reach.
        assert write_value(32, stream, mapped.dev, 1) == E.hipSuccess
        emulated.require_signal_memory(False)
        assert wait_value(32, stream, mapped.dev, 1, EQ, ALL32) == E.hipSuccess
        emulated.require_signal_memory(True)
        emulated.reset()  # back to the default: any known memory
        assert wait_value(32, stream, addr(plain), 0, GTE, ALL32) == E.hipSuccess
        assert until(lambda: idle(stream))
    finally:
        emulated.require_signal_memory(None)
        free_settled(hip.hipFree, plain)
        free_settled(hip.hipFree, flag)
