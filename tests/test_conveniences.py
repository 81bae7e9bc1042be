"""Conveniences that KvikIO and Python-file habits expect: IOFuture.get,
FileHandle.fileno/size/closed, mode strings, host buffers in the
synchronous and parallel calls, and batch I/O beyond one batch."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import check, device_array, emu, from_device, random_bytes, random_file, to_device
from hip import hip
from test_interop import KDL_CPU, KDL_ROCM_HOST, DLPackArray

import hipfile
from hipfile import BatchIO, Buffer, ClosedFileError, FileHandle, defaults
from hipfile.errors import InvalidValueError

N = 1 << 16


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


# -- IOFuture.get -----------------------------------------------------------------


def test_iofuture_get_is_result(driver: hipfile.Driver, data_path: Path,
                                payload: np.ndarray, dev: Any) -> None:
    with hipfile.open(data_path) as fh:
        fut = fh.pread(dev, task_size=N // 4)
        assert fut.get() == N
        assert fut.get(timeout=5) == fut.result() == N
    assert np.array_equal(from_device(dev, N), payload)


@pytest.mark.emulated
def test_iofuture_get_raises_the_task_error(driver: hipfile.Driver, data_path: Path,
                                            dev: Any) -> None:
    emu().inject_fault("read", errno.EIO, 1)
    with hipfile.open(data_path) as fh:
        fut = fh.pread(dev, task_size=N)
        with pytest.raises(OSError) as info:
            fut.get()
    assert info.value.errno == errno.EIO


# -- FileHandle.fileno, size, closed ----------------------------------------------


def test_fileno_size_and_closed(driver: hipfile.Driver, tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    fh = FileHandle(path, os.O_RDWR | os.O_CREAT)
    assert fh.closed
    with pytest.raises(ClosedFileError):
        fh.fileno()
    with fh:
        assert not fh.closed
        assert fh.fileno() == fh.fd
        assert os.fstat(fh.fileno()).st_ino == path.stat().st_ino
        assert fh.size() == 0
        fh.write(np.ones(1000, np.uint8), file_offset=24)
        assert fh.size() == fh.nbytes() == 1024
    assert fh.closed
    for call in (fh.fileno, fh.size, fh.nbytes):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_fileno_of_a_wrapped_descriptor(driver: hipfile.Driver, data_path: Path) -> None:
    fd = os.open(data_path, os.O_RDONLY)
    try:
        fh = FileHandle.from_fd(fd)
        assert fh.fileno() == fd and fh.size() == N
        fh.close()
        assert fh.closed
        os.fstat(fd)  # still open: the caller owns it
    finally:
        os.close(fd)


# -- hipfile.open mode strings -------------------------------------------------------


def test_open_mode_table(driver: hipfile.Driver, tmp_path: Path) -> None:
    from hipfile.file import MODES

    assert MODES == {"r": os.O_RDONLY, "r+": os.O_RDWR,
                     "w": os.O_RDWR | os.O_CREAT | os.O_TRUNC,
                     "a": os.O_RDWR | os.O_CREAT | os.O_APPEND}
    path = tmp_path / "f.bin"
    with pytest.raises(FileNotFoundError):
        hipfile.open(path, "r")
    with pytest.raises(FileNotFoundError):
        hipfile.open(path, "r+")
    with hipfile.open(path, "a") as fh:  # creates
        assert fh.flags == MODES["a"]
    assert path.exists()


def test_open_append_writes_at_size(driver: hipfile.Driver, tmp_path: Path) -> None:
    path = tmp_path / "log.bin"
    path.write_bytes(b"abc")
    with hipfile.open(path, "a") as fh:  # keeps the content; an offset given is the end
        assert fh.flags & os.O_APPEND and fh.appends
        assert fh.size() == 3
        fh.write(np.frombuffer(b"defg", np.uint8), file_offset=fh.size())
        # the descriptor itself has no O_APPEND (hipFile refuses those)
        assert not fcntl.fcntl(fh.fileno(), fcntl.F_GETFL) & os.O_APPEND
    assert path.read_bytes() == b"abcdefg"


def test_open_direct_and_bad_arguments(driver: hipfile.Driver, data_path: Path) -> None:
    with hipfile.open(data_path, "r", direct=True) as fh:
        assert fh.flags == os.O_RDONLY | os.O_DIRECT
    with pytest.raises(TypeError, match="direct must be a bool"):
        hipfile.open(data_path, "r", direct=1)  # type: ignore[arg-type]
    for flags in (1.0, True, b"r"):
        with pytest.raises(TypeError, match="flags must be a mode string or an int"):
            hipfile.open(data_path, flags)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'r', 'r\\+', 'w', 'a'"):
        hipfile.open(data_path, "rw")


# -- host buffers ---------------------------------------------------------------------


@pytest.fixture
def fh_rw(driver: hipfile.Driver, data_path: Path) -> Iterator[FileHandle]:
    with hipfile.open(data_path, "r+") as fh:
        yield fh


def test_host_numpy_read_and_write(fh_rw: FileHandle, data_path: Path,
                                   payload: np.ndarray) -> None:
    out = np.zeros(N, np.uint8)
    assert fh_rw.read(out) == N
    assert np.array_equal(out, payload)
    # a typed 2-D array, with sizes and offsets in bytes
    floats = np.arange(64, dtype=np.float64).reshape(8, 8)
    assert fh_rw.write(floats, 256, file_offset=1000, buffer_offset=8) == 256
    back = np.zeros((8, 8), np.float64)
    assert fh_rw.read(back, 256, file_offset=1000, buffer_offset=8) == 256
    assert np.array_equal(back.ravel()[1:33], floats.ravel()[1:33])
    assert back.ravel()[0] == 0 and (back.ravel()[33:] == 0).all()
    on_disk = np.frombuffer(data_path.read_bytes(), np.uint8)
    assert np.array_equal(on_disk[1000:1256], floats.view(np.uint8).ravel()[8:264])


def test_host_buffer_kinds(fh_rw: FileHandle, payload: np.ndarray, tmp_path: Path) -> None:
    ba = bytearray(100)
    assert fh_rw.read(ba, file_offset=5) == 100
    assert bytes(ba) == payload[5:105].tobytes()
    big = bytearray(300)
    view = memoryview(big)[100:200]
    assert fh_rw.read(view, file_offset=7) == 100
    assert bytes(big[100:200]) == payload[7:107].tobytes() and big[:100] == bytes(100)
    assert fh_rw.write(b"0123456789", file_offset=N) == 10  # read-only buffers write
    assert fh_rw.size() == N + 10
    with mmap.mmap(-1, 4096) as m:
        assert fh_rw.read(m, 4096) == 4096
        assert m[:4096] == payload[:4096].tobytes()


def test_host_read_at_end_of_file_is_short(fh_rw: FileHandle, payload: np.ndarray) -> None:
    out = np.full(1000, 0xAB, np.uint8)
    assert fh_rw.read(out, file_offset=N - 300) == 300
    assert np.array_equal(out[:300], payload[-300:]) and (out[300:] == 0xAB).all()
    assert fh_rw.read(out, file_offset=N + 10) == 0


def test_host_buffer_errors(fh_rw: FileHandle) -> None:
    with pytest.raises(TypeError, match="read-only bytes"):
        fh_rw.read(b"x" * 10)
    with pytest.raises(TypeError, match="read-only"):
        fh_rw.pread(_readonly(10))
    with pytest.raises(ValueError, match="not C-contiguous"):
        fh_rw.read(np.zeros((16, 16), np.uint8)[:, ::2])
    with pytest.raises(ValueError, match="overruns"):
        fh_rw.read(np.zeros(10, np.uint8), 11)


def _readonly(n: int) -> np.ndarray:
    a = np.zeros(n, np.uint8)
    a.setflags(write=False)
    return a


def test_host_parallel_read_and_write(fh_rw: FileHandle, data_path: Path,
                                      payload: np.ndarray) -> None:
    out = np.zeros(N, np.uint8)
    fut = fh_rw.pread(out, task_size=4096)  # 16 tasks on the pool
    assert fut.get() == N
    assert np.array_equal(out, payload)
    data = random_bytes(N, seed=5)
    assert hipfile.pwrite(fh_rw, data, task_size=5000).result() == N
    assert data_path.read_bytes() == data.tobytes()
    # past the end: fewer bytes
    assert fh_rw.pread(np.zeros(N, np.uint8), file_offset=N // 2,
                       task_size=4096).result() == N // 2


def test_host_dlpack_tensor_without_buffer_protocol(fh_rw: FileHandle,
                                                    payload: np.ndarray) -> None:
    for kind in (KDL_CPU, KDL_ROCM_HOST):
        backing = np.zeros(256, np.uint8)
        tensor = DLPackArray(backing.ctypes.data, (64,), kind, bits=32)
        assert fh_rw.read(tensor, file_offset=64) == 256
        assert np.array_equal(backing, payload[64:320])


def test_host_buffers_on_an_o_direct_file(driver: hipfile.Driver, data_path: Path,
                                          payload: np.ndarray) -> None:
    """An unaligned host buffer on an O_DIRECT descriptor goes through a
    second descriptor without O_DIRECT, closed with the handle."""
    before = _open_fds()
    with hipfile.open(data_path, "r+", direct=True) as fh:
        out = np.zeros(1001, np.uint8)
        assert fh.read(out, 1000, file_offset=3, buffer_offset=1) == 1000
        assert np.array_equal(out[1:], payload[3:1003])
        assert fh.pwrite(np.full(777, 7, np.uint8), file_offset=5, task_size=100).get() == 777
        twin = fh._descriptors.buffered
        assert twin is not None and twin != fh.fd
        assert not fcntl.fcntl(twin, fcntl.F_GETFL) & os.O_DIRECT
    assert _open_fds() == before
    assert data_path.read_bytes()[5:782] == bytes([7]) * 777


def test_device_arrays_with_the_buffer_protocol_stay_device(
        fh_rw: FileHandle, payload: np.ndarray, dev: Any) -> None:
    """HIP-Python's DeviceArray also exposes the buffer protocol; it is still
    device memory for hipFile (the host path would refuse it here)."""
    memoryview(dev).release()  # the premise: it has the buffer protocol
    with defaults.set("allow_host_buffers", False):
        assert fh_rw.read(dev) == N
        assert fh_rw.pread(dev, task_size=N // 2).get() == N
    assert np.array_equal(from_device(dev, N), payload)


@pytest.mark.parametrize("call", ["read", "write", "pread", "pwrite"])
def test_host_buffers_can_be_turned_off(fh_rw: FileHandle, data_path: Path, call: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    before = data_path.read_bytes()
    buf = np.full(100, 3, np.uint8)
    with defaults.set("allow_host_buffers", False), \
            pytest.raises(TypeError, match=r"allow_host_buffers.*HIPFILE_ALLOW_HOST_BUFFERS"):
        getattr(fh_rw, call)(buf)
    monkeypatch.setenv("HIPFILE_ALLOW_HOST_BUFFERS", "0")
    hipfile.defaults.reset("allow_host_buffers")
    with pytest.raises(TypeError, match="allow_host_buffers"):
        getattr(fh_rw, call)(buf)
    assert (buf == 3).all() and data_path.read_bytes() == before
    monkeypatch.delenv("HIPFILE_ALLOW_HOST_BUFFERS")
    hipfile.defaults.reset("allow_host_buffers")
    result = getattr(fh_rw, call)(buf)
    assert (result if isinstance(result, int) else result.result()) == 100


def test_pinned_host_memory_is_moved_with_posix_calls(fh_rw: FileHandle, data_path: Path,
                                                      payload: np.ndarray) -> None:
    host = check(hip.hipHostMalloc(8192, 0))
    try:
        view = (ctypes.c_uint8 * 8192).from_address(int(host))
        buf = Buffer(host, 8192)
        assert fh_rw.read(buf, 4096, file_offset=100, buffer_offset=10) == 4096
        assert bytes(view[10:4106]) == payload[100:4196].tobytes()
        assert fh_rw.pread(buf, file_offset=0, task_size=1000).get() == 8192
        assert bytes(view) == payload[:8192].tobytes()
        ctypes.memset(int(host), 9, 8192)
        assert fh_rw.write(buf, 8000, file_offset=N - 100) == 8000
        assert data_path.read_bytes()[N - 100:] == bytes([9]) * 8000
    finally:
        check(hip.hipHostFree(host))


def test_stream_ordered_paths_refuse_host_buffers(fh_rw: FileHandle, data_path: Path) -> None:
    before = data_path.read_bytes()
    host = np.full(4096, 1, np.uint8)
    hint = "host buffers are accepted by FileHandle.read/write/pread/pwrite"
    with pytest.raises(ValueError, match=hint):
        fh_rw.write_async(host, 4096, 0, 0, 0)
    with pytest.raises(ValueError, match=hint):
        fh_rw.pwrite_async(host)
    with pytest.raises(TypeError, match=hint):
        fh_rw.pread_async_ranges(bytearray(64), [(64, 0, 0)])
    with pytest.raises(TypeError, match=hint), BatchIO(1) as batch:
        batch.write(fh_rw, bytearray(64))
    with pytest.raises(ValueError, match=hint):
        hipfile.batch_write(fh_rw, host, [(64, 0, 0)])
    assert data_path.read_bytes() == before


# -- batch -------------------------------------------------------------------------------


def _require_batch_status() -> None:
    """Skip where the library does not implement hipFileBatchIOGetStatus
    (AMD's hipFile 0.2.0 answers hipFileInternalError, 5030)."""
    with hipfile.Driver():
        batch = BatchIO(1)
        try:
            batch.get_status(0, 0)
        except hipfile.InternalError as exc:
            pytest.skip(f"hipFileBatchIOGetStatus is not implemented by this library ({exc})")
        finally:
            try:
                batch.close()
            except hipfile.InternalError:
                pass


@pytest.fixture
def batch_status() -> None:
    _require_batch_status()


def test_batch_above_the_cap_names_it(driver: hipfile.Driver) -> None:
    with pytest.raises(InvalidValueError) as info:
        BatchIO(256)
    text = str(info.value)
    assert "BatchIO(256)" in text and "max_batch_io_count" in text
    assert "batch_read/batch_write" in text
    assert isinstance(info.value.__cause__, InvalidValueError)
    try:
        cap = hipfile.driver_get_properties().max_batch_io_count
    except hipfile.HipFileException:
        cap = defaults.BATCH_MAX_ENTRIES_CAP
    assert f"at most {cap} entries" in text


def test_wait_before_submit_raises(driver: hipfile.Driver, data_path: Path, dev: Any) -> None:
    with hipfile.open(data_path) as fh, BatchIO(4) as batch:
        batch.read(fh, dev, 100)
        with pytest.raises(RuntimeError, match=r"wait\(\) before submit\(\)"):
            batch.wait()
        with pytest.raises(RuntimeError, match="before submit"):
            batch.get_status(1)
        assert batch.queued == 1  # nothing was dropped
        assert batch.clear() == 1


def test_wait_after_submit_still_works(batch_status: None, driver: hipfile.Driver,
                                       data_path: Path, payload: np.ndarray, dev: Any) -> None:
    with hipfile.open(data_path) as fh, BatchIO(4) as batch:
        assert batch.wait(timeout=5) == []  # nothing queued, nothing in flight
        batch.read(fh, dev, 100)
        batch.submit()
        events = batch.wait(timeout=30)
        assert [e.ok for e in events] == [True]
    assert np.array_equal(from_device(dev, 100), payload[:100])


BIG = 300 * 512


@pytest.mark.parametrize("batch_size", [None, 7])
def test_batch_read_more_ranges_than_one_batch(batch_status: None, driver: hipfile.Driver,
                                               tmp_path: Path, batch_size: int | None) -> None:
    path = tmp_path / "big.bin"
    data = random_file(path, BIG, seed=9)
    ranges = [(512, i * 512, (299 - i) * 512) for i in range(300)]  # 300 > 128 entries
    with device_array(BIG) as dev, hipfile.open(path) as fh:
        assert hipfile.batch_read(fh, dev, ranges, batch_size=batch_size,
                                  timeout=60) == [512] * 300
        out = from_device(dev, BIG).reshape(300, 512)
    assert np.array_equal(out[::-1].ravel(), data)


def test_batch_write_then_read_back(batch_status: None, driver: hipfile.Driver,
                                    tmp_path: Path) -> None:
    data = random_bytes(BIG, seed=10)
    path = tmp_path / "w.bin"
    with device_array(BIG) as dev, hipfile.open(path, "w") as fh:
        to_device(dev, data)
        ranges = [(1024, i * 1024, i * 1024) for i in range(BIG // 1024)]
        assert hipfile.batch_write(fh, dev, ranges, batch_size=16) == [1024] * len(ranges)
    assert path.read_bytes() == data.tobytes()


@pytest.mark.emulated
def test_batch_read_resubmits_short_entries(batch_status: None, driver: hipfile.Driver,
                                            data_path: Path, payload: np.ndarray,
                                            dev: Any) -> None:
    """A short count in the middle of the file is not the end: the rest is
    submitted again until done or end of file."""
    emu().set_short_transfer(1000)
    with hipfile.open(data_path) as fh:
        got = hipfile.batch_read(fh, dev, [(4096, 0, 0), (4096, 8192, 4096),
                                           (4096, N - 100, 8192)], batch_size=2)
    emu().set_short_transfer(0)
    assert got == [4096, 4096, 100]
    out = from_device(dev, 8292)
    assert np.array_equal(out[:4096], payload[:4096])
    assert np.array_equal(out[4096:8192], payload[8192:12288])
    assert np.array_equal(out[8192:], payload[-100:])


@pytest.mark.emulated
def test_batch_read_raises_the_first_failing_range(batch_status: None,
                                                   driver: hipfile.Driver,
                                                   data_path: Path, dev: Any) -> None:
    emu().inject_fault("batch", errno.EIO, 1, 3)
    with hipfile.open(data_path) as fh, pytest.raises(OSError) as info:
        hipfile.batch_read(fh, dev, [(1024, i * 1024, i * 1024) for i in range(8)],
                           batch_size=4)
    assert info.value.errno == errno.EIO


def test_batch_helpers_check_everything_first(driver: hipfile.Driver, data_path: Path,
                                              dev: Any) -> None:
    before = data_path.read_bytes()
    with hipfile.open(data_path, "r+") as fh:
        with pytest.raises(ValueError, match="overruns"):
            hipfile.batch_write(fh, dev, [(100, 0, 0), (N + 1, 0, 0)])
        with pytest.raises(TypeError, match="each range"):
            hipfile.batch_write(fh, dev, [(100, 0)])  # type: ignore[list-item]
        with pytest.raises(ValueError, match="batch_size must be positive"):
            hipfile.batch_read(fh, dev, [(1, 0, 0)], batch_size=0)
        with pytest.raises(InvalidValueError, match="max_batch_io_count"):
            hipfile.batch_read(fh, dev, [(1, i, i) for i in range(200)], batch_size=200)
        with pytest.raises(TypeError, match="FileHandle"):
            hipfile.batch_read(object(), dev, [(1, 0, 0)])
        assert hipfile.batch_read(fh, dev, []) == []
    assert data_path.read_bytes() == before
    with pytest.raises(ClosedFileError):
        hipfile.batch_read(fh, dev, [(1, 0, 0)])


@pytest.mark.emulated  # AMD's hipFile refuses pinned host memory (5013); cuFile may take it
def test_engine_does_not_move_pinned_host_memory_itself(fh_rw: FileHandle) -> None:
    """The stream-ordered engine runs hipFileRead on its threads; pinned host
    memory fails there with the library's error instead of being read with
    POSIX calls behind the stream's back."""
    host = check(hip.hipHostMalloc(4096, 0))
    try:
        ctypes.memset(int(host), 0x5A, 4096)
        handle = fh_rw.pread_async(Buffer(host, 4096))
        with pytest.raises(hipfile.PointerError):
            handle.wait(timeout=30)
        assert bytes((ctypes.c_uint8 * 4096).from_address(int(host))) == b"\x5a" * 4096
    finally:
        check(hip.hipHostFree(host))
