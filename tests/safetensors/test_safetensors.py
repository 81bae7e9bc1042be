"""hipfile.safetensors against the reference ``safetensors`` package."""

from __future__ import annotations

import errno
import gc
import importlib.util
import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import device_array, from_device, random_bytes, run_python, to_device

import hipfile
from hipfile import safetensors as hst
from hipfile._lib import _hipfile

st = pytest.importorskip("safetensors")
stn = pytest.importorskip("safetensors.numpy")

# header dtype -> the reference package's dtype name and bytes per element
# (F4: two values per byte)
REF_DTYPES = {
    "BOOL": ("bool", 1), "U8": ("uint8", 1), "I8": ("int8", 1),
    "I16": ("int16", 2), "U16": ("uint16", 2), "F16": ("float16", 2),
    "BF16": ("bfloat16", 2), "I32": ("int32", 4), "U32": ("uint32", 4),
    "F32": ("float32", 4), "F64": ("float64", 8), "I64": ("int64", 8),
    "U64": ("uint64", 8), "C64": ("complex64", 8),
    "F8_E4M3": ("float8_e4m3fn", 1), "F8_E5M2": ("float8_e5m2", 1),
    "F8_E4M3FNUZ": ("float8_e4m3fnuz", 1), "F8_E5M2FNUZ": ("float8_e5m2fnuz", 1),
    "F8_E8M0": ("float8_e8m0fnu", 1), "F4": ("float4_e2m1fn_x2", 1),
}


def write_reference(path: Path, tensors: dict[str, tuple[str, list[int], bytes]],
                    metadata: dict[str, str] | None = None) -> None:
    """Write a file with the reference serializer from raw bytes."""
    keep = {}
    specs: dict[str, Any] = {}
    for name, (dtype, shape, data) in tensors.items():
        arr = np.frombuffer(data, np.uint8) if data else np.zeros(1, np.uint8)
        keep[name] = arr
        ref, _ = REF_DTYPES[dtype]
        storage = list(shape)
        if dtype == "F4":
            storage[-1] //= 2
        if hasattr(st, "TensorSpec"):  # safetensors >= 0.8
            specs[name] = st.TensorSpec(dtype=ref, shape=storage, data_ptr=arr.ctypes.data,
                                        data_len=len(data))
        else:  # older releases take the bytes
            specs[name] = {"dtype": ref, "shape": storage, "data": data}
    st.serialize_file(specs, str(path), metadata)


def reference_tensors(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, str] | None]:
    raw = path.read_bytes()
    out = {name: info for name, info in st.deserialize(raw)}
    (n,) = struct.unpack("<Q", raw[:8])
    meta = json.loads(raw[8:8 + n]).get("__metadata__")
    return out, meta


def host_bytes(t: hst.DeviceTensor) -> bytes:
    return from_device(t.ptr, t.nbytes).tobytes() if t.nbytes else b""


def make_tensors(seed: int = 0) -> dict[str, tuple[str, list[int], bytes]]:
    rng = np.random.default_rng(seed)
    out: dict[str, tuple[str, list[int], bytes]] = {}
    for i, (dtype, (_, size)) in enumerate(sorted(REF_DTYPES.items())):
        shape = [3, 5 + i] if dtype != "F4" else [3, 2 * (5 + i)]
        n = int(np.prod(shape))
        nbytes = n // 2 if dtype == "F4" else n * size
        data = rng.integers(0, 256, nbytes, dtype=np.uint8)
        if dtype == "BOOL":
            data = data % 2
        out[f"t.{dtype.lower()}"] = (dtype, shape, data.tobytes())
    out["empty"] = ("F32", [0, 4], b"")
    out["scalar"] = ("F64", [], np.float64(2.5).tobytes())
    return out


# --------------------------------------------------------------------------
# round trips
# --------------------------------------------------------------------------


def test_load_every_dtype(tmp_path: Path) -> None:
    path = tmp_path / "all.safetensors"
    tensors = make_tensors()
    write_reference(path, tensors, {"format": "pt", "note": "é"})
    info: dict[str, Any] = {}
    out = hst.load_file(path, info=info)
    assert list(out) == list(hst.read_header(path).tensors)
    assert set(out) == set(tensors)
    assert info["reads"] == 1 and info["reader"] == "stream"
    for name, (dtype, shape, data) in tensors.items():
        t = out[name]
        assert isinstance(t, hst.DeviceTensor)
        assert t.dtype.name == dtype and t.shape == tuple(shape) and t.nbytes == len(data)
        assert host_bytes(t) == data, name
    # views of one allocation
    owners = {id(t._owner) for t in out.values()}
    assert len(owners) == 1
    with hst.safe_open(path) as f:
        assert f.metadata() == {"format": "pt", "note": "é"}


