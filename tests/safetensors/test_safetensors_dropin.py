"""hipfile.safetensors against safetensors itself where a user switching
from it would notice: slices with steps and an ellipsis (results and errors
compared with the reference over random shapes, dtypes and indices), which
bytes a slice reads, the exception classes, the index of a sharded
checkpoint given to safe_open, host loads with no GPU library, and the
path named when a save fails."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import run_python
from hypothesis import given, settings
from hypothesis import strategies as hs

from hipfile import safetensors as hst
from hipfile.safetensors import numpy as hnp
from hipfile.safetensors._slice import MAX_RUNS

st = pytest.importorskip("safetensors")
stn = pytest.importorskip("safetensors.numpy")

DTYPES = [np.float32, np.float64, np.int8, np.uint8, np.int16, np.int32, np.int64, np.float16,
          np.bool_, np.uint16]


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    shapes = [(), (1,), (7,), (0,), (3, 4), (4, 0, 2), (5, 3, 2), (2, 3, 4, 5), (6, 1, 3),
              (1, 1, 1), (9, 2)]
    out = {}
    for i, shape in enumerate(shapes):
        for dt in DTYPES[i % 3::3]:
            out[f"t{i}_{np.dtype(dt).name}"] = rng.integers(0, 120, size=shape).astype(dt)
    return out


ARRAYS = _arrays()


@pytest.fixture(scope="module")
def sliced_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("slices") / "s.safetensors"
    stn.save_file(ARRAYS, path)
    return path


def _outcome(open_: Any, path: Path, name: str, index: Any) -> tuple[str, Any]:
    """``("ok", array)``, ``("safetensor", message)`` or ``("other", exc)``."""
    with open_(path, framework="numpy") as f:
        try:
            return "ok", f.get_slice(name)[index]
        except st.SafetensorError as e:           # the reference's class
            return "safetensor", str(e)
        except hst.SafetensorError as e:          # ours
            return "safetensor", str(e)
        except BaseException as e:  # the reference panics (PanicException)
            if isinstance(e, KeyboardInterrupt):
                raise
            return "other", e


def _check_same(path: Path, name: str, index: Any, a: np.ndarray) -> None:
    kind, want = _outcome(st.safe_open, path, name, index)
    got_kind, got = _outcome(hst.safe_open, path, name, index)
    if kind == "other":
        # the reference fails outside its error class (negative slice bounds:
        # OverflowError; a stop before the start: SystemError or a panic):
        # ours follows Python's slices there, or refuses with SafetensorError
        assert got_kind in ("ok", "safetensor"), (index, got)
        if got_kind == "ok":
            assert got.shape == a[index].shape and np.array_equal(got, a[index]), index
        return
    assert got_kind == kind, (name, index, want, got)
    if kind == "safetensor":
        assert got == want, (name, index)
        return
    assert got.dtype == want.dtype and got.shape == want.shape, (name, index)
    assert got.tobytes() == want.tobytes(), (name, index)
    assert got.flags.c_contiguous


def _item(size: int) -> hs.SearchStrategy[Any]:
    bound = hs.none() | hs.integers(-size - 2, size + 2)
    step = hs.none() | hs.integers(-2, 4)
    return hs.one_of(
        hs.integers(-size - 1, size + 1),
        hs.just(Ellipsis),
        hs.builds(slice, bound, bound, step),
        hs.sampled_from([None, "x", 1.5, [], [0]]),
    )


@settings(max_examples=400, deadline=None)
@given(data=hs.data())
def test_slices_match_safetensors(sliced_file: Path, data: hs.DataObject) -> None:
    """Random indices (ints, negative ones, slices with and without steps,
    an ellipsis or two, empty ranges, out-of-range values, other types) on
    random shapes and dtypes: the same dtype, shape and bytes as
    safetensors' numpy slices, or the same SafetensorError message."""
    name = data.draw(hs.sampled_from(sorted(ARRAYS)))
    shape = ARRAYS[name].shape
    n = data.draw(hs.integers(0, len(shape) + 2))
    items = [data.draw(_item(shape[k] if k < len(shape) else 2)) for k in range(n)]
    index: Any = tuple(items)
    if n == 1 and data.draw(hs.booleans()):
        index = items[0]
    _check_same(sliced_file, name, index, ARRAYS[name])


