"""The loader: devices, frameworks, memory, reads of one file or many."""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hipfile.buffer import Buffer
from hipfile.file import FileHandle
from hipfile.file._mounts import mount_of
from hipfile.file._residency import cached_fraction
from hipfile.safetensors._header import (
    ALIGNMENT,
    Header,
    SafetensorsError,
    ShardNotFoundError,
    TensorInfo,
    TensorNotFoundError,
    read_header,
)
from hipfile.safetensors._read import (
    READERS,
    DeviceAllocation,
    DeviceTensor,
    ReadRange,
    _task_size,
    plan_reads,
)

#: ``framework`` names: ``"hip"`` (:class:`DeviceTensor`), ``"pt"``/``"torch"``
#: (``torch.Tensor``), ``"np"``/``"numpy"`` (``numpy.ndarray``, host only).
FRAMEWORKS: dict[str, str] = {"hip": "hip", "pt": "torch", "torch": "torch", "np": "numpy",
                              "numpy": "numpy"}

#: Reads of one range are split into pieces of at most this many bytes, so
#: that a progress bar moves and the first pieces complete early.
MAX_RANGE = 1 << 30

# file systems where O_DIRECT loses the client's readahead and caching
# (network) or gains nothing (memory): read buffered there
_BUFFERED_FS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "sshfs", "fuse.sshfs", "lustre", "gpfs",
                "beegfs", "glusterfs", "ceph", "9p", "virtiofs", "tmpfs", "ramfs"}


BACKENDS = ("mmap", "pread")


def check_backend(backend: str | None) -> None:
    """Check safetensors' ``backend`` keyword (``None``, ``"mmap"`` or
    ``"pread"``). Either name loads the same way here: hipFile reads the
    bytes, and no mapping of the file is made.

    Raises
    ------
    TypeError
        Not a string or ``None``.
    SafetensorsError
        An unknown name (a :class:`ValueError`, as safetensors' ``SafetensorError``).
    """
    if backend is None:
        return
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a str or None, got {type(backend).__name__}")
    if backend not in BACKENDS:
        raise SafetensorsError(f"backend must be one of {BACKENDS}, got {backend!r}")


def check_framework(framework: str) -> str:
    """The canonical framework name (``"hip"``, ``"torch"``, ``"numpy"``).

    Raises
    ------
    SafetensorsError
        An unknown name (a :class:`ValueError`, as safetensors raises
        ``SafetensorError`` there).
    """
    if not isinstance(framework, str) or framework not in FRAMEWORKS:
        raise SafetensorsError(f"framework must be one of {tuple(FRAMEWORKS)}, got "
                               f"{framework!r}")
    return FRAMEWORKS[framework]


@dataclass(frozen=True)
class Device:
    """Where tensors go: ``kind`` ``"cpu"`` or ``"cuda"`` (a GPU, ROCm's
    or CUDA's: torch names both ``cuda``) and the GPU's ordinal."""

    kind: str
    index: int = 0

    @property
    def is_cpu(self) -> bool:
        """Whether this is host memory."""
        return self.kind == "cpu"

    def torch(self) -> str:
        """The torch device string."""
        return "cpu" if self.is_cpu else f"cuda:{self.index}"


def parse_device(device: Any, framework: str) -> Device:
    """Read ``device`` as safetensors does: ``"cpu"``, ``"cuda"``,
    ``"cuda:N"`` (also ``"hip"``/``"hip:N"``), an int, a ``torch.device``;
    ``None`` is ``"cpu"`` for torch and numpy and GPU 0 for ``"hip"``.

    Raises
    ------
    TypeError
        Not one of those types.
    SafetensorsError
        A malformed or negative device, a GPU for numpy, host memory for
        ``"hip"`` (a :class:`ValueError`; safetensors raises
        ``SafetensorError`` for these).
    """
    if device is None:
        dev = Device("cuda", 0) if framework == "hip" else Device("cpu")
    elif isinstance(device, bool):
        raise TypeError("device must be a str, an int or a torch.device, not bool")
    elif isinstance(device, int):
        if device < 0:
            raise SafetensorsError(f"device ordinal must be >= 0, got {device}")
        dev = Device("cuda", device)
    elif isinstance(device, str) or type(device).__module__.startswith("torch"):
        text = str(device).strip()
        kind, _, index = text.partition(":")
        if kind == "cpu" and not index:
            dev = Device("cpu")
        elif kind in ("cuda", "hip") and (not index or index.isdigit()):
            if index:
                dev = Device("cuda", int(index))
            else:
                dev = Device("cuda", _current_device(framework))
        elif text.isdigit():
            dev = Device("cuda", int(text))
        else:
            raise SafetensorsError(f"device must be 'cpu', 'cuda', 'cuda:N' or an ordinal, "
                                   f"got {device!r}")
    else:
        raise TypeError(f"device must be a str, an int or a torch.device, not "
                        f"{type(device).__name__}")
    if framework == "numpy" and not dev.is_cpu:
        raise SafetensorsError(f"Device {device} is not supported for framework numpy: it "
                               "loads into host memory (device 'cpu')")
    if framework == "hip" and dev.is_cpu:
        raise SafetensorsError("framework 'hip' loads into device memory: use framework "
                               "'numpy' or 'pt' for host memory")
    return dev


