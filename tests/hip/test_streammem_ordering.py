"""Stream memory operations: ordering with other work on the stream, and release."""

from __future__ import annotations

import ctypes
import threading
import time

from _streammem_calls import *  # noqa: F403

pytestmark = NEEDS_HIP_PYTHON_10


# ------------------------------------------------------- ordering and release


def test_work_before_the_wait_runs_and_work_after_waits(
    stream: object, stream2: object, mapped: Mapped
) -> None:
    flag_host, flag_dev = mapped.word(0)
    before_host, before_dev = mapped.word(1)
    after_host, after_dev = mapped.word(2)
    other_host, other_dev = mapped.word(3)
    assert write_value(32, stream, before_dev, 11) == E.hipSuccess
    assert wait_value(32, stream, flag_dev, 1, GTE, ALL32) == E.hipSuccess
    assert write_value(32, stream, after_dev, 22) == E.hipSuccess
    event = ok(hip.hipEventCreate())
    try:
        ok(hip.hipEventRecord(event, stream))
        # Another stream is not held up by the blocked one.
        assert write_value(32, stream2, other_dev, 33) == E.hipSuccess
        assert until(lambda: load(other_host) == 33)
        assert until(lambda: load(before_host) == 11)
        assert stays_blocked(stream)
        assert load(after_host) == 0
        assert err(hip.hipEventQuery(event)) == E.hipErrorNotReady
    finally:
        store(flag_host, 1, 32)
    assert until(lambda: idle(stream))
    assert load(after_host) == 22
    ok(hip.hipEventSynchronize(event))
    ok(hip.hipEventDestroy(event))


def test_write_value_on_another_stream_releases_a_wait(
    stream: object, stream2: object, mapped: Mapped
) -> None:
    _, marker_dev = mapped.word(2)
    marker_host, _ = mapped.word(2)
    flag = ok(hip.hipExtMallocWithFlags(8, SIGNAL))
    try:
        assert wait_value(64, stream, addr(flag), 3, EQ, ALL64) == E.hipSuccess
        assert write_value(32, stream, marker_dev, 1) == E.hipSuccess
        assert stays_blocked(stream)
        assert write_value(64, stream2, addr(flag), 2) == E.hipSuccess
        ok(hip.hipStreamSynchronize(stream2))
        assert stays_blocked(stream)
        assert write_value(64, stream2, addr(flag), 3) == E.hipSuccess
        assert until(lambda: idle(stream))
        assert load(marker_host) == 1
        out = (ctypes.c_uint64 * 1)()
        ok(hip.hipMemcpy(out, flag, 8, K.hipMemcpyDeviceToHost))
        assert out[0] == 3
    finally:
        ok(hip.hipStreamSynchronize(stream2))
        if not idle(stream):  # release whatever the test left blocked
            ok(hip.hipStreamWriteValue64(stream2, flag, 3, 0))
            assert until(lambda: idle(stream))
        free_settled(hip.hipFree, flag)


def test_write_value_orders_after_earlier_work(stream: object, mapped: Mapped) -> None:
    data_host, data_dev = mapped.word(4)
    flag_host, flag_dev = mapped.word(0)
    src = (ctypes.c_uint32 * 1)(0xC0FFEE)
    ok(hip.hipMemcpyAsync(data_dev, src, 4, K.hipMemcpyHostToDevice, stream))
    assert write_value(32, stream, flag_dev, 1) == E.hipSuccess
    assert until(lambda: load(flag_host) == 1)
    assert load(data_host) == 0xC0FFEE
    ok(hip.hipStreamSynchronize(stream))


def test_write_value64_writes_all_bits(stream: object, mapped: Mapped) -> None:
    host, dev = mapped.word(1, 64)
    assert write_value(64, stream, dev, 0x0123456789ABCDEF) == E.hipSuccess
    ok(hip.hipStreamSynchronize(stream))
    assert load(host, 64) == 0x0123456789ABCDEF
    assert write_value(32, stream, dev, 0xFFFFFFFF) == E.hipSuccess
    ok(hip.hipStreamSynchronize(stream))
    assert load(host, 64) == 0x01234567FFFFFFFF  # the 32-bit write touches 4 bytes


def test_synchronize_waits_for_the_release(stream: object, mapped: Mapped) -> None:
    host, dev = mapped.word(0)
    assert wait_value(32, stream, dev, 1, EQ, ALL32) == E.hipSuccess
    result: list[E] = []
    t = threading.Thread(target=lambda: result.append(err(hip.hipStreamSynchronize(stream))))
    t.start()
    try:
        time.sleep(BLOCKED_S)
        assert t.is_alive() and not result
    finally:
        store(host, 1, 32)
        t.join(WAIT_S)
    assert not t.is_alive()
    assert result == [E.hipSuccess]


def test_null_stream_wait(mapped: Mapped) -> None:
    host, dev = mapped.word(0)
    after_host, after_dev = mapped.word(1)
    assert wait_value(32, None, dev, 1, EQ, ALL32) == E.hipSuccess
    assert write_value(32, None, after_dev, 5) == E.hipSuccess
    try:
        time.sleep(BLOCKED_S)
        assert load(after_host) == 0
    finally:
        store(host, 1, 32)
    assert until(lambda: load(after_host) == 5)
    ok(hip.hipStreamSynchronize(None))


def test_destroy_a_stream_blocked_in_a_wait(mapped: Mapped) -> None:
    """hipStreamDestroy returns; the queued work runs once the wait is met."""
    host, dev = mapped.word(0)
    after_host, after_dev = mapped.word(1)
    s = ok(hip.hipStreamCreate())
    assert wait_value(32, s, dev, 1, EQ, ALL32) == E.hipSuccess
    assert write_value(32, s, after_dev, 9) == E.hipSuccess
    result: list[E] = []
    t = threading.Thread(target=lambda: result.append(err(hip.hipStreamDestroy(s))))
    t.start()
    t.join(WAIT_S)
    try:
        assert not t.is_alive(), "hipStreamDestroy hung on a stream blocked in a wait"
        assert result == [E.hipSuccess]
        assert load(after_host) == 0
    finally:
        store(host, 1, 32)
        t.join(WAIT_S)
    assert until(lambda: load(after_host) == 9)
    ok(hip.hipDeviceSynchronize())
