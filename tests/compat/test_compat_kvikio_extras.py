"""hipfile.compat.kvikio beyond CuFile: ``Mmap``, every ``defaults`` key and
KvikIO's exception types for bad settings, and the names a KvikIO user
calls (registration, page cache, ``cufile_driver``, ``kvikio.numpy``, ...).

The behaviours are KvikIO 26.10's, as its documentation and its
``python/kvikio/tests`` (``test_mmap.py``, ``test_defaults.py``,
``test_cufile_driver.py``, ``test_numpy.py``) describe them.
"""

from __future__ import annotations

import errno
import io
import os
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import check, from_device, hip_stream
from hip import hip

import hipfile
from hipfile.compat import kvikio
from hipfile.compat.kvikio import CompatMode, defaults

N = 1 << 16
ITEMS = 1 << 17          # int64 items of the Mmap test file (1 MiB)


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, np.ndarray]:
    a = np.arange(ITEMS, dtype=np.int64)
    path = tmp_path / "data.bin"
    a.tofile(path)
    return path, a


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- 4. Mmap --------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [None, 10, 9999])
@pytest.mark.parametrize("skip", [0, 10, 1000, 9999])
def test_mmap_read_region(data: tuple[Path, np.ndarray], count: int | None, skip: int) -> None:
    """A mapping of ``count`` items after ``skip`` (None: to the end) reads
    those items, blocking and in tasks."""
    path, a = data
    size = None if count is None else count * 8
    want = a[skip:] if count is None else a[skip:skip + count]
    out = np.zeros_like(want)
    with kvikio.Mmap(path, "r", size, skip * 8) as m:
        assert m.initial_map_offset() == skip * 8
        assert m.initial_map_size() == want.nbytes
        assert m.file_size() == a.nbytes
        assert m.read(out, size, skip * 8) == want.nbytes
        assert np.array_equal(out, want)
        for task_size in (1024, 12345):
            out[:] = 0
            future = m.pread(out, size, skip * 8, task_size)
            assert isinstance(future, kvikio.IOFuture)
            assert future.get() == want.nbytes and future.done()
            assert np.array_equal(out, want)


def test_mmap_default_arguments(data: tuple[Path, np.ndarray]) -> None:
    path, a = data
    out = np.zeros_like(a)
    with defaults.set("task_size", 64 << 10), kvikio.Mmap(path) as m:
        assert m.read(out) == a.nbytes
        assert np.array_equal(out, a)
        out[:] = 0
        assert m.pread(out).get() == a.nbytes
        assert np.array_equal(out, a)
        part = np.zeros(100, np.int64)
        assert m.read(part, offset=a.nbytes - 800) == 800   # size None: to the end
        assert np.array_equal(part, a[-100:])


def test_mmap_into_device_memory(data: tuple[Path, np.ndarray], dev: Any) -> None:
    """Reads into device memory land at the start of the buffer, in copies
    of at most ``bounce_buffer_size`` bytes."""
    path, a = data
    raw = a.view(np.uint8)
    calls: list[int] = []
    real = hip.hipMemcpy

    def counting(dst: Any, src: Any, n: int, kind: Any) -> Any:
        calls.append(int(n))
        return real(dst, src, n, kind)

    check(hip.hipMemset(dev, 0, N))
    with kvikio.Mmap(path, "r", N + 4096, 4096) as m:
        with defaults.set("bounce_buffer_size", 5000):
            hip.hipMemcpy = counting
            try:
                assert m.read(dev, N, 4096) == N
            finally:
                hip.hipMemcpy = real
        assert np.array_equal(from_device(dev, N), raw[4096:4096 + N])
        assert max(calls) == 5000 and sum(calls) == N
        check(hip.hipMemset(dev, 0, N))
        assert m.pread(dev, 10_000, 8192, 3000).get() == 10_000
    host = from_device(dev, N)
    assert np.array_equal(host[:10_000], raw[8192:18_192])
    assert not host[10_000:].any()


