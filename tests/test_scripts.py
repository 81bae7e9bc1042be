"""Examples and benchmarks: --help with a text for every option, no silent
switch to a test platform, temporary files removed."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "examples").glob("*.py")) + sorted(
    p for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))
BENCHMARKS = [p for p in SCRIPTS if p.parent.name == "benchmarks"]
CLEARED = ("ROCM_PATH", "HIPFILE_PLATFORM", "HIPFILE_LIBRARY", "PYTHONWARNINGS")


def env(tmp: Path, **extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in CLEARED}
    clean["TMPDIR"] = str(tmp)
    clean.update(extra)
    return clean


def run(script: Path, *args: str, tmp: Path, timeout: float = 300,
        **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(script), *args], env=env(tmp, **extra),
                          capture_output=True, text=True, timeout=timeout, check=False)


def load(script: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(script.parent))
    spec = importlib.util.spec_from_file_location(f"_script_{script.stem}", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_every_option_has_help(script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parser = load(script, monkeypatch).build_parser()
    assert isinstance(parser, argparse.ArgumentParser)
    assert parser.description
    for action in parser._actions:
        assert action.help, f"{script.name}: {action.option_strings} has no help"


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_help_does_no_work(script: Path, tmp_path: Path) -> None:
    proc = run(script, "--help", tmp=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("script", BENCHMARKS, ids=[p.stem for p in BENCHMARKS])
def test_benchmarks_never_switch_platform_silently(script: Path, tmp_path: Path) -> None:
    if Path("/opt/rocm/lib/libamdhip64.so").exists():
        pytest.skip("a ROCm install is present")
    proc = run(script, tmp=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert "pass --platform emulated" in proc.stderr
    assert "platform:" not in proc.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.emulated
@pytest.mark.parametrize(("name", "args"), [
    ("bench_sync_read", ["--size-mib", "2", "--repeats", "1", "--task-mib", "1"]),
    ("bench_kv_layerwise", ["--layers", "2", "--layer-mib", "1", "--repeats", "1",
                            "--dim", "64", "--matmuls", "1"]),
    ("bench_submit", ["--ops", "200", "--repeats", "1"]),
    ("bench_vllm", ["--layers", "2", "--requests", "1,2", "--repeats", "1",
                    "--compute-iters", "2"]),
    ("bench_addresses", ["--rows", "40", "--tensors", "4", "--block-kib", "4",
                         "--repeats", "1"]),
    ("bench_lone_call", ["--calls", "10", "--size", "262144"]),
])
def test_benchmarks_print_the_platform_and_clean_up(name: str, args: list[str],
                                                    tmp_path: Path) -> None:
    if name == "bench_submit":
        pytest.importorskip("Cython", reason="bench_submit needs the bench extra (Cython)")
    if name == "bench_vllm" and os.environ.get("CI") != "true":
        pytest.importorskip("vllm", reason="bench_vllm needs vLLM: pip install 'hipfile[vllm]'")
    script = ROOT / "benchmarks" / f"{name}.py"
    proc = run(script, "--platform", "emulated", *args, tmp=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("platform: emulated (a test platform, not AMD's ROCm")
    assert "PlatformWarning" not in proc.stderr
    assert list(tmp_path.iterdir()) == [], "temporary files left behind"


@pytest.mark.emulated
def test_environment_choice_is_printed(tmp_path: Path) -> None:
    script = ROOT / "benchmarks" / "bench_sync_read.py"
    proc = run(script, "--size-mib", "1", "--repeats", "1", "--task-mib", "1", tmp=tmp_path,
               HIPFILE_PLATFORM="emulated")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("platform: emulated")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.emulated
def test_parallel_load_options(tmp_path: Path) -> None:
    script = ROOT / "examples" / "parallel_load.py"
    proc = run(script, "--size", str((200 << 10) + 3), "--task-size", "65536", "--chunk",
               "1024", tmp=tmp_path, HIPFILE_PLATFORM="emulated", HIPFILE_PLATFORM_QUIET="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "batch (201 entries)" in proc.stdout  # more than one batch of 128
    assert "MISMATCH" not in proc.stdout
    proc = run(script, "--chunk", "0", tmp=tmp_path, HIPFILE_PLATFORM="emulated",
               HIPFILE_PLATFORM_QUIET="1")
    assert proc.returncode == 2
    assert "argument --chunk: '0' must be positive" in proc.stderr
