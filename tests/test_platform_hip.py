"""The HIP runtime of the test platform, exercised through HIP-Python.

Every call goes through HIP-Python's own bindings (``from hip import hip``),
so these tests also check that HIP-Python runs on the platform's
``libamdhip64.so``: symbol names, signatures, struct layouts and error
numbers. Tests marked ``emulated`` rely on behaviour only the emulated
platform has (its counters, its device count setting, errors returned where
real HIP would crash).
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
from collections.abc import Iterator

import numpy as np
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

# These tests call HIP-Python 10's signatures (6.x/7.x differ in places, e.g.
# hipGetDeviceProperties); the binding's own tests run on every version.
pytestmark = pytest.mark.skipif(
    int(str(_HIP_PYTHON_VERSION).split(".")[0]) < 10,
    reason="the emulated HIP runtime's tests use HIP-Python 10's API")

PLATFORM = platforms.active() or "rocm"
E = hip.hipError_t
K = hip.hipMemcpyKind

HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
STREAM_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)

WAIT_S = 10.0  # upper bound for anything a test waits for


# -------------------------------------------------------------- utilities


def ok(result: tuple) -> object:  # type: ignore[type-arg]
    """Check that a HIP-Python call succeeded; return its payload."""
    assert result[0] == E.hipSuccess, f"HIP call failed: {result[0]!r}"
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def err(result: tuple) -> E:  # type: ignore[type-arg]
    return result[0]


def fn_ptr(cfunc: object) -> int:
    value = ctypes.cast(cfunc, ctypes.c_void_p).value
    assert value
    return value


def host_view(ptr: object, nbytes: int) -> np.ndarray:
    """A numpy view of host-accessible memory at a HIP pointer."""
    buf = (ctypes.c_ubyte * nbytes).from_address(int(ptr))  # type: ignore[call-overload]
    return np.ctypeslib.as_array(buf)


def runtime_library() -> ctypes.CDLL:
    """The libamdhip64.so that HIP-Python loaded (same file, same handle)."""
    return ctypes.CDLL(os.path.join(os.environ["ROCM_PATH"], "lib", "libamdhip64.so"))


def emu_counters() -> dict[str, int]:
    lib = runtime_library()
    values = [ctypes.c_longlong(-1) for _ in range(4)]
    assert lib.hipEmuCounters(*(ctypes.byref(v) for v in values)) == 0
    names = ("allocations", "host_allocations", "streams", "events")
    return {n: v.value for n, v in zip(names, values, strict=True)}


class Gate:
    """A host function that blocks its stream until the test opens the gate."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.entered = threading.Event()
        self.cfunc = HOST_FN(self._run)

    def _run(self, _user_data: int | None) -> None:
        self.entered.set()
        self.opened.wait(WAIT_S)

    def launch(self, stream: object) -> None:
        ok(hip.hipLaunchHostFunc(stream, fn_ptr(self.cfunc), None))

    def open(self) -> None:
        self.opened.set()


@pytest.fixture
def stream() -> Iterator[object]:
    s = ok(hip.hipStreamCreate())
    yield s
    ok(hip.hipStreamDestroy(s))


@pytest.fixture
def dmem() -> Iterator[object]:
    d = ok(hip.hipMalloc(4096))
    yield d
    ok(hip.hipFree(d))


@pytest.fixture
def pinned() -> Iterator[object]:
    p = ok(hip.hipHostMalloc(4096, 0))
    yield p
    ok(hip.hipHostFree(p))


@pytest.fixture(autouse=True)
def _clean_last_error() -> Iterator[None]:
    hip.hipGetLastError()
    yield
    hip.hipGetLastError()


@pytest.fixture
def counters_balanced() -> Iterator[None]:
    """On the emulated platform, a test must give back what it took."""
    if PLATFORM != "emulated":
        yield
        return
    before = emu_counters()
    yield
    assert emu_counters() == before


# ------------------------------------------------------ runtime and devices


def test_init_and_versions() -> None:
    ok(hip.hipInit(0))
    assert err(hip.hipInit(1)) == E.hipErrorInvalidValue
    runtime = ok(hip.hipRuntimeGetVersion())
    driver = ok(hip.hipDriverGetVersion())
    assert isinstance(runtime, int) and runtime > 0
    assert isinstance(driver, int) and driver > 0


@pytest.mark.emulated
def test_reports_hip_7() -> None:
    version = ok(hip.hipRuntimeGetVersion())
    assert 70000000 <= version < 80000000


def test_device_selection_and_last_error() -> None:
    count = ok(hip.hipGetDeviceCount())
    assert count >= 1
    assert ok(hip.hipGetDevice()) == 0
    assert err(hip.hipSetDevice(count)) == E.hipErrorInvalidDevice
    assert err(hip.hipSetDevice(-1)) == E.hipErrorInvalidDevice
    # The failure is remembered per thread until read.
    assert err(hip.hipPeekAtLastError()) == E.hipErrorInvalidDevice
    assert err(hip.hipPeekAtLastError()) == E.hipErrorInvalidDevice
    assert err(hip.hipGetLastError()) == E.hipErrorInvalidDevice
    assert err(hip.hipGetLastError()) == E.hipSuccess
    ok(hip.hipSetDevice(0))
    ok(hip.hipDeviceSynchronize())


