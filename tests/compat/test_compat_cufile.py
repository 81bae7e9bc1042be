"""hipfile.compat.cufile: cufile-python's API, driven the way its users drive it."""

from __future__ import annotations

import ctypes
import errno
import gc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _platform import PLATFORM
from _util import from_device, to_device

import hipfile
from hipfile.compat import cufile
from hipfile.compat.cufile import CuFile, CuFileDriver

N = 64 << 10


@pytest.fixture
def driver() -> Iterator[CuFileDriver]:
    d = CuFileDriver()
    yield d
    d.close()


def test_driver_is_a_singleton_that_reopens(driver: CuFileDriver) -> None:
    assert CuFileDriver() is driver
    assert driver.is_open
    before = hipfile.use_count()
    assert before >= 1
    driver.close()
    assert not driver.is_open
    assert hipfile.use_count() == before - 1
    driver.close()  # idempotent
    again = CuFileDriver()
    try:
        assert again is not driver and again.is_open
        assert hipfile.use_count() == before
    finally:
        again.close()


def test_handle_is_none_while_closed(driver: CuFileDriver, data_path: Path) -> None:
    f = CuFile(data_path, "r")
    assert not f.is_open and f.handle is None and f.get_handle() is None
    f.open()
    try:
        assert f.is_open and f.handle is not None
        fd = f.get_handle()
        assert isinstance(fd, int) and os.fstat(fd).st_size == N
        f.open()  # idempotent
    finally:
        f.close()
    assert not f.is_open and f.handle is None and f.get_handle() is None
    f.close()  # idempotent


def test_read_with_offsets_from_a_base_pointer(
    driver: CuFileDriver, data_path: Path, payload: np.ndarray, dev: Any
) -> None:
    to_device(dev, np.zeros(N, np.uint8))
    base = ctypes.c_void_p(int(dev))
    with CuFile(data_path, "r") as f:
        # LMCache's call: the allocator's base address and an offset into it
        assert f.read(base, 4096, 8192, 12288) == 4096
        assert f.read(int(dev), 100, 0) == 100
        assert f.read(base, 1000, N - 10, 20000) == 10  # short read at end of file
    host = from_device(dev, N)
    assert np.array_equal(host[12288:16384], payload[8192:12288])
    assert np.array_equal(host[:100], payload[:100])
    assert np.array_equal(host[20000:20010], payload[N - 10:])
    assert not host[100:12288].any() and not host[16384:20000].any()


def test_write_with_offsets_then_read_back(
    driver: CuFileDriver, tmp_path: Path, payload: np.ndarray, dev: Any
) -> None:
    to_device(dev, payload)
    path = tmp_path / "out.bin"
    with CuFile(path, "w") as f:
        assert f.write(ctypes.c_void_p(int(dev)), 4096, 0, 4096) == 4096
        assert f.write(ctypes.c_void_p(int(dev)), 4096, 4096, 0) == 4096
    data = path.read_bytes()
    assert data == payload[4096:8192].tobytes() + payload[:4096].tobytes()
    # "a" and "a+" (O_APPEND): the writes go to the end whatever the offset
    # says, as pwrite places them on an O_APPEND descriptor
    for mode in ("a", "a+"):
        with CuFile(path, mode) as f:
            assert f.write(ctypes.c_void_p(int(dev)), 10, 0, 0) == 10
        assert path.read_bytes() == data + payload[:10].tobytes()
        data = path.read_bytes()


@pytest.mark.parametrize("mode", ["r+", "w+"])
def test_read_write_modes(mode: str, driver: CuFileDriver, tmp_path: Path,
                          payload: np.ndarray, dev: Any) -> None:
    path = tmp_path / "rw.bin"
    path.write_bytes(bytes(N))
    to_device(dev, payload)
    with CuFile(path, mode) as f:
        assert f.write(ctypes.c_void_p(int(dev)), N, 0, 0) == N
        to_device(dev, np.zeros(N, np.uint8))
        assert f.read(ctypes.c_void_p(int(dev)), N, 0, 0) == N
    assert np.array_equal(from_device(dev, N), payload)


def test_registered_buffer_and_device_array(
    driver: CuFileDriver, data_path: Path, payload: np.ndarray, dev: Any
) -> None:
    with CuFile(data_path) as f, hipfile.Buffer(dev, N) as buf:
        assert buf.registered
        assert f.read(buf, 1000, 5, 7) == 1000
        assert np.array_equal(from_device(dev, 1000, 7), payload[5:1005])
        with pytest.raises(ValueError, match="overruns"):
            f.read(buf, N, 0, 1)  # a sized dest is range-checked
        assert f.read(dev, 10, 0, 0) == 10  # a HIP-Python pointer is a base address


