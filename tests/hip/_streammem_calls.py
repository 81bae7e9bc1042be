"""Helpers of the tests of the stream memory operations of the test platform's HIP
runtime, through HIP-Python (tests/hip/test_streammem_*.py).

``hipStreamWaitValue32/64``, ``hipStreamWriteValue32/64``,
``hipExtMallocWithFlags`` (signal memory), the
``hipDeviceAttributeCanUseStreamWaitValue`` attribute, and mapped pinned
memory with ``hipHostGetDevicePointer``: what a stream-ordered engine needs
to release GPU streams from host threads. Every call goes through HIP-Python
as users make it. Tests marked ``emulated`` use the emulated platform's hooks
or behaviour that another runtime leaves undefined; the rest also run on the
cuda platform. A wait that never releases would hang a test, so every wait
here is bounded: the tests poll with a deadline and always release in the end.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable

# the platform, HIP-Python and the checked calls come from the HIP tests' helpers
from _hip_calls import NEEDS_HIP_PYTHON_10 as NEEDS_HIP_PYTHON_10
from _hip_calls import PLATFORM as PLATFORM
from _hip_calls import E as E
from _hip_calls import K as K
from _hip_calls import err as err
from _hip_calls import hip as hip
from _hip_calls import ok as ok

GTE = hip.hipStreamWaitValueGte
EQ = hip.hipStreamWaitValueEq
AND = hip.hipStreamWaitValueAnd
NOR = hip.hipStreamWaitValueNor
ALL32 = 0xFFFFFFFF
ALL64 = 0xFFFFFFFFFFFFFFFF
SIGNAL = hip.hipMallocSignalMemory
UNCACHED = 0x3  # hipDeviceMallocUncached (hip_runtime_api.h; not in every HIP-Python)
NON_COHERENT = 0x80000000  # hipHostMallocNonCoherent (HIP-Python holds it as a negative int)

WAIT_S = 10.0  # upper bound for anything that should happen
BLOCKED_S = 0.05  # how long a blocked stream must stay blocked to count as blocked


# -------------------------------------------------------------- utilities


def addr(ptr: object) -> int:
    return int(ptr)  # type: ignore[call-overload]


def store(ptr: int, value: int, width: int) -> None:
    """A host store of a 32- or 64-bit word (what an I/O thread does)."""
    ctype = ctypes.c_uint32 if width == 32 else ctypes.c_uint64
    ctype.from_address(ptr).value = value


def load(ptr: int, width: int = 32) -> int:
    ctype = ctypes.c_uint32 if width == 32 else ctypes.c_uint64
    return int(ctype.from_address(ptr).value)


def wait_value(width: int, stream: object, ptr: int, value: int, flags: int, mask: int) -> E:
    fn = hip.hipStreamWaitValue32 if width == 32 else hip.hipStreamWaitValue64
    return err(fn(stream, ptr, value, flags, mask))


def write_value(width: int, stream: object, ptr: int, value: int) -> E:
    fn = hip.hipStreamWriteValue32 if width == 32 else hip.hipStreamWriteValue64
    return err(fn(stream, ptr, value, 0))


def until(predicate: Callable[[], bool], timeout: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.001)
    return predicate()


def idle(stream: object) -> bool:
    return err(hip.hipStreamQuery(stream)) == E.hipSuccess


def stays_blocked(stream: object) -> bool:
    """The stream still has work after BLOCKED_S (polled, never waited on)."""
    deadline = time.monotonic() + BLOCKED_S
    while time.monotonic() < deadline:
        if idle(stream):
            return False
        time.sleep(0.005)
    return not idle(stream)


def settled(timeout: float = WAIT_S) -> bool:
    """The current device's work has finished, found out without risking a hang.

    Freeing memory synchronizes the device, which would never return while a
    broken runtime keeps a stream blocked: teardown code checks this first,
    and leaves the memory allocated (the leak check then reports it) rather
    than hang the test process.
    """
    done = threading.Event()

    def run() -> None:
        hip.hipDeviceSynchronize()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done.wait(timeout)


def free_settled(free: Callable[[object], tuple], ptr: object) -> None:  # type: ignore[type-arg]
    """Free ptr once the device has settled; fail, leaving it allocated, if not."""
    assert settled(), "a stream is still blocked: memory left allocated to avoid a hang"
    ok(free(ptr))


def emu_counters() -> dict[str, int]:
    from hipfile.platforms import emulated

    return emulated.counters()


class Mapped:
    """Zeroed mapped pinned memory: a host address and its device address."""

    def __init__(self, nbytes: int = 4096) -> None:
        self.ptr = ok(hip.hipHostMalloc(nbytes, hip.hipHostMallocMapped))
        self.host = addr(self.ptr)
        ctypes.memset(self.host, 0, nbytes)
        self.dev = addr(ok(hip.hipHostGetDevicePointer(self.ptr, 0)))

    def word(self, index: int, width: int = 32) -> tuple[int, int]:
        """(host, device) address of the index-th word of that width."""
        offset = index * width // 8
        return self.host + offset, self.dev + offset