def test_last_error_is_per_thread() -> None:
    assert err(hip.hipSetDevice(-1)) == E.hipErrorInvalidDevice
    seen: list[E] = []
    t = threading.Thread(target=lambda: seen.append(err(hip.hipGetLastError())))
    t.start()
    t.join(WAIT_S)
    assert seen == [E.hipSuccess]
    assert err(hip.hipGetLastError()) == E.hipErrorInvalidDevice


@pytest.mark.emulated  # relies on the emulated runtime's extras or timing
def test_device_properties_match_attributes() -> None:
    props = ok(hip.hipGetDeviceProperties(0))
    attr = hip.hipDeviceAttribute_t
    assert props.pciBusID == ok(hip.hipDeviceGetAttribute(attr.hipDeviceAttributePciBusId, 0))
    assert props.warpSize == ok(hip.hipDeviceGetAttribute(attr.hipDeviceAttributeWarpSize, 0))
    assert props.maxThreadsPerBlock == ok(
        hip.hipDeviceGetAttribute(attr.hipDeviceAttributeMaxThreadsPerBlock, 0)
    )
    free, total = ok(hip.hipMemGetInfo())  # type: ignore[misc]
    assert props.totalGlobalMem == total >= free > 0
    assert err(hip.hipGetDeviceProperties(ok(hip.hipGetDeviceCount()))) == E.hipErrorInvalidDevice


@pytest.mark.emulated
def test_device_properties_layout() -> None:
    # Fields at the start, middle and end of the 1472-byte struct, decoded by
    # HIP-Python's own declaration of hipDeviceProp_tR0600.
    props = ok(hip.hipGetDeviceProperties(0))
    name = props.name
    name = name.decode() if isinstance(name, bytes) else str(name)
    arch = props.gcnArchName
    arch = arch.decode() if isinstance(arch, bytes) else str(arch)
    assert name == "hipfile emulated device (CPU)"
    assert arch == "gfx000"
    assert props.totalGlobalMem == 16 << 30
    assert props.pciBusID == 1
    assert props.canMapHostMemory == 1 and props.unifiedAddressing == 1
    assert props.hostRegisterSupported == 1
    assert props.maxSharedMemoryPerMultiProcessor == 64 * 1024
    assert props.clockInstructionRate == 1000000
    assert props.isLargeBar == 0 and props.asicRevision == 0


# ------------------------------------------------------------------ memory


def test_malloc_memcpy_round_trip(dmem: object) -> None:
    src = np.arange(1024, dtype=np.uint32)
    ok(hip.hipMemcpy(dmem, src, src.nbytes, K.hipMemcpyHostToDevice))
    other = ok(hip.hipMalloc(src.nbytes))
    try:
        ok(hip.hipMemcpy(other, dmem, src.nbytes, K.hipMemcpyDeviceToDevice))
        out = np.zeros_like(src)
        ok(hip.hipMemcpy(out, other, src.nbytes, K.hipMemcpyDeviceToHost))
        np.testing.assert_array_equal(out, src)
        # hipMemcpyDefault infers the direction.
        out2 = np.zeros_like(src)
        ok(hip.hipMemcpy(out2, dmem, src.nbytes, K.hipMemcpyDefault))
        np.testing.assert_array_equal(out2, src)
        host = np.zeros_like(src)
        ok(hip.hipMemcpy(host, out2, src.nbytes, K.hipMemcpyHostToHost))
        np.testing.assert_array_equal(host, src)
    finally:
        ok(hip.hipFree(other))


def test_memcpy_interior_pointers(dmem: object) -> None:
    src = np.arange(256, dtype=np.uint8)
    ok(hip.hipMemcpy(dmem, np.zeros(4096, np.uint8), 4096, K.hipMemcpyHostToDevice))
    ok(hip.hipMemcpy(int(dmem) + 1000, src, 256, K.hipMemcpyHostToDevice))  # type: ignore[call-overload]
    out = np.empty(4096, np.uint8)
    ok(hip.hipMemcpy(out, dmem, 4096, K.hipMemcpyDeviceToHost))
    np.testing.assert_array_equal(out[1000:1256], src)
    assert not out[:1000].any() and not out[1256:].any()


def test_zero_sizes() -> None:
    ptr = ok(hip.hipMalloc(0))
    assert ptr is None or int(ptr) == 0  # type: ignore[call-overload]
    ok(hip.hipFree(None))
    ok(hip.hipHostFree(None))
    ok(hip.hipMemcpy(None, None, 0, K.hipMemcpyDefault))


