"""Stream memory operations of the test platform's HIP runtime, through HIP-Python.

``hipStreamWaitValue32/64``, ``hipStreamWriteValue32/64``,
``hipExtMallocWithFlags`` (signal memory), the
``hipDeviceAttributeCanUseStreamWaitValue`` attribute, and mapped pinned
memory with ``hipHostGetDevicePointer``: what a stream-ordered engine needs
to release GPU streams from host threads. Every call goes through HIP-Python
as users make it. Tests marked ``emulated`` use the emulated platform's hooks
or behaviour that another runtime leaves undefined; the rest also run on the
cuda platform. A wait that never releases would hang a test, so every wait
here is bounded: the tests poll with a deadline and always release in the end.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable, Iterator

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    if not os.environ.get("HIPFILE_PLATFORM") and not os.environ.get("ROCM_PATH"):
        os.environ["HIPFILE_PLATFORM"] = "emulated"
    import hipfile  # noqa: F401  (activates the platform named in the environment)
    from hipfile import platforms

from hip import hip

try:  # HIP-Python 6.x/7.x
    from hip._version import __version__ as _HIP_PYTHON_VERSION
except ImportError:  # 10.x keeps the old layout as a thin package
    _HIP_PYTHON_VERSION = "10"

pytestmark = pytest.mark.skipif(
    int(str(_HIP_PYTHON_VERSION).split(".")[0]) < 10,
    reason="the HIP runtime's tests use HIP-Python 10's API",
)

PLATFORM = platforms.active() or "rocm"
E = hip.hipError_t
K = hip.hipMemcpyKind
GTE = hip.hipStreamWaitValueGte
EQ = hip.hipStreamWaitValueEq
AND = hip.hipStreamWaitValueAnd
NOR = hip.hipStreamWaitValueNor
ALL32 = 0xFFFFFFFF
ALL64 = 0xFFFFFFFFFFFFFFFF
SIGNAL = hip.hipMallocSignalMemory
UNCACHED = 0x3  # hipDeviceMallocUncached (hip_runtime_api.h; not in every HIP-Python)
NON_COHERENT = 0x80000000  # hipHostMallocNonCoherent (HIP-Python holds it as a negative int)

WAIT_S = 10.0  # upper bound for anything that should happen
BLOCKED_S = 0.05  # how long a blocked stream must stay blocked to count as blocked


# -------------------------------------------------------------- utilities


def ok(result: tuple) -> object:  # type: ignore[type-arg]
    assert result[0] == E.hipSuccess, f"HIP call failed: {result[0]!r}"
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def err(result: tuple) -> E:  # type: ignore[type-arg]
    return result[0]


def addr(ptr: object) -> int:
    return int(ptr)  # type: ignore[call-overload]


def store(ptr: int, value: int, width: int) -> None:
    """A host store of a 32- or 64-bit word (what an I/O thread does)."""
    ctype = ctypes.c_uint32 if width == 32 else ctypes.c_uint64
    ctype.from_address(ptr).value = value


def load(ptr: int, width: int = 32) -> int:
    ctype = ctypes.c_uint32 if width == 32 else ctypes.c_uint64
    return int(ctype.from_address(ptr).value)


def wait_value(width: int, stream: object, ptr: int, value: int, flags: int, mask: int) -> E:
    fn = hip.hipStreamWaitValue32 if width == 32 else hip.hipStreamWaitValue64
    return err(fn(stream, ptr, value, flags, mask))


def write_value(width: int, stream: object, ptr: int, value: int) -> E:
    fn = hip.hipStreamWriteValue32 if width == 32 else hip.hipStreamWriteValue64
    return err(fn(stream, ptr, value, 0))


def until(predicate: Callable[[], bool], timeout: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.001)
    return predicate()


def idle(stream: object) -> bool:
    return err(hip.hipStreamQuery(stream)) == E.hipSuccess


def stays_blocked(stream: object) -> bool:
    """The stream still has work after BLOCKED_S (polled, never waited on)."""
    deadline = time.monotonic() + BLOCKED_S
    while time.monotonic() < deadline:
        if idle(stream):
            return False
        time.sleep(0.005)
    return not idle(stream)


def settled(timeout: float = WAIT_S) -> bool:
    """The current device's work has finished, found out without risking a hang.

    Freeing memory synchronizes the device, which would never return while a
    broken runtime keeps a stream blocked: teardown code checks this first,
    and leaves the memory allocated (the leak check then reports it) rather
    than hang the test process.
    """
    done = threading.Event()

    def run() -> None:
        hip.hipDeviceSynchronize()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done.wait(timeout)


def free_settled(free: Callable[[object], tuple], ptr: object) -> None:  # type: ignore[type-arg]
    """Free ptr once the device has settled; fail, leaving it allocated, if not."""
    assert settled(), "a stream is still blocked: memory left allocated to avoid a hang"
    ok(free(ptr))


def emu_counters() -> dict[str, int]:
    from hipfile.platforms import emulated

    return emulated.counters()


class Mapped:
    """Zeroed mapped pinned memory: a host address and its device address."""

    def __init__(self, nbytes: int = 4096) -> None:
        self.ptr = ok(hip.hipHostMalloc(nbytes, hip.hipHostMallocMapped))
        self.host = addr(self.ptr)
        ctypes.memset(self.host, 0, nbytes)
        self.dev = addr(ok(hip.hipHostGetDevicePointer(self.ptr, 0)))

    def word(self, index: int, width: int = 32) -> tuple[int, int]:
        """(host, device) address of the index-th word of that width."""
        offset = index * width // 8
        return self.host + offset, self.dev + offset


@pytest.fixture
def mapped() -> Iterator[Mapped]:
    m = Mapped()
    yield m
    free_settled(hip.hipHostFree, m.ptr)


@pytest.fixture
def stream() -> Iterator[object]:
    s = ok(hip.hipStreamCreate())
    yield s
    ok(hip.hipStreamDestroy(s))


@pytest.fixture
def stream2() -> Iterator[object]:
    s = ok(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    yield s
    ok(hip.hipStreamDestroy(s))


@pytest.fixture(autouse=True)
def _clean_last_error() -> Iterator[None]:
    hip.hipGetLastError()
    yield
    hip.hipGetLastError()


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


# ------------------------------------------------------------ the conditions

# (flags, mask, wait value, stores that keep it blocked, store that releases)
CASES_32 = [
    (GTE, ALL32, 5, [4, 1], 5),
    (GTE, ALL32, 5, [0], 0x7FFFFFFF),
    (EQ, ALL32, 7, [6, 8], 7),
    (AND, ALL32, 0x4, [0x3, 0x8], 0x6),
    (AND, 0xF0, 0x30, [0x0F, 0xC0], 0x1F),  # ((v & 0xF0) & 0x30) != 0
    (NOR, ALL32, 0xFFFF0000, [0x0000FFFF, 0xFFFFFFFF], 0x0000FFFE),
]
CASES_64 = [
    (GTE, ALL64, 1 << 40, [(1 << 40) - 1, 5], 1 << 40),
    (EQ, ALL64, (7 << 36) | 3, [3, 7 << 36], (7 << 36) | 3),
    (AND, ALL64, 1 << 63, [(1 << 63) - 1], (1 << 63) | 1),
    (NOR, ALL64, ALL64 ^ 1, [1], 0),
]
# Masked compares that only the emulated runtime offers (CUDA has no mask), and
# HIP's unsigned >= across the whole range (CUDA's GEQ is a cyclic compare).
EMULATED_ONLY = [
    (32, GTE, ALL32, 5, [0, 4], 0xFFFFFFFF),
    (64, GTE, ALL64, 5, [0, 4], ALL64),
    (32, GTE, 0xF0, 0x20, [0x1F, 0x0F], 0x2F),  # (v & 0xF0) >= 0x20
    (32, EQ, 0xFF, 0x07, [0x106, 0x17], 0xAB07),
    (64, EQ, 0xFFFF << 32, 0x1234 << 32, [0x1234], (0x1234 << 32) | 0xFFFF),
    (64, GTE, ALL64 ^ 0xFF, 0x100, [0xFF], 0x1FF),
]


def _check_condition(
    width: int,
    stream: object,
    mapped: Mapped,
    flags: int,
    mask: int,
    value: int,
    blocked_by: list[int],
    release: int,
) -> None:
    host, dev = mapped.word(0, width)
    marker_host, marker_dev = mapped.word(8, 32)
    store(host, blocked_by[0], width)
    assert wait_value(width, stream, dev, value, flags, mask) == E.hipSuccess
    assert write_value(32, stream, marker_dev, 1) == E.hipSuccess
    try:
        for v in blocked_by:
            store(host, v, width)
            assert stays_blocked(stream), f"released by {v:#x}"
            assert load(marker_host) == 0
    finally:
        store(host, release, width)
    assert until(lambda: idle(stream)), f"not released by {release:#x}"
    assert load(marker_host) == 1


@pytest.mark.parametrize("case", CASES_32, ids=lambda c: f"{c[0]}-{c[1]:#x}")
def test_wait_value32_conditions(stream: object, mapped: Mapped, case: tuple) -> None:  # type: ignore[type-arg]
    _check_condition(32, stream, mapped, *case)


@pytest.mark.parametrize("case", CASES_64, ids=lambda c: f"{c[0]}-{c[2]:#x}")
def test_wait_value64_conditions(stream: object, mapped: Mapped, case: tuple) -> None:  # type: ignore[type-arg]
    _check_condition(64, stream, mapped, *case)


@pytest.mark.emulated
@pytest.mark.parametrize("case", EMULATED_ONLY, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]:#x}")
def test_masked_and_full_range_compares(stream: object, mapped: Mapped, case: tuple) -> None:  # type: ignore[type-arg]
    width, flags, mask, value, blocked_by, release = case
    _check_condition(width, stream, mapped, flags, mask, value, blocked_by, release)


@pytest.mark.parametrize("width", [32, 64])
def test_condition_already_true_does_not_block(
    stream: object, mapped: Mapped, width: int
) -> None:
    host, dev = mapped.word(0, width)
    store(host, 9, width)
    all_bits = ALL32 if width == 32 else ALL64
    for flags, value in ((GTE, 9), (EQ, 9), (AND, 1), (NOR, 0)):
        assert wait_value(width, stream, dev, value, flags, all_bits) == E.hipSuccess
    assert until(lambda: idle(stream))


@pytest.mark.parametrize("width", [32, 64])
def test_nor_with_a_partial_mask_never_blocks(
    stream: object, mapped: Mapped, width: int
) -> None:
    # ~((v & mask) | (value & mask)) has the bits outside mask set: always true.
    host, dev = mapped.word(0, width)
    all_bits = ALL32 if width == 32 else ALL64
    store(host, all_bits, width)
    assert wait_value(width, stream, dev, all_bits, NOR, 0xFF) == E.hipSuccess
    assert until(lambda: idle(stream))


def test_wait_value32_reads_only_its_word(stream: object, mapped: Mapped) -> None:
    host, dev = mapped.word(1)
    neighbour, _ = mapped.word(0)
    assert wait_value(32, stream, dev, 1, EQ, ALL32) == E.hipSuccess
    try:
        store(neighbour, 1, 32)
        store(host + 4, 1, 32)
        assert stays_blocked(stream)
    finally:
        store(host, 1, 32)
    assert until(lambda: idle(stream))


# ------------------------------------------------------- ordering and release


def test_work_before_the_wait_runs_and_work_after_waits(
    stream: object, stream2: object, mapped: Mapped
) -> None:
    flag_host, flag_dev = mapped.word(0)
    before_host, before_dev = mapped.word(1)
    after_host, after_dev = mapped.word(2)
    other_host, other_dev = mapped.word(3)
    assert write_value(32, stream, before_dev, 11) == E.hipSuccess
    assert wait_value(32, stream, flag_dev, 1, GTE, ALL32) == E.hipSuccess
    assert write_value(32, stream, after_dev, 22) == E.hipSuccess
    event = ok(hip.hipEventCreate())
    try:
        ok(hip.hipEventRecord(event, stream))
        # Another stream is not held up by the blocked one.
        assert write_value(32, stream2, other_dev, 33) == E.hipSuccess
        assert until(lambda: load(other_host) == 33)
        assert until(lambda: load(before_host) == 11)
        assert stays_blocked(stream)
        assert load(after_host) == 0
        assert err(hip.hipEventQuery(event)) == E.hipErrorNotReady
    finally:
        store(flag_host, 1, 32)
    assert until(lambda: idle(stream))
    assert load(after_host) == 22
    ok(hip.hipEventSynchronize(event))
    ok(hip.hipEventDestroy(event))


def test_write_value_on_another_stream_releases_a_wait(
    stream: object, stream2: object, mapped: Mapped
) -> None:
    _, marker_dev = mapped.word(2)
    marker_host, _ = mapped.word(2)
    flag = ok(hip.hipExtMallocWithFlags(8, SIGNAL))
    try:
        assert wait_value(64, stream, addr(flag), 3, EQ, ALL64) == E.hipSuccess
        assert write_value(32, stream, marker_dev, 1) == E.hipSuccess
        assert stays_blocked(stream)
        assert write_value(64, stream2, addr(flag), 2) == E.hipSuccess
        ok(hip.hipStreamSynchronize(stream2))
        assert stays_blocked(stream)
        assert write_value(64, stream2, addr(flag), 3) == E.hipSuccess
        assert until(lambda: idle(stream))
        assert load(marker_host) == 1
        out = (ctypes.c_uint64 * 1)()
        ok(hip.hipMemcpy(out, flag, 8, K.hipMemcpyDeviceToHost))
        assert out[0] == 3
    finally:
        ok(hip.hipStreamSynchronize(stream2))
        if not idle(stream):  # release whatever the test left blocked
            ok(hip.hipStreamWriteValue64(stream2, flag, 3, 0))
            assert until(lambda: idle(stream))
        free_settled(hip.hipFree, flag)


def test_write_value_orders_after_earlier_work(stream: object, mapped: Mapped) -> None:
    data_host, data_dev = mapped.word(4)
    flag_host, flag_dev = mapped.word(0)
    src = (ctypes.c_uint32 * 1)(0xC0FFEE)
    ok(hip.hipMemcpyAsync(data_dev, src, 4, K.hipMemcpyHostToDevice, stream))
    assert write_value(32, stream, flag_dev, 1) == E.hipSuccess
    assert until(lambda: load(flag_host) == 1)
    assert load(data_host) == 0xC0FFEE
    ok(hip.hipStreamSynchronize(stream))


def test_write_value64_writes_all_bits(stream: object, mapped: Mapped) -> None:
    host, dev = mapped.word(1, 64)
    assert write_value(64, stream, dev, 0x0123456789ABCDEF) == E.hipSuccess
    ok(hip.hipStreamSynchronize(stream))
    assert load(host, 64) == 0x0123456789ABCDEF
    assert write_value(32, stream, dev, 0xFFFFFFFF) == E.hipSuccess
    ok(hip.hipStreamSynchronize(stream))
    assert load(host, 64) == 0x01234567FFFFFFFF  # the 32-bit write touches 4 bytes


def test_synchronize_waits_for_the_release(stream: object, mapped: Mapped) -> None:
    host, dev = mapped.word(0)
    assert wait_value(32, stream, dev, 1, EQ, ALL32) == E.hipSuccess
    result: list[E] = []
    t = threading.Thread(target=lambda: result.append(err(hip.hipStreamSynchronize(stream))))
    t.start()
    try:
        time.sleep(BLOCKED_S)
        assert t.is_alive() and not result
    finally:
        store(host, 1, 32)
        t.join(WAIT_S)
    assert not t.is_alive()
    assert result == [E.hipSuccess]


def test_null_stream_wait(mapped: Mapped) -> None:
    host, dev = mapped.word(0)
    after_host, after_dev = mapped.word(1)
    assert wait_value(32, None, dev, 1, EQ, ALL32) == E.hipSuccess
    assert write_value(32, None, after_dev, 5) == E.hipSuccess
    try:
        time.sleep(BLOCKED_S)
        assert load(after_host) == 0
    finally:
        store(host, 1, 32)
    assert until(lambda: load(after_host) == 5)
    ok(hip.hipStreamSynchronize(None))


def test_destroy_a_stream_blocked_in_a_wait(mapped: Mapped) -> None:
    """hipStreamDestroy returns; the queued work runs once the wait is met."""
    host, dev = mapped.word(0)
    after_host, after_dev = mapped.word(1)
    s = ok(hip.hipStreamCreate())
    assert wait_value(32, s, dev, 1, EQ, ALL32) == E.hipSuccess
    assert write_value(32, s, after_dev, 9) == E.hipSuccess
    result: list[E] = []
    t = threading.Thread(target=lambda: result.append(err(hip.hipStreamDestroy(s))))
    t.start()
    t.join(WAIT_S)
    try:
        assert not t.is_alive(), "hipStreamDestroy hung on a stream blocked in a wait"
        assert result == [E.hipSuccess]
        assert load(after_host) == 0
    finally:
        store(host, 1, 32)
        t.join(WAIT_S)
    assert until(lambda: load(after_host) == 9)
    ok(hip.hipDeviceSynchronize())


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


# ------------------------------------------------------ devices and processes


def test_wait_on_device_one() -> None:
    if ok(hip.hipGetDeviceCount()) < 2:  # type: ignore[operator]
        pytest.skip("needs two devices (HIPFILE_EMU_DEVICES=2 on the emulated platform)")
    ok(hip.hipSetDevice(1))
    try:
        s = ok(hip.hipStreamCreate())
        flag = ok(hip.hipExtMallocWithFlags(8, SIGNAL))
        m = Mapped()
        other = ok(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
        try:
            assert ok(hip.hipStreamGetDevice(s)) == 1
            attrs = ok(hip.hipPointerGetAttributes(flag))
            assert attrs.device == 1  # type: ignore[attr-defined]
            flag_host, flag_dev = m.word(0)
            marker_host, marker_dev = m.word(1)
            # Released by another device-1 stream writing signal memory...
            assert wait_value(64, s, addr(flag), 1, GTE, ALL64) == E.hipSuccess
            assert write_value(32, s, marker_dev, 7) == E.hipSuccess
            assert stays_blocked(s)
            assert write_value(64, other, addr(flag), 1) == E.hipSuccess
            assert until(lambda: load(marker_host) == 7)
            # ... and by the host, through mapped memory.
            assert wait_value(32, s, flag_dev, 1, EQ, ALL32) == E.hipSuccess
            assert write_value(32, s, marker_dev, 8) == E.hipSuccess
            try:
                assert stays_blocked(s)
            finally:
                store(flag_host, 1, 32)
            assert until(lambda: load(marker_host) == 8)
            assert until(lambda: idle(s) and idle(other))
        finally:
            free_settled(hip.hipHostFree, m.ptr)
            free_settled(hip.hipFree, flag)
            ok(hip.hipStreamDestroy(other))
            ok(hip.hipStreamDestroy(s))
    finally:
        ok(hip.hipSetDevice(0))


def _run_emulated_script(script: str, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["HIPFILE_PLATFORM"] = "emulated"
    env["HIPFILE_EMULATED_PREFIX"] = str(platforms.prefix("emulated"))
    env.pop("ROCM_PATH", None)
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


EXIT_WHILE_BLOCKED = """
import time, warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import hipfile
from hip import hip
E = hip.hipError_t
r = hip.hipStreamCreate(); assert r[0] == E.hipSuccess; s = r[1]
r = hip.hipExtMallocWithFlags(8, hip.hipMallocSignalMemory); assert r[0] == E.hipSuccess
flag = r[1]
assert hip.hipStreamWaitValue32(s, flag, 1, hip.hipStreamWaitValueEq, 0xFFFFFFFF)[0] == E.hipSuccess
DESTROY
time.sleep(0.05)
print("exiting", flush=True)
"""


@pytest.mark.emulated
@pytest.mark.parametrize("destroy", [False, True])
def test_process_exits_with_a_stream_blocked(destroy: bool) -> None:
    script = EXIT_WHILE_BLOCKED.replace(
        "DESTROY", "assert hip.hipStreamDestroy(s)[0] == E.hipSuccess" if destroy else ""
    )
    start = time.monotonic()
    proc = _run_emulated_script(script)
    assert proc.returncode == 0, proc.stderr
    assert "exiting" in proc.stdout
    assert time.monotonic() - start < 30


@pytest.mark.emulated
def test_device_one_in_a_two_device_process() -> None:
    script = """
    import os, sys
    sys.argv = ["pytest"]
    import pytest
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-k", "wait_on_device_one",
                          os.environ["STREAMMEM_TEST_FILE"]]))
    """
    proc = _run_emulated_script(
        script, HIPFILE_EMU_DEVICES="2", STREAMMEM_TEST_FILE=__file__
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout, proc.stdout
