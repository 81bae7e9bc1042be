"""hipfile.safetensors as a drop-in for safetensors: the behaviours of
safetensors' own Python tests (bindings/python/tests), each test naming the
case it mirrors, plus sharded checkpoints, host loads and ``reader="staged"``
(kept for compatibility: the engine's reader)."""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import re
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import direct_io_supported, random_bytes

import hipfile
from hipfile import safetensors as hst
from hipfile._lib import _hipfile
from hipfile.safetensors import numpy as hnp

st = pytest.importorskip("safetensors")
stn = pytest.importorskip("safetensors.numpy")


# --------------------------------------------------------------------------
# serialization (test_simple.py: TestCase)
# --------------------------------------------------------------------------


def test_serialization_bytes_and_file(tmp_path: Path) -> None:
    """Mirrors TestCase.test_serialization: save and save_file give the
    reference's bytes, before and after a change of one value."""
    data = np.zeros((2, 2), dtype=np.int32)
    for value in (0, 1):
        data[1, 1] = value
        want = stn.save({"test": data})
        assert hnp.save({"test": data}) == want
        path = tmp_path / "serialization.safetensors"
        hnp.save_file({"test": data}, path)
        assert path.read_bytes() == want
    assert want[:8] == struct.pack("<Q", 64) and want.endswith(struct.pack("<i", 1))


def test_deserialization_from_bytes() -> None:
    """Mirrors TestCase.test_deserialization: load(bytes) of a header with
    no padding."""
    head = b'{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}'
    raw = struct.pack("<Q", len(head)) + head + bytes(16)
    out = hnp.load(raw)
    assert list(out) == ["test"]
    assert out["test"].dtype == np.int32 and np.array_equal(out["test"], np.zeros((2, 2)))


def test_numpy_load_names_a_dtype_numpy_lacks(tmp_path: Path) -> None:
    """numpy has no BF16 or F8 type: hipfile.safetensors.numpy's load and
    load_file raise SafetensorError naming the tensor and its dtype (the
    reference's numpy loader fails with a bare KeyError there)."""
    if importlib.util.find_spec("ml_dtypes") is not None:
        pytest.skip("ml_dtypes is installed: numpy has these dtypes through it")
    head = json.dumps({"b": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
                       "e": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [4, 6]},
                       "i": {"dtype": "I16", "shape": [1], "data_offsets": [6, 8]}}).encode()
    raw = struct.pack("<Q", len(head)) + head + bytes(8)
    with pytest.raises(hnp.SafetensorError, match="tensor 'b': numpy has no dtype for BF16"):
        hnp.load(raw)
    path = tmp_path / "bf16.safetensors"
    path.write_bytes(raw)
    with pytest.raises(hnp.SafetensorError, match="numpy has no dtype for F8_E4M3"):
        hnp.load_file(path, names=["e"])
    assert hnp.load_file(path, names=["i"])["i"].dtype == np.int16


def test_deserialization_metadata(tmp_path: Path) -> None:
    """Mirrors TestCase.test_deserialization_metadata: safe_open(framework="np")
    gives __metadata__."""
    path = tmp_path / "m.safetensors"
    path.write_bytes(stn.save({"test1": np.zeros((2, 2), np.int32)}, {"framework": "pt"}))
    with hst.safe_open(path, framework="np") as f:
        assert f.metadata() == {"framework": "pt"}


def test_serialization_order_invariant_and_alignment() -> None:
    """Mirrors TestCase.test_serialization_order_invariant and
    test_serialization_forces_alignment: the layout depends on dtypes and
    names, not on the order given, and the header is padded to 8 bytes."""
    i32 = np.zeros((2, 2), dtype=np.int32)
    f16 = np.zeros((2, 2), dtype=np.float16)
    a = hnp.save({"test1": i32, "test2": f16})
    b = hnp.save({"test2": f16, "test1": i32})
    assert a == b == stn.save({"test1": i32, "test2": f16})
    (n,) = struct.unpack("<Q", a[:8])
    assert n % 8 == 0 and a[8 + n - 1:8 + n] == b" "


def test_serialization_layout_follows_the_dtype_rank() -> None:
    """The layout rule behind test_serialization_forces_alignment, over
    every numpy dtype at once: byte for byte the reference's."""
    rng = np.random.default_rng(3)
    arrays = {f"{dt}_{i}": rng.integers(0, 100, (3, i + 1)).astype(dt)
              for i, dt in enumerate(["int8", "uint8", "int16", "uint16", "float16", "int32",
                                      "uint32", "float32", "int64", "uint64", "float64",
                                      "complex64", "bool"])}
    assert hnp.save(arrays, {"k": "v"}) == stn.save(arrays, {"k": "v"})


