"""The C ABI: stream-ordered operations on one buffer from several streams at
once, each at its own buffer offset, land at the right places with the right
bytes, with the buffer registered or not, with the streams registered or not.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import numpy as np
import pytest
from _abi_calls import *  # noqa: F403

CHUNK = 16 << 10
CHUNKS = 24
TOTAL = CHUNK * CHUNKS


@pytest.fixture
def three_streams() -> Iterator[list[int]]:
    made = [addr(hip_check(hip.hipStreamCreate())) for _ in range(3)]
    yield made
    for s in made:
        hip_check(hip.hipStreamDestroy(s))


@pytest.fixture
def slots(hostmem: Alloc) -> np.ndarray:
    """(size, file_offset, buffer_offset, bytes) of every chunk, in pinned memory."""
    base = hostmem(CHUNKS * 32)
    return np.ctypeslib.as_array((ctypes.c_int64 * (CHUNKS * 4)).from_address(base)).reshape(
        CHUNKS, 4)


def _submit_all(lib: ctypes.CDLL, fn: str, fh: int, buf: int, slots: np.ndarray,
                order: np.ndarray, streams: list[int]) -> None:
    for i in range(CHUNKS):
        slots[i] = (CHUNK, int(order[i]) * CHUNK, i * CHUNK, -12345)
        b = slots.ctypes.data + 32 * i
        assert code(getattr(lib, fn)(fh, buf, b, b + 8, b + 16, b + 24,
                                     streams[i % len(streams)])) == SUCCESS
    for s in streams:
        sync(s)


@pytest.mark.cufile_differs(
    "cuFile 1.15's compatibility mode segfaults now and then inside "
    "cuFileReadAsync/cuFileWriteAsync when three streams submit in turn "
    "(native frames: libcuda's cuLaunchHostFunc or cuLaunchKernel, called by "
    "libcufile; docs/platform-cuda.md)")
@pytest.mark.parametrize("register_buffer", [False, True], ids=["buffer", "registered-buffer"])
@pytest.mark.parametrize("stream_flags", [None, 0, FIXED_BUF_OFFSET | FIXED_FILE_OFFSET
                                          | FIXED_FILE_SIZE], ids=["plain", "flags0", "fixed"])
def test_chunks_on_three_streams_round_trip(
    lib: ctypes.CDLL, opened: Opened, three_streams: list[int], slots: np.ndarray,
    register_buffer: bool, stream_flags: int | None,
) -> None:
    data = np.random.default_rng(5).integers(0, 256, TOTAL, dtype=np.uint8).tobytes()
    order = np.random.default_rng(1).permutation(CHUNKS)  # chunk i goes to slot order[i]
    fh, buf = opened(bytes(TOTAL), TOTAL)
    put(buf, data)
    if register_buffer:
        assert code(lib.hipFileBufRegister(buf, TOTAL, 0)) == SUCCESS
    if stream_flags is not None:
        for s in three_streams:
            assert code(lib.hipFileStreamRegister(s, stream_flags)) == SUCCESS
    try:
        _submit_all(lib, "hipFileWriteAsync", fh, buf, slots, order, three_streams)
        assert list(slots[:, 3]) == [CHUNK] * CHUNKS
        put(buf, bytes(TOTAL))
        _submit_all(lib, "hipFileReadAsync", fh, buf, slots, order, three_streams)
        assert list(slots[:, 3]) == [CHUNK] * CHUNKS
        got = get(buf, TOTAL)
        bad = [i for i in range(CHUNKS)
               if got[i * CHUNK:(i + 1) * CHUNK] != data[i * CHUNK:(i + 1) * CHUNK]]
        assert bad == []
    finally:
        if stream_flags is not None:
            for s in three_streams:
                assert code(lib.hipFileStreamDeregister(s)) == SUCCESS
        if register_buffer:
            assert code(lib.hipFileBufDeregister(buf)) == SUCCESS