def test_mmap_constructor_checks(data: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, a = data
    fds = _open_fds()
    with pytest.raises(IndexError, match="Offset must be less than the file size"):
        kvikio.Mmap(path, "r", None, a.nbytes)
    with pytest.raises(IndexError, match="Offset must be less than the file size"):
        kvikio.Mmap(path, "r", None, a.nbytes * 2)
    with pytest.raises(IndexError, match="Mapped region is past the end of file"):
        kvikio.Mmap(path, "r", a.nbytes * 2)
    with pytest.raises(IndexError, match="Mapped region is past the end of file"):
        kvikio.Mmap(path, "r", a.nbytes, 1)
    with pytest.raises(ValueError, match="Mapped region should not be zero byte"):
        kvikio.Mmap(path, "r", 0)
    for flags in ("", "z", "a", "rw"):
        with pytest.raises(ValueError, match="Unknown file open flag"):
            kvikio.Mmap(path, flags)
    with pytest.raises(ValueError, match="write is not supported"):
        kvikio.Mmap(path, "w")
    assert path.stat().st_size == a.nbytes          # "w" truncated nothing
    for kwargs in ({"initial_map_offset": -1}, {"initial_map_size": -8}):
        with pytest.raises(OverflowError, match="negative value") as info:
            kvikio.Mmap(path, "r", **kwargs)
        assert isinstance(info.value, ValueError)
    with pytest.raises(TypeError):
        kvikio.Mmap(path, "r", 1.5)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="Unable to open file") as missing:
        kvikio.Mmap(tmp_path / "missing.bin")
    assert isinstance(missing.value, FileNotFoundError)
    assert _open_fds() == fds                       # nothing left open by the failures


def test_mmap_read_checks(data: tuple[Path, np.ndarray]) -> None:
    """KvikIO's read checks: an offset past the end of the file, a region
    outside the mapping (IndexError), more than the buffer (ValueError), a
    negative size or offset (OverflowError, also a ValueError)."""
    path, a = data
    out = np.zeros_like(a)
    with kvikio.Mmap(path, "r", 1024, 512) as m:
        with pytest.raises(IndexError, match="Offset is past the end of file"):
            m.read(out, 1024, a.nbytes + 1)
        for size, offset in [(1024, 513), (1024, 512 - 128), (1024 + 128, 512), (1, 1536)]:
            with pytest.raises(IndexError, match="Read is out of bound"):
                m.read(out, size, offset)
            with pytest.raises(IndexError, match="Read is out of bound"):
                m.pread(out, size, offset)
        with pytest.raises(IndexError, match="Read is out of bound"):
            m.read(out, None, 512)                  # to the end of the file: past the map
        assert m.read(out, 0, 512) == 0             # an empty read inside the map
        assert m.read(out[:64], 512, 1024) == 512   # the map's last bytes
        assert np.array_equal(out[:64], a[128:192])
        with pytest.raises(ValueError, match="greater than the size of the buffer"):
            m.read(np.zeros(10, np.int64), 1024, 512)
        with pytest.raises(OverflowError, match="negative value") as neg:
            m.read(out, -1, 512)
        assert isinstance(neg.value, ValueError)
        with pytest.raises(OverflowError):
            m.pread(out, 16, -8)
        with pytest.raises(ValueError, match="task_size"):
            m.pread(out, 16, 512, 0)
        with pytest.raises(TypeError, match="read-only"):
            m.read(np.frombuffer(bytes(1024), np.uint8), 16, 512)
        assert m.pread(out, 0, 1536).get() == 0    # empty, at the end of the map


def test_mmap_closed(data: tuple[Path, np.ndarray]) -> None:
    path, a = data
    out = np.zeros_like(a)
    fds = _open_fds()
    m = kvikio.Mmap(path)
    assert _open_fds() == fds + 1 and not m.closed()     # one descriptor, the mapping's
    m.close()
    assert m.closed() and m.file_size() == 0 and _open_fds() == fds
    with pytest.raises(RuntimeError, match="Cannot read from a closed MmapHandle"):
        m.read(out)
    with pytest.raises(RuntimeError, match="Cannot read from a closed MmapHandle"):
        m.pread(out)
    m.close()   # does nothing
    with kvikio.Mmap(path) as m2:
        assert not m2.closed()
    assert m2.closed() and _open_fds() == fds


