"""One tensor read at a time by a ``safe_open`` handle, and the tensors it
reads ahead of the caller."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hipfile._interop import as_int
from hipfile.buffer import Buffer
from hipfile.file import FileHandle
from hipfile.file._transfer import host_transfer
from hipfile.safetensors._device import (
    HUGE_HOST_MIN,
    allocate,
    host_memory,
    make_view,
    numpy_dtype,
    torch_dtype,
    torch_stream,
)
from hipfile.safetensors._header import ALIGNMENT, SafetensorsError, TensorInfo
from hipfile.safetensors._load import HOST_INLINE_CAP, MAX_RANGE

if TYPE_CHECKING:
    from hipfile.safetensors._open import SafeOpen

#: A tensor of at least this many bytes is read from its aligned range (its
#: view starts inside its memory), so that an ``O_DIRECT`` read stays
#: aligned; a smaller one gets memory of its own size.
ALIGNED_MIN = 1 << 20

#: Calls in a row outside the foreseen order that stop the read-ahead.
MISSES_TO_STOP = 3


def read_ahead_bytes(value: int | None) -> int:
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


def submit_one(so: SafeOpen, fh: FileHandle, info: TensorInfo,
                runs: Any = None, *,
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
    make the tensor's bytes (a slice's rows), read as one operation: a
    list of tuples, or an ``(N, 2)`` integer array of many (see
    :func:`hipfile.safetensors._slice.plan_part`); default the tensor's own
    range.
    """
    n = info.nbytes
    if runs is None:
        if n < ALIGNED_MIN and so._framework == "torch" and n:
            return _submit_small_torch(so, fh, info, now)
        runs = [(so._header.data_offset + info.begin, n)]
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
    ranges: Any
    if not isinstance(runs, list) and len(runs) > 1 and int(runs[:, 1].max()) <= MAX_RANGE:
        # many runs (a column block, a run per row) as an (N, 2) array: the
        # (size, file offset, buffer offset) ranges as an (N, 3) array, which
        # the engine reads without a Python object per range
        import numpy as np

        sizes = runs[:, 1]
        ranges = np.empty((len(runs), 3), np.int64)
        ranges[:, 0] = sizes
        ranges[:, 1] = runs[:, 0]
        ranges[0, 2] = at
        np.cumsum(sizes[:-1], out=ranges[1:, 2])
        ranges[1:, 2] += at
        at += int(sizes.sum())
    else:
        ranges = []      # the runs one after the other from `at`, none over MAX_RANGE
        for off, size in runs:
            off, size = int(off), int(size)
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


def _submit_small_torch(so: SafeOpen, fh: FileHandle, info: TensorInfo, now: bool) -> _Pending:
    """:func:`submit_one` of a whole tensor of less than ALIGNED_MIN bytes
    into a torch tensor of its own dtype and shape (the small calls of a
    key-by-key loop): one range, no lists."""
    owner = _torch_empty(so, info)
    n = info.nbytes
    handle = fh.pread_async(owner, n, so._header.data_offset + info.begin, 0,
                            torch_stream("torch", so._device), task_size=so._task_size,
                            ordered=now, prefetch=now)
    return _Pending(info, owner, 0, -1, handle, n)    # offset -1: `owner` is the result


class _Owned:
    """A device address that keeps its allocation alive (``int()`` is the
    address) for the hip framework's :class:`DeviceAllocation`."""

    __slots__ = ("addr", "owner")

    def __init__(self, owner: Any, addr: int) -> None:
        self.owner = owner
        self.addr = addr

    def __int__(self) -> int:
        return self.addr


def finish(so: SafeOpen, p: _Pending) -> Any:
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


_torch: Any = None     # the torch module, once imported


def _torch_empty(so: SafeOpen, info: TensorInfo) -> Any:
    """An empty torch tensor of ``info``'s dtype and shape on the handle's
    device (torch and the device looked up once: a small tensor's
    get_tensor is a few microseconds of Python around its read)."""
    global _torch
    torch = _torch
    if torch is None:
        import torch as torch_module

        torch = _torch = torch_module
    device = so._torch_device
    if device is None:
        device = so._torch_device = torch.device(so._device.torch())
    return torch.empty(info.shape, dtype=torch_dtype(info), device=device)


