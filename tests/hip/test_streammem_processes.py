"""Stream memory operations: a second device, and processes that exit with a stream blocked."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest
from _streammem_calls import *  # noqa: F403

from hipfile import platforms

pytestmark = NEEDS_HIP_PYTHON_10


# ------------------------------------------------------ devices and processes


def test_wait_on_device_one() -> None:
    if ok(hip.hipGetDeviceCount()) < 2:  # type: ignore[operator]
        pytest.skip("needs two devices (HIPFILE_EMU_DEVICES=2 on the emulated platform)")
    ok(hip.hipSetDevice(1))
    try:
        s = ok(hip.hipStreamCreate())
        flag = ok(hip.hipExtMallocWithFlags(8, SIGNAL))
        m = Mapped()
        other = ok(hip.hipStreamCreateWithFlags(hip.hipStreamNonBlocking))
        try:
            assert ok(hip.hipStreamGetDevice(s)) == 1
            attrs = ok(hip.hipPointerGetAttributes(flag))
            assert attrs.device == 1  # type: ignore[attr-defined]
            flag_host, flag_dev = m.word(0)
            marker_host, marker_dev = m.word(1)
            # Released by another device-1 stream writing signal memory...
            assert wait_value(64, s, addr(flag), 1, GTE, ALL64) == E.hipSuccess
            assert write_value(32, s, marker_dev, 7) == E.hipSuccess
            assert stays_blocked(s)
            assert write_value(64, other, addr(flag), 1) == E.hipSuccess
            assert until(lambda: load(marker_host) == 7)
            # ... and by the host, through mapped memory.
            assert wait_value(32, s, flag_dev, 1, EQ, ALL32) == E.hipSuccess
            assert write_value(32, s, marker_dev, 8) == E.hipSuccess
            try:
                assert stays_blocked(s)
            finally:
                store(flag_host, 1, 32)
            assert until(lambda: load(marker_host) == 8)
            assert until(lambda: idle(s) and idle(other))
        finally:
            free_settled(hip.hipHostFree, m.ptr)
            free_settled(hip.hipFree, flag)
            ok(hip.hipStreamDestroy(other))
            ok(hip.hipStreamDestroy(s))
    finally:
        ok(hip.hipSetDevice(0))


def _run_emulated_script(script: str, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["HIPFILE_PLATFORM"] = "emulated"
    env["HIPFILE_EMULATED_PREFIX"] = str(platforms.prefix("emulated"))
    env.pop("ROCM_PATH", None)
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


EXIT_WHILE_BLOCKED = """
import time, warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import hipfile
from hip import hip
E = hip.hipError_t
r = hip.hipStreamCreate(); assert r[0] == E.hipSuccess; s = r[1]
r = hip.hipExtMallocWithFlags(8, hip.hipMallocSignalMemory); assert r[0] == E.hipSuccess
flag = r[1]
assert hip.hipStreamWaitValue32(s, flag, 1, hip.hipStreamWaitValueEq, 0xFFFFFFFF)[0] == E.hipSuccess
DESTROY
time.sleep(0.05)
print("exiting", flush=True)
"""


@pytest.mark.emulated
@pytest.mark.parametrize("destroy", [False, True])
def test_process_exits_with_a_stream_blocked(destroy: bool) -> None:
    script = EXIT_WHILE_BLOCKED.replace(
        "DESTROY", "assert hip.hipStreamDestroy(s)[0] == E.hipSuccess" if destroy else ""
    )
    start = time.monotonic()
    proc = _run_emulated_script(script)
    assert proc.returncode == 0, proc.stderr
    assert "exiting" in proc.stdout
    assert time.monotonic() - start < 30


@pytest.mark.emulated
def test_device_one_in_a_two_device_process() -> None:
    script = """
    import os, sys
    sys.argv = ["pytest"]
    import pytest
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-k", "wait_on_device_one",
                          os.environ["STREAMMEM_TEST_FILE"]]))
    """
    proc = _run_emulated_script(
        script, HIPFILE_EMU_DEVICES="2", STREAMMEM_TEST_FILE=__file__
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout, proc.stdout
