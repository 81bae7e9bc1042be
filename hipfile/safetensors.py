"""Load ``.safetensors`` files into device memory with hipFile, and save them.

A safetensors file is an 8-byte little-endian header length ``N``, ``N``
bytes of JSON (``{"name": {"dtype": "F16", "shape": [..], "data_offsets":
[begin, end]}, ..., "__metadata__": {str: str}}``) and the tensors' bytes,
offsets counted from the end of the header. This module reads the header
strictly, plans the reads, and moves the bytes file → device with hipFile::

    from hipfile import safetensors as hst

    tensors = hst.load_file("model.safetensors", device=0)            # DeviceTensor
    tensors = hst.load_file("model.safetensors", framework="torch")   # torch.Tensor
    hst.save_file(tensors, "copy.safetensors", metadata={"format": "pt"})

How a file is loaded:

1. :func:`read_header` parses and validates the header (:class:`SafetensorsError`
   for anything malformed: bad lengths, invalid JSON, duplicate names,
   unknown dtypes, sizes that do not match shapes, overlapping,
   non-contiguous or out-of-range offsets).
2. :func:`plan_reads` coalesces the tensors' byte ranges into few large
   ranges aligned to 4 KiB. A whole file is one range.
3. One device allocation holds the whole (aligned) range; its base is placed
   so that device addresses and file offsets agree modulo 4 KiB. The file is
   opened with ``O_DIRECT`` when the file system accepts it (``direct=None``),
   so every read is aligned; otherwise buffered.
4. The read step, :func:`read_ranges`, runs :meth:`hipfile.FileHandle.pread`
   (parallel tasks on the package's thread pool) for every range. It is the
   only function that moves bytes, selected by name through :data:`READERS`
   (``reader="stream"``: :func:`read_ranges_stream`, the stream-ordered
   engine), so another engine can be added without touching the rest.
5. Every tensor is a view into the one allocation (fewer, larger
   allocations are faster to make and to fill); the allocation is freed when
   the last view is gone.

Tensors are returned as :class:`DeviceTensor` (``__cuda_array_interface__``,
``shape``, ``dtype``; usable by CuPy, Numba, PyTorch and
:class:`hipfile.Buffer`) or, with ``framework="torch"``, as ``torch.Tensor``
views of one ``torch.uint8`` allocation. bf16 and fp8 tensors are raw bytes to
the array interface (typestr ``|V2``/``|V1``); torch gets its own dtypes.
"""

from __future__ import annotations

import json
import math
import os
import struct
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from hipfile.buffer import Buffer
from hipfile.driver import Driver
from hipfile.file import FileHandle

__all__ = [
    "ALIGNMENT",
    "DTYPES",
    "MAX_HEADER_SIZE",
    "READERS",
    "DeviceAllocation",
    "DeviceTensor",
    "Dtype",
    "Header",
    "ReadRange",
    "SafeOpen",
    "SafetensorsError",
    "TensorInfo",
    "load_file",
    "parse_header",
    "plan_reads",
    "read_header",
    "read_ranges",
    "read_ranges_stream",
    "safe_open",
    "save_file",
]

#: File offsets, sizes and device addresses of O_DIRECT reads are multiples of this.
ALIGNMENT = 4096
#: Largest header accepted (the reference implementation's limit).
MAX_HEADER_SIZE = 100_000_000
#: Ranges closer than this are read as one (the gap is read and ignored).
DEFAULT_MAX_GAP = 1 << 20


class SafetensorsError(ValueError):
    """A malformed or unsupported safetensors file, or tensors that cannot be saved."""


@dataclass(frozen=True)
class Dtype:
    """One safetensors dtype.

    Attributes
    ----------
    name
        The header's name (``"F16"``, ``"BF16"``, ...).
    bits
        Bits per element (4 and 6 for the packed ``F4``/``F6_*`` dtypes).
    typestr
        ``__cuda_array_interface__`` typestr; ``|V<n>`` (raw bytes) for the
        dtypes the array interface has no code for.
    torch
        Name of the ``torch`` dtype, or ``None``.
    """

    name: str
    bits: int
    typestr: str
    torch: str | None

    def nbytes(self, shape: Sequence[int]) -> int:
        """Bytes of a tensor of ``shape``.

        Raises
        ------
        SafetensorsError
            A packed dtype whose element count does not fill whole bytes.
        """
        bits = math.prod(shape) * self.bits
        if bits % 8:
            raise SafetensorsError(f"{math.prod(shape)} elements of {self.name} do not fill "
                                   "whole bytes")
        return bits // 8