def test_serialization_metadata_and_big_endian() -> None:
    """Mirrors TestCase.test_serialization_metadata and
    test_serialization_no_big_endian: metadata first in the header; a
    big-endian array is written little-endian."""
    le = np.arange(4, dtype="<i4").reshape(2, 2)
    be = le.astype(">i4")
    want = stn.save({"test1": le}, metadata={"framework": "pt"})
    assert hnp.save({"test1": le}, metadata={"framework": "pt"}) == want
    assert hnp.save({"test1": be}, metadata={"framework": "pt"}) == want
    assert want[8:].startswith(b'{"__metadata__":{"framework":"pt"}')


def test_accept_path(tmp_path: Path) -> None:
    """Mirrors TestCase.test_accept_path: pathlib paths for save and load."""
    path = tmp_path / "p.safetensors"
    hnp.save_file({"a": np.zeros((2, 2)), "b": np.zeros((2, 3), np.uint8)}, path)
    out = hnp.load_file(path)
    assert out["a"].shape == (2, 2) and out["b"].dtype == np.uint8


# --------------------------------------------------------------------------
# safe_open (WindowsTestCase, ErrorsTestCase, ReadmeTestCase)
# --------------------------------------------------------------------------


def test_closed_file_raises(tmp_path: Path) -> None:
    """Mirrors WindowsTestCase.test_get_correctly_dropped: after the block,
    keys() raises SafetensorError, and the file can be written again."""
    path = tmp_path / "w.safetensors"
    hnp.save_file({"a": np.zeros((2, 2))}, path)
    with hst.safe_open(path, framework="np") as f:
        assert f.keys() == ["a"]
    for call in (f.keys, f.offset_keys, f.metadata, lambda: f.get_tensor("a"),
                 lambda: f.get_slice("a")):
        with pytest.raises(hst.SafetensorError, match="File is closed"):
            call()
    path.write_text("something")


def test_file_not_found() -> None:
    """Mirrors ErrorsTestCase.test_file_not_found: FileNotFoundError with
    safetensors' message."""
    with pytest.raises(FileNotFoundError) as info:
        with hst.safe_open("notafile", framework="pt"):
            pass
    assert str(info.value) == "No such file or directory: notafile"
    assert info.value.errno == 2


@pytest.mark.parametrize("arrays", [
    {"a": np.zeros((2, 2)), "b": np.zeros((2, 3), dtype=np.uint8)},
    {"a": np.asarray(False)},
], ids=["numpy_example", "numpy_bool"])
def test_numpy_examples(tmp_path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Mirrors ReadmeTestCase.test_numpy_example and test_numpy_bool:
    save_file/save then load_file/load give equal arrays."""
    path = tmp_path / "np.safetensors"
    hnp.save_file(arrays, path)
    for out in (hnp.load_file(path), hnp.load(hnp.save(arrays))):
        assert out.keys() == arrays.keys()
        for k, v in arrays.items():
            assert out[k].dtype == v.dtype and np.array_equal(out[k], v)


def test_numpy_slice(tmp_path: Path) -> None:
    """Mirrors ReadmeTestCase.test_numpy_slice: every index form, and the
    errors with safetensors' messages."""
    a = np.random.default_rng(0).random((10, 5))
    path = tmp_path / "slice.safetensors"
    hnp.save_file({"a": a}, path)
    with hst.safe_open(path, framework="np", device="cpu") as f:
        s = f.get_slice("a")
        assert s.get_shape() == [10, 5] and s.get_dtype() == "F64"
        for index, want in [(slice(None), a), ((), a), (slice(None, 2), a[:2]),
                            ((slice(None), slice(None, 2)), a[:, :2]),
                            ((0, slice(None, 2)), a[0, :2]), ((slice(2, None), 0), a[2:, 0]),
                            ((slice(2, None), 1), a[2:, 1]), ((slice(2, None), -1), a[2:, -1]),
                            ((slice(2, None), -5), a[2:, -5]), ([], a[[]])]:
            got = s[index]
            assert got.shape == want.shape and np.array_equal(got, want), index
        cases = [((slice(2, None), -6), "Invalid index -6 for dimension 1 of size 5"),
                 ([0, 1], "Non empty lists are not implemented"),
                 ((slice(2, None), 20), "Error during slicing [2:, 20] with shape [10, 5]: "
                  "index 20 out of bounds for tensor dimension #1 of size 5"),
                 (slice(None, 20), "Error during slicing [:20] with shape [10, 5]: index 19 "
                  "out of bounds for tensor dimension #0 of size 10"),
                 ((slice(None), slice(None, 20)), "Error during slicing [:, :20] with shape "
                  "[10, 5]: index 19 out of bounds for tensor dimension #1 of size 5")]
        for index, message in cases:
            with pytest.raises(hst.SafetensorError) as info:
                s[index]
            assert str(info.value) == message


def test_slices_read_only_their_rows(tmp_path: Path) -> None:
    """A slice of the first dimension reads those rows, not the tensor."""
    a = np.arange(1000 * 64, dtype=np.float32).reshape(1000, 64)
    path = tmp_path / "rows.safetensors"
    hnp.save_file({"a": a}, path)
    reads: list[int] = []
    real = os.preadv

    def counting(fd: int, buffers: Any, offset: int) -> int:
        reads.append(sum(memoryview(b).nbytes for b in buffers))
        return real(fd, buffers, offset)

    with pytest.MonkeyPatch.context() as mp, hst.safe_open(path, framework="np") as f:
        mp.setattr(os, "preadv", counting)
        got = f.get_slice("a")[500:502, 3]
    assert np.array_equal(got, a[500:502, 3])
    assert 0 < sum(reads) <= 3 * 4096      # two 256-byte rows, aligned out to pages


def test_keys_sorted_offset_keys_in_file_order(tmp_path: Path) -> None:
    """keys() sorts names as safetensors does; offset_keys() gives the file
    order (the reference's layout puts the F64 tensor "z" first)."""
    path = tmp_path / "k.safetensors"
    hnp.save_file({"a": np.zeros(3, np.int8), "z": np.zeros(3, np.float64),
                   "m": np.zeros(3, np.float32)}, path)
    with hst.safe_open(path, framework="numpy") as f, st.safe_open(path, "np") as ref:
        assert f.keys() == ref.keys() == ["a", "m", "z"]
        assert f.offset_keys() == ref.offset_keys() == ["z", "m", "a"]
        with pytest.raises(hst.SafetensorError, match="does not contain tensor x") as info:
            f.get_tensor("x")
        assert isinstance(info.value, KeyError)


def test_backends_and_get_tensors(tmp_path: Path) -> None:
    """Mirrors test_pread_backend.py: backend="mmap"/"pread" give the same
    tensors, get_tensors() gives them all, and an unknown backend is refused."""
    path = tmp_path / "b.safetensors"
    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4),
              "e": np.zeros((0, 5), np.float16), "i": np.arange(5, dtype=np.int64)}
    hnp.save_file(arrays, path, metadata={"foo": "bar"})
    for backend in (None, "mmap", "pread"):
        with hst.safe_open(path, framework="np", backend=backend) as f:
            assert f.metadata() == {"foo": "bar"}
            got = f.get_tensors()
        assert sorted(got) == sorted(arrays)
        for name, want in arrays.items():
            assert got[name].dtype == want.dtype and np.array_equal(got[name], want), name
    with pytest.raises(ValueError, match="not_a_backend"):
        hst.safe_open(path, framework="np", backend="not_a_backend")
    with pytest.raises(TypeError, match="backend"):
        hst.safe_open(path, framework="np", backend=1)  # type: ignore[arg-type]
    with hst.safe_open(path, framework="np") as f:
        pass
    with pytest.raises(hst.SafetensorError, match="closed"):
        f.get_tensors()