def test_mmap_file_that_shrank(data: tuple[Path, np.ndarray]) -> None:
    """A read of mapped pages the file no longer has raises instead of
    taking the process down (SIGBUS)."""
    path, a = data
    out = np.zeros_like(a)
    with kvikio.Mmap(path) as m:
        os.truncate(path, 4096)
        assert m.file_size() == 4096
        with pytest.raises(RuntimeError, match="shrank") as info:
            m.read(out, 8192, 0)
        assert isinstance(info.value, OSError)
        with pytest.raises(RuntimeError, match="shrank"):
            m.pread(out)
        assert m.read(out, 4096, 0) == 4096          # what is left still reads
    assert np.array_equal(out[:512], a[:512])


def test_mmap_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.bin"
    path.write_bytes(b"")
    with kvikio.Mmap(path) as m:
        assert (m.file_size(), m.initial_map_size()) == (0, 0)
        assert m.read(np.zeros(4, np.uint8)) == 0
        assert m.pread(np.zeros(4, np.uint8)).get() == 0


def test_mmap_close_waits_for_no_one_and_refuses_in_flight(data: tuple[Path, np.ndarray]
                                                            ) -> None:
    """Closing while ``pread`` tasks are queued raises InFlightError and
    keeps the mapping, so the tasks never read unmapped memory."""
    from hipfile.parallel import _default_executor

    path, a = data
    out = np.zeros_like(a)
    pool = _default_executor()
    gate = threading.Event()
    blockers = [pool.submit(gate.wait, 30) for _ in range(hipfile.defaults.num_threads())]
    m = kvikio.Mmap(path)
    try:
        future = m.pread(out, task_size=1 << 16)
        assert not future.done()
        with pytest.raises(hipfile.InFlightError, match="in flight"):
            m.close()
        assert not m.closed()
    finally:
        gate.set()
    for b in blockers:
        b.result()
    assert future.get() == a.nbytes
    assert np.array_equal(out, a)
    m.close()
    assert m.closed()


# -- 5. defaults: every KvikIO key ------------------------------------------------------------

NEW_VALUES: dict[str, Any] = {
    "compat_mode": CompatMode.ON,
    "num_threads": 10,
    "task_size": 3,
    "gds_threshold": 3,
    "bounce_buffer_size": 1024,
    "http_max_attempts": 5,
    "http_status_codes": [429, 500],
    "http_timeout": 1,
    "auto_direct_io_read": True,
    "auto_direct_io_write": False,
}


@pytest.fixture
def no_kvikio_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("KVIKIO_"):
            monkeypatch.delenv(name)


def test_defaults_take_every_kvikio_key(no_kvikio_env: None) -> None:
    assert set(defaults.KEYS) == set(NEW_VALUES)
    before = {k: defaults.get(k) for k in defaults.KEYS}
    assert before["bounce_buffer_size"] == 16 << 20
    assert before["http_max_attempts"] == 3 and before["http_timeout"] == 60
    assert before["http_status_codes"] == [429, 500, 502, 503, 504]
    assert before["auto_direct_io_read"] is False and before["auto_direct_io_write"] is True
    for key, value in NEW_VALUES.items():
        with defaults.set(key, value):
            assert defaults.get(key) == value
            nested = {"http_status_codes": [503]}.get(key, value)
            with defaults.set({key: nested}):
                assert defaults.get(key) == nested
            assert defaults.get(key) == value
        assert defaults.get(key) == before[key]
    with defaults.set(NEW_VALUES):
        assert {k: defaults.get(k) for k in defaults.KEYS} == NEW_VALUES
        assert hipfile.defaults.get("num_threads") == 10   # hipfile's own setting
    assert {k: defaults.get(k) for k in defaults.KEYS} == before
    # the one-setting getters answer the same
    with defaults.set({"bounce_buffer_size": 4096, "http_timeout": 9}):
        assert defaults.bounce_buffer_size() == 4096 and defaults.http_timeout() == 9
    # a list given back is a copy
    codes = defaults.get("http_status_codes")
    codes.append(999)
    assert defaults.get("http_status_codes") == before["http_status_codes"]