def _current_device(framework: str) -> int:
    """torch's current GPU for ``"cuda"`` without an ordinal; else 0 (without
    torch, loading with framework ``"torch"`` raises ImportError later)."""
    if framework == "torch":
        try:
            import torch
        except ImportError:
            return 0
        if torch.cuda.is_available():
            return int(torch.cuda.current_device())
    return 0


# --------------------------------------------------------------------------
# Memory and views
# --------------------------------------------------------------------------


def allocate(framework: str, device: Device, nbytes: int) -> tuple[Any, int, Any]:
    """Memory for ``nbytes``: ``(owner, address, read target)``.

    The read target is what the read step is given: a :class:`Buffer` over
    device memory, or a writable host array (read with ``preadv``).
    """
    if framework == "torch":
        import torch

        t = torch.empty(nbytes, dtype=torch.uint8, device=device.torch())
        addr = int(t.data_ptr())
        return t, addr, (t.numpy() if device.is_cpu else Buffer(addr, nbytes))
    if framework == "numpy":
        import numpy as np

        a = np.empty(nbytes, np.uint8)
        return a, int(a.ctypes.data), a
    alloc = DeviceAllocation(nbytes, device.index)
    return alloc, alloc.ptr, Buffer(alloc.ptr, nbytes)


def release(owner: Any) -> None:
    """Free a failed load's memory now (a traceback would keep it alive)."""
    if isinstance(owner, DeviceAllocation):
        owner.free()


_NUMPY_DTYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "<i2", "U16": "<u2",
                 "F16": "<f2", "I32": "<i4", "U32": "<u4", "F32": "<f4", "F64": "<f8",
                 "I64": "<i8", "U64": "<u8", "C64": "<c8"}


def numpy_dtype(info: TensorInfo) -> Any:
    """The numpy dtype of a tensor; ml_dtypes' for BF16 and FP8 when it is
    installed.

    Raises
    ------
    SafetensorsError
        numpy has no such dtype.
    """
    import numpy as np

    name = _NUMPY_DTYPES.get(info.dtype.name)
    if name is not None:
        return np.dtype(name)
    try:
        import ml_dtypes  # type: ignore[import-not-found]
    except ImportError:
        ml_dtypes = None
    if ml_dtypes is not None and info.dtype.torch is not None:
        if hasattr(ml_dtypes, info.dtype.torch):
            return np.dtype(getattr(ml_dtypes, info.dtype.torch))
    raise SafetensorsError(f"tensor {info.name!r}: numpy has no dtype for {info.dtype.name}")


def make_view(framework: str, device: Device, owner: Any, addr: int, offset: int,
              info: TensorInfo) -> Any:
    """One tensor of a loaded region: a view of ``owner`` at ``offset``."""
    if framework == "torch":
        return _torch_view(owner, offset, info, device)
    if framework == "numpy":
        dt = numpy_dtype(info)
        raw = owner[offset:offset + info.nbytes]
        if raw.ctypes.data % max(1, dt.alignment):  # misaligned in the file: copy
            raw = raw.copy()
        return raw.view(dt).reshape(info.shape)
    return DeviceTensor(owner, addr + offset, info.dtype, info.shape, device.index)


def torch_dtype(info: TensorInfo) -> Any:
    """The torch dtype of a tensor.

    Raises
    ------
    SafetensorsError
        torch has no such dtype.
    """
    import torch

    if info.dtype.torch is None or not hasattr(torch, info.dtype.torch):
        raise SafetensorsError(f"tensor {info.name!r}: torch has no dtype for "
                               f"{info.dtype.name}")
    return getattr(torch, info.dtype.torch)