def test_save_every_dtype_reads_back_in_the_reference(tmp_path: Path) -> None:
    src = tmp_path / "src.safetensors"
    tensors = make_tensors(seed=3)
    write_reference(src, tensors)
    loaded = hst.load_file(src)
    dst = tmp_path / "dst.safetensors"
    hst.save_file(loaded, dst, metadata={"k": "v"})
    ref, meta = reference_tensors(dst)
    assert meta == {"k": "v"}
    assert set(ref) == set(tensors)
    for name, (dtype, shape, data) in tensors.items():
        assert ref[name]["dtype"] == dtype
        assert list(ref[name]["shape"]) == shape
        assert bytes(ref[name]["data"]) == data, name
    raw = dst.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0  # padded header
    # every tensor is aligned to its element size in the file
    for t in hst.read_header(dst).tensors.values():
        assert (8 + n + t.begin) % max(1, t.dtype.bits // 8) == 0
    assert not list(tmp_path.glob("*.tmp*"))


def test_numpy_reference_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    arrays = {
        "a": rng.standard_normal((64, 33)).astype(np.float32),
        "b": rng.integers(-100, 100, (17,), dtype=np.int64),
        "c": rng.standard_normal((5, 5, 5)).astype(np.float16),
        "z": np.zeros((0,), np.uint8),
    }
    path = tmp_path / "np.safetensors"
    stn.save_file(arrays, str(path), metadata={"m": "1"})
    out = hst.load_file(path)
    for k, a in arrays.items():
        got = np.frombuffer(host_bytes(out[k]), a.dtype).reshape(a.shape)
        assert np.array_equal(got, a)
        cai = out[k].__cuda_array_interface__
        assert cai["shape"] == a.shape and cai["version"] == 3
        assert np.dtype(cai["typestr"]) == a.dtype
    back = tmp_path / "back.safetensors"
    hst.save_file(out, back)
    again = stn.load_file(str(back))
    for k, a in arrays.items():
        assert np.array_equal(again[k], a)


def test_save_device_arrays_and_wrapped_memory(tmp_path: Path) -> None:
    data = random_bytes(4096, seed=8)
    with device_array(4096) as dev:
        to_device(dev, data)
        # a HIP-Python DeviceArray of bytes names its dtype (U8) and shape
        t16 = hst.DeviceTensor.wrap(dev, "BF16", [32, 64])
        path = tmp_path / "w.safetensors"
        hst.save_file({"bytes": dev, "bf16": t16}, path)
        ref, meta = reference_tensors(path)
    assert meta is None
    assert ref["bytes"]["dtype"] == "U8" and list(ref["bytes"]["shape"]) == [4096]
    assert ref["bf16"]["dtype"] == "BF16" and list(ref["bf16"]["shape"]) == [32, 64]
    assert bytes(ref["bytes"]["data"]) == bytes(ref["bf16"]["data"]) == data.tobytes()


def test_empty_files(tmp_path: Path) -> None:
    path = tmp_path / "none.safetensors"
    hst.save_file({}, path, metadata={"only": "metadata"})
    assert hst.load_file(path) == {}
    ref, meta = reference_tensors(path)
    assert ref == {} and meta == {"only": "metadata"}
    only_empty = tmp_path / "zero.safetensors"
    write_reference(only_empty, {"a": ("F32", [0], b""), "b": ("I8", [2, 0], b"")})
    out = hst.load_file(only_empty)
    assert [t.shape for t in out.values()] == [(0,), (2, 0)]


@pytest.mark.parametrize("task_size", [4096, 12345, 1 << 16, 1 << 20, None])
@pytest.mark.parametrize("direct", [None, False])
def test_big_file_across_task_sizes(tmp_path: Path, task_size: int | None,
                                    direct: bool | None) -> None:
    rng = np.random.default_rng(task_size or 1)
    sizes = [3 << 20, 1, 777_777, 4096, 2 << 20]  # odd sizes on purpose
    tensors = {f"layer{i}": ("U8", [n], rng.integers(0, 256, n, dtype=np.uint8).tobytes())
               for i, n in enumerate(sizes)}
    path = tmp_path / "big.safetensors"
    write_reference(path, tensors)
    info: dict[str, Any] = {}
    out = hst.load_file(path, direct=direct, task_size=task_size, info=info)
    if direct is False:
        assert info["direct"] is False
    assert info["task_size"] % hst.ALIGNMENT == 0
    for name, (_, _, data) in tensors.items():
        assert host_bytes(out[name]) == data


@pytest.mark.parametrize("task_size", [4096, 12345, 1 << 20, None])
@pytest.mark.parametrize("direct", [None, False])
def test_stream_reader(tmp_path: Path, task_size: int | None, direct: bool | None) -> None:
    rng = np.random.default_rng(task_size or 2)
    sizes = [3 << 20, 1, 777_777, 4096, 2 << 20]
    tensors = {f"layer{i}": ("U8", [n], rng.integers(0, 256, n, dtype=np.uint8).tobytes())
               for i, n in enumerate(sizes)}
    path = tmp_path / "big.safetensors"
    write_reference(path, tensors)
    info: dict[str, Any] = {}
    out = hst.load_file(path, direct=direct, task_size=task_size, reader="stream", info=info)
    assert info["reader"] == "stream"
    assert info["task_size"] % hst.ALIGNMENT == 0
    if task_size is None:
        assert info["task_size"] == hipfile.defaults.engine_task_size()
    for name, (_, _, data) in tensors.items():
        assert host_bytes(out[name]) == data
    # the subset path and the lazy reader choose it too
    sub = hst.load_file(path, names=["layer2", "layer0"], reader="stream")
    assert host_bytes(sub["layer2"]) == tensors["layer2"][2]
    with hst.safe_open(path, reader="stream") as f:
        assert host_bytes(f.get_tensor("layer4")) == tensors["layer4"][2]
        assert host_bytes(f.load_all()["layer3"]) == tensors["layer3"][2]
    with pytest.raises(ValueError, match="reader"):
        hst.safe_open(path, reader="telepathy")


def test_stream_reader_through_the_engine(tmp_path: Path,
                                         engine_submissions: list[int]) -> None:
    """The stream reader is the engine's: its calls are counted there."""
    path = tmp_path / "e.safetensors"
    write_reference(path, {"a": ("U8", [1 << 20], random_bytes(1 << 20).tobytes())})
    out = hst.load_file(path, reader="stream", task_size=65536)
    assert engine_submissions == [1]
    assert host_bytes(out["a"]) == random_bytes(1 << 20).tobytes()


def test_direct_io_required(tmp_path: Path) -> None:
    path = tmp_path / "d.safetensors"
    write_reference(path, {"x": ("F32", [1000], random_bytes(4000).tobytes())})
    info: dict[str, Any] = {}
    try:
        out = hst.load_file(path, direct=True, info=info)
    except OSError as e:  # the file system refuses O_DIRECT
        assert e.errno == errno.EINVAL
        return
    assert info["direct"] is True
    assert host_bytes(out["x"]) == random_bytes(4000).tobytes()


def test_names_subset_and_safe_open(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    tensors = {f"t{i}": ("U8", [300_000], rng.integers(0, 256, 300_000, np.uint8).tobytes())
               for i in range(8)}
    path = tmp_path / "s.safetensors"
    write_reference(path, tensors, {"a": "b"})
    info: dict[str, Any] = {}
    out = hst.load_file(path, names=["t6", "t1"], info=info)
    assert list(out) == ["t6", "t1"]
    assert host_bytes(out["t6"]) == tensors["t6"][2]
    assert host_bytes(out["t1"]) == tensors["t1"][2]
    full = hst.read_header(path).file_size
    assert info["bytes_read"] < full  # only what the names need, coalesced
    info2: dict[str, Any] = {}
    hst.load_file(path, names=["t1", "t2", "t3"], info=info2)
    assert info2["reads"] == 1  # adjacent tensors: one range
    with pytest.raises(KeyError, match="nope"):
        hst.load_file(path, names=["nope"])
    with hst.safe_open(path) as f:
        assert f.keys() == [f"t{i}" for i in range(8)]
        assert "t3" in f and "x" not in f and list(f) == f.keys()
        assert f.metadata() == {"a": "b"}
        assert host_bytes(f.get_tensor("t5")) == tensors["t5"][2]
        everything = f.load_all()
        assert host_bytes(everything["t7"]) == tensors["t7"][2]
        with pytest.raises(KeyError):
            f.get_tensor("missing")
    with pytest.raises(ValueError, match="closed"):
        f.get_tensor("t1")
    f.close()  # idempotent


@pytest.mark.emulated
def test_memory_is_freed_with_the_last_view(tmp_path: Path) -> None:
    from hipfile.platforms import emulated

    path = tmp_path / "m.safetensors"
    write_reference(path, {"a": ("F32", [10], bytes(40)), "b": ("F32", [10], bytes(40))})
    before = emulated.counters()["allocations"]
    out = hst.load_file(path)
    assert emulated.counters()["allocations"] == before + 1  # one per file
    a = out.pop("a")
    del out
    gc.collect()
    assert emulated.counters()["allocations"] == before + 1  # "a" keeps it
    del a
    gc.collect()
    assert emulated.counters()["allocations"] == before
    alloc = hst.DeviceAllocation(100)
    alloc.free()
    alloc.free()
    assert alloc.freed and emulated.counters()["allocations"] == before


# --------------------------------------------------------------------------
# planning
# --------------------------------------------------------------------------


def test_plan_reads() -> None:
    reads, origin, span = hst.plan_reads([(100, 5000), (5000, 9000)])
    assert origin == 0 and span == 12288
    assert reads == [hst.ReadRange(0, 12288, 0)]
    # far apart: two ranges, laid out like the file from the origin
    reads, origin, span = hst.plan_reads([(10 << 20, (10 << 20) + 10), (8192, 8200)],
                                         max_gap=1 << 20)
    assert origin == 8192
    assert reads == [hst.ReadRange(8192, 4096, 0),
                     hst.ReadRange(10 << 20, 4096, (10 << 20) - 8192)]
    assert span == (10 << 20) + 4096 - 8192
    # close enough: merged
    reads, _, _ = hst.plan_reads([(0, 10), (1 << 20, (1 << 20) + 1)], max_gap=1 << 20)
    assert len(reads) == 1
    assert hst.plan_reads([(5, 5)]) == ([], 0, 0)
    for r in hst.plan_reads([(1, 2), (70000, 90001)], alignment=512, max_gap=0)[0]:
        assert r.file_offset % 512 == 0 and r.size % 512 == 0
    with pytest.raises(ValueError):
        hst.plan_reads([(10, 5)])
    with pytest.raises(ValueError):
        hst.plan_reads([(0, 5)], alignment=0)


# --------------------------------------------------------------------------
# corrupt files
# --------------------------------------------------------------------------


def _file(tmp_path: Path, header: Any = None, data: bytes = b"", raw: bytes | None = None,
          length: int | None = None, whole: bytes | None = None) -> Path:
    path = tmp_path / "bad.safetensors"
    if whole is not None:
        path.write_bytes(whole)
        return path
    body = raw if raw is not None else json.dumps(header).encode()
    n = len(body) if length is None else length
    path.write_bytes(struct.pack("<Q", n) + body + data)
    return path


def _t(dtype: str = "F32", shape: list[int] | None = None,
       offsets: list[int] | None = None) -> dict[str, Any]:
    return {"dtype": dtype, "shape": [2] if shape is None else shape,
            "data_offsets": [0, 8] if offsets is None else offsets}


BAD = [
    ("too short", dict(whole=b"\x02\0\0"), "too short"),
    ("empty header", dict(raw=b"", length=0), "does not fit"),
    ("length past end", dict(header={}, length=1 << 20), "does not fit"),
    ("length over limit", dict(header={}, length=(1 << 40)), "exceeds"),
    ("not json", dict(raw=b"{not json}"), "not valid JSON"),
    ("not an object", dict(raw=b"[1, 2]"), "not a JSON object"),
    ("not utf-8", dict(raw=b"{\"\xff\": 1}"), "not UTF-8"),
    ("unknown dtype", dict(header={"a": _t("F12")}, data=bytes(8)), "unknown dtype"),
    ("dtype not str", dict(header={"a": _t(7)}, data=bytes(8)),  # type: ignore[arg-type]
     "unknown dtype"),
    ("entry not object", dict(header={"a": [1]}), "not an object"),
    ("missing field", dict(header={"a": {"dtype": "F32", "shape": [2]}}), "missing"),
    ("nan dim", dict(raw=b'{"a": {"dtype": "F32", "shape": [NaN], "data_offsets": [0, 8]}}',
                     data=bytes(8)), "not valid JSON"),
    ("negative dim", dict(header={"a": _t(shape=[-2])}, data=bytes(8)), "non-negative"),
    ("bool dim", dict(header={"a": _t(shape=[True])}, data=bytes(8)), "non-negative"),
    ("offsets shape", dict(header={"a": _t(offsets=[0])}, data=bytes(8)), "begin, end"),
    ("reversed offsets", dict(header={"a": _t(offsets=[8, 0])}, data=bytes(8)),
     "bad data_offsets"),
    ("out of range", dict(header={"a": _t(offsets=[0, 16])}, data=bytes(8)),
     "bytes for shape"),
    ("size mismatch", dict(header={"a": _t(shape=[3])}, data=bytes(8)), "bytes for shape"),
    ("overlap", dict(header={"a": _t(), "b": _t(offsets=[4, 12])}, data=bytes(12)),
     "overlap"),
    ("gap", dict(header={"a": _t(offsets=[4, 12])}, data=bytes(12)), "gap"),
    ("trailing bytes", dict(header={"a": _t()}, data=bytes(12)), "cover 8 bytes"),
    ("metadata type", dict(header={"__metadata__": {"a": 1}}), "strings to strings"),
    ("packed remainder", dict(header={"a": _t("F4", shape=[3], offsets=[0, 1])},
                              data=bytes(1)), "whole bytes"),
]


@pytest.mark.parametrize("kwargs,match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_corrupt_headers(tmp_path: Path, kwargs: dict[str, Any], match: str) -> None:
    path = _file(tmp_path, **kwargs)
    with pytest.raises(hst.SafetensorsError, match=match):
        hst.read_header(path)
    with pytest.raises(hst.SafetensorsError, match=match):
        hst.load_file(path)
    with pytest.raises(hst.SafetensorsError, match=match):
        hst.safe_open(path)
    assert issubclass(hst.SafetensorsError, ValueError)


@pytest.mark.parametrize("kwargs", [b[1] for b in BAD], ids=[b[0] for b in BAD])
def test_reference_rejects_what_we_reject(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    """Every file refused above is refused by the reference parser too."""
    path = _file(tmp_path, **kwargs)
    with pytest.raises(Exception):  # noqa: B017 - the reference's own error type
        st.deserialize(path.read_bytes())


# what safetensors loads although no serializer writes it: accepted by
# default (the same verdict), refused with strict=True
LENIENT = [
    ("duplicate name", dict(raw=b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},'
                            b' "a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}',
                            data=b"xy"), "twice", {"a": b"xy"}),
    ("extra field", dict(header={"a": {**_t(), "x": 1}}, data=bytes(8)), "unknown",
     {"a": bytes(8)}),
    ("leading whitespace", dict(raw=b'  \n{"a": {"dtype": "U8", "shape": [2], '
                                b'"data_offsets": [0, 2]}}', data=b"hi"),
     "not a JSON object", {"a": b"hi"}),
]


@pytest.mark.parametrize("kwargs,match,expect", [b[1:] for b in LENIENT],
                         ids=[b[0] for b in LENIENT])
def test_lenient_headers_like_the_reference(tmp_path: Path, kwargs: dict[str, Any],
                                            match: str, expect: dict[str, bytes]) -> None:
    path = _file(tmp_path, **kwargs)
    ref = dict(st.deserialize(path.read_bytes()))
    assert {k: bytes(v["data"]) for k, v in ref.items()} == expect
    out = hst.load_file(path)
    assert {k: host_bytes(v) for k, v in out.items()} == expect
    with pytest.raises(hst.SafetensorsError, match=match):
        hst.read_header(path, strict=True)
    with pytest.raises(hst.SafetensorsError, match=match):
        hst.load_file(path, strict=True)


# --------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------


def test_argument_errors(tmp_path: Path) -> None:
    path = tmp_path / "ok.safetensors"
    write_reference(path, {"a": ("U8", [4], b"abcd")})
    with pytest.raises(ValueError, match="framework"):
        hst.load_file(path, framework="jax")
    with pytest.raises(ValueError, match="reader"):
        hst.load_file(path, reader="telepathy")
    with pytest.raises(ValueError, match="task_size"):
        hst.load_file(path, task_size=0)
    with pytest.raises(FileNotFoundError):
        hst.load_file(tmp_path / "missing.safetensors")
    out = hst.load_file(path)
    with pytest.raises(hst.SafetensorsError, match="strings"):
        hst.save_file(out, tmp_path / "x.safetensors", metadata={"a": 1})  # type: ignore[dict-item]
    with pytest.raises(hst.SafetensorsError, match="name"):
        hst.save_file({"__metadata__": out["a"]}, tmp_path / "x.safetensors")
    with pytest.raises(hst.SafetensorsError, match="not a tensor"):
        hst.save_file({"h": "text"}, tmp_path / "x.safetensors")
    with pytest.raises(hst.SafetensorsError, match="unknown dtype"):
        hst.DeviceTensor(None, 0, "Q9", [1])
    with device_array(16) as dev:
        with pytest.raises(ValueError, match="bytes of memory"):
            hst.DeviceTensor.wrap(dev, "F64", [4])
    assert not (tmp_path / "x.safetensors").exists()


@pytest.mark.emulated
@pytest.mark.parametrize("reader", ["parallel", "stream", "staged"])
def test_read_failure_raises_and_frees(tmp_path: Path, reader: str) -> None:
    from hipfile.platforms import emulated

    path = tmp_path / "f.safetensors"
    write_reference(path, {"a": ("U8", [100_000], random_bytes(100_000).tobytes())})
    before = emulated.counters()["allocations"]
    emulated.inject_fault("read", errno.EIO)
    _hipfile.engine_inject_faults(errno.EIO, count=1 << 20)   # the engine's own reads
    try:
        with pytest.raises(OSError) as info:
            hst.load_file(path, task_size=4096, reader=reader)
    finally:
        _hipfile.engine_inject_faults()
    assert info.value.errno == errno.EIO
    gc.collect()
    assert emulated.counters()["allocations"] == before


class _EndsWith:
    """A read's handle whose wait, once the read has ended, raises ``error``."""

    def __init__(self, handle: Any, error: BaseException) -> None:
        self.handle = handle
        self.error = error
        self.ended = False

    def wait(self) -> int:
        self.handle.wait()
        self.ended = True
        raise self.error

    def done(self) -> bool:
        return bool(self.handle.done())


def test_ctrl_c_is_not_hidden_by_an_earlier_read_error(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A load whose first range fails and whose wait for a later range is
    interrupted raises KeyboardInterrupt (the read error does not replace
    the Ctrl-C), once every range has ended."""
    path = tmp_path / "k.safetensors"
    write_reference(path, {"a": ("U8", [8192], random_bytes(8192).tobytes()),
                           "b": ("U8", [2 << 20], random_bytes(2 << 20).tobytes()),
                           "c": ("U8", [8192], random_bytes(8192, seed=3).tobytes())})
    real = hipfile.FileHandle.pread_async_ranges
    made: list[_EndsWith] = []

    def ending(self: Any, *args: Any, **kwargs: Any) -> Any:
        hs = real(self, *args, **kwargs)
        assert len(hs) == 2
        made.extend([_EndsWith(hs[0], OSError(errno.EIO, "injected")),
                     _EndsWith(hs[1], KeyboardInterrupt())])
        return made

    monkeypatch.setattr(hipfile.FileHandle, "pread_async_ranges", ending)
    with pytest.raises(KeyboardInterrupt):
        hst.load_file(path, names=["a", "c"])
    assert [h.ended for h in made] == [True, True]


@pytest.mark.emulated
def test_write_failure_leaves_no_file(tmp_path: Path) -> None:
    from hipfile.platforms import emulated

    src = tmp_path / "s.safetensors"
    write_reference(src, {"a": ("U8", [50_000], random_bytes(50_000).tobytes())})
    out = hst.load_file(src)
    emulated.inject_fault("write", errno.ENOSPC)
    dst = tmp_path / "d.safetensors"
    with pytest.raises(OSError) as info:
        hst.save_file(out, dst)
    assert info.value.errno == errno.ENOSPC
    assert not dst.exists() and not list(tmp_path.glob("*.tmp*"))


def test_truncated_after_header_check(tmp_path: Path, truncate_after_header: None) -> None:
    """A file cut short between the header check and the read is reported."""
    path = tmp_path / "t.safetensors"
    write_reference(path, {"a": ("U8", [100_000], random_bytes(100_000).tobytes())})
    with pytest.raises(hst.SafetensorsError, match="truncated"):
        hst.load_file(path)


def test_buffer_accepts_device_tensors(tmp_path: Path) -> None:
    path = tmp_path / "b.safetensors"
    data = random_bytes(8192, seed=4)
    write_reference(path, {"a": ("U8", [8192], data.tobytes())})
    t = hst.load_file(path)["a"]
    with hipfile.Buffer(t) as buf:
        assert buf.length == 8192 and buf.ptr == t.ptr
    with device_array(8192) as dev, hipfile.Driver(), hipfile.open(path) as fh:
        h = hst.read_header(path)
        assert fh.read(dev, 8192, h.data_offset) == 8192
        assert np.array_equal(from_device(dev, 8192), data)


def test_torch_framework(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no GPU here")
    path = tmp_path / "t.safetensors"
    tensors = make_tensors(seed=6)
    write_reference(path, tensors)
    out = hst.load_file(path, framework="torch", device="cuda:0")   # safetensors' default: cpu
    for name, (dtype, _shape, data) in tensors.items():
        t = out[name]
        assert str(t.dtype).removeprefix("torch.") == hst.DTYPES[dtype].torch
        assert t.is_cuda
        assert t.contiguous().reshape(-1).view(torch.uint8).cpu().numpy().tobytes() == data
    back = tmp_path / "back.safetensors"
    hst.save_file(out, back)
    ref, _ = reference_tensors(back)
    for name, (_, _, data) in tensors.items():
        assert bytes(ref[name]["data"]) == data


def test_torch_key_loop_and_splits_match_safetensors(tmp_path: Path) -> None:
    """torch on a GPU, as loaders call it: get_tensor key by key (read
    ahead), row and column splits of every 2-D tensor, each equal to
    safetensors' own result."""
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors")
    if not torch.cuda.is_available():
        pytest.skip("torch has no GPU here")
    g = torch.Generator().manual_seed(5)
    ref = {f"layers.{i}.w": torch.randn(96 + i, 64 + 8 * i, generator=g).to(torch.bfloat16)
           for i in range(6)}
    ref |= {"norm": torch.randn(77, generator=g), "emb": torch.randn(1000, 520, generator=g),
            "ids": torch.arange(5, dtype=torch.int64)}
    path = tmp_path / "m.safetensors"
    from hipfile.safetensors import torch as hst_torch

    hst_torch.save_file(ref, path)
    with hst.safe_open(path, "pt", device="cuda:0") as f, \
            st.safe_open(path, "pt") as want:
        keys = list(f.keys())
        assert keys == list(want.keys())
        for k in keys:
            got = f.get_tensor(k)
            assert got.is_cuda and got.dtype == ref[k].dtype
            assert torch.equal(got.cpu(), want.get_tensor(k)), k
        for k in keys:
            if ref[k].dim() != 2:
                continue
            n, m = ref[k].shape
            for r in range(4):
                rows = f.get_slice(k)[r * n // 4:(r + 1) * n // 4]
                cols = f.get_slice(k)[:, r * m // 4:(r + 1) * m // 4]
                assert torch.equal(rows.cpu(), want.get_slice(k)[r * n // 4:(r + 1) * n // 4])
                assert torch.equal(cols.cpu(),
                                   want.get_slice(k)[:, r * m // 4:(r + 1) * m // 4]), k
                assert cols.is_contiguous() and cols.is_cuda


def test_torch_loads_never_import_hip_pythons_python_layer(tmp_path: Path) -> None:
    """A fresh torch process that loads into GPU memory (load_file,
    get_tensor, row and column slices) never imports HIP-Python's Python
    layer: the engine's set-up and its device queries take HIP's C entry
    points alone."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no GPU here")
    if importlib.util.find_spec("rocm.bindings.cyhip") is None:
        pytest.skip("this HIP-Python has no module of C entry points of its own")
    from hipfile.safetensors import torch as hst_torch

    path = tmp_path / "m.safetensors"
    hst_torch.save_file({"w": torch.randn(64, 48), "b": torch.randn(7)}, path)
    proc = run_python(f"""
        import sys, torch
        import hipfile.safetensors as hst
        from hipfile.safetensors import torch as hst_torch
        out = hst_torch.load_file({str(path)!r}, device="cuda:0")
        with hst.safe_open({str(path)!r}, "pt", device="cuda:0") as f:
            f.get_tensor("b")
            f.get_slice("w")[8:16]
            f.get_slice("w")[:, 4:12]
        torch.cuda.synchronize()
        print("imported", sorted(m for m in ("hip", "hip.hip", "rocm.bindings.hip")
                                 if m in sys.modules))
    """)
    assert proc.returncode == 0, proc.stderr
    assert "imported []" in proc.stdout, proc.stdout


def test_torch_reads_follow_the_current_stream(tmp_path: Path) -> None:
    """Inside ``with torch.cuda.stream(s)`` a tensor read by get_tensor may
    get the memory of one freed on ``s`` while work on ``s`` still reads
    it (the caching allocator reuses memory in ``s``'s order): the read
    lands after that work, which sees the old bytes."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no GPU here")
    from hipfile.safetensors import torch as hst_torch

    n = 64 << 10
    path = tmp_path / "s.safetensors"
    hst_torch.save_file({"a": torch.full((n,), 3, dtype=torch.int32),
                         "b": torch.full((n,), 5, dtype=torch.int32)}, path)
    s = torch.cuda.Stream()
    with hst.safe_open(path, "pt", device="cuda:0") as f, torch.cuda.stream(s):
        xs = [torch.full((n,), 7, dtype=torch.int32, device="cuda:0") for _ in range(2)]
        ptrs = {x.data_ptr() for x in xs}
        torch.cuda._sleep(100_000_000)              # s is busy for a while
        seen = [x.clone() for x in xs]              # then reads both
        del xs
        t = f.get_tensor("a")                       # read now; "b" read ahead
        ahead = f._ahead.window.get("b")
        if t.data_ptr() not in ptrs or ahead is None or ahead.addr not in ptrs:
            pytest.skip("the caching allocator did not reuse the freed memory")
        s.synchronize()
        assert all(bool((c == 7).all()) for c in seen), "a read overwrote memory s still read"
        assert bool((t == 3).all()) and bool((f.get_tensor("b") == 5).all())


@pytest.mark.emulated
def test_benchmark_checks_correctness_on_the_emulated_platform(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_safetensors.py"
    env = dict(os.environ, HIPFILE_PLATFORM="emulated", PYTHONWARNINGS="ignore")
    refused = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode == 2 and "refusing" in refused.stderr
    ran = subprocess.run([sys.executable, str(script), "--allow-emulated", "--dir",
                          str(tmp_path)], env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "single: 16 tensors in 1 file(s): OK" in ran.stdout
    assert "sharded: 16 tensors in 3 file(s): OK" in ran.stdout


@pytest.mark.emulated
def test_safe_open_not_closed_warns_and_releases(tmp_path: Path) -> None:
    from hipfile.platforms import emulated

    path = tmp_path / "u.safetensors"
    write_reference(path, {"a": ("U8", [4], b"abcd")})
    handles = emulated.counters()["handles"]
    fds = len(os.listdir("/proc/self/fd"))
    f = hst.safe_open(path)
    # the file is open (a descriptor), not registered: the engine reads it
    assert len(os.listdir("/proc/self/fd")) > fds
    with pytest.warns(ResourceWarning, match="not closed"):
        del f
        gc.collect()
    assert emulated.counters()["handles"] == handles
    assert len(os.listdir("/proc/self/fd")) == fds


def test_bad_device_raises(tmp_path: Path) -> None:
    path = tmp_path / "d.safetensors"
    write_reference(path, {"a": ("U8", [4], b"abcd")})
    with pytest.raises(hipfile.HipRuntimeError):
        hst.load_file(path, device=97)
    out = hst.load_file(path, device=0)
    assert out["a"].device == 0 and host_bytes(out["a"]) == b"abcd"


def test_direct_follows_the_page_cache(tmp_path: Path) -> None:
    """direct=None reads a cached file buffered and an uncached one with
    O_DIRECT (where the file system accepts it)."""
    path = tmp_path / "cache.safetensors"
    big = np.random.default_rng(5).integers(0, 256, 4 << 20, dtype=np.uint8).tobytes()
    write_reference(path, {"big": ("U8", [4 << 20], big)}, None)
    assert hst.cached_fraction(path) == 1.0
    info: dict[str, Any] = {}
    hst.load_file(path, info=info)
    assert info["direct"] is False
    with open(path, "rb") as f:  # drop the file from the page cache
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    if hst.cached_fraction(path) >= 0.5:
        pytest.skip("this file system keeps the file cached")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        os.close(fd)
    except OSError:
        pytest.skip("no O_DIRECT on this file system")
    info = {}
    hst.load_file(path, info=info)
    assert info["direct"] is True


def _dropped_file(tmp_path: Path, nbytes: int) -> Path:
    """A file of ``nbytes`` out of the page cache (skips where the file
    system keeps it)."""
    path = tmp_path / "resident.bin"
    path.write_bytes(np.random.default_rng(9).integers(0, 256, nbytes, np.uint8).tobytes())
    with open(path, "rb") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    if hst.cached_fraction(path) > 0.01:
        pytest.skip("this file system keeps the file cached")
    return path


def test_sampled_residency_agrees_with_the_full_count(tmp_path: Path) -> None:
    """cached_fraction(sample_pages=...) asks about windows spread over the
    whole file: half a file cached reads as about half, and the last window
    ends at the file's last page."""
    page = os.sysconf("SC_PAGE_SIZE")
    path = _dropped_file(tmp_path, 4096 * page)
    with open(path, "rb") as f:            # only the last 16 pages
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        os.pread(f.fileno(), 16 * page, 4080 * page)
    assert 0.1 <= hst.cached_fraction(path, sample_pages=160) < 0.5
    assert hst.cached_fraction(path) < 0.1
    with open(path, "rb") as f:            # the first half
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        os.pread(f.fileno(), 2048 * page, 0)
    full = hst.cached_fraction(path)
    sampled = hst.cached_fraction(path, sample_pages=256)
    assert 0.45 <= full <= 0.6
    assert abs(sampled - full) < 0.1, (sampled, full)


@pytest.mark.parametrize(("value", "error"), [(15, ValueError), (0, ValueError),
                                              (-1, ValueError), (True, TypeError),
                                              (16.0, TypeError), ("64", TypeError)])
def test_sampled_residency_refuses_bad_counts(tmp_path: Path, value: Any,
                                              error: type[Exception]) -> None:
    path = tmp_path / "x.bin"
    path.write_bytes(b"x" * 100)
    with pytest.raises(error, match="sample_pages"):
        hst.cached_fraction(path, sample_pages=value)


def test_bare_calls_open_the_driver_once_at_most(tmp_path: Path) -> None:
    """A loop of bare calls (no driver held by the caller) opens the driver
    at most once, at the first call that goes through hipFile's data path
    (the engine's staged loads never do), and keeps it: the count never
    drops between calls."""
    from hipfile._lib import _hipfile

    path = tmp_path / "bare.safetensors"
    write_reference(path, {"a": ("U8", [4096], random_bytes(4096).tobytes())})
    hipfile.release_process_driver()
    base = hipfile.use_count()
    hst.load_file(path)
    epoch = _hipfile.driver_epoch()
    first = hipfile.use_count()
    assert first in (base, base + 1)
    for _ in range(3):
        out = hst.load_file(path)
        with hst.safe_open(path) as f:
            f.get_tensor("a")
        hst.save_file(out, tmp_path / "copy.safetensors")
        assert hipfile.use_count() >= first
    assert _hipfile.driver_epoch() == epoch and hipfile.use_count() <= base + 1
