# cython: language_level=3, boundscheck=False, wraparound=False
"""Foreign buffers and streams, decoded in C: everything the package knows
of other libraries' objects.

Buffers become ``(address, nbytes, owner)`` and streams ``(handle,
owner)``; ``owner`` is the object to keep alive while the library may use
the memory or stream:

* HIP-Python ``Pointer``/``DeviceArray``, ``hipStream_t`` (read at field
  offsets measured once on objects made for the purpose, the layout
  calibration; the Python-level protocol where it found nothing);
* ``__cuda_array_interface__`` (PyTorch, CuPy, Numba, HIP-Python arrays);
* ``__dlpack__`` (DLPack capsules; decoded here, once, for device and host
  memory alike);
* ``__cuda_stream__`` (version 0), PyTorch streams (``.cuda_stream``),
  CuPy streams (``.ptr``), and plain integers.

The package's own cores (``Buffer``, ``Stream``) are read by
:mod:`hipfile._lib._core` before anything here is asked.
"""

import math
import re
import struct

from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint64_t, uintptr_t

import sys

from hipfile._lib._errors import error_name
from hipfile._lib._runtime cimport HIP_ERROR_NOT_READY, HIP_SUCCESS, hipapi, stream_query

cdef dict _modules = sys.modules

#: Where a refusal of host memory points the caller.
HOST_BUFFERS_HINT = ("host buffers are accepted by FileHandle.read/write/pread/pwrite "
                     "(POSIX I/O), not by this call")

# --------------------------------------------------------------------------
# HIP-Python's objects, read in C
# --------------------------------------------------------------------------

cdef object _HipNDBuffer = None     # HIP-Python's DeviceArray and its base
cdef object _HipDeviceArray = None
cdef object _HipStream = None       # hipStream_t (ihipStream_t)
cdef bint _hip_types_loaded = 0
# Field offsets inside HIP-Python's objects, measured once at run time on
# objects made for the purpose (-1: not found; the slow path is used).
cdef Py_ssize_t _off_ptr = -1         # Pointer._ptr (void *)
cdef Py_ssize_t _off_stream_ptr = -1  # the same field in ihipStream_t
cdef Py_ssize_t _off_itemsize = -1    # NDBuffer._itemsize (size_t)
cdef Py_ssize_t _off_cai = -1         # NDBuffer._cuda_array_interface (dict)


cdef Py_ssize_t _find_word(object a, object b, uintptr_t va, uintptr_t vb):
    """The offset of the one pointer-sized field holding ``va`` in ``a`` and
    ``vb`` in ``b`` (two objects of one type), or -1."""
    cdef Py_ssize_t n = type(a).__basicsize__
    cdef Py_ssize_t off, found = -1
    for off in range(sizeof(PyObject), n - <Py_ssize_t>sizeof(uintptr_t) + 1,
                     sizeof(uintptr_t)):
        if (<uintptr_t *>(<char *><PyObject *>a + off))[0] == va and \
                (<uintptr_t *>(<char *><PyObject *>b + off))[0] == vb:
            if found >= 0:
                return -1      # ambiguous
            found = off
    return found


cdef int _calibrate() except -1:
    global _off_ptr, _off_stream_ptr, _off_itemsize, _off_cai
    import gc
    cdef uintptr_t s1 = 0x5A17C0DE00001000, s2 = 0x5A17C0DE00042000
    try:
        if _HipDeviceArray is not None:
            a = _HipDeviceArray.fromObj(s1)
            b = _HipDeviceArray.fromObj(s2)
            _off_ptr = _find_word(a, b, s1, s2)
            a.configure(shape=(3, 5), typestr="f8", _force=True)
            b.configure(shape=(7,), typestr="i2", _force=True)
            _off_itemsize = _find_word(a, b, 8, 2)
            dicts = {id(o): o for o in gc.get_referents(a) if type(o) is dict}
            dicts_b = {id(o): o for o in gc.get_referents(b) if type(o) is dict}
            for da in dicts.values():
                for db in dicts_b.values():
                    if da.get("shape") == (3, 5) and db.get("shape") == (7,):
                        _off_cai = _find_word(a, b, <uintptr_t>id(da), <uintptr_t>id(db))
        if _HipStream is not None:
            _off_stream_ptr = _find_word(_HipStream.fromObj(s1), _HipStream.fromObj(s2), s1, s2)
    except Exception:
        _off_ptr = _off_stream_ptr = _off_itemsize = _off_cai = -1
    if _off_ptr < 0 or _off_itemsize < 0 or _off_cai < 0:
        _off_ptr = _off_itemsize = _off_cai = -1
    return 0


