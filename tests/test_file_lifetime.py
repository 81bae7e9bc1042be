"""FileHandle: lifetime, registration rules, hipfile.open and compat mode."""

from __future__ import annotations

import errno
import gc
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import (
    check,
    device_array,
    direct_io_supported,
    from_device,
    random_bytes,
    to_device,
)
from hip import hip

import hipfile
from hipfile import (
    BoolConfigParameter,
    FileHandle,
    FileHandleType,
    OpError,
)

N = 1 << 16


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def fill(dev: Any, value: int, nbytes: int = N) -> None:
    check(hip.hipMemset(dev, value, nbytes))


@pytest.fixture
def callers_fd(data_path: Path) -> Iterator[int]:
    """A read-only descriptor of ``data_path`` that the test owns (closed at teardown)."""
    fd = os.open(data_path, os.O_RDONLY)
    yield fd
    os.close(fd)


# -- lifetime -------------------------------------------------------------------------------


def test_upstream_constructor_does_not_open(data_path: Path) -> None:
    fh = FileHandle(data_path, os.O_RDONLY)
    assert fh.closed
    assert fh.handle is None
    assert fh.fd is None
    assert fh.path == data_path
    assert fh.flags == os.O_RDONLY
    assert fh.permissions == 0o644 == FileHandle.DEFAULT_MODE
    assert fh.mode == "r"
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
    # registered at the first call through hipFile's data path, not at open
    assert emulated.counters()["handles"] == 0
    assert fh.handle is not None and fh.handle == fh.handle
    assert emulated.counters()["handles"] == 1
    fh.close()
    fh.close()
    assert emulated.counters()["handles"] == 0


@pytest.mark.emulated
def test_open_close_without_io_never_registers_or_opens_the_driver(data_path: Path,
                                                                   dev: Any) -> None:
    """The staged engine path moves bytes with POSIX calls: a file opened,
    read that way and closed costs no registration and no driver open."""
    from hipfile.platforms import emulated

    opened = hipfile.use_count()
    fh = hipfile.open(data_path)
    assert fh.pread_async(dev, 4096).wait(timeout=30) == 4096
    assert not fh.closed and emulated.counters()["handles"] == 0
    fh.close()
    assert fh.closed and emulated.counters()["handles"] == 0
    assert hipfile.use_count() == opened
    # hipFile's own read registers it then (and its close deregisters it)
    with hipfile.open(data_path) as fh:
        assert fh.read(dev, 4096) == 4096
        assert emulated.counters()["handles"] == 1
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
    driver: hipfile.Driver, callers_fd: int, payload: np.ndarray, dev: Any
) -> None:
    fd = callers_fd
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


@pytest.mark.emulated
def test_same_descriptor_twice_is_refused(callers_fd: int) -> None:
    # refused when the second handle is made, registered or not (the engine
    # would move its bytes without hipFile), with hipFile's answer to a
    # second registration of one descriptor
    with FileHandle.from_fd(callers_fd) as first:
        with pytest.raises(hipfile.HandleAlreadyRegisteredError):
            FileHandle.from_fd(callers_fd)
        assert first.handle is not None
    os.fstat(callers_fd)


@pytest.mark.emulated
def test_failed_registration_closes_the_descriptor_it_opened(data_path: Path) -> None:
    from hipfile.platforms import emulated

    fh = FileHandle(data_path, os.O_RDONLY)
    before = fd_count()
    fh.open()                       # the descriptor; registration at first need
    emulated.inject_fault("register", errno.EIO)
    with pytest.raises(hipfile.InternalError) as info:
        fh.handle  # noqa: B018
    assert info.value.func == "hipFileHandleRegister"
    assert not fh.closed and emulated.counters()["handles"] == 0
    # the next attempt works
    assert fh.handle is not None
    assert fd_count() == before + 1
    fh.close()
    assert fh.closed
    assert fh.fd is None
    assert fd_count() == before


