"""``safetensors.numpy``, function by function, on hipFile.

Switch with one line::

    from hipfile.safetensors.numpy import load_file, save_file   # was: safetensors.numpy

Arrays live in host memory; files are read with POSIX ``preadv`` on the
package's thread pool and written with ``pwrite``, byte for byte as
safetensors writes them. Neither loads libhipfile or a HIP runtime: this
module works on a machine with no GPU library, as ``safetensors.numpy``
does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hipfile.safetensors import load as _load
from hipfile.safetensors import load_file as _load_file
from hipfile.safetensors._header import SafetensorError
from hipfile.safetensors._save import save_file as _save_file
from hipfile.safetensors._save import serialize

__all__ = ["SafetensorError", "load", "load_file", "save", "save_file"]


def save(tensor_dict: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None
         ) -> bytes:
    """The bytes of a safetensors file holding the arrays (``safetensors.numpy.save``).

    Raises
    ------
    SafetensorError
        A dtype safetensors has no name for, a bad name or metadata.
    """
    return serialize(tensor_dict, metadata)


def save_file(tensor_dict: Mapping[str, np.ndarray], filename: str | os.PathLike[str],
              metadata: Mapping[str, str] | None = None) -> None:
    """Write the arrays to ``filename`` (``safetensors.numpy.save_file``).

    Raises
    ------
    SafetensorError
        As :func:`save`.
    OSError
        The file cannot be written.
    """
    _save_file(tensor_dict, filename, metadata)


def load(data: bytes) -> dict[str, np.ndarray]:
    """Arrays from the bytes of a safetensors file (``safetensors.numpy.load``).

    Raises
    ------
    SafetensorError
        Malformed bytes, or a tensor whose dtype numpy has no type for
        (``BF16`` and the ``F8`` types, unless ``ml_dtypes`` is installed).
    """
    return _load(data, "numpy", "cpu")


def load_file(filename: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
              names: Sequence[str] | None = None, direct: bool | None = None,
              progress: bool | None = None, strict: bool = False) -> dict[str, Any]:
    """Arrays of a file, an index ``.json`` or a list of shards
    (``safetensors.numpy.load_file``); the keywords are
    :func:`hipfile.safetensors.load_file`'s (``direct`` has no effect:
    host memory is read through the page cache). No GPU library is needed.

    Raises
    ------
    SafetensorError
        A malformed file, or a tensor read whose dtype numpy has no type
        for (as :func:`load`).
    FileNotFoundError, OSError
        A file cannot be read.
    """
    return _load_file(filename, "cpu", "numpy", names=names, direct=direct, progress=progress,
                      strict=strict)