cdef int _load_hip_types() except -1:
    global _HipNDBuffer, _HipDeviceArray, _HipStream, _hip_types_loaded
    import sys
    h = hipapi()
    mod = sys.modules.get(h.Pointer.__module__)
    _HipNDBuffer = getattr(mod, "NDBuffer", None)
    _HipDeviceArray = getattr(mod, "DeviceArray", None)
    _HipStream = getattr(h.hip, "ihipStream_t", None)
    _calibrate()
    _hip_types_loaded = 1
    return 0


cdef inline int _hip_types_if_loaded() except -1:
    """Learn HIP-Python's types once its Python layer is loaded: before
    that no object can be one of them, and the package does not import it
    to find out (a process that only loads tensors never does)."""
    if not _hip_types_loaded and ("rocm.bindings.hip" in _modules or "hip.hip" in _modules):
        _load_hip_types()
    return 0


def hip_layout():
    """The field offsets measured in HIP-Python's objects (-1: not found,
    the Python-level path is used)."""
    if not _hip_types_loaded:
        _load_hip_types()
    return {"ptr": _off_ptr, "stream_ptr": _off_stream_ptr, "itemsize": _off_itemsize,
            "cuda_array_interface": _off_cai}



cdef object _torch_tensor = None


cdef bint _torch_loaded():
    """Whether torch is imported (never imports it); notes torch.Tensor."""
    global _torch_tensor
    import sys
    torch = sys.modules.get("torch")
    if torch is None:
        return 0
    _torch_tensor = getattr(torch, "Tensor", None)
    return _torch_tensor is not None


cdef object foreign_buffer_info(object obj, uintptr_t *base, size_t *length):
    """Address and size of a buffer object other than the package's own;
    returns the object to keep alive. HIP-Python arrays are read in C,
    other objects through their protocols (:func:`protocol_buffer_info`)."""
    cdef size_t n
    cdef char *p
    _hip_types_if_loaded()
    t = type(obj)
    if t is _HipDeviceArray or t is _HipNDBuffer:
        if _off_cai >= 0:
            p = <char *><PyObject *>obj
            cai = <object>(<PyObject **>(p + _off_cai))[0]
            if type(cai) is dict and (<dict>cai).get("strides") is None:
                shape = (<dict>cai).get("shape")
                if type(shape) is tuple:
                    n = (<size_t *>(p + _off_itemsize))[0]
                    for d in <tuple>shape:
                        n *= <size_t>d
                    base[0] = (<uintptr_t *>(p + _off_ptr))[0]
                    length[0] = n
                    return obj
        base[0] = <uintptr_t>int(obj)
        length[0] = <size_t>obj.itemsize * <size_t>obj.size
        return obj
    if t is _torch_tensor or (_torch_tensor is None and _torch_loaded()
                              and t is _torch_tensor):
        # a plain CUDA tensor, as serving code passes it: its address and
        # size in three calls, the values __cuda_array_interface__ gives
        # (anything else, requires_grad included, takes that path)
        if obj.is_cuda and not obj.requires_grad and obj.is_contiguous():
            n = <size_t>obj.nbytes
            b = <uintptr_t>obj.data_ptr()
            if b or not n:
                base[0] = b
                length[0] = n
                return obj
    b, nb, owner = protocol_buffer_info(obj)
    base[0] = b
    length[0] = nb
    return owner


cdef uintptr_t foreign_stream_handle(object obj) except? 0:
    """A stream object's handle (anything but the package's own, an int or
    None): HIP-Python ``hipStream_t`` is read in C."""
    _hip_types_if_loaded()
    if type(obj) is _HipStream:
        if _off_stream_ptr >= 0:
            return (<uintptr_t *>(<char *><PyObject *>obj + _off_stream_ptr))[0]
        return <uintptr_t>int(obj)
    return <uintptr_t>stream_info(obj)[0]


cdef int check_handle_range(object value) except -1:
    if value < 0 or value >= (1 << 64):
        raise ValueError(f"stream handle {value:#x} out of range")
    return 0


# --------------------------------------------------------------------------
# __cuda_array_interface__
# --------------------------------------------------------------------------

def _from_cai(obj, dict cai):
    shape = tuple(int(n) for n in cai.get("shape", ()))
    itemsize = _itemsize(str(cai.get("typestr", "|u1")))
    data = cai.get("data")
    if not data:
        raise TypeError("__cuda_array_interface__ has no 'data'")
    ptr = int(data[0] or 0)
    strides = cai.get("strides")
    if strides is not None and not _contiguous(shape, tuple(strides), itemsize):
        raise ValueError("array is not C-contiguous; hipFile needs one contiguous range")
    nbytes = itemsize * math.prod(shape)
    if ptr == 0 and nbytes:
        raise ValueError("array has a NULL data pointer")
    return ptr, nbytes, obj