@pytest.mark.emulated  # relies on the emulated runtime's extras or timing
def test_host_malloc(pinned: object, dmem: object) -> None:
    view = host_view(pinned, 4096)
    view[:] = np.arange(4096) % 251
    ok(hip.hipMemcpy(dmem, pinned, 4096, K.hipMemcpyHostToDevice))
    out = np.empty(4096, np.uint8)
    ok(hip.hipMemcpy(out, dmem, 4096, K.hipMemcpyDeviceToHost))
    np.testing.assert_array_equal(out, view)
    assert ok(hip.hipHostGetFlags(pinned)) == 0
    mapped = ok(hip.hipHostMalloc(100, hip.hipHostMallocMapped | hip.hipHostMallocPortable))
    try:
        flags = ok(hip.hipHostGetFlags(mapped))
        assert flags == hip.hipHostMallocMapped | hip.hipHostMallocPortable
        assert int(ok(hip.hipHostGetDevicePointer(mapped, 0))) == int(mapped)  # type: ignore[call-overload]
    finally:
        ok(hip.hipHostFree(mapped))
    # HIP-Python exposes the flags as C ints: mask to the unsigned value.
    bad = (hip.hipHostMallocCoherent | hip.hipHostMallocNonCoherent) & 0xFFFFFFFF
    assert err(hip.hipHostMalloc(64, bad)) == E.hipErrorInvalidValue


def test_malloc_host_and_free_host() -> None:
    p = ok(hip.hipMallocHost(256))
    host_view(p, 256)[:] = 9
    assert (host_view(p, 256) == 9).all()
    ok(hip.hipFreeHost(p))


@pytest.mark.emulated  # relies on the emulated runtime's extras or timing
def test_memset(dmem: object, stream: object) -> None:
    ok(hip.hipMemset(dmem, 0xAB, 4096))
    ok(hip.hipMemset(int(dmem) + 16, 0x01, 16))  # type: ignore[call-overload]
    out = np.empty(4096, np.uint8)
    ok(hip.hipMemcpy(out, dmem, 4096, K.hipMemcpyDeviceToHost))
    assert (out[:16] == 0xAB).all() and (out[16:32] == 1).all() and (out[32:] == 0xAB).all()
    ok(hip.hipMemsetD32(dmem, 0x01020304, 8))
    ok(hip.hipMemsetAsync(int(dmem) + 32, 0x7F, 32, stream))  # type: ignore[call-overload]
    ok(hip.hipStreamSynchronize(stream))
    ok(hip.hipMemcpy(out, dmem, 4096, K.hipMemcpyDeviceToHost))
    assert (out[:32].view(np.uint32) == 0x01020304).all()
    assert (out[32:64] == 0x7F).all() and (out[64:] == 0xAB).all()


def test_host_register() -> None:
    buf = np.zeros(8192, np.uint8)
    ok(hip.hipHostRegister(buf, buf.nbytes, 0))
    try:
        attrs = ok(hip.hipPointerGetAttributes(buf))
        assert attrs.type == hip.hipMemoryType.hipMemoryTypeHost
        assert err(hip.hipHostRegister(buf, 16, 0)) == E.hipErrorHostMemoryAlreadyRegistered
    finally:
        ok(hip.hipHostUnregister(buf))
    assert err(hip.hipHostUnregister(buf)) == E.hipErrorHostMemoryNotRegistered


# -------------------------------------------------------- pointer attributes


@pytest.mark.emulated  # relies on the emulated runtime's extras or timing
def test_pointer_attributes(dmem: object, pinned: object) -> None:
    attrs = ok(hip.hipPointerGetAttributes(dmem))
    assert attrs.type == hip.hipMemoryType.hipMemoryTypeDevice
    assert attrs.device == 0
    assert int(attrs.devicePointer) == int(dmem)  # type: ignore[call-overload]
    assert int(attrs.hostPointer) == 0
    assert attrs.isManaged == 0
    inner = ok(hip.hipPointerGetAttributes(int(dmem) + 100))  # type: ignore[call-overload]
    assert inner.type == hip.hipMemoryType.hipMemoryTypeDevice
    assert int(inner.devicePointer) == int(dmem) + 100  # type: ignore[call-overload]

    hattrs = ok(hip.hipPointerGetAttributes(pinned))
    assert hattrs.type == hip.hipMemoryType.hipMemoryTypeHost
    assert int(hattrs.hostPointer) == int(pinned)  # type: ignore[call-overload]
    assert int(hattrs.devicePointer) == int(pinned)  # type: ignore[call-overload]
    assert ok(hip.hipMemPtrGetInfo(int(dmem) + 5)) == 4096  # type: ignore[call-overload]


@pytest.mark.emulated
def test_pointer_attributes_unknown_memory() -> None:
    # ROCm's runtime (like CUDA since 11.0): unregistered host memory is
    # hipMemoryTypeUnregistered with hipSuccess; NULL is still an error.
    host = np.zeros(64, np.uint8)
    attrs = ok(hip.hipPointerGetAttributes(host))
    assert attrs.type == hip.hipMemoryType.hipMemoryTypeUnregistered
    assert err(hip.hipPointerGetAttributes(None)) == E.hipErrorInvalidValue
    assert err(hip.hipGetLastError()) == E.hipErrorInvalidValue


@pytest.mark.emulated
def test_pointer_attributes_after_free() -> None:
    d = ok(hip.hipMalloc(512))
    address = int(d)  # type: ignore[call-overload]
    assert ok(hip.hipPointerGetAttributes(address)).type == hip.hipMemoryType.hipMemoryTypeDevice
    ok(hip.hipFree(d))
    after = ok(hip.hipPointerGetAttributes(address))
    assert after.type == hip.hipMemoryType.hipMemoryTypeUnregistered


