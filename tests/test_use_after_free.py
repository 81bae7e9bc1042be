"""Device memory used after ``hipFree``: on a GPU that faults; on the emulated
platform freed memory is inaccessible and its addresses are not handed out
again, so a read into it is an error (``EFAULT``) and never a silent write
into memory that something else now owns."""

from __future__ import annotations

import ctypes
import errno
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import check, from_device, to_device
from hip import hip

import hipfile
from hipfile._lib import _hipfile

pytestmark = pytest.mark.emulated

# Small enough that a heap allocator would keep it in its arena and give
# the same addresses to the next allocation of its size.
N = 1 << 16


def _freed(nbytes: int = N) -> Any:
    dev = check(hip.hipMalloc(nbytes))
    check(hip.hipFree(dev))
    return dev


def _read_fails_with_efault(read: Any) -> None:
    with pytest.raises(OSError) as info:
        read()
    assert info.value.errno == errno.EFAULT
    assert "hipFree" in str(info.value)


def test_freed_addresses_are_not_reused() -> None:
    freed = [int(_freed()) for _ in range(8)]
    live = [check(hip.hipMalloc(N)) for _ in range(8)]
    try:
        assert not {int(p) for p in live} & set(freed)
    finally:
        for p in live:
            check(hip.hipFree(p))


def test_freed_memory_is_unknown_to_hip() -> None:
    ptr = int(_freed())
    err, _ = hip.hipMemPtrGetInfo(ptr)
    assert err != hip.hipError_t.hipSuccess
    err = hip.hipMemset(ptr, 0, N)[0]
    assert err == hip.hipError_t.hipErrorInvalidValue


def test_read_into_freed_device_array(driver: hipfile.Driver,
                                      data_file: tuple[Path, np.ndarray]) -> None:
    path, _ = data_file
    dev = _freed()
    with hipfile.open(path) as fh:
        _read_fails_with_efault(lambda: fh.read(dev, N))


def test_read_into_freed_bare_pointer(driver: hipfile.Driver,
                                      data_file: tuple[Path, np.ndarray]) -> None:
    path, _ = data_file
    ptr = int(_freed())
    with hipfile.open(path) as fh:
        _read_fails_with_efault(
            lambda: fh.read(hipfile.Buffer.from_ctypes_void_p(ctypes.c_void_p(ptr), N)))
        _read_fails_with_efault(lambda: fh.read(hipfile.Buffer(ptr, N)))


def test_read_into_registered_then_freed_buffer(driver: hipfile.Driver,
                                                data_file: tuple[Path, np.ndarray]) -> None:
    path, _ = data_file
    dev = check(hip.hipMalloc(N))
    buf = hipfile.Buffer(dev)
    buf.register()
    try:
        check(hip.hipFree(dev))
        with hipfile.open(path) as fh:
            _read_fails_with_efault(lambda: fh.read(buf))
            # the library itself refuses the address: not device memory
            with pytest.raises(hipfile.HipFileException) as info:
                _hipfile.read(fh.handle, int(dev), N, 0, 0)
            assert info.value.err == hipfile.OpError.HIP_MEMORY_TYPE_INVALID
    finally:
        buf.deregister()


def test_parallel_read_into_freed_memory(driver: hipfile.Driver,
                                         data_file: tuple[Path, np.ndarray]) -> None:
    path, _ = data_file
    ptr = int(_freed())
    with hipfile.open(path) as fh:
        _read_fails_with_efault(lambda: fh.pread(hipfile.Buffer(ptr, N), task_size=4096).result())


def test_live_memory_is_untouched_by_a_read_into_freed_memory(
        driver: hipfile.Driver, data_file: tuple[Path, np.ndarray]) -> None:
    path, _ = data_file
    dev = _freed()
    zeros = np.zeros(N, dtype=np.uint8)
    live = [check(hip.hipMalloc(N)) for _ in range(4)]
    try:
        for p in live:
            to_device(p, zeros)
        with hipfile.open(path) as fh, pytest.raises(OSError):
            fh.read(dev, N)
        for p in live:
            assert not from_device(p, N).any()
    finally:
        for p in live:
            check(hip.hipFree(p))


def test_freed_pinned_host_memory_is_inaccessible(driver: hipfile.Driver,
                                                  data_file: tuple[Path, np.ndarray]) -> None:
    path, _ = data_file
    host = check(hip.hipHostMalloc(N, 0))
    ptr = int(host)
    check(hip.hipHostFree(host))
    with hipfile.open(path) as fh:
        _read_fails_with_efault(lambda: fh.read(hipfile.Buffer(ptr, N)))


def test_memory_stays_usable_until_freed(driver: hipfile.Driver,
                                         data_file: tuple[Path, np.ndarray]) -> None:
    # a page-granular mapping serves sizes that are not page multiples
    path, data = data_file
    for size in (1, 4095, 4096, 4097, N):
        dev = check(hip.hipMalloc(size))
        try:
            with hipfile.open(path) as fh:
                assert fh.read(dev, size) == size
            assert (from_device(dev, size) == data[:size]).all()
        finally:
            check(hip.hipFree(dev))
