"""The engine where streams cannot wait on a flag (``HIPFILE_ENGINE_RELEASE=host``).

A release by a host function that blocks until the range is done would hold
HIP's one host-function thread: a range whose gate (the event recorded on the
caller's stream at submit) sits behind a host function reached later could
then never start, since the release holds the one thread and the host
function it waits for is queued behind it. The engine therefore releases
streams there by waiting on the host (``wait_on`` returns once the range is
done) and never enqueues a host function. This runs the scenario that
deadlocked the host-function release, in a subprocess, since a deadlocked
thread never returns.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _util import run_python

pytestmark = pytest.mark.emulated


class Deadlock(AssertionError):
    """The read never completed: its release holds the host-function thread."""


SCRIPT = """
import ctypes, os, threading, time, warnings
os.environ["HIPFILE_ENGINE_RELEASE"] = "host"
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import hipfile
from hip import hip

def check(r):
    assert r[0] == hip.hipError_t.hipSuccess, r
    return r[1] if len(r) == 2 else None

HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
path = os.environ["HF_TEST_FILE"]
n = os.path.getsize(path)
assert hipfile.engine.mechanism() == "host-waits"
a, b, c = (check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking)) for _ in range(3))
dev = check(hip.hipMalloc(n))
go = threading.Event()
gate = HOST_FN(lambda _: go.wait(30))
noop = HOST_FN(lambda _: None)
ptr = lambda f: ctypes.cast(f, ctypes.c_void_p).value
ev = check(hip.hipEventCreate())
with hipfile.Driver(), hipfile.FileHandle(path) as fh:
    # c: earlier work (here a host function) that stream a waits for.
    check(hip.hipLaunchHostFunc(c, ptr(gate), 0))
    check(hip.hipEventRecord(ev, c))
    # a: after c, some host function, then the read's gate.
    check(hip.hipStreamWaitEvent(a, ev, 0))
    check(hip.hipLaunchHostFunc(a, ptr(noop), 0))
    h = fh.pread_async(dev, n, 0, 0, a, ordered=False)
    assert h.mechanism == "host-waits"
    # b: released once the read is done; the host function that the read's
    # gate sits behind runs meanwhile, from another thread's go.
    threading.Timer(0.1, go.set).start()
    h.wait_on(b)
    try:
        got = h.wait(timeout=3)
    except TimeoutError:
        print("deadlock", flush=True)
        os._exit(3)
    assert got == n, got
for s in (a, b, c):
    check(hip.hipStreamDestroy(s))
check(hip.hipEventDestroy(ev))
check(hip.hipFree(dev))
print("completed")
"""


def test_host_release_with_gate_behind_a_later_host_function(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(256)) * 1024)
    proc = run_python(SCRIPT, HF_TEST_FILE=str(path))
    if proc.returncode == 3 and "deadlock" in proc.stdout:
        raise Deadlock(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "completed" in proc.stdout