# ------------------------------------------------------------ error paths


@pytest.mark.emulated
def test_free_errors(pinned: object, dmem: object) -> None:
    host = np.zeros(64, np.uint8)
    assert err(hip.hipFree(host)) == E.hipErrorInvalidValue
    assert err(hip.hipFree(int(dmem) + 256)) == E.hipErrorInvalidValue  # type: ignore[call-overload]
    # Each free function only takes its own kind of memory.
    assert err(hip.hipFree(pinned)) == E.hipErrorInvalidValue
    assert err(hip.hipHostFree(dmem)) == E.hipErrorInvalidValue
    assert err(hip.hipHostFree(host)) == E.hipErrorInvalidValue
    d = ok(hip.hipMalloc(64))
    ok(hip.hipFree(d))
    assert err(hip.hipFree(d)) == E.hipErrorInvalidValue  # double free


@pytest.mark.emulated
def test_memcpy_and_memset_range_checks(dmem: object) -> None:
    big = np.zeros(8192, np.uint8)
    assert err(hip.hipMemcpy(dmem, big, 4097, K.hipMemcpyHostToDevice)) == E.hipErrorInvalidValue
    inner = int(dmem) + 4000  # type: ignore[call-overload]
    assert err(hip.hipMemcpy(big, inner, 97, K.hipMemcpyDeviceToHost)) == E.hipErrorInvalidValue
    assert err(hip.hipMemcpy(big, inner, 96, K.hipMemcpyDeviceToHost)) == E.hipSuccess
    assert err(hip.hipMemset(inner, 0, 97)) == E.hipErrorInvalidValue
    assert err(hip.hipMemsetD32(dmem, 0, 1025)) == E.hipErrorInvalidValue
    # Memory declared as device memory must be device (or pinned) memory.
    other = np.zeros(64, np.uint8)
    assert err(hip.hipMemcpy(other, big, 64, K.hipMemcpyHostToDevice)) == E.hipErrorInvalidValue
    assert err(hip.hipMemcpy(big, other, 64, K.hipMemcpyDeviceToHost)) == E.hipErrorInvalidValue
    assert err(hip.hipMemset(other, 0, 64)) == E.hipErrorInvalidValue
    assert err(hip.hipMemcpy(None, big, 64, K.hipMemcpyHostToHost)) == E.hipErrorInvalidValue
    # The failed calls changed nothing.
    out = np.ones(4096, np.uint8)
    ok(hip.hipMemset(dmem, 0, 4096))
    ok(hip.hipMemcpy(out, dmem, 4096, K.hipMemcpyDeviceToHost))
    assert not out.any()


@pytest.mark.emulated
def test_invalid_memcpy_direction(dmem: object) -> None:
    lib = runtime_library()
    lib.hipMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    lib.hipMemcpy.restype = ctypes.c_int
    host = np.zeros(16, np.uint8)
    status = lib.hipMemcpy(int(dmem), host.ctypes.data, 16, 7)  # type: ignore[call-overload]
    assert status == E.hipErrorInvalidMemcpyDirection
    assert err(hip.hipGetLastError()) == E.hipErrorInvalidMemcpyDirection


@pytest.mark.emulated
def test_destroyed_handles_are_errors() -> None:
    s = ok(hip.hipStreamCreate())
    ok(hip.hipStreamDestroy(s))
    assert err(hip.hipStreamDestroy(s)) == E.hipErrorContextIsDestroyed
    assert err(hip.hipStreamSynchronize(s)) == E.hipErrorContextIsDestroyed
    assert err(hip.hipStreamQuery(s)) == E.hipErrorContextIsDestroyed
    assert err(hip.hipMemsetAsync(None, 0, 0, s)) == E.hipSuccess  # nothing to do
    assert err(hip.hipStreamDestroy(None)) == E.hipErrorInvalidHandle
    ev = ok(hip.hipEventCreate())
    ok(hip.hipEventDestroy(ev))
    assert err(hip.hipEventDestroy(ev)) == E.hipErrorContextIsDestroyed
    assert err(hip.hipEventQuery(ev)) == E.hipErrorInvalidHandle
    assert err(hip.hipEventRecord(ev, None)) == E.hipErrorInvalidHandle
    assert err(hip.hipEventDestroy(None)) == E.hipErrorInvalidHandle
    assert err(hip.hipGetLastError()) == E.hipErrorInvalidHandle


def test_invalid_arguments(stream: object) -> None:
    assert err(hip.hipStreamCreateWithFlags(5)) == E.hipErrorInvalidValue
    assert err(hip.hipEventCreateWithFlags(0x100)) == E.hipErrorInvalidValue
    assert err(hip.hipLaunchHostFunc(stream, None, None)) == E.hipErrorInvalidValue
    cb = STREAM_CALLBACK(lambda s, status, ud: None)
    assert err(hip.hipStreamAddCallback(stream, fn_ptr(cb), None, 1)) == E.hipErrorInvalidValue


