"""hipfile.compat.kvikio: KvikIO's Python API, driven the way its users drive it.

The cases mirror KvikIO's ``python/kvikio/tests/test_basic_io.py`` (each
names the case it mirrors), on NumPy arrays and on HIP-Python device memory.
"""

from __future__ import annotations

import errno
import os
import pickle
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import check, device_array, from_device, hip_stream, lost_first_write, to_device
from hip import hip

import hipfile
from hipfile.compat import kvikio
from hipfile.compat.kvikio import CompatMode, defaults

N = 1 << 16


def _has(flags: int, bits: int) -> bool:
    return flags & bits == bits


# -- files ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 1000, 4096, 40960])
@pytest.mark.parametrize(("nthreads", "tasksize"), [(1, 199), (3, 1024), (16, 4096)])
def test_write_then_read_numpy(tmp_path: Path, size: int, nthreads: int, tasksize: int) -> None:
    """Mirrors ``test_write`` and ``test_read``: settings in a ``with``
    block, ``"w"`` is write-only, ``"r"`` read-only, whole arrays moved."""
    path = tmp_path / "f.bin"
    a = np.arange(size, dtype=np.int64)
    with defaults.set({"num_threads": nthreads, "task_size": tasksize}):
        assert (defaults.get("num_threads"), defaults.get("task_size")) == (nthreads, tasksize)
        assert hipfile.defaults.num_threads() == nthreads   # one setting, shared
        f = kvikio.CuFile(path, "w")
        assert not f.closed
        assert _has(f.open_flags(), os.O_WRONLY)
        assert f.write(a) == a.nbytes
        f.close()
        assert f.closed
        assert np.array_equal(np.fromfile(path, dtype=a.dtype), a)
        b = np.empty_like(a)
        f = kvikio.CuFile(path, "r")
        assert _has(f.open_flags(), os.O_RDONLY) and not f.open_flags() & os.O_ACCMODE
        assert f.read(b) == b.nbytes
        f.close()
    assert np.array_equal(a, b)


def test_device_memory_in_a_context(tmp_path: Path, dev: Any) -> None:
    """Mirrors ``test_file_handle_context`` (there on CuPy arrays): ``"w+"``
    reads and writes; leaving the block closes."""
    data = np.random.default_rng(3).integers(0, 256, N, dtype=np.uint8)
    to_device(dev, data)
    with kvikio.CuFile(tmp_path / "f.bin", "w+") as f:
        assert not f.closed and _has(f.open_flags(), os.O_RDWR)
        assert f.write(dev) == N
        check(hip.hipMemset(dev, 0, N))
        assert f.read(dev) == N
        assert f.nbytes() == N
    assert f.closed
    assert np.array_equal(from_device(dev, N), data)
    f.close()  # idempotent


def test_no_file_error(tmp_path: Path) -> None:
    """Mirrors ``test_no_file_error``: ``RuntimeError`` saying ``Unable to
    open file``; ours is also a ``FileNotFoundError``, and pickles."""
    path = tmp_path / "missing.bin"
    before = hipfile.use_count()
    with pytest.raises(RuntimeError, match=r"Unable to open file.*No such file or directory") \
            as info:
        kvikio.CuFile(path, "r")
    e = info.value
    assert isinstance(e, FileNotFoundError) and e.errno == errno.ENOENT
    assert e.filename == os.fspath(path)
    back = pickle.loads(pickle.dumps(e))
    assert isinstance(back, RuntimeError) and isinstance(back, FileNotFoundError)
    assert str(back) == str(e)
    assert hipfile.use_count() == before   # the driver reference was given back


@pytest.mark.parametrize("memory", ["numpy", "device"])
def test_incorrect_open_mode_error(tmp_path: Path, memory: str) -> None:
    """Mirrors ``test_incorrect_open_mode_error``: a write to an ``"r"``
    file and a read from a ``"w"`` file raise ``RuntimeError`` with
    ``Operation not permitted``, and move nothing."""
    path = tmp_path / "f.bin"
    np.arange(10, dtype=np.int64).tofile(path)
    with device_array(80) as dev:
        buf: Any = np.zeros(10, np.int64) if memory == "numpy" else dev
        with kvikio.CuFile(path, "r") as f:
            for call in (f.write, f.pwrite, f.raw_write):
                with pytest.raises(RuntimeError, match="Operation not permitted") as info:
                    call(buf)
                assert isinstance(info.value, OSError) and info.value.errno == errno.EBADF
                assert "opened read-only" in str(info.value)
        assert np.array_equal(np.fromfile(path, np.int64), np.arange(10))
        with kvikio.CuFile(path, "w") as f:
            for call in (f.read, f.pread, f.raw_read):
                with pytest.raises(RuntimeError, match="Operation not permitted"):
                    call(buf)
    assert path.stat().st_size == 0   # "w" truncated it, and nothing was written


