"""The emulated HIP runtime: counters, limits, devices, threads, exit and fork."""

from __future__ import annotations

import ctypes
import subprocess
import textwrap
import threading
import time

import numpy as np
import pytest
from _hip_calls import *  # noqa: F403
from _util import run_python

pytestmark = NEEDS_HIP_PYTHON_10

# --------------------------------------------------- emulated-only behaviour


@pytest.mark.emulated
def test_counters_follow_resources(counters_balanced: None) -> None:
    base = emu_counters()
    d = ok(hip.hipMalloc(100))
    p = ok(hip.hipHostMalloc(100, 0))
    s = ok(hip.hipStreamCreate())
    ev = ok(hip.hipEventCreate())
    try:
        now = emu_counters()
        assert now == {k: v + 1 for k, v in base.items()}
    finally:
        ok(hip.hipEventDestroy(ev))
        ok(hip.hipStreamDestroy(s))
        ok(hip.hipHostFree(p))
        ok(hip.hipFree(d))
    assert emu_counters() == base


@pytest.mark.emulated
def test_host_functions_cannot_deadlock_the_runtime(
    stream: object, counters_balanced: None
) -> None:
    lib = runtime_library()
    lib.hipStreamSynchronize.argtypes = [ctypes.c_void_p]
    lib.hipStreamSynchronize.restype = ctypes.c_int
    lib.hipGetLastError.restype = ctypes.c_int
    results: list[int] = []

    def misbehave(_ud: int | None) -> None:
        results.append(lib.hipGetLastError())
        results.append(lib.hipStreamSynchronize(int(stream)))  # type: ignore[call-overload]
        results.append(lib.hipGetLastError())

    cfunc = HOST_FN(misbehave)
    ok(hip.hipLaunchHostFunc(stream, fn_ptr(cfunc), None))
    ok(hip.hipStreamSynchronize(stream))
    assert results == [0, E.hipErrorNotSupported, E.hipErrorNotSupported]


@pytest.mark.emulated
def test_device_memory_limit() -> None:
    free, total = ok(hip.hipMemGetInfo())  # type: ignore[misc]
    assert err(hip.hipMalloc(total + 1)) == E.hipErrorOutOfMemory
    d = ok(hip.hipMalloc(1 << 20))
    try:
        free2, _ = ok(hip.hipMemGetInfo())  # type: ignore[misc]
        assert free - free2 == 1 << 20
    finally:
        ok(hip.hipFree(d))
    assert ok(hip.hipMemGetInfo())[0] == free  # type: ignore[index]


#: What every script below starts with: hipfile imported (its platform
#: warnings silenced) to load the emulated runtime, then HIP-Python.
_SCRIPT_PRELUDE = """\
import ctypes, os, threading, warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import hipfile
import numpy as np
from hip import hip
E = hip.hipError_t
"""