def _torch_view(flat: Any, offset: int, info: TensorInfo, device: Device) -> Any:
    import torch

    tdt = torch_dtype(info)
    shape = list(info.shape)
    if info.dtype.name == "F4":  # two values per byte: torch's storage shape
        if not shape or shape[-1] % 2:
            raise SafetensorsError(f"tensor {info.name!r}: F4 needs an even last dimension")
        shape[-1] //= 2
    if info.nbytes == 0:
        return torch.empty(shape, dtype=tdt, device=device.torch())
    raw = flat[offset:offset + info.nbytes]
    size = max(1, int(getattr(tdt, "itemsize", 1)))
    if (int(raw.data_ptr()) % size) != 0:  # misaligned in the file: copy
        out = torch.empty(shape, dtype=tdt, device=raw.device)
        out.view(-1).view(torch.uint8).copy_(raw)
        return out
    return raw.view(tdt).view(shape)


# --------------------------------------------------------------------------
# Opening
# --------------------------------------------------------------------------


def _fs_type(path: str | os.PathLike[str]) -> str:
    """The file system type of ``path`` (longest mount point), "" if unknown."""
    found = mount_of(path)
    return "" if found is None else found.fs_type


def want_direct(path: str | os.PathLike[str], fd: int | None, direct: bool | None) -> bool:
    """Whether ``direct=None`` reads this file with ``O_DIRECT``: when less than
    half of it is in the page cache (1024 pages sampled over the file, a
    fraction of a millisecond whatever its size) and its file system is a
    local one."""
    if direct is not None:
        return direct
    if not getattr(os, "O_DIRECT", 0):
        return False
    if cached_fraction(path if fd is None else fd, sample_pages=1024) >= 0.5:
        return False    # a cached file is read fastest from the cache
    return _fs_type(path) not in _BUFFERED_FS


def open_for_read(path: str | os.PathLike[str], direct: bool | None) -> FileHandle:
    """Register ``path`` with hipFile for reading, with ``O_DIRECT`` as
    :func:`want_direct` says (falling back to buffered reads when the file
    system refuses it and ``direct`` is None).

    Raises
    ------
    NotImplementedError
        ``direct=True`` where the system has no ``O_DIRECT``.
    OSError, HipFileException
        The file cannot be opened or registered.
    """
    o_direct = getattr(os, "O_DIRECT", 0)
    if direct and not o_direct:
        raise NotImplementedError("O_DIRECT is not available on this system")
    if want_direct(path, None, direct):
        try:
            return FileHandle(path, os.O_RDONLY | o_direct).open()
        except OSError as e:
            if direct or e.errno != errno.EINVAL:
                raise
    return FileHandle(path, os.O_RDONLY).open()


class HostFile:
    """A file opened for host-memory loads: a plain descriptor, read with
    POSIX ``preadv`` on the package's thread pool. hipFile moves device
    memory only, so host loads neither register the file nor load
    libhipfile or a GPU runtime (as ``safetensors.numpy`` needs none).

    Raises
    ------
    OSError
        ``os.open`` failed.
    IsADirectoryError
        The path is a folder.
    """

    flags = os.O_RDONLY

    def __init__(self, path: str | os.PathLike[str]) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                raise IsADirectoryError(errno.EISDIR, "Is a directory", os.fspath(path))
        except BaseException:
            os.close(fd)
            raise
        self.fd: int | None = fd

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self.fd is None

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


def _submit_host(f: HostFile, target: Any, reads: list[ReadRange],
                 task: int) -> Callable[[Callable[[int], None]], int]:
    """Start every read of a host-memory load; returns ``wait(progress) -> bytes``."""
    from hipfile.parallel import _pread_host

    fd = f.fd
    if fd is None:
        raise SafetensorsError("File is closed")
    view = memoryview(target).cast("B")
    futures = [_pread_host(fd, view, r.size, r.file_offset, r.buffer_offset, task)
               for r in reads]

    def wait_host(progress: Callable[[int], None]) -> int:
        errors = []
        for r, fut in zip(reads, futures, strict=True):
            e = fut.exception()         # waits
            errors.append(e)
            if e is None:
                progress(r.size)
        for e in errors:
            if e is not None:
                raise e
        return sum(fut.result() for fut in futures)

    return wait_host


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------


