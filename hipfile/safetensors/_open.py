"""Lazy access to one file's tensors: ``safe_open`` and its slices."""

from __future__ import annotations

import math
import operator
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hipfile._interop import as_int
from hipfile._lifetime import ClosesWhenCollected
from hipfile.buffer import Buffer
from hipfile.file import FileHandle
from hipfile.file._holder import FileHolder
from hipfile.safetensors._header import (
    ALIGNMENT,
    DTYPES,
    Header,
    SafetensorsError,
    TensorInfo,
    TensorNotFoundError,
    read_header,
)
from hipfile.safetensors._load import (
    MAX_RANGE,
    HostFile,
    allocate,
    check_backend,
    check_framework,
    load_many,
    make_view,
    numpy_dtype,
    open_for_read,
    parse_device,
    resolve_reader,
    torch_dtype,
    torch_stream,
)
from hipfile.safetensors._read import DeviceTensor


class SafeOpen(FileHolder, ClosesWhenCollected):
    """Lazy access to a file's tensors, as ``safetensors.safe_open``.

    The header is read and the file registered at open; :meth:`get_tensor`
    and slices read only the bytes they need. Use as a context manager (or
    call :meth:`close`); after close every method raises
    :class:`SafetensorsError` ("File is closed").

    Parameters
    ----------
    path
        The file.
    framework
        ``"pt"``/``"torch"``, ``"np"``/``"numpy"`` or ``"hip"``
        (:class:`DeviceTensor`).
    device
        As safetensors takes it (``"cpu"``, ``"cuda"``, ``"cuda:N"``, an
        int, a ``torch.device``); default ``"cpu"``, or GPU 0 for ``"hip"``.
    direct, task_size, reader, strict
        As :func:`hipfile.safetensors.load_file`.
    read_ahead
        Bytes of device memory :meth:`get_tensor` may read ahead of the
        caller (None: the ``safetensors_read_ahead`` setting of
        :mod:`hipfile.defaults`, 256 MiB; 0: none). See :meth:`get_tensor`.

    Raises
    ------
    SafetensorsError
        A malformed header, a JSON file (a sharded checkpoint's index: load
        it with :func:`load_file`); a bad ``framework`` or ``device`` (a GPU
        with framework ``"numpy"``), as safetensors raises it.
    FileNotFoundError, OSError, HipFileException
        The file cannot be opened or registered (host-memory loads do not
        register it: they need no GPU library).
    ValueError, TypeError
        A bad ``reader``, a negative ``read_ahead``; a ``device`` of another type.
    """

    def __init__(self, path: str | os.PathLike[str], framework: str = "hip",
                 device: Any = None, *, direct: bool | None = None,
                 task_size: int | None = None, reader: str = "auto",
                 strict: bool = False, read_ahead: int | None = None) -> None:
        # a HostFile for host memory: FileHolder only closes what it holds
        self._fh: FileHandle | HostFile | None = None  # type: ignore[assignment]
        self._framework = check_framework(framework)
        self._device = parse_device(device, self._framework)
        self._reader = resolve_reader(reader, self._device)
        self._path = os.fspath(path)
        self._direct = direct
        self._task_size = task_size
        self._lock = threading.Lock()
        self._ahead = _ReadAhead(_read_ahead_bytes(read_ahead))
        self._torch_device: Any = None
        self._header = read_header(path, strict=strict)
        # host memory is read with POSIX calls: no hipFile, no GPU library
        self._fh = HostFile(path) if self._device.is_cpu else open_for_read(path, direct)

    def _open_fh(self) -> FileHandle | HostFile:
        fh = self._fh
        if fh is None:
            raise SafetensorsError("File is closed")
        return fh

    @property
    def header(self) -> Header:
        """The parsed header.

        Raises
        ------
        SafetensorsError
            The file is closed.
        """
        self._open_fh()
        return self._header

    def keys(self) -> list[str]:
        """Tensor names, sorted (as safetensors gives them).

        Raises
        ------
        SafetensorsError
            The file is closed.
        """
        self._open_fh()
        return sorted(self._header.tensors)

    def offset_keys(self) -> list[str]:
        """Tensor names in the order of their data in the file.

        Raises
        ------
        SafetensorsError
            The file is closed.
        """
        self._open_fh()
        return [t.name for t in sorted(self._header.tensors.values(),
                                       key=lambda t: (t.begin, t.end))]

    def metadata(self) -> dict[str, str] | None:
        """``__metadata__``, or ``None``.

        Raises
        ------
        SafetensorsError
            The file is closed.
        """
        self._open_fh()
        return self._header.metadata

    def __contains__(self, name: object) -> bool:
        return name in self._header.tensors

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def _info(self, name: str) -> TensorInfo:
        t = self._header.tensors.get(name)
        if t is None:
            raise TensorNotFoundError(name)
        return t

    def _read(self, infos: list[TensorInfo],
              runs: Mapping[str, Sequence[tuple[int, int]]] | None = None) -> dict[str, Any]:
        with self._lock:
            return self._read_locked(self._open_fh(), infos, runs)

    def _read_locked(self, fh: FileHandle | HostFile, infos: list[TensorInfo],
                     runs: Mapping[str, Sequence[tuple[int, int]]] | None = None
                     ) -> dict[str, Any]:
        return load_many([(self._path, self._header, infos)], self._framework,
                         self._device, direct=self._direct, task_size=self._task_size,
                         reader=self._reader, progress=False, handles=[fh], runs=runs)

    def get_tensor(self, name: str) -> Any:
        """Read one tensor into its own memory.

        Into device memory, the tensor is read by the process's
        stream-ordered engine with one submission, and the handle reads
        ahead: the tensors that follow ``name`` in the order the calls go
        (:meth:`keys`, or the file's order, :meth:`offset_keys`, when the
        calls follow it) are submitted while this one is read, each into
        its own memory, up to ``read_ahead`` bytes. A call for a tensor
        read ahead waits for its own read only. Tensors read ahead but
        skipped are dropped; after three calls in a row that the order did
        not foresee, the handle stops reading ahead. :meth:`close` waits
        for what is still being read and frees it. The bytes returned are
        always the file's: a read cut short raises.

        Raises
        ------
        TensorNotFoundError
            No such tensor (a :class:`SafetensorsError` and a :class:`KeyError`).
        SafetensorsError
            The file is closed, or holds fewer bytes than the header says.
        OSError, HipFileException
            The read failed.
        KeyboardInterrupt
            Ctrl-C while waiting; the read goes on, and asking for the
            tensor again returns it.

        See Also
        --------
        hipFileRead, hipMemcpyAsync
        """
        with self._lock:
            fh = self._open_fh()
            info = self._info(name)
            if (isinstance(fh, HostFile) or info.dtype.bits % 8
                    or self._reader not in ("auto", "stream")):
                return self._read_locked(fh, [info])[name]
            return self._ahead.get(self, fh, info)

    def get_slice(self, name: str) -> SafeSlice:
        """A lazy view of one tensor: its shape and dtype, and indexing that
        reads only the rows it needs.

        Raises
        ------
        TensorNotFoundError
            No such tensor.
        SafetensorsError
            The file is closed.
        """
        self._open_fh()
        return SafeSlice(self, self._info(name))

    def load_all(self) -> dict[str, Any]:
        """Every tensor, in one allocation (as :func:`load_file`), in file order.

        Raises
        ------
        SafetensorsError
            The file is closed.
        """
        self._open_fh()
        return self._read(list(self._header.tensors.values()))

    def get_tensors(self) -> dict[str, Any]:
        """Every tensor, by name (safetensors' ``SafeOpen.get_tensors``); the
        same as :meth:`load_all`.

        Raises
        ------
        SafetensorsError
            The file is closed.
        """
        return self.load_all()

    def close(self) -> None:
        """Wait for the tensors still being read ahead and free them, then
        close the file (idempotent).

        Raises
        ------
        KeyboardInterrupt
            Ctrl-C while waiting: the file stays open with what is left;
            call ``close()`` again.
        """
        with self._lock:
            self._ahead.drop_all()
        self._close_fh()

    def __enter__(self) -> SafeOpen:
        self._open_fh()
        return self

    def __repr__(self) -> str:
        state = "closed" if self._fh is None else "open"
        return f"<hipfile.safetensors.SafeOpen {self._path!r} {state}>"


