"""Buffer: construction from every accepted object, registration, lifetime."""

from __future__ import annotations

import ctypes
import gc
import warnings
from typing import Any

import numpy as np
import pytest
from _util import CudaArray, check, device_array
from hip import hip

import hipfile
from hipfile import Buffer, OpError

N = 1 << 14


def registered_buffers() -> int:
    from hipfile.platforms import emulated

    return emulated.counters()["buffers"]


# -- construction ---------------------------------------------------------------------------


def test_from_int_and_length(dev: Any) -> None:
    buf = Buffer(int(dev), 4096)
    assert buf.ptr == int(dev)
    assert buf.length == 4096
    assert len(buf) == 4096
    assert buf.flags == 0
    assert not buf.registered
    assert repr(buf) == f"<hipfile.Buffer ptr={int(dev):#x} length=4096 unregistered>"


def test_int_without_length_is_refused(dev: Any) -> None:
    with pytest.raises(TypeError, match="bare address has no size"):
        Buffer(int(dev))


@pytest.mark.parametrize("value", [True, None, "0x1000", 1.5])
def test_non_pointers_are_refused(value: Any) -> None:
    with pytest.raises(TypeError):
        Buffer(value, 16)


def test_from_device_array(dev: Any) -> None:
    buf = Buffer(dev)
    assert (buf.ptr, buf.length) == (int(dev), N)
    part = Buffer(dev, 100)
    assert (part.ptr, part.length) == (int(dev), 100)


