"""Every example runs to completion on the active platform."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PLATFORM

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(script: Path) -> None:
    env = dict(os.environ)
    if PLATFORM in ("emulated", "cuda"):
        env["HIPFILE_PLATFORM"] = PLATFORM
    env["PYTHONWARNINGS"] = "ignore::UserWarning"
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MISMATCH" not in proc.stdout
    assert proc.stdout.strip(), "an example says what it did"


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 2