def test_defaults_example_of_the_issue() -> None:
    n = 1 << 20
    with defaults.set({"compat_mode": CompatMode.ON, "num_threads": 10,
                       "bounce_buffer_size": n}):
        assert defaults.get("compat_mode") is CompatMode.ON
        assert defaults.get("num_threads") == 10 and defaults.get("bounce_buffer_size") == n


def test_defaults_without_a_block_last_until_restored() -> None:
    before = defaults.get("http_max_attempts")
    restore = defaults.set("http_max_attempts", 7)
    try:
        assert defaults.get("http_max_attempts") == 7
    finally:
        restore.__exit__(None, None, None)
    assert defaults.get("http_max_attempts") == before


def test_defaults_effect_says_what_has_none() -> None:
    assert set(defaults.EFFECT) == set(defaults.KEYS)
    for key in ("gds_threshold", "http_max_attempts", "http_status_codes", "http_timeout"):
        assert defaults.EFFECT[key].startswith("no effect")
    for key in ("num_threads", "task_size", "bounce_buffer_size"):
        assert not defaults.EFFECT[key].startswith("no effect")


def test_defaults_from_kvikio_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVIKIO_BOUNCE_BUFFER_SIZE", "2M")
    monkeypatch.setenv("KVIKIO_HTTP_STATUS_CODES", "500,503")
    monkeypatch.setenv("KVIKIO_HTTP_TIMEOUT", "5")
    monkeypatch.setenv("KVIKIO_AUTO_DIRECT_IO_READ", "on")
    monkeypatch.setenv("KVIKIO_AUTO_DIRECT_IO_WRITE", "0")
    hipfile.defaults.reset()   # the environment is read at import and by reset()
    assert defaults.get("bounce_buffer_size") == 2 << 20
    assert defaults.get("http_status_codes") == [500, 503]
    assert defaults.get("http_timeout") == 5
    assert defaults.get("auto_direct_io_read") is True
    assert defaults.get("auto_direct_io_write") is False
    with defaults.set("bounce_buffer_size", 1):
        assert defaults.get("bounce_buffer_size") == 1     # set() over the variable
    monkeypatch.setenv("KVIKIO_BOUNCE_BUFFER_SIZE", "0")
    hipfile.defaults.reset()   # the environment is read at import and by reset()
    # worded as hipfile.defaults words its own variables (one reader of the
    # environment)
    with pytest.raises(ValueError, match=r"^KVIKIO_BOUNCE_BUFFER_SIZE='0' is not a valid "
                                         r"bounce_buffer_size: "):
        defaults.get("bounce_buffer_size")
    monkeypatch.setenv("KVIKIO_AUTO_DIRECT_IO_READ", "perhaps")
    hipfile.defaults.reset()   # the environment is read at import and by reset()
    with pytest.raises(ValueError, match="KVIKIO_AUTO_DIRECT_IO_READ"):
        defaults.get("auto_direct_io_read")


def test_defaults_dict_is_all_or_nothing() -> None:
    keys = ("num_threads", "bounce_buffer_size", "compat_mode", "http_timeout")
    before = {k: defaults.get(k) for k in keys}
    bad: list[tuple[dict[str, Any], type[BaseException]]] = [
        ({"num_threads": 3, "bounce_buffer_size": 99, "http_timeout": 0}, ValueError),
        ({"bounce_buffer_size": 99, "num_threads": -1}, OverflowError),
        ({"compat_mode": "on", "bounce_buffer_size": 99, "nope": 1}, KeyError),
        ({"bounce_buffer_size": 99, "http_status_codes": ["a"]}, TypeError),
        ({"num_threads": 3, "task_size": 0}, ValueError),
    ]
    for config, exc in bad:
        with pytest.raises(exc):
            defaults.set(config)
        assert {k: defaults.get(k) for k in keys} == before, config


