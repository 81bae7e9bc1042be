"""The loader: files opened for reading, and reads of one file or many."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


def _submit_host(f: HostFile, target: Any, reads: list[ReadRange], task: int,
                 alone: bool = False) -> Callable[[Callable[[int], None]], int]:
    """Start every read of a host-memory load; returns ``wait(progress) ->
    bytes``. ``alone``: the load's only read (a tensor, a slice), which the
    calling thread reads itself when it is one task (a pool would run
    that one task on one thread too, after a hand-off)."""
    from hipfile.parallel import INLINE_MAX, _pread_host

    fd = f.fd
    if fd is None:
        raise SafetensorsError("File is closed")
    view = memoryview(target).cast("B")
    most = min(task, HOST_INLINE_CAP) if alone and len(reads) == 1 else INLINE_MAX
    futures = [_pread_host(fd, view, r.size, r.file_offset, r.buffer_offset, task, most)
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
                        p.wait = _submit_host(fh, target, reads, task, len(files) == 1)
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