def _specs(module: Any, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    return {k: module.TensorSpec(dtype=a.dtype.name, shape=a.shape, data_ptr=a.ctypes.data,
                                 data_len=a.nbytes) for k, a in arrays.items()}


def test_tensor_spec_serializes_as_the_reference(tmp_path: Path) -> None:
    """Mirrors test_threadable.py and test_simple.py's TensorSpec cases:
    serialize/serialize_file of TensorSpecs give safetensors' bytes, and
    deserialize gives its entries."""
    rng = np.random.default_rng(7)
    arrays = {"w": rng.standard_normal((33, 7)).astype(np.float32),
              "i": rng.integers(-9, 9, 13).astype(np.int8),
              "flag": np.array(True), "empty": np.zeros((0, 4), np.float64),
              "u": rng.integers(0, 9, (2, 2, 2)).astype(np.uint16)}
    ours, ref = _specs(hst, arrays), _specs(st, arrays)
    assert {k: repr(v) for k, v in ours.items()} == {k: repr(v) for k, v in ref.items()}
    assert ours["w"].dtype == "F32" and ours["w"].shape == [33, 7]
    assert ours["w"].data_len == arrays["w"].nbytes
    want = st.serialize(ref, {"k": "v"})
    assert hst.serialize(ours, {"k": "v"}) == want
    hst.serialize_file(ours, tmp_path / "s.safetensors", {"k": "v"})
    assert (tmp_path / "s.safetensors").read_bytes() == want
    assert dict(hst.deserialize(want)) == dict(st.deserialize(want))
    names = [n for n, _ in hst.deserialize(want)]
    assert names == list(hst.read_header(tmp_path / "s.safetensors").tensors)  # file order
    # packed F4: the storage shape's last axis is doubled, as the reference does
    f4 = hst.TensorSpec(dtype="float4_e2m1fn_x2", shape=(2, 3), data_ptr=0, data_len=0)
    assert f4.shape == st.TensorSpec(dtype="float4_e2m1fn_x2", shape=(2, 3), data_ptr=0,
                                     data_len=0).shape == [2, 6]


def test_tensor_spec_of_device_memory(tmp_path: Path) -> None:
    """Beyond the reference (which reads every address on the host): a
    TensorSpec of device memory is copied or written from the device."""
    from _util import device_array, to_device

    data = np.random.default_rng(3).standard_normal(4096).astype(np.float32)
    host = np.arange(10, dtype=np.int16)
    want = stn.save({"d": data, "h": host})
    with device_array(data.nbytes) as dev:
        to_device(dev, data.view(np.uint8))
        specs = {"d": hst.TensorSpec(dtype="float32", shape=[4096], data_ptr=int(dev),
                                     data_len=data.nbytes),
                 "h": hst.TensorSpec(dtype="int16", shape=[10], data_ptr=host.ctypes.data,
                                     data_len=host.nbytes)}
        # the route: device bytes through the runtime (on a GPU, a host read
        # of that address would fault), host bytes read in place
        from hipfile.safetensors._save import _device_memory

        assert _device_memory(int(dev)) and not _device_memory(host.ctypes.data)
        assert hst.serialize(specs) == want
        hst.serialize_file(specs, tmp_path / "d.safetensors")
    assert (tmp_path / "d.safetensors").read_bytes() == want


def test_serialize_file_from_threads(tmp_path: Path) -> None:
    """Mirrors test_threadable.py: threads serializing the same specs at
    once each write a whole, correct file."""
    import threading

    arrays = {"a": np.arange(1 << 18, dtype=np.float32), "b": np.arange(1 << 16, dtype=np.int8)}
    specs = _specs(hst, arrays)
    paths = [tmp_path / f"t{i}.safetensors" for i in range(4)]
    errors: list[BaseException] = []

    def save(p: Path) -> None:
        try:
            hst.serialize_file(specs, p)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=save, args=(p,)) for p in paths]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    for p in paths:
        got = hnp.load_file(p)
        assert all(np.array_equal(got[k], v) for k, v in arrays.items()), p
    assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in paths)  # no temporaries