def _dt(name: str, bits: int, typestr: str, torch: str | None) -> tuple[str, Dtype]:
    return name, Dtype(name, bits, typestr, torch)


#: Every dtype of the format, by header name.
DTYPES: dict[str, Dtype] = dict([
    _dt("BOOL", 8, "|b1", "bool"),
    _dt("U8", 8, "|u1", "uint8"),
    _dt("I8", 8, "|i1", "int8"),
    _dt("F8_E5M2", 8, "|V1", "float8_e5m2"),
    _dt("F8_E4M3", 8, "|V1", "float8_e4m3fn"),
    _dt("F8_E5M2FNUZ", 8, "|V1", "float8_e5m2fnuz"),
    _dt("F8_E4M3FNUZ", 8, "|V1", "float8_e4m3fnuz"),
    _dt("F8_E8M0", 8, "|V1", "float8_e8m0fnu"),
    _dt("I16", 16, "<i2", "int16"),
    _dt("U16", 16, "<u2", "uint16"),
    _dt("F16", 16, "<f2", "float16"),
    _dt("BF16", 16, "|V2", "bfloat16"),
    _dt("I32", 32, "<i4", "int32"),
    _dt("U32", 32, "<u4", "uint32"),
    _dt("F32", 32, "<f4", "float32"),
    _dt("C64", 64, "<c8", "complex64"),
    _dt("F64", 64, "<f8", "float64"),
    _dt("I64", 64, "<i8", "int64"),
    _dt("U64", 64, "<u8", "uint64"),
    _dt("F4", 4, "|u1", "float4_e2m1fn_x2"),
    _dt("F6_E2M3", 6, "|u1", None),
    _dt("F6_E3M2", 6, "|u1", None),
])

# array-interface typestrs that name one dtype unambiguously (for saving)
_FROM_TYPESTR = {
    d.typestr.lstrip("<|="): d for d in DTYPES.values()
    if not d.typestr.startswith("|V") and d.bits % 8 == 0 and d.name != "U8"
}
_FROM_TYPESTR.update({"u1": DTYPES["U8"], "B": DTYPES["U8"], "b": DTYPES["I8"],
                      "?": DTYPES["BOOL"], "e": DTYPES["F16"], "f": DTYPES["F32"],
                      "d": DTYPES["F64"]})


# --------------------------------------------------------------------------
# Header
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a file: ``begin``/``end`` count from the data section."""

    name: str
    dtype: Dtype
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor."""
        return self.end - self.begin