def test_write_to_files_in_chunks(tmp_path: Path) -> None:
    """Mirrors ``test_write_to_files_in_chunks``: chunks in random order at
    their ``file_offset``."""
    path = tmp_path / "f.bin"
    a = np.arange(200, dtype=np.int64)
    order = list(range(20))
    random.Random(5).shuffle(order)
    with kvikio.CuFile(path, "w") as f:
        for i in order:
            assert f.write(a[i * 10:(i + 1) * 10], file_offset=i * 80) == 80
    b = np.empty_like(a)
    with kvikio.CuFile(path, "r") as f:
        assert f.read(b) == b.nbytes
    assert np.array_equal(a, b)


@pytest.mark.parametrize("tasksize", [1000, 4096, 9420])
@pytest.mark.parametrize(("start", "end"), [(0, 40960), (1, 5324), (8601, 22937)])
def test_read_write_slices(tmp_path: Path, tasksize: int, start: int, end: int) -> None:
    """Mirrors ``test_read_write_slices``: slices of an array as buffers."""
    path = tmp_path / "f.bin"
    a = np.arange(40960, dtype=np.int64)
    b = a.copy()
    a[start:end] = 42
    with defaults.set("task_size", tasksize), defaults.set("num_threads", 3):
        with kvikio.CuFile(path, "w") as f:
            assert f.write(a[start:end]) == a[start:end].nbytes
        with kvikio.CuFile(path, "r") as f:
            assert f.read(b[start:end]) == b[start:end].nbytes
    assert np.array_equal(a, b)


def test_raw_read_write_of_device_memory(tmp_path: Path, dev: Any) -> None:
    """Mirrors ``test_raw_read_write`` (CuPy there): single calls, with
    ``dev_offset``."""
    data = np.random.default_rng(4).integers(0, 256, N, dtype=np.uint8)
    to_device(dev, data)
    path = tmp_path / "f.bin"
    with kvikio.CuFile(path, "w") as f:
        assert f.raw_write(dev) == N
        assert f.raw_write(dev, 100, N, 7) == 100      # size, file_offset, dev_offset
    check(hip.hipMemset(dev, 0, N))
    with kvikio.CuFile(path, "r") as f:
        assert f.raw_read(dev, 4096, 8, 16) == 4096
        assert f.raw_read(dev, 64, N + 90, 0) == 10   # end of file
    host = from_device(dev, N)
    assert np.array_equal(host[16:4112], data[8:4104])
    assert np.array_equal(host[:10], data[97:107])


def test_raw_read_write_of_host_memory(tmp_path: Path) -> None:
    """Mirrors ``test_raw_read_write_of_host_memory``."""
    a = np.arange(1024)
    with kvikio.CuFile(tmp_path / "f.bin", "w") as f:
        with pytest.raises(ValueError, match="Non-CUDA buffers not supported"):
            f.raw_write(a)
        with pytest.raises(ValueError, match="Non-CUDA buffers not supported"):
            f.raw_write_async(a, 0)
    with kvikio.CuFile(tmp_path / "f.bin", "r") as f:
        with pytest.raises(ValueError, match="Non-CUDA buffers not supported"):
            f.raw_read(a)


def test_raw_async_and_check_bytes_done(tmp_path: Path, dev: Any) -> None:
    """KvikIO's ``raw_read_async``/``raw_write_async(buf, stream, size,
    file_offset, dev_offset)``: ``check_bytes_done()`` synchronises and
    returns the bytes."""
    data = np.random.default_rng(5).integers(0, 256, N, dtype=np.uint8)
    to_device(dev, data)
    path = tmp_path / "f.bin"
    with hip_stream() as s, kvikio.CuFile(path, "w+") as f:
        w = f.raw_write_async(dev, s, 4096, 0, 4096)
        got = w.check_bytes_done()
        if got != 4096:
            h = w._inner      # the AsyncIOHandle behind the future
            lost_first_write(got, (h.size, h.file_offset, h.buffer_offset), (4096, 0, 4096),
                             path.read_bytes(),
                             lambda: f.raw_write_async(dev, s, 4096, 0, 4096).check_bytes_done(),
                             path, data[4096:8192].tobytes())
        w_all = f.raw_write_async(dev, int(s), file_offset=4096)
        assert w_all.check_bytes_done() == N
        check(hip.hipMemset(dev, 0, N))
        r = f.raw_read_async(dev, s, 4096, 0, 100)
        assert r.check_bytes_done() == 4096
        assert r.check_bytes_done() == 4096   # asked again: the same count
    on_disk = np.frombuffer(path.read_bytes(), np.uint8)
    assert np.array_equal(on_disk[:4096], data[4096:8192])
    assert np.array_equal(on_disk[4096:], data)
    assert np.array_equal(from_device(dev, 4096, 100), data[4096:8192])