@dataclass
class _Pending:
    """One file's submitted reads."""

    path: str
    fh: FileHandle | HostFile
    header: Header
    infos: list[TensorInfo]
    owner: Any
    addr: int
    shift: int
    origin: int
    reads: list[ReadRange]
    wait: Callable[[Callable[[int], None]], int]
    expect: int


def _split(reads: list[ReadRange], limit: int) -> list[ReadRange]:
    out = []
    for r in reads:
        done = 0
        while done < r.size:
            n = min(limit, r.size - done)
            out.append(ReadRange(r.file_offset + done, n, r.buffer_offset + done))
            done += n
    return out


def torch_stream(framework: str, device: Device) -> int:
    """The stream a read into memory that the framework allocated follows:
    torch's current stream of the device (its caching allocator reuses
    memory in that stream's order), else the null stream."""
    if framework != "torch" or device.is_cpu:
        return 0
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:       # the handle without making a Stream object
        return int(raw(device.index))
    return int(torch.cuda.current_stream(device.index).cuda_stream)


def _submit(fh: FileHandle, target: Any, reads: list[ReadRange], reader: str,
            task: int | None, stream: int = 0) -> Callable[[Callable[[int], None]], int]:
    """Start every read; returns ``wait(progress) -> bytes``. ``stream``:
    the engine's reads follow it."""
    if reader == "stream":
        handles = fh.pread_async_ranges(
            target, [(r.size, r.file_offset, r.buffer_offset) for r in reads], stream,
            task_size=task)

        def wait_stream(progress: Callable[[int], None]) -> int:
            got, first = 0, None
            for r, h in zip(reads, handles, strict=True):
                try:                        # every range ends before the memory may go
                    got += h.wait()
                    progress(r.size)
                except BaseException as e:
                    first = first or e
            if first is not None:
                raise first
            return got

        return wait_stream
    if reader == "parallel":
        futures = [fh.pread(target, r.size, r.file_offset, buffer_offset=r.buffer_offset,
                            task_size=task)
                   for r in reads]

        def wait_futures(progress: Callable[[int], None]) -> int:
            errors = []
            for i, f in enumerate(futures):
                e = f.exception()       # waits
                errors.append(e)
                if e is None:
                    progress(reads[i].size)
            for e in errors:
                if e is not None:
                    raise e
            return sum(f.result() for f in futures)

        return wait_futures
    got = READERS[reader](fh, target, reads, task_size=task)

    def done(progress: Callable[[int], None]) -> int:
        progress(sum(r.size for r in reads))
        return int(got)

    return done


