"""The hipfile command (python -m hipfile / the hipfile console script),
run in subprocesses on the emulated platform."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import hipfile
from hipfile import cli

pytestmark = pytest.mark.emulated

CLEARED = ("ROCM_PATH", "HIPFILE_PLATFORM", "HIPFILE_LIBRARY", "PYTHONWARNINGS")


def env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in CLEARED}
    clean.update(HIPFILE_PLATFORM="emulated", HIPFILE_PLATFORM_QUIET="1")
    clean.update(extra)
    return clean


def hipfile_cmd(*args: str, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hipfile", *args], env=env(**extra),
                          capture_output=True, text=True, timeout=timeout, check=False)


def bench_leftovers(folder: Path) -> list[Path]:
    return sorted(folder.glob("hipfile-bench-*"))


def test_console_script_is_declared() -> None:
    scripts = [ep for ep in entry_points(group="console_scripts") if ep.name == "hipfile"]
    assert scripts, "the hipfile console script is not installed"
    assert scripts[0].value == "hipfile.cli:main"
    assert scripts[0].load() is cli.main


def test_help_everywhere() -> None:
    top = hipfile_cmd("--help")
    assert top.returncode == 0
    for command in ("info", "bench", "stats"):
        assert command in top.stdout
        sub = hipfile_cmd(command, "--help")
        assert sub.returncode == 0, sub.stderr
        assert "usage: hipfile " + command in sub.stdout
    # every option of every command has a help text
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    for name, sub_parser in subparsers.choices.items():  # type: ignore[attr-defined]
        for action in sub_parser._actions:
            assert action.help, f"{name} {action.dest} has no help"


def test_no_command_is_a_usage_error() -> None:
    proc = hipfile_cmd()
    assert proc.returncode == 2
    assert "usage: hipfile" in proc.stderr


def test_info_json(tmp_path: Path) -> None:
    proc = hipfile_cmd("info", "--json", "--path", str(tmp_path), "--path",
                       str(tmp_path / "missing"))
    assert proc.returncode == 1, proc.stderr     # a folder that is not there fails it
    rep = json.loads(proc.stdout)
    assert rep["platform"] == {"name": "emulated", "test_platform": True,
                               "rocm_path": rep["platform"]["rocm_path"]}
    assert rep["library"]["path"].endswith("libhipfile.so")
    assert rep["library"]["version"].count(".") == 2
    assert rep["hip_python"]
    assert rep["hip"]["count"] >= 1 and rep["hip"]["devices"][0]["name"]
    assert rep["driver"]["properties"]["max_batch_io_count"] == 128
    assert isinstance(rep["driver"]["feature_flags"], list)
    assert rep["defaults"]["task_size"] == 4 << 20
    here, missing = rep["paths"]
    assert here["path"] == str(tmp_path)
    assert here["fs_type"]
    assert isinstance(here["o_direct"]["supported"], bool)
    assert here["fast_path"]["eligible"] is False
    assert any("emulated" in r for r in here["fast_path"]["reasons"])
    assert missing["error"] == "not a folder"
    assert list(tmp_path.iterdir()) == []  # the O_DIRECT probe file is gone


def test_info_path_that_is_not_a_folder_fails(tmp_path: Path) -> None:
    """info --path of a missing folder says "not a folder" and exits 1; of a
    folder, 0."""
    proc = hipfile_cmd("info", "--path", str(tmp_path / "nonexistent"))
    assert proc.returncode == 1
    assert "not a folder" in proc.stdout
    assert hipfile_cmd("info", "--path", str(tmp_path)).returncode == 0


@pytest.mark.parametrize(("platform", "words"), [
    ("cuda", ["platform 'cuda' is not built", "platforms/cuda/build.sh"]),
    ("emulatd", ["unknown platform 'emulatd'", "'emulated', 'cuda' or 'rocm'"]),
])
@pytest.mark.parametrize("how", [["-m", "hipfile"], ["console"]], ids=["module", "console"])
def test_info_with_a_platform_not_built_says_so_in_one_line(
        tmp_path: Path, platform: str, words: list[str], how: list[str]) -> None:
    """HIPFILE_PLATFORM naming a platform that is not built, or no platform:
    one line on stderr saying which and how to build it, exit status 2, no
    traceback; the same through the console script and python -m."""
    extra = {"HIPFILE_PLATFORM": platform, "HIPFILE_CUDA_PREFIX": str(tmp_path / "none")}
    if how == ["console"]:
        script = Path(sys.executable).with_name("hipfile")
        if not script.exists():
            pytest.skip("no console script beside this interpreter")
        cmd = [str(script), "info"]
    else:
        cmd = [sys.executable, *how, "info"]
    proc = subprocess.run(cmd, env=env(**extra), capture_output=True, text=True, timeout=120,
                          check=False)
    if platform == "cuda" and proc.returncode == 0:
        pytest.skip("the cuda platform is built here")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"hipfile info: HIPFILE_PLATFORM={platform}: ")
    for w in words:
        assert w in lines[0]
    assert proc.stdout == ""


def test_import_with_a_platform_not_built_still_fails_outside_the_command() -> None:
    """A program importing hipfile with HIPFILE_PLATFORM=cuda unbuilt still
    fails at import, and the message says how to build it."""
    from _util import run_python

    proc = run_python("import hipfile", HIPFILE_PLATFORM="cuda",
                      HIPFILE_CUDA_PREFIX="/nonexistent")
    if proc.returncode == 0:
        pytest.skip("the cuda platform is built here")
    assert "FileNotFoundError: platform 'cuda' is not built" in proc.stderr
    assert "platforms/cuda/build.sh" in proc.stderr


def test_info_into_a_closed_pipe_exits_quietly() -> None:
    """hipfile info | head -1: the reader has gone; the command exits with
    141 (as a tool killed by SIGPIPE) and prints no BrokenPipeError."""
    read_end, write_end = os.pipe()
    os.close(read_end)                     # the reader is gone before a byte is written
    try:
        proc = subprocess.run([sys.executable, "-m", "hipfile", "info"], env=env(),
                              stdout=write_end, stderr=subprocess.PIPE, text=True,
                              timeout=120, check=False)
    finally:
        os.close(write_end)
    assert "BrokenPipeError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 141
    assert proc.stderr == ""


def test_info_text_names_the_test_platform() -> None:
    proc = hipfile_cmd("info")
    assert proc.returncode == 0, proc.stderr
    assert "platform          : emulated (a TEST platform, not AMD's ROCm)" in proc.stdout
    assert "library version" in proc.stdout
    assert "max_batch_io_count" in proc.stdout


def test_info_prints_each_flag_word_once() -> None:
    proc = hipfile_cmd("info")
    assert proc.returncode == 0, proc.stderr
    for key in ("feature_flags", "status_flags", "control_flags"):
        lines = [line for line in proc.stdout.splitlines() if line.strip().startswith(key)]
        assert len(lines) == 1, proc.stdout
    assert "nvfs_driver_status_flags" not in proc.stdout
    assert "BATCH_IO_SUPPORTED" in proc.stdout


def test_info_without_rocm_names_the_emulated_platform(tmp_path: Path) -> None:
    clean = env(HIPFILE_LIBRARY=str(tmp_path / "libhipfile.so"))
    del clean["HIPFILE_PLATFORM"]
    proc = subprocess.run([sys.executable, "-m", "hipfile", "info"], env=clean,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1
    hint = [line for line in proc.stdout.splitlines() if line.startswith("without a GPU")]
    assert len(hint) == 1 and "HIPFILE_PLATFORM=emulated" in hint[0], proc.stdout
    proc = subprocess.run([sys.executable, "-m", "hipfile", "info", "--json"], env=clean,
                          capture_output=True, text=True, timeout=120, check=False)
    assert "HIPFILE_PLATFORM=emulated" in json.loads(proc.stdout)["hint"]
    # and not on a platform that works
    assert "hint" not in json.loads(hipfile_cmd("info", "--json").stdout)


def test_info_reports_a_missing_library(tmp_path: Path) -> None:
    proc = hipfile_cmd("info", "--json", HIPFILE_LIBRARY=str(tmp_path / "nope.so"))
    assert proc.returncode == 1
    rep = json.loads(proc.stdout)
    assert "error" in rep["library"]
    assert rep["driver"]["error"] == "the library could not be loaded"


AMD_PREFIX_SCRIPT = Path(__file__).resolve().parent.parent.parent / "shared" / "amd-hipfile" \
    / "make-prefix.sh"


@pytest.mark.skipif(not AMD_PREFIX_SCRIPT.is_file(), reason="AMD's libhipfile is not here")
def test_info_with_amd_library_reports_5030(tmp_path: Path) -> None:
    subprocess.run(["bash", str(AMD_PREFIX_SCRIPT), str(tmp_path / "amd")], env=env(),
                   check=True, capture_output=True, timeout=120)
    clean = env(ROCM_PATH=str(tmp_path / "amd"))
    del clean["HIPFILE_PLATFORM"]
    proc = subprocess.run([sys.executable, "-m", "hipfile", "info", "--json"], env=clean,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["library"]["path"].startswith(str(tmp_path / "amd"))
    assert rep["driver"] == {"error": "hipFileDriverGetProperties is not implemented by "
                                      "this library (hipFileInternalError 5030)"}


def test_path_report_honours_the_library_environment(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    fs = cli.path_report(str(tmp_path), "rocm")["fs_type"]
    monkeypatch.setenv("HIPFILE_UNSUPPORTED_FILE_SYSTEMS", f"nfs,{fs}")
    monkeypatch.setenv("HIPFILE_FORCE_COMPAT_MODE", "true")
    rep = cli.path_report(str(tmp_path), "rocm")
    assert rep["fast_path"]["eligible"] is False
    reasons = " | ".join(rep["fast_path"]["reasons"])
    assert f"HIPFILE_UNSUPPORTED_FILE_SYSTEMS lists {fs!r}" in reasons
    assert "HIPFILE_FORCE_COMPAT_MODE=true" in reasons


def test_path_report_without_a_test_platform(tmp_path: Path) -> None:
    rep = cli.path_report(str(tmp_path), "rocm")
    reasons = rep["fast_path"]["reasons"]
    assert not any("emulated" in r for r in reasons)
    assert rep["fast_path"]["eligible"] == (not reasons)
    if rep["fs_type"] not in cli.DIRECT_FILE_SYSTEMS:
        assert any(rep["fs_type"] in r for r in reasons)
    if rep["o_direct"]["supported"]:
        assert rep["o_direct"]["alignment"] in (512, 1024, 2048, 4096, 8192, 16384, 65536)


def test_bench_refuses_the_emulated_platform(tmp_path: Path) -> None:
    proc = hipfile_cmd("bench", "--json", "--size", "1M", "--path", str(tmp_path))
    assert proc.returncode == 2
    assert "--allow-emulated" in proc.stderr
    assert proc.stdout == ""
    assert bench_leftovers(tmp_path) == []


def test_bench_json_on_the_emulated_platform(tmp_path: Path) -> None:
    proc = hipfile_cmd("bench", "--allow-emulated", "--json", "--size", "4M", "1M",
                       "--io", "sync", "pread", "pool", "async", "batch", "--threads", "1", "2",
                       "--task-size", "1M", "--repeat", "2", "--path", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["platform"] == "emulated" and rep["emulated"] is True
    results = rep["results"]
    # 2 sizes x 2 modes x (sync 1 + pread 1 + pool 2 threads + async 1 + batch 1)
    assert len(results) == 2 * 2 * 6
    for r in results:
        assert r["emulated"] is True
        assert r["mode"] in ("read", "write")
        assert len(r["seconds"]) == 2
        assert r["best_gib_s"] > 0 and r["best_gib_s"] >= r["mean_gib_s"]
    assert {r["io"] for r in results} == {"sync", "pread", "pool", "async", "batch"}
    assert {r["threads"] for r in results if r["io"] == "pool"} == {1, 2}
    assert {r["threads"] for r in results if r["io"] != "pool"} == {None}
    # plain progress lines go to stderr, labelled
    assert "[EMULATED]" in proc.stderr
    assert bench_leftovers(tmp_path) == []


def test_bench_stream_engine_kind(tmp_path: Path) -> None:
    proc = hipfile_cmd("bench", "--allow-emulated", "--json", "--size", "3M", "1M",
                       "--io", "stream", "--task-size", "256K", "1M", "--repeat", "2",
                       "--path", str(tmp_path), HIPFILE_ENGINE_THREADS="3")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    # 2 sizes x 2 modes x 2 task sizes
    assert len(results) == 2 * 2 * 2
    assert {r["io"] for r in results} == {"stream"}
    assert {r["mode"] for r in results} == {"read", "write"}
    assert {r["task_size"] for r in results} == {256 << 10, 1 << 20}
    assert {r["threads"] for r in results} == {None}
    assert all(r["best_gib_s"] > 0 and len(r["seconds"]) == 2 for r in results)
    assert bench_leftovers(tmp_path) == []


def test_bench_stream_engine_error_is_reported(tmp_path: Path) -> None:
    proc = hipfile_cmd("bench", "--allow-emulated", "--size", "1M", "--io", "stream",
                       "--repeat", "1", "--path", str(tmp_path), HIPFILE_ENGINE_TASK_SIZE="0")
    assert proc.returncode == 1
    assert "HIPFILE_ENGINE_TASK_SIZE" in proc.stderr
    assert bench_leftovers(tmp_path) == []


def test_bench_text_labels_every_figure(tmp_path: Path) -> None:
    proc = hipfile_cmd("bench", "--allow-emulated", "--quiet", "--size", "256K",
                       "--mode", "read", "--repeat", "1", "--path", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if "GiB/s" in ln]
    assert len(lines) == 2  # sync and pread
    assert all(ln.endswith("[EMULATED]") for ln in lines)
    assert bench_leftovers(tmp_path) == []


@pytest.mark.parametrize("args", [
    ["--size", "lots"], ["--size", "0"], ["--threads", "0"], ["--io", "gds"],
    ["--mode", "sideways"], ["--repeat", "-1"],
])
def test_bench_bad_arguments(args: list[str]) -> None:
    proc = hipfile_cmd("bench", "--allow-emulated", *args)
    assert proc.returncode == 2
    assert "usage: hipfile bench" in proc.stderr


def test_bench_negative_size_is_not_positive() -> None:
    proc = hipfile_cmd("bench", "--allow-emulated", "--size", "-1")
    assert proc.returncode == 2
    assert "usage: hipfile bench" in proc.stderr
    assert "argument --size: '-1' must be positive" in proc.stderr


def test_bench_too_large_for_the_device_fails_before_writing(tmp_path: Path) -> None:
    t0 = time.monotonic()
    proc = hipfile_cmd("bench", "--allow-emulated", "--size", "2G", "--path", str(tmp_path),
                       HIPFILE_EMU_DEVICE_MEMORY="1G")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("hipfile bench: --size 2 GiB does not fit in the device's "
                               "memory (1.0 GiB free of 1.0 GiB)"), lines[0]
    assert time.monotonic() - t0 < 30
    assert proc.stdout == "" and bench_leftovers(tmp_path) == []


def test_bench_too_large_for_the_disk_fails_before_writing(tmp_path: Path) -> None:
    st = os.statvfs(tmp_path)
    size = (st.f_bavail * st.f_frsize >> 30) + 2 << 30   # whole GiB, past the free space
    t0 = time.monotonic()
    proc = hipfile_cmd("bench", "--allow-emulated", "--size", str(size), "--path",
                       str(tmp_path), HIPFILE_EMU_DEVICE_MEMORY=str(2 * size))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "does not fit in the free space of " + str(tmp_path) in lines[0], lines[0]
    assert "give a smaller --size or another --path" in lines[0]
    assert time.monotonic() - t0 < 30
    assert bench_leftovers(tmp_path) == []


def test_bench_bad_folder(tmp_path: Path) -> None:
    proc = hipfile_cmd("bench", "--allow-emulated", "--path", str(tmp_path / "nope"))
    assert proc.returncode == 2
    assert "is not a folder" in proc.stderr


def test_bench_removes_its_files_on_failure(tmp_path: Path) -> None:
    # a bad setting, read once the benchmark's file exists, makes the run fail
    proc = hipfile_cmd("bench", "--allow-emulated", "--size", "64K", "--path", str(tmp_path),
                       "--io", "batch", "--repeat", "1", "--task-size", "4K",
                       HIPFILE_BATCH_MAX_ENTRIES="999")
    assert proc.returncode == 1
    assert "hipfile bench: failed (ValueError: HIPFILE_BATCH_MAX_ENTRIES" in proc.stderr
    assert bench_leftovers(tmp_path) == []


def interrupted(args: list[str], started: Callable[[], bool], settle: float
                ) -> tuple[subprocess.Popen[str], str, str]:
    """Run ``python -m hipfile ARGS``, wait until ``started()`` is true (at
    most 60 s) and ``settle`` seconds more, then send SIGINT; returns the
    process and its output. Kills the process if anything fails."""
    proc = subprocess.Popen([sys.executable, "-m", "hipfile", *args], env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not started() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started(), "the command never started"
        time.sleep(settle)
        assert proc.poll() is None, "the command ended before it was interrupted"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc, out, err


def test_bench_removes_its_files_when_interrupted(tmp_path: Path) -> None:
    proc, _, err = interrupted(
        ["bench", "--allow-emulated", "--size", "8M", "--io", "sync", "--task-size", "4K",
         "--repeat", "100000", "--path", str(tmp_path)],
        lambda: bool(bench_leftovers(tmp_path)), 0.5)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert bench_leftovers(tmp_path) == []


STATS_TARGET = """
import sys, warnings
warnings.simplefilter("ignore")
import hipfile
from hip import hip
path, size = sys.argv[1], int(sys.argv[2])
err, dev = hip.hipMalloc(size)
assert err == 0, err
with open(path, "wb") as f:
    f.write(bytes(range(256)) * (size // 256))
with hipfile.Driver(), hipfile.open(path, "r+") as fh:
    for _ in range(2):
        assert fh.read(hipfile.Buffer(int(dev), size)) == size
hip.hipFree(dev)
print("ready", flush=True)
sys.stdin.read()
"""


def test_stats_prints_the_report_of_another_process(tmp_path: Path) -> None:
    from hipfile import StatsReport

    size = 1 << 16
    target = subprocess.Popen([sys.executable, "-c", STATS_TARGET, str(tmp_path / "d.bin"),
                               str(size)], env=env(HIPFILE_STATS_LEVEL="1"), text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        assert target.stdout is not None
        assert target.stdout.readline().strip() == "ready"
        proc = hipfile_cmd("stats", str(target.pid))
    finally:
        _, err = target.communicate(input="", timeout=60)
    assert target.returncode == 0, err
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("\n")
    report = StatsReport.parse(proc.stdout)
    assert report.fastpath_read.bytes + report.fallback_read.bytes == 2 * size
    assert f"Total Fallback Read Size (B): {2 * size}" in proc.stdout


def test_stats_of_a_process_that_is_gone() -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    proc = hipfile_cmd("stats", gone.stdout.strip())
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "hipfile stats: " in proc.stderr and "hipFileStatsCreateContext" in proc.stderr
    assert "Traceback" not in proc.stderr


def stats_with_library(library: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in CLEARED}
    clean.update(HIPFILE_LIBRARY=library, HIPFILE_PLATFORM_QUIET="1")
    return subprocess.run([sys.executable, "-m", "hipfile", "stats", str(os.getpid())],
                          env=clean, capture_output=True, text=True, timeout=120, check=False)


def test_stats_without_statistics_support() -> None:
    # a real C library that exports no hipFileStats* (the HIP runtime itself)
    from hipfile import platforms

    proc = stats_with_library(str(platforms.prefix("emulated") / "lib" / "libamdhip64.so"))
    assert proc.returncode == 2, proc.stderr
    assert "no statistics support" in proc.stderr
    assert "hipFileStatsCreateContext" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_stats_without_a_library(tmp_path: Path) -> None:
    proc = stats_with_library(str(tmp_path / "libhipfile.so"))
    assert proc.returncode == 2, proc.stderr
    assert "libhipfile could not be loaded" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_io_kinds_table() -> None:
    assert set(cli.IO_KINDS) == {"sync", "pread", "pool", "async", "batch", "stream"}
    for kind in cli.IO_KINDS.values():
        assert kind.help and callable(kind.run)


@pytest.fixture
def silent_process() -> Iterator[subprocess.Popen[str]]:
    """A live process that never serves statistics."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        proc.communicate(input="", timeout=60)


def test_stats_timeout_message(silent_process: subprocess.Popen[str]) -> None:
    proc = hipfile_cmd("stats", str(silent_process.pid), "--timeout", "0.5")
    assert proc.returncode == 1, proc.stderr
    assert f"process {silent_process.pid} served no statistics within 0.5 s" in proc.stderr
    assert "--timeout" in proc.stderr
    assert "connect()" not in proc.stderr  # no API wording
    assert "Traceback" not in proc.stderr


def test_stats_ctrl_c_prints_no_traceback(silent_process: subprocess.Popen[str]) -> None:
    # interrupted while waiting for the process to serve statistics
    proc, out, err = interrupted(["stats", str(silent_process.pid)], lambda: True, 1.5)
    assert proc.returncode == 130, err
    assert "hipfile stats: interrupted" in err
    assert "Traceback" not in err
    assert out == ""


def test_bench_stops_at_once_when_interrupted_while_writing_its_file(tmp_path: Path) -> None:
    """Ctrl-C while the benchmark's file is written: the command stops
    within about a second and removes the file; progress was shown."""
    def written() -> int:
        files = list(tmp_path.glob("hipfile-bench-*/bench.bin"))
        return files[0].stat().st_size if files else 0

    proc = subprocess.Popen(
        [sys.executable, "-m", "hipfile", "bench", "--allow-emulated", "--size", "2G",
         "--io", "sync", "--repeat", "1", "--path", str(tmp_path)],
        env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while written() < (600 << 20) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.poll() is None, "the command ended before it was interrupted"
        assert written() < 2 << 30, "the file was written before it could be interrupted"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert "writing the benchmark's file: 512.0 MiB of 2.0 GiB" in err   # progress
    assert took < 3, f"the command took {took:.1f} s to stop"
    assert bench_leftovers(tmp_path) == []


def _fake_distribution(site: Path, name: str, files: dict[str, bytes],
                       write: bool) -> None:
    """An installed distribution's record (dist-info with RECORD hashes) in
    ``site``; its files are written only when ``write``."""
    import base64
    import hashlib

    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("cuda\n")
    rows = []
    for rel, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{rel},sha256={digest},{len(data)}")
        if write:
            target = site / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    rows.append(f"{info.name}/RECORD,,")
    (info / "RECORD").write_text("\n".join(rows) + "\n")


@pytest.mark.parametrize("both", [False, True], ids=["one", "both"])
def test_info_reports_who_writes_cuda_bindings_cufile(tmp_path: Path, both: bool) -> None:
    """hipfile info names the installed packages that write
    cuda/bindings/cufile and, when hip-python-interop and NVIDIA's
    cuda-bindings both do, says CONFLICT and whose copy is on disk.

    The report reads the records of a folder made here only, so what this
    environment has installed (NVIDIA's cuda-bindings, which torch pulls
    in, or hip-python-interop) does not change the answer."""
    import io

    from hipfile.cli._info import _print_info, cuda_bindings_report, info_report

    site = tmp_path / "site"
    site.mkdir()
    _fake_distribution(site, "hip-python-interop",
                       {"cuda/bindings/cufile.py": b"# over hipFile\n",
                        "cuda/bindings/driver.py": b"# hip\n"}, write=True)
    if both:   # installed first, then overwritten by the interop package above
        _fake_distribution(site, "cuda-bindings",
                           {"cuda/bindings/cufile.py": b"# over cuFile\n"}, write=False)
    rep = cuda_bindings_report(path=[str(site)])
    want = ["cuda-bindings", "hip-python-interop"] if both else ["hip-python-interop"]
    assert rep == {"owners": want, "in_place": "hip-python-interop", "conflict": both}
    full = info_report([])
    full["cuda_bindings"] = rep
    out = io.StringIO()
    _print_info(full, out)
    line = next(x for x in out.getvalue().splitlines() if x.startswith("cuda.bindings"))
    if both:
        assert "CONFLICT" in line and "cuda-bindings and hip-python-interop" in line
        assert "hip-python-interop's" in line and "nvidia-cufile.md" in line
    else:
        assert "CONFLICT" not in line and "hip-python-interop" in line


def test_info_reports_cuda_bindings_of_the_environment(tmp_path: Path) -> None:
    """The command reads the records on its own sys.path (a folder added
    with PYTHONPATH is seen), whatever else is installed."""
    site = tmp_path / "site"
    site.mkdir()
    _fake_distribution(site, "hip-python-interop",
                       {"cuda/bindings/cufile.py": b"# over hipFile\n"}, write=True)
    extra = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    rep = json.loads(hipfile_cmd("info", "--json", **extra).stdout)["cuda_bindings"]
    assert "hip-python-interop" in rep["owners"]
    assert rep["conflict"] == (len(rep["owners"]) > 1)


def test_version_option_prints_the_version() -> None:
    proc = hipfile_cmd("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"hipfile {hipfile.__version__}"


def test_info_path_shows_the_mount_options(tmp_path: Path) -> None:
    """The CLI guide promises the file system type and mount options of
    each --path folder."""
    from hipfile.file._mounts import mount_of

    mount = mount_of(tmp_path)
    if mount is None:
        pytest.skip("no mount table here")
    text = hipfile_cmd("info", "--path", str(tmp_path)).stdout
    line = next(x for x in text.splitlines() if x.strip().startswith("mount options"))
    assert line.split(":", 1)[1].strip() == ",".join(mount.options)
    rep = json.loads(hipfile_cmd("info", "--json", "--path", str(tmp_path)).stdout)
    assert rep["paths"][0]["mount_options"] == mount.options