@pytest.mark.emulated
def test_with_block_error_is_not_replaced_by_close(tmp_path: Path, dev: Any) -> None:
    """Leaving a ``with`` block through an exception while an operation is in
    flight: the block's exception propagates and the close failure
    (InFlightError) is attached to it, never substituted; the file stays open
    until a later close succeeds."""
    from hipfile.platforms import emulated

    path = tmp_path / "f.bin"
    path.write_bytes(bytes(N))
    with hip_stream() as s:
        f = kvikio.CuFile(path, "r")
        emulated.set_completion_delay(200_000)
        with pytest.raises(KeyError) as info:
            with f:
                pending = f.raw_read_async(dev, s, 4096)
                raise KeyError("in the block")
        assert isinstance(info.value.__context__, hipfile.InFlightError)
        assert not f.closed
        assert pending.check_bytes_done() == 4096
        f.close()
        assert f.closed


def test_pread_takes_task_size_fourth(tmp_path: Path, dev: Any) -> None:
    """KvikIO's order, ``pread(buf, size, file_offset, task_size)``: the
    fourth argument is a task size, and the data lands at the start of the
    buffer; ``IOFuture.get()``/``done()``."""
    data = np.random.default_rng(6).integers(0, 256, N, dtype=np.uint8)
    path = tmp_path / "f.bin"
    path.write_bytes(data.tobytes())
    check(hip.hipMemset(dev, 0, N))
    with kvikio.CuFile(path, "r") as f:
        future = f.pread(dev, 10_000, 500, 1024)
        assert isinstance(future, kvikio.IOFuture)
        assert future.get() == 10_000
        assert future.done()
        assert f.read(dev, 100, N - 40, 4096) == 40
    host = from_device(dev, N)
    assert np.array_equal(host[:40], data[N - 40:])
    assert np.array_equal(host[40:10_000], data[540:10_500])
    assert not host[10_000:].any()


@pytest.mark.emulated
def test_failures_are_runtime_errors_and_ours(tmp_path: Path, dev: Any) -> None:
    """KvikIO raises ``RuntimeError`` for library and system errors; ours
    are those and the typed exceptions."""
    from hipfile.platforms import emulated

    path = tmp_path / "f.bin"
    path.write_bytes(bytes(N))
    with kvikio.CuFile(path, "r") as f:
        emulated.inject_fault("read", errno.EIO, count=64)
        with pytest.raises(RuntimeError) as info:
            f.read(dev)
        assert isinstance(info.value, OSError) and info.value.errno == errno.EIO
        emulated.reset()
        emulated.inject_fault("read", int(hipfile.OpError.INTERNAL_ERROR))
        with pytest.raises(RuntimeError) as hinfo:
            f.raw_read(dev, 4096)
        assert isinstance(hinfo.value, hipfile.InternalError)


@pytest.mark.parametrize(("flags", "access"), [
    ("r", os.O_RDONLY), ("rb", os.O_RDONLY), ("r+", os.O_RDWR), ("r+b", os.O_RDWR),
    ("w", os.O_WRONLY), ("w+", os.O_RDWR), ("wb+", os.O_RDWR)])
def test_flags(tmp_path: Path, flags: str, access: int) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 10)
    with kvikio.CuFile(path, flags) as f:
        assert f.open_flags() & os.O_ACCMODE == access
        assert os.fstat(f.fileno()).st_size == (0 if flags[0] == "w" else 10)


@pytest.mark.parametrize(("flags", "message"), [
    ("a", "Open flag 'a' isn't supported"), ("a+", "isn't supported"),
    ("", "Unknown file open flag"), ("x", "Unknown file open flag"),
    ("rw", "Unknown file open flag"), ("r+++", "Unknown file open flag")])
def test_bad_flags(tmp_path: Path, flags: str, message: str) -> None:
    path = tmp_path / "f.bin"
    with pytest.raises(ValueError, match=message):
        kvikio.CuFile(path, flags)
    assert not path.exists()
    with pytest.raises(TypeError):
        kvikio.CuFile(path, os.O_RDONLY)  # type: ignore[arg-type]


