"""Cross-process statistics: a subprocess does I/O, the test process reads
its statistics through hipfile.StatsContext (hipFileStats* of the active
library: the emulated platform, or AMD's library when ROCM_PATH names its
prefix)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import hipfile
from hipfile import StatsContext, StatsReport

# The target: writes then reads a file through hipFile into device memory,
# says "ready", and exits when its stdin closes.
TARGET = textwrap.dedent("""
    import os, sys, warnings
    warnings.simplefilter("ignore")
    import hipfile
    from hip import hip
    path, size, direct = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    err, dev = hip.hipMalloc(size)
    assert err == 0, err
    with open(path, "wb") as f:
        f.write(bytes(range(256)) * (size // 256))
    flags = os.O_RDWR | (os.O_DIRECT if direct else 0)
    with hipfile.Driver(), hipfile.FileHandle(path, flags) as fh:
        for _ in range(3):
            assert fh.read(hipfile.Buffer(int(dev), size)) == size
        assert fh.write(hipfile.Buffer(int(dev), size // 2)) == size // 2
    hip.hipFree(dev)
    print("ready", flush=True)
    sys.stdin.read()
""")
SIZE = 1 << 16

#: The statistics API (hipFile 0.5.0 and later) must be exported.
needs_stats = pytest.mark.needs("hipFileStatsCreateContext")


class Target:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.pid = proc.pid

    def finish(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def start_target(tmp_path: Path) -> Iterator[object]:
    started: list[Target] = []

    def start(*, level: str | None = "1", direct: bool = False) -> Target:
        env = dict(os.environ)
        env.pop("HIPFILE_STATS_LEVEL", None)
        if level is not None:
            env["HIPFILE_STATS_LEVEL"] = level
        path = tmp_path / f"data{len(started)}.bin"
        proc = subprocess.Popen([sys.executable, "-c", TARGET, str(path), str(SIZE),
                                 "1" if direct else "0"], env=env, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        target = Target(proc)
        started.append(target)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            err = proc.stderr.read() if proc.stderr else ""
            target.finish()
            raise AssertionError(f"target failed: {line}{err}")
        return target

    yield start
    for t in started:
        t.finish()


@needs_stats
def test_monitor_reads_the_counters_of_another_process(start_target) -> None:  # type: ignore[no-untyped-def]
    target = start_target()
    with StatsContext(target.pid) as stats:
        assert stats.connected and stats.pid == target.pid
        assert stats.poll() is False  # still running
        report = stats.report()
        assert report.version == 1 and report.level == 1
        assert report.handle_registrations >= 1
        read = report.fastpath_read.bytes + report.fallback_read.bytes
        written = report.fastpath_write.bytes + report.fallback_write.bytes
        assert (read, written) == (3 * SIZE, SIZE // 2)
        # not O_DIRECT: the fallback, each transfer a fast path rejection
        assert report.fallback_read.bytes == 3 * SIZE
        assert report.fastpath_rejections >= 4
        assert report.fallback_read.latency_us > 0
        assert "Total Fallback Read Size (B): 196608" in report.text
        target.finish()
        assert stats.poll(block=True) is True
        assert stats.poll() is True
        # the counters stay readable after the target exits
        assert stats.report().fallback_read.bytes == 3 * SIZE
    assert stats.closed
    stats.close()


@needs_stats
@pytest.mark.emulated
def test_o_direct_aligned_transfers_take_the_fast_path(start_target) -> None:  # type: ignore[no-untyped-def]
    target = start_target(direct=True)
    with StatsContext(target.pid) as stats:
        report = stats.report()
    assert report.fastpath_read.bytes == 3 * SIZE
    assert report.fastpath_write.bytes == SIZE // 2
    assert report.fallback_bytes == 0 and report.fastpath_rejections == 0
    assert report.fastpath_read.count == 3


@needs_stats
def test_level_zero_records_nothing(start_target) -> None:  # type: ignore[no-untyped-def]
    target = start_target(level="0")
    with StatsContext(target.pid) as stats:
        report = stats.report()
    assert report.level == 0
    assert report.fastpath_bytes == report.fallback_bytes == 0
    assert report.handle_registrations == 0


@needs_stats
def test_unset_level_records_at_level_one(start_target) -> None:  # type: ignore[no-untyped-def]
    target = start_target(level=None)
    with StatsContext(target.pid) as stats:
        report = stats.report()
    assert report.level == 1
    assert report.fallback_read.bytes + report.fastpath_read.bytes == 3 * SIZE


@needs_stats
def test_a_process_without_hipfile_is_not_accessible() -> None:
    # connect waits until the target serves statistics or exits (as AMD's
    # library does); this one never loads hipFile and exits after a while
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"])
    with StatsContext(proc.pid, connect=False) as stats:
        assert not stats.connected
        with pytest.raises(hipfile.StatsReportError, match="connect"):
            stats.report_text()
    reaper = threading.Thread(target=proc.wait)
    reaper.start()
    try:
        with pytest.raises(hipfile.StatsTargetNotAccessibleError) as info:
            StatsContext(proc.pid)
        assert info.value.func == "hipFileStatsConnectToTargetProcess"
    finally:
        reaper.join(timeout=60)


@needs_stats
def test_bad_targets() -> None:
    with pytest.raises(hipfile.StatsInvalidArgumentError):
        StatsContext(-1)
    with pytest.raises(hipfile.StatsInvalidArgumentError):
        StatsContext(0)
    with pytest.raises(TypeError):
        StatsContext("1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        StatsContext(True)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    with pytest.raises(hipfile.StatsTargetNotFoundError) as info:
        StatsContext(int(gone.stdout))
    assert isinstance(info.value, ProcessLookupError)
    assert info.value.status is hipfile.StatsStatus.TARGET_PROCESS_NOT_FOUND
    again = pickle.loads(pickle.dumps(info.value))
    assert type(again) is type(info.value) and str(again) == str(info.value)


@needs_stats
def test_closed_context_refuses_calls() -> None:
    stats = StatsContext(os.getpid(), connect=False)
    stats.close()
    stats.close()
    assert stats.closed
    for call in (stats.connect, stats.poll, stats.report_text, stats.report):
        with pytest.raises(hipfile.ClosedError, match="closed") as info:
            call()
        assert isinstance(info.value, ValueError)      # as before ClosedError


def test_stats_errors_are_hipfile_exceptions() -> None:
    """One hierarchy: a statistics status is a HipFileException (hipfile_err
    0, the status in ``status``), still the builtin its status maps to."""
    from hipfile.stats import StatsInvalidArgumentError, StatsStatus

    e = StatsInvalidArgumentError(int(StatsStatus.INVALID_ARGUMENT), "hipFileStatsPoll", "x")
    assert isinstance(e, hipfile.HipFileException) and isinstance(e, ValueError)
    assert e.hipfile_err == 0 and e.status == StatsStatus.INVALID_ARGUMENT
    assert e.func == "hipFileStatsPoll" and str(e).startswith("hipFileStatsPoll: ")


@needs_stats
def test_unclosed_context_warns() -> None:
    stats = StatsContext(os.getpid(), connect=False)
    with pytest.warns(ResourceWarning, match="StatsContext"):
        stats.__del__()
    assert stats.closed


def test_report_parser_refuses_other_text() -> None:
    with pytest.raises(ValueError, match="not a hipFile statistics report"):
        StatsReport.parse("hello\n")
    r = StatsReport.parse("AIS-STATS Version: 1\nHipFile Stats Level: 2\n"
                          "Total Fastpath Read Size (B): 10\n"
                          "Average Fastpath Read Bandwidth (GiB/s): 0.5\n")
    assert (r.level, r.fastpath_read.bytes, r.fastpath_read.bandwidth_gib_s) == (2, 10, 0.5)
    assert r.fastpath_read.count is None and r.fallback_read.bytes == 0


def test_library_without_the_statistics_api(tmp_path: Path) -> None:
    # A real C library that exports no hipFileStats* (the HIP runtime itself).
    from hipfile import platforms

    code = textwrap.dedent("""
        import warnings
        warnings.simplefilter("ignore")
        import hipfile
        try:
            hipfile.StatsContext(1)
        except hipfile.HipFileSymbolNotFound as e:
            print("missing:", e)
    """)
    env = dict(os.environ, HIPFILE_LIBRARY=str(platforms.prefix("emulated") / "lib" /
                                               "libamdhip64.so"))
    env.pop("HIPFILE_PLATFORM", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "missing: hipFileStatsCreateContext is not exported" in proc.stdout


@pytest.fixture
def quiet_process() -> Iterator[subprocess.Popen[bytes]]:
    """A process that never loads hipFile; exits when its stdin closes."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)
    yield proc
    if proc.stdin is not None and not proc.stdin.closed:
        proc.stdin.close()
    proc.wait(timeout=60)


def _end(proc: subprocess.Popen[bytes]) -> threading.Thread:
    """Let ``proc`` exit and reap it (a zombie still counts as running)."""
    assert proc.stdin is not None
    proc.stdin.close()
    reaper = threading.Thread(target=proc.wait)
    reaper.start()
    return reaper


@needs_stats
def test_connect_times_out_and_the_attempt_goes_on(quiet_process) -> None:  # type: ignore[no-untyped-def]
    stats = StatsContext(quiet_process.pid, connect=False)
    try:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match="goes on"):
            stats.connect(timeout=0.2)
        assert time.monotonic() - t0 < 2
        assert not stats.connected
        assert stats.poll() is False
        assert stats.poll(block=True, timeout=0.1) is False
        with pytest.raises(TimeoutError, match="still runs"):
            stats.wait(timeout=0.1)
        with pytest.raises(ValueError, match=">= 0"):
            stats.connect(timeout=-1)
        reaper = _end(quiet_process)
        # the same attempt ends when the target exits without statistics
        with pytest.raises(hipfile.StatsTargetNotAccessibleError):
            stats.connect(timeout=60)
        stats.wait(timeout=60)
        reaper.join(timeout=60)
    finally:
        stats.close()


@needs_stats
def test_connect_is_interruptible(quiet_process) -> None:  # type: ignore[no-untyped-def]
    import signal

    with StatsContext(quiet_process.pid, connect=False) as stats:
        timer = threading.Timer(0.2, signal.raise_signal, args=(signal.SIGINT,))
        t0 = time.monotonic()
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                stats.connect()
        finally:
            timer.cancel()
            timer.join()
        assert time.monotonic() - t0 < 1.5
        reaper = _end(quiet_process)
        with pytest.raises(hipfile.StatsTargetNotAccessibleError):
            stats.connect(timeout=60)
        reaper.join(timeout=60)


@needs_stats
def test_cli_stats_timeout(quiet_process) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.run([sys.executable, "-m", "hipfile", "stats", str(quiet_process.pid),
                           "--timeout", "0.3"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "served no statistics within 0.3 s" in proc.stderr