def _run_emulated_script(script: str, **env_extra: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` after :data:`_SCRIPT_PRELUDE` on the emulated platform."""
    env = {"HIPFILE_PLATFORM": "emulated",
           "HIPFILE_EMULATED_PREFIX": str(platforms.prefix("emulated")), **env_extra}
    return run_python(_SCRIPT_PRELUDE + textwrap.dedent(script), ("ROCM_PATH",), **env)


MULTI_DEVICE_SCRIPT = textwrap.dedent(
    """

    def ok(r):
        assert r[0] == E.hipSuccess, r
        return r[1] if len(r) == 2 else None

    assert ok(hip.hipGetDeviceCount()) == 2
    assert hip.hipSetDevice(2)[0] == E.hipErrorInvalidDevice
    ok(hip.hipSetDevice(1))
    assert ok(hip.hipGetDevice()) == 1
    seen = []
    t = threading.Thread(target=lambda: seen.append(ok(hip.hipGetDevice())))
    t.start(); t.join()
    assert seen == [0], seen  # the current device is per thread

    d1 = ok(hip.hipMalloc(256))
    s1 = ok(hip.hipStreamCreate())
    e1 = ok(hip.hipEventCreate())
    assert ok(hip.hipPointerGetAttributes(d1)).device == 1
    assert ok(hip.hipStreamGetDevice(s1)) == 1
    ok(hip.hipSetDevice(0))
    d0 = ok(hip.hipMalloc(256))
    e0 = ok(hip.hipEventCreate())
    assert ok(hip.hipPointerGetAttributes(d0)).device == 0
    # An event belongs to the device it was created on.
    assert hip.hipEventRecord(e0, s1)[0] == E.hipErrorInvalidResourceHandle
    ok(hip.hipEventRecord(e1, s1))
    # Copies between devices, on a stream of device 1.
    src = np.arange(256, dtype=np.uint8)
    ok(hip.hipMemcpy(d0, src, 256, hip.hipMemcpyKind.hipMemcpyHostToDevice))
    ok(hip.hipMemcpyAsync(d1, d0, 256, hip.hipMemcpyKind.hipMemcpyDeviceToDevice, s1))
    ok(hip.hipStreamSynchronize(s1))
    out = np.zeros(256, np.uint8)
    ok(hip.hipMemcpy(out, d1, 256, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
    assert (out == src).all()
    free0 = hip.hipMemGetInfo()[1]
    ok(hip.hipSetDevice(1))
    free1 = hip.hipMemGetInfo()[1]
    assert free0 == free1  # both devices hold one 256-byte allocation
    for r in (hip.hipFree(d0), hip.hipFree(d1), hip.hipStreamDestroy(s1),
              hip.hipEventDestroy(e0), hip.hipEventDestroy(e1)):
        assert r[0] == E.hipSuccess, r
    print("multi-device OK")
    """
)


@pytest.mark.emulated
def test_multiple_devices_in_subprocess() -> None:
    proc = _run_emulated_script(MULTI_DEVICE_SCRIPT, HIPFILE_EMU_DEVICES="2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "multi-device OK" in proc.stdout


@pytest.mark.emulated
def test_no_devices_in_subprocess() -> None:
    proc = _run_emulated_script(
        """
        assert hip.hipGetDeviceCount()[0] == E.hipErrorNoDevice
        assert hip.hipInit(0)[0] == E.hipErrorNoDevice
        assert hip.hipMalloc(16)[0] == E.hipErrorNoDevice
        assert hip.hipStreamCreate()[0] == E.hipErrorNoDevice
        print("no-device OK")
        """,
        HIPFILE_EMU_DEVICES="0",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no-device OK" in proc.stdout


def test_streams_from_many_threads(counters_balanced: None) -> None:
    failures: list[str] = []

    def worker(index: int) -> None:
        try:
            s = ok(hip.hipStreamCreate())
            d = ok(hip.hipMalloc(1024))
            ev = ok(hip.hipEventCreate())
            out = np.zeros(1024, np.uint8)
            calls: list[int] = []
            cfunc = HOST_FN(lambda ud: calls.append(ud or 0))
            for round_ in range(20):
                value = (index * 20 + round_) % 256
                ok(hip.hipMemsetAsync(d, value, 1024, s))
                ok(hip.hipMemcpyAsync(out, d, 1024, K.hipMemcpyDeviceToHost, s))
                ok(hip.hipLaunchHostFunc(s, fn_ptr(cfunc), round_ + 1))
                ok(hip.hipEventRecord(ev, s))
            ok(hip.hipEventSynchronize(ev))
            if not (out == (index * 20 + 19) % 256).all() or calls != list(range(1, 21)):
                failures.append(f"thread {index}: wrong data or order")
            ok(hip.hipEventDestroy(ev))
            ok(hip.hipFree(d))
            ok(hip.hipStreamDestroy(s))
        except AssertionError as exc:  # reported below, in the test's thread
            failures.append(f"thread {index}: {exc}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 3)
    assert not any(t.is_alive() for t in threads)
    assert failures == []


@pytest.mark.emulated
def test_device_reset_and_release_all_in_subprocess() -> None:
    proc = _run_emulated_script(
        """
        lib = ctypes.CDLL(os.path.join(os.environ["ROCM_PATH"], "lib", "libamdhip64.so"))
        lib.hipEmuReleaseAll.restype = ctypes.c_longlong

        def counters():
            v = [ctypes.c_longlong() for _ in range(4)]
            lib.hipEmuCounters(*(ctypes.byref(x) for x in v))
            return [x.value for x in v]

        d = hip.hipMalloc(64)[1]
        p = hip.hipHostMalloc(64, 0)[1]
        s = hip.hipStreamCreate()[1]
        ev = hip.hipEventCreate()[1]
        assert counters() == [1, 1, 1, 1], counters()
        assert hip.hipDeviceReset()[0] == E.hipSuccess
        assert counters() == [0, 0, 0, 0], counters()
        assert hip.hipFree(d)[0] == E.hipErrorInvalidValue
        assert hip.hipStreamDestroy(s)[0] == E.hipErrorContextIsDestroyed
        assert hip.hipEventDestroy(ev)[0] == E.hipErrorContextIsDestroyed
        hip.hipMalloc(64); hip.hipStreamCreate(); hip.hipEventCreate()
        assert lib.hipEmuReleaseAll() == 3
        assert counters() == [0, 0, 0, 0], counters()
        print("release OK")
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "release OK" in proc.stdout


@pytest.mark.emulated
def test_exit_with_pending_and_stuck_work_does_not_hang() -> None:
    # One stream has queued copies, another is stuck in a host function (libc
    # sleep(60)); the process must still exit promptly and cleanly.
    start = time.monotonic()
    proc = _run_emulated_script(
        """
        libc = ctypes.CDLL(None)
        sleep_fn = ctypes.cast(libc.sleep, ctypes.c_void_p).value
        busy = hip.hipStreamCreate()[1]
        stuck = hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking)[1]
        d = hip.hipMalloc(1 << 20)[1]
        for _ in range(200):
            hip.hipMemsetAsync(d, 1, 1 << 20, busy)
        assert hip.hipLaunchHostFunc(stuck, sleep_fn, 60)[0] == hip.hipError_t.hipSuccess
        hip.hipMemsetAsync(d, 2, 1 << 20, stuck)
        # Queued behind the stuck one on the one host-function thread.
        assert hip.hipLaunchHostFunc(busy, sleep_fn, 60)[0] == hip.hipError_t.hipSuccess
        print("exiting")
        """
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "exiting" in proc.stdout
    assert elapsed < 30.0


@pytest.mark.emulated
def test_fork_child_runs_host_functions() -> None:
    # The parent's host-function thread is busy (libc sleep(1)) when it forks;
    # the child has no copy of it and must start its own.
    proc = _run_emulated_script(
        """
        libc = ctypes.CDLL(None)
        sleep_fn = ctypes.cast(libc.sleep, ctypes.c_void_p).value
        HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        seen = []
        record = HOST_FN(lambda ud: seen.append((os.getpid(), ud)))
        record_ptr = ctypes.cast(record, ctypes.c_void_p).value
        s = hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking)[1]
        assert hip.hipLaunchHostFunc(s, record_ptr, 1)[0] == E.hipSuccess
        assert hip.hipStreamSynchronize(s)[0] == E.hipSuccess
        assert hip.hipLaunchHostFunc(s, sleep_fn, 1)[0] == E.hipSuccess
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                assert hip.hipLaunchHostFunc(s, record_ptr, 2)[0] == E.hipErrorContextIsDestroyed
                t = hip.hipStreamCreate()[1]
                for ud in (3, 4):
                    assert hip.hipLaunchHostFunc(t, record_ptr, ud)[0] == E.hipSuccess
                assert hip.hipStreamSynchronize(t)[0] == E.hipSuccess
                assert seen == [(os.getppid(), 1), (os.getpid(), 3), (os.getpid(), 4)], seen
                assert hip.hipStreamDestroy(t)[0] == E.hipSuccess
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        assert hip.hipLaunchHostFunc(s, record_ptr, 5)[0] == E.hipSuccess
        assert hip.hipStreamSynchronize(s)[0] == E.hipSuccess
        assert seen == [(os.getpid(), 1), (os.getpid(), 5)], seen
        assert hip.hipStreamDestroy(s)[0] == E.hipSuccess
        print("fork OK")
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fork OK" in proc.stdout


@pytest.mark.emulated
def test_fork_child_never_hangs() -> None:
    proc = _run_emulated_script(
        """
        K = hip.hipMemcpyKind
        s = hip.hipStreamCreate()[1]
        ev = hip.hipEventCreate()[1]
        d = hip.hipMalloc(64)[1]
        assert hip.hipMemset(d, 4, 64)[0] == E.hipSuccess
        assert hip.hipEventRecord(ev, s)[0] == E.hipSuccess
        assert hip.hipStreamSynchronize(s)[0] == E.hipSuccess
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                # The parent's stream has no worker here: its handle is invalid.
                assert hip.hipStreamSynchronize(s)[0] == E.hipErrorContextIsDestroyed
                assert hip.hipEventSynchronize(ev)[0] == E.hipSuccess
                out = np.zeros(64, np.uint8)
                assert hip.hipMemcpy(out, d, 64, K.hipMemcpyDeviceToHost)[0] == E.hipSuccess
                assert (out == 4).all()
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        for r in (hip.hipFree(d), hip.hipEventDestroy(ev), hip.hipStreamDestroy(s)):
            assert r[0] == E.hipSuccess, r
        print("fork OK")
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fork OK" in proc.stdout
