"""NVIDIA's cuFile API (``cuda.bindings.cufile``) and driver API
(``cuda.bindings.driver``) as hip-python-interop maps them onto hipFile and
HIP, next to ``hipfile`` in one process.

The scenarios mirror NVIDIA's ``cuda_bindings/tests/test_cufile.py``: its
``ctx`` fixture (cuInit, cuDeviceGet, cuDevicePrimaryCtxRetain,
cuCtxSetCurrent, cuDevicePrimaryCtxRelease), ``test_buf_register_simple``,
``test_buf_register_host_memory`` (refused by AMD's hipFile),
``test_cufile_read_write``, ``test_cufile_read_async`` and
``test_batch_io_basic``. Skipped where hip-python-interop is not installed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import check, device_array, from_device, hip_stream, random_bytes, random_file, to_device
from hip import hip

import hipfile
from hipfile import platforms
from hipfile._lib import _hipfile


def _interop_installed() -> bool:
    """Whether ``cuda.bindings.cufile`` is hip-python-interop's (NVIDIA's own
    cuda-python, which CUDA builds of torch install, loads CUDA's libraries)."""
    import importlib.metadata
    import importlib.util

    try:
        dist = importlib.metadata.distribution("hip-python-interop")
        spec = importlib.util.find_spec("cuda.bindings.cufile")
    except (importlib.metadata.PackageNotFoundError, ImportError):
        return False
    if spec is None or spec.origin is None:
        return False
    origin = Path(spec.origin).resolve()
    return any(Path(str(dist.locate_file(f))).resolve() == origin for f in dist.files or [])


if not _interop_installed():
    pytest.skip("hip-python-interop is not installed", allow_module_level=True)
cufile: Any = pytest.importorskip("cuda.bindings.cufile")
cuda: Any = pytest.importorskip("cuda.bindings.driver")

pytestmark = pytest.mark.skipif(platforms.active() == "cuda",
                                reason="hip-python-interop maps onto HIP, not CUDA")

N = 1 << 16


def _code(exc: BaseException) -> int:
    """The hipFile/cuFile status number in a ``cuFileError``'s message."""
    text = str(exc)
    return int(text[text.index("(") + 1:text.index(")")])


@pytest.fixture
def ctx() -> Iterator[Any]:
    """The primary context of device 0, current, as NVIDIA's fixture sets it."""
    (err,) = cuda.cuInit(0)
    assert err == cuda.CUresult.CUDA_SUCCESS
    err, device = cuda.cuDeviceGet(0)
    assert err == cuda.CUresult.CUDA_SUCCESS
    err, context = cuda.cuDevicePrimaryCtxRetain(device)
    assert err == cuda.CUresult.CUDA_SUCCESS
    (err,) = cuda.cuCtxSetCurrent(context)
    assert err == cuda.CUresult.CUDA_SUCCESS
    try:
        yield context
    finally:
        (err,) = cuda.cuDevicePrimaryCtxRelease(device)
        assert err == cuda.CUresult.CUDA_SUCCESS
        hip.hipCtxSetCurrent(None)


@pytest.fixture
def cufile_driver(ctx: Any) -> Iterator[None]:
    cufile.driver_open()
    try:
        yield
    finally:
        cufile.driver_close()


@contextlib.contextmanager
def cufile_registered(path: Path, flags: int) -> Iterator[tuple[int, Any]]:
    """``path`` opened with ``flags`` and registered through cufile: (fd,
    handle); deregistered and closed on exit."""
    fd = os.open(path, flags, 0o600)
    try:
        descr = cufile.Descr()
        descr.type = cufile.FileHandleType.OPAQUE_FD
        descr.handle.fd = fd
        descr.fs_ops = 0
        handle = cufile.handle_register(descr.ptr)
        try:
            yield fd, handle
        finally:
            cufile.handle_deregister(handle)
    finally:
        os.close(fd)


@pytest.fixture
def cufile_fd(tmp_path: Path) -> Iterator[tuple[int, Any]]:
    """A file opened read-write and registered through cufile: (fd, handle)."""
    with cufile_registered(tmp_path / "cufile.bin", os.O_CREAT | os.O_RDWR) as opened:
        yield opened


# -- cuFile through interop ---------------------------------------------------

@pytest.mark.usefixtures("cufile_driver")
def test_buf_register_device_memory() -> None:
    err, ptr = cuda.cuMemAlloc(4096)
    assert err == cuda.CUresult.CUDA_SUCCESS
    try:
        cufile.buf_register(int(ptr), 4096, 0)
        cufile.buf_deregister(int(ptr))
    finally:
        cuda.cuMemFree(ptr)


@pytest.mark.usefixtures("cufile_driver")
def test_buf_register_host_memory_is_refused() -> None:
    # cuFile registers host memory; AMD's hipFile refuses it (5013)
    err, ptr = cuda.cuMemHostAlloc(4096, 0)
    assert err == cuda.CUresult.CUDA_SUCCESS
    try:
        with pytest.raises(cufile.cuFileError) as info:
            cufile.buf_register(int(ptr), 4096, 0)
        assert _code(info.value) == int(cufile.OpError.CUDA_MEMORY_TYPE_INVALID) == 5013
    finally:
        cuda.cuMemFreeHost(ptr)


@pytest.mark.usefixtures("cufile_driver")
def test_read_write_round_trip(cufile_fd: tuple[int, Any]) -> None:
    _, handle = cufile_fd
    data = random_bytes(N, seed=3)
    with device_array(N) as src, device_array(N) as dst:
        to_device(src, data)
        cufile.buf_register(int(src), N, 0)
        try:
            assert cufile.write(handle, int(src), N, 0, 0) == N
            assert cufile.read(handle, int(dst), N, 0, 0) == N
        finally:
            cufile.buf_deregister(int(src))
        assert (from_device(dst, N) == data).all()


