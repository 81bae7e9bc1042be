"""Ctrl-C and finalizers: a SIGINT that arrives while the package's
finalizers run (tensors and buffers freed, handles dropped before they
complete, files collected open) is never lost in a finalizer ("Exception
ignored"), never leaves the cleanup half done, and never hangs the
process: the ``KeyboardInterrupt`` reaches the caller, nothing leaks
afterwards and the next call works.

The loops run in a child interpreter with a time limit (a hang fails the
test instead of stalling the suite) and are interrupted at many points
(a SIGINT after each of a range of delays); a test hook raises the signal
inside every guarded finalizer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from _util import check, hip_stream
from hip import hip

import hipfile
from hipfile._lib import _hipfile

pytestmark = pytest.mark.emulated

#: Seconds a child may take for all its rounds; a KeyboardInterrupt lost in
#: a finalizer lets its loop run on, and a half-done cleanup hangs it.
CHILD_LIMIT = 240

_PRELUDE = """
import gc, json, os, signal, sys, threading, time, warnings
import numpy as np
import hipfile
from hipfile._lib import _hipfile
from hipfile.platforms import emulated

warnings.simplefilter("ignore", ResourceWarning)
lost = []
def _unraisable(u):
    lost.append(f"{type(u.exc_value).__name__} in {u.object!r}")
sys.unraisablehook = _unraisable