@dataclass(frozen=True)
class Header:
    """A parsed, validated header.

    Attributes
    ----------
    tensors
        The tensors, in file order.
    metadata
        ``__metadata__`` (``None`` when absent).
    data_offset
        File offset of the data section (``8 + N``).
    file_size
        Size of the file.
    """

    tensors: dict[str, TensorInfo]
    metadata: dict[str, str] | None
    data_offset: int
    file_size: int


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise SafetensorsError(f"header names {k!r} twice")
        out[k] = v
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_header(raw: bytes, file_size: int) -> Header:
    """Validate a header given its JSON bytes and the file's size.

    Raises
    ------
    SafetensorsError
        Anything malformed; the message names the problem.
    """
    data_offset = 8 + len(raw)
    data_size = file_size - data_offset
    if data_size < 0:
        raise SafetensorsError(f"header of {len(raw)} bytes does not fit in a "
                               f"{file_size}-byte file")
    if not raw.startswith(b"{"):
        raise SafetensorsError("header is not a JSON object")
    try:
        text = raw.decode("utf-8")
        obj = json.loads(text, object_pairs_hook=_reject_duplicates)
    except UnicodeDecodeError as e:
        raise SafetensorsError(f"header is not UTF-8: {e}") from None
    except json.JSONDecodeError as e:
        raise SafetensorsError(f"header is not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise SafetensorsError("header is not a JSON object")
    metadata = obj.pop("__metadata__", None)
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise SafetensorsError("__metadata__ must map strings to strings")
    infos: list[TensorInfo] = []
    for name, entry in obj.items():
        if not isinstance(entry, dict):
            raise SafetensorsError(f"tensor {name!r}: entry is not an object")
        extra = set(entry) - {"dtype", "shape", "data_offsets"}
        missing = {"dtype", "shape", "data_offsets"} - set(entry)
        if missing or extra:
            raise SafetensorsError(f"tensor {name!r}: missing {sorted(missing)}, "
                                   f"unknown {sorted(extra)} fields")
        dname, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if not isinstance(dname, str) or dname not in DTYPES:
            raise SafetensorsError(f"tensor {name!r}: unknown dtype {dname!r}")
        if not isinstance(shape, list) or not all(_is_int(n) and n >= 0 for n in shape):
            raise SafetensorsError(f"tensor {name!r}: shape must be a list of "
                                   f"non-negative ints, got {shape!r}")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(_is_int(n) for n in offsets)):
            raise SafetensorsError(f"tensor {name!r}: data_offsets must be [begin, end], "
                                   f"got {offsets!r}")
        begin, end = offsets
        if not 0 <= begin <= end:
            raise SafetensorsError(f"tensor {name!r}: bad data_offsets [{begin}, {end}]")
        if end > data_size:
            raise SafetensorsError(f"tensor {name!r}: data_offsets [{begin}, {end}] run past "
                                   f"the {data_size}-byte data section")
        dtype = DTYPES[dname]
        try:
            want = dtype.nbytes(shape)
        except SafetensorsError as e:
            raise SafetensorsError(f"tensor {name!r}: {e}") from None
        if end - begin != want:
            raise SafetensorsError(f"tensor {name!r}: {end - begin} bytes for shape {shape} "
                                   f"of {dname} ({want} bytes)")
        infos.append(TensorInfo(name, dtype, tuple(shape), begin, end))
    # the data section is covered exactly once, in order of offsets
    expect = 0
    for t in sorted(infos, key=lambda t: (t.begin, t.end)):
        if t.begin < expect:
            raise SafetensorsError(f"tensor {t.name!r}: data_offsets [{t.begin}, {t.end}] "
                                   "overlap another tensor")
        if t.begin > expect:
            raise SafetensorsError(f"tensor {t.name!r}: a gap of {t.begin - expect} bytes "
                                   "before it")
        expect = t.end
    if expect != data_size:
        raise SafetensorsError(f"the tensors cover {expect} bytes of a {data_size}-byte data "
                               "section")
    return Header({t.name: t for t in infos}, metadata, data_offset, file_size)


def _read_header_fd(fd: int) -> Header:
    file_size = os.fstat(fd).st_size
    head = os.pread(fd, 8, 0)
    if len(head) < 8:
        raise SafetensorsError(f"file of {file_size} bytes is too short for a header")
    (n,) = struct.unpack("<Q", head)
    if n > MAX_HEADER_SIZE:
        raise SafetensorsError(f"header length {n} exceeds the {MAX_HEADER_SIZE}-byte limit")
    if n < 2 or 8 + n > file_size:
        raise SafetensorsError(f"header length {n} does not fit in a {file_size}-byte file")
    raw = os.pread(fd, n, 8)
    if len(raw) != n:
        raise SafetensorsError("file shrank while its header was read")
    return parse_header(raw, file_size)


def read_header(path: str | os.PathLike[str]) -> Header:
    """Read and validate a file's header (no device work).

    Raises
    ------
    OSError
        The file cannot be read.
    SafetensorsError
        The header is malformed.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        return _read_header_fd(fd)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadRange:
    """One read: ``size`` bytes at ``file_offset`` to ``buffer_offset``."""

    file_offset: int
    size: int
    buffer_offset: int


def _down(n: int, a: int) -> int:
    return n - n % a


def _up(n: int, a: int) -> int:
    return -(-n // a) * a


def plan_reads(spans: Sequence[tuple[int, int]], *, alignment: int = ALIGNMENT,
               max_gap: int = DEFAULT_MAX_GAP) -> tuple[list[ReadRange], int, int]:
    """Coalesce absolute file ranges ``(begin, end)`` into aligned reads.

    Ranges are sorted, widened to ``alignment`` and merged when the gap
    between them is at most ``max_gap``. The reads land in one buffer laid
    out like the file from the first aligned offset: file offset ``x`` is
    at buffer offset ``x - origin``.

    Returns
    -------
    (reads, origin, span)
        The reads, the file offset of buffer offset 0, and the buffer bytes
        the reads need.

    Raises
    ------
    ValueError
        A negative or reversed range, or a non-positive ``alignment``.
    """
    if alignment <= 0:
        raise ValueError(f"alignment must be positive, got {alignment}")
    live = []
    for b, e in spans:
        if b < 0 or e < b:
            raise ValueError(f"bad range ({b}, {e})")
        if e > b:
            live.append((_down(b, alignment), _up(e, alignment)))
    if not live:
        return [], 0, 0
    live.sort()
    merged: list[list[int]] = [list(live[0])]
    for b, e in live[1:]:
        last = merged[-1]
        if b - last[1] <= max_gap:
            last[1] = max(last[1], e)
        else:
            merged.append([b, e])
    origin = merged[0][0]
    reads = [ReadRange(b, e - b, b - origin) for b, e in merged]
    return reads, origin, merged[-1][1] - origin


# --------------------------------------------------------------------------
# Device memory
# --------------------------------------------------------------------------


def _rt() -> Any:
    """HIP-Python's ``hip`` module (loaded on first use)."""
    from hipfile import _hip

    return _hip.hip