def test_tensor_spec_bad_values() -> None:
    """Mirrors test_simple.py's test_exception: an unknown dtype is refused
    when the spec is made, a raw dict by serialize; and the other bad values
    get clear errors rather than a read of a wild address."""
    a = np.zeros(4, np.float32)
    with pytest.raises(hst.SafetensorError, match="nonsense"):
        hst.TensorSpec(dtype="nonsense", shape=[1], data_ptr=0, data_len=0)
    with pytest.raises(hst.SafetensorError, match="F32"):
        hst.TensorSpec(dtype="F32", shape=[1], data_ptr=0, data_len=0)  # the file's name
    with pytest.raises(TypeError, match="dtype"):
        hst.TensorSpec(dtype=3, shape=[1], data_ptr=0, data_len=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="shape"):
        hst.TensorSpec(dtype="float32", shape=[2.0], data_ptr=0, data_len=0)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="shape"):
        hst.TensorSpec(dtype="float32", shape=[-1], data_ptr=0, data_len=0)
    with pytest.raises(ValueError, match="data_ptr"):
        hst.TensorSpec(dtype="float32", shape=[1], data_ptr=-1, data_len=4)
    with pytest.raises(ValueError, match="out of range"):
        hst.TensorSpec(dtype="uint8", shape=[1 << 63], data_ptr=4096, data_len=1 << 63)
    with pytest.raises(ValueError, match=r"data_ptr .* out of range"):
        hst.TensorSpec(dtype="uint8", shape=[1], data_ptr=1 << 64, data_len=1)
    with pytest.raises(TypeError, match="data_len"):
        hst.TensorSpec(dtype="float32", shape=[1], data_ptr=0, data_len="4")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        hst.TensorSpec("float32", [1], 0, 4)  # type: ignore[misc]  # keywords only
    with pytest.raises(TypeError, match="TensorSpec"):
        hst.serialize({"test": {"dtype": "float32", "shape": [1], "data_ptr": 0,
                                "data_len": 0}})
    short = hst.TensorSpec(dtype="float32", shape=[4], data_ptr=a.ctypes.data, data_len=12)
    with pytest.raises(hst.SafetensorError, match="12 bytes"):
        hst.serialize({"a": short})
    with pytest.raises(AttributeError, match="immutable"):
        short.data_len = 16  # type: ignore[misc]
    null = hst.TensorSpec(dtype="float32", shape=[4], data_ptr=0, data_len=16)
    with pytest.raises(ValueError, match="null"):
        hst.serialize({"a": null})
    with pytest.raises(TypeError, match="bytes"):
        hst.deserialize(bytearray(8))  # type: ignore[arg-type]
    with pytest.raises(hst.SafetensorError):
        hst.deserialize(b"abc")


# --------------------------------------------------------------------------
# frameworks and devices
# --------------------------------------------------------------------------


