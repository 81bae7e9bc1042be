"""PlatformWarning in downstream CI: a quiet opt-in, and a category that
warning filters (pytest's ``filterwarnings``/``-W``) can name."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.emulated

CLEARED = ("ROCM_PATH", "HIPFILE_PLATFORM", "HIPFILE_LIBRARY", "HIPFILE_PLATFORM_QUIET",
           "PYTHONWARNINGS")

TEST_MODULE = """
import hipfile

def test_version():
    assert hipfile.get_version() >= (0, 0, 0)
"""


def run_downstream(project: Path, filters: list[str] | None, *args: str,
                   **env: str) -> subprocess.CompletedProcess[str]:
    """Run pytest on a one-test project that imports hipfile."""
    project.mkdir(exist_ok=True)
    (project / "test_downstream.py").write_text(TEST_MODULE)
    ini = "[tool.pytest.ini_options]\n"
    if filters is not None:
        ini += "filterwarnings = [" + ", ".join(f'"{f}"' for f in filters) + "]\n"
    (project / "pyproject.toml").write_text(ini)
    clean = {k: v for k, v in os.environ.items() if k not in CLEARED}
    clean["HIPFILE_PLATFORM"] = "emulated"
    clean.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project, env=clean, capture_output=True, text=True, timeout=120, check=False)


def test_loud_by_default_under_error(tmp_path: Path) -> None:
    proc = run_downstream(tmp_path / "p", ["error"])
    assert proc.returncode != 0
    assert "PlatformWarning" in proc.stdout + proc.stderr
    assert "HIPFILE_PLATFORM_QUIET" in proc.stdout + proc.stderr


def test_shown_in_summary_without_filters(tmp_path: Path) -> None:
    proc = run_downstream(tmp_path / "p", None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PlatformWarning" in proc.stdout
    assert "1 passed, 1 warning" in proc.stdout


def test_ignore_filter_by_category_name(tmp_path: Path) -> None:
    proc = run_downstream(tmp_path / "p",
                          ["error", "ignore::hipfile.platforms.PlatformWarning"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
    assert "PlatformWarning" not in proc.stdout + proc.stderr


def test_ignore_option_on_command_line(tmp_path: Path) -> None:
    proc = run_downstream(tmp_path / "p", ["error"],
                          "-W", "ignore::hipfile.platforms.PlatformWarning")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_error_option_on_command_line(tmp_path: Path) -> None:
    proc = run_downstream(tmp_path / "p", None,
                          "-W", "error::hipfile.platforms.PlatformWarning")
    assert proc.returncode != 0
    assert "PlatformWarning" in proc.stdout + proc.stderr
    assert "1 passed" not in proc.stdout


@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_quiet_environment_variable(tmp_path: Path, value: str) -> None:
    proc = run_downstream(tmp_path / "p", ["error"], HIPFILE_PLATFORM_QUIET=value)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
    assert "warning" not in proc.stdout


def test_quiet_zero_keeps_the_warning(tmp_path: Path) -> None:
    proc = run_downstream(tmp_path / "p", ["error"], HIPFILE_PLATFORM_QUIET="0")
    assert proc.returncode != 0
    assert "PlatformWarning" in proc.stdout + proc.stderr


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in CLEARED}
    clean.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=clean,
                          capture_output=True, text=True, timeout=120, check=False)


def test_quiet_value_is_validated() -> None:
    proc = run_python("import hipfile", HIPFILE_PLATFORM="emulated",
                      HIPFILE_PLATFORM_QUIET="maybe")
    assert proc.returncode != 0
    assert "HIPFILE_PLATFORM_QUIET='maybe' is not a boolean" in proc.stderr


def test_activate_quiet_argument() -> None:
    proc = run_python("""
        import warnings
        warnings.simplefilter("error")
        from hipfile import platforms
        platforms.activate("emulated", quiet=True)
        print(platforms.active())
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "emulated"
    proc = run_python("""
        import warnings
        from hipfile import platforms
        with warnings.catch_warnings(record=True) as log:
            warnings.simplefilter("always")
            platforms.activate("emulated")
        print([w.category.__name__ for w in log])
    """, HIPFILE_PLATFORM_QUIET="1")
    assert proc.stdout.strip() == "[]", proc.stderr
    proc = run_python("""
        import warnings
        from hipfile import platforms
        with warnings.catch_warnings(record=True) as log:
            warnings.simplefilter("always")
            platforms.activate("emulated", quiet=False)
        print([w.category.__name__ for w in log])
    """, HIPFILE_PLATFORM_QUIET="1")
    assert proc.stdout.strip() == "['PlatformWarning']", proc.stderr


@pytest.mark.parametrize(("script", "line"), [
    ("import os\nimport hipfile\n", 2),
    ("import os\nfrom hipfile import platforms\n\nplatforms.activate('emulated')\n", 4),
])
def test_warning_points_at_the_users_line(tmp_path: Path, script: str, line: int) -> None:
    path = tmp_path / "user_script.py"
    path.write_text(script)
    clean = {k: v for k, v in os.environ.items() if k not in CLEARED}
    if "activate" not in script:
        clean["HIPFILE_PLATFORM"] = "emulated"
    proc = subprocess.run([sys.executable, "-W", "always", str(path)], env=clean,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert f"{path}:{line}: PlatformWarning" in proc.stderr
    assert "hipfile/__init__.py" not in proc.stderr
