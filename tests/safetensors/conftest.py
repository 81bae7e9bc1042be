"""Fixtures of the safetensors tests."""

from __future__ import annotations

from typing import Any

import pytest

import hipfile


@pytest.fixture
def engine_submissions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of handles of each ``FileHandle.pread_async_ranges`` call
    (a submission to the engine) made during the test."""
    calls: list[int] = []
    real = hipfile.FileHandle.pread_async_ranges

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        hs = real(self, *args, **kwargs)
        calls.append(len(hs))
        return hs

    monkeypatch.setattr(hipfile.FileHandle, "pread_async_ranges", counting)
    return calls