@pytest.mark.emulated
def test_failed_registration_leaves_a_callers_descriptor_open(callers_fd: int) -> None:
    from hipfile.platforms import emulated

    emulated.inject_fault("register", OpError.HANDLE_ALREADY_REGISTERED)
    fh = FileHandle.from_fd(callers_fd)
    with pytest.raises(hipfile.HandleAlreadyRegisteredError):
        fh.handle  # noqa: B018
    fh.close()
    os.fstat(callers_fd)


def test_unsupported_files(data_path: Path) -> None:
    # a descriptor opened with O_APPEND (hipFile refuses it, and so does
    # from_fd, at once; FileHandle with O_APPEND in its flags opens without
    # it, as an append handle)
    before = fd_count()
    fd = os.open(data_path, os.O_RDWR | os.O_APPEND)
    try:
        with pytest.raises(hipfile.HipFileException) as info:
            FileHandle.from_fd(fd)
        assert info.value.hipfile_err == OpError.INVALID_FILE_OPEN_FLAG
        os.fstat(fd)
    finally:
        os.close(fd)
    assert fd_count() == before


def test_open_directory_is_an_error_naming_it(driver: hipfile.Driver, tmp_path: Path) -> None:
    # hipFile answers hipFileInvalidFile (5018); Python's open raises this
    before = fd_count()
    for opener in (lambda: hipfile.open(tmp_path), lambda: FileHandle(tmp_path).open()):
        with pytest.raises(IsADirectoryError) as info:
            opener()
        assert info.value.errno == errno.EISDIR
        assert info.value.filename == str(tmp_path)
        assert str(tmp_path) in str(info.value)
    assert fd_count() == before
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        with pytest.raises(IsADirectoryError):
            FileHandle.from_fd(fd)
        os.fstat(fd)  # the caller's descriptor stays open
    finally:
        os.close(fd)


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
        assert fh.flags == os.O_RDWR | os.O_CREAT | os.O_APPEND
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


@pytest.mark.parametrize("mode", ["", "R", "rw", "rt", "r++", "rbb", "wx", "+", "b"])
def test_open_rejects_unknown_modes(tmp_path: Path, mode: str) -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        hipfile.open(tmp_path / "f.bin", mode)
    with pytest.raises(ValueError, match="mode must be one of"):
        hipfile.open(tmp_path / "f.bin", mode=mode)
    assert not (tmp_path / "f.bin").exists()


@pytest.mark.parametrize(
    ("mode", "flags"),
    [("r", os.O_RDONLY), ("rb", os.O_RDONLY), ("r+", os.O_RDWR), ("r+b", os.O_RDWR),
     ("rb+", os.O_RDWR), ("w", os.O_RDWR | os.O_CREAT | os.O_TRUNC),
     ("wb", os.O_RDWR | os.O_CREAT | os.O_TRUNC), ("w+", os.O_RDWR | os.O_CREAT | os.O_TRUNC),
     ("w+b", os.O_RDWR | os.O_CREAT | os.O_TRUNC), ("a", os.O_RDWR | os.O_CREAT | os.O_APPEND),
     ("ab+", os.O_RDWR | os.O_CREAT | os.O_APPEND), ("x", os.O_RDWR | os.O_CREAT | os.O_EXCL),
     ("xb", os.O_RDWR | os.O_CREAT | os.O_EXCL)],
)
def test_open_python_and_kvikio_modes(driver: hipfile.Driver, tmp_path: Path, mode: str,
                                      flags: int) -> None:
    # Python's open() and KvikIO's CuFile(file, flags) mode strings
    path = tmp_path / "f.bin"
    if mode[0] in "r":
        path.write_bytes(b"abc")
    for opener in (lambda: hipfile.open(path, mode), lambda: hipfile.open(path, mode=mode)):
        with opener() as fh:
            assert fh.flags == flags
            assert fh.mode == mode
        if mode[0] == "x":
            path.unlink()
    with FileHandle(path, mode) as fh:
        assert fh.flags == flags and fh.mode == mode