@settings(max_examples=200, deadline=None)
@given(data=hs.data())
def test_device_slices_match_host_slices(sliced_file: Path, data: hs.DataObject) -> None:
    """Random valid indices read into device memory (framework "hip": each
    run of bytes read into its place in the result by one scatter
    operation) give the bytes and shape of the same slice in host memory,
    and refuse what the host path refuses, with its message."""
    name = data.draw(hs.sampled_from(sorted(ARRAYS)))
    a = ARRAYS[name]
    n = data.draw(hs.integers(0, len(a.shape)))
    items = [data.draw(_item(a.shape[k])) for k in range(n)]
    index: Any = tuple(items)
    kind, want = _outcome(hst.safe_open, sliced_file, name, index)
    with hst.safe_open(sliced_file, "hip", device=0) as f:
        try:
            got = f.get_slice(name)[index]
        except hst.SafetensorError as e:
            assert kind == "safetensor" and str(e) == want, (name, index)
            return
        except (TypeError, ValueError, IndexError) as e:
            assert kind == "other" and type(e) is type(want), (name, index, e, want)
            return
    assert kind == "ok", (name, index, want)
    host = got.copy_to_host()
    assert host.shape == want.shape and host.tobytes() == want.tobytes(), (name, index)


@pytest.mark.parametrize("index", [
    np.s_[::2], np.s_[..., 0], np.s_[1::2, ..., 3], np.s_[:, ::3], np.s_[..., ::2],
    np.s_[1, ..., 2, 3], np.s_[..., -1], np.s_[0, ..., 0], np.s_[::3, 1:, ::4], np.s_[...],
    np.s_[()], np.s_[::100], np.s_[0:4:2, 0:0], np.s_[..., 1:1], np.s_[-1, 2:5:2],
    np.s_[::-1], np.s_[::0], np.s_[..., ...], np.s_[None], np.s_[..., 6], np.s_[4::2],
    np.s_[:10:2], np.s_[1, 2, 3, 4], np.s_[:, :, -7], np.s_[..., 1.5],
], ids=repr)
def test_steps_and_ellipsis(tmp_path: Path, index: Any) -> None:
    """The issue's cases and their neighbours, on a 3-d tensor: ``[::2]``
    and ``[..., 0]`` give what safetensors gives, and what it refuses is
    refused with its message."""
    a = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    path = tmp_path / "a.safetensors"
    stn.save_file({"a": a}, path)
    _check_same(path, "a", index, a)