@pytest.mark.usefixtures("cufile_driver")
def test_read_async_on_a_registered_stream(cufile_fd: tuple[int, Any]) -> None:
    fd, handle = cufile_fd
    data = random_bytes(N, seed=4)
    os.pwrite(fd, data.tobytes(), 0)
    size_p, file_offset_p = ctypes.c_size_t(N), ctypes.c_int64(0)
    buffer_offset_p, done_p = ctypes.c_int64(0), ctypes.c_ssize_t(-1)
    with device_array(N) as dev, hip_stream() as stream:
        cufile.stream_register(int(stream), 0)
        try:
            cufile.read_async(int(handle), int(dev), ctypes.addressof(size_p),
                              ctypes.addressof(file_offset_p), ctypes.addressof(buffer_offset_p),
                              ctypes.addressof(done_p), int(stream))
            (err,) = cuda.cuStreamSynchronize(stream)
            assert err == cuda.CUresult.CUDA_SUCCESS
        finally:
            cufile.stream_deregister(int(stream))
        assert done_p.value == N
        assert (from_device(dev, N) == data).all()


@pytest.mark.needs("hipFileBatchIOGetStatus")
@pytest.mark.usefixtures("cufile_driver")
def test_batch_write_then_read(cufile_fd: tuple[int, Any]) -> None:
    _, handle = cufile_fd
    n, size = 3, 4096
    data = [random_bytes(size, seed=10 + i) for i in range(n)]
    bufs = [check(hip.hipMalloc(size)) for _ in range(2 * n)]
    batch = cufile.batch_io_set_up(n)
    try:
        for i in range(n):
            to_device(bufs[i], data[i])
        for opcode, first, cookie in ((cufile.Opcode.WRITE, 0, 0), (cufile.Opcode.READ, n, 100)):
            params, events = cufile.IOParams(n), cufile.IOEvents(n)
            for i in range(n):
                params[i].mode = cufile.BatchMode.BATCH
                params[i].fh = handle
                params[i].opcode = opcode
                params[i].cookie = cookie + i
                _set_batch(params[i].u.batch, int(bufs[first + i]), i * size, size)
            cufile.batch_io_submit(batch, n, params.ptr, 0)
            nr, timeout = ctypes.c_uint(n), ctypes.c_int(5000)
            cufile.batch_io_get_status(batch, n, ctypes.addressof(nr), events.ptr,
                                       ctypes.addressof(timeout))
            assert nr.value == n
            assert {events[i].cookie for i in range(n)} == {cookie + i for i in range(n)}
            assert all(events[i].status == cufile.Status.COMPLETE for i in range(n))
            assert all(events[i].ret == size for i in range(n))
        for i in range(n):
            assert (from_device(bufs[n + i], size) == data[i]).all()
    finally:
        cufile.batch_io_destroy(batch)
        for p in bufs:
            check(hip.hipFree(p))


def _set_batch(batch: Any, base: int, file_offset: int, size: int) -> None:
    """Fill one batch entry: NVIDIA's field names (``dev_ptr_base``,
    ``size_``) where the binding has them, else hip-python-interop 10.0's
    (``devPtr_base``, ``size``, as hipFile's C struct spells them)."""
    nvidia = hasattr(batch, "dev_ptr_base")
    setattr(batch, "dev_ptr_base" if nvidia else "devPtr_base", base)
    setattr(batch, "dev_ptr_offset" if nvidia else "devPtr_offset", 0)
    setattr(batch, "size_" if nvidia else "size", size)
    batch.file_offset = file_offset


# -- hipfile and cuda.bindings.cufile in one process --------------------------

def test_one_driver_use_count(ctx: Any) -> None:
    before = hipfile.use_count()
    with hipfile.Driver():
        assert hipfile.use_count() == before + 1
        cufile.driver_open()
        try:
            assert hipfile.use_count() == before + 2
        finally:
            cufile.driver_close()
        assert hipfile.use_count() == before + 1
    assert hipfile.use_count() == before


@pytest.mark.usefixtures("cufile_driver")
def test_each_sees_the_others_buffer_registrations() -> None:
    with device_array(N) as a, device_array(N) as b:
        with hipfile.Buffer(a) as buf:
            assert buf.registered
            with pytest.raises(cufile.cuFileError) as info:
                cufile.buf_register(int(a), N, 0)
            assert _code(info.value) == int(cufile.OpError.MEMORY_ALREADY_REGISTERED)
        # hipfile deregistered it: cufile may register it now
        cufile.buf_register(int(a), N, 0)
        cufile.buf_deregister(int(a))

        cufile.buf_register(int(b), N, 0)
        try:
            with pytest.raises(hipfile.HipFileException) as err:
                hipfile.Buffer(b).register()
            assert err.value.err == hipfile.OpError.MEMORY_ALREADY_REGISTERED
        finally:
            cufile.buf_deregister(int(b))


@pytest.mark.usefixtures("cufile_driver")
def test_each_uses_the_others_file_handles(tmp_path: Path) -> None:
    path = tmp_path / "shared.bin"
    data = random_file(path, N, seed=5)
    with device_array(N) as dev:
        # a handle registered by hipfile, read through cufile
        with hipfile.open(path) as fh:
            assert cufile.read(fh.handle, int(dev), N, 0, 0) == N
        assert (from_device(dev, N) == data).all()
        to_device(dev, np.zeros(N, dtype=np.uint8))
        # a handle registered by cufile, read through hipfile's binding
        with cufile_registered(path, os.O_RDONLY) as (_, handle):
            assert _hipfile.read(int(handle), int(dev), N, 0, 0) == N
        assert (from_device(dev, N) == data).all()
