"""The HIP runtime of the test platform: devices, versions, last error and error paths."""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import numpy as np
import pytest
from _hip_calls import *  # noqa: F403

pytestmark = NEEDS_HIP_PYTHON_10

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


def _c_error_texts(lib: ctypes.CDLL, code: int) -> tuple[str, str]:
    """hipGetErrorName and hipGetErrorString of `lib`, called through ctypes
    (so that numbers HIP does not define can be passed)."""
    lib.hipGetErrorName.restype = lib.hipGetErrorString.restype = ctypes.c_char_p
    return (lib.hipGetErrorName(ctypes.c_int(code)).decode(),
            lib.hipGetErrorString(ctypes.c_int(code)).decode())


@pytest.mark.emulated
def test_every_error_has_its_name() -> None:
    """Every hipError_t that HIP defines (HIP-Python's enum) has its own name
    and a description, and the driver-API spellings answer the same."""
    for code in E:
        name = str(ok(hip.hipGetErrorName(code)))
        text = str(ok(hip.hipGetErrorString(code)))
        assert name == code.name
        assert text and text != name and not text.startswith("hip")
        assert (name, text) == _c_error_texts(runtime_library(), int(code))
        assert str(ok(hip.hipDrvGetErrorName(code))) == name
        assert str(ok(hip.hipDrvGetErrorString(code))) == text


@pytest.mark.emulated
def test_undefined_error_numbers() -> None:
    """A number HIP does not define: hipGetErrorName/String answer as for
    hipErrorUnknown; hipDrvGetErrorName refuses it."""
    lib = runtime_library()
    for number in (10, 999_999, -1):
        assert number not in {int(code) for code in E}
        assert _c_error_texts(lib, number) == ("hipErrorUnknown", "unknown error")
        out = ctypes.c_char_p(b"x")
        assert lib.hipDrvGetErrorName(ctypes.c_int(number), ctypes.byref(out)) == int(
            E.hipErrorInvalidValue)
        assert out.value is None


@pytest.mark.emulated
def test_cuda_platform_shares_the_error_table(cuda_platform_lib: Path) -> None:
    """The cuda platform's libamdhip64 (built here; naming errors needs no
    CUDA) answers every number exactly as the emulated one: one table."""
    cuda = ctypes.CDLL(str(cuda_platform_lib / "libamdhip64.so"))
    emulated = runtime_library()
    for number in [int(code) for code in E] + [10, 999_999, -1]:
        assert _c_error_texts(cuda, number) == _c_error_texts(emulated, number)