def test_the_lmcache_shim_pattern(
    driver: CuFileDriver, data_path: Path, payload: np.ndarray, dev: Any
) -> None:
    """What LMCache's hipfile shim does with this package's own names."""
    fh = hipfile.FileHandle(data_path, os.O_RDONLY)
    assert fh.handle is None  # the shim's is_open test
    fh.open()
    try:
        assert fh.handle is not None
        buf = hipfile.Buffer.from_ctypes_void_p(ctypes.c_void_p(int(dev)), 4096, flags=0)
        assert fh.read(buf, 4096, 100, 0) == 4096
        assert np.array_equal(from_device(dev, 4096), payload[100:4196])
        # A buffer of exactly `size` bytes made from the base address takes any
        # dev_offset inside the allocation (cuFile's convention), none beyond it.
        assert fh.read(buf, 4096, 0, 4096) == 4096
        assert np.array_equal(from_device(dev, 4096, 4096), payload[:4096])
        with pytest.raises(ValueError, match="overruns the device allocation"):
            fh.read(buf, 4096, 0, N - 4095)
        with pytest.raises(ValueError, match="null pointer"):
            hipfile.Buffer.from_ctypes_void_p(ctypes.c_void_p(None), 4096)
    finally:
        fh.close()
    assert fh.handle is None


def test_errors(driver: CuFileDriver, data_path: Path, tmp_path: Path, dev: Any) -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        CuFile(data_path, "rw")
    f = CuFile(data_path)
    with pytest.raises(OSError) as info:
        f.read(ctypes.c_void_p(int(dev)), 10)
    assert info.value.errno == errno.EBADF
    with pytest.raises(OSError):
        f.write(ctypes.c_void_p(int(dev)), 10)
    with pytest.raises(FileNotFoundError):
        CuFile(tmp_path / "missing.bin").open()
    with CuFile(data_path) as f:
        with pytest.raises(ValueError, match="NULL"):
            f.read(ctypes.c_void_p(None), 10)
        with pytest.raises(ValueError, match="NULL"):
            f.read(0, 10)
        with pytest.raises(ValueError, match="dev_offset"):
            f.read(ctypes.c_void_p(int(dev)), 10, 0, -1)
        with pytest.raises(ValueError, match="size"):
            f.read(ctypes.c_void_p(int(dev)), -1)
        with pytest.raises(ValueError, match="file_offset"):
            f.read(ctypes.c_void_p(int(dev)), 10, -5)
        with pytest.raises(TypeError):
            f.read(ctypes.c_void_p(int(dev)), 1.5)  # type: ignore[arg-type]
        with pytest.raises(OSError):
            f.write(ctypes.c_void_p(int(dev)), 10)  # opened read-only: EBADF


@pytest.mark.emulated
def test_library_errors_raise(driver: CuFileDriver, data_path: Path, dev: Any) -> None:
    from hipfile.platforms import emulated

    with CuFile(data_path) as f:
        emulated.inject_fault("read", errno.EIO)
        with pytest.raises(OSError) as info:
            f.read(ctypes.c_void_p(int(dev)), 4096)
        assert info.value.errno == errno.EIO


def test_exception_in_body_is_kept_and_file_closed(driver: CuFileDriver,
                                                   data_path: Path) -> None:
    f = CuFile(data_path)
    with pytest.raises(KeyError, match="mine"), f:
        raise KeyError("mine")
    assert not f.is_open


def test_forgotten_file_is_closed_when_collected(driver: CuFileDriver, data_path: Path) -> None:
    f = CuFile(data_path)
    f.open()
    fd = f.get_handle()
    assert fd is not None
    os.fstat(fd)
    del f
    gc.collect()
    with pytest.raises(OSError) as info:
        os.fstat(fd)
    assert info.value.errno == errno.EBADF


def test_direct_io_flag(driver: CuFileDriver, data_path: Path) -> None:
    f = CuFile(data_path, "r", use_direct_io=True)
    assert f.use_direct_io and f.mode == "r"
    if not hasattr(os, "O_DIRECT"):
        return
    try:
        f.open()
    except OSError as e:  # a file system without O_DIRECT (tmpfs): EINVAL
        assert e.errno == errno.EINVAL
        assert not f.is_open
        return
    try:
        assert os.O_DIRECT & _fd_flags(f.get_handle())
    finally:
        f.close()


