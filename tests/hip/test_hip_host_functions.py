"""The HIP runtime of the test platform: host functions and stream callbacks.

HIP runs every host function (``hipLaunchHostFunc``) and stream callback
(``hipStreamAddCallback``) of a process on one runtime thread, one at a time,
in the order the streams reach them: a host function that blocks holds back
the host functions of every other stream, while the streams' other work goes
on. The emulated runtime promises the same (CUDA only says that callbacks of
different streams *may* be serialised, so these tests are marked
``emulated``). Every wait here is bounded and every gate is opened in the end.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator

import pytest
from _hip_calls import *  # noqa: F403
from _streammem_calls import GTE, Mapped, store, until, wait_value

pytestmark = [NEEDS_HIP_PYTHON_10, pytest.mark.emulated]

HELD_S = 0.2  # how long held-back work must stay held back to count as held


@pytest.fixture
def streams() -> Iterator[list[object]]:
    """Four non-blocking streams (no implicit waits on the null stream)."""
    made = [ok(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking)) for _ in range(4)]
    yield made
    for s in made:
        ok(hip.hipStreamDestroy(s))


class Recorder:
    """Host functions that append their label and thread to one list."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.threads: list[int] = []
        self.lock = threading.Lock()
        self.cfunc = HOST_FN(self._run)
        self.cb = STREAM_CALLBACK(lambda _s, _status, ud: self._run(ud))
        self.labels: dict[int, str] = {}

    def _run(self, user_data: int | None) -> None:
        with self.lock:
            self.seen.append(self.labels[user_data or 0])
            self.threads.append(threading.get_ident())

    def key(self, label: str) -> int:
        """The user data that makes a host function record ``label``."""
        key = len(self.labels) + 1
        self.labels[key] = label
        return key

    def launch(self, stream: object, label: str) -> None:
        ok(hip.hipLaunchHostFunc(stream, fn_ptr(self.cfunc), self.key(label)))

    def add_callback(self, stream: object, label: str) -> None:
        ok(hip.hipStreamAddCallback(stream, fn_ptr(self.cb), self.key(label), 0))


class Held:
    """A host function on a stream held on a flag word until :meth:`reach`:
    the stream waits for the flag, passes an event, then reaches the host
    function. The runtime hands a host function to the host-function thread
    as soon as its stream gets to it, so once the event is reached (after
    the flag is set) the function has been queued there."""

    def __init__(self, rec: Recorder, stream: object, label: str, flag: tuple[int, int]) -> None:
        self.host, dev = flag
        assert wait_value(32, stream, dev, 1, GTE, 0xFFFFFFFF) == E.hipSuccess
        self.event = ok(hip.hipEventCreate())
        ok(hip.hipEventRecord(self.event, stream))
        rec.launch(stream, label)

    def reach(self) -> None:
        store(self.host, 1, 32)
        ok(hip.hipEventSynchronize(self.event))

    def close(self) -> None:
        store(self.host, 1, 32)  # never leave a stream blocked
        ok(hip.hipEventSynchronize(self.event))
        ok(hip.hipEventDestroy(self.event))


def test_blocked_host_function_holds_back_other_streams(
    streams: list[object], rec: Recorder
) -> None:
    a, b = streams[:2]
    gate = Gate()
    gate.launch(a)
    try:
        assert gate.entered.wait(WAIT_S)
        rec.launch(b, "b")
        rec.add_callback(b, "b-callback")
        # b's functions wait for a's, though b has nothing else to wait for.
        assert not until(lambda: bool(rec.seen), HELD_S)
        assert err(hip.hipStreamQuery(b)) == E.hipErrorNotReady
    finally:
        gate.open()
    ok(hip.hipStreamSynchronize(b))
    assert rec.seen == ["b", "b-callback"]


def test_host_functions_of_every_stream_run_on_one_thread(
    streams: list[object], rec: Recorder
) -> None:
    """All complete, each stream's in its own order, all on one thread that
    is not the caller's (callbacks and the null stream's included)."""
    rounds = 50
    for r in range(rounds):
        for k, s in enumerate(streams):
            rec.launch(s, f"{k}:{r}")
            rec.add_callback(s, f"{k}:{r}cb")
    rec.launch(None, "null")
    ok(hip.hipDeviceSynchronize())
    assert len(rec.seen) == 2 * rounds * len(streams) + 1 and "null" in rec.seen
    for k in range(len(streams)):
        mine = [x for x in rec.seen if x.startswith(f"{k}:")]
        assert mine == [f"{k}:{r}{cb}" for r in range(rounds) for cb in ("", "cb")]
    assert len(set(rec.threads)) == 1
    assert threading.get_ident() not in rec.threads