def test_defaults_unknown_keys() -> None:
    for key in ("nope", "set_task_size", "thread_pool_nthreads"):
        with pytest.raises(KeyError, match=key):
            defaults.get(key)
        with pytest.raises(KeyError):
            defaults.set(key, 1)
    with pytest.raises(TypeError):
        defaults.get(1)  # type: ignore[arg-type]


# -- 7. KvikIO's exception types for bad settings ---------------------------------------------


@pytest.mark.parametrize("key", ["num_threads", "task_size", "bounce_buffer_size",
                                 "http_max_attempts"])
def test_bad_counts_raise_kvikio_types(key: str) -> None:
    before = defaults.get(key)
    with pytest.raises(ValueError, match="positive integer") as zero:
        defaults.set(key, 0)
    assert not isinstance(zero.value, OverflowError)
    with pytest.raises(OverflowError, match="negative value") as neg:
        defaults.set(key, -1)
    assert isinstance(neg.value, ValueError)      # and still what hipfile raises
    with pytest.raises(OverflowError):
        defaults.set(key, 1 << 64)
    for wrong in (1.5, "4", None):
        with pytest.raises(TypeError):
            defaults.set(key, wrong)
    assert defaults.get(key) == before


def test_bad_other_settings_raise_kvikio_types() -> None:
    with defaults.set("gds_threshold", 0):               # 0 is a valid threshold
        assert defaults.get("gds_threshold") == 0
    with pytest.raises(OverflowError, match="negative value"):
        defaults.set("gds_threshold", -1)
    with pytest.raises(OverflowError):
        defaults.set("num_threads", 1 << 32)              # an unsigned int in KvikIO
    for value in (0, -1):
        with pytest.raises(ValueError, match="positive integer"):
            defaults.set("http_timeout", value)
    for value in (0, ["a"], "500", [True]):
        with pytest.raises(TypeError):
            defaults.set("http_status_codes", value)
    with pytest.raises(TypeError):
        defaults.set("auto_direct_io_read", "yes")
    with pytest.raises(ValueError, match="compat_mode"):
        defaults.set("compat_mode", 7)


# -- 6. the other names ---------------------------------------------------------------------


def test_module_names() -> None:
    for name in ("Mmap", "stream_register", "stream_deregister", "memory_register",
                 "memory_deregister", "bounce_buffer_free", "get_page_cache_info",
                 "drop_file_page_cache", "drop_system_page_cache", "clear_page_cache",
                 "is_remote_file_available", "__version__", "__git_commit__", "cufile_driver",
                 "numpy", "defaults", "CuFile", "IOFuture", "CompatMode"):
        assert name in kvikio.__all__ and hasattr(kvikio, name), name
    assert kvikio.is_remote_file_available() is False
    assert kvikio.__version__ == hipfile.__version__
    assert kvikio.__git_commit__ == ""
    assert kvikio.__kvikio_version__.startswith("26.")
    from hipfile.compat.kvikio import cufile

    assert cufile.get_page_cache_info is kvikio.get_page_cache_info


def test_memory_register(dev: Any, platform: str, tmp_path: Path) -> None:
    kvikio.memory_register(dev)
    try:
        if platform == "emulated":
            from hipfile.platforms import emulated

            assert emulated.counters()["buffers"] == 1
        with pytest.raises(RuntimeError) as again:
            kvikio.memory_register(dev)
        assert isinstance(again.value, hipfile.HipFileException)
        path = tmp_path / "f.bin"
        data = np.random.default_rng(1).integers(0, 256, N, dtype=np.uint8)
        path.write_bytes(data.tobytes())
        with kvikio.CuFile(path) as f:                  # I/O on the registered memory
            assert f.raw_read(dev) == N
        assert np.array_equal(from_device(dev, N), data)
    finally:
        kvikio.memory_deregister(dev)
    if platform == "emulated":
        from hipfile.platforms import emulated

        assert emulated.counters()["buffers"] == 0
    with pytest.raises(RuntimeError, match="not registered") as twice:
        kvikio.memory_deregister(dev)
    assert isinstance(twice.value, hipfile.MemoryNotRegisteredError)