def _hip_free(ptr: int) -> None:
    _rt().hipFree(ptr)


class DeviceAllocation:
    """``nbytes`` of device memory from ``hipMalloc`` on ``device``, freed
    by :meth:`free` or when the object is collected.

    Raises
    ------
    HipRuntimeError
        ``hipSetDevice`` or ``hipMalloc`` failed.

    See Also
    --------
    hipMalloc, hipFree
    """

    def __init__(self, nbytes: int, device: int = 0) -> None:
        from hipfile._hip import check

        hip = _rt()
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        self.nbytes = nbytes
        self.device = device
        with _on_device(device):
            ptr = check(hip.hipMalloc(max(nbytes, 1)), "hipMalloc")
        self.ptr = int(ptr)
        self._finalizer = weakref.finalize(self, _hip_free, self.ptr)

    def free(self) -> None:
        """Free the memory now (idempotent). Views must not be used after."""
        self._finalizer()

    @property
    def freed(self) -> bool:
        """Whether the memory has been freed."""
        return not self._finalizer.alive

    def __repr__(self) -> str:
        return (f"<hipfile.safetensors.DeviceAllocation ptr={self.ptr:#x} "
                f"nbytes={self.nbytes} device={self.device}>")


class _on_device:
    """Make ``device`` current for a block, then restore the previous one."""

    def __init__(self, device: int) -> None:
        self.device = device
        self.prev: int | None = None

    def __enter__(self) -> None:
        from hipfile._hip import check

        hip = _rt()
        prev = int(check(hip.hipGetDevice(), "hipGetDevice"))
        if prev != self.device:
            check(hip.hipSetDevice(self.device), "hipSetDevice")
            self.prev = prev

    def __exit__(self, *exc: object) -> None:
        if self.prev is not None:
            from hipfile._hip import check

            check(_rt().hipSetDevice(self.prev), "hipSetDevice")


class DeviceTensor:
    """A tensor in device memory: a view of an allocation it keeps alive.

    Exposes ``__cuda_array_interface__`` (version 3) so CuPy, Numba, PyTorch
    and :class:`hipfile.Buffer` take it as it is.

    Parameters
    ----------
    owner
        The object owning the memory (kept alive).
    ptr
        Address of the first byte.
    dtype
        A :data:`DTYPES` name or :class:`Dtype`.
    shape
        The shape.
    device
        Device ordinal.

    Raises
    ------
    SafetensorsError
        Unknown dtype, or a packed dtype whose elements do not fill whole bytes.
    """

    def __init__(self, owner: Any, ptr: int, dtype: str | Dtype, shape: Sequence[int],
                 device: int = 0) -> None:
        if isinstance(dtype, str):
            if dtype not in DTYPES:
                raise SafetensorsError(f"unknown dtype {dtype!r}")
            dtype = DTYPES[dtype]
        self._owner = owner
        self.ptr = int(ptr)
        self.dtype = dtype
        self.shape = tuple(int(n) for n in shape)
        self.nbytes = dtype.nbytes(self.shape)
        self.device = device

    @classmethod
    def wrap(cls, memory: Any, dtype: str | Dtype, shape: Sequence[int],
             device: int = 0) -> DeviceTensor:
        """View existing device memory (anything :class:`hipfile.Buffer` takes)
        as a tensor.

        Raises
        ------
        ValueError
            ``memory`` is smaller than the tensor.
        """
        buf = Buffer(memory)
        t = cls(buf, buf.ptr, dtype, shape, device)
        if t.nbytes > buf.length:
            raise ValueError(f"{t.nbytes} bytes of tensor in {buf.length} bytes of memory")
        return t

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self.dtype.bits % 8:  # packed: raw bytes
            shape: tuple[int, ...] = (self.nbytes,)
            typestr = "|u1"
        else:
            shape, typestr = self.shape, self.dtype.typestr
        return {"shape": shape, "typestr": typestr, "data": (self.ptr, False),
                "version": 3, "strides": None}

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"<hipfile.safetensors.DeviceTensor dtype={self.dtype.name} "
                f"shape={self.shape} ptr={self.ptr:#x} device={self.device}>")