def test_closed_file(tmp_path: Path) -> None:
    f = kvikio.CuFile(tmp_path / "f.bin", "w")
    f.close()
    with pytest.raises(ValueError, match="closed"):
        f.write(np.zeros(4))
    with pytest.raises(ValueError, match="closed"):
        f.fileno()


# -- defaults -------------------------------------------------------------------------------


def test_defaults_get_set_and_restore(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KVIKIO_COMPAT_MODE", raising=False)
    monkeypatch.delenv("KVIKIO_GDS_THRESHOLD", raising=False)
    assert defaults.get("compat_mode") == CompatMode.AUTO
    assert defaults.get("gds_threshold") == 16 << 10
    threads = defaults.get("num_threads")
    with defaults.set({"compat_mode": CompatMode.ON, "gds_threshold": 0, "num_threads": 2}):
        assert defaults.compat_mode() is CompatMode.ON and defaults.is_compat_mode_preferred()
        assert defaults.gds_threshold() == 0 and defaults.num_threads() == 2
        with defaults.set("compat_mode", "off"):
            assert defaults.get("compat_mode") is CompatMode.OFF
            assert not defaults.is_compat_mode_preferred()
        assert defaults.get("compat_mode") is CompatMode.ON
    assert defaults.get("compat_mode") == CompatMode.AUTO
    assert defaults.get("gds_threshold") == 16 << 10 and defaults.get("num_threads") == threads
    restore = defaults.set("gds_threshold", 1 << 20)   # without a block: from now on
    try:
        assert defaults.get("gds_threshold") == 1 << 20
    finally:
        restore.__exit__(None, None, None)
    assert defaults.get("gds_threshold") == 16 << 10
    for value, mode in [(True, CompatMode.ON), (False, CompatMode.OFF), ("AUTO", CompatMode.AUTO),
                        (1, CompatMode.ON), ("yes", CompatMode.ON)]:
        with defaults.set_compat_mode(value):
            assert defaults.get("compat_mode") is mode
    with defaults.set_num_threads(5), defaults.set_task_size(12345):
        assert (defaults.num_threads(), defaults.task_size()) == (5, 12345)


def test_defaults_from_kvikio_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVIKIO_COMPAT_MODE", "ON")
    monkeypatch.setenv("KVIKIO_GDS_THRESHOLD", "1M")
    hipfile.defaults.reset()   # the environment is read at import and by reset()
    assert defaults.get("compat_mode") is CompatMode.ON
    assert defaults.get("gds_threshold") == 1 << 20
    monkeypatch.setenv("KVIKIO_COMPAT_MODE", "sometimes")
    hipfile.defaults.reset()   # the environment is read at import and by reset()
    with pytest.raises(ValueError, match="KVIKIO_COMPAT_MODE"):
        defaults.get("compat_mode")


def test_is_compat_mode_preferred_resolves_auto() -> None:
    from hipfile import platforms

    with defaults.set("compat_mode", CompatMode.AUTO):
        assert defaults.is_compat_mode_preferred() == (platforms.active() == "emulated")


def test_defaults_refuse_what_kvikio_refuses() -> None:
    before = (defaults.get("num_threads"), defaults.get("compat_mode"))
    for bad in [(), ("a", 1, 2), (["num_threads"],), (1, 2)]:
        with pytest.raises(ValueError, match="Valid arguments are"):
            defaults.set(*bad)
    for key in ("bounce_buffer", "http", "nope"):
        with pytest.raises(KeyError, match=key):
            defaults.get(key)
        with pytest.raises(KeyError):
            defaults.set(key, 1)
    with pytest.raises(ValueError, match="compat_mode"):
        defaults.set("compat_mode", "maybe")
    with pytest.raises(ValueError, match="compat_mode"):
        defaults.set("compat_mode", 7)
    with pytest.raises(OverflowError, match="gds_threshold"):
        defaults.set("gds_threshold", -1)
    with pytest.raises(TypeError, match="gds_threshold"):
        defaults.set("gds_threshold", 1.5)
    with pytest.raises(ValueError, match="num_threads"):
        defaults.set({"num_threads": 0, "compat_mode": "on"})
    assert (defaults.get("num_threads"), defaults.get("compat_mode")) == before


def test_module_names() -> None:
    assert {"CompatMode", "CuFile", "IOFuture", "IOFutureStream", "Mmap",
            "defaults"} <= set(kvikio.__all__)
    assert [m.name for m in CompatMode] == ["OFF", "ON", "AUTO"]
    assert [int(m) for m in CompatMode] == [0, 1, 2]