def test_stream_register(platform: str) -> None:
    if not hipfile.supports_async():
        pytest.skip("the loaded libhipfile has no stream API")
    with hip_stream() as s:
        kvikio.stream_register(int(s), 0)
        try:
            if platform == "emulated":
                from hipfile.platforms import emulated

                assert emulated.counters()["streams_registered"] == 1
            with pytest.raises(RuntimeError, match="registered already"):
                kvikio.stream_register(s, 0)
        finally:
            kvikio.stream_deregister(s)
        with pytest.raises(RuntimeError, match="not registered"):
            kvikio.stream_deregister(int(s))
        with pytest.raises(ValueError):
            kvikio.stream_register(s, 1 << 20)
    if platform == "emulated":
        from hipfile.platforms import emulated

        assert emulated.counters()["streams_registered"] == 0


def test_bounce_buffer_free(tmp_path: Path, dev: Any) -> None:
    if not hipfile.supports_async():
        pytest.skip("the loaded libhipfile has no stream API")
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(N))
    with hip_stream() as s, kvikio.CuFile(path) as f:
        assert f.raw_read_async(dev, s, 4096).check_bytes_done() == 4096
    stats = hipfile.pool_stats()
    held = stats["pages"] * stats["slots_per_page"] * 32
    assert held > 0                       # the async read took pinned slots
    freed = kvikio.bounce_buffer_free()
    assert freed >= held and hipfile.pool_stats()["pages"] == 0
    assert kvikio.bounce_buffer_free() == 0


def test_page_cache_info(data: tuple[Path, np.ndarray]) -> None:
    path, a = data
    page = os.sysconf("SC_PAGE_SIZE")
    total = -(-a.nbytes // page)
    cached, pages = kvikio.get_page_cache_info(path)
    assert pages == total and 0 <= cached <= total
    with open(path, "rb") as f:
        assert kvikio.get_page_cache_info(f)[1] == total              # a file object
        assert kvikio.get_page_cache_info(f.fileno())[1] == total     # a descriptor
    assert kvikio.get_page_cache_info(str(path), page + 1, page)[1] == 2  # partial pages count
    assert kvikio.get_page_cache_info(path, 0, 1)[1] == 1
    assert kvikio.get_page_cache_info(path, a.nbytes) == (0, 0)
    assert kvikio.get_page_cache_info(path, a.nbytes * 4) == (0, 0)
    assert kvikio.get_page_cache_info(path, a.nbytes - 1, 1 << 30)[1] == 1   # clamped
    with pytest.raises(ValueError, match="type of `file`"):
        kvikio.get_page_cache_info(1.5)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="Unable to open file") as info:
        kvikio.get_page_cache_info(path.with_name("missing"))
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(OverflowError):
        kvikio.get_page_cache_info(path, -1)


def test_drop_file_page_cache(data: tuple[Path, np.ndarray]) -> None:
    path = data[0]
    path.read_bytes()
    before = kvikio.get_page_cache_info(path)
    kvikio.drop_file_page_cache(path)
    cached, total = kvikio.get_page_cache_info(path)
    if before[0] == 0 or cached == before[0]:
        pytest.skip("this file system keeps file pages cached (tmpfs and the like)")
    assert cached < before[0] and total == before[1]
    fd = os.open(path, os.O_RDONLY)
    try:
        kvikio.drop_file_page_cache(fd, 0, 4096, sync_first=False)   # a descriptor
    finally:
        os.close(fd)
    with pytest.raises(ValueError, match="type of `file`"):
        kvikio.drop_file_page_cache(io.BytesIO)  # type: ignore[arg-type]


