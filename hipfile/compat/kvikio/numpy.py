"""KvikIO's ``kvikio.numpy``: ``fromfile``/``tofile`` through
:class:`~hipfile.compat.kvikio.CuFile`, and ``LikeWrapper`` for NumPy's
``like=`` argument.

::

    from hipfile.compat.kvikio.numpy import LikeWrapper, fromfile, tofile

    tofile(array, "a.bin")                       # host or device array
    a = fromfile("a.bin", dtype="f4")             # a NumPy array
    b = fromfile("a.bin", dtype="f4", like=cupy.empty(()))   # a CuPy array
    c = numpy.fromfile("a.bin", "f4", like=LikeWrapper(cupy.empty(())))
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from hipfile._interop import as_size

__all__ = ["LikeWrapper", "fromfile", "tofile"]


def _path(file: Any) -> str:
    """The path of ``file``: a path, or a file object's ``name``."""
    if isinstance(file, str | os.PathLike):
        return os.fspath(file)
    if callable(getattr(file, "fileno", None)) and isinstance(getattr(file, "name", None), str):
        return str(file.name)
    raise TypeError(f"file must be a path or a file object with a name, not "
                    f"{type(file).__name__}")


def fromfile(file: str | os.PathLike[str] | io.FileIO, dtype: Any = float, count: int = -1,
             sep: str = "", offset: int = 0, *, like: Any = None) -> Any:
    """An array of ``count`` items (-1: as many as the file holds after
    ``offset``) of ``dtype`` read from ``file`` at byte ``offset``
    (``numpy.fromfile`` through :class:`~hipfile.compat.kvikio.CuFile`).
    ``like`` picks the array type (``np.empty_like(like, ...)``): a CuPy
    array gives a CuPy array read into device memory. A file object is read
    by its ``name``, from ``offset`` (not from its position), as in KvikIO.

    Raises
    ------
    NotImplementedError
        A ``sep`` other than ``""`` (text files), as in KvikIO.
    FileNotFoundError
        The file does not exist.
    ValueError
        A ``count`` below -1 ("negative dimensions are not allowed"), or a
        negative ``offset``.

    See Also
    --------
    hipFileRead, preadv
    """
    from hipfile.compat.kvikio import CuFile

    if sep != "":
        raise NotImplementedError("Non-default value of the `sep` argument is not supported")
    path = _path(file)
    nbytes = os.path.getsize(path)
    offset = as_size(offset, "offset")
    itemsize = np.dtype(dtype).itemsize
    available = max(0, nbytes - offset) // itemsize
    n = available if count == -1 else min(count, available) if count >= 0 else count
    if like is None or type(like) is np.ndarray:
        out = np.empty((n,), dtype=dtype)
    else:
        out = np.empty_like(like, shape=(n,), dtype=dtype)
    if n:
        with CuFile(path, "r") as f:
            f.read(out, file_offset=offset)
    return out


def tofile(ary: Any, file: str | os.PathLike[str] | io.FileIO) -> None:
    """Write ``ary`` (host or device memory) to ``file`` in C order,
    replacing its contents (``ndarray.tofile`` through
    :class:`~hipfile.compat.kvikio.CuFile`). A file object is written by its
    ``name``, as in KvikIO.

    See Also
    --------
    hipFileWrite, pwritev
    """
    from hipfile.compat.kvikio import CuFile

    path = _path(file)
    if getattr(ary, "flags", None) is not None and not _c_contiguous(ary):
        ary = np.ascontiguousarray(ary, like=ary)
    with CuFile(path, "w") as f:
        f.write(ary)


def _c_contiguous(ary: Any) -> bool:
    flags = getattr(ary, "flags", None)
    try:
        return bool(flags["C_CONTIGUOUS"])  # type: ignore[index]
    except (TypeError, KeyError):
        return bool(getattr(flags, "c_contiguous", False))


class LikeWrapper:
    """Wraps an array for NumPy's ``like=`` argument, so that
    ``numpy.fromfile(..., like=LikeWrapper(a))`` reads with :func:`fromfile`
    into an array of ``a``'s type; other NumPy functions given it run as
    they are."""

    def __init__(self, like: Any) -> None:
        self._like = like

    def __array_function__(self, func: Callable[..., Any], types: Iterable[type],
                           args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if func is not np.fromfile:
            return func(*args, **kwargs)
        return fromfile(*args, like=self._like, **kwargs)