@pytest.fixture
def preadv_bytes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Bytes asked of every ``os.preadv`` (the host path's read call)."""
    sizes: list[int] = []
    real = os.preadv

    def counting(fd: int, buffers: Any, offset: int, *args: Any) -> int:
        sizes.append(sum(memoryview(b).nbytes for b in buffers))
        return real(fd, buffers, offset, *args)

    monkeypatch.setattr(os, "preadv", counting)
    yield sizes


def test_slices_read_only_the_bytes_they_need(tmp_path: Path, preadv_bytes: list[int]) -> None:
    """Rows with a step read those rows; an inner index reads one run per
    row (rows of 4 MiB, so the runs are not merged across the gaps)."""
    rows, cols = 8, 1 << 20
    a = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    path = tmp_path / "big.safetensors"
    hnp.save_file({"a": a}, path)
    row = cols * 4
    with hst.safe_open(path, framework="np") as f:
        s = f.get_slice("a")
        preadv_bytes.clear()
        got = s[::2]
        assert np.array_equal(got, a[::2]) and got.flags.c_contiguous
        # 4 rows, each rounded out to 4 KiB pages (8 KiB at most per row)
        assert 4 * row <= sum(preadv_bytes) <= 4 * row + 4 * 8192, sum(preadv_bytes)
        preadv_bytes.clear()
        got = s[..., 3]
        assert np.array_equal(got, a[:, 3]) and got.shape == (rows,)
        assert sum(preadv_bytes) <= rows * 8192, sum(preadv_bytes)
        preadv_bytes.clear()
        got = s[1:7:3, 10:20:5]
        assert np.array_equal(got, a[1:7:3, 10:20:5])
        assert sum(preadv_bytes) <= 2 * 8192, sum(preadv_bytes)
        preadv_bytes.clear()
        got = s[2:3]
        assert np.array_equal(got, a[2:3])
        assert row <= sum(preadv_bytes) <= row + 8192


def test_runs_of_a_column_block_reach_the_planner_joined(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A column block of host memory (a run per row) hands the read
    planner one range per stretch of runs the planner would join anyway
    (gaps of at most ``DEFAULT_MAX_GAP``), not one per row; gaps larger
    than that stay apart."""
    from hipfile.safetensors import _open

    ranges: list[int] = []
    real = _open.load_many

    def spying(*args: Any, runs: Any = None, **kw: Any) -> Any:
        ranges.extend(len(r) for r in (runs or {}).values())
        return real(*args, runs=runs, **kw)

    monkeypatch.setattr(_open, "load_many", spying)
    narrow = np.arange(4096 * 64, dtype=np.float32).reshape(4096, 64)
    wide = np.arange(4 * (1 << 19), dtype=np.float32).reshape(4, 1 << 19)
    path = tmp_path / "cols.safetensors"
    hnp.save_file({"narrow": narrow, "wide": wide}, path)
    with hst.safe_open(path, framework="np") as f:
        got = f.get_slice("narrow")[:, 16:32]
        assert np.array_equal(got, narrow[:, 16:32]) and ranges == [1]
        ranges.clear()
        got = f.get_slice("wide")[:, 5:9]      # rows of 2 MiB: gaps over 1 MiB
        assert np.array_equal(got, wide[:, 5:9]) and ranges == [4]


def test_slice_of_many_small_runs_is_bounded(tmp_path: Path) -> None:
    """An inner index over many short rows is read in few operations (runs
    merged), and gives the right values."""
    a = np.arange(200_000 * 3, dtype=np.int16).reshape(200_000, 3)
    path = tmp_path / "many.safetensors"
    hnp.save_file({"a": a}, path)
    with hst.safe_open(path, framework="np") as f:
        got = f.get_slice("a")[..., 1]
        assert np.array_equal(got, a[:, 1])
        got = f.get_slice("a")[5::7, 2]
        assert np.array_equal(got, a[5::7, 2])


def test_device_slices(tmp_path: Path) -> None:
    """framework="hip": a selection whose runs of bytes make its result in
    C order (rows, a column block, steps: each run read into its place) is
    a DeviceTensor with the right bytes; one of more runs than a slice
    enumerates is refused with SafetensorError naming the frameworks that
    take it."""
    a = np.arange(6 * 4 * 2, dtype=np.int32).reshape(6, 4, 2)
    big = np.arange(400 * 100, dtype=np.int32).reshape(400, 100)
    small = np.arange(8 * 6, dtype=np.int8).reshape(8, 6)
    path = tmp_path / "d.safetensors"
    hnp.save_file({"a": a, "big": big, "small": small}, path)
    with hst.safe_open(path, framework="hip", device=0) as f:
        # one-byte runs one byte apart: none joined across its gap
        for index in (np.s_[:, ::2], np.s_[:, 1::2], np.s_[::2, 1:5:3]):
            got = f.get_slice("small")[index].copy_to_host()
            assert got.shape == small[index].shape and np.array_equal(got, small[index]), index
        s = f.get_slice("a")
        for index in (np.s_[1:4], np.s_[2], np.s_[2, 1:3], np.s_[..., :], np.s_[3, 2, 1],
                      np.s_[::1], np.s_[0:0], np.s_[::2], np.s_[..., 0], np.s_[:, 1],
                      np.s_[1:5:3, ::2, 1:], np.s_[:, 2:0]):
            got = s[index]
            assert isinstance(got, hst.DeviceTensor)
            host = got.copy_to_host()
            assert host.shape == a[index].shape and np.array_equal(host, a[index]), index
        # many runs (one per row), planned and submitted as arrays
        for index in (np.s_[:, 10:35], np.s_[::3, 10:35], np.s_[1:399:2, 99], np.s_[5:300, :],
                      np.s_[17:390, 0:100], np.s_[-40:, 50:51]):
            got = f.get_slice("big")[index].copy_to_host()
            assert got.shape == big[index].shape and np.array_equal(got, big[index]), index
        assert 400 * 50 > MAX_RUNS
        with pytest.raises(hst.SafetensorError, match="framework 'pt' or 'numpy'"):
            f.get_slice("big")[:, ::2]


# --------------------------------------------------------------------------
# Exception classes and results (item 9)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["cuda:0", "cuda", 0])
def test_numpy_on_a_gpu_is_a_safetensor_error(tmp_path: Path, device: Any) -> None:
    """safe_open(framework="numpy", device=<a GPU>) raises SafetensorError,
    as safetensors does (a ValueError still)."""
    path = tmp_path / "n.safetensors"
    hnp.save_file({"a": np.zeros(2)}, path)
    with pytest.raises(st.SafetensorError):
        st.safe_open(path, framework="numpy", device=device)
    with pytest.raises(hst.SafetensorError, match="not supported for framework numpy") as info:
        hst.safe_open(path, framework="numpy", device=device)
    assert isinstance(info.value, ValueError)
    with pytest.raises(hst.SafetensorError):
        hst.load_file(path, device, "numpy")
    for bad in ({"framework": "flax"}, {"backend": "nope"}, {"device": "cuda:x"}):
        with pytest.raises(hst.SafetensorError):
            hst.safe_open(path, **{"framework": "numpy", **bad})


def test_safe_open_on_an_index_says_so(tmp_path: Path) -> None:
    """safe_open of a model.safetensors.index.json says it is a sharded
    checkpoint's index and points to load_file (no absurd header length)."""
    hnp.save_file({"a": np.arange(3.0)}, tmp_path / "s1.safetensors")
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": {"a": "s1.safetensors"}}))
    with pytest.raises(hst.SafetensorError) as info:
        hst.safe_open(index, framework="np")
    text = str(info.value)
    assert "index of a sharded checkpoint" in text and "load_file" in text
    assert str(index) in text and "header length" not in text
    other = tmp_path / "config.json"
    other.write_text('{"hidden_size": 4096}')
    with pytest.raises(hst.SafetensorError, match="JSON file, not a safetensors file"):
        hst.safe_open(other, framework="np")
    assert np.array_equal(hnp.load_file(index)["a"], np.arange(3.0))


def test_load_model_returns_a_set_of_missing_names(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """load_model returns (set, list) as safetensors does; torch's own
    model is replaced by an object with the two methods load_model calls,
    so this runs where torch is not installed."""
    from hipfile.safetensors import torch as ht

    class Model:
        def state_dict(self) -> dict[str, Any]:
            return {}

        def load_state_dict(self, state: Any, strict: bool) -> tuple[list[str], list[str]]:
            assert strict is False
            return ["b.weight"], ["extra"]

    monkeypatch.setattr(ht, "load_file", lambda *a, **k: {"extra": np.zeros(1)})
    missing, unexpected = ht.load_model(Model(), tmp_path / "unused", strict=False)  # type: ignore[arg-type]
    assert missing == {"b.weight"} and isinstance(missing, set)
    assert unexpected == ["extra"]

    class Clean(Model):
        def load_state_dict(self, state: Any, strict: bool) -> tuple[list[str], list[str]]:
            return [], []

    assert ht.load_model(Clean(), tmp_path / "unused") == (set(), [])  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# Host loads without a GPU library (item 10)
# --------------------------------------------------------------------------


def test_host_loads_need_no_gpu_library(tmp_path: Path) -> None:
    """hipfile.safetensors.numpy.load_file, safe_open(framework="np") and its
    slices work in a process where neither libhipfile nor a HIP runtime can
    be found (no platform activated), as safetensors.numpy does."""
    path = tmp_path / "host.safetensors"
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    stn.save_file({"a": a, "b": np.arange(5, dtype=np.int64)}, path)
    empty = tmp_path / "rocm"
    empty.mkdir()
    code = f"""
        import numpy as np
        from hipfile.safetensors import numpy as hnp, safe_open
        out = hnp.load_file({str(path)!r})
        assert np.array_equal(out["a"], np.arange(24, dtype=np.float32).reshape(4, 6))
        assert np.array_equal(out["b"], np.arange(5))
        with safe_open({str(path)!r}, framework="np") as f:
            assert np.array_equal(f.get_tensor("b"), np.arange(5))
            assert np.array_equal(f.get_slice("a")[::2, 1], np.array([1.0, 13.0], np.float32))
        try:
            import hipfile
            hipfile.get_version()
        except hipfile.HipFileLibraryNotFound:
            print("no library")
        print("ok")
    """
    r = run_python(code, clear=("HIPFILE_PLATFORM", "LD_LIBRARY_PATH", "HIPFILE_EMU_DEVICES"),
                   HIPFILE_LIBRARY=str(tmp_path / "nonexistent.so"), ROCM_PATH=str(empty))
    assert r.returncode == 0, r.stderr
    # the library really is unfindable in that process
    assert r.stdout.split() == ["no", "library", "ok"], r.stdout


# --------------------------------------------------------------------------
# Host get_tensor: each tensor as safetensors gives it, a small one in one
# preadv of the calling thread
# --------------------------------------------------------------------------


def _torch_or_skip() -> Any:
    return pytest.importorskip("torch")


@pytest.mark.parametrize("framework", ["numpy", "pt"])
def test_host_get_tensor_matches_safetensors(sliced_file: Path, framework: str) -> None:
    """Every tensor (0-d, empty, each dtype) read into host memory with
    get_tensor has safetensors' dtype, shape and bytes."""
    if framework == "pt":
        torch = _torch_or_skip()

        def raw(t: Any) -> bytes:
            return bytes(t.reshape(-1).view(torch.uint8).numpy())
    else:
        def raw(t: Any) -> bytes:
            return t.tobytes()
    with hst.safe_open(sliced_file, framework=framework) as ours, \
            st.safe_open(sliced_file, framework=framework) as ref:
        assert sorted(ours.keys()) == sorted(ref.keys())
        for name in ref.keys():
            want, got = ref.get_tensor(name), ours.get_tensor(name)
            assert type(got) is type(want), name
            assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape), name
            assert raw(got) == raw(want), name


@pytest.fixture
def preadv_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int]]]:
    """``(thread ident, bytes asked)`` of every ``os.preadv``; each call
    returns at most 1000 bytes (a read cut short, as a signal can leave it)."""
    import threading

    calls: list[tuple[int, int]] = []
    real = os.preadv

    def short(fd: int, buffers: Any, offset: int, *args: Any) -> int:
        calls.append((threading.get_ident(), sum(memoryview(b).nbytes for b in buffers)))
        first = memoryview(buffers[0]).cast("B")
        return real(fd, [first[:1000]], offset, *args)

    monkeypatch.setattr(os, "preadv", short)
    yield calls


