"""Buffers made from a bare address: cuFile's base-plus-offset convention.

LMCache 0.5.6 ships ``lmcache/v1/storage_backend/hipfile_shim.py``, written
against this package's names. For every transfer it builds
``Buffer.from_ctypes_void_p(base, size)`` at the allocation's base with the
transfer's size, and passes the offset into the allocation as
``buffer_offset`` (``FileHandle.read(buf, size, file_offset, dev_offset)``).
The tests here drive that pattern with a 1 MiB allocation and 64 KiB
transfers, and check the limits: the device allocation, not the declared
length, and the declared length where no allocation is known.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import check, from_device, hip_stream, to_device
from hip import hip

import hipfile
from hipfile import Buffer
from hipfile._lib import _hip

N = 1 << 20          # the allocation (the conftest's ``dev`` and ``payload``)
CHUNK = 64 << 10     # one transfer


def _shim_read(fh: hipfile.FileHandle, base: int, size: int, file_offset: int,
               dev_offset: int) -> int:
    """One read as LMCache's shim makes it (our text, its calls)."""
    buf = Buffer.from_ctypes_void_p(ctypes.c_void_p(base), size, flags=0)
    return fh.read(buf, size, file_offset, dev_offset)


def _shim_write(fh: hipfile.FileHandle, base: int, size: int, file_offset: int,
                dev_offset: int) -> int:
    buf = Buffer.from_ctypes_void_p(ctypes.c_void_p(base), size, flags=0)
    return fh.write(buf, size, file_offset, dev_offset)


def test_every_offset_of_the_allocation(driver: Any, dev: Any, payload: np.ndarray,
                                        tmp_path: Path) -> None:
    """Mirrors LMCache's ``CuFile.write``/``read`` of the shim at each 64 KiB
    slot of a 1 MiB allocation: the slots land reversed in the file, and read
    back in place."""
    base = int(dev)
    to_device(dev, payload)
    path = tmp_path / "kv.bin"
    with hipfile.FileHandle(path, os.O_RDWR | os.O_CREAT) as fh:
        for off in range(0, N, CHUNK):
            assert _shim_write(fh, base, CHUNK, N - CHUNK - off, off) == CHUNK
        data = np.frombuffer(path.read_bytes(), np.uint8)
        for off in range(0, N, CHUNK):
            assert np.array_equal(data[N - CHUNK - off:N - off], payload[off:off + CHUNK])
        check(hip.hipMemset(dev, 0, N))
        for off in range(0, N, CHUNK):
            assert _shim_read(fh, base, CHUNK, N - CHUNK - off, off) == CHUNK
    assert np.array_equal(from_device(dev, N), payload)


@pytest.mark.parametrize("dev_offset", [1, 4095, CHUNK + 7, N - CHUNK - 1, N - CHUNK])
def test_unaligned_offsets_and_the_last_slot(driver: Any, dev: Any, data_path: Path,
                                             payload: np.ndarray, dev_offset: int) -> None:
    check(hip.hipMemset(dev, 0, N))
    with hipfile.FileHandle(data_path) as fh:
        assert _shim_read(fh, int(dev), CHUNK, 8192, dev_offset) == CHUNK
    host = from_device(dev, N)
    assert np.array_equal(host[dev_offset:dev_offset + CHUNK], payload[8192:8192 + CHUNK])
    assert not host[:dev_offset].any() and not host[dev_offset + CHUNK:].any()


@pytest.mark.parametrize("dev_offset", [N - CHUNK + 1, N, N + CHUNK])
def test_an_overrun_of_the_allocation_is_refused(driver: Any, dev: Any, data_path: Path,
                                                 dev_offset: int) -> None:
    check(hip.hipMemset(dev, 0, N))
    with hipfile.FileHandle(data_path, os.O_RDWR) as fh:
        for call in (_shim_read, _shim_write):
            with pytest.raises(ValueError, match="overruns the device allocation") as info:
                call(fh, int(dev), CHUNK, 0, dev_offset)
            assert f"the {N}-byte allocation at {int(dev):#x}" in str(info.value)
    assert not from_device(dev, N).any()
    assert data_path.stat().st_size == N


def test_a_base_inside_the_allocation(driver: Any, dev: Any, data_path: Path,
                                      payload: np.ndarray) -> None:
    """The address need not be the allocation's start: the room is measured
    from it to the allocation's end."""
    inner = int(dev) + 3 * CHUNK
    room = N - 3 * CHUNK
    with hipfile.FileHandle(data_path) as fh:
        assert _shim_read(fh, inner, CHUNK, 0, room - CHUNK) == CHUNK
        with pytest.raises(ValueError, match=f"which ends {room} bytes after it"):
            _shim_read(fh, inner, CHUNK, 0, room - CHUNK + 1)
    assert np.array_equal(from_device(dev, CHUNK, N - CHUNK), payload[:CHUNK])


def test_the_other_bare_forms(driver: Any, dev: Any, data_path: Path,
                              payload: np.ndarray) -> None:
    """An int and a sizeless HIP-Python ``Pointer`` are bare addresses too."""
    check(hip.hipMemset(dev, 0, N))
    pointer = _hip.Pointer.fromObj(int(dev))
    with hipfile.FileHandle(data_path) as fh:
        for bare in (int(dev), pointer):
            buf = Buffer(bare, 16)
            assert buf.bare
            assert fh.read(buf, CHUNK, 0, 2 * CHUNK) == CHUNK
    host = from_device(dev, N)
    assert np.array_equal(host[2 * CHUNK:3 * CHUNK], payload[:CHUNK])


