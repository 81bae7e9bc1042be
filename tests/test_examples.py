"""Every example runs to completion on the active platform."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _platform import PLATFORM

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


# Bad arguments of every example: usage errors (argparse's message, exit 2),
# never a traceback.
BAD_ARGUMENTS = [
    ("kv_cache_layerwise", ["--layers", "0"], "--layers: '0' must be positive"),
    ("kv_cache_layerwise", ["--layers", "-3"], "--layers: '-3' must be positive"),
    ("kv_cache_layerwise", ["--chunk-kib", "0"], "--chunk-kib: '0' must be positive"),
    ("kv_cache_layerwise", ["--chunk-kib", "lots"], "--chunk-kib: 'lots' is not an integer"),
    ("kv_cache_layerwise", ["--file", "/nonexistent/kv.bin"], "does not exist"),
    ("parallel_load", ["--size", "0"], "--size: '0' must be positive"),
    ("parallel_load", ["--task-size", "-1"], "--task-size: '-1' must be positive"),
    ("parallel_load", ["--chunk", "0"], "--chunk: '0' must be positive"),
    ("lmcache_gds_backend", ["--chunks", "0"], "--chunks: '0' must be positive"),
    ("lmcache_gds_backend", ["--streams", "-1"], "--streams: '-1' must be positive"),
    ("lmcache_gds_backend", ["--location", "/nonexistent"], "is not a folder"),
    ("vllm_kv_connector", ["--layers", "0"], "--layers: '0' must be positive"),
    ("vllm_kv_connector", ["--task-size", "0"], "--task-size: '0' must be positive"),
    ("vllm_kv_connector", ["--repeats", "x"], "--repeats: 'x' is not an integer"),
    ("vllm_kv_connector", ["--blocks", "1"], "--blocks must be at least 2"),
    ("vllm_kv_connector", ["--dir", "/nonexistent/a/b"], "does not exist"),
    ("load_checkpoint", ["--layers", "0"], "--layers: '0' must be positive"),
    ("load_checkpoint", ["--ranks", "x"], "--ranks: 'x' is not an integer"),
    ("load_checkpoint", ["--framework", "np"], "invalid choice: 'np'"),
]


@pytest.mark.parametrize(("name", "args", "message"), BAD_ARGUMENTS,
                         ids=[f"{n}{' '.join(a)}" for n, a, _ in BAD_ARGUMENTS])
def test_example_bad_arguments_are_usage_errors(name: str, args: list[str],
                                                message: str) -> None:
    script = next(p for p in EXAMPLES if p.stem == name)
    env = dict(os.environ)
    if PLATFORM in ("emulated", "cuda"):
        env["HIPFILE_PLATFORM"] = PLATFORM
    proc = subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "usage: " in proc.stderr and message in proc.stderr, proc.stderr
    assert proc.stdout == ""


def _system_hip_runtime() -> bool:
    """Whether a HIP runtime is reachable without ROCM_PATH (a ROCm machine)."""
    import ctypes.util

    return (ctypes.util.find_library("amdhip64") is not None
            or Path("/opt/rocm/lib/libamdhip64.so").exists())


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_without_a_runtime_says_what_to_set(script: Path, tmp_path: Path) -> None:
    """With no platform activated and no HIP runtime or libhipfile to find,
    an example exits non-zero with one line naming HIPFILE_PLATFORM=emulated
    (not a traceback from hipMalloc's dlopen)."""
    if _system_hip_runtime():
        pytest.skip("a HIP runtime is installed system-wide: the example would run")
    env = {k: v for k, v in os.environ.items()
           if k not in ("HIPFILE_PLATFORM", "LD_LIBRARY_PATH", "LD_PRELOAD")}
    env.update(ROCM_PATH=str(tmp_path), HIPFILE_LIBRARY=str(tmp_path / "libhipfile.so"))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"HIPFILE_PLATFORM=emulated python examples/{script.name}" in lines[0]
    assert "libamdhip64.so" in lines[0]


def _run_example(name: str, args: list[str], cwd: Path,
                 extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    script = next(p for p in EXAMPLES if p.stem == name)
    env = dict(os.environ)
    if PLATFORM in ("emulated", "cuda"):
        env["HIPFILE_PLATFORM"] = PLATFORM
    env["PYTHONWARNINGS"] = "ignore::UserWarning"
    env.update(extra_env or {})
    return subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True,
                          text=True, timeout=300, cwd=cwd, check=False)


def test_kv_cache_layerwise_keeps_an_existing_file(tmp_path: Path) -> None:
    """--file naming an existing file is a usage error unless --overwrite."""
    existing = tmp_path / "existing.bin"
    existing.write_bytes(b"keep me")
    proc = _run_example("kv_cache_layerwise", ["--file", str(existing), "--layers", "2"],
                        tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "exists; pass --overwrite to replace it" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert existing.read_bytes() == b"keep me"
    proc = _run_example("kv_cache_layerwise",
                        ["--file", str(existing), "--layers", "2", "--overwrite"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert existing.stat().st_size == 2 * 256 * 1024


@pytest.mark.parametrize("exists", [False, True])
def test_vllm_kv_connector_leaves_nothing_in_its_folder(tmp_path: Path, exists: bool) -> None:
    folder = tmp_path / "kv"
    if exists:
        folder.mkdir()
        (folder / "mine.txt").write_text("x")
    proc = _run_example("vllm_kv_connector",
                        ["--dir", str(folder), "--layers", "2", "--blocks", "2"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if exists:
        assert sorted(p.name for p in folder.iterdir()) == ["mine.txt"]
    else:
        assert not folder.exists()


def _torch_sees_a_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.mark.parametrize("torch_present", [True, False], ids=["torch", "no-torch"])
def test_load_checkpoint_pt_without_torch_or_gpu_says_so_in_one_line(
        tmp_path: Path, torch_present: bool) -> None:
    extra = {}
    if torch_present:
        if _torch_sees_a_gpu():
            pytest.skip("torch sees a GPU here: --framework pt runs")
    else:
        hidden = tmp_path / "hide"
        hidden.mkdir()
        (hidden / "torch.py").write_text("raise ImportError('No module named torch')\n")
        extra["PYTHONPATH"] = os.pathsep.join(
            [str(hidden), *filter(None, [os.environ.get("PYTHONPATH")])])
    proc = _run_example("load_checkpoint", ["--framework", "pt", "--layers", "1"], tmp_path,
                        extra)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("load_checkpoint.py: --framework pt needs torch")