def safe_open(path: str | os.PathLike[str], framework: str = "hip", device: Any = None, *,
              backend: str | None = None, direct: bool | None = None,
              task_size: int | None = None, reader: str = "auto",
              strict: bool = False, read_ahead: int | None = None) -> SafeOpen:
    """Open a file for lazy tensor access; see :class:`SafeOpen`. ``backend``
    (safetensors' ``"mmap"``/``"pread"``) is checked and has no other effect:
    hipFile reads either way.

    Raises
    ------
    SafetensorsError, TypeError
        An unknown ``backend``, or what :class:`SafeOpen` raises.
    """
    check_backend(backend)
    return SafeOpen(path, framework, device, direct=direct, task_size=task_size,
                    reader=reader, strict=strict, read_ahead=read_ahead)


# --------------------------------------------------------------------------
# One tensor at a time, and reading ahead
# --------------------------------------------------------------------------

#: A tensor of at least this many bytes is read from its aligned range (its
#: view starts inside its memory), so that an ``O_DIRECT`` read stays
#: aligned; a smaller one gets memory of its own size.
ALIGNED_MIN = 1 << 20

#: Calls in a row outside the foreseen order that stop the read-ahead.
MISSES_TO_STOP = 3


def _read_ahead_bytes(value: int | None) -> int:
    """``read_ahead`` checked; None is the setting.

    Raises
    ------
    TypeError, ValueError
        Not an int, or negative.
    """
    if value is None:
        from hipfile import defaults

        return defaults.safetensors_read_ahead()
    value = as_int(value, "read_ahead")
    if value < 0:
        raise ValueError(f"read_ahead must be >= 0, got {value}")
    return value


