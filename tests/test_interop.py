"""Foreign objects as buffers and streams: _interop."""

from __future__ import annotations

import ctypes
import gc
import math
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from _util import CudaArray, check, device_array, hip_stream
from hip import hip

from hipfile import Buffer
from hipfile._interop import buffer_info, pointer_value, stream_info
from hipfile._lib import _decode

# -- streams ------------------------------------------------------------------------------------


class CudaStreamProtocol:
    def __init__(self, version: int, handle: int) -> None:
        self.version = version
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (self.version, self.handle)


class TorchLikeStream:
    def __init__(self, handle: Any) -> None:
        self.cuda_stream = handle


@pytest.mark.parametrize("value", [0, 1, 0x7F00DEAD0000, (1 << 64) - 1])
def test_int_streams(value: int) -> None:
    assert stream_info(value) == (value, None)


def test_none_is_the_null_stream() -> None:
    assert stream_info(None) == (0, None)


@pytest.mark.parametrize("value", [-1, 1 << 64])
def test_out_of_range_ints(value: int) -> None:
    with pytest.raises(ValueError, match="out of range"):
        stream_info(value)


@pytest.mark.parametrize("value", [True, False])
def test_bools_are_rejected(value: bool) -> None:
    with pytest.raises(TypeError, match="bool is not a stream"):
        stream_info(value)


def test_hip_python_stream() -> None:
    with hip_stream() as s:
        handle, owner = stream_info(s)
        assert handle == int(s) != 0
        assert owner is s


def test_cuda_stream_protocol_version_0() -> None:
    obj = CudaStreamProtocol(0, 0x1234)
    handle, owner = stream_info(obj)
    assert handle == 0x1234
    assert owner is obj


@pytest.mark.parametrize("version", [1, 2, -1])
def test_cuda_stream_protocol_other_versions(version: int) -> None:
    with pytest.raises(ValueError, match=f"unsupported __cuda_stream__ version {version}"):
        stream_info(CudaStreamProtocol(version, 0x1234))


def test_cuda_stream_protocol_bad_shape() -> None:
    class Bad:
        def __cuda_stream__(self) -> int:
            return 5

    with pytest.raises(TypeError, match=r"\(version, handle\)"):
        stream_info(Bad())


def test_cuda_stream_attribute() -> None:
    obj = TorchLikeStream(0xABC0)
    assert stream_info(obj) == (0xABC0, obj)


def test_cuda_stream_attribute_must_be_an_int() -> None:
    with pytest.raises(TypeError, match="is not a stream"):
        stream_info(TorchLikeStream(True))
    with pytest.raises(TypeError, match="is not a stream"):
        stream_info(TorchLikeStream("0xabc"))


@pytest.mark.parametrize("value", [1.0, "0", object(), b"\0"])
def test_other_objects_are_rejected(value: Any) -> None:
    with pytest.raises(TypeError, match="is not a stream"):
        stream_info(value)


# -- pointers -----------------------------------------------------------------------------------


def test_pointer_values() -> None:
    assert pointer_value(0x1000) == 0x1000
    assert pointer_value(ctypes.c_void_p(0x2000)) == 0x2000
    assert pointer_value(ctypes.c_void_p(None)) == 0
    assert pointer_value(np.uint64(0x3000)) == 0x3000
    with device_array(64) as ptr:
        assert pointer_value(ptr) == int(ptr)


@pytest.mark.parametrize("value", [True, 1.0, np.float32(4096.0), np.float64(1.0), object(), "1"])
def test_non_pointers(value: Any) -> None:
    with pytest.raises(TypeError, match="is not a pointer"):
        pointer_value(value)


@pytest.mark.parametrize("value", [-1, 1 << 64])
def test_out_of_range_pointers(value: int) -> None:
    with pytest.raises(ValueError, match="out of range"):
        pointer_value(value)


# -- __cuda_array_interface__ -------------------------------------------------------------------


def test_cai_buffer_info() -> None:
    obj = CudaArray({"shape": (8, 4), "typestr": "<i2", "data": (0x10000, False), "version": 3})
    assert buffer_info(obj) == (0x10000, 64, obj)


def test_cai_without_data() -> None:
    with pytest.raises(TypeError, match="no 'data'"):
        buffer_info(CudaArray({"shape": (4,), "typestr": "|u1", "version": 3}))


def test_cai_null_pointer() -> None:
    with pytest.raises(ValueError, match="NULL data pointer"):
        buffer_info(CudaArray({"shape": (4,), "typestr": "|u1", "data": (0, False)}))


def test_cai_unknown_typestr() -> None:
    with pytest.raises(TypeError, match="typestr"):
        buffer_info(CudaArray({"shape": (4,), "typestr": "<M8[ns]", "data": (0x1000, False)}))


