"""The HIP runtime of the test platform: memory and pointer attributes."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from _hip_calls import *  # noqa: F403

pytestmark = NEEDS_HIP_PYTHON_10

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


# ------------------------------------------------------- batched copies


def _memcpy_batch(dsts: list[int], srcs: list[int], sizes: list[int], stream: object,
                  count: int | None = None) -> tuple[int, int]:
    """hipMemcpyBatchAsync through the runtime library (HIP-Python's wrapper
    takes the destination and size arrays as outputs); (error, fail index)."""
    n = len(dsts)
    fn = runtime_library().hipMemcpyBatchAsync
    fn.restype = ctypes.c_int
    fail = ctypes.c_size_t(12345)
    err = fn((ctypes.c_void_p * n)(*dsts), (ctypes.c_void_p * n)(*srcs),
             (ctypes.c_size_t * n)(*sizes), ctypes.c_size_t(n if count is None else count),
             None, None, ctypes.c_size_t(0), ctypes.byref(fail), ctypes.c_void_p(int(stream)))
    return err, fail.value


def test_memcpy_batch_scatters_and_gathers_in_stream_order(stream: object) -> None:
    """hipMemcpyBatchAsync: blocks of pinned host memory to scattered places
    in device memory and back, ordered after earlier work on the stream
    and before later work (the engine's scattered reads use it)."""
    block, n = 4096, 16
    dev = ok(hip.hipMalloc(4 * n * block))
    host = ok(hip.hipHostMalloc(n * block, 0))
    back = ok(hip.hipHostMalloc(n * block, 0))
    try:
        src = host_view(host, n * block)
        src[:] = np.random.default_rng(3).integers(0, 256, n * block, dtype=np.uint8)
        places = np.random.default_rng(4).permutation(4 * n)[:n]
        d0, h0, b0 = int(dev), int(host), int(back)
        ok(hip.hipMemsetAsync(dev, 0, 4 * n * block, stream))
        dsts = [d0 + int(p) * block for p in places]
        assert _memcpy_batch(dsts, [h0 + i * block for i in range(n)], [block] * n,
                             stream)[0] == 0
        assert _memcpy_batch([b0 + i * block for i in range(n)], dsts, [block] * n,
                             stream)[0] == 0
        ok(hip.hipStreamSynchronize(stream))
        np.testing.assert_array_equal(host_view(back, n * block), src)
        whole = np.empty(4 * n * block, np.uint8)
        ok(hip.hipMemcpy(whole, dev, whole.nbytes, K.hipMemcpyDeviceToHost))
        untouched = np.ones(4 * n, bool)
        untouched[places] = False
        assert not whole.reshape(4 * n, block)[untouched].any()
    finally:
        ok(hip.hipFree(dev))
        ok(hip.hipHostFree(host))
        ok(hip.hipHostFree(back))


@pytest.mark.emulated  # which copy the runtime names is the emulated runtime's choice
def test_memcpy_batch_refuses_before_enqueueing_any(stream: object, dmem: object,
                                                    pinned: object) -> None:
    """A copy that overruns its allocation: the whole batch is refused with
    hipErrorInvalidValue, the fail index names that copy, and no copy ran;
    an empty batch is refused too."""
    d, p = int(dmem), int(pinned)
    host_view(pinned, 4096)[:] = 7
    ok(hip.hipMemset(dmem, 0, 4096))
    err, fail = _memcpy_batch([d, d + 1024, d + 4000], [p, p, p], [512, 512, 512], stream)
    assert err == int(E.hipErrorInvalidValue) and fail == 2
    ok(hip.hipStreamSynchronize(stream))
    out = np.empty(4096, np.uint8)
    ok(hip.hipMemcpy(out, dmem, 4096, K.hipMemcpyDeviceToHost))
    assert not out.any(), "a refused batch moved bytes"
    err, _ = _memcpy_batch([d], [p], [512], stream, count=0)
    assert err == int(E.hipErrorInvalidValue)


@pytest.mark.emulated  # the emulated runtime's own answer for a destroyed stream
def test_memcpy_batch_on_a_destroyed_stream_queues_none(dmem: object, pinned: object) -> None:
    """Good copies on a stream that no longer exists: the batch is refused
    as a whole (no copy is to blame, so the fail index is SIZE_MAX), and
    zero-byte copies among them are accepted and skipped."""
    d, p = int(dmem), int(pinned)
    host_view(pinned, 4096)[:] = 9
    ok(hip.hipMemset(dmem, 0, 4096))
    gone = ok(hip.hipStreamCreate())
    ok(hip.hipStreamDestroy(gone))
    err, fail = _memcpy_batch([d, d + 1024, d + 2048], [p, p, p], [512, 0, 512], gone)
    assert err == int(E.hipErrorContextIsDestroyed) and fail == 2**64 - 1
    ok(hip.hipDeviceSynchronize())
    out = np.empty(4096, np.uint8)
    ok(hip.hipMemcpy(out, dmem, 4096, K.hipMemcpyDeviceToHost))
    assert not out.any(), "a refused batch moved bytes"