class _Pending:
    """One tensor submitted: its memory, where its bytes land in it, the
    engine's handle and the bytes the read must give."""

    __slots__ = ("addr", "handle", "info", "need", "offset", "owner")

    def __init__(self, info: TensorInfo, owner: Any, addr: int, offset: int, handle: Any,
                 need: int) -> None:
        self.info = info
        self.owner = owner
        self.addr = addr
        self.offset = offset
        self.handle = handle
        self.need = need


def _submit_one(so: SafeOpen, fh: FileHandle, info: TensorInfo,
                runs: Sequence[tuple[int, int]] | None = None, *,
                now: bool = False) -> _Pending:
    """Submit the read of one tensor (``info``: its dtype and shape, and
    where its bytes begin) to the engine and return at once.

    The reads follow torch's current stream for torch tensors (the caching
    allocator hands out memory in that stream's order), else the null
    stream. ``now``: the caller waits for it at once; its copies go to that
    stream after the work before them (a small read is then done by the
    submitting thread). Otherwise (a read ahead) they run on the engine's
    own stream once that stream has passed this point (``ordered=False``),
    so that work the caller enqueues meanwhile never waits behind a read
    ahead; the result is handed over only after its read is seen complete.

    ``runs``: ``(file offset, bytes)`` pieces that, one after the other,
    make the tensor's bytes (a slice's rows), read as one operation;
    default the tensor's own range.
    """
    header = so._header
    n = info.nbytes
    if runs is None:
        runs = [(header.data_offset + info.begin, n)]
    task = so._task_size
    if len(runs) == 1 and n >= ALIGNED_MIN:
        begin = runs[0][0]
        first = begin - begin % ALIGNMENT
        span = -(-(begin + n) // ALIGNMENT) * ALIGNMENT - first
        owner, addr, _ = allocate(so._framework, so._device, span + ALIGNMENT)
        at = (-addr) % ALIGNMENT
        # whole pages: an O_DIRECT read stays aligned; the tensor starts inside
        runs = [(first, span)]
        offset, need = at + begin - first, begin - first + n
    else:
        if so._framework == "torch":
            # memory of the tensor's own dtype and shape: it is the result
            owner = _torch_empty(so, info)
            addr = int(owner.data_ptr())
        else:
            owner, addr, _ = allocate(so._framework, so._device, max(n, 1))
        at = 0
        offset = -1 if so._framework == "torch" else 0    # -1: `owner` is the result
        need = n
    ranges = []          # the runs one after the other from `at`, none over MAX_RANGE
    for off, size in runs:
        ranges += [(min(MAX_RANGE, size - d), off + d, at + d)
                   for d in range(0, size, MAX_RANGE)]
        at += size
    length = at
    handle = None
    if need:
        # the handle holds `owner` until the read ends, whoever drops it
        target = owner if so._framework == "torch" else Buffer(_Owned(owner, addr), length)
        stream = torch_stream(so._framework, so._device)
        if len(ranges) == 1:
            size, off, at = ranges[0]
            handle = fh.pread_async(target, size, off, at, stream, task_size=task,
                                    ordered=now, prefetch=now)
        else:
            handle = fh.pread_async_scatter(target, ranges, stream, task_size=task,
                                            ordered=now, prefetch=now)
    return _Pending(info, owner, addr, offset, handle, need)


class _Owned:
    """A device address that keeps its allocation alive (``int()`` is the
    address) for the hip framework's :class:`DeviceAllocation`."""

    __slots__ = ("addr", "owner")

    def __init__(self, owner: Any, addr: int) -> None:
        self.owner = owner
        self.addr = addr

    def __int__(self) -> int:
        return self.addr


def _finish(so: SafeOpen, p: _Pending) -> Any:
    """Wait for one submitted tensor and return it.

    Raises
    ------
    SafetensorsError
        The file held fewer bytes than the header says.
    OSError, HipFileException, KeyboardInterrupt
        From the wait.
    """
    got = p.handle.wait() if p.handle is not None else 0
    if got < p.need:
        raise SafetensorsError(f"{so._path}: read {got} of {p.info.nbytes} bytes of "
                               f"{p.info.name!r}: the file changed or is truncated")
    if p.offset < 0:
        return p.owner                      # the result itself
    return make_view(so._framework, so._device, p.owner, p.addr, p.offset, p.info)


def _torch_empty(so: SafeOpen, info: TensorInfo) -> Any:
    """An empty torch tensor of ``info``'s dtype and shape on the handle's
    device."""
    import torch

    device = so._torch_device
    if device is None:
        device = so._torch_device = torch.device(so._device.torch())
    return torch.empty(info.shape, dtype=torch_dtype(info), device=device)


class _ReadAhead:
    """The tensors a handle has submitted ahead of the caller, in the order
    it expects the calls, within a byte budget."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.window: dict[str, _Pending] = {}   # submission order
        self.bytes = 0
        self.orders: list[tuple[list[str], dict[str, int]]] = []   # by name, by offset
        self.order: list[str] | None = None      # the order followed
        self.position: dict[str, int] = {}
        self.next = 0                            # index in `order` of the next to submit
        self.last: str | None = None             # the last tensor returned
        self.misses = 0

    def _expected(self, so: SafeOpen, name: str) -> bool:
        """Whether ``name`` is where an order puts it (the first call: the
        first of an order; later: the one after the last returned); follows
        that order (the file's when only it foresaw the call, the names'
        when neither did on the first call)."""
        if not self.orders:
            for keys in (so.keys(), so.offset_keys()):
                self.orders.append((keys, {k: i for i, k in enumerate(keys)}))
        for keys, position in sorted(self.orders, key=lambda o: o[0] is not self.order):
            if self.last is None:
                hit = bool(keys) and keys[0] == name
            else:
                i = position.get(self.last, -1)
                hit = 0 <= i < len(keys) - 1 and keys[i + 1] == name
            if hit:
                self.order, self.position = keys, position
                return True
        if self.order is None:
            self.order, self.position = self.orders[0]
        return False

    def get(self, so: SafeOpen, fh: FileHandle, info: TensorInfo) -> Any:
        name = info.name
        held = self.window.get(name)
        if self.budget <= 0 or self.misses >= MISSES_TO_STOP:
            return self._take(so, held or _submit_one(so, fh, info, now=True))
        if held is not None:
            p = held
            self.misses = 0
            for k in list(self.window):          # skipped: dropped
                if k == name:
                    break
                self._drop(k)
        else:
            if self._expected(so, name):
                self.misses = 0
            elif self.last is not None:
                self.misses += 1
            self.drop_all(wait=False)
            assert self.order is not None
            self.next = self.position.get(name, len(self.order) - 1) + 1
            p = _submit_one(so, fh, info, now=True)
            self.window[name] = p
            self.bytes += info.nbytes
        self._fill(so, fh, name)
        return self._take(so, p)

    def _fill(self, so: SafeOpen, fh: FileHandle, asked: str) -> None:
        """Submit the next tensors of the order while the budget has room
        (one at least when nothing else is ahead); a failure to submit one
        (no memory) stops reading ahead."""
        if self.order is None or self.misses >= MISSES_TO_STOP:
            return
        ahead = self.bytes - (self.window[asked].info.nbytes if asked in self.window else 0)
        while self.next < len(self.order):
            k = self.order[self.next]
            if k in self.window:
                self.next += 1
                continue
            info = so._header.tensors[k]
            if info.dtype.bits % 8:
                self.next += 1
                continue
            if ahead and ahead + info.nbytes > self.budget:
                return
            try:
                p = _submit_one(so, fh, info)
            except Exception:
                self.misses = MISSES_TO_STOP      # no room: read on demand from here
                return
            self.window[k] = p
            self.bytes += info.nbytes
            ahead += info.nbytes
            self.next += 1

    def _take(self, so: SafeOpen, p: _Pending) -> Any:
        """Wait for ``p`` and return its tensor; it leaves the window unless
        the wait was interrupted (asking again returns it)."""
        name = p.info.name
        try:
            out = _finish(so, p)
        except BaseException:
            if p.handle is None or p.handle.done():
                self._drop(name)
            raise
        if self.window.pop(name, None) is not None:
            self.bytes -= p.info.nbytes
        self.last = name
        return out

    def _drop(self, name: str) -> None:
        p = self.window.pop(name, None)
        if p is not None:
            self.bytes -= p.info.nbytes

    def drop_all(self, wait: bool = True) -> None:
        """Drop every tensor read ahead; ``wait``: after its read has ended,
        so that its memory is free on return (interruptible: what is left
        stays)."""
        for name in list(self.window):
            p = self.window[name]
            if wait and p.handle is not None:
                try:
                    p.handle.wait()
                except Exception:
                    pass                          # never asked for: its error is moot
            self._drop(name)


# --------------------------------------------------------------------------
# Slices
# --------------------------------------------------------------------------

#: A selection into device memory whose runs are more than SCATTER_RUNS and
#: shorter than SCATTER_MEAN bytes on average reads the span they cover and
#: gathers on the GPU (framework "hip", which has no gather, reads the runs).
SCATTER_RUNS = 64
SCATTER_MEAN = 1024

#: A slice read enumerates at most this many runs of bytes; past that the
#: innermost enumerated dimension is read as one span (from its first
#: selected element to its last), coarser runs that the read planner merges.
MAX_RUNS = 1 << 14


@dataclass(frozen=True)
class _Dim:
    """One dimension of a selection: ``start``, ``stop`` (as asked, checked
    against the size), ``step``, and whether an int selected it (the
    dimension is dropped from the result)."""

    start: int
    stop: int
    step: int
    select: bool

    def count(self) -> int:
        return len(range(self.start, self.stop, self.step))


class SafeSlice:
    """One tensor of an open file, indexed lazily (``safe_open(...).get_slice``).

    Indexing takes what safetensors' slices take: ints (negative counted
    from the end), slices with a positive step, one ellipsis, a tuple of
    them, and the empty list. Only the bytes holding the selected elements
    are read: a slice of rows is one contiguous range, and a selection in
    inner dimensions reads its runs of contiguous bytes, coalesced as the
    loader coalesces ranges (gaps up to 1 MiB are read through), all in one
    operation.
    """

    def __init__(self, owner: SafeOpen, info: TensorInfo) -> None:
        self._owner = owner
        self._info = info

    def get_shape(self) -> list[int]:
        """The tensor's shape."""
        return list(self._info.shape)

    def get_dtype(self) -> str:
        """The tensor's dtype name (``"F32"``, ``"BF16"``, ...)."""
        return self._info.dtype.name

    @property
    def shape(self) -> list[int]:
        """The tensor's shape."""
        return self.get_shape()

    def __len__(self) -> int:
        if not self._info.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._info.shape[0]

    def __getitem__(self, index: Any) -> Any:
        """Read the selected part: a new tensor in C order, as safetensors
        returns it (for ``framework="hip"``, a :class:`DeviceTensor` view of
        the bytes read, which must then be one contiguous range).

        Raises
        ------
        SafetensorsError
            What safetensors refuses, with its message: an index out of
            bounds, a step that is not positive, two ellipses, a non-empty
            list, more indices than dimensions, an index of another type;
            a strided selection with ``framework="hip"``; the file is
            closed.
        TypeError
            A slice bound that is not an integer.
        """
        info = self._info
        shape = tuple(info.shape)
        dims, display = _selection(index, shape)
        _check_bounds(dims, display, shape)
        full = dims + [_Dim(0, n, 1, False) for n in shape[len(dims):]]
        framework = self._owner._framework
        if info.dtype.bits % 8:
            return self._packed(full)
        isz = info.dtype.bits // 8
        strides = _strides(shape)
        counts = [d.count() for d in full]
        out_shape = tuple(c for c, d in zip(counts, full, strict=True) if not d.select)
        out_strides = tuple(d.step * s * isz for d, s in zip(full, strides, strict=True)
                            if not d.select)
        n_out = math.prod(counts)
        first = sum(d.start * s for d, s in zip(full, strides, strict=True)) if n_out else 0
        runs = _runs(full, counts, shape, strides, isz) if n_out else []
        if not isinstance(self._owner._open_fh(), HostFile) and self._owner._reader in (
                "auto", "stream"):
            got = self._device_read(first, runs, isz, out_shape, n_out)
            if got is not None:
                return got
        last = first + sum((c - 1) * d.step * s for c, d, s in
                           zip(counts, full, strides, strict=True)) if n_out else -1
        window = TensorInfo(info.name, DTYPES["U8"], ((last + 1 - first) * isz,),
                            info.begin + first * isz, info.begin + (last + 1) * isz)
        raw = self._owner._read([window], {info.name: runs})[info.name]
        contiguous = n_out * isz == window.nbytes
        if framework == "hip":
            if not contiguous:
                raise SafetensorsError(
                    "a DeviceTensor slice must be one contiguous range of the tensor (rows of "
                    "the first dimensions, whole inner dimensions): use framework 'pt' or "
                    "'numpy' for strided selections")
            return DeviceTensor(raw, raw.ptr, info.dtype, out_shape, raw.device)
        if framework == "numpy":
            import numpy as np

            dt = numpy_dtype(info)
            if raw.ctypes.data % max(1, dt.alignment):   # misaligned in the file: copy
                raw = raw.copy()
            view = np.ndarray(out_shape, dt, buffer=raw, strides=out_strides)
            return view if view.flags.c_contiguous else view.copy()
        import torch

        tdt = torch_dtype(info)
        if int(raw.data_ptr()) % isz:                    # misaligned in the file: copy
            raw = raw.clone()
        data = raw.view(tdt)
        return torch.as_strided(data, out_shape, tuple(s // isz for s in out_strides)
                                ).contiguous()

    def _device_read(self, first: int, rel: list[tuple[int, int]], isz: int,
                     out_shape: tuple[int, ...], n_out: int) -> Any:
        """A selection into device memory whose runs of bytes ``rel``
        (relative to its first element, ``first``), one after the other,
        are its C-order result (rows of whole inner dimensions, or a column
        block: the rows' parts): read straight into the result's own
        memory, one operation for all runs. None for other selections
        (more runs than :data:`MAX_RUNS`, or many tiny ones)."""
        info = self._info
        result = TensorInfo(info.name, info.dtype, out_shape, 0, n_out * isz)
        if sum(e - b for b, e in rel) != n_out * isz:
            return None
        if (len(rel) > SCATTER_RUNS and n_out * isz < SCATTER_MEAN * len(rel)
                and self._owner._framework != "hip"):
            return None      # tiny runs: one read of their span, then a copy on the GPU
        base = self._owner._header.data_offset + info.begin + first * isz
        runs = _merge([(base + b, e - b) for b, e in rel])
        owner = self._owner
        with owner._lock:
            fh = owner._open_fh()
            assert isinstance(fh, FileHandle)
            return _finish(owner, _submit_one(owner, fh, result, runs, now=True))

    def _packed(self, full: list[_Dim]) -> Any:
        """A selection of a tensor whose elements are not whole bytes (F4,
        F6): the tensor is read whole and indexed by the framework."""
        info = self._info
        whole = all(not d.select and (d.start, d.stop, d.step) == (0, n, 1)
                    for d, n in zip(full, info.shape, strict=True))
        data = self._owner._read([info])[info.name]
        if whole:
            return data
        if self._owner._framework != "torch":
            raise SafetensorsError(f"tensor {info.name!r}: {info.dtype.name} elements are not "
                                   "whole bytes; slice it with framework 'pt', or read it "
                                   "with get_tensor")
        return data[tuple(d.start if d.select else slice(d.start, d.stop, d.step)
                          for d in full)].contiguous()


def _merge(runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``(offset, bytes)`` runs with each run that continues the previous
    one in the file joined to it."""
    out: list[tuple[int, int]] = []
    for off, n in runs:
        if out and out[-1][0] + out[-1][1] == off:
            out[-1] = (out[-1][0], out[-1][1] + n)
        else:
            out.append((off, n))
    return out


def _strides(shape: Sequence[int]) -> list[int]:
    """Row-major strides in elements."""
    out = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        out[k] = out[k + 1] * shape[k + 1]
    return out


def _runs(full: list[_Dim], counts: list[int], shape: Sequence[int], strides: list[int],
          isz: int) -> list[tuple[int, int]]:
    """The byte runs ``(begin, end)`` of a selection with at least one
    element, relative to its first element, in file order.

    The inner dimensions taken whole, and the next one when its step is 1,
    make one run; the dimensions outside it are enumerated, at most
    :data:`MAX_RUNS` runs (while there would be more, the innermost
    enumerated dimension joins the run, from its first selected index to its
    last).
    """
    import numpy as np

    k = len(full)
    run = 1                         # elements of one run
    while k > 0:
        d = full[k - 1]
        whole = not d.select and (d.start, d.stop, d.step) == (0, shape[k - 1], 1)
        if d.step == 1:
            run += (counts[k - 1] - 1) * strides[k - 1]
            k -= 1
        if not whole:
            break
    outer = list(range(k))
    while outer and math.prod(counts[j] for j in outer) > MAX_RUNS:
        j = outer.pop()
        run += (counts[j] - 1) * full[j].step * strides[j]
    offsets = np.zeros(1, np.int64)
    for j in outer:
        steps = np.arange(counts[j], dtype=np.int64) * (full[j].step * strides[j])
        offsets = (offsets[:, None] + steps[None, :]).reshape(-1)
    return [(int(o) * isz, (int(o) + run) * isz) for o in offsets]


def _selection(index: Any, shape: Sequence[int]) -> tuple[list[_Dim], list[str]]:
    """The dimensions an index selects (one per indexed dimension, the
    ellipsis expanded) and safetensors' display of each.

    Raises
    ------
    SafetensorsError
        What safetensors refuses while reading an index: a non-empty list,
        two ellipses, a step that is not positive, an item that is not an
        int, a slice or an ellipsis, a negative index below minus the size,
        more indices than dimensions.
    TypeError
        A slice bound that is not an integer.
    """
    if isinstance(index, list):
        if index:
            raise SafetensorsError("Non empty lists are not implemented")
        items: list[Any] = [slice(0, 0)]
    elif isinstance(index, tuple):
        items = list(index)
    else:
        items = [index]
    if sum(1 for it in items if it is Ellipsis) > 1:
        raise SafetensorsError("Only one ellipsis (...) is allowed in slice index")
    explicit = sum(1 for it in items if it is not Ellipsis)
    dims: list[_Dim] = []
    display: list[str] = []
    for item in items:
        k = len(dims)
        if item is Ellipsis:
            for n in shape[k:k + max(0, len(shape) - explicit)]:
                dims.append(_Dim(0, n, 1, False))
                display.append(":")
            continue
        size = shape[k] if k < len(shape) else 0
        if isinstance(item, slice):
            step = 1 if item.step is None else operator.index(item.step)
            if step <= 0:
                raise SafetensorsError(f"Slice step must be a positive integer, got {step}")
            start = _bound(item.start, size, 0)
            stop = _bound(item.stop, size, size)
            dims.append(_Dim(start, stop, step, False))
            display.append(f"{'' if item.start is None else start}:"
                           f"{'' if item.stop is None else stop}"
                           f"{'' if step == 1 else f':{step}'}")
            continue
        try:
            idx = operator.index(item)
        except TypeError:
            raise SafetensorsError(f"Unsupported slice index at position {k}: expected slice, "
                                   "int, or ellipsis") from None
        if idx < 0:
            if size + idx < 0:
                raise SafetensorsError(f"Invalid index {idx} for dimension {k} of size {size}")
            idx += size
        dims.append(_Dim(idx, idx + 1, 1, True))
        display.append(str(idx))
    if len(dims) > len(shape):
        raise SafetensorsError(f"Error during slicing [{', '.join(display)}] with shape "
                               f"{list(shape)}: more slicing indexes than dimensions in tensor")
    return dims, display


def _check_bounds(dims: list[_Dim], display: list[str], shape: Sequence[int]) -> None:
    """Refuse a start at or past the size, or a stop past it, as safetensors
    does: the last dimension first.

    Raises
    ------
    SafetensorsError
        An index out of bounds, with safetensors' message.
    """
    for i in reversed(range(len(dims))):
        d, n = dims[i], shape[i]
        if d.start >= n or d.stop > n:
            asked = d.start if d.start >= n else d.stop - 1
            raise SafetensorsError(
                f"Error during slicing [{', '.join(display)}] with shape {list(shape)}: index "
                f"{asked} out of bounds for tensor dimension #{i} of size {n}")


def _bound(value: Any, dim: int, default: int) -> int:
    """A slice bound: ``None`` is ``default``; a negative one counts from the
    end, as Python's slices do, and stops at 0."""
    if value is None:
        return default
    v = operator.index(value)
    return max(0, dim + v) if v < 0 else v
