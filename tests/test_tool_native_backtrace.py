"""tools/native_backtrace.c: preloaded into a Python process that crashes,
it prints the native frames after faulthandler's Python stack, and the
process still dies of the signal."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent.parent / "tools" / "native_backtrace.c"


@pytest.fixture(scope="module")
def preload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("native") / "native_backtrace.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(out),
                    str(SOURCE)], check=True)
    return out


def _crash(preload: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env["LD_PRELOAD"] = str(preload)
    return subprocess.run([sys.executable, *flags, "-c", "import ctypes; ctypes.string_at(0)"],
                          env=env, capture_output=True, text=True, timeout=60)


def test_prints_native_frames_and_dies_of_the_signal(preload: Path) -> None:
    got = _crash(preload)
    assert got.returncode == -signal.SIGSEGV, got.stderr
    assert "[native] signal 11 at address (nil)" in got.stderr or \
        "[native] signal 11 at address 0x0," in got.stderr, got.stderr
    frames = got.stderr.split("[native] code mappings:")[0]
    assert "libc.so" in frames and "_ctypes" in frames, got.stderr
    assert " r-xp " in got.stderr.split("[native] code mappings:")[1]


def test_runs_after_faulthandler(preload: Path) -> None:
    got = _crash(preload, "-X", "faulthandler")
    assert got.returncode == -signal.SIGSEGV, got.stderr
    python_stack = got.stderr.find("Fatal Python error: Segmentation fault")
    native = got.stderr.find("[native] signal 11")
    assert 0 <= python_stack < native, got.stderr
    # the faulting frames are still below faulthandler's re-raise
    assert "_ctypes" in got.stderr[native:], got.stderr
