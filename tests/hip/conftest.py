"""Fixtures of the HIP runtime tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _hip_calls import PLATFORM, emu_counters, hip, ok
from _streammem_calls import Mapped, free_settled


@pytest.fixture
def stream() -> Iterator[object]:
    s = ok(hip.hipStreamCreate())
    yield s
    ok(hip.hipStreamDestroy(s))


@pytest.fixture
def dmem() -> Iterator[object]:
    d = ok(hip.hipMalloc(4096))
    yield d
    ok(hip.hipFree(d))


@pytest.fixture
def pinned() -> Iterator[object]:
    p = ok(hip.hipHostMalloc(4096, 0))
    yield p
    ok(hip.hipHostFree(p))


@pytest.fixture(autouse=True)
def _clean_last_error() -> Iterator[None]:
    hip.hipGetLastError()
    yield
    hip.hipGetLastError()


@pytest.fixture
def counters_balanced() -> Iterator[None]:
    """On the emulated platform, a test must give back what it took."""
    if PLATFORM != "emulated":
        yield
        return
    before = emu_counters()
    yield
    assert emu_counters() == before


@pytest.fixture
def mapped() -> Iterator[Mapped]:
    """Mapped pinned host memory for stream waits and writes."""
    m = Mapped()
    yield m
    free_settled(hip.hipHostFree, m.ptr)


@pytest.fixture
def stream2() -> Iterator[object]:
    s = ok(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    yield s
    ok(hip.hipStreamDestroy(s))
