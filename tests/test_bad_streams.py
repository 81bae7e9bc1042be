"""A stream handle that names no stream (a stray int, a ``__cuda_stream__``
that returns a number no stream has) is reported as such, by every path
that enqueues on the caller's stream: InvalidStreamError, a
HipRuntimeError (HIP's code kept) and a ValueError, whose message says the
stream is not a valid stream; nothing is left behind."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hipfile
from hipfile import errors

N = 1 << 14

# HIP checks a stream handle against the streams it made; CUDA takes the
# handle as a pointer to its stream and reads it, so a bogus one crashes the
# process there (undefined behaviour, nothing a caller can be told).
pytestmark = pytest.mark.skipif(
    hipfile.platforms.active() == "cuda",
    reason="CUDA cannot tell a bogus stream handle: it dereferences it")


class ForeignStream:
    """An object of the ``__cuda_stream__`` protocol (version 0) naming a
    handle."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


BOGUS = [12345, ForeignStream(999)]
IDS = ["int", "cuda_stream"]


def _handle(stream: Any) -> int:
    return stream if isinstance(stream, int) else stream.handle


def _check(exc: BaseException, stream: Any) -> None:
    assert isinstance(exc, errors.InvalidStreamError), repr(exc)
    assert isinstance(exc, errors.HipRuntimeError) and isinstance(exc, ValueError)
    assert exc.hip_err in (400, 709)
    assert f"the stream {_handle(stream):#x} is not a valid stream" in str(exc)
    assert "hipErrorContextIsDestroyed" in str(exc) or "hipErrorInvalid" in str(exc)


@pytest.mark.parametrize("stream", BOGUS, ids=IDS)
@pytest.mark.parametrize("call", ["pread_async", "pwrite_async", "pread_async_ranges",
                                  "pread_async_scatter", "pread_async_addresses"])
def test_engine_paths_say_the_stream_is_not_valid(
        driver: hipfile.Driver, data_file: tuple[Path, np.ndarray], dev: Any, stream: Any,
        call: str) -> None:
    path, _ = data_file
    with hipfile.open(path, "r+b") as fh, hipfile.Buffer(dev, N) as buf:
        with pytest.raises(errors.HipRuntimeError) as info:
            if call in ("pread_async", "pwrite_async"):
                getattr(fh, call)(buf, 4096, 0, stream=stream).wait()
            elif call == "pread_async_addresses":
                hipfile.pread_async_addresses([fh], [(0, 0, int(dev), 4096)], stream).wait()
            else:
                handles = getattr(fh, call)(buf, [(4096, 0, 0), (4096, 8192, 4096)], stream)
                for h in handles if isinstance(handles, list) else [handles]:
                    h.wait()
        _check(info.value, stream)
        # nothing is held: the buffer deregisters and the file closes (below)
        assert buf.pending == 0


@pytest.mark.parametrize("stream", BOGUS, ids=IDS)
def test_read_async_says_the_stream_is_not_valid(
        driver: hipfile.Driver, data_file: tuple[Path, np.ndarray], dev: Any,
        stream: Any) -> None:
    if not hipfile.supports_async():
        pytest.skip("this libhipfile has no stream-ordered I/O")
    path, _ = data_file
    with hipfile.FileHandle(path) as fh, hipfile.Buffer(dev, N) as buf:
        with pytest.raises(hipfile.HipFileException) as info:
            fh.read_async(buf, 4096, 0, 0, hipfile.Stream(stream)).wait()
        if not isinstance(info.value, errors.HipRuntimeError):
            pytest.skip(f"this libhipfile refuses the stream itself: {info.value}")
        _check(info.value, stream)
        assert buf.pending == 0


def test_invalid_stream_error_pickles_and_is_public() -> None:
    exc = errors.InvalidStreamError(hip_err=709, func="hipStreamWriteValue32",
                                    detail="the stream 0x1 is not a valid stream")
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is errors.InvalidStreamError and str(back) == str(exc)
    assert hipfile.InvalidStreamError is errors.InvalidStreamError
    assert "InvalidStreamError" in hipfile.__all__


def test_a_failure_on_the_null_stream_is_not_called_a_bad_stream() -> None:
    """Only a handle other than the null stream is said to name no stream."""
    from hipfile._lib._errors import stream_error

    assert type(stream_error(709, "hipStreamQuery", 0)) is errors.HipRuntimeError
    assert type(stream_error(1, "hipStreamQuery", 0x1234)) is errors.HipRuntimeError
    assert type(stream_error(709, "hipStreamQuery", 0x1234)) is errors.InvalidStreamError