@pytest.mark.parametrize("framework", ["np", "numpy"])
def test_host_load_reads_through_the_host_buffer_path(tmp_path: Path, framework: str) -> None:
    arrays = {"w": np.random.default_rng(1).standard_normal((300, 77)).astype(np.float32),
              "b": np.arange(5, dtype=np.int64)}
    path = tmp_path / "h.safetensors"
    stn.save_file(arrays, str(path))
    info: dict[str, Any] = {}
    out = hst.load_file(path, "cpu", framework, info=info)
    assert info["reader"] == "parallel"
    for k, v in arrays.items():
        assert isinstance(out[k], np.ndarray) and np.array_equal(out[k], v)


@pytest.mark.parametrize("device,kind,index", [
    (None, "cpu", 0), ("cpu", "cpu", 0), ("cuda", "cuda", 0), ("cuda:1", "cuda", 1),
    (1, "cuda", 1), ("hip:0", "cuda", 0),
])
def test_devices_as_safetensors_takes_them(device: Any, kind: str, index: int) -> None:
    dev = hst.parse_device(device, "torch")
    assert (dev.kind, dev.index) == (kind, index)


@pytest.mark.parametrize("device,framework,error", [
    ("cuda:x", "torch", ValueError), (-1, "torch", ValueError), (True, "torch", TypeError),
    (1.5, "torch", TypeError), ("cuda", "numpy", ValueError), ("cpu", "hip", ValueError),
])
def test_bad_devices(device: Any, framework: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        hst.parse_device(device, framework)


def test_frameworks_accepted() -> None:
    assert {n: hst.FRAMEWORKS[n] for n in ("pt", "torch", "np", "numpy", "hip")} == {
        "pt": "torch", "torch": "torch", "np": "numpy", "numpy": "numpy", "hip": "hip"}
    with pytest.raises(ValueError, match="framework"):
        hst.safe_open("x", framework="flax")


def test_device_tensor_to_numpy_is_never_an_object_array(tmp_path: Path) -> None:
    raw = random_bytes(2 * 3 * 2, seed=2).tobytes()
    path = tmp_path / "bf.safetensors"
    head = json.dumps({"b": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]},
                       "f": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}}).encode()
    head += b" " * (-len(head) % 8)
    f32 = np.array([1.5, -2.0], np.float32)
    path.write_bytes(struct.pack("<Q", len(head)) + head + raw + f32.tobytes())
    out = hst.load_file(path)
    b = np.asarray(out["b"])
    assert b.dtype != object and b.shape == (2, 3) and b.tobytes() == raw
    assert np.array_equal(np.asarray(out["f"]), f32)
    assert np.array_equal(out["f"].copy_to_host(), f32)
    with pytest.raises(ValueError, match="copy"):
        np.asarray(out["f"], copy=False)


# --------------------------------------------------------------------------
# verdicts on malformed files: the reference's, case by case
# --------------------------------------------------------------------------


def _with_header(header: bytes, data: bytes) -> bytes:
    return struct.pack("<Q", len(header)) + header + data


def _u8(key: bytes = b"a", shape: bytes = b"2", offsets: bytes = b"0,2", extra: bytes = b""
        ) -> bytes:
    """One header entry of a U8 tensor (``"a":{...}``), its fields as text."""
    return (b'"' + key + b'":{"dtype":"U8","shape":[' + shape + b'],"data_offsets":['
            + offsets + b"]" + extra + b"}")


def _obj(*members: bytes) -> bytes:
    return b"{" + b",".join(members) + b"}"


VALID = _obj(_u8())   # two bytes named "a"

VERDICTS = [
    ("valid", _with_header(VALID, b"ab")),
    ("trailing spaces", _with_header(VALID + b"  ", b"ab")),
    ("leading spaces", _with_header(b"  " + VALID, b"ab")),
    ("extra field", _with_header(_obj(_u8(extra=b',"x":1')), b"ab")),
    ("null metadata", _with_header(_obj(b'"__metadata__":null', _u8()), b"ab")),
    ("unordered offsets", _with_header(_obj(_u8(b"b", b"1", b"1,2"), _u8(b"a", b"1", b"0,1")),
                                       b"ab")),
    ("short data", _with_header(VALID, b"a")),
    ("long data", _with_header(VALID, b"abc")),
    ("float shape", _with_header(_obj(_u8(shape=b"2.0")), b"ab")),
    ("negative offset", _with_header(_obj(_u8(shape=b"0", offsets=b"-1,-1")), b"")),
    ("metadata number", _with_header(b'{"__metadata__":{"a":1}}', b"")),
    ("infinity", _with_header(_obj(_u8(shape=b"Infinity")), b"ab")),
    ("zero length", struct.pack("<Q", 0)),
    ("bad utf-8", _with_header(_obj(_u8(b"\xff")), b"ab")),
    ("three offsets", _with_header(_obj(_u8(offsets=b"0,1,2")), b"ab")),
    ("empty object", _with_header(b"{}", b"")),
]


