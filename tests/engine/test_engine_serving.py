"""The engine in a serving process: other threads free device memory while
ranges are in flight.

``hipFree`` (and CUDA's ``cudaFree``) synchronises the device while holding
the runtime, so a thread entering the runtime meanwhile blocks until every
stream has drained. A stream that waits for a range's completion must
therefore never need, for that completion, a host thread that enters the
runtime after the submit: the free would wait for the stream, the stream for
the host thread, and the host thread for the free. The emulated platform
models the runtime lock and the library's copy through the runtime, so the
cycle shows here as it does on a GPU. Each scenario runs in a subprocess,
since a deadlocked process never returns.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _util import random_bytes, run_python

SCRIPT = """
import faulthandler, os, sys, threading, time, warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import hipfile
from hip import hip

def check(r):
    assert r[0] == hip.hipError_t.hipSuccess, r
    return r[1] if len(r) == 2 else None

faulthandler.dump_traceback_later(float(os.environ["HF_DUMP_AFTER"]), exit=True)
path = os.environ["HF_TEST_FILE"]
rounds = int(os.environ["HF_ROUNDS"])
layers = 16
n = os.path.getsize(path)
layer = n // layers
copy = check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
compute = check(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
dev = check(hip.hipMalloc(n))
scratch = check(hip.hipMalloc(layer))
stop = threading.Event()
frees = [0]

def churn():
    # as an allocator flush does: allocate and free device memory, in a loop
    while not stop.is_set():
        p = check(hip.hipMalloc(1 << 20))
        check(hip.hipFree(p))
        frees[0] += 1

t = threading.Thread(target=churn, daemon=True)
t.start()
with hipfile.FileHandle(path) as fh:
    for r in range(rounds):
        handles = fh.pread_async_ranges(
            dev, [(layer, i * layer, i * layer) for i in range(layers)], copy)
        for i, h in enumerate(handles):
            h.wait_on(compute)
            # the layer's "compute": a copy out of the layer just loaded
            check(hip.hipMemcpyAsync(scratch, int(dev) + i * layer, layer,
                                     hip.hipMemcpyKind.hipMemcpyDeviceToDevice, compute))
        assert sum(h.wait(30) for h in handles) == n
        check(hip.hipStreamSynchronize(compute))
stop.set()
t.join(30)
assert not t.is_alive()
host = bytearray(n)
check(hip.hipMemcpy(host, dev, n, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
with open(path, "rb") as f:
    assert host == f.read()
check(hip.hipFree(scratch))
check(hip.hipFree(dev))
faulthandler.cancel_dump_traceback_later()
print(f"ok rounds={rounds} frees={frees[0]}")
"""


def _run(path: Path, rounds: int, timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    full = dict(os.environ)
    full.update(HF_TEST_FILE=str(path), HF_ROUNDS=str(rounds), HF_DUMP_AFTER=str(timeout),
                **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], env=full,
                          capture_output=True, text=True, timeout=timeout + 30, check=False)


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "layers.bin"
    path.write_bytes(random_bytes(16 * (256 << 10), seed=17).tobytes())
    return path


def test_loads_beside_device_frees_complete(model_file: Path) -> None:
    """Layer-wise loads released to a compute stream while another thread
    allocates and frees device memory complete, every round, with the
    right bytes (the loads never wait on the runtime after submit)."""
    proc = _run(model_file, rounds=40, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok rounds=40"), proc.stdout + proc.stderr


@pytest.mark.emulated
def test_the_emulator_shows_the_cycle_through_the_library(model_file: Path) -> None:
    """The same loads through the library's data path (worker threads that
    call hipFileRead, whose copy enters the runtime) deadlock beside the
    frees: the emulated runtime models the cycle that the staged path
    breaks, so a design that reintroduces it fails here on the CPU."""
    proc = _run(model_file, rounds=5000, timeout=8, HIPFILE_ENGINE_DATA_PATH="hipfile")
    assert proc.returncode != 0
    assert "Timeout" in proc.stderr and "hipFree" not in proc.stdout, proc.stderr


# The engine where streams cannot wait on a flag (``HIPFILE_ENGINE_RELEASE=host``).
#
# A release by a host function that blocks until the range is done would hold
# HIP's one host-function thread: a range whose gate (the event recorded on the
# caller's stream at submit) sits behind a host function reached later could
# then never start, since the release holds the one thread and the host
# function it waits for is queued behind it. The engine therefore releases
# streams there by waiting on the host (``wait_on`` returns once the range is
# done) and never enqueues a host function. This runs the scenario that
# deadlocked the host-function release, in a subprocess, since a deadlocked
# thread never returns.


class Deadlock(AssertionError):
    """The read never completed: its release holds the host-function thread."""


HOST_RELEASE_SCRIPT = """
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


@pytest.mark.emulated
def test_host_release_with_gate_behind_a_later_host_function(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(256)) * 1024)
    proc = run_python(HOST_RELEASE_SCRIPT, HF_TEST_FILE=str(path))
    if proc.returncode == 3 and "deadlock" in proc.stdout:
        raise Deadlock(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "completed" in proc.stdout