def host_read_max(so: SafeOpen) -> int:
    """The most bytes a host-memory read of one tensor or slice makes in
    the calling thread: one task of the handle's pool (``task_size``, else
    :func:`hipfile.parallel.default_task_size`), which the pool would read
    on one thread too, after a hand-off; at most :data:`HOST_INLINE_CAP`."""
    if so._task_size is not None:
        return min(int(so._task_size), HOST_INLINE_CAP)
    from hipfile.parallel import _pool_settings

    return min(_pool_settings()[1], HOST_INLINE_CAP)     # read again after defaults.set


def read_host(so: SafeOpen, fd: int, info: TensorInfo, file_offset: int) -> Any:
    """``info.nbytes`` bytes at ``file_offset`` into new host memory of
    ``info``'s dtype and shape (torch or numpy), read with ``preadv`` in the
    calling thread: a whole tensor, or a slice whose bytes are one range of
    the file.

    Raises
    ------
    SafetensorsError
        The file holds fewer bytes than the header says; the framework has
        no such dtype.
    OSError
        The read failed.

    See Also
    --------
    preadv
    """
    out: Any
    raw: Any
    n = info.nbytes
    huge = host_memory(n) if n >= HUGE_HOST_MIN else None
    if so._framework == "torch":
        import torch

        if huge is not None:
            out = torch.frombuffer(huge, dtype=torch.uint8).view(torch_dtype(info))
            out = out.view(info.shape)
        else:
            out = torch.empty(info.shape, dtype=torch_dtype(info))
        raw = out.view(-1).view(torch.uint8).numpy()
    else:
        import numpy as np

        if huge is not None:
            out = np.frombuffer(huge, numpy_dtype(info)).reshape(info.shape)
        else:
            out = np.empty(info.shape, numpy_dtype(info))
        raw = out.reshape(-1).view(np.uint8)
    got = host_transfer(False, fd, memoryview(raw), n, file_offset, 0)
    if got < n:
        raise SafetensorsError(f"{so._path}: read {got} of {n} bytes of {info.name!r}: "
                               "the file changed or is truncated")
    return out


