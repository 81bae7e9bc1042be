"""Saving tensors to a ``.safetensors`` file."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from typing import Any

from hipfile.buffer import Buffer
from hipfile.driver import Driver
from hipfile.file import FileHandle
from hipfile.safetensors._header import (
    _FROM_TYPESTR,
    DTYPES,
    Dtype,
    SafetensorsError,
)
from hipfile.safetensors._read import (
    DeviceTensor,
    _task_size,
)

# --------------------------------------------------------------------------
# Saving
# --------------------------------------------------------------------------


def _describe(name: str, obj: Any) -> tuple[Dtype, tuple[int, ...], Any]:
    """``(dtype, shape, memory)`` of a tensor to save."""
    if isinstance(obj, DeviceTensor):
        return obj.dtype, obj.shape, obj
    mod = type(obj).__module__
    if mod.startswith("torch"):
        tname = str(obj.dtype).removeprefix("torch.")
        for d in DTYPES.values():
            if d.torch == tname:
                if not obj.is_contiguous():
                    raise SafetensorsError(f"tensor {name!r} is not contiguous")
                if not obj.is_cuda:
                    raise SafetensorsError(f"tensor {name!r} is in host memory")
                shape = tuple(int(n) for n in obj.shape)
                if d.name == "F4" and shape:
                    shape = (*shape[:-1], shape[-1] * 2)
                # by address: torch's array interface has no code for bf16/fp8
                nbytes = int(obj.numel()) * int(obj.element_size())
                mem = Buffer(int(obj.data_ptr()), nbytes) if nbytes else None
                return d, shape, (mem, obj)
        raise SafetensorsError(f"tensor {name!r}: torch dtype {tname} has no safetensors dtype")
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None:
        raise SafetensorsError(f"tensor {name!r}: {type(obj).__name__} is not device memory "
                               "with a dtype (pass a DeviceTensor or a torch/CuPy array)")
    code = str(cai.get("typestr", "")).lstrip("<|=")
    if str(cai.get("typestr", "")).startswith(">"):
        raise SafetensorsError(f"tensor {name!r}: big-endian data")
    dtype = _FROM_TYPESTR.get(code)
    if dtype is None:
        raise SafetensorsError(f"tensor {name!r}: typestr {cai.get('typestr')!r} names no "
                               "single dtype (wrap it with DeviceTensor.wrap(mem, dtype, "
                               "shape))")
    return dtype, tuple(int(n) for n in cai.get("shape", ())), obj


def save_file(tensors: Mapping[str, Any], path: str | os.PathLike[str],
              metadata: Mapping[str, str] | None = None, *,
              task_size: int | None = None) -> None:
    """Write device tensors to a safetensors file with hipFile.

    Tensors are laid out by element size (largest first) and name, so every
    tensor is aligned to its element size; the header is padded with spaces
    to a multiple of 8 bytes. The file is written under a temporary name and
    renamed into place, so a failure leaves no partial file at ``path``.

    Parameters
    ----------
    tensors
        Name to :class:`DeviceTensor`, ``torch.Tensor`` (on the GPU), or any
        device array with an unambiguous ``__cuda_array_interface__`` typestr.
    path
        The file to write.
    metadata
        ``__metadata__``: strings to strings.
    task_size
        Bytes per parallel write task.

    Raises
    ------
    SafetensorsError
        A tensor whose dtype or shape cannot be told, a bad name or metadata.
    TypeError, ValueError
        Host memory or other non-device objects.
    OSError, HipFileException
        The file cannot be written.

    See Also
    --------
    hipFileWrite
    """
    if metadata is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise SafetensorsError("metadata must map strings to strings")
    items = []
    for name, obj in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise SafetensorsError(f"bad tensor name {name!r}")
        dtype, shape, mem = _describe(name, obj)
        items.append((name, dtype, shape, dtype.nbytes(shape), mem))
    items.sort(key=lambda it: (-max(1, it[1].bits // 8), it[0]))
    header: dict[str, Any] = {}
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, dtype, shape, nbytes, _ in items:
        header[name] = {"dtype": dtype.name, "shape": list(shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    data_offset = 8 + len(raw)
    task = _task_size(task_size)
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    try:
        with Driver(), FileHandle(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC) as fh:
            assert fh.fd is not None
            head = struct.pack("<Q", len(raw)) + raw
            if os.pwrite(fh.fd, head, 0) != len(head):
                raise OSError("short write of the header")
            futures = []
            pos = data_offset
            for _name, _dtype, _shape, nbytes, mem in items:
                if nbytes:
                    target = mem[0] if isinstance(mem, tuple) else Buffer(mem)
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
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
