"""The HIP runtime of the test platform: streams and events."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from _hip_calls import *  # noqa: F403

pytestmark = NEEDS_HIP_PYTHON_10

# ------------------------------------------------------------------ streams


def test_stream_properties() -> None:
    s = ok(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    try:
        assert ok(hip.hipStreamGetFlags(s)) == hip.hipStreamNonBlocking
        assert ok(hip.hipStreamGetDevice(s)) == 0
        assert ok(hip.hipStreamGetDevice(None)) == 0
        ok(hip.hipStreamQuery(s))
    finally:
        ok(hip.hipStreamDestroy(s))
    least, greatest = ok(hip.hipDeviceGetStreamPriorityRange())  # type: ignore[misc]
    assert least >= greatest
    p = ok(hip.hipStreamCreateWithPriority(0, greatest))
    try:
        assert ok(hip.hipStreamGetPriority(p)) == greatest
    finally:
        ok(hip.hipStreamDestroy(p))


def test_host_functions_run_in_stream_order(stream: object, dmem: object, pinned: object) -> None:
    view = host_view(pinned, 64)
    seen: list[tuple[int, int]] = []
    threads: set[int] = set()

    def observe(user_data: int | None) -> None:
        threads.add(threading.get_ident())
        seen.append((user_data or 0, int(view[0])))

    cfunc = HOST_FN(observe)
    for value in (1, 2, 3):
        ok(hip.hipMemsetAsync(dmem, value, 64, stream))
        ok(hip.hipMemcpyAsync(pinned, dmem, 64, K.hipMemcpyDeviceToHost, stream))
        ok(hip.hipLaunchHostFunc(stream, fn_ptr(cfunc), value))
    ok(hip.hipStreamSynchronize(stream))
    # Each host function saw the copy enqueued just before it, and no later one.
    assert seen == [(1, 1), (2, 2), (3, 3)]
    assert threading.get_ident() not in threads


def test_stream_add_callback(stream: object) -> None:
    seen: list[tuple[int | None, int, int | None]] = []
    cb = STREAM_CALLBACK(lambda s, status, ud: seen.append((s, status, ud)))
    ok(hip.hipStreamAddCallback(stream, fn_ptr(cb), 42, 0))
    ok(hip.hipStreamSynchronize(stream))
    assert seen == [(int(stream), 0, 42)]  # type: ignore[call-overload]


def test_blocked_stream_reports_not_ready(stream: object) -> None:
    gate = Gate()
    gate.launch(stream)
    ev = ok(hip.hipEventCreate())
    try:
        ok(hip.hipEventRecord(ev, stream))
        assert gate.entered.wait(WAIT_S)
        assert err(hip.hipStreamQuery(stream)) == E.hipErrorNotReady
        assert err(hip.hipEventQuery(ev)) == E.hipErrorNotReady
        gate.open()
        ok(hip.hipEventSynchronize(ev))
        ok(hip.hipEventQuery(ev))
        ok(hip.hipStreamQuery(stream))
    finally:
        gate.open()
        ok(hip.hipStreamSynchronize(stream))
        ok(hip.hipEventDestroy(ev))


def test_stream_destroy_waits_for_pending_work(dmem: object) -> None:
    s = ok(hip.hipStreamCreate())
    out = np.zeros(4096, np.uint8)
    gate = Gate()
    gate.launch(s)
    ok(hip.hipMemsetAsync(dmem, 5, 4096, s))
    ok(hip.hipMemcpyAsync(out, dmem, 4096, K.hipMemcpyDeviceToHost, s))
    timer = threading.Timer(0.05, gate.open)
    timer.start()
    ok(hip.hipStreamDestroy(s))
    timer.join()
    assert (out == 5).all()


# ------------------------------------------------------------------- events


def test_event_elapsed_time(stream: object) -> None:
    start = ok(hip.hipEventCreate())
    stop = ok(hip.hipEventCreate())
    sleeper = HOST_FN(lambda _ud: time.sleep(0.03))
    try:
        # Never recorded: query and synchronize succeed, elapsed time fails.
        ok(hip.hipEventQuery(start))
        ok(hip.hipEventSynchronize(start))
        assert err(hip.hipEventElapsedTime(start, stop)) == E.hipErrorInvalidHandle
        ok(hip.hipEventRecord(start, stream))
        ok(hip.hipLaunchHostFunc(stream, fn_ptr(sleeper), None))
        ok(hip.hipEventRecord(stop, stream))
        ok(hip.hipEventSynchronize(stop))
        ms = ok(hip.hipEventElapsedTime(start, stop))
        assert 25.0 <= ms < 5000.0  # type: ignore[operator]
        assert ok(hip.hipEventElapsedTime(start, start)) == 0.0
    finally:
        ok(hip.hipEventDestroy(start))
        ok(hip.hipEventDestroy(stop))


def test_elapsed_time_not_ready_and_disable_timing(stream: object) -> None:
    a = ok(hip.hipEventCreate())
    b = ok(hip.hipEventCreate())
    untimed = ok(hip.hipEventCreateWithFlags(hip.hipEventDisableTiming))
    gate = Gate()
    try:
        ok(hip.hipEventRecord(a, stream))
        gate.launch(stream)
        ok(hip.hipEventRecord(b, stream))
        ok(hip.hipEventRecord(untimed, stream))
        assert err(hip.hipEventElapsedTime(a, b)) == E.hipErrorNotReady
        gate.open()
        ok(hip.hipStreamSynchronize(stream))
        ok(hip.hipEventElapsedTime(a, b))
        assert err(hip.hipEventElapsedTime(a, untimed)) == E.hipErrorInvalidHandle
    finally:
        gate.open()
        ok(hip.hipStreamSynchronize(stream))
        for ev in (a, b, untimed):
            ok(hip.hipEventDestroy(ev))


def test_event_on_null_stream_waits_for_blocking_streams(stream: object) -> None:
    nonblocking = ok(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    ev = ok(hip.hipEventCreate())
    gate = Gate()
    try:
        # Work on a non-blocking stream does not hold back the null stream...
        gate.launch(nonblocking)
        assert gate.entered.wait(WAIT_S)
        ok(hip.hipEventRecord(ev, None))
        ok(hip.hipEventSynchronize(ev))
        gate.open()
        ok(hip.hipStreamSynchronize(nonblocking))
        # ...but work on a blocking stream does.
        gate2 = Gate()
        gate2.launch(stream)
        ok(hip.hipEventRecord(ev, None))
        assert gate2.entered.wait(WAIT_S)
        time.sleep(0.02)
        assert err(hip.hipEventQuery(ev)) == E.hipErrorNotReady
        gate2.open()
        ok(hip.hipEventSynchronize(ev))
    finally:
        gate.open()
        ok(hip.hipStreamDestroy(nonblocking))
        ok(hip.hipEventDestroy(ev))


@pytest.mark.emulated  # relies on the emulated runtime's extras or timing
def test_blocking_stream_waits_for_null_stream(stream: object, dmem: object) -> None:
    gate = Gate()
    gate.launch(None)
    ok(hip.hipMemsetAsync(dmem, 3, 4096, None))
    out = np.zeros(4096, np.uint8)
    ok(hip.hipMemcpyAsync(out, dmem, 4096, K.hipMemcpyDeviceToHost, stream))
    assert gate.entered.wait(WAIT_S)
    time.sleep(0.02)
    assert err(hip.hipStreamQuery(stream)) == E.hipErrorNotReady
    gate.open()
    ok(hip.hipStreamSynchronize(stream))
    assert (out == 3).all()


@pytest.mark.emulated  # relies on the emulated runtime's extras or timing
def test_stream_wait_event_across_streams(stream: object, dmem: object) -> None:
    other = ok(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
    ev = ok(hip.hipEventCreateWithFlags(hip.hipEventDisableTiming))
    never = ok(hip.hipEventCreate())
    gate = Gate()
    out = np.zeros(4096, np.uint8)
    try:
        gate.launch(stream)
        ok(hip.hipMemsetAsync(dmem, 7, 4096, stream))
        ok(hip.hipEventRecord(ev, stream))
        ok(hip.hipStreamWaitEvent(other, never, 0))  # never recorded: no wait
        ok(hip.hipStreamWaitEvent(other, ev, 0))
        ok(hip.hipMemcpyAsync(out, dmem, 4096, K.hipMemcpyDeviceToHost, other))
        assert gate.entered.wait(WAIT_S)
        time.sleep(0.02)
        assert err(hip.hipStreamQuery(other)) == E.hipErrorNotReady
        assert not out.any()
        gate.open()
        ok(hip.hipStreamSynchronize(other))
        assert (out == 7).all()
    finally:
        gate.open()
        ok(hip.hipStreamDestroy(other))
        ok(hip.hipEventDestroy(ev))
        ok(hip.hipEventDestroy(never))


def test_synchronous_copy_waits_for_blocking_streams(stream: object, dmem: object) -> None:
    gate = Gate()
    gate.launch(stream)
    ok(hip.hipMemsetAsync(dmem, 9, 4096, stream))
    out = np.zeros(4096, np.uint8)
    timer = threading.Timer(0.05, gate.open)
    timer.start()
    ok(hip.hipMemcpy(out, dmem, 4096, K.hipMemcpyDeviceToHost))
    timer.join()
    assert (out == 9).all()
