"""The C ABI: file handles, buffers and synchronous I/O."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import threading
from pathlib import Path

import pytest
from _abi_calls import *  # noqa: F403

# --------------------------------------------------------------------------
# File handles.


@pytest.mark.emulated
def test_handle_registration_rules(
    lib: ctypes.CDLL, driver: None, files: Files, tmp_path: Path
) -> None:
    fd = files(b"abc")
    rc, fh = register(lib, fd)
    assert rc == SUCCESS and fh
    assert counters()["handles"] == 1
    assert register(lib, fd)[0] == HANDLE_ALREADY_REGISTERED
    lib.hipFileHandleDeregister(fh)
    assert counters()["handles"] == 0

    assert register(lib, fd, kind=2)[0] == IO_NOT_SUPPORTED
    assert register(lib, fd, kind=3)[0] == IO_NOT_SUPPORTED
    assert register(lib, fd, kind=99)[0] == INVALID_FILE_TYPE
    assert register(lib, -1)[0] == INVALID_VALUE
    closed = os.open(tmp_path / "closed", os.O_RDWR | os.O_CREAT)
    os.close(closed)
    assert register(lib, closed)[0] == INVALID_VALUE
    dfd = os.open(tmp_path, os.O_RDONLY)
    try:
        assert register(lib, dfd)[0] == INVALID_FILE_TYPE
    finally:
        os.close(dfd)
    r, w = os.pipe()
    try:
        assert register(lib, r)[0] == INVALID_FILE_TYPE
    finally:
        os.close(r)
        os.close(w)
    assert register(lib, files(b"", os.O_WRONLY | os.O_APPEND))[0] == INVALID_FILE_OPEN_FLAG
    fh_out = P()
    assert code(lib.hipFileHandleRegister(ctypes.byref(fh_out), None)) == INVALID_VALUE
    assert code(lib.hipFileHandleRegister(None, descr(fd).ctypes.data)) == INVALID_VALUE
    assert counters()["handles"] == 0


@pytest.mark.emulated
def test_stale_and_unknown_handles_are_rejected_not_dereferenced(
    lib: ctypes.CDLL, driver: None, files: Files, devmem: Alloc, stream: int,
) -> None:
    buf = devmem(4096)
    rc, fh = register(lib, files(b"data"))
    assert rc == SUCCESS
    lib.hipFileHandleDeregister(fh)
    # A newer registration never reuses the value of a stale handle.
    rc, fh2 = register(lib, files(b"more"))
    assert rc == SUCCESS and fh2 != fh
    for bad in (fh, 0x1234, 0xDEADBEEF000, 1):
        assert lib.hipFileRead(bad, buf, 4, 0, 0) == -HANDLE_NOT_REGISTERED
        assert lib.hipFileWrite(bad, buf, 4, 0, 0) == -HANDLE_NOT_REGISTERED
        assert read_async(lib, bad, buf, Slots(4), stream) == HANDLE_NOT_REGISTERED
        lib.hipFileHandleDeregister(bad)  # no-op
    assert lib.hipFileRead(None, buf, 4, 0, 0) == -HANDLE_NOT_REGISTERED
    assert counters()["handles"] == 1
    assert lib.hipFileRead(fh2, buf, 4, 0, 0) == 4
    lib.hipFileHandleDeregister(fh2)
    lib.hipFileHandleDeregister(fh2)
    assert counters()["handles"] == 0


@pytest.mark.cufile_differs("string parameters without a value give InvalidValue")
def test_compat_mode_policy(
    lib: ctypes.CDLL, saved_config: None, files: Files, monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = files(b"p" * 8192)
    direct = try_open_direct(files)
    monkeypatch.setenv("HIPFILE_ALLOW_COMPAT_MODE", "false")
    assert register(lib, plain)[0] == DIO_NOT_SET
    rc, fh = register(lib, direct)
    assert rc == SUCCESS
    lib.hipFileHandleDeregister(fh)
    monkeypatch.setenv("HIPFILE_FORCE_COMPAT_MODE", "true")
    rc, fh = register(lib, plain)
    assert rc == SUCCESS
    lib.hipFileHandleDeregister(fh)
    monkeypatch.delenv("HIPFILE_FORCE_COMPAT_MODE")
    monkeypatch.delenv("HIPFILE_ALLOW_COMPAT_MODE")
    # The parameters do the same when the environment says nothing.
    assert code(lib.hipFileSetParameterBool(P_ALLOW_COMPAT, False)) == SUCCESS
    assert register(lib, plain)[0] == DIO_NOT_SET
    assert code(lib.hipFileSetParameterBool(P_FORCE_COMPAT, True)) == SUCCESS
    rc, fh = register(lib, plain)
    assert rc == SUCCESS
    lib.hipFileHandleDeregister(fh)
    # The environment wins over the parameter.
    assert code(lib.hipFileSetParameterBool(P_FORCE_COMPAT, False)) == SUCCESS
    monkeypatch.setenv("HIPFILE_ALLOW_COMPAT_MODE", "true")
    rc, fh = register(lib, plain)
    assert rc == SUCCESS
    lib.hipFileHandleDeregister(fh)


def test_o_direct_files_take_aligned_and_unaligned_io(
    lib: ctypes.CDLL, driver: None, files: Files, handles: Alloc, devmem: Alloc,
) -> None:
    data = pattern(3 * 4096)
    fd = try_open_direct(files, data)
    fh = handles(fd)
    base = devmem(6 * 4096)
    buf = base + (-base % 4096)  # page aligned: the O_DIRECT descriptor can take it
    assert lib.hipFileRead(fh, buf, 8192, 4096, 0) == 8192
    assert get(buf, 8192) == data[4096:]
    assert lib.hipFileRead(fh, buf, 8192, 8192, 0) == 4096  # short at the end of the file
    assert lib.hipFileRead(fh, buf, 1000, 17, 3) == 1000  # unaligned: the buffered path
    assert get(buf + 3, 1000) == data[17:1017]
    new = pattern(4096, seed=9)
    put(buf, new)
    assert lib.hipFileWrite(fh, buf, 4096, 4096, 0) == 4096
    assert lib.hipFileWrite(fh, buf, 10, 5, 0) == 10
    assert lib.hipFileRead(fh, buf + 8192, 4096, 4096, 0) == 4096
    assert get(buf + 8192, 4096) == new
    assert lib.hipFileRead(fh, buf + 8192, 10, 5, 0) == 10
    assert get(buf + 8192, 10) == new[:10]
    # Both paths see the same file.
    assert lib.hipFileRead(fh, buf + 4096, 4096, 0, 0) == 4096
    assert get(buf + 4096, 4096) == data[:5] + new[:10] + data[15:4096]
    # The caller's descriptor keeps its flags.
    assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT


# --------------------------------------------------------------------------
# Buffers.


@pytest.mark.emulated
def test_buffer_registration_rules(
    lib: ctypes.CDLL, driver: None, devmem: Alloc, hostmem: Alloc,
) -> None:
    buf = devmem(1 << 16)
    assert code(lib.hipFileBufRegister(buf, 1 << 16, 0)) == SUCCESS
    assert counters()["buffers"] == 1
    assert code(lib.hipFileBufRegister(buf, 4096, 0)) == MEMORY_ALREADY_REGISTERED
    assert code(lib.hipFileBufRegister(buf + 4096, 4096, 0)) == MEMORY_ALREADY_REGISTERED
    assert code(lib.hipFileBufDeregister(buf + 4096)) == MEMORY_NOT_REGISTERED
    assert code(lib.hipFileBufDeregister(buf)) == SUCCESS
    assert code(lib.hipFileBufDeregister(buf)) == MEMORY_NOT_REGISTERED
    # Neighbours that do not overlap are fine.
    assert code(lib.hipFileBufRegister(buf, 4096, 0)) == SUCCESS
    assert code(lib.hipFileBufRegister(buf + 4096, 4096, 0)) == SUCCESS
    assert counters()["buffers"] == 2
    assert code(lib.hipFileBufDeregister(buf)) == SUCCESS
    assert code(lib.hipFileBufDeregister(buf + 4096)) == SUCCESS

    assert code(lib.hipFileBufRegister(buf, 0, 0)) == INVALID_VALUE
    assert code(lib.hipFileBufRegister(None, 16, 0)) == INVALID_VALUE
    assert code(lib.hipFileBufDeregister(None)) == INVALID_VALUE
    assert code(lib.hipFileBufRegister(buf, (1 << 16) + 1, 0)) == HIP_POINTER_RANGE_ERROR
    assert code(lib.hipFileBufRegister(buf + 100, 1 << 16, 0)) == HIP_POINTER_RANGE_ERROR
    assert code(lib.hipFileBufRegister(hostmem(4096), 4096, 0)) == HIP_MEMORY_TYPE_INVALID
    plain = ctypes.create_string_buffer(4096)
    # memory the runtime does not know is hipMemoryTypeUnregistered (as ROCm)
    assert code(lib.hipFileBufRegister(ctypes.addressof(plain), 4096, 0)) == (
        HIP_MEMORY_TYPE_INVALID)
    assert counters()["buffers"] == 0


# --------------------------------------------------------------------------
# Synchronous I/O.


def test_sync_round_trip(
    lib: ctypes.CDLL, driver: None, files: Files, handles: Alloc, devmem: Alloc,
) -> None:
    fd = files()
    fh = handles(fd)
    src, dst = devmem(10000), devmem(10000)
    data = pattern(10000)
    put(src, data)
    assert code(lib.hipFileBufRegister(src, 10000, 0)) == SUCCESS  # registered or not: both work
    assert lib.hipFileWrite(fh, src, 6000, 100, 1000) == 6000
    assert os.pread(fd, 6000, 100) == data[1000:7000]
    assert os.pread(fd, 100, 0) == bytes(100)  # the hole before the offset
    assert lib.hipFileRead(fh, dst, 5000, 600, 7) == 5000
    assert get(dst + 7, 5000) == data[1500:6500]
    assert lib.hipFileRead(fh, dst, 0, 0, 0) == 0
    assert code(lib.hipFileBufDeregister(src)) == SUCCESS


def test_short_reads_at_end_of_file(lib: ctypes.CDLL, opened: Opened) -> None:
    data = pattern(1000)
    fh, buf = opened(data, 8192)
    assert lib.hipFileRead(fh, buf, 4096, 900, 0) == 100
    assert get(buf, 100) == data[900:]
    assert lib.hipFileRead(fh, buf, 4096, 1000, 0) == 0
    assert lib.hipFileRead(fh, buf, 4096, 5000, 0) == 0


@pytest.mark.cufile_differs("negative offsets give -1/EINVAL")
def test_negative_offsets_are_invalid_values(lib: ctypes.CDLL, opened: Opened) -> None:
    fh, buf = opened(b"z" * 100, 4096)
    for fn in (lib.hipFileRead, lib.hipFileWrite):
        for foff, boff in ((-1, 0), (0, -1), (-(2**63), 0)):
            assert fn(fh, buf, 10, foff, boff) == -INVALID_VALUE  # as AMD's library
    ctypes.set_errno(0)
    assert lib.hipFileRead(fh, buf, 10, 2**63 - 5, 0) == -1  # the end would overflow
    assert ctypes.get_errno() == errno.EINVAL


@pytest.mark.cufile_differs("host memory is accepted")
def test_sync_io_checks_the_buffer(lib: ctypes.CDLL, opened: Opened, hostmem: Alloc) -> None:
    fh, buf = opened(b"q" * 8192, 4096)
    assert lib.hipFileRead(fh, hostmem(4096), 10, 0, 0) == -HIP_MEMORY_TYPE_INVALID
    plain = ctypes.create_string_buffer(4096)
    # as AMD's library: unknown memory is a memory type hipFile refuses, and
    # a NULL buffer or a range outside the allocation is an invalid value
    assert lib.hipFileRead(fh, ctypes.addressof(plain), 10, 0, 0) == -HIP_MEMORY_TYPE_INVALID
    assert lib.hipFileRead(fh, None, 10, 0, 0) == -INVALID_VALUE
    assert lib.hipFileRead(fh, buf, 4097, 0, 0) == -INVALID_VALUE
    assert lib.hipFileRead(fh, buf, 10, 0, 4090) == -INVALID_VALUE
    assert lib.hipFileWrite(fh, buf, 1, 0, 4096) == -INVALID_VALUE
    assert lib.hipFileRead(fh, buf, 6, 0, 4090) == 6  # up to the last byte is fine
    assert plain.raw == bytes(4096)


@pytest.mark.cufile_differs("the range is checked after clamping")
def test_sizes_are_clamped_before_the_range_check(
    lib: ctypes.CDLL, driver: None, files: Files, handles: Alloc, devmem: Alloc,
) -> None:
    # A buffer of exactly the largest transfer (address space only: nothing
    # touches most of it). A bigger size passes only because it is clamped.
    fh = handles(files(pattern(4096)))
    err, ptr = hip.hipMalloc(MAX_IO)
    if int(err) != 0:
        pytest.skip(f"no room for a {MAX_IO}-byte device buffer: {err}")
    hip_check(hip.hipFree(ptr))
    buf = devmem(MAX_IO)
    assert lib.hipFileRead(fh, buf, MAX_IO + (1 << 20), 0, 0) == 4096
    assert lib.hipFileRead(fh, buf, 2**64 - 1, 0, 0) == 4096
    assert lib.hipFileRead(fh, buf, MAX_IO + (1 << 20), 0, 4096) == -INVALID_VALUE
    assert lib.hipFileRead(fh, buf, MAX_IO - 4096, 0, 4096) == 4096


@pytest.mark.cufile_differs("a closed descriptor gives EIO")
def test_system_errors_set_errno(
    lib: ctypes.CDLL, driver: None, files: Files, handles: Alloc, devmem: Alloc,
) -> None:
    buf = devmem(4096)
    ro = handles(files(b"r" * 100, os.O_RDONLY))
    wo = handles(files(b"w" * 100, os.O_WRONLY))
    ctypes.set_errno(0)
    assert lib.hipFileWrite(ro, buf, 10, 0, 0) == -1
    assert ctypes.get_errno() == errno.EBADF
    ctypes.set_errno(0)
    assert lib.hipFileRead(wo, buf, 10, 0, 0) == -1
    assert ctypes.get_errno() == errno.EBADF


def test_concurrent_sync_io(
    lib: ctypes.CDLL, driver: None, files: Files, handles: Alloc, devmem: Alloc,
) -> None:
    data = pattern(64 * 1024)
    fh = handles(files(data))
    bufs = [devmem(len(data)) for _ in range(4)]
    results: list[int] = []

    def work(buf: int) -> None:
        for _ in range(20):
            results.append(lib.hipFileRead(fh, buf, len(data), 0, 0))

    threads = [threading.Thread(target=work, args=(b,)) for b in bufs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [len(data)] * 80
    assert all(get(b, len(data)) == data for b in bufs)
