"""Saving tensors to a ``.safetensors`` file, byte for byte as safetensors does."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from hipfile._interop import as_int, pointer_view
from hipfile.buffer import Buffer
from hipfile.driver import process_driver
from hipfile.file import FileHandle
from hipfile.safetensors._header import (
    _FROM_TYPESTR,
    DTYPES,
    Dtype,
    SafetensorsError,
    build_header,
)
from hipfile.safetensors._read import (
    DeviceTensor,
    _task_size,
)

# --------------------------------------------------------------------------
# What a tensor is
# --------------------------------------------------------------------------

_BY_FRAMEWORK_NAME = {d.torch: d for d in DTYPES.values() if d.torch is not None}


def _count(what: str, value: Any, bits: int = 63) -> int:
    n = as_int(value, what)
    if n < 0:
        raise ValueError(f"{what} must be >= 0, got {n}")
    if n >> bits:
        raise ValueError(f"{what} {n} is out of range (below 2**{bits})")
    return n


class TensorSpec:
    """A tensor given by the address of its bytes, for :func:`serialize`
    and :func:`serialize_file` (safetensors' ``TensorSpec``; keyword
    arguments only, as there).

    Parameters
    ----------
    dtype
        The dtype as frameworks name it (``"float32"``, ``"bfloat16"``,
        ``"float8_e4m3fn"``, ``"float4_e2m1fn_x2"``, ...); :attr:`dtype`
        gives the file's name (``"F32"``).
    shape
        Elements along each axis. For ``"float4_e2m1fn_x2"`` (two values per
        byte) the storage shape a framework reports is taken and the last
        axis doubled, as safetensors does.
    data_ptr
        Address of the bytes: host memory, or device memory (the HIP
        runtime's pointer attributes tell them apart; device bytes are
        written with hipFile, where safetensors would read the address on
        the host). They are read when the spec is serialized, so they must
        stay alive until then.
    data_len
        Bytes at ``data_ptr``; serializing checks it against dtype and shape.

    Attributes
    ----------
    dtype : str
        The dtype's name in the file (``"F32"``).
    data_ptr, data_len : int
        As given.

    Raises
    ------
    SafetensorsError
        An unknown dtype name.
    TypeError
        A dtype that is not a string, or a count that is not an int.
    ValueError
        A negative count, an address of 2**64 or more, or a size of 2**63
        or more.
    """

    __slots__ = ("_dtype", "_shape", "data_len", "data_ptr", "dtype")

    dtype: str
    data_ptr: int
    data_len: int
    _dtype: Dtype
    _shape: tuple[int, ...]

    def __init__(self, *, dtype: str, shape: Iterable[int], data_ptr: int,
                 data_len: int) -> None:
        if not isinstance(dtype, str):
            raise TypeError(f"dtype must be a str, got {type(dtype).__name__}")
        found = _BY_FRAMEWORK_NAME.get(dtype)
        if found is None:
            raise SafetensorsError(f"Unknown dtype {dtype!r}. Supported dtypes: "
                                   f"{', '.join(_BY_FRAMEWORK_NAME)}")
        dims = [_count("shape", n) for n in shape]
        if found.name == "F4" and dims:
            dims[-1] *= 2
        for name, value in (("_dtype", found), ("_shape", tuple(dims)), ("dtype", found.name),
                            ("data_ptr", _count("data_ptr", data_ptr, 64)),
                            ("data_len", _count("data_len", data_len))):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"TensorSpec is immutable (cannot set {name!r})")

    @property
    def shape(self) -> list[int]:
        """Elements along each axis, as the header records them (a new list)."""
        return list(self._shape)

    def __repr__(self) -> str:
        return (f"TensorSpec(dtype={self.dtype!r}, shape={self.shape}, "
                f"data_ptr={self.data_ptr}, data_len={self.data_len})")


def _device_memory(ptr: int) -> bool:
    """Whether the HIP runtime knows ``ptr`` as device memory (which the host
    cannot read); False when there is no runtime to ask.

    See Also
    --------
    hipPointerGetAttributes
    """
    try:
        from hipfile._lib import _hip

        hip: Any = _hip.hip
        err, attrs = hip.hipPointerGetAttributes(ptr)
        return bool(err == hip.hipError_t.hipSuccess
                    and int(attrs.type) == int(hip.hipMemoryType.hipMemoryTypeDevice))
    except Exception:  # no runtime, or one that cannot tell: host memory
        return False


def _torch_dtype(name: str, obj: Any) -> Dtype:
    tname = str(obj.dtype).removeprefix("torch.")
    for d in DTYPES.values():
        if d.torch == tname:
            return d
    raise SafetensorsError(f"tensor {name!r}: torch dtype {tname} has no safetensors dtype")


def _numpy_dtype(name: str, arr: Any) -> Dtype:
    dt = arr.dtype
    found = _FROM_TYPESTR.get(dt.str[1:]) if dt.kind in "biufc" else None
    if found is not None:
        return found
    tname = getattr(dt, "name", str(dt))      # ml_dtypes: bfloat16, float8_*
    for d in DTYPES.values():
        if d.torch == tname and d.bits == 8 * dt.itemsize:
            return d
    raise SafetensorsError(f"tensor {name!r}: numpy dtype {dt} has no safetensors dtype")


def describe(name: str, obj: Any) -> tuple[Dtype, tuple[int, ...], int, Any, Any]:
    """``(dtype, shape, nbytes, device source, host bytes)`` of a tensor to
    save: one of the last two is None.

    Raises
    ------
    SafetensorsError
        A dtype that cannot be told, a non-contiguous torch tensor.
    TypeError
        A dict (safetensors before 0.8 took one; now a :class:`TensorSpec`).
    ValueError
        A :class:`TensorSpec` with a null address and bytes to read.
    """
    if isinstance(obj, DeviceTensor):
        return obj.dtype, obj.shape, obj.nbytes, obj, None
    if isinstance(obj, TensorSpec):
        n = obj.data_len
        if n and not obj.data_ptr:
            raise ValueError(f"tensor {name!r}: data_ptr is null with {n} bytes to read")
        if n and _device_memory(obj.data_ptr):
            return obj._dtype, obj._shape, n, (Buffer(obj.data_ptr, n), obj), None
        return obj._dtype, obj._shape, n, None, pointer_view(obj.data_ptr, n) if n else b""
    if isinstance(obj, Mapping):
        raise TypeError(f"tensor {name!r}: a dict is not a tensor; describe raw bytes with "
                        "TensorSpec(dtype=..., shape=..., data_ptr=..., data_len=...)")
    mod = type(obj).__module__
    if mod.startswith("torch"):
        d = _torch_dtype(name, obj)
        if not obj.is_contiguous():
            raise SafetensorsError(f"tensor {name!r} is not contiguous")
        shape = tuple(int(n) for n in obj.shape)
        if d.name == "F4" and shape:
            shape = (*shape[:-1], shape[-1] * 2)
        nbytes = int(obj.numel()) * int(obj.element_size())
        if obj.device.type == "cpu":
            import torch

            flat = obj.reshape(-1).view(torch.uint8) if nbytes else None
            return d, shape, nbytes, None, (flat.numpy() if flat is not None else b"")
        # by address: torch's array interface has no code for bf16/fp8
        mem = Buffer(int(obj.data_ptr()), nbytes) if nbytes else None
        return d, shape, nbytes, (mem, obj), None
    if mod == "numpy" or (hasattr(obj, "__array_interface__")
                          and not hasattr(obj, "__cuda_array_interface__")):
        import numpy as np

        arr = np.asarray(obj)
        if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and not np.little_endian):
            arr = arr.astype(arr.dtype.newbyteorder("<"))   # safetensors is little-endian
        d = _numpy_dtype(name, arr)
        if not arr.flags.c_contiguous:   # (ascontiguousarray would make a 0-d array 1-d)
            arr = arr.copy(order="C")
        shape = tuple(int(n) for n in arr.shape)
        return d, shape, int(arr.nbytes), None, arr.reshape(-1).view(np.uint8)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None:
        raise SafetensorsError(f"tensor {name!r}: {type(obj).__name__} is not a tensor "
                               "(pass a DeviceTensor, a torch or numpy array, or a device "
                               "array with __cuda_array_interface__)")
    code = str(cai.get("typestr", "")).lstrip("<|=")
    if str(cai.get("typestr", "")).startswith(">"):
        raise SafetensorsError(f"tensor {name!r}: big-endian data")
    dtype = _FROM_TYPESTR.get(code)
    if dtype is None:
        raise SafetensorsError(f"tensor {name!r}: typestr {cai.get('typestr')!r} names no "
                               "single dtype (wrap it with DeviceTensor.wrap(mem, dtype, "
                               "shape))")
    shape = tuple(int(n) for n in cai.get("shape", ()))
    return dtype, shape, dtype.nbytes(shape), obj, None


def _prepare(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None
             ) -> tuple[bytes, list[tuple[int, Any, Any]]]:
    if metadata is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise SafetensorsError("metadata must map strings to strings")
    entries = []
    sources = []
    for name, obj in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise SafetensorsError(f"bad tensor name {name!r}")
        dtype, shape, nbytes, dev, host = describe(name, obj)
        if dtype.nbytes(shape) != nbytes:
            raise SafetensorsError(f"tensor {name!r}: {nbytes} bytes for shape {list(shape)} "
                                   f"of {dtype.name}")
        entries.append((name, dtype, shape, nbytes))
        sources.append((nbytes, dev, host))
    head, order = build_header(entries, metadata)
    return head, [sources[i] for i in order]


# --------------------------------------------------------------------------
# Saving
# --------------------------------------------------------------------------


def serialize(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> bytes:
    """The bytes of a safetensors file holding ``tensors`` (device tensors are
    copied to the host first), as safetensors' ``serialize`` gives them.

    Raises
    ------
    SafetensorsError, TypeError, ValueError
        As :func:`save_file`.
    """
    head, sources = _prepare(tensors, metadata)
    parts = [head]
    for nbytes, dev, host in sources:
        if not nbytes:
            continue
        if host is not None:
            parts.append(bytes(memoryview(host)))
        else:
            parts.append(_device_bytes(dev, nbytes))
    return b"".join(parts)


def _device_bytes(dev: Any, nbytes: int) -> bytes:
    import numpy as np

    from hipfile._lib import _hip

    src = dev[0] if isinstance(dev, tuple) else Buffer(dev)
    out = np.empty(nbytes, np.uint8)
    hip: Any = _hip.hip
    _hip.check(hip.hipMemcpy(int(out.ctypes.data), int(src.ptr), nbytes,
                             hip.hipMemcpyKind.hipMemcpyDeviceToHost), "hipMemcpy")
    return out.tobytes()


def _for_path(error: OSError, path: str | os.PathLike[str]) -> OSError:
    """``error`` (of the temporary file) as the same error of ``path``: same
    class and errno; a missing folder is named."""
    text = error.strerror or str(error)
    folder = os.path.dirname(os.path.abspath(path))
    if error.errno == errno.ENOENT and not os.path.isdir(folder):
        text = f"{text} (the folder {folder} does not exist)"
    return type(error)(error.errno, text, os.fspath(path))


def save_file(tensors: Mapping[str, Any], path: str | os.PathLike[str],
              metadata: Mapping[str, str] | None = None, *,
              task_size: int | None = None) -> None:
    """Write tensors to a safetensors file, byte for byte as safetensors'
    serializer writes them (see :func:`build_header` for the layout).

    Device memory is written with hipFile (parallel ``pwrite`` tasks), host
    memory with ``pwrite``. The file is written under a temporary name and
    renamed into place, so a failure leaves no partial file at ``path``.

    Parameters
    ----------
    tensors
        Name to :class:`DeviceTensor`, ``torch.Tensor`` (GPU or CPU),
        ``numpy.ndarray``, :class:`TensorSpec` (bytes by address), or
        any device array with an unambiguous ``__cuda_array_interface__``
        typestr.
    path
        The file to write.
    metadata
        ``__metadata__``: strings to strings.
    task_size
        Bytes per parallel write task.

    Raises
    ------
    SafetensorsError
        A tensor whose dtype or shape cannot be told, a size that does not
        match its dtype and shape, a bad name or metadata.
    TypeError
        A value that is a dict (see :class:`TensorSpec`).
    ValueError
        A :class:`TensorSpec` with a null address and bytes to read.
    OSError, HipFileException
        The file cannot be written.

    See Also
    --------
    hipFileWrite
    """
    head, sources = _prepare(tensors, metadata)
    task = _task_size(task_size)
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}.{threading.get_ident()}"
    on_device = any(dev is not None and nbytes for nbytes, dev, _ in sources)
    try:
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as err:
            # the temporary name is ours: the error names the caller's path
            raise _for_path(err, path) from None
        try:
            _pwrite_all(fd, head, 0)
            pos = len(head)
            for nbytes, _dev, host in sources:
                if host is not None and nbytes:
                    _pwrite_all(fd, memoryview(host).cast("B"), pos)
                pos += nbytes
        finally:
            os.close(fd)
        if on_device:
            process_driver()
            with FileHandle(tmp, os.O_RDWR) as fh:
                futures = []
                pos = len(head)
                for nbytes, dev, _host in sources:
                    if dev is not None and nbytes:
                        target = dev[0] if isinstance(dev, tuple) else Buffer(dev)
                        futures.append((nbytes, fh.pwrite(target, nbytes, pos,
                                                          task_size=task)))
                    pos += nbytes
                errors = [f.exception() for _, f in futures]
                for e in errors:
                    if e is not None:
                        raise e
                for nbytes, f in futures:
                    if f.result() != nbytes:
                        raise OSError(f"short write: {f.result()} of {nbytes} bytes")
        try:
            os.replace(tmp, path)
        except OSError as err:
            raise _for_path(err, path) from None
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def serialize_file(tensor_dict: Mapping[str, Any], filename: str | os.PathLike[str],
                   metadata: Mapping[str, str] | None = None) -> None:
    """safetensors' ``serialize_file``: :func:`save_file` under its name
    and argument names (values are usually :class:`TensorSpec`; tensors are
    taken too). The writes release the GIL, so threads save at once.

    Raises
    ------
    SafetensorsError, TypeError, ValueError, OSError, HipFileException
        As :func:`save_file`.
    """
    save_file(tensor_dict, filename, metadata)


def _pwrite_all(fd: int, data: Any, pos: int) -> None:
    view = memoryview(data)
    while len(view):
        n = os.pwrite(fd, view, pos)
        if n <= 0:
            raise OSError("short write")
        view, pos = view[n:], pos + n