class _Progress:
    """One progress bar over a load (tqdm when installed and asked for)."""

    def __init__(self, total: int, files: int, progress: bool | None) -> None:
        self.bar: Any = None
        if progress is None:
            progress = (files > 1 or total >= (4 << 30)) and sys.stderr.isatty()
        if progress and total:
            try:
                from tqdm.auto import tqdm  # type: ignore[import-untyped]
            except ImportError:
                return
            self.bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
                            desc=f"loading {files} file{'s' if files != 1 else ''}")

    def set_total(self, total: int) -> None:
        """The exact total: the bytes of the (aligned) reads."""
        if self.bar is not None:
            self.bar.total = total
            self.bar.refresh()

    def __call__(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def resolve_reader(reader: str, device: Device) -> str:
    """Check ``reader``; ``"auto"`` is the thread pool's ``preadv``
    (``"parallel"``) for host memory, and stays ``"auto"`` for device memory
    (chosen per file by :func:`file_reader`).

    Raises
    ------
    ValueError
        An unknown reader, or a device reader asked to read into host memory.
    """
    if reader == "auto":
        return "parallel" if device.is_cpu else "auto"
    if reader not in READERS and reader != "staged":
        raise ValueError(f"reader must be 'auto', 'staged' or one of {sorted(READERS)}, got "
                         f"{reader!r}")
    if reader in ("stream", "staged") and device.is_cpu:
        raise ValueError(f"reader {reader!r} reads into device memory; use 'parallel' (or "
                         "'auto') for device='cpu'")
    return reader


def file_reader(reader: str, fh: FileHandle) -> str:
    """The reader of one file into device memory: for ``"auto"``, the
    process's stream-ordered engine, which reads a file opened with
    ``O_DIRECT`` (from the disk) through that descriptor and one read
    through the page cache with many threads; no thread is started and no
    pinned memory allocated per call. ``"staged"`` (the older reader with
    threads and staging of its own per load) is still there to ask for."""
    if reader != "auto":
        return reader
    del fh
    return "stream"


def load_many(files: Sequence[tuple[str | os.PathLike[str], Header, list[TensorInfo]]],
              framework: str, device: Device, *, direct: bool | None,
              task_size: int | None, reader: str, progress: bool | None = None,
              info: dict[str, Any] | None = None,
              handles: Sequence[FileHandle | HostFile | None] | None = None,
              runs: Mapping[str, Sequence[tuple[int, int]]] | None = None) -> dict[str, Any]:
    """Load the given tensors of several files: every file's reads are
    submitted before the first is waited for, so file *k+1* is read while
    file *k* completes; one allocation per file.

    ``handles`` (one per file, or None) are registered files to read with;
    the others are opened here and closed before returning (host-memory
    loads open a :class:`HostFile`: no hipFile). ``runs`` maps
    a tensor's name to the byte ranges ``(begin, end)`` of it to read,
    relative to its first byte (default: all of it); the bytes between them
    are left unread in its view.
    """
    reader = resolve_reader(reader, device)
    task = _task_size(task_size, "parallel" if reader == "parallel" else "stream")
    pending: list[_Pending] = []
    staged: Any = None
    used: list[str] = []
    opened: list[FileHandle | HostFile] = []
    out: dict[str, Any] = {}
    bar = _Progress(sum(sum(t.nbytes for t in infos) for _, _, infos in files), len(files),
                    progress)
    try:
        try:
            for k, (path, header, infos) in enumerate(files):
                given = handles[k] if handles is not None else None
                fh: FileHandle | HostFile
                if given is None:
                    fh = HostFile(path) if device.is_cpu else open_for_read(path, direct)
                    opened.append(fh)
                else:
                    fh = given
                base = header.data_offset
                spans = [(base + t.begin + b, base + t.begin + e)
                         for t in infos
                         for b, e in (runs[t.name] if runs is not None and t.name in runs
                                      else [(0, t.nbytes)])]
                reads, origin, span = plan_reads(spans)
                owner, addr, target = allocate(framework, device, span + ALIGNMENT)
                # file offset `origin` lands at an address congruent to it
                # modulo ALIGNMENT: O_DIRECT reads stay aligned
                shift = (-addr) % ALIGNMENT
                reads = _split([ReadRange(r.file_offset, r.size, r.buffer_offset + shift)
                                for r in reads], MAX_RANGE)
                expect = sum(min(r.size, header.file_size - r.file_offset) for r in reads)
                p = _Pending(os.fspath(path), fh, header, infos, owner, addr, shift, origin,
                             reads, lambda progress: 0, expect)
                pending.append(p)
                if isinstance(fh, HostFile):
                    used.append(reader)
                    if reads:
                        assert task is not None
                        p.wait = _submit_host(fh, target, reads, task)
                    continue
                how = file_reader(reader, fh)
                used.append(how)
                if reads and how == "staged":
                    if staged is None:
                        from hipfile.safetensors._staged import STAGED_BLOCK, StagedReader

                        staged = StagedReader(device.index, block=task_size or STAGED_BLOCK)
                    assert fh.fd is not None
                    p.wait = staged.add(fh.fd, addr, reads)
                elif reads:
                    p.wait = _submit(fh, target, reads, how, task,
                                     torch_stream(framework, device))
            bar.set_total(sum(r.size for p in pending for r in p.reads))
            for p in pending:
                got = p.wait(bar)
                if got != p.expect:
                    raise SafetensorsError(f"{p.path}: read {got} of {p.expect} bytes: the file "
                                           "changed or is truncated")
        except BaseException:
            # every submitted read has ended here; free the memory now
            for p in pending:
                try:
                    p.wait(lambda n: None)
                except BaseException:
                    pass
                release(p.owner)
            raise
        if info is not None:
            fh0 = pending[0].fh if pending else None
            info.update(direct=bool(fh0 is not None and fh0.flags & getattr(os, "O_DIRECT", 0)),
                        reads=sum(len(p.reads) for p in pending),
                        bytes_read=sum(r.size for p in pending for r in p.reads),
                        allocation=sum(int(getattr(p.owner, "nbytes", 0)) for p in pending),
                        task_size=staged.block if used[:1] == ["staged"] else task,
                        reader=used[0] if used else reader, files=len(pending))
        for p in pending:
            base = p.header.data_offset
            for t in p.infos:
                off = p.shift + base + t.begin - p.origin
                out[t.name] = make_view(framework, device, p.owner, p.addr, off, t)
        return out
    finally:
        bar.close()
        if staged is not None:
            staged.close()
        for fh in opened:
            fh.close()


# --------------------------------------------------------------------------
# Sharded checkpoints
# --------------------------------------------------------------------------


def read_index(path: str | os.PathLike[str]) -> tuple[dict[str, str], dict[str, Any]]:
    """A ``model.safetensors.index.json``: ``({tensor: shard path}, metadata)``,
    shard paths relative to the index's folder.

    Raises
    ------
    SafetensorsError
        Not an index (no ``weight_map`` of strings to strings).
    OSError
        It cannot be read.
    """
    with open(path, "rb") as f:
        try:
            obj = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise SafetensorsError(f"{os.fspath(path)}: not a JSON index: {e}") from None
    wmap = obj.get("weight_map") if isinstance(obj, dict) else None
    if not isinstance(wmap, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in wmap.items()):
        raise SafetensorsError(f"{os.fspath(path)}: no weight_map of names to shard files")
    folder = os.path.dirname(os.fspath(path))
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return {k: os.path.join(folder, v) for k, v in wmap.items()}, meta


def checkpoint_files(source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
                     ) -> tuple[list[str], dict[str, str] | None]:
    """The files of a checkpoint: ``(files, weight_map or None)``.

    ``source`` is one ``.safetensors`` file, an index ``.json``, or a list of
    files.
    """
    if isinstance(source, (str, os.PathLike)):
        p = os.fspath(source)
        if p.endswith(".json"):
            wmap, _ = read_index(p)
            files = list(dict.fromkeys(wmap.values()))
            return files, wmap
        return [p], None
    files = [os.fspath(f) for f in source]
    if not files:
        raise ValueError("no files to load")
    return files, None


def _index_headers(files: list[str], weight_map: Mapping[str, str], strict: bool
                   ) -> list[Header]:
    """The headers of the shards an index names.

    Raises
    ------
    ShardNotFoundError
        A shard is missing (naming it and a tensor the index puts in it).
    """
    headers = []
    for f in files:
        try:
            headers.append(read_header(f, strict=strict))
        except FileNotFoundError as e:
            wanted = [n for n, s in weight_map.items() if s == f]
            more = f" and {len(wanted) - 1} more" if len(wanted) > 1 else ""
            raise ShardNotFoundError(
                f"{f}: the shard that the index names for tensor {wanted[0]!r}{more} is "
                f"missing", f) from e
    return headers


def plan_checkpoint(files: list[str], weight_map: Mapping[str, str] | None,
                    names: Sequence[str] | None, *, strict: bool = False
                    ) -> list[tuple[str, Header, list[TensorInfo]]]:
    """Headers of the files and, per file, the tensors to load (in file
    order, or in the order of ``names``).

    With an index's ``weight_map`` each tensor it names must be in the
    shard it names, and in no other; a tensor of a shard that the index
    does not name is loaded too.

    Raises
    ------
    TensorNotFoundError
        A name is in no file.
    SafetensorsError
        Two files hold the same name, the index names a tensor in a shard
        that lacks it, or a header is malformed.
    ShardNotFoundError
        A shard that the index names is missing (also a
        :class:`FileNotFoundError`).
    """
    if weight_map is not None:
        headers = _index_headers(files, weight_map, strict)
    else:
        headers = [read_header(f, strict=strict) for f in files]
    owner: dict[str, int] = {}
    for k, h in enumerate(headers):
        for name in h.tensors:
            if name in owner:
                raise SafetensorsError(f"tensor {name!r} is in both {files[owner[name]]} "
                                       f"and {files[k]}")
            owner[name] = k
    if weight_map is not None:
        for name, shard in weight_map.items():
            at = owner.get(name)
            if at is None or files[at] != shard:
                where = "in no shard" if at is None else f"in {files[at]}"
                raise SafetensorsError(f"{shard}: the index names tensor {name!r} in this "
                                       f"shard, which lacks it (it is {where})")
    chosen: list[list[TensorInfo]] = [[] for _ in files]
    if names is None:
        for k, h in enumerate(headers):
            chosen[k] = [t for t in h.tensors.values() if owner.get(t.name) == k]
    else:
        for n in names:
            if n not in owner:
                raise TensorNotFoundError(n)
            chosen[owner[n]].append(headers[owner[n]].tensors[n])
    return [(files[k], headers[k], chosen[k]) for k in range(len(files))]
