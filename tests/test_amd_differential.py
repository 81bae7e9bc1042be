"""The emulated libhipfile answers as AMD's own library does.

The same C-level cases (``_differential_cases.py``) run in two subprocesses,
one over AMD's libhipfile (a prefix made from ``../shared/amd-hipfile``) and
one over the emulated platform, both on the emulated HIP runtime. Return
values, errno, bytes moved and error codes must agree, except for the
differences listed in :data:`DIFFERENCES` (also listed, with their reasons,
in ``platforms/emulated/README.md``). Skipped when AMD's library is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _amd import ABSENT, amd_dir, make_prefix

from hipfile import platforms

HERE = Path(__file__).resolve().parent
NOT_IMPLEMENTED = 5030

# Where the emulated platform keeps its own answer, and why.
DIFFERENCES = {
    # AMD 0.2.0 does not implement these (5030); ours keeps the documented ABI.
    "get_properties": "hipFileDriverGetProperties is not implemented by AMD 0.2.0",
    "get_parameter": "hipFileGetParameter* are not implemented by AMD 0.2.0",
    "set_poll_mode": "hipFileDriverSet* are not implemented by AMD 0.2.0",
    "batch_get_status": "hipFileBatchIOGetStatus is not implemented by AMD 0.2.0",
    # Deliberate.
    "handle_register_bad_arguments": "a closed descriptor is an argument error "
                                     "(AMD: 5030 from the failing system call)",
    "buf_register_ranges": "a zero-length registration is refused (AMD accepts it)",
    "read_async_driver_closed": "closing the driver to 0 drops every handle here, so a "
                                "stale handle is HandleNotRegistered (AMD: InvalidValue)",
}
AMD_NOT_IMPLEMENTED = ("get_properties", "get_parameter", "set_poll_mode", "batch_get_status")


def _run(libdir: Path, libname: str, work: Path) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("HIPFILE_PLATFORM", "ROCM_PATH", "HIPFILE_LIBRARY")}
    proc = subprocess.run([sys.executable, str(HERE / "_differential_cases.py"), str(libdir),
                           libname, str(work)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return results


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    if amd_dir() is None:
        pytest.skip(ABSENT)
    base = tmp_path_factory.mktemp("differential")
    prefix = make_prefix(base / "amd-prefix")
    amd = _run(prefix / "lib", "libhipfile.so.0", base / "amd")
    ours = _run(platforms.prefix("emulated") / "lib", "libhipfile.so", base / "emulated")
    return amd, ours


def _case_names() -> list[str]:
    sys.path.insert(0, str(HERE))
    try:
        import _differential_cases

        return list(_differential_cases.CASES)
    finally:
        sys.path.remove(str(HERE))


@pytest.mark.parametrize("case", _case_names())
def test_same_answer(answers: tuple[dict[str, Any], dict[str, Any]], case: str) -> None:
    amd, ours = answers
    assert "exception" not in amd[case], amd[case]["exception"]
    assert "exception" not in ours[case], ours[case]["exception"]
    if case in DIFFERENCES:
        # a documented difference: if it vanished, drop it from the list
        assert amd[case] != ours[case], f"{case} now matches: remove it from DIFFERENCES"
        if case in AMD_NOT_IMPLEMENTED:
            assert amd[case]["err"] == NOT_IMPLEMENTED
            assert ours[case]["err"] == 0
        return
    assert ours[case] == amd[case]


def test_differences_are_documented() -> None:
    readme = (HERE.parent / "platforms" / "emulated" / "README.md").read_text()
    for case in DIFFERENCES:
        assert f"`{case}`" in readme, case
