"""Slices of one tensor of an open file, read lazily: ``get_slice``."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hipfile.file import FileHandle
from hipfile.safetensors._device import (
    numpy_dtype,
    torch_dtype,
)
from hipfile.safetensors._header import DEFAULT_MAX_GAP, DTYPES, SafetensorsError, TensorInfo
from hipfile.safetensors._load import HostFile
from hipfile.safetensors._read import DeviceTensor
from hipfile.safetensors._tensor_read import host_read_max, read_host

if TYPE_CHECKING:
    from hipfile.safetensors._open import SafeOpen

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

    def covers(self, size: int) -> bool:
        """Whether it takes the whole of a dimension of ``size``."""
        return not self.select and (self.start, self.stop, self.step) == (0, size, 1)


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
        full = _rows(index, shape)
        if full is None:
            dims, display = _selection(index, shape)
            _check_bounds(dims, display, shape)
            full = dims + [_Dim(0, n, 1, False) for n in shape[len(dims):]]
        framework = self._owner._framework
        whole = all(d.covers(n) for d, n in zip(full, shape, strict=True))
        host = isinstance(self._owner._open_fh(), HostFile)
        if not whole and not host:      # host handles read nothing ahead
            with self._owner._lock:
                self._owner._ahead.reading_parts()
        if info.dtype.bits % 8:
            return self._packed(full, whole)
        if host:
            got = self._host_read(full)
            if got is not None:
                return got
        elif self._owner._reader == "stream":
            got = self._device_read(full, whole)
            if got is not None:
                return got
        isz = info.dtype.bits // 8
        strides = _strides(shape)
        counts = [d.count() for d in full]
        out_shape = tuple(c for c, d in zip(counts, full, strict=True) if not d.select)
        out_strides = tuple(d.step * s * isz for d, s in zip(full, strides, strict=True)
                            if not d.select)
        n_out = math.prod(counts)
        first = sum(d.start * s for d, s in zip(full, strides, strict=True)) if n_out else 0
        runs = _runs(full, counts, shape, strides, isz) if n_out else []
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

    def _host_read(self, full: list[_Dim]) -> Any:
        """A selection into host memory whose bytes are one range of the
        file (rows of whole inner dimensions) of at most one pool task,
        read by the calling thread straight into the result, under the
        handle's lock (a close waits for it); None for other selections
        (they go through the pool's plan)."""
        owner = self._owner
        planned = plan_part(owner._header, self._info, full, owner._framework)
        if planned is None:
            return None
        result, runs = planned
        if len(runs) != 1 or not 0 < result.nbytes <= host_read_max(owner):
            return None
        with owner._lock:
            fd = getattr(owner._open_fh(), "fd", None)
            if fd is None:
                raise SafetensorsError("File is closed")
            return read_host(owner, fd, result, runs[0][0])

    def _device_read(self, full: list[_Dim], whole: bool) -> Any:
        """A selection into device memory whose runs of bytes, one after
        the other, are its C-order result (rows of whole inner dimensions,
        or a column block: the rows' parts): read straight into the
        result's own memory, one operation for all runs, through the
        handle's read-ahead of parts (the same part of the tensors that
        follow is read while the caller takes this one). None for other
        selections (more runs than :data:`MAX_RUNS`, or many tiny ones).
        ``whole``: the selection is all of the tensor."""
        owner = self._owner
        info = self._info
        shape = tuple(info.shape)

        def plan() -> tuple[TensorInfo, list[tuple[int, int]]] | None:
            return plan_part(owner._header, info, full, owner._framework)

        def predict(nxt: TensorInfo) -> Foreseen | None:
            return predict_part(owner._header, full, shape, nxt, owner._framework)

        with owner._lock:
            fh = owner._open_fh()
            assert isinstance(fh, FileHandle)
            return owner._ahead.get_part(owner, fh, info.name, selection_key(full), plan,
                                         predict, whole)

    def _packed(self, full: list[_Dim], whole: bool) -> Any:
        """A selection of a tensor whose elements are not whole bytes (F4,
        F6): the tensor is read whole and indexed by the framework
        (``whole``: the selection is the whole tensor)."""
        info = self._info
        data = self._owner._read([info])[info.name]
        if whole:
            return data
        if self._owner._framework != "torch":
            raise SafetensorsError(f"tensor {info.name!r}: {info.dtype.name} elements are not "
                                   "whole bytes; slice it with framework 'pt', or read it "
                                   "with get_tensor")
        return data[tuple(d.start if d.select else slice(d.start, d.stop, d.step)
                          for d in full)].contiguous()


def plan_part(header: Any, info: TensorInfo, full: list[_Dim], framework: str
              ) -> tuple[TensorInfo, Any] | None:
    """A selection (``full``: one :class:`_Dim` per dimension) of ``info``
    read straight into its result: the result's dtype, shape and bytes, and
    the ``(file offset, bytes)`` runs that, one after the other, are its
    C-order bytes (planned with numpy, as :func:`_merged_runs` gives them:
    no Python object per run where there are many); None where its runs are not its result or
    are many tiny ones (framework "hip" excepted)."""
    isz = info.dtype.bits // 8
    shape = tuple(info.shape)
    if full and not full[0].select and full[0].step == 1 and all(
            d.covers(n) for d, n in zip(full[1:], shape[1:], strict=True)):
        # rows of whole inner dimensions: one range (the tensor-parallel row split)
        inner = math.prod(shape[1:]) * isz
        rows = max(0, full[0].stop - full[0].start)
        result = TensorInfo(info.name, info.dtype, (rows, *shape[1:]), 0, rows * inner)
        if not rows * inner:
            return result, []
        return result, [(header.data_offset + info.begin + full[0].start * inner,
                         rows * inner)]
    strides = _strides(shape)
    counts = [d.count() for d in full]
    out_shape = tuple(c for c, d in zip(counts, full, strict=True) if not d.select)
    n_out = math.prod(counts)
    result = TensorInfo(info.name, info.dtype, out_shape, 0, n_out * isz)
    if not n_out:
        return result, []
    offsets, run = _run_offsets(full, counts, shape, strides)
    nruns = len(offsets)
    if nruns * run != n_out:
        return None
    if (nruns > SCATTER_RUNS and n_out * isz < SCATTER_MEAN * nruns
            and framework != "hip"):
        return None      # tiny runs: one read of their span, then a copy on the GPU
    first = sum(d.start * s for d, s in zip(full, strides, strict=True))
    base = header.data_offset + info.begin + first * isz
    return result, _merged_runs(offsets, run, isz, base)


#: Runs up to this many are a list of tuples; more are an array.
RUNS_AS_LIST = 16


def _merged_runs(offsets: Any, run: int, isz: int, base: int) -> Any:
    """``(file offset, bytes)`` of runs of ``run`` elements at element
    ``offsets`` (ascending) from file offset ``base``, each run that
    continues the previous one in the file joined to it: a list of tuples
    of ints for up to :data:`RUNS_AS_LIST` runs, else an ``(N, 2)`` int64
    array."""
    import numpy as np

    if len(offsets) == 1:     # one run (rows): none of numpy's few-us calls on tiny arrays
        return [(base + int(offsets[0]) * isz, run * isz)]
    begins, lengths = _joined(offsets, run * isz, isz, 0)
    if len(begins) <= RUNS_AS_LIST:
        return [(base + int(b), int(k)) for b, k in zip(begins, lengths, strict=True)]
    out = np.empty((len(begins), 2), np.int64)
    out[:, 0] = begins + base
    out[:, 1] = lengths
    return out


def _joined(offsets: Any, run_bytes: int, isz: int, max_gap: int) -> tuple[Any, Any]:
    """Runs of ``run_bytes`` at element ``offsets`` (ascending, at least
    one), each run that begins at most ``max_gap`` bytes after the previous
    one ends joined to it with the bytes between: the joined ranges' first
    bytes (relative to element 0) and lengths, two int64 arrays."""
    import numpy as np

    begins = offsets * isz
    cut = np.flatnonzero(np.diff(begins) > run_bytes + max_gap) + 1
    firsts = np.concatenate(([0], cut))
    lasts = np.concatenate((cut - 1, [len(begins) - 1]))
    return begins[firsts], begins[lasts] + run_bytes - begins[firsts]


def selection_key(full: list[_Dim]) -> tuple[tuple[int, int, int, bool], ...]:
    """What identifies a selection of a tensor (its bytes follow from it)."""
    return tuple((d.start, d.stop, d.step, d.select) for d in full)


#: A part foreseen: its dtype and shape, the runs that make it and its
#: selection's key (runs and key None: the whole tensor, as get_tensor reads it).
Foreseen = tuple[TensorInfo, Any, "tuple[tuple[int, int, int, bool], ...] | None"]


def predict_part(header: Any, full: list[_Dim], shape: tuple[int, ...], info: TensorInfo,
                 framework: str) -> Foreseen | None:
    """The part of ``info`` a caller who took the selection ``full`` of a
    tensor of ``shape`` likely asks for next, as a tensor-parallel rank
    does: for a tensor of as many dimensions, each dimension taken whole
    where it was, else the same share of it (``r*n//R`` to
    ``(r+1)*n//R`` scales exactly from one size to the next); for a tensor
    of other dimensions, the whole tensor (``get_tensor``: runs None).
    None where the share does not carry over exactly (a step, an int
    index, a size it does not divide) or the tensor is empty."""
    if not info.nbytes or info.dtype.bits % 8:
        return None
    if len(info.shape) != len(shape) or not shape:
        return info, None, None
    dims = []
    for d, n, m in zip(full, shape, info.shape, strict=True):
        if d.covers(n):
            dims.append(_Dim(0, m, 1, False))
        elif d.step != 1 or d.select or (d.start * m) % n or (d.stop * m) % n:
            return None
        else:
            dims.append(_Dim(d.start * m // n, d.stop * m // n, 1, False))
    if any(not d.count() for d in dims):
        return None
    planned = plan_part(header, info, dims, framework)
    return None if planned is None else (planned[0], planned[1], selection_key(dims))


def _strides(shape: Sequence[int]) -> list[int]:
    """Row-major strides in elements."""
    out = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        out[k] = out[k + 1] * shape[k + 1]
    return out


def _runs(full: list[_Dim], counts: list[int], shape: Sequence[int], strides: list[int],
          isz: int) -> list[tuple[int, int]]:
    """The byte ranges ``(begin, end)`` to read for a selection with at
    least one element, relative to its first element, in file order: its
    runs (see :func:`_run_offsets`), those at most
    :data:`~hipfile.safetensors._header.DEFAULT_MAX_GAP` apart joined with
    the bytes between them, as the read planner would read them anyway
    (planned with numpy: a column block of a large matrix has a run per
    row).
    """
    offsets, run = _run_offsets(full, counts, shape, strides)
    begins, lengths = _joined(offsets, run * isz, isz, DEFAULT_MAX_GAP)
    return [(int(b), int(b + k)) for b, k in zip(begins, lengths, strict=True)]


def _run_offsets(full: list[_Dim], counts: list[int], shape: Sequence[int],
                 strides: list[int]) -> tuple[Any, int]:
    """The runs of contiguous elements of a selection with at least one
    element: an int64 array of each run's first element relative to the
    selection's first, in file order, and the elements of one run.

    The inner dimensions taken whole, and the next one when its step is 1,
    make one run; the dimensions outside it are enumerated, at most
    :data:`MAX_RUNS` runs (while there would be more, the innermost
    enumerated dimension joins the run, from its first selected index to its
    last)."""
    import numpy as np

    k = len(full)
    run = 1                         # elements of one run
    while k > 0:
        d = full[k - 1]
        whole = d.covers(shape[k - 1])
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
        if counts[j] == 1:
            continue
        steps = np.arange(counts[j], dtype=np.int64) * (full[j].step * strides[j])
        offsets = (offsets[:, None] + steps[None, :]).reshape(-1)
    return offsets, run


def _rows(index: Any, shape: tuple[int, ...]) -> list[_Dim] | None:
    """The selection of ``index`` when it is a slice of rows (non-negative
    int bounds or None, no step) that safetensors accepts as given: what
    :func:`_selection` and :func:`_check_bounds` would give, without their
    general walk (a tensor-parallel rank's rows, per call); None for any
    other index, which they handle."""
    if type(index) is not slice or index.step is not None or not shape:
        return None
    n = shape[0]
    start = 0 if index.start is None else index.start
    stop = n if index.stop is None else index.stop
    if type(start) is not int or type(stop) is not int or not 0 <= start < n or not (
            start <= stop <= n):
        return None
    return [_Dim(start, stop, 1, False), *(_Dim(0, k, 1, False) for k in shape[1:])]


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