def test_host_functions_run_in_the_order_streams_reach_them(
    streams: list[object], mapped: Mapped, rec: Recorder
) -> None:
    a, b, c, d = streams
    gate = Gate()
    gate.launch(a)
    held: list[Held] = []
    try:
        assert gate.entered.wait(WAIT_S)
        # Enqueued b, d, c; reached d, c, b.
        held = [Held(rec, s, label, mapped.word(i))
                for i, (s, label) in enumerate(((b, "b"), (d, "d"), (c, "c")))]
        for i in (1, 2, 0):
            held[i].reach()
        rec.launch(a, "a")  # behind the gate on its own stream
        assert not until(lambda: bool(rec.seen), HELD_S)
    finally:
        gate.open()
        for h in held:
            h.close()
    for s in streams:
        ok(hip.hipStreamSynchronize(s))
    assert rec.seen == ["d", "c", "b", "a"]


def test_stream_work_waits_for_its_host_function_other_streams_go_on(
    streams: list[object], pinned: object
) -> None:
    a, b = streams[:2]
    view = host_view(pinned, 64)
    view[:] = 0
    gate = Gate()
    gate.launch(a)
    try:
        assert gate.entered.wait(WAIT_S)
        ok(hip.hipMemsetAsync(pinned, 1, 32, a))           # behind a's host function
        ok(hip.hipMemsetAsync(int(pinned) + 32, 2, 32, b))  # not held back: no host function
        ok(hip.hipStreamSynchronize(b))
        assert (view[32:] == 2).all()
        assert not until(lambda: bool(view[:32].any()), HELD_S)
        assert err(hip.hipStreamQuery(a)) == E.hipErrorNotReady
    finally:
        gate.open()
    ok(hip.hipStreamSynchronize(a))
    assert (view[:32] == 1).all()


def test_host_function_thread_refuses_calls_that_wait(
    streams: list[object], mapped: Mapped, rec: Recorder
) -> None:
    """From the host-function thread, waiting for a stream whose host function
    is queued behind the running one would never return: such calls are
    refused, while calls that only enqueue work succeed."""
    lib = runtime_library()
    lib.hipStreamSynchronize.argtypes = [ctypes.c_void_p]
    lib.hipStreamSynchronize.restype = ctypes.c_int
    lib.hipDeviceSynchronize.restype = ctypes.c_int
    lib.hipLaunchHostFunc.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.hipLaunchHostFunc.restype = ctypes.c_int
    a, b = streams[:2]
    results: list[int] = []
    later = rec.key("enqueued by a host function")
    started = threading.Event()
    b_queued = threading.Event()

    def misbehave(_ud: int | None) -> None:
        started.set()
        b_queued.wait(WAIT_S)
        results.append(lib.hipStreamSynchronize(int(b)))  # type: ignore[call-overload]
        results.append(lib.hipDeviceSynchronize())
        results.append(
            lib.hipLaunchHostFunc(int(b), fn_ptr(rec.cfunc), later))  # type: ignore[call-overload]
        results.append(len(rec.seen))

    cfunc = HOST_FN(misbehave)
    ok(hip.hipLaunchHostFunc(a, fn_ptr(cfunc), None))
    held = Held(rec, b, "queued behind", mapped.word(0))
    try:
        assert started.wait(WAIT_S)
        held.reach()  # b now waits for the host-function thread, busy with a's
    finally:
        b_queued.set()
        held.close()
    ok(hip.hipStreamSynchronize(a))
    ok(hip.hipStreamSynchronize(b))
    hip.hipGetLastError()
    assert results == [E.hipErrorNotSupported, E.hipErrorNotSupported, E.hipSuccess, 0]
    assert rec.seen == ["queued behind", "enqueued by a host function"]


@pytest.fixture
def rec() -> Recorder:
    """Records which host functions ran, in order, and on which thread."""
    return Recorder()
