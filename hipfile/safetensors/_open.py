"""Lazy access to one file's tensors: ``safe_open`` and its slices."""

from __future__ import annotations

import operator
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from hipfile._file_holder import FileHolder
from hipfile._lifetime import ClosesWhenCollected
from hipfile.file import FileHandle
from hipfile.safetensors._header import (
    Header,
    SafetensorsError,
    TensorInfo,
    TensorNotFoundError,
    read_header,
)
from hipfile.safetensors._load import (
    check_backend,
    check_framework,
    load_many,
    open_for_read,
    parse_device,
    resolve_reader,
)


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

    Raises
    ------
    SafetensorsError
        A malformed header.
    FileNotFoundError, OSError, HipFileException
        The file cannot be opened or registered.
    ValueError, TypeError
        A bad ``framework``, ``device`` or ``reader``.
    """

    def __init__(self, path: str | os.PathLike[str], framework: str = "hip",
                 device: Any = None, *, direct: bool | None = None,
                 task_size: int | None = None, reader: str = "auto",
                 strict: bool = False) -> None:
        self._fh: FileHandle | None = None
        self._framework = check_framework(framework)
        self._device = parse_device(device, self._framework)
        self._reader = resolve_reader(reader, self._device)
        self._path = os.fspath(path)
        self._direct = direct
        self._task_size = task_size
        self._lock = threading.Lock()
        self._header = read_header(path, strict=strict)
        self._fh = open_for_read(path, direct)

    def _open_fh(self) -> FileHandle:
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

    def _read(self, infos: list[TensorInfo]) -> dict[str, Any]:
        with self._lock:
            fh = self._open_fh()
            return load_many([(self._path, self._header, infos)], self._framework,
                             self._device, direct=self._direct, task_size=self._task_size,
                             reader=self._reader, progress=False, handles=[fh])

    def get_tensor(self, name: str) -> Any:
        """Read one tensor into its own memory.

        Raises
        ------
        TensorNotFoundError
            No such tensor (a :class:`SafetensorsError` and a :class:`KeyError`).
        SafetensorsError
            The file is closed.
        """
        self._open_fh()
        return self._read([self._info(name)])[name]

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
        """Deregister and close the file (idempotent)."""
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
              strict: bool = False) -> SafeOpen:
    """Open a file for lazy tensor access; see :class:`SafeOpen`. ``backend``
    (safetensors' ``"mmap"``/``"pread"``) is checked and has no other effect:
    hipFile reads either way.

    Raises
    ------
    ValueError, TypeError
        An unknown ``backend``, or what :class:`SafeOpen` raises.
    """
    check_backend(backend)
    return SafeOpen(path, framework, device, direct=direct, task_size=task_size,
                    reader=reader, strict=strict)


# --------------------------------------------------------------------------
# Slices
# --------------------------------------------------------------------------


class SafeSlice:
    """One tensor of an open file, indexed lazily (``safe_open(...).get_slice``).

    Indexing takes what safetensors' slices take: ints (negative counted
    from the end), slices without a step, a tuple of them (one per leading
    dimension), and the empty list. Only the rows of the first dimension
    that the index selects are read.
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
        """Read the selected part.

        Raises
        ------
        SafetensorsError
            An index out of bounds, a non-empty list, more indices than
            dimensions, a step; the file is closed.
        TypeError
            An index that is not an int, a slice or a list.
        """
        info = self._info
        bounds, display = _indexers(index, info.shape)
        shape = info.shape
        # safetensors checks the last dimension first
        for i in reversed(range(len(bounds))):
            start, stop, _ = bounds[i]
            if start >= shape[i] or stop > shape[i]:
                asked = start if start >= shape[i] else stop - 1
                raise SafetensorsError(
                    f"Error during slicing [{', '.join(display)}] with shape {list(shape)}: "
                    f"index {asked} out of bounds for tensor dimension #{i} of size "
                    f"{shape[i]}")
        part = _rows(info, bounds[0][0], bounds[0][1]) if bounds else info
        data = self._owner._read([part])[info.name]
        rest: list[Any] = []
        for k, (start, stop, select) in enumerate(bounds):
            if k == 0:
                rest.append(0 if select else slice(None))
            else:
                rest.append(start if select else slice(start, stop))
        if not rest:
            return data
        framework = self._owner._framework
        if framework == "hip":
            if any(isinstance(r, int) for r in rest[1:]) or any(
                    (b[0], b[1]) != (0, shape[k]) for k, b in enumerate(bounds) if k):
                raise SafetensorsError("slices of DeviceTensor select rows of the first "
                                       "dimension only: use framework 'pt' for more")
            if bounds[0][2]:
                from hipfile.safetensors._read import DeviceTensor

                return DeviceTensor(data, data.ptr, data.dtype, data.shape[1:], data.device)
            return data
        out = data[tuple(rest)]
        if framework == "numpy":
            import numpy as np

            return np.ascontiguousarray(out)
        return out.contiguous()


def _rows(info: TensorInfo, start: int, stop: int) -> TensorInfo:
    """The part of ``info`` holding rows ``start:stop`` of its first dimension
    (the whole tensor when rows are not whole bytes)."""
    rows = info.shape[0]
    if rows == 0 or info.nbytes % rows:
        return info
    row = info.nbytes // rows
    stop = max(stop, start)
    return TensorInfo(info.name, info.dtype, (stop - start, *info.shape[1:]),
                      info.begin + start * row, info.begin + stop * row)


def _indexers(index: Any, shape: Sequence[int]
              ) -> tuple[list[tuple[int, int, bool]], list[str]]:
    """``[(start, stop, is_select)]`` per indexed dimension and safetensors'
    display of each."""
    if isinstance(index, list):
        if index:
            raise SafetensorsError("Non empty lists are not implemented")
        items: list[Any] = [slice(0, 0)]
    elif isinstance(index, tuple):
        items = list(index)
    else:
        items = [index]
    if len(items) > len(shape):
        raise SafetensorsError(f"Error during slicing with shape {list(shape)}: more slicing "
                               "indexes than dimensions in tensor")
    bounds: list[tuple[int, int, bool]] = []
    display: list[str] = []
    for i, (item, dim) in enumerate(zip(items, shape[:len(items)], strict=True)):
        if isinstance(item, slice):
            if item.step not in (None, 1):
                raise SafetensorsError("slices with a step are not implemented")
            start = _bound(item.start, dim, 0)
            stop = _bound(item.stop, dim, dim)
            bounds.append((start, max(stop, start) if stop <= dim else stop, False))
            display.append(f"{'' if item.start is None else start}:"
                           f"{'' if item.stop is None else stop}")
        else:
            try:
                idx = operator.index(item)
            except TypeError:
                raise TypeError(f"cannot index a tensor with {type(item).__name__}") from None
            if idx < 0:
                if dim + idx < 0:
                    raise SafetensorsError(f"Invalid index {idx} for dimension {i} of size "
                                           f"{dim}")
                idx += dim
            bounds.append((idx, idx + 1, True))
            display.append(str(idx))
    return bounds, display


def _bound(value: Any, dim: int, default: int) -> int:
    if value is None:
        return default
    v = operator.index(value)
    return max(0, dim + v) if v < 0 else v
