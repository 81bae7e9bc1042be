"""``safe_open(...).get_tensor`` into device memory reads ahead of the
caller: the tensors that follow in the order of the calls are submitted
while one is read, within a byte budget. What a loader relies on: every
tensor's bytes are the file's whatever the order of the calls, the window
follows the names' or the file's order and stops when calls follow
neither, a cut file raises, ``close`` waits for what is in flight and frees
it, and Ctrl-C in a wait loses nothing."""

from __future__ import annotations

import gc
import importlib.util
import json
import signal
import struct
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import held_stream, run_python

import hipfile
from hipfile import defaults
from hipfile import safetensors as hst
from hipfile.safetensors._tensor_read import ALIGNED_MIN, MISSES_TO_STOP

_DT = {np.dtype(np.float32): "F32", np.dtype(np.int16): "I16", np.dtype(np.uint8): "U8",
       np.dtype(np.float64): "F64"}


def write_in_order(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """A safetensors file with the data in the order of ``arrays`` (which
    need not be the order of the names)."""
    header: dict[str, Any] = {}
    at = 0
    for name, a in arrays.items():
        header[name] = {"dtype": _DT[a.dtype], "shape": list(a.shape),
                        "data_offsets": [at, at + a.nbytes]}
        at += a.nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for a in arrays.values():
            f.write(a.tobytes())


def _arrays() -> dict[str, np.ndarray]:
    """Names whose order is not the data's; sizes from nothing to a few MiB
    (over ALIGNED_MIN: read from whole pages) and odd byte counts."""
    rng = np.random.default_rng(3)
    out: dict[str, np.ndarray] = {}
    sizes = [5, 1 << 18, 3, ALIGNED_MIN // 4 + 7, 0, 1000, ALIGNED_MIN // 2 + 1, 77, 4096, 1]
    for i, n in enumerate(sizes):
        dt = [np.float32, np.int16, np.uint8, np.float64][i % 4]
        out[f"{'zyxwvutsrq'[i]}.{i}"] = rng.integers(0, 1000, size=n).astype(dt)
    return out


ARRAYS = _arrays()
BY_OFFSET = list(ARRAYS)
BY_NAME = sorted(ARRAYS)
assert BY_OFFSET != BY_NAME


@pytest.fixture()
def st_file(tmp_path: Path) -> Path:
    path = tmp_path / "ahead.safetensors"
    write_in_order(path, ARRAYS)
    return path


def host(t: Any) -> np.ndarray:
    return np.asarray(t.copy_to_host())


def same(name: str, t: Any) -> bool:
    got = host(t)
    return got.shape == ARRAYS[name].shape and np.array_equal(got, ARRAYS[name])


def test_key_loop_reads_ahead_in_name_order(st_file: Path) -> None:
    with hst.safe_open(st_file, "hip", device=0) as f:
        first = f.get_tensor(BY_NAME[0])
        assert same(BY_NAME[0], first)
        ahead = list(f._ahead.window)
        assert ahead and ahead == BY_NAME[1:1 + len(ahead)]
        for name in BY_NAME[1:]:
            assert same(name, f.get_tensor(name)), name
        assert not f._ahead.window


def test_key_loop_in_file_order_is_followed(st_file: Path) -> None:
    with hst.safe_open(st_file, "hip", device=0) as f:
        for k, name in enumerate(BY_OFFSET):
            assert same(name, f.get_tensor(name)), name
            if k + 1 < len(BY_OFFSET):
                assert BY_OFFSET[k + 1] in f._ahead.window
        assert f._ahead.misses == 0


def test_window_stays_within_the_budget(st_file: Path) -> None:
    budget = 1 << 18
    largest = max(a.nbytes for a in ARRAYS.values())
    with hst.safe_open(st_file, "hip", device=0, read_ahead=budget) as f:
        for name in BY_NAME:
            assert same(name, f.get_tensor(name))
            held = sum(p.info.nbytes for p in f._ahead.window.values())
            assert held <= max(budget, largest)
            assert f._ahead.bytes == held


def test_no_read_ahead_when_off(st_file: Path) -> None:
    with hst.safe_open(st_file, "hip", device=0, read_ahead=0) as f:
        for name in BY_NAME:
            assert same(name, f.get_tensor(name))
            assert not f._ahead.window
    with defaults.set("safetensors_read_ahead", 0), hst.safe_open(st_file, "hip", 0) as f:
        f.get_tensor(BY_NAME[0])
        assert not f._ahead.window


def test_calls_in_no_order_stop_the_read_ahead(st_file: Path) -> None:
    """A window of one tensor (a budget of one byte): calls that neither
    order foresees and the window does not hold stop the read-ahead."""
    order = [BY_NAME[3], BY_NAME[0], BY_NAME[7], BY_NAME[2], BY_NAME[9], BY_NAME[5],
             BY_NAME[0], BY_NAME[3]]
    with hst.safe_open(st_file, "hip", device=0, read_ahead=1) as f:
        for k, name in enumerate(order):
            assert same(name, f.get_tensor(name)), name
            assert bool(f._ahead.window) == (k < MISSES_TO_STOP)
        assert f._ahead.misses >= MISSES_TO_STOP


def test_a_call_anywhere_in_the_window_is_served_from_it(st_file: Path) -> None:
    with hst.safe_open(st_file, "hip", device=0) as f:
        assert same(BY_NAME[0], f.get_tensor(BY_NAME[0]))
        held = f._ahead.window[BY_NAME[6]]
        assert ARRAYS[BY_NAME[6]].nbytes
        assert same(BY_NAME[6], f.get_tensor(BY_NAME[6]))
        assert BY_NAME[6] not in f._ahead.window and held.handle.done()
        assert f._ahead.misses == 0


def test_a_part_of_a_tensor_stops_the_read_ahead(st_file: Path) -> None:
    """A slice that reads part of a tensor (a tensor-parallel rank's rows)
    stops reading whole tensors ahead: they would be read for nothing."""
    part = next(n for n in BY_NAME[1:] if ARRAYS[n].size >= 4)
    with hst.safe_open(st_file, "hip", device=0) as f:
        assert same(BY_NAME[0], f.get_tensor(BY_NAME[0]))
        assert part in f._ahead.window
        got = host(f.get_slice(part)[1:3])
        assert np.array_equal(got, ARRAYS[part][1:3])
        assert not f._ahead.window and f._ahead.bytes == 0
        assert f._ahead.misses >= MISSES_TO_STOP
        for name in BY_NAME:                     # on demand from here, the file's bytes
            assert same(name, f.get_tensor(name)), name
            assert not f._ahead.window


def test_a_whole_slice_keeps_the_read_ahead(st_file: Path) -> None:
    """``get_slice(name)[:]`` (and ``get_shape()``) read or look at whole
    tensors: reading ahead goes on."""
    name = next(n for n in BY_NAME[1:] if ARRAYS[n].size >= 4)
    with hst.safe_open(st_file, "hip", device=0) as f:
        assert same(BY_NAME[0], f.get_tensor(BY_NAME[0]))
        sl = f.get_slice(name)
        assert sl.get_shape() == list(ARRAYS[name].shape)
        assert np.array_equal(host(sl[:]), ARRAYS[name])
        assert f._ahead.window and f._ahead.misses == 0


def test_the_same_tensor_twice_and_skipped_ones(st_file: Path) -> None:
    with hst.safe_open(st_file, "hip", device=0) as f:
        assert same(BY_NAME[0], f.get_tensor(BY_NAME[0]))
        assert same(BY_NAME[0], f.get_tensor(BY_NAME[0]))       # read again
        assert same(BY_NAME[4], f.get_tensor(BY_NAME[4]))       # skips 1..3
        assert all(BY_NAME.index(k) > 4 for k in f._ahead.window)
        assert same(BY_NAME[2], f.get_tensor(BY_NAME[2]))       # back


def test_close_waits_and_frees_what_was_read_ahead(st_file: Path) -> None:
    f = hst.safe_open(st_file, "hip", device=0)
    f.get_tensor(BY_NAME[0])
    owners = [weakref.ref(p.owner) for p in f._ahead.window.values()]
    assert owners
    f.close()
    gc.collect()
    assert all(r() is None for r in owners)
    assert f._fh is None and not f._ahead.window
    with pytest.raises(hst.SafetensorError, match="closed"):
        f.get_tensor(BY_NAME[1])


def test_a_file_cut_after_open_raises_for_the_cut_tensor(st_file: Path) -> None:
    h = hst.read_header(st_file)
    last = BY_OFFSET[-2]                    # the cut falls inside it
    info = h.tensors[last]
    with hst.safe_open(st_file, "hip", device=0) as f:
        with open(st_file, "r+b") as w:
            w.truncate(h.data_offset + info.begin + info.nbytes // 2)
        for name in BY_OFFSET[:-2]:
            if ARRAYS[name].nbytes:
                assert same(name, f.get_tensor(name)), name
        with pytest.raises(hst.SafetensorError, match=f"of {info.nbytes} bytes of '{last}'"):
            f.get_tensor(last)
        with pytest.raises(hst.SafetensorError, match="truncated"):
            f.get_tensor(BY_OFFSET[-1])


def test_read_ahead_argument_is_checked(st_file: Path) -> None:
    with pytest.raises(ValueError, match="read_ahead must be >= 0, got -1"):
        hst.safe_open(st_file, "hip", 0, read_ahead=-1)
    for bad in (True, "1M", 1.5):
        with pytest.raises(TypeError, match="read_ahead must be an int"):
            hst.safe_open(st_file, "hip", 0, read_ahead=bad)   # type: ignore[arg-type]


@pytest.fixture()
def gated_null_stream() -> Iterator[Any]:
    """The null stream held at a host flag until the returned release is
    called (copies ordered after it wait). The engine's runtime is made
    first: its set-up (pinning the staging ring, which can take longer than
    the test's 0.3 s before Ctrl-C) must not fall in the interrupted call,
    where device memory freed while the null stream is held would wait for
    it for good."""
    hipfile.engine.prepare()
    with held_stream(0) as release:
        yield release


BIG = max(ARRAYS, key=lambda k: ARRAYS[k].nbytes)      # cut over the engine's threads
SMALL = BY_NAME[0]                                    # read by the submitting thread
assert ARRAYS[BIG].nbytes > 1 << 20 and 0 < ARRAYS[SMALL].nbytes < 4096


def _interrupted(fn: Any) -> None:
    timer = threading.Timer(0.3, signal.raise_signal, args=(signal.SIGINT,))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            fn()
            pytest.fail("returned while the null stream was held")
    finally:
        timer.cancel()
        timer.join()


def test_ctrl_c_in_get_tensor_loses_nothing(st_file: Path, gated_null_stream: Any) -> None:
    """A real SIGINT while get_tensor waits for a read held behind the null
    stream, for a large tensor and for a small one: KeyboardInterrupt, the
    read goes on in the window, the next calls return the file's bytes, and
    close frees everything."""
    f = hst.safe_open(st_file, "hip", device=0)
    owners = []
    for name in (BIG, SMALL):
        _interrupted(lambda name=name: f.get_tensor(name))
        assert name in f._ahead.window
        owners += [weakref.ref(p.owner) for p in f._ahead.window.values()]
    gated_null_stream()
    for name in (BIG, SMALL, *BY_NAME[1:3]):
        assert same(name, f.get_tensor(name)), name
    f.close()
    gc.collect()
    assert all(r() is None for r in owners)


def test_loads_never_open_the_driver(st_file: Path) -> None:
    """A fresh process that loads (load_file, get_tensor, slices) into
    device memory never opens the hipFile driver; a save from device
    memory does."""
    code = f"""
        import hipfile, hipfile.safetensors as hst
        path = {str(st_file)!r}
        out = hst.load_file(path, device=0)
        with hst.safe_open(path, "hip", device=0) as f:
            for k in f.keys():
                f.get_tensor(k)
            f.get_slice({BIG!r})[1:3]
        print("after loads", hipfile.use_count())
        hst.save_file(out, path + ".back")
        print("after a save", hipfile.use_count())
    """
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert "after loads 0" in proc.stdout and "after a save 1" in proc.stdout, proc.stdout


@pytest.mark.skipif(importlib.util.find_spec("rocm.bindings.cyhip") is None,
                    reason="this HIP-Python has no module of C entry points of its own")
def test_loads_never_import_hip_pythons_python_layer(st_file: Path) -> None:
    """The engine's set-up and a load into device memory take HIP's C
    entry points from HIP-Python's module of them alone: a fresh process
    that prepares the engine and loads (load_file, get_tensor, a slice)
    never imports HIP-Python's Python layer, which costs a first call
    about 0.1 s. Asking for a HIP-Python object (an event) still does."""
    code = f"""
        import sys
        import hipfile, hipfile.engine, hipfile.safetensors as hst
        path = {str(st_file)!r}
        hipfile.engine.prepare()
        out = hst.load_file(path, device=0)
        with hst.safe_open(path, "hip", device=0) as f:
            for k in f.keys():
                f.get_tensor(k)
            f.get_slice({BIG!r})[1:3]
        print("loaded", sorted(m for m in ("hip", "hip.hip", "rocm.bindings.hip")
                               if m in sys.modules))
        buf = hipfile.Buffer(out[{BIG!r}])
        with hipfile.open(path) as fh:
            h = fh.pread_async(buf, 4096, 0)
            h.wait()
            h.record_event()
        print("event", "rocm.bindings.hip" in sys.modules or "hip.hip" in sys.modules)
    """
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert "loaded []" in proc.stdout and "event True" in proc.stdout, proc.stdout


# --------------------------------------------------------------------------
# Parts read ahead: a tensor-parallel rank's slices
# --------------------------------------------------------------------------

RANKS = 4


def _model() -> dict[str, np.ndarray]:
    """Layers of 2-D weights of several shapes (rows and columns divisible
    by RANKS) with 1-D vectors between them, in name order."""
    rng = np.random.default_rng(11)
    out: dict[str, np.ndarray] = {}
    for layer in range(3):
        out[f"l{layer}.a.weight"] = rng.integers(0, 1 << 15, (64, 48)).astype(np.int16)
        out[f"l{layer}.b.norm"] = rng.random(48).astype(np.float32)
        out[f"l{layer}.c.weight"] = rng.random((128, 32)).astype(np.float32)
        out[f"l{layer}.d.weight"] = rng.integers(0, 255, (32, 256)).astype(np.uint8)
    return out


MODEL = _model()


@pytest.fixture()
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "model.safetensors"
    write_in_order(path, MODEL)
    return path


def _part(name: str, rank: int, split: str) -> tuple[Any, np.ndarray]:
    """The index a rank takes of ``name`` and the reference bytes."""
    a = MODEL[name]
    if a.ndim == 1:
        return None, a
    if split == "rows":
        n = a.shape[0]
        sel: Any = slice(rank * n // RANKS, (rank + 1) * n // RANKS)
    else:
        m = a.shape[1]
        sel = (slice(None), slice(rank * m // RANKS, (rank + 1) * m // RANKS))
    return sel, a[sel]


def _take(f: Any, name: str, sel: Any, whole_by_slice: bool = False) -> Any:
    if sel is None:
        return f.get_slice(name)[:] if whole_by_slice else f.get_tensor(name)
    return f.get_slice(name)[sel]


@pytest.mark.parametrize("whole_by_slice", [False, True], ids=["get_tensor", "slice-all"])
@pytest.mark.parametrize("split", ["rows", "columns"])
def test_a_ranks_slices_are_read_ahead(model_file: Path, split: str,
                                       whole_by_slice: bool) -> None:
    """A rank that takes its share of every 2-D tensor (and every 1-D one
    whole, with ``get_tensor`` or ``get_slice(name)[:]``), key by key: after
    its first call every call is served from a part read ahead (the same
    share of the next tensors, the vectors whole), and every result holds
    the file's bytes."""
    names = sorted(MODEL)
    for rank in range(RANKS):
        with hst.safe_open(model_file, "hip", device=0) as f:
            for k, name in enumerate(names):
                sel, want = _part(name, rank, split)
                if k > 1:           # foreseen by the calls before it
                    assert any(key[0] == name for key in f._ahead.parts), (rank, name)
                got = host(_take(f, name, sel, whole_by_slice))
                assert got.shape == want.shape and np.array_equal(got, want), (rank, name)
                assert f._ahead.part_misses == 0, (rank, name)      # served, not missed
            assert f._ahead.parts_on
            assert not f._ahead.parts


def test_parts_read_ahead_stay_within_the_budget(model_file: Path) -> None:
    budget = 4096
    largest = max(a.nbytes // RANKS for a in MODEL.values())
    with hst.safe_open(model_file, "hip", device=0, read_ahead=budget) as f:
        for name in sorted(MODEL):
            sel, want = _part(name, 1, "rows")
            assert np.array_equal(host(_take(f, name, sel)), want)
            held = sum(p.info.nbytes for p in f._ahead.parts.values())
            assert held <= max(budget, largest), name


def test_parts_no_order_foresees_stop_reading_ahead(model_file: Path) -> None:
    """Each call another rank's share: no part read ahead is the one asked,
    so after MISSES_TO_STOP such calls the handle stops reading parts
    ahead; every result is still the file's."""
    names = [n for n in sorted(MODEL) if MODEL[n].ndim == 2]
    with hst.safe_open(model_file, "hip", device=0) as f:
        for k, name in enumerate(names):
            sel, want = _part(name, k % RANKS, "rows")
            assert np.array_equal(host(_take(f, name, sel)), want), name
        assert f._ahead.part_misses >= MISSES_TO_STOP
        assert not f._ahead.parts
    with hst.safe_open(model_file, "hip", device=0, read_ahead=0) as f:
        for name in names:
            sel, want = _part(name, 2, "rows")
            assert np.array_equal(host(_take(f, name, sel)), want), name
            assert not f._ahead.parts


def test_a_share_that_does_not_scale_is_not_foreseen(model_file: Path) -> None:
    """A slice with a step, or a share that does not divide the next 2-D
    tensor's size, foresees nothing for it (the vector between them is
    foreseen whole): nothing is read for nothing."""
    first, vector, second = sorted(MODEL)[:3]
    with hst.safe_open(model_file, "hip", device=0) as f:
        got = host(f.get_slice(first)[0:64:2])
        assert np.array_equal(got, MODEL[first][0:64:2])
        assert list(f._ahead.parts) == [(vector, None)]
        got = host(f.get_slice(first)[:, 0:7])       # 7/48 of 32 columns is no count
        assert np.array_equal(got, MODEL[first][:, 0:7])
        assert [key[0] for key in f._ahead.parts] == [vector]
        assert np.array_equal(host(f.get_tensor(vector)), MODEL[vector])
        got = host(f.get_slice(second)[0:32])
        assert np.array_equal(got, MODEL[second][0:32])


def test_close_waits_and_frees_the_parts_read_ahead(model_file: Path) -> None:
    f = hst.safe_open(model_file, "hip", device=0)
    name = sorted(MODEL)[0]
    sel, _ = _part(name, 0, "rows")
    f.get_slice(name)[sel]
    owners = [weakref.ref(p.owner) for p in f._ahead.parts.values()]
    assert owners
    f.close()
    gc.collect()
    assert all(r() is None for r in owners)
    assert not f._ahead.parts


def test_ctrl_c_in_a_slice_loses_nothing(model_file: Path, gated_null_stream: Any) -> None:
    """A real SIGINT while a slice waits for its read, held behind the null
    stream: KeyboardInterrupt, the part stays read ahead, asking again
    returns the file's bytes, and the loop goes on from the parts ahead."""
    names = sorted(MODEL)
    f = hst.safe_open(model_file, "hip", device=0)
    sel, want = _part(names[0], 3, "columns")
    _interrupted(lambda: f.get_slice(names[0])[sel])
    assert any(key[0] == names[0] for key in f._ahead.parts)
    gated_null_stream()
    for name in names:
        sel, want = _part(name, 3, "columns")
        assert np.array_equal(host(_take(f, name, sel)), want), name
    assert f._ahead.part_misses == 0
    f.close()