@pytest.mark.cufile_differs(
    "a stream that cuFile 1.15's compatibility mode registered and deregistered "
    "(or a new stream at its address) reports full counts and writes nothing for "
    "buffers that are not registered, so this fails there after any test that "
    "registers a stream (docs/platform-cuda.md)")
def test_read_async_follows_the_same_rule(driver: Any, dev: Any, data_path: Path,
                                          payload: np.ndarray) -> None:
    """``read_async`` (upstream's 1:1 call) follows the same rule."""
    check(hip.hipMemset(dev, 0, N))
    with hipfile.FileHandle(data_path) as fh, hip_stream() as s:
        h = fh.read_async(Buffer(int(dev), 16), CHUNK, CHUNK, 5 * CHUNK, s)
        assert h.wait() == CHUNK
        with pytest.raises(ValueError, match="overruns the device allocation"):
            fh.read_async(Buffer(int(dev), 16), CHUNK, 0, N - 1, s)
    host = from_device(dev, N)
    assert np.array_equal(host[5 * CHUNK:6 * CHUNK], payload[CHUNK:2 * CHUNK])
    assert not host[:5 * CHUNK].any()


def test_a_registered_buffer_keeps_its_registration(driver: Any, dev: Any,
                                                   data_path: Path) -> None:
    """hipFile holds a registered buffer to its registration (AMD's library
    answers InvalidValue past it): registered, a bare-address buffer keeps
    its declared length as the limit, and the message says why."""
    with hipfile.FileHandle(data_path) as fh, Buffer(int(dev), CHUNK) as buf:
        assert buf.registered and buf.bare
        assert fh.read(buf, CHUNK, 0, 0) == CHUNK
        with pytest.raises(ValueError, match="registered with hipFile for those"):
            fh.read(buf, CHUNK, 0, CHUNK)
        buf.deregister()
        assert fh.read(buf, CHUNK, 0, CHUNK) == CHUNK   # unregistered: the allocation


def test_sized_objects_keep_their_size(driver: Any, dev: Any, data_path: Path) -> None:
    """A buffer made from an object that knows its size (a ``DeviceArray``,
    even cut short with ``length``) is held to it, as before."""
    with hipfile.FileHandle(data_path) as fh:
        for buf in (Buffer(dev, 4096), hipfile.Buffer(Buffer(dev, 4096))):
            assert not buf.bare
            with pytest.raises(ValueError, match=r"overruns the 4096-byte buffer$"):
                fh.read(buf, 4096, 0, 1)
        with pytest.raises(ValueError, match=f"overruns the {N}-byte buffer$"):
            fh.read(dev, 4096, 0, N - 4095)   # also a sized object, the whole allocation
        assert Buffer(Buffer(int(dev), 16)).bare   # a copy keeps the rule


def test_size_none_is_the_declared_length(driver: Any, dev: Any, data_path: Path,
                                          payload: np.ndarray) -> None:
    """``size`` None still means the rest of the declared length; past it, the
    message asks for a size."""
    check(hip.hipMemset(dev, 0, N))
    with hipfile.FileHandle(data_path) as fh:
        buf = Buffer(int(dev), 4096)
        assert fh.read(buf, None, 0, 96) == 4000
        with pytest.raises(ValueError, match="give size"):
            fh.read(buf, None, 0, 8192)
    host = from_device(dev, 8192)
    assert np.array_equal(host[96:4096], payload[:4000]) and not host[4096:].any()


def test_no_allocation_keeps_the_declared_length(driver: Any, data_path: Path) -> None:
    """Memory the HIP runtime does not know (here: host memory from NumPy):
    the declared length is the limit, and the error says why."""
    host = np.zeros(2 * CHUNK, np.uint8)
    buf = Buffer(host.ctypes.data, CHUNK)
    with hipfile.FileHandle(data_path) as fh:
        with pytest.raises(ValueError, match="lies in no device allocation") as info:
            fh.read(buf, CHUNK, 0, 1)
        assert str(info.value).startswith(f"size {CHUNK} at buffer_offset 1 overruns "
                                          f"the {CHUNK}-byte buffer: the buffer was made "
                                          f"from the bare address {host.ctypes.data:#x}")
        assert "hipErrorNotFound" in str(info.value)
        with pytest.raises(ValueError, match=f"buffer_offset {2 * CHUNK} is past"):
            fh.read(buf, 1, 0, 2 * CHUNK)
    assert not host.any()


def test_freed_memory_is_not_an_allocation(driver: Any, data_path: Path) -> None:
    """After ``hipFree`` the address belongs to no allocation: only the
    declared length is allowed."""
    ptr = check(hip.hipMalloc(N))
    check(hip.hipFree(ptr))
    buf = Buffer(int(ptr), CHUNK)
    with hipfile.FileHandle(data_path) as fh:
        with pytest.raises(ValueError, match="lies in no device allocation"):
            fh.read(buf, CHUNK, 0, CHUNK)