def test_drop_system_page_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What is written where the kernel takes it (the target is redirected:
    dropping the whole machine's cache is not a test's to do)."""
    from hipfile.compat.kvikio import _page_cache

    target = tmp_path / "drop_caches"
    target.write_text("")
    monkeypatch.setattr(_page_cache, "DROP_CACHES", str(target))
    assert kvikio.drop_system_page_cache(sync_first=False) is True
    assert target.read_text() == "3"
    assert kvikio.drop_system_page_cache(False) is True
    assert target.read_text() == "1"
    with pytest.warns(DeprecationWarning, match="drop_system_page_cache"):
        assert kvikio.clear_page_cache(True, False) is True
    assert target.read_text() == "3"
    monkeypatch.setattr(_page_cache, "DROP_CACHES", str(tmp_path / "no" / "such"))
    with pytest.warns(RuntimeWarning, match="cannot drop the system page cache"):
        assert kvikio.drop_system_page_cache(sync_first=False) is False


def test_is_direct_io_supported(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(4096))
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_DIRECT))
        direct = True
    except OSError as e:
        assert e.errno == errno.EINVAL
        direct = False
    with kvikio.CuFile(path) as f:
        with defaults.set("compat_mode", CompatMode.OFF):
            assert f.is_direct_io_supported() is direct
        with defaults.set({"compat_mode": CompatMode.ON, "auto_direct_io_read": False,
                           "auto_direct_io_write": False}):
            assert f.is_direct_io_supported() is False
        with defaults.set({"compat_mode": CompatMode.ON, "auto_direct_io_read": True}):
            assert f.is_direct_io_supported() is direct
    with pytest.raises(ValueError, match="closed"):
        f.is_direct_io_supported()


@pytest.fixture
def cufile_driver() -> Iterator[Any]:
    """``kvikio.cufile_driver``; the values it keeps are forgotten after
    the test."""
    from hipfile.compat.kvikio import cufile_driver

    yield cufile_driver
    cufile_driver.properties._set.clear()


@pytest.mark.needs("hipFileDriverGetProperties")
def test_cufile_driver_properties(cufile_driver: Any) -> None:
    major = cufile_driver.get("major_version")      # opens the driver
    props = hipfile.driver_get_properties()
    assert major == props.nvfs_major_version
    assert cufile_driver.get("minor_version") == props.nvfs_minor_version
    assert cufile_driver.get("per_buffer_cache_size") == props.per_buffer_cache_size
    assert cufile_driver.get("allow_compat_mode") == bool(props.driver_control
                                                          & hipfile.DriverControlFlags
                                                          .ALLOW_COMPAT_MODE)
    assert isinstance(cufile_driver.get("is_gds_available"), bool)
    assert cufile_driver.libcufile_version() == hipfile.get_version()[:2]
    default = cufile_driver.get("poll_thresh_size")
    with cufile_driver.set("poll_thresh_size", 1024):
        assert cufile_driver.get("poll_thresh_size") == 1024
        with cufile_driver.set("poll_thresh_size", 2048):
            assert cufile_driver.get("poll_thresh_size") == 2048
        assert cufile_driver.get("poll_thresh_size") == 1024
    assert cufile_driver.get("poll_thresh_size") == default
    poll = cufile_driver.get("poll_mode")
    cache = cufile_driver.get("max_device_cache_size")
    with cufile_driver.set({"poll_mode": not poll, "max_device_cache_size": 2048,
                            "max_pinned_memory_size": 8192}):
        assert cufile_driver.get("poll_mode") is (not poll)
        assert cufile_driver.properties.max_device_cache_size == 2048
        assert cufile_driver.get("max_pinned_memory_size") == 8192
    assert cufile_driver.get("poll_mode") is poll
    assert cufile_driver.get("max_device_cache_size") == cache


@pytest.mark.needs("hipFileDriverGetProperties")
def test_cufile_driver_refusals(cufile_driver: Any) -> None:
    before = cufile_driver.get("poll_thresh_size")
    with pytest.raises(KeyError):
        cufile_driver.get("nonexistent_property")
    with pytest.raises(KeyError):
        cufile_driver.set("nonexistent_property", 1)
    with pytest.raises(KeyError, match="read-only"):
        cufile_driver.set("major_version", 2077)
    with pytest.raises(OverflowError, match="negative value") as neg:
        cufile_driver.set("poll_thresh_size", -1)
    assert isinstance(neg.value, ValueError)
    with pytest.raises(TypeError):
        cufile_driver.set("max_device_cache_size", "1M")
    with pytest.raises(KeyError):       # checked whole: the first key is not set
        cufile_driver.set({"poll_thresh_size": 77, "minor_version": 1})
    with pytest.raises(ValueError, match="Valid arguments"):
        cufile_driver.set()
    assert cufile_driver.get("poll_thresh_size") == before


def test_cufile_driver_open_close(cufile_driver: Any) -> None:
    count = hipfile.use_count()
    cufile_driver.driver_open()
    assert hipfile.use_count() == count + 1
    cufile_driver.driver_close()
    assert hipfile.use_count() == count
    with pytest.raises(RuntimeError, match="driver_open"):
        cufile_driver.driver_close()


@pytest.mark.parametrize("dtype", ["u1", "int64", "float32", "float64"])
def test_numpy_tofile(tmp_path: Path, dtype: str) -> None:
    path = str(tmp_path / "a.bin")
    src = np.arange(100, dtype=dtype)
    kvikio.numpy.tofile(src, path)
    assert np.array_equal(np.fromfile(path, dtype=dtype), src)
    kvikio.numpy.tofile(src[::3], Path(path))          # strided: written in C order
    assert np.array_equal(np.fromfile(path, dtype=dtype), src[::3])


@pytest.mark.parametrize("dtype", ["u1", "int64", "float32", "float64"])
def test_numpy_fromfile_and_like_wrapper(tmp_path: Path, dtype: str) -> None:
    from hipfile.compat.kvikio.numpy import LikeWrapper, fromfile

    path = str(tmp_path / "a.bin")
    src = np.arange(100, dtype=dtype)
    src.tofile(path)
    got = fromfile(path, dtype)
    assert type(got) is np.ndarray and np.array_equal(got, src)
    like = LikeWrapper(np.empty(()))
    assert np.array_equal(np.fromfile(path, dtype, like=like), src)
    assert np.array_equal(np.fromfile(file=path, dtype=dtype, count=58, like=like), src[:58])
    assert np.array_equal(np.fromfile(path, dtype=dtype, offset=src.itemsize, like=like),
                          src[1:])
    assert len(np.fromfile(path, dtype=dtype, offset=1, count=10, like=like)) == 10
    assert np.array_equal(np.fromfile(path, dtype="u1", offset=7, like=like),
                          src.view("u1")[7:])
    assert np.array_equal(np.fromfile(path, dtype=dtype, count=10_000, like=like), src)
    with open(path, "rb") as f:
        assert np.array_equal(np.fromfile(f, dtype=dtype, like=like), src)
    made = np.full(3, 7.0, like=like)      # other functions run as they are
    assert type(made) is np.ndarray and made.tolist() == [7.0, 7.0, 7.0]


def test_numpy_fromfile_errors(tmp_path: Path) -> None:
    from hipfile.compat.kvikio.numpy import LikeWrapper

    path = str(tmp_path / "a.bin")
    np.arange(1, dtype="u1").tofile(path)
    like = LikeWrapper(np.empty(()))
    with pytest.raises(FileNotFoundError, match="no file"):
        np.fromfile("no file", like=like)
    with pytest.raises(NotImplementedError, match="Non-default value of the `sep`"):
        np.fromfile(path, sep=",", like=like)
    with pytest.raises(ValueError, match="negative dimensions are not allowed"):
        np.fromfile(path, like=like, count=-42)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(kvikio.numpy.fromfile(path, "u1", offset=5)) == 0   # past the end: empty