class ReadAhead:
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
        # parts of tensors (slices) read ahead: (name, selection key; None:
        # the whole tensor) -> read, in submission order; on once the caller
        # reads parts
        self.parts: dict[tuple[str, Any], _Pending] = {}
        self.parts_on = False
        self.part_misses = 0
        self.part_next = 0                       # index in keys() of the next to foresee
        self.part_keys: tuple[list[str], dict[str, int]] | None = None   # keys(), positions

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
            part = self.parts.get((name, None)) if held is None and self.parts else None
            if part is not None:                 # foreseen whole by the read-ahead of parts
                return self._take_part(so, (name, None), part)
            return self._take(so, held or submit_one(so, fh, info, now=True))
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
            p = submit_one(so, fh, info, now=True)
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
                p = submit_one(so, fh, info)
            except Exception:
                self.misses = MISSES_TO_STOP      # no room: read on demand from here
                return
            self.window[k] = p
            self.bytes += info.nbytes
            ahead += info.nbytes
            self.next += 1

    def reading_parts(self) -> None:
        """The caller read part of a tensor (a slice): it reads parts, as a
        tensor-parallel rank does, so whole tensors read ahead would be
        read for nothing. Reading whole tensors ahead stops for good (what
        the window holds is dropped; reads in flight end in the background)
        and reading parts ahead starts (:meth:`get_part`)."""
        if self.misses < MISSES_TO_STOP:
            self.misses = MISSES_TO_STOP
            for name in list(self.window):
                self._drop(name)
            self.parts_on = self.budget > 0

    def get_part(self, so: SafeOpen, fh: FileHandle, name: str, selection: Any,
                 plan: Callable[[], tuple[TensorInfo, list[tuple[int, int]]] | None],
                 predict: Callable[[TensorInfo], Any], whole: bool = False) -> Any:
        """A part of tensor ``name`` (``selection``: what identifies it;
        ``plan()``: its dtype and shape and the file's runs that make it, or
        None where it is not read this way; ``whole``: all of it, which the
        whole tensor read ahead serves too): the one read ahead for it if
        there is one, else read now; None where ``plan`` says so. Then the
        parts ``predict`` foresees for the tensors that follow in
        :meth:`keys` order are submitted, within the byte budget; parts read
        ahead but skipped are dropped, and after three calls in a row that
        none served, reading parts ahead stops. A read ahead is taken only
        for the very selection asked, so the bytes are always the file's."""
        key: tuple[str, Any] = (name, selection)
        p = self.parts.get(key)
        if p is None and whole and (name, None) in self.parts:
            key = (name, None)
            p = self.parts[key]
        if p is None:
            planned = plan()
            if planned is None:
                return None
            if self.parts:
                self.part_misses += 1
                self.drop_parts(wait=False)
            p = submit_one(so, fh, planned[0], planned[1], now=True)
            self.parts[key] = p
            self.part_next = self._position(so, name) + 1
        else:
            self.part_misses = 0
            for k in list(self.parts):           # skipped: dropped
                if k == key:
                    break
                del self.parts[k]
        if self.parts_on and self.part_misses < MISSES_TO_STOP:
            self._fill_parts(so, fh, key, predict)
        return self._take_part(so, key, p)

    def _keys(self, so: SafeOpen) -> tuple[list[str], dict[str, int]]:
        if self.part_keys is None:
            keys = so.keys()
            self.part_keys = keys, {k: i for i, k in enumerate(keys)}
        return self.part_keys

    def _position(self, so: SafeOpen, name: str) -> int:
        keys, position = self._keys(so)
        return position.get(name, len(keys))

    def _fill_parts(self, so: SafeOpen, fh: FileHandle,
                    asked: tuple[str, Any], predict: Callable[[TensorInfo], Any]) -> None:
        """Submit the foreseen parts of the tensors after the last one
        submitted, while the budget has room (one at least); stop at a
        tensor ``predict`` cannot foresee. A failure to submit (no memory)
        stops reading parts ahead."""
        keys = self._keys(so)[0]
        ahead = sum(p.info.nbytes for k, p in self.parts.items() if k != asked)
        while self.part_next < len(keys):
            info = so._header.tensors[keys[self.part_next]]
            planned = predict(info)
            if planned is None:
                return
            part, runs, selection = planned
            key = (info.name, selection)
            if key not in self.parts:
                if ahead and ahead + part.nbytes > self.budget:
                    return
                try:
                    p = submit_one(so, fh, part, runs)
                except Exception:
                    self.part_misses = MISSES_TO_STOP   # no room: read on demand from here
                    return
                self.parts[key] = p
                ahead += part.nbytes
            self.part_next += 1

    def _take_part(self, so: SafeOpen, key: tuple[str, Any], p: _Pending) -> Any:
        """Wait for the part ``p`` and return it; it leaves the parts unless
        the wait was interrupted (asking again returns it)."""
        try:
            out = finish(so, p)
        except BaseException:
            if p.handle is None or p.handle.done():
                self.parts.pop(key, None)
            raise
        self.parts.pop(key, None)
        return out

    def drop_parts(self, wait: bool = True) -> None:
        """Drop every part read ahead (``wait``: after its read has ended;
        interruptible: what is left stays)."""
        for key in list(self.parts):
            _settle(self.parts[key], wait)
            self.parts.pop(key, None)

    def _take(self, so: SafeOpen, p: _Pending) -> Any:
        """Wait for ``p`` and return its tensor; it leaves the window unless
        the wait was interrupted (asking again returns it)."""
        name = p.info.name
        try:
            out = finish(so, p)
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
            _settle(self.window[name], wait)
            self._drop(name)
        self.drop_parts(wait)


def _settle(p: _Pending, wait: bool) -> None:
    """With ``wait``, wait for a read nobody asked for (its error is moot;
    Ctrl-C is not swallowed)."""
    if wait and p.handle is not None:
        try:
            p.handle.wait()
        except Exception:
            pass


