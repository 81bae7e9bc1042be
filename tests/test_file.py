"""FileHandle: synchronous I/O, lifetime, error reporting and hipfile.open."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import check, device_array, from_device, random_bytes, to_device
from hip import hip

import hipfile
from hipfile import (
    BoolConfigParameter,
    Buffer,
    ClosedFileError,
    FileHandle,
    FileHandleType,
    OpError,
)
from hipfile._lib import _hipfile

N = 1 << 16


class CudaArray:
    """The smallest object exposing device memory through
    ``__cuda_array_interface__``."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 3,
        }


class CountingShim:
    """Stands in for the shim module inside hipfile.file, recording the
    synchronous I/O calls and forwarding everything to the real shim."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(_hipfile, name)

    def read_raw(self, handle: int, ptr: int, size: int, foff: int, boff: int) -> Any:
        self.calls.append(("read", size, foff, boff))
        return _hipfile.read_raw(handle, ptr, size, foff, boff)

    def write_raw(self, handle: int, ptr: int, size: int, foff: int, boff: int) -> Any:
        self.calls.append(("write", size, foff, boff))
        return _hipfile.write_raw(handle, ptr, size, foff, boff)


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def payload() -> np.ndarray:
    return random_bytes(N, seed=7)


@pytest.fixture
def data_path(tmp_path: Path, payload: np.ndarray) -> Path:
    path = tmp_path / "data.bin"
    path.write_bytes(payload.tobytes())
    return path


@pytest.fixture
def dev() -> Iterator[Any]:
    with device_array(N) as ptr:
        yield ptr


@pytest.fixture
def driver() -> Iterator[hipfile.Driver]:
    with hipfile.Driver() as drv:
        yield drv


@pytest.fixture
def shim(monkeypatch: pytest.MonkeyPatch) -> CountingShim:
    counting = CountingShim()
    monkeypatch.setattr(hipfile.file, "_hipfile", counting)
    return counting


def fill(dev: Any, value: int, nbytes: int = N) -> None:
    check(hip.hipMemset(dev, value, nbytes))


# -- buffer kinds -----------------------------------------------------------------------

BufferFactory = Callable[[Any], Any]


@contextlib.contextmanager
def as_kind(kind: str, dev: Any) -> Iterator[Any]:
    if kind == "device_array":
        yield dev
    elif kind == "cuda_array_interface":
        yield CudaArray(int(dev), N)
    elif kind == "buffer":
        yield Buffer(dev)
    elif kind == "registered_buffer":
        with Buffer(dev) as buf:
            assert buf.registered
            yield buf
    elif kind == "upstream_buffer":
        with Buffer.from_ctypes_void_p(ctypes.c_void_p(int(dev)), N, 0) as buf:
            yield buf
    else:  # pragma: no cover
        raise AssertionError(kind)


KINDS = ["device_array", "cuda_array_interface", "buffer", "registered_buffer", "upstream_buffer"]


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip(
    kind: str, driver: hipfile.Driver, data_path: Path, payload: np.ndarray, dev: Any,
    tmp_path: Path,
) -> None:
    fill(dev, 0)
    with as_kind(kind, dev) as buf:
        with hipfile.open(data_path) as fh:
            assert fh.read(buf) == N
        assert np.array_equal(from_device(dev, N), payload)

        out = tmp_path / "out.bin"
        with hipfile.open(out, "w") as fh:
            assert fh.write(buf) == N
    assert out.read_bytes() == payload.tobytes()


def test_positional_contract(
    driver: hipfile.Driver, data_path: Path, payload: np.ndarray, dev: Any
) -> None:
    fill(dev, 0xAB)
    with hipfile.open(data_path, "r+") as fh:
        # upstream: read(buffer, size, file_offset, buffer_offset)
        assert fh.read(dev, 1000, 123, 456) == 1000
        host = from_device(dev, N)
        assert np.array_equal(host[456:1456], payload[123:1123])
        assert (host[:456] == 0xAB).all()
        assert (host[1456:] == 0xAB).all()

        # write(buffer, size, file_offset, buffer_offset)
        assert fh.write(dev, 500, 7000, 300) == 500
    expected = payload.copy()
    expected[7000:7500] = host[300:800]
    assert data_path.read_bytes() == expected.tobytes()


def test_keywords_and_defaults(
    driver: hipfile.Driver, data_path: Path, payload: np.ndarray, dev: Any
) -> None:
    fill(dev, 0)
    with hipfile.open(data_path) as fh:
        assert fh.read(dev, buffer_offset=N - 100) == 100
        assert np.array_equal(from_device(dev, 100, N - 100), payload[:100])
        assert fh.read(dev, size=10, file_offset=N - 10) == 10
        assert np.array_equal(from_device(dev, 10), payload[N - 10:])
        assert fh.read(dev, 0) == 0


def test_short_read_at_end_of_file(driver: hipfile.Driver, tmp_path: Path, dev: Any) -> None:
    data = random_bytes(1000, seed=3)
    path = tmp_path / "small.bin"
    path.write_bytes(data.tobytes())
    with hipfile.open(path) as fh:
        assert fh.read(dev) == 1000
        assert np.array_equal(from_device(dev, 1000), data)
        assert fh.read(dev, 100, 950) == 50
        assert fh.read(dev, 100, 1000) == 0
        assert fh.read(dev, 100, 5000) == 0


def test_large_transfers_are_split(
    driver: hipfile.Driver, data_path: Path, payload: np.ndarray, dev: Any, tmp_path: Path,
    shim: CountingShim, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hipfile.file, "_MAX_CHUNK", 5000)
    fill(dev, 0)
    with hipfile.open(data_path) as fh:
        assert fh.read(dev, 12345, 100, 10) == 12345
    assert shim.calls == [
        ("read", 5000, 100, 10),
        ("read", 5000, 5100, 5010),
        ("read", 2345, 10100, 10010),
    ]
    assert np.array_equal(from_device(dev, 12345, 10), payload[100:12445])

    shim.calls.clear()
    out = tmp_path / "out.bin"
    with hipfile.open(out, "w") as fh:
        assert fh.write(dev, 11000, 3, 10) == 11000
    assert [c[:3] for c in shim.calls] == [
        ("write", 5000, 3),
        ("write", 5000, 5003),
        ("write", 1000, 10003),
    ]
    written = out.read_bytes()
    assert written[:3] == b"\0\0\0"
    assert written[3:] == payload[100:11100].tobytes()


def test_split_read_stops_at_end_of_file(
    driver: hipfile.Driver, data_path: Path, payload: np.ndarray, dev: Any,
    shim: CountingShim, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hipfile.file, "_MAX_CHUNK", 5000)
    with hipfile.open(data_path) as fh:
        assert fh.read(dev, 20000, N - 7000) == 7000
    assert [c[1] for c in shim.calls] == [5000, 5000]
    assert np.array_equal(from_device(dev, 7000), payload[N - 7000:])


def test_default_chunk_is_the_library_clamp() -> None:
    assert hipfile.file._MAX_CHUNK == 0x7FFFF000 == _hipfile.MAX_IO_CHUNK


# -- argument checks ---------------------------------------------------------------------


@pytest.mark.parametrize("op", ["read", "write"])
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((10, -1, 0), "file_offset must be >= 0, got -1"),
        ((10, 0, -1), "buffer_offset must be >= 0, got -1"),
        ((-1, 0, 0), "size must be >= 0, got -1"),
        ((N + 1, 0, 0), f"size {N + 1} at buffer_offset 0 overruns the {N}-byte buffer"),
        ((10, 0, N - 5), f"overruns the {N}-byte buffer"),
        ((None, 0, N + 1), f"buffer_offset {N + 1} is past the {N}-byte buffer"),
    ],
)
def test_bad_ranges_are_value_errors(
    op: str, args: tuple[Any, ...], message: str, driver: hipfile.Driver, data_path: Path,
    dev: Any, shim: CountingShim,
) -> None:
    with hipfile.open(data_path, "r+") as fh:
        with pytest.raises(ValueError, match=message.replace("+", r"\+")):
            getattr(fh, op)(dev, *args)
    assert shim.calls == []


@pytest.mark.parametrize("op", ["read", "write"])
def test_closed_file(op: str, data_path: Path, dev: Any) -> None:
    fh = hipfile.open(data_path)
    fh.close()
    with pytest.raises(ClosedFileError, match="closed FileHandle") as info:
        getattr(fh, op)(dev)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, RuntimeError)
    never_opened = FileHandle(data_path, os.O_RDONLY)
    with pytest.raises(ClosedFileError):
        getattr(never_opened, op)(dev, 10, 0, 0)


def test_bare_address_is_refused(driver: hipfile.Driver, data_path: Path, dev: Any) -> None:
    with hipfile.open(data_path) as fh, pytest.raises(TypeError, match=r"Buffer\(ptr, length\)"):
        fh.read(int(dev), 10, 0, 0)


@pytest.mark.emulated
def test_pinned_host_memory_is_refused(driver: hipfile.Driver, data_path: Path) -> None:
    host = check(hip.hipHostMalloc(4096, 0))
    try:
        with hipfile.open(data_path) as fh:
            with pytest.raises(hipfile.PointerError) as info:
                fh.read(Buffer(int(host), 4096))
        assert info.value.hipfile_err == OpError.HIP_MEMORY_TYPE_INVALID
        assert info.value.func == "hipFileRead"
    finally:
        check(hip.hipHostFree(host))


@pytest.mark.emulated
def test_range_outside_the_allocation(driver: hipfile.Driver, data_path: Path, dev: Any) -> None:
    with hipfile.open(data_path) as fh:
        # as AMD's library: a range outside the allocation is an invalid value
        with pytest.raises(hipfile.InvalidValueError) as info:
            fh.read(Buffer(int(dev), N + 4096))
    assert info.value.hipfile_err == OpError.INVALID_VALUE


# -- errors from the library ---------------------------------------------------------------


@pytest.mark.emulated
@pytest.mark.parametrize(
    ("op", "err", "cls"),
    [
        ("read", errno.EIO, OSError),
        ("read", errno.ENOENT, FileNotFoundError),
        ("write", errno.ENOSPC, OSError),
        ("write", errno.EACCES, PermissionError),
    ],
)
def test_system_errors(
    op: str, err: int, cls: type, driver: hipfile.Driver, data_path: Path, dev: Any
) -> None:
    from hipfile.platforms import emulated

    with hipfile.open(data_path, "r+") as fh:
        emulated.inject_fault(op, err)
        with pytest.raises(OSError) as info:
            getattr(fh, op)(dev, 100, 0, 0)
        assert type(info.value) is cls
        assert info.value.errno == err
        assert ("hipFileRead" if op == "read" else "hipFileWrite") in str(info.value)
        # one call failed, the next one works
        assert getattr(fh, op)(dev, 100, 0, 0) == 100


@pytest.mark.emulated
@pytest.mark.parametrize("op", ["read", "write"])
def test_shim_captures_errno(op: str, driver: hipfile.Driver, data_path: Path, dev: Any) -> None:
    from hipfile.platforms import emulated

    raw = _hipfile.read_raw if op == "read" else _hipfile.write_raw
    with hipfile.open(data_path, "r+") as fh:
        assert fh.handle is not None
        emulated.inject_fault(op, errno.EIO)
        assert raw(fh.handle, int(dev), 100, 0, 0) == (-1, errno.EIO)


@pytest.mark.emulated
@pytest.mark.parametrize(
    ("code", "cls"),
    [(5022, hipfile.InvalidValueError), (5030, hipfile.InternalError),
     (5012, hipfile.PointerError)],
)
def test_hipfile_errors(
    code: int, cls: type, driver: hipfile.Driver, data_path: Path, dev: Any
) -> None:
    from hipfile.platforms import emulated

    with hipfile.open(data_path) as fh:
        emulated.inject_fault("read", code)
        with pytest.raises(hipfile.HipFileException) as info:
            fh.read(dev)
    assert type(info.value) is cls
    assert info.value.hipfile_err == code
    assert info.value.func == "hipFileRead"


@pytest.mark.emulated
def test_error_in_the_middle_of_a_split_transfer(
    driver: hipfile.Driver, data_path: Path, dev: Any, shim: CountingShim,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hipfile.platforms import emulated

    monkeypatch.setattr(hipfile.file, "_MAX_CHUNK", 1000)
    with hipfile.open(data_path) as fh:
        emulated.inject_fault("read", errno.EIO, count=1, after=2)
        with pytest.raises(OSError) as info:
            fh.read(dev, 5000)
    assert info.value.errno == errno.EIO
    assert len(shim.calls) == 3


@pytest.mark.emulated
def test_short_transfers(
    driver: hipfile.Driver, data_path: Path, payload: np.ndarray, dev: Any, tmp_path: Path,
    shim: CountingShim,
) -> None:
    from hipfile.platforms import emulated

    fill(dev, 0)
    emulated.set_short_transfer(1000)
    with hipfile.open(data_path) as fh:
        assert fh.read(dev, 5000, 10) == 1000
    host = from_device(dev, 5000)
    assert np.array_equal(host[:1000], payload[10:1010])
    assert (host[1000:] == 0).all()

    out = tmp_path / "short.bin"
    with hipfile.open(out, "w") as fh:
        assert fh.write(dev, 3000) == 1000
    assert out.read_bytes() == payload[10:1010].tobytes()
    assert len(shim.calls) == 2
    emulated.set_short_transfer(None)
    with hipfile.open(data_path) as fh:
        assert fh.read(dev, 5000) == 5000


# -- lifetime -------------------------------------------------------------------------------


def test_upstream_constructor_does_not_open(data_path: Path) -> None:
    fh = FileHandle(data_path, os.O_RDONLY)
    assert fh.closed
    assert fh.handle is None
    assert fh.fd is None
    assert fh.path == data_path
    assert fh.flags == os.O_RDONLY
    assert fh.mode == 0o644 == FileHandle.DEFAULT_MODE
    assert fh.handle_type is FileHandleType.OPAQUE_FD
    with fh:
        assert not fh.closed
        assert isinstance(fh.handle, int)
        assert isinstance(fh.fd, int)
    assert fh.closed
    assert fh.handle is None
    assert fh.fd is None


def test_open_is_idempotent_and_close_too(data_path: Path) -> None:
    fh = FileHandle(data_path, os.O_RDONLY)
    before = fd_count()
    assert fh.open() is fh
    handle, fd = fh.handle, fh.fd
    opened = fd_count()  # the library may open descriptors of its own
    assert opened > before
    assert fh.open() is fh
    assert (fh.handle, fh.fd) == (handle, fd)
    assert fd_count() == opened
    fh.close()
    assert fh.closed
    assert fd_count() == before
    fh.close()
    assert fh.closed
    assert fd_count() == before


@pytest.mark.emulated
def test_one_registration_per_open(data_path: Path) -> None:
    from hipfile.platforms import emulated

    fh = hipfile.open(data_path)
    fh.open()
    assert emulated.counters()["handles"] == 1
    fh.close()
    fh.close()
    assert emulated.counters()["handles"] == 0


def test_reopen_after_close(driver: hipfile.Driver, data_path: Path, payload: np.ndarray,
                            dev: Any) -> None:
    fh = hipfile.open(data_path)
    fh.close()
    fh.open()
    try:
        assert fh.read(dev, 64) == 64
        assert np.array_equal(from_device(dev, 64), payload[:64])
    finally:
        fh.close()


def test_handle_type_rules(data_path: Path) -> None:
    fh = FileHandle(data_path, os.O_RDONLY)
    with pytest.raises(NotImplementedError, match="OPAQUE_WIN32"):
        fh.handle_type = FileHandleType.OPAQUE_WIN32
    with pytest.raises(ValueError, match="not a member"):
        fh.handle_type = 7  # type: ignore[assignment]
    with pytest.raises(NotImplementedError):
        FileHandle(data_path, os.O_RDONLY, handle_type=FileHandleType.USERSPACE_FS)
    with fh:
        with pytest.raises(RuntimeError, match="while FileHandle is open"):
            fh.handle_type = FileHandleType.OPAQUE_FD
    fh.handle_type = FileHandleType.OPAQUE_FD
    assert fh.handle_type is FileHandleType.OPAQUE_FD


def test_path_or_fd_is_required() -> None:
    with pytest.raises(ValueError, match="path or an fd"):
        FileHandle(None)


def test_repr(data_path: Path) -> None:
    fh = FileHandle(data_path, os.O_RDONLY)
    assert repr(fh) == f"<hipfile.FileHandle path={data_path!r} closed>"
    with fh:
        assert repr(fh) == f"<hipfile.FileHandle path={data_path!r} fd={fh.fd}>"


def test_from_fd_leaves_the_descriptor_open(
    driver: hipfile.Driver, data_path: Path, payload: np.ndarray, dev: Any
) -> None:
    fd = os.open(data_path, os.O_RDONLY)
    try:
        fh = FileHandle.from_fd(fd)
        assert not fh.closed
        assert fh.fd == fd
        assert fh.path is None
        assert fh.read(dev, 256, 16) == 256
        assert np.array_equal(from_device(dev, 256), payload[16:272])
        fh.close()
        assert fh.closed
        assert fh.fd is None
        os.fstat(fd)  # still open
        assert os.pread(fd, 4, 0) == payload[:4].tobytes()
    finally:
        os.close(fd)


@pytest.mark.emulated
def test_same_descriptor_twice_is_refused(data_path: Path) -> None:
    fd = os.open(data_path, os.O_RDONLY)
    try:
        with FileHandle.from_fd(fd):
            with pytest.raises(hipfile.HandleAlreadyRegisteredError):
                FileHandle.from_fd(fd)
        os.fstat(fd)
    finally:
        os.close(fd)


@pytest.mark.emulated
def test_failed_registration_closes_the_descriptor_it_opened(data_path: Path) -> None:
    from hipfile.platforms import emulated

    fh = FileHandle(data_path, os.O_RDONLY)
    before = fd_count()
    emulated.inject_fault("register", errno.EIO)
    with pytest.raises(hipfile.InternalError) as info:
        fh.open()
    assert info.value.func == "hipFileHandleRegister"
    assert fd_count() == before
    assert fh.closed
    assert fh.fd is None
    # the next attempt works
    fh.open()
    assert fd_count() == before + 1
    fh.close()
    assert fd_count() == before


@pytest.mark.emulated
def test_failed_registration_leaves_a_callers_descriptor_open(data_path: Path) -> None:
    from hipfile.platforms import emulated

    fd = os.open(data_path, os.O_RDONLY)
    try:
        emulated.inject_fault("register", OpError.HANDLE_ALREADY_REGISTERED)
        with pytest.raises(hipfile.HandleAlreadyRegisteredError):
            FileHandle.from_fd(fd)
        os.fstat(fd)
    finally:
        os.close(fd)


@pytest.mark.emulated
@pytest.mark.parametrize(
    ("target", "flags", "code"),
    [
        ("dir", os.O_RDONLY, OpError.INVALID_FILE_TYPE),
        ("file", os.O_RDWR | os.O_APPEND, OpError.INVALID_FILE_OPEN_FLAG),
    ],
)
def test_unsupported_files(tmp_path: Path, data_path: Path, target: str, flags: int,
                           code: OpError) -> None:
    path = tmp_path if target == "dir" else data_path
    before = fd_count()
    with pytest.raises(hipfile.HipFileException) as info:
        FileHandle(path, flags).open()
    assert info.value.hipfile_err == code
    assert fd_count() == before


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        hipfile.open(tmp_path / "missing.bin")
    with pytest.raises(FileNotFoundError):
        hipfile.open(tmp_path / "missing.bin", "r+")


def test_resource_warning_when_collected_open(data_path: Path) -> None:
    fh = hipfile.open(data_path)
    fd = fh.fd
    assert fd is not None
    with pytest.warns(ResourceWarning, match=r"FileHandle path=.* fd=\d+> was not closed"):
        del fh
        gc.collect()
    with pytest.raises(OSError) as info:
        os.fstat(fd)
    assert info.value.errno == errno.EBADF


def test_no_warning_when_closed(data_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fh = hipfile.open(data_path)
        fh.close()
        del fh
        gc.collect()
        unopened = FileHandle(data_path, os.O_RDONLY)
        del unopened
        gc.collect()


# -- hipfile.open ----------------------------------------------------------------------------


def test_open_modes(tmp_path: Path, payload: np.ndarray) -> None:
    path = tmp_path / "modes.bin"
    with pytest.raises(FileNotFoundError):
        hipfile.open(path, "r")

    with hipfile.open(path, "a") as fh:  # creates, does not truncate
        assert fh.flags == os.O_RDWR | os.O_CREAT
    assert path.exists()
    path.write_bytes(payload.tobytes())
    with hipfile.open(path, "a"):
        pass
    assert path.stat().st_size == N

    with hipfile.open(path, "r+") as fh:
        assert fh.flags == os.O_RDWR
    assert path.stat().st_size == N

    with hipfile.open(path, "r") as fh:
        assert fh.flags == os.O_RDONLY
    assert path.stat().st_size == N

    with hipfile.open(path, "w") as fh:  # truncates
        assert fh.flags == os.O_RDWR | os.O_CREAT | os.O_TRUNC
    assert path.stat().st_size == 0

    with hipfile.open(path, os.O_RDONLY) as fh:
        assert fh.flags == os.O_RDONLY


@pytest.mark.parametrize("mode", ["x", "rb", "w+", "", "R"])
def test_open_rejects_unknown_modes(tmp_path: Path, mode: str) -> None:
    with pytest.raises(ValueError, match="flags must be one of"):
        hipfile.open(tmp_path / "f.bin", mode)
    assert not (tmp_path / "f.bin").exists()


def test_open_mode_bits(tmp_path: Path) -> None:
    path = tmp_path / "private.bin"
    umask = os.umask(0o022)
    os.umask(umask)
    with hipfile.open(path, "w", 0o600) as fh:
        assert fh.mode == 0o600
    assert path.stat().st_mode & 0o777 == 0o600 & ~umask


@pytest.mark.emulated
def test_read_only_file_refuses_writes(driver: hipfile.Driver, data_path: Path,
                                       dev: Any) -> None:
    with hipfile.open(data_path, "r") as fh:
        with pytest.raises(OSError) as info:
            fh.write(dev, 10)
    assert info.value.errno == errno.EBADF


def _direct_io_supported(folder: Path) -> bool:
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return False
    try:
        fd = os.open(folder / "direct-probe", os.O_RDWR | os.O_CREAT | flag, 0o644)
    except OSError:
        return False
    os.close(fd)
    return True


def test_direct_io(driver: hipfile.Driver, data_path: Path, payload: np.ndarray,
                   dev: Any) -> None:
    if not _direct_io_supported(data_path.parent):
        pytest.skip(f"the file system of {data_path.parent} does not allow O_DIRECT")
    fill(dev, 0)
    with hipfile.open(data_path, "r+", direct=True) as fh:
        assert fh.flags & os.O_DIRECT
        # aligned: size and offset are multiples of 4096
        assert fh.read(dev, 8192, 4096) == 8192
        assert np.array_equal(from_device(dev, 8192), payload[4096:12288])
        # unaligned: the library takes its buffered path
        assert fh.read(dev, 1001, 3, 5) == 1001
        assert np.array_equal(from_device(dev, 1001, 5), payload[3:1004])
        to_device(dev, random_bytes(4096, seed=9))
        assert fh.write(dev, 4096, 8192) == 4096
    assert data_path.read_bytes()[8192:12288] == random_bytes(4096, seed=9).tobytes()


# -- compat mode -------------------------------------------------------------------------------


@pytest.fixture
def compat_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.delenv("HIPFILE_ALLOW_COMPAT_MODE", raising=False)
    monkeypatch.delenv("HIPFILE_FORCE_COMPAT_MODE", raising=False)
    allow = hipfile.get_parameter(BoolConfigParameter.PROPERTIES_ALLOW_COMPAT_MODE)
    force = hipfile.get_parameter(BoolConfigParameter.FORCE_COMPAT_MODE)
    yield monkeypatch
    hipfile.set_parameter(BoolConfigParameter.PROPERTIES_ALLOW_COMPAT_MODE, allow)
    hipfile.set_parameter(BoolConfigParameter.FORCE_COMPAT_MODE, force)


@pytest.mark.emulated
def test_compat_mode_disabled_by_environment(compat_env: pytest.MonkeyPatch,
                                             data_path: Path) -> None:
    compat_env.setenv("HIPFILE_ALLOW_COMPAT_MODE", "false")
    before = fd_count()
    with pytest.raises(hipfile.HipFileException) as info:
        hipfile.open(data_path)
    assert info.value.err is OpError.DIO_NOT_SET
    assert info.value.func == "hipFileHandleRegister"
    assert fd_count() == before
    if _direct_io_supported(data_path.parent):
        with hipfile.open(data_path, direct=True) as fh:
            assert not fh.closed
    # forcing compat mode wins over disallowing it
    compat_env.setenv("HIPFILE_FORCE_COMPAT_MODE", "true")
    with hipfile.open(data_path) as fh:
        assert not fh.closed


@pytest.mark.emulated
def test_compat_mode_disabled_by_parameter(compat_env: pytest.MonkeyPatch,
                                           data_path: Path) -> None:
    hipfile.set_parameter(BoolConfigParameter.PROPERTIES_ALLOW_COMPAT_MODE, False)
    with pytest.raises(hipfile.HipFileException) as info:
        hipfile.open(data_path)
    assert info.value.err is OpError.DIO_NOT_SET
    # the environment wins over the parameter
    compat_env.setenv("HIPFILE_ALLOW_COMPAT_MODE", "true")
    with hipfile.open(data_path) as fh:
        assert not fh.closed
