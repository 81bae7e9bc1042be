"""Fixtures of the stream memory operation tests.

Test modules at the top of ``tests/`` import ``PLATFORM`` from ``conftest``, a module
name every conftest.py shares (pytest keeps the last one imported): this one offers
the same value as ``tests/conftest.py``, as ``tests/hip/conftest.py`` does.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _streammem_calls import PLATFORM as PLATFORM
from _streammem_calls import (
    Mapped,
    free_settled,
    hip,
    ok,
)


@pytest.fixture
def mapped() -> Iterator[Mapped]:
    m = Mapped()
    yield m
    free_settled(hip.hipHostFree, m.ptr)


@pytest.fixture
def stream() -> Iterator[object]:
    s = ok(hip.hipStreamCreate())
    yield s
    ok(hip.hipStreamDestroy(s))


@pytest.fixture
def stream2() -> Iterator[object]:
    s = ok(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    yield s
    ok(hip.hipStreamDestroy(s))


@pytest.fixture(autouse=True)
def _clean_last_error() -> Iterator[None]:
    hip.hipGetLastError()
    yield
    hip.hipGetLastError()
