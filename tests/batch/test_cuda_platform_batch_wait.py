"""The cuda platform's bounded batch wait, on a machine without a GPU.

The platform's ``libhipfile.so`` is built here and run over a stand-in for
libcufile (``tests/cuda_fake/fake_cufile.c``) whose ``cuFileBatchIOGetStatus``
ignores its timeout, as a library that cannot be trusted with it would. A
bounded ``hipFileBatchIOGetStatus`` must still return at its timeout, never
hand the timeout to cuFile, and report every entry once. Mirrors cuda-python's
``test_batch_io_large_operations`` (every cookie reported, bytes as asked).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hipfile.enums import OpError

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "cuda_fake"


@pytest.fixture(scope="module")
def built(cuda_platform_lib: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    fake = tmp_path_factory.mktemp("fake-cufile") / "libfakecufile.so"
    subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O1", "-Wall", "-Werror",
                    "-I", str(ROOT / "platforms/cuda/src"), str(FAKE / "fake_cufile.c"),
                    "-o", str(fake), "-lpthread"], check=True, capture_output=True)
    return cuda_platform_lib / "libhipfile.so", fake


def _run(built: tuple[Path, Path], tmp_path: Path, case: str, delay_us: int = 0,
         wait: str | None = None) -> dict[str, Any]:
    lib, fake = built
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(8 * 4096))
    env = dict(os.environ, HIPFILE_CUFILE_LIBRARY=str(fake), HIPFILE_CUDA_SKIP_SYSTEM_CHECK="1",
               FAKE_CUFILE_DELAY_US=str(delay_us), CUFILE_LOGFILE_PATH=str(tmp_path / "log"))
    env.pop("HIPFILE_CUDA_BATCH_WAIT", None)
    if wait is not None:
        env["HIPFILE_CUDA_BATCH_WAIT"] = wait
    proc = subprocess.run([sys.executable, str(FAKE / "batch_wait_worker.py"), str(lib),
                           str(data), case], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_ready_entries_are_reported_once(built: tuple[Path, Path], tmp_path: Path) -> None:
    out = _run(built, tmp_path, "ready")
    assert out["full"][:2] == [0, 8]
    assert out["cookies"] == list(range(1, 9))
    assert out["rets"] == [4096]
    assert out["data_ok"] is True
    assert out["timed_calls"] == 0


def test_bounded_wait_returns_at_its_timeout(built: tuple[Path, Path], tmp_path: Path) -> None:
    """Entries that complete 0.4 s late: a 0.05 s wait comes back empty in
    time (the stand-in would have held it 0.4 s), a 5 s wait gets all 8."""
    out = _run(built, tmp_path, "late", delay_us=400_000)
    err, nr, took = out["short"]
    assert (err, nr) == (0, 0)
    assert took < 0.3
    assert out["full"][:2] == [0, 8]
    assert out["cookies"] == list(range(1, 9))
    assert out["data_ok"] is True
    assert out["timed_calls"] == 0


def test_cufile_wait_is_still_available(built: tuple[Path, Path], tmp_path: Path) -> None:
    """HIPFILE_CUDA_BATCH_WAIT=cufile hands the timeout to cuFile, which
    here ignores it."""
    out = _run(built, tmp_path, "late", delay_us=400_000, wait="cufile")
    err, nr, took = out["short"]
    assert (err, nr) == (0, 8) and took >= 0.3
    assert out["timed_calls"] == 2


def test_bad_timespecs_are_refused(built: tuple[Path, Path], tmp_path: Path) -> None:
    out = _run(built, tmp_path, "bad")
    invalid = int(OpError.INVALID_VALUE)
    assert out["0,-1"] == out["-1,0"] == out["0,1000000000"] == invalid
    assert out["drained"] == [0, 8]
    assert out["timed_calls"] == 0
