"""Every write path treats an append handle alike: it appends or it refuses
(a clear exception, nothing written), never overwrites the file's bytes."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import device_array, hip_stream, to_device

import hipfile
from hipfile import FileHandle

OLD = 8192      # bytes in the file before the write
N = 4096        # bytes each write moves

Opener = Callable[[Path], FileHandle]

OPENERS: dict[str, Opener] = {
    "open-a": lambda p: hipfile.open(p, "a"),
    "open-ab+": lambda p: hipfile.open(p, "ab+"),
    "flags-wronly-append": lambda p: FileHandle(p, os.O_WRONLY | os.O_APPEND).open(),
    "flags-rdwr-append": lambda p: FileHandle(p, os.O_RDWR | os.O_APPEND).open(),
}


@pytest.fixture
def old_file(tmp_path: Path) -> tuple[Path, bytes]:
    old = np.random.default_rng(7).integers(0, 256, OLD, dtype=np.uint8).tobytes()
    path = tmp_path / "log.bin"
    path.write_bytes(old)
    return path, old


@pytest.fixture
def new_bytes() -> Iterator[tuple[Any, bytes]]:
    """Device memory holding N bytes unlike any of the file's."""
    data = np.full(N, 0xA5, np.uint8)
    with device_array(N) as dev:
        to_device(dev, data)
        yield dev, data.tobytes()


def _wait_stream(s: Any) -> None:
    from hip import hip
    assert hip.hipStreamSynchronize(s)[0] == hip.hipError_t.hipSuccess


# -- paths that append ------------------------------------------------------------------

def _write(fh: FileHandle, dev: Any, s: Any) -> None:
    assert fh.write(dev, N) == N


def _write_host(fh: FileHandle, dev: Any, s: Any) -> None:
    assert fh.write(np.full(N, 0xA5, np.uint8), N) == N


def _pwrite(fh: FileHandle, dev: Any, s: Any) -> None:
    assert fh.pwrite(dev, N).result() == N


def _pwrite_host(fh: FileHandle, dev: Any, s: Any) -> None:
    assert fh.pwrite(np.full(N, 0xA5, np.uint8), N).result() == N


def _module_pwrite(fh: FileHandle, dev: Any, s: Any) -> None:
    assert hipfile.pwrite(fh, dev, N).result() == N


def _write_async(fh: FileHandle, dev: Any, s: Any) -> None:
    h = fh.write_async(dev, N, None, 0, s)
    _wait_stream(s)
    assert h.wait() == N


def _pwrite_async(fh: FileHandle, dev: Any, s: Any) -> None:
    assert fh.pwrite_async(dev, N, None, 0, s).wait() == N


APPENDING = {"write": _write, "write-host": _write_host, "pwrite": _pwrite,
             "pwrite-host": _pwrite_host, "hipfile.pwrite": _module_pwrite,
             "write_async": _write_async, "pwrite_async": _pwrite_async}


@pytest.mark.parametrize("opener", OPENERS)
@pytest.mark.parametrize("path_name", APPENDING)
def test_an_append_handle_appends_on_every_path_that_places_writes(
        driver: hipfile.Driver, old_file: tuple[Path, bytes], new_bytes: tuple[Any, bytes],
        opener: str, path_name: str) -> None:
    path, old = old_file
    dev, new = new_bytes
    with hip_stream() as s:
        fh = OPENERS[opener](path)
        try:
            assert fh.appends
            APPENDING[path_name](fh, dev, s)
        finally:
            fh.close(wait=True)
    assert path.read_bytes() == old + new


# -- paths that write at the offsets they are given: refused -------------------------------

def _pwrite_async_ranges(fh: FileHandle, dev: Any, s: Any) -> object:
    return fh.pwrite_async_ranges(dev, [(N, 0, 0)], s)


def _gather(fh: FileHandle, dev: Any, s: Any) -> object:
    return fh.pwrite_async_gather(dev, [(N, 0, 0)], s)


