"""tools/native_backtrace.c: preloaded into a Python process that crashes,
it prints the native frames first, then the handler the process installed
(faulthandler's Python stack) runs, and the process still dies of the
signal."""

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
                    str(SOURCE), "-ldl"], check=True)
    return out


SEGV = "import ctypes; ctypes.string_at(0)"


def _clean_env() -> dict[str, str]:
    """This environment without the tool's own variables (a suite run with
    the tool preloaded sets them)."""
    return {k: v for k, v in os.environ.items()
            if k != "LD_PRELOAD" and not k.startswith("NATIVE_BACKTRACE_")}


def _crash(preload: Path, *flags: str, code: str = SEGV) -> subprocess.CompletedProcess[str]:
    env = _clean_env()
    env["LD_PRELOAD"] = str(preload)
    return subprocess.run([sys.executable, *flags, "-c", code],
                          env=env, capture_output=True, text=True, timeout=60)


def test_prints_native_frames_and_dies_of_the_signal(preload: Path) -> None:
    got = _crash(preload)
    assert got.returncode == -signal.SIGSEGV, got.stderr
    assert "[native] signal 11 at address (nil)" in got.stderr or \
        "[native] signal 11 at address 0x0," in got.stderr, got.stderr
    frames = got.stderr.split("[native] code mappings:")[0]
    assert "libc.so" in frames and "_ctypes" in frames, got.stderr
    assert " r-xp " in got.stderr.split("[native] code mappings:")[1]


def test_runs_before_faulthandler_then_chains_to_it(preload: Path) -> None:
    """faulthandler installs its handler after the preload; the native
    frames still come first, and faulthandler's Python stack follows."""
    got = _crash(preload, "-X", "faulthandler")
    assert got.returncode == -signal.SIGSEGV, got.stderr
    native = got.stderr.find("[native] signal 11")
    python_stack = got.stderr.find("Fatal Python error: Segmentation fault")
    assert 0 <= native < python_stack, got.stderr
    assert "_ctypes" in got.stderr[native:python_stack], got.stderr
    assert got.stderr.count("[native] signal") == 1, got.stderr


def test_a_later_handler_is_reported_as_the_current_one(preload: Path) -> None:
    """Enabling then disabling faulthandler puts back what it found: the
    native handler keeps running and no Python stack is printed."""
    got = _crash(preload, code="import faulthandler; faulthandler.enable(); "
                               "faulthandler.disable(); " + SEGV)
    assert got.returncode == -signal.SIGSEGV, got.stderr
    assert "[native] signal 11" in got.stderr, got.stderr
    assert "Fatal Python error" not in got.stderr, got.stderr


def test_abort_prints_who_called_it(preload: Path) -> None:
    got = _crash(preload, "-X", "faulthandler", code="import os; os.abort()")
    assert got.returncode == -signal.SIGABRT, got.stderr
    native = got.stderr.find("[native] signal 6")
    assert 0 <= native < got.stderr.find("Fatal Python error: Aborted"), got.stderr
    assert "libc.so" in got.stderr[native:], got.stderr


def test_other_signals_are_left_alone(preload: Path) -> None:
    got = _crash(preload, code="import signal, os\n"
                               "signal.signal(signal.SIGUSR1, lambda *a: print('usr1'))\n"
                               "os.kill(os.getpid(), signal.SIGUSR1)\n")
    assert got.returncode == 0, got.stderr
    assert got.stdout == "usr1\n"
    assert "[native]" not in got.stderr


def test_writes_to_the_stderr_it_found_at_load(preload: Path, tmp_path: Path) -> None:
    """pytest points descriptor 2 at a capture file during a test; the
    report still reaches the process's stderr."""
    captured = tmp_path / "captured.txt"
    got = _crash(preload, code=f"import os; fd = os.open({str(captured)!r}, os.O_WRONLY | "
                               f"os.O_CREAT); os.dup2(fd, 2); " + SEGV)
    assert got.returncode == -signal.SIGSEGV, got.stderr
    assert "[native] signal 11" in got.stderr, got.stderr
    assert "the instruction pointer is in: " in got.stderr and "libc.so" in got.stderr
    assert "[native]" not in captured.read_text()


def test_report_file_and_installs(preload: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.txt"
    env = _clean_env()
    env.update(LD_PRELOAD=str(preload), NATIVE_BACKTRACE_FILE=str(report),
               NATIVE_BACKTRACE_INSTALLS="1")
    got = subprocess.run([sys.executable, "-c", "import faulthandler; faulthandler.enable(); "
                          + SEGV], env=env, capture_output=True, text=True, timeout=60)
    assert got.returncode == -signal.SIGSEGV, got.stderr
    text = report.read_text()
    assert "[native] signal 11 at address" in text
    # faulthandler's installation, then its Python stack on stderr
    assert "[native] signal 11: " in text and " installs handler 0x" in text, text
    assert "Fatal Python error: Segmentation fault" in got.stderr
