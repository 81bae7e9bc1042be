"""Sharded checkpoints: ``model.safetensors.index.json`` and its shards."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hipfile.safetensors._header import (
    Header,
    SafetensorsError,
    ShardNotFoundError,
    TensorInfo,
    TensorNotFoundError,
    read_header,
)


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


def _shard_header(path: str, strict: bool) -> Header:
    """:func:`read_header` of one file of a checkpoint; a malformed header
    is reported with the file's path in front.

    Raises
    ------
    SafetensorsError
        The header is malformed (the message starts with ``path``).
    OSError
        The file cannot be read.
    """
    try:
        return read_header(path, strict=strict)
    except SafetensorsError as e:
        if type(e) is not SafetensorsError or str(e).startswith(path):
            raise
        raise SafetensorsError(f"{path}: {e}") from None


def _unlisted_holder(files: list[str], name: str) -> str | None:
    """A ``.safetensors`` file beside the index's shards, not among them,
    that holds tensor ``name`` (the shard an index forgot), or None."""
    listed = {os.path.abspath(f) for f in files}
    for folder in dict.fromkeys(os.path.dirname(f) for f in files):
        try:
            entries = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        for entry in entries:
            path = os.path.join(folder, entry)
            if not entry.endswith(".safetensors") or os.path.abspath(path) in listed:
                continue
            try:
                if name in read_header(path).tensors:
                    return path
            except (OSError, SafetensorsError):
                continue
    return None


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
            headers.append(_shard_header(f, strict))
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
        that lacks it, or a header is malformed; the message names the file.
    ShardNotFoundError
        A shard that the index names is missing (also a
        :class:`FileNotFoundError`).
    """
    if weight_map is not None:
        headers = _index_headers(files, weight_map, strict)
    else:
        headers = [_shard_header(f, strict) for f in files]
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
                if at is not None:
                    where = f"in {files[at]}"
                else:
                    other = _unlisted_holder(files, name)
                    where = ("in no shard the index lists" if other is None
                             else f"in {other}, a file the index does not list")
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