@pytest.mark.parametrize("raw", [v[1] for v in VERDICTS], ids=[v[0] for v in VERDICTS])
def test_same_verdict_as_the_reference(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "v.safetensors"
    path.write_bytes(raw)
    try:
        ref = {k: bytes(v["data"]) for k, v in st.deserialize(raw)}
    except Exception:
        ref = None
    if ref is None:
        with pytest.raises(hst.SafetensorError):
            hst.read_header(path)
        with pytest.raises(hst.SafetensorError):
            hnp.load(raw)
        with pytest.raises(hst.SafetensorError):
            hnp.load_file(path)
    else:
        out = hnp.load_file(path)
        assert {k: v.tobytes() for k, v in out.items()} == ref
        assert {k: v.tobytes() for k, v in hnp.load(raw).items()} == ref


# --------------------------------------------------------------------------
# sharded checkpoints
# --------------------------------------------------------------------------


def _checkpoint(tmp_path: Path, shards: int = 3) -> tuple[Path, dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    everything: dict[str, np.ndarray] = {}
    wmap: dict[str, str] = {}
    for k in range(shards):
        part = {f"layer{k}.w": rng.standard_normal((64, 33)).astype(np.float32),
                f"layer{k}.b": rng.integers(0, 9, (17,), dtype=np.int64)}
        name = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        stn.save_file(part, str(tmp_path / name))
        everything.update(part)
        wmap.update({n: name for n in part})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": wmap}))
    return index, everything


@pytest.mark.parametrize("device,framework", [(0, "hip"), ("cpu", "np")])
def test_sharded_checkpoint_in_one_call(tmp_path: Path, device: Any, framework: str) -> None:
    index, everything = _checkpoint(tmp_path)
    info: dict[str, Any] = {}
    out = hst.load_file(index, device, framework, info=info)
    assert info["files"] == 3 and set(out) == set(everything)
    for k, v in everything.items():
        assert np.array_equal(np.asarray(out[k]).view(v.dtype).reshape(v.shape), v)
    # the same as a list of files
    files = sorted(str(p) for p in tmp_path.glob("model-*.safetensors"))
    again = hst.load_file(files, device, framework)
    assert set(again) == set(everything)


def test_subset_across_shards(tmp_path: Path) -> None:
    index, everything = _checkpoint(tmp_path)
    info: dict[str, Any] = {}
    want = ["layer2.b", "layer0.w"]
    out = hnp.load_file(index, names=want)
    assert list(out) == want
    for k in want:
        assert np.array_equal(out[k], everything[k])
    hst.load_file(index, names=["layer1.b"], info=info)
    assert info["bytes_read"] < 3 * 4096
    with pytest.raises(hst.TensorNotFoundError):
        hst.load_file(index, names=["nope"])


def test_shards_errors(tmp_path: Path) -> None:
    index, _ = _checkpoint(tmp_path, shards=2)
    files = sorted(str(p) for p in tmp_path.glob("model-*.safetensors"))
    with pytest.raises(hst.SafetensorError, match="in both"):
        hst.load_file([files[0], files[0]])
    with pytest.raises(ValueError, match="no files"):
        hst.load_file([])
    bad = tmp_path / "bad.index.json"
    bad.write_text(json.dumps({"weights": {}}))
    with pytest.raises(hst.SafetensorError, match="weight_map"):
        hst.load_file(bad)
    os.unlink(files[1])
    with pytest.raises(FileNotFoundError):
        hst.load_file(index)


def _rewrite_index(index: Path, change: Any) -> None:
    obj = json.loads(index.read_text())
    change(obj["weight_map"])
    index.write_text(json.dumps(obj))


@pytest.mark.parametrize("framework", ["np", "hip"])
def test_index_that_disagrees_with_its_shards(tmp_path: Path, framework: str) -> None:
    """An index naming a tensor in a shard that lacks it, a tensor in two
    shards, or a missing shard: SafetensorError naming the tensor and the
    file, never a load that drops or picks a tensor silently."""
    device = "cpu" if framework == "np" else 0
    index, everything = _checkpoint(tmp_path, shards=2)
    first = "model-00001-of-00002.safetensors"
    second = "model-00002-of-00002.safetensors"

    # the index names a tensor that no shard holds
    _rewrite_index(index, lambda w: w.update({"layer9.w": first}))
    with pytest.raises(hst.SafetensorError) as info:
        hst.load_file(index, device, framework)
    assert "'layer9.w'" in str(info.value) and first in str(info.value)
    assert "in no shard" in str(info.value)
    # ... and with names that do not include it
    with pytest.raises(hst.SafetensorError, match=r"layer9\.w"):
        hst.load_file(index, device, framework, names=["layer0.w"])

    # the index puts a tensor in the wrong shard
    _rewrite_index(index, lambda w: (w.pop("layer9.w"), w.update({"layer1.b": first})))
    with pytest.raises(hst.SafetensorError) as info:
        hst.load_file(index, device, framework)
    assert "'layer1.b'" in str(info.value) and first in str(info.value)
    assert second in str(info.value)

    # a tensor in two shards (the index naming one of them)
    _rewrite_index(index, lambda w: w.update({"layer1.b": second}))
    extra = dict(stn.load_file(str(tmp_path / first)))
    extra["layer1.b"] = everything["layer1.b"]
    stn.save_file(extra, str(tmp_path / first))
    with pytest.raises(hst.SafetensorError, match="in both") as info:
        hst.load_file(index, device, framework)
    assert "'layer1.b'" in str(info.value)
    assert first in str(info.value) and second in str(info.value)

    # a shard the index names is missing: also a FileNotFoundError
    stn.save_file({k: v for k, v in everything.items() if k.startswith("layer0")},
                  str(tmp_path / first))
    assert set(hst.load_file(index, device, framework)) == set(everything)
    os.unlink(tmp_path / second)
    for err in (hst.SafetensorError, FileNotFoundError):
        with pytest.raises(err) as info:
            hst.load_file(index, device, framework)
        assert second in str(info.value) and "layer1." in str(info.value)
        assert isinstance(info.value, FileNotFoundError)
        assert info.value.filename == str(tmp_path / second)


def test_progress_bar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("tqdm")
    index, everything = _checkpoint(tmp_path)
    out = hst.load_file(index, "cpu", "np", progress=True)
    assert set(out) == set(everything)
    err = capsys.readouterr().err
    assert "loading 3 files" in err and "100%" in err


# --------------------------------------------------------------------------
# reader="staged": accepted for compatibility, read by the engine's ring
# --------------------------------------------------------------------------


@pytest.mark.parametrize("block", [4096, 65536, None])
def test_staged_reader_is_the_engine(tmp_path: Path, block: int | None,
                                     engine_submissions: list[int]) -> None:
    """reader="staged" loads every file of a checkpoint through the engine
    (one submission per file, its task size the engine's) and says so."""
    rng = np.random.default_rng(9)
    arrays = {f"t{i}": rng.integers(0, 255, (1 + 99_991 * i,), dtype=np.uint8)
              for i in range(5)}
    paths = []
    for k in range(2):
        p = tmp_path / f"s{k}.safetensors"
        stn.save_file({f"{n}.{k}": v for n, v in arrays.items()}, str(p))
        paths.append(str(p))
    info: dict[str, Any] = {}
    out = hst.load_file(paths, reader="staged", task_size=block, info=info)
    assert engine_submissions == [1, 1]
    assert info["reader"] == "stream"
    assert info["task_size"] == (block or hipfile.defaults.engine_task_size())
    for k in range(2):
        for n, v in arrays.items():
            assert np.array_equal(np.asarray(out[f"{n}.{k}"]), v)


def test_staged_reader_in_safe_open_reads_ahead(tmp_path: Path) -> None:
    """safe_open(reader="staged") is the engine's reader: get_tensor reads
    the tensors that follow ahead, as with the default reader."""
    arrays = {f"t{i}": np.full(4096 * (i + 1), i, np.uint8) for i in range(4)}
    path = tmp_path / "ahead.safetensors"
    stn.save_file(arrays, str(path))
    with hst.safe_open(path, "hip", reader="staged") as f:
        got = {"t0": f.get_tensor("t0")}
        assert list(f._ahead.window) == ["t1", "t2", "t3"]
        got.update((n, f.get_tensor(n)) for n in ("t1", "t2", "t3"))
    for n, v in arrays.items():
        assert np.array_equal(np.asarray(got[n]), v)


def test_staged_reader_reports_a_truncated_file(tmp_path: Path,
                                                truncate_after_header: None) -> None:
    path = tmp_path / "t.safetensors"
    stn.save_file({"a": np.zeros(300_000, np.uint8)}, str(path))
    with pytest.raises(hst.SafetensorError, match="truncated"):
        hst.load_file(path, reader="staged", task_size=65536)


def test_staged_reader_refuses_host_memory(tmp_path: Path) -> None:
    path = tmp_path / "h.safetensors"
    stn.save_file({"a": np.zeros(8, np.uint8)}, str(path))
    with pytest.raises(ValueError, match="device memory"):
        hst.load_file(path, "cpu", "np", reader="staged")
    with pytest.raises(ValueError, match="device memory"):
        hst.safe_open(path, "np", "cpu", reader="staged")


# --------------------------------------------------------------------------
# torch (skipped without torch)
# --------------------------------------------------------------------------


def test_torch_cpu_round_trip(tmp_path: Path) -> None:
    """Mirrors ReadmeTestCase.test_torch_example and test_pt_comparison's
    TorchTestCase.test_in_memory on the CPU."""
    torch = pytest.importorskip("torch")
    from safetensors import torch as stt

    from hipfile.safetensors import torch as ht

    tensors = {"a": torch.randn((2, 2)), "b": torch.randint(0, 128, (2, 3), dtype=torch.uint8),
               "c": torch.randn((3,), dtype=torch.bfloat16)}
    path = tmp_path / "pt.safetensors"
    ht.save_file(tensors, path)
    assert path.read_bytes() == stt.save(tensors) == ht.save(tensors)
    for out in (ht.load_file(path), ht.load(ht.save(tensors)),
                hst.load_file(path, "cpu", "pt")):
        assert out.keys() == tensors.keys()
        for k, v in tensors.items():
            assert out[k].dtype == v.dtype and torch.equal(out[k], v)
    # loads are views of one allocation: they save again (not "shared")
    again = tmp_path / "again.safetensors"
    ht.save_file(ht.load_file(path), again)
    assert again.read_bytes() == path.read_bytes()


def test_torch_save_errors(tmp_path: Path) -> None:
    """Mirrors TorchTestCase.test_bogus, test_sparse, test_meta_tensor and
    the shared-memory refusal."""
    torch = pytest.importorskip("torch")
    from hipfile.safetensors import torch as ht

    p = tmp_path / "x.safetensors"
    with pytest.raises(ValueError, match=r"expected torch\.Tensor"):
        ht.save_file({"test": {"some": "thing"}}, p)  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="Expected a dict"):
        ht.save_file("notadict", p)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sparse"):
        ht.save_file({"s": torch.zeros(2, 3).to_sparse()}, p)
    with pytest.raises(RuntimeError, match="meta tensor"):
        ht.save_file({"m": torch.zeros((2, 2), device="meta")}, p)
    a = torch.zeros(10)
    with pytest.raises(RuntimeError, match="share memory"):
        ht.save_file({"a": a, "b": a[:5]}, p)
    with pytest.raises(ValueError, match="non contiguous"):
        ht.save_file({"t": torch.zeros(4, 4).t()}, p)
    assert not p.exists()


def test_torch_models(tmp_path: Path) -> None:
    """Mirrors test_pt_model.py: tied weights are saved once and load back;
    strict loading names missing keys."""
    torch = pytest.importorskip("torch")
    from hipfile.safetensors import torch as ht

    class Tied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(4, 4)
            self.b = self.a

    class Pair(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(4, 4)
            self.b = torch.nn.Linear(4, 4)

    model = Tied()
    path = tmp_path / "tied.safetensors"
    ht.save_model(model, path)
    with hst.safe_open(path, "pt") as f:
        assert f.keys() == ["a.bias", "a.weight"]
        assert f.metadata() == {"b.bias": "a.bias", "b.weight": "a.weight"}
    fresh = Tied()
    assert ht.load_model(fresh, path) == (set(), [])
    assert torch.equal(fresh.b.weight, model.a.weight)
    with pytest.raises(RuntimeError, match=re.escape('Missing key(s) in state_dict: "b.bias", '
                                                     '"b.weight"')):
        ht.load_model(Pair(), path)
    assert ht.load_model(Pair(), path, strict=False) == ({"b.bias", "b.weight"}, [])
    assert ht.load_model(Tied(), path, backend="pread") == (set(), [])
    with pytest.raises(ValueError, match="backend"):
        ht.load_model(Tied(), path, backend="nope")
    with pytest.raises(ValueError, match="backend"):
        ht.load_file(path, backend="nope")


@pytest.mark.parametrize("reader", ["auto", "staged"])
def test_a_direct_read_the_file_system_refuses_is_read_buffered(tmp_path: Path,
                                                                reader: str) -> None:
    """A read that O_DIRECT refuses (EINVAL, as file systems that take
    O_DIRECT at open but not on reads answer) is read again through the
    file's buffered descriptor by the engine; a buffered load, which has no
    other descriptor, raises the refusal."""
    if not direct_io_supported(tmp_path):
        pytest.skip("no O_DIRECT on this file system")
    if hipfile.engine.mechanism() != "stream-memory-operations":
        pytest.skip("the engine's staged path needs stream waits")
    data = np.random.default_rng(5).integers(0, 255, 4 << 20, dtype=np.uint8)
    path = tmp_path / "d.safetensors"
    stn.save_file({"a": data}, str(path))
    info: dict[str, Any] = {}
    _hipfile.engine_inject_faults(errno.EINVAL, count=1)
    try:
        out = hst.load_file(path, direct=True, reader=reader, info=info)
    finally:
        _hipfile.engine_inject_faults()
    assert info["direct"] is True
    assert np.array_equal(np.asarray(out["a"]), data)
    _hipfile.engine_inject_faults(errno.EINVAL, count=1)
    try:
        with pytest.raises(OSError) as err:
            hst.load_file(path, direct=False, reader=reader)
    finally:
        _hipfile.engine_inject_faults()
    assert err.value.errno == errno.EINVAL
