"""``wait_slices``: the one interruptible wait loop (``_wait.wait_sliced``)
as the Python waits use it (``wait_event``, a close's ``drain``, the batch
waits): slices never longer than asked, the deadline honoured, Ctrl-C and
the slice's own exceptions raised unchanged."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from hipfile._interop import Deadline, wait_event, wait_slices
from hipfile._lifetime import drain


def test_true_once_the_slice_says_the_wait_is_over() -> None:
    calls: list[float] = []

    def slice_(seconds: float) -> bool:
        calls.append(seconds)
        return len(calls) == 3

    assert wait_slices(slice_, Deadline(None), 0.01) is True
    assert len(calls) == 3
    assert all(0 <= s <= 0.01 for s in calls)


def test_false_once_the_deadline_passed_in_slices_no_longer_than_asked() -> None:
    calls: list[float] = []

    def slice_(seconds: float) -> bool:
        calls.append(seconds)
        time.sleep(seconds)
        return False

    start = time.monotonic()
    assert wait_slices(slice_, Deadline(0.05), 0.01) is False
    assert time.monotonic() - start >= 0.05
    assert len(calls) >= 2 and all(0 <= s <= 0.01 for s in calls)


def test_a_zero_deadline_looks_once() -> None:
    calls: list[float] = []
    assert wait_slices(lambda s: calls.append(s), Deadline(0), 0.01) is False
    assert calls == [0.0]


def test_the_slices_exception_propagates_unchanged() -> None:
    err = OSError(5, "from the slice")

    def slice_(seconds: float) -> bool:
        raise err

    with pytest.raises(OSError) as info:
        wait_slices(slice_, Deadline(None), 0.01)
    assert info.value is err


def test_a_negative_slice_is_refused() -> None:
    with pytest.raises(ValueError, match="slice_s must be >= 0"):
        wait_slices(lambda s: True, Deadline(None), -1.0)


def test_ctrl_c_ends_an_endless_wait() -> None:
    timer = threading.Timer(0.1, signal.raise_signal, args=(signal.SIGINT,))
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            wait_event(threading.Event(), None)
    finally:
        timer.cancel()
    assert time.monotonic() - start < 2.0


def test_drain_gives_up_on_held_operations_after_held_timeout() -> None:
    rounds: list[float | None] = []

    def streamed(left: float | None) -> int:
        rounds.append(left)
        return 0

    start = time.monotonic()
    assert drain(streamed, lambda: 1, None, held_timeout=0.05) is False
    assert 0.05 <= time.monotonic() - start < 2.0
    assert rounds and all(left is None for left in rounds)


def test_drain_ends_at_its_timeout_while_streamed_work_is_left() -> None:
    start = time.monotonic()
    assert drain(lambda left: 1, lambda: 0, 0.05) is False
    assert 0.05 <= time.monotonic() - start < 2.0


def test_drain_is_true_once_nothing_is_left() -> None:
    left = iter([2, 1, 0])
    assert drain(lambda _: next(left), lambda: 0, None) is True