# --------------------------------------------------------------------------
# The read step
# --------------------------------------------------------------------------


def read_ranges(fh: FileHandle, buffer: Any, reads: Sequence[ReadRange], *,
                task_size: int | None = None) -> int:
    """Read every range into ``buffer`` with :meth:`hipfile.FileHandle.pread`
    (parallel tasks), all ranges submitted before any is waited for.

    Returns
    -------
    int
        Bytes read (short reads at end of file included).

    Raises
    ------
    OSError, HipFileException
        The first failure, after every range has ended (so the memory is not
        released under running tasks).

    See Also
    --------
    hipFileRead
    """
    futures = [fh.pread(buffer, r.size, r.file_offset, r.buffer_offset, task_size=task_size)
               for r in reads]
    errors = [f.exception() for f in futures]  # waits for each
    for e in errors:
        if e is not None:
            raise e
    return sum(f.result() for f in futures)


def read_ranges_stream(fh: FileHandle, buffer: Any, reads: Sequence[ReadRange], *,
                       task_size: int | None = None) -> int:
    """Read every range into ``buffer`` with the stream-ordered engine
    (:meth:`hipfile.FileHandle.pread_async_ranges`, ``task_size`` chunks on
    the engine's threads), ordered after the null stream, then wait for all.

    Returns
    -------
    int
        Bytes read (short reads at end of file included).

    Raises
    ------
    OSError, HipFileException
        The first failure, after every range has ended.

    See Also
    --------
    hipFileRead, hipStreamWriteValue32
    """
    handles = fh.pread_async_ranges(
        buffer, [(r.size, r.file_offset, r.buffer_offset) for r in reads], 0,
        task_size=task_size)
    total = 0
    first: BaseException | None = None
    for h in handles:  # every range ends before an error is raised
        try:
            total += int(h.wait())
        except Exception as e:
            if first is None:
                first = e
    if first is not None:
        raise first
    return total


#: Read engines by name: ``reader(fh, buffer, reads, task_size=...) -> bytes``.
#: ``"parallel"``: :func:`read_ranges` (the package's thread pool);
#: ``"stream"``: :func:`read_ranges_stream` (the stream-ordered engine).
READERS: dict[str, Callable[..., int]] = {"parallel": read_ranges, "stream": read_ranges_stream}


def _task_size(task_size: int | None, reader: str = "parallel") -> int | None:
    if task_size is None:
        if reader == "stream":
            from hipfile import defaults

            task_size = defaults.engine_task_size()
        else:
            from hipfile.parallel import default_task_size

            task_size = default_task_size()
    if task_size <= 0:
        raise ValueError(f"task_size must be positive, got {task_size}")
    return _up(task_size, ALIGNMENT)  # aligned tasks keep O_DIRECT reads aligned


def _open_for_read(path: str | os.PathLike[str], direct: bool | None) -> FileHandle:
    o_direct = getattr(os, "O_DIRECT", 0)
    if direct is None or direct:
        if not o_direct:
            if direct:
                raise NotImplementedError("O_DIRECT is not available on this system")
        else:
            try:
                return FileHandle(path, os.O_RDONLY | o_direct).open()
            except OSError as e:
                import errno

                if direct or e.errno != errno.EINVAL:
                    raise
    return FileHandle(path, os.O_RDONLY).open()


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------

_FRAMEWORKS = ("hip", "torch", "pt")


def _check_framework(framework: str) -> str:
    if framework not in _FRAMEWORKS:
        raise ValueError(f"framework must be one of {_FRAMEWORKS}, got {framework!r}")
    return "torch" if framework == "pt" else framework


