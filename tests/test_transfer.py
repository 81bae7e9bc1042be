"""The short-transfer rule, on every synchronous path (hipfile.file._transfer).

The emulated platform caps each library call at a few bytes, so every
transfer comes back short: reads and writes must ask again for the rest and
stop only when the size is done or a read returns 0 (end of file).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import emu, from_device, random_bytes, to_device

import hipfile
from hipfile import FileHandle

pytestmark = pytest.mark.emulated

N = 1 << 16
CAP = 1000


@pytest.fixture
def capped() -> Iterator[None]:
    emu().set_short_transfer(CAP)
    yield
    emu().set_short_transfer(None)


def transfer(how: str, fh: FileHandle, dev: Any, size: int, foff: int, boff: int) -> int:
    """One request through ``fh.read``/``fh.write`` or a pread/pwrite future."""
    if how in ("read", "write"):
        return int(getattr(fh, how)(dev, size, foff, boff))
    fut = getattr(hipfile, how)(fh, dev, size, foff, buffer_offset=boff, task_size=5000)
    return int(fut.result(timeout=30))


READS = ["read", "pread"]
WRITES = ["write", "pwrite"]


@pytest.fixture
def source(driver: hipfile.Driver, data_file: tuple[Path, np.ndarray],
           capped: None) -> Iterator[tuple[FileHandle, np.ndarray]]:
    """The data file, open, with every transfer capped; and its content."""
    path, data = data_file
    with FileHandle(path) as fh:
        yield fh, data


@pytest.mark.parametrize("read", READS)
def test_short_reads_in_the_middle_are_not_end_of_file(
    read: str, source: tuple[FileHandle, np.ndarray], dev: Any
) -> None:
    fh, data = source
    assert transfer(read, fh, dev, 12345, 100, 10) == 12345
    assert np.array_equal(from_device(dev, 12345, 10), data[100:12445])


@pytest.mark.parametrize("read", READS)
def test_short_reads_stop_at_end_of_file(
    read: str, source: tuple[FileHandle, np.ndarray], dev: Any
) -> None:
    fh, data = source
    to_device(dev, np.zeros(N, dtype=np.uint8))
    assert transfer(read, fh, dev, 20000, N - 7500, 0) == 7500
    assert transfer(read, fh, dev, 100, N + 10, 0) == 0
    host = from_device(dev, 20000)
    assert np.array_equal(host[:7500], data[N - 7500:])
    assert (host[7500:] == 0).all()


@pytest.mark.parametrize("write", WRITES)
def test_short_writes_are_completed(
    write: str, driver: hipfile.Driver, dev: Any, tmp_path: Path, capped: None,
) -> None:
    data = random_bytes(N, seed=4)
    to_device(dev, data)
    out = tmp_path / "out.bin"
    with hipfile.open(out, "w") as fh:
        assert transfer(write, fh, dev, 23456, 3, 50) == 23456
    written = out.read_bytes()
    assert written[:3] == b"\0\0\0"
    assert written[3:] == data[50:50 + 23456].tobytes()

