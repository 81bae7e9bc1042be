"""``safetensors.torch``, function by function, on hipFile.

Switch with one line::

    from hipfile.safetensors.torch import load_file, save_file   # was: safetensors.torch
    state_dict = load_file("model.safetensors", device="cuda:0")

``device`` is taken as safetensors takes it (``"cpu"``, ``"cuda"``,
``"cuda:N"``, an int, a ``torch.device``). GPU loads read file → GPU memory
with the stream-ordered engine into one allocation per file; ``"cpu"`` reads
into host memory through the host-buffer path. A
``model.safetensors.index.json`` or a list of shards loads in one call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hipfile.safetensors import load as _load
from hipfile.safetensors import load_file as _load_file
from hipfile.safetensors._header import SafetensorError
from hipfile.safetensors._load import check_backend
from hipfile.safetensors._save import save_file as _save_file
from hipfile.safetensors._save import serialize

if TYPE_CHECKING:
    import torch

__all__ = ["SafetensorError", "load", "load_file", "load_model", "save", "save_file",
           "save_model"]


def _shared(tensors: Mapping[str, Any]) -> list[set[str]]:
    """Groups of names whose tensors overlap in memory (more than one name).

    Views of one storage that do not overlap (as this package's loads
    return: one allocation per file) are not shared.
    """
    by_storage: dict[tuple[Any, int], list[tuple[int, int, str]]] = {}
    for name, t in tensors.items():
        if t.device.type == "meta" or t.numel() == 0:
            continue
        start = int(t.data_ptr())
        key = (t.device, int(t.untyped_storage().data_ptr()))
        by_storage.setdefault(key, []).append((start, start + t.numel() * t.element_size(),
                                               name))
    groups: list[set[str]] = []
    for spans in by_storage.values():
        spans.sort()
        end = -1
        for begin, stop, name in spans:
            if begin < end:
                groups[-1].add(name)
            else:
                groups.append({name})
            end = max(end, stop)
    return [g for g in groups if len(g) > 1]


def _check_for_save(tensors: Mapping[str, Any]) -> None:
    import torch

    if not isinstance(tensors, Mapping):
        raise ValueError(f"Expected a dict of [str, torch.Tensor] but received {type(tensors)}")
    sparse = []
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"Key `{name}` is invalid, expected torch.Tensor but received "
                             f"{type(t)}")
        if t.layout != torch.strided:
            sparse.append(name)
    if sparse:
        raise ValueError(f"You are trying to save a sparse tensors: `{sparse}` which this "
                         "library does not support. You can make it a dense tensor before "
                         "saving with `.to_dense()` but be aware this might make a much larger "
                         "file than needed.")
    for name, t in tensors.items():
        if t.device.type == "meta":
            raise RuntimeError(f"Cannot copy out of meta tensor `{name}`: it has no data")
        if not t.is_contiguous():
            raise ValueError(f"You are trying to save a non contiguous tensor: `{name}` which "
                             "is not allowed. It either means you are trying to save tensors "
                             "which are reference of each other in which case it's recommended "
                             "to save only the full tensors, and reslice at load time, or "
                             "simply call `.contiguous()` on your tensor to pack it before "
                             "saving.")
    shared = _shared(tensors)
    if shared:
        raise RuntimeError(f"Some tensors share memory, this will lead to duplicate memory on "
                           f"disk and potential differences when loading them again: "
                           f"{[sorted(g) for g in shared]}. A potential way to correctly save "
                           "your model is to use `save_model`.")


def save(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None
         ) -> bytes:
    """The bytes of a safetensors file holding the tensors (``safetensors.torch.save``).

    Raises
    ------
    ValueError
        A non-tensor, a sparse or a non-contiguous tensor.
    RuntimeError
        Tensors sharing memory.
    SafetensorError
        A dtype safetensors has no name for, a bad name or metadata.
    """
    _check_for_save(tensors)
    return serialize(tensors, metadata)


def save_file(tensors: Mapping[str, torch.Tensor], filename: str | os.PathLike[str],
              metadata: Mapping[str, str] | None = None) -> None:
    """Write the tensors to ``filename`` (``safetensors.torch.save_file``):
    GPU tensors with hipFile, CPU tensors with ``pwrite``.

    Raises
    ------
    ValueError, RuntimeError, SafetensorError
        As :func:`save`.
    OSError, HipFileException
        The file cannot be written.
    """
    _check_for_save(tensors)
    _save_file(tensors, filename, metadata)


def load(data: bytes) -> dict[str, torch.Tensor]:
    """CPU tensors from the bytes of a safetensors file (``safetensors.torch.load``).

    Raises
    ------
    SafetensorError
        Malformed bytes.
    """
    return _load(data, "torch", "cpu")


def load_file(filename: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
              device: Any = "cpu", *, backend: str | None = None,
              names: Sequence[str] | None = None, direct: bool | None = None,
              progress: bool | None = None, strict: bool = False) -> dict[str, torch.Tensor]:
    """Tensors of a file, an index ``.json`` or a list of shards, on
    ``device`` (``safetensors.torch.load_file``); ``backend`` (safetensors'
    ``"mmap"``/``"pread"``) is checked and has no other effect: hipFile
    reads either way; the other keywords are
    :func:`hipfile.safetensors.load_file`'s.

    Raises
    ------
    SafetensorError
        A malformed file.
    FileNotFoundError, OSError, HipFileException
        A file cannot be read.
    ValueError, TypeError
        A bad ``device`` or ``backend``.
    """
    check_backend(backend)
    return _load_file(filename, device, "torch", names=names, direct=direct,
                      progress=progress, strict=strict)


def _duplicates(state: Mapping[str, Any], preferred: Any = ()) -> dict[str, str]:
    """Of each group of names sharing memory, all but the one to keep (the
    first name, sorted, covering the whole storage; one in ``preferred``
    when there is such), each mapped to the name kept.

    Raises
    ------
    RuntimeError
        No name of a group covers its whole storage.
    """
    drop: dict[str, str] = {}
    for group in _shared(state):
        whole = sorted(n for n in group if _covers_storage(state[n]))
        if not whole:
            raise RuntimeError(f"Error while trying to find names to remove to save state "
                               f"dict, but found no suitable name to keep for saving amongst: "
                               f"{sorted(group)}. None is covering the entire storage.")
        keep = next((n for n in whole if n in preferred), whole[0])
        drop.update((n, keep) for n in sorted(group) if n != keep)
    return drop


def save_model(model: torch.nn.Module, filename: str | os.PathLike[str],
               metadata: dict[str, str] | None = None, force_contiguous: bool = True) -> None:
    """Save a model's state dict (``safetensors.torch.save_model``): of names
    sharing memory, the first name (sorted) whose tensor covers the whole
    storage is kept, and the others are recorded in the metadata as
    ``{dropped: kept}`` (entries the caller gave are kept).

    Raises
    ------
    RuntimeError
        Shared tensors none of which covers its whole storage.
    ValueError
        A non-contiguous tensor with ``force_contiguous=False``.
    """
    state = dict(model.state_dict())
    for name, kept in _duplicates(state).items():
        metadata = {} if metadata is None else metadata
        metadata.setdefault(name, kept)
        del state[name]
    if force_contiguous:
        state = {k: v.contiguous() for k, v in state.items()}
    try:
        save_file(state, filename, metadata)
    except ValueError as e:
        raise ValueError(f"{e} Or use save_model(..., force_contiguous=True), read the docs for "
                         "potential caveats.") from None


def _covers_storage(t: Any) -> bool:
    storage = t.untyped_storage()
    return (int(t.data_ptr()) == int(storage.data_ptr())
            and t.numel() * t.element_size() == storage.nbytes())


def load_model(model: torch.nn.Module, filename: str | os.PathLike[str], strict: bool = True,
               device: Any = "cpu", *, backend: str | None = None
               ) -> tuple[set[str], list[str]]:
    """Load a file into a model (``safetensors.torch.load_model``).

    Of names the model shares (tied weights), one is loaded (one the file
    has, when there is such); the others are not reported missing, and are
    reported unexpected when the file has them too.

    ``backend`` (safetensors' ``"mmap"``/``"pread"``) is checked and has no
    other effect.

    Returns
    -------
    (missing, unexpected)
        Model names the file did not set (a set, as safetensors returns
        it), file names the model did not take (a list).

    Raises
    ------
    RuntimeError
        ``strict`` and a name is missing or unexpected.
    ValueError, TypeError
        A bad ``device`` or ``backend``.
    """
    state = load_file(filename, device=device, backend=backend)
    drop = _duplicates(model.state_dict(), preferred=state)
    missing_keys, unexpected_keys = model.load_state_dict(state, strict=False)
    missing = set(missing_keys)
    unexpected = list(unexpected_keys)
    for name in drop:
        if name in missing:
            missing.remove(name)
        else:
            unexpected.append(name)
    if strict and (missing or unexpected):
        error = f"Error(s) in loading state_dict for {type(model).__name__}:"
        if missing:
            error += "\n    Missing key(s) in state_dict: " + ", ".join(
                f'"{k}"' for k in sorted(missing))
        if unexpected:
            error += "\n    Unexpected key(s) in state_dict: " + ", ".join(
                f'"{k}"' for k in sorted(unexpected))
        raise RuntimeError(error)
    return missing, unexpected
