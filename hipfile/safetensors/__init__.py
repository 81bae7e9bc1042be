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
   opened with ``O_DIRECT`` when the file system accepts it and the file is
   mostly not in the page cache (``direct=None``), so every read is aligned;
   otherwise buffered.
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

import os
import threading
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any

from hipfile.buffer import Buffer
from hipfile.driver import Driver
from hipfile.file import FileHandle
from hipfile.safetensors._header import (
    ALIGNMENT,
    DTYPES,
    MAX_HEADER_SIZE,
    Dtype,
    Header,
    SafetensorsError,
    TensorInfo,
    parse_header,
    read_header,
)
from hipfile.safetensors._header import DEFAULT_MAX_GAP as DEFAULT_MAX_GAP
from hipfile.safetensors._read import (
    READERS,
    DeviceAllocation,
    DeviceTensor,
    ReadRange,
    _task_size,
    cached_fraction,
    plan_reads,
    read_ranges,
    read_ranges_stream,
)
from hipfile.safetensors._save import save_file

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
    "cached_fraction",
    "load_file",
    "parse_header",
    "plan_reads",
    "read_header",
    "read_ranges",
    "read_ranges_stream",
    "safe_open",
    "save_file",
]


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------


def _open_for_read(path: str | os.PathLike[str], direct: bool | None) -> FileHandle:
    o_direct = getattr(os, "O_DIRECT", 0)
    if direct is None and cached_fraction(path) >= 0.5:
        direct = False      # mostly in the page cache: O_DIRECT would read the disk again
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
              task_size: int | None = None, reader: str = "stream",
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
        ``None``: ``O_DIRECT`` when the file system accepts it and the file
        is mostly not in the page cache (:func:`cached_fraction` below 0.5:
        a cached file is read fastest from the cache); ``True``: require it;
        ``False``: buffered.
    task_size
        Bytes per parallel task (default :func:`hipfile.parallel.default_task_size`,
        or ``hipfile.defaults.engine_task_size()`` for the ``"stream"`` reader;
        rounded up to 4 KiB).
    reader
        Read engine from :data:`READERS`: ``"stream"`` (the stream-ordered
        engine's C threads, the default) or ``"parallel"`` (the package's
        thread pool).
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
                 task_size: int | None = None, reader: str = "stream") -> None:
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
              direct: bool | None = None, reader: str = "stream") -> SafeOpen:
    """Open a file for lazy tensor access; see :class:`SafeOpen`."""
    return SafeOpen(path, framework, device, direct=direct, reader=reader)
