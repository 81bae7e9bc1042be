"""The messages a new user meets on a first run: each names the actual
mistake and what to do instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _util import hip_stream

import hipfile
from hipfile import platforms

N = 1 << 16


@pytest.fixture
def fh(driver: hipfile.Driver, data_path: Path) -> Any:
    with hipfile.open(data_path) as f:
        yield f


def test_read_none_says_the_buffer_is_none(fh: hipfile.FileHandle) -> None:
    for call in (lambda: fh.read(None), lambda: fh.pread(None),
                 lambda: fh.read_async(None, 16, 0, 0, 0)):
        with pytest.raises(TypeError, match="the buffer is None") as info:
            call()
        assert "bare address" not in str(info.value)


def test_int_address_with_a_size_says_what_size_is(fh: hipfile.FileHandle, dev: Any) -> None:
    with pytest.raises(TypeError, match="size argument is the transfer's size") as info:
        fh.read(int(dev), 4096)
    assert "hipfile.Buffer(ptr, length)" in str(info.value)
    # the suggested spelling works
    assert fh.read(hipfile.Buffer(int(dev), N), 4096) == 4096


@pytest.mark.parametrize("bad", [
    {"size": 16, "file_offset": 0, "buffer_offset": 0}, "abc", (16, 0), [16, 0, 0, 0],
])
def test_engine_range_of_the_wrong_shape(fh: hipfile.FileHandle, dev: Any, bad: Any) -> None:
    with pytest.raises(TypeError, match=r"each range must be a \(size, file_offset, "
                                        r"buffer_offset\) tuple") as info:
        fh.pread_async_ranges(dev, [bad])
    assert "file_offset must be an int" not in str(info.value)


def test_numpy_array_to_the_engine_is_named_as_such(fh: hipfile.FileHandle) -> None:
    with pytest.raises(ValueError, match=r"ndarray is in host \(CPU\) memory") as info:
        fh.pread_async_ranges(np.zeros(16, np.uint8), [(16, 0, 0)])
    assert "DLPack tensor" not in str(info.value)
    assert "FileHandle.read" in str(info.value)  # where host buffers are accepted


@pytest.mark.skipif(platforms.active() == "cuda",
                    reason="CUDA's cudaStreamQuery does not look handles up")
def test_wait_on_a_made_up_stream_is_refused(fh: hipfile.FileHandle, dev: Any) -> None:
    with hip_stream() as s:
        (h,) = fh.pread_async_ranges(dev, [(4096, 0, 0)], s)
        with pytest.raises(ValueError, match="0x3039 is not a stream HIP knows"):
            h.wait_on(12345)
        h.wait_on(int(s))      # a real handle as an int is accepted
        h.wait_on(0)           # and the null stream
        h.wait_on(s)
        assert h.wait() == 4096


def test_help_is_an_overview() -> None:
    import pydoc

    text = pydoc.render_doc(hipfile, renderer=pydoc.plaintext)
    assert len(text.splitlines()) < 600
    assert "HIPFILE_PLATFORM=emulated" in text
    assert "help(hipfile.<name>)" in text
    # dir() and completion still list every name
    assert {"FileHandle", "OpError", "HipFileException", "open"} <= set(dir(hipfile))
    assert set(hipfile.__all__) <= set(dir(hipfile))