def test_open_x_refuses_an_existing_file(driver: hipfile.Driver, data_path: Path) -> None:
    with pytest.raises(FileExistsError):
        hipfile.open(data_path, "x")


def test_mode_given_twice_or_of_a_bad_type(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="once"):
        hipfile.open(tmp_path / "f.bin", "r", "rb")
    with pytest.raises(TypeError, match="once"):
        FileHandle(tmp_path / "f.bin", os.O_RDWR, "rb")
    with pytest.raises(TypeError, match="mode must be a mode string"):
        hipfile.open(tmp_path / "f.bin", mode=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="twice"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        hipfile.open(tmp_path / "f.bin", "w", 0o600, permissions=0o600)


def test_mode_of_flags(driver: hipfile.Driver, tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    cases = [(os.O_RDWR | os.O_CREAT | os.O_TRUNC, "w+"), (os.O_RDWR, "r+"),
             (os.O_RDONLY, "r"), (os.O_RDWR | os.O_CREAT, "a+"),
             (os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "w")]
    for flags, mode in cases:
        with hipfile.open(path, flags) as fh:
            assert fh.mode == mode


def test_closed_file_error_of_a_never_opened_handle(data_path: Path) -> None:
    fh = FileHandle(data_path)
    with pytest.raises(hipfile.ClosedFileError, match=r"never opened.*open\(\).*with"):
        fh.read(np.empty(16, np.uint8))
    with pytest.raises(hipfile.ClosedFileError, match="never opened"):
        fh.fileno()
    with fh:
        pass
    with pytest.raises(hipfile.ClosedFileError) as info:
        fh.read(np.empty(16, np.uint8))
    assert "never" not in str(info.value)


def test_write_through_a_read_only_handle_says_so(driver: hipfile.Driver, data_path: Path,
                                                  dev: Any) -> None:
    with hipfile.open(data_path, "r") as fh:
        for buf in (dev, np.zeros(16, np.uint8)):
            with pytest.raises(OSError, match="opened read-only") as info:
                fh.write(buf, 16)
            assert info.value.errno == errno.EBADF
            assert info.value.filename == str(data_path)


def test_open_mode_bits(tmp_path: Path) -> None:
    path = tmp_path / "private.bin"
    umask = os.umask(0o022)
    os.umask(umask)
    with hipfile.open(path, "w", permissions=0o600) as fh:
        assert fh.permissions == 0o600
        assert fh.mode == "w"
    assert path.stat().st_mode & 0o777 == 0o600 & ~umask
    path.unlink()
    # hipfile 0.1's positional permission bits still work, with a warning
    with pytest.warns(DeprecationWarning, match="permissions="), \
            hipfile.open(path, "w", 0o600) as fh:
        assert fh.permissions == 0o600
    assert path.stat().st_mode & 0o777 == 0o600 & ~umask


@pytest.mark.emulated
def test_read_only_file_refuses_writes(driver: hipfile.Driver, data_path: Path,
                                       dev: Any) -> None:
    with hipfile.open(data_path, "r") as fh:
        with pytest.raises(OSError) as info:
            fh.write(dev, 10)
    assert info.value.errno == errno.EBADF


def test_direct_io(driver: hipfile.Driver, data_path: Path, payload: np.ndarray,
                   dev: Any) -> None:
    if not direct_io_supported(data_path.parent):
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
    with pytest.raises(hipfile.HipFileException) as info, hipfile.open(data_path) as fh:
        fh.handle  # noqa: B018
    assert info.value.err is OpError.DIO_NOT_SET
    assert info.value.func == "hipFileHandleRegister"
    assert fd_count() == before
    if direct_io_supported(data_path.parent):
        with hipfile.open(data_path, direct=True) as fh:
            assert not fh.closed
    # forcing compat mode wins over disallowing it
    compat_env.setenv("HIPFILE_FORCE_COMPAT_MODE", "true")
    with hipfile.open(data_path) as fh:
        assert not fh.closed and fh.handle is not None


@pytest.mark.emulated
def test_compat_mode_disabled_by_parameter(compat_env: pytest.MonkeyPatch,
                                           data_path: Path) -> None:
    hipfile.set_parameter(BoolConfigParameter.PROPERTIES_ALLOW_COMPAT_MODE, False)
    with pytest.raises(hipfile.HipFileException) as info, hipfile.open(data_path) as fh:
        fh.handle  # noqa: B018
    assert info.value.err is OpError.DIO_NOT_SET
    # the environment wins over the parameter
    compat_env.setenv("HIPFILE_ALLOW_COMPAT_MODE", "true")
    with hipfile.open(data_path) as fh:
        assert not fh.closed and fh.handle is not None


@pytest.mark.emulated
def test_threads_making_their_first_call_at_once_register_once(data_path: Path,
                                                                payload: np.ndarray) -> None:
    """The registration happens at the first call through hipFile's data
    path: threads that make theirs together on a fresh handle register it
    once, and none of them sees an error."""
    import threading

    from _util import device_array, from_device

    from hipfile.platforms import emulated

    errors: list[BaseException] = []
    start = threading.Barrier(8)
    for _ in range(5):
        with hipfile.open(data_path) as fh, device_array(8 * 4096) as dev:

            def first_call(i: int, fh: hipfile.FileHandle = fh, dev: Any = dev) -> None:
                try:
                    start.wait(timeout=30)
                    assert fh.read(dev, 4096, i * 4096, i * 4096) == 4096
                except BaseException as e:  # reported below
                    errors.append(e)

            threads = [threading.Thread(target=first_call, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            assert not errors, errors[:3]
            assert emulated.counters()["handles"] == 1
            np.testing.assert_array_equal(from_device(dev, 8 * 4096), payload[:8 * 4096])
        assert emulated.counters()["handles"] == 0


def test_a_file_handle_is_one_class_over_its_core() -> None:
    """FileHandle's methods are its own: between it and its compiled core
    there is no mixin class (no method declared in one class and defined in
    another)."""
    from hipfile._lib._hipfile import FileCore

    assert FileHandle.__mro__ == (FileHandle, FileCore, object)


def test_the_core_asks_nothing_of_the_handle_by_name(data_path: Path,
                                                     driver: hipfile.Driver) -> None:
    """The compiled core never calls up into the handle's class: a subclass
    that names the methods it once called (the closed message, the
    registration, the engine's descriptors) is not asked; what the core
    needs was given to it when the handle was made."""
    from hipfile._lib import _hipfile

    class Renamed(FileHandle):
        def _closed_reason(self) -> str:
            return "asked the class"

        def _register(self) -> None:
            raise AssertionError("the core called _register")

        def _engine_fd(self) -> int:
            # the class's own stream-ordered calls use it; a call whose
            # nearest Python frame is this test's came from compiled code
            if sys._getframe(1).f_code.co_filename == __file__:
                raise AssertionError("the core called _engine_fd")
            return super()._engine_fd()

        def _engine_direct_fd(self, large: bool) -> int:
            raise AssertionError("the core called _engine_direct_fd")

    fh = Renamed(data_path)
    with pytest.raises(hipfile.ClosedFileError, match="never opened"):
        fh.read(np.empty(16, np.uint8))
    with device_array(4096) as dev, fh:
        assert fh.read(dev, 4096) == 4096      # registered by the core itself
        assert fh.handle is not None
        assert fh.pread_async(dev, 4096, 0, 0).wait(30) == 4096
        # the many-file path (the engine's descriptor of each file), called
        # from here, so that this test's frame is the compiled code's caller
        assert _hipfile.engine_submit_files(dev, [(fh, 4096, 0, 0)]).wait(30) == 4096
        assert np.array_equal(from_device(dev, 4096), np.fromfile(data_path, np.uint8,
                                                                  4096))
    with pytest.raises(hipfile.ClosedFileError, match="closed FileHandle"):
        fh.read(np.empty(16, np.uint8))