def _itemsize(str typestr):
    """Bytes per element of a typestr: the array-interface form (``"<f4"``,
    ``"|u1"``), without its byte-order mark (``"f4"``, as HIP-Python writes
    it), or a one-letter ``struct`` code (``"B"``)."""
    digits = re.search(r"(\d+)$", typestr)
    if digits:
        return int(digits.group(1))
    try:
        return struct.calcsize("=" + typestr)
    except struct.error:
        raise TypeError(f"unsupported __cuda_array_interface__ typestr {typestr!r}") from None


def _contiguous(tuple shape, tuple strides, itemsize):
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides), strict=True):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


# --------------------------------------------------------------------------
# DLPack (decoded once, here)
# --------------------------------------------------------------------------

cdef struct DLDevice:
    int32_t device_type
    int32_t device_id

cdef struct DLDataType:
    uint8_t code
    uint8_t bits
    uint16_t lanes

cdef struct DLTensor:
    void *data
    DLDevice device
    int32_t ndim
    DLDataType dtype
    int64_t *shape
    int64_t *strides
    uint64_t byte_offset

# DLPack device types
DL_CPU = 1
DL_GPU = frozenset({2, 10})            # kDLCUDA, kDLROCM
DL_HOST_PINNED = frozenset({3, 11})    # kDLCUDAHost, kDLROCMHost


def dlpack_layout():
    """``(size, offsets)`` of ``DLTensor`` as compiled here (DLPack's
    standard layout on LP64: 48 bytes)."""
    cdef DLTensor t
    cdef uintptr_t b = <uintptr_t>&t
    return sizeof(DLTensor), {
        "data": <uintptr_t>&t.data - b, "device": <uintptr_t>&t.device - b,
        "ndim": <uintptr_t>&t.ndim - b, "dtype": <uintptr_t>&t.dtype - b,
        "shape": <uintptr_t>&t.shape - b, "strides": <uintptr_t>&t.strides - b,
        "byte_offset": <uintptr_t>&t.byte_offset - b}