def one_round(delay, body, limit=20.0):
    # SIGINT to the main thread after `delay` s (a signal the kernel hands to
    # another thread reaches Python's main thread only at its next switch of
    # threads, which a loop that never releases the GIL may not make for a
    # long time: CPython's behaviour, not the package's); the loop must end
    # with it within `limit` s
    main = threading.main_thread().ident
    timer = threading.Timer(delay, signal.pthread_kill, args=(main, signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        while time.monotonic() - start < limit:
            body()
    except KeyboardInterrupt:
        return True
    finally:
        timer.cancel()
        timer.join()
    return False

def leftovers():
    _hipfile.wait_for(None)
    gc.collect()
    _hipfile.pool_stats()          # a sweep: deferred releases retried
    hipfile.trim_pool()
    return {k: v for k, v in emulated.counters().items() if v}

def rounds(body, n=14):
    # n rounds of `body`, each interrupted after a longer delay: the delays
    # whose Ctrl-C never ended the loop, and what each round left behind
    missed, left = [], []
    for i in range(n):
        delay = 0.02 + 0.023 * i
        if not one_round(delay, body):
            missed.append(delay)
        rest = leftovers()
        if rest:
            left.append((delay, rest))
    return missed, left


def report(missed, left, next_ok):
    # the child's last line, which _check reads
    rest = leftovers()
    if rest:
        left.append(("after", rest))
    print(json.dumps({"lost": lost, "missed": missed, "left": left, "next_ok": next_ok}))
"""


def _run_child(body: str, tmp_path: Path) -> dict[str, object]:
    code = _PRELUDE + textwrap.dedent(body)
    env = dict(os.environ, HIPFILE_PLATFORM="emulated", HIPFILE_PLATFORM_QUIET="1")
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=CHILD_LIMIT,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the child hung (no end within {CHILD_LIMIT} s): {exc.stderr!r}")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _check(result: dict[str, object]) -> None:
    assert result["lost"] == [], f"exceptions lost in finalizers: {result['lost']}"
    assert result["missed"] == [], f"rounds whose Ctrl-C never reached the loop: " \
                                   f"{result['missed']}"
    assert result["left"] == [], f"resources left after a round: {result['left']}"
    assert result["next_ok"] is True


def test_ctrl_c_in_a_safe_open_key_loop_reaches_the_caller(tmp_path: Path) -> None:
    """The reported case: a key loop over a checkpoint, read to device
    memory (tensors freed while others are read ahead), interrupted at many
    points."""
    result = _run_child("""
        import hipfile.safetensors, hipfile.safetensors.numpy
        p = "m.safetensors"
        hipfile.safetensors.numpy.save_file(
            {f"t{i}": np.full(1 << 16, i, np.float32) for i in range(120)}, p)

        def body():
            with hipfile.safetensors.safe_open(p, framework="hip", device=0) as f:
                for k in f.keys():
                    f.get_tensor(k)

        missed, left = rounds(body)
        with hipfile.safetensors.safe_open(p, framework="hip", device=0) as f:
            t = f.get_tensor("t7")
            got = np.empty(1 << 16, np.float32)
            from hip import hip
            hip.hipMemcpy(got, t.__cuda_array_interface__["data"][0], got.nbytes,
                          hip.hipMemcpyKind.hipMemcpyDeviceToHost)
            next_ok = bool((got == 7).all())
        del t
        report(missed, left, next_ok)
    """, tmp_path)
    _check(result)


@pytest.mark.parametrize("reader", ["auto", "staged"])
def test_ctrl_c_in_a_load_file_loop_reaches_the_caller(tmp_path: Path, reader: str) -> None:
    """Whole-checkpoint loads into device memory (three files read by the
    engine, their memory freed as the next load runs), interrupted at many
    points: every read ends before its memory goes, and the next load
    returns the file's bytes."""
    result = _run_child(f"""
        import hipfile.safetensors, hipfile.safetensors.numpy
        files = []
        for k in range(3):
            p = f"s{{k}}.safetensors"
            hipfile.safetensors.numpy.save_file(
                {{f"t{{k}}.{{i}}": np.full(1 << 16, i, np.float32) for i in range(40)}}, p)
            files.append(p)

        def body():
            hipfile.safetensors.load_file(files, 0, "hip", reader={reader!r})

        missed, left = rounds(body)
        out = hipfile.safetensors.load_file(files, 0, "hip", reader={reader!r})
        next_ok = all((out[f"t{{k}}.{{i}}"].copy_to_host() == i).all()
                      for k in range(3) for i in range(40))
        del out
        report(missed, left, next_ok)
    """, tmp_path)
    _check(result)


def test_ctrl_c_in_a_dropped_handle_loop_reaches_the_caller(tmp_path: Path) -> None:
    """Files, buffers and handles of both stream-ordered paths dropped
    before their operations complete (the finalizers park, defer and
    release), interrupted at many points."""
    result = _run_child("""
        from hip import hip
        n = 1 << 12
        data = np.arange(n, dtype=np.uint8)
        err, dev = hip.hipMalloc(n)
        err, st = hip.hipStreamCreate()
        # memory and a file per iteration, made before the rounds (a buffer
        # or file dropped in flight stays registered until its operations end)
        spare = [hip.hipMalloc(n)[1] for _ in range(3000)]
        for i in range(len(spare)):
            with open(f"d{i}.bin", "wb") as out:
                out.write(data.tobytes())
        used = []

        def body():
            if len(used) == len(spare):
                time.sleep(0.001)      # every spare used: wait for the signal
                return
            mem = spare[len(used)]
            used.append(mem)
            fh = hipfile.FileHandle(f"d{len(used) - 1}.bin")
            fh.open()
            buf = hipfile.Buffer(mem, n)
            buf.register()
            h = fh.pread_async(buf, n, 0, 0, st)
            a = fh.read_async(dev, n, 0, 0, st)
            del h, a, buf, fh

        missed, left = [], []
        for i in range(14):
            delay = 0.02 + 0.023 * i
            if not one_round(delay, body):
                missed.append(delay)
            hip.hipStreamSynchronize(st)
            rest = leftovers()
            used.clear()
            # what this process holds itself: dev, the spare memory, st
            if (rest.pop("allocations", 0) != 1 + len(spare) or rest.pop("streams", 0) != 1
                    or rest):
                left.append((delay, rest))
        got = np.zeros(n, np.uint8)
        with hipfile.open("d0.bin") as fh:
            fh.pread_async(dev, n, 0, 0, st).wait()
        hip.hipStreamSynchronize(st)
        hip.hipMemcpy(got, dev, n, hip.hipMemcpyKind.hipMemcpyDeviceToHost)
        next_ok = bool((got == data).all())
        for mem in spare + [dev]:
            hip.hipFree(mem)
        hip.hipStreamDestroy(st)
        report(missed, left, next_ok)
    """, tmp_path)
    _check(result)


def test_a_signal_inside_a_finalizer_is_delivered_after_its_cleanup(tmp_path: Path) -> None:
    """A SIGINT raised inside a guarded finalizer (the test hook) does not
    cut the cleanup short: the buffer and the file are released, and the
    KeyboardInterrupt reaches the code that dropped them."""
    from hipfile.platforms import emulated

    path = tmp_path / "f.bin"
    path.write_bytes(b"\1" * 4096)
    n = 4096
    dev = check(hip.hipMalloc(n))
    try:
        buf = hipfile.Buffer(dev, n)
        buf.register()
        fh = hipfile.open(path)
        fh.handle     # noqa: B018 - registers the file
        assert emulated.counters()["buffers"] == 1 and emulated.counters()["handles"] == 1
        for name in ("buf", "fh"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ResourceWarning)
                with pytest.raises(KeyboardInterrupt):
                    _hipfile.set_finalizer_hook(lambda: signal.raise_signal(signal.SIGINT))
                    try:
                        if name == "buf":
                            del buf
                        else:
                            del fh
                    finally:
                        _hipfile.set_finalizer_hook(None)
                    for _ in range(1000):   # bytecodes: the deferred signal lands here
                        pass
        counts = emulated.counters()
        assert counts["buffers"] == 0 and counts["handles"] == 0
    finally:
        _hipfile.set_finalizer_hook(None)
        check(hip.hipFree(dev))


def test_device_memory_is_freed_without_python_code(tmp_path: Path) -> None:
    """A DeviceMemory (the safetensors loader's device allocations) frees
    itself in compiled code: no finalizer of Python code is involved, so
    a signal has nowhere to be lost."""
    from hipfile.platforms import emulated

    before = emulated.counters()["allocations"]
    mem = _hipfile.DeviceMemory(1 << 20, 0)
    assert mem.ptr and not mem.freed
    assert emulated.counters()["allocations"] == before + 1
    del mem
    assert emulated.counters()["allocations"] == before
    mem = _hipfile.DeviceMemory(1 << 12, 0)
    assert mem.free() == 0 and mem.freed and mem.free() == 0


def test_the_package_works_after_a_signal_in_a_finalizer(tmp_path: Path) -> None:
    """After a signal in a buffer's finalizer, the package works: a
    stream-ordered read lands its bytes."""
    path = tmp_path / "g.bin"
    data = np.arange(1 << 12, dtype=np.uint8)
    path.write_bytes(data.tobytes())
    dev = check(hip.hipMalloc(data.nbytes))
    try:
        b = hipfile.Buffer(dev, data.nbytes)
        b.register()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            with pytest.raises(KeyboardInterrupt):
                _hipfile.set_finalizer_hook(lambda: signal.raise_signal(signal.SIGINT))
                try:
                    del b
                finally:
                    _hipfile.set_finalizer_hook(None)
                for _ in range(1000):
                    pass
        with hip_stream() as st, hipfile.open(path) as fh:
            assert fh.pread_async(dev, data.nbytes, 0, 0, st).wait() == data.nbytes
            check(hip.hipStreamSynchronize(st))
        got = np.zeros_like(data)
        check(hip.hipMemcpy(got, dev, data.nbytes, hip.hipMemcpyKind.hipMemcpyDeviceToHost))
        assert np.array_equal(got, data)
    finally:
        _hipfile.set_finalizer_hook(None)
        check(hip.hipFree(dev))
