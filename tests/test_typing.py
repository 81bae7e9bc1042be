"""Static checks: the package's types serve a strictly typed caller, and the
package itself passes mypy --strict and ruff."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hipfile

REPO = Path(__file__).resolve().parent.parent

GOOD = """
    import ctypes
    import os

    import hipfile
    from hipfile import Buffer, Driver, FileHandle, OpError


    def load(path: str, ptr: int, n: int) -> int:
        with Driver(), hipfile.open(path) as fh, Buffer(ptr, n) as buf:
            got: int = fh.read(buf, n, 0, 0)
            got += fh.write(buf)
        return got


    def upstream(path: str, ptr: ctypes.c_void_p, n: int) -> int:
        with FileHandle(path, os.O_RDONLY | os.O_DIRECT) as fh:
            with Buffer.from_ctypes_void_p(ptr, n, 0) as buf:
                return fh.read(buf, n, 0, 0)


    def props() -> int:
        p = hipfile.driver_get_properties()
        flags: hipfile.FeatureFlags = p.features
        return p.feature_flags + p["max_batch_io_count"] + int(flags)


    def version() -> tuple[int, int, int]:
        return hipfile.get_version()


    def classify(e: hipfile.HipFileException) -> bool:
        return e.err is OpError.INVALID_VALUE and e.hip_err == 0 and e.hipfile_err > 0


    def config() -> int | bool | str:
        hipfile.set_parameter(hipfile.BoolConfigParameter.PROFILE_NVTX, True)
        return hipfile.get_parameter(hipfile.SizeTConfigParameter.PROFILE_STATS)


    def fast_path_bytes(pid: int) -> int:
        # the statistics classes are the package's names too (re-exported
        # from hipfile.stats, which a strict caller sees)
        from hipfile import StatsContext

        with StatsContext(pid) as stats:
            report: hipfile.StatsReport = stats.report()
        return report.fastpath_read.bytes


    def handle(fh: FileHandle) -> int | None:
        reveal_type(fh.read)
        return fh.handle
"""

BAD = """
    import hipfile

    major: str = hipfile.get_version()
    count: str = hipfile.Driver.use_count()
    hipfile.Buffer(1, 2).register(3)
"""


def _mypy(tmp: Path, name: str, source: str) -> subprocess.CompletedProcess[str]:
    path = tmp / name
    path.write_text(textwrap.dedent(source))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--cache-dir", str(tmp / ".mypy_cache"), "--config-file", str(REPO / "pyproject.toml"),
         str(path)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )


@pytest.fixture(scope="module")
def mypy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mypy")
    return tmp_path_factory.mktemp("typing")


def test_strictly_typed_usage(mypy_dir: Path) -> None:
    proc = _mypy(mypy_dir, "good.py", GOOD)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    notes = [line for line in lines if ": note: " in line]
    errors = [line for line in lines if ": error: " in line]
    assert errors == [], proc.stdout + proc.stderr
    assert len(notes) == 1
    assert "def (buffer: Any, size: int | None =, file_offset: int =, buffer_offset: int =, " \
        "*, task_size: int | None =) -> int" in notes[0].replace("builtins.", "")


def test_type_errors_are_caught(mypy_dir: Path) -> None:
    proc = _mypy(mypy_dir, "bad.py", BAD)
    errors = [line for line in proc.stdout.splitlines() if ": error: " in line]
    assert len(errors) == 3, proc.stdout + proc.stderr
    assert "bad.py:4:" in errors[0] and "Incompatible types in assignment" in errors[0]
    assert "bad.py:5:" in errors[1] and "Incompatible types in assignment" in errors[1]
    assert "bad.py:6:" in errors[2] and "Too many arguments" in errors[2]


def test_package_passes_mypy_strict(mypy_dir: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(mypy_dir / ".mypy_cache"), "hipfile"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_package_passes_ruff() -> None:
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    proc = subprocess.run([ruff, "check", "--no-cache", "hipfile"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_help_of_the_package_names_safetensors() -> None:
    """help(hipfile)'s overview (its description, above the list of
    submodules) names hipfile.safetensors."""
    import pydoc

    text = pydoc.render_doc(hipfile, renderer=pydoc.plaintext)
    overview = text.split("PACKAGE CONTENTS")[0]
    assert "hipfile.safetensors" in overview


@pytest.mark.parametrize("name", ["read_async", "write_async"])
def test_async_methods_have_type_hints(name: str) -> None:
    """help(hipfile.FileHandle) shows read_async/write_async with their
    hints, as the .pyi stub declares them."""
    import inspect
    import pydoc

    sig = inspect.signature(getattr(hipfile.FileHandle, name))
    assert str(sig.return_annotation) == "AsyncIOHandle"
    offset = "int" if name == "read_async" else "int | None"   # None: an append handle's end
    assert [str(p.annotation) for p in sig.parameters.values()][1:] == [
        "Any", "int | None", offset, "int", "Any"]
    text = pydoc.render_doc(hipfile.FileHandle, renderer=pydoc.plaintext)
    line = next(x for x in text.splitlines() if x.strip(" |").startswith(f"{name}("))
    assert "-> 'AsyncIOHandle'" in line and "size: 'int | None' = None" in line


def test_compat_cufile_namespace_is_clean() -> None:
    """dir(hipfile.compat.cufile) lists cufile-python's names, not the
    module's own imports."""
    from hipfile.compat import cufile

    public = [n for n in dir(cufile) if not n.startswith("_")]
    assert set(public) <= {*cufile.__all__, "bindings"}
    for helper in ("Any", "atexit", "ctypes", "os", "threading", "errno", "annotations"):
        assert helper not in dir(cufile)
    assert {"CuFile", "CuFileDriver", "__name__", "__doc__"} <= set(dir(cufile))