@pytest.mark.parametrize(("value", "match"), [
    (0x1000, r"bare address has no size .*hipfile.Buffer\(ptr, length\)"),
    (None, "the buffer is None: pass device memory"),
    (True, "a bool is not a buffer"),
])
def test_bare_values_have_no_size(value: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        buffer_info(value)


def test_buffer_passes_through() -> None:
    buf = Buffer(0x1000, 64)
    assert buffer_info(buf) == (0x1000, 64, buf)


# -- DLPack -------------------------------------------------------------------------------------

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_ROCM, KDL_ROCM_HOST = 1, 2, 3, 10, 11


class DLDevice(ctypes.Structure):
    _fields_ = (("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32))


class DLDataType(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16))


class DLTensor(ctypes.Structure):
    """DLPack's ``DLTensor``, written from dlpack.h, to build test tensors."""

    _fields_ = (
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    )


def test_dlpack_layout_is_the_standard_one() -> None:
    """DLPack's ``DLTensor`` on LP64: 48 bytes, members at these offsets, in
    the decoder compiled into the core as in the tensors these tests build."""
    expected = {"data": 0, "device": 8, "ndim": 16, "dtype": 20, "shape": 24,
                "strides": 32, "byte_offset": 40}
    assert _decode.dlpack_layout() == (48, expected)
    assert ctypes.sizeof(DLTensor) == 48
    offsets = {name: getattr(DLTensor, name).offset for name, _ in DLTensor._fields_}
    assert offsets == expected
    assert ctypes.sizeof(DLDevice) == 8 and ctypes.sizeof(DLDataType) == 4


class DLManagedTensor(ctypes.Structure):
    _fields_ = (
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    )


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
# Capsule names must outlive their capsules.
_NAMES = {"fresh": b"dltensor", "used": b"used_dltensor"}


class DLPackArray:
    """An object exporting memory through ``__dlpack__`` (no deleter: the
    tensor lives as long as this object)."""

    def __init__(self, ptr: int, shape: tuple[int, ...], device_type: int = KDL_ROCM,
                 bits: int = 8, strides: tuple[int, ...] | None = None,
                 byte_offset: int = 0, capsule: str = "fresh") -> None:
        ndim = len(shape)
        self._shape = (ctypes.c_int64 * max(ndim, 1))(*shape)
        self._strides = (ctypes.c_int64 * max(ndim, 1))(*strides) if strides else None
        self._managed = DLManagedTensor()
        t = self._managed.dl_tensor
        t.data = ptr
        t.device = DLDevice(device_type, 0)
        t.ndim = ndim
        t.dtype = DLDataType(1, bits, 1)
        t.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        if self._strides is not None:
            t.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = byte_offset
        self._device_type = device_type
        self._capsule = capsule

    def __dlpack__(self, stream: Any = None) -> Any:
        return _capsule_new(ctypes.addressof(self._managed), _NAMES[self._capsule], None)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self._device_type, 0)


@pytest.fixture
def dev() -> Iterator[Any]:
    with device_array(4096) as ptr:
        yield ptr


@pytest.mark.parametrize("device_type", [KDL_ROCM, KDL_CUDA])
def test_dlpack_device_memory(dev: Any, device_type: int) -> None:
    obj = DLPackArray(int(dev), (16, 8), device_type, bits=32, byte_offset=64)
    ptr, nbytes, owner = buffer_info(obj)
    assert ptr == int(dev) + 64
    assert nbytes == 16 * 8 * 4
    assert owner[0] is obj
    buf = Buffer(obj)
    assert (buf.ptr, buf.length) == (int(dev) + 64, 512)


def test_dlpack_contiguous_strides(dev: Any) -> None:
    obj = DLPackArray(int(dev), (4, 8), bits=16, strides=(8, 1))
    assert buffer_info(obj)[1] == 64


def test_dlpack_non_contiguous(dev: Any) -> None:
    obj = DLPackArray(int(dev), (4, 8), bits=16, strides=(16, 1))
    with pytest.raises(ValueError, match="not C-contiguous"):
        buffer_info(obj)


@pytest.mark.parametrize(
    ("device_type", "where"),
    [(KDL_CPU, r"host \(CPU\)"), (KDL_CUDA_HOST, "pinned host"), (KDL_ROCM_HOST, "pinned host"),
     (4, "device type 4")],
)
def test_dlpack_other_memory(dev: Any, device_type: int, where: str) -> None:
    obj = DLPackArray(int(dev), (16,), device_type)
    with pytest.raises(ValueError, match=f"{where} memory; hipFile needs device memory"):
        buffer_info(obj)


def test_dlpack_consumed_capsule(dev: Any) -> None:
    with pytest.raises(TypeError, match="unconsumed DLPack capsule"):
        buffer_info(DLPackArray(int(dev), (16,), capsule="used"))


def test_numpy_host_array_through_dlpack() -> None:
    with pytest.raises(ValueError, match=r"host \(CPU\) memory"):
        buffer_info(np.arange(10, dtype=np.float32))


def test_dlpack_owner_is_kept_alive(dev: Any) -> None:
    obj = DLPackArray(int(dev), (math.prod((4, 4)),))
    ref = weakref.ref(obj)
    buf = Buffer(obj)
    del obj
    gc.collect()
    assert ref() is not None
    del buf
    gc.collect()
    assert ref() is None


def test_hip_device_array_keeps_working(dev: Any) -> None:
    check(hip.hipMemset(dev, 0, 4096))
    ptr, nbytes, owner = buffer_info(dev)
    assert (ptr, nbytes, owner) == (int(dev), 4096, dev)