def test_from_typed_device_array(dev: Any) -> None:
    """HIP-Python writes typestrs without a byte-order mark ('f4', 'B')."""
    dev.configure(typestr="f4", shape=(N // 4,))
    assert dev.__cuda_array_interface__["typestr"] == "f4"
    assert Buffer(dev).length == N


def test_length_beyond_the_object_is_refused(dev: Any) -> None:
    with pytest.raises(ValueError, match=f"length {N + 1} exceeds the object's {N} bytes"):
        Buffer(dev, N + 1)


def test_negative_length_is_refused(dev: Any) -> None:
    with pytest.raises(ValueError, match="length must be >= 0, got -1"):
        Buffer(int(dev), -1)


def test_null_pointer_is_refused() -> None:
    with pytest.raises(ValueError, match="NULL"):
        Buffer(0, 16)


def test_from_ctypes_void_p(dev: Any) -> None:
    buf = Buffer(ctypes.c_void_p(int(dev)), 256)
    assert (buf.ptr, buf.length) == (int(dev), 256)
    up = Buffer.from_ctypes_void_p(ctypes.c_void_p(int(dev)), 512, 0)
    assert (up.ptr, up.length, up.flags) == (int(dev), 512, 0)
    with pytest.raises(ValueError, match="null pointer"):
        Buffer.from_ctypes_void_p(ctypes.c_void_p(None), 16, 0)


def test_from_hip_pointer_with_length(dev: Any) -> None:
    pointer = hip.hipDeviceptr_t(int(dev)) if hasattr(hip, "hipDeviceptr_t") else dev
    buf = Buffer(pointer, 64)
    assert (buf.ptr, buf.length) == (int(dev), 64)


@pytest.mark.parametrize(
    ("shape", "typestr", "nbytes"),
    [((N,), "|u1", N), ((16, 32), "<f4", 2048), ((3,), "<c16", 48), ((), "<f8", 8),
     ((0,), "<f4", 0)],
)
def test_from_cuda_array_interface(dev: Any, shape: tuple[int, ...], typestr: str,
                                   nbytes: int) -> None:
    obj = CudaArray(int(dev), shape, typestr)
    buf = Buffer(obj)
    assert (buf.ptr, buf.length) == (int(dev), nbytes)


def test_contiguous_strides_are_accepted(dev: Any) -> None:
    obj = CudaArray(int(dev), (4, 8), "<f4", strides=(32, 4))
    assert Buffer(obj).length == 128


@pytest.mark.parametrize(
    ("shape", "strides"), [((10,), (8,)), ((4, 8), (4, 16)), ((4, 8), (64, 4))]
)
def test_non_contiguous_array_is_refused(dev: Any, shape: tuple[int, ...],
                                         strides: tuple[int, ...]) -> None:
    obj = CudaArray(int(dev), shape, "<f4", strides=strides)
    with pytest.raises(ValueError, match="not C-contiguous"):
        Buffer(obj)


def test_host_numpy_array_is_refused() -> None:
    arr = np.zeros(1024, dtype=np.uint8)
    with pytest.raises((TypeError, ValueError), match=r"host \(CPU\) memory.*device memory"):
        Buffer(arr)


def test_host_bytes_are_refused() -> None:
    with pytest.raises(TypeError, match="bytearray is not a device buffer"):
        Buffer(bytearray(16))


def test_buffer_from_buffer(dev: Any) -> None:
    first = Buffer(dev, 128)
    second = Buffer(first)
    assert (second.ptr, second.length) == (first.ptr, 128)


def test_keeps_its_object_alive() -> None:
    with device_array(4096) as ptr:
        obj = CudaArray(int(ptr), (4096,))
        buf = Buffer(obj)
        del obj
        gc.collect()
        assert Buffer(buf).length == 4096
        assert buf.length == 4096


# -- registration --------------------------------------------------------------------------


@pytest.mark.emulated
def test_register_and_deregister_are_idempotent(dev: Any) -> None:
    buf = Buffer(dev)
    buf.register()
    assert buf.registered
    buf.register()
    assert registered_buffers() == 1
    assert repr(buf).endswith("registered>")
    buf.deregister()
    assert not buf.registered
    assert registered_buffers() == 0
    buf.deregister()
    assert registered_buffers() == 0
    buf.register()
    assert registered_buffers() == 1
    buf.deregister()


@pytest.mark.emulated
def test_context_manager(dev: Any) -> None:
    with Buffer(dev) as buf:
        assert buf.registered
        assert registered_buffers() == 1
    assert not buf.registered
    assert registered_buffers() == 0
    with pytest.raises(KeyError), Buffer(dev) as buf:
        raise KeyError("x")
    assert not buf.registered
    assert registered_buffers() == 0


@pytest.mark.emulated
def test_pinned_host_memory_is_refused() -> None:
    host = check(hip.hipHostMalloc(4096, 0))
    try:
        buf = Buffer(int(host), 4096)
        with pytest.raises(hipfile.PointerError) as info:
            buf.register()
        assert isinstance(info.value, ValueError)
        assert info.value.err is OpError.HIP_MEMORY_TYPE_INVALID
        assert info.value.func == "hipFileBufRegister"
        assert not buf.registered
    finally:
        check(hip.hipHostFree(host))


@pytest.mark.emulated
def test_length_past_the_allocation_is_refused(dev: Any) -> None:
    buf = Buffer(int(dev), N + 1)
    with pytest.raises(hipfile.PointerError) as info:
        buf.register()
    assert info.value.err is OpError.HIP_POINTER_RANGE_ERROR
    assert not buf.registered


@pytest.mark.emulated
def test_unknown_memory_is_refused() -> None:
    local = ctypes.create_string_buffer(64)
    buf = Buffer(ctypes.addressof(local), 64)
    with pytest.raises(hipfile.PointerError) as info:
        buf.register()
    # ROCm reports unknown memory as hipMemoryTypeUnregistered: a memory type
    # hipFile refuses, as AMD's library answers
    assert info.value.err is OpError.HIP_MEMORY_TYPE_INVALID


def test_empty_buffer_cannot_be_registered(dev: Any) -> None:
    with pytest.raises(ValueError, match="empty buffer"):
        Buffer(dev, 0).register()


@pytest.mark.emulated
def test_overlapping_registration_is_refused(dev: Any) -> None:
    with Buffer(dev, 4096):
        with pytest.raises(hipfile.MemoryAlreadyRegisteredError) as info:
            Buffer(int(dev) + 1024, 1024).register()
        assert info.value.hipfile_err == OpError.MEMORY_ALREADY_REGISTERED
        with pytest.raises(hipfile.MemoryAlreadyRegisteredError):
            Buffer(dev, 4096).register()
        with Buffer(int(dev) + 4096, 4096):  # adjacent, not overlapping
            assert registered_buffers() == 2
    assert registered_buffers() == 0


@pytest.mark.emulated
def test_registration_fault(dev: Any) -> None:
    from hipfile.platforms import emulated

    emulated.inject_fault("register", 5030)
    buf = Buffer(dev)
    with pytest.raises(hipfile.InternalError):
        buf.register()
    assert not buf.registered
    with buf:
        assert buf.registered


def test_setup_cannot_change_a_registered_buffer(dev: Any) -> None:
    with Buffer(dev) as buf, pytest.raises(ValueError, match="registered buffer"):
        buf._setup(int(dev), 16, 0, None)


def test_resource_warning_when_collected_registered(dev: Any) -> None:
    buf = Buffer(dev)
    buf.register()
    with pytest.warns(ResourceWarning, match=r"length=16384 registered> was still registered"):
        del buf
        gc.collect()
    # the registration is gone: the same range registers again
    with Buffer(dev) as again:
        assert again.registered


def test_no_warning_when_deregistered(dev: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        buf = Buffer(dev)
        with buf:
            pass
        del buf
        gc.collect()
