"""Load ``.safetensors`` files with hipFile, and save them: a drop-in for safetensors.

Switching from safetensors is one line::

    from hipfile.safetensors.torch import load_file   # was: from safetensors.torch import ...
    tensors = load_file("model.safetensors", device="cuda:0")

:mod:`hipfile.safetensors.torch` and :mod:`hipfile.safetensors.numpy` mirror
``safetensors.torch`` and ``safetensors.numpy`` function by function;
:func:`safe_open` is ``safetensors.safe_open``. The rest of this module is
the loader underneath, which also takes a sharded checkpoint
(``model.safetensors.index.json`` or a list of files) in one call.

A safetensors file is an 8-byte little-endian header length ``N``, ``N``
bytes of JSON (``{"name": {"dtype": "F16", "shape": [..], "data_offsets":
[begin, end]}, ..., "__metadata__": {str: str}}``) and the tensors' bytes,
offsets counted from the end of the header. This module reads the header
strictly, plans the reads, and moves the bytes file → device with hipFile::

    from hipfile import safetensors as hst

    tensors = hst.load_file("model.safetensors", device=0)            # DeviceTensor
    tensors = hst.load_file("model.safetensors.index.json", framework="pt", device="cuda")
    tensors = hst.load_file("model.safetensors", framework="torch")   # torch.Tensor
    hst.save_file(tensors, "copy.safetensors", metadata={"format": "pt"})

How a file is loaded:

1. :func:`read_header` parses and validates the header with safetensors'
   verdicts (:class:`SafetensorsError` for anything malformed: bad lengths,
   invalid JSON, unknown dtypes, sizes that do not match shapes,
   overlapping, non-contiguous or out-of-range offsets; ``strict=True``
   also refuses duplicate names, unknown fields and leading whitespace).
2. :func:`plan_reads` coalesces the tensors' byte ranges into few large
   ranges aligned to 4 KiB. A whole file is one range.
3. One device allocation holds the whole (aligned) range; its base is placed
   so that device addresses and file offsets agree modulo 4 KiB. The file is
   opened with ``O_DIRECT`` when the file is mostly not in the page cache
   (:func:`cached_fraction`, ``mincore``) and its file system is local and
   accepts it (``direct=None``), so every read is aligned; otherwise
   buffered. ``device="cpu"`` allocates host memory instead, and opens the
   file with a plain descriptor: host loads never load libhipfile or a HIP
   runtime, and read through the page cache.
4. The reads of every file are submitted before the first is waited for
   (file *k+1* is read while file *k* completes): into device memory with
   the stream-ordered engine (:meth:`hipfile.FileHandle.pread_async_ranges`,
   ``reader="stream"``), into host memory with POSIX ``preadv`` on the
   package's thread pool (``reader="parallel"``).
5. Every tensor is a view into the one allocation (fewer, larger
   allocations are faster to make and to fill); the allocation is freed when
   the last view is gone.

Loads never open the hipFile driver (unless ``reader="parallel"`` or the
``engine_data_path`` setting asks for hipFile's reads): the engine reads the
file through its own descriptor. Saves from device memory write with hipFile; the first
opens the driver and keeps it until exit (:func:`hipfile.process_driver`),
so a later bare save pays no driver open.

Tensors are returned as :class:`DeviceTensor` (``__cuda_array_interface__``,
``shape``, ``dtype``; usable by CuPy, Numba, PyTorch and
:class:`hipfile.Buffer`) or, with ``framework="torch"``, as ``torch.Tensor``
views of one ``torch.uint8`` allocation, or with ``framework="numpy"`` as
``numpy.ndarray`` views of one host array. bf16 and fp8 tensors are raw bytes to
the array interface (typestr ``|V2``/``|V1``); torch gets its own dtypes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hipfile.file._residency import cached_fraction
from hipfile.safetensors._device import (
    FRAMEWORKS,
    Device,
    check_framework,
    make_view,
    parse_device,
)
from hipfile.safetensors._header import (
    ALIGNMENT,
    DTYPE_ORDER,
    DTYPES,
    MAX_HEADER_SIZE,
    Dtype,
    Header,
    SafetensorError,
    SafetensorsError,
    TensorInfo,
    TensorNotFoundError,
    build_header,
    parse_header,
    read_header,
)
from hipfile.safetensors._header import DEFAULT_MAX_GAP as DEFAULT_MAX_GAP
from hipfile.safetensors._index import (
    checkpoint_files,
    plan_checkpoint,
    read_index,
)
from hipfile.safetensors._load import load_many
from hipfile.safetensors._open import SafeOpen, safe_open
from hipfile.safetensors._read import (
    READERS,
    DeviceAllocation,
    DeviceTensor,
    ReadRange,
    plan_reads,
    read_ranges,
    read_ranges_stream,
)
from hipfile.safetensors._save import TensorSpec, save_file, serialize, serialize_file
from hipfile.safetensors._slice import SafeSlice

__all__ = [
    "ALIGNMENT",
    "DTYPES",
    "DTYPE_ORDER",
    "FRAMEWORKS",
    "MAX_HEADER_SIZE",
    "READERS",
    "Device",
    "DeviceAllocation",
    "DeviceTensor",
    "Dtype",
    "Header",
    "ReadRange",
    "SafeOpen",
    "SafeSlice",
    "SafetensorError",
    "SafetensorsError",
    "TensorInfo",
    "TensorNotFoundError",
    "TensorSpec",
    "build_header",
    "cached_fraction",
    "deserialize",
    "load",
    "load_file",
    "parse_device",
    "parse_header",
    "plan_reads",
    "read_header",
    "read_index",
    "read_ranges",
    "read_ranges_stream",
    "safe_open",
    "save",
    "save_file",
    "serialize",
    "serialize_file",
]


def load_file(path: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
              device: Any = None, framework: str = "hip", *,
              names: Sequence[str] | None = None, direct: bool | None = None,
              task_size: int | None = None, reader: str = "auto",
              progress: bool | None = None, strict: bool = False,
              info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Load a safetensors file, or a sharded checkpoint, in one call.

    Parameters
    ----------
    path
        A ``.safetensors`` file, a ``model.safetensors.index.json`` (its
        ``weight_map`` names the shards, relative to its folder), or a list
        of files. Every file's reads are submitted before the first is
        waited for, so file *k+1* is read while file *k* completes.
    device
        As safetensors takes it: ``"cpu"`` (host memory), ``"cuda"``,
        ``"cuda:N"``, an int, a ``torch.device``. Default: GPU 0 for
        ``"hip"``, ``"cpu"`` for ``"pt"`` and ``"np"``.
    framework
        ``"hip"`` for :class:`DeviceTensor` objects, ``"pt"``/``"torch"``
        for ``torch.Tensor`` views of one ``torch.uint8`` allocation per
        file, ``"np"``/``"numpy"`` for ``numpy.ndarray`` (host memory).
    names
        Load only these tensors, from whichever files hold them (their
        ranges are coalesced); default all.
    direct
        ``None``: ``O_DIRECT`` when the file is mostly not in the page cache
        (:func:`cached_fraction` of 1024 sampled pages below 0.5) and its
        file system is local (not NFS, Lustre, tmpfs, ...); ``True``:
        require it; ``False``: buffered. Host-memory loads always read
        buffered.
    task_size
        Bytes per parallel task (default ``hipfile.defaults.engine_task_size()``
        for the engine, :func:`hipfile.parallel.default_task_size` for host
        reads; rounded up to 4 KiB).
    reader
        ``"auto"``: the stream-ordered engine (``"stream"``) for device
        memory, the thread pool (``"parallel"``) for host memory.
        ``"staged"`` is accepted for compatibility and is the engine too
        (its staging ring); ``info`` reports ``"stream"``.
    progress
        One progress bar over the whole load (tqdm, when installed);
        ``None``: for several files or 4 GiB and more on a terminal.
    strict
        Also refuse headers safetensors accepts (see :func:`parse_header`).
    info
        A dict to fill with what was done: ``direct`` (O_DIRECT used for the
        first file), ``reads`` (ranges), ``bytes_read``, ``allocation``,
        ``task_size``, ``reader``, ``files``.

    Returns
    -------
    dict
        Name to tensor, in file order (or the order of ``names``).

    Raises
    ------
    SafetensorsError
        A malformed header or index, a file shorter than its header says, a
        name in two shards.
    TensorNotFoundError
        A name in ``names`` is in no file (also a :class:`KeyError`).
    ValueError, TypeError
        Unknown ``framework``, ``reader`` or ``device``; non-positive
        ``task_size``.
    OSError, HipFileException
        A file cannot be opened or read.
    ImportError
        ``framework="torch"`` without torch installed.

    See Also
    --------
    hipFileHandleRegister, hipFileRead
    """
    fw = check_framework(framework)
    dev = parse_device(device, fw)
    files, weight_map = checkpoint_files(path)
    # buffered header reads: an O_DIRECT descriptor takes aligned reads only
    plan = plan_checkpoint(files, weight_map, names, strict=strict)
    out = load_many(plan, fw, dev, direct=direct, task_size=task_size, reader=reader,
                    progress=progress, info=info)
    return out if names is None else {n: out[n] for n in names}