def _module_gather(fh: FileHandle, dev: Any, s: Any) -> object:
    return hipfile.pwrite_async_gather(dev, [(fh, N, 0, 0)], s)


def _module_gather_of_two(fh: FileHandle, dev: Any, s: Any) -> object:
    # the append handle second, behind a file that takes offsets
    other = Path(str(fh.path) + ".other")
    with hipfile.open(other, "w") as plain:
        return hipfile.pwrite_async_gather(dev, [(plain, N // 2, 0, 0),
                                                 (fh, N // 2, 0, N // 2)], s)


def _batch_io_write(fh: FileHandle, dev: Any, s: Any) -> object:
    with hipfile.BatchIO(4) as batch:
        return batch.write(fh, dev, N, 0, 0)


def _batch_write(fh: FileHandle, dev: Any, s: Any) -> object:
    return hipfile.batch_write(fh, dev, [(N, 0, 0)])


def _batch_write_array(fh: FileHandle, dev: Any, s: Any) -> object:
    return hipfile.batch_write(fh, dev, np.array([[N, 0, 0]], np.int64))


REFUSING = {"pwrite_async_ranges": _pwrite_async_ranges, "pwrite_async_gather": _gather,
            "hipfile.pwrite_async_gather": _module_gather,
            "hipfile.pwrite_async_gather-two-files": _module_gather_of_two,
            "BatchIO.write": _batch_io_write, "hipfile.batch_write": _batch_write,
            "hipfile.batch_write-array": _batch_write_array}


@pytest.mark.parametrize("opener", OPENERS)
@pytest.mark.parametrize("path_name", REFUSING)
def test_an_append_handle_is_refused_by_every_path_that_takes_offsets(
        driver: hipfile.Driver, old_file: tuple[Path, bytes], new_bytes: tuple[Any, bytes],
        opener: str, path_name: str) -> None:
    path, old = old_file
    dev, _ = new_bytes
    with hip_stream() as s:
        fh = OPENERS[opener](path)
        try:
            with pytest.raises(ValueError, match="append"):
                REFUSING[path_name](fh, dev, s)
            _wait_stream(s)
        finally:
            fh.close(wait=True)
    assert path.read_bytes() == old      # nothing written, nothing overwritten


def test_a_descriptor_opened_to_append_is_refused_when_wrapped(
        driver: hipfile.Driver, old_file: tuple[Path, bytes]) -> None:
    # hipFile refuses O_APPEND descriptors (pwrite ignores their offsets):
    # from_fd refuses it at once, so no path can write through it
    path, old = old_file
    for flags in (os.O_WRONLY | os.O_APPEND, os.O_RDWR | os.O_APPEND):
        fd = os.open(path, flags)
        try:
            with pytest.raises(hipfile.HipFileException) as info:
                FileHandle.from_fd(fd)
            assert info.value.hipfile_err == hipfile.OpError.INVALID_FILE_OPEN_FLAG
            assert "O_APPEND" in str(info.value) and "'a'" in str(info.value)
            os.fstat(fd)     # the caller's descriptor is left open
        finally:
            os.close(fd)
    assert path.read_bytes() == old


def test_compat_layers_append_or_refuse(driver: hipfile.Driver, old_file: tuple[Path, bytes],
                                        new_bytes: tuple[Any, bytes]) -> None:
    from hipfile.compat import cufile, kvikio

    path, old = old_file
    dev, new = new_bytes
    f = cufile.CuFile(path, "a")
    try:
        f.open()
        assert f.write(int(dev), N, 0) == N      # cufile-python's "a": to the end
    finally:
        f.close()
    assert path.read_bytes() == old + new
    with pytest.raises(ValueError, match="'a'"):
        kvikio.CuFile(path, "a")                 # KvikIO refuses "a"
    assert path.read_bytes() == old + new
