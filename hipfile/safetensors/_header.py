"""The safetensors header: dtypes, tensor descriptions, strict parsing."""

from __future__ import annotations

import errno
import json
import math
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hipfile.file._kinds import check_descriptor, check_path

#: File offsets, sizes and device addresses of O_DIRECT reads are multiples of this.
ALIGNMENT = 4096
#: Largest header accepted (the reference implementation's limit).
MAX_HEADER_SIZE = 100_000_000
#: Ranges closer than this are read as one (the gap is read and ignored).
DEFAULT_MAX_GAP = 1 << 20


class SafetensorsError(ValueError):
    """A malformed or unsupported safetensors file, or tensors that cannot be saved.

    Also reachable as :data:`SafetensorError` (safetensors' name).
    """


#: safetensors' name of :class:`SafetensorsError`.
SafetensorError = SafetensorsError


class ShardNotFoundError(SafetensorsError, FileNotFoundError):
    """A shard that a checkpoint's index names is missing (a
    :class:`SafetensorsError` that names the tensor and the file, and a
    :class:`FileNotFoundError` whose ``filename`` is the shard)."""

    def __init__(self, message: str, filename: str | None = None) -> None:
        super().__init__(message)
        self.errno = errno.ENOENT
        self.strerror = message
        self.filename = filename

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class TensorNotFoundError(SafetensorsError, KeyError):
    """No tensor of that name (a :class:`SafetensorsError`, as safetensors
    raises, and a :class:`KeyError`, as a mapping does)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"File does not contain tensor {self.name}"


@dataclass(frozen=True)
class Dtype:
    """One safetensors dtype.

    Attributes
    ----------
    name
        The header's name (``"F16"``, ``"BF16"``, ...).
    bits
        Bits per element (4 and 6 for the packed ``F4``/``F6_*`` dtypes).
    typestr
        ``__cuda_array_interface__`` typestr; ``|V<n>`` (raw bytes) for the
        dtypes the array interface has no code for.
    torch
        Name of the ``torch`` dtype, or ``None``.
    """

    name: str
    bits: int
    typestr: str
    torch: str | None

    def nbytes(self, shape: Sequence[int]) -> int:
        """Bytes of a tensor of ``shape``.

        Raises
        ------
        SafetensorsError
            A packed dtype whose element count does not fill whole bytes.
        """
        bits = math.prod(shape) * self.bits
        if bits % 8:
            raise SafetensorsError(f"{math.prod(shape)} elements of {self.name} do not fill "
                                   "whole bytes")
        return bits // 8


def _dt(name: str, bits: int, typestr: str, torch: str | None) -> tuple[str, Dtype]:
    return name, Dtype(name, bits, typestr, torch)


#: Every dtype of the format, by header name.
DTYPES: dict[str, Dtype] = dict([
    _dt("BOOL", 8, "|b1", "bool"),
    _dt("U8", 8, "|u1", "uint8"),
    _dt("I8", 8, "|i1", "int8"),
    _dt("F8_E5M2", 8, "|V1", "float8_e5m2"),
    _dt("F8_E4M3", 8, "|V1", "float8_e4m3fn"),
    _dt("F8_E5M2FNUZ", 8, "|V1", "float8_e5m2fnuz"),
    _dt("F8_E4M3FNUZ", 8, "|V1", "float8_e4m3fnuz"),
    _dt("F8_E8M0", 8, "|V1", "float8_e8m0fnu"),
    _dt("I16", 16, "<i2", "int16"),
    _dt("U16", 16, "<u2", "uint16"),
    _dt("F16", 16, "<f2", "float16"),
    _dt("BF16", 16, "|V2", "bfloat16"),
    _dt("I32", 32, "<i4", "int32"),
    _dt("U32", 32, "<u4", "uint32"),
    _dt("F32", 32, "<f4", "float32"),
    _dt("C64", 64, "<c8", "complex64"),
    _dt("F64", 64, "<f8", "float64"),
    _dt("I64", 64, "<i8", "int64"),
    _dt("U64", 64, "<u8", "uint64"),
    _dt("F4", 4, "|u1", "float4_e2m1fn_x2"),
    _dt("F6_E2M3", 6, "|u1", None),
    _dt("F6_E3M2", 6, "|u1", None),
])

#: The dtypes in the order of safetensors' ``Dtype`` enum: its serializer
#: lays tensors out by this rank, highest first, then by name.
DTYPE_ORDER: tuple[str, ...] = (
    "BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
    "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64",
    "F64", "I64", "U64",
)
_RANK = {name: i for i, name in enumerate(DTYPE_ORDER)}

# array-interface typestrs that name one dtype unambiguously (for saving)
_FROM_TYPESTR = {
    d.typestr.lstrip("<|="): d for d in DTYPES.values()
    if not d.typestr.startswith("|V") and d.bits % 8 == 0 and d.name != "U8"
}
_FROM_TYPESTR.update({"u1": DTYPES["U8"], "B": DTYPES["U8"], "b": DTYPES["I8"],
                      "?": DTYPES["BOOL"], "e": DTYPES["F16"], "f": DTYPES["F32"],
                      "d": DTYPES["F64"]})


# --------------------------------------------------------------------------
# Header
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a file: ``begin``/``end`` count from the data section."""

    name: str
    dtype: Dtype
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor."""
        return self.end - self.begin


@dataclass(frozen=True)
class Header:
    """A parsed, validated header.

    Attributes
    ----------
    tensors
        The tensors, in file order.
    metadata
        ``__metadata__`` (``None`` when absent).
    data_offset
        File offset of the data section (``8 + N``).
    file_size
        Size of the file.
    """

    tensors: dict[str, TensorInfo]
    metadata: dict[str, str] | None
    data_offset: int
    file_size: int


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise SafetensorsError(f"header names {k!r} twice")
        out[k] = v
    return out


def _reject_constant(name: str) -> Any:
    raise SafetensorsError(f"header is not valid JSON: {name} is not a JSON value")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_header(raw: bytes, file_size: int, *, strict: bool = False) -> Header:
    """Validate a header given its JSON bytes and the file's size.

    The verdicts are safetensors': whitespace around the JSON object,
    unknown fields in an entry and a name given twice (the last entry wins)
    are accepted; the tensors must cover the data section exactly, in order
    of their offsets, each with the size its dtype and shape give.

    Parameters
    ----------
    raw
        The header's bytes (after the 8-byte length).
    file_size
        Size of the whole file.
    strict
        Also refuse what safetensors accepts but no serializer writes:
        whitespace before the object, unknown fields, duplicate names.

    Raises
    ------
    SafetensorsError
        Anything malformed; the message names the problem.
    """
    data_offset = 8 + len(raw)
    data_size = file_size - data_offset
    if data_size < 0:
        raise SafetensorsError(f"header of {len(raw)} bytes does not fit in a "
                               f"{file_size}-byte file")
    if strict and not raw.startswith(b"{"):
        raise SafetensorsError("header is not a JSON object")
    try:
        text = raw.decode("utf-8")
        obj = json.loads(text, parse_constant=_reject_constant,
                         object_pairs_hook=_reject_duplicates if strict else None)
    except UnicodeDecodeError as e:
        raise SafetensorsError(f"header is not UTF-8: {e}") from None
    except json.JSONDecodeError as e:
        raise SafetensorsError(f"header is not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise SafetensorsError("header is not a JSON object")
    metadata = obj.pop("__metadata__", None)
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise SafetensorsError("__metadata__ must map strings to strings")
    infos: list[TensorInfo] = []
    for name, entry in obj.items():
        if not isinstance(entry, dict):
            raise SafetensorsError(f"tensor {name!r}: entry is not an object")
        missing = {"dtype", "shape", "data_offsets"} - set(entry)
        extra = set(entry) - {"dtype", "shape", "data_offsets"} if strict else set()
        if missing or extra:
            raise SafetensorsError(f"tensor {name!r}: missing {sorted(missing)}, "
                                   f"unknown {sorted(extra)} fields")
        dname, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if not isinstance(dname, str) or dname not in DTYPES:
            raise SafetensorsError(f"tensor {name!r}: unknown dtype {dname!r}")
        if not isinstance(shape, list) or not all(_is_int(n) and n >= 0 for n in shape):
            raise SafetensorsError(f"tensor {name!r}: shape must be a list of "
                                   f"non-negative ints, got {shape!r}")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(_is_int(n) and n >= 0 for n in offsets)):
            raise SafetensorsError(f"tensor {name!r}: data_offsets must be [begin, end], "
                                   f"got {offsets!r}")
        begin, end = offsets
        if not begin <= end:
            raise SafetensorsError(f"tensor {name!r}: bad data_offsets [{begin}, {end}]")
        dtype = DTYPES[dname]
        infos.append(TensorInfo(name, dtype, tuple(shape), begin, end))
    # the data section is covered exactly once, in order of offsets
    expect = 0
    for t in sorted(infos, key=lambda t: (t.begin, t.end)):
        if t.begin < expect:
            raise SafetensorsError(f"tensor {t.name!r}: data_offsets [{t.begin}, {t.end}] "
                                   "overlap another tensor")
        if t.begin > expect:
            raise SafetensorsError(f"tensor {t.name!r}: a gap of {t.begin - expect} bytes "
                                   "before it")
        try:
            want = t.dtype.nbytes(t.shape)
        except SafetensorsError as e:
            raise SafetensorsError(f"tensor {t.name!r}: {e}") from None
        if t.end - t.begin != want:
            raise SafetensorsError(f"tensor {t.name!r}: {t.end - t.begin} bytes for shape "
                                   f"{list(t.shape)} of {t.dtype.name} ({want} bytes)")
        expect = t.end
    if expect != data_size:
        raise SafetensorsError(f"the tensors cover {expect} bytes of a {data_size}-byte data "
                               "section")
    return Header({t.name: t for t in infos}, metadata, data_offset, file_size)


def build_header(entries: Sequence[tuple[str, Dtype, Sequence[int], int]],
                 metadata: Mapping[str, str] | None) -> tuple[bytes, list[int]]:
    """The bytes safetensors' serializer writes before the data: the 8-byte
    length and the JSON header padded with spaces to a multiple of 8.

    Tensors are laid out as safetensors lays them out: by dtype, in the
    reverse order of :data:`DTYPE_ORDER` (so each is aligned to its element
    size), then by name.

    Parameters
    ----------
    entries
        ``(name, dtype, shape, nbytes)`` per tensor.
    metadata
        ``__metadata__`` or None.

    Returns
    -------
    (head, order)
        The bytes, and the indices of ``entries`` in file order.

    Raises
    ------
    SafetensorsError
        The header would exceed :data:`MAX_HEADER_SIZE`.
    """
    order = sorted(range(len(entries)),
                   key=lambda i: (-_RANK[entries[i][1].name], entries[i][0]))
    header: dict[str, Any] = {}
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    offset = 0
    for i in order:
        name, dtype, shape, nbytes = entries[i]
        header[name] = {"dtype": dtype.name, "shape": [int(n) for n in shape],
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    if len(raw) > MAX_HEADER_SIZE:
        raise SafetensorsError(f"header of {len(raw)} bytes exceeds the {MAX_HEADER_SIZE}-byte "
                               "limit")
    return struct.pack("<Q", len(raw)) + raw, order


def _not_json(fd: int, head: bytes, name: str | None) -> None:
    """Refuse a JSON file given where a safetensors file belongs (the index
    of a sharded checkpoint, most often), saying what it is; its first
    bytes would be read as an absurd header length.

    Raises
    ------
    SafetensorsError
        The file starts as JSON does.
    """
    if not head.lstrip(b" \t\r\n").startswith(b"{"):
        return
    what = "a JSON file" if name is None else f"{name} is a JSON file"
    start = os.pread(fd, 1 << 16, 0)
    if b'"weight_map"' in start:
        raise SafetensorsError(
            f"{what}, the index of a sharded checkpoint, not a safetensors file: load the "
            "checkpoint with hipfile.safetensors.load_file(index) (or a framework module's "
            "load_file), or open the shards its weight_map names with safe_open")
    raise SafetensorsError(f"{what}, not a safetensors file (which starts with an 8-byte "
                           "header length)")


def _read_header_fd(fd: int, strict: bool = False, name: str | None = None) -> Header:
    file_size = os.fstat(fd).st_size
    head = os.pread(fd, 8, 0)
    if len(head) < 8:
        raise SafetensorsError(f"file of {file_size} bytes is too short for a header")
    (n,) = struct.unpack("<Q", head)
    if n > MAX_HEADER_SIZE or 8 + n > file_size:
        _not_json(fd, head, name)
    if n > MAX_HEADER_SIZE:
        raise SafetensorsError(f"header length {n} exceeds the {MAX_HEADER_SIZE}-byte limit")
    if n < 2 or 8 + n > file_size:
        raise SafetensorsError(f"header length {n} does not fit in a {file_size}-byte file")
    raw = os.pread(fd, n, 8)
    if len(raw) != n:
        raise SafetensorsError("file shrank while its header was read")
    return parse_header(raw, file_size, strict=strict)


def read_header(path: str | os.PathLike[str], *, strict: bool = False) -> Header:
    """Read and validate a file's header (no device work); ``strict`` as
    :func:`parse_header`.

    Raises
    ------
    OSError
        The file cannot be read (:class:`IsADirectoryError` for a directory).
    HipFileException
        ``INVALID_FILE_TYPE`` (5018): a FIFO, socket or character device,
        refused at once (a FIFO is not waited on).
    SafetensorsError
        The header is malformed, or the file is JSON (the index of a sharded
        checkpoint: the message says to load it with ``load_file``).
    """
    check_path(path)   # a socket cannot be opened; a FIFO would wait for a writer
    try:
        # O_NONBLOCK: a FIFO made after the check opens at once (and is refused
        # below) instead of waiting for a writer; files read as without it
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        # safetensors' message, with the errno kept (a strerror or filename
        # would make str() the usual "[Errno 2] ..." again)
        err = FileNotFoundError(f"No such file or directory: {os.fspath(path)}")
        err.errno = errno.ENOENT
        raise err from None
    try:
        check_descriptor(fd, path, False)
        return _read_header_fd(fd, strict, os.fspath(path))
    finally:
        os.close(fd)
