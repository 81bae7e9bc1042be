"""Fixtures of the C ABI tests: every resource is released by the fixture
that made it. The library is the active platform's (``_abi_calls.load``)."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _abi_calls import (
    SUCCESS,
    Alloc,
    File8k,
    Files,
    Opened,
    OpenedFd,
    P,
    addr,
    bool_param,
    code,
    counters,
    hip,
    hip_check,
    load,
    pattern,
    register,
    size_param,
)


@pytest.fixture
def lib() -> ctypes.CDLL:
    return load()


@pytest.fixture
def driver(lib: ctypes.CDLL) -> Iterator[None]:
    """The driver opened through the C ABI itself (not through the shim)."""
    assert code(lib.hipFileDriverOpen()) == SUCCESS
    yield
    assert code(lib.hipFileDriverClose()) == SUCCESS


@pytest.fixture
def from_zero(lib: ctypes.CDLL) -> Iterator[None]:
    """Run with the driver's use count at 0, and give the count back after."""
    live = counters()
    if live["handles"] or live["buffers"] or live["batches"]:
        pytest.skip("registrations of other tests are alive; the count cannot drop to 0")
    before = lib.hipFileUseCount()
    for _ in range(before):
        assert code(lib.hipFileDriverClose()) == SUCCESS
    assert lib.hipFileUseCount() == 0
    yield
    while lib.hipFileUseCount() > 0:
        assert code(lib.hipFileDriverClose()) == SUCCESS
    for _ in range(before):
        assert code(lib.hipFileDriverOpen()) == SUCCESS


def _each(make: Callable[[int], int], release: Callable[[int], object]) -> Iterator[Alloc]:
    """A fixture's ``make(n)``, with everything it made released at teardown."""
    made: list[int] = []

    def one(n: int) -> int:
        made.append(make(n))
        return made[-1]

    yield one
    for thing in made:
        release(thing)


@pytest.fixture
def devmem() -> Iterator[Alloc]:
    """devmem(size) -> the address of new device memory."""
    yield from _each(lambda n: addr(hip_check(hip.hipMalloc(n))),
                     lambda p: hip_check(hip.hipFree(p)))


@pytest.fixture
def hostmem() -> Iterator[Alloc]:
    """hostmem(size) -> the address of new pinned host memory."""
    yield from _each(lambda n: addr(hip_check(hip.hipHostMalloc(n, 0))),
                     lambda p: hip_check(hip.hipHostFree(p)))


@pytest.fixture
def stream() -> Iterator[int]:
    s = hip_check(hip.hipStreamCreate())
    yield addr(s)
    hip_check(hip.hipStreamDestroy(s))


@pytest.fixture
def files(tmp_path: Path) -> Iterator[Files]:
    """open_file(content=b"", flags=os.O_RDWR) -> fd of a new file in tmp_path."""
    fds: list[int] = []

    def open_file(content: bytes = b"", flags: int = os.O_RDWR, name: str | None = None) -> int:
        path = tmp_path / (name or f"f{len(fds)}")
        path.write_bytes(content)
        fd = os.open(path, flags)
        fds.append(fd)
        return fd

    yield open_file
    for fd in fds:
        os.close(fd)


@pytest.fixture
def handles(lib: ctypes.CDLL) -> Iterator[Alloc]:
    """register_fd(fd) -> a registered handle, deregistered at teardown."""

    def register_fd(fd: int) -> int:
        rc, fh = register(lib, fd)
        assert rc == SUCCESS
        return fh

    yield from _each(register_fd, lib.hipFileHandleDeregister)


@pytest.fixture
def batches(lib: ctypes.CDLL) -> Iterator[Alloc]:
    """setup(max_nr) -> a batch handle, destroyed at teardown."""

    def setup(max_nr: int) -> int:
        batch = P()
        assert code(lib.hipFileBatchIOSetUp(ctypes.byref(batch), max_nr)) == SUCCESS
        return batch.value or 0

    yield from _each(setup, lib.hipFileBatchIODestroy)


@pytest.fixture
def saved_config(lib: ctypes.CDLL, driver: None) -> Iterator[None]:
    """Put every property and parameter back as it was (skips, naming the
    function, where the library does not implement the parameter getters)."""
    from _capability import skip_reason

    for func in ("hipFileGetParameterSizeT", "hipFileGetParameterBool"):
        reason = skip_reason(func)
        if reason:
            pytest.skip(reason)
    sizes = {p: size_param(lib, p) for p in range(12)}
    bools = {p: bool_param(lib, p) for p in range(12)}
    strings = {}
    for p in range(3):
        text = ctypes.create_string_buffer(2048)
        assert code(lib.hipFileGetParameterString(p, text, 2048)) == SUCCESS
        strings[p] = text.value
    yield
    for p, size in sizes.items():
        assert code(lib.hipFileSetParameterSizeT(p, size)) == SUCCESS
    for p, flag in bools.items():
        assert code(lib.hipFileSetParameterBool(p, flag)) == SUCCESS
    for p, value in strings.items():
        assert code(lib.hipFileSetParameterString(p, value)) == SUCCESS


@pytest.fixture
def opened_fd(driver: None, files: Files, handles: Alloc, devmem: Alloc) -> OpenedFd:
    """opened_fd(content, size) -> (fd, fh, buf): with the driver open, a new
    file holding ``content``, its descriptor registered, and ``size`` bytes of
    device memory."""

    def open_(content: bytes, size: int) -> tuple[int, int, int]:
        fd = files(content)
        return fd, handles(fd), devmem(size)

    return open_


@pytest.fixture
def opened(opened_fd: OpenedFd) -> Opened:
    """opened(content, size) -> (fh, buf): :func:`opened_fd` without the descriptor."""

    def open_(content: bytes, size: int) -> tuple[int, int]:
        _, fh, buf = opened_fd(content, size)
        return fh, buf

    return open_


@pytest.fixture
def file_8k(opened: Opened) -> File8k:
    """``(data, fh, buf)``: 8 KiB of :func:`pattern` in a registered file
    (the driver open), and 8 KiB of device memory."""
    data = pattern(8192)
    fh, buf = opened(data, 8192)
    return data, fh, buf
