"""Files hipFile refuses (pipes, FIFOs, sockets, character devices; a
descriptor opened with O_APPEND; one another open handle wraps) are refused
when a FileHandle is made, with hipFile's own code, so that no path (the
engine's and the POSIX ones, which move bytes without hipFile) reads or
writes them without a word."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from _util import device_array, hip_stream, returns_within

import hipfile
from hipfile import FileHandle, OpError

N = 4096


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


@contextlib.contextmanager
def _descriptor(kind: str, tmp_path: Path) -> Iterator[int]:
    """An open descriptor of ``kind``, closed afterwards."""
    fds: list[int] = []
    try:
        if kind in ("pipe-read", "pipe-write"):
            r, w = os.pipe()
            fds += [r, w]
            os.write(w, b"x" * N)
            yield r if kind == "pipe-read" else w
        elif kind == "socket":
            a, b = socket.socketpair()
            fds += [a.detach(), b.detach()]
            yield fds[0]
        elif kind == "fifo":
            os.mkfifo(tmp_path / "fifo")
            fds.append(os.open(tmp_path / "fifo", os.O_RDWR))
            yield fds[0]
        else:
            fds.append(os.open(f"/dev/{kind}", os.O_RDWR))
            yield fds[0]
    finally:
        for fd in fds:
            os.close(fd)


KINDS = ["pipe-read", "pipe-write", "socket", "fifo", "null", "zero"]


def _refused(info: pytest.ExceptionInfo[hipfile.HipFileException], code: int) -> None:
    assert info.value.hipfile_err == code
    assert "hipFileHandleRegister" in str(info.value)


@pytest.mark.parametrize("kind", KINDS)
def test_from_fd_refuses_what_hipfile_refuses(tmp_path: Path, kind: str) -> None:
    before = fd_count()
    with _descriptor(kind, tmp_path) as fd:
        with pytest.raises(hipfile.HipFileException) as info:
            FileHandle.from_fd(fd)
        _refused(info, OpError.INVALID_FILE_TYPE)
        os.fstat(fd)                  # the caller's descriptor is left open
        with pytest.raises(hipfile.HipFileException) as info:
            with FileHandle(None, fd=fd):
                pass
        _refused(info, OpError.INVALID_FILE_TYPE)
    assert fd_count() == before


def _special_path(kind: str, tmp_path: Path) -> Path:
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo")
        return tmp_path / "fifo"
    if kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(tmp_path / "sock"))
        s.close()
        return tmp_path / "sock"
    return Path(f"/dev/{kind}")


def _compat_cufile(p: Path) -> object:
    from hipfile.compat import cufile
    return cufile.CuFile(p, "r").open()


def _compat_kvikio(p: Path) -> object:
    from hipfile.compat import kvikio
    return kvikio.CuFile(p, "r")


def _safe_open(p: Path) -> object:
    from hipfile.safetensors import safe_open
    return safe_open(p, framework="numpy")


def _load_file(p: Path) -> object:
    from hipfile.safetensors.numpy import load_file
    return load_file(p)


OPENERS: dict[str, Callable[[Path], object]] = {
    "hipfile.open": lambda p: hipfile.open(p),
    "hipfile.open-r+": lambda p: hipfile.open(p, "r+"),
    "FileHandle.open": lambda p: FileHandle(p).open(),
    "FileHandle-with": lambda p: FileHandle(p, os.O_WRONLY).__enter__(),
    "compat.cufile": _compat_cufile,
    "compat.kvikio": _compat_kvikio,
    "safetensors.safe_open": _safe_open,
    "safetensors.load_file": _load_file,
}


@pytest.mark.parametrize("kind", ["fifo", "socket", "null", "zero"])
@pytest.mark.parametrize("opener", OPENERS)
def test_every_opener_refuses_what_hipfile_refuses(tmp_path: Path, kind: str,
                                                   opener: str) -> None:
    # a FIFO is refused before it is opened: opening it would block
    path = _special_path(kind, tmp_path)
    before = fd_count()
    with pytest.raises(hipfile.HipFileException) as info, returns_within(10, "opening it"):
        OPENERS[opener](path)
    _refused(info, OpError.INVALID_FILE_TYPE)
    assert fd_count() == before


@pytest.mark.parametrize("kind", KINDS)
def test_no_path_moves_a_byte_of_a_refused_file(tmp_path: Path, kind: str) -> None:
    # what the issue saw: pread_async and the many-file scatter returned 0
    # bytes without an error. The handle is never made, so every path of it
    # (read/pread/pread_async/scatter, writes, batch) is unreachable; the
    # file's bytes are still there for the caller.
    with _descriptor(kind, tmp_path) as fd, device_array(N) as dev, hip_stream() as s:
        with pytest.raises(hipfile.HipFileException):
            fh = FileHandle.from_fd(fd)
            fh.pread_async(dev, N, 0, 0, s).wait()
            hipfile.pread_async_scatter(dev, [(fh, N, 0, 0)], s).wait()
        if kind == "pipe-read":
            assert os.read(fd, N) == b"x" * N     # nothing was taken from the pipe


def test_a_descriptor_wrapped_twice_is_refused_as_hipfile_refuses(
        driver: hipfile.Driver, tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    data = np.arange(N, dtype=np.uint8)
    path.write_bytes(data.tobytes())
    fd = os.open(path, os.O_RDWR)
    try:
        first = FileHandle.from_fd(fd)
        with pytest.raises(hipfile.HandleAlreadyRegisteredError) as info:
            FileHandle.from_fd(fd)
        _refused(info, OpError.HANDLE_ALREADY_REGISTERED)
        with device_array(N) as dev:
            assert first.read(dev, N) == N           # the first still works
            dup = os.dup(fd)
            try:                                     # a duplicate is another descriptor
                with FileHandle.from_fd(dup) as other:
                    assert other.pread(dev, N).result() == N
            finally:
                os.close(dup)
        first.close()
        with FileHandle.from_fd(fd) as again:       # free once the first is closed
            assert again.size() == N
    finally:
        os.close(fd)
    with hipfile.open(path, "r") as fh:             # a path's own descriptor, wrapped again
        with pytest.raises(hipfile.HandleAlreadyRegisteredError):
            FileHandle.from_fd(fh.fileno())
        assert fh.size() == N


def test_a_regular_file_and_an_unknown_path_are_not_refused(tmp_path: Path) -> None:
    with hipfile.open(tmp_path / "new.bin", "w") as fh:    # created by os.open
        assert fh.size() == 0
    with pytest.raises(FileNotFoundError):
        hipfile.open(tmp_path / "missing.bin")
    fd = os.open(tmp_path / "new.bin", os.O_RDONLY)
    try:
        with FileHandle.from_fd(fd) as fh:
            assert fh.fileno() == fd
    finally:
        os.close(fd)


def test_a_close_inside_claim_descriptor_does_not_deadlock(tmp_path):
    """The collector may run a FileHandle's finalizer (its close releases its
    descriptor) while the same thread is inside claim_descriptor: the close
    must not wait for a lock its own thread holds."""
    import threading

    from hipfile.file import _kinds

    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 4096)
    fh = hipfile.open(path)

    def close_while_claiming() -> None:
        with _kinds._WRAPPED_LOCK:      # as claim_descriptor holds it
            fh.close()

    t = threading.Thread(target=close_while_claiming, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "close waited for the descriptor table's lock its thread held"
    assert fh.closed
