"""The loader: files opened for reading, and reads of one file or many."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hipfile._lib import _hipfile
from hipfile.errors import InFlightError
from hipfile.file import FileHandle
from hipfile.file._mounts import mount_of
from hipfile.file._residency import cached_fraction
from hipfile.safetensors._device import (
    Device,
    allocate,
    make_view,
    release,
    torch_stream,
)
from hipfile.safetensors._header import (
    ALIGNMENT,
    Header,
    SafetensorsError,
    TensorInfo,
)
from hipfile.safetensors._read import (
    READERS,
    ReadRange,
    _task_size,
    plan_reads,
)

#: Reads of one range are split into pieces of at most this many bytes, so
#: that a progress bar moves and the first pieces complete early.
MAX_RANGE = 1 << 30

#: The most bytes a host-memory read makes in the calling thread, whatever
#: the task size: a read there cannot be interrupted before it returns
#: (16 MiB: a few ms from the page cache, about 10 ms from a disk).
HOST_INLINE_CAP = 16 << 20

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


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------

#: ``wait(progress) -> bytes``: waits for every read of one file, calling
#: ``progress(n)`` as each range of ``n`` bytes completes.
Wait = Callable[[Callable[[int], None]], int]


def _waiter(reads: Sequence[ReadRange], ends: Sequence[Callable[[], int]]) -> Wait:
    """The wait of one file's reads, ``ends[i]()`` ending ``reads[i]``: every
    range is waited for even after one fails (the memory must outlive every
    read), then the first failure is raised; a ``KeyboardInterrupt`` (or
    another non-``Exception``) goes before an earlier read error, so that
    Ctrl-C is never lost."""

    def wait(progress: Callable[[int], None]) -> int:
        got, first = 0, None
        for r, end in zip(reads, ends, strict=True):
            try:
                got += end()
                progress(r.size)
            except BaseException as e:
                if first is None or (isinstance(first, Exception)
                                     and not isinstance(e, Exception)):
                    first = e
        if first is not None:
            raise first
        return got

    wait.ends = ends  # type: ignore[attr-defined]
    return wait


def _submit(fh: FileHandle | HostFile, target: Any, reads: list[ReadRange], reader: str,
            task: int | None, stream: int, alone: bool) -> Wait:
    """Start every read of one file; returns its :data:`Wait`.

    ``"stream"``: the process's stream-ordered engine (its threads and
    staging ring), ordered after ``stream``. ``"parallel"``: the package's
    thread pool, with ``preadv`` for a :class:`HostFile` (``alone``: the
    load's only file, whose one task the calling thread reads itself, up to
    :data:`HOST_INLINE_CAP`) and :meth:`hipfile.FileHandle.pread` otherwise.
    """
    if reader == "stream":
        assert isinstance(fh, FileHandle)
        handles = fh.pread_async_ranges(
            target, [(r.size, r.file_offset, r.buffer_offset) for r in reads], stream,
            task_size=task)
        return _waiter(reads, [h.wait for h in handles])
    if isinstance(fh, HostFile):
        from hipfile.parallel import INLINE_MAX, _pread_host

        fd = fh.fd
        if fd is None:
            raise SafetensorsError("File is closed")
        assert task is not None
        view = memoryview(target).cast("B")
        most = min(task, HOST_INLINE_CAP) if alone and len(reads) == 1 else INLINE_MAX
        futures = [_pread_host(fd, view, r.size, r.file_offset, r.buffer_offset, task, most)
                   for r in reads]
    else:
        futures = [fh.pread(target, r.size, r.file_offset, buffer_offset=r.buffer_offset,
                            task_size=task)
                   for r in reads]
    return _waiter(reads, [f.result for f in futures])


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
    wait: Wait
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
    """The reader a load uses: ``"auto"`` is the stream-ordered engine
    (``"stream"``) for device memory and the thread pool's ``preadv``
    (``"parallel"``) for host memory; ``"staged"``, kept for compatibility,
    is the engine too (its staging ring is the staged reader).

    Raises
    ------
    ValueError
        An unknown reader, or a device reader asked to read into host memory.
    """
    if reader == "auto":
        return "parallel" if device.is_cpu else "stream"
    if reader not in READERS and reader != "staged":
        raise ValueError(f"reader must be 'auto', 'staged' or one of {sorted(READERS)}, got "
                         f"{reader!r}")
    if reader in ("stream", "staged") and device.is_cpu:
        raise ValueError(f"reader {reader!r} reads into device memory; use 'parallel' (or "
                         "'auto') for device='cpu'")
    return "stream" if reader == "staged" else reader


def _plan_file(path: str | os.PathLike[str], fh: FileHandle | HostFile, header: Header,
               infos: list[TensorInfo], framework: str, device: Device,
               runs: Mapping[str, Sequence[tuple[int, int]]] | None) -> tuple[_Pending, Any]:
    """One file's reads and its one allocation: ``(pending, read target)``,
    the pending's wait not yet set."""
    base = header.data_offset
    spans = [(base + t.begin + b, base + t.begin + e)
             for t in infos
             for b, e in (runs[t.name] if runs is not None and t.name in runs
                          else [(0, t.nbytes)])]
    reads, origin, span = plan_reads(spans)
    owner, addr, target = allocate(framework, device, span + ALIGNMENT)
    # file offset `origin` lands at an address congruent to it modulo
    # ALIGNMENT: O_DIRECT reads stay aligned
    shift = (-addr) % ALIGNMENT
    reads = _split([ReadRange(r.file_offset, r.size, r.buffer_offset + shift) for r in reads],
                   MAX_RANGE)
    expect = sum(min(r.size, header.file_size - r.file_offset) for r in reads)
    return _Pending(os.fspath(path), fh, header, infos, owner, addr, shift, origin, reads,
                    lambda progress: 0, expect), target