def _fd_flags(fd: int | None) -> int:
    import fcntl

    assert fd is not None
    return fcntl.fcntl(fd, fcntl.F_GETFL)


def test_module_names() -> None:
    from hipfile.compat.cufile import bindings

    assert cufile.__all__ == ["MODES", "CuFile", "CuFileDriver", "InvalidModeError"]
    assert set(bindings.__all__) == {
        "CUfileHandle_t", "cuFileDriverOpen", "cuFileDriverClose", "cuFileHandleRegister",
        "cuFileHandleDeregister", "cuFileBufRegister", "cuFileBufDeregister", "cuFileRead",
        "cuFileWrite"}
    assert PLATFORM


# -- cufile-python's exception types and messages -----------------------------------------


@pytest.mark.parametrize("mode", ["r", "w"])
def test_not_open_says_file_is_not_open(driver: CuFileDriver, data_path: Path, dev: Any,
                                        mode: str) -> None:
    """Mirrors cufile-python's ``test_read_write_without_open``: ``IOError``
    whose text holds ``File is not open.``; ours also has errno and path."""
    f = CuFile(data_path, mode)
    call = f.read if mode == "r" else f.write
    try:
        with pytest.raises(IOError, match=r"File is not open\.") as info:
            call(ctypes.c_void_p(int(dev)), 4096)
    finally:
        f.close()
    assert info.value.errno == errno.EBADF
    assert info.value.filename == os.fspath(data_path)
    assert str(info.value) == f"[Errno 9] File is not open.: {os.fspath(data_path)!r}"


def test_bad_mode_is_a_key_error_and_a_value_error(data_path: Path) -> None:
    """cufile-python looks the mode up in a dict: ``KeyError``. Ours is also
    the ``ValueError`` it was, with a message naming the modes."""
    for bad in ("rw", "rb", "", "x"):
        with pytest.raises(KeyError) as info:
            CuFile(data_path, bad)
        assert isinstance(info.value, ValueError)
        assert isinstance(info.value, cufile.InvalidModeError)
        assert str(info.value) == ("mode must be one of ['a', 'a+', 'r', 'r+', 'w', 'w+'], "
                                   f"got {bad!r}")


def test_registration_failure_is_a_runtime_error(driver: CuFileDriver, tmp_path: Path) -> None:
    """cufile-python raises ``RuntimeError`` when ``cuFileHandleRegister``
    fails; ours is the typed exception and a ``RuntimeError`` too, and it
    pickles as such. (A FIFO: hipFile registers regular files only.)"""
    import pickle

    path = tmp_path / "fifo"
    os.mkfifo(path)
    hipfile.process_driver()      # CuFile.open takes the process's reference
    before = hipfile.use_count()
    f = CuFile(path, "r+")
    try:
        f.open()
    except RuntimeError as e:
        assert isinstance(e, hipfile.HipFileException)
        assert e.hipfile_err == hipfile.OpError.INVALID_FILE_TYPE
        assert "hipFileHandleRegister" in str(e)
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e)
        assert isinstance(back, RuntimeError) and isinstance(back, hipfile.HipFileException)
    else:  # a library that accepts O_APPEND
        f.close()
        pytest.skip("this library registers FIFOs")
    assert not f.is_open
    assert hipfile.use_count() == before   # a failed open takes no reference of its own


@pytest.mark.emulated
def test_io_failures_from_the_library_are_runtime_errors(driver: CuFileDriver,
                                                         data_path: Path, dev: Any) -> None:
    """A hipFile code from a read is a ``RuntimeError`` too; an errno stays
    the ``OSError`` it is."""
    from hipfile.platforms import emulated

    with CuFile(data_path) as f:
        emulated.inject_fault("read", int(hipfile.OpError.INTERNAL_ERROR))
        with pytest.raises(RuntimeError) as info:
            f.read(ctypes.c_void_p(int(dev)), 4096)
        assert isinstance(info.value, hipfile.InternalError)
        emulated.inject_fault("read", errno.EIO)
        with pytest.raises(OSError) as oinfo:
            f.read(ctypes.c_void_p(int(dev)), 4096)
        assert not isinstance(oinfo.value, RuntimeError)


# -- cufile.bindings -------------------------------------------------------------------------