def dlpack_info(obj):
    """``(address, nbytes, device_type, owner)`` of an object exporting
    ``__dlpack__``; ``owner`` keeps the (unconsumed) capsule, which frees
    the tensor when it dies, with the object.

    Raises
    ------
    TypeError
        ``__dlpack__`` did not return an unconsumed DLPack capsule.
    ValueError
        The tensor is not C-contiguous.
    """
    capsule = obj.__dlpack__()
    if not PyCapsule_IsValid(capsule, b"dltensor"):
        raise TypeError("__dlpack__ did not return an unconsumed DLPack capsule")
    # DLManagedTensor starts with its DLTensor
    cdef DLTensor *t = <DLTensor *>PyCapsule_GetPointer(capsule, b"dltensor")
    cdef int i
    cdef int64_t itemsize = max(1, (t.dtype.bits * t.dtype.lanes) // 8)
    cdef int64_t expected = itemsize
    cdef int64_t nbytes = itemsize
    for i in range(t.ndim):
        nbytes *= t.shape[i]
    if t.strides != NULL:
        for i in range(t.ndim - 1, -1, -1):
            if t.shape[i] != 1 and t.strides[i] * itemsize != expected:
                raise ValueError("tensor is not C-contiguous; the transfer needs one "
                                 "contiguous range")
            expected *= t.shape[i]
    ptr = <uintptr_t>t.data + t.byte_offset
    return ptr, nbytes, t.device.device_type, (obj, capsule)


def _from_dlpack(obj):
    ptr, nbytes, kind, owner = dlpack_info(obj)
    if kind not in DL_GPU:
        if kind in DL_HOST_PINNED:
            where = "pinned host"
        elif kind == DL_CPU:
            where = "host (CPU)"
        else:
            where = f"DLPack device type {kind}"
        raise ValueError(f"{type(obj).__name__} is in {where} memory; "
                         f"hipFile needs device memory ({HOST_BUFFERS_HINT})")
    return ptr, nbytes, owner


# --------------------------------------------------------------------------
# The protocols
# --------------------------------------------------------------------------

def protocol_buffer_info(obj):
    """``(address, nbytes, owner)`` of a device buffer object.

    Raises
    ------
    TypeError
        The object exposes no size (pass ``Buffer(ptr, length)``) or is of an
        unsupported kind.
    ValueError
        The memory is not one contiguous device range.
    """
    if obj is None:
        raise TypeError("the buffer is None: pass device memory (hipfile.Buffer, a HIP-Python "
                        "DeviceArray, a PyTorch or CuPy array) or a host buffer")
    if isinstance(obj, bool):
        raise TypeError("a bool is not a buffer")
    if isinstance(obj, int):
        raise TypeError(
            "a bare address has no size (an int gives no buffer length, and a size "
            "argument is the transfer's size, not the buffer's): wrap it as "
            "hipfile.Buffer(ptr, length) with the allocation's length")
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(obj, cai)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _from_dlpack(obj)
    if _has_buffer_protocol(obj):
        raise TypeError(f"{type(obj).__name__} is not a device buffer: it is host memory, "
                        f"and hipFile needs device memory ({HOST_BUFFERS_HINT})")
    raise TypeError(
        f"{type(obj).__name__} is not a device buffer: expected hipfile.Buffer, a HIP-Python "
        "DeviceArray, or an object with __cuda_array_interface__ or __dlpack__ "
        "(a bare pointer needs hipfile.Buffer(ptr, length))"
    )


def _has_buffer_protocol(obj):
    try:
        memoryview(obj).release()
    except TypeError:
        return False
    return True


def pointer_value(obj):
    """The integer address of a pointer-like object (int, HIP-Python
    ``Pointer``, ``ctypes.c_void_p``, or anything with ``__int__``).

    Raises
    ------
    TypeError
        Not a pointer (a bool, a float, ...).
    ValueError
        An address outside 0 .. 2**64 - 1.
    """
    import ctypes
    import numbers
    if isinstance(obj, bool) or (
        isinstance(obj, numbers.Number) and not isinstance(obj, numbers.Integral)
    ):
        raise TypeError(f"a {type(obj).__name__} is not a pointer")
    if isinstance(obj, int):
        value = obj
    elif isinstance(obj, ctypes.c_void_p):
        value = obj.value or 0
    elif hasattr(obj, "__int__"):
        value = int(obj)
    else:
        raise TypeError(f"{type(obj).__name__} is not a pointer")
    if value < 0 or value >= 1 << 64:
        raise ValueError(f"address {value:#x} out of range")
    return value


def check_stream_handle(handle):
    """Refuse an int that is not a stream HIP knows, where HIP can tell:
    ``hipStreamQuery`` answers ``hipSuccess`` or ``hipErrorNotReady`` for a
    live stream (ROCm looks handles up; so does the emulated platform).

    Raises
    ------
    ValueError
        HIP refused the handle as a stream.
    """
    if handle == 0:
        return  # the null stream
    err = stream_query(<uintptr_t>handle)
    if err != HIP_SUCCESS and err != HIP_ERROR_NOT_READY:
        raise ValueError(f"{handle:#x} is not a stream HIP knows (hipStreamQuery: "
                         f"{error_name(err)}); pass the stream object or its handle")


def stream_info(obj):
    """``(handle, owner)`` of a stream object other than the package's own.

    Accepts ``None``/0 (the null stream), ints, HIP-Python ``hipStream_t``,
    objects with ``__cuda_stream__`` (version 0), PyTorch streams
    (``cuda_stream``) and CuPy streams (``ptr``).

    Raises
    ------
    TypeError
        Unsupported object.
    ValueError
        An unsupported ``__cuda_stream__`` version or an out-of-range handle.
    """
    if obj is None:
        return 0, None
    if isinstance(obj, bool):
        raise TypeError("a bool is not a stream")
    if isinstance(obj, int):
        check_handle_range(obj)
        return obj, None
    proto = getattr(obj, "__cuda_stream__", None)
    if proto is not None:
        value = proto() if callable(proto) else proto
        if not isinstance(value, tuple) or len(value) != 2:
            raise TypeError("__cuda_stream__ must return (version, handle)")
        version, handle = value
        if version != 0:
            raise ValueError(f"unsupported __cuda_stream__ version {version} (expected 0)")
        handle = int(handle)
        check_handle_range(handle)
        return handle, obj
    for attr in ("cuda_stream", "hip_stream"):
        handle = getattr(obj, attr, None)
        if isinstance(handle, int) and not isinstance(handle, bool):
            check_handle_range(handle)
            return handle, obj
    ptr = getattr(obj, "ptr", None)
    if isinstance(ptr, int) and not isinstance(ptr, bool) and type(obj).__module__.startswith(
        "cupy"
    ):
        check_handle_range(ptr)
        return ptr, obj
    _hip_types_if_loaded()
    if _hip_types_loaded and isinstance(obj, hipapi().Pointer):
        handle = pointer_value(obj)
        return handle, obj
    raise TypeError(
        f"{type(obj).__name__} is not a stream: expected hipfile.Stream, a HIP-Python "
        "hipStream_t, an int, or an object with __cuda_stream__, .cuda_stream or (CuPy) .ptr"
    )
