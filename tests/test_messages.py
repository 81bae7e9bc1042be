"""What the errors of file I/O say: a write through a read-only handle gets
one message on every write path, before any byte moves; a failed write
(ENOSPC) names the file; a closed file inside a many-file operation is
named, with the entry that uses it."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hipfile
from hipfile._lib import _hipfile

N = 1 << 20
READ_ONLY = ("[Errno 9] cannot write: the file was opened read-only (mode 'r'); open it "
             "with 'r+' or 'w' to write: '{}'")


def _finish(result: Any) -> Any:
    if hasattr(result, "result"):
        return result.result()
    if hasattr(result, "wait"):
        return result.wait()
    return result


WRITES: dict[str, Callable[[hipfile.FileHandle, Any], Any]] = {
    "write": lambda fh, buf: fh.write(buf, 4096, 0, 0),
    "write host": lambda fh, buf: fh.write(np.zeros(4096, np.uint8), 4096, 0, 0),
    "pwrite": lambda fh, buf: fh.pwrite(buf, 4096, 0),
    "pwrite large": lambda fh, buf: fh.pwrite(buf, N, 0),
    "pwrite host": lambda fh, buf: fh.pwrite(np.zeros(4096, np.uint8), 4096, 0),
    "write_async": lambda fh, buf: fh.write_async(buf, 4096, 0, 0, 0),
    "pwrite_async": lambda fh, buf: fh.pwrite_async(buf, 4096, 0, 0),
    "pwrite_async unordered": lambda fh, buf: fh.pwrite_async(buf, 4096, 0, 0, ordered=False),
    "pwrite_async_ranges": lambda fh, buf: fh.pwrite_async_ranges(buf, [(4096, 0, 0)])[0],
    "pwrite_async_gather method": lambda fh, buf: fh.pwrite_async_gather(buf, [(4096, 0, 0)]),
    "pwrite_async_gather": lambda fh, buf: hipfile.pwrite_async_gather(buf, [(fh, 4096, 0, 0)]),
    "batch_write": lambda fh, buf: hipfile.batch_write(fh, buf, [(4096, 0, 0)]),
}


@pytest.mark.parametrize("path_name", WRITES)
def test_a_write_through_a_read_only_handle_says_so_on_every_path(
        driver: hipfile.Driver, data_file: tuple[Path, np.ndarray], dev: Any,
        path_name: str) -> None:
    if path_name == "write_async" and not hipfile.supports_async():
        pytest.skip("this libhipfile has no stream-ordered I/O")
    path, data = data_file
    with hipfile.open(path) as fh:
        with pytest.raises(OSError) as info:
            _finish(WRITES[path_name](fh, dev))
        assert info.value.errno == errno.EBADF
        assert str(info.value) == READ_ONLY.format(path)
    assert path.read_bytes() == data.tobytes()


ENOSPC_WRITES = {
    # the library's calls (emulated fault injection)
    "write": ("write", lambda fh, buf: fh.write(buf, 4096, 0, 0)),
    "pwrite": ("write", lambda fh, buf: fh.pwrite(buf, 4096, 0)),
    "batch_write": ("batch", lambda fh, buf: hipfile.batch_write(fh, buf, [(4096, 0, 0)])),
    # the engine's own POSIX calls
    "pwrite large": ("engine", lambda fh, buf: fh.pwrite(buf, N, 0)),
    "pwrite_async": ("engine", lambda fh, buf: fh.pwrite_async(buf, 4096, 0, 0)),
    "pwrite_async_ranges": ("engine",
                            lambda fh, buf: fh.pwrite_async_ranges(buf, [(4096, 0, 0)])[0]),
}


@pytest.mark.emulated
@pytest.mark.parametrize("path_name", ENOSPC_WRITES)
def test_enospc_names_the_file(driver: hipfile.Driver, data_file: tuple[Path, np.ndarray],
                               dev: Any, path_name: str) -> None:
    from hipfile.platforms import emulated

    path, _ = data_file
    where, call = ENOSPC_WRITES[path_name]
    with hipfile.open(path, "r+") as fh:
        if where == "engine":
            _hipfile.engine_inject_faults(errno.ENOSPC, 1000)
        else:
            emulated.inject_fault(where, errno.ENOSPC)
        try:
            with pytest.raises(OSError) as info:
                _finish(call(fh, dev))
        finally:
            _hipfile.engine_inject_faults()
            if where != "engine":
                emulated.inject_fault(where, errno.ENOSPC, count=0)
    assert info.value.errno == errno.ENOSPC
    assert info.value.filename == str(path)
    assert str(info.value).endswith(f": '{path}'")


@pytest.mark.parametrize("closed_at", [0, 1])
@pytest.mark.parametrize("call", ["pread_async_scatter", "pwrite_async_gather"])
def test_a_closed_file_in_a_many_file_operation_is_named(
        driver: hipfile.Driver, tmp_path: Path, dev: Any, closed_at: int, call: str) -> None:
    paths = [tmp_path / f"f{k}.bin" for k in range(3)]
    for p in paths:
        p.write_bytes(b"x" * 8192)
    files = [hipfile.open(p, "r+") for p in paths]
    try:
        files[closed_at].close()
        # the closed file is used by entries closed_at + 1 and 3
        entries = [(files[0], 4096, 0, 0), (files[closed_at], 4096, 0, 4096),
                   (files[2], 4096, 0, 8192), (files[closed_at], 4096, 4096, 12288)]
        if closed_at == 0:
            entries = entries[:1] + entries[2:]
        with pytest.raises(hipfile.ClosedFileError) as info:
            getattr(hipfile, call)(dev, entries, 0).wait()
        text = str(info.value)
        assert text == (f"the file '{paths[closed_at]}' of entry {closed_at}: I/O operation "
                        "on a closed FileHandle")
    finally:
        for f in files:
            f.close()