def test_bindings_round_trip(data_path: Path, tmp_path: Path, payload: np.ndarray,
                             dev: Any) -> None:
    """cufile-python's ``cufile.bindings`` calls in the order its ``CuFile``
    makes them: driver, handle, buffer registration, reads and writes at
    offsets from the base, deregistration."""
    from hipfile.compat.cufile import bindings as cb

    before = hipfile.use_count()
    cb.cuFileDriverOpen()
    try:
        assert hipfile.use_count() == before + 1
        fd = os.open(data_path, os.O_RDWR)
        try:
            handle = cb.cuFileHandleRegister(fd)
            assert isinstance(handle, cb.CUfileHandle_t) and handle.value
            base = ctypes.c_void_p(int(dev))
            cb.cuFileBufRegister(base, N, 0)
            to_device(dev, np.zeros(N, np.uint8))
            assert cb.cuFileRead(handle, base, 4096, 1000, 8192) == 4096
            assert cb.cuFileRead(handle, int(dev), 100, N - 40, 0) == 40   # end of file
            assert cb.cuFileWrite(handle, base, 4096, N, 8192) == 4096     # appends
            cb.cuFileBufDeregister(base)
            cb.cuFileHandleDeregister(handle)
        finally:
            os.close(fd)
        host = from_device(dev, N)
        assert np.array_equal(host[8192:12288], payload[1000:5096])
        assert np.array_equal(host[:40], payload[N - 40:])
        assert data_path.read_bytes()[N:] == payload[1000:5096].tobytes()
    finally:
        cb.cuFileDriverClose()
    assert hipfile.use_count() == before


@pytest.mark.cufile_differs("cuFile registers host memory; AMD's hipFile refuses it (5013)")
def test_bindings_refuse_host_memory_registration(driver: CuFileDriver) -> None:
    from hipfile.compat.cufile import bindings as cb

    host = np.zeros(4096, np.uint8)
    with pytest.raises(RuntimeError, match="cuFileBufRegister failed"):
        cb.cuFileBufRegister(host.ctypes.data, host.nbytes, 0)   # host memory: 5013


def test_bindings_raise_runtime_errors(driver: CuFileDriver, dev: Any, tmp_path: Path) -> None:
    """Where cufile-python's ``_ck`` raises ``RuntimeError("NAME failed
    (cuFile err=E, cuda_err=C)")``, ours raises the typed exception, also a
    ``RuntimeError``, with that text at the end."""
    from hipfile.compat.cufile import bindings as cb

    with pytest.raises(RuntimeError, match=r"\[cuFileBufDeregister failed \(cuFile "
                                           r"err=5024, cuda_err=0\)\]$") as info:
        cb.cuFileBufDeregister(ctypes.c_void_p(int(dev)))
    assert isinstance(info.value, hipfile.MemoryNotRegisteredError)
    fd = os.open(tmp_path, os.O_RDONLY)
    os.close(fd)   # a closed descriptor: refused by every library
    with pytest.raises(RuntimeError, match=r"cuFileHandleRegister failed \(cuFile err=50"):
        cb.cuFileHandleRegister(fd)
    for bad in (ctypes.c_void_p(None), 0):
        with pytest.raises(ValueError, match="NULL"):
            cb.cuFileRead(bad, ctypes.c_void_p(int(dev)), 1, 0, 0)
    with pytest.raises(TypeError, match="fd"):
        cb.cuFileHandleRegister("3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be >= 0"):
        cb.cuFileRead(1, int(dev), 1, -1, 0)


# -- what a failure says ---------------------------------------------------------------------


@pytest.mark.cufile_differs("cuFile does not check a bare address against its allocation: "
                            "the read is not refused there (H200, 2026-12-04)")
def test_overrun_of_a_bare_address_names_the_allocation(driver: CuFileDriver, data_path: Path,
                                                       dev: Any) -> None:
    """Reading past the end of the device allocation behind a bare address
    fails in hipFile with INVALID_VALUE; the error names the size, the
    offset and the allocation, as the core API's range check does (and is
    still a ValueError and a RuntimeError)."""
    with CuFile(data_path) as f:
        for size, off in ((2 * N, 0), (N, 1), (16, N)):
            with pytest.raises(hipfile.HipFileException) as info:
                f.read(ctypes.c_void_p(int(dev)), size, 0, off)
            if info.value.err != hipfile.OpError.INVALID_VALUE:
                pytest.skip(f"this libhipfile answers {info.value.err!r} for a transfer past "
                            "the allocation")
            text = str(info.value)
            assert isinstance(info.value, ValueError) and isinstance(info.value, RuntimeError)
            assert f"size {size} at dev_offset {off} overruns the device allocation" in text
            assert f"{N}-byte allocation at {int(dev):#x}" in text
        # inside the allocation: no error, no added text
        assert f.read(int(dev), N, 0, 0) == N