def _allocate(framework: str, nbytes: int, device: int) -> tuple[Any, int]:
    """Memory for ``nbytes`` plus alignment slack: ``(owner, address)``."""
    if framework == "torch":
        import torch

        t = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{device}")
        return t, int(t.data_ptr())
    alloc = DeviceAllocation(nbytes, device)
    return alloc, alloc.ptr


def _torch_view(flat: Any, offset: int, info: TensorInfo, device: int) -> Any:
    import torch

    if info.dtype.torch is None or not hasattr(torch, info.dtype.torch):
        raise SafetensorsError(f"tensor {info.name!r}: torch has no dtype for "
                               f"{info.dtype.name}")
    tdt = getattr(torch, info.dtype.torch)
    shape = list(info.shape)
    if info.dtype.name == "F4":  # two values per byte: torch's storage shape
        if not shape or shape[-1] % 2:
            raise SafetensorsError(f"tensor {info.name!r}: F4 needs an even last dimension")
        shape[-1] //= 2
    if info.nbytes == 0:
        return torch.empty(shape, dtype=tdt, device=f"cuda:{device}")
    raw = flat[offset:offset + info.nbytes]
    size = max(1, int(getattr(tdt, "itemsize", 1)))
    if (int(raw.data_ptr()) % size) != 0:  # misaligned in the file: copy
        out = torch.empty(shape, dtype=tdt, device=raw.device)
        out.view(-1).view(torch.uint8).copy_(raw)
        return out
    return raw.view(tdt).view(shape)


def _load(fh: FileHandle, header: Header, names: Sequence[str] | None, framework: str,
          device: int, task_size: int | None, reader: str,
          info: dict[str, Any] | None = None) -> dict[str, Any]:
    if reader not in READERS:
        raise ValueError(f"reader must be one of {sorted(READERS)}, got {reader!r}")
    if names is None:
        infos = list(header.tensors.values())
    else:
        missing = [n for n in names if n not in header.tensors]
        if missing:
            raise KeyError(f"no tensor named {missing[0]!r} in the file")
        infos = [header.tensors[n] for n in names]
    base = header.data_offset
    reads, origin, span = plan_reads([(base + t.begin, base + t.end) for t in infos])
    task = _task_size(task_size, reader)
    owner, addr = _allocate(framework, span + ALIGNMENT, device)
    # place file offset `origin` at an address congruent to it modulo ALIGNMENT
    shift = (-addr) % ALIGNMENT
    out: dict[str, Any] = {}
    if span:
        region = Buffer(addr, span + ALIGNMENT)  # `owner` keeps the memory alive
        try:
            got = READERS[reader](fh, region, _shifted(reads, shift), task_size=task)
            expect = sum(min(r.size, header.file_size - r.file_offset) for r in reads)
            if got != expect:
                raise SafetensorsError(f"read {got} of {expect} bytes: the file changed or "
                                       "is truncated")
        except BaseException:
            # free now: the traceback would otherwise keep the memory alive
            if isinstance(owner, DeviceAllocation):
                owner.free()
            raise
        del region
    if info is not None:
        info.update(direct=bool(fh.flags & getattr(os, "O_DIRECT", 0)), reads=len(reads),
                    bytes_read=sum(r.size for r in reads), allocation=span + ALIGNMENT,
                    task_size=task, reader=reader)
    for t in infos:
        off = shift + base + t.begin - origin
        if framework == "torch":
            out[t.name] = _torch_view(owner, off, t, device)
        else:
            out[t.name] = DeviceTensor(owner, addr + off, t.dtype, t.shape, device)
    return out


def _shifted(reads: list[ReadRange], shift: int) -> list[ReadRange]:
    return [ReadRange(r.file_offset, r.size, r.buffer_offset + shift) for r in reads]