def _ended(ends: Sequence[Callable[[], int]]) -> bool:
    """Whether every read of ``ends`` (bound ``wait``/``result`` methods of
    engine handles or futures) has ended."""
    for end in ends:
        done = getattr(getattr(end, "__self__", None), "done", None)
        if done is None or not done():
            return False
    return True


class _InFlight:
    """The memory of a failed load whose reads were still in flight when a
    Ctrl-C ended the wait for them, handed to the package's deferred
    releases (``defer_release``): freed by the sweep that finds every read
    ended, never before (a read still in flight would land in freed
    memory)."""

    def __init__(self, ends: Sequence[Callable[[], int]], owner: Any) -> None:
        self.ends = ends
        self.owner = owner

    def free(self) -> None:
        """Free the memory.

        Raises
        ------
        InFlightError
            A read is still in flight (the sweep tries again later).
        """
        if not _ended(self.ends):
            raise InFlightError(detail="a failed load's reads are still in flight")
        release(self.owner)


def _abandon(pending: Sequence[_Pending]) -> None:
    """A failed load: wait for every submitted read to end, then free the
    memory now (a traceback would keep it alive). A Ctrl-C during this wait
    ends it: the memory of files whose reads are still in flight is handed
    to the deferred releases (:class:`_InFlight`), freed once they end, and
    the interrupt is raised."""
    interrupt: BaseException | None = None
    for p in pending:
        if interrupt is None:
            try:
                p.wait(lambda n: None)
            except Exception:
                pass
            except BaseException as e:     # Ctrl-C: stop waiting, lose nothing
                interrupt = e
        ends = getattr(p.wait, "ends", ())
        if interrupt is not None and ends and not _ended(ends):
            _hipfile.defer_release(_InFlight(ends, p.owner), "free")
        else:
            release(p.owner)
    if interrupt is not None:
        raise interrupt


def _views(pending: Sequence[_Pending], framework: str, device: Device) -> dict[str, Any]:
    """Name to tensor: views into each file's allocation, in file order."""
    out: dict[str, Any] = {}
    for p in pending:
        base = p.header.data_offset
        for t in p.infos:
            off = p.shift + base + t.begin - p.origin
            out[t.name] = make_view(framework, device, p.owner, p.addr, off, t)
    return out


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
    task = _task_size(task_size, reader)
    stream = torch_stream(framework, device) if reader == "stream" else 0
    pending: list[_Pending] = []
    opened: list[FileHandle | HostFile] = []
    bar = _Progress(sum(sum(t.nbytes for t in infos) for _, _, infos in files), len(files),
                    progress)
    try:
        try:
            for k, (path, header, infos) in enumerate(files):
                fh = handles[k] if handles is not None else None
                if fh is None:
                    fh = HostFile(path) if device.is_cpu else open_for_read(path, direct)
                    opened.append(fh)
                p, target = _plan_file(path, fh, header, infos, framework, device, runs)
                pending.append(p)
                if p.reads:
                    p.wait = _submit(fh, target, p.reads, reader, task, stream, len(files) == 1)
            bar.set_total(sum(r.size for p in pending for r in p.reads))
            for p in pending:
                got = p.wait(bar)
                if got != p.expect:
                    raise SafetensorsError(f"{p.path}: read {got} of {p.expect} bytes: the file "
                                           "changed or is truncated")
        except BaseException:
            _abandon(pending)
            raise
        if info is not None:
            fh0 = pending[0].fh if pending else None
            info.update(direct=bool(fh0 is not None and fh0.flags & getattr(os, "O_DIRECT", 0)),
                        reads=sum(len(p.reads) for p in pending),
                        bytes_read=sum(r.size for p in pending for r in p.reads),
                        allocation=sum(int(getattr(p.owner, "nbytes", 0)) for p in pending),
                        task_size=task, reader=reader, files=len(pending))
        return _views(pending, framework, device)
    finally:
        bar.close()
        for fh in opened:
            fh.close()