@pytest.mark.parametrize("framework", ["numpy", "pt"])
def test_a_small_host_tensor_is_read_by_the_calling_thread(
        tmp_path: Path, framework: str, preadv_calls: list[tuple[int, int]]) -> None:
    """get_tensor of a 4 KiB tensor into host memory reads it with preadv in
    the caller's thread (no hand-off to a thread pool), going on after short
    counts until every byte is in; the bytes are the file's."""
    import threading

    if framework == "pt":
        _torch_or_skip()
    path = tmp_path / "small.safetensors"
    small = np.random.default_rng(3).standard_normal(1024).astype(np.float32)
    stn.save_file({"a": np.zeros(3001, np.float32), "small": small}, path)
    with hst.safe_open(path, framework=framework) as f:
        preadv_calls.clear()
        got = f.get_tensor("small")
    data = np.asarray(got) if framework == "numpy" else got.numpy()
    assert data.tobytes() == small.tobytes()
    assert {ident for ident, _ in preadv_calls} == {threading.get_ident()}
    # 4096 bytes at 1000 a call: 5 calls, each asking for what is left
    assert [n for _, n in preadv_calls] == [4096, 3096, 2096, 1096, 96]


@pytest.mark.parametrize("framework", ["numpy", "pt"])
def test_a_host_row_slice_is_read_by_the_calling_thread(
        tmp_path: Path, framework: str, preadv_calls: list[tuple[int, int]]) -> None:
    """Rows of a tensor into host memory (one range of the file) are read
    by the caller's thread straight into the result, through short counts;
    a tensor of more than one pool task (``task_size``) goes to the pool's
    threads."""
    import threading

    if framework == "pt":
        _torch_or_skip()
    path = tmp_path / "rows.safetensors"
    big = np.random.default_rng(5).standard_normal((64, 512)).astype(np.float32)
    stn.save_file({"big": big, "v": np.arange(9, dtype=np.int16)}, path)
    me = threading.get_ident()
    with hst.safe_open(path, framework=framework, task_size=64 << 10) as f:
        preadv_calls.clear()
        rows = f.get_slice("big")[8:24]          # 32 KiB: one task
        data = np.asarray(rows) if framework == "numpy" else rows.numpy()
        assert data.tobytes() == big[8:24].tobytes() and data.shape == (16, 512)
        assert {ident for ident, _ in preadv_calls} == {me}
        assert preadv_calls[0][1] == 16 * 512 * 4
        # the result owns its memory, no more (not a view into a larger read)
        if framework == "numpy":
            assert rows.base is None
        else:
            assert rows.untyped_storage().nbytes() == 16 * 512 * 4
        preadv_calls.clear()
        whole = f.get_tensor("big")              # 128 KiB: two tasks, on the pool
        data = np.asarray(whole) if framework == "numpy" else whole.numpy()
        assert data.tobytes() == big.tobytes()
        assert me not in {ident for ident, _ in preadv_calls}