def load_file(path: str | os.PathLike[str], device: int = 0, framework: str = "hip", *,
              names: Sequence[str] | None = None, direct: bool | None = None,
              task_size: int | None = None, reader: str = "parallel",
              info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Load a safetensors file into device memory.

    Parameters
    ----------
    path
        The file.
    device
        Device ordinal.
    framework
        ``"hip"`` for :class:`DeviceTensor` objects, ``"torch"`` (or ``"pt"``)
        for ``torch.Tensor`` views of one ``torch.uint8`` allocation.
    names
        Load only these tensors (their ranges are coalesced); default all.
    direct
        ``None``: ``O_DIRECT`` when the file system accepts it; ``True``:
        require it; ``False``: buffered.
    task_size
        Bytes per parallel task (default :func:`hipfile.parallel.default_task_size`,
        or ``hipfile.defaults.engine_task_size()`` for the ``"stream"`` reader;
        rounded up to 4 KiB).
    reader
        Read engine from :data:`READERS`: ``"parallel"`` (the package's
        thread pool) or ``"stream"`` (the stream-ordered engine).
    info
        A dict to fill with what was done: ``direct`` (O_DIRECT used),
        ``reads`` (ranges), ``bytes_read``, ``allocation`` (device bytes),
        ``task_size``, ``reader``.

    Returns
    -------
    dict
        Name to tensor, in file order (or the order of ``names``).

    Raises
    ------
    SafetensorsError
        A malformed header, or a file shorter than its header says.
    KeyError
        A name in ``names`` is not in the file.
    ValueError
        Unknown ``framework`` or ``reader``, non-positive ``task_size``.
    OSError, HipFileException
        The file cannot be opened or read.
    ImportError
        ``framework="torch"`` without torch installed.

    See Also
    --------
    hipFileHandleRegister, hipFileRead
    """
    framework = _check_framework(framework)
    header = read_header(path)  # buffered: an O_DIRECT descriptor takes aligned reads only
    with Driver(), _open_for_read(path, direct) as fh:
        return _load(fh, header, names, framework, device, task_size, reader, info)


class SafeOpen:
    """Lazy access to a file's tensors, like ``safetensors.safe_open``.

    The header is read at open; :meth:`get_tensor` reads one tensor into its
    own allocation when asked. Use as a context manager (or call
    :meth:`close`). ``direct``, ``task_size`` and ``reader`` mean what
    they mean to :func:`load_file`.

    Raises
    ------
    SafetensorsError, OSError, HipFileException, ValueError
        As :func:`load_file`.
    """

    def __init__(self, path: str | os.PathLike[str], framework: str = "hip",
                 device: int = 0, *, direct: bool | None = None,
                 task_size: int | None = None, reader: str = "parallel") -> None:
        self._framework = _check_framework(framework)
        if reader not in READERS:
            raise ValueError(f"reader must be one of {sorted(READERS)}, got {reader!r}")
        self._reader = reader
        self._device = device
        self._task_size = task_size
        self._lock = threading.Lock()
        self._header = read_header(path)
        self._driver = Driver().open()
        try:
            self._fh: FileHandle | None = _open_for_read(path, direct)
        except BaseException:
            self._driver.close()
            raise

    @property
    def header(self) -> Header:
        """The parsed header."""
        return self._header

    def keys(self) -> list[str]:
        """Tensor names in file order."""
        return list(self._header.tensors)

    def metadata(self) -> dict[str, str] | None:
        """``__metadata__``, or ``None``."""
        return self._header.metadata

    def __contains__(self, name: object) -> bool:
        return name in self._header.tensors

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def get_tensor(self, name: str) -> Any:
        """Read one tensor into device memory.

        Raises
        ------
        KeyError
            No such tensor.
        ValueError
            The file is closed.
        """
        with self._lock:
            fh = self._fh
            if fh is None:
                raise ValueError("the file is closed")
            return _load(fh, self._header, [name], self._framework, self._device,
                         self._task_size, self._reader)[name]

    def load_all(self) -> dict[str, Any]:
        """Every tensor, in one allocation (as :func:`load_file`)."""
        with self._lock:
            fh = self._fh
            if fh is None:
                raise ValueError("the file is closed")
            return _load(fh, self._header, None, self._framework, self._device,
                         self._task_size, self._reader)

    def close(self) -> None:
        """Close the file and release the driver (idempotent)."""
        with self._lock:
            fh, self._fh = self._fh, None
        if fh is not None:
            fh.close()
            self._driver.close()

    def __enter__(self) -> SafeOpen:
        return self

    def __del__(self) -> None:
        if getattr(self, "_fh", None) is None:
            return
        try:
            self.close()
        except Exception:
            return
        import warnings

        warnings.warn("hipfile.safetensors.SafeOpen was not closed", ResourceWarning,
                      stacklevel=1)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def safe_open(path: str | os.PathLike[str], framework: str = "hip", device: int = 0, *,
              direct: bool | None = None, reader: str = "parallel") -> SafeOpen:
    """Open a file for lazy tensor access; see :class:`SafeOpen`."""
    return SafeOpen(path, framework, device, direct=direct, reader=reader)


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