def load(data: bytes | bytearray | memoryview, framework: str = "numpy",
         device: Any = "cpu", *, strict: bool = False) -> dict[str, Any]:
    """Tensors from the bytes of a safetensors file (``safetensors.*.load``).

    Host frameworks get copies of the bytes; a GPU ``device`` (torch) gets
    them copied there.

    Raises
    ------
    SafetensorsError
        Malformed bytes.
    ValueError
        ``framework="hip"``: use :func:`load_file`.
    """
    import numpy as np

    fw = check_framework(framework)
    if fw == "hip":
        raise ValueError("load(bytes) returns host tensors: framework must be 'pt' or 'np'")
    dev = parse_device(device, fw)
    view = memoryview(data).cast("B")
    header = _header_of_bytes(view, strict)
    flat = np.frombuffer(view, np.uint8)[header.data_offset:].copy()
    out: dict[str, Any] = {}
    owner: Any = flat
    if fw == "torch":
        import torch

        owner = torch.from_numpy(flat)
    for t in header.tensors.values():
        out[t.name] = make_view(fw, Device("cpu"), owner, int(flat.ctypes.data), t.begin, t)
    if fw == "torch" and not dev.is_cpu:
        out = {k: v.to(dev.torch()) for k, v in out.items()}
    return out


def _header_of_bytes(view: memoryview, strict: bool) -> Header:
    import struct

    if len(view) < 8:
        raise SafetensorsError(f"{len(view)} bytes are too short for a header")
    (n,) = struct.unpack("<Q", view[:8])
    if n > MAX_HEADER_SIZE:
        raise SafetensorsError(f"header length {n} exceeds the {MAX_HEADER_SIZE}-byte limit")
    if 8 + n > len(view):
        raise SafetensorsError(f"header length {n} does not fit in {len(view)} bytes")
    return parse_header(bytes(view[8:8 + n]), len(view), strict=strict)


def deserialize(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The tensors of a file's bytes, as safetensors' ``deserialize`` gives
    them: ``[(name, {"dtype": "F32", "shape": [2, 3], "data": bytearray}),
    ...]`` in file order, each ``data`` a copy.

    Raises
    ------
    TypeError
        ``data`` is not ``bytes`` (as safetensors).
    SafetensorsError
        Malformed bytes.
    """
    if not isinstance(data, bytes):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    view = memoryview(data)
    header = _header_of_bytes(view, False)
    base = header.data_offset
    return [(t.name, {"dtype": t.dtype.name, "shape": list(t.shape),
                      "data": bytearray(view[base + t.begin:base + t.end])})
            for t in header.tensors.values()]


def save(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> bytes:
    """The bytes of a safetensors file holding ``tensors``, as safetensors'
    ``save`` gives them; see :func:`serialize`."""
    return serialize(tensors, metadata)