def _mapping_flags(addr: int) -> list[str] | None:
    """The ``VmFlags`` of the mapping of this process holding ``addr``
    (``/proc/self/smaps``), or None when no mapping holds it."""
    flags = None
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(" ", 1)[0]
            if "-" in head and ":" not in head:
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= addr < hi
            elif inside and line.startswith("VmFlags:"):
                flags = line.split()[1:]
    return flags


def _huge_pages_advisable() -> bool:
    import mmap

    if not hasattr(mmap, "MADV_HUGEPAGE") or not os.path.exists("/proc/self/smaps"):
        return False
    m = mmap.mmap(-1, 4 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        m.madvise(mmap.MADV_HUGEPAGE)
    except OSError:
        return False
    finally:
        m.close()
    return True


@pytest.mark.parametrize("framework", ["numpy", "pt"])
@pytest.mark.parametrize("how", ["load_file", "get_tensor"])
def test_large_host_loads_are_in_memory_advised_for_huge_pages(
        tmp_path: Path, framework: str, how: str) -> None:
    """A host load of 4 MiB or more (a whole file, or one tensor) lands in
    memory of its own advised for transparent huge pages (``hg`` in the
    mapping's flags), with the file's bytes; the mapping is gone once the
    tensors are."""
    import gc

    if not _huge_pages_advisable():
        pytest.skip("no MADV_HUGEPAGE here")
    if framework == "pt":
        _torch_or_skip()
    rng = np.random.default_rng(9)
    tensors = {"w": rng.standard_normal((1024, 1280)).astype(np.float32),
               "b": np.arange(7, dtype=np.int64)}
    path = tmp_path / "large.safetensors"
    stn.save_file(tensors, path)
    if how == "load_file":
        from hipfile.safetensors import torch as ht

        out = (hnp.load_file(path) if framework == "numpy"
               else ht.load_file(path, device="cpu"))
    else:
        with hst.safe_open(path, framework=framework) as f:
            out = {"w": f.get_tensor("w")}
    w = out["w"]
    data = w if framework == "numpy" else w.numpy()
    assert data.tobytes() == tensors["w"].tobytes() and data.shape == (1024, 1280)
    addr = int(data.ctypes.data)
    flags = _mapping_flags(addr)
    assert flags is not None and "hg" in flags, flags
    del out, w, data
    gc.collect()
    assert "hg" not in (_mapping_flags(addr) or [])


def test_a_host_read_in_the_calling_thread_is_capped(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """However large the task size, a tensor of more than 16 MiB into host
    memory is read on the pool (a read in the calling thread cannot be
    interrupted before it returns)."""
    import threading

    from hipfile.safetensors._load import HOST_INLINE_CAP

    path = tmp_path / "large.safetensors"
    big = np.random.default_rng(2).integers(0, 255, HOST_INLINE_CAP + 4096, dtype=np.uint8)
    stn.save_file({"big": big}, path)
    idents: list[int] = []
    real = os.preadv

    def record(fd: int, buffers: Any, offset: int, *args: Any) -> int:
        idents.append(threading.get_ident())
        return real(fd, buffers, offset, *args)

    monkeypatch.setattr(os, "preadv", record)
    with hst.safe_open(path, framework="numpy", task_size=64 << 20) as f:
        assert np.array_equal(f.get_tensor("big"), big)
    assert idents and threading.get_ident() not in idents


@pytest.mark.parametrize("call", ["get_tensor", "slice"])
def test_close_during_a_host_read_waits_for_it(tmp_path: Path, call: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """close() from another thread while a host read is in its preadv
    waits for the read: the reader gets the file's bytes, never a closed
    (or reused) descriptor, and the handle is closed after."""
    import threading

    path = tmp_path / "race.safetensors"
    big = np.arange(64 * 256, dtype=np.float32).reshape(64, 256)
    stn.save_file({"big": big}, path)
    entered = threading.Event()
    real = os.preadv

    def slow(fd: int, buffers: Any, offset: int, *args: Any) -> int:
        entered.set()
        threading.Event().wait(0.3)         # the close below runs meanwhile
        return real(fd, buffers, offset, *args)

    f = hst.safe_open(path, framework="numpy")
    monkeypatch.setattr(os, "preadv", slow)
    out: list[Any] = []

    def read() -> None:
        try:
            out.append(f.get_tensor("big") if call == "get_tensor"
                       else f.get_slice("big")[8:16])
        except BaseException as exc:       # reported below
            out.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    assert entered.wait(10)
    closer = threading.Thread(target=f.close)
    closer.start()
    reader.join(10)
    closer.join(10)
    assert not reader.is_alive() and not closer.is_alive()
    want = big if call == "get_tensor" else big[8:16]
    assert isinstance(out[0], np.ndarray), out[0]
    assert np.array_equal(out[0], want)
    with pytest.raises(hst.SafetensorError, match="closed"):
        f.get_tensor("big")


def test_a_host_read_begun_while_close_runs_finds_the_file_closed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A get_tensor that another thread starts after close() has dropped
    what was read ahead, but before the file is closed, either ends before
    the close or finds the file closed (SafetensorError): it never reads
    from a descriptor being closed (its preadv is slowed down here so that
    the close would fall inside it)."""
    import threading

    path = tmp_path / "race.safetensors"
    big = np.arange(64 * 256, dtype=np.float32).reshape(64, 256)
    stn.save_file({"big": big}, path)
    f = hst.safe_open(path, framework="numpy")
    real = os.preadv

    def slow(fd: int, buffers: Any, offset: int, *args: Any) -> int:
        threading.Event().wait(0.3)
        return real(fd, buffers, offset, *args)

    monkeypatch.setattr(os, "preadv", slow)
    dropped, started = threading.Event(), threading.Event()
    drop_all, close_fh = f._ahead.drop_all, f._close_fh

    def drop_then_tell(*args: Any, **kwargs: Any) -> None:
        drop_all(*args, **kwargs)
        dropped.set()

    def close_late() -> bool:
        started.wait(0.5)                   # the reader's call has begun
        threading.Event().wait(0.1)
        return close_fh()

    f._ahead.drop_all = drop_then_tell      # type: ignore[method-assign]
    f._close_fh = close_late                # type: ignore[method-assign]
    out: list[Any] = []

    def read() -> None:
        dropped.wait(10)
        started.set()
        try:
            out.append(f.get_tensor("big"))
        except BaseException as exc:       # reported below
            out.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    f.close()
    reader.join(10)
    assert not reader.is_alive()
    if isinstance(out[0], np.ndarray):
        assert np.array_equal(out[0], big)
    else:
        assert isinstance(out[0], hst.SafetensorError) and "closed" in str(out[0]), out[0]


def test_a_small_host_load_is_read_by_the_calling_thread(
        tmp_path: Path, preadv_calls: list[tuple[int, int]]) -> None:
    """load_file of one file whose bytes are one task of the pool (under
    256 KiB, or up to ``task_size`` as the load's only read) reads it in
    the caller's thread, whole through short counts."""
    import threading

    path = tmp_path / "little.safetensors"
    tensors = {"a": np.arange(3001, dtype=np.float32), "b": np.arange(77, dtype=np.int64)}
    stn.save_file(tensors, path)
    preadv_calls.clear()
    out = hnp.load_file(path)
    assert all(np.array_equal(out[k], v) for k, v in tensors.items())
    assert preadv_calls and {ident for ident, _ in preadv_calls} == {threading.get_ident()}
    # a file of 1 MiB is one task of the pool (4 MiB): read here as well
    large = {"w": np.random.default_rng(1).standard_normal(1 << 18).astype(np.float32)}
    stn.save_file(large, path)
    preadv_calls.clear()
    out = hnp.load_file(path)
    assert np.array_equal(out["w"], large["w"])
    assert {ident for ident, _ in preadv_calls} == {threading.get_ident()}


def test_a_small_host_tensor_cut_short_is_reported(tmp_path: Path) -> None:
    """A file truncated after it was opened: get_tensor of a small tensor
    it cut raises SafetensorError, and the handle still reads what is left."""
    path = tmp_path / "cut.safetensors"
    a = np.arange(256, dtype=np.float32)
    b = np.arange(1024, dtype=np.float32)
    stn.save_file({"a": a, "b": b}, path)
    with hst.safe_open(path, framework="numpy") as f:
        size = os.path.getsize(path)
        os.truncate(path, size - 100)
        with pytest.raises(hst.SafetensorError, match="truncated"):
            f.get_tensor("b" if f.offset_keys()[-1] == "b" else "a")
        first = f.offset_keys()[0]
        assert np.array_equal(f.get_tensor(first), a if first == "a" else b)


# --------------------------------------------------------------------------
# save_file's errors name the caller's path (item 11)
# --------------------------------------------------------------------------


def test_save_into_a_missing_folder_names_the_path(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "model.safetensors"
    with pytest.raises(FileNotFoundError) as info:
        hnp.save_file({"a": np.zeros(2)}, target)
    assert info.value.filename == str(target)
    assert ".tmp" not in str(info.value)
    assert str(target.parent) in str(info.value)
    assert not target.parent.exists()
    folder = tmp_path / "dir.safetensors"
    folder.mkdir()
    with pytest.raises(OSError) as err:
        hnp.save_file({"a": np.zeros(2)}, folder)
    assert err.value.filename == str(folder) and ".tmp" not in str(err.value)
    assert os.listdir(tmp_path) == ["dir.safetensors"] and not os.listdir(folder)