def test_error_strings() -> None:
    for code in (
        E.hipSuccess,
        E.hipErrorInvalidValue,
        E.hipErrorOutOfMemory,
        E.hipErrorInvalidDevice,
        E.hipErrorNotReady,
        E.hipErrorInvalidHandle,
    ):
        name = ok(hip.hipGetErrorName(code))
        text = ok(hip.hipGetErrorString(code))
        assert str(name) == code.name
        assert str(text) and str(text) != code.name
    assert str(ok(hip.hipGetErrorString(E.hipSuccess))) != str(
        ok(hip.hipGetErrorString(E.hipErrorInvalidValue))
    )


@pytest.mark.emulated
def test_every_error_has_its_name() -> None:
    for code in E:
        assert str(ok(hip.hipGetErrorName(code))) == code.name
        assert str(ok(hip.hipGetErrorString(code)))


# ------------------------------------------------------------------ streams


def test_stream_properties() -> None:
    s = ok(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    try:
        assert ok(hip.hipStreamGetFlags(s)) == hip.hipStreamNonBlocking
        assert ok(hip.hipStreamGetDevice(s)) == 0
        assert ok(hip.hipStreamGetDevice(None)) == 0
        ok(hip.hipStreamQuery(s))
    finally:
        ok(hip.hipStreamDestroy(s))
    least, greatest = ok(hip.hipDeviceGetStreamPriorityRange())  # type: ignore[misc]
    assert least >= greatest
    p = ok(hip.hipStreamCreateWithPriority(0, greatest))
    try:
        assert ok(hip.hipStreamGetPriority(p)) == greatest
    finally:
        ok(hip.hipStreamDestroy(p))


def test_host_functions_run_in_stream_order(stream: object, dmem: object, pinned: object) -> None:
    view = host_view(pinned, 64)
    seen: list[tuple[int, int]] = []
    threads: set[int] = set()

    def observe(user_data: int | None) -> None:
        threads.add(threading.get_ident())
        seen.append((user_data or 0, int(view[0])))

    cfunc = HOST_FN(observe)
    for value in (1, 2, 3):
        ok(hip.hipMemsetAsync(dmem, value, 64, stream))
        ok(hip.hipMemcpyAsync(pinned, dmem, 64, K.hipMemcpyDeviceToHost, stream))
        ok(hip.hipLaunchHostFunc(stream, fn_ptr(cfunc), value))
    ok(hip.hipStreamSynchronize(stream))
    # Each host function saw the copy enqueued just before it, and no later one.
    assert seen == [(1, 1), (2, 2), (3, 3)]
    assert threading.get_ident() not in threads


def test_stream_add_callback(stream: object) -> None:
    seen: list[tuple[int | None, int, int | None]] = []
    cb = STREAM_CALLBACK(lambda s, status, ud: seen.append((s, status, ud)))
    ok(hip.hipStreamAddCallback(stream, fn_ptr(cb), 42, 0))
    ok(hip.hipStreamSynchronize(stream))
    assert seen == [(int(stream), 0, 42)]  # type: ignore[call-overload]


def test_blocked_stream_reports_not_ready(stream: object) -> None:
    gate = Gate()
    gate.launch(stream)
    ev = ok(hip.hipEventCreate())
    try:
        ok(hip.hipEventRecord(ev, stream))
        assert gate.entered.wait(WAIT_S)
        assert err(hip.hipStreamQuery(stream)) == E.hipErrorNotReady
        assert err(hip.hipEventQuery(ev)) == E.hipErrorNotReady
        gate.open()
        ok(hip.hipEventSynchronize(ev))
        ok(hip.hipEventQuery(ev))
        ok(hip.hipStreamQuery(stream))
    finally:
        gate.open()
        ok(hip.hipStreamSynchronize(stream))
        ok(hip.hipEventDestroy(ev))


def test_stream_destroy_waits_for_pending_work(dmem: object) -> None:
    s = ok(hip.hipStreamCreate())
    out = np.zeros(4096, np.uint8)
    gate = Gate()
    gate.launch(s)
    ok(hip.hipMemsetAsync(dmem, 5, 4096, s))
    ok(hip.hipMemcpyAsync(out, dmem, 4096, K.hipMemcpyDeviceToHost, s))
    timer = threading.Timer(0.05, gate.open)
    timer.start()
    ok(hip.hipStreamDestroy(s))
    timer.join()
    assert (out == 5).all()


# ------------------------------------------------------------------- events


def test_event_elapsed_time(stream: object) -> None:
    start = ok(hip.hipEventCreate())
    stop = ok(hip.hipEventCreate())
    sleeper = HOST_FN(lambda _ud: time.sleep(0.03))
    try:
        # Never recorded: query and synchronize succeed, elapsed time fails.
        ok(hip.hipEventQuery(start))
        ok(hip.hipEventSynchronize(start))
        assert err(hip.hipEventElapsedTime(start, stop)) == E.hipErrorInvalidHandle
        ok(hip.hipEventRecord(start, stream))
        ok(hip.hipLaunchHostFunc(stream, fn_ptr(sleeper), None))
        ok(hip.hipEventRecord(stop, stream))
        ok(hip.hipEventSynchronize(stop))
        ms = ok(hip.hipEventElapsedTime(start, stop))
        assert 25.0 <= ms < 5000.0  # type: ignore[operator]
        assert ok(hip.hipEventElapsedTime(start, start)) == 0.0
    finally:
        ok(hip.hipEventDestroy(start))
        ok(hip.hipEventDestroy(stop))


def test_elapsed_time_not_ready_and_disable_timing(stream: object) -> None:
    a = ok(hip.hipEventCreate())
    b = ok(hip.hipEventCreate())
    untimed = ok(hip.hipEventCreateWithFlags(hip.hipEventDisableTiming))
    gate = Gate()
    try:
        ok(hip.hipEventRecord(a, stream))
        gate.launch(stream)
        ok(hip.hipEventRecord(b, stream))
        ok(hip.hipEventRecord(untimed, stream))
        assert err(hip.hipEventElapsedTime(a, b)) == E.hipErrorNotReady
        gate.open()
        ok(hip.hipStreamSynchronize(stream))
        ok(hip.hipEventElapsedTime(a, b))
        assert err(hip.hipEventElapsedTime(a, untimed)) == E.hipErrorInvalidHandle
    finally:
        gate.open()
        ok(hip.hipStreamSynchronize(stream))
        for ev in (a, b, untimed):
            ok(hip.hipEventDestroy(ev))


def test_event_on_null_stream_waits_for_blocking_streams(stream: object) -> None:
    nonblocking = ok(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    ev = ok(hip.hipEventCreate())
    gate = Gate()
    try:
        # Work on a non-blocking stream does not hold back the null stream...
        gate.launch(nonblocking)
        assert gate.entered.wait(WAIT_S)
        ok(hip.hipEventRecord(ev, None))
        ok(hip.hipEventSynchronize(ev))
        gate.open()
        ok(hip.hipStreamSynchronize(nonblocking))
        # ...but work on a blocking stream does.
        gate2 = Gate()
        gate2.launch(stream)
        ok(hip.hipEventRecord(ev, None))
        assert gate2.entered.wait(WAIT_S)
        time.sleep(0.02)
        assert err(hip.hipEventQuery(ev)) == E.hipErrorNotReady
        gate2.open()
        ok(hip.hipEventSynchronize(ev))
    finally:
        gate.open()
        ok(hip.hipStreamDestroy(nonblocking))
        ok(hip.hipEventDestroy(ev))


@pytest.mark.emulated  # relies on the emulated runtime's extras or timing
def test_blocking_stream_waits_for_null_stream(stream: object, dmem: object) -> None:
    gate = Gate()
    gate.launch(None)
    ok(hip.hipMemsetAsync(dmem, 3, 4096, None))
    out = np.zeros(4096, np.uint8)
    ok(hip.hipMemcpyAsync(out, dmem, 4096, K.hipMemcpyDeviceToHost, stream))
    assert gate.entered.wait(WAIT_S)
    time.sleep(0.02)
    assert err(hip.hipStreamQuery(stream)) == E.hipErrorNotReady
    gate.open()
    ok(hip.hipStreamSynchronize(stream))
    assert (out == 3).all()


@pytest.mark.emulated  # relies on the emulated runtime's extras or timing
def test_stream_wait_event_across_streams(stream: object, dmem: object) -> None:
    other = ok(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    ev = ok(hip.hipEventCreateWithFlags(hip.hipEventDisableTiming))
    never = ok(hip.hipEventCreate())
    gate = Gate()
    out = np.zeros(4096, np.uint8)
    try:
        gate.launch(stream)
        ok(hip.hipMemsetAsync(dmem, 7, 4096, stream))
        ok(hip.hipEventRecord(ev, stream))
        ok(hip.hipStreamWaitEvent(other, never, 0))  # never recorded: no wait
        ok(hip.hipStreamWaitEvent(other, ev, 0))
        ok(hip.hipMemcpyAsync(out, dmem, 4096, K.hipMemcpyDeviceToHost, other))
        assert gate.entered.wait(WAIT_S)
        time.sleep(0.02)
        assert err(hip.hipStreamQuery(other)) == E.hipErrorNotReady
        assert not out.any()
        gate.open()
        ok(hip.hipStreamSynchronize(other))
        assert (out == 7).all()
    finally:
        gate.open()
        ok(hip.hipStreamDestroy(other))
        ok(hip.hipEventDestroy(ev))
        ok(hip.hipEventDestroy(never))


def test_synchronous_copy_waits_for_blocking_streams(stream: object, dmem: object) -> None:
    gate = Gate()
    gate.launch(stream)
    ok(hip.hipMemsetAsync(dmem, 9, 4096, stream))
    out = np.zeros(4096, np.uint8)
    timer = threading.Timer(0.05, gate.open)
    timer.start()
    ok(hip.hipMemcpy(out, dmem, 4096, K.hipMemcpyDeviceToHost))
    timer.join()
    assert (out == 9).all()


# --------------------------------------------------- emulated-only behaviour


@pytest.mark.emulated
def test_counters_follow_resources(counters_balanced: None) -> None:
    base = emu_counters()
    d = ok(hip.hipMalloc(100))
    p = ok(hip.hipHostMalloc(100, 0))
    s = ok(hip.hipStreamCreate())
    ev = ok(hip.hipEventCreate())
    try:
        now = emu_counters()
        assert now == {k: v + 1 for k, v in base.items()}
    finally:
        ok(hip.hipEventDestroy(ev))
        ok(hip.hipStreamDestroy(s))
        ok(hip.hipHostFree(p))
        ok(hip.hipFree(d))
    assert emu_counters() == base


@pytest.mark.emulated
def test_host_functions_cannot_deadlock_the_runtime(
    stream: object, counters_balanced: None
) -> None:
    lib = runtime_library()
    lib.hipStreamSynchronize.argtypes = [ctypes.c_void_p]
    lib.hipStreamSynchronize.restype = ctypes.c_int
    lib.hipGetLastError.restype = ctypes.c_int
    results: list[int] = []

    def misbehave(_ud: int | None) -> None:
        results.append(lib.hipGetLastError())
        results.append(lib.hipStreamSynchronize(int(stream)))  # type: ignore[call-overload]
        results.append(lib.hipGetLastError())

    cfunc = HOST_FN(misbehave)
    ok(hip.hipLaunchHostFunc(stream, fn_ptr(cfunc), None))
    ok(hip.hipStreamSynchronize(stream))
    assert results == [0, E.hipErrorNotSupported, E.hipErrorNotSupported]


@pytest.mark.emulated
def test_device_memory_limit() -> None:
    free, total = ok(hip.hipMemGetInfo())  # type: ignore[misc]
    assert err(hip.hipMalloc(total + 1)) == E.hipErrorOutOfMemory
    d = ok(hip.hipMalloc(1 << 20))
    try:
        free2, _ = ok(hip.hipMemGetInfo())  # type: ignore[misc]
        assert free - free2 == 1 << 20
    finally:
        ok(hip.hipFree(d))
    assert ok(hip.hipMemGetInfo())[0] == free  # type: ignore[index]


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
        timeout=120,
    )


MULTI_DEVICE_SCRIPT = textwrap.dedent(
    """
    import threading, warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import hipfile
    import numpy as np
    from hip import hip
    E = hip.hipError_t

    def ok(r):
        assert r[0] == E.hipSuccess, r
        return r[1] if len(r) == 2 else None

    assert ok(hip.hipGetDeviceCount()) == 2
    assert hip.hipSetDevice(2)[0] == E.hipErrorInvalidDevice
    ok(hip.hipSetDevice(1))
    assert ok(hip.hipGetDevice()) == 1
    seen = []
    t = threading.Thread(target=lambda: seen.append(ok(hip.hipGetDevice())))
    t.start(); t.join()
    assert seen == [0], seen  # the current device is per thread

    d1 = ok(hip.hipMalloc(256))
    s1 = ok(hip.hipStreamCreate())
    e1 = ok(hip.hipEventCreate())
    assert ok(hip.hipPointerGetAttributes(d1)).device == 1
    assert ok(hip.hipStreamGetDevice(s1)) == 1
    ok(hip.hipSetDevice(0))
    d0 = ok(hip.hipMalloc(256))
    e0 = ok(hip.hipEventCreate())
    assert ok(hip.hipPointerGetAttributes(d0)).device == 0
    # An event belongs to the device it was created on.
    assert hip.hipEventRecord(e0, s1)[0] == E.hipErrorInvalidResourceHandle
    ok(hip.hipEventRecord(e1, s1))
    # Copies between devices, on a stream of device 1.
    src = np.arange(256, dtype=np.uint8)
    ok(hip.hipMemcpy(d0, src, 256, hip.hipMemcpyKind.hipMemcpyHostToDevice))
    ok(hip.hipMemcpyAsync(d1, d0, 256, hip.hipMemcpyKind.hipMemcpyDeviceToDevice, s1))
    ok(hip.hipStreamSynchronize(s1))
    out = np.zeros(256, np.uint8)
    ok(hip.hipMemcpy(out, d1, 256, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
    assert (out == src).all()
    free0 = hip.hipMemGetInfo()[1]
    ok(hip.hipSetDevice(1))
    free1 = hip.hipMemGetInfo()[1]
    assert free0 == free1  # both devices hold one 256-byte allocation
    for r in (hip.hipFree(d0), hip.hipFree(d1), hip.hipStreamDestroy(s1),
              hip.hipEventDestroy(e0), hip.hipEventDestroy(e1)):
        assert r[0] == E.hipSuccess, r
    print("multi-device OK")
    """
)


@pytest.mark.emulated
def test_multiple_devices_in_subprocess() -> None:
    proc = _run_emulated_script(MULTI_DEVICE_SCRIPT, HIPFILE_EMU_DEVICES="2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "multi-device OK" in proc.stdout


@pytest.mark.emulated
def test_no_devices_in_subprocess() -> None:
    proc = _run_emulated_script(
        """
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import hipfile
        from hip import hip
        E = hip.hipError_t
        assert hip.hipGetDeviceCount()[0] == E.hipErrorNoDevice
        assert hip.hipInit(0)[0] == E.hipErrorNoDevice
        assert hip.hipMalloc(16)[0] == E.hipErrorNoDevice
        assert hip.hipStreamCreate()[0] == E.hipErrorNoDevice
        print("no-device OK")
        """,
        HIPFILE_EMU_DEVICES="0",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no-device OK" in proc.stdout


def test_streams_from_many_threads(counters_balanced: None) -> None:
    failures: list[str] = []

    def worker(index: int) -> None:
        try:
            s = ok(hip.hipStreamCreate())
            d = ok(hip.hipMalloc(1024))
            ev = ok(hip.hipEventCreate())
            out = np.zeros(1024, np.uint8)
            calls: list[int] = []
            cfunc = HOST_FN(lambda ud: calls.append(ud or 0))
            for round_ in range(20):
                value = (index * 20 + round_) % 256
                ok(hip.hipMemsetAsync(d, value, 1024, s))
                ok(hip.hipMemcpyAsync(out, d, 1024, K.hipMemcpyDeviceToHost, s))
                ok(hip.hipLaunchHostFunc(s, fn_ptr(cfunc), round_ + 1))
                ok(hip.hipEventRecord(ev, s))
            ok(hip.hipEventSynchronize(ev))
            if not (out == (index * 20 + 19) % 256).all() or calls != list(range(1, 21)):
                failures.append(f"thread {index}: wrong data or order")
            ok(hip.hipEventDestroy(ev))
            ok(hip.hipFree(d))
            ok(hip.hipStreamDestroy(s))
        except AssertionError as exc:  # reported below, in the test's thread
            failures.append(f"thread {index}: {exc}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 3)
    assert not any(t.is_alive() for t in threads)
    assert failures == []


@pytest.mark.emulated
def test_device_reset_and_release_all_in_subprocess() -> None:
    proc = _run_emulated_script(
        """
        import ctypes, os, warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import hipfile
        from hip import hip
        E = hip.hipError_t
        lib = ctypes.CDLL(os.path.join(os.environ["ROCM_PATH"], "lib", "libamdhip64.so"))
        lib.hipEmuReleaseAll.restype = ctypes.c_longlong

        def counters():
            v = [ctypes.c_longlong() for _ in range(4)]
            lib.hipEmuCounters(*(ctypes.byref(x) for x in v))
            return [x.value for x in v]

        d = hip.hipMalloc(64)[1]
        p = hip.hipHostMalloc(64, 0)[1]
        s = hip.hipStreamCreate()[1]
        ev = hip.hipEventCreate()[1]
        assert counters() == [1, 1, 1, 1], counters()
        assert hip.hipDeviceReset()[0] == E.hipSuccess
        assert counters() == [0, 0, 0, 0], counters()
        assert hip.hipFree(d)[0] == E.hipErrorInvalidValue
        assert hip.hipStreamDestroy(s)[0] == E.hipErrorContextIsDestroyed
        assert hip.hipEventDestroy(ev)[0] == E.hipErrorContextIsDestroyed
        hip.hipMalloc(64); hip.hipStreamCreate(); hip.hipEventCreate()
        assert lib.hipEmuReleaseAll() == 3
        assert counters() == [0, 0, 0, 0], counters()
        print("release OK")
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "release OK" in proc.stdout


@pytest.mark.emulated
def test_exit_with_pending_and_stuck_work_does_not_hang() -> None:
    # One stream has queued copies, another is stuck in a host function (libc
    # sleep(60)); the process must still exit promptly and cleanly.
    start = time.monotonic()
    proc = _run_emulated_script(
        """
        import ctypes, warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import hipfile
        from hip import hip
        libc = ctypes.CDLL(None)
        sleep_fn = ctypes.cast(libc.sleep, ctypes.c_void_p).value
        busy = hip.hipStreamCreate()[1]
        stuck = hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking)[1]
        d = hip.hipMalloc(1 << 20)[1]
        for _ in range(200):
            hip.hipMemsetAsync(d, 1, 1 << 20, busy)
        assert hip.hipLaunchHostFunc(stuck, sleep_fn, 60)[0] == hip.hipError_t.hipSuccess
        hip.hipMemsetAsync(d, 2, 1 << 20, stuck)
        print("exiting")
        """
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "exiting" in proc.stdout
    assert elapsed < 30.0


@pytest.mark.emulated
def test_fork_child_never_hangs() -> None:
    proc = _run_emulated_script(
        """
        import os, warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import hipfile
        import numpy as np
        from hip import hip
        E = hip.hipError_t
        K = hip.hipMemcpyKind
        s = hip.hipStreamCreate()[1]
        ev = hip.hipEventCreate()[1]
        d = hip.hipMalloc(64)[1]
        assert hip.hipMemset(d, 4, 64)[0] == E.hipSuccess
        assert hip.hipEventRecord(ev, s)[0] == E.hipSuccess
        assert hip.hipStreamSynchronize(s)[0] == E.hipSuccess
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                # The parent's stream has no worker here: its handle is invalid.
                assert hip.hipStreamSynchronize(s)[0] == E.hipErrorContextIsDestroyed
                assert hip.hipEventSynchronize(ev)[0] == E.hipSuccess
                out = np.zeros(64, np.uint8)
                assert hip.hipMemcpy(out, d, 64, K.hipMemcpyDeviceToHost)[0] == E.hipSuccess
                assert (out == 4).all()
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        for r in (hip.hipFree(d), hip.hipEventDestroy(ev), hip.hipStreamDestroy(s)):
            assert r[0] == E.hipSuccess, r
        print("fork OK")
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fork OK" in proc.stdout
